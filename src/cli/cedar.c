/* SPDX-License-Identifier: Apache-2.0 */
/* shinken cedar: the Cedar engine from the command line.
 *
 *   authorize    decide one request, or a file of requests (one per line)
 *   conformance  run test files in the official cedar-integration-tests format
 *   validate, format, translate-policy, translate-schema
 *                live in their own files (cedar-validate.c, cedar-format.c)
 *
 * Flags follow the official `cedar` CLI where it has the same command, and
 * so does authorize's exit status: 0 on ALLOW, 2 on DENY; the rest is the
 * table of src/cli/cli.h (1 bad input, 3 a failed conformance test, 64 a
 * usage error). */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/common.h"
#include "shinken/cedar.h"

enum { EXIT_ALLOW = SHK_EXIT_OK, EXIT_BAD_INPUT = SHK_EXIT_BAD_INPUT, EXIT_DENY = SHK_EXIT_REFUSED };

/* ---------------------------------------------------------------- loading */

static char *read_or_die(const char *what, const char *path, size_t *len)
{
  char *buf = NULL;
  int r = shk__read_file(path, &buf, len);
  if (r < 0) {
    errno = -r;
    shk__die_errno(EXIT_BAD_INPUT, "cannot read %s '%s'", what, path);
  }
  return buf;
}

/* "FILE:LINE:COL: message", or "FILE: message" when the error has no place. */
SHK_NORETURN static void die_parse(const char *path, const shk_error *err)
{
  if (err->line)
    shk__die(EXIT_BAD_INPUT, "%s:%u:%u: %s", path, err->line, err->column, err->message);
  shk__die(EXIT_BAD_INPUT, "%s: %s", path, err->message);
}

static bool ends_with(const char *s, const char *suffix)
{
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcmp(s + n - m, suffix);
}

/* A schema file is JSON when its name says so, and the human-readable
 * .cedarschema form otherwise; --schema-format overrides the guess. */
static shk_cedar_schema_format schema_format_of(const char *path, const char *forced)
{
  if (forced)
    return strcmp(forced, "json") ? SHK_CEDAR_SCHEMA_TEXT : SHK_CEDAR_SCHEMA_JSON;
  return ends_with(path, ".json") ? SHK_CEDAR_SCHEMA_JSON : SHK_CEDAR_SCHEMA_TEXT;
}

static shk_cedar_schema *load_schema(const char *path, const char *forced)
{
  if (!path)
    return NULL;
  size_t len;
  shk_autofree char *text = read_or_die("schema", path, &len);
  shk_cedar_schema *s = NULL;
  shk_error err = { 0 };
  if (shk_cedar_schema_parse(text, len, schema_format_of(path, forced), &s, &err) < 0)
    die_parse(path, &err);
  return s;
}

static shk_cedar_policy_set *load_policies(const char *path)
{
  size_t len;
  shk_autofree char *text = read_or_die("policies", path, &len);
  shk_cedar_policy_set *ps = NULL;
  shk_error err = { 0 };
  if (shk_cedar_policy_set_parse(text, len, &ps, &err) < 0)
    die_parse(path, &err);
  return ps;
}

/* Links templates as the official CLI's --template-linked file says: an
 * array of {"template_id", "link_id", "args": {"?principal": "T::\"id\"",
 * "?resource": ...}}. Any bad entry is bad input: nothing is half-linked
 * into a decision. */
