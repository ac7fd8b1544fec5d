/* SPDX-License-Identifier: Apache-2.0 */
/* The analyzer's queries: each property of a policy or a policy set is a
 * formula whose models are its counterexamples, decided by the solver one
 * request environment at a time. A model becomes a concrete request and
 * entity store, which the engine decides before anything is reported: the
 * analysis is believed only where the engine agrees with it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cedar/cedar-eval-internal.h"
#include "policy/analysis-internal.h"
#include "shinken/cedar.h"

#define DEFAULT_TIMEOUT_MS 10000

/* ---------------------------------------------------------------- names */

static const char *const query_names[] = {
  [SHK_ANALYSIS_NEVER_ERRORS] = "never-errors",
  [SHK_ANALYSIS_ALWAYS_MATCHES] = "always-matches",
  [SHK_ANALYSIS_NEVER_MATCHES] = "never-matches",
  [SHK_ANALYSIS_MATCHES_EQUIVALENT] = "matches-equivalent",
  [SHK_ANALYSIS_MATCHES_IMPLIES] = "matches-implies",
  [SHK_ANALYSIS_MATCHES_DISJOINT] = "matches-disjoint",
  [SHK_ANALYSIS_ALWAYS_ALLOWS] = "always-allows",
  [SHK_ANALYSIS_ALWAYS_DENIES] = "always-denies",
  [SHK_ANALYSIS_EQUIVALENT] = "equivalent",
  [SHK_ANALYSIS_IMPLIES] = "implies",
  [SHK_ANALYSIS_DISJOINT] = "disjoint",
};

const char *shk_analysis_query_name(shk_analysis_query q)
{
  return (unsigned)q < sizeof query_names / sizeof query_names[0] ? query_names[q] : "?";
}

int shk_analysis_query_parse(const char *name)
{
  for (size_t i = 0; i < sizeof query_names / sizeof query_names[0]; i++)
    if (!strcmp(name, query_names[i]))
      return (int)i;
  return -1;
}

const char *shk_analysis_relation_name(shk_analysis_relation r)
{
  switch (r) {
  case SHK_ANALYSIS_SAME: return "equivalent";
  case SHK_ANALYSIS_NARROWER: return "less permissive";
  case SHK_ANALYSIS_WIDER: return "more permissive";
  case SHK_ANALYSIS_INCOMPARABLE: return "incomparable";
  }
  return "?";
}

static bool is_policy_query(shk_analysis_query q)
{
  return q <= SHK_ANALYSIS_MATCHES_DISJOINT;
}

static bool is_pair_query(shk_analysis_query q)
{
  return q == SHK_ANALYSIS_MATCHES_EQUIVALENT || q == SHK_ANALYSIS_MATCHES_IMPLIES ||
         q == SHK_ANALYSIS_MATCHES_DISJOINT || q == SHK_ANALYSIS_EQUIVALENT ||
         q == SHK_ANALYSIS_IMPLIES || q == SHK_ANALYSIS_DISJOINT;
}

/* ---------------------------------------------------------------- the session */

/* A solver process is replaced after this many checks or encodings
 * loaded: cvc5 keeps every symbol and term it was given, so a process that
 * has served many grows and slows (measured: a grant-time check that took
 * 10 ms in a new process took 58 ms after 30 compares in the same one). */
#define RESTART_AFTER_CHECKS 1000
#define RESTART_AFTER_LOADS 8

int shk__analysis_solver(shk_analysis *an, shk_error *err)
{
  if (shk__smt_alive(an->smt) && an->checks - an->checks_at_start < RESTART_AFTER_CHECKS &&
      an->loads_since_start < RESTART_AFTER_LOADS)
    return 0;
  shk__smt_stop(an->smt);
  an->smt = NULL;
  shk__enc_free(an->loaded_enc);
  an->loaded_enc = NULL;
  an->loaded_serial = 0;
  int r = shk__smt_start(an->solver_path, an->opt.timeout_ms, &an->smt, err);
  if (r == 0) {
    an->starts++;
    an->checks_at_start = an->checks;
    an->loads_since_start = 0;
  }
  return r;
}

void shk__analysis_reset(shk_analysis *an)
{
  shk__enc_free(an->loaded_enc);
  an->loaded_enc = NULL;
  an->loaded_serial = 0;
  shk__smt_stop(an->smt);
  an->smt = NULL;
}

int shk__analysis_unload(shk_analysis *an, shk_error *err)
{
  shk__enc_free(an->loaded_enc);
  an->loaded_enc = NULL;
  an->loaded_allow = NULL;
  bool was = an->loaded_serial != 0;
  an->loaded_serial = 0;
  if (was && shk__smt_alive(an->smt))
    return shk__smt_send(an->smt, "(pop 1)\n", 8, err);
  return 0;
}

