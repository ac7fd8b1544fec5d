/* SPDX-License-Identifier: Apache-2.0 */
/* Policy JSON: the reference's EST format, out and in.
 *
 * Out: each policy's AST as the reference's JSON. In: the JSON is turned
 * into Cedar text (every subexpression parenthesized) and given to the one
 * policy parser, so JSON input is held to exactly the same rules as text
 * (reserved names, literal limits, valid extension calls) with no second
 * implementation of them.
 *
 * Out of memory: each builder of the writer returns a new tree or NULL, and
 * a NULL given to a container makes the container NULL too (json_pack's "o"
 * takes its argument's reference even when it fails), so the failure of any
 * part reaches the top and nothing is left out silently. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cedar/cedar-eval-internal.h"
#include "cedar/cedar-format-internal.h"
#include "common/common.h"

/* ------------------------------------------------------------ out */

static json_t *jstr(shk__str s)
{
  return json_stringn(s.p ? s.p : "", s.n);
}

static json_t *juid(shk__uid u)
{
  return json_pack("{s:o, s:o}", "type", jstr(u.type), "id", jstr(u.id));
}

/* json_dumps() can lose part of the text when its buffer cannot grow, so
 * the text goes to a shk__buf, which remembers a failure. */
static int dump_part(const char *p, size_t n, void *data)
{
  return shk__buf_put(data, p, n);
}

