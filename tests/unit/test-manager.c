/* Unit tests for src/daemon: the manager's grant protocol as a table of
 * cases (trust, class, scope, provenance, a human's answer -> decision,
 * what decided, deciding policy), pending requests and who resolved them,
 * the classes with no enforcement point, standing grants, nonsense
 * durations, closed sessions leaving the handle table, the configuration's
 * policy directory, the launcher's layer question, and the host check the
 * egress hook makes (shk_cap_scope_allows_host). The manager is embedded:
 * every call goes through shk_manager_call, as JSON text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shinken/cap.h"
#include "shinken/manager.h"

static char tmpdir[] = "/tmp/shk-test-daemon-XXXXXX";
static char events[4200], standing[4200], policies[4200];
static shk_manager *mgr;

static const char *src_dir(void)
{
  const char *s = getenv("SHINKEN_SRCDIR");
  return s ? s : ".";
}

__attribute__((format(printf, 2, 3))) static json_t *call(shk_manager *m, const char *fmt, ...)
{
  char *req;
  va_list ap;
  va_start(ap, fmt);
  assert_true(vasprintf(&req, fmt, ap) >= 0);
  va_end(ap);
  char *text = NULL;
  assert_int_equal(shk_manager_call(m, req, &text), 0);
  json_t *ans = json_loads(text, 0, NULL);
  if (!ans || !json_is_boolean(json_object_get(ans, "ok")))
    fail_msg("%s: the answer %s has no \"ok\"", req, text);
  free(req);
  free(text);
  return ans;
}

static const char *str(json_t *o, const char *key)
{
  const char *v = json_string_value(json_object_get(o, key));
  return v ? v : "";
}

static char *open_session(const char *trust)
{
  json_t *a = call(mgr, "{\"op\":\"open_session\",\"trust_tier\":\"%s\",\"egress\":true}", trust);
  if (!json_is_true(json_object_get(a, "ok")))
    fail_msg("open_session: %s", str(a, "error"));
  char *id = strdup(str(a, "session"));
  json_decref(a);
  return id;
}

static void close_session(const char *id)
{
  json_decref(call(mgr, "{\"op\":\"close_session\",\"session\":\"%s\"}", id));
}

static size_t n_grants(const char *session)
{
  json_t *a = session ? call(mgr, "{\"op\":\"grants\",\"session\":\"%s\"}", session) : call(mgr, "{\"op\":\"grants\"}");
  size_t n = json_array_size(json_object_get(a, "grants"));
  json_decref(a);
  return n;
}

static int events_with(const char *needle)
{
  FILE *f = fopen(events, "r");
  assert_non_null(f);
  char line[8192];
  int n = 0;
  while (fgets(line, sizeof line, f))
    n += strstr(line, needle) != NULL;
  fclose(f);
  return n;
}

/* ---- the grant protocol: one table ---- */

#define REG "{\"domains\":[\"registry.npm.example\"],\"ports\":[443]}"
#define ASKS "{\"domains\":[\"api.test\"]}"

