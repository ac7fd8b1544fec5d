/* SPDX-License-Identifier: Apache-2.0 */
/* Between the solver's models and Cedar's concrete values: a model read
 * back as a request and an entity store in Cedar's JSON forms (which the
 * engine then decides, as the check of the analysis), and concrete values
 * written as SMT terms (for questions about a given request and store). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cedar/cedar-eval-internal.h"
#include "policy/analysis-internal.h"

/* ---------------------------------------------------------------- model atoms */

static bool model_bool(const shk__sx *x, bool *out)
{
  if (shk__sx_is(x, "true") || shk__sx_is(x, "false")) {
    *out = shk__sx_is(x, "true");
    return true;
  }
  return false;
}

/* #b..., #x... or (_ bvN W). */
static bool model_bv(const shk__sx *x, unsigned width, uint64_t *out)
{
  uint64_t v = 0;
  if (x->kind == SHK__SX_ATOM && x->n > 2 && x->s[0] == '#' && (x->s[1] == 'b' || x->s[1] == 'x')) {
    bool bin = x->s[1] == 'b';
    size_t digits = x->n - 2;
    if (digits * (bin ? 1 : 4) != width)
      return false;
    for (size_t i = 2; i < x->n; i++) {
      int d = bin ? (x->s[i] == '0' ? 0 : x->s[i] == '1' ? 1 : -1) : shk__hex_value((unsigned char)x->s[i]);
      if (d < 0)
        return false;
      if (width <= 64)
        v = (v << (bin ? 1 : 4)) | (uint64_t)d;
    }
    *out = v;
    return width <= 64;
  }
  if (x->kind == SHK__SX_LIST && x->n_items == 3 && shk__sx_is(x->items[0], "_") &&
      x->items[1]->kind == SHK__SX_ATOM && x->items[1]->n > 2 && !strncmp(x->items[1]->s, "bv", 2)) {
    char *end;
    v = strtoull(x->items[1]->s + 2, &end, 10);
    *out = v;
    return *end == '\0' && width <= 64;
  }
  return false;
}

/* A 128-bit bit-vector, as 16 bytes big-endian. */
static bool model_bv128(const shk__sx *x, uint8_t out[16])
{
  memset(out, 0, 16);
  if (x->kind != SHK__SX_ATOM || x->n < 3 || x->s[0] != '#')
    return false;
  bool bin = x->s[1] == 'b';
  if (!bin && x->s[1] != 'x')
    return false;
  size_t digits = x->n - 2, bits = bin ? 1 : 4;
  if (digits * bits != 128)
    return false;
  for (size_t i = 0; i < digits; i++) {
    char c = x->s[2 + i];
    int d = bin ? (c == '0' ? 0 : c == '1' ? 1 : -1) : shk__hex_value((unsigned char)c);
    if (d < 0)
      return false;
    size_t bit = i * bits; /* from the most significant end */
    for (size_t k = 0; k < bits; k++)
      if (d & (1 << (bits - 1 - k)))
        out[(bit + k) / 8] |= (uint8_t)(0x80 >> ((bit + k) % 8));
  }
  return true;
}

static bool model_string(const shk__sx *x, shk__str *out)
{
  if (x->kind != SHK__SX_STRING)
    return false;
  *out = (shk__str){ x->s, x->n };
  return true;
}

/* A datatype value: (C args...) or a nullary C. */
static bool ctor(const shk__sx *x, const char *name, size_t nargs, shk__sx *const **args)
{
  if (nargs == 0 && shk__sx_is(x, name)) {
    *args = NULL;
    return true;
  }
  if (x->kind == SHK__SX_LIST && x->n_items == nargs + 1 && shk__sx_is(x->items[0], name)) {
    *args = x->items + 1;
    return true;
  }
  /* cvc5 may qualify a constructor: ((as C S) args...) or (as C S). */
  if (x->kind == SHK__SX_LIST && nargs == 0 && x->n_items == 3 && shk__sx_is(x->items[0], "as") &&
      shk__sx_is(x->items[1], name)) {
    *args = NULL;
    return true;
  }
  return false;
}

/* ---------------------------------------------------------------- values to JSON */

static json_t *extn(const char *fn, const char *arg)
{
  return json_pack("{s:{s:s, s:s}}", "__extn", "fn", fn, "arg", arg);
}

