/* SPDX-License-Identifier: Apache-2.0 */
/* `shinken run [OPTIONS] -- CMD [ARGS...]`: parses the options, asks the
 * sandbox module what this host enforces and decides whether a missing
 * layer stops the run, opens the capability manager's session for --net
 * proxy, runs the sandbox (src/sandbox/linux/launch.c), writes the report
 * and exits with CMD's status. Errors of Shinken itself exit 125 with one
 * line, before anything runs. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/run-ask.h"
#include "common/common.h"
#include "shinken/manager.h"
#include "shinken/egress.h"
#include "shinken/sandbox.h"

#define RUN_FAIL SHK_EXIT_RUN_ERROR

extern char **environ;

/* A byte count as --mem takes it: 64M, 2G, or bytes. */
static const char *mem_text(uint64_t bytes)
{
  static char text[32];
  static const char units[] = "KMGT";
  int u = -1;
  while (u < 3 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    u++;
  }
  if (u < 0)
    snprintf(text, sizeof text, "%llu bytes", (unsigned long long)bytes);
  else
    snprintf(text, sizeof text, "%llu%c", (unsigned long long)bytes, units[u]);
  return text;
}

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
  /* An embedded manager's proxy verdicts: counted for the summary, and
   * written to LOG (SHINKEN_EVENT_LOG) when it is set. PRIVATE is a
   * directory of the caller's own (0700), removed at exit, for the control
   * socket when there is no XDG_RUNTIME_DIR. */
  shk_cli_refusals *refusals;
  char *log, *private;
  bool inline_prompt;    /* the embedded manager's cards are drawn on the caller's terminal */
  const shk_sandbox_paths *ceiling; /* Landlock's ceiling of live grants */
  const shk_sandbox_opts *opts;     /* the limits asked, for the manager's sessions view */
  shk_cli_run_log_info audit; /* an embedded manager's own timeline */
  char *panel_url;            /* --panel: its login URL, or NULL */
  json_t *sentinels;          /* {VAR: sentinel} of the broker's secrets, for the sandbox */
} run_session;

/* Whether the launch will relay a terminal (relay.c's test), and so can
 * draw a card on it. */
static bool interactive(void)
{
  return isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
}

static void session_close(run_session *rs)
{
  if (rs->fd >= 0)
    close(rs->fd);
  /* The manager first: its proxies may still be handing over verdicts. */
  shk_manager_free(rs->embedded);
  shk_cli_refusals_free(rs->refusals);
  json_decref(rs->sentinels);
  if (rs->socket)
    unlink(rs->socket);
  if (rs->private)
    rmdir(rs->private);
  free(rs->id);
  free(rs->dir);
  free(rs->socket);
  free(rs->log);
  free(rs->private);
  free(rs->panel_url);
  shk_cli_run_log_clear(&rs->audit);
  memset(rs, 0, sizeof *rs);
  rs->fd = -1;
}

/* What stage 2 reported it enforced (ON) and could not (OFF), by layer. */
static void layers_json(const shk_sandbox_result *res, json_t **on, json_t **off)
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
  *on = json_array();
  *off = json_array();
  if (res->applied.landlock_abi)
    json_array_append_new(*on, json_string("landlock"));
  else
    json_array_append_new(*off, json_string("landlock"));
  for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++)
    json_array_append_new(*((const bool *)((const char *)&res->applied + layers[i].off)) ? *on : *off,
                          json_string(layers[i].name));
}

static int session_send(run_session *rs, json_t *req, char **answer, shk_error *err)
{
  shk_autofree char *text = req ? json_dumps(req, JSON_COMPACT) : NULL;
  json_decref(req);
  *answer = NULL;
  int r = !text ? shk__error_set(err, -ENOMEM, "out of memory")
        : rs->fd >= 0 ? shk_manager_rpc(rs->fd, text, answer, err)
                      : shk_manager_call(rs->embedded, text, answer);
  if (r < 0)
    *answer = NULL;
  return r;
}

/* The launcher's hook once stage 2 has reported (shk_sandbox_io.on_started):
 * the session's manager records the sandbox's start with what it enforced,
 * and from now on mounts fs.scope grants into the process it names.
 * A start the manager cannot record stops the sandbox (its answer ok
 * false, or no answer): the timeline has the start of every sandbox that
 * goes on running. */
