/* SPDX-License-Identifier: Apache-2.0 */
/* The grant-time question: a scope element that is a pattern (a path
 * prefix, a host pattern, a CIDR, a port range) may be granted only if the
 * policy set allows every concrete element it covers, for this session.
 *
 * The request and the entity store are concrete; only the context fields
 * the patterns stand for are symbolic, each constrained to its pattern's
 * concrete elements (several fields at once: a host pattern with a range
 * of ports is every host with every port). The set's encoding for the
 * environment stays loaded in the solver (level 1 of its assertion stack),
 * so a repeated check sends only the concrete facts, the patterns and the
 * goal. A witness the solver finds is decided by the engine before it is
 * reported. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cedar/cedar-eval-internal.h"
#include "policy/analysis-internal.h"
#include "shinken/cedar.h"

#define N_KINDS 5

/* One covered field as the check sees it. */
typedef struct cfield {
  const shk_analysis_cover_field *q;
  char **path;             /* the field's attribute names */
  size_t n_path;
  char **hpath;            /* the home field's, when it has one */
  size_t n_hpath;
  bool range_record;       /* a port range over a {lo, hi} record: each port P as {lo: P, hi: P} */
} cfield;

/* A place in the context that the check makes symbolic: a covered field
 * (slot k of field k), or the home field that follows field k's path
 * (slot MAX_COVER + k). */
#define HOME_SLOT(k) (SHK_ANALYSIS_MAX_COVER + (k))

typedef struct cover {
  shk_analysis *an;
  const shk_analysis_set *set;
  const shk_analysis_cover_query *q;
  shk_cedar_request *req;
  shk_cedar_entities *es;
  json_t *req_json;
  size_t env;
  cfield f[SHK_ANALYSIS_MAX_COVER];
  size_t n;
  const struct view *cur;  /* the view of the check being written */
} cover;

/* What one check is about: for each field its pattern (exact: one value
 * alone) less its exceptions. */
typedef struct view {
  const char *pat[SHK_ANALYSIS_MAX_COVER];
  bool exact[SHK_ANALYSIS_MAX_COVER];
  const shk_analysis_except *ex[SHK_ANALYSIS_MAX_COVER];
  size_t n_ex[SHK_ANALYSIS_MAX_COVER];
} view;

static void cover_clear(cover *c)
{
  shk_cedar_request_free(c->req);
  shk_cedar_entities_free(c->es);
  json_decref(c->req_json);
  for (size_t k = 0; k < c->n; k++) {
    for (size_t i = 0; i < c->f[k].n_path; i++)
      free(c->f[k].path[i]);
    free(c->f[k].path);
    for (size_t i = 0; i < c->f[k].n_hpath; i++)
      free(c->f[k].hpath[i]);
    free(c->f[k].hpath);
  }
}

static const char *kind_name(shk_analysis_cover_kind k)
{
  switch (k) {
  case SHK_ANALYSIS_PATH_PREFIX: return "a path prefix";
  case SHK_ANALYSIS_HOST_PATTERN: return "a host pattern";
  case SHK_ANALYSIS_CIDR: return "a CIDR";
  case SHK_ANALYSIS_PORT_RANGE: return "a port range";
  case SHK_ANALYSIS_TIME_RANGE: return "a time range";
  }
  return "?";
}

/* The element's constant: one per kind, declared once with the set's
 * encoding. */
static const char *const cv_names[N_KINDS] = { "cvp", "cvh", "cvi", "cvn", "cvt" };

static const char *cv_of(const cfield *f)
{
  return cv_names[f->q->kind];
}

/* ---------------------------------------------------------------- patterns */