/* Days from 1970-01-01 to the civil date, and back (Howard Hinnant's
 * algorithms), for datetimes written as text. */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  unsigned yoe = (unsigned)(y - era * 400);
  unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
  z += 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  unsigned doe = (unsigned)(z - era * 146097);
  unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t yy = (int64_t)yoe + era * 400;
  unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = yy + (*m <= 2);
}

/* A datetime as the text datetime() reads when its year is 0 to 9999;
 * otherwise the epoch offset by a duration, which JSON can also say. */
static json_t *datetime_json(int64_t ms)
{
  int64_t lo = days_from_civil(0, 1, 1) * 86400000, hi = days_from_civil(10000, 1, 1) * 86400000 - 1;
  char buf[96];
  if (ms >= lo && ms <= hi) {
    int64_t days = ms >= 0 ? ms / 86400000 : -((-ms + 86399999) / 86400000);
    int64_t rem = ms - days * 86400000;
    int64_t y;
    unsigned mo, d;
    civil_from_days(days, &y, &mo, &d);
    snprintf(buf, sizeof buf, "%04" PRId64 "-%02u-%02uT%02u:%02u:%02u.%03uZ", y, mo, d,
             (unsigned)(rem / 3600000), (unsigned)(rem / 60000 % 60), (unsigned)(rem / 1000 % 60),
             (unsigned)(rem % 1000));
    return extn("datetime", buf);
  }
  snprintf(buf, sizeof buf, "%" PRId64 "ms", ms);
  return json_pack("{s:{s:s, s:[o, o]}}", "__extn", "fn", "offset", "args",
                   extn("datetime", "1970-01-01"), extn("duration", buf));
}

static json_t *uid_json(shk__str type, shk__str id)
{
  return json_pack("{s:s%, s:s%}", "type", type.p, type.n, "id", id.p, id.n);
}

static bool enum_member(const shk__ety *et, shk__str id)
{
  if (!et->et || !et->et->is_enum)
    return true;
  for (size_t i = 0; i < et->et->n_enum_ids; i++)
    if (shk__str_eq(et->et->enum_ids[i], id))
      return true;
  return false;
}

/* The elements of a set value, appended to ARR. */
static bool set_items(shk__enc *enc, const shk__ty *elem, const shk__sx *x, json_t *arr)
{
  if (x->kind == SHK__SX_LIST && x->n_items == 3 && shk__sx_is(x->items[0], "as") &&
      shk__sx_is(x->items[1], "set.empty"))
    return true;
  if (x->kind != SHK__SX_LIST || x->n_items < 2)
    return false;
  if (shk__sx_is(x->items[0], "set.singleton") && x->n_items == 2) {
    json_t *v = shk__model_json(enc, elem, x->items[1]);
    return v && json_array_append_new(arr, v) == 0;
  }
  if (shk__sx_is(x->items[0], "set.union")) {
    for (size_t i = 1; i < x->n_items; i++)
      if (!set_items(enc, elem, x->items[i], arr))
        return false;
    return true;
  }
  if (shk__sx_is(x->items[0], "set.insert")) {
    for (size_t i = 1; i + 1 < x->n_items; i++) {
      json_t *v = shk__model_json(enc, elem, x->items[i]);
      if (!v || json_array_append_new(arr, v) < 0)
        return false;
    }
    return set_items(enc, elem, x->items[x->n_items - 1], arr);
  }
  return false;
}

