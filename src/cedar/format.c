/* SPDX-License-Identifier: Apache-2.0 */
/* The formatter: a policy's AST printed back as Cedar text that parses to
 * the same AST, with no more parentheses than the grammar needs. The EST
 * (policy JSON) writer and reader are in est.c; the reader produces text
 * through the helpers here and the one parser checks it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cedar/cedar-format-internal.h"
#include "cedar/cedar-parse-internal.h"
#include "common/common.h"

/* A Cedar string literal. Bytes are UTF-8 (the parser checked); only what
 * the lexer would misread is escaped. In a `like` pattern a literal star
 * must be written \* so it is not a wildcard. */
void shk__buf_quote(shk__buf *b, const char *s, size_t n, bool pattern)
{
  shk__buf_put(b, "\"", 1);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    switch (c) {
    case '"': shk__buf_puts(b, "\\\""); break;
    case '\\': shk__buf_puts(b, "\\\\"); break;
    case '\n': shk__buf_puts(b, "\\n"); break;
    case '\r': shk__buf_puts(b, "\\r"); break;
    case '\t': shk__buf_puts(b, "\\t"); break;
    case '\0': shk__buf_puts(b, "\\0"); break;
    case '*':
      shk__buf_puts(b, pattern ? "\\*" : "*");
      break;
    default:
      if (c < 0x20 || c == 0x7f)
        shk__buf_printf(b, "\\u{%x}", c);
      else
        shk__buf_put(b, (const char *)&c, 1);
    }
  }
  shk__buf_put(b, "\"", 1);
}

static bool is_ident(shk__str s)
{
  if (s.n == 0 || !(s.p[0] == '_' || (s.p[0] >= 'a' && s.p[0] <= 'z') || (s.p[0] >= 'A' && s.p[0] <= 'Z')))
    return false;
  for (size_t i = 1; i < s.n; i++) {
    char c = s.p[i];
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
      return false;
  }
  return !shk__ident_reserved(s.p, s.n);
}

void shk__buf_uid(shk__buf *b, shk__uid u)
{
  shk__buf_put(b, u.type.p, u.type.n);
  shk__buf_puts(b, "::");
  shk__buf_quote(b, u.id.p, u.id.n, false);
}

/* Binding strength, weakest first; an operand weaker than its context is
 * parenthesized. */
enum { P_IF, P_OR, P_AND, P_REL, P_ADD, P_MUL, P_UNARY, P_MEMBER, P_PRIMARY };

static int prec(const shk__expr *e)
{
  switch (e->kind) {
  case SHK__E_IF: return P_IF;
  case SHK__E_OR: return P_OR;
  case SHK__E_AND: return P_AND;
  case SHK__E_EQ: case SHK__E_NE: case SHK__E_LT: case SHK__E_LE: case SHK__E_GT: case SHK__E_GE:
  case SHK__E_IN: case SHK__E_HAS: case SHK__E_LIKE: case SHK__E_IS:
    return P_REL;
  case SHK__E_ADD: case SHK__E_SUB: return P_ADD;
  case SHK__E_MUL: return P_MUL;
  case SHK__E_NOT: case SHK__E_NEG: return P_UNARY;
  /* A negative literal is written with a minus, which binds as a unary. */
  case SHK__E_LONG: return e->lval < 0 ? P_UNARY : P_PRIMARY;
  case SHK__E_GETATTR: return P_MEMBER;
  case SHK__E_CALL: return shk__fn_is_constructor(e->fn) ? P_PRIMARY : P_MEMBER;
  case SHK__E_BOOL: case SHK__E_STRING: case SHK__E_ENTITY: case SHK__E_VAR: case SHK__E_SLOT:
  case SHK__E_SET: case SHK__E_RECORD:
    return P_PRIMARY;
  }
  return P_PRIMARY;
}

static void expr(shk__buf *b, const shk__expr *e, int ctx);

static void sub(shk__buf *b, const shk__expr *e, int ctx)
{
  bool paren = prec(e) < ctx;
  if (paren)
    shk__buf_puts(b, "(");
  expr(b, e, paren ? P_IF : ctx);
  if (paren)
    shk__buf_puts(b, ")");
}

static const char *const var_names[] = { "principal", "action", "resource", "context" };

static void binop(shk__buf *b, const shk__expr *e, const char *op, int left, int right)
{
  sub(b, e->a, left);
  shk__buf_puts(b, op);
  sub(b, e->b, right);
}

