/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for src/policy: the one decision as a table of cases (kind,
 * class, scope, session, provenance, approval -> answer, tier and deciding
 * policy) against the shipped policies, port ranges against a forbid on
 * one port, the exec-path rule from the session's own $PATH, patterns
 * (each decided for every element it covers, refused with a counterexample
 * and offered narrowed, failing closed without a solver), the refusal of a
 * widened tier, manifests, and the trust check of every file a policy is
 * read from. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "policy/policy-internal.h"
#include "shinken/cedar.h"
#include "shinken/policy.h"

#define HOUR (3600LL * 1000)

static int64_t now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static char *shipped_dir(void)
{
  const char *src = getenv("SHINKEN_SRCDIR");
  static char dir[4096];
  snprintf(dir, sizeof dir, "%s/policies", src ? src : ".");
  return dir;
}

/* A file of our own under a fresh private directory. */
static char tmpdir[] = "/tmp/shk-test-policy-XXXXXX";

static char *write_tmp(const char *name, const char *text, mode_t mode)
{
  static char path[4200];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  assert_int_equal(chmod(path, mode), 0);
  return path;
}

/* A pattern is decided by the analyzer: without cvc5 those cases can only
 * be refused, so they skip, unless SHINKEN_MUST_WORK makes that a failure. */