char *shk__json_dumps(const json_t *root)
{
  shk__buf b = { 0 };
  if (!root || json_dump_callback(root, dump_part, &b, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0)
    b.failed = true;
  return shk__buf_take(&b);
}

json_t *shk__json_push(json_t *a, json_t *v)
{
  if (json_array_append_new(a, v) == 0)
    return a;
  json_decref(a);
  return NULL;
}

json_t *shk__json_put(json_t *o, const char *k, size_t n, json_t *v)
{
  if (o && json_object_setn_new_nocheck(o, k, n, v) == 0)
    return o;
  if (!o)
    json_decref(v);
  json_decref(o);
  return NULL;
}

static const char *const var_names[] = { "principal", "action", "resource", "context" };

static json_t *est_expr(const shk__expr *e);

static json_t *bin(const char *op, const shk__expr *e)
{
  return json_pack("{s:{s:o, s:o}}", op, "left", est_expr(e->a), "right", est_expr(e->b));
}

static json_t *est_expr(const shk__expr *e)
{
  switch (e->kind) {
  case SHK__E_BOOL: return json_pack("{s:b}", "Value", e->bval);
  case SHK__E_LONG: return json_pack("{s:I}", "Value", (json_int_t)e->lval);
  case SHK__E_STRING: return json_pack("{s:o}", "Value", jstr(e->s));
  case SHK__E_ENTITY: return json_pack("{s:{s:o}}", "Value", "__entity", juid(e->uid));
  case SHK__E_VAR: return json_pack("{s:s}", "Var", var_names[e->var]);
  case SHK__E_SLOT: return json_pack("{s:s}", "Slot", e->slot == SHK__SLOT_PRINCIPAL ? "?principal" : "?resource");
  case SHK__E_NOT: return json_pack("{s:{s:o}}", "!", "arg", est_expr(e->a));
  case SHK__E_NEG: return json_pack("{s:{s:o}}", "neg", "arg", est_expr(e->a));
  case SHK__E_AND: return bin("&&", e);
  case SHK__E_OR: return bin("||", e);
  case SHK__E_EQ: return bin("==", e);
  case SHK__E_NE: return bin("!=", e);
  case SHK__E_LT: return bin("<", e);
  case SHK__E_LE: return bin("<=", e);
  case SHK__E_GT: return bin(">", e);
  case SHK__E_GE: return bin(">=", e);
  case SHK__E_ADD: return bin("+", e);
  case SHK__E_SUB: return bin("-", e);
  case SHK__E_MUL: return bin("*", e);
  case SHK__E_IN: return bin("in", e);
  case SHK__E_IF:
    return json_pack("{s:{s:o, s:o, s:o}}", "if-then-else", "if", est_expr(e->a), "then", est_expr(e->b),
                     "else", est_expr(e->c));
  case SHK__E_HAS: return json_pack("{s:{s:o, s:o}}", "has", "left", est_expr(e->a), "attr", jstr(e->s));
  case SHK__E_GETATTR: return json_pack("{s:{s:o, s:o}}", ".", "left", est_expr(e->a), "attr", jstr(e->s));
  case SHK__E_IS:
    return json_pack("{s:{s:o, s:o}}", "is", "left", est_expr(e->a), "entity_type", jstr(e->s));
  case SHK__E_LIKE: {
    json_t *pat = json_array();
    for (size_t i = 0; i < e->n_pat && pat;) {
      if (e->pat[i].wildcard) {
        pat = shk__json_push(pat, json_string("Wildcard"));
        i++;
        continue;
      }
      shk__buf run = { 0 };
      for (; i < e->n_pat && !e->pat[i].wildcard; i++)
        shk__buf_put(&run, (const char *)&e->pat[i].byte, 1);
      pat = shk__json_push(pat, run.failed ? NULL : json_pack("{s:s%}", "Literal", run.p, run.len));
      shk__buf_free(&run);
    }
    return json_pack("{s:{s:o, s:o}}", "like", "left", est_expr(e->a), "pattern", pat);
  }
  case SHK__E_SET: {
    json_t *a = json_array();
    for (size_t i = 0; i < e->n_items && a; i++)
      a = shk__json_push(a, est_expr(e->items[i]));
    return json_pack("{s:o}", "Set", a);
  }
  case SHK__E_RECORD: {
    json_t *o = json_object();
    for (size_t i = 0; i < e->n_items && o; i++)
      o = shk__json_put(o, e->keys[i].p, e->keys[i].n, est_expr(e->items[i]));
    return json_pack("{s:o}", "Record", o);
  }
  case SHK__E_CALL: {
    const char *name = shk__fn_name(e->fn);
    /* The set and tag methods are operators in the EST; the rest are
     * extension calls with the receiver as the first argument. */
    if (e->fn == SHK__FN_IS_EMPTY)
      return json_pack("{s:{s:o}}", name, "arg", est_expr(e->items[0]));
    if (e->fn == SHK__FN_CONTAINS || e->fn == SHK__FN_CONTAINS_ALL || e->fn == SHK__FN_CONTAINS_ANY ||
        e->fn == SHK__FN_GET_TAG || e->fn == SHK__FN_HAS_TAG)
      return json_pack("{s:{s:o, s:o}}", name, "left", est_expr(e->items[0]), "right",
                       est_expr(e->items[1]));
    json_t *a = json_array();
    for (size_t i = 0; i < e->n_items && a; i++)
      a = shk__json_push(a, est_expr(e->items[i]));
    return json_pack("{s:o}", name, a);
  }
  }
  return json_null();
}

static json_t *est_scope(const shk__scope *s, const char *slot)
{
  json_t *target = s->slot ? json_pack("{s:s}", "slot", slot) : json_pack("{s:o}", "entity", juid(s->uid));
  switch (s->kind) {
  case SHK__SC_ANY:
    json_decref(target);
    return json_pack("{s:s}", "op", "All");
  case SHK__SC_EQ:
    return shk__json_put(target, "op", 2, json_string("=="));
  case SHK__SC_IN:
    return shk__json_put(target, "op", 2, json_string("in"));
  case SHK__SC_IS:
    json_decref(target);
    return json_pack("{s:s, s:o}", "op", "is", "entity_type", jstr(s->is_type));
  case SHK__SC_IS_IN:
    return json_pack("{s:s, s:o, s:o}", "op", "is", "entity_type", jstr(s->is_type), "in", target);
  case SHK__SC_IN_LIST: {
    json_decref(target);
    json_t *a = json_array();
    for (size_t i = 0; i < s->n_uids && a; i++)
      a = shk__json_push(a, juid(s->uids[i]));
    return json_pack("{s:s, s:o}", "op", "in", "entities", a);
  }
  }
  return json_null();
}

static json_t *est_policy(const shk__policy *p)
{
  json_t *conds = json_array();
  for (size_t i = 0; i < p->n_conds && conds; i++)
    conds = shk__json_push(conds, json_pack("{s:s, s:o}", "kind", p->conds[i].is_when ? "when" : "unless",
                                  "body", est_expr(p->conds[i].body)));
  json_t *o = json_pack("{s:s, s:o, s:o, s:o, s:o}", "effect", p->is_forbid ? "forbid" : "permit",
                        "principal", est_scope(&p->principal, "?principal"), "action",
                        est_scope(&p->action, ""), "resource", est_scope(&p->resource, "?resource"),
                        "conditions", conds);
  if (p->n_annots && o) {
    json_t *an = json_object();
    for (size_t i = 0; i < p->n_annots && an; i++)
      an = shk__json_put(an, p->annots[i].key.p, p->annots[i].key.n, jstr(p->annots[i].value));
    o = shk__json_put(o, "annotations", strlen("annotations"), an);
  }
  return o;
}

char *shk_cedar_policy_set_to_json(const shk_cedar_policy_set *ps)
{
  json_t *stat = json_object(), *tmpl = json_object(), *links = json_array();
  size_t n;
  shk__policy *const *v = shk__policy_set_policies(ps, &n);
  for (size_t i = 0; i < n && stat && tmpl && links; i++) {
    const shk__policy *p = v[i];
    if (p->is_link) {
      json_t *vals = json_object();
      if (p->principal.kind == SHK__SC_EQ || p->principal.kind == SHK__SC_IN || p->principal.kind == SHK__SC_IS_IN)
        vals = shk__json_put(vals, "?principal", strlen("?principal"), juid(p->principal.uid));
      if (p->resource.kind == SHK__SC_EQ || p->resource.kind == SHK__SC_IN || p->resource.kind == SHK__SC_IS_IN)
        vals = shk__json_put(vals, "?resource", strlen("?resource"), juid(p->resource.uid));
      links = shk__json_push(links, json_pack("{s:o, s:o, s:o}", "templateId", jstr(p->template_id), "newId",
                                    jstr(p->id), "values", vals));
    } else if (p->is_template) {
      tmpl = shk__json_put(tmpl, p->id.p, p->id.n, est_policy(p));
    } else {
      stat = shk__json_put(stat, p->id.p, p->id.n, est_policy(p));
    }
  }
  json_t *root = json_pack("{s:o, s:o, s:o}", "staticPolicies", stat, "templates", tmpl, "templateLinks", links);
  if (!root)
    return NULL;
  char *text = shk__json_dumps(root);
  json_decref(root);
  return text;
}

/* ------------------------------------------------------------ in */

/* The tree comes from shk__json_load, whose strings carry an escape for
 * NUL (see entities.c); decode it before writing the string as Cedar. */
static void quote_dec(shk__buf *b, const char *s, size_t n, bool pattern)
{
  shk__buf d = { 0 };
  shk__buf_put(&d, "", 0);
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == 1 && i + 1 < n) {
      c = s[i + 1] == '0' ? '\0' : 1;
      i++;
    }
    shk__buf_put(&d, &c, 1);
  }
  if (d.failed)
    b->failed = true;
  else
    shk__buf_quote(b, d.p, d.len, pattern);
  shk__buf_free(&d);
}