static void expr(shk__buf *b, const shk__expr *e, int ctx)
{
  (void)ctx;
  switch (e->kind) {
  case SHK__E_BOOL:
    shk__buf_puts(b, e->bval ? "true" : "false");
    break;
  case SHK__E_LONG:
    shk__buf_printf(b, "%" PRId64, e->lval);
    break;
  case SHK__E_STRING:
    shk__buf_quote(b, e->s.p, e->s.n, false);
    break;
  case SHK__E_ENTITY:
    shk__buf_uid(b, e->uid);
    break;
  case SHK__E_VAR:
    shk__buf_puts(b, var_names[e->var]);
    break;
  case SHK__E_SLOT:
    shk__buf_puts(b, e->slot == SHK__SLOT_PRINCIPAL ? "?principal" : "?resource");
    break;
  case SHK__E_NOT:
    shk__buf_puts(b, "!");
    sub(b, e->a, P_MEMBER);
    break;
  case SHK__E_NEG:
    /* "-5" would be read back as the literal -5, not as negation. */
    shk__buf_puts(b, "-");
    sub(b, e->a, e->a->kind == SHK__E_LONG ? P_PRIMARY + 1 : P_MEMBER);
    break;
  case SHK__E_AND: binop(b, e, " && ", P_AND, P_REL); break;
  case SHK__E_OR: binop(b, e, " || ", P_OR, P_AND); break;
  case SHK__E_EQ: binop(b, e, " == ", P_ADD, P_ADD); break;
  case SHK__E_NE: binop(b, e, " != ", P_ADD, P_ADD); break;
  case SHK__E_LT: binop(b, e, " < ", P_ADD, P_ADD); break;
  case SHK__E_LE: binop(b, e, " <= ", P_ADD, P_ADD); break;
  case SHK__E_GT: binop(b, e, " > ", P_ADD, P_ADD); break;
  case SHK__E_GE: binop(b, e, " >= ", P_ADD, P_ADD); break;
  case SHK__E_IN: binop(b, e, " in ", P_ADD, P_ADD); break;
  case SHK__E_ADD: binop(b, e, " + ", P_ADD, P_MUL); break;
  case SHK__E_SUB: binop(b, e, " - ", P_ADD, P_MUL); break;
  case SHK__E_MUL: binop(b, e, " * ", P_MUL, P_UNARY); break;
  case SHK__E_IF:
    shk__buf_puts(b, "if ");
    sub(b, e->a, P_IF);
    shk__buf_puts(b, " then ");
    sub(b, e->b, P_IF);
    shk__buf_puts(b, " else ");
    sub(b, e->c, P_IF);
    break;
  case SHK__E_HAS:
    sub(b, e->a, P_ADD);
    shk__buf_puts(b, " has ");
    if (is_ident(e->s))
      shk__buf_put(b, e->s.p, e->s.n);
    else
      shk__buf_quote(b, e->s.p, e->s.n, false);
    break;
  case SHK__E_GETATTR:
    sub(b, e->a, P_MEMBER);
    if (is_ident(e->s)) {
      shk__buf_puts(b, ".");
      shk__buf_put(b, e->s.p, e->s.n);
    } else {
      shk__buf_puts(b, "[");
      shk__buf_quote(b, e->s.p, e->s.n, false);
      shk__buf_puts(b, "]");
    }
    break;
  case SHK__E_LIKE: {
    sub(b, e->a, P_ADD);
    shk__buf_puts(b, " like \"");
    for (size_t i = 0; i < e->n_pat; i++) {
      if (e->pat[i].wildcard) {
        shk__buf_puts(b, "*");
      } else {
        shk__buf tmp = { 0 };
        char c = (char)e->pat[i].byte;
        shk__buf_quote(&tmp, &c, 1, true);
        if (tmp.failed)
          b->failed = true;
        else
          shk__buf_put(b, tmp.p + 1, tmp.len - 2);
        shk__buf_free(&tmp);
      }
    }
    shk__buf_puts(b, "\"");
    break;
  }
  case SHK__E_IS:
    sub(b, e->a, P_ADD);
    shk__buf_puts(b, " is ");
    shk__buf_put(b, e->s.p, e->s.n);
    break;
  case SHK__E_SET:
    shk__buf_puts(b, "[");
    for (size_t i = 0; i < e->n_items; i++) {
      if (i)
        shk__buf_puts(b, ", ");
      sub(b, e->items[i], P_IF);
    }
    shk__buf_puts(b, "]");
    break;
  case SHK__E_RECORD:
    shk__buf_puts(b, "{");
    for (size_t i = 0; i < e->n_items; i++) {
      if (i)
        shk__buf_puts(b, ", ");
      if (is_ident(e->keys[i]))
        shk__buf_put(b, e->keys[i].p, e->keys[i].n);
      else
        shk__buf_quote(b, e->keys[i].p, e->keys[i].n, false);
      shk__buf_puts(b, ": ");
      sub(b, e->items[i], P_IF);
    }
    shk__buf_puts(b, "}");
    break;
  case SHK__E_CALL: {
    size_t first = 0;
    if (!shk__fn_is_constructor(e->fn)) {
      sub(b, e->items[0], P_MEMBER);
      shk__buf_puts(b, ".");
      first = 1;
    }
    shk__buf_puts(b, shk__fn_name(e->fn));
    shk__buf_puts(b, "(");
    for (size_t i = first; i < e->n_items; i++) {
      if (i > first)
        shk__buf_puts(b, ", ");
      sub(b, e->items[i], P_IF);
    }
    shk__buf_puts(b, ")");
    break;
  }
  }
}