static int session_started(void *data, const shk_sandbox_result *res, shk_error *err)
{
  run_session *rs = data;
  if (!rs->id || (rs->fd < 0 && !rs->embedded))
    return 0;
#if SHK_FAULT_INJECTION
  /* Test builds only (meson option fault_injection): SHINKEN_HOLD_START=FILE
   * holds the report of the start until FILE exists, so that a test can
   * grant in the window between the session's opening and its sandbox's
   * start. Release builds have no such switch. */
  const char *hold = getenv("SHINKEN_HOLD_START");
  for (int i = 0; hold && access(hold, F_OK) < 0 && i < 3000; i++)
    usleep(10000);
#endif
  json_t *on, *off;
  layers_json(res, &on, &off);
  json_t *req = json_pack("{s:s, s:s, s:o, s:o}", "op", "sandbox_started", "session", rs->id,
                          "enforced", on, "degraded", off);
  /* The process live unlocks mount into, and what Landlock lets them
   * write: without a pid the manager refuses fs.scope grants, saying why. */
  if (req && res->pid > 0) {
    json_t *ceiling = json_array();
    for (size_t i = 0; rs->ceiling && i < rs->ceiling->n; i++)
      json_array_append_new(ceiling, json_string(rs->ceiling->v[i]));
    json_object_set_new(req, "pid", json_integer(res->pid));
    json_object_set_new(req, "ceiling", ceiling);
  }
  /* The limits the sandbox was started with, for the panel's Sessions
   * view: 0 is no limit asked, and "cgroup" says whether a session cgroup
   * holds them (--allow-degraded runs without one where there is none). */
  const shk_sandbox_opts *o = rs->opts;
  if (req && o)
    json_object_set_new(req, "limits", json_pack("{s:I, s:I, s:I, s:s, s:b}", "memory", (json_int_t)o->mem, "pids",
                                                 (json_int_t)o->pids, "cpu_milli", (json_int_t)o->cpu_milli, "net",
                                                 o->net == SHK_NET_PROXY ? "proxy"
                                                 : o->net == SHK_NET_HOST ? "host" : "none",
                                                 "cgroup", res->cgroup_paths[0] != NULL));
  char *answer;
  int r = session_send(rs, req, &answer, err);
  if (r < 0)
    return r;
  json_t *ans = json_loads(answer, 0, NULL);
  free(answer);
  if (!json_is_true(json_object_get(ans, "ok"))) {
    const char *e = json_string_value(json_object_get(ans, "error"));
    r = shk__error_set(err, -EIO, "%s", e ? e : "the manager gave no answer");
  }
  json_decref(ans);
  return r;
}

/* Tells the session's manager how the sandbox ended (and what it enforced,
 * for a manager that did not hear of its start), with the limit that acted
 * on it, for its audit timeline. Best effort: the command has already run,
 * and its status is the run's either way. */
static void session_report(run_session *rs, const shk_sandbox_result *res)
{
  if (!rs->id || (rs->fd < 0 && !rs->embedded))
    return;
  json_t *on, *off;
  layers_json(res, &on, &off);
  /* exit_status -1: the launcher killed bwrap (a failure to supervise it,
   * or a start that could not be recorded), which is a SIGKILL. */
  int sig = res->exit_signal ? res->exit_signal : res->launcher_signal ? res->launcher_signal
          : res->exit_status == -1 ? SIGKILL : 0;
  json_t *req = json_pack("{s:s, s:s, s:b, s:i, s:o, s:o}", "op", "sandbox_ran", "session", rs->id,
                          "started", res->started, "signal", sig, "enforced", on, "degraded", off);
  if (req && res->exit_status >= 0)
    json_object_set_new(req, "exit_status", json_integer(res->exit_status));
  /* The limit that acted: the memory limit killed a process, or the pids
   * limit refused a fork (the cgroup's own counters, read before it was
   * removed). */
  const char *limit = res->oom_kills ? "memory" : res->pids_refused ? "pids" : NULL;
  if (req && limit)
    json_object_set_new(req, "limit", json_string(limit));
  char *answer;
  shk_error err;
  if (session_send(rs, req, &answer, &err) == 0)
    free(answer);
}

