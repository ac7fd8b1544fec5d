/* SPDX-License-Identifier: Apache-2.0 */
/* The analyzer through its API: the grant-time question against the
 * shipped policies and test policies (refusals name a witness the engine
 * denies and the policy that forbids it; narrowed grants are exactly as
 * wide as claimed), each query on sets with known answers, refusals by
 * name, and failing closed when the solver is missing, hangs or lies. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/common.h"
#include "shinken/cedar.h"
#include "shinken/policy.h"

/* A call that must succeed; on failure the test says why. */
#define OK(call)                                                               \
  do {                                                                         \
    int ok_r_ = (call);                                                        \
    if (ok_r_ < 0)                                                             \
      fail_msg("%s: %s (%s)", #call, err.message, strerror(-ok_r_));           \
  } while (0)

static const char *srcdir(void)
{
  const char *d = getenv("SHINKEN_SRCDIR");
  return d ? d : ".";
}

static char *slurp(const char *rel)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", srcdir(), rel);
  char *buf = NULL;
  int r = shk__read_file(path, &buf, NULL);
  if (r < 0)
    fail_msg("cannot read %s: %s", path, strerror(-r));
  return buf;
}

typedef struct world {
  shk_cedar_schema *schema;
  shk_cedar_policy_set *ps;
  shk_analysis_set *set;
} world;

static shk_cedar_schema *shipped_schema(void)
{
  char *text = slurp("policies/schema.cedarschema");
  shk_cedar_schema *s = NULL;
  shk_error err = { 0 };
  assert_int_equal(shk_cedar_schema_parse(text, strlen(text), SHK_CEDAR_SCHEMA_TEXT, &s, &err), 0);
  free(text);
  return s;
}

static void world_open(world *w, shk_cedar_schema *schema, const char *policies)
{
  w->schema = schema;
  shk_error err = { 0 };
  if (shk_cedar_policy_set_parse(policies, strlen(policies), &w->ps, &err) < 0)
    fail_msg("policies do not parse: %s", err.message);
  int r = shk_analysis_set_new(schema, w->ps, &w->set, &err);
  if (r < 0)
    fail_msg("cannot prepare the set: %s", err.message);
}

static void world_close(world *w, bool schema_too)
{
  shk_analysis_set_free(w->set);
  shk_cedar_policy_set_free(w->ps);
  if (schema_too)
    shk_cedar_schema_free(w->schema);
}

/* admin.cedar and project.cedar, as the manager loads them. */
static char *shipped_text(void)
{
  char *a = slurp("policies/admin.cedar"), *p = slurp("policies/project.cedar");
  char *all = malloc(strlen(a) + strlen(p) + 2);
  sprintf(all, "%s\n%s", a, p);
  free(a);
  free(p);
  return all;
}

static shk_analysis *solver(void)
{
  shk_analysis *an = NULL;
  shk_error err = { 0 };
  if (shk_analysis_open(NULL, &an, &err) < 0)
    fail_msg("no solver: %s", err.message);
  return an;
}

/* The session's store: its agent, session and the capability classes. */
static const char STORE[] =
  "[{\"uid\":{\"type\":\"Shinken::Session\",\"id\":\"s1\"},\"attrs\":{\"trust_tier\":\"standard\","
  "\"expires\":{\"__extn\":{\"fn\":\"datetime\",\"arg\":\"2030-01-01T00:00:00Z\"}}},\"parents\":[]},"
  "{\"uid\":{\"type\":\"Shinken::Agent\",\"id\":\"s1\"},\"attrs\":{\"model\":\"m\","
  "\"expires\":{\"__extn\":{\"fn\":\"datetime\",\"arg\":\"2030-01-01T00:00:00Z\"}}},"
  "\"parents\":[{\"type\":\"Shinken::Session\",\"id\":\"s1\"}]},"
  "{\"uid\":{\"type\":\"Shinken::Capability\",\"id\":\"fs.scope\"},\"attrs\":{\"class\":\"fs.scope\"},\"parents\":[]},"
  "{\"uid\":{\"type\":\"Shinken::Capability\",\"id\":\"net.egress\"},\"attrs\":{\"class\":\"net.egress\"},\"parents\":[]}]";

/* A grant request of the session as JSON, with REQUEST the fields of
 * context.request. */
static char *grant_request(const char *cls, const char *request)
{
  char *r = NULL;
  if (asprintf(&r,
               "{\"principal\":{\"type\":\"Shinken::Agent\",\"id\":\"s1\"},"
               "\"action\":{\"type\":\"Shinken::Action\",\"id\":\"UseCapability\"},"
               "\"resource\":{\"type\":\"Shinken::Capability\",\"id\":\"%s\"},"
               "\"context\":{\"trust_tier\":\"standard\",\"tier\":\"Auto\",\"approval_state\":\"none\","
               "\"now\":{\"__extn\":{\"fn\":\"datetime\",\"arg\":\"2025-06-01T00:00:00Z\"}},"
               "\"provenance\":\"first-party\",\"request\":%s}}",
               cls, request) < 0)
    fail();
  return r;
}