static bool valid_label_char(char c)
{
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

/* A lowercase DNS name: labels of [a-z0-9-], not starting or ending in
 * '-', at most 253 bytes. */
static bool valid_host(const char *h)
{
  size_t n = strlen(h), label = 0;
  if (n == 0 || n > 253)
    return false;
  for (size_t i = 0; i < n; i++) {
    if (h[i] == '.') {
      if (label == 0 || h[i - 1] == '-')
        return false;
      label = 0;
      continue;
    }
    if (!valid_label_char(h[i]) || (label == 0 && h[i] == '-') || ++label > 63)
      return false;
  }
  return label > 0 && h[n - 1] != '-';
}

static bool valid_path(const char *p)
{
  size_t n = strlen(p);
  if (n == 0 || p[0] != '/')
    return false;
  if (n > 1 && p[n - 1] == '/')
    return false;
  return !strstr(p, "//") && !strstr(p, "/./") && !strstr(p, "/../") &&
         !(n >= 2 && !strcmp(p + n - 2, "/.")) && !(n >= 3 && !strcmp(p + n - 3, "/.."));
}

/* "LO-HI" or "N", each a whole number in [min, max], LO <= HI. */
static bool parse_range(const char *s, long long min, long long max, long long *lo, long long *hi)
{
  char *end;
  if (*s < '0' || *s > '9')
    return false;
  *lo = strtoll(s, &end, 10);
  *hi = *lo;
  if (*end == '-') {
    const char *t = end + 1;
    if (*t < '0' || *t > '9')
      return false;
    *hi = strtoll(t, &end, 10);
  }
  return *end == '\0' && *lo >= min && *hi <= max && *lo <= *hi;
}

static bool parse_ports(const char *s, long long *lo, long long *hi)
{
  return parse_range(s, 0, 65535, lo, hi);
}

static const char *smt_lit(shk__enc *enc, const char *s)
{
  shk__text t = { 0 };
  bool ok = shk__text_smt_string(&t, (shk__str){ s, strlen(s) }) && !t.oom;
  const char *r = ok ? shk__pool_strndup(enc->pool, t.p, t.n) : NULL;
  shk__text_free(&t);
  if (!r)
    shk__enc_fail(enc, -EINVAL, SHK__NOLOC, "the pattern holds a character the solver cannot represent");
  return r;
}

/* The host of a host pattern and how wild it is: 0 the host alone, 1
 * names strictly below it (*.), 2 it and below (**.). */
static const char *host_of(const char *pat, int *wild)
{
  *wild = !strncmp(pat, "**.", 3) ? 2 : !strncmp(pat, "*.", 2) ? 1 : 0;
  return pat + (*wild == 2 ? 3 : *wild == 1 ? 2 : 0);
}

/* The set of values PATTERN covers, as a formula over the constant CV. */
static const char *covered(shk__enc *enc, shk_analysis_cover_kind k, const char *cv, const char *pat, bool exact)
{
  switch (k) {
  case SHK_ANALYSIS_PATH_PREFIX: {
    if (!valid_path(pat))
      shk__enc_fail(enc, -EINVAL, SHK__NOLOC, "'%.200s' is not a canonical absolute path", pat);
    if (exact)
      return shk__enc_str(enc, "(= %s %s)", cv, smt_lit(enc, pat));
    if (!strcmp(pat, "/"))
      return shk__enc_str(enc, "(str.prefixof \"/\" %s)", cv);
    return shk__enc_str(enc, "(or (= %s %s) (str.prefixof %s %s))", cv, smt_lit(enc, pat),
                        smt_lit(enc, shk__enc_str(enc, "%s/", pat)), cv);
  }
  case SHK_ANALYSIS_HOST_PATTERN: {
    int wild;
    const char *h = host_of(pat, &wild);
    if (!valid_host(h))
      shk__enc_fail(enc, -EINVAL, SHK__NOLOC, "'%.200s' is not a host pattern (HOST, *.HOST or **.HOST)",
                    pat);
    const char *below = shk__enc_str(enc, "(str.suffixof %s %s)", smt_lit(enc, shk__enc_str(enc, ".%s", h)), cv);
    const char *self = shk__enc_str(enc, "(= %s %s)", cv, smt_lit(enc, h));
    return wild == 0 ? self : wild == 1 ? below : shk__enc_str(enc, "(or %s %s)", self, below);
  }
  case SHK_ANALYSIS_CIDR: {
    shk__ipaddr ip;
    if (shk__ipaddr_parse((shk__str){ pat, strlen(pat) }, &ip) < 0)
      shk__enc_fail(enc, -EINVAL, SHK__NOLOC, "'%.200s' is not a CIDR", pat);
    if (!ip.v6) {
      uint32_t a = (uint32_t)ip.addr[0] << 24 | (uint32_t)ip.addr[1] << 16 | (uint32_t)ip.addr[2] << 8 | ip.addr[3];
      uint32_t m = ip.prefix ? ~(uint32_t)0 << (32 - ip.prefix) : 0;
      return shk__enc_str(enc, "(and ((_ is IP.v4) %s) (= (IP.p4 %s) #x20) (= (bvand (IP.a4 %s) #x%08x) #x%08x))",
                          cv, cv, cv, m, a & m);
    }
    char hm[33], ha[33];
    for (int i = 0; i < 16; i++) {
      int bits = (int)ip.prefix - 8 * i;
      uint8_t m = bits >= 8 ? 0xff : bits <= 0 ? 0 : (uint8_t)(0xff << (8 - bits));
      snprintf(hm + 2 * i, 3, "%02x", m);
      snprintf(ha + 2 * i, 3, "%02x", ip.addr[i] & m);
    }
    return shk__enc_str(enc, "(and ((_ is IP.v6) %s) (= (IP.p6 %s) #x80) (= (bvand (IP.a6 %s) #x%s) #x%s))", cv,
                        cv, cv, hm, ha);
  }
  case SHK_ANALYSIS_PORT_RANGE:
  case SHK_ANALYSIS_TIME_RANGE: {
    long long lo, hi;
    bool ok = k == SHK_ANALYSIS_PORT_RANGE ? parse_ports(pat, &lo, &hi) : parse_range(pat, 0, INT64_MAX, &lo, &hi);
    if (!ok)
      shk__enc_fail(enc, -EINVAL, SHK__NOLOC, "'%.200s' is not %s (N or LO-HI)", pat, kind_name(k));
    return shk__enc_str(enc, "(and (bvsle #x%016llx %s) (bvsle %s #x%016llx))", (unsigned long long)lo, cv, cv,
                        (unsigned long long)hi);
  }
  }
  return "false";
}

/* What every concrete host is besides being covered: a DNS name. */
static const char *element(shk__enc *enc, shk_analysis_cover_kind k, const char *cv)
{
  if (k == SHK_ANALYSIS_HOST_PATTERN)
    return shk__enc_str(enc, "(and (<= (str.len %s) 253) (str.in_re %s (re.++ (re.* (re.++ hl (str.to_re \".\"))) hl)))",
                        cv, cv);
  return "true";
}

/* A concrete path is canonical: no empty, "." or ".." component, no NUL,
 * no trailing slash. The solver finds witnesses far faster without these
 * constraints (negated substrings are hard for it), so they are added
 * lazily: a witness that breaks one is refuted by asserting that one, and
 * the check runs again. Without them the question is wider, so an
 * unsatisfiable one stays unsatisfiable: nothing is lost either way. */
static const struct {
  const char *rule;        /* the constraint, over the path constant (@) */
  const char *bad;         /* what breaks it, for the witness test */
  int where;               /* 0 anywhere, 1 at the end */
} canon[] = {
  { "(not (str.contains @ \"//\"))", "//", 0 },
  { "(not (str.contains @ \"/./\"))", "/./", 0 },
  { "(not (str.contains @ \"/../\"))", "/../", 0 },
  { "(not (str.suffixof \"/.\" @))", "/.", 1 },
  { "(not (str.suffixof \"/..\" @))", "/..", 1 },
  { "(or (= @ \"/\") (not (str.suffixof \"/\" @)))", "/", 1 },
  { "(not (str.contains @ \"\\u{0}\"))", NULL, 0 },
};

/* RULE with every @ replaced by the constant CV, as an assertion. */
static void rule_text(shk__text *t, const char *rule, const char *cv)
{
  shk__text_puts(t, "(assert ");
  for (const char *p = rule; *p; p++)
    if (*p == '@')
      shk__text_puts(t, cv);
    else
      shk__text_put(t, p, 1);
  shk__text_puts(t, ")\n");
}

#define N_CANON (sizeof canon / sizeof canon[0])

/* The first rule the path W breaks, or -1 (a NUL, which no JSON witness
 * can carry, breaks the last). */
static int canon_broken(const char *w, size_t n)
{
  if (memchr(w, '\0', n))
    return (int)N_CANON - 1;
  for (size_t i = 0; i + 1 < N_CANON; i++) {
    size_t m = strlen(canon[i].bad);
    if (canon[i].where == 0 ? memmem(w, n, canon[i].bad, m) != NULL
                            : n >= m && !memcmp(w + n - m, canon[i].bad, m) && !(n == 1 && i == 5))
      return (int)i;
  }
  return -1;
}

/* ---------------------------------------------------------------- the concrete facts */

/* The type at PATH in the context, and whether its last step is a
 * required attribute. */
static const shk__ty *type_at(shk__enc *enc, char *const *path, size_t n, const char *name, bool *required)
{
  const shk__ty *t = enc->ctx;
  *required = true;
  for (size_t i = 0; i < n; i++) {
    int a = t->k == SHK__TY_RECORD ? shk__ty_attr(t, (shk__str){ path[i], strlen(path[i]) }) : -1;
    if (a < 0)
      shk__enc_fail(enc, -EINVAL, SHK__NOLOC, "the context has no field '%s'", name);
    *required = t->attrs[a].required;
    t = t->attrs[a].t;
  }
  return t;
}

static const shk__ty *field_type(shk__enc *enc, const cover *c, size_t k)
{
  bool required;
  return type_at(enc, c->f[k].path, c->f[k].n_path, c->f[k].q->field, &required);
}

/* A record of required Longs named lo and hi. */
static bool is_range_record(const shk__ty *t)
{
  return t->k == SHK__TY_RECORD && t->n_attrs == 2 && t->attrs[0].required && t->attrs[1].required &&
         t->attrs[0].t->k == SHK__TY_LONG && t->attrs[1].t->k == SHK__TY_LONG &&
         shk__str_eq(t->attrs[0].name, SHK__STR_LIT("hi")) && shk__str_eq(t->attrs[1].name, SHK__STR_LIT("lo"));
}

/* Checks that field K can hold its kind, and notes how. */
static void field_check(shk__enc *enc, cover *c, size_t k)
{
  cfield *f = &c->f[k];
  const shk__ty *t = field_type(enc, c, k);
  static const shk__tyk want[N_KINDS] = { SHK__TY_STRING, SHK__TY_STRING, SHK__TY_IP, SHK__TY_LONG,
                                          SHK__TY_DATETIME };
  f->range_record = f->q->kind == SHK_ANALYSIS_PORT_RANGE && is_range_record(t);
  if (t->k != want[f->q->kind] && !f->range_record)
    shk__enc_fail(enc, -EINVAL, SHK__NOLOC, "the field '%s' cannot hold %s", f->q->field, kind_name(f->q->kind));
  bool required;
  if (f->n_hpath && (type_at(enc, f->hpath, f->n_hpath, f->q->home_field, &required)->k != SHK__TY_STRING || required))
    shk__enc_fail(enc, -EINVAL, SHK__NOLOC, "the home field '%s' is not an optional String", f->q->home_field);
}

/* The home field of path constant CV, as an option over String (O): the
 * rest below /root or /home/NAME, as shk_policy_home_rest computes it, for
 * the paths of PATTERN (EXACT: that path alone). Most patterns fix the
 * answer's shape, which spares the solver a search: every path below a
 * home has that home, and a pattern neither in a home nor above one has
 * none. */
static const char *home_term(shk__enc *enc, const char *cv, const char *o, const char *pattern, bool exact)
{
  const char *rest = shk_policy_home_rest(pattern);
  if (exact)
    return rest ? shk__enc_str(enc, "(%s.some %s)", o, smt_lit(enc, rest)) : shk__enc_str(enc, "%s.none", o);
  if (rest) {
    size_t h = strlen(pattern) - strlen(rest) - (*rest ? 1 : 0);
    const char *home = smt_lit(enc, shk__enc_str(enc, "%.*s", (int)h, pattern));
    return shk__enc_str(enc, "(%s.some (ite (= %s %s) \"\" (str.substr %s %zu (- (str.len %s) %zu))))", o, cv, home,
                        cv, h + 1, cv, h + 1);
  }
  if (strcmp(pattern, "/") && strcmp(pattern, "/home"))
    return shk__enc_str(enc, "%s.none", o);
  const char *in_root = shk__enc_str(enc, "(or (= %s \"/root\") (str.prefixof \"/root/\" %s))", cv, cv);
  const char *rest_root = shk__enc_str(enc, "(ite (= %s \"/root\") \"\" (str.substr %s 6 (- (str.len %s) 6)))", cv,
                                       cv, cv);
  const char *i = shk__enc_str(enc, "(str.indexof %s \"/\" 6)", cv);
  const char *in_home = shk__enc_str(enc, "(and (str.prefixof \"/home/\" %s) (> (str.len %s) 6) (not (= %s 6)))",
                                     cv, cv, i);
  const char *rest_home = shk__enc_str(enc, "(ite (= %s (- 1)) \"\" (str.substr %s (+ %s 1) (- (str.len %s) (+ %s 1))))",
                                       i, cv, i, cv, i);
  return shk__enc_str(enc, "(ite %s (%s.some %s) (ite %s (%s.some %s) %s.none))", in_root, o, rest_root, in_home, o,
                      rest_home, o);
}

/* The term that stands for field K: its constant, or the range {lo: P,
 * hi: P} of one port. */
static const char *field_term(shk__enc *enc, const cover *c, size_t k, const shk__ty *t)
{
  const char *cv = cv_of(&c->f[k]);
  return c->f[k].range_record ? shk__enc_str(enc, "(%s %s %s)", t->sort, cv, cv) : cv;
}

/* Slot J's attribute names. */
static char *const *slot_path(const cover *c, size_t j, size_t *n)
{
  const cfield *f = &c->f[j < SHK_ANALYSIS_MAX_COVER ? j : j - SHK_ANALYSIS_MAX_COVER];
  *n = j < SHK_ANALYSIS_MAX_COVER ? f->n_path : f->n_hpath;
  return j < SHK_ANALYSIS_MAX_COVER ? f->path : f->hpath;
}

/* The record T (concrete value V, or none) as a term, with the slots of
 * SEL (a bit per slot) that run through it at DEPTH replaced by their
 * terms. */
static const char *context_term(shk__enc *enc, const cover *c, const shk__ty *t, const shk__value *v,
                                unsigned sel, size_t depth)
{
  for (size_t k = 0; k < c->n; k++)
    if ((sel & (1u << k)) && c->f[k].n_path == depth)
      return field_term(enc, c, k, t);
  if (t->k != SHK__TY_RECORD || (v && v->kind != SHK__V_RECORD))
    shk__enc_fail(enc, -EINVAL, SHK__NOLOC, "a covered field is not inside records");
  const char *r = shk__enc_str(enc, "(%s", t->sort);
  for (size_t i = 0; i < t->n_attrs; i++) {
    const shk__tyattr *at = &t->attrs[i];
    const shk__value *x = v ? shk__record_get(v->rec, at->name) : NULL;
    unsigned under = 0;
    int home = -1;
    for (size_t j = 0; j < 2 * SHK_ANALYSIS_MAX_COVER; j++) {
      size_t n;
      char *const *path = slot_path(c, j, &n);
      const char *name = (sel & (1u << j)) && depth < n ? path[depth] : NULL;
      if (name && strlen(name) == at->name.n && !memcmp(name, at->name.p, at->name.n)) {
        under |= 1u << j;
        if (j >= SHK_ANALYSIS_MAX_COVER && n == depth + 1)
          home = (int)j;
      }
    }
    const char *term;
    bool option = false;
    if (home >= 0) {
      /* field_check saw to it that the home field is an optional String. */
      size_t k = (size_t)home - SHK_ANALYSIS_MAX_COVER;
      term = home_term(enc, cv_of(&c->f[k]), shk__enc_opt(enc, at->t), c->cur->pat[k], c->cur->exact[k]);
      option = true;
    } else if (under) {
      term = context_term(enc, c, at->t, x, under, depth + 1);
    } else if (x) {
      term = shk__value_term(enc, at->t, x);
    } else {
      term = NULL;
    }
    if (!at->required && !option) {
      const char *o = shk__enc_opt(enc, at->t);
      term = term ? shk__enc_str(enc, "(%s.some %s)", o, term) : shk__enc_str(enc, "%s.none", o);
    }
    if (!term)
      shk__enc_fail(enc, -EINVAL, SHK__NOLOC, "the request's context does not fit the schema");
    r = shk__enc_str(enc, "%s %s", r, term);
  }
  return t->n_attrs ? shk__enc_str(enc, "%s)", r) : t->sort;
}

/* The store, as facts about the functions the formula reads: which
 * footprint entities exist, and the attributes, ancestors (the closure)
 * and tags of each entity of the store. */
static void store_facts(shk__enc *enc, const shk_cedar_entities *es, shk__text *b)
{
  for (size_t i = 0; i < enc->n_etys; i++) {
    shk__ety *T = &enc->etys[i];
    if (T->is_action || !T->has_ex)
      continue;
    for (size_t f = 0; f < enc->n_fp; f++) {
      if (enc->fp[f].et != T)
        continue;
      shk__text_printf(b, "(assert (= (ex%u %s) (or false", T->id, enc->fp[f].term);
      for (size_t k = 0; es && k < es->n; k++)
        if (es->ents[k].present && shk__str_eq(es->ents[k].uid.type, T->name))
          shk__text_printf(b, " (= %s %s)", enc->fp[f].term, shk__enc_uid(enc, T, es->ents[k].uid.id));
      shk__text_puts(b, ")))\n");
    }
  }
  for (size_t k = 0; es && k < es->n; k++) {
    const shk__entity *e = &es->ents[k];
    shk__ety *T = e->present ? shk__enc_ety(enc, e->uid.type) : NULL;
    bool any_an = false;
    for (size_t j = 0; T && j < enc->n_etys; j++)
      any_an = any_an || T->has_an[j];
    if (!T || T->is_action || !(T->has_at || T->has_tk || any_an))
      continue;
    const char *u = shk__enc_uid(enc, T, e->uid.id);
    if (T->has_at) {
      shk__value rec = { .kind = SHK__V_RECORD, .rec = &e->attrs };
      const char *term = shk__value_term(enc, T->shape, &rec);
      if (!term)
        shk__enc_fail(enc, -EINVAL, SHK__NOLOC, "an entity's attributes do not fit the schema");
      shk__text_printf(b, "(assert (= (at%u %s) %s))\n", T->id, u, term);
    }
    for (size_t j = 0; j < enc->n_etys; j++) {
      if (!T->has_an[j])
        continue;
      const char *set = shk__enc_str(enc, "(as set.empty %s)", enc->etys[j].set->sort);
      for (size_t w = 0; w < es->n; w++) {
        const shk__entity *a = &es->ents[w];
        if (w != k && shk__str_eq(a->uid.type, enc->etys[j].name) &&
            shk__entities_in(es, e, &e->uid, e->hash, &a->uid, a->hash))
          set = shk__enc_str(enc, "(set.insert %s %s)", shk__enc_uid(enc, &enc->etys[j], a->uid.id), set);
      }
      shk__text_printf(b, "(assert (= (an%u_%zu %s) %s))\n", T->id, j, u, set);
    }
    if (T->has_tk) {
      const char *keys = "(as set.empty (Set String))";
      for (size_t t = 0; t < e->tags.n; t++) {
        shk__value kv = { .kind = SHK__V_STRING, .s = e->tags.keys[t] };
        const char *key = shk__value_term(enc, enc->strings->elem, &kv);
        if (!key)
          shk__enc_fail(enc, -EOPNOTSUPP, SHK__NOLOC, "a tag key the solver cannot represent");
        keys = shk__enc_str(enc, "(set.insert %s %s)", key, keys);
        if (T->has_tv) {
          const char *val = shk__value_term(enc, T->tags, &e->tags.vals[t]);
          if (!val)
            shk__enc_fail(enc, -EINVAL, SHK__NOLOC, "an entity's tags do not fit the schema");
          shk__text_printf(b, "(assert (= (tv%u %s %s) %s))\n", T->id, u, key, val);
        }
      }
      shk__text_printf(b, "(assert (= (tk%u %s) %s))\n", T->id, u, keys);
    }
  }
  if (b->oom)
    shk__enc_fail(enc, -ENOMEM, SHK__NOLOC, "out of memory");
}

/* ---------------------------------------------------------------- one check */

/* The set's encoding for the environment, at level 1, unless it is
 * already there. */
static int ensure_loaded(cover *c, shk_error *err)
{
  shk_analysis *an = c->an;
  if (an->opt.fresh)
    shk__analysis_reset(an);
  int r = shk__analysis_solver(an, err);
  if (r < 0)
    return r;
  if (an->loaded_serial == c->set->serial && an->loaded_env == c->env && an->loaded_enc &&
      shk__uid_eq(*an->loaded_enc->cp, c->req->principal) && shk__uid_eq(*an->loaded_enc->cr, c->req->resource))
    return 0;
  if ((r = shk__analysis_unload(an, err)) < 0)
    return r;
  shk__enc *enc = NULL;
  if ((r = shk__enc_new(&c->set->schema->s, &c->set->envs[c->env], &enc, err)) < 0)
    return r;
  jmp_buf jb;
  enc->fail = &jb;
  if (setjmp(jb)) {
    r = enc->code;
    shk__enc_free(enc);
    return r;
  }
  /* The principal and the resource are the request's: every policy
   * whose scope names another folds away before the solver sees it. */
  shk__uid *cp = shk__pool_alloc(enc->pool, sizeof *cp), *cr = shk__pool_alloc(enc->pool, sizeof *cr);
  if (!cp || !cr)
    shk__enc_fail(enc, -ENOMEM, SHK__NOLOC, "out of memory");
  cp->type = (shk__str){ shk__pool_strndup(enc->pool, c->req->principal.type.p, c->req->principal.type.n),
                         c->req->principal.type.n };
  cp->id = (shk__str){ shk__pool_strndup(enc->pool, c->req->principal.id.p, c->req->principal.id.n),
                       c->req->principal.id.n };
  cr->type = (shk__str){ shk__pool_strndup(enc->pool, c->req->resource.type.p, c->req->resource.type.n),
                         c->req->resource.type.n };
  cr->id = (shk__str){ shk__pool_strndup(enc->pool, c->req->resource.id.p, c->req->resource.id.n),
                       c->req->resource.id.n };
  if (!cp->type.p || !cp->id.p || !cr->type.p || !cr->id.p)
    shk__enc_fail(enc, -ENOMEM, SHK__NOLOC, "out of memory");
  enc->cp = cp;
  enc->cr = cr;
  shk__enc_request(enc);
  size_t n = c->set->n;
  const char **sats = shk__pool_alloc(enc->pool, (n + 1) * sizeof *sats);
  const char **errs = shk__pool_alloc(enc->pool, (n + 1) * sizeof *errs);
  const char **goals = shk__pool_alloc(enc->pool, (n + 1) * sizeof *goals);
  const char **err_goals = shk__pool_alloc(enc->pool, (n + 1) * sizeof *err_goals);
  if (!sats || !errs || !goals || !err_goals)
    shk__enc_fail(enc, -ENOMEM, SHK__NOLOC, "out of memory");
  const char *allow = shk__enc_set(enc, c->set->pols, n, sats, errs);
  /* "Some element is denied" is "no permit applies to some element" or
   * "some forbid applies to some element": one question each, so that no
   * check has to reason about many negated patterns at once (which is
   * what makes a string solver slow). Likewise "some policy errors". */
  size_t ng = 0, ne = 0;
  const char *permit = "false", *any_err = "false";
  for (size_t i = 0; i < n; i++)
    if (!c->set->pols[i]->is_forbid)
      permit = shk__enc_str(enc, "(or %s %s)", permit, sats[i]);
  goals[ng++] = shk__enc_str(enc, "(not %s)", permit);
  for (size_t i = 0; i < n; i++) {
    if (c->set->pols[i]->is_forbid && strcmp(sats[i], "false"))
      goals[ng++] = sats[i];
    if (strcmp(errs[i], "false")) {
      err_goals[ne++] = errs[i];
      any_err = shk__enc_str(enc, "(or %s %s)", any_err, errs[i]);
    }
  }
  shk__enc_finish(enc);
  /* The regular expression of a host's label. */
  shk__text_puts(&enc->decl, "(define-fun hl () RegLan (re.++ (re.union (re.range \"a\" \"z\") (re.range \"0\" \"9\")) "
                             "(re.opt (re.++ (re.* (re.union (re.range \"a\" \"z\") (re.range \"0\" \"9\") "
                             "(str.to_re \"-\"))) (re.union (re.range \"a\" \"z\") (re.range \"0\" \"9\"))))))\n");
  if ((r = shk__analysis_send_enc(an, enc, err)) < 0) {
    shk__enc_free(enc);
    return r;
  }
  an->loaded_enc = enc;
  an->loaded_allow = allow;
  an->loaded_allow_clean = shk__enc_str(enc, "(and %s (not %s))", allow, any_err);
  an->loaded_goals = goals;
  an->n_loaded_goals = ng;
  an->loaded_err_goals = err_goals;
  an->n_loaded_err_goals = ne;
  an->loaded_serial = c->set->serial;
  an->loaded_env = c->env;
  an->loaded_cv = 0;
  return 0;
}

static char *request_with(const cover *c, json_t *const *w);

/* Repairs a path that is not canonical into one that is: empty, "." and
 * ".." components filled in (FILL) or dropped. Returns NULL when nothing
 * is left. */
static char *canon_repair(const char *w, size_t n, bool fill)
{
  char *out = malloc(2 * n + 4);
  if (!out)
    return NULL;
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && w[j] != '/')
      j++;
    /* The component w[i+1 .. j). */
    size_t len = j - i - 1;
    bool bad = len == 0 || (len == 1 && w[i + 1] == '.') || (len == 2 && w[i + 1] == '.' && w[i + 2] == '.') ||
               memchr(w + i + 1, '\0', len);
    if (!bad) {
      memcpy(out + o, w + i, j - i);
      o += j - i;
    } else if (fill) {
      memcpy(out + o, "/a", 2);
      o += 2;
    }
    i = j;
  }
  if (o == 0)
    out[o++] = '/';
  out[o] = '\0';
  return out;
}