typedef struct rd {
  shk__buf b;
  char err[400];
  int depth;
} rd;

#define FAIL(r, ...) (snprintf((r)->err, sizeof (r)->err, __VA_ARGS__), -EINVAL)

static int rd_expr(rd *r, json_t *j);

/* The one key of a JSON object, or NULL. */
static const char *only_key(json_t *o, json_t **val)
{
  if (!json_is_object(o) || json_object_size(o) != 1)
    return NULL;
  void *it = json_object_iter(o);
  *val = json_object_iter_value(it);
  return json_object_iter_key(it);
}

static int rd_name(rd *r, json_t *j, const char *what)
{
  const char *s = json_string_value(j);
  if (!s || !shk__is_valid_name(s, json_string_length(j)))
    return FAIL(r, "%s: expected an entity type name", what);
  shk__buf_put(&r->b, s, json_string_length(j));
  return 0;
}

static int rd_uid(rd *r, json_t *j, const char *what)
{
  json_t *inner = json_object_get(j, "__entity");
  if (inner)
    j = inner;
  json_t *id = json_object_get(j, "id");
  if (!json_is_object(j) || json_object_size(j) != 2 || !json_is_string(id))
    return FAIL(r, "%s: expected {\"type\": T, \"id\": I}", what);
  if (rd_name(r, json_object_get(j, "type"), what))
    return -EINVAL;
  shk__buf_puts(&r->b, "::");
  quote_dec(&r->b, json_string_value(id), json_string_length(id), false);
  return 0;
}

/* A JSON array as a Cedar set, or a JSON object as a Cedar record, each
 * element written by `item` (a literal value, or an expression). */