/* What the engine decides for one request of the session. */
static bool engine_allows(const world *w, const char *request)
{
  shk_cedar_entities *es = NULL;
  shk_cedar_request *req = NULL;
  shk_error err = { 0 };
  assert_int_equal(shk_cedar_entities_parse(STORE, strlen(STORE), w->schema, &es, &err), 0);
  if (shk_cedar_request_from_json(request, strlen(request), w->schema, true, &req, &err) < 0)
    fail_msg("request does not fit: %s", err.message);
  shk_cedar_response resp = { 0 };
  assert_int_equal(shk_cedar_is_authorized(w->ps, es, req, &resp), 0);
  bool allow = resp.decision == SHK_CEDAR_ALLOW;
  shk_cedar_response_clear(&resp);
  shk_cedar_request_free(req);
  shk_cedar_entities_free(es);
  return allow;
}

/* The fields of an fs.scope request as the one decision fills them: the
 * path, the access, and the path below its home. */
static void path_fields(char *buf, size_t n, const char *access, const char *path)
{
  const char *home = shk_policy_home_rest(path);
  snprintf(buf, n, "{\"path\":\"%s\",\"access\":\"%s\",\"in_exec_path\":false%s%s%s}", path, access,
           home ? ",\"home_path\":\"" : "", home ? home : "", home ? "\"" : "");
}

static bool path_allows(const world *w, const char *access, const char *path)
{
  char fields[600];
  path_fields(fields, sizeof fields, access, path);
  char *req = grant_request("fs.scope", fields);
  bool a = engine_allows(w, req);
  free(req);
  return a;
}

static bool host_allows(const world *w, const char *host)
{
  char fields[600];
  snprintf(fields, sizeof fields, "{\"domain\":\"%s\"}", host);
  char *req = grant_request("net.egress", fields);
  bool a = engine_allows(w, req);
  free(req);
  return a;
}

static bool starts_with(const char *s, const char *p)
{
  return !strncmp(s, p, strlen(p));
}

static bool ends_with(const char *s, const char *p)
{
  size_t n = strlen(s), m = strlen(p);
  return n >= m && !strcmp(s + n - m, p);
}

static void cover_path(shk_analysis *an, const world *w, const char *access, const char *prefix,
                       const shk_analysis_except *ex, size_t n_ex, shk_analysis_cover_result *out)
{
  char fields[600];
  path_fields(fields, sizeof fields, access, prefix);
  char *req = grant_request("fs.scope", fields);
  shk_analysis_cover_field f = { "request.path", SHK_ANALYSIS_PATH_PREFIX, prefix, ex, n_ex, "request.home_path" };
  shk_analysis_cover_query q = { req, STORE, &f, 1, false };
  shk_error err = { 0 };
  int r = shk_analysis_cover(an, w->set, &q, out, &err);
  if (r < 0)
    fail_msg("cover %s: %s", prefix, err.message);
  free(req);
}

/* ---------------------------------------------------------------- the shipped policies */

/* The unsound case of deciding a prefix as one literal path: the engine
 * allows the string "/home/u", the analysis refuses the prefix with a
 * witness the engine denies, forbidden by an admin policy. */
static void test_cover_home_write(void **state)
{
  (void)state;
  world w;
  char *text = shipped_text();
  world_open(&w, shipped_schema(), text);
  shk_analysis *an = solver();
  assert_true(path_allows(&w, "write", "/home/u"));
  shk_analysis_cover_result res;
  cover_path(an, &w, "write", "/home/u", NULL, 0, &res);
  assert_false(res.allowed);
  assert_true(starts_with(res.witness[0], "/home/u/"));
  assert_true(starts_with(res.policy, "admin-fs-"));
  assert_false(path_allows(&w, "write", res.witness[0]));
  assert_non_null(strstr(res.why, "/home/u covers "));
  assert_non_null(strstr(res.why, res.policy));

  /* Inside the credential store, the credential policy is the one named. */
  cover_path(an, &w, "write", "/home/u/.ssh/authorized_keys", NULL, 0, &res);
  assert_false(res.allowed);
  assert_true(starts_with(res.witness[0], "/home/u/.ssh/authorized_keys"));
  assert_string_equal(res.policy, "admin-fs-credentials-and-shell-rc");
  assert_false(path_allows(&w, "write", "/home/u/.ssh/authorized_keys"));

  /* Left out of the grant, the credential stores and shell files no
   * longer stop it... but the other forbidden subtrees still do: the
   * witness moves on and is still denied. */
  shk_analysis_except ex[] = { { "/home/u/.ssh", false } };
  cover_path(an, &w, "write", "/home/u", ex, 1, &res);
  assert_false(res.allowed);
  assert_false(starts_with(res.witness[0], "/home/u/.ssh/") || !strcmp(res.witness[0], "/home/u/.ssh"));
  assert_false(path_allows(&w, "write", res.witness[0]));

  /* The control: reading the same prefix is allowed everywhere. */
  cover_path(an, &w, "read", "/home/u", NULL, 0, &res);
  assert_true(res.allowed);
  /* A project in the home is no credential store, whatever it holds; the
   * homes' parent covers every home's stores. */
  cover_path(an, &w, "write", "/home/u/project", NULL, 0, &res);
  assert_true(res.allowed);
  cover_path(an, &w, "write", "/home", NULL, 0, &res);
  assert_false(res.allowed);
  assert_true(starts_with(res.witness[0], "/home/"));
  assert_false(path_allows(&w, "write", res.witness[0]));

  /* Under /home/u the forbidden part has no finite set of subtrees (a
   * .ssh may sit at any depth): no narrowed grant is offered. */
  char *req = grant_request("fs.scope", "{\"path\":\"/home/u\",\"access\":\"write\",\"in_exec_path\":false,"
                                        "\"home_path\":\"\"}");
  shk_analysis_cover_field f = { "request.path", SHK_ANALYSIS_PATH_PREFIX, "/home/u", NULL, 0, "request.home_path" };
  shk_analysis_cover_query q = { req, STORE, &f, 1, false };
  shk_analysis_narrowing nw;
  shk_error err = { 0 };
  OK(shk_analysis_narrow(an, w.set, &q, 4, &nw, &err));
  assert_false(nw.found);
  assert_false(nw.first.allowed);
  shk_analysis_narrowing_clear(&nw);
  free(req);

  uint64_t checks, starts;
  shk_analysis_counters(an, &checks, &starts);
  assert_int_equal(starts, 1); /* one warm solver served every check */
  assert_true(checks >= 5);
  shk_analysis_close(an);
  world_close(&w, true);
  free(text);
}

