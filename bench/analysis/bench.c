/* SPDX-License-Identifier: Apache-2.0 */
/* The analyzer's costs, each beside a peer measured in the same run.
 *
 * usage: bench-analysis POLICY_DIR [ITERATIONS]
 *
 *   1. compare of the shipped policy sets (admin + project against itself,
 *      the worst case: every direction is proven empty; and against the
 *      example project tier), cold (a new solver process) and warm;
 *   2. one grant-time check of a pattern with a warm solver: "does the set
 *      allow every path under /home/u for write?" (refused, with a witness
 *      the engine decides) and for read (allowed), p50 and p99; the peer is
 *      the same check with a new solver process for each, and the engine
 *      deciding the one literal request, which is what the manager does
 *      today and what the check replaces;
 *   3. the same through the one decision (shk_policy_decide on the shipped
 *      policies): a pattern's first grant (a proof, warm solver), the same
 *      grant repeated (a cache hit), a refused pattern (counterexample and
 *      narrowing), beside an exact element (the engine alone).
 * The corpus coverage (4) is coverage.c's. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "shinken/cedar.h"
#include "shinken/policy.h"

static double now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The CPU time (user and system, ms) our cvc5 children have used, the
 * running ones from /proc and the ended ones from getrusage: on a shared
 * machine wall time measures the neighbours too. */
static double solver_cpu_ms(void)
{
  struct rusage ru;
  getrusage(RUSAGE_CHILDREN, &ru);
  double ended = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
                 (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
  DIR *d = opendir("/proc");
  double total = 0;
  struct dirent *e;
  long tick = sysconf(_SC_CLK_TCK);
  while (d && (e = readdir(d))) {
    char path[300], buf[1024];
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f)
      continue;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *rp = strrchr(buf, ')');
    if (!rp || !strstr(buf, "(cvc5)"))
      continue;
    int ppid;
    unsigned long ut, st;
    if (sscanf(rp + 2, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ppid, &ut, &st) == 3 &&
        ppid == getpid())
      total += (double)(ut + st) * 1000.0 / (double)tick;
  }
  if (d)
    closedir(d);
  return total + ended;
}

static int cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p)
{
  qsort(v, n, sizeof *v, cmp);
  size_t i = (size_t)(p * (double)(n - 1) + 0.5);
  return v[i];
}

static char *slurp(const char *dir, const char *name)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  char *buf = NULL;
  if (shk__read_file(path, &buf, NULL) < 0) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(1);
  }
  return buf;
}

static shk_cedar_policy_set *parse_set(const char *a, const char *b)
{
  size_t n = strlen(a) + strlen(b) + 2;
  char *t = malloc(n);
  snprintf(t, n, "%s\n%s", a, b);
  shk_cedar_policy_set *ps = NULL;
  shk_error err;
  if (shk_cedar_policy_set_parse(t, strlen(t), &ps, &err) < 0) {
    fprintf(stderr, "policies: %s\n", err.message);
    exit(1);
  }
  free(t);
  return ps;
}

static void die(const char *what, const shk_error *err)
{
  fprintf(stderr, "%s: %s\n", what, err->message);
  exit(1);
}

static const char STORE[] =
  "[{\"uid\":{\"type\":\"Shinken::Session\",\"id\":\"s1\"},\"attrs\":{\"trust_tier\":\"standard\","
  "\"expires\":{\"__extn\":{\"fn\":\"datetime\",\"arg\":\"2030-01-01T00:00:00Z\"}}},\"parents\":[]},"
  "{\"uid\":{\"type\":\"Shinken::Agent\",\"id\":\"s1\"},\"attrs\":{\"model\":\"m\","
  "\"expires\":{\"__extn\":{\"fn\":\"datetime\",\"arg\":\"2030-01-01T00:00:00Z\"}}},"
  "\"parents\":[{\"type\":\"Shinken::Session\",\"id\":\"s1\"}]},"
  "{\"uid\":{\"type\":\"Shinken::Capability\",\"id\":\"fs.scope\"},\"attrs\":{\"class\":\"fs.scope\"},\"parents\":[]}]";

