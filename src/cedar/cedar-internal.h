/* SPDX-License-Identifier: Apache-2.0 */
/* Internal interfaces of the Cedar engine (src/cedar/). Nothing here is
 * public: the public API is include/shinken/cedar.h. Internal non-static
 * symbols are shk__*.
 *
 * Shared by the engine's parts:
 *   - arena.c                bump allocator
 *   - lexer.c, parser.c      policy text -> shk__policy (AST below)
 *   - schema*.c              .cedarschema text and JSON -> shk__schema (resolved)
 *   - value.c, ext.c         runtime values and the four extension types
 *   - entities.c             entity and context JSON -> values (with or without a schema)
 *   - eval.c, authorize.c    evaluator and authorizer
 *   - validate.c             the strict type checker
 *   - est.c, format.c        policy JSON (EST) and the formatter
 *
 * Ownership: every structure below lives in the arena of the object that
 * made it (policy set, schema, entity store); nothing in it is freed alone.
 *
 * Out of memory: the engine never prints or exits. Each public function
 * that allocates runs its work under shk__oom_guard(); an allocation that
 * fails inside (an arena's, or one of shk__umalloc and friends) unwinds to
 * the innermost guard, which returns -ENOMEM. Code that holds something an
 * unwind would leak (a malloc'd buffer, a jansson tree) keeps it where the
 * function around the guard frees it, or runs under a guard of its own. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

/* ---------------------------------------------------------------- arena */

/* Runs fn(ctx) and returns what it returns, or -ENOMEM (with err, when
 * given, saying "out of memory") when an allocation inside it failed and
 * unwound. Guards nest; an unwind reaches the innermost. fn's own locals
 * are gone after an unwind: what must be freed lives in ctx. */
int shk__oom_guard(int (*fn)(void *ctx), void *ctx, shk_error *err);
/* Unwinds to the innermost guard, as a failed allocation does: for a
 * failure of a library that returns NULL (jansson). */
__attribute__((noreturn)) void shk__oom_unwind(void);
/* malloc, calloc and reallocarray that unwind instead of returning NULL
 * (on failure, urealloc's p is left as it was). Only under a guard. */
void *shk__umalloc(size_t n);
void *shk__ucalloc(size_t n, size_t m);
void *shk__urealloc(void *p, size_t n, size_t m);

typedef struct shk__arena shk__arena;
/* NULL when out of memory (an arena is made before its guard). */
shk__arena *shk__arena_new(void);
void shk__arena_free(shk__arena *a);
/* Forget everything allocated, keep the first chunk for reuse. */
void shk__arena_reset(shk__arena *a);
/* 16-byte aligned; never NULL: only under a guard, to which out of memory
 * unwinds. */
void *shk__arena_alloc(shk__arena *a, size_t n);
void *shk__arena_calloc(shk__arena *a, size_t n);
char *shk__arena_strndup(shk__arena *a, const char *s, size_t n);

/* ---------------------------------------------------------------- strings */

/* A byte string with its length: Cedar strings may hold NUL (the \0 escape). */
typedef struct shk__str {
  const char *p;
  size_t n;
} shk__str;

#define SHK__STR_LIT(s) ((shk__str){ (s), sizeof(s) - 1 })
static inline bool shk__str_eq(shk__str a, shk__str b)
{
  return a.n == b.n && (a.n == 0 || __builtin_memcmp(a.p, b.p, a.n) == 0);
}
int shk__str_cmp(shk__str a, shk__str b); /* bytewise, shorter first on a tie */
int shk__hex_value(unsigned char c);      /* 0-15, or -1 for a non-hex digit */

/* An entity reference. `type` is the fully qualified type name with "::"
 * separators and no spaces ("NS::Sub::User"); `id` is the unescaped id. */
typedef struct shk__uid {
  shk__str type;
  shk__str id;
} shk__uid;

static inline bool shk__uid_eq(shk__uid a, shk__uid b)
{
  return shk__str_eq(a.id, b.id) && shk__str_eq(a.type, b.type);
}

/* Where something is in its source text, 1-based; 0 when unknown. */
typedef struct shk__loc {
  uint32_t line, col;
} shk__loc;

/* ---------------------------------------------------------------- policy AST */

