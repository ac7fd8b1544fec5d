/* SPDX-License-Identifier: Apache-2.0 */
/* Runtime values: the total order behind set canonicalisation and equality,
 * record lookup, and the extension functions shared by the evaluator and the
 * JSON __extn escape. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cedar/cedar-eval-internal.h"

const shk__record shk__empty_record = { 0, NULL, NULL };

const char *shk__vkind_name(shk__vkind k)
{
  switch (k) {
  case SHK__V_BOOL: return "bool";
  case SHK__V_LONG: return "long";
  case SHK__V_STRING: return "string";
  case SHK__V_ENTITY: return "entity";
  case SHK__V_SET: return "set";
  case SHK__V_RECORD: return "record";
  case SHK__V_IP: return "ipaddr";
  case SHK__V_DECIMAL: return "decimal";
  case SHK__V_DATETIME: return "datetime";
  case SHK__V_DURATION: return "duration";
  }
  return "?";
}

int shk__fail(shk__eval_error *e, shk__err_kind kind, const char *fmt, ...)
{
  va_list ap;
  e->kind = kind;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
  return -1;
}

void shk__upush_u32(uint32_t **v, uint32_t *n, uint32_t *cap, uint32_t x)
{
  if (*n == *cap) {
    uint32_t c = *cap ? *cap * 2 : 4;
    *v = shk__urealloc(*v, c, sizeof **v);
    *cap = c;
  }
  (*v)[(*n)++] = x;
}

static int cmp_i64(int64_t a, int64_t b)
{
  return a < b ? -1 : a > b;
}

int shk__value_cmp(const shk__value *a, const shk__value *b)
{
  if (a->kind != b->kind)
    return a->kind < b->kind ? -1 : 1;
  switch (a->kind) {
  case SHK__V_BOOL:
    return (int)a->b - (int)b->b;
  case SHK__V_LONG:
  case SHK__V_DECIMAL:
  case SHK__V_DATETIME:
  case SHK__V_DURATION:
    return cmp_i64(a->l, b->l);
  case SHK__V_STRING:
    return shk__str_cmp(a->s, b->s);
  case SHK__V_ENTITY: {
    if (a->uid == b->uid)
      return 0;
    int r = shk__str_cmp(a->uid->type, b->uid->type);
    return r ? r : shk__str_cmp(a->uid->id, b->uid->id);
  }
  case SHK__V_SET: {
    const shk__set *x = a->set, *y = b->set;
    if (x == y)
      return 0;
    if (x->n != y->n)
      return x->n < y->n ? -1 : 1;
    for (size_t i = 0; i < x->n; i++) {
      int r = shk__value_cmp(&x->items[i], &y->items[i]);
      if (r)
        return r;
    }
    return 0;
  }
  case SHK__V_RECORD: {
    const shk__record *x = a->rec, *y = b->rec;
    if (x == y)
      return 0;
    if (x->n != y->n)
      return x->n < y->n ? -1 : 1;
    for (size_t i = 0; i < x->n; i++) {
      int r = shk__str_cmp(x->keys[i], y->keys[i]);
      if (r)
        return r;
    }
    for (size_t i = 0; i < x->n; i++) {
      int r = shk__value_cmp(&x->vals[i], &y->vals[i]);
      if (r)
        return r;
    }
    return 0;
  }
  case SHK__V_IP: {
    const shk__ipaddr *x = a->ip, *y = b->ip;
    if (x->v6 != y->v6)
      return x->v6 ? 1 : -1;
    if (x->prefix != y->prefix)
      return x->prefix < y->prefix ? -1 : 1;
    return memcmp(x->addr, y->addr, x->v6 ? 16 : 4);
  }
  }
  return 0;
}

static int qsort_cmp(const void *a, const void *b)
{
  return shk__value_cmp(a, b);
}

static size_t canon(shk__value *items, size_t n)
{
  if (n < 2)
    return n;
  /* Most sets are already in order (they come from JSON or literals written
   * in order); checking first avoids the sort. */
  bool sorted = true;
  for (size_t i = 1; i < n && sorted; i++)
    sorted = shk__value_cmp(&items[i - 1], &items[i]) < 0;
  if (sorted)
    return n;
  qsort(items, n, sizeof *items, qsort_cmp);
  size_t k = 1;
  for (size_t i = 1; i < n; i++)
    if (shk__value_cmp(&items[k - 1], &items[i]) != 0)
      items[k++] = items[i];
  return k;
}

const shk__set *shk__set_make(shk__arena *a, shk__value *items, size_t n)
{
  shk__set *s = shk__arena_alloc(a, sizeof *s);
  s->n = canon(items, n);
  s->items = items;
  return s;
}