static void need_solver(void)
{
  const char *path = getenv("PATH");
  char *copy = strdup(path ? path : ""), *save = NULL;
  bool found = false;
  for (char *d = strtok_r(copy, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
    char f[4096];
    snprintf(f, sizeof f, "%s/cvc5", d);
    found = access(f, X_OK) == 0;
  }
  free(copy);
  if (found)
    return;
  const char *must = getenv("SHINKEN_MUST_WORK");
  if (must && !strcmp(must, "1"))
    fail_msg("cvc5 is not installed (scripts/install-deps.sh)");
  skip();
}

static shk_policy *load(const char *manifest, const char *session_text)
{
  shk_policy *p = NULL;
  shk_error err = { 0 };
  shk_policy_source src = { shipped_dir(), manifest, session_text, getuid() };
  int r = shk_policy_load(&src, &p, &err);
  if (r)
    fail_msg("the shipped policies did not load: %s", err.message);
  return p;
}

/* ---- the decision: one table ---- */

typedef struct dcase {
  shk_policy_kind kind;
  shk_cap_class cls;
  const char *scope;         /* JSON */
  const char *trust;
  bool ext_taint, sens_taint; /* the session's exposure */
  bool external;             /* the request's provenance */
  shk_policy_approval approval;
  const char *layer;         /* DISABLE */
  const char *exec_path;     /* one directory of the session's $PATH, or NULL */
  int64_t expires;           /* relative to now; 0: in an hour */
  /* expected */
  shk_policy_verdict verdict;
  shk_policy_tier tier;
  const char *policy;        /* NULL: not checked; "": deny by default */
  int entry;                 /* manifest entry, -2: not checked */
  const char *why_has;
} dcase;

#define GRANT(cls, scope) SHK_POLICY_GRANT, SHK_CAP_##cls, scope
#define UNASKED SHK_POLICY_UNASKED
#define APPROVED SHK_POLICY_APPROVED
#define DENIED SHK_POLICY_DENIED
#define ALLOW SHK_POLICY_ALLOW
#define ASK SHK_POLICY_ASK
#define DENY SHK_POLICY_DENY
#define AUTO SHK_POLICY_TIER_AUTO
#define NOTIFY SHK_POLICY_TIER_NOTIFY
#define TASK SHK_POLICY_TIER_ASK
#define BLOCK SHK_POLICY_TIER_BLOCK

#define REG "{\"domains\":[\"registry.npm.example\"],\"ports\":[443]}"

/* The shipped manifest (policies/manifests/default.json): entry 0 the
 * package registries at Auto, 1 **.test and friends at Ask, 2 fs.scope at
 * Notify, 3 clipboard, 4 gpu, 5 install, 6 persistence and 7 credentials at
 * Ask, 8 peripherals at Block. */
static const dcase decide_cases[] = {
  /* Tiers, and the approval state the manager holds. */
  { GRANT(NET_EGRESS, REG), "standard", 0, 0, 0, UNASKED, NULL, NULL, 0,
    ALLOW, AUTO, "project-manifest-tiers", 0, "permitted by project-manifest-tiers" },
  { GRANT(NET_EGRESS, "{\"domains\":[\"api.test\"]}"), "standard", 0, 0, 0, UNASKED, NULL, NULL, 0,
    ASK, TASK, "project-manifest-tiers", 1, "manifest entry 1 puts it at Ask" },
  { GRANT(NET_EGRESS, "{\"domains\":[\"api.test\"]}"), "standard", 0, 0, 0, APPROVED, NULL, NULL, 0,
    ALLOW, TASK, "project-manifest-tiers", 1, NULL },
  { GRANT(NET_EGRESS, "{\"domains\":[\"api.test\"]}"), "standard", 0, 0, 0, DENIED, NULL, NULL, 0,
    DENY, TASK, "admin-block-tier", 1, "forbidden by admin-block-tier" },
  /* No manifest entry: denied, asking nobody. */
  { GRANT(NET_EGRESS, "{\"domains\":[\"evil.invalid\"]}"), "standard", 0, 0, 0, APPROVED, NULL, NULL, 0,
    DENY, AUTO, "", -1, "outside the manifest of image default" },
  { GRANT(INSTALL_PRIVILEGED, "{\"scope\":\"any\"}"), "high", 0, 0, 0, APPROVED, NULL, NULL, 0,
    DENY, AUTO, "", -1, "outside the manifest" },
  /* Provenance promotion. */
  { GRANT(NET_EGRESS, REG), "standard", 0, 0, 1, UNASKED, NULL, NULL, 0,
    ALLOW, NOTIFY, "project-manifest-tiers", 0, NULL },
  { GRANT(NET_EGRESS, REG), "standard", 1, 1, 1, UNASKED, NULL, NULL, 0,
    ASK, TASK, "project-manifest-tiers", 0, "promoted from Auto to Ask: the session ingested" },
  { GRANT(NET_EGRESS, REG), "standard", 1, 1, 0, UNASKED, NULL, NULL, 0,
    ASK, TASK, NULL, 0, "leaves the machine" },
  { GRANT(NET_EGRESS, REG), "standard", 1, 0, 0, UNASKED, NULL, NULL, 0,
    ALLOW, AUTO, NULL, 0, NULL },
  { GRANT(FS_SCOPE, "{\"write\":[\"/work/p\"]}"), "standard", 1, 1, 0, UNASKED, NULL, NULL, 0,
    ALLOW, NOTIFY, NULL, 2, NULL },
  { GRANT(NET_EGRESS, "{\"domains\":[\"api.test\"]}"), "standard", 0, 0, 1, APPROVED, NULL, NULL, 0,
    DENY, BLOCK, "admin-block-tier", 1, NULL },
  { GRANT(CLIPBOARD, "{\"copy_out\":true}"), "standard", 0, 0, 1, UNASKED, NULL, NULL, 0,
    DENY, BLOCK, "admin-block-tier", 3, NULL },
  /* The admin tier's forbids, final whatever the approval. */
  { GRANT(FS_SCOPE, "{\"write\":[\"/home/u/.ssh\"]}"), "high", 0, 0, 0, APPROVED, NULL, NULL, 0,
    DENY, NOTIFY, "admin-fs-credentials-and-shell-rc", 2, "write on /home/u/.ssh: forbidden" },
  { GRANT(FS_SCOPE, "{\"write\":[\"/home/u/.ssh\"]}"), "high", 0, 0, 0, UNASKED, NULL, NULL, 0,
    DENY, NOTIFY, "admin-fs-credentials-and-shell-rc", 2, NULL },
  { GRANT(FS_SCOPE, "{\"write\":[\"/home/u/project\"],\"read\":[\"/\"]}"), "standard", 0, 0, 0, UNASKED, NULL, NULL, 0,
    ALLOW, NOTIFY, "project-manifest-tiers", 2, NULL },
  { GRANT(FS_SCOPE, "{\"write\":[\"/etc/shinken\"]}"), "high", 0, 0, 0, APPROVED, NULL, NULL, 0,
    DENY, AUTO, "", -1, NULL },
  { GRANT(INSTALL_PRIVILEGED, "{\"scope\":\"pkg\"}"), "low", 0, 0, 0, APPROVED, NULL, NULL, 0,
    DENY, TASK, "admin-install-low-trust", 5, NULL },
  { GRANT(INSTALL_PRIVILEGED, "{\"scope\":\"pkg\"}"), "standard", 0, 0, 0, UNASKED, NULL, NULL, 0,
    ASK, TASK, "project-manifest-tiers", 5, NULL },
  { GRANT(PERIPHERAL, "{\"camera\":true}"), "high", 0, 0, 0, APPROVED, NULL, NULL, 0,
    DENY, BLOCK, "admin-block-tier", 8, NULL },
  { GRANT(PERIPHERAL, "{\"input_inject\":true}"), "high", 0, 0, 0, UNASKED, NULL, NULL, 0,
    DENY, BLOCK, NULL, 8, NULL },
  { GRANT(CREDENTIALS, "{\"broker_scopes\":[\"github:read\"]}"), "standard", 0, 0, 0, UNASKED, NULL, NULL, 0,
    ASK, TASK, "project-manifest-tiers", 7, NULL },
  { GRANT(PERSISTENCE, "{\"paths\":[\"/home/u/.config/systemd/x\"]}"), "high", 0, 0, 0, APPROVED, NULL, NULL, 0,
    DENY, TASK, "admin-persistence-system-paths", 6, NULL },
  { GRANT(PERSISTENCE, "{\"paths\":[\"/etc/cron.d/x\"]}"), "high", 0, 0, 0, APPROVED, NULL, NULL, 0,
    DENY, AUTO, "", -1, NULL },
  { GRANT(NET_EGRESS, REG), "standard", 0, 0, 0, APPROVED, NULL, NULL, -1000,
    DENY, AUTO, "admin-session-expired", 0, NULL },
  { GRANT(NET_EGRESS, "{\"domains\":[\"api.test\"]}"), "standard", 0, 0, 0, UNASKED, NULL, NULL, -1000,
    DENY, TASK, "admin-session-expired", 1, NULL },
  /* The exec-path rule, from the session's own $PATH (never the process's). */
  { GRANT(FS_SCOPE, "{\"write\":[\"/home/u/bin\"]}"), "high", 0, 0, 0, APPROVED, NULL, "/home/u/bin", 0,
    DENY, NOTIFY, "admin-fs-exec-path", 2, NULL },
  { GRANT(FS_SCOPE, "{\"write\":[\"/home/u/bin/tool\"]}"), "high", 0, 0, 0, APPROVED, NULL, "/home/u/bin/", 0,
    DENY, NOTIFY, "admin-fs-exec-path", 2, NULL },
  { GRANT(FS_SCOPE, "{\"write\":[\"/home/u\"]}"), "high", 0, 0, 0, APPROVED, NULL, "/home/u/bin", 0,
    DENY, NOTIFY, "admin-fs-exec-path", 2, NULL },
  { GRANT(FS_SCOPE, "{\"write\":[\"/home/u/binaries\"]}"), "high", 0, 0, 0, APPROVED, NULL, "/home/u/bin", 0,
    ALLOW, NOTIFY, NULL, 2, NULL },
  { GRANT(FS_SCOPE, "{\"write\":[\"/home/u/bin\"]}"), "high", 0, 0, 0, APPROVED, NULL, NULL, 0,
    ALLOW, NOTIFY, NULL, 2, NULL },
  { GRANT(FS_SCOPE, "{\"read\":[\"/home/u/bin\"]}"), "high", 0, 0, 0, APPROVED, NULL, "/home/u/bin", 0,
    ALLOW, NOTIFY, NULL, 2, NULL },
  { GRANT(FS_SCOPE, "{\"write\":[\"/tmp/x\"]}"), "high", 0, 0, 0, APPROVED, NULL, "/", 0,
    DENY, NOTIFY, "admin-fs-exec-path", 2, NULL },
  /* Patterns: every path is the prefix of everything beneath it, every
   * host pattern and port range stands for each host and port. */
  { GRANT(FS_SCOPE, "{\"write\":[\"/home/u\"]}"), "high", 0, 0, 0, APPROVED, NULL, NULL, 0,
    DENY, NOTIFY, "admin-fs-credentials-and-shell-rc", 2, "write on /home/u covers /home/u/" },
  { GRANT(FS_SCOPE, "{\"write\":[\"/home\"]}"), "high", 0, 0, 0, APPROVED, NULL, NULL, 0,
    DENY, NOTIFY, "admin-fs-credentials-and-shell-rc", 2, "write on /home covers /home/" },
  { GRANT(FS_SCOPE, "{\"write\":[\"/home/u/project\"]}"), "standard", 0, 0, 0, UNASKED, NULL, NULL, 0,
    ALLOW, NOTIFY, "project-manifest-tiers", 2, NULL },
  { GRANT(FS_SCOPE, "{\"write\":[\"/srv/tools\"]}"), "high", 0, 0, 0, APPROVED, NULL, "/srv/tools/bin", 0,
    DENY, NOTIFY, "admin-fs-exec-path", 2, NULL },
  { GRANT(FS_SCOPE, "{\"write\":[\"/srv/tools\"],\"deny\":[\"/srv/tools/bin\"]}"), "high", 0, 0, 0, APPROVED, NULL,
    "/srv/tools/bin", 0, ALLOW, NOTIFY, "project-manifest-tiers", 2, NULL },
  { GRANT(PERSISTENCE, "{\"paths\":[\"/home/u/.cache/x\"]}"), "high", 0, 0, 0, UNASKED, NULL, NULL, 0,
    ASK, TASK, "project-manifest-tiers", 6, NULL },
  { GRANT(PERSISTENCE, "{\"paths\":[\"/home/u\"]}"), "high", 0, 0, 0, UNASKED, NULL, NULL, 0,
    DENY, TASK, "admin-fs-credentials-and-shell-rc", 6, "persistence of /home/u covers /home/u/" },
  { GRANT(PERSISTENCE, "{\"paths\":[\"/home/u/.ssh\"]}"), "high", 0, 0, 0, APPROVED, NULL, NULL, 0,
    DENY, TASK, "admin-fs-credentials-and-shell-rc", 6, NULL },
  { GRANT(PERSISTENCE, "{\"paths\":[\"/home/u/bin\"]}"), "high", 0, 0, 0, APPROVED, NULL, "/home/u/bin", 0,
    DENY, TASK, "admin-fs-exec-path", 6, NULL },
  { GRANT(NET_EGRESS, "{\"domains\":[\"**.npm.example\"],\"ports\":[443]}"), "standard", 0, 0, 0, UNASKED, NULL,
    NULL, 0, ALLOW, AUTO, "project-manifest-tiers", 0, NULL },
  { GRANT(NET_EGRESS, "{\"domains\":[\"**.test\"]}"), "standard", 0, 0, 0, UNASKED, NULL, NULL, 0,
    ASK, TASK, "project-manifest-tiers", 1, NULL },
  /* The admin's standing grants: no manifest, tier Auto, the forbids hold. */
  { SHK_POLICY_STANDING, SHK_CAP_INSTALL_PRIVILEGED, "{\"scope\":\"any\"}", "standard", 0, 0, 0, UNASKED, NULL,
    NULL, 0, ALLOW, AUTO, "project-manifest-tiers", -1, NULL },
  { SHK_POLICY_STANDING, SHK_CAP_INSTALL_PRIVILEGED, "{\"scope\":\"pkg\"}", "low", 0, 0, 0, UNASKED, NULL,
    NULL, 0, DENY, AUTO, "admin-install-low-trust", -1, NULL },
  { SHK_POLICY_STANDING, SHK_CAP_FS_SCOPE, "{\"write\":[\"/etc/shinken/admin.cedar\"]}", "high", 0, 0, 0, UNASKED,
    NULL, NULL, 0, DENY, AUTO, "admin-fs-policy-store", -1, NULL },
  /* Turning a layer off: only the operator's own run, when they asked. */
  { SHK_POLICY_DISABLE, 0, NULL, "high", 0, 0, 0, APPROVED, "network", NULL, 0,
    ALLOW, TASK, "project-operator-disables-a-layer", -1, NULL },
  { SHK_POLICY_DISABLE, 0, NULL, "high", 0, 0, 0, UNASKED, "user-separation", NULL, 0,
    ASK, TASK, "project-operator-disables-a-layer", -1, "needs a human's approval" },
  { SHK_POLICY_DISABLE, 0, NULL, "standard", 0, 0, 0, APPROVED, "seccomp", NULL, 0,
    DENY, TASK, "admin-no-disabling-the-sandbox", -1, "turning off seccomp: forbidden" },
  { SHK_POLICY_DISABLE, 0, NULL, "low", 0, 0, 0, UNASKED, "landlock", NULL, 0,
    DENY, TASK, "admin-no-disabling-the-sandbox", -1, NULL },
  { SHK_POLICY_DISABLE, 0, NULL, "high", 0, 0, 0, DENIED, "cgroup", NULL, 0,
    DENY, TASK, "admin-no-disabling-the-sandbox", -1, NULL },
};

static void run_case(const shk_policy *p, size_t i, const dcase *c)
{
  shk_cap_scope sc = { .cls = c->cls };
  shk_error err;
  if (c->scope && shk_cap_scope_parse(c->cls, c->scope, &sc, &err))
    fail_msg("case %zu: scope %s: %s", i, c->scope, err.message);
  int64_t now = now_ms();
  const char *dirs[1] = { c->exec_path };
  shk_policy_session s = {
    .id = "s-test", .trust_tier = c->trust, .model = "m", .expires_ms = now + (c->expires ? c->expires : HOUR),
    .taint = { c->ext_taint, c->sens_taint }, .exec_path = dirs, .n_exec_path = c->exec_path ? 1 : 0,
  };
  const char *layers[1] = { c->layer };
  shk_policy_request r = {
    .kind = c->kind, .scope = c->scope ? &sc : NULL, .external = c->external, .layers = layers,
    .n_layers = c->layer ? 1 : 0, .approval = c->approval, .now_ms = now,
  };
  shk_policy_answer a;
  shk_error e = { 0 };
  int rc = shk_policy_decide(p, &s, &r, &a, &e);
  if (rc)
    fail_msg("case %zu: no decision: %s", i, e.message);
  if (a.verdict != c->verdict || a.tier != c->tier || (c->entry != -2 && a.manifest_entry != c->entry) ||
      (c->policy && strcmp(a.policy, c->policy)) || (c->why_has && !strstr(a.why, c->why_has)))
    fail_msg("case %zu (%s %s): got %s, tier %s, entry %d, policy '%s', why '%s'; want %s, tier %s, entry %d, "
             "policy '%s', why with '%s'", i, c->scope ? c->scope : c->layer, c->trust,
             shk_policy_verdict_name(a.verdict), shk_policy_tier_name(a.tier), a.manifest_entry, a.policy, a.why,
             shk_policy_verdict_name(c->verdict), shk_policy_tier_name(c->tier), c->entry,
             c->policy ? c->policy : "*", c->why_has ? c->why_has : "");
  assert_true(a.why[0] != '\0');
  assert_int_equal(a.decided_by, c->entry == -1 && c->kind == SHK_POLICY_GRANT ? SHK_POLICY_BY_MANIFEST
                                                                                : SHK_POLICY_BY_CEDAR);
  shk_cap_scope_clear(&sc);
}

static void decisions(void **state)
{
  (void)state;
  need_solver();
  shk_policy *p = load(NULL, NULL);
  for (size_t i = 0; i < sizeof decide_cases / sizeof decide_cases[0]; i++)
    run_case(p, i, &decide_cases[i]);
  shk_policy_free(p);
}

/* The decision reads nothing from the process's environment: the same
 * question gets the same answer whatever $PATH says. */
static void pure_inputs(void **state)
{
  (void)state;
  need_solver();
  shk_policy *p = load(NULL, NULL);
  const dcase c = { GRANT(FS_SCOPE, "{\"write\":[\"/home/u/bin\"]}"), "high", 0, 0, 0, APPROVED, NULL, NULL, 0,
                    ALLOW, NOTIFY, NULL, 2, NULL };
  const char *saved = getenv("PATH");
  char *copy = saved ? strdup(saved) : NULL;
  setenv("PATH", "/home/u/bin:/usr/bin", 1);
  run_case(p, 0, &c);
  unsetenv("PATH");
  run_case(p, 1, &c);
  if (copy)
    setenv("PATH", copy, 1);
  free(copy);
  shk_policy_free(p);
}

/* ---- port ranges: a forbid on one port refuses every range holding it ---- */

static const char port_forbid[] =
  "@id(\"session-no-ssh\")\n"
  "forbid (principal, action == Shinken::Action::\"UseCapability\", resource == Shinken::Capability::\"net.egress\")\n"
  "when { context.request has ports && context.request.ports.lo <= 22 && 22 <= context.request.ports.hi };\n"
  "@id(\"session-no-evil\")\n"
  "forbid (principal, action == Shinken::Action::\"UseCapability\", resource == Shinken::Capability::\"net.egress\")\n"
  "when { context.request has domain && context.request.domain like \"*evil.test\" };\n";

static const struct {
  const char *scope;
  shk_policy_verdict verdict;
  const char *policy;
} port_cases[] = {
  { "{\"domains\":[\"api.test\"],\"ports\":[\"20-30\"]}", DENY, "session-no-ssh" },
  { "{\"domains\":[\"api.test\"],\"ports\":[22]}", DENY, "session-no-ssh" },
  { "{\"domains\":[\"api.test\"],\"ports\":[\"1-22\"]}", DENY, "session-no-ssh" },
  { "{\"domains\":[\"api.test\"],\"ports\":[\"22-65535\"]}", DENY, "session-no-ssh" },
  { "{\"domains\":[\"api.test\"],\"ports\":[443,\"20-30\"]}", DENY, "session-no-ssh" },
  { "{\"domains\":[\"api.test\"],\"ports\":[\"23-30\"]}", ALLOW, "project-manifest-tiers" },
  { "{\"domains\":[\"api.test\"],\"ports\":[\"1-21\",443]}", ALLOW, "project-manifest-tiers" },
  /* No port named: every port, 22 among them. */
  { "{\"domains\":[\"api.test\"]}", DENY, "session-no-ssh" },
  /* A pattern's own port is the port; the domain reaches Cedar without it. */
  { "{\"domains\":[\"api.test:443\"]}", ALLOW, "project-manifest-tiers" },
  { "{\"domains\":[\"api.test:22\"]}", DENY, "session-no-ssh" },
  { "{\"domains\":[\"x.evil.test:443\"]}", DENY, "session-no-evil" },
  { "{\"cidrs\":[\"10.0.0.0/8\"],\"ports\":[\"1-100\"]}", DENY, "session-no-ssh" },
  { "{\"cidrs\":[\"10.0.0.0/8\"],\"ports\":[443]}", ALLOW, "project-manifest-tiers" },
  { "{\"ports\":[\"20-30\"]}", DENY, "session-no-ssh" },
};

static void port_ranges(void **state)
{
  (void)state;
  need_solver();
  char *manifest = write_tmp("ports.json",
                             "{\"image\":\"t\",\"capabilities\":[{\"class\":\"net.egress\",\"tier\":\"Auto\","
                             "\"scope\":{\"domains\":[\"**.test\"],\"cidrs\":[\"10.0.0.0/8\"]}}]}", 0644);
  shk_policy *p = load(manifest, port_forbid);
  for (size_t i = 0; i < sizeof port_cases / sizeof port_cases[0]; i++) {
    const dcase c = { GRANT(NET_EGRESS, port_cases[i].scope), "standard", 0, 0, 0, UNASKED, NULL, NULL, 0,
                      port_cases[i].verdict, AUTO, port_cases[i].policy, 0, NULL };
    run_case(p, i, &c);
  }
  shk_policy_free(p);
}

/* ---- patterns: the two unsound cases of deciding a pattern as its literal ---- */

/* A copy of the shipped policy directory with EXTRA appended to the
 * project tier (each call its own directory). */
static const char *policy_dir(const char *extra)
{
  static int n;
  static char dir[4300];
  snprintf(dir, sizeof dir, "%s/policies%d", tmpdir, n++);
  assert_int_equal(mkdir(dir, 0700), 0);
  char sub[4400];
  snprintf(sub, sizeof sub, "%s/manifests", dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  static const char *const files[] = { "schema.cedarschema", "admin.cedar", "project.cedar", "manifests/default.json" };
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char from[4400], to[4400], *text = NULL;
    snprintf(from, sizeof from, "%s/%s", shipped_dir(), files[i]);
    snprintf(to, sizeof to, "%s/%s", dir, files[i]);
    assert_int_equal(shk__read_file(from, &text, NULL), 0);
    FILE *f = fopen(to, "w");
    assert_non_null(f);
    fputs(text, f);
    if (i == 2 && extra)
      fputs(extra, f);
    fclose(f);
    free(text);
  }
  return dir;
}

static shk_policy *load_src(shk_policy_source *src)
{
  shk_policy *p = NULL;
  shk_error err = { 0 };
  if (shk_policy_load(src, &p, &err))
    fail_msg("the policies did not load: %s", err.message);
  return p;
}

/* Decides a grant of CLS with SCOPE for a session at trust "high". */
static shk_policy_answer grant(const shk_policy *p, shk_cap_class cls, const char *scope, shk_policy_approval approval)
{
  shk_cap_scope sc = { .cls = cls };
  shk_error err = { 0 };
  if (shk_cap_scope_parse(cls, scope, &sc, &err))
    fail_msg("scope %s: %s", scope, err.message);
  /* One session: its expiry is fixed, the instant moves on. */
  static int64_t expires;
  int64_t now = now_ms();
  if (!expires)
    expires = now + HOUR;
  shk_policy_session s = { .id = "s-pat", .trust_tier = "high", .model = "m", .expires_ms = expires };
  shk_policy_request r = { .kind = SHK_POLICY_GRANT, .scope = &sc, .approval = approval, .now_ms = now };
  shk_policy_answer a;
  if (shk_policy_decide(p, &s, &r, &a, &err))
    fail_msg("%s: no decision: %s", scope, err.message);
  shk_cap_scope_clear(&sc);
  return a;
}

static const char test_forbids[] =
  "@id(\"no-evil-org\")\n"
  "forbid (principal, action == Shinken::Action::\"UseCapability\", resource == Shinken::Capability::\"net.egress\")\n"
  "when { context.request has domain && context.request.domain like \"*.evil.org\" };\n"
  "@id(\"no-app-keys\")\n"
  "forbid (principal, action == Shinken::Action::\"UseCapability\", resource == Shinken::Capability::\"fs.scope\")\n"
  "when { context.request has path && (context.request.path == \"/srv/app/keys\" ||\n"
  "  context.request.path like \"/srv/app/keys/*\" || context.request.path == \"/srv/app/secret\") };\n";

typedef struct pcase {
  shk_cap_class cls;
  const char *scope;
  shk_policy_approval approval;
  shk_policy_verdict verdict;
  const char *policy;
  const char *why_has;
  const char *cx_starts, *cx_ends;   /* the counterexample; NULL: none */
  const char *offer[3];              /* the offer's exceptions, "field text" ("!" after: exact) */
} pcase;

static const pcase pattern_cases[] = {
  /* **.org against a forbid on *.evil.org: asked about as a literal it
   * would be Ask; it stands for x.evil.org too, so it is refused, and the
   * grant without the hosts below evil.org is offered. */
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"**.org\"]}", UNASKED, DENY, "no-evil-org",
    "domain **.org ports 1-65535 covers ", NULL, ".evil.org", { "domain *.evil.org" } },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"**.example.org\"]}", UNASKED, ASK, "project-manifest-tiers", NULL, NULL, NULL,
    { NULL } },
  /* The literal itself is forbidden: no counterexample needed. */
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"*.evil.org\"]}", APPROVED, DENY, "no-evil-org",
    "domain *.evil.org ports 1-65535: forbidden by no-evil-org", NULL, NULL, { NULL } },
  /* write on /home/u, against the shipped admin tier: the credential
   * stores of the home are forbidden, too many to offer leaving out. */
  { SHK_CAP_FS_SCOPE, "{\"write\":[\"/home/u\"]}", UNASKED, DENY, "admin-fs-credentials-and-shell-rc",
    "write on /home/u covers /home/u/", "/home/u/", NULL, { NULL } },
  /* A finite forbidden part: the narrowed grant is offered. */
  { SHK_CAP_FS_SCOPE, "{\"write\":[\"/srv/app\"]}", UNASKED, DENY, "no-app-keys", "write on /srv/app covers /srv/app/",
    "/srv/app/", NULL, { "path /srv/app/keys", "path /srv/app/secret!" } },
  { SHK_CAP_FS_SCOPE, "{\"read\":[\"/srv/app\"]}", UNASKED, DENY, "no-app-keys", NULL, "/srv/app/", NULL,
    { "path /srv/app/keys", "path /srv/app/secret!" } },
  /* ... and that narrowed grant, asked for as a scope, is allowed. */
  { SHK_CAP_FS_SCOPE, "{\"write\":[\"/srv/app\"],\"deny\":[\"/srv/app/keys\",\"/srv/app/secret\"]}", UNASKED, ALLOW,
    "project-manifest-tiers", NULL, NULL, NULL, { NULL } },
};

