/* `shinken run [OPTIONS] -- CMD [ARGS...]`: parses the options, asks the
 * sandbox module what this host enforces and decides whether a missing
 * layer stops the run, opens the capability manager's session for --net
 * proxy, runs the sandbox (src/sandbox/linux/launch.c), writes the report
 * and exits with CMD's status. Errors of Shinken itself exit 125 with one
 * line, before anything runs. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/common.h"
#include "shinken/manager.h"
#include "shinken/egress.h"
#include "shinken/sandbox.h"

#define RUN_FAIL 125

/* The degraded-mode decision: a layer this host cannot give refuses the run
 * unless --allow-degraded is given, and is then warned about; a layer the
 * options turn off (--net host) is warned about. */
static void check_layers(const shk_sandbox_assessment *a, const shk_sandbox_opts *o)
{
  if (a->fatal[0])
    shk__die(RUN_FAIL, "%s; nothing was run", a->fatal);
  /* Turning a layer off is the policy's decision, like a grant: the
   * operator's own flags (--allow-degraded, --net host) are the human's
   * answer, and without them a layer the host lacks is "ask". */
  const char *layers[SHK_SANDBOX_LAYER_N];
  const char *first_missing = NULL;
  for (size_t i = 0; i < a->ngaps; i++) {
    layers[i] = shk_sandbox_layer_name(a->gaps[i].layer);
    if (!a->gaps[i].requested && !first_missing)
      first_missing = a->gaps[i].why;
  }
  shk_policy_answer pa = { .verdict = SHK_POLICY_ALLOW };
  shk_error perr;
  if (a->ngaps &&
      shk_manager_decide_layers(layers, a->ngaps, !first_missing || o->allow_degraded, &pa, &perr) < 0)
    shk__die(RUN_FAIL, "run: cannot ask the policy about turning off %s: %s (the policy comes from "
             "$SHINKEN_POLICY_DIR or the installed copy); nothing was run", layers[0], perr.message);
  if (pa.verdict == SHK_POLICY_ASK)
    shk__die(RUN_FAIL, "%s (see 'shinken doctor'; --allow-degraded runs without it); "
             "nothing was run", first_missing ? first_missing : pa.why);
  if (pa.verdict != SHK_POLICY_ALLOW)
    shk__die(RUN_FAIL, "run: refused by the policy: %s; nothing was run", pa.why);
  for (size_t i = 0; i < a->ngaps; i++)
    shk__warn("%s: %s", a->gaps[i].requested ? "warning" : "degraded", a->gaps[i].why);
}

/* The capability manager of a --net proxy session: a running `shinken
 * daemon` when there is one (this connection stays open for the life of
 * the command; closing it ends the session and its grants), otherwise one
 * embedded in this process for the life of the command. Either way the
 * manager hosts the session's egress proxy and answers it on every new
 * connection from the session's live handles, so `shinken grant` reaches
 * the running sandbox. */
typedef struct run_session {
  int fd;                /* to a running daemon, or -1 */
  shk_manager *embedded; /* the manager in this process, or NULL */
  char *id, *dir, *socket;
} run_session;

static void session_close(run_session *rs)
{
  if (rs->fd >= 0)
    close(rs->fd);
  shk_manager_free(rs->embedded);
  if (rs->socket)
    unlink(rs->socket);
  free(rs->id);
  free(rs->dir);
  free(rs->socket);
  memset(rs, 0, sizeof *rs);
  rs->fd = -1;
}

/* Tells the session's manager what the sandbox enforced (stage 2's own
 * report) and how it ended, for its audit timeline. Best effort: the
 * command has already run, and its status is the run's either way. */