static const struct gcase {
  const char *trust;
  const char *cls;
  const char *scope;
  const char *provenance;
  const char *resolution;   /* NULL: no human answers */
  /* expected */
  const char *decision;     /* "granted", "ask", "refused", "denied" */
  const char *decided_by;   /* for refused: "manifest", "policy", "enforcement" */
  const char *policy;       /* NULL: not checked */
  const char *tier;         /* NULL: not checked */
  const char *error_has;
} grant_cases[] = {
  { "standard", "net.egress", REG, "first-party", NULL, "granted", NULL, "project-manifest-tiers", "Auto", NULL },
  { "standard", "net.egress", REG, "external", NULL, "granted", NULL, "project-manifest-tiers", "Notify", NULL },
  { "standard", "net.egress", ASKS, "first-party", NULL, "ask", NULL, "project-manifest-tiers", "Ask",
    "needs a human's approval: manifest entry 1 puts it at Ask" },
  { "standard", "net.egress", ASKS, "first-party", "approve", "granted", NULL, "project-manifest-tiers", "Ask", NULL },
  { "high", "net.egress", ASKS, "first-party", "deny", "denied", NULL, NULL, NULL, NULL },
  { "standard", "net.egress", ASKS, "external", NULL, "refused", "policy", "admin-block-tier", "Block", NULL },
  { "standard", "net.egress", "{\"domains\":[\"evil.invalid\"]}", "first-party", NULL, "refused", "manifest", "",
    NULL, "outside the manifest" },
  { "standard", "fs.scope", "{\"write\":[\"/home/u/.ssh\"]}", "first-party", NULL, "refused", "policy",
    "admin-fs-credentials-and-shell-rc", "Notify", NULL },
  { "standard", "fs.scope", "{\"write\":[\"/home/u/bin\"]}", "first-party", NULL, "refused", "policy",
    "admin-fs-exec-path", NULL, NULL },
  { "low", "install.privileged", "{\"scope\":\"pkg\"}", "first-party", NULL, "refused", "policy",
    "admin-install-low-trust", NULL, NULL },
  { "standard", "peripheral", "{\"camera\":true}", "first-party", NULL, "refused", "policy", "admin-block-tier",
    "Block", NULL },
  /* Allowed or askable, but nothing on this host could apply it. */
  { "standard", "fs.scope", "{\"write\":[\"/work/x\"]}", "first-party", NULL, "refused", "enforcement", NULL, NULL,
    "no enforcement point on this host for fs.scope" },
  { "standard", "gpu", "{\"device_ids\":[\"0\"]}", "first-party", NULL, "refused", "enforcement", NULL, NULL,
    "no enforcement point on this host for gpu" },
  { "standard", "clipboard", "{\"paste_in\":true}", "first-party", NULL, "refused", "enforcement", NULL, NULL,
    "no enforcement point on this host for clipboard" },
  { "standard", "install.privileged", "{\"scope\":\"pkg\"}", "first-party", NULL, "refused", "enforcement", NULL,
    NULL, "no enforcement point on this host for install.privileged" },
  { "standard", "persistence", "{\"paths\":[\"/home/u/.cache/x\"]}", "first-party", NULL, "refused", "enforcement",
    NULL, NULL, "no enforcement point on this host for persistence" },
  { "standard", "credentials", "{\"broker_scopes\":[\"github:read\"]}", "first-party", NULL, "refused",
    "enforcement", NULL, NULL, "no enforcement point on this host for credentials" },
};

static void grants(void **state)
{
  (void)state;
  for (size_t i = 0; i < sizeof grant_cases / sizeof grant_cases[0]; i++) {
    const struct gcase *c = &grant_cases[i];
    char *sid = open_session(c->trust);
    size_t before = n_grants(sid);
    json_t *a = call(mgr, "{\"op\":\"grant\",\"session\":\"%s\",\"class\":\"%s\",\"scope\":%s,\"provenance\":\"%s\"}",
                     sid, c->cls, c->scope, c->provenance);
    if (c->resolution) {
      if (strcmp(str(a, "decision"), "ask"))
        fail_msg("case %zu: expected a pending request, got %s", i, json_dumps(a, 0));
      char *pending = strdup(str(a, "pending"));
      json_decref(a);
      a = call(mgr, "{\"op\":\"resolve\",\"pending\":\"%s\",\"resolution\":\"%s\"}", pending, c->resolution);
      json_t *by = json_object_get(a, "resolved_by");
      assert_string_equal(str(by, "channel"), "embedded");
      assert_int_equal(json_integer_value(json_object_get(by, "pid")), getpid());
      assert_string_equal(str(a, "pending"), pending);
      free(pending);
    }
    const char *dec = str(a, "decision");
    bool ok = !strcmp(dec, c->decision) && json_is_true(json_object_get(a, "ok")) == (!strcmp(dec, "granted") ||
                                                                                       !strcmp(dec, "denied")) &&
              (!c->decided_by || !strcmp(str(a, "decided_by"), c->decided_by)) &&
              (!c->policy || !strcmp(str(a, "policy"), c->policy)) && (!c->tier || !strcmp(str(a, "tier"), c->tier)) &&
              (!c->error_has || strstr(str(a, "error"), c->error_has));
    if (!ok)
      fail_msg("case %zu (%s %s %s): got %s", i, c->trust, c->cls, c->scope, json_dumps(a, 0));
    /* A handle exists exactly when the answer says granted. */
    assert_int_equal(n_grants(sid), before + !strcmp(dec, "granted"));
    if (!strcmp(dec, "granted"))
      assert_int_equal(strlen(str(a, "handle")), 64);
    json_decref(a);
    close_session(sid);
    free(sid);
  }
}