static void check_offer(size_t i, const pcase *c, const shk_policy_answer *a)
{
  size_t want = 0;
  while (want < 3 && c->offer[want])
    want++;
  if (a->offer.offered != (want > 0) || a->offer.n_except != want)
    fail_msg("case %zu (%s): offer %d with %zu exceptions (%s), want %zu", i, c->scope, a->offer.offered,
             a->offer.n_except, a->offer.why, want);
  for (size_t k = 0; k < want; k++) {
    bool found = false;
    for (size_t j = 0; j < a->offer.n_except && !found; j++) {
      char one[300];
      snprintf(one, sizeof one, "%s %s%s", a->offer.except[j].field, a->offer.except[j].text,
               a->offer.except[j].exact ? "!" : "");
      found = !strcmp(one, c->offer[k]);
    }
    if (!found)
      fail_msg("case %zu (%s): the offer (%s) lacks %s", i, c->scope, a->offer.why, c->offer[k]);
  }
}

static void patterns(void **state)
{
  (void)state;
  need_solver();
  shk_policy_source src = { policy_dir(test_forbids), NULL, NULL, getuid() };
  shk_policy *p = load_src(&src);
  for (size_t i = 0; i < sizeof pattern_cases / sizeof pattern_cases[0]; i++) {
    const pcase *c = &pattern_cases[i];
    shk_policy_answer a = grant(p, c->cls, c->scope, c->approval);
    size_t n = strlen(a.counterexample);
    if (a.verdict != c->verdict || strcmp(a.policy, c->policy) || (c->why_has && !strstr(a.why, c->why_has)) ||
        (c->cx_starts && strncmp(a.counterexample, c->cx_starts, strlen(c->cx_starts))) ||
        (c->cx_ends && !strstr(a.counterexample, c->cx_ends)) || (!c->cx_starts && !c->cx_ends && n))
      fail_msg("case %zu (%s): got %s, policy '%s', why '%s', counterexample '%s'", i, c->scope,
               shk_policy_verdict_name(a.verdict), a.policy, a.why, a.counterexample);
    check_offer(i, c, &a);
    if (!n)
      continue;
    /* The counterexample is real: asked for alone (as an exact host on
     * the port it names, or as the path), it is refused by the same
     * policy, and the refusal says so in those words. */
    char why[700], scope[700];
    snprintf(why, sizeof why, " covers %s, forbidden by %s", a.counterexample, a.policy);
    assert_non_null(strstr(a.why, why));
    if (c->cls == SHK_CAP_FS_SCOPE)
      snprintf(scope, sizeof scope, "{\"%s\":[\"%s\"]}", strstr(c->scope, "read") ? "read" : "write",
               a.counterexample);
    else
      snprintf(scope, sizeof scope, "{\"domains\":[\"%.*s:%s\"]}", (int)strcspn(a.counterexample, " "),
               a.counterexample, strrchr(a.counterexample, ' ') + 1);
    shk_policy_answer b = grant(p, c->cls, scope, APPROVED);
    if (b.verdict != DENY || strcmp(b.policy, a.policy))
      fail_msg("case %zu: the counterexample %s is %s by '%s' (%s)", i, scope, shk_policy_verdict_name(b.verdict),
               b.policy, b.why);
  }

  /* The issue's own example: the key file the prefix covers. */
  shk_policy_answer a = grant(p, SHK_CAP_FS_SCOPE, "{\"write\":[\"/home/u/.ssh/authorized_keys\"]}", APPROVED);
  assert_int_equal(a.verdict, DENY);
  assert_string_equal(a.policy, "admin-fs-credentials-and-shell-rc");

  /* The narrowed grants are exactly as wide as claimed: every element
   * inside is allowed (once a human approves, for the Ask-tier hosts),
   * every part left out is refused. */
  static const struct {
    shk_cap_class cls;
    const char *scope;
    shk_policy_verdict verdict;
  } exact[] = {
    { SHK_CAP_FS_SCOPE, "{\"write\":[\"/srv/app/a\"]}", ALLOW },
    { SHK_CAP_FS_SCOPE, "{\"write\":[\"/srv/app/keysx\"]}", ALLOW },
    { SHK_CAP_FS_SCOPE, "{\"write\":[\"/srv/app/secret2\"]}", ALLOW },
    { SHK_CAP_FS_SCOPE, "{\"write\":[\"/srv/app/secret/x\"]}", ALLOW },
    { SHK_CAP_FS_SCOPE, "{\"write\":[\"/srv/app/b/keys\"]}", ALLOW },
    { SHK_CAP_FS_SCOPE, "{\"write\":[\"/srv/app/keys\"]}", DENY },
    { SHK_CAP_FS_SCOPE, "{\"write\":[\"/srv/app/keys/id_rsa\"]}", DENY },
    { SHK_CAP_FS_SCOPE, "{\"write\":[\"/srv/app/keys/a/b\"]}", DENY },
    { SHK_CAP_FS_SCOPE, "{\"write\":[\"/srv/app/secret\"]}", DENY },
    { SHK_CAP_NET_EGRESS, "{\"domains\":[\"a.org:443\"]}", ASK },
    { SHK_CAP_NET_EGRESS, "{\"domains\":[\"evil.org:443\"]}", ASK },
    { SHK_CAP_NET_EGRESS, "{\"domains\":[\"x.notevil.org:443\"]}", ASK },
    { SHK_CAP_NET_EGRESS, "{\"domains\":[\"**.notevil.org\"]}", ASK },
    { SHK_CAP_NET_EGRESS, "{\"domains\":[\"x.evil.org:443\"]}", DENY },
    { SHK_CAP_NET_EGRESS, "{\"domains\":[\"a.b.evil.org:80\"]}", DENY },
  };
  for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
    shk_policy_answer b = grant(p, exact[i].cls, exact[i].scope, UNASKED);
    if (b.verdict != exact[i].verdict)
      fail_msg("narrowed %zu (%s): %s, want %s (%s)", i, exact[i].scope, shk_policy_verdict_name(b.verdict),
               shk_policy_verdict_name(exact[i].verdict), b.why);
  }

  /* A repeated pattern is a cache hit: no further solver check. */
  uint64_t checks, starts, hits, stored, checks2, hits2;
  assert_int_equal(grant(p, SHK_CAP_FS_SCOPE, "{\"write\":[\"/srv/app/z\"]}", UNASKED).verdict, ALLOW);
  shk_policy_analysis_counters(p, &checks, &starts, &hits, &stored);
  assert_int_equal(grant(p, SHK_CAP_FS_SCOPE, "{\"write\":[\"/srv/app/z\"]}", UNASKED).verdict, ALLOW);
  shk_policy_analysis_counters(p, &checks2, NULL, &hits2, NULL);
  assert_int_equal(checks2, checks);
  assert_int_equal(hits2, hits + 1);
  assert_true(stored >= 1);
  assert_int_equal(starts, 1);
  /* An exact element needs no solver at all. */
  assert_int_equal(grant(p, SHK_CAP_NET_EGRESS, REG, UNASKED).verdict, ALLOW);
  shk_policy_analysis_counters(p, &checks2, NULL, NULL, NULL);
  assert_int_equal(checks2, checks);
  shk_policy_free(p);
}