static void load_links(shk_cedar_policy_set *ps, const char *path)
{
  json_error_t jerr;
  json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
  if (!root)
    shk__die(EXIT_BAD_INPUT, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
  if (!json_is_array(root))
    shk__die(EXIT_BAD_INPUT, "%s: expected an array of template links", path);
  size_t i;
  json_t *l;
  json_array_foreach(root, i, l) {
    const char *tid = json_string_value(json_object_get(l, "template_id"));
    const char *lid = json_string_value(json_object_get(l, "link_id"));
    json_t *args = json_object_get(l, "args");
    if (!tid || !lid || (args && !json_is_object(args)) || json_object_size(l) != (args ? 3u : 2u))
      shk__die(EXIT_BAD_INPUT, "%s: link %zu: expected {\"template_id\", \"link_id\", \"args\"}", path, i);
    const char *slot[2] = { NULL, NULL };
    const char *key;
    json_t *v;
    json_object_foreach(args, key, v) {
      int k = !strcmp(key, "?principal") ? 0 : !strcmp(key, "?resource") ? 1 : -1;
      if (k < 0 || !json_is_string(v))
        shk__die(EXIT_BAD_INPUT, "%s: link %zu: args take \"?principal\" and \"?resource\", each an entity "
                                 "like User::\"alice\"", path, i);
      slot[k] = json_string_value(v);
    }
    shk_error err = { 0 };
    if (shk_cedar_policy_set_link(ps, tid, lid, slot[0], slot[1], &err) < 0)
      shk__die(EXIT_BAD_INPUT, "%s: link %zu (%s): %s", path, i, lid, err.message);
  }
  json_decref(root);
}

static shk_cedar_entities *load_entities(const char *path, const shk_cedar_schema *schema)
{
  size_t len;
  shk_autofree char *text = read_or_die("entities", path, &len);
  shk_cedar_entities *es = NULL;
  shk_error err = { 0 };
  if (shk_cedar_entities_parse(text, len, schema, &es, &err) < 0)
    die_parse(path, &err);
  return es;
}

/* ---------------------------------------------------------------- output */

/* A JSON string literal. Control characters and the two characters JSON
 * reserves are escaped; everything else (UTF-8 included) passes through. */
static void put_json_str(FILE *f, const char *s)
{
  putc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') {
      putc('\\', f);
      putc(*p, f);
    } else if (*p == '\n') {
      fputs("\\n", f);
    } else if (*p < 0x20) {
      fprintf(f, "\\u%04x", *p);
    } else {
      putc(*p, f);
    }
  }
  putc('"', f);
}

/* {"decision":"allow","reasons":["policy0"],"errors":[{"policy":"p","message":"m"}]} */
static void put_json_response(FILE *f, const shk_cedar_response *r)
{
  fprintf(f, "{\"decision\":\"%s\",\"reasons\":[", r->decision == SHK_CEDAR_ALLOW ? "allow" : "deny");
  for (size_t i = 0; i < r->n_reasons; i++) {
    if (i)
      putc(',', f);
    put_json_str(f, r->reasons[i]);
  }
  fputs("],\"errors\":[", f);
  for (size_t i = 0; i < r->n_errors; i++) {
    fputs(i ? ",{\"policy\":" : "{\"policy\":", f);
    put_json_str(f, r->errors[i].policy_id);
    fputs(",\"message\":", f);
    put_json_str(f, r->errors[i].message);
    putc('}', f);
  }
  fputs("]}\n", f);
}

/* A policy's id, followed by its @id annotation when it has one, so that an
 * answer names the rule people wrote rather than its position in the file. */
static void put_policy_name(FILE *f, const shk_cedar_policy_set *ps, const char *id)
{
  char name[256];
  fputs(id, f);
  if (shk_cedar_policy_annotation(ps, id, "id", name, sizeof name) >= 0)
    fprintf(f, " (%s)", name);
}

static void put_text_response(FILE *f, const shk_cedar_policy_set *ps, const shk_cedar_response *r)
{
  fputs(r->decision == SHK_CEDAR_ALLOW ? "ALLOW\n" : "DENY\n", f);
  for (size_t i = 0; i < r->n_reasons; i++) {
    fputs(r->decision == SHK_CEDAR_ALLOW ? "  permitted by " : "  forbidden by ", f);
    put_policy_name(f, ps, r->reasons[i]);
    putc('\n', f);
  }
  if (r->decision == SHK_CEDAR_DENY && !r->n_reasons)
    fputs("  no policy permits this request (deny by default)\n", f);
  for (size_t i = 0; i < r->n_errors; i++) {
    fputs("  skipped ", f);
    put_policy_name(f, ps, r->errors[i].policy_id);
    fprintf(f, ": %s\n", r->errors[i].message);
  }
}

/* ---------------------------------------------------------------- authorize */