static char *request(const char *access)
{
  char *r = NULL;
  if (asprintf(&r,
               "{\"principal\":{\"type\":\"Shinken::Agent\",\"id\":\"s1\"},"
               "\"action\":{\"type\":\"Shinken::Action\",\"id\":\"UseCapability\"},"
               "\"resource\":{\"type\":\"Shinken::Capability\",\"id\":\"fs.scope\"},"
               "\"context\":{\"trust_tier\":\"standard\",\"tier\":\"Auto\",\"approval_state\":\"none\","
               "\"now\":{\"__extn\":{\"fn\":\"datetime\",\"arg\":\"2025-06-01T00:00:00Z\"}},"
               "\"provenance\":\"first-party\",\"request\":{\"path\":\"/home/u\",\"access\":\"%s\","
               "\"in_exec_path\":false,\"home_path\":\"\"}}}",
               access) < 0)
    exit(1);
  return r;
}

/* Times N covers of one pattern; returns p50 and p99 in ms. */
static void time_cover(shk_analysis *an, const shk_analysis_set *set, const char *access, size_t n,
                       bool want_allowed, double *p50, double *p99, double *cpu)
{
  char *req = request(access);
  shk_analysis_cover_field f = { "request.path", SHK_ANALYSIS_PATH_PREFIX, "/home/u", NULL, 0, "request.home_path" };
  shk_analysis_cover_query q = { req, STORE, &f, 1, false };
  double *t = calloc(n, sizeof *t);
  shk_error err = { 0 };
  double cpu0 = solver_cpu_ms();
  for (size_t i = 0; i < n; i++) {
    shk_analysis_cover_result res;
    double t0 = now_ms();
    if (shk_analysis_cover(an, set, &q, &res, &err) < 0)
      die("cover", &err);
    t[i] = now_ms() - t0;
    if (res.allowed != want_allowed) {
      fprintf(stderr, "cover %s: unexpected answer: %s\n", access, res.why);
      exit(1);
    }
  }
  *cpu = (solver_cpu_ms() - cpu0) / (double)n;
  *p50 = pct(t, n, 0.5);
  *p99 = pct(t, n, 0.99);
  free(t);
  free(req);
}

/* Times N decisions of grants of SCOPE, where each @ stands for the
 * iteration (a new element each time; without @, the same one). */