int shk_analysis_open(const shk_analysis_options *opt, shk_analysis **out, shk_error *err)
{
  *out = NULL;
  shk_analysis *an = calloc(1, sizeof *an);
  if (!an)
    return shk__error_set(err, -ENOMEM, "out of memory");
  if (opt)
    an->opt = *opt;
  if (!an->opt.timeout_ms)
    an->opt.timeout_ms = DEFAULT_TIMEOUT_MS;
  an->solver_path = strdup(an->opt.solver ? an->opt.solver : "cvc5");
  an->opt.solver = an->solver_path;
  if (!an->solver_path) {
    free(an);
    return shk__error_set(err, -ENOMEM, "out of memory");
  }
  int r = shk__analysis_solver(an, err);
  if (r < 0) {
    shk_analysis_close(an);
    return r;
  }
  *out = an;
  return 0;
}

void shk_analysis_close(shk_analysis *an)
{
  if (!an)
    return;
  shk__enc_free(an->loaded_enc);
  shk__smt_stop(an->smt);
  free(an->solver_path);
  free(an);
}

const char *shk_analysis_solver_version(const shk_analysis *an)
{
  return an && an->smt ? shk__smt_version(an->smt) : NULL;
}

void shk_analysis_counters(const shk_analysis *an, uint64_t *checks, uint64_t *starts)
{
  if (checks)
    *checks = an->checks;
  if (starts)
    *starts = an->starts;
}

int shk__analysis_send_enc(shk_analysis *an, shk__enc *enc, shk_error *err)
{
  int r;
  an->loads_since_start++;
  if ((r = shk__smt_send(an->smt, "(push 1)\n", 9, err)) < 0 ||
      (r = shk__smt_send(an->smt, enc->decl.p ? enc->decl.p : "", enc->decl.n, err)) < 0 ||
      (r = shk__smt_send(an->smt, enc->body.p ? enc->body.p : "", enc->body.n, err)) < 0)
    return r;
  return 0;
}

/* One check of GOAL at the level above what is loaded. With a sat answer
 * the goal stays asserted (for the model) until end_goal. */
static int check_goal(shk_analysis *an, const char *goal, bool *sat, shk_error *err)
{
  char head[] = "(push 1)\n(assert ";
  int r;
  if ((r = shk__smt_send(an->smt, head, sizeof head - 1, err)) < 0 ||
      (r = shk__smt_send(an->smt, goal, strlen(goal), err)) < 0 ||
      /* The marker lets a test's deliberately broken solver find the goal. */
      (r = shk__smt_send(an->smt, ") ; goal\n", 9, err)) < 0)
    return r;
  an->checks++;
  return shk__smt_check(an->smt, sat, err);
}

static int end_goal(shk_analysis *an, shk_error *err)
{
  return shk__smt_send(an->smt, "(pop 1)\n", 8, err);
}

/* ---------------------------------------------------------------- environments */

static int analysis_envs(const shk__schema *s, shk__aenv **out, size_t *n)
{
  size_t count = 0;
  for (size_t i = 0; i < s->n_actions; i++)
    if (s->actions[i].has_applies_to)
      count += s->actions[i].n_principals * s->actions[i].n_resources;
  shk__aenv *v = calloc(count ? count : 1, sizeof *v);
  if (!v)
    return -ENOMEM;
  size_t k = 0;
  for (size_t i = 0; i < s->n_actions; i++) {
    const shk__action *a = &s->actions[i];
    if (!a->has_applies_to)
      continue;
    for (size_t p = 0; p < a->n_principals; p++)
      for (size_t r = 0; r < a->n_resources; r++)
        v[k++] = (shk__aenv){ a, a->principals[p], a->resources[r] };
  }
  *out = v;
  *n = k;
  return 0;
}

static void aenv_name(shk__text *b, const shk__aenv *e)
{
  shk__text_printf(b, "principal %.*s, action %.*s::\"%.*s\", resource %.*s", Q(e->principal),
                   Q(e->action->uid.type), Q(e->action->uid.id), Q(e->resource));
}

static char *env_name(const shk__aenv *e)
{
  shk__text b = { 0 };
  aenv_name(&b, e);
  if (b.oom) {
    shk__text_free(&b);
    return NULL;
  }
  return b.p;
}

static bool str_is(shk__str s, const char *c)
{
  return s.n == strlen(c) && !memcmp(s.p, c, s.n);
}

static bool env_selected(const shk__aenv *e, const shk_analysis_scope *sc)
{
  if (!sc)
    return true;
  if (sc->principal_type && !str_is(e->principal, sc->principal_type))
    return false;
  if (sc->resource_type && !str_is(e->resource, sc->resource_type))
    return false;
  if (sc->action) {
    char full[512];
    snprintf(full, sizeof full, "%.*s::\"%.*s\"", Q(e->action->uid.type), Q(e->action->uid.id));
    if (strcmp(sc->action, full) && !str_is(e->action->uid.id, sc->action))
      return false;
  }
  return true;
}

/* ---------------------------------------------------------------- prepared sets */

static uint64_t serials;

static void analysis_policy_name(const shk_cedar_policy_set *ps, const char *id, char *buf, size_t n)
{
  if (shk_cedar_policy_annotation(ps, id, "id", buf, n) < 0)
    snprintf(buf, n, "%s", id);
}

/* Encodes every policy of the set in one environment (under the caller's
 * setjmp): what set_new does to find refusals early. */
