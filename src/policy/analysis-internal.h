/* SPDX-License-Identifier: Apache-2.0 */
/* Internals of the analyzer (src/policy/analysis*.c): Cedar policies encoded
 * as SMT-LIB formulas, decided by cvc5 running as a child process.
 *
 *   analysis-util.c    a memory pool that fails softly, text buffers, SMT-LIB
 *                      string literals, S-expressions
 *   analysis-smt.c     the solver process: spawn, talk over a socket, time
 *                      limits, replies
 *   analysis-encode.c  the encoder: schema types as SMT sorts, one request
 *                      environment as a symbolic request and entity store,
 *                      expressions, policies and policy sets as terms
 *   analysis-model.c   a model read back into a concrete request and entity
 *                      store (JSON), and concrete values encoded as terms
 *   analysis.c         the queries, the engine's check of every
 *                      counterexample, the public entry points
 *   analysis-cover.c   the grant-time question: does the set permit every
 *                      concrete element a pattern covers?
 *
 * Nothing here is public; the entry points are at the end of
 * include/shinken/policy.h. */
#pragma once

#include <jansson.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cedar/cedar-eval-internal.h"
#include "cedar/cedar-internal.h"
#include "common/common.h"
#include "shinken/policy.h"

/* ---------------------------------------------------------------- memory */

/* A pool of zeroed allocations freed together. Allocation returns NULL on
 * out-of-memory; callers that cannot continue unwind (the encoder jumps to
 * its entry point) instead of exiting. */
typedef struct shk__pool shk__pool;
shk__pool *shk__pool_new(void);
void shk__pool_free(shk__pool *p);
void *shk__pool_alloc(shk__pool *p, size_t n);
char *shk__pool_strndup(shk__pool *p, const char *s, size_t n);

/* A growable NUL-terminated text. After an allocation failure `oom` is set
 * and further appends do nothing, so a builder checks once at the end. */
typedef struct shk__text {
  char *p;
  size_t n, cap;
  bool oom;
} shk__text;

void shk__text_put(shk__text *t, const char *s, size_t n);
void shk__text_puts(shk__text *t, const char *s);
SHK_PRINTF(2, 3) void shk__text_printf(shk__text *t, const char *fmt, ...);
void shk__text_free(shk__text *t);
/* Appends S as an SMT-LIB string literal. Every character outside
 * printable ASCII (and the backslash) is written \u{X}, so that the literal
 * means exactly S. Returns false when S holds a code point the solver's
 * alphabet lacks (above U+2FFFF) or is not UTF-8; nothing is appended then. */
bool shk__text_smt_string(shk__text *t, shk__str s);

/* ---------------------------------------------------------------- S-expressions */

typedef enum shk__sx_kind {
  SHK__SX_ATOM,   /* a symbol, a keyword or a numeral, as written */
  SHK__SX_STRING, /* a string literal, decoded to UTF-8 */
  SHK__SX_LIST,
} shk__sx_kind;

typedef struct shk__sx shk__sx;
struct shk__sx {
  shk__sx_kind kind;
  const char *s; /* ATOM, STRING */
  size_t n;
  shk__sx **items; /* LIST */
  size_t n_items;
};

/* Parses one S-expression from TEXT[*pos..n) into the pool. Returns 1 with
 * *out set, 0 when the text ends before the expression does (more input is
 * needed; *pos is unchanged), or -EINVAL on malformed input (or -ENOMEM). */
int shk__sx_parse(shk__pool *p, const char *text, size_t n, size_t *pos, shk__sx **out);
bool shk__sx_is(const shk__sx *x, const char *atom);

/* ---------------------------------------------------------------- the solver process */

typedef struct shk__smt shk__smt;

/* Starts the solver at PATH (a name is looked up on $PATH) with a time
 * limit per check. -ENOENT when it is not installed, -EIO when it does not
 * start or does not answer as cvc5 does. */
int shk__smt_start(const char *path, unsigned timeout_ms, shk__smt **out, shk_error *err);
void shk__smt_stop(shk__smt *s);
/* The solver's version line ("cvc5 1.0.3"). */
const char *shk__smt_version(const shk__smt *s);
/* Sends commands that answer nothing (declarations, assertions, push,
 * pop). An error the solver reports is seen at the next check. */
int shk__smt_send(shk__smt *s, const char *text, size_t n, shk_error *err);
/* (check-sat): *sat is true for sat, false for unsat. A timeout is
 * -ETIMEDOUT, an unknown for another reason or a solver error -EIO; after
 * any failure the process is gone and every later call fails. */
int shk__smt_check(shk__smt *s, bool *sat, shk_error *err);
/* (get-value (TERMS)) after a sat check: the reply's values, in order. */
int shk__smt_get_value(shk__smt *s, shk__pool *p, const char *terms, size_t n_terms,
                       shk__sx ***values, shk_error *err);
