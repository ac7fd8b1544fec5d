/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for src/manager: the manager's grant protocol as a table of
 * cases (trust, class, scope, provenance, a human's answer -> decision,
 * what decided, deciding policy), pending requests and who resolved them,
 * the classes with no enforcement point, standing grants, nonsense
 * durations, closed sessions leaving the handle table, the configuration
 * (its policy directory and its keys), the launcher's layer question, the
 * events each operation leaves in the audit timeline and their fields, a
 * full audit queue refusing a grant but never a revoke, per-session limits
 * on pending requests and their timeout, expiry, the control socket kept
 * out of every session's writable roots, and the host check the egress
 * hook makes (shk_cap_scope_allows_host). The manager is embedded: every
 * call goes through shk_manager_call, as JSON text. */
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

#include "audit/audit-internal.h"
#include "manager/manager-internal.h"
#include "manager/tally.h"
#include "shinken/audit.h"
#include "shinken/cap.h"
#include "shinken/manager.h"

static char tmpdir[] = "/tmp/shk-test-daemon-XXXXXX";
static char auditdb[4200], standing[4200], policies[4200];
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

/* Whether privileged commands have a mechanism in this process (root,
 * with the mount API and overlays): then the standing install.privileged
 * grant is issued, and an ask for it is a card; else both are refused as
 * having no enforcement point. */
static bool sudo_here(void)
{
  char buf[512];
  return shk_manager_class_mechanism(SHK_CAP_INSTALL_PRIVILEGED, buf, sizeof buf) == 1;
}

/* The standing grants a standard session holds: net.egress, and
 * install.privileged where it has a mechanism. */
