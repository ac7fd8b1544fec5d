/* SPDX-License-Identifier: Apache-2.0 */
/* Grant-time proofs about patterns: the solver session a loaded policy
 * keeps, the policy set prepared for analysis once, and the proofs already
 * made.
 *
 * Why this is safe: a proof is believed only as the analyzer gives it (each
 * counterexample is decided by the engine first), and a proof is reused
 * only for the same policy object (a reload is a new one), the same
 * request with everything but the instant equal, the same entity store and
 * the same element, at an instant inside the range it was proven for.
 * Nothing that was not proven is ever reported as allowed: a missing
 * solver, a failure or a timeout is an error the caller turns into a
 * refusal. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "common/common.h"
#include "policy/policy-internal.h"

#define DEFAULT_TIMEOUT_MS 5000
#define CACHE_SLOTS 512

typedef struct proof {
  char *key;
  uint64_t hash;
  int64_t lo, hi;          /* the instants it holds for */
} proof;

struct shk__pattern {
  pthread_mutex_t mu;
  shk_analysis_options opt;
  char *solver;
  shk_analysis *an;        /* NULL until the first question, and after a failure to start */
  shk_analysis_set *set;   /* the loaded set, prepared at the first question */
  bool set_tried;
  int set_r;               /* why the set cannot be analysed, when set_r < 0 */
  char set_why[sizeof ((shk_error *)0)->message];
  proof cache[CACHE_SLOTS];
  uint64_t hits, stored;
};

int shk__pattern_new(const shk_policy_source *src, shk__pattern **out, shk_error *err)
{
  *out = NULL;
  shk__pattern *pt = calloc(1, sizeof *pt);
  if (!pt || (src->solver && !(pt->solver = strdup(src->solver)))) {
    free(pt);
    return shk__error_set(err, -ENOMEM, "out of memory");
  }
  pthread_mutex_init(&pt->mu, NULL);
  pt->opt.solver = pt->solver;
  pt->opt.timeout_ms = src->solver_timeout_ms ? src->solver_timeout_ms : DEFAULT_TIMEOUT_MS;
  *out = pt;
  return 0;
}

void shk__pattern_free(shk__pattern *pt)
{
  if (!pt)
    return;
  shk_analysis_close(pt->an);
  shk_analysis_set_free(pt->set);
  for (size_t i = 0; i < CACHE_SLOTS; i++)
    free(pt->cache[i].key);
  pthread_mutex_destroy(&pt->mu);
  free(pt->solver);
  free(pt);
}

/* Caller holds the lock. The solver, started when it is not running: a
 * solver that was missing may have been installed since. */
static int solver(shk__pattern *pt, shk_error *err)
{
  return pt->an ? 0 : shk_analysis_open(&pt->opt, &pt->an, err);
}

/* Caller holds the lock. The loaded set, prepared once: a set the
 * analyzer refuses stays refused, with the same reason. */
static int prepared(const shk_policy *p, shk_error *err)
{
  shk__pattern *pt = p->pattern;
  if (!pt->set_tried) {
    shk_error e = { 0 };
    pt->set_r = shk_analysis_set_new(p->schema, p->set, &pt->set, &e);
    snprintf(pt->set_why, sizeof pt->set_why, "%s", e.message);
    /* Out of memory is no property of the set: try again next time. */
    pt->set_tried = pt->set_r != -ENOMEM;
  }
  if (pt->set_r < 0)
    return shk__error_set(err, pt->set_r, "the policies cannot be analysed: %s", pt->set_why);
  return solver(pt, err);
}

/* ---------------------------------------------------------------- the cache */

/* What a proof is about, as text: the request without its instant, the
 * store, and each covered field with its pattern and exceptions. NULL when
 * out of memory. */