static void scope(shk__buf *b, const char *var, const shk__scope *s, const char *slot)
{
  shk__buf_puts(b, var);
  switch (s->kind) {
  case SHK__SC_ANY:
    return;
  case SHK__SC_EQ: case SHK__SC_IN:
    shk__buf_puts(b, s->kind == SHK__SC_EQ ? " == " : " in ");
    break;
  case SHK__SC_IS: case SHK__SC_IS_IN:
    shk__buf_puts(b, " is ");
    shk__buf_put(b, s->is_type.p, s->is_type.n);
    if (s->kind == SHK__SC_IS)
      return;
    shk__buf_puts(b, " in ");
    break;
  case SHK__SC_IN_LIST:
    shk__buf_puts(b, " in [");
    for (size_t i = 0; i < s->n_uids; i++) {
      if (i)
        shk__buf_puts(b, ", ");
      shk__buf_uid(b, s->uids[i]);
    }
    shk__buf_puts(b, "]");
    return;
  }
  if (s->slot)
    shk__buf_puts(b, slot);
  else
    shk__buf_uid(b, s->uid);
}

/* A condition on one line when it is short; otherwise a chain of || (or of
 * &&) at its top is split with one operand per line, which is how people
 * write long conditions and what keeps a diff of one operand one line. */
static void condition(shk__buf *b, const shk__expr *body)
{
  shk__buf one = { 0 };
  expr(&one, body, P_IF);
  if (one.failed) {
    b->failed = true;
    shk__buf_free(&one);
    return;
  }
  if (one.len <= 72 || (body->kind != SHK__E_OR && body->kind != SHK__E_AND)) {
    shk__buf_puts(b, " ");
    shk__buf_put(b, one.p, one.len);
    shk__buf_puts(b, " ");
    shk__buf_free(&one);
    return;
  }
  shk__buf_free(&one);
  /* Left-associative: the chain's operands are the left spine's right
   * children, in reverse. */
  shk__expr_kind k = body->kind;
  size_t n = 1;
  for (const shk__expr *e = body; e->kind == k; e = e->a)
    n++;
  const shk__expr **ops = shk__calloc(n, sizeof *ops);
  if (!ops) {
    b->failed = true;
    return;
  }
  size_t i = n;
  const shk__expr *e = body;
  for (; e->kind == k; e = e->a)
    ops[--i] = e->b;
  ops[--i] = e;
  int level = k == SHK__E_OR ? P_OR : P_AND;
  for (i = 0; i < n; i++) {
    shk__buf_puts(b, i ? "\n  " : "\n  ");
    if (i)
      shk__buf_puts(b, k == SHK__E_OR ? "|| " : "&& ");
    /* The first operand sits on the spine (left side), the others on the
     * right side, which binds one level tighter. */
    sub(b, ops[i], i ? level + 1 : level);
  }
  shk__buf_puts(b, "\n");
  free(ops);
}

void shk__format_policy(shk__buf *b, const shk__policy *p)
{
  for (size_t i = 0; i < p->n_annots; i++) {
    shk__buf_puts(b, "@");
    shk__buf_put(b, p->annots[i].key.p, p->annots[i].key.n);
    shk__buf_puts(b, "(");
    shk__buf_quote(b, p->annots[i].value.p, p->annots[i].value.n, false);
    shk__buf_puts(b, ")\n");
  }
  shk__buf_puts(b, p->is_forbid ? "forbid (\n  " : "permit (\n  ");
  scope(b, "principal", &p->principal, "?principal");
  shk__buf_puts(b, ",\n  ");
  scope(b, "action", &p->action, "");
  shk__buf_puts(b, ",\n  ");
  scope(b, "resource", &p->resource, "?resource");
  shk__buf_puts(b, "\n)");
  for (size_t i = 0; i < p->n_conds; i++) {
    shk__buf_puts(b, p->conds[i].is_when ? "\nwhen {" : "\nunless {");
    condition(b, p->conds[i].body);
    shk__buf_puts(b, "}");
  }
  shk__buf_puts(b, ";\n");
}

char *shk_cedar_policy_set_to_text(const shk_cedar_policy_set *ps)
{
  shk__buf b = { 0 };
  size_t n;
  shk__policy *const *v = shk__policy_set_policies(ps, &n);
  for (size_t i = 0; i < n; i++) {
    /* A link is not policy text: it lives in the links file. */
    if (v[i]->is_link)
      continue;
    if (b.len)
      shk__buf_puts(&b, "\n");
    shk__format_policy(&b, v[i]);
  }
  return shk__buf_take(&b);
}
