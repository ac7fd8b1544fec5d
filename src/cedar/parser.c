/* SPDX-License-Identifier: Apache-2.0 */
/* The policy parser: text to shk__policy, by recursive descent over the
 * reference grammar (cedar-policy-core's grammar.lalrpop), applying in the
 * same pass the checks the reference makes when it turns its syntax tree
 * into an AST (reserved names, call styles, scope rules, literal limits).
 * Everything is allocated in the caller's arena; a syntax error unwinds with
 * longjmp, which leaks nothing because nothing here is malloc'd. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cedar/cedar-parse-internal.h"

/* Syntactic nesting (parentheses, sets, records, calls) deeper than this is
 * refused rather than risking the parser's own stack; the tree's height is
 * bounded separately by SHK__EXPR_MAX_HEIGHT for those who walk it. */
#define MAX_DEPTH 400

typedef struct parser {
  shk__cursor c;
  shk__arena *a;
  unsigned depth;
  bool in_scope; /* slots are allowed only in the scope */
} parser;

static inline bool at_kw(parser *p, shk__kw kw)
{
  return p->c.t.kind == SHK__TK_IDENT && p->c.t.kw == kw;
}

static shk__str tok_str(parser *p)
{
  return (shk__str){ shk__arena_strndup(p->a, p->c.t.p, p->c.t.n), p->c.t.n };
}

static bool is_cedar_reserved(shk__str s)
{
  return shk__str_eq(s, SHK__STR_LIT("__cedar"));
}

/* ---------------------------------------------------------------- functions */

static const struct {
  const char *name;
  bool constructor;
  int arity; /* -1: not checked by the parser (extension functions) */
} fns[SHK__FN__COUNT] = {
  [SHK__FN_CONTAINS] = { "contains", false, 1 },
  [SHK__FN_CONTAINS_ALL] = { "containsAll", false, 1 },
  [SHK__FN_CONTAINS_ANY] = { "containsAny", false, 1 },
  [SHK__FN_IS_EMPTY] = { "isEmpty", false, 0 },
  [SHK__FN_GET_TAG] = { "getTag", false, 1 },
  [SHK__FN_HAS_TAG] = { "hasTag", false, 1 },
  [SHK__FN_IP] = { "ip", true, -1 },
  [SHK__FN_DECIMAL] = { "decimal", true, -1 },
  [SHK__FN_DATETIME] = { "datetime", true, -1 },
  [SHK__FN_DURATION] = { "duration", true, -1 },
  [SHK__FN_IS_IPV4] = { "isIpv4", false, -1 },
  [SHK__FN_IS_IPV6] = { "isIpv6", false, -1 },
  [SHK__FN_IS_LOOPBACK] = { "isLoopback", false, -1 },
  [SHK__FN_IS_MULTICAST] = { "isMulticast", false, -1 },
  [SHK__FN_IS_IN_RANGE] = { "isInRange", false, -1 },
  [SHK__FN_LESS_THAN] = { "lessThan", false, -1 },
  [SHK__FN_LESS_THAN_OR_EQUAL] = { "lessThanOrEqual", false, -1 },
  [SHK__FN_GREATER_THAN] = { "greaterThan", false, -1 },
  [SHK__FN_GREATER_THAN_OR_EQUAL] = { "greaterThanOrEqual", false, -1 },
  [SHK__FN_OFFSET] = { "offset", false, -1 },
  [SHK__FN_DURATION_SINCE] = { "durationSince", false, -1 },
  [SHK__FN_TO_DATE] = { "toDate", false, -1 },
  [SHK__FN_TO_TIME] = { "toTime", false, -1 },
  [SHK__FN_TO_DAYS] = { "toDays", false, -1 },
  [SHK__FN_TO_HOURS] = { "toHours", false, -1 },
  [SHK__FN_TO_MINUTES] = { "toMinutes", false, -1 },
  [SHK__FN_TO_SECONDS] = { "toSeconds", false, -1 },
  [SHK__FN_TO_MILLISECONDS] = { "toMilliseconds", false, -1 },
};

const char *shk__fn_name(shk__fn fn)
{
  return (unsigned)fn < SHK__FN__COUNT ? fns[fn].name : "?";
}

bool shk__fn_is_constructor(shk__fn fn)
{
  return (unsigned)fn < SHK__FN__COUNT && fns[fn].constructor;
}

static int fn_lookup(shk__str name)
{
  for (int i = 0; i < SHK__FN__COUNT; i++)
    if (strncmp(fns[i].name, name.p, name.n) == 0 && fns[i].name[name.n] == '\0')
      return i;
  return -1;
}

/* ---------------------------------------------------------------- expression results */

/* What a sub-expression is before it is known to be used as a value: the
 * reference lets a bare name, a string literal or a number be something else
 * depending on where it appears (a type after `is`, a pattern after `like`,
 * an attribute name, a function name, a negative literal). */
typedef enum pxk { PX_EXPR, PX_VAR, PX_NAME, PX_STR, PX_NUM, PX_BOOL } pxk;

typedef struct px {
  pxk k;
  shk__loc loc;
  shk__expr *e;    /* EXPR */
  shk__var var;    /* VAR */
  shk__str s;      /* NAME: normalized "A::B"; STR: the raw literal */
  bool qualified;  /* NAME has a "::" */
  bool trailing;   /* NAME was followed by "::" and no identifier */
  shk__str bad;    /* NAME: a reserved component, empty when none */
  uint64_t num;    /* NUM */
  bool bval;       /* BOOL */
} px;

static shk__expr *mk(parser *p, shk__expr_kind k, shk__loc loc)
{
  shk__expr *e = shk__arena_calloc(p->a, sizeof(*e));
  e->kind = k;
  e->loc = loc;
  e->height = 1;
  return e;
}

/* Sets the height of a node whose operands are in place, refusing trees
 * that a recursive walk could not safely descend. */
static shk__expr *grown(parser *p, shk__expr *e)
{
  uint32_t h = 0;
  shk__expr *ops[3] = { e->a, e->b, e->c };
  for (int i = 0; i < 3; i++)
    if (ops[i] && ops[i]->height > h)
      h = ops[i]->height;
  for (size_t i = 0; i < e->n_items; i++)
    if (e->items[i]->height > h)
      h = e->items[i]->height;
  if (h >= SHK__EXPR_MAX_HEIGHT)
    shk__cur_fail(&p->c, e->loc, "expression nested too deeply (more than %d levels)", SHK__EXPR_MAX_HEIGHT);
  e->height = h + 1;
  return e;
}