static char *proof_key(const shk__pattern_q *q)
{
  json_t *req = json_loads(q->request, JSON_ALLOW_NUL, NULL);
  json_t *fields = json_array();
  json_object_del(json_object_get(req, "context"), "now");
  for (size_t k = 0; req && fields && k < q->n_fields; k++) {
    const shk_analysis_cover_field *f = &q->fields[k];
    json_t *ex = json_array();
    for (size_t i = 0; ex && i < f->n_except; i++)
      json_array_append_new(ex, json_pack("[s, b]", f->except[i].text, f->except[i].exact));
    json_array_append_new(fields, json_pack("[s, i, s, o]", f->field, (int)f->kind, f->pattern, ex));
  }
  json_t *all = req && fields ? json_pack("[O, s, O]", req, q->entities, fields) : NULL;
  char *key = all ? json_dumps(all, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  json_decref(all);
  json_decref(fields);
  json_decref(req);
  return key;
}

static uint64_t fnv1a(const char *s)
{
  uint64_t h = 14695981039346656037ULL;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

/* Caller holds the lock. */
static bool cache_hit(shk__pattern *pt, const char *key, uint64_t h, int64_t now)
{
  const proof *e = &pt->cache[h % CACHE_SLOTS];
  return e->key && e->hash == h && e->lo <= now && now <= e->hi && !strcmp(e->key, key);
}

/* Caller holds the lock. Takes KEY. A slot holds the latest proof that
 * hashes to it: the cache stays bounded, and a lost proof is only made
 * again. */
static void cache_store(shk__pattern *pt, char *key, uint64_t h, int64_t lo, int64_t hi)
{
  proof *e = &pt->cache[h % CACHE_SLOTS];
  free(e->key);
  *e = (proof){ key, h, lo, hi };
  pt->stored++;
}

/* ---------------------------------------------------------------- questions */

/* An instant as the analyzer writes a datetime: 2025-06-01T00:00:00.000Z. */
static const char *instant_text(int64_t ms, char *buf, size_t n)
{
  time_t secs = (time_t)(ms / 1000);
  struct tm tm;
  if (!gmtime_r(&secs, &tm))
    return "";
  snprintf(buf, n, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
           tm.tm_min, tm.tm_sec, (int)(ms % 1000));
  return buf;
}

int shk__pattern_check(const shk_policy *p, const shk__pattern_q *q, bool *allowed, shk_analysis_cover_result *res,
                       shk_error *err)
{
  shk__pattern *pt = p->pattern;
  *allowed = false;
  memset(res, 0, sizeof *res);
  if (q->n_fields == 0 || q->n_fields >= SHK_ANALYSIS_MAX_COVER)
    return shk__error_set(err, -EINVAL, "a pattern element covers one to %d fields", SHK_ANALYSIS_MAX_COVER - 1);
  char *key = proof_key(q);
  if (!key)
    return shk__error_set(err, -ENOMEM, "out of memory");
  uint64_t h = fnv1a(key);
  pthread_mutex_lock(&pt->mu);
  int r = 0;
  bool ranged = q->until_ms > q->now_ms && q->now_ms >= 0;
  if (ranged && cache_hit(pt, key, h, q->now_ms)) {
    pt->hits++;
    *allowed = true;
    goto out;
  }
  if ((r = prepared(p, err)) < 0)
    goto out;
  shk_analysis_cover_field f[SHK_ANALYSIS_MAX_COVER];
  memcpy(f, q->fields, q->n_fields * sizeof *f);
  shk_analysis_cover_query cq = { q->request, q->entities, f, q->n_fields, true };
  /* First for every instant up to the session's end, which is what lets
   * the proof be reused; a refusal there may be about a later instant
   * only, so the question is then asked again about this one. */
  if (ranged) {
    char range[48];
    snprintf(range, sizeof range, "%" PRId64 "-%" PRId64, q->now_ms, q->until_ms);
    f[q->n_fields] = (shk_analysis_cover_field){ "now", SHK_ANALYSIS_TIME_RANGE, range, NULL, 0 };
    cq.n_fields = q->n_fields + 1;
    if ((r = shk_analysis_cover(pt->an, pt->set, &cq, res, err)) < 0)
      goto out;
    if (res->allowed) {
      *allowed = true;
      cache_store(pt, key, h, q->now_ms, q->until_ms);
      key = NULL;
      goto out;
    }
    /* A counterexample at this very instant stands as it is. */
    char instant[64];
    if (!strcmp(res->witness[q->n_fields], instant_text(q->now_ms, instant, sizeof instant)))
      goto out;
    cq.n_fields = q->n_fields;
  }
  if ((r = shk_analysis_cover(pt->an, pt->set, &cq, res, err)) == 0)
    *allowed = res->allowed;
out:
  pthread_mutex_unlock(&pt->mu);
  free(key);
  return r;
}

int shk__pattern_narrow(const shk_policy *p, const shk__pattern_q *q, shk_analysis_narrowing *out, shk_error *err)
{
  shk__pattern *pt = p->pattern;
  *out = (shk_analysis_narrowing){ 0 };
  pthread_mutex_lock(&pt->mu);
  int r = prepared(p, err);
  if (r == 0) {
    shk_analysis_cover_query cq = { q->request, q->entities, q->fields, q->n_fields, true };
    r = shk_analysis_narrow(pt->an, pt->set, &cq, SHK_POLICY_MAX_EXCEPT, out, err);
  }
  pthread_mutex_unlock(&pt->mu);
  return r;
}

int shk__pattern_compare(const shk_policy *p, const shk_analysis_set *old_set, const shk_analysis_set *new_set,
                         shk_analysis_comparison *out, shk_error *err)
{
  shk__pattern *pt = p->pattern;
  *out = (shk_analysis_comparison){ 0 };
  pthread_mutex_lock(&pt->mu);
  int r = solver(pt, err);
  if (r == 0)
    r = shk_analysis_compare(pt->an, old_set, new_set, NULL, out, err);
  pthread_mutex_unlock(&pt->mu);
  return r;
}

void shk_policy_analysis_counters(const shk_policy *p, uint64_t *checks, uint64_t *starts, uint64_t *hits,
                                  uint64_t *stored)
{
  shk__pattern *pt = p->pattern;
  uint64_t c = 0, s = 0;
  pthread_mutex_lock(&pt->mu);
  if (pt->an)
    shk_analysis_counters(pt->an, &c, &s);
  if (checks)
    *checks = c;
  if (starts)
    *starts = s;
  if (hits)
    *hits = pt->hits;
  if (stored)
    *stored = pt->stored;
  pthread_mutex_unlock(&pt->mu);
}