/* The admin tier's forbid on a test subtree, for a finite narrowing. */
static void test_narrow_path(void **state)
{
  (void)state;
  char *shipped = shipped_text();
  char *text = NULL;
  assert_true(asprintf(&text, "%s\n"
    "@id(\"no-app-keys\") forbid (principal, action == Shinken::Action::\"UseCapability\", resource == Shinken::Capability::\"fs.scope\") when {\n"
    "  context.request has path && (context.request.path == \"/srv/app/keys\" ||\n"
    "  context.request.path like \"/srv/app/keys/*\" || context.request.path == \"/srv/app/secret\") };\n",
    shipped) > 0);
  world w;
  world_open(&w, shipped_schema(), text);
  shk_analysis *an = solver();
  /* Read access avoids the admin tier's write forbids: only the test
   * policy narrows. */
  shk_analysis_cover_result res;
  cover_path(an, &w, "read", "/srv/app", NULL, 0, &res);
  assert_false(res.allowed);
  assert_string_equal(res.policy, "no-app-keys");
  char *req = grant_request("fs.scope", "{\"path\":\"/srv/app\",\"access\":\"read\",\"in_exec_path\":false}");
  shk_analysis_cover_field f = { "request.path", SHK_ANALYSIS_PATH_PREFIX, "/srv/app", NULL, 0, "request.home_path" };
  shk_analysis_cover_query q = { req, STORE, &f, 1, false };
  shk_analysis_narrowing nw;
  shk_error err = { 0 };
  OK(shk_analysis_narrow(an, w.set, &q, 8, &nw, &err));
  assert_true(nw.found);
  assert_int_equal(nw.n_except, 2);
  bool keys = false, secret = false;
  for (size_t i = 0; i < nw.n_except; i++) {
    keys = keys || (!strcmp(nw.except[i].text, "/srv/app/keys") && !nw.except[i].exact);
    secret = secret || (!strcmp(nw.except[i].text, "/srv/app/secret") && nw.except[i].exact);
  }
  assert_true(keys && secret);
  /* Exactly as wide as claimed: inside allowed, the parts left out denied. */
  const char *inside[] = { "/srv/app", "/srv/app/a", "/srv/app/keysx", "/srv/app/secret/x", "/srv/app/b/keys" };
  const char *outside[] = { "/srv/app/keys", "/srv/app/keys/id_rsa", "/srv/app/keys/a/b", "/srv/app/secret" };
  for (size_t i = 0; i < sizeof inside / sizeof inside[0]; i++)
    assert_true(path_allows(&w, "read", inside[i]));
  for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++)
    assert_false(path_allows(&w, "read", outside[i]));
  cover_path(an, &w, "read", "/srv/app", nw.except, nw.n_except, &res);
  assert_true(res.allowed);
  shk_analysis_narrowing_clear(&nw);
  free(req);
  shk_analysis_close(an);
  world_close(&w, true);
  free(text);
  free(shipped);
}