/* ---- pending requests ---- */

static void pending_requests(void **state)
{
  (void)state;
  char *sid = open_session("standard");
  /* A requester cannot say it was approved. */
  json_t *a = call(mgr, "{\"op\":\"grant\",\"session\":\"%s\",\"class\":\"net.egress\",\"scope\":" ASKS
                        ",\"approval\":\"approved\"}", sid);
  assert_false(json_is_true(json_object_get(a, "ok")));
  assert_non_null(strstr(str(a, "error"), "approval is not a field of a grant"));
  json_decref(a);
  /* One answer per request; unknown ids and bad resolutions are refused. */
  a = call(mgr, "{\"op\":\"grant\",\"session\":\"%s\",\"class\":\"net.egress\",\"scope\":" ASKS "}", sid);
  char *pending = strdup(str(a, "pending"));
  assert_int_equal(strlen(pending), 32);
  json_decref(a);
  assert_int_equal(events_with(pending), 1);
  a = call(mgr, "{\"op\":\"resolve\",\"pending\":\"%s\",\"resolution\":\"maybe\"}", pending);
  assert_false(json_is_true(json_object_get(a, "ok")));
  json_decref(a);
  a = call(mgr, "{\"op\":\"resolve\",\"pending\":\"%s\",\"resolution\":\"approve\"}", pending);
  assert_true(json_is_true(json_object_get(a, "ok")));
  json_decref(a);
  a = call(mgr, "{\"op\":\"resolve\",\"pending\":\"%s\",\"resolution\":\"approve\"}", pending);
  assert_false(json_is_true(json_object_get(a, "ok")));
  assert_non_null(strstr(str(a, "error"), "no pending request"));
  json_decref(a);
  /* The record: raised, approved by whom, granted. */
  assert_int_equal(events_with(pending), 2);
  char who[64];
  snprintf(who, sizeof who, "\"pid\":%d", (int)getpid());
  assert_true(events_with(who) >= 1);
  free(pending);
  /* A session may keep only so many requests waiting. */
  for (int i = 0; i < 64; i++) {
    a = call(mgr, "{\"op\":\"grant\",\"session\":\"%s\",\"class\":\"net.egress\",\"scope\":" ASKS "}", sid);
    assert_string_equal(str(a, "decision"), "ask");
    json_decref(a);
  }
  a = call(mgr, "{\"op\":\"grant\",\"session\":\"%s\",\"class\":\"net.egress\",\"scope\":" ASKS "}", sid);
  assert_false(json_is_true(json_object_get(a, "ok")));
  assert_non_null(strstr(str(a, "error"), "requests waiting for a human"));
  json_decref(a);
  a = call(mgr, "{\"op\":\"sessions\"}");
  json_t *s = json_array_get(json_object_get(a, "sessions"), 0);
  assert_int_equal(json_integer_value(json_object_get(s, "pending")), 64);
  json_decref(a);
  /* Closing the session drops its requests. */
  close_session(sid);
  free(sid);
}

/* ---- the manager's own rules ---- */

static void durations(void **state)
{
  (void)state;
  static const char *const bad[] = { "9223372036854775807", "31622400001", "0", "-5", "1.5", "\"1\"" };
  char *sid = open_session("standard");
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    json_t *a = call(mgr, "{\"op\":\"grant\",\"session\":\"%s\",\"class\":\"net.egress\",\"scope\":" REG
                          ",\"ttl_ms\":%s}", sid, bad[i]);
    assert_false(json_is_true(json_object_get(a, "ok")));
    assert_non_null(strstr(str(a, "error"), "ttl_ms must be"));
    json_decref(a);
    a = call(mgr, "{\"op\":\"open_session\",\"ttl_ms\":%s}", bad[i]);
    assert_false(json_is_true(json_object_get(a, "ok")));
    assert_non_null(strstr(str(a, "error"), "ttl_ms must be"));
    json_decref(a);
  }
  /* The longest allowed ttl is clamped to the session's end. */
  json_t *sess = call(mgr, "{\"op\":\"sessions\"}");
  json_int_t end = json_integer_value(json_object_get(json_array_get(json_object_get(sess, "sessions"), 0),
                                                      "expires_ms"));
  json_decref(sess);
  json_t *a = call(mgr, "{\"op\":\"grant\",\"session\":\"%s\",\"class\":\"net.egress\",\"scope\":" REG
                        ",\"ttl_ms\":31622400000}", sid);
  assert_true(json_is_true(json_object_get(a, "ok")));
  assert_int_equal(json_integer_value(json_object_get(a, "expires_ms")), end);
  json_decref(a);
  close_session(sid);
  free(sid);
}