/* ---- failing closed: no solver, a solver that never answers ---- */

static void no_solver(void **state)
{
  (void)state;
  need_solver();
  char hang[4200];
  const char *srcdir = getenv("SHINKEN_SRCDIR");
  snprintf(hang, sizeof hang, "%s/tests/analysis/hang-solver.sh", srcdir ? srcdir : ".");
  static const struct {
    const char *solver;
    unsigned timeout_ms;
    const char *path_env;     /* $PATH for the load, or NULL: as it is */
    const char *why_has;
  } cases[] = {
    { "/nonexistent/cvc5", 0, NULL, "cannot prove that write on /work/p covers nothing forbidden: the solver "
                                    "'/nonexistent/cvc5' is not installed" },
    { NULL, 0, "/nonexistent", "cannot prove that write on /work/p covers nothing forbidden: the solver 'cvc5' is "
                               "not installed" },
    { "hang", 200, NULL, "cannot prove that write on /work/p covers nothing forbidden: the solver gave no answer "
                         "within 200 ms" },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *saved = getenv("PATH");
    char *copy = saved ? strdup(saved) : NULL;
    if (cases[i].path_env)
      setenv("PATH", cases[i].path_env, 1);
    shk_policy_source src = { shipped_dir(), NULL, NULL, getuid() };
    src.solver = cases[i].solver && !strcmp(cases[i].solver, "hang") ? hang : cases[i].solver;
    src.solver_timeout_ms = cases[i].timeout_ms;
    shk_policy *p = load_src(&src);
    /* A pattern is refused, saying why; the control, an exact element, is
     * decided without the solver. */
    shk_policy_answer a = grant(p, SHK_CAP_FS_SCOPE, "{\"write\":[\"/work/p\"]}", APPROVED);
    shk_policy_answer b = grant(p, SHK_CAP_NET_EGRESS, REG, UNASKED);
    if (copy)
      setenv("PATH", copy, 1);
    free(copy);
    if (a.verdict != DENY || a.policy[0] || !strstr(a.why, cases[i].why_has))
      fail_msg("case %zu: %s, policy '%s', why '%s'", i, shk_policy_verdict_name(a.verdict), a.policy, a.why);
    assert_int_equal(b.verdict, ALLOW);
    shk_policy_free(p);
  }
}