/* **.org against a forbid on *.evil.org. */
static void test_cover_host(void **state)
{
  (void)state;
  char *shipped = shipped_text();
  char *text = NULL;
  assert_true(asprintf(&text, "%s\n"
    "@id(\"no-evil\") forbid (principal, action == Shinken::Action::\"UseCapability\", resource == Shinken::Capability::\"net.egress\") when {\n"
    "  context.request has domain && context.request.domain like \"*.evil.org\" };\n", shipped) > 0);
  world w;
  world_open(&w, shipped_schema(), text);
  shk_analysis *an = solver();
  /* Decided as the literal string, the pattern passes: the bug. */
  assert_true(host_allows(&w, "**.org"));
  char *req = grant_request("net.egress", "{\"domain\":\"**.org\"}");
  shk_analysis_cover_field f = { "request.domain", SHK_ANALYSIS_HOST_PATTERN, "**.org", NULL, 0 };
  shk_analysis_cover_query q = { req, STORE, &f, 1, false };
  shk_analysis_cover_result res;
  shk_error err = { 0 };
  OK(shk_analysis_cover(an, w.set, &q, &res, &err));
  assert_false(res.allowed);
  assert_true(ends_with(res.witness[0], ".evil.org"));
  assert_string_equal(res.policy, "no-evil");
  assert_false(host_allows(&w, res.witness[0]));
  /* A host pattern the forbid does not reach is allowed. */
  f.pattern = "**.example.org";
  OK(shk_analysis_cover(an, w.set, &q, &res, &err));
  assert_true(res.allowed);
  f.pattern = "**.org";
  shk_analysis_narrowing nw;
  OK(shk_analysis_narrow(an, w.set, &q, 4, &nw, &err));
  assert_true(nw.found);
  assert_int_equal(nw.n_except, 1);
  assert_string_equal(nw.except[0].text, "*.evil.org");
  const char *inside[] = { "org", "a.org", "evil.org", "x.notevil.org", "evil.org.org" };
  const char *outside[] = { "x.evil.org", "a.b.evil.org" };
  for (size_t i = 0; i < sizeof inside / sizeof inside[0]; i++)
    assert_true(host_allows(&w, inside[i]));
  for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++)
    assert_false(host_allows(&w, outside[i]));
  assert_int_equal(nw.except[0].field, 0);
  f.except = nw.except;
  f.n_except = nw.n_except;
  OK(shk_analysis_cover(an, w.set, &q, &res, &err));
  assert_true(res.allowed);
  shk_analysis_narrowing_clear(&nw);
  free(req);
  shk_analysis_close(an);
  world_close(&w, true);
  free(text);
  free(shipped);
}

/* A CIDR and a port range, each against a forbid inside it. Ports reach
 * Cedar as a range {lo, hi}; a policy about a port tests the bounds, and
 * one that looks at a single end is caught only by covering each port. */
static void test_cover_cidr_ports(void **state)
{
  (void)state;
  char *shipped = shipped_text();
  char *text = NULL;
  assert_true(asprintf(&text, "%s\n"
    "@id(\"no-10-1\") forbid (principal, action, resource) when {\n"
    "  context has request && context.request has ip && context.request.ip.isInRange(ip(\"10.1.0.0/16\")) };\n"
    "@id(\"no-low-ports\") forbid (principal, action, resource) when {\n"
    "  context has request && context.request has ports && context.request has domain &&\n"
    "  context.request.domain == \"api.example\" && context.request.ports.lo < 1024 };\n"
    "@id(\"no-ssh-at-evil\") forbid (principal, action, resource) when {\n"
    "  context has request && context.request has ports && context.request has domain &&\n"
    "  context.request.domain like \"*.evil.org\" && context.request.ports.hi == 22 };\n"
    "@id(\"no-smtp-below-org\") forbid (principal, action, resource) when {\n"
    "  context has request && context.request has ports && context.request has domain &&\n"
    "  context.request.domain like \"*.org\" && context.request.ports.lo <= 25 && 25 <= context.request.ports.hi };\n",
    shipped) > 0);
  world w;
  world_open(&w, shipped_schema(), text);
  shk_analysis *an = solver();
  shk_error err = { 0 };
  char *req = grant_request("net.egress", "{\"ip\":{\"__extn\":{\"fn\":\"ip\",\"arg\":\"10.0.0.0/8\"}},"
                                          "\"ports\":{\"lo\":443,\"hi\":443}}");
  shk_analysis_cover_field f = { "request.ip", SHK_ANALYSIS_CIDR, "10.0.0.0/8", NULL, 0 };
  shk_analysis_cover_query q = { req, STORE, &f, 1, false };
  shk_analysis_cover_result res;
  OK(shk_analysis_cover(an, w.set, &q, &res, &err));
  assert_false(res.allowed);
  assert_true(starts_with(res.witness[0], "10.1."));
  assert_string_equal(res.policy, "no-10-1");
  shk_analysis_narrowing nw;
  OK(shk_analysis_narrow(an, w.set, &q, 4, &nw, &err));
  assert_true(nw.found);
  assert_int_equal(nw.n_except, 1);
  assert_string_equal(nw.except[0].text, "10.1.0.0/16");
  shk_analysis_narrowing_clear(&nw);
  f.pattern = "10.2.0.0/16";
  OK(shk_analysis_cover(an, w.set, &q, &res, &err));
  assert_true(res.allowed);
  free(req);

  /* Every port of 1-65535 as the range {lo: P, hi: P}: the low ones are
   * forbidden, and exactly those are left out by the narrowing. */
  req = grant_request("net.egress", "{\"domain\":\"api.example\",\"ports\":{\"lo\":1,\"hi\":65535}}");
  f = (shk_analysis_cover_field){ "request.ports", SHK_ANALYSIS_PORT_RANGE, "1-65535", NULL, 0 };
  q = (shk_analysis_cover_query){ req, STORE, &f, 1, false };
  OK(shk_analysis_cover(an, w.set, &q, &res, &err));
  assert_false(res.allowed);
  assert_true(atol(res.witness[0]) >= 1 && atol(res.witness[0]) < 1024);
  assert_string_equal(res.policy, "no-low-ports");
  OK(shk_analysis_narrow(an, w.set, &q, 4, &nw, &err));
  assert_true(nw.found);
  assert_int_equal(nw.n_except, 1);
  assert_string_equal(nw.except[0].text, "1-1023");
  shk_analysis_narrowing_clear(&nw);
  f.pattern = "1024-65535";
  OK(shk_analysis_cover(an, w.set, &q, &res, &err));
  assert_true(res.allowed);
  free(req);

  /* Host and port together: **.org on ports 20-24. The literal range's
   * hi is 24, so the forbid on hi == 22 misses the literal; covering each
   * pair finds x.evil.org on port 22. The forbidden part is hosts below
   * evil.org on port 22 alone: no subtree of either field is denied
   * throughout, so no narrowing is offered. */
  req = grant_request("net.egress", "{\"domain\":\"**.org\",\"ports\":{\"lo\":20,\"hi\":24}}");
  assert_true(engine_allows(&w, req));
  shk_analysis_cover_field two[] = {
    { "request.domain", SHK_ANALYSIS_HOST_PATTERN, "**.org", NULL, 0 },
    { "request.ports", SHK_ANALYSIS_PORT_RANGE, "20-24", NULL, 0 },
  };
  q = (shk_analysis_cover_query){ req, STORE, two, 2, false };
  OK(shk_analysis_cover(an, w.set, &q, &res, &err));
  assert_false(res.allowed);
  assert_true(ends_with(res.witness[0], ".evil.org"));
  assert_string_equal(res.witness[1], "22");
  assert_string_equal(res.policy, "no-ssh-at-evil");
  OK(shk_analysis_narrow(an, w.set, &q, 4, &nw, &err));
  assert_false(nw.found);
  assert_false(nw.first.allowed);
  shk_analysis_narrowing_clear(&nw);
  /* On 23-24 nothing is forbidden. */
  two[1].pattern = "23-24";
  OK(shk_analysis_cover(an, w.set, &q, &res, &err));
  assert_true(res.allowed);
  free(req);

  /* *.org on 23-30: port 25 is forbidden for every host strictly below
   * org, so the narrowing leaves out the port, not a host. */
  req = grant_request("net.egress", "{\"domain\":\"*.org\",\"ports\":{\"lo\":23,\"hi\":30}}");
  q.request = req;
  two[0].pattern = "*.org";
  two[1].pattern = "23-30";
  OK(shk_analysis_narrow(an, w.set, &q, 4, &nw, &err));
  assert_false(nw.first.allowed);
  assert_string_equal(nw.first.witness[1], "25");
  assert_string_equal(nw.first.policy, "no-smtp-below-org");
  assert_true(nw.found);
  assert_int_equal(nw.n_except, 1);
  assert_int_equal(nw.except[0].field, 1);
  assert_string_equal(nw.except[0].text, "25-25");
  two[1].except = nw.except;
  two[1].n_except = nw.n_except;
  OK(shk_analysis_cover(an, w.set, &q, &res, &err));
  assert_true(res.allowed);
  shk_analysis_narrowing_clear(&nw);
  free(req);
  shk_analysis_close(an);
  world_close(&w, true);
  free(text);
  free(shipped);
}