static int trial_encode(const shk_analysis_set *set, const shk__aenv *env, shk_error *err)
{
  shk__enc *enc = NULL;
  int r = shk__enc_new(&set->schema->s, env, &enc, err);
  if (r < 0)
    return r;
  jmp_buf jb;
  enc->fail = &jb;
  if (setjmp(jb)) {
    r = enc->code;
    shk__enc_free(enc);
    return r;
  }
  shk__enc_request(enc);
  shk__enc_set(enc, set->pols, set->n, NULL, NULL);
  shk__enc_finish(enc);
  shk__enc_free(enc);
  return 0;
}

int shk_analysis_set_new(const shk_cedar_schema *schema, const shk_cedar_policy_set *ps,
                         shk_analysis_set **out, shk_error *err)
{
  *out = NULL;
  shk_cedar_validation_result vr = { 0 };
  int r = shk_cedar_validate(ps, schema, &vr);
  if (r < 0)
    return shk__error_set(err, r, "cannot validate the policies");
  if (vr.n_errors) {
    r = shk__error_set(err, -EINVAL, "policy %s does not validate against the schema: %s",
                       vr.errors[0].policy_id, vr.errors[0].message);
    shk_cedar_validation_result_clear(&vr);
    return r;
  }
  shk_analysis_set *set = calloc(1, sizeof *set);
  if (!set)
    return shk__error_set(err, -ENOMEM, "out of memory");
  set->schema = schema;
  set->ps = ps;
  set->pols = shk__policy_set_policies(ps, &set->n);
  set->serial = __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
  if (analysis_envs(&schema->s, &set->envs, &set->n_envs) < 0) {
    free(set);
    return shk__error_set(err, -ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < set->n_envs; i++) {
    /* A template is refused here, and so is anything the encoder lacks. */
    if ((r = trial_encode(set, &set->envs[i], err)) < 0) {
      shk_analysis_set_free(set);
      return r;
    }
  }
  *out = set;
  return 0;
}

void shk_analysis_set_free(shk_analysis_set *set)
{
  if (!set)
    return;
  free(set->envs);
  free(set);
}

static const shk__policy *find_policy(const shk_analysis_set *set, const char *name, size_t *idx)
{
  for (size_t i = 0; i < set->n; i++) {
    const char *id = shk_cedar_policy_id(set->ps, i);
    char ann[256];
    if (!strcmp(id, name) ||
        (shk_cedar_policy_annotation(set->ps, id, "id", ann, sizeof ann) >= 0 && !strcmp(ann, name))) {
      *idx = i;
      return set->pols[i];
    }
  }
  return NULL;
}

/* ---------------------------------------------------------------- the engine's side */

/* The policy set of one policy alone (its Cedar id becomes "policy0"). */
static int singleton(const shk_cedar_policy_set *ps, const char *id, shk_cedar_policy_set **out,
                     shk_error *err)
{
  *out = NULL;
  char *all = shk_cedar_policy_set_to_json(ps);
  /* Strings may hold NUL (Cedar's \0), in annotations too. */
  json_t *root = all ? json_loads(all, JSON_ALLOW_NUL, NULL) : NULL;
  free(all);
  json_t *one = json_object_get(json_object_get(root, "staticPolicies"), id);
  int r;
  if (!root) {
    r = shk__error_set(err, -ENOMEM, "cannot isolate policy %s: out of memory", id);
  } else if (!one) {
    r = shk__error_set(err, -EOPNOTSUPP, "policy %s is template-linked: ask about the set instead", id);
  } else {
    char *text = json_dumps(one, JSON_COMPACT);
    shk_error cerr;
    r = text ? shk_cedar_policy_set_parse_json(text, strlen(text), out, &cerr) : -ENOMEM;
    if (r < 0)
      r = shk__error_set(err, r, "cannot isolate policy %s: %s", id, r == -ENOMEM ? "out of memory" : cerr.message);
    free(text);
  }
  json_decref(root);
  return r;
}

typedef struct verdict {
  bool allow;
  size_t n_reasons, n_errors;
  char line[600];          /* "allows (permitted by X)" */
  char policy[128];        /* the first determining policy */
  char error_policy[128];  /* the first policy that errored */
} verdict;

static int engine(const shk_cedar_policy_set *ps, const shk_cedar_schema *schema, const char *request,
                  const char *entities, verdict *out, shk_error *err)
{
  memset(out, 0, sizeof *out);
  shk_cedar_entities *es = NULL;
  shk_cedar_request *req = NULL;
  shk_error cerr = { 0 };
  int r = shk_cedar_entities_parse(entities ? entities : "[]", entities ? strlen(entities) : 2, schema, &es,
                                   &cerr);
  if (r < 0)
    return shk__error_set(err, -EPROTO, "defect in the analysis: the engine refuses the counterexample's "
                          "entities: %s", cerr.message);
  r = shk_cedar_request_from_json(request, strlen(request), schema, true, &req, &cerr);
  if (r < 0) {
    shk_cedar_entities_free(es);
    return shk__error_set(err, -EPROTO, "defect in the analysis: the engine refuses the counterexample's "
                          "request: %s", cerr.message);
  }
  shk_cedar_response resp = { 0 };
  r = shk_cedar_is_authorized(ps, es, req, &resp);
  if (r == 0) {
    out->allow = resp.decision == SHK_CEDAR_ALLOW;
    out->n_reasons = resp.n_reasons;
    out->n_errors = resp.n_errors;
    if (resp.n_reasons)
      analysis_policy_name(ps, resp.reasons[0], out->policy, sizeof out->policy);
    if (out->allow)
      snprintf(out->line, sizeof out->line, "allows (permitted by %s)", out->policy);
    else if (resp.n_reasons)
      snprintf(out->line, sizeof out->line, "denies (forbidden by %s)", out->policy);
    else
      snprintf(out->line, sizeof out->line, "denies (no policy permits it)%s",
               resp.n_errors ? ", with errors" : "");
    if (resp.n_errors) {
      char name[128];
      analysis_policy_name(ps, resp.errors[0].policy_id, name, sizeof name);
      snprintf(out->error_policy, sizeof out->error_policy, "%s", name);
      size_t l = strlen(out->line);
      snprintf(out->line + l, sizeof out->line - l, "; %s errors: %.200s", name, resp.errors[0].message);
    }
  } else {
    shk__error_set(err, r, "the engine failed to decide the counterexample");
  }
  shk_cedar_response_clear(&resp);
  shk_cedar_request_free(req);
  shk_cedar_entities_free(es);
  return r;
}

int shk__analysis_decide(const shk_cedar_policy_set *ps, const shk_cedar_schema *schema,
                         const char *request, const char *entities, bool errors_deny, bool *allow,
                         bool *erred, char *why, size_t whylen, char *policy, size_t policylen,
                         shk_error *err)
{
  verdict v;
  int r = engine(ps, schema, request, entities, &v, err);
  if (r < 0)
    return r;
  /* An error stops the request when the caller decides that way (the one
   * decision does: a forbid that errored must not let a grant through). */
  bool by_error = errors_deny && v.n_errors;
  /* The error is what decides when no forbid does. */
  bool error_decides = by_error && (v.allow || !v.n_reasons);
  *allow = v.allow && !by_error;
  if (erred)
    *erred = error_decides;
  if (why)
    snprintf(why, whylen, "%s", v.line);
  if (policy)
    snprintf(policy, policylen, "%s", error_decides ? v.error_policy : v.allow || !v.n_reasons ? "" : v.policy);
  return 0;
}

/* ---------------------------------------------------------------- one question in one environment */

/* Everything encoded for one environment: the sets' allow atoms, the
 * policies' satisfaction and error atoms, the assumption. */
typedef struct envq {
  shk__enc *enc;
  const char *allow_a, *allow_b;
  const char *sat_a, *err_a, *sat_b, *err_b;
  const char *assume;
} envq;

typedef struct question {
  shk_analysis_query q;
  const shk_analysis_set *a, *b;
  const shk__policy *pa, *pb;
  const char *ida, *idb;        /* the policies' Cedar ids */
  const shk_cedar_policy_set *assume;
  shk__policy *assume_pol;
} question;

static int encode_env(const question *qu, const shk__aenv *env, bool sets, envq *out, shk_error *err)
{
  *out = (envq){ 0 };
  shk__enc *enc = NULL;
  int r = shk__enc_new(&qu->a->schema->s, env, &enc, err);
  if (r < 0)
    return r;
  jmp_buf jb;
  enc->fail = &jb;
  if (setjmp(jb)) {
    r = enc->code;
    shk__enc_free(enc);
    return r;
  }
  shk__enc_request(enc);
  if (sets) {
    out->allow_a = shk__enc_set(enc, qu->a->pols, qu->a->n, NULL, NULL);
    out->allow_b = !qu->b ? NULL : qu->b == qu->a ? out->allow_a
                                                  : shk__enc_set(enc, qu->b->pols, qu->b->n, NULL, NULL);
  } else {
    shk__enc_policy(enc, qu->pa, &out->sat_a, &out->err_a);
    if (qu->pb)
      shk__enc_policy(enc, qu->pb, &out->sat_b, &out->err_b);
  }
  out->assume = "true";
  if (qu->assume_pol) {
    const char *e;
    shk__enc_policy(enc, qu->assume_pol, &out->assume, &e);
  }
  shk__enc_finish(enc);
  out->enc = enc;
  return 0;
}

static char *dup_or_null(const char *s)
{
  return s ? strdup(s) : NULL;
}

static void example_clear(shk_analysis_example *x)
{
  if (!x)
    return;
  free(x->env);
  free(x->what);
  free(x->request);
  free(x->entities);
  free(x->decisions);
  *x = (shk_analysis_example){ 0 };
}

/* The verdicts the engine must reach on a counterexample, per query. */
static int confirm(const question *qu, const char *req, const char *ents, char *what, size_t wl,
                   char *dec, size_t dl, shk_error *err)
{
  const shk_cedar_schema *schema = qu->a->schema;
  verdict va = { 0 }, vb = { 0 };
  int r;
  bool ok;
  if (qu->assume) {
    verdict vs;
    if ((r = engine(qu->assume, schema, req, ents, &vs, err)) < 0)
      return r;
    if (!vs.allow)
      return shk__error_set(err, -EPROTO, "defect in the analysis: the counterexample does not satisfy "
                            "the assumption in the engine");
  }
  if (is_policy_query(qu->q)) {
    shk_cedar_policy_set *sa = NULL, *sb = NULL;
    if ((r = singleton(qu->a->ps, qu->ida, &sa, err)) < 0)
      return r;
    if (qu->pb && (r = singleton(qu->b->ps, qu->idb, &sb, err)) < 0) {
      shk_cedar_policy_set_free(sa);
      return r;
    }
    r = engine(sa, schema, req, ents, &va, err);
    if (r == 0 && sb)
      r = engine(sb, schema, req, ents, &vb, err);
    shk_cedar_policy_set_free(sa);
    shk_cedar_policy_set_free(sb);
    if (r < 0)
      return r;
    bool ma = va.n_reasons > 0, mb = vb.n_reasons > 0;
    char na[128], nb[128];
    analysis_policy_name(qu->a->ps, qu->ida, na, sizeof na);
    if (qu->pb)
      analysis_policy_name(qu->b->ps, qu->idb, nb, sizeof nb);
    if (qu->q == SHK_ANALYSIS_NEVER_ERRORS) {
      ok = va.n_errors > 0;
      snprintf(what, wl, "%s errors", na);
    } else if (qu->q == SHK_ANALYSIS_ALWAYS_MATCHES) {
      ok = !ma;
      snprintf(what, wl, "%s does not match", na);
    } else if (qu->q == SHK_ANALYSIS_NEVER_MATCHES) {
      ok = ma;
      snprintf(what, wl, "%s matches", na);
    } else if (qu->q == SHK_ANALYSIS_MATCHES_EQUIVALENT) {
      ok = ma != mb;
      snprintf(what, wl, "%s %s and %s %s", na, ma ? "matches" : "does not match", nb,
               mb ? "matches" : "does not match");
    } else if (qu->q == SHK_ANALYSIS_MATCHES_IMPLIES) {
      ok = ma && !mb;
      snprintf(what, wl, "%s matches and %s does not", na, nb);
    } else {
      ok = ma && mb;
      snprintf(what, wl, "both %s and %s match", na, nb);
    }
    snprintf(dec, dl, "%s alone %s%s%s%s", na, va.line, qu->pb ? "; " : "", qu->pb ? nb : "",
             qu->pb ? " alone " : "");
    if (qu->pb) {
      size_t l = strlen(dec);
      snprintf(dec + l, dl - l, "%s", vb.line);
    }
  } else {
    if ((r = engine(qu->a->ps, schema, req, ents, &va, err)) < 0)
      return r;
    if (qu->b && (r = engine(qu->b->ps, schema, req, ents, &vb, err)) < 0)
      return r;
    if (qu->q == SHK_ANALYSIS_ALWAYS_ALLOWS) {
      ok = !va.allow;
      snprintf(what, wl, "the set denies it");
    } else if (qu->q == SHK_ANALYSIS_ALWAYS_DENIES) {
      ok = va.allow;
      snprintf(what, wl, "the set allows it");
    } else if (qu->q == SHK_ANALYSIS_EQUIVALENT) {
      ok = va.allow != vb.allow;
      snprintf(what, wl, "the first set %s it and the second %s it", va.allow ? "allows" : "denies",
               vb.allow ? "allows" : "denies");
    } else if (qu->q == SHK_ANALYSIS_IMPLIES) {
      ok = va.allow && !vb.allow;
      snprintf(what, wl, "the first set allows it and the second denies it");
    } else {
      ok = va.allow && vb.allow;
      snprintf(what, wl, "both sets allow it");
    }
    if (qu->b)
      snprintf(dec, dl, "first set %s; second set %s", va.line, vb.line);
    else
      snprintf(dec, dl, "the set %s", va.line);
  }
  if (!ok)
    return shk__error_set(err, -EPROTO, "defect in the analysis: the engine decides the counterexample "
                          "otherwise (%s): %s", what, dec);
  return 0;
}

static int make_example(const shk__aenv *env, const shk__cex *cx, const char *what, const char *dec,
                        shk_analysis_example *x, shk_error *err)
{
  *x = (shk_analysis_example){ 0 };
  x->env = env_name(env);
  x->what = dup_or_null(what);
  x->request = json_dumps(cx->request, JSON_COMPACT);
  x->entities = json_dumps(cx->entities, JSON_COMPACT);
  x->decisions = dup_or_null(dec);
  if (!x->env || !x->what || !x->request || !x->entities || !x->decisions) {
    example_clear(x);
    return shk__error_set(err, -ENOMEM, "out of memory");
  }
  return 0;
}

/* Checks GOAL in an encoded environment; on sat, reads the model, has the
 * engine confirm it (CONFIRM) and fills *x. Returns 1 when a
 * counterexample was found, 0 when the goal is unsatisfiable. */
typedef int (*confirm_fn)(const void *ctx, const char *req, const char *ents, char *what, size_t wl,
                          char *dec, size_t dl, shk_error *err);

static int find_example(shk_analysis *an, const envq *eq, const shk__aenv *env, const char *goal,
                        confirm_fn fn, const void *ctx, shk_analysis_example *x, shk_error *err)
{
  bool sat;
  int r = check_goal(an, goal, &sat, err);
  if (r < 0)
    return r;
  if (!sat)
    return end_goal(an, err);
  shk__cex cx;
  if ((r = shk__model_extract(eq->enc, an->smt, &cx, err)) < 0)
    return r;
  char *req = json_dumps(cx.request, JSON_COMPACT), *ents = json_dumps(cx.entities, JSON_COMPACT);
  char what[400], dec[1400];
  r = req && ents ? fn(ctx, req, ents, what, sizeof what, dec, sizeof dec, err)
                  : shk__error_set(err, -ENOMEM, "out of memory");
  free(req);
  free(ents);
  if (r == 0)
    r = make_example(env, &cx, what, dec, x, err);
  shk__cex_clear(&cx);
  if (r == 0)
    r = end_goal(an, err);
  return r < 0 ? r : 1;
}

static int confirm_question(const void *ctx, const char *req, const char *ents, char *what, size_t wl,
                            char *dec, size_t dl, shk_error *err)
{
  return confirm(ctx, req, ents, what, wl, dec, dl, err);
}

/* Loads an environment's encoding at level 1, replacing what was there. */
static int load_env(shk_analysis *an, shk__enc *enc, shk_error *err)
{
  int r;
  if (an->opt.fresh) {
    shk__smt_stop(an->smt);
    an->smt = NULL;
  }
  if ((r = shk__analysis_solver(an, err)) < 0 || (r = shk__analysis_unload(an, err)) < 0)
    return r;
  if ((r = shk__analysis_send_enc(an, enc, err)) < 0)
    return r;
  an->loaded_serial = (uint64_t)-1; /* something is loaded, belonging to no set */
  return 0;
}

static const char *goal_of(shk__enc *enc, const question *qu, const envq *eq)
{
  const char *g;
  switch (qu->q) {
  case SHK_ANALYSIS_NEVER_ERRORS: g = eq->err_a; break;
  case SHK_ANALYSIS_ALWAYS_MATCHES: g = shk__enc_str(enc, "(not %s)", eq->sat_a); break;
  case SHK_ANALYSIS_NEVER_MATCHES: g = eq->sat_a; break;
  case SHK_ANALYSIS_MATCHES_EQUIVALENT: g = shk__enc_str(enc, "(not (= %s %s))", eq->sat_a, eq->sat_b); break;
  case SHK_ANALYSIS_MATCHES_IMPLIES: g = shk__enc_str(enc, "(and %s (not %s))", eq->sat_a, eq->sat_b); break;
  case SHK_ANALYSIS_MATCHES_DISJOINT: g = shk__enc_str(enc, "(and %s %s)", eq->sat_a, eq->sat_b); break;
  case SHK_ANALYSIS_ALWAYS_ALLOWS: g = shk__enc_str(enc, "(not %s)", eq->allow_a); break;
  case SHK_ANALYSIS_ALWAYS_DENIES: g = eq->allow_a; break;
  case SHK_ANALYSIS_EQUIVALENT: g = shk__enc_str(enc, "(not (= %s %s))", eq->allow_a, eq->allow_b); break;
  case SHK_ANALYSIS_IMPLIES: g = shk__enc_str(enc, "(and %s (not %s))", eq->allow_a, eq->allow_b); break;
  case SHK_ANALYSIS_DISJOINT: g = shk__enc_str(enc, "(and %s %s)", eq->allow_a, eq->allow_b); break;
  default: g = "false"; break;
  }
  return shk__enc_str(enc, "(and %s %s)", eq->assume, g);
}

/* The assumption as a policy: permit when { EXPR }, type-checked against
 * the schema like any policy. */
static int parse_assume(const shk_analysis_set *set, const shk_analysis_scope *scope, shk_cedar_policy_set **out,
                        shk__policy **pol, shk_error *err)
{
  *out = NULL;
  const char *expr = scope ? scope->assume : NULL;
  if (!expr)
    return 0;
  shk__text t = { 0 };
  shk__text_puts(&t, "permit (principal, ");
  /* Restricted to one action, the assumption is typed in its
   * environments only (it may read that action's context). */
  const shk__action *act = NULL;
  for (size_t i = 0; scope->action && i < set->n_envs && !act; i++)
    if (env_selected(&set->envs[i], &(shk_analysis_scope){ .action = scope->action }))
      act = set->envs[i].action;
  if (scope->action && !act)
    return shk__error_set(err, -ENOENT, "no action %s applies to any request of the schema", scope->action);
  if (act) {
    shk__text_printf(&t, "action == %.*s::\"", Q(act->uid.type));
    for (size_t i = 0; i < act->uid.id.n; i++) {
      unsigned char c = (unsigned char)act->uid.id.p[i];
      if (c == '"' || c == '\\')
        shk__text_printf(&t, "\\%c", c);
      else if (c < 0x20 || c == 0x7f)
        shk__text_printf(&t, "\\u{%x}", c);
      else
        shk__text_put(&t, (const char *)&c, 1);
    }
    shk__text_puts(&t, "\"");
  } else {
    shk__text_puts(&t, "action");
  }
  shk__text_printf(&t, ", resource) when {\n%s\n};\n", expr);
  if (t.oom) {
    shk__text_free(&t);
    return shk__error_set(err, -ENOMEM, "out of memory");
  }
  shk_error cerr = { 0 };
  int r = shk_cedar_policy_set_parse(t.p, t.n, out, &cerr);
  shk__text_free(&t);
  if (r < 0)
    return shk__error_set(err, -EINVAL, "the assumption is not a Cedar expression: %s", cerr.message);
  size_t n;
  shk__policy *const *pols = shk__policy_set_policies(*out, &n);
  if (n != 1) {
    shk_cedar_policy_set_free(*out);
    *out = NULL;
    return shk__error_set(err, -EINVAL, "the assumption must be one expression");
  }
  shk_cedar_validation_result vr = { 0 };
  r = shk_cedar_validate(*out, set->schema, &vr);
  if (r == 0 && vr.n_errors)
    r = shk__error_set(err, -EINVAL, "the assumption does not type-check against the schema: %s",
                       vr.errors[0].message);
  shk_cedar_validation_result_clear(&vr);
  if (r < 0) {
    shk_cedar_policy_set_free(*out);
    *out = NULL;
    return r;
  }
  *pol = pols[0];
  return 0;
}

void shk_analysis_result_clear(shk_analysis_result *r)
{
  if (!r)
    return;
  for (size_t i = 0; i < r->n_examples; i++)
    example_clear(&r->examples[i]);
  free(r->examples);
  *r = (shk_analysis_result){ 0 };
}

int shk_analysis_check(shk_analysis *an, shk_analysis_query query, const shk_analysis_set *a,
                       const char *policy_a, const shk_analysis_set *b, const char *policy_b,
                       const shk_analysis_scope *scope, shk_analysis_result *out, shk_error *err)
{
  *out = (shk_analysis_result){ 0 };
  if ((unsigned)query > SHK_ANALYSIS_DISJOINT)
    return shk__error_set(err, -EINVAL, "unknown query");
  question qu = { .q = query, .a = a, .b = b };
  if (is_pair_query(query) && !b)
    qu.b = b = a;
  if (b && b->schema != a->schema)
    return shk__error_set(err, -EINVAL, "the two sets are prepared against different schemas");
  if (!is_pair_query(query))
    qu.b = NULL;
  size_t ia, ib;
  if (is_policy_query(query)) {
    if (!policy_a || !(qu.pa = find_policy(a, policy_a, &ia)))
      return shk__error_set(err, -ENOENT, "no policy %s in the set", policy_a ? policy_a : "(none named)");
    qu.ida = shk_cedar_policy_id(a->ps, ia);
    if (qu.b) {
      if (!policy_b || !(qu.pb = find_policy(qu.b, policy_b, &ib)))
        return shk__error_set(err, -ENOENT, "no policy %s in the second set",
                              policy_b ? policy_b : "(none named)");
      qu.idb = shk_cedar_policy_id(qu.b->ps, ib);
    }
  }
  int r = parse_assume(a, scope, (shk_cedar_policy_set **)&qu.assume,
                       &qu.assume_pol, err);
  if (r < 0)
    return r;
  out->holds = true;
  for (size_t i = 0; i < a->n_envs && r >= 0; i++) {
    const shk__aenv *env = &a->envs[i];
    if (!env_selected(env, scope))
      continue;
    out->n_envs++;
    envq eq;
    if ((r = encode_env(&qu, env, !is_policy_query(query), &eq, err)) < 0)
      break;
    jmp_buf jb;
    eq.enc->fail = &jb;
    const char *goal = NULL;
    if (setjmp(jb) == 0)
      goal = goal_of(eq.enc, &qu, &eq);
    else
      r = -ENOMEM;
    if (r == 0)
      r = load_env(an, eq.enc, err);
    shk_analysis_example x;
    if (r == 0 && (r = find_example(an, &eq, env, goal, confirm_question, &qu, &x, err)) == 1) {
      shk_analysis_example *v = realloc(out->examples, (out->n_examples + 1) * sizeof *v);
      if (!v) {
        example_clear(&x);
        r = shk__error_set(err, -ENOMEM, "out of memory");
      } else {
        out->examples = v;
        out->examples[out->n_examples++] = x;
        out->holds = false;
        r = 0;
      }
    }
    shk__enc_free(eq.enc);
    if (r >= 0)
      r = shk__analysis_unload(an, err);
  }
  shk_cedar_policy_set_free((shk_cedar_policy_set *)qu.assume);
  if (r == 0 && out->n_envs == 0)
    r = shk__error_set(err, -ENOENT, "no request environment of the schema is selected");
  if (r < 0) {
    shk__analysis_reset(an);
    shk_analysis_result_clear(out);
    return r;
  }
  return 0;
}

/* ---------------------------------------------------------------- compare */

typedef struct cmp_ctx {
  const question *qu;
  bool wider;              /* the example must be one NEW allows and OLD denies */
} cmp_ctx;

static int confirm_cmp(const void *ctx, const char *req, const char *ents, char *what, size_t wl,
                       char *dec, size_t dl, shk_error *err)
{
  const cmp_ctx *c = ctx;
  const question *qu = c->qu;
  verdict vo, vn;
  int r;
  if (qu->assume) {
    verdict vs;
    if ((r = engine(qu->assume, qu->a->schema, req, ents, &vs, err)) < 0)
      return r;
    if (!vs.allow)
      return shk__error_set(err, -EPROTO, "defect in the analysis: the counterexample does not satisfy "
                            "the assumption in the engine");
  }
  if ((r = engine(qu->a->ps, qu->a->schema, req, ents, &vo, err)) < 0 ||
      (r = engine(qu->b->ps, qu->a->schema, req, ents, &vn, err)) < 0)
    return r;
  snprintf(what, wl, c->wider ? "NEW allows it and OLD denies it" : "OLD allows it and NEW denies it");
  snprintf(dec, dl, "OLD %s; NEW %s", vo.line, vn.line);
  if (c->wider ? !(vn.allow && !vo.allow) : !(vo.allow && !vn.allow))
    return shk__error_set(err, -EPROTO, "defect in the analysis: the engine decides the counterexample "
                          "otherwise (%s): %s", what, dec);
  return 0;
}

void shk_analysis_comparison_clear(shk_analysis_comparison *c)
{
  if (!c)
    return;
  for (size_t i = 0; i < c->n_envs; i++) {
    free(c->envs[i].env);
    example_clear(c->envs[i].wider);
    example_clear(c->envs[i].narrower);
    free(c->envs[i].wider);
    free(c->envs[i].narrower);
  }
  free(c->envs);
  *c = (shk_analysis_comparison){ 0 };
}

int shk_analysis_compare(shk_analysis *an, const shk_analysis_set *old_set,
                         const shk_analysis_set *new_set, const shk_analysis_scope *scope,
                         shk_analysis_comparison *out, shk_error *err)
{
  *out = (shk_analysis_comparison){ 0 };
  if (old_set->schema != new_set->schema)
    return shk__error_set(err, -EINVAL, "the two sets are prepared against different schemas");
  question qu = { .q = SHK_ANALYSIS_EQUIVALENT, .a = old_set, .b = new_set };
  int r = parse_assume(old_set, scope, (shk_cedar_policy_set **)&qu.assume,
                       &qu.assume_pol, err);
  if (r < 0)
    return r;
  out->envs = calloc(old_set->n_envs ? old_set->n_envs : 1, sizeof *out->envs);
  if (!out->envs)
    r = shk__error_set(err, -ENOMEM, "out of memory");
  bool any_wider = false, any_narrower = false;
  for (size_t i = 0; r >= 0 && i < old_set->n_envs; i++) {
    const shk__aenv *env = &old_set->envs[i];
    if (!env_selected(env, scope))
      continue;
    shk_analysis_env_comparison *ec = &out->envs[out->n_envs++];
    if (!(ec->env = env_name(env))) {
      r = shk__error_set(err, -ENOMEM, "out of memory");
      break;
    }
    envq eq;
    if ((r = encode_env(&qu, env, true, &eq, err)) < 0)
      break;
    jmp_buf jb;
    eq.enc->fail = &jb;
    const char *goals[2] = { NULL, NULL };
    if (setjmp(jb) == 0) {
      goals[0] = shk__enc_str(eq.enc, "(and %s %s (not %s))", eq.assume, eq.allow_b, eq.allow_a);
      goals[1] = shk__enc_str(eq.enc, "(and %s %s (not %s))", eq.assume, eq.allow_a, eq.allow_b);
    } else {
      r = -ENOMEM;
    }
    if (r == 0)
      r = load_env(an, eq.enc, err);
    for (int d = 0; d < 2 && r >= 0; d++) {
      cmp_ctx c = { &qu, d == 0 };
      shk_analysis_example x;
      r = find_example(an, &eq, env, goals[d], confirm_cmp, &c, &x, err);
      if (r == 1) {
        shk_analysis_example **slot = d == 0 ? &ec->wider : &ec->narrower;
        *slot = malloc(sizeof **slot);
        if (!*slot) {
          example_clear(&x);
          r = shk__error_set(err, -ENOMEM, "out of memory");
        } else {
          **slot = x;
          r = 0;
        }
      }
    }
    shk__enc_free(eq.enc);
    if (r >= 0)
      r = shk__analysis_unload(an, err);
    ec->rel = ec->wider && ec->narrower ? SHK_ANALYSIS_INCOMPARABLE
            : ec->wider                 ? SHK_ANALYSIS_WIDER
            : ec->narrower              ? SHK_ANALYSIS_NARROWER
                                        : SHK_ANALYSIS_SAME;
    any_wider = any_wider || ec->wider;
    any_narrower = any_narrower || ec->narrower;
  }
  shk_cedar_policy_set_free((shk_cedar_policy_set *)qu.assume);
  if (r == 0 && out->n_envs == 0)
    r = shk__error_set(err, -ENOENT, "no request environment of the schema is selected");
  if (r < 0) {
    shk__analysis_reset(an);
    shk_analysis_comparison_clear(out);
    return r;
  }
  out->rel = any_wider && any_narrower ? SHK_ANALYSIS_INCOMPARABLE
           : any_wider                 ? SHK_ANALYSIS_WIDER
           : any_narrower              ? SHK_ANALYSIS_NARROWER
                                       : SHK_ANALYSIS_SAME;
  return 0;
}
