/* SPDX-License-Identifier: Apache-2.0 */
/* The Cedar engine out of memory, in the manner of SQLite's fault
 * injection: each public function is run with its Nth allocation failing,
 * for N = 1, 2, 3, ... until a run makes no failing allocation. Every run
 * must either come back with -ENOMEM ("out of memory" in the error when the
 * function takes one, NULL for the functions that return text) and leave
 * what it was given as it was, or give exactly the answer of the run
 * without failures; and nothing may leak (LeakSanitizer checks at exit) or
 * crash. Each case runs twice: with only the Nth allocation failing, and
 * with every allocation from the Nth on failing.
 *
 * With every failure from the Nth on, jansson's allocations go through the
 * same counter (json_set_alloc_funcs), so a failure inside the JSON parser
 * is injected too. With one failure alone they do not: jansson 2.14 drops a
 * byte of a token when its buffer cannot grow once and grows the next time
 * (lex_save ignores strbuffer_append_byte's result), which changes the text
 * it parsed without an error, and can free a pointer it did not allocate:
 * a defect of jansson that no caller can work around.
 *
 * Needs the build option -Dfault_injection=true (scripts/check.sh sets it);
 * without it the test skips, and fails under SHINKEN_MUST_WORK=1. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "common/common.h"
#include "shinken/cedar.h"

/* ---------------------------------------------------------------- inputs */

static const char SCHEMA[] =
  "namespace App {\n"
  "  type Addr = { city: String, zip?: Long };\n"
  "  entity Group;\n"
  "  entity User in [Group] { name: String, age: Long, addr?: Addr, langs: Set<String>,\n"
  "                           home: ipaddr, limit: decimal } tags Long;\n"
  "  entity Doc { owner: User, labels: Set<String> };\n"
  "  entity Color enum [\"red\", \"green\"];\n"
  "  action read, write appliesTo { principal: [User], resource: [Doc],\n"
  "                                  context: { ip: ipaddr, n?: Long } };\n"
  "  action admin in [write] appliesTo { principal: User, resource: Doc };\n"
  "}\n";

/* Policies that reach most of the evaluator: sets, records, extension
 * calls, `like`, `has`, tags, `if`, a template, an evaluation error
 * (App::User has no attribute `missing`, which the validator finds too) and
 * an arithmetic type error. */
static const char POLICIES[] =
  "@id(\"staff-read\")\n"
  "permit(principal in App::Group::\"staff\", action == App::Action::\"read\", resource)\n"
  "when { resource.owner == principal || principal.age >= 18 }\n"
  "unless { principal.name like \"*evil*\" };\n"
  "permit(principal, action in [App::Action::\"read\", App::Action::\"write\"], resource is App::Doc)\n"
  "when { context.ip.isInRange(ip(\"10.0.0.0/8\")) && principal.limit.lessThan(decimal(\"2.5\")) };\n"
  "forbid(principal, action, resource) when { principal has addr && principal.addr.city == \"Nowhere\" };\n"
  "permit(principal, action, resource)\n"
  "when { principal.hasTag(\"level\") && principal.getTag(\"level\") > 2 && {a: 1, b: [1, 2, 3]}.b.contains(2) };\n"
  "@id(\"grant\")\n"
  "permit(principal == ?principal, action == App::Action::\"write\", resource in ?resource);\n"
  "permit(principal, action, resource) when { if context has n then context.n + 1 > 3 else false };\n"
  "permit(principal, action == App::Action::\"admin\", resource) when { principal.missing == 1 };\n"
  "forbid(principal, action, resource)\n"
  "when { datetime(\"2024-01-01\").offset(duration(\"1h\")) < datetime(\"2024-01-01\") || \"a\" + 1 == 2 };\n";

