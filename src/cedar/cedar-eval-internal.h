/* SPDX-License-Identifier: Apache-2.0 */
/* Runtime side of the Cedar engine: values, the entity store, requests and
 * the evaluator (value.c, entities.c, request.c, eval.c, authorize.c,
 * policyset.c). Internal to src/cedar/.
 *
 * Values never own memory: they point into the arena of whatever made them
 * (the entity store, the request, the policy set or the per-request scratch
 * arena), so reading an attribute out of the store copies nothing. */
#pragma once

#include <jansson.h>

#include "cedar/cedar-internal.h"
#include "common/common.h"

/* ---------------------------------------------------------------- values */

typedef enum shk__vkind {
  SHK__V_BOOL,
  SHK__V_LONG,
  SHK__V_STRING,
  SHK__V_ENTITY,
  SHK__V_SET,
  SHK__V_RECORD,
  SHK__V_IP,
  SHK__V_DECIMAL,
  SHK__V_DATETIME,
  SHK__V_DURATION,
} shk__vkind;

typedef struct shk__value shk__value;
typedef struct shk__set shk__set;
typedef struct shk__record shk__record;

struct shk__value {
  shk__vkind kind;
  union {
    bool b;
    int64_t l;               /* LONG; DECIMAL (times 10^4); DATETIME and DURATION (ms) */
    shk__str s;              /* STRING */
    const shk__uid *uid;     /* ENTITY */
    const shk__set *set;     /* SET */
    const shk__record *rec;  /* RECORD */
    const shk__ipaddr *ip;   /* IP */
  };
};

/* Sets are kept sorted by shk__value_cmp without duplicates, so equality is
 * a linear walk and membership a binary search. */
struct shk__set {
  size_t n;
  const shk__value *items;
};

/* Records are sorted by key (shk__str_cmp), keys unique. */
struct shk__record {
  size_t n;
  const shk__str *keys;
  const shk__value *vals;
};

extern const shk__record shk__empty_record;

/* A total order over values, consistent with Cedar's equality: 0 exactly
 * when the two values are equal. Different kinds are never equal. */
int shk__value_cmp(const shk__value *a, const shk__value *b);
static inline bool shk__value_eq(const shk__value *a, const shk__value *b)
{
  return shk__value_cmp(a, b) == 0;
}
/* Builds a set in `a` from items, which it sorts and deduplicates in
 * place. */
const shk__set *shk__set_make(shk__arena *a, shk__value *items, size_t n);
/* Looks `key` up; NULL when absent. */
const shk__value *shk__record_get(const shk__record *r, shk__str key);
bool shk__set_contains(const shk__set *s, const shk__value *v);
/* "long", "string", "set", ... as messages name a value's type. */
const char *shk__vkind_name(shk__vkind k);

/* Appends to a malloc'd vector, growing it as needed (under a guard: out of
 * memory unwinds, and leaves the vector as it was). */
void shk__upush_u32(uint32_t **v, uint32_t *n, uint32_t *cap, uint32_t x);

/* ---------------------------------------------------------------- errors */

typedef enum shk__err_kind {
  SHK__ERR_NONE,
  SHK__ERR_ENTITY,     /* entity does not exist */
  SHK__ERR_ATTR,       /* attribute does not exist (entity or record) */
  SHK__ERR_TAG,        /* tag does not exist */
  SHK__ERR_TYPE,       /* wrong type of operand */
  SHK__ERR_OVERFLOW,   /* integer overflow */
  SHK__ERR_EXT,        /* extension function error (bad literal, arity, range) */
} shk__err_kind;

typedef struct shk__eval_error {
  shk__err_kind kind;
  char msg[256];
} shk__eval_error;

/* Records an error and returns -1, so callers can `return shk__fail(...)`. */
SHK_PRINTF(3, 4) int shk__fail(shk__eval_error *e, shk__err_kind kind, const char *fmt, ...);

/* Applies an extension function (constructors and ip, decimal, datetime and
 * duration methods) to already evaluated arguments. Shared by the evaluator
 * and by the JSON __extn escape. Returns 0 or -1 with `e` filled. */
int shk__call_ext(shk__fn fn, const shk__value *args, size_t n, shk__arena *a,
                  shk__value *out, shk__eval_error *e);
/* The extension function named `name` in JSON (__extn "fn"), or -1. */
int shk__ext_fn_lookup(shk__str name);
/* An extension function's signature: the kinds of its N_ARGS arguments and
 * of its result. The evaluator and the validator both read this one table,
 * so what type-checks and what runs cannot drift apart. */
typedef struct shk__ext_sig {
  shk__vkind args[2];
  size_t n_args;
  shk__vkind ret;
} shk__ext_sig;
/* FN's signature, or NULL when FN is not an extension function. */
const shk__ext_sig *shk__ext_signature(shk__fn fn);
/* Whether S is a valid literal for the constructor FN (ip, decimal,
 * datetime or duration). */
bool shk__ext_literal_ok(shk__fn fn, shk__str s);

/* ---------------------------------------------------------------- entity store */

typedef struct shk__entity {
  shk__uid uid;
  uint64_t hash;
  bool present;          /* false: only named as a parent of another entity */
  shk__record attrs;
  shk__record tags;
  /* Indices of all ancestors, sorted; or, when anc_direct, of the parents
   * only, whose own `anc` then hold the rest. An entity that is no other's
   * parent keeps only its parents, so that a store of many leaves under a
   * deep hierarchy does not hold the hierarchy once per leaf. */
  const uint32_t *anc;
  uint32_t n_anc;
  bool anc_direct;
} shk__entity;

struct shk_cedar_entities {
  shk__arena *arena;
  shk__entity *ents;
  size_t n;
  uint32_t *table;       /* open addressing: index + 1, 0 empty */
  size_t mask;
};