/* A time range: a policy that forbids after a date is caught when the
 * range of instants reaches past it, and the witness is such an instant. */
static void test_cover_time(void **state)
{
  (void)state;
  char *shipped = shipped_text();
  char *text = NULL;
  assert_true(asprintf(&text, "%s\n"
    "@id(\"not-after-2026\") forbid (principal, action, resource) when {\n"
    "  context has now && datetime(\"2026-01-01\") <= context.now };\n", shipped) > 0);
  world w;
  world_open(&w, shipped_schema(), text);
  shk_analysis *an = solver();
  shk_error err = { 0 };
  char *req = grant_request("net.egress", "{\"domain\":\"api.example\",\"ports\":{\"lo\":443,\"hi\":443}}");
  /* 2025-06-01 to 2025-12-31 (ms since the epoch): allowed throughout. */
  shk_analysis_cover_field f = { "now", SHK_ANALYSIS_TIME_RANGE, "1748736000000-1767225599999", NULL, 0 };
  shk_analysis_cover_query q = { req, STORE, &f, 1, false };
  shk_analysis_cover_result res;
  OK(shk_analysis_cover(an, w.set, &q, &res, &err));
  assert_true(res.allowed);
  /* To 2026-01-01T00:00:00.000Z: its last instant is forbidden. */
  f.pattern = "1748736000000-1767225600000";
  OK(shk_analysis_cover(an, w.set, &q, &res, &err));
  assert_false(res.allowed);
  assert_string_equal(res.policy, "not-after-2026");
  assert_true(starts_with(res.witness[0], "2026-01-01T00:00:00"));
  free(req);
  shk_analysis_close(an);
  world_close(&w, true);
  free(text);
  free(shipped);
}

/* Errors: Cedar skips a policy that errors, the one decision refuses. With
 * errors_deny the question is the decision's. */
