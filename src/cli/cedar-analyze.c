/* SPDX-License-Identifier: Apache-2.0 */
/* shinken cedar analyze: questions about every request at once.
 *
 *   compare --schema S OLD NEW          is NEW equivalent to OLD, narrower, wider, incomparable?
 *   QUERY --schema S POLICIES [POLICIES2] [--policy ID [--policy ID2]]
 *                                        (a one-policy question with no --policy: every policy)
 *                                        never-errors, always-matches, never-matches,
 *                                        matches-equivalent, matches-implies, matches-disjoint,
 *                                        always-allows, always-denies, equivalent, implies, disjoint
 *   covers --schema S POLICIES --request F [--entities F]
 *          (--field F.G --path-prefix P|--host H|--cidr C|--ports R|--time LO-HI [--except X]...
 *           [--home-field F.H])...
 *                                        does the set allow every element the patterns cover?
 *   solver                               the solver's version
 *
 * Common flags: --assume EXPR (only requests where the Cedar expression
 * holds), --action A, --principal-type T, --resource-type T (only those
 * environments), --json, --solver PATH, --timeout MS.
 *
 * Exit status: 0 when the property holds (compare: equivalent or
 * narrower; covers: every element allowed), 3 when it does not (the
 * counterexamples are printed; compare: wider or incomparable), 1 on bad
 * input or a policy the analyzer refuses, 2 when the solver is missing,
 * fails, times out, or an answer fails the engine's check (a defect). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/common.h"
#include "shinken/cedar.h"
#include "shinken/policy.h"

enum { EXIT_HOLDS = 0, EXIT_BAD = 1, EXIT_SOLVER = 2, EXIT_FAILS = 3 };

typedef struct opts {
  const char *schema, *assume, *action, *ptype, *rtype, *solver;
  const char *files[2];
  size_t n_files;
  const char *policies[2];
  size_t n_policies;
  const char *request, *entities;
  shk_analysis_cover_field fields[SHK_ANALYSIS_MAX_COVER];
  size_t n_fields;
  shk_analysis_except except[SHK_ANALYSIS_MAX_COVER][32];
  long narrow;
  unsigned timeout;
  bool json;
} opts;

static void usage(FILE *f)
{
  fputs("usage: shinken cedar analyze compare --schema FILE OLD NEW [flags]\n"
        "       shinken cedar analyze QUERY --schema FILE POLICIES [POLICIES2] [--policy ID]... [flags]\n"
        "       shinken cedar analyze covers --schema FILE POLICIES --request FILE [--entities FILE]\n"
        "                (--field NAME.NAME (--path-prefix P | --host H | --cidr C | --ports LO-HI |\n"
        "                 --time LO-HI) [--except X | --except-exact PATH]... [--home-field NAME.NAME])...\n"
        "                [--narrow N] [flags]\n"
        "       shinken cedar analyze solver [--solver PATH]\n"
        "queries: never-errors always-matches never-matches matches-equivalent matches-implies\n"
        "         matches-disjoint always-allows always-denies equivalent implies disjoint\n"
        "flags: --assume EXPR --action A --principal-type T --resource-type T --json\n"
        "       --solver PATH --timeout MS\n", f);
}

/* Exit status for a failed analysis: the solver's troubles are 2, bad
 * input and refusals 1. */
SHK_NORETURN static void fail_with(int r, const shk_error *err)
{
  int code = r == -ETIMEDOUT || r == -EIO || r == -EPROTO ? EXIT_SOLVER : EXIT_BAD;
  shk__die(code, "cedar analyze: %s", err->message[0] ? err->message : shk_strerror(r));
}

static char *slurp(const char *what, const char *path)
{
  char *buf = NULL;
  int r = shk__read_file(path, &buf, NULL);
  if (r < 0) {
    errno = -r;
    shk__die_errno(EXIT_BAD, "cedar analyze: cannot read %s '%s'", what, path);
  }
  return buf;
}

static shk_cedar_schema *load_schema(const char *path)
{
  shk_autofree char *text = slurp("schema", path);
  size_t n = strlen(path);
  bool json = n >= 5 && !strcmp(path + n - 5, ".json");
  shk_cedar_schema *s = NULL;
  shk_error err = { 0 };
  if (shk_cedar_schema_parse(text, strlen(text), json ? SHK_CEDAR_SCHEMA_JSON : SHK_CEDAR_SCHEMA_TEXT, &s,
                             &err) < 0)
    shk__die(EXIT_BAD, "%s:%u:%u: %s", path, err.line, err.column, err.message);
  return s;
}

