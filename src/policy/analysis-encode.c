/* SPDX-License-Identifier: Apache-2.0 */
/* The encoder: a policy set, validated against its schema in strict mode,
 * as SMT-LIB terms over one request environment.
 *
 * The model of a request and an entity store (in the manner of
 * cedar-policy-symcc):
 *   - an entity of type T is a datatype E_T holding its id (a String);
 *   - the store is a set of uninterpreted functions per entity type: ex_T
 *     (the entity exists), at_T (its attributes, a record datatype), an_T_U
 *     (its ancestors of type U, a Set of E_U, the closure), tk_T and tv_T
 *     (its tag keys and values). Reading an attribute of an entity that
 *     does not exist is an error; `has`, `in` and `hasTag` are false for it
 *     (only equal to itself), as the engine decides;
 *   - records are datatypes, one per record type, an optional attribute an
 *     option datatype; sets are SMT sets; strings the string theory, `like`
 *     a regular expression; Long, decimal, datetime and duration 64-bit
 *     bit-vectors, with overflow an error; ipaddr a datatype of a v4 (32-bit)
 *     or v6 (128-bit) address with its prefix length;
 *   - the hierarchy's acyclicity and transitivity are assumptions,
 *     instantiated for every pair of entities the formula reads (the
 *     footprint), which is exactly what a concrete store built from a model
 *     needs to agree with the model.
 * Every expression is a value and an error; a policy is satisfied when its
 * condition is true without error, and a policy that errors is skipped, as
 * the authorizer does.
 *
 * Typing follows the strict validator: an operand the validator types as a
 * constant (a scope that does not apply to the environment, `has` of an
 * undeclared attribute, `is`, comparisons of literals, `in` over actions)
 * is a constant here too, and what the validator leaves unchecked behind it
 * is not encoded. A construct the encoder does not handle is refused with
 * its name; nothing is approximated. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cedar/cedar-eval-internal.h"
#include "policy/analysis-internal.h"

/* ---------------------------------------------------------------- failure and memory */

void shk__enc_fail(shk__enc *enc, int code, shk__loc loc, const char *fmt, ...)
{
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  enc->code = code;
  if (code == -ENOMEM)
    shk__error_set(enc->err, code, "out of memory encoding the policies");
  else if (enc->what && loc.line)
    shk__error_set(enc->err, code, "%s (line %u): %s", enc->what, loc.line, msg);
  else if (enc->what)
    shk__error_set(enc->err, code, "%s: %s", enc->what, msg);
  else
    shk__error_set(enc->err, code, "%s", msg);
  /* Names from the policy text may hold control characters: none reaches
   * a terminal through a message. */
  for (char *m = enc->err ? enc->err->message : NULL; m && *m; m++)
    if ((unsigned char)*m < 0x20 || *m == 0x7f)
      *m = '?';
  longjmp(*enc->fail, 1);
}

#define OOM(enc) shk__enc_fail((enc), -ENOMEM, SHK__NOLOC, "out of memory")
#define REFUSE(enc, loc, ...) shk__enc_fail((enc), -EOPNOTSUPP, (loc), __VA_ARGS__)

static void *alloc(shk__enc *enc, size_t n)
{
  void *p = shk__pool_alloc(enc->pool, n);
  if (!p)
    OOM(enc);
  return p;
}

__attribute__((format(printf, 2, 0))) static const char *vstr(shk__enc *enc, const char *fmt, va_list ap);
static const char *vstr(shk__enc *enc, const char *fmt, va_list ap)
{
  va_list aq;
  va_copy(aq, ap);
  char small[512];
  int n = vsnprintf(small, sizeof small, fmt, aq);
  va_end(aq);
  if (n < 0)
    OOM(enc);
  if ((size_t)n < sizeof small) {
    char *r = shk__pool_strndup(enc->pool, small, (size_t)n);
    if (!r)
      OOM(enc);
    return r;
  }
  char *r = alloc(enc, (size_t)n + 1);
  vsnprintf(r, (size_t)n + 1, fmt, ap);
  return r;
}

const char *shk__enc_str(shk__enc *enc, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  const char *r = vstr(enc, fmt, ap);
  va_end(ap);
  return r;
}
#define S(...) shk__enc_str(enc, __VA_ARGS__)

/* A copy of a text into the pool, freeing the text: no temporary buffer
 * outlives a call, even one that unwinds. */
static const char *keep_text(shk__enc *enc, shk__text *t)
{
  const char *r = t->oom ? NULL : shk__pool_strndup(enc->pool, t->p ? t->p : "", t->n);
  shk__text_free(t);
  if (!r)
    OOM(enc);
  return r;
}

static void check_text(shk__enc *enc, const shk__text *t)
{
  if (t->oom)
    OOM(enc);
}

/* Names a compound term: emits (define-fun tN () SORT EXPR), returns tN,
 * so that a subterm shared by a value and its error is written once. */
static const char *enc_def(shk__enc *enc, const char *sort, const char *expr)
{
  const char *name = S("t%u", enc->next++);
  shk__text_printf(&enc->body, "(define-fun %s () %s %s)\n", name, sort, expr);
  check_text(enc, &enc->body);
  return name;
}

SHK_PRINTF(3, 4) static const char *enc_deff(shk__enc *enc, const char *sort, const char *fmt, ...);
static const char *enc_deff(shk__enc *enc, const char *sort, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  const char *expr = vstr(enc, fmt, ap);
  va_end(ap);
  return enc_def(enc, sort, expr);
}
#define DEF(sort, ...) enc_deff(enc, (sort), __VA_ARGS__)

static void assertf(shk__enc *enc, const char *fmt, ...) SHK_PRINTF(2, 3);
static void assertf(shk__enc *enc, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  const char *f = vstr(enc, fmt, ap);
  va_end(ap);
  shk__text_printf(&enc->body, "(assert %s)\n", f);
  check_text(enc, &enc->body);
}

/* ---------------------------------------------------------------- Boolean atoms */

static const char T_[] = "true", F_[] = "false";

static bool is_true(const char *a) { return !strcmp(a, T_); }
static bool is_false(const char *a) { return !strcmp(a, F_); }

static const char *b_or(shk__enc *enc, const char *a, const char *b)
{
  if (is_true(a) || is_true(b))
    return T_;
  if (is_false(a))
    return b;
  if (is_false(b) || !strcmp(a, b))
    return a;
  return DEF("Bool", "(or %s %s)", a, b);
}

static const char *b_and(shk__enc *enc, const char *a, const char *b)
{
  if (is_false(a) || is_false(b))
    return F_;
  if (is_true(a))
    return b;
  if (is_true(b) || !strcmp(a, b))
    return a;
  return DEF("Bool", "(and %s %s)", a, b);
}

static const char *b_not(shk__enc *enc, const char *a)
{
  if (is_true(a))
    return F_;
  if (is_false(a))
    return T_;
  return DEF("Bool", "(not %s)", a);
}

static const char *b_ite(shk__enc *enc, const char *c, const char *a, const char *b)
{
  if (is_true(c))
    return a;
  if (is_false(c))
    return b;
  if (!strcmp(a, b))
    return a;
  return DEF("Bool", "(ite %s %s %s)", c, a, b);
}

/* ---------------------------------------------------------------- memo */

static uint64_t hash_str(const char *s)
{
  uint64_t h = 1469598103934665603u;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211u;
  return h;
}

/* The name given to KEY before, or NULL (and *slot set for the caller to
 * fill). */
static struct shk__memo *memo_slot(shk__enc *enc, const char *key)
{
  if (2 * (enc->memo_n + 1) > enc->memo_cap) {
    size_t cap = enc->memo_cap ? enc->memo_cap * 2 : 256;
    struct shk__memo *m = alloc(enc, cap * sizeof *m);
    for (size_t i = 0; i < enc->memo_cap; i++)
      if (enc->memo[i].key) {
        size_t j = hash_str(enc->memo[i].key) & (cap - 1);
        while (m[j].key)
          j = (j + 1) & (cap - 1);
        m[j] = enc->memo[i];
      }
    enc->memo = m;
    enc->memo_cap = cap;
  }
  size_t j = hash_str(key) & (enc->memo_cap - 1);
  while (enc->memo[j].key && strcmp(enc->memo[j].key, key))
    j = (j + 1) & (enc->memo_cap - 1);
  return &enc->memo[j];
}

/* ---------------------------------------------------------------- types */

static shk__ety *find_ety(shk__enc *enc, shk__str name)
{
  for (size_t i = 0; i < enc->n_etys; i++)
    if (shk__str_eq(enc->etys[i].name, name))
      return &enc->etys[i];
  return NULL;
}

shk__ety *shk__enc_ety(shk__enc *enc, shk__str name)
{
  return find_ety(enc, name);
}

static bool same_type(const shk__ty *a, const shk__ty *b)
{
  if (a->k != b->k || a->ent != b->ent || a->elem != b->elem || a->n_attrs != b->n_attrs)
    return false;
  for (size_t i = 0; i < a->n_attrs; i++)
    if (!shk__str_eq(a->attrs[i].name, b->attrs[i].name) || a->attrs[i].t != b->attrs[i].t ||
        a->attrs[i].required != b->attrs[i].required)
      return false;
  return true;
}

