/* The grant-time question: a scope element that is a pattern (a path
 * prefix, a host pattern, a CIDR, a port range) may be granted only if the
 * policy set allows every concrete element it covers, for this session.
 *
 * The request and the entity store are concrete; only the one context
 * field the pattern stands for is symbolic, constrained to the pattern's
 * concrete elements. The set's encoding for the environment stays loaded
 * in the solver (level 1 of its assertion stack), so a repeated check sends
 * only the concrete facts, the pattern and the goal. A witness the solver
 * finds is decided by the engine before it is reported. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cedar/cedar-eval-internal.h"
#include "policy/analysis-internal.h"
#include "shinken/cedar.h"

#define MAX_PATH_DEPTH 8

typedef struct cover {
  shk_analysis *an;
  const shk_analysis_set *set;
  const shk_analysis_cover_query *q;
  shk_cedar_request *req;
  shk_cedar_entities *es;
  json_t *req_json;
  size_t env;
  char **path;             /* the field's attribute names */
  size_t n_path;
} cover;

static void cover_clear(cover *c)
{
  shk_cedar_request_free(c->req);
  shk_cedar_entities_free(c->es);
  json_decref(c->req_json);
  for (size_t i = 0; i < c->n_path; i++)
    free(c->path[i]);
  free(c->path);
}

static shk__tyk kind_type(shk_analysis_cover_kind k)
{
  return k == SHK_ANALYSIS_CIDR ? SHK__TY_IP : k == SHK_ANALYSIS_PORT_RANGE ? SHK__TY_LONG : SHK__TY_STRING;
}

