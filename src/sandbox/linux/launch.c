/* The launcher: starts bwrap as pid 1 of a namespace of its own, with only
 * the descriptors the sandbox needs, and supervises it until it exits:
 * stage 2's word that the sandbox is complete, the connect() guard, the
 * signals that end it. */
#include "shinken/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/close_range.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/common.h"

#define RUN_FAIL 125

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
static pid_t fork_bwrap(const shk_sandbox_features *f, const shk_sandbox_env *env, bool *mapped)
{
  *mapped = false;
  if (env->root)
    return (pid_t)syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, NULL, NULL, NULL, NULL);
  if (!f->bwrap_setuid && f->userns && !f->apparmor_userns) {
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
 * serves the workload's connect() calls (guard.c). Returns whether the
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

/* The minimal environment of --env-clean: a fixed PATH, the caller's home
 * and name, and the terminal and locale variables of ENV's environment. */
static char **clean_env(const shk_sandbox_env *env)
{
  static const char *const keep[] = { "TERM=", "LANG=", "LC_ALL=", NULL };
  char **out = shk__xcalloc(8, sizeof *out);
  size_t n = 0;
  const char *home = env->homes[0] ? env->homes[0] : env->homes[1];
  out[n++] = shk__xstrdup("PATH=/usr/local/bin:/usr/bin:/bin");
  if (home)
    out[n++] = shk__xasprintf("HOME=%s", home);
  if (env->user) {
    out[n++] = shk__xasprintf("USER=%s", env->user);
    out[n++] = shk__xasprintf("LOGNAME=%s", env->user);
  }
  for (const char *const *k = keep; *k; k++)
    for (char *const *e = env->environ; e && *e; e++)
      if (!strncmp(*e, *k, strlen(*k))) {
        out[n++] = shk__xstrdup(*e);
        break;
      }
  return out;
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

/* Runs the sandbox the plan describes: bwrap, then stage 2, then the
 * command, and waits for it. Returns the exit status `shinken run` exits
 * with. */
int shk_sandbox_launch(const shk_sandbox_opts *o, const shk_sandbox_env *env,
                       const shk_sandbox_plan *plan, const shk_sandbox_features *f,
                       const shk_sandbox_cgroup *cg, const char *egress_dir)
{
  int sync[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sync) < 0)
    shk__die_errno(RUN_FAIL, "run: socketpair");
  /* Host mode shows the host's resolver file where it really is; proxy mode
   * puts the session's own (nameserver 127.0.0.1, the DNS stub) where the
   * host's is, so resolvers inside ask the stub. */
  shk_autofree char *resolv = o->net == SHK_NET_HOST || o->net == SHK_NET_PROXY ? host_resolver() : NULL;
  shk_autofree char *resolv_src = o->net == SHK_NET_PROXY ? shk__xasprintf("%s/resolv.conf", egress_dir) : NULL;
  bool visible;
  shk_sandbox_plan_access(plan, env->cwd, &visible);
  shk_sandbox_bwrap_opts l = {
    .bwrap = f->bwrap,
    .exe = env->exe,
    .egress_dir = egress_dir,
    .resolv = resolv_src && !resolv ? "/etc/resolv.conf" : resolv,
    .resolv_src = resolv_src,
    .chdir = visible ? env->cwd : NULL,
    .net = o->net,
    .root = env->root,
    .landlock = f->landlock_abi > 0,
    .seccomp = f->seccomp,
    .guard = f->connect_guard,
    .sync_fd = sync[1],
    .command = o->command,
    .ncommand = o->ncommand,
  };
  char **bargv = shk_sandbox_bwrap_argv(plan, &l);
  char **benv = o->env_clean ? clean_env(env) : (char **)env->environ;

  struct sigaction sa = { .sa_handler = forward };
  sigemptyset(&sa.sa_mask);
  static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    sigaction(sigs[i], &sa, NULL);

  shk_autoclose int self = (int)syscall(SYS_pidfd_open, getpid(), 0);
  if (self < 0)
    shk__die_errno(RUN_FAIL, "run: pidfd_open");
  bool mapped;
  pid_t pid = fork_bwrap(f, env, &mapped);
  if (pid < 0)
    shk__die_errno(RUN_FAIL, "run: fork");
  if (pid == 0) {
    /* bwrap dies with us, and --die-with-parent chains that to the
     * sandbox's pid 1, whose death ends every process inside. */
    child_start(self, mapped, env->uid, env->gid);
    if (cg->path && shk_sandbox_cgroup_join(cg) < 0)
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
  bool started = supervise(pid, sync[0], plan, o->net == SHK_NET_HOST);
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      shk__die_errno(RUN_FAIL, "run: waitpid");
  child_pid = 0;
  close(sync[0]);

  shk_sandbox_strv_free(bargv);
  if (o->env_clean)
    shk_sandbox_strv_free(benv);
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