static void decl(shk__enc *enc, const char *fmt, ...) SHK_PRINTF(2, 3);
static void decl(shk__enc *enc, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  const char *f = vstr(enc, fmt, ap);
  va_end(ap);
  shk__text_puts(&enc->decl, f);
  shk__text_puts(&enc->decl, "\n");
  check_text(enc, &enc->decl);
}

/* The ipaddr datatype and its helper functions, once. */
static void declare_ip(shk__enc *enc)
{
  if (enc->ip_declared)
    return;
  enc->ip_declared = true;
  decl(enc, "(declare-datatype IP ((IP.v4 (IP.a4 (_ BitVec 32)) (IP.p4 (_ BitVec 8))) "
            "(IP.v6 (IP.a6 (_ BitVec 128)) (IP.p6 (_ BitVec 8)))))");
  decl(enc, "(define-fun ip.m4 ((p (_ BitVec 8))) (_ BitVec 32) "
            "(bvshl #xffffffff (bvsub #x00000020 ((_ zero_extend 24) p))))");
  decl(enc, "(define-fun ip.m6 ((p (_ BitVec 8))) (_ BitVec 128) "
            "(bvshl (bvnot (_ bv0 128)) (bvsub (_ bv128 128) ((_ zero_extend 120) p))))");
  decl(enc, "(define-fun ip.lo4 ((x IP)) (_ BitVec 32) (bvand (IP.a4 x) (ip.m4 (IP.p4 x))))");
  decl(enc, "(define-fun ip.hi4 ((x IP)) (_ BitVec 32) (bvor (IP.a4 x) (bvnot (ip.m4 (IP.p4 x)))))");
  decl(enc, "(define-fun ip.lo6 ((x IP)) (_ BitVec 128) (bvand (IP.a6 x) (ip.m6 (IP.p6 x))))");
  decl(enc, "(define-fun ip.hi6 ((x IP)) (_ BitVec 128) (bvor (IP.a6 x) (bvnot (ip.m6 (IP.p6 x)))))");
  decl(enc, "(define-fun ip.inrange ((a IP) (r IP)) Bool (or "
            "(and ((_ is IP.v4) a) ((_ is IP.v4) r) (bvule (ip.lo4 r) (ip.lo4 a)) (bvule (ip.hi4 a) (ip.hi4 r))) "
            "(and ((_ is IP.v6) a) ((_ is IP.v6) r) (bvule (ip.lo6 r) (ip.lo6 a)) (bvule (ip.hi6 a) (ip.hi6 r)))))");
  decl(enc, "(define-fun ip.loopback ((a IP)) Bool (ite ((_ is IP.v4) a) "
            "(and (= ((_ extract 31 24) (IP.a4 a)) #x7f) (bvuge (IP.p4 a) #x08)) "
            "(and (= (IP.a6 a) (_ bv1 128)) (= (IP.p6 a) #x80))))");
  decl(enc, "(define-fun ip.multicast ((a IP)) Bool (ite ((_ is IP.v4) a) "
            "(and (= ((_ extract 31 28) (IP.a4 a)) #xe) (bvuge (IP.p4 a) #x04)) "
            "(and (= ((_ extract 127 120) (IP.a6 a)) #xff) (bvuge (IP.p6 a) #x08))))");
}

const char *shk__enc_opt(shk__enc *enc, const shk__ty *t)
{
  if (t->opt)
    return t->opt;
  shk__ty *m = (shk__ty *)t;
  const char *o = S("O%u", t->id);
  decl(enc, "(declare-datatype %s ((%s.none) (%s.some (%s.val %s))))", o, o, o, o, t->sort);
  m->opt = o;
  return o;
}

/* Interns a type, declaring its sort on first use (children first, so the
 * declarations are in dependency order). */
static const shk__ty *intern(shk__enc *enc, const shk__ty *proto)
{
  for (size_t i = 0; i < enc->n_types; i++)
    if (same_type(enc->types[i], proto))
      return enc->types[i];
  if (enc->n_types == enc->cap_types) {
    size_t cap = enc->cap_types ? enc->cap_types * 2 : 32;
    shk__ty **v = alloc(enc, cap * sizeof *v);
    if (enc->n_types)
      memcpy(v, enc->types, enc->n_types * sizeof *v);
    enc->types = v;
    enc->cap_types = cap;
  }
  shk__ty *t = alloc(enc, sizeof *t);
  *t = *proto;
  t->id = (unsigned)enc->n_types;
  if (t->n_attrs) {
    shk__tyattr *a = alloc(enc, t->n_attrs * sizeof *a);
    memcpy(a, proto->attrs, t->n_attrs * sizeof *a);
    t->attrs = a;
  }
  switch (t->k) {
  case SHK__TY_BOOL: t->sort = "Bool"; break;
  case SHK__TY_LONG:
  case SHK__TY_DECIMAL:
  case SHK__TY_DATETIME:
  case SHK__TY_DURATION:
    t->sort = "(_ BitVec 64)";
    break;
  case SHK__TY_STRING: t->sort = "String"; break;
  case SHK__TY_IP:
    declare_ip(enc);
    t->sort = "IP";
    break;
  case SHK__TY_ENTITY:
    t->sort = S("E%u", t->ent->id);
    decl(enc, "(declare-datatype %s ((%s (%s.id String))))", t->sort, t->sort, t->sort);
    break;
  case SHK__TY_SET: t->sort = S("(Set %s)", t->elem->sort); break;
  case SHK__TY_RECORD: {
    const char *r = S("R%u", t->id);
    const char *text = S("(declare-datatype %s ((%s", r, r);
    for (size_t i = 0; i < t->n_attrs; i++) {
      const char *fs = t->attrs[i].required ? t->attrs[i].t->sort : shk__enc_opt(enc, t->attrs[i].t);
      text = S("%s (%s.%zu %s)", text, r, i, fs);
    }
    text = S("%s)))", text);
    decl(enc, "%s", text);
    t->sort = r;
    break;
  }
  }
  enc->types[enc->n_types++] = t;
  return t;
}

static const shk__ty *ty_prim(shk__enc *enc, shk__tyk k)
{
  shk__ty p = { .k = k };
  return intern(enc, &p);
}

static const shk__ty *ty_set(shk__enc *enc, const shk__ty *elem)
{
  shk__ty p = { .k = SHK__TY_SET, .elem = elem };
  return intern(enc, &p);
}

static const shk__ty *ty_entity(shk__enc *enc, shk__ety *et)
{
  if (et->t)
    return et->t;
  shk__ty p = { .k = SHK__TY_ENTITY, .ent = et };
  et->t = intern(enc, &p);
  return et->t;
}

static const shk__ty *enc_type(shk__enc *enc, const shk__type *st)
{
  switch (st->kind) {
  case SHK__T_BOOL: return ty_prim(enc, SHK__TY_BOOL);
  case SHK__T_LONG: return ty_prim(enc, SHK__TY_LONG);
  case SHK__T_STRING: return ty_prim(enc, SHK__TY_STRING);
  case SHK__T_SET: return ty_set(enc, enc_type(enc, st->elem));
  case SHK__T_RECORD: {
    shk__tyattr *a = st->n_attrs ? alloc(enc, st->n_attrs * sizeof *a) : NULL;
    for (size_t i = 0; i < st->n_attrs; i++)
      a[i] = (shk__tyattr){ st->attrs[i].name, enc_type(enc, st->attrs[i].type),
                            st->attrs[i].required };
    shk__ty p = { .k = SHK__TY_RECORD, .attrs = a, .n_attrs = st->n_attrs };
    return intern(enc, &p);
  }
  case SHK__T_ENTITY: {
    shk__ety *et = find_ety(enc, st->name);
    if (!et || et->is_action)
      REFUSE(enc, SHK__NOLOC, "an attribute of type %.*s (not an entity type of the schema) is not encoded",
             Q(st->name));
    return ty_entity(enc, et);
  }
  case SHK__T_EXT:
    if (shk__str_eq(st->name, SHK__STR_LIT("ipaddr")))
      return ty_prim(enc, SHK__TY_IP);
    if (shk__str_eq(st->name, SHK__STR_LIT("decimal")))
      return ty_prim(enc, SHK__TY_DECIMAL);
    if (shk__str_eq(st->name, SHK__STR_LIT("datetime")))
      return ty_prim(enc, SHK__TY_DATETIME);
    if (shk__str_eq(st->name, SHK__STR_LIT("duration")))
      return ty_prim(enc, SHK__TY_DURATION);
    REFUSE(enc, SHK__NOLOC, "the extension type %.*s is not encoded", Q(st->name));
  }
  REFUSE(enc, SHK__NOLOC, "a schema type is not encoded");
}

int shk__ty_attr(const shk__ty *t, shk__str name)
{
  for (size_t i = 0; i < t->n_attrs; i++)
    if (shk__str_eq(t->attrs[i].name, name))
      return (int)i;
  return -1;
}

