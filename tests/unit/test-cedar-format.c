/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the formatter and the policy JSON reader and writer:
 * exact output for the precedence and escaping cases, and clear errors for
 * malformed policy JSON. (The round trip over the whole corpus is
 * tests/e2e/roundtrip.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shinken/cedar.h"

static char *fmt(const char *text)
{
  shk_cedar_policy_set *ps;
  shk_error err;
  if (shk_cedar_policy_set_parse(text, strlen(text), &ps, &err))
    fail_msg("does not parse: %s: %s", text, err.message);
  char *out = shk_cedar_policy_set_to_text(ps);
  shk_cedar_policy_set_free(ps);
  return out;
}

/* The condition of "permit (principal, action, resource) when { C };" as
 * formatted. */
static const struct {
  const char *in, *out;
} cases[] = {
  { "1 + 2 * 3 == 7", "1 + 2 * 3 == 7" },
  { "(1 + 2) * 3 == 9", "(1 + 2) * 3 == 9" },
  { "1 - (2 - 3) == 2", "1 - (2 - 3) == 2" },
  { "(1 - 2) - 3 == -4", "1 - 2 - 3 == -4" },
  { "-(5) == -5", "-(5) == -5" },
  { "- -5 == 5", "-(-5) == 5" },
  { "!!true", "!(!true)" },
  { "(true || false) && true", "(true || false) && true" },
  { "true || (false && true)", "true || false && true" },
  { "(if true then 1 else 2) == 1", "(if true then 1 else 2) == 1" },
  { "if true then 1 == 1 else false", "if true then 1 == 1 else false" },
  { "principal has a.b", "principal has a && principal.a has b" },
  { "principal has \"a b\"", "principal has \"a b\"" },
  { "principal[\"if\"] == 1", "principal[\"if\"] == 1" },
  { "context.s like \"a*b\\\\*c\"", "context.s like \"a*b\\\\*c\"" },
  { "\"tab\\tnl\\nq\\\"nul\\0\" == \"\"", "\"tab\\tnl\\nq\\\"nul\\0\" == \"\"" },
  { "[1, [2], {a: 1, \"b c\": 2}].contains(1)", "[1, [2], {a: 1, \"b c\": 2}].contains(1)" },
  { "ip(\"10.0.0.1\").isInRange(ip(\"10.0.0.0/8\"))", "ip(\"10.0.0.1\").isInRange(ip(\"10.0.0.0/8\"))" },
  { "(-1).lessThan(2) || true", "(-1).lessThan(2) || true" },
  { "principal is User in Group::\"g\"", "principal is User && principal in Group::\"g\"" },
  { "A::B::\"x\\\"y\" == resource", "A::B::\"x\\\"y\" == resource" },
};

static void formatter_output(void **state)
{
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char in[512], want[512];
    snprintf(in, sizeof in, "permit (principal, action, resource) when { %s };", cases[i].in);
    snprintf(want, sizeof want, "permit (\n  principal,\n  action,\n  resource\n)\nwhen { %s };\n", cases[i].out);
    char *got = fmt(in);
    if (strcmp(got, want))
      fail_msg("case %zu: %s\nwant: %s\ngot:  %s", i, cases[i].in, want, got);
    /* Formatting is idempotent. */
    char *again = fmt(got);
    assert_string_equal(again, got);
    free(again);
    free(got);
  }
}

static void scope_and_annotations(void **state)
{
  (void)state;
  char *got = fmt("@id(\"a\") @note forbid(principal is User in ?principal, action in [Action::\"r\", Action::\"w\"], resource == ?resource) unless { false };");
  assert_string_equal(got, "@id(\"a\")\n@note(\"\")\nforbid (\n  principal is User in ?principal,\n"
                           "  action in [Action::\"r\", Action::\"w\"],\n  resource == ?resource\n)\nunless { false };\n");
  free(got);
}

static void json_round_trip(void **state)
{
  (void)state;
  const char *text = "@id(\"x\") permit (principal in Group::\"g\", action, resource is Doc) "
                     "when { context.n > -3 && resource.tags.containsAny([\"a\"]) && !(principal has admin) } "
                     "unless { context.ip.isLoopback() };";
  shk_cedar_policy_set *a, *b;
  shk_error err;
  assert_int_equal(shk_cedar_policy_set_parse(text, strlen(text), &a, &err), 0);
  char *j = shk_cedar_policy_set_to_json(a);
  assert_non_null(strstr(j, "\"containsAny\""));
  assert_non_null(strstr(j, "\"isLoopback\""));
  assert_int_equal(shk_cedar_policy_set_parse_json(j, strlen(j), &b, &err), 0);
  char *j2 = shk_cedar_policy_set_to_json(b);
  assert_string_equal(j, j2);
  free(j);
  free(j2);
  shk_cedar_policy_set_free(a);
  shk_cedar_policy_set_free(b);
}

