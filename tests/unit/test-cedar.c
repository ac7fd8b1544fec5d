/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the Cedar engine's core: every operator, every error kind,
 * the scope, the authorizer's combination rules, and the JSON forms of
 * entities and context with their errors. Table-driven: each case is policy
 * text against one fixed store and request, and says what the reference
 * decides. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "shinken/cedar.h"

static const char ENTITIES[] =
  "[{\"uid\": {\"type\": \"User\", \"id\": \"alice\"},"
  "  \"attrs\": {\"age\": 30, \"name\": \"Alice\", \"langs\": [\"en\", \"fr\"],"
  "    \"addr\": {\"city\": \"Paris\", \"geo\": {\"lat\": 48}},"
  "    \"boss\": {\"__entity\": {\"type\": \"User\", \"id\": \"bob\"}},"
  "    \"ghost\": {\"__entity\": {\"type\": \"User\", \"id\": \"nobody\"}},"
  "    \"home\": {\"__extn\": {\"fn\": \"ip\", \"arg\": \"10.0.0.1\"}},"
  "    \"limit\": {\"__extn\": {\"fn\": \"decimal\", \"arg\": \"1.5\"}},"
  "    \"when\": {\"__extn\": {\"fn\": \"offset\", \"args\": ["
  "       {\"__extn\": {\"fn\": \"datetime\", \"arg\": \"2024-01-01\"}},"
  "       {\"__extn\": {\"fn\": \"duration\", \"arg\": \"1h\"}}]}}},"
  "  \"parents\": [{\"type\": \"Group\", \"id\": \"staff\"}],"
  "  \"tags\": {\"level\": 3}},"
  " {\"uid\": {\"__entity\": {\"type\": \"User\", \"id\": \"bob\"}}, \"attrs\": {}, \"parents\": []},"
  " {\"uid\": {\"type\": \"Group\", \"id\": \"staff\"}, \"attrs\": {},"
  "  \"parents\": [{\"type\": \"Group\", \"id\": \"all\"}]},"
  " {\"uid\": {\"type\": \"Doc\", \"id\": \"d\"}, \"attrs\": {\"owner\": {\"__entity\": "
  "  {\"type\": \"User\", \"id\": \"alice\"}}}, \"parents\": []}]";

static const char CONTEXT[] = "{\"n\": 5, \"flag\": true, \"rec\": {\"x\": 1},"
                              " \"big\": 9223372036854775807}";

typedef struct ctx {
  shk_cedar_entities *es;
  shk_cedar_request *req;
} ctx;

static int setup(void **state)
{
  static ctx c;
  shk_error err = { 0 };
  if (shk_cedar_entities_parse(ENTITIES, strlen(ENTITIES), NULL, &c.es, &err) < 0) {
    fprintf(stderr, "entities: %s\n", err.message);
    return -1;
  }
  if (shk_cedar_request_new("User::\"alice\"", "Action::\"view\"", "Doc::\"d\"", CONTEXT, NULL,
                            false, &c.req, &err) < 0) {
    fprintf(stderr, "request: %s\n", err.message);
    return -1;
  }
  *state = &c;
  return 0;
}

static int teardown(void **state)
{
  ctx *c = *state;
  shk_cedar_request_free(c->req);
  shk_cedar_entities_free(c->es);
  return 0;
}

/* Expected result of a `when` condition: true, false, or an error whose
 * message contains the text. */
typedef struct expr_case {
  const char *expr;
  const char *want; /* "true", "false", or "error: TEXT" */
} expr_case;