static void ty_name(shk__text *b, const shk__ty *t)
{
  switch (t->k) {
  case SHK__TY_BOOL: shk__text_puts(b, "Bool"); return;
  case SHK__TY_LONG: shk__text_puts(b, "Long"); return;
  case SHK__TY_STRING: shk__text_puts(b, "String"); return;
  case SHK__TY_IP: shk__text_puts(b, "ipaddr"); return;
  case SHK__TY_DECIMAL: shk__text_puts(b, "decimal"); return;
  case SHK__TY_DATETIME: shk__text_puts(b, "datetime"); return;
  case SHK__TY_DURATION: shk__text_puts(b, "duration"); return;
  case SHK__TY_ENTITY: shk__text_printf(b, "%.*s", Q(t->ent->name)); return;
  case SHK__TY_SET:
    shk__text_puts(b, "Set<");
    ty_name(b, t->elem);
    shk__text_puts(b, ">");
    return;
  case SHK__TY_RECORD:
    shk__text_puts(b, "{");
    for (size_t i = 0; i < t->n_attrs; i++)
      shk__text_printf(b, "%s%.*s%s", i ? ", " : "", Q(t->attrs[i].name), t->attrs[i].required ? "" : "?");
    shk__text_puts(b, "}");
    return;
  }
}

static const char *tyname(shk__enc *enc, const shk__ty *t)
{
  shk__text b = { 0 };
  ty_name(&b, t);
  return keep_text(enc, &b);
}

/* ---------------------------------------------------------------- literals */

static const char *smt_string(shk__enc *enc, shk__str s, shk__loc loc)
{
  shk__text t = { 0 };
  if (!shk__text_smt_string(&t, s)) {
    shk__text_free(&t);
    REFUSE(enc, loc, "a string with a character above U+2FFFF (outside the solver's alphabet) is not encoded");
  }
  return keep_text(enc, &t);
}

const char *shk__enc_uid(shk__enc *enc, const shk__ety *t, shk__str id)
{
  ty_entity(enc, (shk__ety *)t);
  return S("(E%u %s)", t->id, smt_string(enc, id, SHK__NOLOC));
}

static const char *bv64(shk__enc *enc, int64_t v)
{
  return S("#x%016llx", (unsigned long long)(uint64_t)v);
}

static const char *ip_term(shk__enc *enc, const shk__ipaddr *ip)
{
  declare_ip(enc);
  if (!ip->v6)
    return S("(IP.v4 #x%02x%02x%02x%02x #x%02x)", ip->addr[0], ip->addr[1], ip->addr[2],
             ip->addr[3], ip->prefix);
  char hex[33];
  for (int i = 0; i < 16; i++)
    snprintf(hex + 2 * i, 3, "%02x", ip->addr[i]);
  return S("(IP.v6 #x%s #x%02x)", hex, ip->prefix);
}

/* ---------------------------------------------------------------- functions of the store */

static void fp_add(shk__enc *enc, const char *term, shk__ety *et)
{
  for (size_t i = 0; i < enc->n_fp; i++)
    if (enc->fp[i].et == et && !strcmp(enc->fp[i].term, term))
      return;
  if (enc->n_fp == enc->cap_fp) {
    size_t cap = enc->cap_fp ? enc->cap_fp * 2 : 16;
    shk__fp *v = alloc(enc, cap * sizeof *v);
    if (enc->n_fp)
      memcpy(v, enc->fp, enc->n_fp * sizeof *v);
    enc->fp = v;
    enc->cap_fp = cap;
  }
  enc->fp[enc->n_fp++] = (shk__fp){ term, et };
}

static const char *enc_fn_ex(shk__enc *enc, shk__ety *t)
{
  if (!t->has_ex) {
    t->has_ex = true;
    decl(enc, "(declare-fun ex%u (%s) Bool)", t->id, ty_entity(enc, t)->sort);
  }
  return S("ex%u", t->id);
}

static const char *enc_fn_at(shk__enc *enc, shk__ety *t)
{
  if (!t->has_at) {
    t->has_at = true;
    decl(enc, "(declare-fun at%u (%s) %s)", t->id, ty_entity(enc, t)->sort, t->shape->sort);
  }
  return S("at%u", t->id);
}

static const char *enc_fn_an(shk__enc *enc, shk__ety *t, const shk__ety *u)
{
  if (!t->has_an[u->id]) {
    t->has_an[u->id] = true;
    ((shk__ety *)u)->set = ty_set(enc, ty_entity(enc, (shk__ety *)u));
    decl(enc, "(declare-fun an%u_%u (%s) (Set %s))", t->id, u->id, ty_entity(enc, t)->sort,
         ty_entity(enc, (shk__ety *)u)->sort);
  }
  return S("an%u_%u", t->id, u->id);
}

static const char *enc_fn_tk(shk__enc *enc, shk__ety *t)
{
  if (!t->has_tk) {
    t->has_tk = true;
    enc->strings = ty_set(enc, ty_prim(enc, SHK__TY_STRING));
    decl(enc, "(declare-fun tk%u (%s) (Set String))", t->id, ty_entity(enc, t)->sort);
  }
  return S("tk%u", t->id);
}

static const char *enc_fn_tv(shk__enc *enc, shk__ety *t)
{
  if (!t->has_tv) {
    t->has_tv = true;
    decl(enc, "(declare-fun tv%u (%s String) %s)", t->id, ty_entity(enc, t)->sort, t->tags->sort);
  }
  return S("tv%u", t->id);
}

/* The well-formedness of a symbolic term of type T (the values a valid
 * request or store can hold), or NULL when every value of the sort is
 * one. */
static const char *enc_wf(shk__enc *enc, const char *term, const shk__ty *t);

/* An application of a store function, named once per argument, with the
 * well-formedness of its value assumed when it is first made. */
static const char *app(shk__enc *enc, const char *fn, const char *args, const char *sort,
                       const shk__ty *wf_type)
{
  const char *key = S("%s %s", fn, args);
  struct shk__memo *m = memo_slot(enc, key);
  if (m->key)
    return m->name;
  const char *name = DEF(sort, "(%s %s)", fn, args);
  m->key = key;
  m->name = name;
  enc->memo_n++;
  if (wf_type) {
    const char *wf = enc_wf(enc, name, wf_type);
    if (wf)
      assertf(enc, "%s", wf);
  }
  return name;
}

static const char *ex_of(shk__enc *enc, shk__ety *t, const char *term)
{
  fp_add(enc, term, t);
  return app(enc, enc_fn_ex(enc, t), term, "Bool", NULL);
}

static const char *at_of(shk__enc *enc, shk__ety *t, const char *term)
{
  fp_add(enc, term, t);
  return app(enc, enc_fn_at(enc, t), term, t->shape->sort, t->shape);
}

static const char *an_of(shk__enc *enc, shk__ety *t, const shk__ety *u, const char *term)
{
  fp_add(enc, term, t);
  const shk__ty *st = ty_set(enc, ty_entity(enc, (shk__ety *)u));
  return app(enc, enc_fn_an(enc, t, u), term, st->sort, st);
}

/* ---------------------------------------------------------------- well-formedness */

static bool needs_wf(const shk__ty *t)
{
  switch (t->k) {
  case SHK__TY_ENTITY: return t->ent->et && t->ent->et->is_enum;
  case SHK__TY_IP: return true;
  case SHK__TY_SET: return needs_wf(t->elem);
  case SHK__TY_RECORD:
    for (size_t i = 0; i < t->n_attrs; i++)
      if (needs_wf(t->attrs[i].t))
        return true;
    return false;
  case SHK__TY_BOOL:
  case SHK__TY_LONG:
  case SHK__TY_STRING:
  case SHK__TY_DECIMAL:
  case SHK__TY_DATETIME:
  case SHK__TY_DURATION:
    return false;
  }
  return false;
}

static bool has_ip(const shk__ty *t)
{
  if (t->k == SHK__TY_IP)
    return true;
  if (t->k == SHK__TY_SET)
    return has_ip(t->elem);
  for (size_t i = 0; t->k == SHK__TY_RECORD && i < t->n_attrs; i++)
    if (has_ip(t->attrs[i].t))
      return true;
  return false;
}

/* The members of an enumerated entity type as a literal set. */
static const char *enum_members(shk__enc *enc, const shk__ety *et)
{
  const shk__ty *t = ty_entity(enc, (shk__ety *)et);
  const char *r = S("(as set.empty (Set %s))", t->sort);
  for (size_t i = 0; i < et->et->n_enum_ids; i++)
    r = S("(set.insert %s %s)", shk__enc_uid(enc, et, et->et->enum_ids[i]), r);
  return r;
}

static const char *enc_wf(shk__enc *enc, const char *term, const shk__ty *t)
{
  if (!needs_wf(t))
    return NULL;
  switch (t->k) {
  case SHK__TY_ENTITY:
    return S("(set.member %s %s)", term, enum_members(enc, t->ent));
  case SHK__TY_IP:
    return S("(ite ((_ is IP.v4) %s) (bvule (IP.p4 %s) #x20) (bvule (IP.p6 %s) #x80))", term, term, term);
  case SHK__TY_SET: {
    if (t->elem->k == SHK__TY_ENTITY)
      return S("(set.subset %s %s)", term, enum_members(enc, t->elem->ent));
    /* A bounded quantifier over the members (the solver runs with
     * --fmf-bound); over ipaddr values cvc5 gives no answer, so those are
     * refused. */
    if (has_ip(t->elem))
      REFUSE(enc, SHK__NOLOC, "a set of %s values from the request or the store is not encoded "
             "(the solver cannot decide their well-formedness)", tyname(enc, t->elem));
    const char *x = S("q%u", enc->next++);
    return S("(forall ((%s %s)) (=> (set.member %s %s) %s))", x, t->elem->sort, x, term,
             enc_wf(enc, x, t->elem));
  }
  case SHK__TY_RECORD: {
    const char *r = "(and true";
    for (size_t i = 0; i < t->n_attrs; i++) {
      if (!needs_wf(t->attrs[i].t))
        continue;
      const char *f = S("(%s.%zu %s)", t->sort, i, term);
      if (t->attrs[i].required) {
        r = S("%s %s", r, enc_wf(enc, f, t->attrs[i].t));
      } else {
        const char *o = shk__enc_opt(enc, t->attrs[i].t);
        r = S("%s (=> ((_ is %s.some) %s) %s)", r, o, f, enc_wf(enc, S("(%s.val %s)", o, f), t->attrs[i].t));
      }
    }
    return S("%s)", r);
  }
  case SHK__TY_BOOL:
  case SHK__TY_LONG:
  case SHK__TY_STRING:
  case SHK__TY_DECIMAL:
  case SHK__TY_DATETIME:
  case SHK__TY_DURATION:
    break;
  }
  return NULL;
}