static void json_errors(void **state)
{
  (void)state;
  static const struct {
    const char *json, *msg;
  } bad[] = {
    { "{", "policy JSON" },
    { "[]", "expected a policy or a policy set" },
    { "{\"effect\":\"allow\",\"principal\":{\"op\":\"All\"},\"action\":{\"op\":\"All\"},\"resource\":{\"op\":\"All\"}}", "effect" },
    { "{\"effect\":\"permit\",\"principal\":{\"op\":\"Any\"},\"action\":{\"op\":\"All\"},\"resource\":{\"op\":\"All\"}}", "unknown op" },
    { "{\"effect\":\"permit\",\"principal\":{\"op\":\"All\"},\"action\":{\"op\":\"All\"},\"resource\":{\"op\":\"All\"},\"extra\":1}", "unknown key" },
    { "{\"effect\":\"permit\",\"principal\":{\"op\":\"All\"},\"action\":{\"op\":\"All\"},\"resource\":{\"op\":\"All\"},"
      "\"conditions\":[{\"kind\":\"when\",\"body\":{\"frob\":{}}}]}", "unknown operator" },
    { "{\"effect\":\"permit\",\"principal\":{\"op\":\"==\",\"entity\":{\"type\":\"if\",\"id\":\"a\"}},\"action\":{\"op\":\"All\"},\"resource\":{\"op\":\"All\"}}", "" },
    { "{\"effect\":\"permit\",\"principal\":{\"op\":\"All\"},\"action\":{\"op\":\"All\"},\"resource\":{\"op\":\"All\"},"
      "\"conditions\":[{\"kind\":\"when\",\"body\":{\"Value\":9223372036854775808}}]}", "" },
    { "{\"staticPolicies\":{},\"templateLinks\":[{\"templateId\":\"t\"}]}", "templateLinks" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    shk_cedar_policy_set *ps = NULL;
    shk_error err = { 0 };
    int r = shk_cedar_policy_set_parse_json(bad[i].json, strlen(bad[i].json), &ps, &err);
    if (r == 0 || ps || !err.message[0] || !strstr(err.message, bad[i].msg))
      fail_msg("case %zu: expected an error naming '%s', got %d '%s'", i, bad[i].msg, r, err.message);
  }
}

static void schema_writers(void **state)
{
  (void)state;
  const char *text = "namespace N { type T = { a?: Long }; entity Long; entity U in [G] = { t: T, n: __cedar::Long, "
                     "l: Long } tags String; entity G; entity E enum [\"x\", \"y\"]; "
                     "action \"do\" appliesTo { principal: U, resource: [G, E], context: T }; }";
  shk_cedar_schema *s, *s2, *s3;
  shk_error err;
  assert_int_equal(shk_cedar_schema_parse(text, strlen(text), SHK_CEDAR_SCHEMA_TEXT, &s, &err), 0);
  char *j = shk_cedar_schema_to_json(s);
  assert_int_equal(shk_cedar_schema_parse(j, strlen(j), SHK_CEDAR_SCHEMA_JSON, &s2, &err), 0);
  char *t = shk_cedar_schema_to_text(s2);
  /* The entity type called Long stays distinct from the built-in Long. */
  assert_non_null(strstr(t, "\"n\": __cedar::Long"));
  assert_non_null(strstr(t, "\"l\": N::Long"));
  if (shk_cedar_schema_parse(t, strlen(t), SHK_CEDAR_SCHEMA_TEXT, &s3, &err))
    fail_msg("written text does not parse: %s\n%s", err.message, t);
  char *j3 = shk_cedar_schema_to_json(s3);
  assert_string_equal(j, j3);
  free(j);
  free(t);
  free(j3);
  shk_cedar_schema_free(s);
  shk_cedar_schema_free(s2);
  shk_cedar_schema_free(s3);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(formatter_output),
    cmocka_unit_test(scope_and_annotations),
    cmocka_unit_test(json_round_trip),
    cmocka_unit_test(json_errors),
    cmocka_unit_test(schema_writers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