json_t *shk__model_json(shk__enc *enc, const shk__ty *t, const shk__sx *x)
{
  uint64_t bv;
  shk__str s;
  bool b;
  shk__sx *const *args;
  char buf[128];
  switch (t->k) {
  case SHK__TY_BOOL: return model_bool(x, &b) ? json_boolean(b) : NULL;
  case SHK__TY_LONG: return model_bv(x, 64, &bv) ? json_integer((json_int_t)(int64_t)bv) : NULL;
  case SHK__TY_STRING: return model_string(x, &s) ? json_stringn(s.p, s.n) : NULL;
  case SHK__TY_DECIMAL:
    if (!model_bv(x, 64, &bv))
      return NULL;
    shk__decimal_format((int64_t)bv, buf, sizeof buf);
    return extn("decimal", buf);
  case SHK__TY_DATETIME: return model_bv(x, 64, &bv) ? datetime_json((int64_t)bv) : NULL;
  case SHK__TY_DURATION:
    if (!model_bv(x, 64, &bv))
      return NULL;
    snprintf(buf, sizeof buf, "%" PRId64 "ms", (int64_t)bv);
    return extn("duration", buf);
  case SHK__TY_IP: {
    shk__ipaddr ip = { 0 };
    uint64_t pre;
    if (ctor(x, "IP.v4", 2, &args)) {
      if (!model_bv(args[0], 32, &bv) || !model_bv(args[1], 8, &pre) || pre > 32)
        return NULL;
      for (int i = 0; i < 4; i++)
        ip.addr[i] = (uint8_t)(bv >> (24 - 8 * i));
    } else if (ctor(x, "IP.v6", 2, &args)) {
      if (!model_bv128(args[0], ip.addr) || !model_bv(args[1], 8, &pre) || pre > 128)
        return NULL;
      ip.v6 = true;
    } else {
      return NULL;
    }
    ip.prefix = (uint8_t)pre;
    shk__ipaddr_format(&ip, buf, sizeof buf);
    return extn("ip", buf);
  }
  case SHK__TY_ENTITY:
    if (!ctor(x, t->sort, 1, &args) || !model_string(args[0], &s) || !enum_member(t->ent, s))
      return NULL;
    return json_pack("{s:o}", "__entity", uid_json(t->ent->name, s));
  case SHK__TY_SET: {
    json_t *arr = json_array();
    if (arr && set_items(enc, t->elem, x, arr))
      return arr;
    json_decref(arr);
    return NULL;
  }
  case SHK__TY_RECORD: {
    if (!ctor(x, t->sort, t->n_attrs, &args))
      return NULL;
    json_t *o = json_object();
    for (size_t i = 0; o && i < t->n_attrs; i++) {
      const shk__sx *f = args[i];
      if (!t->attrs[i].required) {
        char some[64], none[64];
        snprintf(some, sizeof some, "%s.some", t->attrs[i].t->opt);
        snprintf(none, sizeof none, "%s.none", t->attrs[i].t->opt);
        shk__sx *const *fa;
        if (ctor(f, none, 0, &fa))
          continue;
        if (!ctor(f, some, 1, &fa)) {
          json_decref(o);
          return NULL;
        }
        f = fa[0];
      }
      json_t *v = shk__model_json(enc, t->attrs[i].t, f);
      if (!v || json_object_setn_new(o, t->attrs[i].name.p, t->attrs[i].name.n, v) < 0) {
        json_decref(o);
        return NULL;
      }
    }
    return o;
  }
  }
  return NULL;
}

static json_t *model_default(shk__enc *enc, const shk__ty *t)
{
  switch (t->k) {
  case SHK__TY_BOOL: return json_false();
  case SHK__TY_LONG: return json_integer(0);
  case SHK__TY_STRING: return json_string("");
  case SHK__TY_DECIMAL: return extn("decimal", "0.0");
  case SHK__TY_DATETIME: return extn("datetime", "1970-01-01");
  case SHK__TY_DURATION: return extn("duration", "0ms");
  case SHK__TY_IP: return extn("ip", "0.0.0.0");
  case SHK__TY_SET: return json_array();
  case SHK__TY_ENTITY: {
    shk__str id = SHK__STR_LIT("");
    if (t->ent->et && t->ent->et->is_enum && t->ent->et->n_enum_ids)
      id = t->ent->et->enum_ids[0];
    return json_pack("{s:o}", "__entity", uid_json(t->ent->name, id));
  }
  case SHK__TY_RECORD: {
    json_t *o = json_object();
    for (size_t i = 0; o && i < t->n_attrs; i++)
      if (t->attrs[i].required &&
          json_object_setn_new(o, t->attrs[i].name.p, t->attrs[i].name.n,
                               model_default(enc, t->attrs[i].t)) < 0) {
        json_decref(o);
        return NULL;
      }
    return o;
  }
  }
  return NULL;
}

/* ---------------------------------------------------------------- the counterexample */

void shk__cex_clear(shk__cex *c)
{
  json_decref(c->request);
  json_decref(c->entities);
  *c = (shk__cex){ 0 };
}