/* Reports an unknown option or a missing argument in one line. getopt's
 * own messages are turned off so that every complaint has the same form. */
SHK_NORETURN static void die_usage(const char *cmd, int argc, char **argv, int opt)
{
  const char *arg = optind - 1 < argc ? argv[optind - 1] : "";
  char which[64];
  snprintf(which, sizeof which, "cedar %s", cmd);
  if (opt == ':')
    shk_cli_usage_error(which, "option '%s' needs a value", arg);
  shk_cli_usage_error(which, "unknown option '%s'", arg);
}

/* Batch mode: each line of `in` is one request object; each answer is one
 * line of JSON, in order. A line that is not a valid request gets
 * {"error": ...} in its place, and the command then exits 1 at the end. The
 * policies and entities are parsed once for all the lines. */
static int authorize_batch(const shk_cedar_policy_set *ps, const shk_cedar_entities *es,
                           const shk_cedar_schema *schema, const char *path)
{
  FILE *in = strcmp(path, "-") ? fopen(path, "r") : stdin;
  if (!in)
    shk__die_errno(EXIT_BAD_INPUT, "cannot read requests '%s'", path);
  shk_cedar_response resp = { 0 };
  shk_autofree char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  int status = 0;
  while ((n = getline(&line, &cap, in)) >= 0) {
    if (strspn(line, " \t\r\n") == (size_t)n)
      continue;
    shk_cedar_request *req = NULL;
    shk_error err = { 0 };
    if (shk_cedar_request_from_json(line, (size_t)n, schema, schema != NULL, &req, &err) < 0 ||
        shk_cedar_is_authorized(ps, es, req, &resp) < 0) {
      fputs("{\"error\":", stdout);
      put_json_str(stdout, err.message[0] ? err.message : "the request could not be decided");
      fputs("}\n", stdout);
      status = EXIT_BAD_INPUT;
    } else {
      put_json_response(stdout, &resp);
    }
    shk_cedar_request_free(req);
  }
  if (ferror(in))
    shk__die_errno(EXIT_BAD_INPUT, "cannot read requests '%s'", path);
  if (in != stdin)
    fclose(in);
  shk_cedar_response_clear(&resp);
  return status;
}