/* Whether W is inside field K's part of view V: in its pattern and in no
 * exception. */
static bool path_in_view(const view *v, size_t k, const char *w)
{
  if (!valid_path(w))
    return false;
  const char *pat = v->pat[k];
  size_t pn = strlen(pat);
  if (v->exact[k] ? strcmp(w, pat) != 0
                  : strcmp(pat, "/") && !(!strncmp(w, pat, pn) && (w[pn] == '\0' || w[pn] == '/')))
    return false;
  for (size_t i = 0; i < v->n_ex[k]; i++) {
    const char *e = v->ex[k][i].text;
    size_t en = strlen(e);
    if (v->ex[k][i].exact ? !strcmp(w, e) : !strcmp(e, "/") || (!strncmp(w, e, en) && (w[en] == '\0' || w[en] == '/')))
      return false;
  }
  return true;
}

/* Whether the engine decides the element W as the goal says: denied (or,
 * with WANT_DENIED, allowed). */
static bool engine_agrees(const cover *c, json_t *const *w, bool want_denied)
{
  char *req = request_with(c, w);
  bool allow = false, ok = false;
  if (req)
    ok = shk__analysis_decide(c->set->ps, c->set->schema, req, c->q->entities, c->q->errors_deny, &allow, NULL, NULL,
                              0, NULL, 0, NULL) == 0;
  free(req);
  return ok && allow == want_denied;
}