/* One entity of the store being built. */
typedef struct built {
  shk__ety *et;
  shk__str id;
  json_t *attrs;           /* NULL until a decoded value is known */
  json_t *parents;         /* an array of uids */
  json_t *tags;
  const char *term;        /* a footprint term naming it */
  shk__str *keys;          /* tag keys, for the second round */
  size_t n_keys;
} built;

static built *find_built(built *v, size_t n, const shk__ety *et, shk__str id)
{
  for (size_t i = 0; i < n; i++)
    if (v[i].et == et && shk__str_eq(v[i].id, id))
      return &v[i];
  return NULL;
}

static int defect(shk_error *err, const char *what)
{
  return shk__error_set(err, -EPROTO, "defect in the analysis: the model's %s cannot be read back", what);
}

static bool parent_add(json_t *parents, shk__str type, shk__str id)
{
  size_t i;
  json_t *p;
  json_array_foreach(parents, i, p) {
    const char *pid = json_string_value(json_object_get(p, "id"));
    const char *pt = json_string_value(json_object_get(p, "type"));
    if (pid && pt && json_string_length(json_object_get(p, "id")) == id.n && !memcmp(pid, id.p, id.n) &&
        strlen(pt) == type.n && !memcmp(pt, type.p, type.n))
      return true;
  }
  return json_array_append_new(parents, uid_json(type, id)) == 0;
}

