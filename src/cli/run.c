/* `shinken run [OPTIONS] -- CMD [ARGS...]`: checks what the host can
 * enforce, resolves the filesystem plan, starts bwrap (which starts stage 2,
 * which execs CMD) and exits with CMD's status. Errors of Shinken itself exit
 * 125 with one line, before anything runs. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/common.h"
#include "shinken/daemon.h"
#include "shinken/egress.h"
#include "shinken/sandbox.h"

#define RUN_FAIL 125

typedef struct degraded {
  const char *lines[5];
  size_t n;
} degraded;

/* Whether the controllers the asked limits need are there. */
static bool cgroup_usable(const shk_sandbox_features *f, const shk_sandbox_opts *o)
{
  unsigned need = (o->mem ? SHK_CG_MEMORY : 0) | (o->pids ? SHK_CG_PIDS : 0) |
                  (o->cpu_milli ? SHK_CG_CPU : 0);
  return (f->cgroup_parent || f->cgroup_v1) && (f->cgroup_controllers & need) == need;
}

static void check_layers(const shk_sandbox_features *f, const shk_sandbox_env *env,
                         const shk_sandbox_opts *o, degraded *d)
{
  if (!f->bwrap)
    shk__die(RUN_FAIL, "bwrap not found (install bubblewrap); nothing was run");
  if (!f->userns)
    shk__die(RUN_FAIL, "user namespaces unavailable: %s; nothing was run", f->userns_detail);
  /* Capabilities are dropped, but file ownership stays: as root, the
   * workload can read any 0600 root file outside the masked paths. */
  if (env->root)
    d->lines[d->n++] = SHK_CLI_ROOT_CALLER_DEGRADED;
  if (f->landlock_abi == 0)
    d->lines[d->n++] = "Landlock unavailable: files are confined by the mount namespace only, "
                       "TCP is not refused by Landlock";
  if (!f->seccomp)
    d->lines[d->n++] = "seccomp unavailable: no syscall filter";
  else if (!f->connect_guard)
    d->lines[d->n++] = "the connect() guard needs Linux 5.8 (seccomp listener, pidfd_getfd, "
                       "openat2, statx mount id): host unix sockets in the read-only view "
                       "stay connectable";
  if ((o->mem || o->pids || o->cpu_milli) && !cgroup_usable(f, o))
    d->lines[d->n++] = "cgroup limits unavailable: --mem, --pids and --cpu are not enforced";
  if (d->n && !o->allow_degraded)
    shk__die(RUN_FAIL, "%s (see 'shinken doctor'; --allow-degraded runs without it); "
             "nothing was run", d->lines[0]);
  for (size_t i = 0; i < d->n; i++)
    shk__warn("degraded: %s", d->lines[i]);
}

static json_t *strv_json(char *const *v, size_t n)
{
  json_t *a = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(a, json_string(v[i]));
  return a;
}

static json_t *num_or_null(uint64_t v)
{
  return v ? json_integer((json_int_t)v) : json_null();
}