static int rd_items(rd *r, json_t *v, int (*item)(rd *, json_t *))
{
  bool rec = json_is_object(v), first = true;
  shk__buf_puts(&r->b, rec ? "{" : "[");
  if (rec) {
    const char *k;
    json_t *e;
    json_object_foreach(v, k, e) {
      shk__buf_puts(&r->b, first ? "" : ", ");
      first = false;
      quote_dec(&r->b, k, strlen(k), false);
      shk__buf_puts(&r->b, ": ");
      if (item(r, e))
        return -EINVAL;
    }
  } else {
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
      shk__buf_puts(&r->b, i ? ", " : "");
      if (item(r, e))
        return -EINVAL;
    }
  }
  shk__buf_puts(&r->b, rec ? "}" : "]");
  return 0;
}

/* A literal in {"Value": X}: the JSON forms of Cedar values. */
static int rd_value(rd *r, json_t *v)
{
  if (json_is_boolean(v)) {
    shk__buf_puts(&r->b, json_is_true(v) ? "true" : "false");
  } else if (json_is_integer(v)) {
    shk__buf_printf(&r->b, "(%" JSON_INTEGER_FORMAT ")", json_integer_value(v));
  } else if (json_is_string(v)) {
    quote_dec(&r->b, json_string_value(v), json_string_length(v), false);
  } else if (json_is_array(v)) {
    return rd_items(r, v, rd_value);
  } else if (json_object_get(v, "__entity")) {
    return rd_uid(r, v, "Value");
  } else if (json_object_get(v, "__extn")) {
    json_t *x = json_object_get(v, "__extn");
    json_t *fn = json_object_get(x, "fn"), *arg = json_object_get(x, "arg");
    if (!json_is_string(fn) || !arg)
      return FAIL(r, "Value: __extn needs fn and arg");
    shk__buf_printf(&r->b, "%s(", json_string_value(fn));
    if (rd_value(r, arg))
      return -EINVAL;
    shk__buf_puts(&r->b, ")");
  } else if (json_is_object(v)) {
    return rd_items(r, v, rd_value);
  } else {
    return FAIL(r, "Value: unsupported JSON value");
  }
  return 0;
}

static int rd_bin(rd *r, json_t *v, const char *op, bool method)
{
  json_t *l = json_object_get(v, "left"), *rt = json_object_get(v, "right");
  if (!l || !rt || json_object_size(v) != 2)
    return FAIL(r, "\"%s\": expected {\"left\", \"right\"}", op);
  shk__buf_puts(&r->b, "(");
  if (rd_expr(r, l))
    return -EINVAL;
  shk__buf_printf(&r->b, method ? ").%s(" : ") %s (", op);
  if (rd_expr(r, rt))
    return -EINVAL;
  shk__buf_puts(&r->b, ")");
  return 0;
}

static int rd_attr(rd *r, json_t *v, const char *op)
{
  json_t *l = json_object_get(v, "left"), *a = json_object_get(v, "attr");
  if (!l || !json_is_string(a) || json_object_size(v) != 2)
    return FAIL(r, "\"%s\": expected {\"left\", \"attr\"}", op);
  shk__buf_puts(&r->b, "(");
  if (rd_expr(r, l))
    return -EINVAL;
  shk__buf_puts(&r->b, !strcmp(op, "has") ? ") has " : ")[");
  quote_dec(&r->b, json_string_value(a), json_string_length(a), false);
  if (strcmp(op, "has"))
    shk__buf_puts(&r->b, "]");
  return 0;
}