static shk__expr *mk2(parser *p, shk__expr_kind k, shk__loc loc, shk__expr *a, shk__expr *b)
{
  shk__expr *e = mk(p, k, loc);
  e->a = a;
  e->b = b;
  return grown(p, e);
}

static int cmp_str(const void *x, const void *y)
{
  return shk__str_cmp(*(const shk__str *)x, *(const shk__str *)y);
}

static px px_expr(shk__expr *e)
{
  return (px){ .k = PX_EXPR, .loc = e->loc, .e = e };
}

static shk__str unescape(parser *p, shk__str raw, shk__loc loc)
{
  shk__str out;
  const char *why;
  if (shk__unescape(p->a, raw.p, raw.n, &out, NULL, NULL, &why) < 0)
    shk__cur_fail(&p->c, loc, "invalid string literal \"%.*s\": %s", raw.n > 60 ? 60 : (int)raw.n, raw.p,
                  why);
  return out;
}

static const char *var_name(shk__var v)
{
  switch (v) {
  case SHK__VAR_PRINCIPAL:
    return "principal";
  case SHK__VAR_ACTION:
    return "action";
  case SHK__VAR_RESOURCE:
    return "resource";
  case SHK__VAR_CONTEXT:
    return "context";
  }
  return "?";
}

static void check_name(parser *p, const px *x)
{
  if (x->bad.n) {
    if (is_cedar_reserved(x->bad))
      shk__cur_fail(&p->c, x->loc, "the name `%.*s` contains `__cedar`, which is reserved", (int)x->s.n,
                    x->s.p);
    shk__cur_fail(&p->c, x->loc, "this identifier is reserved and cannot be used: %.*s", (int)x->bad.n,
                  x->bad.p);
  }
}

static shk__expr *to_expr(parser *p, px x)
{
  switch (x.k) {
  case PX_EXPR:
    return x.e;
  case PX_VAR: {
    shk__expr *e = mk(p, SHK__E_VAR, x.loc);
    e->var = x.var;
    return e;
  }
  case PX_NAME:
    check_name(p, &x);
    shk__cur_fail(&p->c, x.loc, "invalid variable: %.*s", (int)x.s.n, x.s.p);
  case PX_STR: {
    shk__expr *e = mk(p, SHK__E_STRING, x.loc);
    e->s = unescape(p, x.s, x.loc);
    return e;
  }
  case PX_NUM: {
    if (x.num > (uint64_t)INT64_MAX)
      shk__cur_fail(&p->c, x.loc, "integer literal `%llu` is too large", (unsigned long long)x.num);
    shk__expr *e = mk(p, SHK__E_LONG, x.loc);
    e->lval = (int64_t)x.num;
    return e;
  }
  case PX_BOOL: {
    shk__expr *e = mk(p, SHK__E_BOOL, x.loc);
    e->bval = x.bval;
    return e;
  }
  }
  shk__cur_fail(&p->c, x.loc, "invalid expression");
}

/* An attribute name as an identifier: reserved words and __cedar are not. */
static void check_attr_ident(parser *p, shk__str s, shk__loc loc)
{
  if (shk__ident_reserved(s.p, s.n))
    shk__cur_fail(&p->c, loc, "this identifier is reserved and cannot be used: %.*s", (int)s.n, s.p);
  if (is_cedar_reserved(s))
    shk__cur_fail(&p->c, loc, "the name `__cedar` contains `__cedar`, which is reserved");
}

/* The key of a record literal: an identifier or a string literal. */
static shk__str to_attr(parser *p, px x)
{
  switch (x.k) {
  case PX_STR:
    return unescape(p, x.s, x.loc);
  case PX_VAR: {
    const char *n = var_name(x.var);
    return (shk__str){ n, strlen(n) };
  }
  case PX_NAME:
    if (x.qualified)
      shk__cur_fail(&p->c, x.loc, "`%.*s` cannot be used as an attribute as it contains a namespace",
                    (int)x.s.n, x.s.p);
    check_attr_ident(p, x.s, x.loc);
    return x.s;
  case PX_BOOL:
    shk__cur_fail(&p->c, x.loc, "this identifier is reserved and cannot be used: %s",
                  x.bval ? "true" : "false");
  case PX_EXPR:
  case PX_NUM:
    break;
  }
  shk__cur_fail(&p->c, x.loc, "invalid attribute name");
}

/* ---------------------------------------------------------------- expressions */

static px parse_expr(parser *p);

static shk__expr *expr(parser *p)
{
  return to_expr(p, parse_expr(p));
}

/* Comma<Expr> up to the closing token, a trailing comma allowed. */
static shk__expr **expr_list(parser *p, shk__tk close, size_t *n)
{
  shk__expr **v = NULL;
  size_t cap = 0;
  *n = 0;
  while (!shk__cur_at(&p->c, close)) {
    *SHK__PUSH(p->a, v, *n, cap) = expr(p);
    if (!shk__cur_accept(&p->c, SHK__TK_COMMA))
      break;
  }
  shk__cur_expect(&p->c, close);
  return v;
}

/* A type or entity path: Ident {"::" Ident}. `first` is its first
 * identifier, already read; stops before what follows a final "::" when that
 * is not an identifier (a string makes it an entity reference, which the
 * caller handles). Records the first component the reference refuses. */
static px parse_path(parser *p, shk__tok first)
{
  px x = { .k = PX_NAME, .loc = first.loc };
  shk__path out = { 0 };
  shk__tok part = first;
  for (;;) {
    shk__str s = { part.p, part.n };
    if (!x.bad.n && (shk__ident_reserved(s.p, s.n) || is_cedar_reserved(s)))
      x.bad = s;
    shk__path_add(p->a, &out, s);
    if (!shk__cur_at(&p->c, SHK__TK_COLONCOLON))
      break;
    shk__cur_next(&p->c);
    if (!shk__cur_at(&p->c, SHK__TK_IDENT)) {
      x.trailing = true;
      break;
    }
    x.qualified = true;
    part = p->c.t;
    shk__cur_next(&p->c);
  }
  x.s = (shk__str){ out.p, out.n };
  return x;
}

/* An entity reference whose type path was just read; the current token is
 * what followed "::". */