static size_t n_standing(void)
{
  return 1 + sudo_here();
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

/* The events of m's timeline, committed, one canonical JSON entry each. */
typedef struct entries {
  char **v;
  size_t n;
} entries;

static int collect(void *data, uint64_t seq, const char *entry, size_t len, const unsigned char leaf[32])
{
  entries *e = data;
  e->v = realloc(e->v, (e->n + 1) * sizeof *e->v);
  e->v[e->n++] = strndup(entry, len);
  return 0;
}

static entries read_log(shk_manager *m, const char *db)
{
  shk_error err;
  entries e = { NULL, 0 };
  if (shk_audit_flush(shk__manager_audit(m), false, &err))
    fail_msg("flush: %s", err.message);
  shk_audit_reader *r;
  if (shk_audit_reader_open(db, &r, &err) || shk_audit_reader_scan(r, 0, collect, &e, &err))
    fail_msg("reading %s: %s", db, err.message);
  shk_audit_reader_close(r);
  return e;
}

static void entries_free(entries *e)
{
  for (size_t i = 0; i < e->n; i++)
    free(e->v[i]);
  free(e->v);
}

/* How many events of m's log (at db) contain every needle (NULL-ended). */
static int count_events(shk_manager *m, const char *db, const char *const *needles)
{
  entries e = read_log(m, db);
  int n = 0;
  for (size_t i = 0; i < e.n; i++) {
    bool all = true;
    for (const char *const *k = needles; *k && all; k++)
      all = strstr(e.v[i], *k) != NULL;
    n += all;
  }
  entries_free(&e);
  return n;
}

static int events_with(const char *needle)
{
  const char *const n[] = { needle, NULL };
  return count_events(mgr, auditdb, n);
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
  /* Allowed or askable, but nothing on this host could apply it (fs.scope,
   * and persistence once a human approved it: the session runs no sandbox
   * to mount into). */
  { "standard", "fs.scope", "{\"write\":[\"/work/x\"]}", "first-party", NULL, "refused", "enforcement", NULL, NULL,
    "no running sandbox" },
  { "standard", "gpu", "{\"device_ids\":[\"0\"]}", "first-party", NULL, "refused", "enforcement", NULL, NULL,
    "no enforcement point on this host for gpu" },
  { "standard", "clipboard", "{\"paste_in\":true}", "first-party", NULL, "refused", "enforcement", NULL, NULL,
    "no enforcement point on this host for clipboard" },
  /* Where privileged commands have no mechanism; grants() expects the card
   * (Ask) instead where they have one. */
  { "standard", "install.privileged", "{\"scope\":\"pkg\"}", "first-party", NULL, "refused", "enforcement", NULL,
    NULL, "no enforcement point on this host for install.privileged" },
  { "standard", "persistence", "{\"paths\":[\"/home/u/.cache/x\"]}", "first-party", "approve", "refused",
    "enforcement", NULL, NULL, "no running sandbox" },
  /* credentials: Ask by default; approved, the broker finds no such secret
   * (or no proxy to inject through) and nothing is granted. */
  { "standard", "credentials", "{\"broker_scopes\":[\"github:read\"]}", "first-party", NULL, "ask", NULL,
    "project-manifest-tiers", "Ask", "needs a human's approval" },
  { "standard", "credentials", "{\"broker_scopes\":[\"github:read\"]}", "first-party", "approve", "refused",
    "enforcement", NULL, NULL, "nothing was granted" },
};

static void grants(void **state)
{
  (void)state;
  static const struct gcase sudo_case = { "standard", "install.privileged", "{\"scope\":\"pkg\"}", "first-party",
                                          NULL, "ask", NULL, "project-manifest-tiers", "Ask",
                                          "needs a human's approval" };
  for (size_t i = 0; i < sizeof grant_cases / sizeof grant_cases[0]; i++) {
    const struct gcase *c = &grant_cases[i];
    if (!strcmp(c->cls, "install.privileged") && !strcmp(c->trust, "standard") && sudo_here())
      c = &sudo_case;
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

/* A persistence grant over a directory that holds the sandbox's writable
 * root is refused, saying so (its writes there would go into the overlay,
 * not to the host); the control, a directory beside the root, reaches the
 * next step (no running sandbox to mount into). Both are approved first
 * (the manifest puts persistence at Ask). */
static void persist_over_root(void **state)
{
  (void)state;
  char top[] = "/home/shk-unit.XXXXXX";
  if (!mkdtemp(top))
    skip();
  /* Beneath a directory of /home, not a home itself: persistence of a
   * whole home would cover its shell files, which the admin tier forbids. */
  char work[64], proj[64], other[64];
  snprintf(work, sizeof work, "%s/work", top);
  snprintf(proj, sizeof proj, "%s/work/proj", top);
  snprintf(other, sizeof other, "%s/other", top);
  assert_int_equal(mkdir(work, 0755), 0);
  assert_int_equal(mkdir(proj, 0755), 0);
  assert_int_equal(mkdir(other, 0755), 0);
  json_t *a = call(mgr, "{\"op\":\"open_session\",\"egress\":true,\"writable_roots\":[\"%s\"]}", proj);
  char *sid = strdup(str(a, "session"));
  json_decref(a);
  const char *paths[] = { work, other };
  const char *want[] = { "holds the sandbox's writable root", "no running sandbox" };
  for (int i = 0; i < 2; i++) {
    a = call(mgr, "{\"op\":\"grant\",\"session\":\"%s\",\"class\":\"persistence\",\"scope\":"
                  "{\"paths\":[\"%s\"]}}", sid, paths[i]);
    if (strcmp(str(a, "decision"), "ask"))
      fail_msg("persistence of %s: expected a pending request, got %s", paths[i], json_dumps(a, 0));
    char *pending = strdup(str(a, "pending"));
    json_decref(a);
    a = call(mgr, "{\"op\":\"resolve\",\"pending\":\"%s\",\"resolution\":\"approve\"}", pending);
    if (strcmp(str(a, "decision"), "refused") || !strstr(str(a, "error"), want[i]))
      fail_msg("persistence of %s: expected a refusal saying '%s', got %s", paths[i], want[i], json_dumps(a, 0));
    json_decref(a);
    free(pending);
  }
  close_session(sid);
  free(sid);
  rmdir(proj);
  rmdir(work);
  rmdir(other);
  rmdir(top);
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
  /* The record: raised, approved by whom, decided again, granted. */
  assert_int_equal(events_with(pending), 4);
  char who[64], card[64];
  snprintf(who, sizeof who, "\"process.pid\":%d", (int)getpid());
  snprintf(card, sizeof card, "\"shinken.card.id\":\"%s\"", pending);
  const char *const approved[] = { "\"event.name\":\"card-resolved\"", "\"shinken.outcome\":\"approved\"", who,
                                   "\"shinken.human.surface\":\"embedded\"", card, NULL };
  assert_int_equal(count_events(mgr, auditdb, approved), 1);
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
    assert_int_equal(n_grants(sid), 9 + n_standing()); /* nine and the standing ones */
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
  assert_int_equal(json_array_size(json_object_get(a, "grants")), n_standing());
  bool egress = false, sudo = false;
  for (size_t i = 0; i < json_array_size(json_object_get(a, "grants")); i++) {
    json_t *g = json_array_get(json_object_get(a, "grants"), i);
    assert_string_equal(str(g, "lifecycle"), "standing");
    egress |= !strcmp(str(g, "class"), "net.egress");
    sudo |= !strcmp(str(g, "class"), "install.privileged");
  }
  assert_true(egress);
  assert_true(sudo == sudo_here());
  json_decref(a);
  assert_true(events_with("\"shinken.reason\":\"no enforcement point on this host for clipboard: ") >= 1);
  if (!sudo_here())
    assert_true(events_with("\"shinken.reason\":\"no enforcement point on this host for install.privileged: ") >= 1);
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
  assert_int_equal(n_grants(sid), n_standing()); /* the standing ones alone */
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
    { "{\"op\":\"grants\",\"session\":\"none\"}", "no session 'none'" },
    { "{\"op\":\"refusals\",\"session\":\"none\"}", "no open session 'none'" },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_t *a = call(mgr, "%s", cases[i].req);
    if (json_is_true(json_object_get(a, "ok")) || !strstr(str(a, "error"), cases[i].error_has))
      fail_msg("case %zu: %s: %s", i, cases[i].req, json_dumps(a, 0));
    json_decref(a);
  }
  /* Against a session: a scope that grants nothing and a second revoke are
   * refused as bad input (no decision), each beside its control. */
  char *sid = open_session("standard");
  size_t before = n_grants(sid);
  json_t *a = call(mgr, "{\"op\":\"grant\",\"session\":\"%s\",\"class\":\"net.egress\",\"scope\":"
                        "{\"ports\":[443]}}", sid);
  assert_false(json_is_true(json_object_get(a, "ok")));
  assert_null(json_object_get(a, "decision"));
  assert_non_null(strstr(str(a, "error"), "grants nothing"));
  json_decref(a);
  assert_int_equal(n_grants(sid), before);
  a = call(mgr, "{\"op\":\"grant\",\"session\":\"%s\",\"class\":\"net.egress\",\"scope\":" REG "}", sid);
  assert_true(json_is_true(json_object_get(a, "ok")));
  char *h = strdup(str(a, "handle"));
  json_decref(a);
  a = call(mgr, "{\"op\":\"revoke\",\"handle\":\"%s\"}", h);
  assert_true(json_is_true(json_object_get(a, "ok")));
  json_decref(a);
  a = call(mgr, "{\"op\":\"revoke\",\"handle\":\"%s\"}", h);
  assert_false(json_is_true(json_object_get(a, "ok")));
  assert_non_null(strstr(str(a, "error"), "was already revoked"));
  json_decref(a);
  /* The session's listing names its opener: this process. */
  a = call(mgr, "{\"op\":\"sessions\"}");
  size_t i;
  json_t *e;
  bool seen = false;
  json_array_foreach(json_object_get(a, "sessions"), i, e) if (!strcmp(str(e, "session"), sid)) {
    seen = true;
    assert_int_equal(json_integer_value(json_object_get(e, "pid")), getpid());
    assert_int_equal(json_integer_value(json_object_get(e, "uid")), getuid());
    assert_true(json_integer_value(json_object_get(e, "started_ms")) > 0);
    assert_non_null(strstr(str(e, "command"), "test-manager"));
  }
  assert_true(seen);
  json_decref(a);
  /* An open session's refusals: none yet, an empty list. */
  a = call(mgr, "{\"op\":\"refusals\",\"session\":\"%s\"}", sid);
  assert_true(json_is_true(json_object_get(a, "ok")));
  assert_int_equal(json_array_size(json_object_get(a, "refusals")), 0);
  json_decref(a);
  free(h);
  close_session(sid);
  free(sid);
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

/* ---- the timeline: each operation's events and their fields ---- */

static char *answer_str(json_t *a, const char *key)
{
  char *v = strdup(str(a, key));
  json_decref(a);
  return v;
}

/* One event named `name` with every field=value pair (canonical JSON
 * fragments) given, NULL-ended. */
static void expect_event(const char *name, ...)
{
  const char *needles[16];
  char first[128];
  snprintf(first, sizeof first, "\"event.name\":\"%s\"", name);
  size_t n = 0;
  needles[n++] = first;
  va_list ap;
  va_start(ap, name);
  const char *k;
  while ((k = va_arg(ap, const char *)) && n < 15)
    needles[n++] = k;
  va_end(ap);
  needles[n] = NULL;
  if (count_events(mgr, auditdb, needles) != 1) {
    entries e = read_log(mgr, auditdb);
    for (size_t i = e.n > 12 ? e.n - 12 : 0; i < e.n; i++)
      fprintf(stderr, "  %s\n", e.v[i]);
    entries_free(&e);
    fail_msg("no single %s event with %s %s %s", name, n > 1 ? needles[1] : "", n > 2 ? needles[2] : "",
             n > 3 ? needles[3] : "");
  }
}

static void timeline(void **state)
{
  (void)state;
  char pid[64], sess[128], h[128], parent[128], card[128];
  snprintf(pid, sizeof pid, "\"process.pid\":%d", (int)getpid());
  char *sid = answer_str(call(mgr, "{\"op\":\"open_session\",\"egress\":true,\"model\":\"m-1\"}"), "session");
  snprintf(sess, sizeof sess, "\"gen_ai.conversation.id\":\"%s\"", sid);
  expect_event("session-open", sess, "\"gen_ai.request.model\":\"m-1\"", "\"shinken.outcome\":\"opened\"",
               "\"shinken.human.surface\":\"embedded\"", pid, NULL);
  /* An Auto grant: its decision, and the grant with its handle. */
  char *handle = answer_str(call(mgr, "{\"op\":\"grant\",\"session\":\"%s\",\"class\":\"net.egress\",\"scope\":" REG
                                      ",\"ttl_ms\":60000}", sid), "handle");
  snprintf(h, sizeof h, "\"shinken.handle.id\":\"%s\"", handle);
  expect_event("decision", sess, "\"shinken.decision\":\"allow\"", "\"shinken.policy.id\":\"project-manifest-tiers\"",
               "\"shinken.tier\":\"Auto\"", "\"shinken.class\":\"net.egress\"",
               "\\\"domains\\\":[\\\"registry.npm.example\\\"]", "\"shinken.lifetime\":\"PT60S\"",
               NULL);
  expect_event("grant", sess, h, "\"shinken.outcome\":\"granted\"", "\"shinken.provenance\":\"first-party\"", pid,
               NULL);
  /* A denial is a decision and nothing more. */
  json_decref(call(mgr, "{\"op\":\"grant\",\"session\":\"%s\",\"class\":\"net.egress\",\"scope\":"
                        "{\"domains\":[\"evil.invalid\"]},\"once\":true}", sid));
  expect_event("decision", sess, "\"shinken.decision\":\"deny\"", "\"shinken.lifetime\":\"once\"",
               "outside the manifest", NULL);
  /* Ask: a card, then its resolution by this process, then the grant. */
  char *pending = answer_str(call(mgr, "{\"op\":\"grant\",\"session\":\"%s\",\"class\":\"net.egress\",\"scope\":"
                                       ASKS "}", sid), "pending");
  snprintf(card, sizeof card, "\"shinken.card.id\":\"%s\"", pending);
  expect_event("card-raised", sess, card, "\"shinken.decision\":\"ask\"", "\"shinken.tier\":\"Ask\"", NULL);
  json_t *a = call(mgr, "{\"op\":\"resolve\",\"pending\":\"%s\",\"resolution\":\"approve\"}", pending);
  char exe[4200], exe_field[4400];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  assert_true(n > 0);
  exe[n] = '\0';
  snprintf(exe_field, sizeof exe_field, "\"process.executable.path\":\"%s\"", exe);
  assert_string_equal(str(json_object_get(a, "resolved_by"), "exe"), exe);
  json_decref(a);
  expect_event("card-resolved", sess, card, "\"shinken.outcome\":\"approved\"", pid, exe_field, NULL);
  expect_event("grant", sess, card, "\"shinken.outcome\":\"granted\"", "\"shinken.tier\":\"Ask\"", NULL);
  /* Attenuate, revoke, the session's end. */
  char *child = answer_str(call(mgr, "{\"op\":\"attenuate\",\"handle\":\"%s\",\"scope\":" REG "}", handle), "handle");
  snprintf(parent, sizeof parent, "\"shinken.handle.parent\":\"%s\"", handle);
  expect_event("attenuate", sess, parent, "\"shinken.outcome\":\"attenuated\"", NULL);
  json_decref(call(mgr, "{\"op\":\"revoke\",\"handle\":\"%s\"}", handle));
  expect_event("revoke", sess, h, "\"shinken.outcome\":\"revoked\"", "\"shinken.count\":0", pid, NULL);
  json_decref(call(mgr, "{\"op\":\"taint\",\"session\":\"%s\",\"touched_sensitive\":true}", sid));
  expect_event("taint", sess, "\"shinken.reason\":\"sensitive\"", NULL);
  close_session(sid);
  char count[40];
  snprintf(count, sizeof count, "\"shinken.count\":%zu", 3 + n_standing());
  expect_event("session-close", sess, "\"shinken.reason\":\"closed by request\"", count, NULL);
  /* The layer question, asked of this manager, is a decision too. */
  a = call(mgr, "{\"op\":\"decide_layers\",\"layers\":[\"network\"],\"on_command_line\":true}");
  assert_string_equal(str(a, "decision"), "allow");
  json_decref(a);
  a = call(mgr, "{\"op\":\"decide_layers\",\"layers\":[\"seccomp\"]}");
  assert_string_equal(str(a, "decision"), "ask");
  json_decref(a);
  expect_event("decision", "\"shinken.class\":\"layer\"", "\"shinken.scope\":\"[\\\"seccomp\\\"]\"",
               "\"shinken.decision\":\"ask\"", NULL);
  a = call(mgr, "{\"op\":\"decide_layers\",\"layers\":[\"sandbox\"]}");
  assert_false(json_is_true(json_object_get(a, "ok")));
  json_decref(a);
  free(sid);
  free(handle);
  free(pending);
  free(child);
}

/* A full queue refuses a grant (nothing is issued) and never a revoke,
 * which happens and is counted. */
static void audit_full(void **state)
{
  (void)state;
  char *sid = open_session("standard");
  char *handle = answer_str(call(mgr, "{\"op\":\"grant\",\"session\":\"%s\",\"class\":\"net.egress\",\"scope\":" REG
                                      "}", sid), "handle");
  shk_audit *au = shk__manager_audit(mgr);
  /* The writer first commits what it has: a batch it took before the
   * pause would otherwise free room after the queue was filled. */
  assert_int_equal(shk_audit_flush(au, false, NULL), 0);
  shk__audit_pause(au, true);
  shk_audit_event e;
  shk_audit_event_init(&e, "filler");
  char fill[3000];
  memset(fill, 'x', sizeof fill - 1);
  fill[sizeof fill - 1] = '\0';
  shk_audit_str(&e, SHK_AUDIT_REASON, fill);
  while (shk_audit_emit(au, &e, NULL) == 0)
    ;
  /* and the last bytes, with the smallest events there are */
  shk_audit_event_init(&e, "f");
  while (shk_audit_emit(au, &e, NULL) == 0)
    ;
  uint64_t refused = shk_audit_refused(au);
  size_t before = n_grants(sid);
  json_t *a = call(mgr, "{\"op\":\"grant\",\"session\":\"%s\",\"class\":\"net.egress\",\"scope\":" REG "}", sid);
  assert_false(json_is_true(json_object_get(a, "ok")));
  assert_non_null(strstr(str(a, "error"), "the audit log cannot record it (its queue is full)"));
  json_decref(a);
  assert_int_equal(n_grants(sid), before);
  a = call(mgr, "{\"op\":\"revoke\",\"handle\":\"%s\"}", handle);
  assert_true(json_is_true(json_object_get(a, "ok")));
  json_decref(a);
  a = call(mgr, "{\"op\":\"grants\",\"session\":\"%s\"}", sid);
  size_t i;
  json_t *g;
  bool dead = false;
  json_array_foreach(json_object_get(a, "grants"), i, g) if (!strcmp(str(g, "handle"), handle)) dead =
    !json_is_true(json_object_get(g, "live"));
  json_decref(a);
  assert_true(dead);
  assert_true(shk_audit_refused(au) >= refused + 2);
  shk__audit_pause(au, false);
  assert_int_equal(shk_audit_flush(au, false, NULL), 0);
  assert_true(events_with("\"event.name\":\"audit-overflow\"") >= 1);
  /* Once the queue drains, grants are recorded and issued again. */
  a = call(mgr, "{\"op\":\"grant\",\"session\":\"%s\",\"class\":\"net.egress\",\"scope\":" REG "}", sid);
  assert_true(json_is_true(json_object_get(a, "ok")));
  json_decref(a);
  close_session(sid);
  free(sid);
  free(handle);
}

/* The per-session limit on pending requests and their timeout, from the
 * configuration; one session at its limit leaves another untouched. And a
 * handle past its expiry is recorded as expired. */
static void limits_and_time(void **state)
{
  (void)state;
  char db[4300];
  snprintf(db, sizeof db, "%s/limits/audit.db", tmpdir);
  shk_manager_opts o = { .policy_dir = policies, .audit_db = db, .max_pending = 2, .pending_timeout_ms = 200 };
  shk_manager *m;
  shk_error err;
  assert_int_equal(shk_manager_new(&o, &m, &err), 0);
  char *ids[2];
  for (int k = 0; k < 2; k++) {
    ids[k] = answer_str(call(m, "{\"op\":\"open_session\",\"egress\":true}"), "session");
    for (int i = 0; i < 2; i++) {
      json_t *a = call(m, "{\"op\":\"grant\",\"session\":\"%s\",\"class\":\"net.egress\",\"scope\":" ASKS "}", ids[k]);
      assert_string_equal(str(a, "decision"), "ask");
      json_decref(a);
    }
    json_t *a = call(m, "{\"op\":\"grant\",\"session\":\"%s\",\"class\":\"net.egress\",\"scope\":" ASKS "}", ids[k]);
    assert_false(json_is_true(json_object_get(a, "ok")));
    assert_non_null(strstr(str(a, "error"), "already has 2 requests waiting for a human"));
    json_decref(a);
  }
  const char *const too_many[] = { "\"event.name\":\"grant\"", "\"error.type\":\"too-many-pending\"",
                                   "\"shinken.outcome\":\"refused\"", NULL };
  assert_int_equal(count_events(m, db, too_many), 2);
  /* A grant that expires, and the requests that time out. */
  char *h = answer_str(call(m, "{\"op\":\"grant\",\"session\":\"%s\",\"class\":\"net.egress\",\"scope\":" REG
                               ",\"ttl_ms\":100}", ids[0]), "handle");
  usleep(300 * 1000);
  shk__manager_tick(m);
  char hf[128];
  snprintf(hf, sizeof hf, "\"shinken.handle.id\":\"%s\"", h);
  const char *const expired[] = { "\"event.name\":\"expire\"", hf, "\"shinken.outcome\":\"expired\"", NULL };
  assert_int_equal(count_events(m, db, expired), 1);
  const char *const timed_out[] = { "\"event.name\":\"card-resolved\"", "\"shinken.outcome\":\"timed-out\"", NULL };
  assert_int_equal(count_events(m, db, timed_out), 4);
  json_t *a = call(m, "{\"op\":\"sessions\"}");
  size_t i;
  json_t *s;
  json_array_foreach(json_object_get(a, "sessions"), i, s) assert_int_equal(json_integer_value(json_object_get(s, "pending")), 0);
  json_decref(a);
  shk_manager_free(m);
  free(ids[0]);
  free(ids[1]);
  free(h);
}

/* ---- the control socket stays out of every sandbox's writable roots ---- */

static void socket_placement(void **state)
{
  (void)state;
  char dir[4300], link[4300], sock[4400], db[4400];
  snprintf(dir, sizeof dir, "%s/work", tmpdir);
  snprintf(link, sizeof link, "%s/worklink", tmpdir);
  snprintf(sock, sizeof sock, "%s/run/m.sock", dir);
  snprintf(db, sizeof db, "%s/place/audit.db", tmpdir);
  assert_int_equal(mkdir(dir, 0700), 0);
  assert_int_equal(symlink(dir, link), 0);
  /* A manager that will serve inside the workspace, as when
   * XDG_RUNTIME_DIR points into it. */
  shk_manager_opts o = { .policy_dir = policies, .audit_db = db, .socket = sock };
  shk_manager *m;
  shk_error err;
  assert_int_equal(shk_manager_new(&o, &m, &err), 0);
  static const struct {
    const char *root; /* below tmpdir, unless absolute */
    bool refused;
  } roots[] = {
    { "work", true },
    { "worklink", true },      /* the same root, through a symlink */
    { "", true },              /* an ancestor */
    { "work/run", true },
    { "work/run/m.sock", true },
    { "/", true },
    { "work/other", false },   /* a sibling of the socket's directory */
    { "elsewhere", false },
    { "wor", false },          /* a prefix that is not an ancestor */
  };
  for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
    char root[4400];
    if (roots[i].root[0] == '/')
      snprintf(root, sizeof root, "%s", roots[i].root);
    else
      snprintf(root, sizeof root, "%s%s%s", tmpdir, roots[i].root[0] ? "/" : "", roots[i].root);
    json_t *a = call(m, "{\"op\":\"open_session\",\"writable_roots\":[\"/usr\",\"%s\"]}", root);
    bool refused = !json_is_true(json_object_get(a, "ok"));
    if (refused != roots[i].refused ||
        (refused && !strstr(str(a, "error"), "is inside the writable root")))
      fail_msg("case %zu (%s): %s", i, root, json_dumps(a, 0));
    json_decref(a);
  }
  json_t *a = call(m, "{\"op\":\"open_session\",\"writable_roots\":[\"relative/path\"]}");
  assert_non_null(strstr(str(a, "error"), "not an absolute path"));
  json_decref(a);
  a = call(m, "{\"op\":\"open_session\",\"writable_roots\":[\"/tmp/../etc\"]}");
  assert_non_null(strstr(str(a, "error"), "not an absolute path"));
  json_decref(a);
  /* Serving: refused inside an open session's root, accepted outside. */
  char *sid = answer_str(call(m, "{\"op\":\"open_session\",\"writable_roots\":[\"%s/shared\"]}", tmpdir), "session");
  char inside[4400], outside[4400];
  snprintf(inside, sizeof inside, "%s/shared/run/m.sock", tmpdir);
  snprintf(outside, sizeof outside, "%s/private/m.sock", tmpdir);
  assert_int_equal(shk_manager_serve(m, inside, &err), -EPERM);
  assert_non_null(strstr(err.message, "is inside the writable root"));
  assert_int_equal(shk_manager_serve(m, outside, &err), 0);
  json_decref(call(m, "{\"op\":\"close_session\",\"session\":\"%s\"}", sid));
  free(sid);
  /* Now serving at `outside`: a session with it inside its roots is refused. */
  a = call(m, "{\"op\":\"open_session\",\"writable_roots\":[\"%s/private\"]}", tmpdir);
  assert_non_null(strstr(str(a, "error"), "the control socket"));
  json_decref(a);
  shk_manager_free(m);
  /* The socket's directory: someone else's, or one others may write, is
   * refused; a private one is used. */
  struct {
    const char *name;
    mode_t mode;
    uid_t owner; /* 0: this user */
    const char *error_has;
  } dirs[] = {
    { "d-private", 0700, 0, NULL },
    { "d-group", 0770, 0, "writable by group or others" },
    { "d-world", 0777, 0, "writable by group or others" },
    { "d-sticky", 01777, 0, "writable by group or others" },
    { "d-other", 0700, 65534, "belongs to uid 65534" },
  };
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    if (dirs[i].owner && geteuid() != 0)
      continue; /* only root can hand a directory to someone else */
    char d[4400], p[4500];
    snprintf(d, sizeof d, "%s/%s", tmpdir, dirs[i].name);
    snprintf(p, sizeof p, "%s/m.sock", d);
    assert_int_equal(mkdir(d, 0700), 0);
    assert_int_equal(chmod(d, dirs[i].mode), 0);
    if (dirs[i].owner)
      assert_int_equal(chown(d, dirs[i].owner, dirs[i].owner), 0);
    shk_manager_opts o2 = { .policy_dir = policies };
    assert_int_equal(shk_manager_new(&o2, &m, &err), 0);
    int r = shk_manager_serve(m, p, &err);
    struct stat st;
    if (dirs[i].error_has) {
      if (r != -EPERM || !strstr(err.message, dirs[i].error_has))
        fail_msg("%s: %d %s", dirs[i].name, r, r ? err.message : "served");
      assert_int_equal(stat(p, &st), -1);
    } else {
      assert_int_equal(r, 0);
      assert_int_equal(stat(p, &st), 0);
    }
    shk_manager_free(m);
  }
}

/* ---- the configuration's keys ---- */

/* The panel listens on loopback only: every other address, and anything
 * that is not ADDRESS:PORT, is refused. */
static void panel_listen(void **state)
{
  (void)state;
  static const char *const good[] = { "127.0.0.1:0", "127.0.0.1:8080", "127.9.8.7:65535", "[::1]:0" };
  static const char *const bad[] = { "0.0.0.0:0", "192.168.1.2:80", "[::]:0", "[::ffff:127.0.0.1]:0",
                                     "localhost:0", "127.0.0.1", "127.0.0.1:", ":80", "127.0.0.1:65536",
                                     "127.0.0.1:-1", "127.0.0.1:+1", "127.0.0.1:8x", "128.0.0.1:80", "" };
  shk_error e;
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    if (shk_manager_panel_listen_check(good[i], &e))
      fail_msg("%s refused: %s", good[i], e.message);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (shk_manager_panel_listen_check(bad[i], &e) != -EINVAL || !strstr(e.message, "panel listen"))
      fail_msg("%s accepted", bad[i]);
  char buf[64];
  assert_int_equal(shk_manager_panel_login_path("/run/u/shinken/manager.sock", buf, sizeof buf), 0);
  assert_string_equal(buf, "/run/u/shinken/manager.panel-login");
  assert_int_equal(shk_manager_panel_login_path("/run/u/shinken/run-42.sock", buf, sizeof buf), 0);
  assert_string_equal(buf, "/run/u/shinken/run-42.panel-login");
  assert_int_equal(shk_manager_panel_login_path("/tmp/x/control", buf, sizeof buf), 0);
  assert_string_equal(buf, "/tmp/x/control.panel-login");
  assert_int_equal(shk_manager_panel_login_path("manager.sock", buf, sizeof buf), -EINVAL);
  assert_int_equal(shk_manager_panel_login_path("/run/u/", buf, sizeof buf), -EINVAL);
}

static void config_keys(void **state)
{
  (void)state;
  static const struct {
    const char *text;
    int rc;
    const char *error_has;
  } cases[] = {
    { "{\"max_pending\":5,\"pending_timeout_ms\":1000,\"control_idle_ms\":2000,\"control_max_clients\":10,"
      "\"control_max_clients_per_uid\":3,\"control_max_output\":65536,\"control_fd_reserve\":8,"
      "\"audit_checkpoint_events\":10,\"audit_checkpoint_ms\":50,\"audit_db\":\"/x/audit.db\","
      "\"card_timeout_ms\":7000,\"batch_window_ms\":40}", 0, NULL },
    { "{\"card_timeout_ms\":0}", -EINVAL, "'card_timeout_ms' must be a whole number from 1 to" },
    { "{\"batch_window_ms\":3600001}", -EINVAL, "'batch_window_ms' must be a whole number from 1 to" },
    { "{\"event_log\":\"/x/proxy.log\"}", -EINVAL, "unknown key 'event_log'" },
    { "{\"max_pending\":0}", -EINVAL, "'max_pending' must be a whole number from 1 to" },
    { "{\"max_pending\":-1}", -EINVAL, "'max_pending' must be a whole number" },
    { "{\"max_pending\":\"5\"}", -EINVAL, "'max_pending' must be a whole number" },
    { "{\"pending_timeout_ms\":1.5}", -EINVAL, "'pending_timeout_ms' must be a whole number" },
    { "{\"control_idle_ms\":99999999999999}", -EINVAL, "'control_idle_ms' must be a whole number" },
    { "{\"audit_db\":\"\"}", -EINVAL, "expected a non-empty string for 'audit_db'" },
    { "{\"audit_db\":5}", -EINVAL, "expected a non-empty string for 'audit_db'" },
    { "{\"max_pendings\":5}", -EINVAL, "unknown key 'max_pendings'" },
    { "{\"panel\":{\"listen\":\"0.0.0.0:0\"}}", -EINVAL, "loopback address only" },
    { "{\"panel\":{\"listen\":\"127.0.0.1:0\",\"open\":true}}", -EINVAL, "unknown key 'panel.open'" },
    { "{\"panel\":\"127.0.0.1:0\"}", -EINVAL, "'panel' must be an object" },
    { "{\"panel\":{}}", -EINVAL, "'panel.listen' must be an address" },
  };
  char path[4300];
  snprintf(path, sizeof path, "%s/keys.json", tmpdir);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    FILE *f = fopen(path, "w");
    fputs(cases[i].text, f);
    fclose(f);
    shk_manager_config c;
    shk_error e;
    int rc = shk_manager_config_load(path, &c, &e);
    if (rc != cases[i].rc || (rc && !strstr(e.message, cases[i].error_has)))
      fail_msg("case %zu: %d %s", i, rc, rc ? e.message : "");
    if (!rc) {
      assert_int_equal(c.opts.max_pending, 5);
      assert_int_equal(c.opts.pending_timeout_ms, 1000);
      assert_int_equal(c.opts.card_timeout_ms, 7000);
      assert_int_equal(c.opts.batch_window_ms, 40);
      assert_int_equal(c.opts.control_idle_ms, 2000);
      assert_int_equal(c.opts.control_max_clients, 10);
      assert_int_equal(c.opts.control_max_per_uid, 3);
      assert_int_equal(c.opts.control_max_output, 65536);
      assert_int_equal(c.opts.control_fd_reserve, 8);
      assert_int_equal(c.opts.audit_checkpoint_events, 10);
      assert_int_equal(c.opts.audit_checkpoint_ms, 50);
      assert_string_equal(c.opts.audit_db, "/x/audit.db");
      assert_string_equal(c.opts.socket, c.socket);
      shk_manager_config_clear(&c);
    }
  }
  /* The default store is the audit module's. */
  shk_manager_config c;
  char want[4096];
  assert_int_equal(shk_manager_config_load(NULL, &c, NULL), 0);
  assert_int_equal(shk_audit_default_path(false, want, sizeof want, NULL), 0);
  assert_string_equal(c.opts.audit_db, want);
  shk_manager_config_clear(&c);
  /* With no home there is no default store: the caller decides (the
   * daemon refuses to start). */
  char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
  char *xdg_state = getenv("XDG_STATE_HOME") ? strdup(getenv("XDG_STATE_HOME")) : NULL;
  unsetenv("HOME");
  unsetenv("XDG_STATE_HOME");
  assert_int_equal(shk_manager_config_load(NULL, &c, NULL), 0);
  assert_null(c.opts.audit_db);
  shk_manager_config_clear(&c);
  if (home)
    setenv("HOME", home, 1);
  if (xdg_state)
    setenv("XDG_STATE_HOME", xdg_state, 1);
  free(home);
  free(xdg_state);
  /* A second manager on the same store is refused: one writer per log. */
  shk_manager_opts o = { .policy_dir = policies, .audit_db = auditdb };
  shk_manager *m = NULL;
  shk_error e;
  assert_int_equal(shk_manager_new(&o, &m, &e), -EBUSY);
  assert_null(m);
  assert_non_null(strstr(e.message, "another process is writing the audit log"));
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
  snprintf(auditdb, sizeof auditdb, "%s/audit/audit.db", tmpdir);
  snprintf(standing, sizeof standing, "%s/standing.json", tmpdir);
  snprintf(policies, sizeof policies, "%s/policies", src_dir());
  FILE *f = fopen(standing, "w");
  fputs("[{\"class\":\"net.egress\",\"scope\":{\"domains\":[\"standing.test\"]}},"
        "{\"class\":\"install.privileged\",\"scope\":{\"scope\":\"pkg\"}},"
        "{\"class\":\"clipboard\",\"scope\":{\"paste_in\":true}}]", f);
  fclose(f);
  shk_manager_opts o = { .policy_dir = policies, .standing = standing, .audit_db = auditdb,
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

/* ---- a session's refusals by kind ---- */

/* Only refusals count; the same kind twice is one entry of two; past 64
 * kinds the rest are one entry with only a count, so a workload that makes
 * every refusal new costs a bounded amount. */
static void tally_bounds(void **state)
{
  (void)state;
  shk__tally *t = shk__tally_new();
  assert_non_null(t);
  shk_egress_verdict_info v = { .proto = SHK_EGRESS_CONNECT, .host = "a.test", .port = 443, .decision = "allow",
                                .reason = "policy-allow" };
  shk__tally_add(t, &v);
  json_t *a = shk__tally_json(t);
  assert_int_equal(json_array_size(a), 0);
  json_decref(a);
  v.decision = "deny";
  v.reason = "policy-no-match";
  shk__tally_add(t, &v);
  shk__tally_add(t, &v);
  a = shk__tally_json(t);
  assert_int_equal(json_array_size(a), 1);
  json_t *e = json_array_get(a, 0);
  assert_int_equal(json_integer_value(json_object_get(e, "count")), 2);
  assert_string_equal(str(e, "host"), "a.test");
  assert_string_equal(str(e, "proto"), "connect");
  assert_int_equal(json_integer_value(json_object_get(e, "port")), 443);
  json_decref(a);
  char host[32];
  for (int i = 0; i < 100; i++) {
    snprintf(host, sizeof host, "h%d.test", i);
    v.host = host;
    shk__tally_add(t, &v);
  }
  a = shk__tally_json(t);
  /* 64 kinds kept (a.test and 63 others), then one entry for the other 37. */
  assert_int_equal(json_array_size(a), 65);
  e = json_array_get(a, 64);
  assert_null(json_object_get(e, "host"));
  assert_int_equal(json_integer_value(json_object_get(e, "count")), 37);
  json_decref(a);
  shk__tally_free(t);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(grants),
    cmocka_unit_test(persist_over_root),
    cmocka_unit_test(pending_requests),
    cmocka_unit_test(durations),
    cmocka_unit_test(closed_sessions),
    cmocka_unit_test(standing_grants),
    cmocka_unit_test(fault_switch),
    cmocka_unit_test(bad_calls),
    cmocka_unit_test(configuration),
    cmocka_unit_test(timeline),
    cmocka_unit_test(audit_full),
    cmocka_unit_test(limits_and_time),
    cmocka_unit_test(socket_placement),
    cmocka_unit_test(config_keys),
    cmocka_unit_test(panel_listen),
    cmocka_unit_test(layers),
    cmocka_unit_test(allows_host),
    cmocka_unit_test(tally_bounds),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