static int rd_expr(rd *r, json_t *j)
{
  json_t *v;
  const char *op = only_key(j, &v);
  if (!op)
    return FAIL(r, "expected an expression: an object with one key");
  /* Deep JSON would recurse deeply here and in the parser. */
  if (++r->depth > 512)
    return FAIL(r, "expression nested too deeply");
  int rc = 0;
  static const char *const binops[] = { "==", "!=", "in", "<", "<=", ">", ">=", "&&", "||", "+", "-", "*", NULL };
  static const char *const methods[] = { "contains", "containsAll", "containsAny", "getTag", "hasTag", NULL };
  for (const char *const *p = binops; *p; p++)
    if (!strcmp(op, *p)) {
      rc = rd_bin(r, v, op, false);
      goto out;
    }
  for (const char *const *p = methods; *p; p++)
    if (!strcmp(op, *p)) {
      rc = rd_bin(r, v, op, true);
      goto out;
    }
  if (!strcmp(op, "Value")) {
    rc = rd_value(r, v);
  } else if (!strcmp(op, "Var")) {
    const char *s = json_string_value(v);
    if (!s || (strcmp(s, "principal") && strcmp(s, "action") && strcmp(s, "resource") && strcmp(s, "context")))
      rc = FAIL(r, "Var: expected principal, action, resource or context");
    else
      shk__buf_puts(&r->b, s);
  } else if (!strcmp(op, "Slot")) {
    const char *s = json_string_value(v);
    if (!s || (strcmp(s, "?principal") && strcmp(s, "?resource")))
      rc = FAIL(r, "Slot: expected ?principal or ?resource");
    else
      shk__buf_puts(&r->b, s);
  } else if (!strcmp(op, "!") || !strcmp(op, "neg") || !strcmp(op, "isEmpty")) {
    json_t *arg = json_object_get(v, "arg");
    if (!arg || json_object_size(v) != 1) {
      rc = FAIL(r, "\"%s\": expected {\"arg\"}", op);
    } else {
      shk__buf_puts(&r->b, !strcmp(op, "!") ? "!(" : !strcmp(op, "neg") ? "-(" : "(");
      rc = rd_expr(r, arg);
      shk__buf_puts(&r->b, !strcmp(op, "isEmpty") ? ").isEmpty()" : ")");
    }
  } else if (!strcmp(op, ".") || !strcmp(op, "has")) {
    rc = rd_attr(r, v, op);
  } else if (!strcmp(op, "like")) {
    json_t *l = json_object_get(v, "left"), *pat = json_object_get(v, "pattern");
    if (!l || !json_is_array(pat) || json_object_size(v) != 2) {
      rc = FAIL(r, "like: expected {\"left\", \"pattern\"}");
      goto out;
    }
    shk__buf_puts(&r->b, "(");
    if ((rc = rd_expr(r, l)))
      goto out;
    shk__buf_puts(&r->b, ") like \"");
    size_t i;
    json_t *e;
    json_array_foreach(pat, i, e) {
      json_t *lit = json_object_get(e, "Literal");
      if (json_is_string(e) && !strcmp(json_string_value(e), "Wildcard")) {
        shk__buf_puts(&r->b, "*");
      } else if (json_is_string(lit) && json_object_size(e) == 1) {
        shk__buf q = { 0 };
        quote_dec(&q, json_string_value(lit), json_string_length(lit), true);
        if (q.failed)
          r->b.failed = true;
        else
          shk__buf_put(&r->b, q.p + 1, q.len - 2);
        shk__buf_free(&q);
      } else {
        rc = FAIL(r, "like: pattern elements are \"Wildcard\" or {\"Literal\": S}");
        goto out;
      }
    }
    shk__buf_puts(&r->b, "\"");
  } else if (!strcmp(op, "is")) {
    json_t *l = json_object_get(v, "left"), *in = json_object_get(v, "in");
    if (!l || json_object_size(v) != (in ? 3u : 2u)) {
      rc = FAIL(r, "is: expected {\"left\", \"entity_type\"[, \"in\"]}");
      goto out;
    }
    shk__buf_puts(&r->b, "((");
    if ((rc = rd_expr(r, l)))
      goto out;
    shk__buf_puts(&r->b, ") is ");
    if ((rc = rd_name(r, json_object_get(v, "entity_type"), "is")))
      goto out;
    if (in) {
      shk__buf_puts(&r->b, " in (");
      if ((rc = rd_expr(r, in)))
        goto out;
      shk__buf_puts(&r->b, ")");
    }
    shk__buf_puts(&r->b, ")");
  } else if (!strcmp(op, "if-then-else")) {
    static const char *const parts[] = { "if", "then", "else" };
    if (json_object_size(v) != 3) {
      rc = FAIL(r, "if-then-else: expected {\"if\", \"then\", \"else\"}");
      goto out;
    }
    shk__buf_puts(&r->b, "(");
    for (int k = 0; k < 3 && !rc; k++) {
      json_t *x = json_object_get(v, parts[k]);
      if (!x) {
        rc = FAIL(r, "if-then-else: missing \"%s\"", parts[k]);
        break;
      }
      shk__buf_printf(&r->b, "%s (", parts[k]);
      rc = rd_expr(r, x);
      shk__buf_puts(&r->b, ") ");
    }
    shk__buf_puts(&r->b, ")");
  } else if (!strcmp(op, "Set")) {
    if (!json_is_array(v)) {
      rc = FAIL(r, "Set: expected an array");
      goto out;
    }
    rc = rd_items(r, v, rd_expr);
  } else if (!strcmp(op, "Record")) {
    if (!json_is_object(v)) {
      rc = FAIL(r, "Record: expected an object");
      goto out;
    }
    rc = rd_items(r, v, rd_expr);
  } else if (json_is_array(v)) {
    /* An extension function or method call: {"name": [args]}. The parser
     * decides whether the name exists and in which style it is called. */
    int fn = -1;
    for (int i = 0; i < SHK__FN__COUNT; i++)
      if (!strcmp(op, shk__fn_name((shk__fn)i)))
        fn = i;
    if (fn < 0) {
      rc = FAIL(r, "unknown operator or function \"%s\"", op);
      goto out;
    }
    size_t n = json_array_size(v), first = 0;
    if (!shk__fn_is_constructor((shk__fn)fn)) {
      if (n == 0) {
        rc = FAIL(r, "%s: a method needs its receiver as the first argument", op);
        goto out;
      }
      shk__buf_puts(&r->b, "(");
      if ((rc = rd_expr(r, json_array_get(v, 0))))
        goto out;
      shk__buf_puts(&r->b, ").");
      first = 1;
    }
    shk__buf_printf(&r->b, "%s(", op);
    for (size_t i = first; i < n; i++) {
      if (i > first)
        shk__buf_puts(&r->b, ", ");
      if ((rc = rd_expr(r, json_array_get(v, i))))
        goto out;
    }
    shk__buf_puts(&r->b, ")");
  } else {
    rc = FAIL(r, "unknown operator \"%s\"", op);
  }
out:
  r->depth--;
  return rc;
}