static void time_decide(const shk_policy *p, shk_cap_class cls, const char *scope_fmt, size_t n,
                        shk_policy_verdict want, double *p50, double *p99)
{
  double *t = calloc(n, sizeof *t);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  int64_t start = (int64_t)ts.tv_sec * 1000, expires = start + 3600 * 1000;
  shk_policy_session s = { .id = "bench", .trust_tier = "standard", .model = "m", .expires_ms = expires };
  for (size_t i = 0; i < n; i++) {
    char json[512];
    size_t o = 0;
    for (const char *c = scope_fmt; *c && o + 24 < sizeof json; c++)
      if (*c == '@')
        o += (size_t)snprintf(json + o, sizeof json - o, "%zu", i);
      else
        json[o++] = *c;
    json[o] = '\0';
    shk_cap_scope sc;
    shk_error err;
    if (shk_cap_scope_parse(cls, json, &sc, &err) < 0)
      die(json, &err);
    clock_gettime(CLOCK_REALTIME, &ts);
    shk_policy_request r = { .kind = SHK_POLICY_GRANT, .scope = &sc, .approval = SHK_POLICY_UNASKED,
                             .now_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 };
    shk_policy_answer a;
    double t0 = now_ms();
    if (shk_policy_decide(p, &s, &r, &a, &err) < 0)
      die("decide", &err);
    t[i] = now_ms() - t0;
    if (a.verdict != want) {
      fprintf(stderr, "decide %s: %s (%s)\n", json, shk_policy_verdict_name(a.verdict), a.why);
      exit(1);
    }
    shk_cap_scope_clear(&sc);
  }
  *p50 = pct(t, n, 0.5);
  *p99 = pct(t, n, 0.99);
  free(t);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: %s POLICY_DIR [ITERATIONS]\n", argv[0]);
    return 1;
  }
  const char *dir = argv[1];
  size_t iters = argc > 2 ? (size_t)atol(argv[2]) : 200;
  char *st = slurp(dir, "schema.cedarschema"), *admin = slurp(dir, "admin.cedar");
  char *project = slurp(dir, "project.cedar"), *example = slurp(dir, "examples/session.cedar");
  shk_cedar_schema *schema = NULL;
  shk_error err = { 0 };
  if (shk_cedar_schema_parse(st, strlen(st), SHK_CEDAR_SCHEMA_TEXT, &schema, &err) < 0)
    die("schema", &err);
  shk_cedar_policy_set *shipped = parse_set(admin, project), *shipped2 = parse_set(admin, project);
  shk_cedar_policy_set *withex = parse_set(admin, example);
  shk_analysis_set *s1, *s2, *s3;
  if (shk_analysis_set_new(schema, shipped, &s1, &err) < 0 || shk_analysis_set_new(schema, shipped2, &s2, &err) < 0 ||
      shk_analysis_set_new(schema, withex, &s3, &err) < 0)
    die("prepare", &err);

  /* 1. compare */
  size_t nc = iters / 10 > 5 ? iters / 10 : 5;
  double *cold = calloc(nc, sizeof *cold), *warm = calloc(nc, sizeof *warm), *other = calloc(nc, sizeof *other);
  shk_analysis *an = NULL;
  for (size_t i = 0; i < nc; i++) {
    double t0 = now_ms();
    shk_analysis *a1;
    if (shk_analysis_open(NULL, &a1, &err) < 0)
      die("solver", &err);
    shk_analysis_comparison c;
    if (shk_analysis_compare(a1, s1, s2, NULL, &c, &err) < 0)
      die("compare", &err);
    cold[i] = now_ms() - t0;
    if (c.rel != SHK_ANALYSIS_SAME)
      die("compare", &(shk_error){ .message = "the shipped sets should be equivalent" });
    shk_analysis_comparison_clear(&c);
    shk_analysis_close(a1);
  }
  if (shk_analysis_open(NULL, &an, &err) < 0)
    die("solver", &err);
  for (size_t i = 0; i < nc; i++) {
    shk_analysis_comparison c;
    double t0 = now_ms();
    if (shk_analysis_compare(an, s1, s2, NULL, &c, &err) < 0)
      die("compare", &err);
    warm[i] = now_ms() - t0;
    shk_analysis_comparison_clear(&c);
    t0 = now_ms();
    if (shk_analysis_compare(an, s1, s3, NULL, &c, &err) < 0)
      die("compare", &err);
    other[i] = now_ms() - t0;
    shk_analysis_comparison_clear(&c);
  }
  printf("compare, shipped admin+project against itself: cold (solver started) median %.1f ms, "
         "warm median %.1f ms (target < 2000 ms)\n", pct(cold, nc, 0.5), pct(warm, nc, 0.5));
  printf("compare, admin+project against admin+example project tier: warm median %.1f ms\n", pct(other, nc, 0.5));

  /* 2. grant-time pattern checks */
  double w50, w99, r50, r99, f50, f99, wc, rc, fc;
  time_cover(an, s1, "write", 3, false, &w50, &w99, &wc); /* loads the set's encoding */
  time_cover(an, s1, "write", iters, false, &w50, &w99, &wc);
  time_cover(an, s1, "read", iters, true, &r50, &r99, &rc);
  shk_analysis_options fo = { .fresh = true };
  shk_analysis *fresh;
  if (shk_analysis_open(&fo, &fresh, &err) < 0)
    die("solver", &err);
  size_t nf = iters / 4 > 10 ? iters / 4 : 10;
  time_cover(fresh, s1, "write", nf, false, &f50, &f99, &fc);
  shk_analysis_close(fresh);
  /* The literal decision the check replaces. */
  char *req = request("write");
  shk_cedar_entities *es;
  shk_cedar_request *cr;
  if (shk_cedar_entities_parse(STORE, strlen(STORE), schema, &es, &err) < 0 ||
      shk_cedar_request_from_json(req, strlen(req), schema, true, &cr, &err) < 0)
    die("engine", &err);
  shk_cedar_response resp = { 0 };
  size_t ne = 100000;
  double t0 = now_ms();
  for (size_t i = 0; i < ne; i++)
    shk_cedar_is_authorized(shipped, es, cr, &resp);
  double lit = (now_ms() - t0) / (double)ne;
  shk_cedar_response_clear(&resp);
  printf("cover /home/u for write (refused, witness decided by the engine), warm solver: p50 %.2f ms, p99 %.2f ms "
         "(target p99 < 100 ms); solver CPU %.1f ms a check\n", w50, w99, wc);
  printf("cover /home/u for read (allowed everywhere), warm solver: p50 %.2f ms, p99 %.2f ms; solver CPU %.1f ms\n",
         r50, r99, rc);
  printf("peer: the same write check with a new solver process each time: p50 %.2f ms, p99 %.2f ms "
         "(warm is %.1fx faster at p50)\n", f50, f99, f50 / w50);
  printf("peer: the engine deciding the literal request \"/home/u\" (what the check replaces): %.4f ms "
         "(the check costs %.0fx that)\n", lit, w50 / lit);
  uint64_t checks, starts;
  shk_analysis_counters(an, &checks, &starts);
  printf("warm session: %llu checks, %llu solver process(es)\n", (unsigned long long)checks,
         (unsigned long long)starts);

  /* 3. through the one decision */
  shk_policy_source src = { dir, NULL, NULL, getuid() };
  shk_policy *pol = NULL;
  if (shk_policy_load(&src, &pol, &err) < 0)
    die("load", &err);
  double g50, g99, h50, h99, x50, x99, e50, e99, d50, d99;
  size_t nd = iters;
  /* The solver starts and the set's encoding loads at the first pattern. */
  time_decide(pol, SHK_CAP_FS_SCOPE, "{\"write\":[\"/work/warm@\"]}", 2, SHK_POLICY_ALLOW, &g50, &g99);
  uint64_t c0, c1, hits0, hits1;
  shk_policy_analysis_counters(pol, &c0, NULL, &hits0, NULL);
  time_decide(pol, SHK_CAP_FS_SCOPE, "{\"write\":[\"/work/p@\"]}", nd, SHK_POLICY_ALLOW, &g50, &g99);
  shk_policy_analysis_counters(pol, &c1, NULL, NULL, NULL);
  time_decide(pol, SHK_CAP_NET_EGRESS, "{\"domains\":[\"**.h@.npm.example\"],\"ports\":[443]}", nd,
              SHK_POLICY_ALLOW, &d50, &d99);
  time_decide(pol, SHK_CAP_FS_SCOPE, "{\"write\":[\"/work/p7\"]}", nd, SHK_POLICY_ALLOW, &h50, &h99);
  shk_policy_analysis_counters(pol, NULL, NULL, &hits1, NULL);
  size_t nr = iters / 10 > 5 ? iters / 10 : 5;
  uint64_t c2, c3;
  shk_policy_analysis_counters(pol, &c2, NULL, NULL, NULL);
  time_decide(pol, SHK_CAP_FS_SCOPE, "{\"write\":[\"/home/u@\"]}", nr, SHK_POLICY_DENY, &x50, &x99);
  shk_policy_analysis_counters(pol, &c3, NULL, NULL, NULL);
  time_decide(pol, SHK_CAP_NET_EGRESS, "{\"domains\":[\"registry.npm.example\"],\"ports\":[443]}", nd,
              SHK_POLICY_ALLOW, &e50, &e99);
  printf("decide, a new write prefix (/work/pN: a proof, warm solver): p50 %.2f ms, p99 %.2f ms (target p99 < 100 "
         "ms); %.1f solver checks each\n", g50, g99, (double)(c1 - c0) / (double)nd);
  printf("decide, a new host pattern (**.hN.npm.example:443, a proof): p50 %.2f ms, p99 %.2f ms\n", d50, d99);
  printf("decide, the same write prefix again (a cache hit): p50 %.3f ms, p99 %.3f ms (%llu hits)\n", h50, h99,
         (unsigned long long)(hits1 - hits0));
  printf("decide, a refused prefix (/home/uN: counterexample and an attempt at narrowing): p50 %.1f ms, "
         "p99 %.1f ms; %.1f solver checks each\n", x50, x99, (double)(c3 - c2) / (double)nr);
  printf("peer: decide, an exact element (registry.npm.example:443, the engine alone): p50 %.3f ms, p99 %.3f ms; "
         "a proof costs %.0fx that, a hit %.1fx\n", e50, e99, g50 / e50, h50 / e50);
  shk_policy_free(pol);
  shk_cedar_request_free(cr);
  shk_cedar_entities_free(es);
  free(req);
  shk_analysis_close(an);
  shk_analysis_set_free(s1);
  shk_analysis_set_free(s2);
  shk_analysis_set_free(s3);
  shk_cedar_policy_set_free(shipped);
  shk_cedar_policy_set_free(shipped2);
  shk_cedar_policy_set_free(withex);
  shk_cedar_schema_free(schema);
  free(cold);
  free(warm);
  free(other);
  free(st);
  free(admin);
  free(project);
  free(example);
  return 0;
}