/* A closed session's handles leave the table: 300 sessions with ten each
 * once left 3,000 dead handles and a list too large to answer. */
static void closed_sessions(void **state)
{
  (void)state;
  size_t before = n_grants(NULL);
  for (int i = 0; i < 300; i++) {
    char *sid = open_session("standard");
    for (int k = 0; k < 9; k++)
      json_decref(call(mgr, "{\"op\":\"grant\",\"session\":\"%s\",\"class\":\"net.egress\",\"scope\":" REG "}", sid));
    assert_int_equal(n_grants(sid), 10); /* nine and the standing one */
    close_session(sid);
    free(sid);
  }
  assert_int_equal(n_grants(NULL), before);
}

/* The standing grants: decided like any grant; a class with no mechanism
 * and an admin forbid both refuse theirs, each with its reason. */
static void standing_grants(void **state)
{
  (void)state;
  char *sid = open_session("standard");
  json_t *a = call(mgr, "{\"op\":\"grants\",\"session\":\"%s\"}", sid);
  json_t *g = json_array_get(json_object_get(a, "grants"), 0);
  assert_int_equal(json_array_size(json_object_get(a, "grants")), 1);
  assert_string_equal(str(g, "lifecycle"), "standing");
  assert_string_equal(str(g, "class"), "net.egress");
  json_decref(a);
  assert_true(events_with("\"reason\":\"no enforcement point on this host for install.privileged\"") >= 1);
  int forbids = events_with("admin-install-low-trust");
  char *low = open_session("low");
  assert_int_equal(events_with("admin-install-low-trust"), forbids + 1);
  close_session(low);
  close_session(sid);
  free(low);
  free(sid);
}

static void fault_switch(void **state)
{
  (void)state;
  char *sid = open_session("standard");
  setenv("SHINKEN_FAULT", "grant-delta", 1);
  json_t *a = call(mgr, "{\"op\":\"grant\",\"session\":\"%s\",\"class\":\"net.egress\",\"scope\":" REG "}", sid);
  unsetenv("SHINKEN_FAULT");
#if SHK_FAULT_INJECTION
  assert_false(json_is_true(json_object_get(a, "ok")));
  assert_non_null(strstr(str(a, "error"), "injected fault"));
  assert_int_equal(n_grants(sid), 1); /* the standing one alone */
#else
  assert_true(json_is_true(json_object_get(a, "ok")));
#endif
  json_decref(a);
  close_session(sid);
  free(sid);
}

static void bad_calls(void **state)
{
  (void)state;
  static const struct {
    const char *req, *error_has;
  } cases[] = {
    { "not json", "not valid JSON" },
    { "[]", "\"op\"" },
    { "{\"op\":\"nope\"}", "unknown op" },
    { "{\"op\":\"grant\",\"session\":\"none\",\"class\":\"net.egress\",\"scope\":{}}", "no such session" },
    { "{\"op\":\"grant\",\"session\":\"none\",\"class\":\"net\"}", "unknown capability class" },
    { "{\"op\":\"grant\",\"session\":\"none\",\"class\":\"net.egress\",\"scope\":{\"domain\":[]}}", "unknown field" },
    { "{\"op\":\"grant\",\"session\":\"none\",\"class\":\"net.egress\",\"provenance\":\"web\"}", "provenance" },
    { "{\"op\":\"resolve\",\"pending\":\"00\",\"resolution\":\"approve\"}", "no pending request" },
    { "{\"op\":\"resolve\",\"pending\":\"00\",\"resolution\":\"approve\",\"by\":\"me\"}", "unknown field" },
    { "{\"op\":\"open_session\",\"trust_tier\":\"root\"}", "trust_tier" },
    { "{\"op\":\"revoke\",\"handle\":\"00\"}", "no such handle" },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_t *a = call(mgr, "%s", cases[i].req);
    if (json_is_true(json_object_get(a, "ok")) || !strstr(str(a, "error"), cases[i].error_has))
      fail_msg("case %zu: %s: %s", i, cases[i].req, json_dumps(a, 0));
    json_decref(a);
  }
}

/* ---- where the policy comes from ---- */