/* One goal over the fields' constants, at the level above the facts:
 * *sat, and the witness as JSON, one value per field. A path witness that
 * is not canonical is repaired when the engine confirms the repair, else
 * refuted and the goal asked again. */
static int solve_goal(cover *c, shk__enc *enc, const shk__ty *const *ft, const char *goal, const view *v,
                      bool want_denied, bool *sat, json_t **witness, shk_error *err)
{
  shk_analysis *an = c->an;
  shk__text g = { 0 };
  shk__text_printf(&g, "(push 1)\n(assert %s) ; goal\n", goal);
  int r = g.oom ? shk__error_set(err, -ENOMEM, "out of memory") : shk__smt_send(an->smt, g.p, g.n, err);
  shk__text_free(&g);
  char names[64] = "";
  for (size_t k = 0; k < c->n; k++)
    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", k ? " " : "", cv_of(&c->f[k]));
  *sat = false;
  for (size_t round = 0; r == 0; round++) {
    an->checks++;
    if ((r = shk__smt_check(an->smt, sat, err)) < 0 || !*sat)
      break;
    shk__pool *p = shk__pool_new();
    shk__sx **x;
    r = p ? shk__smt_get_value(an->smt, p, names, c->n, &x, err) : shk__error_set(err, -ENOMEM, "out of memory");
    /* At most one field is a path (each field is of its own kind). */
    int broken = -1;
    size_t pk = c->n;
    for (size_t k = 0; r == 0 && k < c->n; k++) {
      if (c->f[k].q->kind == SHK_ANALYSIS_PATH_PREFIX && x[k]->kind == SHK__SX_STRING &&
          (broken = canon_broken(x[k]->s, x[k]->n)) != -1) {
        pk = k;
        continue;
      }
      if (!(witness[k] = shk__model_json(enc, c->f[k].range_record ? ft[k]->attrs[0].t : ft[k], x[k])))
        r = shk__error_set(err, -EPROTO, "defect in the analysis: the model's element cannot be read back");
    }
    for (int fill = 1; r == 0 && broken != -1 && fill >= 0; fill--) {
      char *fixed = canon_repair(x[pk]->s, x[pk]->n, fill);
      if (fixed && path_in_view(v, pk, fixed) && (witness[pk] = json_string(fixed)) &&
          engine_agrees(c, witness, want_denied)) {
        broken = -1;
      } else if (witness[pk]) {
        json_decref(witness[pk]);
        witness[pk] = NULL;
      }
      free(fixed);
    }
    shk__pool_free(p);
    if (r < 0 || broken == -1)
      break;
    for (size_t k = 0; k < c->n; k++) {
      json_decref(witness[k]);
      witness[k] = NULL;
    }
    /* Each rule is added at most once, so this ends. */
    if (round > N_CANON) {
      r = shk__error_set(err, -EPROTO, "defect in the analysis: the solver keeps answering with a "
                         "non-canonical path");
      break;
    }
    shk__text rule = { 0 };
    rule_text(&rule, canon[broken].rule, cv_of(&c->f[pk]));
    r = rule.oom ? shk__error_set(err, -ENOMEM, "out of memory") : shk__smt_send(an->smt, rule.p, rule.n, err);
    shk__text_free(&rule);
  }
  if (r == 0)
    r = shk__smt_send(an->smt, "(pop 1)\n", 8, err);
  return r;
}