static bool write_report(const shk_sandbox_opts *o, const shk_sandbox_plan *p,
                         const shk_sandbox_features *f, const shk_sandbox_cgroup *cg,
                         const degraded *d)
{
  char cpu[32] = "";
  if (o->cpu_milli)
    snprintf(cpu, sizeof cpu, "%u.%03u", o->cpu_milli / 1000, o->cpu_milli % 1000);
  json_t *asked = json_pack("{s:o, s:o, s:o, s:b, s:s, s:o, s:o, s:o, s:b, s:b, s:o, s:o, s:o}",
      "write", strv_json(o->write.v, o->write.n), "read", strv_json(o->read.v, o->read.n),
      "deny", strv_json(o->deny.v, o->deny.n), "read-only", o->read_only,
      "net", shk_net_mode_name(o->net), "mem", num_or_null(o->mem), "pids", num_or_null(o->pids),
      "cpu", o->cpu_milli ? json_string(cpu) : json_null(), "env-clean", o->env_clean,
      "allow-degraded", o->allow_degraded,
      "allow-domain", strv_json(o->allow_domains.v, o->allow_domains.n),
      "deny-domain", strv_json(o->deny_domains.v, o->deny_domains.n),
      "command", strv_json(o->command, o->ncommand));
  json_t *rules = json_array();
  for (size_t i = 0; i < p->n; i++)
    json_array_append_new(rules, json_pack("{s:s, s:s, s:s, s:s}", "path", p->rules[i].path,
        "access", shk_access_name(p->rules[i].access),
        "origin", p->rules[i].is_default ? "default" : "option",
        "mechanism", shk_mount_kind_name(p->rules[i].kind)));
  json_t *netmech = json_array();
  if (o->net != SHK_NET_HOST)
    json_array_append_new(netmech, json_string("network namespace (lo only)"));
  if (f->seccomp)
    json_array_append_new(netmech, json_string(o->net == SHK_NET_NONE
        ? "seccomp: socket() AF_UNIX only" : "seccomp: socket() AF_UNIX, AF_INET, AF_INET6, "
                                             "netlink route only"));
  if (o->net == SHK_NET_NONE && f->landlock_abi >= 4)
    json_array_append_new(netmech, json_string("Landlock: TCP bind and connect refused"));
  if (o->net == SHK_NET_PROXY)
    json_array_append_new(netmech, json_string("egress proxy (HTTP 3128, SOCKS5 1080, DNS 53)"));
  char cpumax[48] = "";
  if (o->cpu_milli)
    snprintf(cpumax, sizeof cpumax, "%u 100000", o->cpu_milli * 100);
  bool cg_on = cg->path != NULL;
  /* With cgroup v1 the limits sit in one cgroup per hierarchy. */
  json_t *cgpaths = json_array();
  for (int i = 0; i < SHK_CG1_N; i++)
    if (cg->v1[i])
      json_array_append_new(cgpaths, json_string(cg->v1[i]));
  if (cg_on && cg->procs_fd >= 0)
    json_array_append_new(cgpaths, json_string(cg->path));
  json_t *cgroup = json_pack("{s:b, s:o, s:o, s:o, s:o, s:o, s:o}", "enforced", cg_on,
      "mechanism", !cg_on ? json_null() : json_string(cg->procs_fd < 0 ? "cgroup v1" : "cgroup v2"),
      "paths", cgpaths,
      "path", cg_on ? json_string(cg->path) : json_null(),
      "memory.max", cg_on ? num_or_null(o->mem) : json_null(),
      "pids.max", cg_on ? num_or_null(o->pids) : json_null(),
      "cpu.max", cg_on && o->cpu_milli ? json_string(cpumax) : json_null());
  json_t *enforced = json_pack(
      "{s:o, s:b, s:[sssssss], s:{s:s, s:o}, s:{s:i, s:b, s:b, s:b, s:b}, s:{s:b, s:s},"
      " s:o, s:s, s:b, s:s, s:b, s:b, s:s}",
      "rules", rules, "read-restricted", p->read_restricted,
      "namespaces", "user", "pid", "mount", "ipc", "uts", "cgroup",
      o->net == SHK_NET_HOST ? "net (not used: --net host)" : "net",
      "network", "mode", shk_net_mode_name(o->net), "mechanism", netmech,
      "landlock", "abi", f->landlock_abi, "enforced", f->landlock_abi > 0,
      "fs", f->landlock_abi > 0, "net", o->net == SHK_NET_NONE && f->landlock_abi >= 4,
      "scope", f->landlock_abi >= 6,
      "seccomp", "enforced", f->seccomp, "mechanism", "libseccomp (precompiled BPF)",
      "cgroup", cgroup,
      "capabilities", "all dropped (effective, permitted, inheritable, ambient, bounding)",
      "no-new-privs", 1, "keyring", "fresh session keyring", "new-session", 1,
      "die-with-parent", 1,
      "unix-connect", f->connect_guard ? "connect() mediated by the launcher (seccomp user "
                                   "notification): pathname sockets only on writable mounts"
                                 : "not mediated");
  json_t *report = json_pack("{s:i, s:o, s:o, s:o}", "version", 1, "asked", asked,
                             "enforced", enforced, "degraded", strv_json((char *const *)d->lines, d->n));
  bool ok = report && json_dump_file(report, o->report, JSON_INDENT(2) | JSON_SORT_KEYS) == 0;
  json_decref(report);
  return ok;
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

/* Returns NULL, or one line saying why the session could not be opened. */
static char *session_open(const shk_sandbox_opts *o, run_session *rs)
{
  json_t *allow = json_array(), *deny = json_array();
  for (size_t i = 0; i < o->allow_domains.n; i++)
    json_array_append_new(allow, json_string(o->allow_domains.v[i]));
  for (size_t i = 0; i < o->deny_domains.n; i++)
    json_array_append_new(deny, json_string(o->deny_domains.v[i]));
  json_t *req = json_pack("{s:s, s:s, s:b, s:o, s:o}", "op", "open_session", "name", "run", "egress", 1,
                          "allow_domains", allow, "deny_domains", deny);
  if (o->proxy_config) {
    /* The daemon has its own working directory: give it the real path. */
    char real[PATH_MAX];
    if (!realpath(o->proxy_config, real)) {
      json_decref(req);
      return shk__xasprintf("--proxy-config %s: %s", o->proxy_config, strerror(errno));
    }
    json_object_set_new(req, "proxy_config", json_string(real));
  }
  json_t *ans = NULL;
  char err[1024] = "";
  rs->fd = shk_manager_connect(shk_manager_socket_path());
  if (rs->fd >= 0) {
    if (shk_manager_rpc(rs->fd, req, &ans, err, sizeof err) < 0) {
      json_decref(req);
      return shk__xasprintf("the manager at %s: %s", shk_manager_socket_path(), err);
    }
  } else {
    /* Embedded: events go where SHINKEN_EVENT_LOG says (a daemon keeps a
     * log of its own); the workload never sees them. */
    shk_manager_config mc;
    if (shk_manager_config_load(NULL, &mc, err, sizeof err) < 0) {
      json_decref(req);
      return shk__xasprintf("capability manager: %s", err);
    }
    const char *log = getenv("SHINKEN_EVENT_LOG");
    mc.opts.event_log = log && *log ? log : "/dev/null";
    int r = shk_manager_new(&mc.opts, &rs->embedded, err, sizeof err);
    shk_manager_config_clear(&mc);
    if (r < 0) {
      json_decref(req);
      return shk__xasprintf("capability manager: %s", err);
    }
    ans = shk_manager_call(rs->embedded, req);
  }
  json_decref(req);
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
  if (shk_manager_serve(rs->embedded, rs->socket, err, sizeof err) < 0) {
    free(rs->socket);
    rs->socket = NULL;
  } else if (isatty(STDERR_FILENO)) {
    fprintf(stderr, "shinken: session %s; grant egress with: SHINKEN_SOCKET=%s shinken grant %s net.egress "
                    "--scope '{\"domains\":[\"HOST\"]}'\n", rs->id, rs->socket, rs->id);
  }
  return NULL;
}

int shk_cli_run(int argc, char **argv)
{
  shk_sandbox_opts o;
  shk_sandbox_opts_init(&o);
  char *err = NULL;
  if (shk_sandbox_opts_parse(&o, argc - 1, argv + 1, &err) < 0)
    shk__die(RUN_FAIL, "run: %s", err ? err : "bad options");
  if (o.net != SHK_NET_PROXY && (o.allow_domains.n || o.deny_domains.n || o.proxy_config))
    shk__die(RUN_FAIL, "run: --allow-domain, --deny-domain and --proxy-config need --net proxy");

  shk_sandbox_env env;
  shk_error e;
  if (shk_sandbox_env_from_process(&env, &e) < 0)
    shk__die(RUN_FAIL, "run: %s", e.message);
  shk_sandbox_features f;
  bool limits = o.mem || o.pids || o.cpu_milli;
  shk_sandbox_features_detect(&f, &env, limits ? SHK_DETECT_CGROUP : 0);
  degraded d = { { NULL }, 0 };
  check_layers(&f, &env, &o, &d);
  if (o.net == SHK_NET_HOST)
    shk__warn("warning: --net host: the command uses the host's network, unfiltered");

  shk_sandbox_plan plan;
  if (shk_sandbox_plan_build(&o, &env, &plan, &err) < 0)
    shk__die(RUN_FAIL, "run: %s; nothing was run", err ? err : "bad paths");

  shk_sandbox_cgroup cg = { NULL, -1 };
  if (limits && cgroup_usable(&f, &o) && shk_sandbox_cgroup_create(&f, &o, &cg, &err) < 0)
    shk__die(RUN_FAIL, "run: %s; nothing was run", err ? err : "cgroup");

  run_session rs = { .fd = -1 };
  if (o.net == SHK_NET_PROXY) {
    char *why = session_open(&o, &rs);
    if (why) {
      session_close(&rs);
      shk_sandbox_cgroup_destroy(&cg);
      shk__die(RUN_FAIL, "run: egress: %s; nothing was run", why);
    }
  }

  if (o.report && !write_report(&o, &plan, &f, &cg, &d)) {
    shk_sandbox_cgroup_destroy(&cg);
    session_close(&rs);
    shk__die(RUN_FAIL, "--report %s: cannot write the report; nothing was run", o.report);
  }

  int status = shk_sandbox_launch(&o, &env, &plan, &f, &cg, rs.dir);
  shk_sandbox_cgroup_destroy(&cg);
  shk_sandbox_plan_cleanup(&plan);
  session_close(&rs);
  shk_sandbox_plan_free(&plan);
  shk_sandbox_features_free(&f);
  shk_sandbox_env_free(&env);
  shk_sandbox_opts_free(&o);
  return status;
}