static const expr_case EXPRS[] = {
  /* literals, equality (never an error, false across types) */
  { "true", "true" },
  { "1 == 1", "true" },
  { "1 == \"1\"", "false" },
  { "\"a\" != \"b\"", "true" },
  { "User::\"alice\" == principal", "true" },
  { "[1, 2, 2] == [2, 1]", "true" },
  { "{a: 1, b: [true]} == {b: [true], a: 1}", "true" },
  { "{a: 1} == {a: 1, b: 2}", "false" },
  { "ip(\"10.0.0.1\") == principal.home", "true" },
  { "decimal(\"1.50\") == principal.limit", "true" },
  /* boolean operators and short-circuit */
  { "!false", "true" },
  { "!1", "error: type error" },
  { "false && (1 + \"a\" == 2)", "false" },
  { "true || principal.nope", "true" },
  { "true && 1", "error: type error" },
  { "1 && true", "error: type error" },
  { "false || 0", "error: type error" },
  { "if context.flag then 1 == 1 else principal.nope", "true" },
  { "if 1 then true else false", "error: type error" },
  /* arithmetic and overflow */
  { "1 + 2 * 3 == 7", "true" },
  { "-context.n == -5", "true" },
  { "context.big + 1 == 0", "error: overflow" },
  { "context.big * 2 == 0", "error: overflow" },
  { "-context.big - 2 == 0", "error: overflow" },
  { "-(-context.big - 1) == 0", "error: overflow" },
  { "1 + true == 2", "error: type error" },
  /* comparison */
  { "context.n < 6 && context.n <= 5 && context.n > 4 && context.n >= 5", "true" },
  { "\"a\" < \"b\"", "error: type error" },
  { "datetime(\"2024-01-01\") < principal.when", "true" },
  { "duration(\"1h\") > duration(\"59m\")", "true" },
  { "duration(\"1h\") > 1", "error: type error" },
  { "decimal(\"1.0\") < decimal(\"2.0\")", "error: type error" },
  /* hierarchy */
  { "principal in Group::\"all\"", "true" },
  { "principal in [Group::\"x\", Group::\"staff\"]", "true" },
  { "principal in [Group::\"x\", 1]", "error: type error" },
  { "principal in principal", "true" },
  { "User::\"nobody\" in Group::\"all\"", "false" },
  { "User::\"nobody\" in User::\"nobody\"", "true" },
  { "1 in Group::\"all\"", "error: type error" },
  { "principal in 1", "error: type error" },
  { "Group::\"staff\" in principal", "false" },
  /* is */
  { "principal is User", "true" },
  { "resource is User", "false" },
  { "1 is User", "error: type error" },
  /* attributes, has, missing entities */
  { "principal.age == 30", "true" },
  { "principal[\"name\"] == \"Alice\"", "true" },
  { "principal.addr.geo.lat == 48", "true" },
  { "principal has addr.geo.lat", "true" },
  { "principal has addr.geo.lon", "false" },
  { "principal has nope.x", "false" },
  { "principal.nope", "error: no attribute" },
  { "context.rec.y == 1", "error: no attribute" },
  { "principal.boss.age == 1", "error: no attribute" },
  { "principal.ghost.age == 1", "error: does not exist" },
  { "principal.ghost has age", "false" },
  { "resource.owner == principal", "true" },
  { "1 has x", "error: type error" },
  { "(1).x == 1", "error: type error" },
  { "context has flag", "true" },
  /* like */
  { "\"abc\" like \"a*c\"", "true" },
  { "\"abc\" like \"a*\"", "true" },
  { "\"abc\" like \"*b\"", "false" },
  { "\"a*c\" like \"a\\*c\"", "true" },
  { "\"abc\" like \"a\\*c\"", "false" },
  { "\"\" like \"*\"", "true" },
  { "\"aXbXc\" like \"*X*X*\"", "true" },
  { "1 like \"*\"", "error: type error" },
  /* sets */
  { "principal.langs.contains(\"en\")", "true" },
  { "principal.langs.containsAll([\"fr\", \"en\"])", "true" },
  { "principal.langs.containsAny([\"de\"])", "false" },
  { "[].isEmpty()", "true" },
  { "[1].contains(1) && ![[1]].contains([2])", "true" },
  { "(1).contains(1)", "error: type error" },
  { "[1].containsAll(1)", "error: type error" },
  /* tags */
  { "principal.hasTag(\"level\") && principal.getTag(\"level\") == 3", "true" },
  { "principal.hasTag(\"nope\")", "false" },
  { "principal.getTag(\"nope\") == 1", "error: no tag" },
  { "principal.ghost.hasTag(\"x\")", "false" },
  { "principal.ghost.getTag(\"x\") == 1", "error: does not exist" },
  { "principal.getTag(1) == 1", "error: type error" },
  /* ip */
  { "ip(\"10.0.0.1\").isIpv4() && !ip(\"::1\").isIpv4() && ip(\"::1\").isIpv6()", "true" },
  { "ip(\"127.0.0.2\").isLoopback() && ip(\"224.0.0.1\").isMulticast()", "true" },
  { "principal.home.isInRange(ip(\"10.0.0.0/8\"))", "true" },
  { "ip(\"10.0.0.0/8\").isInRange(ip(\"11.0.0.0/8\"))", "false" },
  { "ip(\"nope\") == ip(\"nope\")", "error: not a valid" },
  { "ip(1).isIpv4()", "error: type error" },
  { "principal.home.isInRange(1)", "error: type error" },
  /* decimal */
  { "decimal(\"1.23\").lessThan(decimal(\"1.24\"))", "true" },
  { "decimal(\"1.23\").lessThanOrEqual(decimal(\"1.23\"))", "true" },
  { "decimal(\"-1.0\").greaterThan(decimal(\"1.0\"))", "false" },
  { "decimal(\"2.0\").greaterThanOrEqual(decimal(\"1.9999\"))", "true" },
  { "decimal(\"1.23456\") == decimal(\"1\")", "error: not a valid" },
  { "decimal(\"1.0\").lessThan(1)", "error: type error" },
  /* datetime and duration */
  { "datetime(\"2024-01-01T10:00:00Z\").offset(duration(\"1d\")) == datetime(\"2024-01-02T10:00:00Z\")",
    "true" },
  { "datetime(\"2024-01-02\").durationSince(datetime(\"2024-01-01\")) == duration(\"24h\")", "true" },
  { "datetime(\"2024-01-01T10:30:00Z\").toDate() == datetime(\"2024-01-01\")", "true" },
  { "datetime(\"2024-01-01T10:30:00Z\").toTime() == duration(\"10h30m\")", "true" },
  { "duration(\"1d2h\").toDays() == 1 && duration(\"1d2h\").toHours() == 26", "true" },
  { "duration(\"2m1s\").toMinutes() == 2 && duration(\"2m1s\").toSeconds() == 121", "true" },
  { "duration(\"-1500ms\").toSeconds() == -1 && duration(\"1s\").toMilliseconds() == 1000", "true" },
  { "datetime(\"2024-01-01\").offset(duration(\"9223372036854775807ms\")) == datetime(\"2024-01-01\")",
    "error: overflow" },
  { "datetime(\"2024-13-01\") == datetime(\"2024-01-01\")", "error: not a valid" },
  { "duration(\"1h\").toDays(1) == 0", "error: takes" },
  /* records */
  { "{a: 1}.a == 1", "true" },
  { "{a: 1}.b == 1", "error: no attribute" },
  { "{a: 1} has a", "true" },
};