static const char ENTITIES[] =
  "["
  "{\"uid\": {\"type\": \"App::Group\", \"id\": \"staff\"}, \"attrs\": {}, \"parents\": []},"
  "{\"uid\": {\"type\": \"App::User\", \"id\": \"alice\"},"
  " \"attrs\": {\"name\": \"Alice\", \"age\": 30, \"addr\": {\"city\": \"Paris\"},"
  "  \"langs\": [\"en\", \"fr\"], \"home\": \"10.1.2.3\", \"limit\": \"1.5\"},"
  " \"parents\": [{\"type\": \"App::Group\", \"id\": \"staff\"}], \"tags\": {\"level\": 3}},"
  "{\"uid\": {\"type\": \"App::User\", \"id\": \"bob\"},"
  " \"attrs\": {\"name\": \"Bob\", \"age\": 12, \"langs\": [],"
  "  \"home\": {\"__extn\": {\"fn\": \"ip\", \"arg\": \"192.168.0.1\"}}, \"limit\": \"3.0\"},"
  " \"parents\": []},"
  "{\"uid\": {\"type\": \"App::Doc\", \"id\": \"d1\"},"
  " \"attrs\": {\"owner\": {\"type\": \"App::User\", \"id\": \"bob\"}, \"labels\": [\"x\", \"y\"]},"
  " \"parents\": []},"
  "{\"uid\": {\"type\": \"App::Action\", \"id\": \"admin\"}, \"attrs\": {},"
  " \"parents\": [{\"type\": \"App::Action\", \"id\": \"write\"}]}"
  "]";

/* Read without a schema: the escapes decide the types, and a key holding
 * NUL takes jansson's NUL workaround. */
static const char ENTITIES_UNTYPED[] =
  "[{\"uid\": {\"__entity\": {\"type\": \"User\", \"id\": \"u\"}},"
  "  \"attrs\": {\"n\": 1, \"s\": \"x\\u0000y\", \"k\\u0000ey\": true, \"set\": [3, 1, 2, 1],"
  "   \"rec\": {\"a\": {\"__entity\": {\"type\": \"G\", \"id\": \"g\"}}},"
  "   \"when\": {\"__extn\": {\"fn\": \"offset\", \"args\": ["
  "     {\"__extn\": {\"fn\": \"datetime\", \"arg\": \"2024-01-01\"}},"
  "     {\"__extn\": {\"fn\": \"duration\", \"arg\": \"1h\"}}]}}},"
  "  \"parents\": [{\"type\": \"G\", \"id\": \"g\"}], \"tags\": {\"t\": \"v\"}},"
  " {\"uid\": {\"type\": \"G\", \"id\": \"g\"}, \"attrs\": {},"
  "  \"parents\": [{\"type\": \"G\", \"id\": \"top\"}]}]";

static const char REQUEST_JSON[] =
  "{\"principal\": {\"type\": \"App::User\", \"id\": \"bob\"}, \"action\": \"App::Action::\\\"write\\\"\","
  " \"resource\": {\"type\": \"App::Doc\", \"id\": \"d1\"}, \"context\": {\"ip\": \"10.9.9.9\", \"n\": 7}}";

/* ---------------------------------------------------------------- the world */

/* What a case runs against, built without failures before each run, and
 * what the run made. */
typedef struct world {
  shk_cedar_schema *schema;
  shk_cedar_policy_set *ps;
  shk_cedar_entities *es;
  shk_cedar_request *req, *req2;
  char *policy_json, *schema_json;
  shk_cedar_response resp; /* decided once already (the reused response) */
  int done;                 /* steps of a many-step call that succeeded */
  /* results */
  shk_cedar_policy_set *r_ps;
  shk_cedar_schema *r_schema;
  shk_cedar_entities *r_es;
  shk_cedar_request *r_req;
  json_t *r_json;
  char *r_text;
  shk_cedar_response r_resp;
  shk_cedar_validation_result r_vres;
} world;

static void fail_setup(const char *what, const shk_error *err)
{
  fail_msg("building the world: %s: %s", what, err ? err->message : "");
}

