/* SPDX-License-Identifier: Apache-2.0 */
/* The strict validator: type-checks every policy of a set against a schema,
 * the way the reference validator does in its default (strict) mode.
 *
 * Three passes per policy, as in the reference:
 *   1. names: every entity type written in the policy is declared, every
 *      action literal is a declared action, and every literal of an
 *      enumerated entity type uses one of its ids;
 *   2. scope: some action selected by the action scope applies to some
 *      principal type and some resource type the scope allows (the corpus
 *      this engine follows treats a policy that can never apply as invalid);
 *   3. types: the whole condition (scope constraints && when/unless bodies)
 *      is checked once per request environment: each declared action with
 *      each principal and resource type of its appliesTo, and for a template
 *      each entity type its slots could be linked to.
 *
 * The type system is the reference's: singleton booleans (so a scope that
 * does not match an environment makes the rest of the condition dead and
 * unchecked), capabilities learned from `has` and `hasTag` that make an
 * optional attribute or a tag safe inside && and `if`, and least upper
 * bounds that in strict mode require equal entity types and records with
 * the same attributes. Errors are deduplicated across environments.
 *
 * Why this is safe: the checker only reads the policy and schema; its
 * working memory is in two scratch arenas freed before returning (only the
 * findings are malloc'd, for the caller), its recursion is bounded, and a
 * construct it does not recognise is reported as an error, never passed.
 * Out of memory unwinds to shk_cedar_validate, which frees the findings
 * and returns -ENOMEM: a partial list of findings is never an answer. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cedar/cedar-eval-internal.h"
#include "cedar/cedar-internal.h"
#include "common/common.h"

/* The checker recurses once per level of the expression tree. Each helper
 * keeps its own frame (and its message buffers) so that the frames on the
 * recursion path stay small. */
#define SHK_NOINLINE __attribute__((noinline))

/* ---------------------------------------------------------------- types */

typedef enum vkind {
  VT_NEVER,
  VT_TRUE,
  VT_FALSE,
  VT_BOOL,
  VT_LONG,
  VT_STRING,
  VT_SET,
  VT_RECORD,
  VT_ENTITY,
  VT_ANY_ENTITY,
  VT_EXT,
} vkind;

typedef struct vtype vtype;
typedef struct vattr {
  shk__str name;
  const vtype *type;
  bool required;
} vattr;

struct vtype {
  vkind k;
  shk__str name;      /* ENTITY (fully qualified) and EXT */
  const vtype *elem;  /* SET; NULL means "any set", only ever an expectation */
  const vattr *attrs; /* RECORD, sorted by name */
  size_t n_attrs;
  bool open;          /* RECORD: only the "any record" expectation is open */
};

static const vtype T_NEVER = { .k = VT_NEVER };
static const vtype T_TRUE = { .k = VT_TRUE };
static const vtype T_FALSE = { .k = VT_FALSE };
static const vtype T_BOOL = { .k = VT_BOOL };
static const vtype T_LONG = { .k = VT_LONG };
static const vtype T_STRING = { .k = VT_STRING };
static const vtype T_ANY_ENTITY = { .k = VT_ANY_ENTITY };
static const vtype T_ANY_RECORD = { .k = VT_RECORD, .open = true };
static const vtype T_EMPTY_RECORD = { .k = VT_RECORD };
static const vtype T_ANY_SET = { .k = VT_SET };
static const vtype T_SET_OF_ENTITIES = { .k = VT_SET, .elem = &T_ANY_ENTITY };
static const vtype T_IPADDR = { .k = VT_EXT, .name = { "ipaddr", 6 } };
static const vtype T_DECIMAL = { .k = VT_EXT, .name = { "decimal", 7 } };
static const vtype T_DATETIME = { .k = VT_EXT, .name = { "datetime", 8 } };
static const vtype T_DURATION = { .k = VT_EXT, .name = { "duration", 8 } };

/* Cedar's rule for action entity types: the last path segment is Action. */
static bool is_action_type(shk__str name)
{
  static const char act[] = "Action";
  if (name.n < 6 || memcmp(name.p + name.n - 6, act, 6) != 0)
    return false;
  return name.n == 6 || (name.n >= 8 && name.p[name.n - 7] == ':' && name.p[name.n - 8] == ':');
}

/* ---------------------------------------------------------------- the checker */

/* What the checker has learned is safe to access: `e.attr` after `e has
 * attr`, or `e.getTag(k)` after `e.hasTag(k)`. */
typedef struct cap {
  const shk__expr *e;    /* NULL for a union of l and r */
  shk__str attr;         /* attribute capability */
  const shk__expr *key;  /* tag capability when non-NULL */
  struct cap *l, *r;
} cap;

/* One request environment. A slot type is empty when the policy has no
 * such slot (the slot then types as any entity, which never happens for a
 * well-formed template). */
typedef struct env {
  shk__str principal, resource;
  const shk__action *action;
  shk__str pslot, rslot;
} env;

typedef struct checker {
  const shk__schema *s;
  shk__arena *a;      /* scratch for one request environment */
  shk__arena *pa;     /* for the whole policy: its condition, its findings table */
  const shk__policy *p;
  const env *env;
  const vtype *context;
  shk_cedar_validation_result *out;
  size_t *seen;       /* this policy's findings by hash: index + 1, 0 empty */
  size_t seen_cap, seen_n;
  unsigned depth;     /* of the recursion, bounded by MAX_DEPTH */
} checker;

/* A chain like a && b && c ... is a tree as deep as it is long, and the
 * parser bounds only its own recursion. Deeper than this the checker
 * refuses the policy instead of risking the stack. */
#define MAX_DEPTH 1500

/* The answer for one expression: its type (NULL when none could be given),
 * whether it type-checked, and the capabilities it grants when true. */
typedef struct ans {
  const vtype *t;
  bool ok;
  cap *caps;
} ans;

static ans ok_ans(const vtype *t) { return (ans){ t, true, NULL }; }
static ans fail_ans(const vtype *t) { return (ans){ t, false, NULL }; }

/* ---------------------------------------------------------------- messages */

typedef struct sbuf {
  char *p;
  size_t n, cap;
} sbuf;

SHK_PRINTF(2, 3) static void sb_printf(sbuf *b, const char *fmt, ...)
{
  if (b->n >= b->cap)
    return;
  va_list ap;
  va_start(ap, fmt);
  int r = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
  va_end(ap);
  if (r > 0)
    b->n = (size_t)r < b->cap - b->n ? b->n + (size_t)r : b->cap;
}

/* Appends a name or literal from the policy. Control characters, quotes
 * and backslashes are escaped so that a hostile policy cannot write
 * terminal escape sequences through a validation message. */
static void sb_str(sbuf *b, shk__str s)
{
  for (size_t i = 0; i < s.n; i++) {
    unsigned char ch = (unsigned char)s.p[i];
    if (ch < 0x20 || ch == 0x7f)
      sb_printf(b, "\\u{%x}", ch);
    else if (ch == '"' || ch == '\\' || ch == '`')
      sb_printf(b, "\\%c", ch);
    else
      sb_printf(b, "%c", ch);
  }
}

static const char *esc(char *buf, size_t n, shk__str s)
{
  sbuf b = { buf, 0, n };
  buf[0] = '\0';
  sb_str(&b, s);
  return buf;
}

static void type_name(sbuf *b, const vtype *t)
{
  switch (t->k) {
  case VT_NEVER: sb_printf(b, "Never"); break;
  case VT_TRUE: sb_printf(b, "true"); break;
  case VT_FALSE: sb_printf(b, "false"); break;
  case VT_BOOL: sb_printf(b, "Bool"); break;
  case VT_LONG: sb_printf(b, "Long"); break;
  case VT_STRING: sb_printf(b, "String"); break;
  case VT_ANY_ENTITY: sb_printf(b, "(any entity)"); break;
  case VT_ENTITY:
  case VT_EXT: sb_str(b, t->name); break;
  case VT_SET:
    if (!t->elem) {
      sb_printf(b, "Set");
      break;
    }
    sb_printf(b, "Set<");
    type_name(b, t->elem);
    sb_printf(b, ">");
    break;
  case VT_RECORD:
    if (t->open) {
      sb_printf(b, "(any record)");
      break;
    }
    sb_printf(b, "{");
    for (size_t i = 0; i < t->n_attrs; i++) {
      sb_printf(b, "%s", i ? ", " : "");
      sb_str(b, t->attrs[i].name);
      sb_printf(b, "%s: ", t->attrs[i].required ? "" : "?");
      type_name(b, t->attrs[i].type);
    }
    sb_printf(b, "}");
    break;
  }
}