/* Whether the process is still usable. */
bool shk__smt_alive(const shk__smt *s);

/* ---------------------------------------------------------------- types and sorts */

typedef enum shk__tyk {
  SHK__TY_BOOL,
  SHK__TY_LONG,
  SHK__TY_STRING,
  SHK__TY_ENTITY,
  SHK__TY_SET,
  SHK__TY_RECORD,
  SHK__TY_IP,
  SHK__TY_DECIMAL,
  SHK__TY_DATETIME,
  SHK__TY_DURATION,
} shk__tyk;

typedef struct shk__ety shk__ety;
typedef struct shk__ty shk__ty;

typedef struct shk__tyattr {
  shk__str name;
  const shk__ty *t;
  bool required;
} shk__tyattr;

/* Types are interned: two equal Cedar types are one shk__ty, so a pointer
 * comparison is type equality. */
struct shk__ty {
  shk__tyk k;
  unsigned id;             /* index in the encoder's table */
  const shk__ety *ent;     /* ENTITY */
  const shk__ty *elem;     /* SET */
  const shk__tyattr *attrs; /* RECORD, sorted by name */
  size_t n_attrs;
  const char *sort;        /* its SMT sort */
  const char *opt;         /* the option datatype over it, once declared */
};

/* One entity type of the schema, or one action entity type. */
struct shk__ety {
  unsigned id;
  shk__str name;
  const shk__entity_type *et; /* NULL for an action type */
  bool is_action;
  const shk__ty *t;        /* its entity type, once interned */
  const shk__ty *shape;    /* the attributes' record type; NULL when it has none */
  const shk__ty *tags;     /* NULL when it declares no tags */
  const shk__ty *set;      /* Set of this type, once an ancestor function returns one */
  bool *anc;               /* anc[j]: an entity of this type may have an ancestor of type j */
  /* Which uninterpreted functions are declared. */
  bool has_ex, has_at, has_tk, has_tv;
  bool *has_an;            /* per ancestor type */
};

/* ---------------------------------------------------------------- the encoder */

/* One request environment: an action and a principal and a resource type
 * it applies to. */
typedef struct shk__aenv {
  const shk__action *action;
  shk__str principal, resource;
} shk__aenv;

/* An encoded expression: its value and its error as SMT atoms (a symbol or
 * a literal; compound terms are named with define-fun so that shared
 * subterms are written once). */
typedef struct shk__v {
  const shk__ty *t;
  const char *v;
  const char *e;           /* "false" when it cannot error */
  signed char kb;          /* BOOL: -1 unknown, else the value it has whenever it does not error */
  const shk__uid *lit;     /* ENTITY: the entity, when it is a known literal */
  const shk__expr *plit;   /* a primitive literal's expression */
} shk__v;

/* An entity term of the footprint: every entity whose existence,
 * attributes, ancestors or tags the formula reads. */
typedef struct shk__fp {
  const char *term;
  shk__ety *et;
} shk__fp;

/* No place in the policy text. */
#define SHK__NOLOC ((shk__loc){ 0 })

typedef struct shk__enc shk__enc;
struct shk__enc {
  shk__pool *pool;
  const shk__schema *s;
  shk__aenv env;
  shk__ety *etys;
  size_t n_etys;
  const shk__ety *P, *R, *A;
  const shk__uid *cp, *cr; /* a concrete principal and resource, or NULL (set before shk__enc_request) */
  const shk__ty *ctx;
  shk__ty **types;
  size_t n_types, cap_types;
  shk__text decl;          /* sorts and functions, each before its first use */
  shk__text body;          /* definitions and well-formedness assertions */
  unsigned next;           /* names t0, t1, ... */
  shk__fp *fp;
  size_t n_fp, cap_fp;
  /* Memoized applications of the uninterpreted functions. */
  struct shk__memo { const char *key; const char *name; } *memo;
  size_t memo_cap, memo_n;
  bool ip_declared;
  const shk__ty *strings;  /* Set<String>, interned with the first tag-key function */
  /* Where a refusal or an allocation failure unwinds to. */
  jmp_buf *fail;
  int code;                /* the refusal's or failure's code */
  shk_error *err;
  const char *what;        /* names the policy being encoded, for messages */
};

/* Creates an encoder for one environment. The encoder's own failures
 * (out of memory) unwind through enc->fail, so the caller sets it first:
 * each entry point below is called under a setjmp of the caller's. */
int shk__enc_new(const shk__schema *s, const shk__aenv *env, shk__enc **out, shk_error *err);
void shk__enc_free(shk__enc *enc);
/* Reports a refusal and unwinds. */
SHK_NORETURN SHK_PRINTF(4, 5) void shk__enc_fail(shk__enc *enc, int code, shk__loc loc,
                                                 const char *fmt, ...);

