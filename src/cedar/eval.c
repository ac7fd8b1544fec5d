/* SPDX-License-Identifier: Apache-2.0 */
/* The evaluator: Cedar's semantics over the policy AST, with each error
 * raised where the reference raises it. Operands are evaluated left to
 * right before their types are checked; && and || short-circuit; scope
 * checks never error. Intermediate sets and records go to the scratch arena,
 * which the authorizer resets between requests. */
#include <string.h>

#include "cedar/cedar-eval-internal.h"


static int type_err(shk__eval *ev, const char *op, const char *want, const shk__value *got)
{
  return shk__fail(&ev->err, SHK__ERR_TYPE, "type error: %s expects %s, got %s", op, want,
                   shk__vkind_name(got->kind));
}

static int want(shk__eval *ev, const char *op, const shk__value *v, shk__vkind k)
{
  return v->kind == k ? 0 : type_err(ev, op, shk__vkind_name(k), v);
}

static int missing_entity(shk__eval *ev, const shk__uid *u)
{
  return shk__fail(&ev->err, SHK__ERR_ENTITY, "entity %.*s::\"%.*s\" does not exist", Q(u->type),
                   Q(u->id));
}

/* The request's own entities are hashed and looked up once per request. */
static uint64_t hash_of(const shk__eval *ev, const shk__uid *u)
{
  for (int i = 0; i < 3; i++)
    if (ev->vars[i].uid == u)
      return ev->var_hash[i];
  return shk__uid_hash(u);
}

static const shk__entity *entity_of(const shk__eval *ev, const shk__uid *u, uint64_t h)
{
  for (int i = 0; i < 3; i++)
    if (ev->vars[i].uid == u)
      return ev->var_ent[i];
  return shk__entities_find(ev->es, u, h);
}

static bool in(const shk__eval *ev, const shk__uid *a, const shk__uid *b)
{
  uint64_t ha = hash_of(ev, a);
  return shk__entities_in(ev->es, entity_of(ev, a, ha), a, ha, b, hash_of(ev, b));
}

static bool like(shk__str s, const shk__pat *pat, size_t np)
{
  /* Greedy matching with one backtrack point: the last `*` seen. */
  size_t p = 0, t = 0, star = (size_t)-1, mark = 0;
  while (t < s.n) {
    if (p < np && !pat[p].wildcard && pat[p].byte == (unsigned char)s.p[t]) {
      p++;
      t++;
    } else if (p < np && pat[p].wildcard) {
      star = p++;
      mark = t;
    } else if (star != (size_t)-1) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < np && pat[p].wildcard)
    p++;
  return p == np;
}

/* Cedar's `in`: the right side is an entity or a set of entities, every
 * element of which must be an entity even when an earlier one matched. */
static int eval_in(shk__eval *ev, const shk__value *l, const shk__value *r, bool *out)
{
  if (l->kind != SHK__V_ENTITY)
    return type_err(ev, "in", "an entity", l);
  if (r->kind == SHK__V_ENTITY) {
    *out = in(ev, l->uid, r->uid);
    return 0;
  }
  if (r->kind != SHK__V_SET)
    return type_err(ev, "in", "an entity or a set of entities", r);
  for (size_t i = 0; i < r->set->n; i++)
    if (r->set->items[i].kind != SHK__V_ENTITY)
      return type_err(ev, "in", "a set of entities", &r->set->items[i]);
  *out = false;
  for (size_t i = 0; i < r->set->n && !*out; i++)
    *out = in(ev, l->uid, r->set->items[i].uid);
  return 0;
}

static int compare(shk__eval *ev, shk__expr_kind k, const shk__value *a, const shk__value *b,
                   bool *out)
{
  /* Longs compare, and so do two datetimes or two durations. */
  bool ok = a->kind == b->kind &&
            (a->kind == SHK__V_LONG || a->kind == SHK__V_DATETIME || a->kind == SHK__V_DURATION);
  if (!ok) {
    if (a->kind != SHK__V_LONG && a->kind != SHK__V_DATETIME && a->kind != SHK__V_DURATION)
      return type_err(ev, "comparison", "long, datetime or duration", a);
    return type_err(ev, "comparison", shk__vkind_name(a->kind), b);
  }
  *out = k == SHK__E_LT   ? a->l < b->l
         : k == SHK__E_LE ? a->l <= b->l
         : k == SHK__E_GT ? a->l > b->l
                          : a->l >= b->l;
  return 0;
}

