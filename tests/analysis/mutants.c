/* SPDX-License-Identifier: Apache-2.0 */
/* A corpus of policy-set pairs with known relations, answered by compare.
 *
 * usage: test-analysis-mutants [--sets N] [--seed S] [--samples K] [--out FILE]
 *
 * Hand-written pairs have an exact expected relation. Generated sets (N,
 * from seed S) each get mutants whose relation to the original is known
 * by construction:
 *   - dropping a `when` conjunct of a permit widens (or changes nothing),
 *   - dropping a conjunct of a forbid, or adding a forbid, narrows (or
 *     changes nothing),
 *   - reordering the policies, or swapping the operands of &&, is
 *     equivalent.
 * Every answer must be one the construction allows. Each counterexample
 * compare returns has already been decided by Shinken's engine (the API
 * refuses to return one it disagrees with); each is also written to FILE
 * (JSON lines) for the official engine to decide (wasm-check.js). Each
 * direction compare reports as holding (no request widens, or none
 * narrows) is cross-checked with K random requests and stores from the
 * same environments (10000 by default), decided by the engine, none of
 * which may be a witness. never-errors is asked of every generated policy
 * and cross-checked the same way. Exits 1 on any wrong answer. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shinken/cedar.h"
#include "shinken/policy.h"

static const char SCHEMA[] =
  "entity Group in [Group];\n"
  "entity User in [Group] = { name: String, level: Long, dept?: String, tags: Set<String> };\n"
  "entity Doc = { owner: User, path: String, size: Long, created: datetime };\n"
  "action read, write appliesTo { principal: [User], resource: [Doc],\n"
  "  context: { ip: ipaddr, now: datetime, mfa: Bool, label?: String } };\n";

static unsigned failures;

#define FAIL(...) (fprintf(stderr, "FAIL: " __VA_ARGS__), fputc('\n', stderr), failures++)

/* ---------------------------------------------------------------- random */

static uint64_t rng_state;