static shk_cedar_policy_set *load_policies(const char *path)
{
  shk_autofree char *text = slurp("policies", path);
  shk_cedar_policy_set *ps = NULL;
  shk_error err = { 0 };
  if (shk_cedar_policy_set_parse(text, strlen(text), &ps, &err) < 0)
    shk__die(EXIT_BAD, "%s:%u:%u: %s", path, err.line, err.column, err.message);
  return ps;
}

static shk_analysis_set *prepare(const shk_cedar_schema *s, const shk_cedar_policy_set *ps, const char *path)
{
  shk_analysis_set *set = NULL;
  shk_error err = { 0 };
  int r = shk_analysis_set_new(s, ps, &set, &err);
  if (r < 0) {
    fprintf(stderr, "shinken: cedar analyze: %s:\n", path);
    fail_with(r, &err);
  }
  return set;
}

static shk_analysis *open_solver(const opts *o)
{
  shk_analysis_options ao = { .solver = o->solver, .timeout_ms = o->timeout };
  shk_analysis *an = NULL;
  shk_error err = { 0 };
  int r = shk_analysis_open(&ao, &an, &err);
  if (r < 0)
    shk__die(EXIT_SOLVER, "cedar analyze: %s", err.message);
  return an;
}

/* ---------------------------------------------------------------- output */

/* A JSON text as a value; as a string when jansson cannot hold it (an
 * attribute name with a NUL in it). */
static json_t *embed(const char *text)
{
  json_t *j = json_loads(text, JSON_ALLOW_NUL, NULL);
  return j ? j : json_string(text);
}

static json_t *example_json(const shk_analysis_example *x)
{
  if (!x)
    return json_null();
  return json_pack("{s:s, s:s, s:o, s:o, s:s}", "env", x->env, "what", x->what, "request", embed(x->request),
                   "entities", embed(x->entities), "engine", x->decisions);
}

static void print_json(json_t *j)
{
  char *s = json_dumps(j, JSON_INDENT(2));
  if (!s)
    shk__die(EXIT_BAD, "out of memory");
  puts(s);
  free(s);
  json_decref(j);
}

static void print_example(const char *head, const shk_analysis_example *x)
{
  printf("  %s: %s\n", head, x->what);
  printf("    request:  %s\n", x->request);
  printf("    entities: %s\n", x->entities);
  printf("    engine:   %s\n", x->decisions);
}

/* ---------------------------------------------------------------- commands */

static int cmd_compare(const opts *o)
{
  if (o->n_files != 2)
    shk__die(EXIT_BAD, "cedar analyze compare: give OLD and NEW policy files");
  shk_cedar_schema *s = load_schema(o->schema);
  shk_cedar_policy_set *po = load_policies(o->files[0]), *pn = load_policies(o->files[1]);
  shk_analysis_set *so = prepare(s, po, o->files[0]), *sn = prepare(s, pn, o->files[1]);
  shk_analysis *an = open_solver(o);
  shk_analysis_scope sc = { o->assume, o->action, o->ptype, o->rtype };
  shk_analysis_comparison c;
  shk_error err = { 0 };
  int r = shk_analysis_compare(an, so, sn, &sc, &c, &err);
  if (r < 0)
    fail_with(r, &err);
  if (o->json) {
    json_t *envs = json_array();
    for (size_t i = 0; i < c.n_envs; i++)
      json_array_append_new(envs, json_pack("{s:s, s:s, s:o, s:o}", "env", c.envs[i].env, "relation",
                                            shk_analysis_relation_name(c.envs[i].rel), "wider",
                                            example_json(c.envs[i].wider), "narrower",
                                            example_json(c.envs[i].narrower)));
    print_json(json_pack("{s:s, s:o}", "relation", shk_analysis_relation_name(c.rel), "envs", envs));
  } else {
    for (size_t i = 0; i < c.n_envs; i++) {
      printf("%s: NEW is %s\n", c.envs[i].env, shk_analysis_relation_name(c.envs[i].rel));
      if (c.envs[i].wider)
        print_example("NEW allows, OLD denies", c.envs[i].wider);
      if (c.envs[i].narrower)
        print_example("OLD allows, NEW denies", c.envs[i].narrower);
    }
    puts(c.rel == SHK_ANALYSIS_SAME        ? "NEW is equivalent to OLD"
         : c.rel == SHK_ANALYSIS_NARROWER  ? "NEW is less permissive than OLD"
         : c.rel == SHK_ANALYSIS_WIDER     ? "NEW is more permissive than OLD"
                                           : "NEW and OLD are incomparable: each allows requests the other denies");
  }
  int status = c.rel == SHK_ANALYSIS_SAME || c.rel == SHK_ANALYSIS_NARROWER ? EXIT_HOLDS : EXIT_FAILS;
  shk_analysis_comparison_clear(&c);
  shk_analysis_close(an);
  shk_analysis_set_free(so);
  shk_analysis_set_free(sn);
  shk_cedar_policy_set_free(po);
  shk_cedar_policy_set_free(pn);
  shk_cedar_schema_free(s);
  return status;
}