static int cmd_authorize(int argc, char **argv)
{
  static const struct option opts[] = {
    { "policies", required_argument, NULL, 'p' },
    { "entities", required_argument, NULL, 'e' },
    { "schema", required_argument, NULL, 's' },
    { "schema-format", required_argument, NULL, 'f' },
    { "principal", required_argument, NULL, 'l' },
    { "action", required_argument, NULL, 'a' },
    { "resource", required_argument, NULL, 'r' },
    { "context", required_argument, NULL, 'c' },
    { "request-json", required_argument, NULL, 'j' },
    { "requests", required_argument, NULL, 'b' },
    { "template-linked", required_argument, NULL, 'k' },
    { "json", no_argument, NULL, 'J' },
    { "help", no_argument, NULL, 'h' },
    { 0 },
  };
  const char *policies = NULL, *entities = NULL, *schema_path = NULL, *schema_fmt = NULL;
  const char *principal = NULL, *action = NULL, *resource = NULL, *context = NULL;
  const char *request_json = NULL, *requests = NULL, *links = NULL;
  bool json = false;
  int opt;
  optind = 1;
  opterr = 0;
  /* The short options are the official CLI's (-l for the principal). */
  while ((opt = getopt_long(argc, argv, ":p:e:s:l:a:r:c:k:", opts, NULL)) != -1) {
    switch (opt) {
    case 'p': policies = optarg; break;
    case 'e': entities = optarg; break;
    case 's': schema_path = optarg; break;
    case 'f': schema_fmt = optarg; break;
    case 'l': principal = optarg; break;
    case 'a': action = optarg; break;
    case 'r': resource = optarg; break;
    case 'c': context = optarg; break;
    case 'j': request_json = optarg; break;
    case 'b': requests = optarg; break;
    case 'k': links = optarg; break;
    case 'J': json = true; break;
    case 'h': return shk_cli_print_usage("cedar authorize");
    default: die_usage("authorize", argc, argv, opt);
    }
  }
  if (optind < argc)
    shk_cli_usage_error("cedar authorize", "unexpected argument '%s'", argv[optind]);
  if (!policies || !entities)
    shk_cli_usage_error("cedar authorize", "--policies and --entities are required");
  if (schema_fmt && strcmp(schema_fmt, "json") && strcmp(schema_fmt, "cedar"))
    shk__die(EXIT_BAD_INPUT, "cedar authorize: --schema-format must be 'cedar' or 'json'");
  bool by_parts = principal || action || resource || context;
  if ((by_parts + !!request_json + !!requests) != 1)
    shk_cli_usage_error("cedar authorize", "give exactly one of --request-json, --requests, "
                        "or --principal/--action/--resource");
  if (by_parts && (!principal || !action || !resource))
    shk_cli_usage_error("cedar authorize", "--principal, --action and --resource go together");
  if (requests && json)
    shk_cli_usage_error("cedar authorize", "--requests always answers in JSON; drop --json");

  shk_cedar_schema *schema = load_schema(schema_path, schema_fmt);
  shk_cedar_policy_set *ps = load_policies(policies);
  if (links)
    load_links(ps, links);
  shk_cedar_entities *es = load_entities(entities, schema);
  int status;
  if (requests) {
    status = authorize_batch(ps, es, schema, requests);
  } else {
    /* With a schema the request is checked against it, as the official CLI
     * does: a request the schema does not allow is bad input, not a DENY. */
    shk_cedar_request *req = NULL;
    shk_error err = { 0 };
    int r;
    if (request_json) {
      size_t len;
      shk_autofree char *text = read_or_die("request", request_json, &len);
      r = shk_cedar_request_from_json(text, len, schema, schema != NULL, &req, &err);
    } else {
      shk_autofree char *ctx = context ? read_or_die("context", context, NULL) : NULL;
      r = shk_cedar_request_new(principal, action, resource, ctx, schema, schema != NULL, &req, &err);
    }
    if (r < 0)
      die_parse(request_json ? request_json : "request", &err);
    shk_cedar_response resp = { 0 };
    if (shk_cedar_is_authorized(ps, es, req, &resp) < 0)
      shk__die(EXIT_BAD_INPUT, "cedar authorize: the request could not be decided");
    if (json)
      put_json_response(stdout, &resp);
    else
      put_text_response(stdout, ps, &resp);
    status = resp.decision == SHK_CEDAR_ALLOW ? EXIT_ALLOW : EXIT_DENY;
    shk_cedar_response_clear(&resp);
    shk_cedar_request_free(req);
  }
  shk_cedar_entities_free(es);
  shk_cedar_policy_set_free(ps);
  shk_cedar_schema_free(schema);
  if (fflush(stdout) != 0)
    shk__die_errno(EXIT_BAD_INPUT, "cannot write the answer");
  return status;
}

/* ---------------------------------------------------------------- conformance */

/* Counts for one run over many test files. */
typedef struct conformance {
  const char *root;
  unsigned req_pass, req_fail, val_pass, val_fail;
} conformance;

/* Reads a file named inside a test file, relative to the root. */
static char *read_rel(const conformance *c, const char *rel, size_t *len, char *why, size_t why_n)
{
  shk_autofree char *path = shk__xasprintf("%s/%s", c->root, rel);
  char *buf = NULL;
  int r = shk__read_file(path, &buf, len);
  if (r < 0) {
    snprintf(why, why_n, "cannot read '%s': %s", path, strerror(-r));
    return NULL;
  }
  return buf;
}

/* Whether the JSON array of strings `want` and `got` hold the same set of
 * ids: every wanted id is present, and the counts of distinct ids agree. */