static int rd_scope(rd *r, json_t *s, const char *var)
{
  const char *op = json_string_value(json_object_get(s, "op"));
  shk__buf_puts(&r->b, var);
  if (!op)
    return FAIL(r, "%s: expected {\"op\": ...}", var);
  json_t *ent = json_object_get(s, "entity"), *slot = json_object_get(s, "slot");
  json_t *ents = json_object_get(s, "entities"), *in = json_object_get(s, "in");
  const char *t = !strcmp(op, "All") ? "" : !strcmp(op, "==") ? " == " : !strcmp(op, "in") ? " in "
                : !strcmp(op, "is") ? " is " : NULL;
  if (!t)
    return FAIL(r, "%s: unknown op \"%s\"", var, op);
  shk__buf_puts(&r->b, t);
  if (!strcmp(op, "All"))
    return json_object_size(s) == 1 ? 0 : FAIL(r, "%s: \"All\" takes nothing else", var);
  if (!strcmp(op, "is")) {
    if (rd_name(r, json_object_get(s, "entity_type"), var))
      return -EINVAL;
    if (!in)
      return 0;
    shk__buf_puts(&r->b, " in ");
    s = in;
    ent = json_object_get(s, "entity");
    slot = json_object_get(s, "slot");
    ents = NULL;
  }
  if (ents) {
    if (!json_is_array(ents))
      return FAIL(r, "%s: entities must be an array", var);
    shk__buf_puts(&r->b, "[");
    size_t i;
    json_t *e;
    json_array_foreach(ents, i, e) {
      if (i)
        shk__buf_puts(&r->b, ", ");
      if (rd_uid(r, e, var))
        return -EINVAL;
    }
    shk__buf_puts(&r->b, "]");
    return 0;
  }
  if (slot) {
    const char *sl = json_string_value(slot);
    if (!sl || (strcmp(sl, "?principal") && strcmp(sl, "?resource")))
      return FAIL(r, "%s: slot must be ?principal or ?resource", var);
    shk__buf_puts(&r->b, sl);
    return 0;
  }
  return ent ? rd_uid(r, ent, var) : FAIL(r, "%s: expected an entity or a slot", var);
}