static void session_report(run_session *rs, const shk_sandbox_result *res)
{
  static const struct { const char *name; size_t off; } layers[] = {
    { "seccomp", offsetof(shk_sandbox_applied, seccomp) },
    { "connect-guard", offsetof(shk_sandbox_applied, guard) },
    { "caps-dropped", offsetof(shk_sandbox_applied, caps_dropped) },
    { "no-new-privs", offsetof(shk_sandbox_applied, no_new_privs) },
    { "keyring", offsetof(shk_sandbox_applied, keyring) },
    { "egress-bridge", offsetof(shk_sandbox_applied, bridge) },
    { "userns", offsetof(shk_sandbox_applied, userns) },
    { "landlock-net", offsetof(shk_sandbox_applied, landlock_net) },
    { "landlock-scope", offsetof(shk_sandbox_applied, landlock_scope) },
  };
  if (!rs->id || (rs->fd < 0 && !rs->embedded))
    return;
  json_t *on = json_array(), *off = json_array();
  if (res->applied.landlock_abi)
    json_array_append_new(on, json_string("landlock"));
  else
    json_array_append_new(off, json_string("landlock"));
  for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++)
    json_array_append_new(*((const bool *)((const char *)&res->applied + layers[i].off)) ? on : off,
                          json_string(layers[i].name));
  json_t *req = json_pack("{s:s, s:s, s:b, s:i, s:i, s:o, s:o}", "op", "sandbox_ran", "session", rs->id,
                          "started", res->started, "exit_status", res->exit_status, "signal",
                          res->exit_signal ? res->exit_signal : res->launcher_signal, "enforced", on,
                          "degraded", off);
  shk_autofree char *text = req ? json_dumps(req, JSON_COMPACT) : NULL;
  json_decref(req);
  char *answer = NULL;
  shk_error err;
  int r = !text ? -ENOMEM
        : rs->fd >= 0 ? shk_manager_rpc(rs->fd, text, &answer, &err)
                      : shk_manager_call(rs->embedded, text, &answer);
  if (r < 0)
    answer = NULL;
  free(answer);
}

/* Returns NULL, or one line saying why the session could not be opened. */
static char *session_open(const shk_sandbox_opts *o, const shk_sandbox_plan *plan, run_session *rs)
{
  json_t *allow = json_array(), *deny = json_array();
  for (size_t i = 0; i < o->allow_domains.n; i++)
    json_array_append_new(allow, json_string(o->allow_domains.v[i]));
  for (size_t i = 0; i < o->deny_domains.n; i++)
    json_array_append_new(deny, json_string(o->deny_domains.v[i]));
  /* What the sandbox may write: the manager refuses a session whose
   * writable roots hold its control socket. */
  json_t *roots = json_array();
  for (size_t i = 0; i < plan->n; i++)
    if (plan->rules[i].access == SHK_ACCESS_WRITE)
      json_array_append_new(roots, json_string(plan->rules[i].path));
  json_t *req = json_pack("{s:s, s:s, s:b, s:o, s:o, s:o}", "op", "open_session", "name", "run", "egress", 1,
                          "allow_domains", allow, "deny_domains", deny, "writable_roots", roots);
  if (o->proxy_config) {
    /* The daemon has its own working directory: give it the real path. */
    char real[PATH_MAX];
    if (!realpath(o->proxy_config, real)) {
      json_decref(req);
      return shk__xasprintf("--proxy-config %s: %s", o->proxy_config, strerror(errno));
    }
    json_object_set_new(req, "proxy_config", json_string(real));
  }
  shk_autofree char *text = json_dumps(req, JSON_COMPACT);
  json_decref(req);
  char *answer = NULL;
  shk_error err;
  if (!text)
    return shk__xasprintf("out of memory");
  rs->fd = shk_manager_connect(shk_manager_socket_path());
  if (rs->fd >= 0) {
    if (shk_manager_rpc(rs->fd, text, &answer, &err) < 0)
      return shk__xasprintf("the manager at %s: %s", shk_manager_socket_path(), err.message);
  } else {
    /* Embedded (a daemon keeps a log of its own); the workload never sees
     * the events. */
    shk_manager_config mc;
    if (shk_manager_config_load(NULL, &mc, &err) < 0)
      return shk__xasprintf("capability manager: %s", err.message);
    /* No timeline yet: a log has one writer, and concurrent runs cannot
     * all write the user's default store. */
    mc.opts.audit_db = NULL;
    int r = shk_manager_new(&mc.opts, &rs->embedded, &err);
    shk_manager_config_clear(&mc);
    if (r < 0)
      return shk__xasprintf("capability manager: %s", err.message);
    if (shk_manager_call(rs->embedded, text, &answer) < 0)
      return shk__xasprintf("capability manager: out of memory");
  }
  json_t *ans = json_loads(answer, 0, NULL);
  free(answer);
  char *why = NULL;
  if (!json_is_true(json_object_get(ans, "ok"))) {
    const char *e = json_string_value(json_object_get(ans, "error"));
    why = shk__xasprintf("%s", e ? e : "the manager refused the session");
  } else {
    rs->id = shk__xstrdup(json_string_value(json_object_get(ans, "session")));
    rs->dir = shk__xstrdup(json_string_value(json_object_get(ans, "egress_dir")));
  }
  json_decref(ans);
  if (why || !rs->embedded)
    return why;
  /* An embedded manager takes grants for this session on a socket of its
   * own (not the daemon's path, which a later `shinken run` would take for
   * a daemon's): said on a terminal, where a person can use it. */
  const char *xdg = getenv("XDG_RUNTIME_DIR");
  rs->socket = shk__xasprintf("%s/shinken/run-%d.sock", xdg && *xdg ? xdg : "/run", (int)getpid());
  if (shk_manager_serve(rs->embedded, rs->socket, &err) < 0) {
    free(rs->socket);
    rs->socket = NULL;
  } else if (isatty(STDERR_FILENO)) {
    fprintf(stderr, "shinken: session %s; grant egress with: SHINKEN_SOCKET=%s shinken grant %s net.egress "
                    "--scope '{\"domains\":[\"HOST\"]}'\n", rs->id, rs->socket, rs->id);
  }
  return NULL;
}