/* Every slot the check makes symbolic. */
static unsigned all_slots(const cover *c)
{
  unsigned sel = 0;
  for (size_t k = 0; k < c->n; k++)
    sel |= (1u << k) | (c->f[k].n_hpath ? 1u << HOME_SLOT(k) : 0);
  return sel;
}

/* Is every element of the view allowed (or, with WANT_DENIED, denied)?
 * witness (an array of one per field) gets an element that is not, as
 * JSON. */
static int check_once(cover *c, const view *v, bool want_denied, bool *holds, json_t **witness, shk_error *err)
{
  for (size_t k = 0; k < c->n; k++)
    witness[k] = NULL;
  int r = ensure_loaded(c, err);
  if (r < 0)
    return r;
  shk_analysis *an = c->an;
  shk__enc *enc = an->loaded_enc;
  /* The facts of one check are written from a scratch pool, so that a
   * long-lived session does not grow; a check that had to intern a new
   * type (none should) drops the cached encoding afterwards. */
  shk__pool *keep = enc->pool, *scratch = shk__pool_new();
  size_t n_types = enc->n_types, n_decl = enc->decl.n;
  if (!scratch)
    return shk__error_set(err, -ENOMEM, "out of memory");
  shk__text b = { 0 };
  jmp_buf jb;
  enc->fail = &jb;
  enc->err = err;
  enc->pool = scratch;
  const shk__ty *ft[SHK_ANALYSIS_MAX_COVER];
  if (setjmp(jb) == 0) {
    /* Each element is one constant per kind, declared once with the set's
     * encoding: a new constant in every check makes cvc5 slower with each
     * check (measured: 54 ms a check for the first 25, 248 ms after 125). */
    for (size_t k = 0; k < c->n; k++) {
      field_check(enc, c, k);
      ft[k] = field_type(enc, c, k);
      unsigned bit = 1u << c->f[k].q->kind;
      if (!(an->loaded_cv & bit)) {
        const char *sort = c->f[k].range_record ? ft[k]->attrs[0].t->sort : ft[k]->sort;
        char d[96];
        snprintf(d, sizeof d, "(declare-const %s %s)\n", cv_of(&c->f[k]), sort);
        if ((r = shk__smt_send(an->smt, d, strlen(d), err)) < 0)
          shk__enc_fail(enc, r, SHK__NOLOC, "%s", err ? err->message : "the solver failed");
        an->loaded_cv |= bit;
      }
    }
    c->cur = v;
    shk__text_printf(&b, "(assert (= context %s))\n",
                     context_term(enc, c, enc->ctx, &c->req->context, all_slots(c), 0));
    store_facts(enc, c->es, &b);
    for (size_t k = 0; k < c->n; k++) {
      const char *cv = cv_of(&c->f[k]);
      shk_analysis_cover_kind kind = c->f[k].q->kind;
      shk__text_printf(&b, "(assert %s)\n(assert %s)\n", element(enc, kind, cv),
                       covered(enc, kind, cv, v->pat[k], v->exact[k]));
      for (size_t i = 0; i < v->n_ex[k]; i++)
        shk__text_printf(&b, "(assert (not %s))\n", covered(enc, kind, cv, v->ex[k][i].text, v->ex[k][i].exact));
    }
    r = 0;
  } else {
    r = enc->code;
  }
  enc->pool = keep;
  bool stale = enc->n_types != n_types || enc->decl.n != n_decl;
  if (r == 0 && (b.oom || stale))
    r = shk__error_set(err, b.oom ? -ENOMEM : -EINVAL, b.oom ? "out of memory"
                       : "the concrete request needs a type the policies never use");
  if (r == 0) {
    shk__text g = { 0 };
    shk__text_printf(&g, "(push 1)\n%s", b.p);
    r = g.oom ? shk__error_set(err, -ENOMEM, "out of memory") : shk__smt_send(an->smt, g.p, g.n, err);
    shk__text_free(&g);
    bool sat = false;
    if (want_denied) {
      const char *goal = c->q->errors_deny ? an->loaded_allow_clean : an->loaded_allow;
      if (r == 0)
        r = solve_goal(c, enc, ft, goal, v, true, &sat, witness, err);
    } else {
      for (size_t i = 0; r == 0 && !sat && i < an->n_loaded_goals; i++)
        r = solve_goal(c, enc, ft, an->loaded_goals[i], v, false, &sat, witness, err);
      for (size_t i = 0; c->q->errors_deny && r == 0 && !sat && i < an->n_loaded_err_goals; i++)
        r = solve_goal(c, enc, ft, an->loaded_err_goals[i], v, false, &sat, witness, err);
    }
    if (r == 0)
      r = shk__smt_send(an->smt, "(pop 1)\n", 8, err);
    *holds = !sat;
  }
  shk__text_free(&b);
  shk__pool_free(scratch);
  if (r < 0)
    shk__analysis_reset(an);
  else if (stale && shk__analysis_unload(an, NULL) < 0)
    shk__analysis_reset(an);
  if (r < 0)
    for (size_t k = 0; k < c->n; k++) {
      json_decref(witness[k]);
      witness[k] = NULL;
    }
  return r;
}