static shk__uid finish_ref(parser *p, px *path)
{
  if (shk__cur_at(&p->c, SHK__TK_LBRACE))
    shk__cur_fail(&p->c, path->loc, "invalid entity literal: %.*s::{...}", (int)path->s.n, path->s.p);
  if (!shk__cur_at(&p->c, SHK__TK_STRING))
    shk__cur_unexpected(&p->c);
  check_name(p, path);
  shk__uid u = { .type = path->s };
  u.id = unescape(p, (shk__str){ p->c.t.p, p->c.t.n }, p->c.t.loc);
  shk__cur_next(&p->c);
  return u;
}

static px parse_primary(parser *p)
{
  shk__loc loc = p->c.t.loc;
  switch (p->c.t.kind) {
  case SHK__TK_NUMBER: {
    uint64_t v = 0;
    for (size_t i = 0; i < p->c.t.n; i++) {
      unsigned d = (unsigned)(p->c.t.p[i] - '0');
      if (v > (UINT64_MAX - d) / 10)
        shk__cur_fail(&p->c, loc, "integer parse error: number too large to fit in target type");
      v = v * 10 + d;
    }
    shk__cur_next(&p->c);
    return (px){ .k = PX_NUM, .loc = loc, .num = v };
  }
  case SHK__TK_STRING: {
    px x = { .k = PX_STR, .loc = loc, .s = { p->c.t.p, p->c.t.n } };
    shk__cur_next(&p->c);
    return x;
  }
  case SHK__TK_SLOT: {
    shk__str s = { p->c.t.p, p->c.t.n };
    shk__expr *e = mk(p, SHK__E_SLOT, loc);
    if (shk__str_eq(s, SHK__STR_LIT("?principal")))
      e->slot = SHK__SLOT_PRINCIPAL;
    else if (shk__str_eq(s, SHK__STR_LIT("?resource")))
      e->slot = SHK__SLOT_RESOURCE;
    else
      shk__cur_fail(&p->c, loc, "`%.*s` is not a valid template slot", (int)s.n, s.p);
    if (!p->in_scope)
      shk__cur_fail(&p->c, loc, "found template slot %.*s in a condition clause", (int)s.n, s.p);
    shk__cur_next(&p->c);
    return px_expr(e);
  }
  case SHK__TK_LPAREN: {
    shk__cur_next(&p->c);
    shk__expr *e = expr(p);
    shk__cur_expect(&p->c, SHK__TK_RPAREN);
    return px_expr(e);
  }
  case SHK__TK_LBRACKET: {
    shk__cur_next(&p->c);
    shk__expr *e = mk(p, SHK__E_SET, loc);
    e->items = expr_list(p, SHK__TK_RBRACKET, &e->n_items);
    return px_expr(grown(p, e));
  }
  case SHK__TK_LBRACE: {
    shk__cur_next(&p->c);
    shk__expr *e = mk(p, SHK__E_RECORD, loc);
    size_t cap = 0, kcap = 0, nk = 0;
    while (!shk__cur_at(&p->c, SHK__TK_RBRACE)) {
      if (at_kw(p, SHK__KW_IF))
        shk__cur_fail(&p->c, p->c.t.loc, "this identifier is reserved and cannot be used: if");
      px k = parse_expr(p);
      *SHK__PUSH(p->a, e->keys, nk, kcap) = to_attr(p, k);
      shk__cur_expect(&p->c, SHK__TK_COLON);
      *SHK__PUSH(p->a, e->items, e->n_items, cap) = expr(p);
      if (!shk__cur_accept(&p->c, SHK__TK_COMMA))
        break;
    }
    shk__cur_expect(&p->c, SHK__TK_RBRACE);
    /* Duplicate keys are an error; sort a copy of the keys to find them in
     * n log n rather than comparing every pair. */
    if (nk > 1) {
      shk__str *sorted = shk__arena_alloc(p->a, nk * sizeof(*sorted));
      memcpy(sorted, e->keys, nk * sizeof(*sorted));
      qsort(sorted, nk, sizeof(*sorted), cmp_str);
      for (size_t i = 1; i < nk; i++)
        if (shk__str_eq(sorted[i - 1], sorted[i]))
          shk__cur_fail(&p->c, loc, "duplicate key `%.*s` in record literal", (int)sorted[i].n, sorted[i].p);
    }
    return px_expr(grown(p, e));
  }
  case SHK__TK_IDENT: {
    shk__kw kw = p->c.t.kw;
    shk__tok first = p->c.t;
    shk__cur_next(&p->c);
    if ((kw == SHK__KW_TRUE || kw == SHK__KW_FALSE) && !shk__cur_at(&p->c, SHK__TK_COLONCOLON))
      return (px){ .k = PX_BOOL, .loc = loc, .bval = kw == SHK__KW_TRUE };
    if (kw == SHK__KW_IF && !shk__cur_at(&p->c, SHK__TK_COLONCOLON)) {
      p->c.t = first;
      shk__cur_unexpected(&p->c);
    }
    px x = parse_path(p, first);
    if (x.trailing) {
      shk__expr *e = mk(p, SHK__E_ENTITY, loc);
      e->uid = finish_ref(p, &x);
      return px_expr(e);
    }
    if (!x.qualified) {
      switch (kw) {
      case SHK__KW_PRINCIPAL:
        return (px){ .k = PX_VAR, .loc = loc, .var = SHK__VAR_PRINCIPAL };
      case SHK__KW_ACTION:
        return (px){ .k = PX_VAR, .loc = loc, .var = SHK__VAR_ACTION };
      case SHK__KW_RESOURCE:
        return (px){ .k = PX_VAR, .loc = loc, .var = SHK__VAR_RESOURCE };
      case SHK__KW_CONTEXT:
        return (px){ .k = PX_VAR, .loc = loc, .var = SHK__VAR_CONTEXT };
      case SHK__KW_NONE:
      case SHK__KW_TRUE:
      case SHK__KW_FALSE:
      case SHK__KW_IF:
      case SHK__KW_THEN:
      case SHK__KW_ELSE:
      case SHK__KW_IN:
      case SHK__KW_IS:
      case SHK__KW_HAS:
      case SHK__KW_LIKE:
      case SHK__KW_PERMIT:
      case SHK__KW_FORBID:
      case SHK__KW_WHEN:
      case SHK__KW_UNLESS:
        break;
      }
    }
    return x;
  }
  case SHK__TK_EOF:
  case SHK__TK_AT:
  case SHK__TK_DOT:
  case SHK__TK_COMMA:
  case SHK__TK_SEMI:
  case SHK__TK_COLON:
  case SHK__TK_COLONCOLON:
  case SHK__TK_RPAREN:
  case SHK__TK_RBRACE:
  case SHK__TK_RBRACKET:
  case SHK__TK_EQEQ:
  case SHK__TK_NE:
  case SHK__TK_LT:
  case SHK__TK_LE:
  case SHK__TK_GE:
  case SHK__TK_GT:
  case SHK__TK_OROR:
  case SHK__TK_ANDAND:
  case SHK__TK_PLUS:
  case SHK__TK_MINUS:
  case SHK__TK_STAR:
  case SHK__TK_SLASH:
  case SHK__TK_PERCENT:
  case SHK__TK_BANG:
  case SHK__TK_EQ:
  case SHK__TK_QUESTION:
  case SHK__TK_ERROR:
    break;
  }
  shk__cur_unexpected(&p->c);
}