const shk__value *shk__record_get(const shk__record *r, shk__str key)
{
  size_t lo = 0, hi = r->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = shk__str_cmp(r->keys[mid], key);
    if (c == 0)
      return &r->vals[mid];
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

bool shk__set_contains(const shk__set *s, const shk__value *v)
{
  size_t lo = 0, hi = s->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = shk__value_cmp(&s->items[mid], v);
    if (c == 0)
      return true;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return false;
}

/* ---------------------------------------------------------------- extension functions */

int shk__ext_fn_lookup(shk__str name)
{
  /* Only extension functions may be named in an __extn escape, not the
   * built-in set and tag methods. */
  for (int f = SHK__FN_IP; f < SHK__FN__COUNT; f++) {
    const char *n = shk__fn_name((shk__fn)f);
    if (strlen(n) == name.n && memcmp(n, name.p, name.n) == 0)
      return f;
  }
  return -1;
}

static const shk__ext_sig ext_sigs[SHK__FN__COUNT] = {
  [SHK__FN_IP] = { { SHK__V_STRING }, 1, SHK__V_IP },
  [SHK__FN_DECIMAL] = { { SHK__V_STRING }, 1, SHK__V_DECIMAL },
  [SHK__FN_DATETIME] = { { SHK__V_STRING }, 1, SHK__V_DATETIME },
  [SHK__FN_DURATION] = { { SHK__V_STRING }, 1, SHK__V_DURATION },
  [SHK__FN_IS_IPV4] = { { SHK__V_IP }, 1, SHK__V_BOOL },
  [SHK__FN_IS_IPV6] = { { SHK__V_IP }, 1, SHK__V_BOOL },
  [SHK__FN_IS_LOOPBACK] = { { SHK__V_IP }, 1, SHK__V_BOOL },
  [SHK__FN_IS_MULTICAST] = { { SHK__V_IP }, 1, SHK__V_BOOL },
  [SHK__FN_IS_IN_RANGE] = { { SHK__V_IP, SHK__V_IP }, 2, SHK__V_BOOL },
  [SHK__FN_LESS_THAN] = { { SHK__V_DECIMAL, SHK__V_DECIMAL }, 2, SHK__V_BOOL },
  [SHK__FN_LESS_THAN_OR_EQUAL] = { { SHK__V_DECIMAL, SHK__V_DECIMAL }, 2, SHK__V_BOOL },
  [SHK__FN_GREATER_THAN] = { { SHK__V_DECIMAL, SHK__V_DECIMAL }, 2, SHK__V_BOOL },
  [SHK__FN_GREATER_THAN_OR_EQUAL] = { { SHK__V_DECIMAL, SHK__V_DECIMAL }, 2, SHK__V_BOOL },
  [SHK__FN_OFFSET] = { { SHK__V_DATETIME, SHK__V_DURATION }, 2, SHK__V_DATETIME },
  [SHK__FN_DURATION_SINCE] = { { SHK__V_DATETIME, SHK__V_DATETIME }, 2, SHK__V_DURATION },
  [SHK__FN_TO_DATE] = { { SHK__V_DATETIME }, 1, SHK__V_DATETIME },
  [SHK__FN_TO_TIME] = { { SHK__V_DATETIME }, 1, SHK__V_DURATION },
  [SHK__FN_TO_DAYS] = { { SHK__V_DURATION }, 1, SHK__V_LONG },
  [SHK__FN_TO_HOURS] = { { SHK__V_DURATION }, 1, SHK__V_LONG },
  [SHK__FN_TO_MINUTES] = { { SHK__V_DURATION }, 1, SHK__V_LONG },
  [SHK__FN_TO_SECONDS] = { { SHK__V_DURATION }, 1, SHK__V_LONG },
  [SHK__FN_TO_MILLISECONDS] = { { SHK__V_DURATION }, 1, SHK__V_LONG },
};

const shk__ext_sig *shk__ext_signature(shk__fn fn)
{
  /* The set and tag methods have no entry, and so no arguments. */
  return (unsigned)fn < SHK__FN__COUNT && ext_sigs[fn].n_args ? &ext_sigs[fn] : NULL;
}

/* Parses the literal of the constructor FN into OUT, an address into IP;
 * returns -1 when S is not a valid literal. */
static int parse_literal(shk__fn fn, shk__str s, shk__value *out, shk__ipaddr *ip)
{
  out->kind = ext_sigs[fn].ret;
  switch (out->kind) {
  case SHK__V_IP:
    out->ip = ip;
    return shk__ipaddr_parse(s, ip);
  case SHK__V_DECIMAL:
    return shk__decimal_parse(s, &out->l);
  case SHK__V_DATETIME:
    return shk__datetime_parse(s, &out->l);
  case SHK__V_DURATION:
    return shk__duration_parse(s, &out->l);
  case SHK__V_BOOL:
  case SHK__V_LONG:
  case SHK__V_STRING:
  case SHK__V_ENTITY:
  case SHK__V_SET:
  case SHK__V_RECORD:
    break;
  }
  return -1;
}

bool shk__ext_literal_ok(shk__fn fn, shk__str s)
{
  const shk__ext_sig *sig = shk__ext_signature(fn);
  shk__value v;
  shk__ipaddr ip = { 0 };
  return sig && sig->args[0] == SHK__V_STRING && parse_literal(fn, s, &v, &ip) == 0;
}

static int construct(shk__fn fn, shk__str s, shk__arena *a, shk__value *out, shk__eval_error *e)
{
  shk__ipaddr ip = { 0 };
  if (parse_literal(fn, s, out, &ip) < 0)
    return shk__fail(e, SHK__ERR_EXT, "%s(\"%.*s\"): not a valid %s literal", shk__fn_name(fn),
                     (int)(s.n > 64 ? 64 : s.n), s.p, shk__fn_name(fn));
  if (out->kind == SHK__V_IP) {
    shk__ipaddr *copy = shk__arena_alloc(a, sizeof *copy);
    *copy = ip;
    out->ip = copy;
  }
  return 0;
}

int shk__call_ext(shk__fn fn, const shk__value *args, size_t n, shk__arena *a,
                  shk__value *out, shk__eval_error *e)
{
  const shk__ext_sig *sig = shk__ext_signature(fn);
  if (!sig)
    return shk__fail(e, SHK__ERR_EXT, "%s is not an extension function", shk__fn_name(fn));
  if (n != sig->n_args)
    return shk__fail(e, SHK__ERR_EXT, "%s takes %zu argument%s, got %zu", shk__fn_name(fn), sig->n_args,
                     sig->n_args == 1 ? "" : "s", n);
  for (size_t i = 0; i < n; i++)
    if (args[i].kind != sig->args[i])
      return shk__fail(e, SHK__ERR_TYPE, "type error: %s expects %s, got %s", shk__fn_name(fn),
                       shk__vkind_name(sig->args[i]), shk__vkind_name(args[i].kind));

  const shk__value *x = &args[0], *y = n > 1 ? &args[1] : NULL;
  int64_t t;
  out->kind = SHK__V_BOOL;
  switch (fn) {
  case SHK__FN_IP:
  case SHK__FN_DECIMAL:
  case SHK__FN_DATETIME:
  case SHK__FN_DURATION:
    return construct(fn, x->s, a, out, e);
  case SHK__FN_IS_IPV4: out->b = !x->ip->v6; return 0;
  case SHK__FN_IS_IPV6: out->b = x->ip->v6; return 0;
  case SHK__FN_IS_LOOPBACK: out->b = shk__ipaddr_is_loopback(x->ip); return 0;
  case SHK__FN_IS_MULTICAST: out->b = shk__ipaddr_is_multicast(x->ip); return 0;
  case SHK__FN_IS_IN_RANGE: out->b = shk__ipaddr_in_range(x->ip, y->ip); return 0;
  case SHK__FN_LESS_THAN: out->b = x->l < y->l; return 0;
  case SHK__FN_LESS_THAN_OR_EQUAL: out->b = x->l <= y->l; return 0;
  case SHK__FN_GREATER_THAN: out->b = x->l > y->l; return 0;
  case SHK__FN_GREATER_THAN_OR_EQUAL: out->b = x->l >= y->l; return 0;
  case SHK__FN_OFFSET:
    out->kind = SHK__V_DATETIME;
    if (shk__datetime_offset(x->l, y->l, &out->l) < 0)
      return shk__fail(e, SHK__ERR_EXT, "offset: datetime overflow");
    return 0;
  case SHK__FN_DURATION_SINCE:
    out->kind = SHK__V_DURATION;
    if (shk__datetime_duration_since(x->l, y->l, &out->l) < 0)
      return shk__fail(e, SHK__ERR_EXT, "durationSince: duration overflow");
    return 0;
  case SHK__FN_TO_DATE:
    out->kind = SHK__V_DATETIME;
    if (shk__datetime_to_date(x->l, &out->l) < 0)
      return shk__fail(e, SHK__ERR_EXT, "toDate: datetime overflow");
    return 0;
  case SHK__FN_TO_TIME:
    out->kind = SHK__V_DURATION;
    if (shk__datetime_to_time(x->l, &out->l) < 0)
      return shk__fail(e, SHK__ERR_EXT, "toTime: overflow");
    return 0;
  case SHK__FN_TO_DAYS: t = 86400000; goto div;
  case SHK__FN_TO_HOURS: t = 3600000; goto div;
  case SHK__FN_TO_MINUTES: t = 60000; goto div;
  case SHK__FN_TO_SECONDS: t = 1000; goto div;
  case SHK__FN_TO_MILLISECONDS: t = 1; goto div;
  case SHK__FN_CONTAINS:
  case SHK__FN_CONTAINS_ALL:
  case SHK__FN_CONTAINS_ANY:
  case SHK__FN_IS_EMPTY:
  case SHK__FN_GET_TAG:
  case SHK__FN_HAS_TAG:
  case SHK__FN__COUNT:
    break;
  }
  return shk__fail(e, SHK__ERR_EXT, "%s is not an extension function", shk__fn_name(fn));
div:
  /* Truncates toward zero, as the reference's integer division does. */
  out->kind = SHK__V_LONG;
  out->l = x->l / t;
  return 0;
}