/* ---------------------------------------------------------------- encoder set-up */

void shk__enc_free(shk__enc *enc)
{
  if (!enc)
    return;
  shk__text_free(&enc->decl);
  shk__text_free(&enc->body);
  shk__pool_free(enc->pool);
}

/* The action types of the schema ("NS::Action"), each once. */
static bool seen_name(const shk__ety *v, size_t n, shk__str name)
{
  for (size_t i = 0; i < n; i++)
    if (shk__str_eq(v[i].name, name))
      return true;
  return false;
}

int shk__enc_new(const shk__schema *s, const shk__aenv *env, shk__enc **out, shk_error *err)
{
  *out = NULL;
  shk__pool *pool = shk__pool_new();
  shk__enc *enc = pool ? shk__pool_alloc(pool, sizeof *enc) : NULL;
  size_t cap = s->n_etypes + s->n_actions;
  shk__ety *etys = enc ? shk__pool_alloc(pool, (cap ? cap : 1) * sizeof *etys) : NULL;
  if (!etys) {
    shk__pool_free(pool);
    return shk__error_set(err, -ENOMEM, "out of memory encoding the policies");
  }
  enc->pool = pool;
  enc->s = s;
  enc->err = err;
  if (env)
    enc->env = *env;
  enc->etys = etys;
  size_t n = 0;
  for (size_t i = 0; i < s->n_etypes; i++)
    etys[n++] = (shk__ety){ .name = s->etypes[i].name, .et = &s->etypes[i] };
  for (size_t i = 0; i < s->n_actions; i++)
    if (!seen_name(etys, n, s->actions[i].uid.type))
      etys[n++] = (shk__ety){ .name = s->actions[i].uid.type, .is_action = true };
  enc->n_etys = n;
  for (size_t i = 0; i < n; i++) {
    etys[i].id = (unsigned)i;
    etys[i].anc = shk__pool_alloc(pool, n);
    etys[i].has_an = shk__pool_alloc(pool, n);
    if (!etys[i].anc || !etys[i].has_an) {
      shk__pool_free(pool);
      return shk__error_set(err, -ENOMEM, "out of memory encoding the policies");
    }
  }
  /* The types each type's ancestors may have: the closure of memberOf for
   * entity types, of the action groups for action types. */
  for (size_t i = 0; i < n; i++) {
    if (etys[i].et) {
      for (size_t m = 0; m < etys[i].et->n_member_of; m++) {
        shk__ety *u = NULL;
        for (size_t j = 0; j < n && !u; j++)
          if (shk__str_eq(etys[j].name, etys[i].et->member_of[m]))
            u = &etys[j];
        if (u)
          etys[i].anc[u->id] = true;
      }
    } else {
      for (size_t a = 0; a < s->n_actions; a++) {
        if (!shk__str_eq(s->actions[a].uid.type, etys[i].name))
          continue;
        for (size_t m = 0; m < s->actions[a].n_member_of; m++)
          for (size_t j = 0; j < n; j++)
            if (shk__str_eq(etys[j].name, s->actions[a].member_of[m].type))
              etys[i].anc[j] = true;
      }
    }
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < n; i++)
      for (size_t j = 0; j < n; j++)
        if (etys[i].anc[j])
          for (size_t k = 0; k < n; k++)
            if (etys[j].anc[k] && !etys[i].anc[k])
              etys[i].anc[k] = changed = true;
  }
  *out = enc;
  return 0;
}

void shk__enc_request(shk__enc *enc)
{
  const shk__aenv *env = &enc->env;
  shk__ety *p = find_ety(enc, env->principal), *r = find_ety(enc, env->resource);
  shk__ety *a = find_ety(enc, env->action->uid.type);
  if (!p || !r || !a || p->is_action || r->is_action)
    REFUSE(enc, SHK__NOLOC, "the request environment names a type the schema does not declare");
  /* Attribute and tag types, now that every entity type has an ety. */
  for (size_t i = 0; i < enc->n_etys; i++) {
    shk__ety *t = &enc->etys[i];
    if (!t->et)
      continue;
    if (t->et->shape && t->et->shape->n_attrs)
      t->shape = enc_type(enc, t->et->shape);
    if (t->et->tags)
      t->tags = enc_type(enc, t->et->tags);
  }
  enc->P = p;
  enc->R = r;
  enc->A = a;
  static const shk__type empty = { .kind = SHK__T_RECORD };
  enc->ctx = enc_type(enc, env->action->context ? env->action->context : &empty);
  /* A principal or resource given as a concrete entity is that literal,
   * so that every scope comparing it with a literal folds here. */
  if (enc->cp)
    decl(enc, "(define-fun principal () %s %s)", ty_entity(enc, p)->sort, shk__enc_uid(enc, p, enc->cp->id));
  else
    decl(enc, "(declare-const principal %s)", ty_entity(enc, p)->sort);
  if (enc->cr)
    decl(enc, "(define-fun resource () %s %s)", ty_entity(enc, r)->sort, shk__enc_uid(enc, r, enc->cr->id));
  else
    decl(enc, "(declare-const resource %s)", ty_entity(enc, r)->sort);
  decl(enc, "(declare-const context %s)", enc->ctx->sort);
  const char *vars[] = { "principal", "resource", "context" };
  const shk__ty *types[] = { p->t, r->t, enc->ctx };
  for (int i = 0; i < 3; i++) {
    const char *wf = enc_wf(enc, vars[i], types[i]);
    if (wf)
      assertf(enc, "%s", wf);
  }
  fp_add(enc, "principal", p);
  fp_add(enc, "resource", r);
}

/* ---------------------------------------------------------------- values */

static shk__v vbool(bool b)
{
  return (shk__v){ .v = b ? T_ : F_, .e = F_, .kb = (signed char)b };
}

static shk__v mkv(const shk__ty *t, const char *v, const char *e)
{
  return (shk__v){ .t = t, .v = v, .e = e, .kb = -1 };
}

/* The principal or the resource: a literal when the encoder was given it. */
static shk__v var_v(shk__enc *enc, shk__var v)
{
  bool p = v == SHK__VAR_PRINCIPAL;
  shk__v r = mkv(p ? enc->P->t : enc->R->t, p ? "principal" : "resource", F_);
  r.lit = p ? enc->cp : enc->cr;
  return r;
}

static shk__v want(shk__enc *enc, shk__v x, shk__tyk k, const shk__expr *e, const char *op)
{
  if (!x.t || x.t->k != k)
    REFUSE(enc, e->loc, "%s on a %s operand is not encoded (the validator should have refused it)", op,
           x.t ? tyname(enc, x.t) : "?");
  return x;
}

static const shk__ty *T_bool(shk__enc *enc) { return ty_prim(enc, SHK__TY_BOOL); }

static shk__v bconst(shk__enc *enc, bool b, const char *e)
{
  shk__v r = vbool(b);
  r.t = T_bool(enc);
  r.e = e;
  return r;
}

static shk__v bval(shk__enc *enc, const char *v, const char *e)
{
  shk__v r = mkv(T_bool(enc), v, e);
  if (is_true(v))
    r.kb = 1;
  else if (is_false(v))
    r.kb = 0;
  return r;
}

/* ---------------------------------------------------------------- actions */

static bool action_in(const shk__schema *s, shk__uid a, shk__uid b)
{
  if (shk__uid_eq(a, b))
    return true;
  const shk__action *ac = shk__schema_action(s, a);
  if (!ac)
    return false;
  /* The action hierarchy is acyclic (the schema refuses cycles) and small. */
  for (size_t i = 0; i < ac->n_member_of; i++)
    if (action_in(s, ac->member_of[i], b))
      return true;
  return false;
}

/* The action's ancestors of type U as a literal set. */
static const char *action_ancestors(shk__enc *enc, shk__uid a, const shk__ety *u)
{
  const shk__ty *st = ty_set(enc, ty_entity(enc, (shk__ety *)u));
  const char *r = S("(as set.empty %s)", st->sort);
  for (size_t i = 0; i < enc->s->n_actions; i++) {
    shk__uid b = enc->s->actions[i].uid;
    if (shk__str_eq(b.type, u->name) && !shk__uid_eq(a, b) && action_in(enc->s, a, b))
      r = S("(set.insert %s %s)", shk__enc_uid(enc, u, b.id), r);
  }
  return r;
}

/* ---------------------------------------------------------------- expressions */

static shk__v ex(shk__enc *enc, const shk__expr *e);

static const char *err2(shk__enc *enc, shk__v a, shk__v b)
{
  return b_or(enc, a.e, b.e);
}