/* --panel: the run's manager serves the Permission Panel on a port of
 * loopback the kernel picks, its login file beside the run's control
 * socket, so that `SHINKEN_SOCKET=SOCKET shinken panel` prints it again.
 * Why this is safe: the sandbox of --net proxy has a network namespace of
 * its own, so the host's loopback, where the panel listens, cannot be
 * reached from inside, and the login file lies in the control socket's
 * directory, which the sandbox does not see. A panel that cannot be served
 * is said and the run goes on: the panel grants nothing by not being
 * there. */
static void serve_panel(run_session *rs)
{
  char login[PATH_MAX];
  shk_error err;
  if (shk_manager_panel_login_path(rs->socket, login, sizeof login))
    shk__warn("warning: --panel: %s: no place for the panel's login file", rs->socket);
  else if (shk_manager_serve_panel(rs->embedded, "127.0.0.1:0", login, rs->audit.path, &rs->panel_url, &err) < 0)
    shk__warn("warning: --panel: %s", err.message);
}

/* The broker's sentinels go into the sandbox's environment, passed
 * although their names (GH_TOKEN, NPM_TOKEN) are of the kind the filter
 * removes: a sentinel is not a secret, only the proxy can turn it into
 * one. The caller's own value of such a variable is replaced. */
static void pass_sentinels(shk_sandbox_opts *o, run_session *rs)
{
  const char *var;
  json_t *v;
  json_object_foreach(rs->sentinels, var, v) {
    const char *val = json_string_value(v);
    if (!val)
      continue;
    if (setenv(var, val, 1) < 0)
      shk__die(RUN_FAIL, "run: out of memory");
    o->env.v = shk__xrealloc(o->env.v, (o->env.n + 1) * sizeof *o->env.v);
    o->env.v[o->env.n++] = shk__xstrdup(var);
  }
}

/* Returns NULL, or one line saying why the session could not be opened. */
static char *session_open(const shk_sandbox_opts *o, const shk_sandbox_plan *plan,
                          const char *proxy_config, run_session *rs)
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
  /* "sandbox": this launcher reports its sandbox's start, so the manager
   * keeps mount grants made before it for that start. */
  json_t *req = json_pack("{s:s, s:s, s:b, s:o, s:o, s:o, s:b}", "op", "open_session", "name", "run", "egress", 1,
                          "allow_domains", allow, "deny_domains", deny, "writable_roots", roots, "sandbox", 1);
  if (!proxy_config)
    proxy_config = o->proxy_config;
  if (proxy_config) {
    /* The daemon has its own working directory: give it the real path. */
    char real[PATH_MAX];
    if (!realpath(proxy_config, real)) {
      json_decref(req);
      return shk__xasprintf("--proxy-config %s: %s", proxy_config, strerror(errno));
    }
    json_object_set_new(req, "proxy_config", json_string(real));
  }
  rs->fd = shk_manager_connect(shk_manager_socket_path());
  /* A daemon's cards reach the humans who use it (shinken approvals, a
   * harness's subscriber), so what no handle covers is held for them. An
   * embedded manager's reach the caller's terminal when the run owns one
   * (the inline prompt, run-ask.c), and so do a daemon's cards of this
   * session. Without a terminal an embedded manager's cards would reach
   * nobody: its proxy refuses at once, and the summary says how to grant. */
  rs->inline_prompt = interactive();
  if (rs->fd < 0 && !rs->inline_prompt)
    json_object_set_new(req, "ask", json_false());
  shk_autofree char *text = json_dumps(req, JSON_COMPACT);
  json_decref(req);
  char *answer = NULL;
  shk_error err;
  if (!text)
    return shk__xasprintf("out of memory");
  if (rs->fd >= 0) {
    if (shk_manager_rpc(rs->fd, text, &answer, &err) < 0)
      return shk__xasprintf("the manager at %s: %s", shk_manager_socket_path(), err.message);
  } else {
    /* Embedded (a daemon keeps a log of its own); the workload never sees
     * the events. The proxy's verdicts come to this process too, for its
     * summary of refusals (and SHINKEN_EVENT_LOG, which keeps them). */
    shk_manager_config mc;
    if (shk_manager_config_load(NULL, &mc, &err) < 0)
      return shk__xasprintf("capability manager: %s", err.message);
    const char *log = getenv("SHINKEN_EVENT_LOG");
    if (log && *log)
      rs->log = shk__xstrdup(log);
    rs->refusals = shk_cli_refusals_new(o->verbose, rs->log);
    if (!rs->refusals)
      return shk__xasprintf("SHINKEN_EVENT_LOG %s: %s", log, strerror(errno));
    mc.opts.on_verdict = shk_cli_refusals_take;
    mc.opts.verdict_data = rs->refusals;
    /* This run's own timeline (runlog.c): a log has one writer, and
     * concurrent runs cannot all write the user's store. */
    char *lwhy = shk_cli_run_log(&mc.opts, &rs->audit);
    if (lwhy) {
      shk_manager_config_clear(&mc);
      return lwhy;
    }
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
    /* Said, not fatal: only destinations granted with tls_inspect fail. */
    const char *ie = json_string_value(json_object_get(ans, "inspection_error"));
    if (ie)
      shk__warn("warning: TLS inspection is unavailable in this session: %s", ie);
    rs->dir = shk__xstrdup(json_string_value(json_object_get(ans, "egress_dir")));
    rs->sentinels = json_incref(json_object_get(ans, "sentinels"));
  }
  json_decref(ans);
  if (why || !rs->embedded)
    return why;
  /* An embedded manager takes grants for this session on a socket of its
   * own (not the daemon's path, which a later `shinken run` would take for
   * a daemon's): in $XDG_RUNTIME_DIR/shinken, or without one (after `su
   * -`) in a private directory of its own under /tmp. */
  const char *xdg = getenv("XDG_RUNTIME_DIR");
  char tmpl[PATH_MAX];
  snprintf(tmpl, sizeof tmpl, "/tmp/shinken-run.XXXXXX");
  if (xdg && *xdg == '/')
    rs->socket = shk__xasprintf("%s/shinken/run-%d.sock", xdg, (int)getpid());
  else if (mkdtemp(tmpl)) {
    rs->private = shk__xstrdup(tmpl);
    rs->socket = shk__xasprintf("%s/control.sock", tmpl);
  }
  if (!rs->socket) {
    if (o->verbose || isatty(STDERR_FILENO))
      shk__warn("warning: grants cannot reach this session: no directory for its socket: %s",
                strerror(errno));
  } else if (shk_manager_serve(rs->embedded, rs->socket, &err) < 0) {
    if (o->verbose || isatty(STDERR_FILENO))
      shk__warn("warning: grants cannot reach this session: %s", err.message);
    free(rs->socket);
    rs->socket = NULL;
  } else if (o->panel) {
    serve_panel(rs);
  }
  return NULL;
}