static void world_build(world *w)
{
  shk_error err = { 0 };
  *w = (world){ 0 };
  if (shk_cedar_schema_parse(SCHEMA, strlen(SCHEMA), SHK_CEDAR_SCHEMA_TEXT, &w->schema, &err) < 0)
    fail_setup("schema", &err);
  if (shk_cedar_policy_set_parse(POLICIES, strlen(POLICIES), &w->ps, &err) < 0)
    fail_setup("policies", &err);
  if (shk_cedar_entities_parse(ENTITIES, strlen(ENTITIES), w->schema, &w->es, &err) < 0)
    fail_setup("entities", &err);
  if (shk_cedar_request_new("App::User::\"alice\"", "App::Action::\"read\"", "App::Doc::\"d1\"",
                            "{\"ip\": \"10.0.0.7\", \"n\": 5}", w->schema, true, &w->req, &err) < 0)
    fail_setup("request", &err);
  if (shk_cedar_request_new("App::User::\"bob\"", "App::Action::\"admin\"", "App::Doc::\"d1\"", NULL,
                            w->schema, false, &w->req2, &err) < 0)
    fail_setup("request 2", &err);
  if (!(w->policy_json = shk_cedar_policy_set_to_json(w->ps)))
    fail_setup("policy JSON", NULL);
  if (!(w->schema_json = shk_cedar_schema_to_json(w->schema)))
    fail_setup("schema JSON", NULL);
  if (shk_cedar_is_authorized(w->ps, w->es, w->req2, &w->resp) < 0)
    fail_setup("first decision", NULL);
}

static void world_free(world *w)
{
  shk_cedar_schema_free(w->schema);
  shk_cedar_policy_set_free(w->ps);
  shk_cedar_entities_free(w->es);
  shk_cedar_request_free(w->req);
  shk_cedar_request_free(w->req2);
  free(w->policy_json);
  free(w->schema_json);
  shk_cedar_response_clear(&w->resp);
  shk_cedar_policy_set_free(w->r_ps);
  shk_cedar_schema_free(w->r_schema);
  shk_cedar_entities_free(w->r_es);
  shk_cedar_request_free(w->r_req);
  json_decref(w->r_json);
  free(w->r_text);
  shk_cedar_response_clear(&w->r_resp);
  shk_cedar_validation_result_clear(&w->r_vres);
}

/* ---------------------------------------------------------------- transcripts */

/* What a run produced, as text to compare (built with plain malloc, which
 * the fault injection does not count, and only after it is disarmed). */
typedef struct text {
  char *p;
  size_t n;
} text;

SHK_PRINTF(2, 3) static void say(text *t, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  assert_true(k >= 0);
  char *p = realloc(t->p, t->n + (size_t)k + 1);
  assert_non_null(p);
  t->p = p;
  va_start(ap, fmt);
  vsnprintf(t->p + t->n, (size_t)k + 1, fmt, ap);
  va_end(ap);
  t->n += (size_t)k;
}

static void say_response(text *t, const shk_cedar_response *r)
{
  say(t, "%s", r->decision == SHK_CEDAR_ALLOW ? "ALLOW" : "DENY");
  for (size_t i = 0; i < r->n_reasons; i++)
    say(t, " %s", r->reasons[i]);
  for (size_t i = 0; i < r->n_errors; i++)
    say(t, " [%s: %s]", r->errors[i].policy_id, r->errors[i].message);
  say(t, "\n");
}

/* Decides the world's requests against a set, entities and a request
 * (NULL: the world's), so that a result is judged by what it decides. */
static void say_decisions(text *t, world *w, const shk_cedar_policy_set *ps,
                          const shk_cedar_entities *es, const shk_cedar_request *req)
{
  static const char *const principals[] = { "App::User::\"alice\"", "App::User::\"bob\"" };
  static const char *const actions[] = { "App::Action::\"read\"", "App::Action::\"write\"",
                                         "App::Action::\"admin\"" };
  shk_cedar_response r = { 0 };
  if (req) {
    assert_int_equal(shk_cedar_is_authorized(ps, es, req, &r), 0);
    say_response(t, &r);
  }
  for (size_t i = 0; !req && i < 2; i++)
    for (size_t k = 0; k < 3; k++) {
      shk_cedar_request *q;
      shk_error err;
      /* admin's context type is the empty record. */
      const char *context = k < 2 ? "{\"ip\": \"10.1.1.1\", \"n\": 2}" : NULL;
      if (shk_cedar_request_new(principals[i], actions[k], "App::Doc::\"d1\"", context, w->schema,
                                false, &q, &err) < 0)
        fail_msg("request: %s", err.message);
      assert_int_equal(shk_cedar_is_authorized(ps, es, q, &r), 0);
      say(t, "%s %s: ", principals[i], actions[k]);
      say_response(t, &r);
      shk_cedar_request_free(q);
    }
  shk_cedar_response_clear(&r);
}