/* A method call receiver.name(args), the receiver already converted. */
static shk__expr *method_call(parser *p, shk__expr *recv, shk__str name, shk__loc loc)
{
  shk__cur_next(&p->c); /* ( */
  size_t n;
  shk__expr **args = expr_list(p, SHK__TK_RPAREN, &n);
  int fn = fn_lookup(name);
  if (fn < 0)
    shk__cur_fail(&p->c, loc, "`%.*s` is not a valid method", (int)name.n, name.p);
  if (fns[fn].constructor)
    shk__cur_fail(&p->c, loc, "`%s` is a function, not a method", fns[fn].name);
  if (fns[fn].arity >= 0 && (size_t)fns[fn].arity != n)
    shk__cur_fail(&p->c, loc, "call to `%s` requires exactly %d argument%s, but got %zu argument%s",
                  fns[fn].name, fns[fn].arity, fns[fn].arity == 1 ? "" : "s", n, n == 1 ? "" : "s");
  shk__expr *e = mk(p, SHK__E_CALL, loc);
  e->fn = (shk__fn)fn;
  e->n_items = n + 1;
  e->items = shk__arena_alloc(p->a, (n + 1) * sizeof(*e->items));
  e->items[0] = recv;
  if (n)
    memcpy(e->items + 1, args, n * sizeof(*args));
  return grown(p, e);
}

static px parse_member(parser *p)
{
  px x = parse_primary(p);
  for (;;) {
    shk__loc loc = p->c.t.loc;
    if (shk__cur_at(&p->c, SHK__TK_DOT)) {
      shk__cur_next(&p->c);
      if (!shk__cur_at(&p->c, SHK__TK_IDENT))
        shk__cur_unexpected(&p->c);
      shk__str name = { p->c.t.p, p->c.t.n };
      shk__loc nloc = p->c.t.loc;
      shk__cur_next(&p->c);
      shk__expr *recv = to_expr(p, x);
      if (shk__cur_at(&p->c, SHK__TK_LPAREN)) {
        x = px_expr(method_call(p, recv, name, nloc));
        continue;
      }
      check_attr_ident(p, name, nloc);
      shk__expr *e = mk(p, SHK__E_GETATTR, recv->loc);
      e->a = recv;
      e->s = (shk__str){ shk__arena_strndup(p->a, name.p, name.n), name.n };
      x = px_expr(grown(p, e));
    } else if (shk__cur_at(&p->c, SHK__TK_LPAREN)) {
      if (x.k != PX_NAME) {
        if (x.k == PX_VAR)
          shk__cur_fail(&p->c, x.loc, "`%s(...)` is not a valid function call", var_name(x.var));
        shk__cur_fail(&p->c, loc, "this expression cannot be called as a function");
      }
      check_name(p, &x);
      int fn = x.qualified ? -1 : fn_lookup(x.s);
      if (fn < 0)
        shk__cur_fail(&p->c, x.loc, "`%.*s` is not a valid function", (int)x.s.n, x.s.p);
      if (!fns[fn].constructor)
        shk__cur_fail(&p->c, x.loc, "`%s` is a method, not a function", fns[fn].name);
      shk__cur_next(&p->c);
      shk__expr *e = mk(p, SHK__E_CALL, x.loc);
      e->fn = (shk__fn)fn;
      e->items = expr_list(p, SHK__TK_RPAREN, &e->n_items);
      x = px_expr(grown(p, e));
    } else if (shk__cur_at(&p->c, SHK__TK_LBRACKET)) {
      shk__expr *recv = to_expr(p, x);
      shk__cur_next(&p->c);
      px idx = parse_expr(p);
      shk__cur_expect(&p->c, SHK__TK_RBRACKET);
      if (idx.k != PX_STR)
        shk__cur_fail(&p->c, idx.loc, "invalid string literal: only a string literal can index a record");
      shk__expr *e = mk(p, SHK__E_GETATTR, recv->loc);
      e->a = recv;
      e->s = unescape(p, idx.s, idx.loc);
      x = px_expr(grown(p, e));
    } else {
      return x;
    }
  }
}

static px parse_unary(parser *p)
{
  shk__loc loc = p->c.t.loc;
  shk__tk op = p->c.t.kind;
  if (op != SHK__TK_BANG && op != SHK__TK_MINUS)
    return parse_member(p);
  unsigned n = 0;
  while (shk__cur_at(&p->c, op)) {
    shk__cur_next(&p->c);
    n++;
  }
  if (n > 4)
    shk__cur_fail(&p->c, loc, "too many occurrences of `%c`", op == SHK__TK_BANG ? '!' : '-');
  px item = parse_member(p);
  shk__expr *e;
  if (op == SHK__TK_MINUS && item.k == PX_NUM) {
    /* A minus sign directly before a number is part of the literal, so
     * -9223372036854775808 is a valid Long. */
    if (item.num > (uint64_t)INT64_MAX + 1)
      shk__cur_fail(&p->c, item.loc, "integer literal `%llu` is too large", (unsigned long long)item.num);
    e = mk(p, SHK__E_LONG, loc);
    e->lval = item.num == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)item.num;
    n--;
  } else {
    e = to_expr(p, item);
  }
  while (n--)
    e = mk2(p, op == SHK__TK_BANG ? SHK__E_NOT : SHK__E_NEG, loc, e, NULL);
  return px_expr(e);
}