/* The session line: said on a terminal, where a person can use it, and
 * always with --verbose. */
static void say_session(const shk_sandbox_opts *o, const run_session *rs)
{
  /* Asked for by name: said wherever stderr goes. */
  if (rs->panel_url)
    fprintf(stderr, "shinken: panel %s\n", rs->panel_url);
  if (!o->verbose && !isatty(STDERR_FILENO))
    return;
  if (rs->embedded && !rs->socket)
    fprintf(stderr, "shinken: session %s\n", rs->id);
  else
    fprintf(stderr, "shinken: session %s; grant egress with: %s%s%sshinken grant %s net.egress "
                    "--scope '{\"domains\":[\"HOST\"]}'\n", rs->id, rs->socket ? "SHINKEN_SOCKET=" : "",
            rs->socket ? rs->socket : "", rs->socket ? " " : "", rs->id);
}

#if SHK_FAULT_INJECTION
/* Test builds only (meson option fault_injection): SHINKEN_TEST_CARD=MS
 * draws a test prompt MS milliseconds into the run, as an approval card
 * will be drawn, and writes what answered it (the key, "timeout" or
 * "no-terminal") to the file SHINKEN_TEST_CARD_OUT. Release builds have no
 * such switch. */
static void *test_card(void *arg)
{
  shk_sandbox_prompt *p = arg;
  const char *ms = getenv("SHINKEN_TEST_CARD"), *out = getenv("SHINKEN_TEST_CARD_OUT");
  usleep((useconds_t)atoi(ms) * 1000);
  int r = shk_sandbox_prompt_ask(p, "shinken: TEST CARD: allow example.test:443 for this session?\n"
                                    "  [y] approve   [n] deny", "yn", 20000);
  FILE *f = out ? fopen(out, "we") : NULL;
  if (f) {
    if (r > 0)
      fprintf(f, "%c\n", r);
    else
      fprintf(f, "%s\n", r == -ETIMEDOUT ? "timeout" : r == -ENOTTY ? "no-terminal" : "error");
    fclose(f);
  }
  return NULL;
}