static void check_case(ctx *c, const char *policy, const char *want)
{
  shk_cedar_policy_set *ps = NULL;
  shk_error err = { 0 };
  int r = shk_cedar_policy_set_parse(policy, strlen(policy), &ps, &err);
  if (r < 0)
    fail_msg("parse failed for %s: %s", policy, err.message);
  shk_cedar_response resp = { 0 };
  assert_int_equal(shk_cedar_is_authorized(ps, c->es, c->req, &resp), 0);
  if (strncmp(want, "error:", 6) == 0) {
    if (resp.n_errors != 1 || resp.decision != SHK_CEDAR_DENY)
      fail_msg("%s: expected an error, got %s with %zu errors", policy,
               resp.decision ? "allow" : "deny", resp.n_errors);
    if (!strstr(resp.errors[0].message, want + 7))
      fail_msg("%s: expected an error containing '%s', got '%s'", policy, want + 7,
               resp.errors[0].message);
    assert_string_equal(resp.errors[0].policy_id, "policy0");
  } else {
    bool yes = strcmp(want, "true") == 0;
    if (resp.n_errors)
      fail_msg("%s: unexpected error %s", policy, resp.errors[0].message);
    if ((resp.decision == SHK_CEDAR_ALLOW) != yes)
      fail_msg("%s: expected %s", policy, want);
    assert_int_equal(resp.n_reasons, yes ? 1 : 0);
  }
  shk_cedar_response_clear(&resp);
  shk_cedar_policy_set_free(ps);
}

static void test_expressions(void **state)
{
  for (size_t i = 0; i < sizeof EXPRS / sizeof EXPRS[0]; i++) {
    char policy[1024];
    snprintf(policy, sizeof policy, "permit(principal, action, resource) when { %s };",
             EXPRS[i].expr);
    check_case(*state, policy, EXPRS[i].want);
  }
}

typedef struct scope_case {
  const char *scope;
  bool applies;
} scope_case;

static const scope_case SCOPES[] = {
  { "principal, action, resource", true },
  { "principal == User::\"alice\", action, resource", true },
  { "principal == User::\"bob\", action, resource", false },
  { "principal in Group::\"all\", action, resource", true },
  { "principal in Group::\"nope\", action, resource", false },
  { "principal is User, action, resource", true },
  { "principal is Group, action, resource", false },
  { "principal is User in Group::\"staff\", action, resource", true },
  { "principal is Group in Group::\"staff\", action, resource", false },
  { "principal, action == Action::\"view\", resource", true },
  { "principal, action in [Action::\"edit\", Action::\"view\"], resource", true },
  { "principal, action in [Action::\"edit\"], resource", false },
  { "principal, action, resource == Doc::\"d\"", true },
  { "principal, action, resource in Doc::\"d\"", true },
  { "principal, action, resource is Doc", true },
  { "principal, action, resource in Group::\"all\"", false },
};

static void test_scopes(void **state)
{
  for (size_t i = 0; i < sizeof SCOPES / sizeof SCOPES[0]; i++) {
    char policy[512];
    snprintf(policy, sizeof policy, "permit(%s);", SCOPES[i].scope);
    check_case(*state, policy, SCOPES[i].applies ? "true" : "false");
  }
}

/* Forbid overrides permit; errors are skipped and reported; the reasons
 * are the determining policies only. */
static void test_combination(void **state)
{
  ctx *c = *state;
  static const char *text =
    "permit(principal, action, resource);\n"                              /* policy0 */
    "permit(principal, action, resource) when { principal.nope };\n"     /* policy1: error */
    "forbid(principal, action, resource) when { context.n == 5 };\n"      /* policy2 */
    "forbid(principal, action, resource) when { context.n == 6 };\n"      /* policy3 */
    "forbid(principal, action, resource) when { 1 + \"x\" == 2 };\n";     /* policy4: error */
  shk_cedar_policy_set *ps = NULL;
  shk_error err = { 0 };
  assert_int_equal(shk_cedar_policy_set_parse(text, strlen(text), &ps, &err), 0);
  assert_int_equal(shk_cedar_policy_set_count(ps), 5);
  shk_cedar_response resp = { 0 };
  /* Twice, to check that the response's memory is reused correctly. */
  for (int round = 0; round < 2; round++) {
    assert_int_equal(shk_cedar_is_authorized(ps, c->es, c->req, &resp), 0);
    assert_int_equal(resp.decision, SHK_CEDAR_DENY);
    assert_int_equal(resp.n_reasons, 1);
    assert_string_equal(resp.reasons[0], "policy2");
    assert_int_equal(resp.n_errors, 2);
    assert_string_equal(resp.errors[0].policy_id, "policy1");
    assert_string_equal(resp.errors[1].policy_id, "policy4");
  }
  shk_cedar_response_clear(&resp);
  shk_cedar_policy_set_free(ps);

  /* No policy: deny by default. */
  assert_int_equal(shk_cedar_policy_set_parse("", 0, &ps, &err), 0);
  assert_int_equal(shk_cedar_is_authorized(ps, c->es, c->req, &resp), 0);
  assert_int_equal(resp.decision, SHK_CEDAR_DENY);
  assert_int_equal(resp.n_reasons, 0);
  shk_cedar_response_clear(&resp);
  shk_cedar_policy_set_free(ps);
}