static px parse_mult(parser *p)
{
  px x = parse_unary(p);
  if (!shk__cur_at(&p->c, SHK__TK_STAR) && !shk__cur_at(&p->c, SHK__TK_SLASH) &&
      !shk__cur_at(&p->c, SHK__TK_PERCENT))
    return x;
  shk__expr *e = to_expr(p, x);
  for (;;) {
    shk__loc loc = p->c.t.loc;
    if (shk__cur_at(&p->c, SHK__TK_SLASH))
      shk__cur_fail(&p->c, loc, "division is not supported");
    if (shk__cur_at(&p->c, SHK__TK_PERCENT))
      shk__cur_fail(&p->c, loc, "remainder is not supported");
    if (!shk__cur_accept(&p->c, SHK__TK_STAR))
      return px_expr(e);
    e = mk2(p, SHK__E_MUL, e->loc, e, to_expr(p, parse_unary(p)));
  }
}

static px parse_add(parser *p)
{
  px x = parse_mult(p);
  if (!shk__cur_at(&p->c, SHK__TK_PLUS) && !shk__cur_at(&p->c, SHK__TK_MINUS))
    return x;
  shk__expr *e = to_expr(p, x);
  for (;;) {
    shk__expr_kind k;
    if (shk__cur_accept(&p->c, SHK__TK_PLUS))
      k = SHK__E_ADD;
    else if (shk__cur_accept(&p->c, SHK__TK_MINUS))
      k = SHK__E_SUB;
    else
      return px_expr(e);
    e = mk2(p, k, e->loc, e, to_expr(p, parse_mult(p)));
  }
}

/* The relational operator at the current token, or false. */
static bool relop(parser *p, shk__expr_kind *k)
{
  switch (p->c.t.kind) {
  case SHK__TK_EQEQ: *k = SHK__E_EQ; return true;
  case SHK__TK_NE: *k = SHK__E_NE; return true;
  case SHK__TK_LT: *k = SHK__E_LT; return true;
  case SHK__TK_LE: *k = SHK__E_LE; return true;
  case SHK__TK_GT: *k = SHK__E_GT; return true;
  case SHK__TK_GE: *k = SHK__E_GE; return true;
  case SHK__TK_EQ:
    shk__cur_fail(&p->c, p->c.t.loc, "'=' is not a valid operator in Cedar; did you mean '=='?");
  case SHK__TK_IDENT:
    if (p->c.t.kw == SHK__KW_IN) {
      *k = SHK__E_IN;
      return true;
    }
    return false;
  case SHK__TK_EOF:
  case SHK__TK_NUMBER:
  case SHK__TK_STRING:
  case SHK__TK_SLOT:
  case SHK__TK_AT:
  case SHK__TK_DOT:
  case SHK__TK_COMMA:
  case SHK__TK_SEMI:
  case SHK__TK_COLON:
  case SHK__TK_COLONCOLON:
  case SHK__TK_LPAREN:
  case SHK__TK_RPAREN:
  case SHK__TK_LBRACE:
  case SHK__TK_RBRACE:
  case SHK__TK_LBRACKET:
  case SHK__TK_RBRACKET:
  case SHK__TK_OROR:
  case SHK__TK_ANDAND:
  case SHK__TK_PLUS:
  case SHK__TK_MINUS:
  case SHK__TK_STAR:
  case SHK__TK_SLASH:
  case SHK__TK_PERCENT:
  case SHK__TK_BANG:
  case SHK__TK_QUESTION:
  case SHK__TK_ERROR:
    break;
  }
  return false;
}

/* The type after `is`: a name, which may spell a variable. */
static shk__str type_name(parser *p, px x)
{
  if (x.k == PX_VAR) {
    const char *n = var_name(x.var);
    return (shk__str){ n, strlen(n) };
  }
  if (x.k != PX_NAME)
    shk__cur_fail(&p->c, x.loc, "right hand side of an `is` expression must be an entity type name");
  check_name(p, &x);
  return x.s;
}

/* e has a.b.c, desugared into e has a && e.a has b && e.a.b has c. */
static shk__expr *parse_has(parser *p, shk__expr *target, shk__loc loc)
{
  if (shk__cur_at(&p->c, SHK__TK_STRING)) {
    shk__expr *e = mk(p, SHK__E_HAS, loc);
    e->a = target;
    e->s = unescape(p, (shk__str){ p->c.t.p, p->c.t.n }, p->c.t.loc);
    shk__cur_next(&p->c);
    if (shk__cur_at(&p->c, SHK__TK_DOT) || shk__cur_at(&p->c, SHK__TK_LBRACKET) ||
        shk__cur_at(&p->c, SHK__TK_LPAREN))
      shk__cur_fail(&p->c, loc, "invalid RHS of a `has` operation");
    return grown(p, e);
  }
  if (!shk__cur_at(&p->c, SHK__TK_IDENT))
    shk__cur_unexpected(&p->c);
  shk__expr *result = NULL, *obj = target;
  for (;;) {
    shk__str name = { p->c.t.p, p->c.t.n };
    shk__loc nloc = p->c.t.loc;
    check_attr_ident(p, name, nloc);
    shk__cur_next(&p->c);
    if (shk__cur_at(&p->c, SHK__TK_COLONCOLON))
      shk__cur_fail(&p->c, nloc, "`%.*s::...` cannot be used as an attribute as it contains a namespace",
                    (int)name.n, name.p);
    if (shk__cur_at(&p->c, SHK__TK_LBRACKET) || shk__cur_at(&p->c, SHK__TK_LPAREN))
      shk__cur_fail(&p->c, loc, "invalid RHS of a `has` operation");
    name.p = shk__arena_strndup(p->a, name.p, name.n);
    shk__expr *h = mk(p, SHK__E_HAS, loc);
    h->a = obj;
    h->s = name;
    grown(p, h);
    result = result ? mk2(p, SHK__E_AND, loc, result, h) : h;
    if (!shk__cur_accept(&p->c, SHK__TK_DOT))
      return result;
    if (!shk__cur_at(&p->c, SHK__TK_IDENT))
      shk__cur_unexpected(&p->c);
    shk__expr *g = mk(p, SHK__E_GETATTR, loc);
    g->a = obj;
    g->s = name;
    obj = grown(p, g);
  }
}