/* True when a thread now uses P (which then lives as long as the process). */
static bool start_test_card(shk_sandbox_prompt *p)
{
  pthread_t t;
  const char *ms = getenv("SHINKEN_TEST_CARD");
  if (!ms || !*ms || pthread_create(&t, NULL, test_card, p) != 0)
    return false;
  pthread_detach(t);
  return true;
}
#else
static bool start_test_card(shk_sandbox_prompt *p)
{
  (void)p;
  return false;
}
#endif

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

/* The proxy's configuration for a session whose options pin hosts, open
 * private ranges or name a resolver: the --proxy-config file's object (or
 * an empty one) with those added, written to a file of the caller's own
 * (0600, in a 0700 directory) that the manager reads once, when it opens
 * the session. *PATH is the file to give the manager (malloc'd), or NULL
 * when none is needed. Returns NULL, or one line saying why not. */
static char *proxy_config_file(const shk_sandbox_opts *o, char **path, char **dir)
{
  *path = *dir = NULL;
  if (!o->allow_cidrs.n && !o->resolve.n && !o->dns_upstream)
    return NULL;
  json_error_t jerr;
  json_t *cfg = o->proxy_config ? json_load_file(o->proxy_config, JSON_REJECT_DUPLICATES, &jerr)
                                : json_object();
  if (!cfg)
    return shk__xasprintf("--proxy-config %s: %s", o->proxy_config, jerr.text);
  if (!json_is_object(cfg)) {
    json_decref(cfg);
    return shk__xasprintf("--proxy-config %s: the configuration is a JSON object", o->proxy_config);
  }
  /* allow_private_cidrs: the file's ranges, then the options'. */
  json_t *cidrs = json_object_get(cfg, "allow_private_cidrs");
  if (!cidrs) {
    cidrs = json_array();
    json_object_set_new(cfg, "allow_private_cidrs", cidrs);
  }
  for (size_t i = 0; json_is_array(cidrs) && i < o->allow_cidrs.n; i++)
    json_array_append_new(cidrs, json_string(o->allow_cidrs.v[i]));
  /* hosts: NAME -> [ADDRESS, ...]; the options' pins join the file's. */
  json_t *hosts = json_object_get(cfg, "hosts");
  if (!hosts) {
    hosts = json_object();
    json_object_set_new(cfg, "hosts", hosts);
  }
  for (size_t i = 0; json_is_object(hosts) && i < o->resolve.n; i++) {
    const char *v = o->resolve.v[i], *colon = strchr(v, ':');
    char name[256], addr[64];
    snprintf(name, sizeof name, "%.*s", (int)(colon - v), v);
    const char *a = colon + 1;
    size_t alen = strlen(a);
    if (alen >= 2 && a[0] == '[' && a[alen - 1] == ']')
      snprintf(addr, sizeof addr, "%.*s", (int)alen - 2, a + 1);
    else
      snprintf(addr, sizeof addr, "%s", a);
    json_t *list = json_object_get(hosts, name);
    if (!list) {
      list = json_array();
      json_object_set_new(hosts, name, list);
    }
    json_array_append_new(list, json_string(addr));
  }
  if (o->dns_upstream)
    json_object_set_new(cfg, "dns_upstream", json_string(o->dns_upstream));
  const char *xdg = getenv("XDG_RUNTIME_DIR");
  char tmpl[PATH_MAX];
  snprintf(tmpl, sizeof tmpl, "%s/shinken-proxy.XXXXXX", xdg && *xdg == '/' ? xdg : "/tmp");
  char *why = NULL;
  if (!mkdtemp(tmpl)) {
    why = shk__xasprintf("a directory for the proxy's configuration: %s", strerror(errno));
  } else {
    *dir = shk__xstrdup(tmpl);
    *path = shk__xasprintf("%s/proxy.json", tmpl);
    if (json_dump_file(cfg, *path, JSON_COMPACT) < 0)
      why = shk__xasprintf("%s: cannot be written", *path);
  }
  json_decref(cfg);
  return why;
}