/* ---- policy edits: a widened tier is refused unless accepted ---- */

static char *slurp_at(const char *dir, const char *name)
{
  char path[4400], *text = NULL;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return shk__read_file(path, &text, NULL) == 0 ? text : NULL;
}

/* Loads DIR (a policy directory) with the state directory STATE; returns
 * the error code. */
static int load_with(const char *dir, const char *session, const char *state, bool accept, const char *solver,
                     shk_error *err, char **report)
{
  shk_policy_source src = { dir, NULL, session, getuid() };
  src.state_dir = state;
  src.accept_widening = accept;
  src.solver = solver;
  src.widening_report = report;
  shk_policy *p = NULL;
  int r = shk_policy_load(&src, &p, err);
  assert_true((r == 0) == (p != NULL));
  shk_policy_free(p);
  return r;
}

static void widening(void **state)
{
  (void)state;
  need_solver();
  char st[4300];
  snprintf(st, sizeof st, "%s/state/shinken", tmpdir);
  const char *same = policy_dir(NULL);
  char same_dir[4300];
  snprintf(same_dir, sizeof same_dir, "%s", same);
  /* Ask-tier requests granted without a human: wider. */
  char wider_dir[4300];
  snprintf(wider_dir, sizeof wider_dir, "%s",
           policy_dir("@id(\"ask-without-asking\") permit (principal, action == Shinken::Action::\"UseCapability\", "
                      "resource) when { context.tier == \"Ask\" };\n"));
  char narrower_dir[4300];
  snprintf(narrower_dir, sizeof narrower_dir, "%s",
           policy_dir("@id(\"no-gpu\") forbid (principal, action, resource == Shinken::Capability::\"gpu\");\n"));
  shk_error e = { 0 };
  char *report = NULL;

  /* The first load records what it accepted: the text, 0600, with its hash. */
  assert_int_equal(load_with(same_dir, NULL, st, false, NULL, &e, NULL), 0);
  char *rec = slurp_at(st, "policy-project.cedar"), *shipped = slurp_at(same_dir, "project.cedar");
  assert_non_null(rec);
  assert_string_equal(rec, shipped);
  free(rec);
  free(shipped);
  char path[4400];
  struct stat sb;
  snprintf(path, sizeof path, "%s/policy-project.cedar", st);
  assert_int_equal(stat(path, &sb), 0);
  assert_int_equal(sb.st_mode & 0777, 0600);
  snprintf(path, sizeof path, "%s/policy-project.cedar.sha256", st);
  assert_int_equal(stat(path, &sb), 0);
  assert_int_equal(sb.st_mode & 0777, 0600);

  /* The same tier again: accepted, with no question to the solver. */
  assert_int_equal(load_with(same_dir, NULL, st, false, "/nonexistent/cvc5", &e, NULL), 0);
  /* A wider one: refused, with an example request; the record stays. */
  assert_int_equal(load_with(wider_dir, NULL, st, false, NULL, &e, &report), -EPERM);
  assert_non_null(strstr(e.message, "the project tier (project.cedar) is more permissive than the one last accepted"));
  if (!strstr(e.message, "\"tier\":\"Ask\""))
    fail_msg("no example in: %s", e.message);
  assert_non_null(strstr(e.message, "--accept-widening"));
  assert_non_null(report);
  assert_non_null(strstr(report, "the new tier allows, the accepted one denies: request {"));
  free(report);
  report = NULL;
  rec = slurp_at(st, "policy-project.cedar");
  assert_null(strstr(rec, "ask-without-asking"));
  free(rec);
  /* Without a solver the widening cannot be disproved: refused too. */
  assert_int_equal(load_with(wider_dir, NULL, st, false, "/nonexistent/cvc5", &e, NULL), -EPERM);
  assert_non_null(strstr(e.message, "cannot prove that the project tier (project.cedar) is no more permissive"));
  assert_non_null(strstr(e.message, "not installed"));
  /* A narrower one is accepted, and then going back is a widening. */
  assert_int_equal(load_with(narrower_dir, NULL, st, false, NULL, &e, NULL), 0);
  assert_int_equal(load_with(same_dir, NULL, st, false, NULL, &e, NULL), -EPERM);
  assert_non_null(strstr(e.message, "is more permissive than the one last accepted"));
  /* Accepted by the operator: loaded and recorded; then it is the one the
   * next load is compared with, so the shipped tier is narrower again. */
  assert_int_equal(load_with(wider_dir, NULL, st, true, NULL, &e, NULL), 0);
  rec = slurp_at(st, "policy-project.cedar");
  assert_non_null(strstr(rec, "ask-without-asking"));
  free(rec);
  assert_int_equal(load_with(wider_dir, NULL, st, false, NULL, &e, NULL), 0);
  assert_int_equal(load_with(same_dir, NULL, st, false, NULL, &e, NULL), 0);

  /* The session tier: dropping a forbid widens it. */
  const char *forbid = "@id(\"session-no-gpu\") forbid (principal, action, resource == Shinken::Capability::\"gpu\");\n";
  assert_int_equal(load_with(same_dir, forbid, st, false, NULL, &e, NULL), 0);
  assert_int_equal(load_with(same_dir, NULL, st, false, NULL, &e, NULL), -EPERM);
  assert_non_null(strstr(e.message, "the session tier is more permissive"));
  assert_non_null(strstr(e.message, "Shinken::Capability"));
  assert_int_equal(load_with(same_dir, forbid, st, false, NULL, &e, NULL), 0);

  /* A record that does not match its hash cannot be believed. */
  snprintf(path, sizeof path, "%s/policy-project.cedar", st);
  FILE *f = fopen(path, "a");
  assert_non_null(f);
  fputs("// edited\n", f);
  fclose(f);
  assert_int_equal(load_with(same_dir, forbid, st, false, NULL, &e, NULL), -EPERM);
  assert_non_null(strstr(e.message, "is damaged"));
  assert_int_equal(load_with(same_dir, forbid, st, true, NULL, &e, NULL), 0);
  assert_int_equal(load_with(same_dir, forbid, st, false, NULL, &e, NULL), 0);
  /* No state directory: nothing compared, nothing recorded. */
  assert_int_equal(load_with(wider_dir, NULL, NULL, false, NULL, &e, NULL), 0);
}