static const char *kind_name(shk_analysis_cover_kind k)
{
  switch (k) {
  case SHK_ANALYSIS_PATH_PREFIX: return "a path prefix";
  case SHK_ANALYSIS_HOST_PATTERN: return "a host pattern";
  case SHK_ANALYSIS_CIDR: return "a CIDR";
  case SHK_ANALYSIS_PORT_RANGE: return "a port range";
  }
  return "?";
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

static bool parse_ports(const char *s, long *lo, long *hi)
{
  char *end;
  *lo = strtol(s, &end, 10);
  if (end == s)
    return false;
  *hi = *lo;
  if (*end == '-') {
    const char *t = end + 1;
    *hi = strtol(t, &end, 10);
    if (end == t)
      return false;
  }
  return *end == '\0' && *lo >= 0 && *hi <= 65535 && *lo <= *hi;
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

/* The set of values PATTERN covers, as a formula over cv. */
static const char *covered(shk__enc *enc, shk_analysis_cover_kind k, const char *pat, bool exact)
{
  switch (k) {
  case SHK_ANALYSIS_PATH_PREFIX: {
    if (!valid_path(pat))
      shk__enc_fail(enc, -EINVAL, SHK__NOLOC, "'%.200s' is not a canonical absolute path", pat);
    if (exact)
      return shk__enc_str(enc, "(= cv %s)", smt_lit(enc, pat));
    if (!strcmp(pat, "/"))
      return "(str.prefixof \"/\" cv)";
    return shk__enc_str(enc, "(or (= cv %s) (str.prefixof %s cv))", smt_lit(enc, pat),
                        smt_lit(enc, shk__enc_str(enc, "%s/", pat)));
  }
  case SHK_ANALYSIS_HOST_PATTERN: {
    int wild = !strncmp(pat, "**.", 3) ? 2 : !strncmp(pat, "*.", 2) ? 1 : 0;
    const char *h = pat + (wild == 2 ? 3 : wild == 1 ? 2 : 0);
    if (!valid_host(h))
      shk__enc_fail(enc, -EINVAL, SHK__NOLOC, "'%.200s' is not a host pattern (HOST, *.HOST or **.HOST)",
                    pat);
    const char *below = shk__enc_str(enc, "(str.suffixof %s cv)", smt_lit(enc, shk__enc_str(enc, ".%s", h)));
    const char *self = shk__enc_str(enc, "(= cv %s)", smt_lit(enc, h));
    return wild == 0 ? self : wild == 1 ? below : shk__enc_str(enc, "(or %s %s)", self, below);
  }
  case SHK_ANALYSIS_CIDR: {
    shk__ipaddr ip;
    if (shk__ipaddr_parse((shk__str){ pat, strlen(pat) }, &ip) < 0)
      shk__enc_fail(enc, -EINVAL, SHK__NOLOC, "'%.200s' is not a CIDR", pat);
    if (!ip.v6) {
      uint32_t a = (uint32_t)ip.addr[0] << 24 | (uint32_t)ip.addr[1] << 16 | (uint32_t)ip.addr[2] << 8 | ip.addr[3];
      uint32_t m = ip.prefix ? ~(uint32_t)0 << (32 - ip.prefix) : 0;
      return shk__enc_str(enc, "(and ((_ is IP.v4) cv) (= (IP.p4 cv) #x20) (= (bvand (IP.a4 cv) #x%08x) #x%08x))",
                          m, a & m);
    }
    char hm[33], ha[33];
    for (int i = 0; i < 16; i++) {
      int bits = (int)ip.prefix - 8 * i;
      uint8_t m = bits >= 8 ? 0xff : bits <= 0 ? 0 : (uint8_t)(0xff << (8 - bits));
      snprintf(hm + 2 * i, 3, "%02x", m);
      snprintf(ha + 2 * i, 3, "%02x", ip.addr[i] & m);
    }
    return shk__enc_str(enc, "(and ((_ is IP.v6) cv) (= (IP.p6 cv) #x80) (= (bvand (IP.a6 cv) #x%s) #x%s))", hm, ha);
  }
  case SHK_ANALYSIS_PORT_RANGE: {
    long lo, hi;
    if (!parse_ports(pat, &lo, &hi))
      shk__enc_fail(enc, -EINVAL, SHK__NOLOC, "'%.200s' is not a port range (PORT or LO-HI)", pat);
    return shk__enc_str(enc, "(and (bvsle #x%016lx cv) (bvsle cv #x%016lx))", lo, hi);
  }
  }
  return "false";
}

/* What every concrete host is besides being covered: a DNS name. */
static const char *element(shk_analysis_cover_kind k)
{
  if (k == SHK_ANALYSIS_HOST_PATTERN)
    return "(and (<= (str.len cv) 253) (str.in_re cv (re.++ (re.* (re.++ hl (str.to_re \".\"))) hl)))";
  return "true";
}

/* A concrete path is canonical: no empty, "." or ".." component, no NUL,
 * no trailing slash. The solver finds witnesses far faster without these
 * constraints (negated substrings are hard for it), so they are added
 * lazily: a witness that breaks one is refuted by asserting that one, and
 * the check runs again. Without them the question is wider, so an
 * unsatisfiable one stays unsatisfiable: nothing is lost either way. */
static const struct {
  const char *rule;        /* the constraint, over cv */
  const char *bad;         /* what breaks it, for the witness test */
  int where;               /* 0 anywhere, 1 at the end */
} canon[] = {
  { "(not (str.contains cv \"//\"))", "//", 0 },
  { "(not (str.contains cv \"/./\"))", "/./", 0 },
  { "(not (str.contains cv \"/../\"))", "/../", 0 },
  { "(not (str.suffixof \"/.\" cv))", "/.", 1 },
  { "(not (str.suffixof \"/..\" cv))", "/..", 1 },
  { "(or (= cv \"/\") (not (str.suffixof \"/\" cv)))", "/", 1 },
};

/* The first rule the path W breaks, or -1; -2 for a NUL (which no JSON
 * witness can carry: it is refuted the same way). */
static int canon_broken(const char *w, size_t n)
{
  if (memchr(w, '\0', n))
    return -2;
  for (size_t i = 0; i < sizeof canon / sizeof canon[0]; i++) {
    size_t m = strlen(canon[i].bad);
    if (canon[i].where == 0 ? memmem(w, n, canon[i].bad, m) != NULL
                            : n >= m && !memcmp(w + n - m, canon[i].bad, m) && !(n == 1 && i == 5))
      return (int)i;
  }
  return -1;
}

/* ---------------------------------------------------------------- the concrete facts */

static const shk__ty *field_type(shk__enc *enc, const cover *c)
{
  const shk__ty *t = enc->ctx;
  for (size_t i = 0; i < c->n_path; i++) {
    int k = t->k == SHK__TY_RECORD ? shk__ty_attr(t, (shk__str){ c->path[i], strlen(c->path[i]) }) : -1;
    if (k < 0)
      shk__enc_fail(enc, -EINVAL, SHK__NOLOC, "the context has no field '%s'", c->q->field);
    t = t->attrs[k].t;
  }
  return t;
}

/* The context record as a term, with the field replaced by cv. */
static const char *context_term(shk__enc *enc, const shk__ty *t, const shk__value *v, char *const *path,
                                size_t n)
{
  if (n == 0)
    return "cv";
  if (t->k != SHK__TY_RECORD || (v && v->kind != SHK__V_RECORD))
    shk__enc_fail(enc, -EINVAL, SHK__NOLOC, "the covered field is not inside records");
  const char *r = shk__enc_str(enc, "(%s", t->sort);
  for (size_t i = 0; i < t->n_attrs; i++) {
    const shk__tyattr *at = &t->attrs[i];
    const shk__value *x = v ? shk__record_get(v->rec, at->name) : NULL;
    bool on_path = strlen(path[0]) == at->name.n && !memcmp(path[0], at->name.p, at->name.n);
    const char *term;
    if (on_path)
      term = context_term(enc, at->t, x, path + 1, n - 1);
    else if (x)
      term = shk__value_term(enc, at->t, x);
    else
      term = NULL;
    if (!at->required) {
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
  const char **sats = shk__pool_alloc(enc->pool, (c->set->n + 1) * sizeof *sats);
  const char **goals = shk__pool_alloc(enc->pool, (c->set->n + 1) * sizeof *goals);
  if (!sats || !goals)
    shk__enc_fail(enc, -ENOMEM, SHK__NOLOC, "out of memory");
  const char *allow = shk__enc_set(enc, c->set->pols, c->set->n, sats, NULL);
  /* "Some element is denied" is "no permit applies to some element" or
   * "some forbid applies to some element": one question each, so that no
   * check has to reason about many negated patterns at once (which is
   * what makes a string solver slow). */
  size_t ng = 0;
  const char *permit = "false";
  for (size_t i = 0; i < c->set->n; i++)
    if (!c->set->pols[i]->is_forbid)
      permit = shk__enc_str(enc, "(or %s %s)", permit, sats[i]);
  goals[ng++] = shk__enc_str(enc, "(not %s)", permit);
  for (size_t i = 0; i < c->set->n; i++)
    if (c->set->pols[i]->is_forbid && strcmp(sats[i], "false"))
      goals[ng++] = sats[i];
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
  an->loaded_goals = goals;
  an->n_loaded_goals = ng;
  an->loaded_serial = c->set->serial;
  an->loaded_env = c->env;
  an->loaded_cv = 0;
  return 0;
}

static char *request_with(const cover *c, json_t *w);

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

/* Whether the element W (a path) is one the question is about and the
 * engine decides as the goal says (denied, or with WANT_DENIED allowed):
 * then it can stand in for a witness that is not canonical. */
static bool witness_ok(const cover *c, const char *w, const char *pattern, const shk_analysis_except *ex,
                       size_t n_ex, bool want_denied)
{
  if (!valid_path(w))
    return false;
  size_t pn = strlen(pattern);
  if (strcmp(pattern, "/") && !(!strncmp(w, pattern, pn) && (w[pn] == '\0' || w[pn] == '/')))
    return false;
  for (size_t i = 0; i < n_ex; i++) {
    size_t en = strlen(ex[i].text);
    if (ex[i].exact ? !strcmp(w, ex[i].text)
                    : !strcmp(ex[i].text, "/") || (!strncmp(w, ex[i].text, en) && (w[en] == '\0' || w[en] == '/')))
      return false;
  }
  json_t *j = json_string(w);
  char *req = j ? request_with(c, j) : NULL;
  json_decref(j);
  bool allow = false, ok = false;
  if (req)
    ok = shk__analysis_decide(c->set->ps, c->set->schema, req, c->q->entities, &allow, NULL, 0, NULL, 0, NULL) == 0;
  free(req);
  return ok && allow == want_denied;
}

/* One goal over cv, at the level above the facts: *sat, and the witness
 * as JSON. A path witness that is not canonical is repaired when the
 * engine confirms the repair, else refuted and the goal asked again. */
static int solve_goal(cover *c, shk__enc *enc, const shk__ty *ft, const char *goal, const char *pattern,
                      const shk_analysis_except *ex, size_t n_ex, bool want_denied, bool *sat, json_t **witness,
                      shk_error *err)
{
  shk_analysis *an = c->an;
  shk__text g = { 0 };
  shk__text_printf(&g, "(push 1)\n(assert %s) ; goal\n", goal);
  int r = g.oom ? shk__error_set(err, -ENOMEM, "out of memory") : shk__smt_send(an->smt, g.p, g.n, err);
  shk__text_free(&g);
  *sat = false;
  for (size_t round = 0; r == 0; round++) {
    an->checks++;
    if ((r = shk__smt_check(an->smt, sat, err)) < 0 || !*sat)
      break;
    shk__pool *p = shk__pool_new();
    shk__sx **v;
    r = p ? shk__smt_get_value(an->smt, p, "cv", 1, &v, err) : shk__error_set(err, -ENOMEM, "out of memory");
    int broken = -1;
    if (r == 0 && c->q->kind == SHK_ANALYSIS_PATH_PREFIX && v[0]->kind == SHK__SX_STRING)
      broken = canon_broken(v[0]->s, v[0]->n);
    for (int fill = 1; r == 0 && broken != -1 && fill >= 0; fill--) {
      char *fixed = canon_repair(v[0]->s, v[0]->n, fill);
      if (fixed && witness_ok(c, fixed, pattern, ex, n_ex, want_denied)) {
        *witness = json_string(fixed);
        broken = -1;
      }
      free(fixed);
    }
    if (r == 0 && broken == -1 && !*witness && !(*witness = shk__model_json(enc, ft, v[0])))
      r = shk__error_set(err, -EPROTO, "defect in the analysis: the model's element cannot be read back");
    shk__pool_free(p);
    if (r < 0 || broken == -1)
      break;
    /* Each rule is added at most once, so this ends. */
    if (round > sizeof canon / sizeof canon[0]) {
      r = shk__error_set(err, -EPROTO, "defect in the analysis: the solver keeps answering with a "
                         "non-canonical path");
      break;
    }
    char rule[128];
    snprintf(rule, sizeof rule, "(assert %s)\n", broken == -2 ? "(not (str.contains cv \"\\u{0}\"))"
                                                                : canon[broken].rule);
    r = shk__smt_send(an->smt, rule, strlen(rule), err);
  }
  if (r == 0)
    r = shk__smt_send(an->smt, "(pop 1)\n", 8, err);
  return r;
}

/* Is every element of PATTERN (less the exceptions) allowed (or, with
 * WANT_DENIED, denied)? *witness gets an element that is not, as JSON. */
static int check_once(cover *c, const char *pattern, const shk_analysis_except *ex, size_t n_ex,
                      bool want_denied, bool *holds, json_t **witness, shk_error *err)
{
  *witness = NULL;
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
  const shk__ty *ft = NULL;
  if (setjmp(jb) == 0) {
    ft = field_type(enc, c);
    if (ft->k != kind_type(c->q->kind))
      shk__enc_fail(enc, -EINVAL, SHK__NOLOC, "the field '%s' cannot hold %s", c->q->field,
                    kind_name(c->q->kind));
    /* The element is one constant per sort, declared once with the set's
     * encoding: a new constant in every check makes cvc5 slower with each
     * check (measured: 54 ms a check for the first 25, 248 ms after 125). */
    int k = ft->k == SHK__TY_STRING ? 0 : ft->k == SHK__TY_LONG ? 1 : 2;
    static const char *const names[] = { "cvs", "cvl", "cvi" };
    if (!(an->loaded_cv & (1u << k))) {
      char d[96];
      snprintf(d, sizeof d, "(declare-const %s %s)\n", names[k], ft->sort);
      if ((r = shk__smt_send(an->smt, d, strlen(d), err)) < 0)
        shk__enc_fail(enc, r, SHK__NOLOC, "%s", err ? err->message : "the solver failed");
      an->loaded_cv |= 1u << k;
    }
    shk__text_printf(&b, "(define-fun cv () %s %s)\n", ft->sort, names[k]);
    shk__text_printf(&b, "(assert (= context %s))\n",
                     context_term(enc, enc->ctx, &c->req->context, c->path, c->n_path));
    store_facts(enc, c->es, &b);
    shk__text_printf(&b, "(assert %s)\n(assert %s)\n", element(c->q->kind),
                     covered(enc, c->q->kind, pattern, false));
    for (size_t i = 0; i < n_ex; i++)
      shk__text_printf(&b, "(assert (not %s))\n", covered(enc, c->q->kind, ex[i].text, ex[i].exact));
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
      if (r == 0)
        r = solve_goal(c, enc, ft, an->loaded_allow, pattern, ex, n_ex, true, &sat, witness, err);
    } else {
      for (size_t i = 0; r == 0 && !sat && i < an->n_loaded_goals; i++)
        r = solve_goal(c, enc, ft, an->loaded_goals[i], pattern, ex, n_ex, false, &sat, witness, err);
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
  if (r < 0) {
    json_decref(*witness);
    *witness = NULL;
  }
  return r;
}

/* ---------------------------------------------------------------- set-up */

static int cover_init(cover *c, shk_analysis *an, const shk_analysis_set *set,
                      const shk_analysis_cover_query *q, shk_error *err)
{
  *c = (cover){ .an = an, .set = set, .q = q };
  shk_error cerr = { 0 };
  int r;
  if (!q->request || !q->field || !q->pattern)
    return shk__error_set(err, -EINVAL, "a cover question needs a request, a field and a pattern");
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
  for (const char *p = q->field;;) {
    const char *dot = strchr(p, '.');
    size_t n = dot ? (size_t)(dot - p) : strlen(p);
    char **v = realloc(c->path, (c->n_path + 1) * sizeof *v);
    if (!v || !(v[c->n_path] = strndup(p, n))) {
      if (v)
        c->path = v;
      return shk__error_set(err, -ENOMEM, "out of memory");
    }
    c->path = v;
    if (n == 0) {
      free(v[c->n_path]);
      return shk__error_set(err, -EINVAL, "'%s' is not a dotted context field", q->field);
    }
    c->n_path++;
    if (!dot)
      break;
    p = dot + 1;
  }
  return 0;
}

/* The witness as text: a path, a host, an address, a port. */
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

/* The request with the field set to W, as JSON text. */
static char *request_with(const cover *c, json_t *w)
{
  json_t *req = json_deep_copy(c->req_json);
  json_t *o = json_object_get(req, "context");
  if (!o) {
    o = json_object();
    json_object_set_new(req, "context", o);
  }
  for (size_t i = 0; o && i + 1 < c->n_path; i++) {
    json_t *next = json_object_get(o, c->path[i]);
    if (!next) {
      next = json_object();
      json_object_set_new(o, c->path[i], next);
    }
    o = next;
  }
  char *text = NULL;
  if (json_is_object(o) && json_object_set(o, c->path[c->n_path - 1], w) == 0)
    text = json_dumps(req, JSON_COMPACT);
  json_decref(req);
  return text;
}

/* Decides the witness with the engine and fills the refusal. */
static int explain(const cover *c, const char *pattern, json_t *w, shk_analysis_cover_result *out, shk_error *err)
{
  char wt[512];
  witness_text(w, wt, sizeof wt);
  char *req = request_with(c, w);
  if (!req)
    return shk__error_set(err, -ENOMEM, "out of memory");
  bool allow;
  char why[600], policy[128];
  int r = shk__analysis_decide(c->set->ps, c->set->schema, req, c->q->entities, &allow, why, sizeof why, policy,
                               sizeof policy, err);
  free(req);
  if (r < 0)
    return r;
  if (allow)
    return shk__error_set(err, -EPROTO, "defect in the analysis: the engine allows %s, which the analysis "
                          "found denied", wt);
  out->allowed = false;
  snprintf(out->witness, sizeof out->witness, "%s", wt);
  snprintf(out->policy, sizeof out->policy, "%s", policy);
  if (policy[0])
    snprintf(out->why, sizeof out->why, "%.200s covers %.300s, forbidden by %.120s", pattern, wt, policy);
  else
    snprintf(out->why, sizeof out->why, "%.200s covers %.300s, which no policy permits", pattern, wt);
  return 0;
}

int shk_analysis_cover(shk_analysis *an, const shk_analysis_set *set, const shk_analysis_cover_query *q,
                       shk_analysis_cover_result *out, shk_error *err)
{
  memset(out, 0, sizeof *out);
  cover c;
  int r = cover_init(&c, an, set, q, err);
  bool holds = false;
  json_t *w = NULL;
  if (r == 0)
    r = check_once(&c, q->pattern, q->except, q->n_except, false, &holds, &w, err);
  if (r == 0 && holds) {
    out->allowed = true;
    snprintf(out->why, sizeof out->why, "every element %.200s covers is allowed", q->pattern);
  } else if (r == 0) {
    r = explain(&c, q->pattern, w, out, err);
  }
  json_decref(w);
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

static bool denied_everywhere(cover *c, const char *pattern, int *r, shk_error *err)
{
  bool holds = false;
  json_t *w = NULL;
  *r = check_once(c, pattern, NULL, 0, true, &holds, &w, err);
  json_decref(w);
  return *r == 0 && holds;
}

/* Bisection for one end of the widest denied interval around X within
 * [FROM, TO]: with DOWN the smallest start s such that s..X is denied,
 * else the largest end e such that X..e is. */
static int widest(cover *c, long from, long to, long x, bool down, long *best, shk_error *err)
{
  long a = from, b = to;
  int r = 0;
  while (a <= b) {
    long mid = a + (b - a) / 2;
    char cand[48];
    snprintf(cand, sizeof cand, "%ld-%ld", down ? mid : x, down ? x : mid);
    bool d = denied_everywhere(c, cand, &r, err);
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

/* The widest subtree around witness W (inside PATTERN) that the set
 * denies everywhere, in the pattern's own syntax; an exact path when no
 * subtree is. */
static int exclusion(cover *c, const char *pattern, const json_t *w, char **text, bool *exact, shk_error *err)
{
  char wt[512];
  witness_text(w, wt, sizeof wt);
  int r = 0;
  *exact = false;
  *text = NULL;
  switch (c->q->kind) {
  case SHK_ANALYSIS_PATH_PREFIX: {
    size_t base = strcmp(pattern, "/") ? strlen(pattern) : 0;
    for (size_t i = base + 1; wt[i - 1] && !*text; i++) {
      if (wt[i] != '/' && wt[i] != '\0')
        continue;
      char cand[512];
      snprintf(cand, sizeof cand, "%.*s", (int)i, wt);
      if (denied_everywhere(c, cand, &r, err))
        *text = strdup(cand);
      if (r < 0)
        return r;
      if (wt[i] == '\0')
        break;
    }
    if (!*text) {
      *text = strdup(wt);
      *exact = true;
    }
    break;
  }
  case SHK_ANALYSIS_HOST_PATTERN: {
    const char *h = pattern + (!strncmp(pattern, "**.", 3) ? 3 : !strncmp(pattern, "*.", 2) ? 2 : 0);
    size_t hn = strlen(h), wn = strlen(wt);
    /* Suffixes of the witness strictly longer than the pattern's host,
     * shortest first: each as "**.d", then as "*.d". */
    for (size_t start = wn > hn ? wn - hn - 1 : 0; start > 0 && !*text;) {
      size_t s = start - 1;
      while (s > 0 && wt[s - 1] != '.')
        s--;
      for (int wild = 2; wild >= 1 && !*text; wild--) {
        char cand[600];
        snprintf(cand, sizeof cand, "%s%s", wild == 2 ? "**." : "*.", wt + s);
        if (denied_everywhere(c, cand, &r, err))
          *text = strdup(cand);
        if (r < 0)
          return r;
      }
      start = s;
    }
    if (!*text)
      *text = strdup(wt);
    break;
  }
  case SHK_ANALYSIS_CIDR: {
    shk__ipaddr p, a;
    if (shk__ipaddr_parse((shk__str){ pattern, strlen(pattern) }, &p) < 0 ||
        shk__ipaddr_parse((shk__str){ wt, strlen(wt) }, &a) < 0)
      return shk__error_set(err, -EINVAL, "cannot read the address %s", wt);
    int width = a.v6 ? 128 : 32;
    for (int k = p.prefix + 1; k <= width && !*text; k++) {
      shk__ipaddr m = a;
      m.prefix = (uint8_t)k;
      for (int i = 0; i < 16; i++) {
        int bits = k - 8 * i;
        m.addr[i] &= bits >= 8 ? 0xff : bits <= 0 ? 0 : (uint8_t)(0xff << (8 - bits));
      }
      char cand[80];
      shk__ipaddr_format(&m, cand, sizeof cand);
      if (denied_everywhere(c, cand, &r, err))
        *text = strdup(cand);
      if (r < 0)
        return r;
    }
    if (!*text)
      *text = strdup(wt);
    break;
  }
  case SHK_ANALYSIS_PORT_RANGE: {
    long lo = 0, hi = 0, x = json_integer_value(w);
    parse_ports(pattern, &lo, &hi);
    /* The widest interval around x that is denied throughout: the
     * smallest start and the largest end, each by bisection (an interval
     * inside a denied one is denied). */
    long best_lo = x, best_hi = x;
    if ((r = widest(c, lo, x, x, true, &best_lo, err)) < 0 || (r = widest(c, x, hi, x, false, &best_hi, err)) < 0)
      return r;
    char cand[48];
    snprintf(cand, sizeof cand, "%ld-%ld", best_lo, best_hi);
    *text = strdup(cand);
    break;
  }
  }
  return *text ? 0 : shk__error_set(err, -ENOMEM, "out of memory");
}

int shk_analysis_narrow(shk_analysis *an, const shk_analysis_set *set, const shk_analysis_cover_query *q,
                        size_t max_except, shk_analysis_narrowing *out, shk_error *err)
{
  *out = (shk_analysis_narrowing){ 0 };
  cover c;
  int r = cover_init(&c, an, set, q, err);
  size_t n = q->n_except;
  shk_analysis_except *ex = calloc(n + max_except + 1, sizeof *ex);
  if (r == 0 && !ex)
    r = shk__error_set(err, -ENOMEM, "out of memory");
  for (size_t i = 0; r == 0 && i < n; i++)
    if (!(ex[i].text = strdup(q->except[i].text)))
      r = shk__error_set(err, -ENOMEM, "out of memory");
    else
      ex[i].exact = q->except[i].exact;
  for (size_t step = 0; r == 0; step++) {
    bool holds;
    json_t *w = NULL;
    if ((r = check_once(&c, q->pattern, ex, n, false, &holds, &w, err)) < 0)
      break;
    if (holds) {
      out->found = step > 0;
      if (step == 0) {
        out->first.allowed = true;
        snprintf(out->first.why, sizeof out->first.why, "every element %.200s covers is allowed", q->pattern);
      }
      break;
    }
    if (step == 0)
      r = explain(&c, q->pattern, w, &out->first, err);
    if (r == 0 && step == max_except) {
      json_decref(w);
      break;
    }
    char *text = NULL;
    bool exact = false;
    if (r == 0)
      r = exclusion(&c, q->pattern, w, &text, &exact, err);
    json_decref(w);
    if (r == 0) {
      ex[n].text = text;
      ex[n++].exact = exact;
    }
  }
  if (r < 0) {
    for (size_t i = 0; ex && i < n; i++)
      free((char *)ex[i].text);
    free(ex);
    cover_clear(&c);
    return r;
  }
  /* Only what was added here is the narrowing. */
  for (size_t i = 0; i < q->n_except; i++)
    free((char *)ex[i].text);
  out->n_except = n - q->n_except;
  memmove(ex, ex + q->n_except, out->n_except * sizeof *ex);
  out->except = ex;
  if (!out->found) {
    shk_analysis_cover_result first = out->first;
    shk_analysis_narrowing_clear(out);
    out->first = first;
  }
  cover_clear(&c);
  return 0;
}