static void test_templates(void **state)
{
  ctx *c = *state;
  static const char *text = "permit(principal == ?principal, action, resource in ?resource);";
  shk_cedar_policy_set *ps = NULL;
  shk_error err = { 0 };
  assert_int_equal(shk_cedar_policy_set_parse(text, strlen(text), &ps, &err), 0);
  shk_cedar_response resp = { 0 };
  /* A template alone decides nothing. */
  assert_int_equal(shk_cedar_is_authorized(ps, c->es, c->req, &resp), 0);
  assert_int_equal(resp.decision, SHK_CEDAR_DENY);
  assert_int_equal(shk_cedar_policy_set_link(ps, "policy0", "bob-link", "User::\"bob\"",
                                             "Doc::\"d\"", &err), 0);
  assert_int_equal(shk_cedar_is_authorized(ps, c->es, c->req, &resp), 0);
  assert_int_equal(resp.decision, SHK_CEDAR_DENY);
  assert_int_equal(shk_cedar_policy_set_link(ps, "policy0", "alice-link", "User::\"alice\"",
                                             "Doc::\"d\"", &err), 0);
  assert_int_equal(shk_cedar_is_authorized(ps, c->es, c->req, &resp), 0);
  assert_int_equal(resp.decision, SHK_CEDAR_ALLOW);
  assert_string_equal(resp.reasons[0], "alice-link");
  /* Ids are unique, and only templates link. */
  assert_true(shk_cedar_policy_set_link(ps, "policy0", "alice-link", "User::\"x\"", "Doc::\"d\"",
                                        &err) < 0);
  assert_true(shk_cedar_policy_set_link(ps, "alice-link", "l2", "User::\"x\"", "Doc::\"d\"",
                                        &err) < 0);
  assert_true(shk_cedar_policy_set_link(ps, "nope", "l3", "User::\"x\"", "Doc::\"d\"", &err) < 0);
  shk_cedar_response_clear(&resp);
  shk_cedar_policy_set_free(ps);
}

/* Entity JSON that must be rejected, and a word the message must hold. */
typedef struct bad_json {
  const char *json;
  const char *why;
} bad_json;

static const bad_json BAD_ENTITIES[] = {
  { "{}", "array" },
  { "[1]", "object" },
  { "[{\"attrs\": {}, \"parents\": []}]", "uid" },
  { "[{\"uid\": {\"type\": \"A\"}, \"attrs\": {}, \"parents\": []}]", "id" },
  { "[{\"uid\": {\"type\": \"1A\", \"id\": \"x\"}, \"attrs\": {}, \"parents\": []}]", "type name" },
  { "[{\"uid\": {\"type\": \"A\", \"id\": \"x\"}, \"attrs\": {}, \"parents\": [], \"x\": 1}]",
    "unexpected key" },
  { "[{\"uid\": {\"type\": \"A\", \"id\": \"x\"}, \"attrs\": {\"a\": 1.5}, \"parents\": []}]",
    "floating" },
  { "[{\"uid\": {\"type\": \"A\", \"id\": \"x\"}, \"attrs\": {\"a\": null}, \"parents\": []}]", "null" },
  { "[{\"uid\": {\"type\": \"A\", \"id\": \"x\"}, \"attrs\": {\"a\": {\"__extn\": {\"fn\": \"ip\", "
    "\"arg\": \"bad\"}}}, \"parents\": []}]", "not a valid" },
  { "[{\"uid\": {\"type\": \"A\", \"id\": \"x\"}, \"attrs\": {\"a\": {\"__extn\": {\"fn\": \"nope\", "
    "\"arg\": \"1\"}}}, \"parents\": []}]", "unknown extension" },
  { "[{\"uid\": {\"type\": \"A\", \"id\": \"x\"}, \"attrs\": {\"a\": {\"__extn\": {\"fn\": \"ip\"}}}, "
    "\"parents\": []}]", "arg" },
  { "[{\"uid\": {\"type\": \"A\", \"id\": \"x\"}, \"attrs\": {\"a\": {\"__expr\": \"1\"}}, "
    "\"parents\": []}]", "__expr" },
  { "[{\"uid\": {\"type\": \"A\", \"id\": \"x\"}, \"attrs\": {}, \"parents\": []},"
    " {\"uid\": {\"type\": \"A\", \"id\": \"x\"}, \"attrs\": {\"a\": 1}, \"parents\": []}]",
    "given twice" },
  { "[{\"uid\": {\"type\": \"A\", \"id\": \"x\"}, \"attrs\": {}, \"parents\": []},"
    " {\"uid\": {\"type\": \"A\", \"id\": \"x\"}, \"attrs\": {}, \"parents\": [{\"type\": \"A\", "
    "\"id\": \"y\"}]}]", "given twice" },
  { "[{\"uid\": {\"type\": \"A\", \"id\": \"x\"}, \"parents\": []}]", "missing \"attrs\"" },
  { "[{\"uid\": {\"type\": \"A\", \"id\": \"x\"}, \"attrs\": {}}]", "missing \"parents\"" },
  { "[{\"uid\": {\"type\": \"A\", \"id\": \"x\"}, \"attrs\": {}, \"parents\": [{\"type\": \"A\", "
    "\"id\": \"y\"}]}, {\"uid\": {\"type\": \"A\", \"id\": \"y\"}, \"attrs\": {}, \"parents\": "
    "[{\"type\": \"A\", \"id\": \"x\"}]}]", "cycle" },
  { "[{\"uid\": {\"type\": \"A\", \"id\": \"x\"}, \"attrs\": {\"a\": 1, \"a\": 2}, \"parents\": []}]",
    "duplicate" },
  { "[{\"uid\": {\"type\": \"A\", \"id\": \"x\"}, \"attrs\": [], \"parents\": []}]", "object" },
  { "[{\"uid\": {\"type\": \"A\", \"id\": \"x\"}, \"attrs\": {}, \"parents\": {}}]", "array" },
};