static px parse_relation(parser *p)
{
  px x = parse_add(p);
  shk__expr_kind k;
  if (relop(p, &k)) {
    shk__expr *l = to_expr(p, x);
    shk__cur_next(&p->c);
    shk__expr *r = to_expr(p, parse_add(p));
    shk__expr_kind k2;
    if (relop(p, &k2))
      shk__cur_fail(&p->c, p->c.t.loc,
                    "multiple relational operators (>, ==, in, etc.) must be used with parentheses to make "
                    "ordering explicit");
    return px_expr(mk2(p, k, l->loc, l, r));
  }
  if (at_kw(p, SHK__KW_HAS)) {
    shk__expr *l = to_expr(p, x);
    shk__cur_next(&p->c);
    return px_expr(parse_has(p, l, l->loc));
  }
  if (at_kw(p, SHK__KW_LIKE)) {
    shk__expr *l = to_expr(p, x);
    shk__cur_next(&p->c);
    px pat = parse_add(p);
    if (pat.k != PX_STR)
      shk__cur_fail(&p->c, pat.loc, "right hand side of a `like` expression must be a pattern literal");
    shk__expr *e = mk(p, SHK__E_LIKE, l->loc);
    e->a = l;
    const char *why;
    if (shk__unescape(p->a, pat.s.p, pat.s.n, NULL, &e->pat, &e->n_pat, &why) < 0)
      shk__cur_fail(&p->c, pat.loc, "invalid pattern \"%.*s\": %s", pat.s.n > 60 ? 60 : (int)pat.s.n, pat.s.p,
                    why);
    return px_expr(grown(p, e));
  }
  if (at_kw(p, SHK__KW_IS)) {
    shk__expr *l = to_expr(p, x);
    shk__cur_next(&p->c);
    shk__expr *e = mk(p, SHK__E_IS, l->loc);
    e->a = l;
    e->s = type_name(p, parse_add(p));
    grown(p, e);
    if (!at_kw(p, SHK__KW_IN))
      return px_expr(e);
    shk__cur_next(&p->c);
    /* e is T in x is (e is T) && (e in x); the operand is shared, which is
     * safe because the tree is never mutated after parsing. */
    shk__expr *in = mk2(p, SHK__E_IN, l->loc, l, to_expr(p, parse_add(p)));
    return px_expr(mk2(p, SHK__E_AND, l->loc, e, in));
  }
  return x;
}

static px parse_and(parser *p)
{
  px x = parse_relation(p);
  if (!shk__cur_at(&p->c, SHK__TK_ANDAND))
    return x;
  shk__expr *e = to_expr(p, x);
  while (shk__cur_accept(&p->c, SHK__TK_ANDAND))
    e = mk2(p, SHK__E_AND, e->loc, e, to_expr(p, parse_relation(p)));
  return px_expr(e);
}

static px parse_or(parser *p)
{
  px x = parse_and(p);
  if (!shk__cur_at(&p->c, SHK__TK_OROR))
    return x;
  shk__expr *e = to_expr(p, x);
  while (shk__cur_accept(&p->c, SHK__TK_OROR))
    e = mk2(p, SHK__E_OR, e->loc, e, to_expr(p, parse_and(p)));
  return px_expr(e);
}

static px parse_expr(parser *p)
{
  if (++p->depth > MAX_DEPTH)
    shk__cur_fail(&p->c, p->c.t.loc, "expression nested too deeply (more than %d levels)", MAX_DEPTH);
  px x;
  if (at_kw(p, SHK__KW_IF)) {
    shk__loc loc = p->c.t.loc;
    shk__cur_next(&p->c);
    shk__expr *e = mk(p, SHK__E_IF, loc);
    e->a = expr(p);
    if (!at_kw(p, SHK__KW_THEN))
      shk__cur_unexpected(&p->c);
    shk__cur_next(&p->c);
    e->b = expr(p);
    if (!at_kw(p, SHK__KW_ELSE))
      shk__cur_unexpected(&p->c);
    shk__cur_next(&p->c);
    e->c = expr(p);
    x = px_expr(grown(p, e));
  } else {
    x = parse_or(p);
  }
  p->depth--;
  return x;
}

/* ---------------------------------------------------------------- policies */

static bool is_action_type(shk__str t)
{
  return (t.n == 6 || (t.n > 6 && t.p[t.n - 7] == ':')) && memcmp(t.p + t.n - 6, "Action", 6) == 0;
}

static void check_action_uid(parser *p, shk__uid u, shk__loc loc)
{
  if (!is_action_type(u.type))
    shk__cur_fail(&p->c, loc, "expected an entity uid with type `Action` but got `%.*s::\"%.*s\"`",
                  (int)u.type.n, u.type.p, (int)(u.id.n > 60 ? 60 : u.id.n), u.id.p);
}

static const char *const scope_names[] = { "principal", "action", "resource" };