static bool json_strings_as_set_equal(json_t *want, const char **got, size_t n)
{
  if (!json_is_array(want))
    return false;
  size_t nw = json_array_size(want);
  size_t distinct = 0;
  for (size_t i = 0; i < n; i++) {
    bool dup = false;
    for (size_t j = 0; j < i && !dup; j++)
      dup = !strcmp(got[i], got[j]);
    distinct += !dup;
  }
  size_t wdistinct = 0;
  for (size_t i = 0; i < nw; i++) {
    const char *w = json_string_value(json_array_get(want, i));
    if (!w)
      return false;
    bool dup = false;
    for (size_t j = 0; j < i && !dup; j++)
      dup = !strcmp(w, json_string_value(json_array_get(want, j)));
    if (dup)
      continue;
    wdistinct++;
    bool found = false;
    for (size_t j = 0; j < n && !found; j++)
      found = !strcmp(w, got[j]);
    if (!found)
      return false;
  }
  return wdistinct == distinct;
}

static void put_id_list(FILE *f, const char **ids, size_t n)
{
  putc('[', f);
  for (size_t i = 0; i < n; i++)
    fprintf(f, "%s%s", i ? ", " : "", ids[i]);
  putc(']', f);
}

static void put_json_list(FILE *f, json_t *arr)
{
  putc('[', f);
  for (size_t i = 0; i < json_array_size(arr); i++) {
    const char *s = json_string_value(json_array_get(arr, i));
    fprintf(f, "%s%s", i ? ", " : "", s ? s : "?");
  }
  putc(']', f);
}

/* Everything one test file needs while its requests run. */
typedef struct test_file {
  conformance *c;
  const char *file;
  shk_cedar_schema *schema;
  shk_cedar_policy_set *ps;
  shk_cedar_entities *es;
  shk_cedar_response resp;
} test_file;

/* One request of a test file: build it (checked against the schema unless
 * the test says "validateRequest": false, as in the reference's harness),
 * decide it, and compare decision, reasons and errors. */
static void run_request(test_file *tf, json_t *jr)
{
  conformance *c = tf->c;
  shk_cedar_response *resp = &tf->resp;
  const char *desc = json_string_value(json_object_get(jr, "description"));
  const char *want_dec = json_string_value(json_object_get(jr, "decision"));
  json_t *want_reasons = json_object_get(jr, "reason");
  json_t *want_errors = json_object_get(jr, "errors");
  bool validate = !json_is_false(json_object_get(jr, "validateRequest"));
  desc = desc ? desc : "(no description)";

  /* The request proper, without the test's expectations; absent parts
   * stay absent so that the engine reports them. */
  json_t *q = json_object();
  static const char *const parts[] = { "principal", "action", "resource", "context" };
  for (size_t i = 0; i < 4; i++)
    if (json_object_get(jr, parts[i]))
      json_object_set(q, parts[i], json_object_get(jr, parts[i]));

  shk_cedar_request *req = NULL;
  shk_error err = { 0 };
  const char **got_errors = NULL;
  if (!want_dec) {
    printf("FAIL %s: %s: malformed test request\n", tf->file, desc);
    c->req_fail++;
  } else if (shk_cedar_request_from_json_value(q, tf->schema, validate, &req, &err) < 0) {
    printf("FAIL %s: %s: expected %s, but the request was refused: %s\n", tf->file, desc, want_dec,
           err.message);
    c->req_fail++;
  } else if (shk_cedar_is_authorized(tf->ps, tf->es, req, resp) < 0) {
    printf("FAIL %s: %s: expected %s, but the request could not be decided\n", tf->file, desc,
           want_dec);
    c->req_fail++;
  } else {
    const char *got_dec = resp->decision == SHK_CEDAR_ALLOW ? "allow" : "deny";
    got_errors = shk__xcalloc(resp->n_errors + 1, sizeof *got_errors);
    for (size_t i = 0; i < resp->n_errors; i++)
      got_errors[i] = resp->errors[i].policy_id;
    if (!strcasecmp(want_dec, got_dec) &&
        json_strings_as_set_equal(want_reasons, resp->reasons, resp->n_reasons) &&
        json_strings_as_set_equal(want_errors, got_errors, resp->n_errors)) {
      c->req_pass++;
    } else {
      c->req_fail++;
      printf("FAIL %s: %s: expected %s reasons ", tf->file, desc, want_dec);
      put_json_list(stdout, want_reasons);
      fputs(" errors ", stdout);
      put_json_list(stdout, want_errors);
      printf(", got %s reasons ", got_dec);
      put_id_list(stdout, resp->reasons, resp->n_reasons);
      fputs(" errors ", stdout);
      put_id_list(stdout, got_errors, resp->n_errors);
      putc('\n', stdout);
      for (size_t i = 0; i < resp->n_errors; i++)
        printf("    %s: %s\n", resp->errors[i].policy_id, resp->errors[i].message);
    }
  }
  free(got_errors);
  shk_cedar_request_free(req);
  json_decref(q);
}