static int rd_policy(rd *r, json_t *p)
{
  static const char *const keys[] = { "effect", "principal", "action", "resource", "conditions", "annotations", NULL };
  const char *k;
  json_t *v;
  json_object_foreach(p, k, v) {
    const char *const *q = keys;
    while (*q && strcmp(*q, k))
      q++;
    if (!*q)
      return FAIL(r, "policy: unknown key \"%s\"", k);
  }
  json_t *an = json_object_get(p, "annotations");
  if (an) {
    if (!json_is_object(an))
      return FAIL(r, "annotations: expected an object");
    json_object_foreach(an, k, v) {
      if (!json_is_string(v) && !json_is_null(v))
        return FAIL(r, "annotation %s: expected a string", k);
      shk__buf_printf(&r->b, "@%s(", k);
      quote_dec(&r->b, json_is_string(v) ? json_string_value(v) : "",
                     json_is_string(v) ? json_string_length(v) : 0, false);
      shk__buf_puts(&r->b, ")\n");
    }
  }
  const char *eff = json_string_value(json_object_get(p, "effect"));
  if (!eff || (strcmp(eff, "permit") && strcmp(eff, "forbid")))
    return FAIL(r, "effect: expected permit or forbid");
  shk__buf_printf(&r->b, "%s (", eff);
  static const char *const vars[] = { "principal", "action", "resource" };
  for (int i = 0; i < 3; i++) {
    json_t *s = json_object_get(p, vars[i]);
    if (!json_is_object(s))
      return FAIL(r, "%s: expected a scope object", vars[i]);
    if (i)
      shk__buf_puts(&r->b, ", ");
    if (rd_scope(r, s, vars[i]))
      return -EINVAL;
  }
  shk__buf_puts(&r->b, ")");
  json_t *conds = json_object_get(p, "conditions");
  if (conds && !json_is_array(conds))
    return FAIL(r, "conditions: expected an array");
  size_t i;
  json_t *c;
  json_array_foreach(conds, i, c) {
    const char *kind = json_string_value(json_object_get(c, "kind"));
    json_t *body = json_object_get(c, "body");
    if (!kind || (strcmp(kind, "when") && strcmp(kind, "unless")) || !body || json_object_size(c) != 2)
      return FAIL(r, "conditions[%zu]: expected {\"kind\": when|unless, \"body\"}", i);
    shk__buf_printf(&r->b, " %s { ", kind);
    if (rd_expr(r, body))
      return -EINVAL;
    shk__buf_puts(&r->b, " }");
  }
  shk__buf_puts(&r->b, ";\n");
  return 0;
}

typedef struct read_job {
  const char *json;
  size_t len;
  shk_error *err;
  json_t *root;
  rd r;
} read_job;

/* Writes the policy text of the JSON into j->r.b; rd's own errors go to
 * j->r.err. Only the load allocates anything an unwind could lose (the
 * text buffer records its own failure). */
static int read_policies(void *ctx)
{
  read_job *j = ctx;
  if (!(j->root = shk__json_load(j->json, j->len, "policy JSON", j->err)))
    return -EINVAL;
  rd *r = &j->r;
  json_t *root = j->root;
  if (json_object_get(root, "effect"))
    return rd_policy(r, root);
  if (!json_is_object(root))
    return FAIL(r, "policy JSON: expected a policy or a policy set object");
  /* A policy set: static policies, then templates. Links are not read
   * here: link them with shk_cedar_policy_set_link. */
  const char *k;
  json_t *v;
  json_object_foreach(root, k, v) {
    if (!strcmp(k, "templateLinks")) {
      if (json_is_array(v) && json_array_size(v))
        return FAIL(r, "templateLinks: link templates with a links file, not in policy JSON");
      continue;
    }
    if (strcmp(k, "staticPolicies") && strcmp(k, "templates"))
      return FAIL(r, "policy set: unknown key \"%s\"", k);
    if (!json_is_object(v))
      return FAIL(r, "%s: expected an object of policies by id", k);
    const char *id;
    json_t *p;
    json_object_foreach(v, id, p) {
      int rc = rd_policy(r, p);
      if (rc)
        return rc;
    }
  }
  return 0;
}

int shk_cedar_policy_set_parse_json(const char *json, size_t len, shk_cedar_policy_set **out,
                                    shk_error *err)
{
  *out = NULL;
  read_job j = { .json = json, .len = len, .err = err };
  int rc = shk__oom_guard(read_policies, &j, err);
  json_decref(j.root);
  if (rc == -EINVAL && j.root)
    shk__cedar_fail(err, "%s", j.r.err);
  else if (rc == 0 && j.r.b.failed)
    rc = shk__error_nomem(err);
  if (rc == 0)
    rc = shk_cedar_policy_set_parse(j.r.b.p ? j.r.b.p : "", j.r.b.len, out, err);
  shk__buf_free(&j.r.b);
  return rc;
}