static void test_bad_entities(void **state)
{
  (void)state;
  for (size_t i = 0; i < sizeof BAD_ENTITIES / sizeof BAD_ENTITIES[0]; i++) {
    shk_cedar_entities *es = NULL;
    shk_error err = { 0 };
    int r = shk_cedar_entities_parse(BAD_ENTITIES[i].json, strlen(BAD_ENTITIES[i].json), NULL, &es,
                                     &err);
    if (r >= 0 || es)
      fail_msg("accepted: %s", BAD_ENTITIES[i].json);
    if (!strstr(err.message, BAD_ENTITIES[i].why))
      fail_msg("%s: message '%s' lacks '%s'", BAD_ENTITIES[i].json, err.message,
               BAD_ENTITIES[i].why);
  }
}

/* A large set: only the policies whose scope can match are evaluated, yet
 * every one that applies is found, including template links and policies
 * anchored on an ancestor; literals are folded once per set. */
static void test_many_policies(void **state)
{
  ctx *c = *state;
  enum { N = 3000 };
  size_t cap = (size_t)N * 200, n = 0;
  char *text = malloc(cap);
  for (int i = 0; i < N; i++)
    n += (size_t)snprintf(text + n, cap - n,
                          "permit(principal == User::\"u%d\", action, resource) when "
                          "{ ip(\"10.0.0.%d\").isIpv4() };\n", i, i % 256);
  n += (size_t)snprintf(text + n, cap - n,
                        "permit(principal in Group::\"all\", action, resource) when "
                        "{ principal.home.isInRange(ip(\"10.0.0.0/8\")) };\n"
                        "permit(principal == ?principal, action, resource);\n");
  shk_cedar_policy_set *ps = NULL;
  shk_error err = { 0 };
  if (shk_cedar_policy_set_parse(text, n, &ps, &err) < 0)
    fail_msg("parse: %s", err.message);
  free(text);
  char id[32], tmpl[32];
  snprintf(tmpl, sizeof tmpl, "policy%d", N + 1);
  for (int i = 0; i < 500; i++) {
    snprintf(id, sizeof id, "link%d", i);
    assert_int_equal(shk_cedar_policy_set_link(ps, tmpl, id, i == 499 ? "User::\"alice\"" : "User::\"x\"",
                                               NULL, &err), 0);
  }
  shk_cedar_response resp = { 0 };
  assert_int_equal(shk_cedar_is_authorized(ps, c->es, c->req, &resp), 0);
  assert_int_equal(resp.decision, SHK_CEDAR_ALLOW);
  assert_int_equal(resp.n_reasons, 2);
  snprintf(id, sizeof id, "policy%d", N);
  assert_string_equal(resp.reasons[0], id);
  assert_string_equal(resp.reasons[1], "link499");
  shk_cedar_response_clear(&resp);
  shk_cedar_policy_set_free(ps);
}

/* The same entity given twice, identically, is accepted. */
static void test_duplicate_entities(void **state)
{
  (void)state;
  static const char *json =
    "[{\"uid\": {\"type\": \"A\", \"id\": \"x\"}, \"attrs\": {\"a\": [1, 2]},"
    "  \"parents\": [{\"type\": \"G\", \"id\": \"1\"}, {\"type\": \"G\", \"id\": \"2\"}]},"
    " {\"uid\": {\"type\": \"A\", \"id\": \"x\"}, \"attrs\": {\"a\": [2, 1]},"
    "  \"parents\": [{\"type\": \"G\", \"id\": \"2\"}, {\"type\": \"G\", \"id\": \"1\"}]}]";
  shk_cedar_entities *es = NULL;
  shk_error err = { 0 };
  if (shk_cedar_entities_parse(json, strlen(json), NULL, &es, &err) < 0)
    fail_msg("entities: %s", err.message);
  shk_cedar_entities_free(es);
}