/* a && b, with b encoded only where the validator checks it. */
static shk__v and_v(shk__enc *enc, shk__v a, const shk__expr *be, const shk__v *bv)
{
  if (a.kb == 0)
    return bconst(enc, false, a.e);
  shk__v b = bv ? *bv : want(enc, ex(enc, be), SHK__TY_BOOL, be, "&&");
  const char *e = b_or(enc, a.e, b_and(enc, a.v, b.e));
  shk__v r = bval(enc, b_and(enc, a.v, b.v), e);
  if (a.kb == 1)
    r.kb = b.kb;
  else if (b.kb == 0)
    r.kb = 0;
  if (r.kb >= 0)
    r.v = r.kb ? T_ : F_;
  return r;
}

static shk__v or_v(shk__enc *enc, shk__v a, const shk__expr *be)
{
  if (a.kb == 1)
    return bconst(enc, true, a.e);
  shk__v b = want(enc, ex(enc, be), SHK__TY_BOOL, be, "||");
  const char *e = b_or(enc, a.e, b_and(enc, b_not(enc, a.v), b.e));
  shk__v r = bval(enc, b_or(enc, a.v, b.v), e);
  if (a.kb == 0)
    r.kb = b.kb;
  else if (b.kb == 1)
    r.kb = 1;
  if (r.kb >= 0)
    r.v = r.kb ? T_ : F_;
  return r;
}

static shk__v not_v(shk__enc *enc, shk__v a)
{
  shk__v r = bval(enc, b_not(enc, a.v), a.e);
  r.kb = a.kb < 0 ? -1 : !a.kb;
  return r;
}

/* Literal equality the validator decides from the text alone. */
static bool lit_eq(const shk__expr *x, const shk__expr *y)
{
  if (x->kind != y->kind)
    return false;
  if (x->kind == SHK__E_BOOL)
    return x->bval == y->bval;
  if (x->kind == SHK__E_LONG)
    return x->lval == y->lval;
  return x->kind == SHK__E_STRING && shk__str_eq(x->s, y->s);
}

static shk__v eq_v(shk__enc *enc, const shk__expr *e, shk__v a, shk__v b)
{
  const char *err = err2(enc, a, b);
  if (a.t->k == SHK__TY_ENTITY && b.t->k == SHK__TY_ENTITY && a.t != b.t)
    return bconst(enc, false, err);
  if (a.lit && b.lit)
    return bconst(enc, shk__uid_eq(*a.lit, *b.lit), err);
  if ((a.lit || a.plit) && (b.lit || b.plit)) {
    if (a.lit || b.lit)
      return bconst(enc, false, err);
    return bconst(enc, lit_eq(a.plit, b.plit), err);
  }
  if (a.t != b.t)
    REFUSE(enc, e->loc, "== between %s and %s is not encoded (the validator should have refused it)",
           tyname(enc, a.t), tyname(enc, b.t));
  return bval(enc, DEF("Bool", "(= %s %s)", a.v, b.v), err);
}

static bool comparable(const shk__ty *t)
{
  return t->k == SHK__TY_LONG || t->k == SHK__TY_DATETIME || t->k == SHK__TY_DURATION;
}

static shk__v compare_v(shk__enc *enc, const shk__expr *e, shk__v a, shk__v b)
{
  if (a.t != b.t || !comparable(a.t))
    REFUSE(enc, e->loc, "comparing %s with %s is not encoded", tyname(enc, a.t), tyname(enc, b.t));
  const char *op = e->kind == SHK__E_LT ? "bvslt" : e->kind == SHK__E_LE ? "bvsle"
                 : e->kind == SHK__E_GT ? "bvsgt" : "bvsge";
  return bval(enc, DEF("Bool", "(%s %s %s)", op, a.v, b.v), err2(enc, a, b));
}

/* + - * on Long: overflow is an error, as the engine raises it. */
static shk__v arith_v(shk__enc *enc, const shk__expr *e, shk__v a, shk__v b)
{
  want(enc, a, SHK__TY_LONG, e->a, "arithmetic");
  want(enc, b, SHK__TY_LONG, e->b, "arithmetic");
  const char *op = e->kind == SHK__E_ADD ? "bvadd" : e->kind == SHK__E_SUB ? "bvsub" : "bvmul";
  const char *of = e->kind == SHK__E_ADD ? "bvsaddo" : e->kind == SHK__E_SUB ? "bvssubo" : "bvsmulo";
  const char *o = DEF("Bool", "(%s %s %s)", of, a.v, b.v);
  return mkv(a.t, DEF(a.t->sort, "(%s %s %s)", op, a.v, b.v), b_or(enc, err2(enc, a, b), o));
}

/* The entity `a in b` (b an entity or a set of entities). */
static shk__v in_v(shk__enc *enc, const shk__expr *e, shk__v a, shk__v b)
{
  const char *err = err2(enc, a, b);
  if (a.t->k != SHK__TY_ENTITY)
    REFUSE(enc, e->loc, "`in` on a %s is not encoded", tyname(enc, a.t));
  const shk__ty *bt = b.t->k == SHK__TY_SET ? b.t->elem : b.t;
  if (bt->k != SHK__TY_ENTITY)
    REFUSE(enc, e->loc, "`in` a %s is not encoded", tyname(enc, b.t));
  shk__ety *T = (shk__ety *)a.t->ent, *U = (shk__ety *)bt->ent;
  bool set = b.t->k == SHK__TY_SET;
  if (T->is_action && !a.lit) {
    /* An action that is not a literal is one of the schema's actions of
     * its type: the answer for each, selected by equality. */
    const char *r = F_;
    for (size_t i = 0; i < enc->s->n_actions; i++) {
      const shk__action *ac = &enc->s->actions[i];
      if (!shk__str_eq(ac->uid.type, T->name))
        continue;
      shk__v one = mkv(a.t, shk__enc_uid(enc, T, ac->uid.id), F_);
      one.lit = &ac->uid;
      shk__v in = in_v(enc, e, one, b);
      r = b_or(enc, r, b_and(enc, DEF("Bool", "(= %s %s)", a.v, one.v), in.v));
    }
    return bval(enc, r, err);
  }
  if (T->is_action) {
    if (!set && b.lit)
      return bconst(enc, action_in(enc->s, *a.lit, *b.lit), err);
    if (!T->anc[U->id] && T != U)
      return bconst(enc, false, err);
    if (!set) {
      /* An action that is not a literal is one of its type's actions. */
      const char *r = F_;
      for (size_t i = 0; i < enc->s->n_actions; i++) {
        const shk__action *ac = &enc->s->actions[i];
        if (shk__str_eq(ac->uid.type, U->name) && action_in(enc->s, *a.lit, ac->uid))
          r = b_or(enc, r, DEF("Bool", "(= %s %s)", b.v, shk__enc_uid(enc, U, ac->uid.id)));
      }
      return bval(enc, r, err);
    }
    const char *anc = action_ancestors(enc, *a.lit, U);
    const char *mem = T == U ? S("(set.member %s %s)", a.v, b.v) : F_;
    return bval(enc, DEF("Bool", "(or %s (not (= (set.inter %s %s) (as set.empty %s))))", mem, anc, b.v,
                         b.t->sort), err);
  }
  const char *eq = F_, *in = F_;
  if (T == U)
    eq = DEF("Bool", set ? "(set.member %s %s)" : "(= %s %s)", a.v, b.v);
  if (T->anc[U->id]) {
    const char *anc = an_of(enc, T, U, a.v);
    const char *x = set ? DEF("Bool", "(not (= (set.inter %s %s) (as set.empty %s)))", anc, b.v, b.t->sort)
                        : DEF("Bool", "(set.member %s %s)", b.v, anc);
    in = b_and(enc, ex_of(enc, T, a.v), x);
  }
  shk__v r = bval(enc, b_or(enc, eq, in), err);
  return r;
}

/* The entity uid of a literal or of the `action` variable. */
static bool euid_of(const shk__enc *enc, const shk__expr *e, shk__uid *out)
{
  if (e->kind == SHK__E_ENTITY) {
    *out = e->uid;
    return true;
  }
  if (e->kind == SHK__E_VAR && e->var == SHK__VAR_ACTION) {
    *out = enc->env.action->uid;
    return true;
  }
  return false;
}

static bool is_action_name(const shk__enc *enc, shk__str type)
{
  return shk__schema_is_action_type(enc->s, type);
}

/* `action in [A, B]` and the like are decided from the schema, as the
 * validator types them. Returns false when the shape is not that one. */
static bool static_action_in(shk__enc *enc, const shk__expr *e, bool *out)
{
  shk__uid lu;
  if (!euid_of(enc, e->a, &lu) || !is_action_name(enc, lu.type))
    return false;
  const shk__expr *const *items;
  size_t n;
  const shk__expr *one = e->b;
  if (e->b->kind == SHK__E_SET) {
    items = (const shk__expr *const *)e->b->items;
    n = e->b->n_items;
  } else {
    items = &one;
    n = 1;
  }
  for (size_t i = 0; i < n; i++) {
    shk__uid u;
    if (!euid_of(enc, items[i], &u))
      return false;
  }
  bool found = false;
  for (size_t i = 0; i < n; i++) {
    shk__uid u;
    euid_of(enc, items[i], &u);
    if (is_action_name(enc, u.type) && action_in(enc->s, lu, u))
      found = true;
  }
  *out = found;
  return true;
}