/* Fails every request of a test file whose inputs could not be loaded. */
static void fail_file(conformance *c, const char *file, size_t n, const char *why)
{
  printf("FAIL %s: %s (%zu request%s not run)\n", file, why, n, n == 1 ? "" : "s");
  c->req_fail += (unsigned)(n ? n : 1);
}

/* Loads one input a test file names (a path relative to the root) with
 * `parse`, or explains why it could not. */
static bool load_input(test_file *tf, const char *what, json_t *name, char *why, size_t why_n,
                       int (*parse)(test_file *, const char *, size_t, const char *,
                                    shk_error *))
{
  const char *rel = json_string_value(name);
  size_t len;
  shk_error err = { 0 };
  if (!rel) {
    snprintf(why, why_n, "the test names no %s file", what);
    return false;
  }
  shk_autofree char *text = read_rel(tf->c, rel, &len, why, why_n);
  if (!text)
    return false;
  if (parse(tf, text, len, rel, &err) < 0) {
    snprintf(why, why_n, "%s %s:%u:%u: %s", what, rel, err.line, err.column, err.message);
    return false;
  }
  return true;
}

static int parse_schema_input(test_file *tf, const char *text, size_t len, const char *rel,
                              shk_error *err)
{
  return shk_cedar_schema_parse(text, len, schema_format_of(rel, NULL), &tf->schema, err);
}

static int parse_policies_input(test_file *tf, const char *text, size_t len, const char *rel,
                                shk_error *err)
{
  return shk_cedar_policy_set_parse(text, len, &tf->ps, err);
}

static int parse_entities_input(test_file *tf, const char *text, size_t len, const char *rel,
                                shk_error *err)
{
  return shk_cedar_entities_parse(text, len, tf->schema, &tf->es, err);
}

/* Whether the validator agrees with the file's shouldValidate. */
static void check_validation(conformance *c, const char *file, const shk_cedar_policy_set *ps,
                             const shk_cedar_schema *schema, json_t *should)
{
  shk_cedar_validation_result vr = { 0 };
  if (shk_cedar_validate(ps, schema, &vr) < 0) {
    printf("FAIL %s: validation could not run\n", file);
    c->val_fail++;
  } else if ((vr.n_errors == 0) != json_is_true(should)) {
    printf("FAIL %s: expected the policies to %s, got %zu validation error%s%s%s\n", file,
           json_is_true(should) ? "validate" : "fail validation", vr.n_errors,
           vr.n_errors == 1 ? "" : "s", vr.n_errors ? ", first: " : "",
           vr.n_errors ? vr.errors[0].message : "");
    c->val_fail++;
  } else {
    c->val_pass++;
  }
  shk_cedar_validation_result_clear(&vr);
}

/* One test file: its schema, policies and entities are parsed once, then
 * every request runs against them. Request contexts may hold NUL in their
 * keys, so the file is read with the engine's own JSON reader. */
