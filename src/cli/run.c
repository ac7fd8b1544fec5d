/* `shinken run [OPTIONS] -- CMD [ARGS...]`: checks what the host can
 * enforce, resolves the filesystem plan, starts bwrap (which starts stage 2,
 * which execs CMD) and exits with CMD's status. Errors of Shinken itself exit
 * 125 with one line, before anything runs. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <linux/close_range.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/common.h"
#include "shinken/manager.h"
#include "shinken/egress.h"
#include "shinken/sandbox.h"

#define RUN_FAIL 125

extern char **environ;

static volatile sig_atomic_t child_pid, got_signal;

/* A signal that would end `shinken run` ends the sandbox first: bwrap is
 * killed, and with it, through --die-with-parent and the pid namespaces,
 * every process inside. SIGKILL, because bwrap may be pid 1 of a namespace
 * of ours, which ignores other signals it has no handler for. */
static void forward(int sig)
{
  got_signal = sig;
  if (child_pid > 0)
    kill((pid_t)child_pid, SIGKILL);
}

/* fork(), except that bwrap 0.8 leaves its sandbox's pid 1 waiting
 * forever when bwrap itself dies during set-up (as it does, through
 * PR_SET_PDEATHSIG, when `shinken run` is killed then). So the child is pid
 * 1 of a fresh pid namespace, whose death ends everything beneath: root
 * makes one directly; anyone else inside a user namespace that maps only
 * themselves (bwrap then nests its own in it, as unprivileged as before),
 * except where AppArmor would leave that namespace powerless. clone()
 * rather than unshare(), which would stop this process (and the egress
 * proxy) from creating threads. *MAPPED says whether the child must map
 * itself (child_start). */
static pid_t fork_bwrap(const shk_sandbox_features *f, bool *mapped)
{
  *mapped = false;
  if (geteuid() == 0)
    return (pid_t)syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, NULL, NULL, NULL, NULL);
  if (!f->bwrap_setuid && f->userns &&
      access("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", F_OK) < 0) {
    pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWPID | SIGCHLD, NULL, NULL,
                               NULL, NULL);
    if (pid >= 0) {
      *mapped = true;
      return pid;
    }
  }
  return fork();
}

/* The child's first steps, before it runs bwrap. Nothing outlives this
 * process: PR_SET_PDEATHSIG is armed first, then the parent's pidfd says
 * whether it died before that (getppid() cannot tell across a pid
 * namespace). The child writes its own user namespace's maps, UID and GID
 * being the caller's effective ids outside (a process may map exactly those
 * there, and nothing else), so neither side waits for the other. */
static void child_start(int parent, bool mapped, uid_t uid, gid_t gid)
{
  struct pollfd p = { parent, POLLIN, 0 };
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || poll(&p, 1, 0) != 0)
    _exit(RUN_FAIL);
  if (!mapped)
    return;
  char umap[64], gmap[64];
  snprintf(umap, sizeof umap, "%u %u 1", (unsigned)uid, (unsigned)uid);
  snprintf(gmap, sizeof gmap, "%u %u 1", (unsigned)gid, (unsigned)gid);
  int r;
  if ((r = shk__write_at(AT_FDCWD, "/proc/self/uid_map", umap)) < 0 ||
      (r = shk__write_at(AT_FDCWD, "/proc/self/setgroups", "deny")) < 0 ||
      (r = shk__write_at(AT_FDCWD, "/proc/self/gid_map", gmap)) < 0)
    shk__die(RUN_FAIL, "run: mapping the caller in bwrap's user namespace: %s", strerror(-r));
}

typedef struct degraded {
  const char *lines[5];
  const char *layers[5]; /* the layer each line turns off (shk_policy_layers) */
  size_t n;
} degraded;

static void degrade(degraded *d, const char *layer, const char *line)
{
  d->layers[d->n] = layer;
  d->lines[d->n++] = line;
}

/* Whether the controllers the asked limits need are there. */
static bool cgroup_usable(const shk_sandbox_features *f, const shk_sandbox_opts *o)
{
  unsigned need = (o->mem ? SHK_CG_MEMORY : 0) | (o->pids ? SHK_CG_PIDS : 0) |
                  (o->cpu_milli ? SHK_CG_CPU : 0);
  return (f->cgroup_parent || f->cgroup_v1) && (f->cgroup_controllers & need) == need;
}