static int arith(shk__eval *ev, shk__expr_kind k, const shk__value *a, const shk__value *b,
                 int64_t *out)
{
  const char *op = k == SHK__E_ADD ? "+" : k == SHK__E_SUB ? "-" : "*";
  if (a->kind != SHK__V_LONG)
    return type_err(ev, op, "long", a);
  if (b->kind != SHK__V_LONG)
    return type_err(ev, op, "long", b);
  bool of = k == SHK__E_ADD   ? __builtin_add_overflow(a->l, b->l, out)
            : k == SHK__E_SUB ? __builtin_sub_overflow(a->l, b->l, out)
                              : __builtin_mul_overflow(a->l, b->l, out);
  if (of)
    return shk__fail(&ev->err, SHK__ERR_OVERFLOW, "overflow: %lld %s %lld", (long long)a->l, op,
                     (long long)b->l);
  return 0;
}

/* Attribute access (a.x) and presence (a has x) on entities and records. */
static int attr(shk__eval *ev, const shk__value *v, shk__str name, bool has, shk__value *out)
{
  const shk__record *rec;
  if (v->kind == SHK__V_ENTITY) {
    const shk__entity *e = entity_of(ev, v->uid, hash_of(ev, v->uid));
    if (!e) {
      if (has) {
        out->kind = SHK__V_BOOL;
        out->b = false;
        return 0;
      }
      return missing_entity(ev, v->uid);
    }
    rec = &e->attrs;
  } else if (v->kind == SHK__V_RECORD) {
    rec = v->rec;
  } else {
    return type_err(ev, has ? "has" : "attribute access", "an entity or a record", v);
  }
  const shk__value *a = shk__record_get(rec, name);
  if (has) {
    out->kind = SHK__V_BOOL;
    out->b = a != NULL;
    return 0;
  }
  if (!a) {
    if (v->kind == SHK__V_ENTITY)
      return shk__fail(&ev->err, SHK__ERR_ATTR, "entity %.*s::\"%.*s\" has no attribute \"%.*s\"",
                       Q(v->uid->type), Q(v->uid->id), Q(name));
    return shk__fail(&ev->err, SHK__ERR_ATTR, "record has no attribute \"%.*s\"", Q(name));
  }
  *out = *a;
  return 0;
}

static int tag(shk__eval *ev, const shk__value *ent, const shk__value *key, bool has,
               shk__value *out)
{
  const char *op = has ? "hasTag" : "getTag";
  if (ent->kind != SHK__V_ENTITY)
    return type_err(ev, op, "an entity", ent);
  if (key->kind != SHK__V_STRING)
    return type_err(ev, op, "a string", key);
  const shk__entity *e = entity_of(ev, ent->uid, hash_of(ev, ent->uid));
  const shk__value *t = e ? shk__record_get(&e->tags, key->s) : NULL;
  if (has) {
    out->kind = SHK__V_BOOL;
    out->b = t != NULL;
    return 0;
  }
  if (!e)
    return missing_entity(ev, ent->uid);
  if (!t)
    return shk__fail(&ev->err, SHK__ERR_TAG, "entity %.*s::\"%.*s\" has no tag \"%.*s\"",
                     Q(ent->uid->type), Q(ent->uid->id), Q(key->s));
  *out = *t;
  return 0;
}

static int set_method(shk__eval *ev, shk__fn fn, const shk__value *args, size_t n,
                      shk__value *out)
{
  const char *name = shk__fn_name(fn);
  size_t arity = fn == SHK__FN_IS_EMPTY ? 1 : 2;
  if (n != arity)
    return shk__fail(&ev->err, SHK__ERR_TYPE, "%s takes %zu argument%s", name, arity - 1,
                     arity == 2 ? "" : "s");
  if (want(ev, name, &args[0], SHK__V_SET) < 0)
    return -1;
  const shk__set *s = args[0].set;
  out->kind = SHK__V_BOOL;
  if (fn == SHK__FN_IS_EMPTY) {
    out->b = s->n == 0;
    return 0;
  }
  if (fn == SHK__FN_CONTAINS) {
    out->b = shk__set_contains(s, &args[1]);
    return 0;
  }
  if (want(ev, name, &args[1], SHK__V_SET) < 0)
    return -1;
  const shk__set *t = args[1].set;
  if (fn == SHK__FN_CONTAINS_ALL) {
    out->b = true;
    for (size_t i = 0; i < t->n && out->b; i++)
      out->b = shk__set_contains(s, &t->items[i]);
  } else {
    out->b = false;
    for (size_t i = 0; i < t->n && !out->b; i++)
      out->b = shk__set_contains(s, &t->items[i]);
  }
  return 0;
}

static int eval(shk__eval *ev, const shk__expr *e, shk__value *out);

static int eval_bool(shk__eval *ev, const shk__expr *e, const char *op, bool *out)
{
  shk__value v;
  if (eval(ev, e, &v) < 0 || want(ev, op, &v, SHK__V_BOOL) < 0)
    return -1;
  *out = v.b;
  return 0;
}