/* ---------------------------------------------------------------- set-up */

static int split_field(const char *field, char ***path, size_t *n_path, shk_error *err)
{
  for (const char *p = field;;) {
    const char *dot = strchr(p, '.');
    size_t n = dot ? (size_t)(dot - p) : strlen(p);
    if (n == 0)
      return shk__error_set(err, -EINVAL, "'%s' is not a dotted context field", field);
    char **v = realloc(*path, (*n_path + 1) * sizeof *v);
    if (!v)
      return shk__error_set(err, -ENOMEM, "out of memory");
    *path = v;
    if (!(v[*n_path] = strndup(p, n)))
      return shk__error_set(err, -ENOMEM, "out of memory");
    (*n_path)++;
    if (!dot)
      return 0;
    p = dot + 1;
  }
}

static int cover_init(cover *c, shk_analysis *an, const shk_analysis_set *set,
                      const shk_analysis_cover_query *q, shk_error *err)
{
  *c = (cover){ .an = an, .set = set, .q = q };
  shk_error cerr = { 0 };
  int r;
  if (!q->request || !q->fields || q->n_fields == 0)
    return shk__error_set(err, -EINVAL, "a cover question needs a request and a covered field");
  if (q->n_fields > SHK_ANALYSIS_MAX_COVER)
    return shk__error_set(err, -EINVAL, "a cover question covers at most %d fields", SHK_ANALYSIS_MAX_COVER);
  unsigned kinds = 0;
  for (size_t k = 0; k < q->n_fields; k++) {
    const shk_analysis_cover_field *f = &q->fields[k];
    if (!f->field || !f->pattern || (unsigned)f->kind >= N_KINDS || (f->n_except && !f->except))
      return shk__error_set(err, -EINVAL, "a covered field needs a field name, a kind and a pattern");
    if (kinds & (1u << f->kind))
      return shk__error_set(err, -EINVAL, "two covered fields are %s: cover one field of each kind",
                            kind_name(f->kind));
    if (f->kind == SHK_ANALYSIS_TIME_RANGE && f->n_except)
      return shk__error_set(err, -EINVAL, "a time range takes no exceptions");
    kinds |= 1u << f->kind;
  }
  if ((r = shk_cedar_request_from_json(q->request, strlen(q->request), set->schema, true, &c->req, &cerr)) < 0)
    return shk__error_set(err, -EINVAL, "the request does not fit the schema: %s", cerr.message);
  const char *ents = q->entities ? q->entities : "[]";
  if ((r = shk_cedar_entities_parse(ents, strlen(ents), set->schema, &c->es, &cerr)) < 0)
    return shk__error_set(err, -EINVAL, "the entities do not fit the schema: %s", cerr.message);
  if (!(c->req_json = json_loads(q->request, JSON_ALLOW_NUL, NULL)))
    return shk__error_set(err, -EINVAL, "the request is not JSON");
  c->env = set->n_envs;
  for (size_t i = 0; i < set->n_envs; i++) {
    const shk__aenv *e = &set->envs[i];
    if (shk__uid_eq(e->action->uid, c->req->action) && shk__str_eq(e->principal, c->req->principal.type) &&
        shk__str_eq(e->resource, c->req->resource.type))
      c->env = i;
  }
  if (c->env == set->n_envs)
    return shk__error_set(err, -EINVAL, "the request's action does not apply to its principal and resource");
  for (size_t k = 0; k < q->n_fields; k++) {
    c->f[k].q = &q->fields[k];
    c->n = k + 1;
    cfield *f = &c->f[k];
    if ((r = split_field(f->q->field, &f->path, &f->n_path, err)) < 0 ||
        (f->q->home_field && (r = split_field(f->q->home_field, &f->hpath, &f->n_hpath, err)) < 0))
      return r;
    if (f->q->home_field && f->q->kind != SHK_ANALYSIS_PATH_PREFIX)
      return shk__error_set(err, -EINVAL, "only a path prefix has a home field");
  }
  unsigned sel = all_slots(c);
  for (size_t k = 0; k < 2 * SHK_ANALYSIS_MAX_COVER; k++)
    for (size_t j = 0; j < 2 * SHK_ANALYSIS_MAX_COVER; j++) {
      size_t nk, nj;
      char *const *pk = slot_path(c, k, &nk), *const *pj = slot_path(c, j, &nj);
      if (j == k || !(sel & (1u << k)) || !(sel & (1u << j)))
        continue;
      size_t m = nk < nj ? nk : nj, same = 0;
      while (same < m && !strcmp(pk[same], pj[same]))
        same++;
      if (same == nk)
        return shk__error_set(err, -EINVAL, "the covered fields overlap at '%s'", pk[nk - 1]);
    }
  return 0;
}

/* The query's own view: each field's pattern less its exceptions. */
static void query_view(const cover *c, view *v)
{
  *v = (view){ 0 };
  for (size_t k = 0; k < c->n; k++) {
    v->pat[k] = c->f[k].q->pattern;
    v->ex[k] = c->f[k].q->except;
    v->n_ex[k] = c->f[k].q->n_except;
  }
}

/* A witness value as text: a path, a host, an address, a port, a
 * datetime. */
static void witness_text(const json_t *w, char *buf, size_t n)
{
  if (json_is_string(w))
    snprintf(buf, n, "%s", json_string_value(w));
  else if (json_is_integer(w))
    snprintf(buf, n, "%" JSON_INTEGER_FORMAT, json_integer_value(w));
  else {
    const char *a = json_string_value(json_object_get(json_object_get(w, "__extn"), "arg"));
    snprintf(buf, n, "%s", a ? a : "?");
  }
}

/* The object that holds the last step of PATH inside CTX, made where it
 * is missing; NULL when something on the way is no object. */
static json_t *parent_of(json_t *ctx, char *const *path, size_t n)
{
  json_t *o = ctx;
  for (size_t i = 0; o && i + 1 < n; i++) {
    json_t *next = json_object_get(o, path[i]);
    if (!next && json_object_set_new(o, path[i], next = json_object()) < 0)
      return NULL;
    o = json_is_object(next) ? next : NULL;
  }
  return o;
}

/* The request with every field set to its witness value (and each home
 * field to what follows from its path), as JSON text. */