/* ---- bad requests and bad policies ---- */

static void bad_requests(void **state)
{
  (void)state;
  shk_policy *p = load(NULL, NULL);
  shk_policy_session s = { .id = "s", .trust_tier = "high", .expires_ms = now_ms() + HOUR };
  const char *unknown[] = { "everything" };
  shk_policy_request r = { .kind = SHK_POLICY_DISABLE, .layers = unknown, .n_layers = 1,
                           .approval = APPROVED, .now_ms = now_ms() };
  shk_policy_answer a;
  shk_error e;
  assert_int_equal(shk_policy_decide(p, &s, &r, &a, &e), -EINVAL);
  assert_int_equal(a.verdict, DENY);
  assert_non_null(strstr(e.message, "unknown layer 'everything'"));
  r.n_layers = 0;
  assert_int_equal(shk_policy_decide(p, &s, &r, &a, &e), -EINVAL);
  r = (shk_policy_request){ .kind = SHK_POLICY_GRANT, .now_ms = now_ms() };
  assert_int_equal(shk_policy_decide(p, &s, &r, &a, &e), -EINVAL);
  assert_int_equal(a.verdict, DENY);
  s.trust_tier = NULL;
  assert_int_equal(shk_policy_decide(p, &s, &r, &a, &e), -EINVAL);
  shk_policy_free(p);

  /* A session tier may only narrow; a policy must fit the schema. */
  shk_policy_source src = { shipped_dir(), NULL, "permit(principal, action, resource);", getuid() };
  assert_int_equal(shk_policy_load(&src, &p, &e), -EPERM);
  assert_null(p);
  assert_non_null(strstr(e.message, "may only narrow"));
  src.session_text = "forbid(principal, action, resource) when { context.request.nope == 1 };";
  assert_int_equal(shk_policy_load(&src, &p, &e), -EINVAL);
  assert_non_null(strstr(e.message, "does not validate"));
  src.session_text = "forbid(principal, action, resource) when {";
  assert_int_equal(shk_policy_load(&src, &p, &e), -EINVAL);
  src = (shk_policy_source){ "/nonexistent-policy-dir", NULL, NULL, getuid() };
  assert_int_equal(shk_policy_load(&src, &p, &e), -ENOENT);
  assert_non_null(strstr(e.message, "/nonexistent-policy-dir/schema.cedarschema"));
  src = (shk_policy_source){ shipped_dir(), write_tmp("bad-manifest.json", "{\"image\":1}", 0644), NULL, getuid() };
  assert_int_equal(shk_policy_load(&src, &p, &e), -EINVAL);
  assert_non_null(strstr(e.message, "bad-manifest.json"));
}