static int eval_call(shk__eval *ev, const shk__expr *e, shk__value *out)
{
  const shk__value *k = shk__fn_is_constructor(e->fn) ? shk__folded(ev->folds, e) : NULL;
  if (k) {
    *out = *k;
    return 0;
  }
  shk__value local[4];
  shk__value *args = e->n_items <= 4 ? local
                                     : shk__arena_alloc(ev->scratch, e->n_items * sizeof *args);
  for (size_t i = 0; i < e->n_items; i++)
    if (eval(ev, e->items[i], &args[i]) < 0)
      return -1;
  switch (e->fn) {
  case SHK__FN_CONTAINS:
  case SHK__FN_CONTAINS_ALL:
  case SHK__FN_CONTAINS_ANY:
  case SHK__FN_IS_EMPTY:
    return set_method(ev, e->fn, args, e->n_items, out);
  case SHK__FN_GET_TAG:
  case SHK__FN_HAS_TAG:
    if (e->n_items != 2)
      return shk__fail(&ev->err, SHK__ERR_TYPE, "%s takes 1 argument", shk__fn_name(e->fn));
    return tag(ev, &args[0], &args[1], e->fn == SHK__FN_HAS_TAG, out);
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
    break;
  }
  return shk__call_ext(e->fn, args, e->n_items, ev->scratch, out, &ev->err);
}

static int eval_record(shk__eval *ev, const shk__expr *e, shk__value *out)
{
  size_t n = e->n_items;
  shk__str *keys = shk__arena_alloc(ev->scratch, (n ? n : 1) * sizeof *keys);
  shk__value *vals = shk__arena_alloc(ev->scratch, (n ? n : 1) * sizeof *vals);
  for (size_t i = 0; i < n; i++) {
    shk__value v;
    if (eval(ev, e->items[i], &v) < 0)
      return -1;
    /* Insertion by key: record literals are small. Keys are unique. */
    size_t j = i;
    while (j > 0 && shk__str_cmp(keys[j - 1], e->keys[i]) > 0) {
      keys[j] = keys[j - 1];
      vals[j] = vals[j - 1];
      j--;
    }
    keys[j] = e->keys[i];
    vals[j] = v;
  }
  shk__record *r = shk__arena_alloc(ev->scratch, sizeof *r);
  *r = (shk__record){ n, keys, vals };
  out->kind = SHK__V_RECORD;
  out->rec = r;
  return 0;
}