/* Records one finding, unless this policy already has the same one (the
 * same mistake is usually found once per request environment). */
static size_t finding_hash(const char *msg, shk__loc loc)
{
  size_t h = 1469598103934665603u ^ loc.line ^ ((size_t)loc.col << 20);
  for (; *msg; msg++)
    h = (h ^ (unsigned char)*msg) * 1099511628211u;
  return h;
}

/* Finds where the finding belongs in the table of this policy's findings:
 * its slot, or an empty one. */
static size_t *seen_slot(checker *c, const char *msg, shk__loc loc)
{
  const shk_cedar_validation_result *o = c->out;
  size_t mask = c->seen_cap - 1;
  for (size_t i = finding_hash(msg, loc) & mask;; i = (i + 1) & mask) {
    size_t k = c->seen[i];
    if (!k || (o->errors[k - 1].line == loc.line && o->errors[k - 1].column == loc.col &&
               !strcmp(o->errors[k - 1].message, msg)))
      return &c->seen[i];
  }
}

/* Records one finding, unless this policy already has the same one (the
 * same mistake is usually found once per request environment). */
SHK_NOINLINE SHK_PRINTF(3, 4) static void verr(checker *c, shk__loc loc, const char *fmt, ...)
{
  char msg[512], id[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  shk_cedar_validation_result *o = c->out;
  if (2 * (c->seen_n + 1) > c->seen_cap) {
    /* Grow the table (it lives in the per-policy arena) and rehash. */
    size_t *old = c->seen, old_cap = c->seen_cap;
    c->seen_cap = old_cap ? 2 * old_cap : 64;
    c->seen = shk__arena_calloc(c->pa, c->seen_cap * sizeof *c->seen);
    for (size_t i = 0; i < old_cap; i++)
      if (old[i])
        *seen_slot(c, o->errors[old[i] - 1].message,
                   (shk__loc){ o->errors[old[i] - 1].line, o->errors[old[i] - 1].column }) = old[i];
  }
  size_t *slot = seen_slot(c, msg, loc);
  if (*slot)
    return;
  /* Capacity doubles at each power of two. */
  size_t n = o->n_errors;
  if ((n & (n - 1)) == 0)
    o->errors = shk__urealloc(o->errors, n < 4 ? 8 : 2 * n, sizeof *o->errors);
  char *pid = shk__strdup(esc(id, sizeof id, c->p->id)), *m = shk__strdup(msg);
  if (!pid || !m) {
    free(pid);
    free(m);
    shk__oom_unwind();
  }
  o->errors[o->n_errors++] = (shk_cedar_validation_error){
    .policy_id = pid,
    .message = m,
    .line = loc.line,
    .column = loc.col,
  };
  *slot = o->n_errors;
  c->seen_n++;
}

/* Formats a type for a message into a buffer of the caller's. */
static const char *tn(char *buf, size_t n, const vtype *t)
{
  sbuf b = { buf, 0, n };
  buf[0] = '\0';
  type_name(&b, t);
  return buf;
}

SHK_NOINLINE static void err_unexpected(checker *c, shk__loc loc, const vtype *const *want, size_t n_want,
                           const vtype *got)
{
  char w[256], g[256];
  sbuf b = { w, 0, sizeof w };
  w[0] = '\0';
  for (size_t i = 0; i < n_want; i++) {
    if (i)
      sb_printf(&b, " or ");
    type_name(&b, want[i]);
  }
  verr(c, loc, "unexpected type: expected %s but saw %s", w, tn(g, sizeof g, got));
}

SHK_NOINLINE static void err_incompatible(checker *c, shk__loc loc, const char *where, const vtype *x,
                             const vtype *y)
{
  char a[256], b[256];
  verr(c, loc, "incompatible types %s: %s and %s have no common type in strict mode", where,
       tn(a, sizeof a, x), tn(b, sizeof b, y));
}

/* ---------------------------------------------------------------- schema lookups */

/* The checker's type for a schema type. */
static const vtype *conv(checker *c, const shk__type *st)
{
  if (st->kind == SHK__T_BOOL)
    return &T_BOOL;
  if (st->kind == SHK__T_LONG)
    return &T_LONG;
  if (st->kind == SHK__T_STRING)
    return &T_STRING;
  vtype *t = shk__arena_calloc(c->a, sizeof *t);
  switch (st->kind) {
  case SHK__T_BOOL:
  case SHK__T_LONG:
  case SHK__T_STRING:
    break;
  case SHK__T_SET:
    t->k = VT_SET;
    t->elem = conv(c, st->elem);
    return t;
  case SHK__T_RECORD: {
    vattr *at = shk__arena_alloc(c->a, (st->n_attrs ? st->n_attrs : 1) * sizeof *at);
    for (size_t i = 0; i < st->n_attrs; i++)
      at[i] = (vattr){ st->attrs[i].name, conv(c, st->attrs[i].type), st->attrs[i].required };
    t->k = VT_RECORD;
    t->attrs = at;
    t->n_attrs = st->n_attrs;
    return t;
  }
  case SHK__T_ENTITY:
    t->k = VT_ENTITY;
    t->name = st->name;
    return t;
  case SHK__T_EXT:
    t->k = VT_EXT;
    t->name = st->name;
    return t;
  }
  return &T_NEVER;
}

static const vtype *entity_type(checker *c, shk__str name)
{
  vtype *t = shk__arena_calloc(c->a, sizeof *t);
  t->k = VT_ENTITY;
  t->name = name;
  return t;
}

/* True when entity type `d` is `t` or may be a member (transitively) of
 * `t`. A search that visits each type once: hierarchies may have cycles
 * (`entity G in [G]`), and following every path of a dense one would take
 * exponential time. */
static bool etype_descends(checker *c, shk__str d, shk__str t)
{
  if (shk__str_eq(d, t))
    return true;
  const shk__schema *s = c->s;
  const shk__entity_type *et = shk__schema_entity_type(s, d);
  if (!et)
    return false;
  bool *seen = shk__arena_calloc(c->a, s->n_etypes);
  size_t *stack = shk__arena_alloc(c->a, s->n_etypes * sizeof *stack), n = 0;
  seen[et - s->etypes] = true;
  stack[n++] = (size_t)(et - s->etypes);
  while (n) {
    const shk__entity_type *cur = &s->etypes[stack[--n]];
    for (size_t i = 0; i < cur->n_member_of; i++) {
      if (shk__str_eq(cur->member_of[i], t))
        return true;
      const shk__entity_type *up = shk__schema_entity_type(s, cur->member_of[i]);
      if (up && !seen[up - s->etypes]) {
        seen[up - s->etypes] = true;
        stack[n++] = (size_t)(up - s->etypes);
      }
    }
  }
  return false;
}

/* True when action `d` is `t` or a member (transitively) of `t`; the same
 * search over the action hierarchy. */
static bool action_descends(checker *c, shk__uid d, shk__uid t)
{
  if (shk__uid_eq(d, t))
    return true;
  const shk__schema *s = c->s;
  const shk__action *ac = shk__schema_action(s, d);
  if (!ac)
    return false;
  bool *seen = shk__arena_calloc(c->a, s->n_actions);
  size_t *stack = shk__arena_alloc(c->a, s->n_actions * sizeof *stack), n = 0;
  seen[ac - s->actions] = true;
  stack[n++] = (size_t)(ac - s->actions);
  while (n) {
    const shk__action *cur = &s->actions[stack[--n]];
    for (size_t i = 0; i < cur->n_member_of; i++) {
      if (shk__uid_eq(cur->member_of[i], t))
        return true;
      const shk__action *up = shk__schema_action(s, cur->member_of[i]);
      if (up && !seen[up - s->actions]) {
        seen[up - s->actions] = true;
        stack[n++] = (size_t)(up - s->actions);
      }
    }
  }
  return false;
}

/* The attribute `name` of an entity or record type, or NULL. Action
 * entities have no attributes; an undeclared entity type has none either
 * (and is reported by the names pass). */
static bool lookup_attr(checker *c, const vtype *t, shk__str name, vattr *out)
{
  if (t->k == VT_RECORD) {
    for (size_t i = 0; i < t->n_attrs; i++)
      if (shk__str_eq(t->attrs[i].name, name)) {
        *out = t->attrs[i];
        return true;
      }
    return false;
  }
  if (t->k != VT_ENTITY || is_action_type(t->name))
    return false;
  const shk__entity_type *et = shk__schema_entity_type(c->s, t->name);
  if (!et || !et->shape)
    return false;
  for (size_t i = 0; i < et->shape->n_attrs; i++)
    if (shk__str_eq(et->shape->attrs[i].name, name)) {
      *out = (vattr){ name, conv(c, et->shape->attrs[i].type), et->shape->attrs[i].required };
      return true;
    }
  return false;
}

/* Whether a value of type `t` may have an attribute that lookup_attr did
 * not find: only the bottom type, open records, any entity and entity
 * types the schema does not know. */
static bool may_have_attr(checker *c, const vtype *t)
{
  switch (t->k) {
  case VT_NEVER:
  case VT_ANY_ENTITY:
    return true;
  case VT_RECORD:
    return t->open;
  case VT_ENTITY:
    return !is_action_type(t->name) && !shk__schema_entity_type(c->s, t->name);
  case VT_TRUE:
  case VT_FALSE:
  case VT_BOOL:
  case VT_LONG:
  case VT_STRING:
  case VT_SET:
  case VT_EXT:
    return false;
  }
  return false;
}

/* ---------------------------------------------------------------- subtyping and LUB */

static bool subtype(const vtype *x, const vtype *y, bool strict);

/* Record subtyping. A closed record is a subtype of an open one by width
 * (permissive mode only: the checker uses that to ask "is this any
 * record?"); otherwise both have the same attributes, each with the same
 * qualifier in strict mode. */
static bool record_subtype(const vtype *x, const vtype *y, bool strict)
{
  if (x->open && !y->open)
    return false;
  bool width = y->open && !strict;
  if (!width && x->n_attrs != y->n_attrs)
    return false;
  for (size_t j = 0; j < y->n_attrs; j++) {
    const vattr *ya = &y->attrs[j], *xa = NULL;
    for (size_t i = 0; i < x->n_attrs && !xa; i++)
      if (shk__str_eq(x->attrs[i].name, ya->name))
        xa = &x->attrs[i];
    if (!xa)
      return false;
    bool qual = strict ? xa->required == ya->required : xa->required || !ya->required;
    if (!qual || !subtype(xa->type, ya->type, strict))
      return false;
  }
  return true;
}

static bool subtype(const vtype *x, const vtype *y, bool strict)
{
  if (x->k == VT_NEVER)
    return true;
  switch (y->k) {
  case VT_NEVER:
    return false;
  case VT_TRUE:
  case VT_FALSE:
  case VT_LONG:
  case VT_STRING:
    return x->k == y->k;
  case VT_BOOL:
    return x->k == VT_BOOL || x->k == VT_TRUE || x->k == VT_FALSE;
  case VT_EXT:
    return x->k == VT_EXT && shk__str_eq(x->name, y->name);
  case VT_SET:
    if (x->k != VT_SET)
      return false;
    if (!y->elem)
      return true;
    return x->elem && subtype(x->elem, y->elem, strict);
  case VT_RECORD:
    return x->k == VT_RECORD && record_subtype(x, y, strict);
  case VT_ENTITY:
    return x->k == VT_ENTITY && shk__str_eq(x->name, y->name);
  case VT_ANY_ENTITY:
    return x->k == VT_ANY_ENTITY || (x->k == VT_ENTITY && !strict);
  }
  return false;
}

/* The strict least upper bound of two types, or NULL when there is none. */
static const vtype *lub(checker *c, const vtype *x, const vtype *y)
{
  if (subtype(x, y, true))
    return y;
  if (subtype(y, x, true))
    return x;
  if ((x->k == VT_TRUE || x->k == VT_FALSE) && (y->k == VT_TRUE || y->k == VT_FALSE))
    return &T_BOOL;
  if (x->k == VT_SET && y->k == VT_SET) {
    if (!x->elem || !y->elem)
      return &T_ANY_SET;
    const vtype *e = lub(c, x->elem, y->elem);
    if (!e)
      return NULL;
    vtype *t = shk__arena_calloc(c->a, sizeof *t);
    t->k = VT_SET;
    t->elem = e;
    return t;
  }
  if (x->k == VT_RECORD && y->k == VT_RECORD) {
    /* Strict: the same attribute names, each with the same qualifier and
     * a common type. */
    if (x->n_attrs != y->n_attrs)
      return NULL;
    vattr *at = shk__arena_alloc(c->a, (x->n_attrs ? x->n_attrs : 1) * sizeof *at);
    for (size_t i = 0; i < x->n_attrs; i++) {
      const vattr *xa = &x->attrs[i], *ya = &y->attrs[i];
      if (!shk__str_eq(xa->name, ya->name) || xa->required != ya->required)
        return NULL;
      const vtype *e = lub(c, xa->type, ya->type);
      if (!e)
        return NULL;
      at[i] = (vattr){ xa->name, e, xa->required };
    }
    vtype *t = shk__arena_calloc(c->a, sizeof *t);
    t->k = VT_RECORD;
    t->attrs = at;
    t->n_attrs = x->n_attrs;
    t->open = x->open || y->open;
    return t;
  }
  return NULL;
}

/* ---------------------------------------------------------------- capabilities */

static bool expr_eq(const shk__expr *x, const shk__expr *y);

static bool exprs_eq(shk__expr *const *x, shk__expr *const *y, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (!expr_eq(x[i], y[i]))
      return false;
  return true;
}

/* Structural equality, ignoring source locations: a capability learned
 * from `principal.a has b` applies to any later `principal.a.b`. */
static bool expr_eq(const shk__expr *x, const shk__expr *y)
{
  if (!x || !y)
    return x == y;
  if (x->kind != y->kind)
    return false;
  switch (x->kind) {
  case SHK__E_BOOL: return x->bval == y->bval;
  case SHK__E_LONG: return x->lval == y->lval;
  case SHK__E_STRING: return shk__str_eq(x->s, y->s);
  case SHK__E_ENTITY: return shk__uid_eq(x->uid, y->uid);
  case SHK__E_VAR: return x->var == y->var;
  case SHK__E_SLOT: return x->slot == y->slot;
  case SHK__E_HAS:
  case SHK__E_GETATTR:
  case SHK__E_IS:
    return shk__str_eq(x->s, y->s) && expr_eq(x->a, y->a);
  case SHK__E_LIKE:
    if (x->n_pat != y->n_pat || !expr_eq(x->a, y->a))
      return false;
    for (size_t i = 0; i < x->n_pat; i++)
      if (x->pat[i].wildcard != y->pat[i].wildcard || x->pat[i].byte != y->pat[i].byte)
        return false;
    return true;
  case SHK__E_NOT:
  case SHK__E_NEG:
    return expr_eq(x->a, y->a);
  case SHK__E_AND:
  case SHK__E_OR:
  case SHK__E_EQ:
  case SHK__E_NE:
  case SHK__E_LT:
  case SHK__E_LE:
  case SHK__E_GT:
  case SHK__E_GE:
  case SHK__E_ADD:
  case SHK__E_SUB:
  case SHK__E_MUL:
  case SHK__E_IN:
    return expr_eq(x->a, y->a) && expr_eq(x->b, y->b);
  case SHK__E_IF:
    return expr_eq(x->a, y->a) && expr_eq(x->b, y->b) && expr_eq(x->c, y->c);
  case SHK__E_SET:
    return x->n_items == y->n_items && exprs_eq(x->items, y->items, x->n_items);
  case SHK__E_RECORD:
    if (x->n_items != y->n_items)
      return false;
    for (size_t i = 0; i < x->n_items; i++)
      if (!shk__str_eq(x->keys[i], y->keys[i]))
        return false;
    return exprs_eq(x->items, y->items, x->n_items);
  case SHK__E_CALL:
    return x->fn == y->fn && x->n_items == y->n_items && exprs_eq(x->items, y->items, x->n_items);
  }
  return false;
}

/* Sets of capabilities are trees whose inner nodes are unions, so that a
 * union costs one node however large its sides: a chain of n `has` tests
 * then needs n nodes, not n * n. */
static bool has_cap(const cap *cs, const shk__expr *e, shk__str attr, const shk__expr *key)
{
  while (cs) {
    if (!cs->e) {
      if (has_cap(cs->l, e, attr, key))
        return true;
      cs = cs->r;
      continue;
    }
    if (!!cs->key != !!key || !expr_eq(cs->e, e))
      return false;
    return key ? expr_eq(cs->key, key) : shk__str_eq(cs->attr, attr);
  }
  return false;
}

static cap *one_cap(checker *c, const shk__expr *e, shk__str attr, const shk__expr *key)
{
  cap *k = shk__arena_calloc(c->a, sizeof *k);
  k->e = e;
  k->attr = attr;
  k->key = key;
  return k;
}

static cap *cap_union(checker *c, cap *x, cap *y)
{
  if (!x)
    return y;
  if (!y)
    return x;
  cap *u = shk__arena_calloc(c->a, sizeof *u);
  u->l = x;
  u->r = y;
  return u;
}

/* The capabilities of `x` that are also in `y`. */
static cap *cap_intersect(checker *c, const cap *x, cap *y, cap *acc)
{
  while (x) {
    if (!x->e) {
      acc = cap_intersect(c, x->l, y, acc);
      x = x->r;
      continue;
    }
    if (has_cap(y, x->e, x->attr, x->key))
      acc = cap_union(c, one_cap(c, x->e, x->attr, x->key), acc);
    break;
  }
  return acc;
}

/* ---------------------------------------------------------------- expressions */

static ans tc(checker *c, cap *prior, const shk__expr *e);

/* Checks `e` and requires its type to be a (permissive) subtype of one of
 * `want`; on a mismatch the answer has no type. */
static ans expect(checker *c, cap *prior, const shk__expr *e, const vtype *const *want,
                  size_t n_want)
{
  ans r = tc(c, prior, e);
  if (!r.t)
    return fail_ans(NULL);
  for (size_t i = 0; i < n_want; i++)
    if (subtype(r.t, want[i], false))
      return r;
  err_unexpected(c, e->loc, want, n_want, r.t);
  return fail_ans(NULL);
}

static ans expect1(checker *c, cap *prior, const shk__expr *e, const vtype *want)
{
  return expect(c, prior, e, &want, 1);
}

static const vtype *single_bool(bool v) { return v ? &T_TRUE : &T_FALSE; }

static const vtype *action_var_type(checker *c) { return entity_type(c, c->env->action->uid.type); }

/* The entity uid of a literal or of the `action` variable, as the
 * reference substitutes the environment's action before comparing. */
static bool euid_of(checker *c, const shk__expr *e, shk__uid *out)
{
  if (e->kind == SHK__E_ENTITY) {
    *out = e->uid;
    return true;
  }
  if (e->kind == SHK__E_VAR && e->var == SHK__VAR_ACTION) {
    *out = c->env->action->uid;
    return true;
  }
  return false;
}

static bool is_literal(const shk__expr *e)
{
  return e->kind == SHK__E_BOOL || e->kind == SHK__E_LONG || e->kind == SHK__E_STRING ||
         e->kind == SHK__E_ENTITY;
}

/* The type of a == b before the strict check: false when the types are
 * disjoint entity types, a singleton when both sides are literals. */
static const vtype *type_of_eq(checker *c, const shk__expr *x, const vtype *tx, const shk__expr *y,
                               const vtype *ty)
{
  if (tx && ty && tx->k == VT_ENTITY && ty->k == VT_ENTITY && !shk__str_eq(tx->name, ty->name))
    return &T_FALSE;
  shk__uid ux, uy;
  bool ex = euid_of(c, x, &ux), ey = euid_of(c, y, &uy);
  if (ex && ey)
    return single_bool(shk__uid_eq(ux, uy));
  if ((ex || is_literal(x)) && (ey || is_literal(y))) {
    /* An entity literal never equals a primitive one. */
    if (ex || ey)
      return &T_FALSE;
    return single_bool(expr_eq(x, y));
  }
  return &T_BOOL;
}

/* Strict mode: the operands of ==, contains, containsAll and containsAny
 * must have a common type unless the result is already known. */
static bool strict_eq(checker *c, shk__loc loc, const char *where, const vtype *result,
                      const vtype *x, const vtype *y)
{
  if (result->k == VT_TRUE || result->k == VT_FALSE || !x || !y)
    return true;
  if (lub(c, x, y))
    return true;
  err_incompatible(c, loc, where, x, y);
  return false;
}

SHK_NOINLINE static ans tc_eq(checker *c, cap *prior, const shk__expr *e)
{
  ans l = tc(c, prior, e->a), r = tc(c, prior, e->b);
  const vtype *t = type_of_eq(c, e->a, l.t, e->b, r.t);
  bool ok = strict_eq(c, e->loc, "in ==", t, l.t, r.t);
  return (ans){ t, l.ok && r.ok && ok, NULL };
}

static bool comparable(const vtype *t)
{
  return t->k == VT_LONG || (t->k == VT_EXT && (shk__str_eq(t->name, T_DATETIME.name) ||
                                                 shk__str_eq(t->name, T_DURATION.name)));
}

static bool same_type(const vtype *x, const vtype *y)
{
  return subtype(x, y, true) && subtype(y, x, true);
}

/* <, <=, > and >=: both Long, or both the same datetime or duration type. */
SHK_NOINLINE static ans tc_compare(checker *c, cap *prior, const shk__expr *e)
{
  static const vtype *const cmp_types[] = { &T_LONG, &T_DATETIME, &T_DURATION };
  ans l = tc(c, prior, e->a), r = tc(c, prior, e->b);
  bool ok = l.ok && r.ok;
  if (!l.t || !r.t)
    return fail_ans(&T_BOOL);
  const vtype *lt = l.t, *rt = r.t;
  if (lt->k == VT_NEVER && rt->k == VT_NEVER)
    ok = false;
  else if (lt->k == VT_NEVER || rt->k == VT_NEVER) {
    const shk__expr *oe = lt->k == VT_NEVER ? e->b : e->a;
    const vtype *other = lt->k == VT_NEVER ? rt : lt;
    if (!comparable(other)) {
      err_unexpected(c, oe->loc, cmp_types, 3, other);
      ok = false;
    }
  } else if (same_type(lt, rt) && comparable(lt)) {
    /* fine */
  } else if (comparable(lt)) {
    err_unexpected(c, e->b->loc, &lt, 1, rt);
    ok = false;
  } else if (comparable(rt)) {
    err_unexpected(c, e->a->loc, &rt, 1, lt);
    ok = false;
  } else {
    err_unexpected(c, e->a->loc, cmp_types, 3, lt);
    err_unexpected(c, e->b->loc, cmp_types, 3, rt);
    ok = false;
  }
  return (ans){ &T_BOOL, ok, NULL };
}

/* `in`: entity in entity or set of entities. An action (or the action
 * variable) in action literals is decided from the schema's action
 * hierarchy; otherwise an `in` that the entity type hierarchy rules out has
 * type false. */
SHK_NOINLINE static ans tc_in(checker *c, cap *prior, const shk__expr *e)
{
  static const vtype *const rhs_types[] = { &T_SET_OF_ENTITIES, &T_ANY_ENTITY };
  ans l = expect1(c, prior, e->a, &T_ANY_ENTITY);
  ans r = expect(c, prior, e->b, rhs_types, 2);
  if (!l.ok || !r.ok)
    return fail_ans(&T_BOOL);

  shk__uid lu;
  if (euid_of(c, e->a, &lu) && is_action_type(lu.type)) {
    /* The right side: one literal or a set made only of literals. */
    shk__uid one;
    const shk__expr *const *items = NULL;
    size_t n = 0;
    bool lits = true;
    if (euid_of(c, e->b, &one)) {
      n = 1;
    } else if (e->b->kind == SHK__E_SET) {
      items = (const shk__expr *const *)e->b->items;
      n = e->b->n_items;
      for (size_t i = 0; i < n && lits; i++) {
        shk__uid u;
        lits = euid_of(c, items[i], &u);
      }
    } else {
      lits = false;
    }
    if (lits) {
      bool any_action = false, found = false;
      for (size_t i = 0; i < n; i++) {
        shk__uid u = one;
        if (items)
          euid_of(c, items[i], &u);
        if (!is_action_type(u.type))
          continue;
        any_action = true;
        if (!shk__schema_action(c->s, u))
          return fail_ans(&T_BOOL);
        if (action_descends(c, lu, u))
          found = true;
      }
      if (!any_action)
        return ok_ans(&T_FALSE);
      return ok_ans(single_bool(found));
    }
  }

  const vtype *rt = r.t;
  if (rt->k == VT_SET)
    rt = rt->elem;
  if (l.t->k == VT_ENTITY && rt && rt->k == VT_ENTITY) {
    shk__str ln = l.t->name, rn = rt->name;
    bool may = etype_descends(c, ln, rn);
    /* An action type may be in an action group of another action type. */
    for (size_t i = 0; !may && i < c->s->n_actions; i++) {
      const shk__action *ac = &c->s->actions[i];
      if (!shk__str_eq(ac->uid.type, rn))
        continue;
      for (size_t j = 0; !may && j < c->s->n_actions; j++)
        may = shk__str_eq(c->s->actions[j].uid.type, ln) &&
              action_descends(c, c->s->actions[j].uid, ac->uid) &&
              !shk__uid_eq(c->s->actions[j].uid, ac->uid);
    }
    if (!may)
      return ok_ans(&T_FALSE);
  }
  return ok_ans(&T_BOOL);
}

SHK_NOINLINE static ans tc_has(checker *c, cap *prior, const shk__expr *e)
{
  static const vtype *const want[] = { &T_ANY_ENTITY, &T_ANY_RECORD };
  ans x = expect(c, prior, e->a, want, 2);
  if (!x.t)
    return fail_ans(&T_BOOL);
  vattr at;
  bool known = has_cap(prior, e->a, e->s, NULL);
  if (lookup_attr(c, x.t, e->s, &at)) {
    const vtype *t = (known || (at.required && x.t->k == VT_RECORD)) ? &T_TRUE : &T_BOOL;
    return (ans){ t, x.ok, one_cap(c, e->a, e->s, NULL) };
  }
  return (ans){ may_have_attr(c, x.t) ? &T_BOOL : &T_FALSE, x.ok, NULL };
}

SHK_NOINLINE static ans tc_getattr(checker *c, cap *prior, const shk__expr *e)
{
  static const vtype *const want[] = { &T_ANY_ENTITY, &T_ANY_RECORD };
  ans x = expect(c, prior, e->a, want, 2);
  if (!x.t)
    return fail_ans(NULL);
  vattr at;
  char tb[256], nb[128];
  if (lookup_attr(c, x.t, e->s, &at)) {
    if (at.required || has_cap(prior, e->a, e->s, NULL))
      return (ans){ at.type, x.ok, NULL };
    verr(c, e->loc,
         "unsafe access to optional attribute `%s` of %s: guard it with `has` first",
         esc(nb, sizeof nb, e->s), tn(tb, sizeof tb, x.t));
    return fail_ans(at.type);
  }
  verr(c, e->loc, "attribute `%s` not found: %s has no such attribute", esc(nb, sizeof nb, e->s),
       tn(tb, sizeof tb, x.t));
  return fail_ans(NULL);
}

SHK_NOINLINE static ans tc_set(checker *c, cap *prior, const shk__expr *e)
{
  bool ok = true, typed = true;
  const vtype *elem = &T_NEVER;
  const vtype *prev = NULL;
  for (size_t i = 0; i < e->n_items; i++) {
    ans x = tc(c, prior, e->items[i]);
    ok = ok && x.ok;
    if (!x.t) {
      typed = false;
      continue;
    }
    if (!typed || !elem)
      continue;
    const vtype *l = lub(c, elem, x.t);
    if (!l)
      err_incompatible(c, e->loc, "in a set", prev, x.t);
    elem = l;
    prev = x.t;
  }
  if (typed && !elem)
    return fail_ans(NULL);
  if (e->n_items == 0) {
    verr(c, e->loc, "empty set literals are forbidden in strict mode: the element type is unknown");
    return fail_ans(NULL);
  }
  if (!typed)
    return fail_ans(NULL);
  vtype *t = shk__arena_calloc(c->a, sizeof *t);
  t->k = VT_SET;
  t->elem = elem;
  return (ans){ t, ok, NULL };
}

SHK_NOINLINE static ans tc_record(checker *c, cap *prior, const shk__expr *e)
{
  bool ok = true, typed = true;
  vattr *at = shk__arena_alloc(c->a, (e->n_items ? e->n_items : 1) * sizeof *at);
  for (size_t i = 0; i < e->n_items; i++) {
    ans x = tc(c, prior, e->items[i]);
    ok = ok && x.ok;
    typed = typed && x.t;
    at[i] = (vattr){ e->keys[i], x.t, true };
  }
  if (!typed)
    return fail_ans(NULL);
  /* Sorted by name, as schema records are, so that equal record types
   * compare attribute by attribute. */
  for (size_t i = 1; i < e->n_items; i++)
    for (size_t j = i; j > 0 && shk__str_cmp(at[j - 1].name, at[j].name) > 0; j--) {
      vattr tmp = at[j];
      at[j] = at[j - 1];
      at[j - 1] = tmp;
    }
  vtype *t = shk__arena_calloc(c->a, sizeof *t);
  t->k = VT_RECORD;
  t->attrs = at;
  t->n_attrs = e->n_items;
  return (ans){ t, ok, NULL };
}

/* The tag type of an entity type, or NULL when it declares no tags. */
static const vtype *tag_type(checker *c, const vtype *t)
{
  if (t->k != VT_ENTITY)
    return NULL;
  const shk__entity_type *et = shk__schema_entity_type(c->s, t->name);
  return et && et->tags ? conv(c, et->tags) : NULL;
}

/* hasTag and getTag on an entity of any type: the tag types of every
 * entity type that declares some, which must have a common type. */
static const vtype *any_entity_tag_type(checker *c, shk__loc loc, bool *none, bool *ok)
{
  const vtype *r = NULL;
  *none = true;
  for (size_t i = 0; i < c->s->n_etypes; i++) {
    if (!c->s->etypes[i].tags)
      continue;
    const vtype *t = conv(c, c->s->etypes[i].tags);
    *none = false;
    if (!r) {
      r = t;
      continue;
    }
    const vtype *l = lub(c, r, t);
    if (!l) {
      err_incompatible(c, loc, "of tags", r, t);
      *ok = false;
      return NULL;
    }
    r = l;
  }
  return r;
}

SHK_NOINLINE static ans tc_tag(checker *c, cap *prior, const shk__expr *e)
{
  const shk__expr *x = e->items[0], *k = e->items[1];
  ans ex = expect1(c, prior, x, &T_ANY_ENTITY);
  ans ek = expect1(c, prior, k, &T_STRING);
  bool ok = ex.ok && ek.ok;
  /* A key of the wrong type fails the call but, as in the reference, does
   * not hide what is wrong with the access itself. */
  if (!ex.t)
    return fail_ans(NULL);
  bool none = true;
  const vtype *tt = NULL;
  if (ex.t->k == VT_ANY_ENTITY) {
    bool tok = true;
    if (e->fn == SHK__FN_GET_TAG && has_cap(prior, x, (shk__str){ 0 }, k)) {
      tt = any_entity_tag_type(c, e->loc, &none, &tok);
      if (!tok)
        return fail_ans(NULL);
    } else {
      for (size_t i = 0; i < c->s->n_etypes; i++)
        none = none && !c->s->etypes[i].tags;
    }
  } else {
    tt = tag_type(c, ex.t);
    none = !tt;
  }
  bool known = has_cap(prior, x, (shk__str){ 0 }, k);
  if (e->fn == SHK__FN_HAS_TAG) {
    const vtype *t = none ? &T_FALSE : known ? &T_TRUE : &T_BOOL;
    return (ans){ t, ok, one_cap(c, x, (shk__str){ 0 }, k) };
  }
  char tb[256];
  if (!known) {
    verr(c, e->loc, "unsafe access to a tag of %s: guard it with `hasTag` first",
         tn(tb, sizeof tb, ex.t));
    return fail_ans(NULL);
  }
  if (none) {
    verr(c, e->loc, "%s declares no tags", tn(tb, sizeof tb, ex.t));
    return fail_ans(NULL);
  }
  return (ans){ tt, ok, NULL };
}

/* The validator's type for each value kind an extension function takes
 * or returns. */
static const vtype *const ext_type[] = {
  [SHK__V_BOOL] = &T_BOOL,         [SHK__V_LONG] = &T_LONG,
  [SHK__V_STRING] = &T_STRING,     [SHK__V_IP] = &T_IPADDR,
  [SHK__V_DECIMAL] = &T_DECIMAL,   [SHK__V_DATETIME] = &T_DATETIME,
  [SHK__V_DURATION] = &T_DURATION,
};

SHK_NOINLINE static ans tc_ext(checker *c, cap *prior, const shk__expr *e)
{
  const shk__ext_sig *sig = shk__ext_signature(e->fn);
  if (!sig) {
    verr(c, e->loc, "unknown function `%s`", shk__fn_name(e->fn));
    for (size_t i = 0; i < e->n_items; i++)
      tc(c, prior, e->items[i]);
    return fail_ans(NULL);
  }
  bool failed = false, constructor = sig->args[0] == SHK__V_STRING;
  const vtype *ret = ext_type[sig->ret];
  if (e->n_items != sig->n_args) {
    verr(c, e->loc, "`%s` takes %zu argument%s, not %zu", shk__fn_name(e->fn), sig->n_args,
         sig->n_args == 1 ? "" : "s", e->n_items);
    failed = true;
  }
  /* A constructor's literal is parsed only when the count is right, and
   * in strict mode its argument must be a literal. */
  if (constructor && e->n_items == sig->n_args) {
    const shk__expr *x = e->items[0];
    if (x->kind == SHK__E_STRING && !shk__ext_literal_ok(e->fn, x->s)) {
      char lb[128];
      verr(c, e->loc, "`%s(\"%s\")` is not a valid %s literal", shk__fn_name(e->fn),
           esc(lb, sizeof lb, x->s), shk__fn_name(e->fn));
      failed = true;
    }
  }
  for (size_t i = 0; constructor && i < e->n_items; i++)
    if (!is_literal(e->items[i])) {
      verr(c, e->loc, "`%s` must be called on a string literal in strict mode, not an expression",
           shk__fn_name(e->fn));
      failed = true;
      break;
    }
  if (failed) {
    for (size_t i = 0; i < e->n_items; i++)
      tc(c, prior, e->items[i]);
    return fail_ans(ret);
  }
  bool ok = true;
  for (size_t i = 0; i < e->n_items; i++)
    ok = expect1(c, prior, e->items[i], ext_type[sig->args[i]]).ok && ok;
  return (ans){ ret, ok, NULL };
}

SHK_NOINLINE static ans tc_call(checker *c, cap *prior, const shk__expr *e)
{
  switch (e->fn) {
  case SHK__FN_CONTAINS:
  case SHK__FN_CONTAINS_ALL:
  case SHK__FN_CONTAINS_ANY: {
    if (e->n_items != 2)
      break;
    ans s = expect1(c, prior, e->items[0], &T_ANY_SET);
    ans x = e->fn == SHK__FN_CONTAINS ? tc(c, prior, e->items[1])
                                       : expect1(c, prior, e->items[1], &T_ANY_SET);
    bool ok = s.ok && x.ok;
    if (e->fn == SHK__FN_CONTAINS)
      ok = strict_eq(c, e->loc, "in contains", &T_BOOL, s.t ? s.t->elem : NULL, x.t) && ok;
    else
      ok = strict_eq(c, e->loc, e->fn == SHK__FN_CONTAINS_ALL ? "in containsAll" : "in containsAny",
                     &T_BOOL, s.t, x.t) && ok;
    return (ans){ &T_BOOL, ok, NULL };
  }
  case SHK__FN_IS_EMPTY: {
    if (e->n_items != 1)
      break;
    ans s = expect1(c, prior, e->items[0], &T_ANY_SET);
    return (ans){ &T_BOOL, s.ok, NULL };
  }
  case SHK__FN_GET_TAG:
  case SHK__FN_HAS_TAG:
    if (e->n_items != 2)
      break;
    return tc_tag(c, prior, e);
  case SHK__FN_IP:
  case SHK__FN_DECIMAL:
  case SHK__FN_DATETIME:
  case SHK__FN_DURATION:
  case SHK__FN_IS_IPV4:
  case SHK__FN_IS_IPV6:
  case SHK__FN_IS_LOOPBACK:
  case SHK__FN_IS_MULTICAST:
  case SHK__FN_IS_IN_RANGE:
  case SHK__FN_LESS_THAN:
  case SHK__FN_LESS_THAN_OR_EQUAL:
  case SHK__FN_GREATER_THAN:
  case SHK__FN_GREATER_THAN_OR_EQUAL:
  case SHK__FN_OFFSET:
  case SHK__FN_DURATION_SINCE:
  case SHK__FN_TO_DATE:
  case SHK__FN_TO_TIME:
  case SHK__FN_TO_DAYS:
  case SHK__FN_TO_HOURS:
  case SHK__FN_TO_MINUTES:
  case SHK__FN_TO_SECONDS:
  case SHK__FN_TO_MILLISECONDS:
  case SHK__FN__COUNT:
    return tc_ext(c, prior, e);
  }
  verr(c, e->loc, "`%s` takes %s argument%s", shk__fn_name(e->fn),
       e->fn == SHK__FN_IS_EMPTY ? "no" : "one", e->fn == SHK__FN_IS_EMPTY ? "s" : "");
  return fail_ans(NULL);
}

SHK_NOINLINE static ans tc_if(checker *c, cap *prior, const shk__expr *e)
{
  ans g = expect1(c, prior, e->a, &T_BOOL);
  if (g.t && g.t->k == VT_TRUE) {
    ans t = tc(c, cap_union(c, prior, g.caps), e->b);
    return (ans){ t.t, g.ok && t.ok, cap_union(c, t.caps, g.caps) };
  }
  if (g.t && g.t->k == VT_FALSE) {
    ans f = tc(c, prior, e->c);
    return (ans){ f.t, g.ok && f.ok, f.caps };
  }
  ans t = tc(c, cap_union(c, prior, g.caps), e->b);
  if (t.ok)
    t.caps = cap_union(c, t.caps, g.caps);
  ans f = tc(c, prior, e->c);
  if (!t.t || !f.t)
    return fail_ans(NULL);
  const vtype *l = lub(c, t.t, f.t);
  if (!l) {
    err_incompatible(c, e->loc, "in the branches of if", t.t, f.t);
    return fail_ans(NULL);
  }
  return (ans){ l, g.ok && t.ok && f.ok, cap_intersect(c, f.caps, t.caps, NULL) };
}

SHK_NOINLINE static ans tc_and(checker *c, cap *prior, const shk__expr *e)
{
  ans l = expect1(c, prior, e->a, &T_BOOL);
  if (l.t && l.t->k == VT_FALSE)
    return (ans){ &T_FALSE, l.ok, NULL };
  ans r = expect1(c, cap_union(c, prior, l.caps), e->b, &T_BOOL);
  bool ok = l.ok && r.ok;
  if (!l.t || !r.t)
    return fail_ans(&T_BOOL);
  if (r.t->k == VT_FALSE)
    return (ans){ &T_FALSE, ok, NULL };
  if (r.t->k == VT_TRUE)
    return (ans){ l.t, ok, cap_union(c, l.caps, r.caps) };
  if (l.t->k == VT_TRUE)
    return (ans){ r.t, ok, r.caps };
  return (ans){ &T_BOOL, ok, cap_union(c, l.caps, r.caps) };
}

SHK_NOINLINE static ans tc_or(checker *c, cap *prior, const shk__expr *e)
{
  ans l = expect1(c, prior, e->a, &T_BOOL);
  if (l.t && l.t->k == VT_TRUE)
    return (ans){ &T_TRUE, l.ok, l.caps };
  ans r = expect1(c, prior, e->b, &T_BOOL);
  bool ok = l.ok && r.ok;
  if (!l.t || !r.t)
    return fail_ans(&T_BOOL);
  if (r.t->k == VT_TRUE)
    return (ans){ &T_TRUE, ok, r.caps };
  if (r.t->k == VT_FALSE)
    return (ans){ l.t, ok, l.caps };
  if (l.t->k == VT_FALSE)
    return (ans){ r.t, ok, r.caps };
  return (ans){ &T_BOOL, ok, cap_intersect(c, r.caps, l.caps, NULL) };
}

static const vtype *negate(const vtype *t)
{
  return t->k == VT_TRUE ? &T_FALSE : t->k == VT_FALSE ? &T_TRUE : &T_BOOL;
}

static ans tc_inner(checker *c, cap *prior, const shk__expr *e)
{
  switch (e->kind) {
  case SHK__E_BOOL: return ok_ans(single_bool(e->bval));
  case SHK__E_LONG: return ok_ans(&T_LONG);
  case SHK__E_STRING: return ok_ans(&T_STRING);
  case SHK__E_ENTITY:
    /* Unknown types and actions are reported by the names pass; here they
     * only fail. */
    if (is_action_type(e->uid.type))
      return shk__schema_action(c->s, e->uid) ? ok_ans(entity_type(c, e->uid.type)) : fail_ans(NULL);
    return shk__schema_entity_type(c->s, e->uid.type) ? ok_ans(entity_type(c, e->uid.type))
                                                      : fail_ans(NULL);
  case SHK__E_VAR:
    switch (e->var) {
    case SHK__VAR_PRINCIPAL: return ok_ans(entity_type(c, c->env->principal));
    case SHK__VAR_RESOURCE: return ok_ans(entity_type(c, c->env->resource));
    case SHK__VAR_ACTION: return ok_ans(action_var_type(c));
    case SHK__VAR_CONTEXT: return ok_ans(c->context);
    }
    return fail_ans(NULL);
  case SHK__E_SLOT: {
    shk__str t = e->slot == SHK__SLOT_PRINCIPAL ? c->env->pslot : c->env->rslot;
    return ok_ans(t.n ? entity_type(c, t) : &T_ANY_ENTITY);
  }
  case SHK__E_NOT: {
    ans x = expect1(c, prior, e->a, &T_BOOL);
    return x.t ? (ans){ negate(x.t), x.ok, NULL } : fail_ans(&T_BOOL);
  }
  case SHK__E_NEG: {
    ans x = expect1(c, prior, e->a, &T_LONG);
    return (ans){ &T_LONG, x.ok, NULL };
  }
  case SHK__E_AND: return tc_and(c, prior, e);
  case SHK__E_OR: return tc_or(c, prior, e);
  case SHK__E_EQ: return tc_eq(c, prior, e);
  case SHK__E_NE: {
    /* a != b is !(a == b). */
    ans x = tc_eq(c, prior, e);
    return (ans){ negate(x.t), x.ok, NULL };
  }
  case SHK__E_LT:
  case SHK__E_LE:
  case SHK__E_GT:
  case SHK__E_GE:
    return tc_compare(c, prior, e);
  case SHK__E_ADD:
  case SHK__E_SUB:
  case SHK__E_MUL: {
    ans l = expect1(c, prior, e->a, &T_LONG);
    ans r = expect1(c, prior, e->b, &T_LONG);
    return (ans){ &T_LONG, l.ok && r.ok, NULL };
  }
  case SHK__E_IN: return tc_in(c, prior, e);
  case SHK__E_IF: return tc_if(c, prior, e);
  case SHK__E_HAS: return tc_has(c, prior, e);
  case SHK__E_GETATTR: return tc_getattr(c, prior, e);
  case SHK__E_LIKE: {
    ans x = expect1(c, prior, e->a, &T_STRING);
    return (ans){ &T_BOOL, x.ok, NULL };
  }
  case SHK__E_IS: {
    ans x = expect1(c, prior, e->a, &T_ANY_ENTITY);
    if (!x.t)
      return fail_ans(&T_BOOL);
    if (x.t->k == VT_ENTITY)
      return (ans){ single_bool(shk__str_eq(x.t->name, e->s)), x.ok, NULL };
    if (x.t->k == VT_ANY_ENTITY)
      return (ans){ &T_BOOL, x.ok, NULL };
    return fail_ans(&T_BOOL);
  }
  case SHK__E_SET: return tc_set(c, prior, e);
  case SHK__E_RECORD: return tc_record(c, prior, e);
  case SHK__E_CALL: return tc_call(c, prior, e);
  }
  verr(c, e->loc, "unsupported expression");
  return fail_ans(NULL);
}

/* A failed answer grants nothing, as in the reference. */
static ans tc(checker *c, cap *prior, const shk__expr *e)
{
  if (c->depth >= MAX_DEPTH) {
    verr(c, e->loc, "expression nested too deeply to check (more than %d levels)", MAX_DEPTH);
    return fail_ans(NULL);
  }
  c->depth++;
  ans r = tc_inner(c, prior, e);
  c->depth--;
  if (!r.ok)
    r.caps = NULL;
  return r;
}

/* ---------------------------------------------------------------- the policy condition */

static shk__expr *mk(checker *c, shk__expr_kind k, shk__loc loc)
{
  shk__expr *e = shk__arena_calloc(c->pa, sizeof *e);
  e->kind = k;
  e->loc = loc;
  return e;
}

static shk__expr *mk2(checker *c, shk__expr_kind k, shk__loc loc, shk__expr *a, shk__expr *b)
{
  shk__expr *e = mk(c, k, loc);
  e->a = a;
  e->b = b;
  return e;
}

static shk__expr *mk_var(checker *c, shk__var v, shk__loc loc)
{
  shk__expr *e = mk(c, SHK__E_VAR, loc);
  e->var = v;
  return e;
}

static shk__expr *mk_uid(checker *c, shk__uid u, shk__loc loc)
{
  shk__expr *e = mk(c, SHK__E_ENTITY, loc);
  e->uid = u;
  return e;
}

static shk__expr *mk_true(checker *c, shk__loc loc)
{
  shk__expr *e = mk(c, SHK__E_BOOL, loc);
  e->bval = true;
  return e;
}

/* The scope constraint on one variable as an expression, the way the
 * reference turns a scope into the head of the policy's condition. */
static shk__expr *scope_expr(checker *c, const shk__scope *sc, shk__var v, shk__slot slot)
{
  shk__loc loc = sc->loc;
  shk__expr *var = mk_var(c, v, loc), *ent = NULL;
  if (sc->kind == SHK__SC_EQ || sc->kind == SHK__SC_IN || sc->kind == SHK__SC_IS_IN) {
    if (sc->slot) {
      ent = mk(c, SHK__E_SLOT, loc);
      ent->slot = slot;
    } else {
      ent = mk_uid(c, sc->uid, loc);
    }
  }
  switch (sc->kind) {
  case SHK__SC_ANY: return mk_true(c, loc);
  case SHK__SC_EQ: return mk2(c, SHK__E_EQ, loc, var, ent);
  case SHK__SC_IN:
    if (v == SHK__VAR_ACTION) {
      /* action in A is action in [A]. */
      shk__expr *set = mk(c, SHK__E_SET, loc);
      set->items = shk__arena_alloc(c->pa, sizeof *set->items);
      set->items[0] = ent;
      set->n_items = 1;
      ent = set;
    }
    return mk2(c, SHK__E_IN, loc, var, ent);
  case SHK__SC_IS:
  case SHK__SC_IS_IN: {
    shk__expr *is = mk2(c, SHK__E_IS, loc, var, NULL);
    is->s = sc->is_type;
    if (sc->kind == SHK__SC_IS)
      return is;
    return mk2(c, SHK__E_AND, loc, is, mk2(c, SHK__E_IN, loc, mk_var(c, v, loc), ent));
  }
  case SHK__SC_IN_LIST: {
    shk__expr *set = mk(c, SHK__E_SET, loc);
    set->items = shk__arena_alloc(c->pa, (sc->n_uids ? sc->n_uids : 1) * sizeof *set->items);
    for (size_t i = 0; i < sc->n_uids; i++)
      set->items[i] = mk_uid(c, sc->uids[i], loc);
    set->n_items = sc->n_uids;
    return mk2(c, SHK__E_IN, loc, var, set);
  }
  }
  return mk_true(c, loc);
}

static shk__expr *condition(checker *c, const shk__policy *p)
{
  shk__loc loc = p->loc;
  shk__expr *scope = mk2(c, SHK__E_AND, loc,
                         mk2(c, SHK__E_AND, loc,
                             scope_expr(c, &p->principal, SHK__VAR_PRINCIPAL, SHK__SLOT_PRINCIPAL),
                             scope_expr(c, &p->action, SHK__VAR_ACTION, SHK__SLOT_PRINCIPAL)),
                         scope_expr(c, &p->resource, SHK__VAR_RESOURCE, SHK__SLOT_RESOURCE));
  shk__expr *body = NULL;
  for (size_t i = 0; i < p->n_conds; i++) {
    shk__expr *x = p->conds[i].body;
    if (!p->conds[i].is_when)
      x = mk2(c, SHK__E_NOT, p->conds[i].loc, x, NULL);
    body = body ? mk2(c, SHK__E_AND, x->loc, body, x) : x;
  }
  return mk2(c, SHK__E_AND, loc, scope, body ? body : mk_true(c, loc));
}

/* ---------------------------------------------------------------- names pass */

static void check_type_name(checker *c, shk__str t, shk__loc loc)
{
  if (is_action_type(t) || shk__schema_entity_type(c->s, t))
    return;
  char tb[256];
  verr(c, loc, "unrecognized entity type `%s`: the schema does not declare it", esc(tb, sizeof tb, t));
}

static void check_uid(checker *c, shk__uid u, shk__loc loc)
{
  char tb[256], ib[256];
  check_type_name(c, u.type, loc);
  if (is_action_type(u.type)) {
    if (!shk__schema_action(c->s, u))
      verr(c, loc, "unrecognized action `%s::\"%s\"`: the schema does not declare it",
           esc(tb, sizeof tb, u.type), esc(ib, sizeof ib, u.id));
    return;
  }
  const shk__entity_type *et = shk__schema_entity_type(c->s, u.type);
  if (!et || !et->is_enum)
    return;
  for (size_t i = 0; i < et->n_enum_ids; i++)
    if (shk__str_eq(et->enum_ids[i], u.id))
      return;
  verr(c, loc, "`%s::\"%s\"` is not one of the values of the enumerated type `%s`",
       esc(tb, sizeof tb, u.type), esc(ib, sizeof ib, u.id), tb);
}

static void check_names_expr(checker *c, const shk__expr *e, unsigned depth)
{
  /* The types pass reports a tree this deep; stop here without a word. */
  if (!e || depth > MAX_DEPTH)
    return;
  if (e->kind == SHK__E_ENTITY)
    check_uid(c, e->uid, e->loc);
  if (e->kind == SHK__E_IS)
    check_type_name(c, e->s, e->loc);
  check_names_expr(c, e->a, depth + 1);
  check_names_expr(c, e->b, depth + 1);
  check_names_expr(c, e->c, depth + 1);
  for (size_t i = 0; i < e->n_items; i++)
    check_names_expr(c, e->items[i], depth + 1);
}

static void check_names_scope(checker *c, const shk__scope *sc)
{
  if (sc->kind == SHK__SC_IS || sc->kind == SHK__SC_IS_IN)
    check_type_name(c, sc->is_type, sc->loc);
  if ((sc->kind == SHK__SC_EQ || sc->kind == SHK__SC_IN || sc->kind == SHK__SC_IS_IN) && !sc->slot)
    check_uid(c, sc->uid, sc->loc);
  for (size_t i = 0; sc->kind == SHK__SC_IN_LIST && i < sc->n_uids; i++)
    check_uid(c, sc->uids[i], sc->loc);
}

/* ---------------------------------------------------------------- scope pass */

/* Whether entity type `t` satisfies a principal or resource scope. */
static bool scope_allows(checker *c, const shk__scope *sc, shk__str t)
{
  switch (sc->kind) {
  case SHK__SC_ANY: return true;
  case SHK__SC_EQ: return sc->slot || shk__str_eq(sc->uid.type, t);
  case SHK__SC_IN: return sc->slot || etype_descends(c, t, sc->uid.type);
  case SHK__SC_IS:
    return shk__str_eq(sc->is_type, t) && shk__schema_entity_type(c->s, t);
  case SHK__SC_IS_IN:
    if (!shk__str_eq(sc->is_type, t))
      return false;
    return sc->slot ? shk__schema_entity_type(c->s, t) != NULL
                    : etype_descends(c, t, sc->uid.type);
  case SHK__SC_IN_LIST: return false;
  }
  return false;
}

/* Whether action `a` satisfies the action scope. An action list with an
 * undeclared action selects nothing, as in the reference. */
static bool action_allowed(checker *c, const shk__scope *sc, const shk__action *a)
{
  switch (sc->kind) {
  case SHK__SC_ANY: return true;
  case SHK__SC_EQ: return shk__uid_eq(sc->uid, a->uid);
  case SHK__SC_IN: return shk__schema_action(c->s, sc->uid) && action_descends(c, a->uid, sc->uid);
  case SHK__SC_IN_LIST: {
    bool hit = false;
    for (size_t i = 0; i < sc->n_uids; i++) {
      if (!shk__schema_action(c->s, sc->uids[i]))
        return false;
      hit = hit || action_descends(c, a->uid, sc->uids[i]);
    }
    return hit;
  }
  case SHK__SC_IS:
  case SHK__SC_IS_IN:
    return false;
  }
  return false;
}

static void check_applies(checker *c, const shk__policy *p)
{
  for (size_t i = 0; i < c->s->n_actions; i++) {
    const shk__action *a = &c->s->actions[i];
    if (!action_allowed(c, &p->action, a))
      continue;
    bool pr = false, rs = false;
    for (size_t j = 0; j < a->n_principals && !pr; j++)
      pr = scope_allows(c, &p->principal, a->principals[j]);
    for (size_t j = 0; j < a->n_resources && !rs; j++)
      rs = scope_allows(c, &p->resource, a->resources[j]);
    if (pr && rs)
      return;
  }
  verr(c, p->loc,
       "this policy can never apply: no action in its scope applies to a principal and a "
       "resource its scope allows");
}

/* ---------------------------------------------------------------- types pass */

/* The entity types a template slot may be linked to in an environment
 * where the variable has type `var`: for `== ?slot` that type, for
 * `in ?slot` that type and every type it may be a member of. */
static size_t slot_links(checker *c, const shk__scope *sc, shk__str var, shk__str *r)
{
  bool has_slot = (sc->kind == SHK__SC_EQ || sc->kind == SHK__SC_IN || sc->kind == SHK__SC_IS_IN) &&
                  sc->slot;
  size_t n = 0;
  if (!has_slot) {
    r[n++] = (shk__str){ 0 };
  } else if (sc->kind == SHK__SC_EQ) {
    r[n++] = var;
  } else {
    for (size_t i = 0; i < c->s->n_etypes; i++)
      if (!shk__str_eq(c->s->etypes[i].name, var) &&
          etype_descends(c, var, c->s->etypes[i].name))
        r[n++] = c->s->etypes[i].name;
    r[n++] = var;
  }
  return n;
}

/* Everything one environment allocates (types, capabilities) is released
 * before the next, so memory stays proportional to one policy, not to the
 * number of environments. */
static void check_types(checker *c, const shk__policy *p)
{
  const shk__expr *cond = condition(c, p);
  shk__str *ps = shk__arena_alloc(c->pa, (c->s->n_etypes + 1) * sizeof *ps);
  shk__str *rs = shk__arena_alloc(c->pa, (c->s->n_etypes + 1) * sizeof *rs);
  for (size_t i = 0; i < c->s->n_actions; i++) {
    const shk__action *a = &c->s->actions[i];
    if (!a->has_applies_to)
      continue;
    for (size_t j = 0; j < a->n_principals; j++)
      for (size_t k = 0; k < a->n_resources; k++) {
        size_t np = slot_links(c, &p->principal, a->principals[j], ps);
        size_t nr = slot_links(c, &p->resource, a->resources[k], rs);
        for (size_t x = 0; x < np; x++)
          for (size_t y = 0; y < nr; y++) {
            env ev = { a->principals[j], a->resources[k], a, ps[x], rs[y] };
            c->env = &ev;
            c->context = a->context ? conv(c, a->context) : &T_EMPTY_RECORD;
            tc(c, NULL, cond);
            c->env = NULL;
            shk__arena_reset(c->a);
          }
      }
  }
}

/* ---------------------------------------------------------------- entry points */

typedef struct vjob {
  const shk_cedar_policy_set *ps;
  const shk_cedar_schema *schema;
  shk_cedar_validation_result *out;
  shk__arena *a, *pa;
} vjob;

static int check_all(void *ctx)
{
  const vjob *j = ctx;
  size_t n = 0;
  shk__policy *const *pols = shk__policy_set_policies(j->ps, &n);
  for (size_t i = 0; i < n; i++) {
    checker c = { .s = &j->schema->s, .a = j->a, .pa = j->pa, .p = pols[i], .out = j->out };
    check_names_scope(&c, &pols[i]->principal);
    check_names_scope(&c, &pols[i]->action);
    check_names_scope(&c, &pols[i]->resource);
    for (size_t k = 0; k < pols[i]->n_conds; k++)
      check_names_expr(&c, pols[i]->conds[k].body, 0);
    check_applies(&c, pols[i]);
    check_types(&c, pols[i]);
    shk__arena_reset(j->pa);
  }
  return 0;
}

int shk_cedar_validate(const shk_cedar_policy_set *ps, const shk_cedar_schema *schema,
                       shk_cedar_validation_result *out)
{
  if (!ps || !schema || !out)
    return -EINVAL;
  *out = (shk_cedar_validation_result){ 0 };
  vjob j = { ps, schema, out, shk__arena_new(), shk__arena_new() };
  int r = j.a && j.pa ? shk__oom_guard(check_all, &j, NULL) : -ENOMEM;
  shk__arena_free(j.pa);
  shk__arena_free(j.a);
  if (r < 0)
    shk_cedar_validation_result_clear(out);
  return r;
}

void shk_cedar_validation_result_clear(shk_cedar_validation_result *r)
{
  if (!r)
    return;
  for (size_t i = 0; i < r->n_errors; i++) {
    free(r->errors[i].policy_id);
    free(r->errors[i].message);
  }
  free(r->errors);
  *r = (shk_cedar_validation_result){ 0 };
}
