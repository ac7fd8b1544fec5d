/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the strict validator (src/cedar/validate.c): a table of
 * (schema, policies, expectation) cases. An expectation is NULL when the
 * policies must validate, or a fragment every run must find in the message
 * of the first error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shinken/cedar.h"

static const char SCHEMA[] =
  "entity Group;\n"
  "entity User in [Group] {\n"
  "  name: String, age?: Long, manager?: User, tags: Set<String>,\n"
  "  info: { a: Long, b?: String }, boss: User\n"
  "} tags String;\n"
  "entity Doc { owner: User, ip: ipaddr, created: datetime, limit: decimal };\n"
  "entity Color enum [\"red\", \"green\"];\n"
  "action view appliesTo { principal: User, resource: Doc, context: { n: Long, s?: String } };\n"
  "action edit in [view] appliesTo { principal: [User], resource: [Doc] };\n"
  "action nothing;\n";

typedef struct vcase {
  const char *policies;
  const char *expect; /* NULL: valid; else a fragment of the first error */
} vcase;

#define P(cond) "permit(principal, action, resource) when { " cond " };"
/* Only `view` has a context; under `edit` the context is the empty record. */
#define V(cond) "permit(principal, action == Action::\"view\", resource) when { " cond " };"

static const vcase cases[] = {
  /* The scope alone. */
  { "permit(principal, action, resource);", NULL },
  { "permit(principal == User::\"a\", action == Action::\"view\", resource);", NULL },
  { "permit(principal is User, action, resource is Doc in Doc::\"d\");", NULL },
  { "permit(principal in Group::\"g\", action in [Action::\"view\", Action::\"edit\"], resource);", NULL },
  { "permit(principal in ?principal, action == Action::\"view\", resource == ?resource);", NULL },
  { "permit(principal == Doc::\"d\", action == Action::\"view\", resource);", "never apply" },
  { "permit(principal, action == Action::\"nothing\", resource);", "never apply" },
  { "permit(principal, action == Action::\"delete\", resource);", "unrecognized action" },
  { "permit(principal in Nope::\"x\", action, resource);", "unrecognized entity type" },
  { "permit(principal is Nope, action, resource);", "unrecognized entity type" },

  /* Attributes: required, optional behind has, in && and in if. */
  { P("principal.name == \"a\""), NULL },
  { P("principal has age && principal.age > 3"), NULL },
  { P("if principal has age then principal.age > 3 else false"), NULL },
  { P("principal has manager && principal.manager has age && principal.manager.age > 1"), NULL },
  { P("context has s && context.s like \"a*\""), NULL },
  { P("principal.info.a == 1 && (principal.info has b && principal.info.b == \"x\")"), NULL },
  { P("principal.age > 3"), "optional attribute" },
  { P("principal has age || principal.age > 3"), "optional attribute" },
  { P("(principal has age || true) && principal.age > 3"), "optional attribute" },
  { P("principal.manager.age > 1"), "optional attribute" },
  { P("principal.nope == 1"), "not found" },
  { P("context.nope == 1"), "not found" },
  { V("context.n has x"), "unexpected type" },
  { P("context.n == 1"), "not found" },
  { P("action == Action::\"view\" && context.n == 1"), NULL },
  /* A dead branch is not checked: resource is never a User here. */
  { P("resource is User && resource.nope"), NULL },
  { P("action == Action::\"edit\" || principal.name == \"x\""), NULL },
  { P("action in Action::\"nothing\" && principal.nope"), NULL },

  /* Equality and least upper bounds in strict mode. */
  { P("principal == resource"), NULL },
  { P("principal == principal.boss"), NULL },
  { P("principal.name == 1"), "incompatible types" },
  { P("{a: 1} == {a: 1, b: 2}"), "incompatible types" },
  { P("[1, \"a\"].contains(1)"), "incompatible types" },
  { P("[principal, resource].contains(principal)"), "incompatible types" },
  { V("(if context.n == 1 then 1 else \"a\") == 1"), "incompatible types" },
  { V("(if context.n == 1 then 1 else 2) == 1"), NULL },
  { P("[1, 2].contains(3) && [[1], [2]].contains([3])"), NULL },
  { P("[].isEmpty()"), "empty set" },
  { P("principal.tags.containsAll([1])"), "incompatible types" },
  { P("principal.tags.containsAny([\"x\"])"), NULL },
  { P("principal.tags.contains(1)"), "incompatible types" },

  /* Operators. */
  { P("1 + \"a\" == 2"), "unexpected type" },
  { P("principal.name"), "unexpected type" },
  { V("principal.name like \"a*\" && !(context.n < 3 || context.n >= 10)"), NULL },
  { P("principal in principal.tags"), "unexpected type" },
  { P("principal in [principal.boss]"), NULL },
  { P("principal.name.isEmpty()"), "unexpected type" },

  /* Extensions. */
  { P("resource.ip.isInRange(ip(\"10.0.0.0/8\")) && resource.ip.isLoopback()"), NULL },
  { P("resource.created < datetime(\"2024-01-01\")"), NULL },
  { P("resource.created.offset(duration(\"1h\")) > datetime(\"2024-01-01T00:00:00Z\")"), NULL },
  { P("resource.limit.lessThan(decimal(\"1.5\"))"), NULL },
  { P("resource.limit < decimal(\"1.5\")"), "unexpected type" },
  { P("ip(\"not an ip\").isIpv4()"), "not a valid" },
  { P("decimal(\"1.23456\").lessThan(resource.limit)"), "not a valid" },
  { P("ip(principal.name).isIpv4()"), "string literal" },
  { P("resource.ip.isInRange(decimal(\"1.0\"))"), "unexpected type" },

  /* Tags. */
  { P("principal.hasTag(\"k\") && principal.getTag(\"k\") == \"v\""), NULL },
  { P("principal.getTag(\"k\") == \"v\""), "hasTag" },
  { P("principal.hasTag(\"k\") && principal.getTag(\"j\") == \"v\""), "hasTag" },
  { P("resource.hasTag(\"k\") && resource.getTag(\"k\") == \"v\""), NULL },

  /* Enumerated entity types. */
  { P("Color::\"red\" != Color::\"green\""), NULL },
  { P("Color::\"blue\" == Color::\"red\""), "enumerated" },

  /* The finding names the policy. */
  { "permit(principal, action, resource);\n" P("principal.age > 3"), "policy1" },
};