static void test_cover_errors(void **state)
{
  (void)state;
  char *shipped = shipped_text();
  char *text = NULL;
  /* An overflow on a big port: the forbid errors there, so Cedar lets it
   * through and the one decision does not. */
  assert_true(asprintf(&text, "%s\n"
    "@id(\"overflows\") forbid (principal, action, resource) when {\n"
    "  context has request && context.request has ports &&\n"
    "  context.request.ports.hi * 281474976710656 * 281474976710656 == 7 };\n", shipped) > 0);
  world w;
  world_open(&w, shipped_schema(), text);
  shk_analysis *an = solver();
  shk_error err = { 0 };
  char *req = grant_request("net.egress", "{\"domain\":\"api.example\",\"ports\":{\"lo\":0,\"hi\":0}}");
  shk_analysis_cover_field f = { "request.ports", SHK_ANALYSIS_PORT_RANGE, "0-10", NULL, 0 };
  shk_analysis_cover_query q = { req, STORE, &f, 1, false };
  shk_analysis_cover_result res;
  OK(shk_analysis_cover(an, w.set, &q, &res, &err));
  assert_true(res.allowed);
  q.errors_deny = true;
  OK(shk_analysis_cover(an, w.set, &q, &res, &err));
  assert_false(res.allowed);
  assert_string_equal(res.policy, "overflows");
  assert_true(atol(res.witness[0]) >= 1 && atol(res.witness[0]) <= 10);
  assert_non_null(strstr(res.why, "an error stops it"));
  /* Port 0 alone does not overflow. */
  f.pattern = "0";
  OK(shk_analysis_cover(an, w.set, &q, &res, &err));
  assert_true(res.allowed);
  free(req);
  shk_analysis_close(an);
  world_close(&w, true);
  free(text);
  free(shipped);
}

/* ---------------------------------------------------------------- each query */

static const char SCHEMA[] =
  "entity Group;\n"
  "entity User in [Group] = { name: String, level: Long, dept?: String };\n"
  "entity Doc = { owner: User, path: String };\n"
  "action read, write appliesTo { principal: [User], resource: [Doc], context: { mfa: Bool } };\n";

typedef struct qcase {
  shk_analysis_query q;
  const char *a, *b;          /* policy texts (b: the second set, or NULL) */
  const char *pa, *pb;        /* policy ids */
  bool holds;
} qcase;

static const qcase QCASES[] = {
  { SHK_ANALYSIS_NEVER_ERRORS, "permit(principal, action, resource) when { principal.level > 3 };", NULL, "policy0", NULL, false },
  { SHK_ANALYSIS_NEVER_ERRORS, "permit(principal, action, resource) when { principal has dept && principal.dept == \"x\" };", NULL, "policy0", NULL, true },
  { SHK_ANALYSIS_NEVER_ERRORS, "permit(principal, action, resource) when { principal.level + 1 > 3 };", NULL, "policy0", NULL, false },
  { SHK_ANALYSIS_ALWAYS_MATCHES, "permit(principal, action, resource) when { context.mfa || !context.mfa };", NULL, "policy0", NULL, true },
  { SHK_ANALYSIS_ALWAYS_MATCHES, "permit(principal, action, resource) when { resource.owner == principal };", NULL, "policy0", NULL, false },
  { SHK_ANALYSIS_NEVER_MATCHES, "permit(principal, action, resource) when { principal.name like \"a*\" && principal.name == \"bob\" };", NULL, "policy0", NULL, true },
  { SHK_ANALYSIS_NEVER_MATCHES, "permit(principal, action, resource) when { principal.name like \"a*\" && principal.name == \"alice\" };", NULL, "policy0", NULL, false },
  { SHK_ANALYSIS_MATCHES_EQUIVALENT, "permit(principal, action, resource) when { context.mfa && principal.level > 1 };\n"
    "permit(principal, action, resource) when { principal.level > 1 && context.mfa };", NULL, "policy0", "policy1", true },
  { SHK_ANALYSIS_MATCHES_EQUIVALENT, "permit(principal, action, resource) when { principal.level > 1 };\n"
    "permit(principal, action, resource) when { principal.level >= 1 };", NULL, "policy0", "policy1", false },
  { SHK_ANALYSIS_MATCHES_IMPLIES, "permit(principal, action, resource) when { principal.level > 5 };\n"
    "permit(principal, action, resource) when { principal.level > 1 };", NULL, "policy0", "policy1", true },
  { SHK_ANALYSIS_MATCHES_IMPLIES, "permit(principal, action, resource) when { principal.level > 1 };\n"
    "permit(principal, action, resource) when { principal.level > 5 };", NULL, "policy0", "policy1", false },
  { SHK_ANALYSIS_MATCHES_DISJOINT, "permit(principal, action == Action::\"read\", resource);\n"
    "forbid(principal, action == Action::\"write\", resource);", NULL, "policy0", "policy1", true },
  { SHK_ANALYSIS_MATCHES_DISJOINT, "permit(principal in Group::\"g\", action, resource);\n"
    "forbid(principal, action, resource) when { principal.name == \"eve\" };", NULL, "policy0", "policy1", false },
  { SHK_ANALYSIS_ALWAYS_ALLOWS, "permit(principal, action, resource);", NULL, NULL, NULL, true },
  { SHK_ANALYSIS_ALWAYS_ALLOWS, "permit(principal, action, resource);\n"
    "forbid(principal, action, resource) when { resource.path like \"/secret/*\" };", NULL, NULL, NULL, false },
  { SHK_ANALYSIS_ALWAYS_DENIES, "permit(principal, action, resource) when { principal in Group::\"g\" };\n"
    "forbid(principal in Group::\"g\", action, resource);", NULL, NULL, NULL, true },
  { SHK_ANALYSIS_ALWAYS_DENIES, "permit(principal, action, resource) when { principal in Group::\"g\" };", NULL, NULL, NULL, false },
  { SHK_ANALYSIS_EQUIVALENT, "permit(principal, action, resource) when { principal.level > 1 };",
    "permit(principal, action, resource) unless { principal.level <= 1 };", NULL, NULL, true },
  { SHK_ANALYSIS_EQUIVALENT, "permit(principal, action, resource) when { principal.level > 1 };",
    "permit(principal, action, resource) when { principal.level > 2 };", NULL, NULL, false },
  { SHK_ANALYSIS_IMPLIES, "permit(principal == User::\"alice\", action, resource);",
    "permit(principal, action, resource) when { principal == User::\"alice\" || context.mfa };", NULL, NULL, true },
  { SHK_ANALYSIS_IMPLIES, "permit(principal, action, resource) when { context.mfa };",
    "permit(principal == User::\"alice\", action, resource);", NULL, NULL, false },
  { SHK_ANALYSIS_DISJOINT, "permit(principal, action, resource) when { context.mfa };",
    "permit(principal, action, resource) when { !context.mfa };", NULL, NULL, true },
  { SHK_ANALYSIS_DISJOINT, "permit(principal, action, resource) when { context.mfa };",
    "permit(principal, action == Action::\"read\", resource);", NULL, NULL, false },
};