/* A deep chain: the closure is complete, and loading is quick. */
static void test_deep_hierarchy(void **state)
{
  (void)state;
  enum { N = 2000 };
  char *json = malloc((size_t)N * 128);
  size_t off = 0;
  off += (size_t)sprintf(json + off, "[");
  for (int i = 0; i < N; i++)
    off += (size_t)sprintf(json + off,
                           "%s{\"uid\":{\"type\":\"G\",\"id\":\"%d\"},\"attrs\":{},"
                           "\"parents\":[{\"type\":\"G\",\"id\":\"%d\"}]}",
                           i ? "," : "", i, i + 1);
  off += (size_t)sprintf(json + off, "]");
  shk_cedar_entities *es = NULL;
  shk_error err = { 0 };
  assert_int_equal(shk_cedar_entities_parse(json, off, NULL, &es, &err), 0);
  free(json);
  shk_cedar_policy_set *ps = NULL;
  static const char *text = "permit(principal in G::\"2000\", action, resource);"
                            "forbid(principal in G::\"2001\", action, resource);";
  assert_int_equal(shk_cedar_policy_set_parse(text, strlen(text), &ps, &err), 0);
  shk_cedar_request *req = NULL;
  assert_int_equal(shk_cedar_request_new("G::\"0\"", "A::\"a\"", "R::\"r\"", NULL, NULL, false,
                                         &req, &err), 0);
  shk_cedar_response resp = { 0 };
  assert_int_equal(shk_cedar_is_authorized(ps, es, req, &resp), 0);
  assert_int_equal(resp.decision, SHK_CEDAR_ALLOW);
  shk_cedar_response_clear(&resp);
  shk_cedar_request_free(req);
  shk_cedar_policy_set_free(ps);
  shk_cedar_entities_free(es);
}

static const char SCHEMA[] =
  "entity Group;\n"
  "entity User in [Group] { age: Long, home?: ipaddr, boss?: User, nick?: String };\n"
  "entity Doc tags Long;\n"
  "entity Color enum [\"red\", \"blue\"];\n"
  "action view appliesTo { principal: User, resource: Doc,\n"
  "  context: { ip: ipaddr, level?: decimal, who?: User } };\n";

/* With a schema, strings typed as extension values become them, entity
 * references may omit __entity, and the schema's actions join the store. */