static shk__v getattr_v(shk__enc *enc, const shk__expr *e, shk__v a, bool has)
{
  const shk__ty *rt;
  const char *rec, *err = a.e, *exists = T_;
  if (a.t->k == SHK__TY_ENTITY) {
    shk__ety *T = (shk__ety *)a.t->ent;
    int k = T->shape ? shk__ty_attr(T->shape, e->s) : -1;
    if (k < 0) {
      if (has)
        return bconst(enc, false, a.e);
      REFUSE(enc, e->loc, "attribute `%.*s` of %s, which does not declare it, is not encoded", Q(e->s),
             tyname(enc, a.t));
    }
    exists = ex_of(enc, T, a.v);
    rec = at_of(enc, T, a.v);
    rt = T->shape;
  } else if (a.t->k == SHK__TY_RECORD) {
    rec = a.v;
    rt = a.t;
  } else {
    REFUSE(enc, e->loc, "`%s` on a %s is not encoded", has ? "has" : ".", tyname(enc, a.t));
  }
  int k = shk__ty_attr(rt, e->s);
  if (k < 0) {
    if (has)
      return bconst(enc, false, a.e);
    REFUSE(enc, e->loc, "attribute `%.*s` of a record that does not declare it is not encoded", Q(e->s));
  }
  const shk__tyattr *at = &rt->attrs[k];
  const char *field = app(enc, S("%s.%d", rt->sort, k), rec,
                          at->required ? at->t->sort : shk__enc_opt(enc, at->t), NULL);
  const char *some = at->required ? T_ : DEF("Bool", "((_ is %s.some) %s)", at->t->opt, field);
  if (has) {
    shk__v r = bval(enc, b_and(enc, exists, some), a.e);
    return r;
  }
  err = b_or(enc, err, b_or(enc, b_not(enc, exists), b_not(enc, some)));
  const char *v = at->required ? field : app(enc, S("%s.val", at->t->opt), field, at->t->sort, NULL);
  return mkv(at->t, v, err);
}

static const char *like_re(shk__enc *enc, const shk__expr *e)
{
  const char *r = "";
  size_t parts = 0;
  for (size_t i = 0; i < e->n_pat;) {
    if (e->pat[i].wildcard) {
      while (i < e->n_pat && e->pat[i].wildcard)
        i++;
      r = S("%s re.all", r);
      parts++;
      continue;
    }
    size_t j = i;
    while (j < e->n_pat && !e->pat[j].wildcard)
      j++;
    char *lit = alloc(enc, j - i + 1);
    for (size_t k = i; k < j; k++)
      lit[k - i] = (char)e->pat[k].byte;
    r = S("%s (str.to_re %s)", r, smt_string(enc, (shk__str){ lit, j - i }, e->loc));
    parts++;
    i = j;
  }
  return parts == 0 ? "(str.to_re \"\")" : parts == 1 ? r + 1 : S("(re.++%s)", r);
}

static shk__v set_v(shk__enc *enc, const shk__expr *e)
{
  if (e->n_items == 0)
    REFUSE(enc, e->loc, "an empty set literal is not encoded (strict validation forbids it)");
  shk__v *items = alloc(enc, e->n_items * sizeof *items);
  const char *err = F_;
  for (size_t i = 0; i < e->n_items; i++) {
    items[i] = ex(enc, e->items[i]);
    if (items[i].t != items[0].t)
      REFUSE(enc, e->loc, "a set literal of %s and %s is not encoded", tyname(enc, items[0].t),
             tyname(enc, items[i].t));
    err = b_or(enc, err, items[i].e);
  }
  const char *x = S("(set.singleton %s)", items[0].v);
  for (size_t i = 1; i < e->n_items; i++)
    x = S("(set.insert %s %s)", items[i].v, x);
  const shk__ty *t = ty_set(enc, items[0].t);
  const char *v = enc_def(enc, t->sort, x);
  return mkv(t, v, err);
}

static shk__v record_v(shk__enc *enc, const shk__expr *e)
{
  size_t n = e->n_items;
  shk__tyattr *at = n ? alloc(enc, n * sizeof *at) : NULL;
  shk__v *vals = n ? alloc(enc, n * sizeof *vals) : NULL;
  const char *err = F_;
  for (size_t i = 0; i < n; i++) {
    shk__v x = ex(enc, e->items[i]);
    err = b_or(enc, err, x.e);
    size_t j = i;
    while (j > 0 && shk__str_cmp(at[j - 1].name, e->keys[i]) > 0) {
      at[j] = at[j - 1];
      vals[j] = vals[j - 1];
      j--;
    }
    at[j] = (shk__tyattr){ e->keys[i], x.t, true };
    vals[j] = x;
  }
  shk__ty p = { .k = SHK__TY_RECORD, .attrs = at, .n_attrs = n };
  const shk__ty *t = intern(enc, &p);
  if (n == 0)
    return mkv(t, t->sort, err);
  const char *x = S("(%s", t->sort);
  for (size_t i = 0; i < n; i++)
    x = S("%s %s", x, vals[i].v);
  const char *v = enc_def(enc, t->sort, S("%s)", x));
  return mkv(t, v, err);
}

static shk__v tag_v(shk__enc *enc, const shk__expr *e, shk__v a, shk__v k)
{
  want(enc, a, SHK__TY_ENTITY, e, e->fn == SHK__FN_HAS_TAG ? "hasTag" : "getTag");
  want(enc, k, SHK__TY_STRING, e, e->fn == SHK__FN_HAS_TAG ? "hasTag" : "getTag");
  shk__ety *T = (shk__ety *)a.t->ent;
  const char *err = err2(enc, a, k);
  if (!T->tags) {
    if (e->fn == SHK__FN_HAS_TAG)
      return bconst(enc, false, err);
    REFUSE(enc, e->loc, "getTag on %s, which declares no tags, is not encoded", tyname(enc, a.t));
  }
  const char *exists = ex_of(enc, T, a.v);
  const char *keys = app(enc, enc_fn_tk(enc, T), a.v, "(Set String)", NULL);
  const char *has = b_and(enc, exists, DEF("Bool", "(set.member %s %s)", k.v, keys));
  if (e->fn == SHK__FN_HAS_TAG)
    return bval(enc, has, err);
  const char *v = app(enc, enc_fn_tv(enc, T), S("%s %s", a.v, k.v), T->tags->sort, T->tags);
  return mkv(T->tags, v, b_or(enc, err, b_not(enc, has)));
}

/* A constructor on a literal: strict validation admits no other. */
static shk__v ext_literal(shk__enc *enc, const shk__expr *e)
{
  if (e->n_items != 1 || e->items[0]->kind != SHK__E_STRING)
    REFUSE(enc, e->loc, "`%s` on anything but a string literal is not encoded", shk__fn_name(e->fn));
  shk__str s = e->items[0]->s;
  int64_t l;
  shk__ipaddr ip;
  if (e->fn == SHK__FN_IP && shk__ipaddr_parse(s, &ip) == 0)
    return mkv(ty_prim(enc, SHK__TY_IP), ip_term(enc, &ip), F_);
  if (e->fn == SHK__FN_DECIMAL && shk__decimal_parse(s, &l) == 0)
    return mkv(ty_prim(enc, SHK__TY_DECIMAL), bv64(enc, l), F_);
  if (e->fn == SHK__FN_DATETIME && shk__datetime_parse(s, &l) == 0)
    return mkv(ty_prim(enc, SHK__TY_DATETIME), bv64(enc, l), F_);
  if (e->fn == SHK__FN_DURATION && shk__duration_parse(s, &l) == 0)
    return mkv(ty_prim(enc, SHK__TY_DURATION), bv64(enc, l), F_);
  REFUSE(enc, e->loc, "`%s(\"%.*s\")` is not a valid literal", shk__fn_name(e->fn), Q(s));
}