static shk_cedar_schema *test_schema(void)
{
  shk_cedar_schema *s = NULL;
  shk_error err = { 0 };
  assert_int_equal(shk_cedar_schema_parse(SCHEMA, strlen(SCHEMA), SHK_CEDAR_SCHEMA_TEXT, &s, &err), 0);
  return s;
}

static void test_queries(void **state)
{
  (void)state;
  shk_cedar_schema *s = test_schema();
  shk_analysis *an = solver();
  for (size_t i = 0; i < sizeof QCASES / sizeof QCASES[0]; i++) {
    const qcase *c = &QCASES[i];
    world a, b;
    world_open(&a, s, c->a);
    if (c->b)
      world_open(&b, s, c->b);
    shk_analysis_result res;
    shk_error err = { 0 };
    int r = shk_analysis_check(an, c->q, a.set, c->pa, c->b ? b.set : NULL, c->pb, NULL, &res, &err);
    if (r < 0)
      fail_msg("case %zu (%s): %s", i, shk_analysis_query_name(c->q), err.message);
    if (res.holds != c->holds)
      fail_msg("case %zu: %s %s, expected the opposite", i, shk_analysis_query_name(c->q),
               res.holds ? "holds" : "does not hold");
    assert_int_equal(res.n_envs, 2);
    /* A failing property has a counterexample in some environment, each
     * one a request and store the engine decided as claimed. */
    assert_true(res.holds == (res.n_examples == 0));
    for (size_t k = 0; k < res.n_examples; k++) {
      assert_non_null(strstr(res.examples[k].request, "\"principal\""));
      assert_true(res.examples[k].entities[0] == '[');
    }
    shk_analysis_result_clear(&res);
    world_close(&a, false);
    if (c->b)
      world_close(&b, false);
  }
  shk_analysis_close(an);
  shk_cedar_schema_free(s);
}

/* The assumption restricts the requests a question is about. */
static void test_assume(void **state)
{
  (void)state;
  shk_cedar_schema *s = test_schema();
  shk_analysis *an = solver();
  world a;
  world_open(&a, s, "permit(principal, action, resource) when { context.mfa };");
  shk_analysis_result res;
  shk_error err = { 0 };
  shk_analysis_scope sc = { .assume = "context.mfa" };
  assert_int_equal(shk_analysis_check(an, SHK_ANALYSIS_ALWAYS_ALLOWS, a.set, NULL, NULL, NULL, &sc, &res, &err), 0);
  assert_true(res.holds);
  shk_analysis_result_clear(&res);
  sc.assume = "principal.level > 3";
  assert_int_equal(shk_analysis_check(an, SHK_ANALYSIS_ALWAYS_ALLOWS, a.set, NULL, NULL, NULL, &sc, &res, &err), 0);
  assert_false(res.holds);
  shk_analysis_result_clear(&res);
  sc = (shk_analysis_scope){ .assume = "context.nope" };
  assert_int_equal(shk_analysis_check(an, SHK_ANALYSIS_ALWAYS_ALLOWS, a.set, NULL, NULL, NULL, &sc, &res, &err),
                   -EINVAL);
  assert_non_null(strstr(err.message, "assumption"));
  sc = (shk_analysis_scope){ .action = "Action::\"read\"" };
  assert_int_equal(shk_analysis_check(an, SHK_ANALYSIS_NEVER_ERRORS, a.set, "policy0", NULL, NULL, &sc, &res, &err), 0);
  assert_int_equal(res.n_envs, 1);
  shk_analysis_result_clear(&res);
  world_close(&a, false);
  shk_analysis_close(an);
  shk_cedar_schema_free(s);
}

/* ---------------------------------------------------------------- refusals and failures */