/* ---- manifests ---- */

static void manifests(void **state)
{
  (void)state;
  shk__manifest *m;
  shk_error err;
  const char *good = "{\"image\":\"dev\",\"capabilities\":["
                     "{\"class\":\"net.egress\",\"scope\":{\"domains\":[\"**.npm.example\"],\"ports\":[443]},\"tier\":\"Auto\"},"
                     "{\"class\":\"net.egress\",\"scope\":{\"domains\":[\"**.test\"]},\"tier\":\"Ask\"},"
                     "{\"class\":\"fs.scope\",\"scope\":{\"write\":[\"/work\"]},\"tier\":\"Notify\"},"
                     "{\"class\":\"net.egress\",\"scope\":{\"domains\":[\"**.mall.example\"]},\"tier\":\"Ask\"},"
                     "{\"class\":\"net.egress\",\"scope\":{\"domains\":[\"evil.mall.example\"]},\"tier\":\"Block\"}]}";
  assert_int_equal(shk__manifest_parse(good, &m, &err), 0);
  assert_string_equal(shk__manifest_image(m), "dev");
  static const struct {
    shk_cap_class cls;
    const char *scope;
    int entry;
    shk_policy_tier tier;
  } checks[] = {
    { SHK_CAP_NET_EGRESS, "{\"domains\":[\"registry.npm.example\"],\"ports\":[443]}", 0, AUTO },
    { SHK_CAP_NET_EGRESS, "{\"domains\":[\"a.test\"],\"ports\":[22]}", 1, TASK },
    { SHK_CAP_NET_EGRESS, "{\"domains\":[\"registry.npm.example\"]}", -EPERM, AUTO },
    { SHK_CAP_NET_EGRESS, "{\"domains\":[\"evil.example\"]}", -EPERM, AUTO },
    { SHK_CAP_FS_SCOPE, "{\"write\":[\"/work/a\"]}", 2, NOTIFY },
    { SHK_CAP_FS_SCOPE, "{\"write\":[\"/etc\"]}", -EPERM, AUTO },
    { SHK_CAP_GPU, "{}", -EPERM, AUTO },
    /* First match for an exact name; a pattern that admits a Block-listed
     * name is at Block wherever that entry stands. */
    { SHK_CAP_NET_EGRESS, "{\"domains\":[\"evil.mall.example\"]}", 3, TASK },
    { SHK_CAP_NET_EGRESS, "{\"domains\":[\"*.mall.example\"],\"ports\":[443]}", 4, BLOCK },
    { SHK_CAP_NET_EGRESS, "{\"domains\":[\"**.mall.example\"]}", 4, BLOCK },
    { SHK_CAP_NET_EGRESS, "{\"domains\":[\"*.shop.mall.example\"]}", 3, TASK },
  };
  for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
    shk_cap_scope req;
    shk_error perr;
    assert_int_equal(shk_cap_scope_parse(checks[i].cls, checks[i].scope, &req, &perr), 0);
    shk_policy_tier tier = AUTO;
    int r = shk__manifest_check(m, &req, &tier, &err);
    if (r != checks[i].entry || (r >= 0 && tier != checks[i].tier))
      fail_msg("check %zu: %s: got %d tier %d", i, checks[i].scope, r, tier);
    if (r < 0)
      assert_non_null(strstr(err.message, "outside the manifest of image dev"));
    shk_cap_scope_clear(&req);
  }
  shk__manifest_free(m);
  const char *bad[] = {
    "{\"image\":\"x\",\"capabilities\":[],\"extra\":1}",
    "{\"image\":\"x\"}",
    "{\"image\":1,\"capabilities\":[]}",
    "{\"image\":\"x\",\"capabilities\":[{\"class\":\"net\",\"tier\":\"Auto\"}]}",
    "{\"image\":\"x\",\"capabilities\":[{\"class\":\"gpu\",\"tier\":\"Sometimes\"}]}",
    "{\"image\":\"x\",\"capabilities\":[{\"class\":\"gpu\",\"tier\":\"Auto\",\"scope\":{\"mode\":1}}]}",
    "{\"image\":\"x\",\"capabilities\":[{\"class\":\"gpu\",\"tier\":\"Auto\",\"extra\":1}]}",
    "{\"image\":\"x\",\"capabilities\":[1]}",
    "[]",
    "not json",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    err.message[0] = '\0';
    assert_int_equal(shk__manifest_parse(bad[i], &m, &err), -EINVAL);
    assert_null(m);
    assert_true(err.message[0] != '\0');
  }
  shk_policy_tier t;
  assert_int_equal(shk_policy_tier_parse("Notify", &t), 0);
  assert_int_equal(t, NOTIFY);
  assert_int_equal(shk_policy_tier_parse("notify", &t), -EINVAL);
  assert_string_equal(shk_policy_tier_name(BLOCK), "Block");
  assert_null(shk_policy_tier_name((shk_policy_tier)9));
}