int shk__model_extract(shk__enc *enc, shk__smt *smt, shk__cex *out, shk_error *err)
{
  *out = (shk__cex){ 0 };
  shk__pool *p = shk__pool_new();
  shk__text terms = { 0 };
  built *ents = NULL;
  size_t n_ents = 0;
  int r = 0;
  if (!p)
    return shk__error_set(err, -ENOMEM, "out of memory reading the model");
  /* Round one: the request and everything known of each footprint
   * entity. */
  size_t nt = 3;
  shk__text_puts(&terms, "principal resource context");
  for (size_t i = 0; i < enc->n_fp; i++) {
    const shk__fp *f = &enc->fp[i];
    shk__ety *T = f->et;
    shk__text_printf(&terms, " %s", f->term);
    nt++;
    if (T->has_ex)
      shk__text_printf(&terms, " (ex%u %s)", T->id, f->term), nt++;
    if (T->has_at)
      shk__text_printf(&terms, " (at%u %s)", T->id, f->term), nt++;
    for (size_t u = 0; u < enc->n_etys; u++)
      if (T->has_an[u])
        shk__text_printf(&terms, " (an%u_%zu %s)", T->id, u, f->term), nt++;
    if (T->has_tk)
      shk__text_printf(&terms, " (tk%u %s)", T->id, f->term), nt++;
  }
  shk__sx **v = NULL;
  if (terms.oom)
    r = shk__error_set(err, -ENOMEM, "out of memory reading the model");
  else
    r = shk__smt_get_value(smt, p, terms.p, nt, &v, err);
  if (r < 0)
    goto out;
  ents = calloc(enc->n_fp ? enc->n_fp : 1, sizeof *ents);
  if (!ents) {
    r = shk__error_set(err, -ENOMEM, "out of memory reading the model");
    goto out;
  }
  shk__str pid, rid;
  shk__sx *const *a;
  if (!ctor(v[0], enc->P->t->sort, 1, &a) || !model_string(a[0], &pid) ||
      !ctor(v[1], enc->R->t->sort, 1, &a) || !model_string(a[0], &rid)) {
    r = defect(err, "principal or resource");
    goto out;
  }
  json_t *ctx = shk__model_json(enc, enc->ctx, v[2]);
  if (!ctx) {
    r = defect(err, "context");
    goto out;
  }
  const shk__action *act = enc->env.action;
  out->request = json_pack("{s:o, s:o, s:o, s:o}", "principal", uid_json(enc->P->name, pid), "action",
                           uid_json(act->uid.type, act->uid.id), "resource",
                           uid_json(enc->R->name, rid), "context", ctx);
  size_t k = 3;
  for (size_t i = 0; i < enc->n_fp && out->request; i++) {
    const shk__fp *f = &enc->fp[i];
    shk__ety *T = f->et;
    shk__str id;
    if (!ctor(v[k], T->t->sort, 1, &a) || !model_string(a[0], &id)) {
      r = defect(err, "entity");
      goto out;
    }
    k++;
    bool exists = true;
    if (T->has_ex && !model_bool(v[k++], &exists)) {
      r = defect(err, "entity existence");
      goto out;
    }
    built *b = find_built(ents, n_ents, T, id);
    if (exists && !b) {
      b = &ents[n_ents++];
      *b = (built){ .et = T, .id = id, .parents = json_array(), .term = f->term };
      if (!b->parents) {
        r = shk__error_set(err, -ENOMEM, "out of memory reading the model");
        goto out;
      }
    }
    if (T->has_at) {
      /* A value the formula never reads may be one no store holds; the
       * entity then gets a valid default, which changes nothing read. */
      json_t *at = shk__model_json(enc, T->shape, v[k++]);
      if (b && !b->attrs)
        b->attrs = at;
      else
        json_decref(at);
    }
    for (size_t u = 0; u < enc->n_etys; u++) {
      if (!T->has_an[u])
        continue;
      json_t *anc = shk__model_json(enc, enc->etys[u].set, v[k++]);
      size_t j;
      json_t *x;
      json_array_foreach(anc, j, x) {
        json_t *ent = json_object_get(x, "__entity");
        const char *aid = json_string_value(json_object_get(ent, "id"));
        if (b && aid &&
            !parent_add(b->parents, enc->etys[u].name,
                        (shk__str){ aid, json_string_length(json_object_get(ent, "id")) })) {
          json_decref(anc);
          r = shk__error_set(err, -ENOMEM, "out of memory reading the model");
          goto out;
        }
      }
      json_decref(anc);
    }
    if (T->has_tk) {
      json_t *keys = shk__model_json(enc, enc->strings, v[k++]);
      if (b && !b->keys && keys && json_array_size(keys)) {
        b->n_keys = json_array_size(keys);
        b->keys = shk__pool_alloc(p, b->n_keys * sizeof *b->keys);
        for (size_t j = 0; b->keys && j < b->n_keys; j++) {
          json_t *kj = json_array_get(keys, j);
          b->keys[j] = (shk__str){ shk__pool_strndup(p, json_string_value(kj), json_string_length(kj)),
                                   json_string_length(kj) };
        }
      }
      json_decref(keys);
    }
  }
  if (!out->request) {
    r = shk__error_set(err, -ENOMEM, "out of memory reading the model");
    goto out;
  }
  /* Round two: the values of the tags each entity has. */
  shk__text_free(&terms);
  nt = 0;
  for (size_t i = 0; i < n_ents; i++)
    for (size_t j = 0; j < ents[i].n_keys; j++) {
      shk__text_printf(&terms, " (tv%u %s ", ents[i].et->id, ents[i].term);
      if (!shk__text_smt_string(&terms, ents[i].keys[j])) {
        r = defect(err, "tag key");
        goto out;
      }
      shk__text_puts(&terms, ")");
      nt++;
    }
  if (nt) {
    if (terms.oom)
      r = shk__error_set(err, -ENOMEM, "out of memory reading the model");
    else
      r = shk__smt_get_value(smt, p, terms.p, nt, &v, err);
    if (r < 0)
      goto out;
  }
  k = 0;
  out->entities = json_array();
  for (size_t i = 0; i < n_ents && out->entities; i++) {
    built *b = &ents[i];
    if (b->et->shape && !b->attrs)
      b->attrs = model_default(enc, b->et->shape);
    if (!b->attrs)
      b->attrs = json_object();
    if (b->n_keys) {
      b->tags = json_object();
      for (size_t j = 0; j < b->n_keys; j++) {
        json_t *tv = shk__model_json(enc, b->et->tags, v[k++]);
        if (!tv)
          tv = model_default(enc, b->et->tags);
        json_object_setn_new(b->tags, b->keys[j].p, b->keys[j].n, tv);
      }
    }
    json_t *e = json_pack("{s:o, s:O, s:O}", "uid", uid_json(b->et->name, b->id), "attrs", b->attrs,
                          "parents", b->parents);
    if (e && b->tags)
      json_object_set(e, "tags", b->tags);
    if (!e || json_array_append_new(out->entities, e) < 0) {
      r = shk__error_set(err, -ENOMEM, "out of memory reading the model");
      goto out;
    }
  }
  if (!out->entities)
    r = shk__error_set(err, -ENOMEM, "out of memory reading the model");
out:
  for (size_t i = 0; ents && i < n_ents; i++) {
    json_decref(ents[i].attrs);
    json_decref(ents[i].parents);
    json_decref(ents[i].tags);
  }
  free(ents);
  shk__text_free(&terms);
  shk__pool_free(p);
  if (r < 0)
    shk__cex_clear(out);
  return r;
}