/* One scope element: principal, action or resource with its constraint. */
static void parse_scope(parser *p, int which, shk__scope *sc, bool *has_slot)
{
  shk__loc loc = p->c.t.loc;
  sc->loc = loc;
  if (!shk__cur_at(&p->c, SHK__TK_IDENT))
    shk__cur_unexpected(&p->c);
  shk__kw kw = p->c.t.kw;
  static const shk__kw want[] = { SHK__KW_PRINCIPAL, SHK__KW_ACTION, SHK__KW_RESOURCE };
  if (kw != want[which]) {
    if (kw == SHK__KW_PRINCIPAL || kw == SHK__KW_ACTION || kw == SHK__KW_RESOURCE)
      shk__cur_fail(&p->c, loc, "found the variable `%.*s` where the variable `%s` must be used",
                    (int)p->c.t.n, p->c.t.p, scope_names[which]);
    shk__cur_fail(&p->c, loc, "expected `%s` in the scope, found `%.*s`", scope_names[which], (int)p->c.t.n,
                  p->c.t.p);
  }
  shk__cur_next(&p->c);
  if (shk__cur_at(&p->c, SHK__TK_COLON))
    shk__cur_fail(&p->c, p->c.t.loc, "type constraints using `:` are not supported");
  sc->kind = SHK__SC_ANY;
  if (at_kw(p, SHK__KW_IS)) {
    if (which == 1)
      shk__cur_fail(&p->c, p->c.t.loc, "`is` cannot appear in the action scope");
    shk__cur_next(&p->c);
    sc->kind = SHK__SC_IS;
    sc->is_type = type_name(p, parse_add(p));
  }
  shk__expr_kind op;
  shk__loc oploc = p->c.t.loc;
  if (!relop(p, &op))
    return;
  shk__cur_next(&p->c);
  if (sc->kind == SHK__SC_IS && op != SHK__E_IN)
    shk__cur_fail(&p->c, oploc, "`is` cannot be used together with `%s`",
                  op == SHK__E_EQ ? "==" : "this operator");
  if (op != SHK__E_EQ && op != SHK__E_IN)
    shk__cur_fail(&p->c, oploc, "the scope can only use `==`, `in` and `is`");
  p->in_scope = true;
  shk__loc rloc = p->c.t.loc;
  shk__expr *r = expr(p);
  p->in_scope = false;
  if (which == 1) {
    if (r->kind == SHK__E_SLOT)
      shk__cur_fail(&p->c, rloc, "expected single entity uid or set of entity uids, found template slot");
    if (r->kind == SHK__E_SET) {
      if (op == SHK__E_EQ)
        shk__cur_fail(&p->c, rloc, "expected single entity uid, found set of entity uids");
      sc->kind = SHK__SC_IN_LIST;
      sc->n_uids = r->n_items;
      sc->uids = shk__arena_alloc(p->a, (r->n_items ? r->n_items : 1) * sizeof(*sc->uids));
      for (size_t i = 0; i < r->n_items; i++) {
        if (r->items[i]->kind != SHK__E_ENTITY)
          shk__cur_fail(&p->c, r->items[i]->loc, "expected an entity uid in the action list");
        check_action_uid(p, r->items[i]->uid, r->items[i]->loc);
        sc->uids[i] = r->items[i]->uid;
      }
      return;
    }
    if (r->kind != SHK__E_ENTITY)
      shk__cur_fail(&p->c, rloc, "expected single entity uid or set of entity uids");
    check_action_uid(p, r->uid, rloc);
    sc->kind = op == SHK__E_EQ ? SHK__SC_EQ : SHK__SC_IN;
    sc->uid = r->uid;
    return;
  }
  if (r->kind == SHK__E_SLOT) {
    shk__slot want_slot = which == 0 ? SHK__SLOT_PRINCIPAL : SHK__SLOT_RESOURCE;
    if (r->slot != want_slot)
      shk__cur_fail(&p->c, rloc, "expected an entity uid or matching template slot, found %s instead of %s",
              r->slot == SHK__SLOT_PRINCIPAL ? "?principal" : "?resource",
              which == 0 ? "?principal" : "?resource");
    sc->slot = true;
    *has_slot = true;
  } else if (r->kind == SHK__E_ENTITY) {
    sc->uid = r->uid;
  } else if (r->kind == SHK__E_SET) {
    shk__cur_fail(&p->c, rloc, "expected single entity uid or template slot, found set of entity uids");
  } else {
    shk__cur_fail(&p->c, rloc, "expected an entity uid or matching template slot");
  }
  sc->kind = sc->kind == SHK__SC_IS ? SHK__SC_IS_IN : op == SHK__E_EQ ? SHK__SC_EQ : SHK__SC_IN;
}

static int cmp_annot(const void *x, const void *y)
{
  return shk__str_cmp(((const shk__annotation *)x)->key, ((const shk__annotation *)y)->key);
}

static shk__policy *parse_policy(parser *p, size_t index)
{
  shk__policy *pol = shk__arena_calloc(p->a, sizeof(*pol));
  pol->loc = p->c.t.loc;
  /* "policy" and the index in decimal, without printf on this hot path. */
  char digits[24];
  size_t nd = 0;
  do
    digits[nd++] = (char)('0' + index % 10);
  while ((index /= 10));
  char *id = shk__arena_alloc(p->a, 6 + nd + 1);
  memcpy(id, "policy", 6);
  for (size_t i = 0; i < nd; i++)
    id[6 + i] = digits[nd - 1 - i];
  id[6 + nd] = '\0';
  pol->id = (shk__str){ id, 6 + nd };

  size_t acap = 0;
  while (shk__cur_at(&p->c, SHK__TK_AT)) {
    shk__annotation *an = SHK__PUSH(p->a, pol->annots, pol->n_annots, acap);
    an->loc = p->c.t.loc;
    shk__cur_next(&p->c);
    if (!shk__cur_at(&p->c, SHK__TK_IDENT))
      shk__cur_unexpected(&p->c);
    an->key = tok_str(p);
    shk__cur_next(&p->c);
    an->value = SHK__STR_LIT("");
    if (shk__cur_accept(&p->c, SHK__TK_LPAREN)) {
      if (!shk__cur_at(&p->c, SHK__TK_STRING))
        shk__cur_unexpected(&p->c);
      an->value = unescape(p, (shk__str){ p->c.t.p, p->c.t.n }, p->c.t.loc);
      shk__cur_next(&p->c);
      shk__cur_expect(&p->c, SHK__TK_RPAREN);
    }
  }
  if (pol->n_annots > 1) {
    shk__annotation *sorted = shk__arena_alloc(p->a, pol->n_annots * sizeof(*sorted));
    memcpy(sorted, pol->annots, pol->n_annots * sizeof(*sorted));
    qsort(sorted, pol->n_annots, sizeof(*sorted), cmp_annot);
    for (size_t i = 1; i < pol->n_annots; i++)
      if (shk__str_eq(sorted[i - 1].key, sorted[i].key))
        shk__cur_fail(&p->c, sorted[i].loc, "duplicate annotation: @%.*s", (int)sorted[i].key.n,
                      sorted[i].key.p);
  }

  if (!shk__cur_at(&p->c, SHK__TK_IDENT))
    shk__cur_unexpected(&p->c);
  if (p->c.t.kw != SHK__KW_PERMIT && p->c.t.kw != SHK__KW_FORBID)
    shk__cur_fail(&p->c, p->c.t.loc, "not a valid policy effect: %.*s", (int)p->c.t.n, p->c.t.p);
  pol->is_forbid = p->c.t.kw == SHK__KW_FORBID;
  shk__cur_next(&p->c);
  shk__cur_expect(&p->c, SHK__TK_LPAREN);
  shk__scope *scopes[3] = { &pol->principal, &pol->action, &pol->resource };
  bool has_slot = false;
  for (int i = 0; i < 3; i++) {
    if (shk__cur_at(&p->c, SHK__TK_RPAREN))
      shk__cur_fail(&p->c, p->c.t.loc, "this policy is missing the `%s` variable in the scope",
                    scope_names[i]);
    parse_scope(p, i, scopes[i], &has_slot);
    if (i < 2 && !shk__cur_at(&p->c, SHK__TK_RPAREN))
      shk__cur_expect(&p->c, SHK__TK_COMMA);
  }
  if (shk__cur_accept(&p->c, SHK__TK_COMMA) && !shk__cur_at(&p->c, SHK__TK_RPAREN))
    shk__cur_fail(&p->c, p->c.t.loc, "this policy has an extra element in the scope: %.*s", (int)p->c.t.n,
                  p->c.t.p);
  shk__cur_expect(&p->c, SHK__TK_RPAREN);
  pol->is_template = has_slot;

  size_t ccap = 0;
  while (shk__cur_at(&p->c, SHK__TK_IDENT)) {
    shk__condition *c = SHK__PUSH(p->a, pol->conds, pol->n_conds, ccap);
    c->loc = p->c.t.loc;
    if (p->c.t.kw != SHK__KW_WHEN && p->c.t.kw != SHK__KW_UNLESS)
      shk__cur_fail(&p->c, p->c.t.loc, "not a valid policy condition: %.*s", (int)p->c.t.n, p->c.t.p);
    c->is_when = p->c.t.kw == SHK__KW_WHEN;
    shk__cur_next(&p->c);
    shk__cur_expect(&p->c, SHK__TK_LBRACE);
    if (shk__cur_at(&p->c, SHK__TK_RBRACE))
      shk__cur_fail(&p->c, c->loc, "`%s` condition clause cannot be empty", c->is_when ? "when" : "unless");
    c->body = expr(p);
    shk__cur_expect(&p->c, SHK__TK_RBRACE);
  }
  shk__cur_expect(&p->c, SHK__TK_SEMI);
  return pol;
}