static void say_set(text *t, world *w, const shk_cedar_policy_set *ps)
{
  if (!ps) {
    say(t, "no set\n");
    return;
  }
  char *s = shk_cedar_policy_set_to_json(ps);
  assert_non_null(s);
  say(t, "%zu policies\n%s\n", shk_cedar_policy_set_count(ps), s);
  free(s);
  say_decisions(t, w, ps, w->es, NULL);
}

static void say_text(text *t, const char *s)
{
  say(t, "%s\n", s ? s : "no text");
}

/* ---------------------------------------------------------------- cases */

typedef struct oom_case {
  const char *name;
  /* The call under test; returns its code (0 for a text that came back,
   * -ENOMEM for NULL). */
  int (*run)(world *w, shk_error *err);
  /* What the world holds afterwards, judged without failures. */
  void (*describe)(world *w, text *t);
  bool takes_err;
  /* What describe says after a failed call, when it is not what it says
   * of the world before the call (an output the call resets). */
  const char *after_failure;
  /* For a call of many steps: redoes its first `done` steps without
   * failures, so that describe says what a failure after them must leave. */
  void (*replay)(world *w, int done);
} oom_case;

static int run_parse(world *w, shk_error *err)
{
  return shk_cedar_policy_set_parse(POLICIES, strlen(POLICIES), &w->r_ps, err);
}

static int run_parse_json(world *w, shk_error *err)
{
  return shk_cedar_policy_set_parse_json(w->policy_json, strlen(w->policy_json), &w->r_ps, err);
}

static void describe_r_ps(world *w, text *t)
{
  say_set(t, w, w->r_ps);
}

static int run_link(world *w, shk_error *err)
{
  return shk_cedar_policy_set_link(w->ps, "policy4", "link-bob", "App::User::\"bob\"",
                                   "App::Doc::\"d1\"", err);
}

/* After a link that failed, the set must be as it was: same policies, same
 * decisions. */
static void describe_ps(world *w, text *t)
{
  say_set(t, w, w->ps);
}

/* Many links, so that the set's tables and vectors grow while memory runs
 * out: each one that succeeds must be in the set and decide, and the one
 * that fails must leave no trace. */
enum { N_LINKS = 150 };

static int link_one(world *w, int i, shk_error *err)
{
  char id[32], principal[64];
  snprintf(id, sizeof id, "link-%d", i);
  snprintf(principal, sizeof principal, "App::User::\"u%d\"", i);
  return shk_cedar_policy_set_link(w->ps, "policy4", id, principal, "App::Doc::\"d1\"", err);
}

static int run_links(world *w, shk_error *err)
{
  for (; w->done < N_LINKS; w->done++) {
    int r = link_one(w, w->done, err);
    if (r < 0)
      return r;
  }
  return 0;
}

static void replay_links(world *w, int done)
{
  shk_error err;
  for (int i = 0; i < done; i++)
    if (link_one(w, i, &err) < 0)
      fail_msg("replaying link %d: %s", i, err.message);
}

/* The set, and a write to d1 by each user u0 ... u{N_LINKS}: allowed
 * exactly for the users whose link is in the set. */
static void describe_links(world *w, text *t)
{
  say_set(t, w, w->ps);
  shk_cedar_response r = { 0 };
  for (int i = 0; i <= N_LINKS; i++) {
    char principal[64];
    snprintf(principal, sizeof principal, "App::User::\"u%d\"", i);
    shk_cedar_request *q;
    shk_error err;
    if (shk_cedar_request_new(principal, "App::Action::\"write\"", "App::Doc::\"d1\"",
                              "{\"ip\": \"10.1.1.1\"}", w->schema, false, &q, &err) < 0)
      fail_msg("request: %s", err.message);
    assert_int_equal(shk_cedar_is_authorized(w->ps, w->es, q, &r), 0);
    say(t, "u%d: ", i);
    say_response(t, &r);
    shk_cedar_request_free(q);
  }
  shk_cedar_response_clear(&r);
}