static void run_case(const vcase *tc, shk_cedar_schema *schema)
{
  shk_cedar_policy_set *ps = NULL;
  shk_error err = { 0 };
  int r = shk_cedar_policy_set_parse(tc->policies, strlen(tc->policies), &ps, &err);
  if (r < 0)
    fail_msg("parse error in %s: %s", tc->policies, err.message);
  shk_cedar_validation_result vr = { 0 };
  assert_int_equal(shk_cedar_validate(ps, schema, &vr), 0);
  if (!tc->expect) {
    if (vr.n_errors)
      fail_msg("%s: expected valid, got: %s", tc->policies, vr.errors[0].message);
  } else {
    if (!vr.n_errors)
      fail_msg("%s: expected an error with '%s', got none", tc->policies, tc->expect);
    char full[1200];
    snprintf(full, sizeof full, "%s: %s", vr.errors[0].policy_id, vr.errors[0].message);
    if (!strstr(full, tc->expect))
      fail_msg("%s: expected '%s', got '%s'", tc->policies, tc->expect, full);
    assert_true(vr.errors[0].line > 0);
  }
  shk_cedar_validation_result_clear(&vr);
  assert_int_equal(vr.n_errors, 0);
  shk_cedar_policy_set_free(ps);
}

static void table(void **state)
{
  (void)state;
  shk_cedar_schema *schema = NULL;
  shk_error err = { 0 };
  if (shk_cedar_schema_parse(SCHEMA, strlen(SCHEMA), SHK_CEDAR_SCHEMA_TEXT, &schema, &err) < 0)
    fail_msg("schema: %u:%u: %s", err.line, err.column, err.message);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    run_case(&cases[i], schema);
  shk_cedar_schema_free(schema);
}

/* The same policy against the same schema in its JSON form. */
static void json_schema(void **state)
{
  (void)state;
  static const char js[] =
    "{\"\": {\"entityTypes\": {\"User\": {\"shape\": {\"type\": \"Record\", \"attributes\": {"
    "\"age\": {\"type\": \"Long\", \"required\": false}}}}},"
    "\"actions\": {\"view\": {\"appliesTo\": {\"principalTypes\": [\"User\"],"
    "\"resourceTypes\": [\"User\"]}}}}}";
  shk_cedar_schema *schema = NULL;
  shk_error err = { 0 };
  if (shk_cedar_schema_parse(js, strlen(js), SHK_CEDAR_SCHEMA_JSON, &schema, &err) < 0)
    fail_msg("schema: %s", err.message);
  const vcase ok = { P("principal has age && principal.age == resource.age"), "optional attribute" };
  const vcase ok2 = { P("principal has age && resource has age && principal.age == resource.age"), NULL };
  run_case(&ok, schema);
  run_case(&ok2, schema);
  shk_cedar_schema_free(schema);
}

/* Entity type hierarchies may have cycles; a dense one (every type a member
 * of every other) must be searched in linear time, not path by path. */