static int cmd_query(const opts *o, shk_analysis_query q)
{
  bool per_policy = q <= SHK_ANALYSIS_MATCHES_DISJOINT;
  bool pair = q == SHK_ANALYSIS_MATCHES_EQUIVALENT || q == SHK_ANALYSIS_MATCHES_IMPLIES ||
              q == SHK_ANALYSIS_MATCHES_DISJOINT || q == SHK_ANALYSIS_EQUIVALENT || q == SHK_ANALYSIS_IMPLIES ||
              q == SHK_ANALYSIS_DISJOINT;
  if (o->n_files < 1 || (!pair && o->n_files > 1) || (pair && !per_policy && o->n_files != 2))
    shk__die(EXIT_BAD, "cedar analyze %s: give %s", shk_analysis_query_name(q),
             pair && !per_policy ? "two policy files" : pair ? "one or two policy files" : "one policy file");
  /* A question about one policy, with none named, is asked of each. */
  bool each = per_policy && !pair && o->n_policies == 0;
  if (per_policy && !each && o->n_policies != (pair ? 2u : 1u))
    shk__die(EXIT_BAD, "cedar analyze %s: name %s with --policy", shk_analysis_query_name(q),
             pair ? "two policies" : "the policy");
  shk_cedar_schema *s = load_schema(o->schema);
  shk_cedar_policy_set *pa = load_policies(o->files[0]);
  shk_cedar_policy_set *pb = o->n_files > 1 ? load_policies(o->files[1]) : NULL;
  shk_analysis_set *sa = prepare(s, pa, o->files[0]), *sb = pb ? prepare(s, pb, o->files[1]) : NULL;
  shk_analysis *an = open_solver(o);
  shk_analysis_scope sc = { o->assume, o->action, o->ptype, o->rtype };
  size_t n = each ? shk_cedar_policy_set_count(pa) : 1;
  json_t *xs = json_array();
  bool all = true;
  size_t n_envs = 0;
  for (size_t k = 0; k < n; k++) {
    const char *pid = each ? shk_cedar_policy_id(pa, k) : o->policies[0];
    shk_analysis_result res;
    shk_error err = { 0 };
    int r = shk_analysis_check(an, q, sa, pid, sb ? sb : pair ? sa : NULL, o->policies[1], &sc, &res, &err);
    if (r < 0)
      fail_with(r, &err);
    all = all && res.holds;
    n_envs = res.n_envs;
    for (size_t i = 0; i < res.n_examples; i++) {
      if (o->json) {
        json_array_append_new(xs, example_json(&res.examples[i]));
        continue;
      }
      printf("%s: %s%s%s does not hold\n", res.examples[i].env, shk_analysis_query_name(q), per_policy ? " of " : "",
             per_policy ? pid : "");
      print_example("counterexample", &res.examples[i]);
    }
    shk_analysis_result_clear(&res);
  }
  if (o->json)
    print_json(json_pack("{s:s, s:b, s:I, s:o}", "query", shk_analysis_query_name(q), "holds", all, "envs",
                         (json_int_t)n_envs, "examples", xs));
  else {
    json_decref(xs);
    printf("%s %s (%zu environment%s%s)\n", shk_analysis_query_name(q), all ? "holds" : "does not hold", n_envs,
           n_envs == 1 ? "" : "s", each ? ", every policy" : "");
  }
  int status = all ? EXIT_HOLDS : EXIT_FAILS;
  shk_analysis_close(an);
  shk_analysis_set_free(sa);
  shk_analysis_set_free(sb);
  shk_cedar_policy_set_free(pa);
  shk_cedar_policy_set_free(pb);
  shk_cedar_schema_free(s);
  return status;
}