static int run_schema_text(world *w, shk_error *err)
{
  return shk_cedar_schema_parse(SCHEMA, strlen(SCHEMA), SHK_CEDAR_SCHEMA_TEXT, &w->r_schema, err);
}

static int run_schema_json(world *w, shk_error *err)
{
  return shk_cedar_schema_parse(w->schema_json, strlen(w->schema_json), SHK_CEDAR_SCHEMA_JSON,
                                &w->r_schema, err);
}

static void describe_r_schema(world *w, text *t)
{
  if (!w->r_schema) {
    say(t, "no schema\n");
    return;
  }
  char *j = shk_cedar_schema_to_json(w->r_schema), *s = shk_cedar_schema_to_text(w->r_schema);
  say_text(t, j);
  say_text(t, s);
  free(j);
  free(s);
}

static int run_entities(world *w, shk_error *err)
{
  return shk_cedar_entities_parse(ENTITIES, strlen(ENTITIES), w->schema, &w->r_es, err);
}

static void describe_r_es(world *w, text *t)
{
  if (w->r_es)
    say_decisions(t, w, w->ps, w->r_es, NULL);
  else
    say(t, "no entities\n");
}

static int run_entities_untyped(world *w, shk_error *err)
{
  return shk_cedar_entities_parse(ENTITIES_UNTYPED, strlen(ENTITIES_UNTYPED), NULL, &w->r_es, err);
}

/* Policies that read the untyped store: a decision shows what was read. */
static void describe_untyped(world *w, text *t)
{
  static const char text_[] =
    "permit(principal in G::\"top\", action, resource)\n"
    "when { principal.n == 1 && principal.s == \"x\\0y\" && principal[\"k\\0ey\"] &&\n"
    "       principal.set == [1, 2, 3] && principal.rec.a == G::\"g\" && principal.getTag(\"t\") == \"v\" &&\n"
    "       principal.when == datetime(\"2024-01-01T01:00:00Z\") };";
  if (!w->r_es) {
    say(t, "no entities\n");
    return;
  }
  shk_cedar_policy_set *ps;
  shk_cedar_request *req;
  shk_error err;
  assert_int_equal(shk_cedar_policy_set_parse(text_, strlen(text_), &ps, &err), 0);
  assert_int_equal(shk_cedar_request_new("User::\"u\"", "A::\"a\"", "R::\"r\"", NULL, NULL, false, &req, &err), 0);
  say_decisions(t, w, ps, w->r_es, req);
  shk_cedar_request_free(req);
  shk_cedar_policy_set_free(ps);
}

static int run_request_new(world *w, shk_error *err)
{
  return shk_cedar_request_new("App::User::\"alice\"", "App::Action::\"write\"", "App::Doc::\"d1\"",
                               "{\"ip\": \"10.0.0.9\", \"n\": 1}", w->schema, true, &w->r_req, err);
}

static int run_request_json(world *w, shk_error *err)
{
  return shk_cedar_request_from_json(REQUEST_JSON, strlen(REQUEST_JSON), w->schema, true, &w->r_req, err);
}

static int run_request_value(world *w, shk_error *err)
{
  w->r_json = shk_cedar_json_parse(REQUEST_JSON, strlen(REQUEST_JSON), err);
  if (!w->r_json)
    return strcmp(err->message, "out of memory") ? -EINVAL : -ENOMEM;
  return shk_cedar_request_from_json_value(w->r_json, w->schema, true, &w->r_req, err);
}

static void describe_r_req(world *w, text *t)
{
  if (w->r_req)
    say_decisions(t, w, w->ps, w->es, w->r_req);
  else
    say(t, "no request\n");
}