static shk__v call_v(shk__enc *enc, const shk__expr *e)
{
  if (shk__fn_is_constructor(e->fn))
    return ext_literal(enc, e);
  shk__v a[2];
  size_t n = e->n_items;
  if (n < 1 || n > 2)
    REFUSE(enc, e->loc, "`%s` with %zu arguments is not encoded", shk__fn_name(e->fn), n);
  for (size_t i = 0; i < n; i++)
    a[i] = ex(enc, e->items[i]);
  const char *err = n == 2 ? err2(enc, a[0], a[1]) : a[0].e;
  const char *x = a[0].v, *y = n == 2 ? a[1].v : NULL;
  static const char DAY[] = "#x0000000005265c00"; /* 86400000 */
#define ARITY(k)                                                                   \
  do {                                                                             \
    if (n != (k))                                                                  \
      REFUSE(enc, e->loc, "`%s` with %zu arguments is not encoded", shk__fn_name(e->fn), n); \
  } while (0)
#define TYPES(t0, t1)                                                              \
  do {                                                                             \
    want(enc, a[0], (t0), e, shk__fn_name(e->fn));                                 \
    if (n == 2)                                                                    \
      want(enc, a[1], (t1), e, shk__fn_name(e->fn));                               \
  } while (0)
  switch (e->fn) {
  case SHK__FN_CONTAINS:
    ARITY(2);
    want(enc, a[0], SHK__TY_SET, e, "contains");
    if (a[0].t->elem != a[1].t)
      REFUSE(enc, e->loc, "contains of a %s in a %s is not encoded", tyname(enc, a[1].t), tyname(enc, a[0].t));
    return bval(enc, DEF("Bool", "(set.member %s %s)", y, x), err);
  case SHK__FN_CONTAINS_ALL:
  case SHK__FN_CONTAINS_ANY:
    ARITY(2);
    TYPES(SHK__TY_SET, SHK__TY_SET);
    if (a[0].t != a[1].t)
      REFUSE(enc, e->loc, "%s of a %s in a %s is not encoded", shk__fn_name(e->fn), tyname(enc, a[1].t),
             tyname(enc, a[0].t));
    if (e->fn == SHK__FN_CONTAINS_ALL)
      return bval(enc, DEF("Bool", "(set.subset %s %s)", y, x), err);
    return bval(enc, DEF("Bool", "(not (= (set.inter %s %s) (as set.empty %s)))", x, y, a[0].t->sort), err);
  case SHK__FN_IS_EMPTY:
    ARITY(1);
    want(enc, a[0], SHK__TY_SET, e, "isEmpty");
    return bval(enc, DEF("Bool", "(= %s (as set.empty %s))", x, a[0].t->sort), err);
  case SHK__FN_HAS_TAG:
  case SHK__FN_GET_TAG:
    ARITY(2);
    return tag_v(enc, e, a[0], a[1]);
  case SHK__FN_IS_IPV4:
  case SHK__FN_IS_IPV6:
  case SHK__FN_IS_LOOPBACK:
  case SHK__FN_IS_MULTICAST: {
    ARITY(1);
    TYPES(SHK__TY_IP, SHK__TY_IP);
    const char *f = e->fn == SHK__FN_IS_IPV4 ? "(_ is IP.v4)" : e->fn == SHK__FN_IS_IPV6 ? "(_ is IP.v6)"
                  : e->fn == SHK__FN_IS_LOOPBACK ? "ip.loopback" : "ip.multicast";
    return bval(enc, DEF("Bool", "(%s %s)", f, x), err);
  }
  case SHK__FN_IS_IN_RANGE:
    ARITY(2);
    TYPES(SHK__TY_IP, SHK__TY_IP);
    return bval(enc, DEF("Bool", "(ip.inrange %s %s)", x, y), err);
  case SHK__FN_LESS_THAN:
  case SHK__FN_LESS_THAN_OR_EQUAL:
  case SHK__FN_GREATER_THAN:
  case SHK__FN_GREATER_THAN_OR_EQUAL: {
    ARITY(2);
    TYPES(SHK__TY_DECIMAL, SHK__TY_DECIMAL);
    const char *op = e->fn == SHK__FN_LESS_THAN ? "bvslt" : e->fn == SHK__FN_LESS_THAN_OR_EQUAL ? "bvsle"
                   : e->fn == SHK__FN_GREATER_THAN ? "bvsgt" : "bvsge";
    return bval(enc, DEF("Bool", "(%s %s %s)", op, x, y), err);
  }
  case SHK__FN_OFFSET:
    ARITY(2);
    TYPES(SHK__TY_DATETIME, SHK__TY_DURATION);
    return mkv(a[0].t, DEF(a[0].t->sort, "(bvadd %s %s)", x, y),
               b_or(enc, err, DEF("Bool", "(bvsaddo %s %s)", x, y)));
  case SHK__FN_DURATION_SINCE:
    ARITY(2);
    TYPES(SHK__TY_DATETIME, SHK__TY_DATETIME);
    return mkv(ty_prim(enc, SHK__TY_DURATION), DEF("(_ BitVec 64)", "(bvsub %s %s)", x, y),
               b_or(enc, err, DEF("Bool", "(bvssubo %s %s)", x, y)));
  case SHK__FN_TO_DATE: {
    ARITY(1);
    TYPES(SHK__TY_DATETIME, SHK__TY_DATETIME);
    /* Midnight at or before: dt - dt % day, except for a negative dt off
     * midnight, which is (dt / day - 1) * day and may overflow. */
    const char *r = DEF("(_ BitVec 64)", "(bvsrem %s %s)", x, DAY);
    const char *easy = DEF("Bool", "(or (bvsge %s (_ bv0 64)) (= %s (_ bv0 64)))", x, r);
    const char *q1 = DEF("(_ BitVec 64)", "(bvsub (bvsdiv %s %s) (_ bv1 64))", x, DAY);
    const char *v = DEF("(_ BitVec 64)", "(ite %s (bvsub %s %s) (bvmul %s %s))", easy, x, r, q1, DAY);
    const char *of = DEF("Bool", "(and (not %s) (bvsmulo %s %s))", easy, q1, DAY);
    return mkv(a[0].t, v, b_or(enc, err, of));
  }
  case SHK__FN_TO_TIME: {
    ARITY(1);
    TYPES(SHK__TY_DATETIME, SHK__TY_DATETIME);
    const char *r = DEF("(_ BitVec 64)", "(bvsrem %s %s)", x, DAY);
    return mkv(ty_prim(enc, SHK__TY_DURATION),
               DEF("(_ BitVec 64)", "(ite (bvslt %s (_ bv0 64)) (bvadd %s %s) %s)", r, r, DAY, r), err);
  }
  case SHK__FN_TO_DAYS:
  case SHK__FN_TO_HOURS:
  case SHK__FN_TO_MINUTES:
  case SHK__FN_TO_SECONDS:
  case SHK__FN_TO_MILLISECONDS: {
    ARITY(1);
    TYPES(SHK__TY_DURATION, SHK__TY_DURATION);
    int64_t unit = e->fn == SHK__FN_TO_DAYS ? 86400000 : e->fn == SHK__FN_TO_HOURS ? 3600000
                 : e->fn == SHK__FN_TO_MINUTES ? 60000 : e->fn == SHK__FN_TO_SECONDS ? 1000 : 1;
    const shk__ty *L = ty_prim(enc, SHK__TY_LONG);
    if (unit == 1)
      return mkv(L, x, err);
    return mkv(L, DEF(L->sort, "(bvsdiv %s %s)", x, bv64(enc, unit)), err);
  }
  case SHK__FN_IP:
  case SHK__FN_DECIMAL:
  case SHK__FN_DATETIME:
  case SHK__FN_DURATION:
  case SHK__FN__COUNT:
    break;
  }
#undef ARITY
#undef TYPES
  REFUSE(enc, e->loc, "the function `%s` is not encoded", shk__fn_name(e->fn));
}

static shk__v ex_inner(shk__enc *enc, const shk__expr *e)
{
  switch (e->kind) {
  case SHK__E_BOOL: {
    shk__v r = bconst(enc, e->bval, F_);
    r.plit = e;
    return r;
  }
  case SHK__E_LONG: {
    shk__v r = mkv(ty_prim(enc, SHK__TY_LONG), bv64(enc, e->lval), F_);
    r.plit = e;
    return r;
  }
  case SHK__E_STRING: {
    shk__v r = mkv(ty_prim(enc, SHK__TY_STRING), smt_string(enc, e->s, e->loc), F_);
    r.plit = e;
    return r;
  }
  case SHK__E_ENTITY: {
    shk__ety *t = find_ety(enc, e->uid.type);
    if (!t)
      REFUSE(enc, e->loc, "the entity type %.*s is not in the schema", Q(e->uid.type));
    shk__v r = mkv(ty_entity(enc, t), shk__enc_uid(enc, t, e->uid.id), F_);
    r.lit = &e->uid;
    return r;
  }
  case SHK__E_VAR:
    switch (e->var) {
    case SHK__VAR_PRINCIPAL: return var_v(enc, SHK__VAR_PRINCIPAL);
    case SHK__VAR_RESOURCE: return var_v(enc, SHK__VAR_RESOURCE);
    case SHK__VAR_CONTEXT: return mkv(enc->ctx, "context", F_);
    case SHK__VAR_ACTION: {
      shk__v r = mkv(ty_entity(enc, (shk__ety *)enc->A),
                     shk__enc_uid(enc, enc->A, enc->env.action->uid.id), F_);
      r.lit = &enc->env.action->uid;
      return r;
    }
    }
    break;
  case SHK__E_SLOT:
    REFUSE(enc, e->loc, "template slots (?principal, ?resource) are not encoded");
  case SHK__E_NOT:
    return not_v(enc, want(enc, ex(enc, e->a), SHK__TY_BOOL, e, "!"));
  case SHK__E_NEG: {
    shk__v a = want(enc, ex(enc, e->a), SHK__TY_LONG, e, "unary -");
    const char *of = DEF("Bool", "(= %s #x8000000000000000)", a.v);
    return mkv(a.t, DEF(a.t->sort, "(bvneg %s)", a.v), b_or(enc, a.e, of));
  }
  case SHK__E_AND:
    return and_v(enc, want(enc, ex(enc, e->a), SHK__TY_BOOL, e, "&&"), e->b, NULL);
  case SHK__E_OR:
    return or_v(enc, want(enc, ex(enc, e->a), SHK__TY_BOOL, e, "||"), e->b);
  case SHK__E_EQ:
  case SHK__E_NE: {
    shk__v a = ex(enc, e->a), b = ex(enc, e->b);
    shk__v r = eq_v(enc, e, a, b);
    return e->kind == SHK__E_EQ ? r : not_v(enc, r);
  }
  case SHK__E_LT:
  case SHK__E_LE:
  case SHK__E_GT:
  case SHK__E_GE: {
    shk__v a = ex(enc, e->a), b = ex(enc, e->b);
    return compare_v(enc, e, a, b);
  }
  case SHK__E_ADD:
  case SHK__E_SUB:
  case SHK__E_MUL: {
    shk__v a = ex(enc, e->a), b = ex(enc, e->b);
    return arith_v(enc, e, a, b);
  }
  case SHK__E_IN: {
    shk__v a = ex(enc, e->a), b = ex(enc, e->b);
    bool k;
    if (static_action_in(enc, e, &k))
      return bconst(enc, k, err2(enc, a, b));
    return in_v(enc, e, a, b);
  }
  case SHK__E_IF: {
    shk__v c = want(enc, ex(enc, e->a), SHK__TY_BOOL, e, "if");
    if (c.kb >= 0) {
      shk__v r = ex(enc, c.kb ? e->b : e->c);
      r.e = b_or(enc, c.e, r.e);
      r.lit = NULL;
      r.plit = NULL;
      return r;
    }
    shk__v x = ex(enc, e->b), y = ex(enc, e->c);
    if (x.t != y.t)
      REFUSE(enc, e->loc, "an `if` with branches of types %s and %s is not encoded", tyname(enc, x.t),
             tyname(enc, y.t));
    const char *err = b_or(enc, c.e, b_ite(enc, c.v, x.e, y.e));
    if (x.t->k == SHK__TY_BOOL) {
      shk__v r = bval(enc, b_ite(enc, c.v, x.v, y.v), err);
      if (x.kb >= 0 && x.kb == y.kb)
        r.kb = x.kb, r.v = x.kb ? T_ : F_;
      return r;
    }
    return mkv(x.t, DEF(x.t->sort, "(ite %s %s %s)", c.v, x.v, y.v), err);
  }
  case SHK__E_HAS:
    return getattr_v(enc, e, ex(enc, e->a), true);
  case SHK__E_GETATTR:
    return getattr_v(enc, e, ex(enc, e->a), false);
  case SHK__E_LIKE: {
    shk__v a = want(enc, ex(enc, e->a), SHK__TY_STRING, e, "like");
    return bval(enc, DEF("Bool", "(str.in_re %s %s)", a.v, like_re(enc, e)), a.e);
  }
  case SHK__E_IS: {
    shk__v a = want(enc, ex(enc, e->a), SHK__TY_ENTITY, e, "is");
    return bconst(enc, shk__str_eq(a.t->ent->name, e->s), a.e);
  }
  case SHK__E_SET:
    return set_v(enc, e);
  case SHK__E_RECORD:
    return record_v(enc, e);
  case SHK__E_CALL:
    return call_v(enc, e);
  }
  REFUSE(enc, e->loc, "this kind of expression is not encoded");
}