/* The exit status of `shinken run`: the command's, 128+N when a signal N
 * ended it or the launcher, 125 when the sandbox never completed (bwrap or
 * stage 2 said why). */
static int exit_status(const shk_sandbox_result *res)
{
  if (res->launcher_signal)
    return 128 + res->launcher_signal;
  if (res->exit_signal)
    return 128 + res->exit_signal;
  if (!res->started)
    return RUN_FAIL;
  return res->exit_status;
}

int shk_cli_run(int argc, char **argv)
{
  shk_sandbox_opts o;
  shk_sandbox_opts_init(&o);
  shk_error e;
  if (shk_sandbox_opts_parse(&o, argc - 1, argv + 1, &e) < 0)
    shk__die(RUN_FAIL, "run: %s", e.message);
  if (o.net != SHK_NET_PROXY && (o.allow_domains.n || o.deny_domains.n || o.proxy_config))
    shk__die(RUN_FAIL, "run: --allow-domain, --deny-domain and --proxy-config need --net proxy");

  shk_sandbox_env env;
  if (shk_sandbox_env_from_process(&env, &e) < 0)
    shk__die(RUN_FAIL, "run: %s", e.message);
  shk_sandbox_features f;
  bool limits = o.mem || o.pids || o.cpu_milli;
  if (shk_sandbox_features_detect(&f, &env, limits ? SHK_DETECT_CGROUP : 0) < 0)
    shk__die(RUN_FAIL, "run: out of memory");
  shk_sandbox_assessment a;
  shk_sandbox_assess(&f, &env, &o, &a);
  check_layers(&a, &o);

  /* Opened before anything runs, so that a report that cannot be written
   * stops the run; written once the sandbox is gone. */
  FILE *report = NULL;
  if (o.report && !(report = fopen(o.report, "we")))
    shk__die(RUN_FAIL, "--report %s: cannot write the report: %s; nothing was run", o.report,
             strerror(errno));

  shk_sandbox_plan plan;
  if (shk_sandbox_plan_build(&o, &env, &plan, &e) < 0)
    shk__die(RUN_FAIL, "run: %s; nothing was run", e.message);
  run_session rs = { .fd = -1 };
  if (o.net == SHK_NET_PROXY) {
    char *why = session_open(&o, &plan, &rs);
    if (why) {
      session_close(&rs);
      shk_sandbox_plan_free(&plan);
      shk__die(RUN_FAIL, "run: egress: %s; nothing was run", why);
    }
  }

  shk_sandbox_egress eg = { rs.dir, rs.id };
  shk_sandbox_result res;
  int r = shk_sandbox_launch(&o, &env, &f, &a, &plan, &eg, &res, &e);
  session_report(&rs, &res);
  session_close(&rs);
  if (r < 0)
    shk__die(RUN_FAIL, "run: %s%s", e.message, res.started ? "" : "; nothing was run");
  int status = exit_status(&res);
  if (report) {
    char *json = NULL;
    bool ok = shk_sandbox_report(&o, &a, &res, &json, &e) == 0 && fputs(json, report) >= 0;
    free(json);
    if (fclose(report) != 0 || !ok)
      shk__warn("--report %s: cannot write the report", o.report);
  }
  shk_sandbox_result_free(&res);
  shk_sandbox_features_free(&f);
  shk_sandbox_env_free(&env);
  shk_sandbox_opts_free(&o);
  return status;
}