static void proxy_config_remove(char *path, char *dir)
{
  if (path)
    unlink(path);
  if (dir)
    rmdir(dir);
  free(path);
  free(dir);
}

static void print_usage_and_exit(void)
{
  exit(shk_cli_print_usage("run"));
}

/* The directory of FILE, which holds what a sandbox must not change (the
 * user's configuration), shown read-only when it exists: the plan protects
 * its default place (~/.config/shinken), and this covers $XDG_CONFIG_HOME
 * set elsewhere. */
static void keep_read_only(shk_sandbox_opts *o, const char *file)
{
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", file);
  char *slash = strrchr(dir, '/');
  if (!slash || slash == dir)
    return;
  *slash = '\0';
  struct stat st;
  if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
    return;
  json_t *rule = json_pack("{s:[s]}", "read", dir);
  char *text = rule ? json_dumps(rule, JSON_COMPACT) : NULL;
  json_decref(rule);
  shk_error e;
  if (!text || shk_sandbox_profile_apply(o, text, "shinken run", &e) < 0)
    shk__die(RUN_FAIL, "run: %s", text ? e.message : "out of memory");
  free(text);
}

int shk_cli_run(int argc, char **argv)
{
  shk_sandbox_env env;
  shk_error e;
  if (shk_sandbox_env_from_process(&env, &e) < 0)
    shk__die(RUN_FAIL, "run: %s", e.message);
  const char *home = env.homes[0] ? env.homes[0] : env.homes[1];

  /* --help, and the command line's own mistakes, before any file is read. */
  shk_sandbox_opts o;
  shk_sandbox_opts_init(&o);
  o.home = home;
  if (shk_sandbox_opts_parse(&o, argc - 1, argv + 1, &e) < 0)
    shk__die(RUN_FAIL, "run: %s", e.message);
  if (o.help)
    print_usage_and_exit();
  shk_sandbox_opts_free(&o);

  /* The layers: the administrator's file, the user's, a trusted project
   * file, then the command line. */
  char user_cfg[PATH_MAX], store[PATH_MAX], project[PATH_MAX];
  bool have_user = shk_cli_user_config(user_cfg), have_store = shk_cli_trust_store(store);
  snprintf(project, sizeof project, "%s/%s", env.cwd, SHK_CLI_PROJECT_CONFIG);
  shk_sandbox_config cfg = { .admin = shk_cli_admin_config(), .user = have_user ? user_cfg : NULL,
                             .project = project, .trust = have_store ? store : NULL,
                             .cwd = env.cwd };
  shk_sandbox_config_notes notes;
  if (shk_sandbox_config_apply(&o, &cfg, argc - 1, argv + 1, &notes, &e) < 0)
    shk__die(RUN_FAIL, "run: %s; nothing was run", e.message);
  if (notes.project_skipped)
    shk__warn("warning: %s not loaded: %s", project, notes.project_skipped);
  if (o.net != SHK_NET_PROXY && (o.allow_domains.n || o.deny_domains.n || o.proxy_config ||
                                 o.allow_cidrs.n || o.resolve.n || o.dns_upstream))
    shk__die(RUN_FAIL, "run: --allow-domain, --deny-domain, --allow-cidr, --resolve, --dns-upstream "
             "and --proxy-config need --net proxy");
  if (have_user && getenv("XDG_CONFIG_HOME"))
    keep_read_only(&o, user_cfg);
  /* The trust store's directory is not shown read-only like the user's
   * configuration: it is Shinken's state directory, which the built-in
   * protections mask whole wherever $XDG_STATE_HOME puts it (it holds the
   * audit log's signing key and the runs' logs), and a read rule for it
   * here would show the key to the workload. */

  shk_sandbox_features f;
  bool limits = o.mem || o.pids || o.cpu_milli;
  /* A session with an Ask loop can be taken over: the cgroup freezer holds
   * it then, which signals cannot do unseen. */
  o.freezer = o.net == SHK_NET_PROXY;
  if (shk_sandbox_features_detect(&f, &env, limits || o.freezer ? SHK_DETECT_CGROUP : 0) < 0)
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

  /* The directory of the run's own control socket and the panel's login
   * file, $XDG_RUNTIME_DIR/shinken, made before the plan is built: the
   * plan masks it (protected.c) only if it exists then, unless it lies in a
   * writable root. Made later, it would be seen read-only inside wherever
   * $XDG_RUNTIME_DIR is not under /run (which the sandbox replaces), and
   * the login file's token with it. Best effort: the manager makes it (and
   * checks it is the caller's, 0700) when it is missing. */
  if (o.net == SHK_NET_PROXY && env.xdg_runtime) {
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s/shinken", env.xdg_runtime) < (int)sizeof dir)
      (void)mkdir(dir, 0700);
  }
  shk_sandbox_plan plan;
  if (shk_sandbox_plan_build(&o, &env, &plan, &e) < 0)
    shk__die(RUN_FAIL, "run: %s; nothing was run", e.message);
  run_session rs = { .fd = -1 };
  if (o.net == SHK_NET_PROXY) {
    shk_cli_fs_ceiling(&o); /* a session takes live grants: Landlock must allow them */
    rs.ceiling = &o.ceiling;
    rs.opts = &o;
    char *pc_path, *pc_dir;
    char *why = proxy_config_file(&o, &pc_path, &pc_dir);
    if (!why)
      why = session_open(&o, &plan, pc_path, &rs);
    proxy_config_remove(pc_path, pc_dir);
    if (why) {
      session_close(&rs);
      shk_sandbox_plan_free(&plan);
      shk__die(RUN_FAIL, "run: egress: %s; nothing was run", why);
    }
    pass_sentinels(&o, &rs);
  }

  /* The workload knows its session, to name it in a request for a grant. */
  if (rs.id) {
    say_session(&o, &rs);
    if (setenv("SHINKEN_SESSION", rs.id, 1) < 0)
      shk__die(RUN_FAIL, "run: out of memory");
    env.environ = environ;
  }
  shk_sandbox_egress eg = { rs.dir, rs.id };
  /* The caller's terminal, where a human is asked about this session. */
  shk_sandbox_prompt *prompt = NULL;
  if (shk_sandbox_prompt_new(&prompt, &e) < 0)
    shk__die(RUN_FAIL, "run: %s; nothing was run", e.message);
  bool prompt_shared = start_test_card(prompt);
  shk_autofree char *hint = rs.socket ? shk__xasprintf("SHINKEN_SOCKET=%s shinken approve", rs.socket)
                                       : rs.fd >= 0 ? shk__xstrdup("shinken approve") : NULL;
  shk_cli_ask *inline_ask = !rs.inline_prompt ? NULL
                          : rs.embedded ? shk_cli_ask_start(rs.embedded, rs.id, prompt, hint)
                                        : shk_cli_ask_start_daemon(shk_manager_socket_path(), rs.id, prompt, hint);
  if (rs.inline_prompt && !inline_ask)
    shk__warn("warning: approval cards cannot be drawn on this terminal (no memory or thread for them); they wait for "
              "%s CARD", hint ? hint : "shinken approve");
  shk_sandbox_io io = { SHK_SANDBOX_STDIO_AUTO, prompt, session_started, &rs,
                        o.verbose ? shk_cli_refusals_write_live : NULL, NULL };
  shk_sandbox_result res;
  int r = shk_sandbox_launch(&o, &env, &f, &a, &plan, &eg, &io, &res, &e);
  session_report(&rs, &res);
  shk_cli_ask_stop(inline_ask);
  /* A daemon's session is summed up from the daemon's count, while the
   * connection (and so the session) is still open. */
  if (rs.fd >= 0 && rs.id && !rs.refusals)
    rs.refusals = shk_cli_refusals_hosted(rs.fd, rs.id);
  if (!prompt_shared)
    shk_sandbox_prompt_free(prompt);
  /* The manager's end hands over the proxies' last verdicts. */
  shk_manager_free(rs.embedded);
  rs.embedded = NULL;
  shk_cli_refusals_print(rs.refusals, rs.log);
  shk_cli_refusals_print_writes(&res);
  shk_cli_run_log_say(&rs.audit, o.verbose || isatty(STDERR_FILENO));
  session_close(&rs);
  if (r < 0)
    shk__die(RUN_FAIL, "run: %s%s", e.message, res.started ? "" : "; nothing was run");
  if (res.oom_kills && o.mem)
    shk__warn("killed by the memory limit (%s)", mem_text(o.mem));
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