/* ---------------------------------------------------------------- concrete values as terms */

const char *shk__value_term(shk__enc *enc, const shk__ty *t, const shk__value *v)
{
  switch (t->k) {
  case SHK__TY_BOOL:
    return v->kind == SHK__V_BOOL ? (v->b ? "true" : "false") : NULL;
  case SHK__TY_LONG:
  case SHK__TY_DECIMAL:
  case SHK__TY_DATETIME:
  case SHK__TY_DURATION: {
    shk__vkind want = t->k == SHK__TY_LONG ? SHK__V_LONG : t->k == SHK__TY_DECIMAL ? SHK__V_DECIMAL
                    : t->k == SHK__TY_DATETIME ? SHK__V_DATETIME : SHK__V_DURATION;
    if (v->kind != want)
      return NULL;
    return shk__enc_str(enc, "#x%016llx", (unsigned long long)(uint64_t)v->l);
  }
  case SHK__TY_STRING: {
    if (v->kind != SHK__V_STRING)
      return NULL;
    shk__text b = { 0 };
    bool ok = shk__text_smt_string(&b, v->s) && !b.oom;
    const char *r = ok ? shk__pool_strndup(enc->pool, b.p, b.n) : NULL;
    shk__text_free(&b);
    return r;
  }
  case SHK__TY_IP: {
    if (v->kind != SHK__V_IP)
      return NULL;
    const shk__ipaddr *ip = v->ip;
    if (!ip->v6)
      return shk__enc_str(enc, "(IP.v4 #x%02x%02x%02x%02x #x%02x)", ip->addr[0], ip->addr[1],
                          ip->addr[2], ip->addr[3], ip->prefix);
    char hex[33];
    for (int i = 0; i < 16; i++)
      snprintf(hex + 2 * i, 3, "%02x", ip->addr[i]);
    return shk__enc_str(enc, "(IP.v6 #x%s #x%02x)", hex, ip->prefix);
  }
  case SHK__TY_ENTITY:
    if (v->kind != SHK__V_ENTITY || !shk__str_eq(v->uid->type, t->ent->name))
      return NULL;
    return shk__enc_uid(enc, t->ent, v->uid->id);
  case SHK__TY_SET: {
    if (v->kind != SHK__V_SET)
      return NULL;
    const char *r = shk__enc_str(enc, "(as set.empty %s)", t->sort);
    for (size_t i = 0; i < v->set->n; i++) {
      const char *x = shk__value_term(enc, t->elem, &v->set->items[i]);
      if (!x)
        return NULL;
      r = shk__enc_str(enc, "(set.insert %s %s)", x, r);
    }
    return r;
  }
  case SHK__TY_RECORD: {
    if (v->kind != SHK__V_RECORD)
      return NULL;
    const shk__record *rec = v->rec;
    /* Every attribute of the value is one of the type's. */
    for (size_t i = 0; i < rec->n; i++)
      if (shk__ty_attr(t, rec->keys[i]) < 0)
        return NULL;
    if (t->n_attrs == 0)
      return t->sort;
    const char *r = shk__enc_str(enc, "(%s", t->sort);
    for (size_t i = 0; i < t->n_attrs; i++) {
      const shk__value *x = shk__record_get(rec, t->attrs[i].name);
      const char *term;
      if (t->attrs[i].required) {
        term = x ? shk__value_term(enc, t->attrs[i].t, x) : NULL;
      } else {
        const char *o = shk__enc_opt(enc, t->attrs[i].t);
        const char *inner = x ? shk__value_term(enc, t->attrs[i].t, x) : NULL;
        term = !x ? shk__enc_str(enc, "%s.none", o) : inner ? shk__enc_str(enc, "(%s.some %s)", o, inner) : NULL;
      }
      if (!term)
        return NULL;
      r = shk__enc_str(enc, "%s %s", r, term);
    }
    return shk__enc_str(enc, "%s)", r);
  }
  }
  return NULL;
}