static void test_refusals(void **state)
{
  (void)state;
  shk_cedar_schema *s = test_schema();
  shk_cedar_policy_set *ps = NULL;
  shk_analysis_set *set = NULL;
  shk_error err = { 0 };
  const char *tmpl = "permit(principal == ?principal, action, resource);";
  assert_int_equal(shk_cedar_policy_set_parse(tmpl, strlen(tmpl), &ps, &err), 0);
  assert_int_equal(shk_analysis_set_new(s, ps, &set, &err), -EOPNOTSUPP);
  assert_non_null(strstr(err.message, "template"));
  shk_cedar_policy_set_free(ps);
  const char *bad = "permit(principal, action, resource) when { principal.nope };";
  assert_int_equal(shk_cedar_policy_set_parse(bad, strlen(bad), &ps, &err), 0);
  assert_int_equal(shk_analysis_set_new(s, ps, &set, &err), -EINVAL);
  assert_non_null(strstr(err.message, "does not validate"));
  shk_cedar_policy_set_free(ps);
  shk_cedar_schema_free(s);

  const char *ipschema = "entity U; action a appliesTo { principal: [U], resource: [U], context: { ips: Set<ipaddr> } };";
  assert_int_equal(shk_cedar_schema_parse(ipschema, strlen(ipschema), SHK_CEDAR_SCHEMA_TEXT, &s, &err), 0);
  const char *p = "permit(principal, action, resource) when { context.ips.contains(ip(\"1.2.3.4\")) };";
  assert_int_equal(shk_cedar_policy_set_parse(p, strlen(p), &ps, &err), 0);
  assert_int_equal(shk_analysis_set_new(s, ps, &set, &err), -EOPNOTSUPP);
  assert_non_null(strstr(err.message, "a set of ipaddr values"));
  shk_cedar_policy_set_free(ps);
  shk_cedar_schema_free(s);
}

static void test_no_solver(void **state)
{
  (void)state;
  shk_analysis_options o = { .solver = "/nonexistent/cvc5" };
  shk_analysis *an = NULL;
  shk_error err = { 0 };
  assert_int_equal(shk_analysis_open(&o, &an, &err), -ENOENT);
  assert_null(an);
  assert_non_null(strstr(err.message, "not installed"));
  /* Something that is not cvc5 is refused too. */
  o.solver = "/bin/cat";
  assert_int_equal(shk_analysis_open(&o, &an, &err), -EIO);
}

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A solver that introduces itself and then never answers. */
static void test_timeout(void **state)
{
  (void)state;
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/analysis/hang-solver.sh", srcdir());
  shk_analysis_options o = { .solver = path, .timeout_ms = 200 };
  shk_analysis *an = NULL;
  shk_error err = { 0 };
  assert_int_equal(shk_analysis_open(&o, &an, &err), 0);
  shk_cedar_schema *s = test_schema();
  world a;
  world_open(&a, s, "permit(principal, action, resource);");
  shk_analysis_result res;
  double t0 = now_s();
  assert_int_equal(shk_analysis_check(an, SHK_ANALYSIS_ALWAYS_ALLOWS, a.set, NULL, NULL, NULL, NULL, &res, &err),
                   -ETIMEDOUT);
  assert_true(now_s() - t0 < 5);
  assert_false(res.holds);
  world_close(&a, false);
  shk_analysis_close(an);
  shk_cedar_schema_free(s);
}

/* A solver that ignores the goal finds "counterexamples" that are none:
 * the engine's check turns each into a defect, never a result. */
static void test_lying_solver(void **state)
{
  (void)state;
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/analysis/lying-solver.py", srcdir());
  shk_analysis_options o = { .solver = path };
  shk_analysis *an = NULL;
  shk_error err = { 0 };
  assert_int_equal(shk_analysis_open(&o, &an, &err), 0);
  shk_cedar_schema *s = test_schema();
  world a;
  world_open(&a, s, "permit(principal, action, resource);");
  shk_analysis_result res;
  assert_int_equal(shk_analysis_check(an, SHK_ANALYSIS_ALWAYS_ALLOWS, a.set, NULL, NULL, NULL, NULL, &res, &err),
                   -EPROTO);
  assert_non_null(strstr(err.message, "defect"));
  world_close(&a, false);
  shk_analysis_close(an);
  shk_cedar_schema_free(s);
}

/* Without cvc5 the analyzer can only refuse: the test skips, unless
 * SHINKEN_MUST_WORK says a skip is a failure. */
static bool have_cvc5(void)
{
  const char *path = getenv("PATH");
  char *copy = strdup(path ? path : ""), *save = NULL;
  bool found = false;
  for (char *d = strtok_r(copy, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
    char f[4096];
    snprintf(f, sizeof f, "%s/cvc5", d);
    found = access(f, X_OK) == 0;
  }
  free(copy);
  return found;
}

int main(void)
{
  if (!have_cvc5()) {
    const char *must = getenv("SHINKEN_MUST_WORK");
    fprintf(stderr, "%s: cvc5 is not installed (scripts/install-deps.sh)\n",
            must && !strcmp(must, "1") ? "FAIL" : "SKIP");
    return must && !strcmp(must, "1") ? 1 : 77;
  }
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_cover_home_write),
    cmocka_unit_test(test_narrow_path),
    cmocka_unit_test(test_cover_host),
    cmocka_unit_test(test_cover_cidr_ports),
    cmocka_unit_test(test_cover_time),
    cmocka_unit_test(test_cover_errors),
    cmocka_unit_test(test_queries),
    cmocka_unit_test(test_assume),
    cmocka_unit_test(test_refusals),
    cmocka_unit_test(test_no_solver),
    cmocka_unit_test(test_timeout),
    cmocka_unit_test(test_lying_solver),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