uint64_t shk__uid_hash(const shk__uid *u);
/* The entity with this uid (h is its shk__uid_hash), or NULL when the
 * store does not hold it. */
const shk__entity *shk__entities_find(const shk_cedar_entities *es, const shk__uid *u, uint64_t h);
/* Cedar's `a in b` for entity uids: equal, or b is an ancestor of a. `ea`
 * is a's entity (shk__entities_find), NULL when the store lacks it. */
bool shk__entities_in(const shk_cedar_entities *es, const shk__entity *ea, const shk__uid *a,
                      uint64_t ha, const shk__uid *b, uint64_t hb);

/* Parses JSON text as jansson does, except that NUL may appear in object
 * keys; NULL with err filled on a syntax error. Under a guard. */
json_t *shk__json_load(const char *text, size_t len, const char *what, shk_error *err);
/* A string of a tree from shk__json_load, decoded, copied into `a`. */
shk__str shk__json_str(shk__arena *a, json_t *j);
/* The same for the N bytes at P (an object key of such a tree). */
shk__str shk__json_decode(shk__arena *a, const char *p, size_t n);
/* Converts JSON to a value, read as `type` says when it is not NULL
 * (implicit entity and extension forms, required and unexpected
 * attributes, sets and records where they belong). With `schema` the value
 * must also have the type, as entity data must; without it, leaves are
 * taken as written, as the reference reads a context before validating the
 * request. `what` names the place for messages. Returns 0 or -EINVAL with
 * err filled. */
int shk__json_to_value(shk__arena *a, json_t *j, const shk__schema *schema, const shk__type *type,
                       const char *what, shk__value *out, shk_error *err);
/* Reads an entity reference {"type","id"} or {"__entity": {...}}. */
int shk__json_to_uid(shk__arena *a, json_t *j, shk__uid *out, const char *what,
                     shk_error *err);
/* Checks that a value has the schema type (used for request validation). */
bool shk__value_has_type(const shk__schema *schema, const shk__value *v, const shk__type *t);

/* ---------------------------------------------------------------- requests */

struct shk_cedar_request {
  shk__arena *arena;
  shk__uid principal, action, resource;
  uint64_t hash[3];      /* shk__uid_hash of each, by shk__var */
  shk__value context;    /* a RECORD */
};

/* ---------------------------------------------------------------- evaluation */

/* Extension values built from literals (ip("10.0.0.0/8")), computed once
 * per policy set rather than on every decision: an open-addressing table
 * keyed by the call's node. */
typedef struct shk__fold {
  const shk__expr *call;
  shk__value value;
} shk__fold;

typedef struct shk__folds {
  shk__fold *slots;
  size_t mask, n;
} shk__folds;

/* The folded value of a constructor call node, or NULL. */
const shk__value *shk__folded(const shk__folds *f, const shk__expr *call);

typedef struct shk__eval {
  const shk_cedar_entities *es;
  const shk__folds *folds; /* may be NULL */
  shk__value vars[4];    /* indexed by shk__var */
  uint64_t var_hash[3];  /* of the principal, action and resource uids */
  const shk__entity *var_ent[3]; /* their entities, NULL when absent */
  shk__arena *scratch;
  shk__eval_error err;
} shk__eval;

/* The shk__uid_hash of each entity in a policy's scope, computed once. */
typedef struct shk__scope_hash {
  uint64_t principal, action, resource;
  uint64_t *action_list; /* parallel to the action scope's uids */
} shk__scope_hash;

/* Does the request satisfy the policy (scope and every condition)? Returns
 * 1, 0, or -1 on an evaluation error (ev->err). */
int shk__eval_policy(shk__eval *ev, const shk__policy *p, const shk__scope_hash *h);

/* ---------------------------------------------------------------- policy sets */

/* Policies are indexed by one entity of their scope (principal, else
 * resource, else action), so that a request only evaluates the policies
 * whose anchor is its own principal, action or resource or one of their
 * ancestors, plus the few that constrain no entity at all. An anchor is
 * keyed by the hash of (var, uid) and sits in the table itself, so a lookup
 * touches one slot and no id strings. */
typedef struct shk__anchor {
  uint64_t key;
  uint32_t *pols;        /* policy indices, ascending; NULL: empty slot */
  uint32_t n, cap;
} shk__anchor;

struct shk_cedar_policy_set {
  shk__arena *arena;
  shk__policy **pols;    /* policies, templates and links, in order */
  const char **ids;      /* their ids, NUL-terminated, parallel to pols */
  shk__scope_hash *hashes; /* parallel to pols */
  uint32_t *id_table;    /* pols by id: index + 1, 0 empty */
  size_t id_mask;
  shk__folds folds;
  size_t n, cap;
  shk__anchor *anchors;  /* open addressing by key */
  size_t n_anchors, mask;
  uint32_t *always;      /* policies with no entity in their scope */
  size_t n_always, cap_always;
};

/* The policies that may apply to a request, as indices into the set. */
typedef struct shk__cands {
  uint32_t *v;
  uint32_t n, cap;
} shk__cands;

/* Fills `c` (its vector reused between calls) with the policies that may
 * apply to the request, in policy order, each once, so that responses list
 * reasons and errors in the order of the set. Under a guard. */
void shk__policy_set_candidates(const shk_cedar_policy_set *ps, const shk__eval *ev,
                                shk__cands *c);

/* Fills err (when given) with one message and no position; returns
 * -EINVAL. */
#define shk__cedar_fail(err, ...) shk__error_set((err), -EINVAL, __VA_ARGS__)

/* The longest excerpt of a user string that messages quote: for "%.*s". */
#define Q(s) (int)((s).n > 80 ? 80 : (s).n), (s).p