static bool start(parser *p, shk__arena *a, const char *text, size_t len, shk_error *err)
{
  *p = (parser){ .c.err = err, .a = a };
  if (err)
    *err = (shk_error){ 0 };
  if (!shk__utf8_valid(text, len)) {
    shk__error_set(err, -EINVAL, "the text is not valid UTF-8");
    return false;
  }
  shk__lexer_init(&p->c.lx, text, len, false);
  return true;
}

int shk__parse_policies(shk__arena *a, const char *text, size_t len, shk__policy ***out, size_t *n,
                        shk_error *err)
{
  parser p;
  *out = NULL;
  *n = 0;
  if (!start(&p, a, text, len, err))
    return -EINVAL;
  shk__policy **v = NULL;
  size_t nv = 0, cap = 0;
  if (setjmp(p.c.fail))
    return -EINVAL;
  shk__cur_next(&p.c);
  while (!shk__cur_at(&p.c, SHK__TK_EOF)) {
    shk__policy *pol = parse_policy(&p, nv);
    *SHK__PUSH(a, v, nv, cap) = pol;
  }
  *out = v;
  *n = nv;
  return 0;
}

int shk__parse_entity_ref(shk__arena *a, const char *text, size_t len, shk__uid *out, shk_error *err)
{
  parser p;
  if (!start(&p, a, text, len, err))
    return -EINVAL;
  if (setjmp(p.c.fail))
    return -EINVAL;
  shk__cur_next(&p.c);
  if (!shk__cur_at(&p.c, SHK__TK_IDENT))
    shk__cur_fail(&p.c, p.c.t.loc, "expected an entity reference such as User::\"alice\"");
  shk__tok first = p.c.t;
  shk__cur_next(&p.c);
  px x = parse_path(&p, first);
  if (!x.trailing)
    shk__cur_fail(&p.c, p.c.t.loc, "expected an entity reference such as User::\"alice\"");
  *out = finish_ref(&p, &x);
  if (!shk__cur_at(&p.c, SHK__TK_EOF))
    shk__cur_unexpected(&p.c);
  return 0;
}

static bool ident_ok(const char *s, size_t n)
{
  if (!n || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_'))
    return false;
  for (size_t i = 1; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      return false;
  }
  return !shk__ident_reserved(s, n) && !(n == 7 && memcmp(s, "__cedar", 7) == 0);
}

bool shk__is_valid_name(const char *text, size_t len)
{
  size_t i = 0;
  for (;;) {
    size_t j = i;
    while (j < len && text[j] != ':')
      j++;
    if (!ident_ok(text + i, j - i))
      return false;
    if (j == len)
      return true;
    if (j + 1 >= len || text[j + 1] != ':')
      return false;
    i = j + 2;
  }
}

static shk__uid copy_uid(shk__arena *a, shk__uid u)
{
  return (shk__uid){ { shk__arena_strndup(a, u.type.p, u.type.n), u.type.n },
                     { shk__arena_strndup(a, u.id.p, u.id.n), u.id.n } };
}

int shk__link_template(shk__arena *a, const shk__policy *tmpl, shk__str new_id, const shk__uid *principal,
                       const shk__uid *resource, shk__policy **out, shk_error *err)
{
  bool want_p = tmpl->principal.slot, want_r = tmpl->resource.slot;
  if (err)
    *err = (shk_error){ 0 };
  if (!tmpl->is_template) {
    shk__error_set(err, -EINVAL, "`%.*s` is a static policy, not a template", (int)tmpl->id.n,
                   tmpl->id.p);
    return -EINVAL;
  }
  if ((want_p && !principal) || (want_r && !resource)) {
    shk__error_set(err, -EINVAL, "failed to link template: no value provided for `%s`",
                   want_p && !principal ? "?principal" : "?resource");
    return -EINVAL;
  }
  if ((!want_p && principal) || (!want_r && resource)) {
    shk__error_set(err, -EINVAL, "failed to link template: the slot `%s` was given a value but does not exist in the template",
        !want_p && principal ? "?principal" : "?resource");
    return -EINVAL;
  }
  shk__policy *pol = shk__arena_alloc(a, sizeof(*pol));
  *pol = *tmpl;
  pol->id = (shk__str){ shk__arena_strndup(a, new_id.p, new_id.n), new_id.n };
  pol->is_template = false;
  pol->is_link = true;
  pol->template_id = tmpl->id;
  /* The link owns copies of the entity references: the caller's may live
   * in a shorter-lived buffer. */
  if (want_p) {
    pol->principal.slot = false;
    pol->principal.uid = copy_uid(a, *principal);
  }
  if (want_r) {
    pol->resource.slot = false;
    pol->resource.uid = copy_uid(a, *resource);
  }
  *out = pol;
  return 0;
}