static uint64_t rnd(void)
{
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static unsigned pick(unsigned n)
{
  return (unsigned)(rnd() % n);
}

#define ONE_OF(arr) (arr[pick(sizeof arr / sizeof arr[0])])

/* ---------------------------------------------------------------- policies */

static const char *const ATOMS[] = {
  "principal.level > 5",
  "principal.level > -1",
  "resource.size < 100",
  "principal.name == \"alice\"",
  "principal.name == \"bob\"",
  "resource.path like \"/home/*\"",
  "resource.path like \"*/.ssh/*\"",
  "resource.path like \"*secret*\"",
  "principal has dept && principal.dept == \"eng\"",
  "principal in Group::\"g1\"",
  "principal in Group::\"g2\"",
  "resource.owner == principal",
  "resource.owner in Group::\"g1\"",
  "context.mfa",
  "context.ip.isInRange(ip(\"10.0.0.0/8\"))",
  "context.ip.isLoopback()",
  "context.now < datetime(\"2025-01-01\")",
  "resource.created < context.now",
  "context has label && context.label like \"*secret*\"",
  "principal.tags.contains(\"admin\")",
  "principal.level + resource.size > 100",
  "principal.level * 2 > resource.size",
  "!(principal.level == 0)",
  "context.now.durationSince(resource.created) > duration(\"1d\")",
  "if context.mfa then principal.level > 1 else principal.level > 10",
};
#define N_ATOMS (sizeof ATOMS / sizeof ATOMS[0])

typedef struct pol {
  bool forbid;
  int action;          /* 0 any, 1 read, 2 write */
  int principal;       /* 0 any, 1 in g1, 2 == alice */
  unsigned conj[4];
  size_t n_conj;
  int unless;          /* -1 none */
} pol;

typedef struct pset {
  pol p[8];
  size_t n;
} pset;

static void pol_text(const pol *p, char *buf, size_t n)
{
  static const char *const act[] = { "action", "action == Action::\"read\"", "action == Action::\"write\"" };
  static const char *const pr[] = { "principal", "principal in Group::\"g1\"", "principal == User::\"alice\"" };
  size_t l = (size_t)snprintf(buf, n, "%s(%s, %s, resource)", p->forbid ? "forbid" : "permit", pr[p->principal],
                              act[p->action]);
  if (p->n_conj) {
    l += (size_t)snprintf(buf + l, n - l, " when { ");
    for (size_t i = 0; i < p->n_conj; i++)
      l += (size_t)snprintf(buf + l, n - l, "%s(%s)", i ? " && " : "", ATOMS[p->conj[i]]);
    l += (size_t)snprintf(buf + l, n - l, " }");
  }
  if (p->unless >= 0)
    l += (size_t)snprintf(buf + l, n - l, " unless { %s }", ATOMS[p->unless]);
  snprintf(buf + l, n - l, ";\n");
}

static char *set_text(const pset *s)
{
  size_t cap = 8192;
  char *t = malloc(cap);
  t[0] = '\0';
  for (size_t i = 0; i < s->n; i++) {
    char b[1024];
    pol_text(&s->p[i], b, sizeof b);
    strcat(t, b);
  }
  return t;
}

static pol random_pol(bool forbid)
{
  pol p = { .forbid = forbid, .action = (int)pick(3), .principal = pick(4) == 0 ? (int)pick(3) : 0, .unless = -1 };
  p.n_conj = 1 + pick(3);
  for (size_t i = 0; i < p.n_conj; i++)
    p.conj[i] = pick(N_ATOMS);
  if (pick(5) == 0)
    p.unless = (int)pick(N_ATOMS);
  return p;
}

static pset random_set(void)
{
  pset s = { .n = 1 + pick(4) };
  for (size_t i = 0; i < s.n; i++)
    s.p[i] = random_pol(i > 0 && pick(3) == 0);
  return s;
}

/* ---------------------------------------------------------------- random requests and stores */

static const char *const NAMES[] = { "alice", "bob", "x" };
static const char *const PATHS[] = { "/home/u/a", "/home/u/.ssh/id", "/tmp/secret", "/etc/x", "" };
static const int64_t LONGS[] = { -1, 0, 1, 2, 5, 6, 11, 50, 99, 100, 101, INT64_MAX, INT64_MIN };
static const char *const TIMES[] = { "2024-06-01", "2024-12-31T23:59:59Z", "2025-01-01", "2025-01-02",
                                     "1970-01-01", "2025-06-01T12:00:00Z" };
static const char *const IPS[] = { "10.1.2.3", "192.168.1.1", "127.0.0.1", "10.0.0.0/8", "::1", "8.8.8.8" };

static json_t *extn(const char *fn, const char *arg)
{
  return json_pack("{s:{s:s, s:s}}", "__extn", "fn", fn, "arg", arg);
}

static json_t *uid(const char *t, const char *id)
{
  return json_pack("{s:s, s:s}", "type", t, "id", id);
}

static char *random_store(void)
{
  json_t *a = json_array();
  const char *groups[] = { "g1", "g2", "g3" };
  for (int i = 0; i < 3; i++) {
    json_t *par = json_array();
    for (int j = i + 1; j < 3; j++)
      if (pick(3) == 0)
        json_array_append_new(par, uid("Group", groups[j]));
    json_array_append_new(a, json_pack("{s:o, s:{}, s:o}", "uid", uid("Group", groups[i]), "attrs", "parents", par));
  }
  const char *users[] = { "alice", "bob", "carol" };
  for (int i = 0; i < 3; i++) {
    if (pick(8) == 0)
      continue; /* an entity the store lacks */
    json_t *par = json_array();
    for (int j = 0; j < 3; j++)
      if (pick(2) == 0)
        json_array_append_new(par, uid("Group", groups[j]));
    json_t *tags = json_array();
    if (pick(2))
      json_array_append_new(tags, json_string("admin"));
    if (pick(2))
      json_array_append_new(tags, json_string("dev"));
    json_t *attrs = json_pack("{s:s, s:I, s:o}", "name", ONE_OF(NAMES), "level", (json_int_t)ONE_OF(LONGS), "tags", tags);
    if (pick(2))
      json_object_set_new(attrs, "dept", json_string(pick(2) ? "eng" : "ops"));
    json_array_append_new(a, json_pack("{s:o, s:o, s:o}", "uid", uid("User", users[i]), "attrs", attrs, "parents", par));
  }
  const char *docs[] = { "d1", "d2" };
  const char *owners[] = { "alice", "bob", "carol", "zed" };
  for (int i = 0; i < 2; i++) {
    if (pick(8) == 0)
      continue;
    json_t *attrs = json_pack("{s:{s:o}, s:s, s:I, s:o}", "owner", "__entity", uid("User", ONE_OF(owners)), "path",
                              ONE_OF(PATHS), "size", (json_int_t)ONE_OF(LONGS), "created", extn("datetime", ONE_OF(TIMES)));
    json_array_append_new(a, json_pack("{s:o, s:o, s:[]}", "uid", uid("Doc", docs[i]), "attrs", attrs, "parents"));
  }
  char *s = json_dumps(a, JSON_COMPACT);
  json_decref(a);
  return s;
}

static char *random_request(const char *action)
{
  const char *ps[] = { "alice", "bob", "carol", "ghost" };
  const char *rs[] = { "d1", "d2", "gone" };
  json_t *ctx = json_pack("{s:o, s:o, s:b}", "ip", extn("ip", ONE_OF(IPS)), "now", extn("datetime", ONE_OF(TIMES)),
                          "mfa", (int)pick(2));
  if (pick(2))
    json_object_set_new(ctx, "label", json_string(pick(2) ? "top secret" : "public"));
  json_t *q = json_pack("{s:o, s:o, s:o, s:o}", "principal", uid("User", ONE_OF(ps)), "action", uid("Action", action),
                        "resource", uid("Doc", ONE_OF(rs)), "context", ctx);
  char *s = json_dumps(q, JSON_COMPACT);
  json_decref(q);
  return s;
}

/* K random (store, request) pairs, parsed once, for every mutant of a set. */
typedef struct samples {
  shk_cedar_entities **stores;
  shk_cedar_request **reqs;
  size_t *store_of;
  size_t n_stores, n;
} samples;

static void samples_make(samples *sm, const shk_cedar_schema *schema, size_t k)
{
  size_t per = 100;
  sm->n_stores = (k + per - 1) / per;
  sm->stores = calloc(sm->n_stores, sizeof *sm->stores);
  sm->reqs = calloc(k, sizeof *sm->reqs);
  sm->store_of = calloc(k, sizeof *sm->store_of);
  shk_error err;
  for (size_t i = 0; i < sm->n_stores; i++) {
    char *s = random_store();
    if (shk_cedar_entities_parse(s, strlen(s), schema, &sm->stores[i], &err) < 0)
      FAIL("a random store does not parse: %s", err.message);
    free(s);
  }
  for (size_t i = 0; i < k; i++) {
    char *r = random_request(pick(2) ? "read" : "write");
    if (shk_cedar_request_from_json(r, strlen(r), schema, true, &sm->reqs[i], &err) < 0)
      FAIL("a random request does not parse: %s", err.message);
    free(r);
    sm->store_of[i] = i / per;
  }
  sm->n = k;
}

static void samples_free(samples *sm)
{
  for (size_t i = 0; i < sm->n_stores; i++)
    shk_cedar_entities_free(sm->stores[i]);
  for (size_t i = 0; i < sm->n; i++)
    shk_cedar_request_free(sm->reqs[i]);
  free(sm->stores);
  free(sm->reqs);
  free(sm->store_of);
}

static bool allows(const shk_cedar_policy_set *ps, const shk_cedar_entities *es, const shk_cedar_request *r,
                   shk_cedar_response *resp, size_t *n_errors)
{
  if (shk_cedar_is_authorized(ps, es, r, resp) < 0)
    FAIL("the engine failed");
  if (n_errors)
    *n_errors = resp->n_errors;
  return resp->decision == SHK_CEDAR_ALLOW;
}

/* A sample where NEW allows and OLD denies (wider) or the other way. */
static long find_witness(const samples *sm, const shk_cedar_policy_set *old_ps, const shk_cedar_policy_set *new_ps,
                         bool wider)
{
  shk_cedar_response a = { 0 }, b = { 0 };
  long hit = -1;
  for (size_t i = 0; i < sm->n && hit < 0; i++) {
    const shk_cedar_entities *es = sm->stores[sm->store_of[i]];
    bool o = allows(old_ps, es, sm->reqs[i], &a, NULL), n = allows(new_ps, es, sm->reqs[i], &b, NULL);
    if (wider ? (n && !o) : (o && !n))
      hit = (long)i;
  }
  shk_cedar_response_clear(&a);
  shk_cedar_response_clear(&b);
  return hit;
}

/* ---------------------------------------------------------------- the official engine's file */

static FILE *out;

static void record(const char *what, const char *a_name, const char *a_text, const char *a_expect,
                   const char *b_name, const char *b_text, const char *b_expect, const shk_analysis_example *x)
{
  if (!out)
    return;
  json_t *pols = json_pack("{s:s}", a_name, a_text), *expect = json_pack("{s:s}", a_name, a_expect);
  if (b_name) {
    json_object_set_new(pols, b_name, json_string(b_text));
    json_object_set_new(expect, b_name, json_string(b_expect));
  }
  json_t *line = json_pack("{s:s, s:s, s:o, s:o, s:o, s:o}", "what", what, "schema", SCHEMA, "policies", pols,
                           "expect", expect, "request", json_loads(x->request, JSON_ALLOW_NUL, NULL), "entities",
                           json_loads(x->entities, JSON_ALLOW_NUL, NULL));
  char *s = json_dumps(line, JSON_COMPACT);
  fprintf(out, "%s\n", s);
  free(s);
  json_decref(line);
}

/* ---------------------------------------------------------------- compare */

typedef enum allowed {
  A_SAME = 1 << SHK_ANALYSIS_SAME,
  A_NARROWER = 1 << SHK_ANALYSIS_NARROWER,
  A_WIDER = 1 << SHK_ANALYSIS_WIDER,
  A_INCOMPARABLE = 1 << SHK_ANALYSIS_INCOMPARABLE,
} allowed;

static shk_cedar_schema *schema;
static shk_analysis *an;
static unsigned n_compares, n_examples, n_sampled;

static shk_cedar_policy_set *parse(const char *text)
{
  shk_cedar_policy_set *ps = NULL;
  shk_error err;
  if (shk_cedar_policy_set_parse(text, strlen(text), &ps, &err) < 0) {
    FAIL("policies do not parse: %s\n%s", err.message, text);
    return NULL;
  }
  return ps;
}

static void check_pair(const char *what, const char *old_text, const char *new_text, unsigned want,
                       const samples *sm)
{
  shk_cedar_policy_set *po = parse(old_text), *pn = parse(new_text);
  shk_analysis_set *so = NULL, *sn = NULL;
  shk_error err = { 0 };
  if (!po || !pn || shk_analysis_set_new(schema, po, &so, &err) < 0 || shk_analysis_set_new(schema, pn, &sn, &err) < 0) {
    FAIL("%s: cannot prepare: %s", what, err.message);
    goto out;
  }
  shk_analysis_comparison c;
  if (shk_analysis_compare(an, so, sn, NULL, &c, &err) < 0) {
    FAIL("%s: compare failed: %s\nOLD:\n%sNEW:\n%s", what, err.message, old_text, new_text);
    goto out;
  }
  n_compares++;
  if (!(want & (1u << c.rel)))
    FAIL("%s: compare says NEW is %s\nOLD:\n%sNEW:\n%s", what, shk_analysis_relation_name(c.rel), old_text, new_text);
  bool any_wider = false, any_narrower = false;
  for (size_t i = 0; i < c.n_envs; i++) {
    if (c.envs[i].wider) {
      any_wider = true;
      n_examples++;
      record(what, "old", old_text, "deny", "new", new_text, "allow", c.envs[i].wider);
    }
    if (c.envs[i].narrower) {
      any_narrower = true;
      n_examples++;
      record(what, "old", old_text, "allow", "new", new_text, "deny", c.envs[i].narrower);
    }
  }
  /* A direction with no example is a claim about every request. */
  if (sm) {
    for (int d = 0; d < 2; d++) {
      bool wider = d == 0;
      if (wider ? any_wider : any_narrower)
        continue;
      n_sampled++;
      long hit = find_witness(sm, po, pn, wider);
      if (hit >= 0)
        FAIL("%s: compare found no request where NEW %s, but random sample %ld is one\nOLD:\n%sNEW:\n%s", what,
             wider ? "allows and OLD denies" : "denies and OLD allows", hit, old_text, new_text);
    }
  }
  shk_analysis_comparison_clear(&c);
out:
  shk_analysis_set_free(so);
  shk_analysis_set_free(sn);
  shk_cedar_policy_set_free(po);
  shk_cedar_policy_set_free(pn);
}

/* never-errors of one generated policy, with its cross-checks. */
static void check_errors(const pol *p, const samples *sm)
{
  char text[1024];
  pol_text(p, text, sizeof text);
  shk_cedar_policy_set *ps = parse(text);
  shk_analysis_set *set = NULL;
  shk_error err = { 0 };
  if (!ps || shk_analysis_set_new(schema, ps, &set, &err) < 0) {
    FAIL("never-errors: cannot prepare: %s", err.message);
    goto out;
  }
  shk_analysis_result res;
  if (shk_analysis_check(an, SHK_ANALYSIS_NEVER_ERRORS, set, "policy0", NULL, NULL, NULL, &res, &err) < 0) {
    FAIL("never-errors failed: %s\n%s", err.message, text);
    goto out;
  }
  for (size_t i = 0; i < res.n_examples; i++) {
    n_examples++;
    record("never-errors", "p", text, "errors", NULL, NULL, NULL, &res.examples[i]);
  }
  if (res.holds) {
    n_sampled++;
    shk_cedar_response r = { 0 };
    for (size_t i = 0; i < sm->n; i++) {
      size_t ne;
      allows(ps, sm->stores[sm->store_of[i]], sm->reqs[i], &r, &ne);
      if (ne) {
        FAIL("never-errors holds by the analysis, but random sample %zu errors\n%s", i, text);
        break;
      }
    }
    shk_cedar_response_clear(&r);
  }
  shk_analysis_result_clear(&res);
out:
  shk_analysis_set_free(set);
  shk_cedar_policy_set_free(ps);
}

/* ---------------------------------------------------------------- the corpus */

typedef struct pair {
  const char *what, *old_text, *new_text;
  unsigned want;
} pair;

static const pair HAND[] = {
  { "identical", "permit(principal, action, resource) when { context.mfa };",
    "permit(principal, action, resource) when { context.mfa };", A_SAME },
  { "a permit added", "permit(principal, action, resource) when { context.mfa };",
    "permit(principal, action, resource) when { context.mfa };\npermit(principal == User::\"alice\", action, resource);",
    A_WIDER },
  { "a forbid added", "permit(principal, action, resource);",
    "permit(principal, action, resource);\nforbid(principal, action, resource) when { resource.path like \"*/.ssh/*\" };",
    A_NARROWER },
  { "read swapped for write", "permit(principal, action == Action::\"read\", resource);",
    "permit(principal, action == Action::\"write\", resource);", A_INCOMPARABLE },
  { "a stricter threshold", "permit(principal, action, resource) when { principal.level > 1 };",
    "permit(principal, action, resource) when { principal.level > 2 };", A_NARROWER },
  { "unless is not when", "permit(principal, action, resource) when { principal.level > 1 };",
    "permit(principal, action, resource) unless { principal.level <= 1 };", A_SAME },
  { "a has guard written differently", "permit(principal, action, resource) when { principal has dept && principal.dept == \"eng\" };",
    "permit(principal, action, resource) when { if principal has dept then principal.dept == \"eng\" else false };", A_SAME },
  { "overflow skips the permit", "permit(principal, action, resource) when { principal.level + 1 > principal.level };",
    "permit(principal, action, resource) when { principal.level < 9223372036854775807 };", A_SAME },
  { "an erroring forbid is skipped", "permit(principal, action, resource);",
    "permit(principal, action, resource);\nforbid(principal, action, resource) when { resource.owner.level > 0 };",
    A_NARROWER },
  { "membership through a group of groups", "permit(principal in Group::\"g1\", action, resource);",
    "permit(principal in Group::\"g2\", action, resource);", A_INCOMPARABLE },
  { "a like pattern and its prefix", "permit(principal, action, resource) when { resource.path like \"/home/*\" };",
    "permit(principal, action, resource) when { resource.path like \"/home/u/*\" };", A_NARROWER },
  { "an address range and a wider one", "permit(principal, action, resource) when { context.ip.isInRange(ip(\"10.1.0.0/16\")) };",
    "permit(principal, action, resource) when { context.ip.isInRange(ip(\"10.0.0.0/8\")) };", A_WIDER },
  { "a deadline moved later", "permit(principal, action, resource) when { context.now < datetime(\"2025-01-01\") };",
    "permit(principal, action, resource) when { context.now < datetime(\"2025-02-01\") };", A_WIDER },
  { "optional label", "permit(principal, action, resource) when { context has label };",
    "permit(principal, action, resource) when { context has label && context.label == \"x\" };", A_NARROWER },
  { "tags or not", "permit(principal, action, resource) when { principal.tags.contains(\"admin\") };",
    "permit(principal, action, resource) when { principal.tags.containsAny([\"admin\"]) };", A_SAME },
  { "owner is principal", "permit(principal, action, resource) when { resource.owner == principal };",
    "permit(principal, action, resource) when { principal == resource.owner };", A_SAME },
};

int main(int argc, char **argv)
{
  unsigned n_sets = 40, k = 10000;
  rng_state = 20260101;
  const char *out_path = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--sets"))
      n_sets = (unsigned)atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--seed"))
      rng_state = strtoull(argv[i + 1], NULL, 10) | 1;
    else if (!strcmp(argv[i], "--samples"))
      k = (unsigned)atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--out"))
      out_path = argv[i + 1];
  }
  if (out_path && !(out = fopen(out_path, "w"))) {
    perror(out_path);
    return 1;
  }
  shk_error err = { 0 };
  if (shk_cedar_schema_parse(SCHEMA, strlen(SCHEMA), SHK_CEDAR_SCHEMA_TEXT, &schema, &err) < 0) {
    fprintf(stderr, "schema: %s\n", err.message);
    return 1;
  }
  if (shk_analysis_open(NULL, &an, &err) < 0) {
    fprintf(stderr, "FAIL: %s\n", err.message);
    return 1;
  }
  for (size_t i = 0; i < sizeof HAND / sizeof HAND[0]; i++)
    check_pair(HAND[i].what, HAND[i].old_text, HAND[i].new_text, HAND[i].want, NULL);
  for (unsigned s = 0; s < n_sets; s++) {
    pset base = random_set();
    samples sm = { 0 };
    samples_make(&sm, schema, k);
    char *bt = set_text(&base);
    for (size_t i = 0; i < base.n; i++)
      check_errors(&base.p[i], &sm);
    /* Dropping a when conjunct: of a permit widens, of a forbid narrows. */
    for (size_t i = 0; i < base.n; i++) {
      if (base.p[i].n_conj < 2)
        continue;
      pset m = base;
      size_t d = pick((unsigned)m.p[i].n_conj);
      memmove(&m.p[i].conj[d], &m.p[i].conj[d + 1], (m.p[i].n_conj - d - 1) * sizeof m.p[i].conj[0]);
      m.p[i].n_conj--;
      char *mt = set_text(&m);
      check_pair(m.p[i].forbid ? "forbid conjunct dropped" : "permit conjunct dropped", bt, mt,
                 m.p[i].forbid ? A_SAME | A_NARROWER : A_SAME | A_WIDER, &sm);
      free(mt);
      break;
    }
    {
      pset m = base;
      m.p[m.n++] = random_pol(true);
      char *mt = set_text(&m);
      check_pair("forbid added", bt, mt, A_SAME | A_NARROWER, &sm);
      free(mt);
    }
    {
      pset m = base;
      for (size_t i = 0; i < m.n / 2; i++) {
        pol t = m.p[i];
        m.p[i] = m.p[m.n - 1 - i];
        m.p[m.n - 1 - i] = t;
      }
      char *mt = set_text(&m);
      check_pair("policies reordered", bt, mt, A_SAME, &sm);
      free(mt);
    }
    {
      pset m = base;
      for (size_t i = 0; i < m.n; i++)
        for (size_t j = 0; j < m.p[i].n_conj / 2; j++) {
          unsigned t = m.p[i].conj[j];
          m.p[i].conj[j] = m.p[i].conj[m.p[i].n_conj - 1 - j];
          m.p[i].conj[m.p[i].n_conj - 1 - j] = t;
        }
      char *mt = set_text(&m);
      check_pair("&& operands swapped", bt, mt, A_SAME, &sm);
      free(mt);
    }
    /* An unrelated generated set: any relation, every answer checked. */
    {
      pset other = random_set();
      char *ot = set_text(&other);
      check_pair("unrelated sets", bt, ot, A_SAME | A_NARROWER | A_WIDER | A_INCOMPARABLE, &sm);
      free(ot);
    }
    free(bt);
    samples_free(&sm);
  }
  printf("%u compares and never-errors checks, %u counterexamples (each decided by the engine), "
         "%u holding directions sampled with %u requests each: %u failures\n",
         n_compares, n_examples, n_sampled, k, failures);
  if (out)
    fclose(out);
  shk_analysis_close(an);
  shk_cedar_schema_free(schema);
  return failures ? 1 : 0;
}