static void check_layers(const shk_sandbox_features *f, const shk_sandbox_opts *o, degraded *d)
{
  if (!f->bwrap)
    shk__die(RUN_FAIL, "bwrap not found (install bubblewrap); nothing was run");
  if (!f->userns)
    shk__die(RUN_FAIL, "user namespaces unavailable: %s; nothing was run", f->userns_detail);
  /* Capabilities are dropped, but file ownership stays: as root, the
   * workload can read any 0600 root file outside the masked paths. */
  if (geteuid() == 0)
    degrade(d, "user-separation", SHK_CLI_ROOT_CALLER_DEGRADED);
  if (f->landlock_abi == 0)
    degrade(d, "landlock", "Landlock unavailable: files are confined by the mount namespace only, "
                           "TCP is not refused by Landlock");
  if (!f->seccomp)
    degrade(d, "seccomp", "seccomp unavailable: no syscall filter");
  else if (!f->connect_guard)
    degrade(d, "connect-guard", "the connect() guard needs Linux 5.8 (seccomp listener, pidfd_getfd, "
                                "openat2, statx mount id): host unix sockets in the read-only view "
                                "stay connectable");
  if ((o->mem || o->pids || o->cpu_milli) && !cgroup_usable(f, o))
    degrade(d, "cgroup", "cgroup limits unavailable: --mem, --pids and --cpu are not enforced");
  /* Turning a layer off is the policy's decision, like a grant: the
   * operator's own flags (--allow-degraded, --net host) are the human's
   * answer, and without them the answer is "ask". */
  const char *layers[6];
  size_t nl = d->n;
  memcpy(layers, d->layers, d->n * sizeof *layers);
  if (o->net == SHK_NET_HOST)
    layers[nl++] = "network";
  shk_policy_answer pa = { .verdict = SHK_POLICY_ALLOW };
  shk_error perr;
  if (nl && shk_manager_decide_layers(layers, nl, !d->n || o->allow_degraded, &pa, &perr) < 0)
    shk__die(RUN_FAIL, "run: cannot ask the policy about turning off %s: %s (the policy comes from "
             "$SHINKEN_POLICY_DIR or the installed copy); nothing was run", layers[0], perr.message);
  if (pa.verdict == SHK_POLICY_ASK)
    shk__die(RUN_FAIL, "%s (see 'shinken doctor'; --allow-degraded runs without it); "
             "nothing was run", d->lines[0]);
  if (pa.verdict != SHK_POLICY_ALLOW)
    shk__die(RUN_FAIL, "run: refused by the policy: %s; nothing was run", pa.why);
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

/* Receives stage 2's one byte (and the connect() guard's listener) on
 * `sock`. Returns whether it came. */
static bool receive_ready(int sock, int *listener)
{
  char b;
  struct iovec iov = { &b, 1 };
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
  } u;
  struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf };
  if (recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT) != 1)
    return false;
  struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
  if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
    memcpy(listener, CMSG_DATA(c), sizeof *listener);
  return true;
}

/* Until bwrap exits: takes stage 2's word that the sandbox is complete, and
 * serves the workload's connect() calls (connect.c). Returns whether the
 * sandbox was complete, that is whether the command ran. */
static bool supervise(pid_t pid, int sync, const shk_sandbox_plan *plan, bool host_net)
{
  shk_autoclose int exited = (int)syscall(SYS_pidfd_open, pid, 0);
  if (exited < 0)
    shk__die_errno(RUN_FAIL, "run: pidfd_open");
  /* Where a pathname unix socket may be connected: the writable mounts. */
  const char **allowed = shk__xcalloc(plan->n + 3, sizeof *allowed);
  size_t n = 0;
  for (size_t i = 0; i < plan->n; i++)
    if (plan->rules[i].access == SHK_ACCESS_WRITE)
      allowed[n++] = plan->rules[i].path;
  allowed[n++] = "/tmp";
  allowed[n++] = "/var/tmp";
  allowed[n++] = "/dev/shm";
  shk_sandbox_guard *g = shk_sandbox_guard_new(allowed, n, host_net);
  free(allowed);
  bool started = false;
  int listener = -1;
  struct pollfd fds[3] = { { sync, POLLIN, 0 }, { -1, POLLIN, 0 }, { exited, POLLIN, 0 } };
  while (!(fds[2].revents & (POLLIN | POLLHUP))) {
    if (poll(fds, 3, -1) < 0) {
      if (errno == EINTR)
        continue;
      shk__die_errno(RUN_FAIL, "run: poll");
    }
    if (fds[0].revents) {
      started = receive_ready(sync, &listener);
      fds[0].fd = -1;
      fds[1].fd = listener;
    }
    /* Without a listener every connect() inside fails (ENOSYS): the guard
     * fails closed. A hang-up means no process is left under the filter. */
    if (((fds[1].revents & POLLIN) && shk_sandbox_guard_serve(g, listener) < 0) ||
        (fds[1].revents & (POLLHUP | POLLERR | POLLNVAL))) {
      close(listener);
      listener = fds[1].fd = -1;
    }
  }
  if (listener >= 0)
    close(listener);
  shk_sandbox_guard_free(g);
  return started;
}