typedef enum shk__var {
  SHK__VAR_PRINCIPAL,
  SHK__VAR_ACTION,
  SHK__VAR_RESOURCE,
  SHK__VAR_CONTEXT,
} shk__var;

typedef enum shk__slot {
  SHK__SLOT_PRINCIPAL, /* ?principal */
  SHK__SLOT_RESOURCE,  /* ?resource */
} shk__slot;

/* Built-in methods and extension functions. A method is called as
 * receiver.name(args) and its receiver is args[0]; an extension function is
 * called as name(args). The parser rejects unknown names and calls in the
 * wrong style, as the reference does. */
typedef enum shk__fn {
  /* methods on sets */
  SHK__FN_CONTAINS,
  SHK__FN_CONTAINS_ALL,
  SHK__FN_CONTAINS_ANY,
  SHK__FN_IS_EMPTY,
  /* methods on entities (tags) */
  SHK__FN_GET_TAG,
  SHK__FN_HAS_TAG,
  /* extension constructors (function style) */
  SHK__FN_IP,
  SHK__FN_DECIMAL,
  SHK__FN_DATETIME,
  SHK__FN_DURATION,
  /* ip methods */
  SHK__FN_IS_IPV4,
  SHK__FN_IS_IPV6,
  SHK__FN_IS_LOOPBACK,
  SHK__FN_IS_MULTICAST,
  SHK__FN_IS_IN_RANGE,
  /* decimal methods */
  SHK__FN_LESS_THAN,
  SHK__FN_LESS_THAN_OR_EQUAL,
  SHK__FN_GREATER_THAN,
  SHK__FN_GREATER_THAN_OR_EQUAL,
  /* datetime and duration methods */
  SHK__FN_OFFSET,
  SHK__FN_DURATION_SINCE,
  SHK__FN_TO_DATE,
  SHK__FN_TO_TIME,
  SHK__FN_TO_DAYS,
  SHK__FN_TO_HOURS,
  SHK__FN_TO_MINUTES,
  SHK__FN_TO_SECONDS,
  SHK__FN_TO_MILLISECONDS,
  SHK__FN__COUNT
} shk__fn;

/* Name as written in policy text ("containsAll", "ip", ...). */
const char *shk__fn_name(shk__fn fn);
/* True for function-style calls (ip, decimal, datetime, duration). */
bool shk__fn_is_constructor(shk__fn fn);

typedef enum shk__expr_kind {
  SHK__E_BOOL,     /* bval */
  SHK__E_LONG,     /* lval */
  SHK__E_STRING,   /* s (unescaped) */
  SHK__E_ENTITY,   /* uid */
  SHK__E_VAR,      /* var */
  SHK__E_SLOT,     /* slot (only in templates, only in the scope) */
  SHK__E_NOT,      /* !a */
  SHK__E_NEG,      /* -a (never applied to a literal: the parser folds -LIT) */
  SHK__E_AND,      /* a && b */
  SHK__E_OR,       /* a || b */
  SHK__E_EQ,
  SHK__E_NE,
  SHK__E_LT,
  SHK__E_LE,
  SHK__E_GT,
  SHK__E_GE,
  SHK__E_ADD,
  SHK__E_SUB,
  SHK__E_MUL,
  SHK__E_IN,       /* a in b */
  SHK__E_IF,       /* if a then b else c */
  SHK__E_HAS,      /* a has attr (the parser desugars a has x.y.z into a chain of &&) */
  SHK__E_GETATTR,  /* a.attr and a["attr"] */
  SHK__E_LIKE,     /* a like pattern */
  SHK__E_IS,       /* a is type (the parser desugars a is T in b into (a is T) && (a in b)) */
  SHK__E_SET,      /* [items] */
  SHK__E_RECORD,   /* {keys: items}, keys unique (duplicates are a parse error) */
  SHK__E_CALL,     /* fn(items) and items[0].fn(items[1..]) */
} shk__expr_kind;

/* One element of a `like` pattern: a literal byte or the wildcard `*`.
 * Matching is bytewise on UTF-8, which is the same as matching characters
 * because literal runs are whole characters on both sides. */
typedef struct shk__pat {
  bool wildcard;
  unsigned char byte;
} shk__pat;