static char *request_with(const cover *c, json_t *const *w)
{
  json_t *req = json_deep_copy(c->req_json);
  json_t *ctx = json_object_get(req, "context");
  if (req && !ctx && json_object_set_new(req, "context", ctx = json_object()) < 0)
    ctx = NULL;
  bool ok = ctx != NULL;
  for (size_t k = 0; ok && k < c->n; k++) {
    const cfield *f = &c->f[k];
    json_t *o = parent_of(ctx, f->path, f->n_path);
    json_t *val = f->range_record ? json_pack("{s:O, s:O}", "lo", w[k], "hi", w[k]) : json_incref(w[k]);
    ok = o && val && json_object_set_new(o, f->path[f->n_path - 1], val) == 0;
    if (ok && f->n_hpath) {
      const char *rest = json_is_string(w[k]) ? shk_policy_home_rest(json_string_value(w[k])) : NULL;
      const char *name = f->hpath[f->n_hpath - 1];
      o = parent_of(ctx, f->hpath, f->n_hpath);
      ok = o && (rest ? json_object_set_new(o, name, json_string(rest)) == 0
                      : (json_object_del(o, name), true));
    }
  }
  char *text = ok ? json_dumps(req, JSON_COMPACT) : NULL;
  json_decref(req);
  return text;
}

/* The values of VIEW's fields, or of the witness, joined for a message. */
static void join(const cover *c, const view *v, json_t *const *w, char *buf, size_t n)
{
  size_t o = 0;
  buf[0] = '\0';
  for (size_t k = 0; k < c->n && o < n; k++) {
    char one[512];
    if (w)
      witness_text(w[k], one, sizeof one);
    else
      snprintf(one, sizeof one, "%s", v->pat[k]);
    o += (size_t)snprintf(buf + o, n - o, "%s%s", k ? ", " : "", one);
  }
}

/* Decides the witness with the engine and fills the refusal. */
static int explain(const cover *c, const view *v, json_t *const *w, shk_analysis_cover_result *out, shk_error *err)
{
  char wt[600], pt[600];
  join(c, v, w, wt, sizeof wt);
  join(c, v, NULL, pt, sizeof pt);
  char *req = request_with(c, w);
  if (!req)
    return shk__error_set(err, -ENOMEM, "out of memory");
  bool allow, erred = false;
  char policy[128];
  int r = shk__analysis_decide(c->set->ps, c->set->schema, req, c->q->entities, c->q->errors_deny, &allow, &erred,
                               NULL, 0, policy, sizeof policy, err);
  free(req);
  if (r < 0)
    return r;
  if (allow)
    return shk__error_set(err, -EPROTO, "defect in the analysis: the engine allows %s, which the analysis "
                          "found denied", wt);
  out->allowed = false;
  for (size_t k = 0; k < c->n; k++)
    witness_text(w[k], out->witness[k], sizeof out->witness[k]);
  snprintf(out->policy, sizeof out->policy, "%s", policy);
  if (policy[0])
    snprintf(out->why, sizeof out->why, "%.200s covers %.300s, %s %.120s", pt, wt,
             erred ? "where an error stops it in" : "forbidden by", policy);
  else
    snprintf(out->why, sizeof out->why, "%.200s covers %.300s, which no policy permits", pt, wt);
  return 0;
}

static void witness_clear(json_t **w, size_t n)
{
  for (size_t k = 0; k < n; k++) {
    json_decref(w[k]);
    w[k] = NULL;
  }
}

static void allowed_why(const cover *c, const view *v, shk_analysis_cover_result *out)
{
  char pt[600];
  join(c, v, NULL, pt, sizeof pt);
  out->allowed = true;
  snprintf(out->why, sizeof out->why, "every element %.600s covers is allowed", pt);
}

int shk_analysis_cover(shk_analysis *an, const shk_analysis_set *set, const shk_analysis_cover_query *q,
                       shk_analysis_cover_result *out, shk_error *err)
{
  memset(out, 0, sizeof *out);
  cover c;
  view v;
  int r = cover_init(&c, an, set, q, err);
  bool holds = false;
  json_t *w[SHK_ANALYSIS_MAX_COVER] = { 0 };
  if (r == 0) {
    query_view(&c, &v);
    r = check_once(&c, &v, false, &holds, w, err);
  }
  if (r == 0 && holds)
    allowed_why(&c, &v, out);
  else if (r == 0)
    r = explain(&c, &v, w, out, err);
  witness_clear(w, c.n);
  cover_clear(&c);
  if (r < 0)
    out->allowed = false;
  return r;
}

/* ---------------------------------------------------------------- narrowing */

void shk_analysis_narrowing_clear(shk_analysis_narrowing *n)
{
  if (!n)
    return;
  for (size_t i = 0; i < n->n_except; i++)
    free((char *)n->except[i].text);
  free(n->except);
  *n = (shk_analysis_narrowing){ 0 };
}

/* Whether the engine allows some element of CAND, a part of the only
 * field, tried on a few of its elements: the subtree's root and a child,
 * a range's ends. One such element disproves "denied everywhere" without
 * asking the solver, whose search for an allowed element (every forbid
 * negated) is its slowest question. */
static bool probe_allowed(const cover *c, const char *cand, bool exact)
{
  if (c->n != 1)
    return false;
  char probes[2][600];
  size_t n = 0;
  switch (c->f[0].q->kind) {
  case SHK_ANALYSIS_PATH_PREFIX:
    snprintf(probes[n++], sizeof probes[0], "%s", cand);
    if (!exact)
      snprintf(probes[n++], sizeof probes[0], "%s/a", strcmp(cand, "/") ? cand : "");
    break;
  case SHK_ANALYSIS_HOST_PATTERN: {
    int wild;
    const char *h = host_of(cand, &wild);
    if (wild != 1)
      snprintf(probes[n++], sizeof probes[0], "%s", h);
    if (wild)
      snprintf(probes[n++], sizeof probes[0], "a.%s", h);
    break;
  }
  case SHK_ANALYSIS_PORT_RANGE: {
    long long lo, hi;
    if (parse_ports(cand, &lo, &hi)) {
      snprintf(probes[n++], sizeof probes[0], "%lld", lo);
      snprintf(probes[n++], sizeof probes[0], "%lld", hi);
    }
    break;
  }
  case SHK_ANALYSIS_CIDR:
  case SHK_ANALYSIS_TIME_RANGE:
    break;
  }
  for (size_t i = 0; i < n; i++) {
    bool port = c->f[0].q->kind == SHK_ANALYSIS_PORT_RANGE;
    json_t *w = port ? json_integer(atoll(probes[i])) : json_string(probes[i]);
    bool allowed = w && engine_agrees(c, &w, true);
    json_decref(w);
    if (allowed)
      return true;
  }
  return false;
}

/* Whether everything of view V, with field K's part replaced by CAND
 * alone, is denied. */
static bool denied_everywhere(cover *c, const view *v, size_t k, const char *cand, bool exact, int *r,
                              shk_error *err)
{
  *r = 0;
  if (probe_allowed(c, cand, exact))
    return false;
  view t = *v;
  t.pat[k] = cand;
  t.exact[k] = exact;
  t.ex[k] = NULL;
  t.n_ex[k] = 0;
  bool holds = false;
  json_t *w[SHK_ANALYSIS_MAX_COVER];
  *r = check_once(c, &t, true, &holds, w, err);
  witness_clear(w, c->n);
  return *r == 0 && holds;
}

/* Bisection for one end of the widest denied interval around X within
 * [FROM, TO] of field K: with DOWN the smallest start s such that s..X is
 * denied, else the largest end e such that X..e is. */
static int widest(cover *c, const view *v, size_t k, long long from, long long to, long long x, bool down,
                  long long *best, shk_error *err)
{
  long long a = from, b = to;
  int r = 0;
  while (a <= b) {
    long long mid = a + (b - a) / 2;
    char cand[48];
    snprintf(cand, sizeof cand, "%lld-%lld", down ? mid : x, down ? x : mid);
    bool d = denied_everywhere(c, v, k, cand, false, &r, err);
    if (r < 0)
      return r;
    if (d)
      *best = mid;
    /* Denied: the end may lie further out; allowed: it lies further in. */
    if (d == down)
      b = mid - 1;
    else
      a = mid + 1;
  }
  return 0;
}

