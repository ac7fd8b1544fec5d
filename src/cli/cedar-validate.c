/* SPDX-License-Identifier: Apache-2.0 */
/* shinken cedar validate --schema F --policies F [--json]
 *
 * Type-checks a policy file against a schema in strict mode. Exit status:
 * 0 when every policy validates, 3 when some do not, 1 on bad input (a file
 * that cannot be read or parsed, or a bad flag). The schema is JSON when its
 * name ends in .json and .cedarschema text otherwise. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/common.h"
#include "shinken/cedar.h"

enum { EXIT_VALID = SHK_EXIT_OK, EXIT_BAD = SHK_EXIT_BAD_INPUT, EXIT_INVALID = SHK_EXIT_CHECK };

static char *read_input(const char *what, const char *path, size_t *len)
{
  char *buf = NULL;
  int r = shk__read_file(path, &buf, len);
  if (r < 0) {
    errno = -r;
    shk__die_errno(EXIT_BAD, "cannot read %s '%s'", what, path);
  }
  return buf;
}

SHK_NORETURN static void die_parse(const char *path, const shk_error *err)
{
  if (err->line)
    shk__die(EXIT_BAD, "%s:%u:%u: %s", path, err->line, err->column, err->message);
  shk__die(EXIT_BAD, "%s: %s", path, err->message);
}

static void print_json(const shk_cedar_validation_result *r)
{
  json_t *errs = json_array();
  for (size_t i = 0; i < r->n_errors; i++) {
    const shk_cedar_validation_error *e = &r->errors[i];
    json_array_append_new(errs, json_pack("{s:s, s:I, s:I, s:s}", "policy", e->policy_id, "line",
                                          (json_int_t)e->line, "column", (json_int_t)e->column,
                                          "message", e->message));
  }
  json_t *o = json_pack("{s:b, s:o}", "valid", r->n_errors == 0, "errors", errs);
  char *s = json_dumps(o, JSON_INDENT(2));
  if (!s)
    shk__die(EXIT_BAD, "out of memory");
  puts(s);
  free(s);
  json_decref(o);
}

int shk_cli_cedar_validate(int argc, char **argv)
{
  const char *schema_path = NULL, *policies_path = NULL;
  bool json = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) {
      json = true;
    } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      return shk_cli_print_usage("cedar validate");
    } else if ((!strcmp(argv[i], "--schema") || !strcmp(argv[i], "--policies")) && i + 1 < argc) {
      const char **dst = argv[i][2] == 's' ? &schema_path : &policies_path;
      *dst = argv[++i];
    } else {
      shk_cli_usage_error("cedar validate", "unexpected argument '%s'", argv[i]);
    }
  }
  if (!schema_path || !policies_path)
    shk_cli_usage_error("cedar validate", "--schema and --policies are required");

  size_t len;
  shk_error err = { 0 };
  shk_autofree char *schema_text = read_input("schema", schema_path, &len);
  size_t n = strlen(schema_path);
  bool is_json = n >= 5 && !strcmp(schema_path + n - 5, ".json");
  shk_cedar_schema *schema = NULL;
  if (shk_cedar_schema_parse(schema_text, len,
                             is_json ? SHK_CEDAR_SCHEMA_JSON : SHK_CEDAR_SCHEMA_TEXT, &schema,
                             &err) < 0)
    die_parse(schema_path, &err);

  shk_autofree char *policy_text = read_input("policies", policies_path, &len);
  shk_cedar_policy_set *ps = NULL;
  if (shk_cedar_policy_set_parse(policy_text, len, &ps, &err) < 0)
    die_parse(policies_path, &err);

  shk_cedar_validation_result r = { 0 };
  int rc = shk_cedar_validate(ps, schema, &r);
  if (rc < 0) {
    errno = -rc;
    shk__die_errno(EXIT_BAD, "cannot validate '%s'", policies_path);
  }
  if (json) {
    print_json(&r);
  } else {
    for (size_t i = 0; i < r.n_errors; i++) {
      const shk_cedar_validation_error *e = &r.errors[i];
      if (e->line)
        printf("%s:%u:%u: %s: %s\n", policies_path, e->line, e->column, e->policy_id, e->message);
      else
        printf("%s: %s: %s\n", policies_path, e->policy_id, e->message);
    }
    if (r.n_errors == 0)
      puts("valid");
  }
  int status = r.n_errors == 0 ? EXIT_VALID : EXIT_INVALID;
  shk_cedar_validation_result_clear(&r);
  shk_cedar_policy_set_free(ps);
  shk_cedar_schema_free(schema);
  return status;
}