static void configuration(void **state)
{
  (void)state;
  shk_manager_config c;
  shk_error e;
  char *saved = getenv("SHINKEN_POLICY_DIR") ? strdup(getenv("SHINKEN_POLICY_DIR")) : NULL;
  unsetenv("SHINKEN_POLICY_DIR");
  assert_int_equal(shk_manager_config_load(NULL, &c, &e), 0);
  assert_string_equal(c.opts.policy_dir, SHK_POLICY_DIR_INSTALLED);
  assert_true(strncmp(c.opts.policy_dir, src_dir(), strlen(src_dir())));
  shk_manager_config_clear(&c);
  setenv("SHINKEN_POLICY_DIR", policies, 1);
  assert_int_equal(shk_manager_config_load(NULL, &c, &e), 0);
  assert_string_equal(c.opts.policy_dir, policies);
  shk_manager_config_clear(&c);
  char path[4300];
  snprintf(path, sizeof path, "%s/config.json", tmpdir);
  FILE *f = fopen(path, "w");
  fputs("{\"policy_dir\":\"/somewhere\",\"socket\":\"/x.sock\"}", f);
  fclose(f);
  assert_int_equal(shk_manager_config_load(path, &c, &e), 0);
  assert_string_equal(c.opts.policy_dir, "/somewhere");
  assert_string_equal(c.opts.manifest, "/somewhere/manifests/default.json");
  shk_manager_config_clear(&c);
  f = fopen(path, "w");
  fputs("{\"policy_directory\":\"/x\"}", f);
  fclose(f);
  assert_int_equal(shk_manager_config_load(path, &c, &e), -EINVAL);
  assert_non_null(strstr(e.message, "unknown key 'policy_directory'"));
  /* A policy directory others could write is refused. */
  char open_dir[4300], cmd[13000];
  snprintf(open_dir, sizeof open_dir, "%s/open", tmpdir);
  snprintf(cmd, sizeof cmd, "cp -r '%s' '%s' && chmod 0777 '%s'", policies, open_dir, open_dir);
  assert_int_equal(system(cmd), 0);
  shk_manager_opts o = { .policy_dir = open_dir };
  shk_manager *m = NULL;
  assert_int_equal(shk_manager_new(&o, &m, &e), -EPERM);
  assert_null(m);
  assert_non_null(strstr(e.message, "writable by group or others"));
  if (saved)
    setenv("SHINKEN_POLICY_DIR", saved, 1);
  else
    unsetenv("SHINKEN_POLICY_DIR");
  free(saved);
}

/* The launcher's question: may the operator's own run turn these off? */
static void layers(void **state)
{
  (void)state;
  static const struct {
    const char *layer;
    bool approved;
    int rc;
    shk_policy_verdict verdict;
  } cases[] = {
    { "network", true, 0, SHK_POLICY_ALLOW },
    { "user-separation", true, 0, SHK_POLICY_ALLOW },
    { "network", false, 0, SHK_POLICY_ASK },
    { "seccomp", false, 0, SHK_POLICY_ASK },
    { "sandbox", true, -EINVAL, SHK_POLICY_DENY },
  };
  setenv("SHINKEN_POLICY_DIR", policies, 1);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    shk_policy_answer a;
    shk_error e;
    const char *l[] = { cases[i].layer };
    int rc = shk_manager_decide_layers(l, 1, cases[i].approved, &a, &e);
    if (rc != cases[i].rc || a.verdict != cases[i].verdict)
      fail_msg("case %zu (%s): rc %d, %s: %s", i, cases[i].layer, rc, shk_policy_verdict_name(a.verdict), a.why);
  }
  shk_policy_answer a;
  shk_error e;
  const char *l[] = { "network" };
  setenv("SHINKEN_POLICY_DIR", "/nonexistent", 1);
  assert_int_equal(shk_manager_decide_layers(l, 1, true, &a, &e), -ENOENT);
  assert_int_equal(a.verdict, SHK_POLICY_DENY);
  setenv("SHINKEN_POLICY_DIR", policies, 1);
}

/* ---- the host check of the egress hook ---- */