static void cyclic_hierarchy(void **state)
{
  (void)state;
  char schema_text[4096], *p = schema_text;
  const char *names = "ABCDEFGHIJKLMNOPQRST";
  for (const char *x = names; *x; x++) {
    p += sprintf(p, "entity %c in [", *x);
    for (const char *y = names; *y; y++)
      p += sprintf(p, "%s%c", y == names ? "" : ", ", *y);
    p += sprintf(p, "];\n");
  }
  strcpy(p, "entity Z; action go appliesTo { principal: A, resource: Z };\n");
  shk_cedar_schema *schema = NULL;
  shk_error err = { 0 };
  if (shk_cedar_schema_parse(schema_text, strlen(schema_text), SHK_CEDAR_SCHEMA_TEXT, &schema, &err) < 0)
    fail_msg("schema: %s", err.message);
  const vcase reach = { "permit(principal in T::\"t\", action, resource);", NULL };
  const vcase never = { "permit(principal in Z::\"z\", action, resource);", "never apply" };
  const vcase cond = { "permit(principal, action, resource) when { principal in Z::\"z\" || principal in T::\"t\" };", NULL };
  run_case(&reach, schema);
  run_case(&never, schema);
  run_case(&cond, schema);
  shk_cedar_schema_free(schema);
}

/* A template-linked policy is checked with its slots filled: a link to an
 * undeclared type, or to a type no action applies to, is refused under the
 * link's id while the template itself validates. */
static void links(void **state)
{
  (void)state;
  static const char text[] =
    "permit(principal == ?principal, action == Action::\"view\", resource) when { principal.name == \"a\" };";
  shk_cedar_schema *schema = NULL;
  shk_error err = { 0 };
  assert_int_equal(shk_cedar_schema_parse(SCHEMA, strlen(SCHEMA), SHK_CEDAR_SCHEMA_TEXT, &schema, &err), 0);
  shk_cedar_policy_set *ps = NULL;
  assert_int_equal(shk_cedar_policy_set_parse(text, strlen(text), &ps, &err), 0);
  shk_cedar_validation_result vr = { 0 };
  assert_int_equal(shk_cedar_validate(ps, schema, &vr), 0);
  assert_int_equal(vr.n_errors, 0);
  assert_int_equal(shk_cedar_policy_set_link(ps, "policy0", "good", "User::\"alice\"", NULL, &err), 0);
  assert_int_equal(shk_cedar_policy_set_link(ps, "policy0", "undeclared", "Nope::\"x\"", NULL, &err), 0);
  assert_int_equal(shk_cedar_policy_set_link(ps, "policy0", "wrong", "Doc::\"d\"", NULL, &err), 0);
  assert_int_equal(shk_cedar_validate(ps, schema, &vr), 0);
  bool undeclared = false, wrong = false;
  for (size_t i = 0; i < vr.n_errors; i++) {
    assert_string_not_equal(vr.errors[i].policy_id, "policy0");
    assert_string_not_equal(vr.errors[i].policy_id, "good");
    undeclared |= !strcmp(vr.errors[i].policy_id, "undeclared") &&
                  strstr(vr.errors[i].message, "unrecognized entity type");
    wrong |= !strcmp(vr.errors[i].policy_id, "wrong") && strstr(vr.errors[i].message, "never apply");
  }
  assert_true(undeclared);
  assert_true(wrong);
  shk_cedar_validation_result_clear(&vr);
  shk_cedar_policy_set_free(ps);
  shk_cedar_schema_free(schema);
}

/* The condition joins every when and unless clause with &&, so a policy
 * with many clauses is a tree as deep as it has clauses, whatever bound the
 * parser puts on each one: the checker must refuse one too deep to check,
 * not overflow its stack. */
static void deep_chain(void **state)
{
  (void)state;
  static const char head[] = "permit(principal, action, resource)";
  static const char term[] = " when { principal.name == \"a\" }";
  size_t n = 5000, len = sizeof head - 1 + n * (sizeof term - 1) + 2;
  char *text = malloc(len);
  assert_non_null(text);
  char *p = text;
  memcpy(p, head, sizeof head - 1);
  p += sizeof head - 1;
  for (size_t i = 0; i < n; i++, p += sizeof term - 1)
    memcpy(p, term, sizeof term - 1);
  memcpy(p, ";", 2);
  shk_cedar_schema *schema = NULL;
  shk_error err = { 0 };
  assert_int_equal(shk_cedar_schema_parse(SCHEMA, strlen(SCHEMA), SHK_CEDAR_SCHEMA_TEXT, &schema, &err), 0);
  shk_cedar_policy_set *ps = NULL;
  if (shk_cedar_policy_set_parse(text, strlen(text), &ps, &err) < 0)
    fail_msg("parse: %s", err.message);
  shk_cedar_validation_result vr = { 0 };
  assert_int_equal(shk_cedar_validate(ps, schema, &vr), 0);
  assert_true(vr.n_errors > 0);
  assert_non_null(strstr(vr.errors[0].message, "too deeply"));
  shk_cedar_validation_result_clear(&vr);
  shk_cedar_policy_set_free(ps);
  shk_cedar_schema_free(schema);
  free(text);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(table),
    cmocka_unit_test(deep_chain),
    cmocka_unit_test(links),
    cmocka_unit_test(cyclic_hierarchy),
    cmocka_unit_test(json_schema),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
