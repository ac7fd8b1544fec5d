/* SPDX-License-Identifier: Apache-2.0 */
/* shinken cedar format | translate-policy | translate-schema
 *
 *   format --policies F [--check]
 *       Prints the policies in the canonical layout. With --check, prints
 *       nothing and exits 0 when F is already formatted, 3 when it is not.
 *   translate-policy --direction cedar-to-json|json-to-cedar --policies F
 *   translate-schema --direction cedar-to-json|json-to-cedar --schema F
 *       Converts between the text and JSON forms, as the official CLI does.
 *
 * F may be "-" for standard input. Exit 1 on bad input, with one line
 * naming the problem and where it is. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/common.h"
#include "shinken/cedar.h"

enum { EXIT_OK = SHK_EXIT_OK, EXIT_BAD = SHK_EXIT_BAD_INPUT, EXIT_UNFORMATTED = SHK_EXIT_CHECK };

static char *read_input(const char *path, size_t *len)
{
  char *buf = NULL;
  int r = shk__read_file(!strcmp(path, "-") ? "/dev/stdin" : path, &buf, len);
  if (r < 0) {
    errno = -r;
    shk__die_errno(EXIT_BAD, "cannot read '%s'", path);
  }
  return buf;
}

SHK_NORETURN static void die_parse(const char *path, const shk_error *err)
{
  if (err->line)
    shk__die(EXIT_BAD, "%s:%u:%u: %s", path, err->line, err->column, err->message);
  shk__die(EXIT_BAD, "%s: %s", path, err->message);
}

typedef struct args {
  const char *file;       /* --policies or --schema */
  const char *direction;  /* --direction */
  bool check;             /* --check */
} args;

static args parse_args(int argc, char **argv, const char *file_flag, bool want_direction, const char *cmd)
{
  args a = { 0 };
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      exit(shk_cli_print_usage(cmd));
    } else if (!strcmp(argv[i], file_flag) && i + 1 < argc) {
      a.file = argv[++i];
    } else if (want_direction && !strcmp(argv[i], "--direction") && i + 1 < argc) {
      a.direction = argv[++i];
    } else if (!want_direction && !strcmp(argv[i], "--check")) {
      a.check = true;
    } else {
      shk_cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
    }
  }
  if (!a.file || (want_direction && !a.direction))
    shk_cli_usage_error(cmd, "missing %s%s", a.file ? "--direction" : file_flag,
                        want_direction && !a.direction && !a.file ? " and --direction" : "");
  if (want_direction && strcmp(a.direction, "cedar-to-json") && strcmp(a.direction, "json-to-cedar"))
    shk__die(EXIT_BAD, "--direction must be cedar-to-json or json-to-cedar, not '%s'", a.direction);
  return a;
}

static void put(char *text)
{
  if (!text)
    shk__die(EXIT_BAD, "out of memory");
  fputs(text, stdout);
  if (text[0] && text[strlen(text) - 1] != '\n')
    fputc('\n', stdout);
  free(text);
}

int shk_cli_cedar_format(int argc, char **argv)
{
  args a = parse_args(argc, argv, "--policies", false, "cedar format");
  size_t len;
  shk_autofree char *text = read_input(a.file, &len);
  shk_cedar_policy_set *ps = NULL;
  shk_error err = { 0 };
  if (shk_cedar_policy_set_parse(text, len, &ps, &err) < 0)
    die_parse(a.file, &err);
  char *out = shk_cedar_policy_set_to_text(ps);
  shk_cedar_policy_set_free(ps);
  if (!out)
    shk__die(EXIT_BAD, "out of memory");
  if (a.check) {
    bool same = strlen(out) == len && !memcmp(out, text, len);
    free(out);
    if (!same)
      fprintf(stderr, "shinken: %s is not formatted\n", a.file);
    return same ? EXIT_OK : EXIT_UNFORMATTED;
  }
  put(out);
  return EXIT_OK;
}

int shk_cli_cedar_translate_policy(int argc, char **argv)
{
  args a = parse_args(argc, argv, "--policies", true, "cedar translate-policy");
  size_t len;
  shk_autofree char *text = read_input(a.file, &len);
  shk_cedar_policy_set *ps = NULL;
  shk_error err = { 0 };
  bool to_json = !strcmp(a.direction, "cedar-to-json");
  int r = to_json ? shk_cedar_policy_set_parse(text, len, &ps, &err)
                  : shk_cedar_policy_set_parse_json(text, len, &ps, &err);
  if (r < 0)
    die_parse(a.file, &err);
  put(to_json ? shk_cedar_policy_set_to_json(ps) : shk_cedar_policy_set_to_text(ps));
  shk_cedar_policy_set_free(ps);
  return EXIT_OK;
}

int shk_cli_cedar_translate_schema(int argc, char **argv)
{
  args a = parse_args(argc, argv, "--schema", true, "cedar translate-schema");
  size_t len;
  shk_autofree char *text = read_input(a.file, &len);
  shk_cedar_schema *s = NULL;
  shk_error err = { 0 };
  bool to_json = !strcmp(a.direction, "cedar-to-json");
  if (shk_cedar_schema_parse(text, len, to_json ? SHK_CEDAR_SCHEMA_TEXT : SHK_CEDAR_SCHEMA_JSON, &s, &err) < 0)
    die_parse(a.file, &err);
  put(to_json ? shk_cedar_schema_to_json(s) : shk_cedar_schema_to_text(s));
  shk_cedar_schema_free(s);
  return EXIT_OK;
}