static int eval(shk__eval *ev, const shk__expr *e, shk__value *out)
{
  shk__value a, b;
  bool t = false;
  switch (e->kind) {
  case SHK__E_BOOL:
    out->kind = SHK__V_BOOL;
    out->b = e->bval;
    return 0;
  case SHK__E_LONG:
    out->kind = SHK__V_LONG;
    out->l = e->lval;
    return 0;
  case SHK__E_STRING:
    out->kind = SHK__V_STRING;
    out->s = e->s;
    return 0;
  case SHK__E_ENTITY:
    out->kind = SHK__V_ENTITY;
    out->uid = &e->uid;
    return 0;
  case SHK__E_VAR:
    *out = ev->vars[e->var];
    return 0;
  case SHK__E_SLOT:
    return shk__fail(&ev->err, SHK__ERR_TYPE, "template slot %s is not filled",
                     e->slot == SHK__SLOT_PRINCIPAL ? "?principal" : "?resource");
  case SHK__E_NOT:
    if (eval_bool(ev, e->a, "!", &t) < 0)
      return -1;
    out->kind = SHK__V_BOOL;
    out->b = !t;
    return 0;
  case SHK__E_NEG:
    if (eval(ev, e->a, &a) < 0 || want(ev, "unary -", &a, SHK__V_LONG) < 0)
      return -1;
    if (a.l == INT64_MIN)
      return shk__fail(&ev->err, SHK__ERR_OVERFLOW, "overflow: -(%lld)", (long long)a.l);
    out->kind = SHK__V_LONG;
    out->l = -a.l;
    return 0;
  case SHK__E_AND:
  case SHK__E_OR:
    if (eval_bool(ev, e->a, e->kind == SHK__E_AND ? "&&" : "||", &t) < 0)
      return -1;
    out->kind = SHK__V_BOOL;
    if (t != (e->kind == SHK__E_AND)) {
      out->b = t;
      return 0;
    }
    if (eval_bool(ev, e->b, e->kind == SHK__E_AND ? "&&" : "||", &t) < 0)
      return -1;
    out->b = t;
    return 0;
  case SHK__E_EQ:
  case SHK__E_NE:
    if (eval(ev, e->a, &a) < 0 || eval(ev, e->b, &b) < 0)
      return -1;
    out->kind = SHK__V_BOOL;
    out->b = shk__value_eq(&a, &b) == (e->kind == SHK__E_EQ);
    return 0;
  case SHK__E_LT:
  case SHK__E_LE:
  case SHK__E_GT:
  case SHK__E_GE:
    if (eval(ev, e->a, &a) < 0 || eval(ev, e->b, &b) < 0 || compare(ev, e->kind, &a, &b, &t) < 0)
      return -1;
    out->kind = SHK__V_BOOL;
    out->b = t;
    return 0;
  case SHK__E_ADD:
  case SHK__E_SUB:
  case SHK__E_MUL:
    if (eval(ev, e->a, &a) < 0 || eval(ev, e->b, &b) < 0 || arith(ev, e->kind, &a, &b, &out->l) < 0)
      return -1;
    out->kind = SHK__V_LONG;
    return 0;
  case SHK__E_IN:
    if (eval(ev, e->a, &a) < 0 || eval(ev, e->b, &b) < 0 || eval_in(ev, &a, &b, &t) < 0)
      return -1;
    out->kind = SHK__V_BOOL;
    out->b = t;
    return 0;
  case SHK__E_IF:
    if (eval_bool(ev, e->a, "if", &t) < 0)
      return -1;
    return eval(ev, t ? e->b : e->c, out);
  case SHK__E_HAS:
  case SHK__E_GETATTR:
    if (eval(ev, e->a, &a) < 0)
      return -1;
    return attr(ev, &a, e->s, e->kind == SHK__E_HAS, out);
  case SHK__E_LIKE:
    if (eval(ev, e->a, &a) < 0 || want(ev, "like", &a, SHK__V_STRING) < 0)
      return -1;
    out->kind = SHK__V_BOOL;
    out->b = like(a.s, e->pat, e->n_pat);
    return 0;
  case SHK__E_IS:
    if (eval(ev, e->a, &a) < 0 || want(ev, "is", &a, SHK__V_ENTITY) < 0)
      return -1;
    out->kind = SHK__V_BOOL;
    out->b = shk__str_eq(a.uid->type, e->s);
    return 0;
  case SHK__E_SET: {
    shk__value *items = shk__arena_alloc(ev->scratch, (e->n_items ? e->n_items : 1) * sizeof *items);
    for (size_t i = 0; i < e->n_items; i++)
      if (eval(ev, e->items[i], &items[i]) < 0)
        return -1;
    out->kind = SHK__V_SET;
    out->set = shk__set_make(ev->scratch, items, e->n_items);
    return 0;
  }
  case SHK__E_RECORD:
    return eval_record(ev, e, out);
  case SHK__E_CALL:
    return eval_call(ev, e, out);
  }
  return shk__fail(&ev->err, SHK__ERR_TYPE, "unknown expression");
}

/* One scope constraint on request variable `v`; never an error (an entity
 * missing from the store is `in` only itself). `h` is the hash of the
 * scope's entity, `hl` those of an action list. */
static bool scope_ok(const shk__eval *ev, const shk__scope *sc, shk__var v, uint64_t h,
                     const uint64_t *hl)
{
  const shk__uid *u = ev->vars[v].uid;
  uint64_t hu = ev->var_hash[v];
  const shk__entity *e = ev->var_ent[v];
  switch (sc->kind) {
  case SHK__SC_ANY:
    return true;
  case SHK__SC_EQ:
    return hu == h && shk__uid_eq(*u, sc->uid);
  case SHK__SC_IN:
    return shk__entities_in(ev->es, e, u, hu, &sc->uid, h);
  case SHK__SC_IS:
    return shk__str_eq(u->type, sc->is_type);
  case SHK__SC_IS_IN:
    return shk__str_eq(u->type, sc->is_type) && shk__entities_in(ev->es, e, u, hu, &sc->uid, h);
  case SHK__SC_IN_LIST:
    for (size_t i = 0; i < sc->n_uids; i++)
      if (shk__entities_in(ev->es, e, u, hu, &sc->uids[i], hl[i]))
        return true;
    return false;
  }
  return false;
}

int shk__eval_policy(shk__eval *ev, const shk__policy *p, const shk__scope_hash *h)
{
  if (!scope_ok(ev, &p->principal, SHK__VAR_PRINCIPAL, h->principal, NULL) ||
      !scope_ok(ev, &p->action, SHK__VAR_ACTION, h->action, h->action_list) ||
      !scope_ok(ev, &p->resource, SHK__VAR_RESOURCE, h->resource, NULL))
    return 0;
  ev->err.kind = SHK__ERR_NONE;
  for (size_t i = 0; i < p->n_conds; i++) {
    bool t;
    if (eval_bool(ev, p->conds[i].body, p->conds[i].is_when ? "when" : "unless", &t) < 0)
      return -1;
    if (t != p->conds[i].is_when)
      return 0;
  }
  return 1;
}