/* ---- reading a policy file from a place only root and its owner control ---- */

typedef struct fcase {
  const char *what;
  const char *dir_mode;   /* the mode of the directory made for the case ("" none) */
  mode_t file_mode;
  const char *link;       /* make the path a symlink: "self" (to the file in the case's dir), "loop" */
  bool other_owner;       /* chown the file to another user (root only) */
  int want;
  const char *why_has;
} fcase;

static const fcase file_cases[] = {
  { "a private file", "0700", 0644, NULL, false, 0, NULL },
  { "a file others can read", "0755", 0644, NULL, false, 0, NULL },
  { "a world-writable file", "0755", 0666, NULL, false, -EPERM, "the file is writable by group or others" },
  { "a group-writable file", "0755", 0664, NULL, false, -EPERM, "writable by group or others" },
  { "in a world-writable directory", "0777", 0644, NULL, false, -EPERM, "is writable by group or others (owner" },
  { "in a group-writable directory", "0775", 0644, NULL, false, -EPERM, "writable by group or others" },
  { "in a sticky world-writable directory", "1777", 0644, NULL, false, 0, NULL },
  { "through a link in a private directory", "0755", 0644, "self", false, 0, NULL },
  { "through a link in a world-writable directory", "0777", 0644, "self", false, -EPERM, "writable" },
  { "a link loop", "0755", 0644, "loop", false, -ELOOP, "too many symbolic links" },
  { "a file of another user", "0755", 0644, NULL, true, -EPERM, "owned by someone other than root" },
};

static void trusted_files(void **state)
{
  (void)state;
  for (size_t i = 0; i < sizeof file_cases / sizeof file_cases[0]; i++) {
    const fcase *c = &file_cases[i];
    if (c->other_owner && geteuid() != 0)
      continue; /* only root can give a file away; the case runs as root (CI) */
    char dir[4200], file[4300], path[4400];
    snprintf(dir, sizeof dir, "%s/case%zu", tmpdir, i);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(file, sizeof file, "%s/admin.cedar", dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs("// policy\n", f);
    fclose(f);
    assert_int_equal(chmod(file, c->file_mode), 0);
    if (c->other_owner)
      assert_int_equal(chown(file, 65534, 65534), 0);
    snprintf(path, sizeof path, "%s", file);
    if (c->link && !strcmp(c->link, "self")) {
      snprintf(path, sizeof path, "%s/link", dir);
      assert_int_equal(symlink("admin.cedar", path), 0);
    } else if (c->link) {
      snprintf(path, sizeof path, "%s/loop", dir);
      assert_int_equal(symlink("loop", path), 0);
    }
    assert_int_equal(chmod(dir, (mode_t)strtol(c->dir_mode, NULL, 8)), 0);
    char *text = NULL;
    shk_error e = { 0 };
    int r = shk_policy_read_file(path, getuid(), &text, &e);
    if (r != c->want || (c->why_has && !strstr(e.message, c->why_has)) || (!r && strcmp(text, "// policy\n")))
      fail_msg("case %zu (%s): got %d '%s', want %d with '%s'", i, c->what, r, e.message, c->want,
               c->why_has ? c->why_has : "");
    free(text);
  }
  /* A relative path is walked from the current directory; a directory or
   * a missing file is an error naming the path. */
  char *text = NULL;
  shk_error e;
  char cwd[4096];
  assert_non_null(getcwd(cwd, sizeof cwd));
  assert_int_equal(chdir(tmpdir), 0);
  write_tmp("rel.cedar", "x", 0644);
  assert_int_equal(shk_policy_read_file("rel.cedar", getuid(), &text, &e), 0);
  assert_string_equal(text, "x");
  free(text);
  assert_int_equal(chdir(cwd), 0);
  assert_int_equal(shk_policy_read_file(tmpdir, getuid(), &text, &e), -EINVAL);
  assert_int_equal(shk_policy_read_file("/nonexistent/admin.cedar", getuid(), &text, &e), -ENOENT);
  assert_non_null(strstr(e.message, "/nonexistent/admin.cedar"));
  assert_null(text);
}

static int setup(void **state)
{
  (void)state;
  return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
  (void)state;
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "chmod -R u+rwx '%s' && rm -rf '%s'", tmpdir, tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(decisions),
    cmocka_unit_test(pure_inputs),
    cmocka_unit_test(port_ranges),
    cmocka_unit_test(patterns),
    cmocka_unit_test(no_solver),
    cmocka_unit_test(widening),
    cmocka_unit_test(bad_requests),
    cmocka_unit_test(manifests),
    cmocka_unit_test(trusted_files),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