static const struct {
  const char *scope;
  const char *host;
  uint16_t port;
  bool allowed;
} host_cases[] = {
  { "{\"domains\":[\"api.test\"]}", "api.test", 443, true },
  { "{\"domains\":[\"api.test\"]}", "api.test", 0, true },
  { "{\"domains\":[\"api.test\"]}", "x.api.test", 443, false },
  { "{\"domains\":[\"api.test\"]}", "api.test.evil", 443, false },
  { "{\"domains\":[\"*.api.test\"]}", "x.api.test", 443, true },
  { "{\"domains\":[\"*.api.test\"]}", "api.test", 443, false },
  { "{\"domains\":[\"**.api.test\"]}", "api.test", 80, true },
  { "{\"domains\":[\"**.api.test\"]}", "a.b.api.test", 80, true },
  { "{\"domains\":[\"**.api.test\"]}", "xapi.test", 80, false },
  { "{\"domains\":[\"api.test:443\"]}", "api.test", 443, true },
  { "{\"domains\":[\"api.test:443\"]}", "api.test", 22, false },
  { "{\"domains\":[\"api.test:443\"]}", "api.test", 0, true },
  { "{\"domains\":[\"api.test\"],\"ports\":[\"20-30\"]}", "api.test", 22, true },
  { "{\"domains\":[\"api.test\"],\"ports\":[\"20-30\"]}", "api.test", 31, false },
  { "{\"domains\":[\"api.test\"],\"ports\":[443]}", "api.test", 0, true },
  { "{\"domains\":[\"api.test\"]}", "127.0.0.1", 443, false },
  { "{\"cidrs\":[\"10.0.0.0/8\"]}", "10.1.2.3", 443, true },
  { "{\"cidrs\":[\"10.0.0.0/8\"]}", "11.1.2.3", 443, false },
  { "{\"cidrs\":[\"10.0.0.0/8\"]}", "ten.test", 443, false },
  { "{\"cidrs\":[\"2001:db8::/32\"]}", "2001:db8::1", 443, true },
  { "{\"cidrs\":[\"2001:db8::/32\"]}", "2001:db9::1", 443, false },
  { "{}", "api.test", 443, false },
};

static void allows_host(void **state)
{
  (void)state;
  for (size_t i = 0; i < sizeof host_cases / sizeof host_cases[0]; i++) {
    shk_cap_scope s;
    assert_int_equal(shk_cap_scope_parse(SHK_CAP_NET_EGRESS, host_cases[i].scope, &s, NULL), 0);
    bool got = shk_cap_scope_allows_host(&s, host_cases[i].host, host_cases[i].port);
    if (got != host_cases[i].allowed)
      fail_msg("case %zu: %s %s:%u: got %d", i, host_cases[i].scope, host_cases[i].host, host_cases[i].port, got);
    shk_cap_scope_clear(&s);
  }
  /* Another class never admits a connection. */
  shk_cap_scope s;
  assert_int_equal(shk_cap_scope_parse(SHK_CAP_CLIPBOARD, "{}", &s, NULL), 0);
  assert_false(shk_cap_scope_allows_host(&s, "api.test", 443));
}

static int setup(void **state)
{
  (void)state;
  if (!mkdtemp(tmpdir))
    return -1;
  snprintf(events, sizeof events, "%s/events.log", tmpdir);
  snprintf(standing, sizeof standing, "%s/standing.json", tmpdir);
  snprintf(policies, sizeof policies, "%s/policies", src_dir());
  FILE *f = fopen(standing, "w");
  fputs("[{\"class\":\"net.egress\",\"scope\":{\"domains\":[\"standing.test\"]}},"
        "{\"class\":\"install.privileged\",\"scope\":{\"scope\":\"pkg\"}}]", f);
  fclose(f);
  shk_manager_opts o = { .policy_dir = policies, .standing = standing, .event_log = events,
                         .exec_path = "/home/u/bin:relative:/usr/bin" };
  shk_error e;
  if (shk_manager_new(&o, &mgr, &e)) {
    fprintf(stderr, "manager: %s\n", e.message);
    return -1;
  }
  return 0;
}

static int teardown(void **state)
{
  (void)state;
  shk_manager_free(mgr);
  char cmd[4300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(grants),
    cmocka_unit_test(pending_requests),
    cmocka_unit_test(durations),
    cmocka_unit_test(closed_sessions),
    cmocka_unit_test(standing_grants),
    cmocka_unit_test(fault_switch),
    cmocka_unit_test(bad_calls),
    cmocka_unit_test(configuration),
    cmocka_unit_test(layers),
    cmocka_unit_test(allows_host),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