static shk__v ex(shk__enc *enc, const shk__expr *e)
{
  shk__v r = ex_inner(enc, e);
  if (r.t && r.t->k == SHK__TY_BOOL && r.kb >= 0)
    r.v = r.kb ? T_ : F_;
  return r;
}

/* ---------------------------------------------------------------- scopes and policies */

static shk__v scope_v(shk__enc *enc, const shk__scope *sc, shk__var var)
{
  shk__v x;
  if (var == SHK__VAR_PRINCIPAL) {
    x = var_v(enc, SHK__VAR_PRINCIPAL);
  } else if (var == SHK__VAR_RESOURCE) {
    x = var_v(enc, SHK__VAR_RESOURCE);
  } else {
    x = mkv(ty_entity(enc, (shk__ety *)enc->A), shk__enc_uid(enc, enc->A, enc->env.action->uid.id), F_);
    x.lit = &enc->env.action->uid;
  }
  if (sc->slot && sc->kind != SHK__SC_ANY && sc->kind != SHK__SC_IS && sc->kind != SHK__SC_IN_LIST)
    REFUSE(enc, sc->loc, "template slots (?principal, ?resource) are not encoded");
  shk__v ent = { 0 };
  shk__expr lit = { .kind = SHK__E_ENTITY, .uid = sc->uid, .loc = sc->loc };
  if (sc->kind == SHK__SC_EQ || sc->kind == SHK__SC_IN || sc->kind == SHK__SC_IS_IN)
    ent = ex(enc, &lit);
  switch (sc->kind) {
  case SHK__SC_ANY: return bconst(enc, true, F_);
  case SHK__SC_EQ: return eq_v(enc, &lit, x, ent);
  case SHK__SC_IS: return bconst(enc, shk__str_eq(x.t->ent->name, sc->is_type), F_);
  case SHK__SC_IN:
  case SHK__SC_IS_IN: {
    shk__v in;
    if (x.lit && ent.lit && enc->A == x.t->ent)
      in = bconst(enc, action_in(enc->s, *x.lit, *ent.lit), F_);
    else
      in = in_v(enc, &lit, x, ent);
    if (sc->kind == SHK__SC_IN)
      return in;
    shk__v is = bconst(enc, shk__str_eq(x.t->ent->name, sc->is_type), F_);
    return and_v(enc, is, NULL, &in);
  }
  case SHK__SC_IN_LIST: {
    bool hit = false;
    for (size_t i = 0; i < sc->n_uids; i++)
      hit = hit || action_in(enc->s, *x.lit, sc->uids[i]);
    return bconst(enc, hit, F_);
  }
  }
  REFUSE(enc, sc->loc, "this scope is not encoded");
}

static void policy_name(shk__enc *enc, const shk__policy *p)
{
  for (size_t i = 0; i < p->n_annots; i++)
    if (shk__str_eq(p->annots[i].key, SHK__STR_LIT("id"))) {
      enc->what = S("policy %.*s (@id \"%.*s\")", Q(p->id), Q(p->annots[i].value));
      return;
    }
  enc->what = S("policy %.*s", Q(p->id));
}

static shk__v condition(shk__enc *enc, const shk__policy *p)
{
  if (p->is_template)
    REFUSE(enc, p->loc, "templates are not encoded (link them first)");
  shk__v v = scope_v(enc, &p->principal, SHK__VAR_PRINCIPAL);
  shk__v a = scope_v(enc, &p->action, SHK__VAR_ACTION);
  v = and_v(enc, v, NULL, &a);
  if (v.kb != 0) {
    shk__v r = scope_v(enc, &p->resource, SHK__VAR_RESOURCE);
    v = and_v(enc, v, NULL, &r);
  }
  for (size_t i = 0; i < p->n_conds && v.kb != 0; i++) {
    shk__v c = want(enc, ex(enc, p->conds[i].body), SHK__TY_BOOL, p->conds[i].body,
                    p->conds[i].is_when ? "when" : "unless");
    if (!p->conds[i].is_when)
      c = not_v(enc, c);
    v = and_v(enc, v, NULL, &c);
  }
  return v;
}

void shk__enc_policy(shk__enc *enc, const shk__policy *p, const char **sat, const char **err)
{
  policy_name(enc, p);
  shk__v v = condition(enc, p);
  *err = v.e;
  *sat = b_and(enc, b_not(enc, v.e), v.v);
  enc->what = NULL;
}

const char *shk__enc_set(shk__enc *enc, shk__policy *const *pols, size_t n, const char **sats,
                         const char **errs)
{
  const char *permit = F_, *forbid = F_;
  for (size_t i = 0; i < n; i++) {
    const char *s, *e;
    shk__enc_policy(enc, pols[i], &s, &e);
    if (sats)
      sats[i] = s;
    if (errs)
      errs[i] = e;
    if (pols[i]->is_forbid)
      forbid = b_or(enc, forbid, s);
    else
      permit = b_or(enc, permit, s);
  }
  return b_and(enc, permit, b_not(enc, forbid));
}

/* Acyclicity and transitivity, for every pair of footprint entities: what
 * a concrete store, whose ancestors are the closure of its parents, needs
 * for the ancestor sets the formula reads to be that closure. */
void shk__enc_finish(shk__enc *enc)
{
  size_t n = enc->n_fp;
  for (size_t i = 0; i < n; i++) {
    shk__fp x = enc->fp[i];
    shk__ety *T = x.et;
    if (T->anc[T->id])
      assertf(enc, "(not (set.member %s (%s %s)))", x.term, enc_fn_an(enc, T, T), x.term);
    for (size_t j = 0; j < n; j++) {
      shk__fp y = enc->fp[j];
      shk__ety *U = y.et;
      if (i == j || !T->anc[U->id])
        continue;
      const char *exx = S("(%s %s)", enc_fn_ex(enc, T), x.term);
      const char *exy = S("(%s %s)", enc_fn_ex(enc, U), y.term);
      const char *yin = S("(set.member %s (%s %s))", y.term, enc_fn_an(enc, T, U), x.term);
      if (U->anc[T->id])
        assertf(enc, "(not (and %s %s %s (set.member %s (%s %s))))", exx, exy, yin, x.term,
                enc_fn_an(enc, U, T), y.term);
      for (size_t k = 0; k < enc->n_etys; k++) {
        shk__ety *V = &enc->etys[k];
        if (!U->anc[V->id])
          continue;
        assertf(enc, "(=> (and %s %s %s) (set.subset (%s %s) (%s %s)))", exx, exy, yin,
                enc_fn_an(enc, U, V), y.term, enc_fn_an(enc, T, V), x.term);
      }
    }
  }
}