static int cmd_covers(const opts *o)
{
  if (o->n_files != 1 || !o->request || !o->n_fields)
    shk__die(EXIT_BAD, "cedar analyze covers: give one policy file, --request, and --field with a pattern");
  for (size_t k = 0; k < o->n_fields; k++)
    if (!o->fields[k].pattern)
      shk__die(EXIT_BAD, "cedar analyze covers: --field %s has no pattern", o->fields[k].field);
  shk_cedar_schema *s = load_schema(o->schema);
  shk_cedar_policy_set *ps = load_policies(o->files[0]);
  shk_analysis_set *set = prepare(s, ps, o->files[0]);
  shk_analysis *an = open_solver(o);
  shk_autofree char *req = slurp("request", o->request);
  shk_autofree char *ents = o->entities ? slurp("entities", o->entities) : NULL;
  shk_analysis_cover_query q = { req, ents, o->fields, o->n_fields, false };
  shk_error err = { 0 };
  int status;
  if (o->narrow > 0) {
    shk_analysis_narrowing nw;
    int r = shk_analysis_narrow(an, set, &q, (size_t)o->narrow, &nw, &err);
    if (r < 0)
      fail_with(r, &err);
    printf("%s\n", nw.first.why);
    if (nw.found) {
      printf("allowed once these are left out:\n");
      for (size_t i = 0; i < nw.n_except; i++)
        printf("  %s: %s%s\n", o->fields[nw.except[i].field].field, nw.except[i].text,
               nw.except[i].exact ? " (this path alone)" : "");
    } else if (!nw.first.allowed) {
      printf("no narrowing within %ld exclusions\n", o->narrow);
    }
    status = nw.first.allowed ? EXIT_HOLDS : EXIT_FAILS;
    shk_analysis_narrowing_clear(&nw);
  } else {
    shk_analysis_cover_result res;
    int r = shk_analysis_cover(an, set, &q, &res, &err);
    if (r < 0)
      fail_with(r, &err);
    if (o->json) {
      json_t *w = json_object();
      for (size_t k = 0; w && !res.allowed && k < o->n_fields; k++)
        json_object_set_new(w, o->fields[k].field, json_string(res.witness[k]));
      print_json(json_pack("{s:b, s:o, s:s, s:s}", "allowed", res.allowed, "witness", w, "policy", res.policy,
                           "why", res.why));
    }
    else
      printf("%s\n", res.why);
    status = res.allowed ? EXIT_HOLDS : EXIT_FAILS;
  }
  shk_analysis_close(an);
  shk_analysis_set_free(set);
  shk_cedar_policy_set_free(ps);
  shk_cedar_schema_free(s);
  return status;
}