/* The minimal environment of --env-clean. */
static char **clean_env(const char *home)
{
  static const char *const keep[] = { "TERM", "LANG", "LC_ALL", NULL };
  char **env = shk__xcalloc(8, sizeof *env);
  size_t n = 0;
  env[n++] = shk__xstrdup("PATH=/usr/local/bin:/usr/bin:/bin");
  if (home)
    env[n++] = shk__xasprintf("HOME=%s", home);
  struct passwd *pw = getpwuid(getuid());
  if (pw) {
    env[n++] = shk__xasprintf("USER=%s", pw->pw_name);
    env[n++] = shk__xasprintf("LOGNAME=%s", pw->pw_name);
  }
  for (const char *const *k = keep; *k; k++)
    if (getenv(*k))
      env[n++] = shk__xasprintf("%s=%s", *k, getenv(*k));
  return env;
}

/* With the host's network, the resolver file may be a symlink into /run,
 * which is private inside: show that one file. */
static char *host_resolver(void)
{
  char real[PATH_MAX];
  if (realpath("/etc/resolv.conf", real) && !strncmp(real, "/run/", 5))
    return shk__xstrdup(real);
  return NULL;
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
    /* Embedded: events go where SHINKEN_EVENT_LOG says (a daemon keeps a
     * log of its own); the workload never sees them. */
    shk_manager_config mc;
    if (shk_manager_config_load(NULL, &mc, &err) < 0)
      return shk__xasprintf("capability manager: %s", err.message);
    const char *log = getenv("SHINKEN_EVENT_LOG");
    mc.opts.event_log = log && *log ? log : "/dev/null";
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

int shk_cli_run(int argc, char **argv)
{
  shk_sandbox_opts o;
  shk_sandbox_opts_init(&o);
  char *err = NULL;
  if (shk_sandbox_opts_parse(&o, argc - 1, argv + 1, &err) < 0)
    shk__die(RUN_FAIL, "run: %s", err ? err : "bad options");
  if (o.net != SHK_NET_PROXY && (o.allow_domains.n || o.deny_domains.n || o.proxy_config))
    shk__die(RUN_FAIL, "run: --allow-domain, --deny-domain and --proxy-config need --net proxy");

  shk_sandbox_features f;
  bool limits = o.mem || o.pids || o.cpu_milli;
  shk_sandbox_features_detect(&f, limits ? SHK_DETECT_CGROUP : 0);
  degraded d = { { NULL }, { NULL }, 0 };
  check_layers(&f, &o, &d);
  if (o.net == SHK_NET_HOST)
    shk__warn("warning: --net host: the command uses the host's network, unfiltered");

  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd))
    shk__die_errno(RUN_FAIL, "run: current directory");
  struct passwd *pw = getpwuid(getuid());
  shk_sandbox_env env = { cwd, { getenv("HOME"), pw ? pw->pw_dir : NULL }, getenv("PATH"),
                          geteuid() == 0 };
  shk_sandbox_plan plan;
  if (shk_sandbox_plan_build(&o, &env, &plan, &err) < 0)
    shk__die(RUN_FAIL, "run: %s; nothing was run", err ? err : "bad paths");

  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0)
    shk__die_errno(RUN_FAIL, "run: /proc/self/exe");
  exe[n] = '\0';

  shk_sandbox_cgroup cg = { NULL, -1 };
  if (limits && cgroup_usable(&f, &o) && shk_sandbox_cgroup_create(&f, &o, &cg, &err) < 0)
    shk__die(RUN_FAIL, "run: %s; nothing was run", err ? err : "cgroup");

  run_session rs = { .fd = -1 };
  if (o.net == SHK_NET_PROXY) {
    char *why = session_open(&o, &plan, &rs);
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

  int sync[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sync) < 0)
    shk__die_errno(RUN_FAIL, "run: socketpair");
  /* Host mode shows the host's resolver file where it really is; proxy mode
   * puts the session's own (nameserver 127.0.0.1, the DNS stub) where the
   * host's is, so resolvers inside ask the stub. */
  shk_autofree char *resolv = o.net == SHK_NET_HOST || o.net == SHK_NET_PROXY ? host_resolver() : NULL;
  shk_autofree char *resolv_src = o.net == SHK_NET_PROXY ? shk__xasprintf("%s/resolv.conf", rs.dir) : NULL;
  bool visible;
  shk_sandbox_plan_access(&plan, cwd, &visible);
  shk_sandbox_launch l = {
    .bwrap = f.bwrap,
    .exe = exe,
    .egress_dir = rs.dir,
    .resolv = resolv_src && !resolv ? "/etc/resolv.conf" : resolv,
    .resolv_src = resolv_src,
    .chdir = visible ? cwd : NULL,
    .net = o.net,
    .landlock = f.landlock_abi > 0,
    .seccomp = f.seccomp,
    .guard = f.connect_guard,
    .sync_fd = sync[1],
    .command = o.command,
    .ncommand = o.ncommand,
  };
  char **bargv = shk_sandbox_bwrap_argv(&plan, &l);
  char **benv = o.env_clean ? clean_env(env.homes[0] ? env.homes[0] : env.homes[1]) : environ;

  struct sigaction sa = { .sa_handler = forward };
  sigemptyset(&sa.sa_mask);
  static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    sigaction(sigs[i], &sa, NULL);

  shk_autoclose int self = (int)syscall(SYS_pidfd_open, getpid(), 0);
  if (self < 0)
    shk__die_errno(RUN_FAIL, "run: pidfd_open");
  bool mapped;
  uid_t euid = geteuid();
  gid_t egid = getegid();
  pid_t pid = fork_bwrap(&f, &mapped);
  if (pid < 0)
    shk__die_errno(RUN_FAIL, "run: fork");
  if (pid == 0) {
    /* bwrap dies with us, and --die-with-parent chains that to the
     * sandbox's pid 1, whose death ends every process inside. */
    child_start(self, mapped, euid, egid);
    if (cg.path && shk_sandbox_cgroup_join(&cg) < 0)
      shk__die_errno(RUN_FAIL, "run: joining the session cgroup");
    /* Only stdin, stdout, stderr and the sync socket reach the sandbox: any
     * other descriptor the caller left open would be authority the command
     * was not given. */
    if (sync[1] < 3 ||
        (sync[1] > 3 && close_range(3, (unsigned)sync[1] - 1, CLOSE_RANGE_CLOEXEC) < 0) ||
        close_range((unsigned)sync[1] + 1, ~0U, CLOSE_RANGE_CLOEXEC) < 0 ||
        fcntl(sync[1], F_SETFD, 0) < 0)
      shk__die_errno(RUN_FAIL, "run: closing inherited descriptors");
    execve(bargv[0], bargv, benv);
    shk__die_errno(RUN_FAIL, "run: %s", bargv[0]);
  }
  child_pid = pid;
  close(sync[1]);
  bool started = supervise(pid, sync[0], &plan, o.net == SHK_NET_HOST);
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      shk__die_errno(RUN_FAIL, "run: waitpid");
  child_pid = 0;
  close(sync[0]);

  shk_sandbox_cgroup_destroy(&cg);
  shk_sandbox_plan_cleanup(&plan);
  session_close(&rs);
  shk_sandbox_strv_free(bargv);
  if (benv != environ)
    shk_sandbox_strv_free(benv);
  shk_sandbox_plan_free(&plan);
  shk_sandbox_features_free(&f);
  shk_sandbox_opts_free(&o);
  /* Without the byte stage 2 writes just before exec, the sandbox was never
   * complete and the command never ran; bwrap or stage 2 said why. */
  if (got_signal)
    return 128 + got_signal;
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  if (!started)
    return RUN_FAIL;
  return WEXITSTATUS(status);
}