typedef struct shk__expr shk__expr;
struct shk__expr {
  shk__expr_kind kind;
  shk__loc loc;
  union {
    bool bval;
    int64_t lval;
    shk__str s;          /* STRING; attribute name for HAS and GETATTR; type name for IS */
    shk__uid uid;        /* ENTITY */
    shk__var var;        /* VAR */
    shk__slot slot;      /* SLOT */
  };
  shk__expr *a, *b, *c;  /* operands: NOT/NEG/HAS/GETATTR/LIKE/IS use a; binary ops a,b; IF a,b,c */
  shk__expr **items;     /* SET elements, RECORD values, CALL arguments */
  shk__str *keys;        /* RECORD keys, parallel to items */
  size_t n_items;
  shk__fn fn;            /* CALL */
  shk__pat *pat;         /* LIKE */
  size_t n_pat;
  /* Front end: the height of this subtree (1 for a leaf). The parser refuses
   * trees higher than SHK__EXPR_MAX_HEIGHT, so a recursive walk of a parsed
   * expression never goes deeper than that. */
  uint32_t height;
};
#define SHK__EXPR_MAX_HEIGHT 1000

typedef enum shk__scope_kind {
  SHK__SC_ANY,     /* principal */
  SHK__SC_EQ,      /* principal == E */
  SHK__SC_IN,      /* principal in E */
  SHK__SC_IS,      /* principal is T */
  SHK__SC_IS_IN,   /* principal is T in E */
  SHK__SC_IN_LIST, /* action in [E, ...] (action only) */
} shk__scope_kind;

typedef struct shk__scope {
  shk__scope_kind kind;
  shk__str is_type;   /* IS, IS_IN */
  bool slot;          /* EQ, IN, IS_IN: the entity is the template slot of this variable */
  shk__uid uid;       /* EQ, IN, IS_IN when !slot */
  shk__uid *uids;     /* IN_LIST */
  size_t n_uids;
  shk__loc loc;
} shk__scope;

typedef struct shk__annotation {
  shk__str key;
  shk__str value;     /* "" when written without a value (@key) */
  shk__loc loc;
} shk__annotation;

typedef struct shk__condition {
  bool is_when;       /* when { } or unless { } */
  shk__expr *body;
  shk__loc loc;
} shk__condition;

typedef struct shk__policy shk__policy;
struct shk__policy {
  shk__str id;                 /* "policy0", "policy1", ... in file order, or the link id */
  bool is_forbid;
  bool is_template;            /* has ?principal or ?resource in its scope */
  shk__annotation *annots;
  size_t n_annots;
  shk__scope principal, action, resource;
  shk__condition *conds;
  size_t n_conds;
  shk__loc loc;
  /* A linked policy: a copy of its template with the slots filled in the
   * scope (slot == false and uid set); template_id names the template. */
  bool is_link;
  shk__str template_id;
};

/* ---------------------------------------------------------------- schema (resolved) */

typedef enum shk__type_kind {
  SHK__T_BOOL,
  SHK__T_LONG,
  SHK__T_STRING,
  SHK__T_SET,
  SHK__T_RECORD,
  SHK__T_ENTITY,
  SHK__T_EXT,
} shk__type_kind;

typedef struct shk__type shk__type;
typedef struct shk__attr_type {
  shk__str name;
  shk__type *type;
  bool required;
} shk__attr_type;

struct shk__type {
  shk__type_kind kind;
  shk__str name;           /* ENTITY: fully qualified type; EXT: "ipaddr", "decimal", "datetime" or "duration" */
  shk__type *elem;         /* SET */
  shk__attr_type *attrs;   /* RECORD, sorted by name (shk__str_cmp) */
  size_t n_attrs;
};

typedef struct shk__entity_type {
  shk__str name;           /* fully qualified */
  shk__str *member_of;     /* fully qualified parent types */
  size_t n_member_of;
  shk__type *shape;        /* a RECORD type (empty record when none is declared) */
  shk__type *tags;         /* NULL when the type declares no tags */
  bool is_enum;
  shk__str *enum_ids;
  size_t n_enum_ids;
  shk__loc loc;
} shk__entity_type;

typedef struct shk__action {
  shk__uid uid;            /* type is "NS::Action" (or "Action" in the empty namespace) */
  shk__uid *member_of;
  size_t n_member_of;
  bool has_applies_to;     /* false: the action applies to no request */
  shk__str *principals;    /* fully qualified entity types */
  size_t n_principals;
  shk__str *resources;
  size_t n_resources;
  shk__type *context;      /* a RECORD type */
  shk__loc loc;
} shk__action;