static void test_schema_json(void **state)
{
  (void)state;
  shk_cedar_schema *s = NULL;
  shk_error err = { 0 };
  if (shk_cedar_schema_parse(SCHEMA, strlen(SCHEMA), SHK_CEDAR_SCHEMA_TEXT, &s, &err) < 0)
    fail_msg("schema: %s", err.message);
  static const char *good =
    "[{\"uid\": {\"type\": \"User\", \"id\": \"a\"}, \"attrs\": {\"age\": 3, \"home\": \"10.0.0.1\","
    " \"boss\": {\"type\": \"User\", \"id\": \"b\"}}, \"parents\": [{\"type\": \"Group\", \"id\": \"g\"}]},"
    " {\"uid\": {\"type\": \"Doc\", \"id\": \"d\"}, \"attrs\": {}, \"parents\": [], \"tags\": {\"t\": 1}}]";
  shk_cedar_entities *es = NULL;
  if (shk_cedar_entities_parse(good, strlen(good), s, &es, &err) < 0)
    fail_msg("entities: %s", err.message);
  shk_cedar_request *req = NULL;
  if (shk_cedar_request_new("User::\"a\"", "Action::\"view\"", "Doc::\"d\"",
                            "{\"ip\": \"192.168.0.1\", \"level\": {\"fn\": \"decimal\", \"arg\": \"0.5\"},"
                            " \"who\": {\"type\": \"User\", \"id\": \"b\"}}",
                            s, true, &req, &err) < 0)
    fail_msg("request: %s", err.message);
  static const char *text =
    "permit(principal in Group::\"g\", action in Action::\"view\", resource) when {"
    " principal.home.isInRange(ip(\"10.0.0.0/8\")) && principal.boss == context.who &&"
    " context.ip.isIpv4() && context.level.lessThan(decimal(\"1.0\")) && resource.getTag(\"t\") == 1 };";
  shk_cedar_policy_set *ps = NULL;
  assert_int_equal(shk_cedar_policy_set_parse(text, strlen(text), &ps, &err), 0);
  shk_cedar_response resp = { 0 };
  assert_int_equal(shk_cedar_is_authorized(ps, es, req, &resp), 0);
  if (resp.n_errors)
    fail_msg("error: %s", resp.errors[0].message);
  assert_int_equal(resp.decision, SHK_CEDAR_ALLOW);
  shk_cedar_response_clear(&resp);
  shk_cedar_policy_set_free(ps);
  shk_cedar_request_free(req);
  shk_cedar_entities_free(es);

  static const bad_json bad[] = {
    { "[{\"uid\": {\"type\": \"Nope\", \"id\": \"a\"}, \"attrs\": {}, \"parents\": []}]", "not declared" },
    { "[{\"uid\": {\"type\": \"User\", \"id\": \"a\"}, \"attrs\": {}, \"parents\": []}]", "required" },
    { "[{\"uid\": {\"type\": \"User\", \"id\": \"a\"}, \"attrs\": {\"age\": \"3\"}, \"parents\": []}]",
      "expected Long" },
    { "[{\"uid\": {\"type\": \"User\", \"id\": \"a\"}, \"attrs\": {\"age\": 3, \"x\": 1}, \"parents\": []}]",
      "not declared" },
    { "[{\"uid\": {\"type\": \"User\", \"id\": \"a\"}, \"attrs\": {\"age\": 3, \"home\": \"x\"}, \"parents\": []}]",
      "not a valid" },
    { "[{\"uid\": {\"type\": \"User\", \"id\": \"a\"}, \"attrs\": {\"age\": 3, \"boss\": {\"type\": "
      "\"Group\", \"id\": \"g\"}}, \"parents\": []}]", "expected User" },
    { "[{\"uid\": {\"type\": \"User\", \"id\": \"a\"}, \"attrs\": {\"age\": 3}, \"parents\": "
      "[{\"type\": \"Doc\", \"id\": \"d\"}]}]", "not allowed" },
    { "[{\"uid\": {\"type\": \"Group\", \"id\": \"g\"}, \"attrs\": {}, \"parents\": [], \"tags\": {\"a\": 1}}]",
      "no tags" },
    { "[{\"uid\": {\"type\": \"Doc\", \"id\": \"d\"}, \"attrs\": {}, \"parents\": [], \"tags\": {\"a\": \"s\"}}]",
      "expected Long" },
    { "[{\"uid\": {\"type\": \"Color\", \"id\": \"green\"}, \"attrs\": {}, \"parents\": []}]", "enumerated" },
    { "[{\"uid\": {\"type\": \"Action\", \"id\": \"edit\"}, \"attrs\": {}, \"parents\": []}]", "not declared" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    es = NULL;
    int r = shk_cedar_entities_parse(bad[i].json, strlen(bad[i].json), s, &es, &err);
    if (r >= 0 || es)
      fail_msg("accepted: %s", bad[i].json);
    if (!strstr(err.message, bad[i].why))
      fail_msg("%s: message '%s' lacks '%s'", bad[i].json, err.message, bad[i].why);
  }

  /* Request validation. */
  static const struct { const char *p, *a, *r, *ctx, *why; } badreq[] = {
    { "User::\"a\"", "Action::\"edit\"", "Doc::\"d\"", "{\"ip\": \"1.2.3.4\"}", "not declared" },
    { "Doc::\"a\"", "Action::\"view\"", "Doc::\"d\"", "{\"ip\": \"1.2.3.4\"}", "principal type" },
    { "User::\"a\"", "Action::\"view\"", "User::\"d\"", "{\"ip\": \"1.2.3.4\"}", "resource type" },
    { "User::\"a\"", "Action::\"view\"", "Doc::\"d\"", "{}", "required" },
    { "User::\"a\"", "Action::\"view\"", "Doc::\"d\"", "{\"ip\": 1}", "expects string" },
    { "User::\"a\"", "Action::\"view\"", "Doc::\"d\"", "{\"ip\": \"1.2.3.4\", \"z\": 1}", "not declared" },
    { "User::\"a\"", "Action::\"view\"", "Doc::\"d\"", "[]", "object" },
  };
  for (size_t i = 0; i < sizeof badreq / sizeof badreq[0]; i++) {
    req = NULL;
    int r = shk_cedar_request_new(badreq[i].p, badreq[i].a, badreq[i].r, badreq[i].ctx, s, true,
                                  &req, &err);
    if (r >= 0 || req)
      fail_msg("accepted request #%zu", i);
    if (!strstr(err.message, badreq[i].why))
      fail_msg("request #%zu: message '%s' lacks '%s'", i, err.message, badreq[i].why);
  }
  /* Without validation the context keeps the schema's parsing rules but
   * not its leaf types, as in the reference; the action must still be
   * declared, since its context type is needed to read the context. */
  req = NULL;
  assert_int_equal(shk_cedar_request_new("Doc::\"a\"", "Action::\"view\"", "Doc::\"d\"",
                                         "{\"ip\": \"1.2.3.4\", \"who\": {\"type\": \"Doc\", \"id\": \"x\"}}",
                                         s, false, &req, &err), 0);
  shk_cedar_request_free(req);
  req = NULL;
  assert_true(shk_cedar_request_new("User::\"a\"", "Action::\"view\"", "Doc::\"d\"", "{}", s, false,
                                    &req, &err) < 0);
  assert_non_null(strstr(err.message, "required"));
  assert_true(shk_cedar_request_new("User::\"a\"", "Action::\"edit\"", "Doc::\"d\"", "{}", s, false,
                                    &req, &err) < 0);
  assert_non_null(strstr(err.message, "not declared"));
  shk_cedar_schema_free(s);
}

/* With a schema, a parent may be of any type reachable through memberOf
 * (data often lists the whole closure), and of no other. */
static void test_schema_ancestors(void **state)
{
  (void)state;
  static const char *text = "entity Org; entity Group in [Org]; entity User in [Group]; entity Doc;";
  shk_cedar_schema *s = NULL;
  shk_error err = { 0 };
  if (shk_cedar_schema_parse(text, strlen(text), SHK_CEDAR_SCHEMA_TEXT, &s, &err) < 0)
    fail_msg("schema: %s", err.message);
  static const char *good = "[{\"uid\": {\"type\": \"User\", \"id\": \"a\"}, \"attrs\": {},"
                            " \"parents\": [{\"type\": \"Org\", \"id\": \"o\"}]}]";
  static const char *bad = "[{\"uid\": {\"type\": \"Group\", \"id\": \"g\"}, \"attrs\": {},"
                           " \"parents\": [{\"type\": \"User\", \"id\": \"a\"}]}]";
  shk_cedar_entities *es = NULL;
  if (shk_cedar_entities_parse(good, strlen(good), s, &es, &err) < 0)
    fail_msg("entities: %s", err.message);
  shk_cedar_entities_free(es);
  es = NULL;
  assert_true(shk_cedar_entities_parse(bad, strlen(bad), s, &es, &err) < 0);
  assert_null(es);
  assert_non_null(strstr(err.message, "not allowed"));
  shk_cedar_schema_free(s);
}

/* NUL and U+0001 in attribute names and ids survive the JSON reader, which
 * escapes them around jansson's refusal of NUL in keys. */
static void test_nul_keys(void **state)
{
  (void)state;
  static const char *ents =
    "[{\"uid\": {\"type\": \"U\", \"id\": \"a\\u0000b\"}, \"parents\": [],"
    "  \"attrs\": {\"k\\u0000\": 1, \"k\\u0001\": 2, \"k\": 3, \"\\u0001\\u00010\": 4}}]";
  shk_cedar_entities *es = NULL;
  shk_error err = { 0 };
  if (shk_cedar_entities_parse(ents, strlen(ents), NULL, &es, &err) < 0)
    fail_msg("entities: %s", err.message);
  static const char *text =
    "permit(principal == U::\"a\\0b\", action, resource) when {"
    " principal[\"k\\0\"] == 1 && principal[\"k\\u{1}\"] == 2 && principal.k == 3 &&"
    " principal[\"\\u{1}\\u{1}0\"] == 4 && !(principal has \"k\\0\\0\") &&"
    " context[\"\\0\"] == \"x\\0y\" };";
  shk_cedar_policy_set *ps = NULL;
  if (shk_cedar_policy_set_parse(text, strlen(text), &ps, &err) < 0)
    fail_msg("policy: %s", err.message);
  static const char *req_json =
    "{\"principal\": {\"type\": \"U\", \"id\": \"a\\u0000b\"}, \"action\": \"A::\\\"a\\\"\","
    " \"resource\": \"R::\\\"r\\\"\", \"context\": {\"\\u0000\": \"x\\u0000y\"}}";
  shk_cedar_request *req = NULL;
  if (shk_cedar_request_from_json(req_json, strlen(req_json), NULL, false, &req, &err) < 0)
    fail_msg("request: %s", err.message);
  shk_cedar_response resp = { 0 };
  assert_int_equal(shk_cedar_is_authorized(ps, es, req, &resp), 0);
  if (resp.n_errors)
    fail_msg("error: %s", resp.errors[0].message);
  assert_int_equal(resp.decision, SHK_CEDAR_ALLOW);
  shk_cedar_response_clear(&resp);
  shk_cedar_request_free(req);
  shk_cedar_policy_set_free(ps);
  shk_cedar_entities_free(es);
}

static void test_request_json(void **state)
{
  (void)state;
  shk_cedar_request *req = NULL;
  shk_error err = { 0 };
  static const char *good = "{\"principal\": \"User::\\\"alice\\\"\", \"action\": {\"type\": \"Action\","
                            " \"id\": \"view\"}, \"resource\": {\"__entity\": {\"type\": \"Doc\", \"id\": \"d\"}},"
                            " \"context\": {\"a\": [1, {\"__extn\": {\"fn\": \"ip\", \"arg\": \"::1\"}}]}}";
  assert_int_equal(shk_cedar_request_from_json(good, strlen(good), NULL, false, &req, &err), 0);
  shk_cedar_request_free(req);
  static const char *bad[] = {
    "[]",
    "{\"principal\": \"User::\\\"a\\\"\", \"action\": \"A::\\\"b\\\"\"}",
    "{\"principal\": \"User::\\\"a\\\"\", \"action\": \"A::\\\"b\\\"\", \"resource\": \"R::\\\"r\\\"\", \"x\": 1}",
    "{\"principal\": \"User::\\\"a\\\"\", \"action\": \"A::\\\"b\\\"\", \"resource\": \"R::\\\"r\\\"\", \"context\": 1}",
    "{\"principal\": \"User\", \"action\": \"A::\\\"b\\\"\", \"resource\": \"R::\\\"r\\\"\"}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    req = NULL;
    if (shk_cedar_request_from_json(bad[i], strlen(bad[i]), NULL, false, &req, &err) >= 0 || req)
      fail_msg("accepted: %s", bad[i]);
  }
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_expressions, setup, teardown),
    cmocka_unit_test_setup_teardown(test_scopes, setup, teardown),
    cmocka_unit_test_setup_teardown(test_combination, setup, teardown),
    cmocka_unit_test_setup_teardown(test_templates, setup, teardown),
    cmocka_unit_test(test_bad_entities),
    cmocka_unit_test_setup_teardown(test_many_policies, setup, teardown),
    cmocka_unit_test(test_duplicate_entities),
    cmocka_unit_test(test_deep_hierarchy),
    cmocka_unit_test(test_schema_json),
    cmocka_unit_test(test_schema_ancestors),
    cmocka_unit_test(test_nul_keys),
    cmocka_unit_test(test_request_json),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