static int run_authorize(world *w, shk_error *err)
{
  (void)err;
  return shk_cedar_is_authorized(w->ps, w->es, w->req, &w->r_resp);
}

static void describe_r_resp(world *w, text *t)
{
  say_response(t, &w->r_resp);
}

/* The response was used once already: its memory is reused. */
static int run_authorize_again(world *w, shk_error *err)
{
  (void)err;
  return shk_cedar_is_authorized(w->ps, w->es, w->req, &w->resp);
}

static void describe_resp(world *w, text *t)
{
  say_response(t, &w->resp);
}

static int run_validate(world *w, shk_error *err)
{
  (void)err;
  return shk_cedar_validate(w->ps, w->schema, &w->r_vres);
}

static void describe_r_vres(world *w, text *t)
{
  say(t, "%zu findings\n", w->r_vres.n_errors);
  for (size_t i = 0; i < w->r_vres.n_errors; i++)
    say(t, "%s %u:%u %s\n", w->r_vres.errors[i].policy_id, w->r_vres.errors[i].line,
        w->r_vres.errors[i].column, w->r_vres.errors[i].message);
}

static int text_rc(char *s, world *w)
{
  w->r_text = s;
  return s ? 0 : -ENOMEM;
}

static int run_to_text(world *w, shk_error *err)
{
  (void)err;
  return text_rc(shk_cedar_policy_set_to_text(w->ps), w);
}

static int run_to_json(world *w, shk_error *err)
{
  (void)err;
  return text_rc(shk_cedar_policy_set_to_json(w->ps), w);
}

static int run_schema_to_json(world *w, shk_error *err)
{
  (void)err;
  return text_rc(shk_cedar_schema_to_json(w->schema), w);
}

static int run_schema_to_text(world *w, shk_error *err)
{
  (void)err;
  return text_rc(shk_cedar_schema_to_text(w->schema), w);
}

static void describe_r_text(world *w, text *t)
{
  say_text(t, w->r_text);
}

static const oom_case CASES[] = {
  { "policy_set_parse", run_parse, describe_r_ps, true },
  { "policy_set_parse_json", run_parse_json, describe_r_ps, true },
  { "policy_set_link", run_link, describe_ps, true },
  { "policy_set_link, many", run_links, describe_links, true, .replay = replay_links },
  { "schema_parse text", run_schema_text, describe_r_schema, true },
  { "schema_parse json", run_schema_json, describe_r_schema, true },
  { "entities_parse", run_entities, describe_r_es, true },
  { "entities_parse untyped", run_entities_untyped, describe_untyped, true },
  { "request_new", run_request_new, describe_r_req, true },
  { "request_from_json", run_request_json, describe_r_req, true },
  { "json_parse + request_from_json_value", run_request_value, describe_r_req, true },
  { "is_authorized", run_authorize, describe_r_resp, false },
  /* A decision that ran out of memory is DENY with no reasons. */
  { "is_authorized, reused response", run_authorize_again, describe_resp, false, "DENY\n" },
  { "validate", run_validate, describe_r_vres, false },
  { "policy_set_to_text", run_to_text, describe_r_text, false },
  { "policy_set_to_json", run_to_json, describe_r_text, false },
  { "schema_to_json", run_schema_to_json, describe_r_text, false },
  { "schema_to_text", run_schema_to_text, describe_r_text, false },
};

/* One run with the Nth allocation failing (nth = 0: none). Returns whether
 * an injected failure happened. */
static bool run_once(const oom_case *c, unsigned long nth, bool persist, int *rc, text *t,
                     int *done, shk_error *err)
{
  world w;
  world_build(&w);
  *err = (shk_error){ 0 };
  json_set_alloc_funcs(persist ? shk__malloc : malloc, free);
  shk__fault_arm(nth, persist);
  *rc = c->run(&w, err);
  bool hit = shk__fault_hit();
  shk__fault_arm(0, false);
  *done = w.done;
  c->describe(&w, t);
  world_free(&w);
  return hit;
}