/* The widest subtree of field K around its witness value W that view V
 * denies everywhere, in the pattern's own syntax; else the value alone
 * (an exact path, a host, an address, a port), which *verified says was
 * not checked: it is denied at least where the witness is. */
static int exclusion(cover *c, const view *v, size_t k, const json_t *w, char **text, bool *exact, bool *verified,
                     shk_error *err)
{
  char wt[512];
  witness_text(w, wt, sizeof wt);
  const char *pattern = v->pat[k];
  int r = 0;
  *exact = false;
  *verified = true;
  *text = NULL;
  switch (c->f[k].q->kind) {
  case SHK_ANALYSIS_PATH_PREFIX: {
    size_t base = strcmp(pattern, "/") ? strlen(pattern) : 0;
    for (size_t i = base + 1; wt[i - 1] && !*text; i++) {
      if (wt[i] != '/' && wt[i] != '\0')
        continue;
      char cand[512];
      snprintf(cand, sizeof cand, "%.*s", (int)i, wt);
      if (denied_everywhere(c, v, k, cand, false, &r, err))
        *text = strdup(cand);
      if (r < 0)
        return r;
      if (wt[i] == '\0')
        break;
    }
    if (!*text) {
      *text = strdup(wt);
      *exact = true;
      *verified = false;
    }
    break;
  }
  case SHK_ANALYSIS_HOST_PATTERN: {
    int wild;
    const char *h = host_of(pattern, &wild);
    size_t hn = strlen(h), wn = strlen(wt);
    /* Suffixes of the witness strictly longer than the pattern's host,
     * shortest first: each as "**.d", then as "*.d". */
    for (size_t start = wn > hn ? wn - hn - 1 : 0; start > 0 && !*text;) {
      size_t s = start - 1;
      while (s > 0 && wt[s - 1] != '.')
        s--;
      for (int wl = 2; wl >= 1 && !*text; wl--) {
        char cand[600];
        snprintf(cand, sizeof cand, "%s%s", wl == 2 ? "**." : "*.", wt + s);
        if (denied_everywhere(c, v, k, cand, false, &r, err))
          *text = strdup(cand);
        if (r < 0)
          return r;
      }
      start = s;
    }
    if (!*text) {
      *text = strdup(wt);
      *verified = false;
    }
    break;
  }
  case SHK_ANALYSIS_CIDR: {
    shk__ipaddr p, a;
    if (shk__ipaddr_parse((shk__str){ pattern, strlen(pattern) }, &p) < 0 ||
        shk__ipaddr_parse((shk__str){ wt, strlen(wt) }, &a) < 0)
      return shk__error_set(err, -EINVAL, "cannot read the address %s", wt);
    int width = a.v6 ? 128 : 32;
    for (int b = p.prefix + 1; b <= width && !*text; b++) {
      shk__ipaddr m = a;
      m.prefix = (uint8_t)b;
      for (int i = 0; i < 16; i++) {
        int bits = b - 8 * i;
        m.addr[i] &= bits >= 8 ? 0xff : bits <= 0 ? 0 : (uint8_t)(0xff << (8 - bits));
      }
      char cand[80];
      shk__ipaddr_format(&m, cand, sizeof cand);
      if (denied_everywhere(c, v, k, cand, false, &r, err))
        *text = strdup(cand);
      if (r < 0)
        return r;
    }
    if (!*text) {
      *text = strdup(wt);
      *verified = false;
    }
    break;
  }
  case SHK_ANALYSIS_PORT_RANGE: {
    long long lo = 0, hi = 0, x = json_integer_value(w);
    parse_ports(pattern, &lo, &hi);
    /* The widest interval around x that is denied throughout: the
     * smallest start and the largest end, each by bisection (an interval
     * inside a denied one is denied). */
    long long best_lo = x, best_hi = x;
    if ((r = widest(c, v, k, lo, x, x, true, &best_lo, err)) < 0 ||
        (r = widest(c, v, k, x, hi, x, false, &best_hi, err)) < 0)
      return r;
    char cand[48];
    snprintf(cand, sizeof cand, "%lld-%lld", best_lo, best_hi);
    *text = strdup(cand);
    /* x..x itself was among the candidates, and may have been allowed. */
    *verified = false;
    break;
  }
  case SHK_ANALYSIS_TIME_RANGE:
    return 0;
  }
  return *text ? 0 : shk__error_set(err, -ENOMEM, "out of memory");
}

/* Exceptions of one field: the query's and those added here. */
typedef struct exlist {
  shk_analysis_except *v;
  size_t n, cap;
} exlist;

static int exlist_add(exlist *l, const char *text, bool exact, unsigned field)
{
  if (l->n == l->cap) {
    size_t nc = l->cap ? l->cap * 2 : 8;
    shk_analysis_except *nv = realloc(l->v, nc * sizeof *nv);
    if (!nv)
      return -ENOMEM;
    l->v = nv;
    l->cap = nc;
  }
  char *t = strdup(text);
  if (!t)
    return -ENOMEM;
  l->v[l->n++] = (shk_analysis_except){ t, exact, field };
  return 0;
}

static void exlist_clear(exlist *l)
{
  for (size_t i = 0; i < l->n; i++)
    free((char *)l->v[i].text);
  free(l->v);
  *l = (exlist){ 0 };
}

int shk_analysis_narrow(shk_analysis *an, const shk_analysis_set *set, const shk_analysis_cover_query *q,
                        size_t max_except, shk_analysis_narrowing *out, shk_error *err)
{
  *out = (shk_analysis_narrowing){ 0 };
  cover c;
  int r = cover_init(&c, an, set, q, err);
  exlist per[SHK_ANALYSIS_MAX_COVER] = { 0 }, added = { 0 };
  for (size_t k = 0; r == 0 && k < c.n; k++)
    for (size_t i = 0; r == 0 && i < c.f[k].q->n_except; i++)
      if (exlist_add(&per[k], c.f[k].q->except[i].text, c.f[k].q->except[i].exact, (unsigned)k) < 0)
        r = shk__error_set(err, -ENOMEM, "out of memory");
  for (size_t step = 0; r == 0; step++) {
    view v;
    query_view(&c, &v);
    for (size_t k = 0; k < c.n; k++) {
      v.ex[k] = per[k].v;
      v.n_ex[k] = per[k].n;
    }
    bool holds;
    json_t *w[SHK_ANALYSIS_MAX_COVER];
    if ((r = check_once(&c, &v, false, &holds, w, err)) < 0)
      break;
    if (holds) {
      out->found = step > 0;
      if (step == 0)
        allowed_why(&c, &v, &out->first);
      break;
    }
    if (step == 0)
      r = explain(&c, &v, w, &out->first, err);
    /* The first field whose part around the witness is denied throughout
     * is narrowed; with one field, the witness's own value always is. */
    bool narrowed = false;
    for (size_t k = 0; r == 0 && !narrowed && step < max_except && k < c.n; k++) {
      char *text = NULL;
      bool exact = false, verified = true;
      if ((r = exclusion(&c, &v, k, w[k], &text, &exact, &verified, err)) < 0 || !text)
        continue;
      bool ok = verified || c.n == 1 || denied_everywhere(&c, &v, k, text, exact, &r, err);
      if (r == 0 && ok && (exlist_add(&per[k], text, exact, (unsigned)k) < 0 ||
                           exlist_add(&added, text, exact, (unsigned)k) < 0))
        r = shk__error_set(err, -ENOMEM, "out of memory");
      narrowed = r == 0 && ok;
      free(text);
    }
    witness_clear(w, c.n);
    if (r < 0 || !narrowed)
      break;
  }
  for (size_t k = 0; k < SHK_ANALYSIS_MAX_COVER; k++)
    exlist_clear(&per[k]);
  if (r < 0 || !out->found) {
    exlist_clear(&added);
    out->found = false;
  } else {
    out->except = added.v;
    out->n_except = added.n;
  }
  cover_clear(&c);
  return r;
}