int shk_cli_cedar_analyze(int argc, char **argv)
{
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? EXIT_BAD : EXIT_HOLDS;
  }
  const char *cmd = argv[1];
  opts o = { .timeout = 0 };
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define VAL()                                                                     \
  do {                                                                            \
    if (!v)                                                                       \
      shk__die(EXIT_BAD, "cedar analyze: %s needs a value", a);                   \
    i++;                                                                          \
  } while (0)
    if (!strcmp(a, "--schema")) { VAL(); o.schema = v; }
    else if (!strcmp(a, "--assume")) { VAL(); o.assume = v; }
    else if (!strcmp(a, "--action")) { VAL(); o.action = v; }
    else if (!strcmp(a, "--principal-type")) { VAL(); o.ptype = v; }
    else if (!strcmp(a, "--resource-type")) { VAL(); o.rtype = v; }
    else if (!strcmp(a, "--solver")) { VAL(); o.solver = v; }
    else if (!strcmp(a, "--request")) { VAL(); o.request = v; }
    else if (!strcmp(a, "--entities")) { VAL(); o.entities = v; }
    else if (!strcmp(a, "--field")) {
      VAL();
      if (o.n_fields == SHK_ANALYSIS_MAX_COVER)
        shk__die(EXIT_BAD, "cedar analyze: at most %d --field", SHK_ANALYSIS_MAX_COVER);
      o.fields[o.n_fields].except = o.except[o.n_fields];
      o.fields[o.n_fields++].field = v;
    }
    else if (!strcmp(a, "--json")) o.json = true;
    else if (!strcmp(a, "--timeout")) {
      VAL();
      char *end;
      unsigned long t = strtoul(v, &end, 10);
      if (*end || t == 0 || t > 3600000)
        shk__die(EXIT_BAD, "cedar analyze: --timeout takes milliseconds, 1 to 3600000");
      o.timeout = (unsigned)t;
    } else if (!strcmp(a, "--narrow")) {
      VAL();
      char *end;
      o.narrow = strtol(v, &end, 10);
      if (*end || o.narrow < 1 || o.narrow > 64)
        shk__die(EXIT_BAD, "cedar analyze: --narrow takes a number of exclusions, 1 to 64");
    } else if (!strcmp(a, "--policy")) {
      VAL();
      if (o.n_policies == 2)
        shk__die(EXIT_BAD, "cedar analyze: at most two --policy");
      o.policies[o.n_policies++] = v;
    } else if (!strcmp(a, "--path-prefix") || !strcmp(a, "--host") || !strcmp(a, "--cidr") ||
               !strcmp(a, "--ports") || !strcmp(a, "--time")) {
      VAL();
      shk_analysis_cover_field *f = o.n_fields ? &o.fields[o.n_fields - 1] : NULL;
      if (!f || f->pattern)
        shk__die(EXIT_BAD, "cedar analyze: %s needs a --field of its own before it", a);
      f->pattern = v;
      f->kind = !strcmp(a, "--path-prefix") ? SHK_ANALYSIS_PATH_PREFIX
              : !strcmp(a, "--host")        ? SHK_ANALYSIS_HOST_PATTERN
              : !strcmp(a, "--cidr")        ? SHK_ANALYSIS_CIDR
              : !strcmp(a, "--ports")       ? SHK_ANALYSIS_PORT_RANGE
                                            : SHK_ANALYSIS_TIME_RANGE;
    } else if (!strcmp(a, "--home-field")) {
      VAL();
      if (!o.n_fields)
        shk__die(EXIT_BAD, "cedar analyze: %s belongs to a --field", a);
      o.fields[o.n_fields - 1].home_field = v;
    } else if (!strcmp(a, "--except") || !strcmp(a, "--except-exact")) {
      VAL();
      shk_analysis_cover_field *f = o.n_fields ? &o.fields[o.n_fields - 1] : NULL;
      if (!f)
        shk__die(EXIT_BAD, "cedar analyze: %s belongs to a --field", a);
      if (f->n_except == sizeof o.except[0] / sizeof o.except[0][0])
        shk__die(EXIT_BAD, "cedar analyze: too many --except");
      o.except[o.n_fields - 1][f->n_except++] = (shk_analysis_except){ v, a[8] == '-', 0 };
    } else if (a[0] == '-' && a[1]) {
      usage(stderr);
      shk__die(EXIT_BAD, "cedar analyze: unknown flag '%s'", a);
    } else {
      if (o.n_files == 2)
        shk__die(EXIT_BAD, "cedar analyze: at most two policy files");
      o.files[o.n_files++] = a;
    }
#undef VAL
  }
  if (!strcmp(cmd, "solver")) {
    shk_analysis *an = open_solver(&o);
    printf("%s\n", shk_analysis_solver_version(an));
    shk_analysis_close(an);
    return EXIT_HOLDS;
  }
  if (!o.schema)
    shk__die(EXIT_BAD, "cedar analyze %s: --schema is required", cmd);
  if (!strcmp(cmd, "compare"))
    return cmd_compare(&o);
  if (!strcmp(cmd, "covers"))
    return cmd_covers(&o);
  int q = shk_analysis_query_parse(cmd);
  if (q < 0) {
    usage(stderr);
    shk__die(EXIT_BAD, "cedar analyze: unknown question '%s'", cmd);
  }
  return cmd_query(&o, (shk_analysis_query)q);
}