/* What describe must say after a call that failed after `done` steps. */
static void want_after_failure(const oom_case *c, int done, text *t)
{
  if (c->after_failure) {
    say(t, "%s", c->after_failure);
    return;
  }
  world w;
  world_build(&w);
  if (c->replay)
    c->replay(&w, done);
  c->describe(&w, t);
  world_free(&w);
}

static void check_case(const oom_case *c, bool persist)
{
  text want_ok = { 0 }, want_failed = { 0 };
  int rc, done;
  shk_error err;
  run_once(c, 0, false, &rc, &want_ok, &done, &err);
  if (rc != 0)
    fail_msg("%s: fails without fault injection (%d: %s)", c->name, rc, err.message);
  int want_done = -1; /* the steps want_failed is for */
  unsigned long n;
  for (n = 1; n < 1000000; n++) {
    text got = { 0 };
    bool hit = run_once(c, n, persist, &rc, &got, &done, &err);
    if (!hit) {
      /* Past the last allocation: the run is the one without failures. */
      if (rc != 0 || strcmp(got.p, want_ok.p) != 0)
        fail_msg("%s: a run past every allocation differs (rc %d)", c->name, rc);
      free(got.p);
      break;
    }
    if (rc == 0) {
      if (strcmp(got.p, want_ok.p) != 0)
        fail_msg("%s: allocation %lu failed%s, and the call succeeded with a different answer:\n%s\n"
                 "instead of:\n%s",
                 c->name, n, persist ? " (and every one after)" : "", got.p, want_ok.p);
    } else {
      if (rc != -ENOMEM)
        fail_msg("%s: allocation %lu failed%s: returned %d (%s), not -ENOMEM", c->name, n,
                 persist ? " (and every one after)" : "", rc, c->takes_err ? err.message : "");
      if (c->takes_err && strcmp(err.message, "out of memory") != 0)
        fail_msg("%s: allocation %lu failed: the error says \"%s\"", c->name, n, err.message);
      if (done != want_done) {
        free(want_failed.p);
        want_failed = (text){ 0 };
        want_after_failure(c, done, &want_failed);
        want_done = done;
      }
      if (strcmp(got.p, want_failed.p) != 0)
        fail_msg("%s: allocation %lu failed%s: what the call was given changed:\n%s\ninstead of:\n%s",
                 c->name, n, persist ? " (and every one after)" : "", got.p, want_failed.p);
    }
    free(got.p);
  }
  assert_true(n > 1); /* the call allocates: the loop tested something */
  print_message("# %s%s: %lu allocations, each failure clean\n", c->name,
                persist ? ", every failure after" : "", n - 1);
  free(want_ok.p);
  free(want_failed.p);
}

static void each_failure_alone(void **state)
{
  check_case(*state, false);
}

static void every_failure_after(void **state)
{
  check_case(*state, true);
}

int main(void)
{
  if (!shk__fault_enabled()) {
    /* In TAP, which is how the suite reads this test. */
    const char *must = getenv("SHINKEN_MUST_WORK");
    if (must && !strcmp(must, "1")) {
      puts("1..1\nnot ok 1 - built without -Dfault_injection=true (SHINKEN_MUST_WORK=1, would skip)");
      return 1;
    }
    puts("1..0 # SKIP built without -Dfault_injection=true");
    return 0;
  }
  enum { N = sizeof CASES / sizeof *CASES };
  static char names[2 * N][96];
  struct CMUnitTest tests[2 * N];
  for (size_t i = 0; i < N; i++) {
    snprintf(names[2 * i], sizeof names[0], "%s, each failure alone", CASES[i].name);
    snprintf(names[2 * i + 1], sizeof names[0], "%s, every failure after", CASES[i].name);
    tests[2 * i] = (struct CMUnitTest){ names[2 * i], each_failure_alone, NULL, NULL, (void *)&CASES[i] };
    tests[2 * i + 1] = (struct CMUnitTest){ names[2 * i + 1], every_failure_after, NULL, NULL,
                                            (void *)&CASES[i] };
  }
  return _cmocka_run_group_tests("cedar-oom", tests, 2 * N, NULL, NULL);
}