/* The request's variables. */
void shk__enc_request(shk__enc *enc);
/* A policy: *sat is an atom true exactly when it is satisfied (scope and
 * conditions true, no error), *err when its evaluation errors. */
void shk__enc_policy(shk__enc *enc, const shk__policy *p, const char **sat, const char **err);
/* A policy set: *allow is true exactly when the authorizer allows. The
 * per-policy atoms go to sats and errs when given (arrays of n). */
const char *shk__enc_set(shk__enc *enc, shk__policy *const *pols, size_t n, const char **sats,
                         const char **errs);
/* Appends the footprint's hierarchy assumptions to enc->body (called once,
 * after the last policy). */
void shk__enc_finish(shk__enc *enc);
/* A formatted string in the encoder's pool. */
SHK_PRINTF(2, 3) const char *shk__enc_str(shk__enc *enc, const char *fmt, ...);
/* An option datatype over T, declared on first use. */
const char *shk__enc_opt(shk__enc *enc, const shk__ty *t);
/* The entity type (or action type) named NAME, or NULL. */
shk__ety *shk__enc_ety(shk__enc *enc, shk__str name);
/* An entity literal as a term. */
const char *shk__enc_uid(shk__enc *enc, const shk__ety *t, shk__str id);
/* The key of a record type's attribute NAME, or -1. */
int shk__ty_attr(const shk__ty *t, shk__str name);

/* ---------------------------------------------------------------- models and values */

/* Decodes a model value of type T into Cedar's JSON form (entities as
 * {"__entity"}, extension values as {"__extn"}). NULL when the value is not
 * one the solver should have produced (the caller reports a defect). */
json_t *shk__model_json(shk__enc *enc, const shk__ty *t, const shk__sx *x);
/* A concrete value (engine form) as an SMT term of type T; NULL when the
 * value does not have the type. */
const char *shk__value_term(shk__enc *enc, const shk__ty *t, const shk__value *v);

/* The concrete counterexample of a sat check: the request and the entity
 * store the model describes, as JSON. */
typedef struct shk__cex {
  json_t *request;
  json_t *entities;
} shk__cex;
int shk__model_extract(shk__enc *enc, shk__smt *smt, shk__cex *out, shk_error *err);
void shk__cex_clear(shk__cex *c);

/* ---------------------------------------------------------------- shared by the queries */

struct shk_analysis {
  shk_analysis_options opt;
  char *solver_path;
  shk__smt *smt;
  /* What is loaded at level 1 of the solver's assertion stack: an
   * environment of a prepared set, by serial, so that a warm grant-time
   * check sends only its own assertions. */
  uint64_t loaded_serial;
  size_t loaded_env;
  shk__enc *loaded_enc;
  const char *loaded_allow;
  const char *loaded_allow_clean; /* allowed, and no policy errors */
  const char **loaded_goals; /* what denies: no permit, or each forbid */
  size_t n_loaded_goals;
  const char **loaded_err_goals; /* each policy that can error, erring */
  size_t n_loaded_err_goals;
  unsigned loaded_cv;       /* the element constants declared at level 1, by kind */
  uint64_t checks_at_start; /* checks when the solver process started */
  unsigned loads_since_start; /* encodings sent to it since */
  uint64_t checks;          /* check-sat calls, for tests and benchmarks */
  uint64_t starts;          /* solver processes started */
};

struct shk_analysis_set {
  const shk_cedar_schema *schema;
  const shk_cedar_policy_set *ps;
  shk__policy *const *pols;
  size_t n;
  uint64_t serial;
  shk__aenv *envs;
  size_t n_envs;
};

/* The solver, started (again) when it is not running. */
int shk__analysis_solver(shk_analysis *an, shk_error *err);
/* After a failure: ends the solver process (the next question starts a
 * new one), since its assertion stack is in an unknown state. */
void shk__analysis_reset(shk_analysis *an);
/* Drops whatever is loaded and returns the solver to level 0. */
int shk__analysis_unload(shk_analysis *an, shk_error *err);
/* The environment's text: declarations, definitions, assumptions. */
int shk__analysis_send_enc(shk_analysis *an, shk__enc *enc, shk_error *err);
/* Authorizes REQUEST against ENTITIES with the engine. With ERRORS_DENY a
 * policy that errors makes it a denial: then, unless a forbid applies,
 * *erred is set and POLICY names the policy that errored. */
int shk__analysis_decide(const shk_cedar_policy_set *ps, const shk_cedar_schema *schema,
                         const char *request, const char *entities, bool errors_deny, bool *allow,
                         bool *erred, char *why, size_t whylen, char *policy, size_t policylen,
                         shk_error *err);