static void run_test_file(conformance *c, const char *file)
{
  size_t len = 0;
  shk_autofree char *text = NULL;
  shk_error err = { 0 };
  int r = shk__read_file(file, &text, &len);
  json_t *t = r < 0 ? NULL : shk_cedar_json_parse(text, len, &err);
  if (!json_is_object(t) || !json_is_array(json_object_get(t, "requests"))) {
    printf("FAIL %s: not a test file: %s\n", file,
           r < 0 ? strerror(-r) : t ? "expected an object with a list of requests" : err.message);
    c->req_fail++;
    json_decref(t);
    return;
  }
  json_t *requests = json_object_get(t, "requests");
  json_t *should = json_object_get(t, "shouldValidate");
  test_file tf = { .c = c, .file = file };
  char why[700];
  if (!load_input(&tf, "schema", json_object_get(t, "schema"), why, sizeof why, parse_schema_input) ||
      !load_input(&tf, "policies", json_object_get(t, "policies"), why, sizeof why,
                  parse_policies_input)) {
    fail_file(c, file, json_array_size(requests), why);
    goto out;
  }
  if (json_is_boolean(should))
    check_validation(c, file, tf.ps, tf.schema, should);
  if (!load_input(&tf, "entities", json_object_get(t, "entities"), why, sizeof why,
                  parse_entities_input)) {
    fail_file(c, file, json_array_size(requests), why);
    goto out;
  }
  for (size_t i = 0; i < json_array_size(requests); i++)
    run_request(&tf, json_array_get(requests, i));
  shk_cedar_response_clear(&tf.resp);
out:
  shk_cedar_entities_free(tf.es);
  shk_cedar_policy_set_free(tf.ps);
  shk_cedar_schema_free(tf.schema);
  json_decref(t);
}

static int cmd_conformance(int argc, char **argv)
{
  static const struct option opts[] = {
    { "root", required_argument, NULL, 'r' },
    { "files-from", required_argument, NULL, 'F' },
    { "help", no_argument, NULL, 'h' },
    { 0 },
  };
  conformance c = { 0 };
  const char *files_from = NULL;
  int opt;
  optind = 1;
  opterr = 0;
  while ((opt = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
    switch (opt) {
    case 'r': c.root = optarg; break;
    case 'F': files_from = optarg; break;
    case 'h': return shk_cli_print_usage("cedar conformance");
    default: die_usage("conformance", argc, argv, opt);
    }
  }
  if (!c.root)
    shk_cli_usage_error("cedar conformance", "--root is required");
  if (optind == argc && !files_from)
    shk_cli_usage_error("cedar conformance", "no test files given");
  for (int i = optind; i < argc; i++)
    run_test_file(&c, argv[i]);
  if (files_from) {
    /* One test file per line, for corpora too large for a command line. */
    FILE *f = strcmp(files_from, "-") ? fopen(files_from, "r") : stdin;
    if (!f)
      shk__die_errno(EXIT_BAD_INPUT, "cannot read '%s'", files_from);
    shk_autofree char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0) {
      line[strcspn(line, "\r\n")] = '\0';
      if (line[0])
        run_test_file(&c, line);
    }
    if (f != stdin)
      fclose(f);
  }
  printf("validation: %u passed, %u failed\n", c.val_pass, c.val_fail);
  printf("%u passed, %u failed\n", c.req_pass, c.req_fail);
  return c.req_fail || c.val_fail ? SHK_EXIT_CHECK : SHK_EXIT_OK;
}

/* ---------------------------------------------------------------- dispatch */

static const struct {
  const char *name;
  int (*fn)(int, char **);
} subcommands[] = {
  { "authorize", cmd_authorize },
  { "validate", shk_cli_cedar_validate },
  { "format", shk_cli_cedar_format },
  { "translate-policy", shk_cli_cedar_translate_policy },
  { "translate-schema", shk_cli_cedar_translate_schema },
  { "conformance", cmd_conformance },
  { "analyze", shk_cli_cedar_analyze },
};

int shk_cli_cedar(int argc, char **argv)
{
  if (argc < 2)
    shk_cli_usage_error("cedar", "which command? (authorize, validate, format, ...)");
  const char *sub = argv[1];
  if (!strcmp(sub, "help") || !strcmp(sub, "--help") || !strcmp(sub, "-h"))
    return shk_cli_print_usage("cedar");
  for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++) {
    if (strcmp(sub, subcommands[i].name))
      continue;
    char which[64];
    snprintf(which, sizeof which, "cedar %s", sub);
    /* A subcommand without a usage here (analyze) answers --help itself. */
    if (shk_cli_wants_help(argc - 1, argv + 1) && shk_cli_usage(which))
      return shk_cli_print_usage(which);
    return subcommands[i].fn(argc - 1, argv + 1);
  }
  shk_cli_usage_error("cedar", "unknown command '%s'", sub);
}