typedef struct shk__schema shk__schema;
struct shk__schema {
  shk__arena *arena;
  shk__entity_type *etypes;
  size_t n_etypes;
  shk__action *actions;
  size_t n_actions;
  void *priv;              /* the schema module's own data (lookup tables, source form) */
};

const shk__entity_type *shk__schema_entity_type(const shk__schema *s, shk__str name);
const shk__action *shk__schema_action(const shk__schema *s, shk__uid uid);
/* False only when U's type is an enumerated entity type of the schema and
 * U's id is not one of its members. */
bool shk__schema_enum_member(const shk__schema *s, const shk__uid *u);
/* True when `name` is an action entity type of the schema ("NS::Action"). */
bool shk__schema_is_action_type(const shk__schema *s, shk__str name);

/* The public schema object is the resolved schema itself. */
struct shk_cedar_schema {
  shk__schema s;
};

/* ---------------------------------------------------------------- front end (lexer.c, parser.c, schema*.c) */

#include "shinken/cedar.h"

/* Parses a policy file into `*out` (an array of *n policies and templates in
 * file order, with ids policy0, policy1, ...), allocated in `a`. On a syntax
 * error returns -EINVAL and fills err with the line, column and message. */
int shk__parse_policies(shk__arena *a, const char *text, size_t len,
                        shk__policy ***out, size_t *n, shk_error *err);
/* Parses one entity reference in policy syntax: NS::Type::"id". */
int shk__parse_entity_ref(shk__arena *a, const char *text, size_t len,
                          shk__uid *out, shk_error *err);
/* Parses a name (Type or NS::Type), as found in JSON {"type": ...}; checks
 * it is a valid (possibly namespaced) identifier path. */
bool shk__is_valid_name(const char *text, size_t len);
/* Fills a template's slots: returns a new policy in `a` with the scope
 * entities set. -EINVAL with a message when a slot is missing or extra. */
int shk__link_template(shk__arena *a, const shk__policy *tmpl, shk__str new_id,
                       const shk__uid *principal, const shk__uid *resource,
                       shk__policy **out, shk_error *err);

/* policyset.c: the policies, templates and links of a set, in order. */
shk__policy *const *shk__policy_set_policies(const shk_cedar_policy_set *ps, size_t *n);

/* schema.c: shk_cedar_schema_parse() and shk_cedar_schema_free() are the
 * entry points; these are the lookups on the resolved form (see above). */

/* ---------------------------------------------------------------- extensions (ext.c) */

/* An ipaddr value: an address with a prefix length (32 or 128 when none
 * was written). IPv4 addresses use addr[0..3]. */
typedef struct shk__ipaddr {
  uint8_t addr[16];
  uint8_t prefix;
  bool v6;
} shk__ipaddr;

/* Each parser returns 0, or -EINVAL when the string is not a valid literal
 * of that type, exactly as the reference decides. */
int shk__ipaddr_parse(shk__str s, shk__ipaddr *out);
int shk__decimal_parse(shk__str s, int64_t *out);      /* value times 10^4 */
int shk__datetime_parse(shk__str s, int64_t *out_ms);  /* ms since the epoch, UTC */
int shk__duration_parse(shk__str s, int64_t *out_ms);

bool shk__ipaddr_eq(const shk__ipaddr *a, const shk__ipaddr *b);
bool shk__ipaddr_is_loopback(const shk__ipaddr *a);
bool shk__ipaddr_is_multicast(const shk__ipaddr *a);
bool shk__ipaddr_in_range(const shk__ipaddr *a, const shk__ipaddr *range);

/* Datetime arithmetic: -ERANGE on overflow, as the reference errors. */
int shk__datetime_offset(int64_t dt, int64_t dur, int64_t *out);
int shk__datetime_duration_since(int64_t dt, int64_t other, int64_t *out);
int shk__datetime_to_date(int64_t dt, int64_t *out);
int shk__datetime_to_time(int64_t dt, int64_t *out);

/* Canonical text of each value as the reference prints it; return the
 * length written (snprintf rules). */
int shk__ipaddr_format(const shk__ipaddr *a, char *buf, size_t n);
int shk__decimal_format(int64_t d, char *buf, size_t n);
