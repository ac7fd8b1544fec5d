/* SPDX-License-Identifier: Apache-2.0 */
/* The launcher: resolves the plan, creates the session cgroup, starts bwrap
 * as pid 1 of a namespace of its own with only the descriptors the sandbox
 * needs, and supervises it until it exits: stage 2's word that the sandbox
 * is complete, the connect() guard, the signals that end it. Whatever
 * happens after the first resource exists, one cleanup path at the end of
 * shk_sandbox_launch releases every one of them. */
#include "sandbox-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/close_range.h>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/common.h"

#define nomem(err) shk__error_set(err, -ENOMEM, "out of memory")

/* The signals that end `shinken run` end the sandbox first. */
static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
#define NFORWARDED (sizeof forwarded / sizeof forwarded[0])

static volatile sig_atomic_t child_pid, got_signal;

/* bwrap is killed, and with it, through --die-with-parent and the pid
 * namespaces, every process inside. SIGKILL, because bwrap may be pid 1 of
 * a namespace of ours, which ignores other signals it has no handler for. */
static void forward(int sig)
{
  got_signal = sig;
  if (child_pid > 0)
    kill((pid_t)child_pid, SIGKILL);
}

/* What the child needs between clone and exec, and where it says why it
 * failed. The child shares the launcher's memory (CLONE_VM) while the
 * launcher waits for it (CLONE_VFORK), as posix_spawn's does: it writes
 * nothing else here, calls no function that takes a lock or allocates,
 * and leaves through exec or by returning, which ends it with the exit
 * system call (clone's own trampoline: no atexit handler of the launcher
 * runs in it). */
typedef struct child_args {
  int parent;      /* the launcher's pidfd */
  bool mapped;     /* in a user namespace of its own: map the caller */
  bool newns;      /* in a mount namespace of its own: make it private */
  uid_t uid;
  gid_t gid;
  const shk_sandbox_cgroup *cg;
  const int *stdio; /* what becomes the sandbox's stdin, stdout and stderr
                     * (each above stderr) */
  int keep[2];     /* the descriptors above stderr the sandbox gets, ascending;
                    * -1 for none */
  char **argv, **envp;
  sigset_t mask;   /* the launcher's signal mask, restored before exec */
  bool pipe_ignored; /* the caller ignored SIGPIPE (the launcher does meanwhile) */
  int err;         /* set by the child: -errno of the step that failed */
  const char *what;
} child_args;

/* *FD moved above stderr when it is not (a caller may have closed 0, 1 or
 * 2): the child makes those its stdio and would overwrite it. */
static int above_stderr(int *fd)
{
  if (*fd > 2)
    return 0;
  int h = fcntl(*fd, F_DUPFD_CLOEXEC, 3);
  if (h < 0)
    return -errno;
  close(*fd);
  *fd = h;
  return 0;
}

/* Writes "N N 1" (N in decimal) to /proc/self/FILE. */
static int map_self(const char *file, unsigned id)
{
  char line[40], path[32] = "/proc/self/";
  char digits[12];
  int n = 0;
  do
    digits[n++] = (char)('0' + id % 10);
  while ((id /= 10) && n < 11);
  size_t l = 0;
  for (int k = 0; k < 2; k++) {
    for (int i = n; i-- > 0;)
      line[l++] = digits[i];
    line[l++] = ' ';
  }
  line[l++] = '1';
  line[l] = '\0';
  strcat(path, file);
  return shk__write_at(AT_FDCWD, path, line);
}

/* The child's steps, before it becomes bwrap. Nothing outlives this
 * process: PR_SET_PDEATHSIG is armed first, then the launcher's pidfd says
 * whether it died before that (getppid() cannot tell across a pid
 * namespace). The child writes its own user namespace's maps, UID and GID
 * being the caller's effective ids outside (a process may map exactly those
 * there, and nothing else). It joins the session cgroup, so every process
 * of the sandbox is inside, and keeps no descriptor but the relay's stdin,
 * stdout and stderr (never the caller's own) and the sync socket: any other
 * the caller left open would be authority the command was not given.
 * Started by clone(2), it ends with the value it returns (125 when a step
 * fails, the status bwrap's own failures use). */
static int child_main(void *arg)
{
  child_args *a = arg;
  struct pollfd p = { a->parent, POLLIN, 0 };
  int r = 0;
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || poll(&p, 1, 0) != 0) {
    a->err = -ESRCH;
    a->what = "the launcher died while bwrap started";
    return 125;
  }
  if (a->mapped && ((r = map_self("uid_map", (unsigned)a->uid)) < 0 ||
                    (r = shk__write_at(AT_FDCWD, "/proc/self/setgroups", "deny")) < 0 ||
                    (r = map_self("gid_map", (unsigned)a->gid)) < 0)) {
    a->err = r;
    a->what = "mapping the caller in bwrap's user namespace";
    return 125;
  }
  /* bwrap copies this mount namespace and then, for each mount beneath a
   * bind it makes (the read-only /), remounts it read-only from a list it
   * read a moment before. A host mount that goes away in between (a
   * network namespace deleted under /run/netns, a container's overlay)
   * still propagated into bwrap's copy and made that remount fail, so the
   * sandbox refused to start. Here the launcher's own copy is made private
   * first: the host's later mounts and unmounts stop at it, and bwrap works
   * on a view that holds still. Safe because it only stops propagation
   * into the sandbox (a private namespace shares nothing back); the
   * sandbox's view is the host's mounts as they were when it started. */
  if (a->newns && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
    a->err = -errno;
    a->what = "making the sandbox's mount namespace private";
    return 125;
  }
  if (a->cg->path && (r = shk_sandbox_cgroup_join(a->cg)) < 0) {
    a->err = r;
    a->what = "joining the session cgroup";
    return 125;
  }
  for (int i = 0; i < 3; i++)
    if (dup2(a->stdio[i], i) < 0) {
      a->err = -errno;
      a->what = "the sandbox's stdio";
      return 125;
    }
  unsigned from = 3;
  for (int i = 0; i < 2; i++) {
    if (a->keep[i] < 0)
      continue;
    unsigned k = (unsigned)a->keep[i];
    if (k < from || (k > from && close_range(from, k - 1, CLOSE_RANGE_CLOEXEC) < 0) ||
        fcntl(a->keep[i], F_SETFD, 0) < 0) {
      a->err = k < from ? -EBADF : -errno;
      a->what = "closing inherited descriptors";
      return 125;
    }
    from = k + 1;
  }
  if (close_range(from, ~0U, CLOSE_RANGE_CLOEXEC) < 0) {
    a->err = -errno;
    a->what = "closing inherited descriptors";
    return 125;
  }
  /* The handlers are the launcher's: bwrap starts with the defaults, and
   * with the signal mask the caller gave. */
  struct sigaction dfl = { .sa_handler = SIG_DFL };
  for (size_t i = 0; i < NFORWARDED; i++)
    sigaction(forwarded[i], &dfl, NULL);
  if (!a->pipe_ignored)
    sigaction(SIGPIPE, &dfl, NULL);
  sigprocmask(SIG_SETMASK, &a->mask, NULL);
  execve(a->argv[0], a->argv, a->envp);
  a->err = -errno;
  a->what = a->argv[0];
  return 125;
}

/* Starts bwrap (A->argv) as pid 1 of a fresh pid namespace, because bwrap
 * 0.8 leaves its sandbox's pid 1 waiting forever when bwrap itself dies
 * during set-up (as it does, through PR_SET_PDEATHSIG, when `shinken run`
 * is killed then), and the death of a namespace's pid 1 ends everything
 * beneath it. Root makes one directly; anyone else inside a user namespace
 * that maps only themselves (bwrap then nests its own in it, as
 * unprivileged as before), except where AppArmor would leave that namespace
 * powerless. Returns the pid, or -errno with A->what set. */
static pid_t start_bwrap(const shk_sandbox_features *f, const shk_sandbox_env *env, child_args *a)
{
  /* The child's own stack: the launcher waits, and frees it once the
   * child has exec'd or exited. */
  enum { STACK = 64 * 1024 };
  char *stack = malloc(STACK);
  if (!stack) {
    a->what = "out of memory";
    return -ENOMEM;
  }
  int flags = CLONE_VM | CLONE_VFORK | SIGCHLD;
  a->mapped = false;
  a->newns = true;
  pid_t pid = -1;
  if (env->root) {
    pid = clone(child_main, stack + STACK, flags | CLONE_NEWPID | CLONE_NEWNS, a);
  } else if (!f->bwrap_setuid && f->userns && !f->apparmor_userns) {
    a->mapped = true;
    pid = clone(child_main, stack + STACK, flags | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS, a);
    if (pid < 0)
      a->mapped = false;
  }
  if (pid < 0) {
    a->newns = false;
    pid = clone(child_main, stack + STACK, flags, a);
  }
  int e = errno;
  free(stack);
  if (pid < 0) {
    a->what = "clone";
    return -e;
  }
  if (a->err < 0) {
    /* It failed before exec and has exited: reap it here. */
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    return a->err;
  }
  return pid;
}

/* Receives stage 2's report (and the connect() guard's listener and
 * sock_diag socket) on SOCK and checks it against what was asked (S2).
 * Returns 1 when it came and says the sandbox is complete, 0 when stage 2
 * ended without one (it, or bwrap, said why on stderr), -EPROTO when it
 * came but is malformed, says less, or lost its descriptors: stage 2 was
 * then about to exec the command, which the caller kills with the sandbox. */
static int receive_report(int sock, const shk__stage2_args *s2, shk_sandbox_applied *applied,
                          int *listener, int *diag, pid_t *sender, const char **why)
{
  shk__stage2_report rep;
  struct iovec iov = { &rep, sizeof rep };
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(2 * sizeof(int)) + CMSG_SPACE(sizeof(struct ucred))];
  } u;
  struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf };
  ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  for (struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int fds[2] = { -1, -1 };
      size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      memcpy(fds, CMSG_DATA(c), (nfd < 2 ? nfd : 2) * sizeof(int));
      *listener = fds[0];
      *diag = fds[1];
    } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
               c->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
      /* The kernel's account of the sender (SO_PASSCRED), its pid seen
       * from this pid namespace: stage 2, about to become the command. */
      struct ucred uc;
      memcpy(&uc, CMSG_DATA(c), sizeof uc);
      *sender = uc.pid;
    }
  }
  if (n <= 0)
    return 0;
  if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
    *why = "stage 2's report came without the connect() guard's descriptors (is the launcher "
           "out of descriptors?)";
    return -EPROTO;
  }
  if (shk__stage2_report_read(&rep, (size_t)n, *listener >= 0, *diag >= 0, s2, applied, why) < 0)
    return -EPROTO;
  return 1;
}

/* Takes one notification from the seccomp LISTENER and hands it to the
 * connect() guard (connect, bind) or the write observer (the rest). A call
 * neither asked for is refused: only the filters stage 2 installed notify,
 * so it cannot happen, and if it did, refusing is the closed outcome. */
static int serve_listener(int listener, shk__guard *g, shk__observer *obs)
{
  struct seccomp_notif req;
  memset(&req, 0, sizeof req);
  if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0)
    return errno == EINTR || errno == ENOENT ? 0 : -errno;
  bool net = req.data.nr == SYS_connect || req.data.nr == SYS_bind;
  if (net && g)
    return shk__guard_serve(g, listener, &req);
  if (!net && obs)
    return shk__observer_serve(obs, listener, &req);
  struct seccomp_notif_resp resp = { .id = req.id, .error = -EPERM };
  if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp) < 0 && errno != ENOENT)
    return -errno;
  return 0;
}

/* Until bwrap exits (EXITED, its pidfd, is readable) and its output is
 * delivered: takes stage 2's report that the sandbox is complete, serves
 * the workload's connect() calls (guard.c) and its observed writes
 * (observe.c), and relays its stdio (relay.c). Without a listener every
 * connect() and observed write inside fails (ENOSYS): both fail closed. After a signal to the launcher, output still undelivered once
 * bwrap is gone is dropped. Returns 0, or -errno when supervising failed
 * (the caller then kills the sandbox). */
static int supervise(int exited, int sync, const shk__stage2_args *s2, shk__guard *g,
                     shk__observer *obs, shk__relay *relay, const shk_sandbox_io *io, shk_sandbox_result *res, int *listener,
                     const char **why)
{
  struct pollfd fds[3 + SHK__RELAY_FDS] = { { sync, POLLIN, 0 }, { -1, POLLIN, 0 },
                                            { exited, POLLIN, 0 } };
  bool gone = false;
  while (!gone || (!shk__relay_drained(relay) && !got_signal)) {
    int timeout;
    size_t n = shk__relay_fds(relay, fds + 3, gone, &timeout);
    if (poll(fds, 3 + n, timeout) < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    if (fds[0].revents) {
      int diag = -1;
      pid_t sender = 0;
      int r = receive_report(sync, s2, &res->applied, listener, &diag, &sender, why);
      res->started = r != 0;
      if (r > 0 && sender > 0)
        res->pid = sender;
      if (diag >= 0 && g)
        shk__guard_attach_diag(g, diag);
      else if (diag >= 0)
        close(diag);
      if (r < 0)
        return r;
      /* The start is recorded before the guard answers any connect(): a
       * sandbox whose start cannot be recorded is killed (the caller does
       * it on this error) before it reaches anything through the proxy. */
      if (r > 0 && io && io->on_started) {
        static char started_why[600];
        shk_error serr = { 0 };
        int sr = io->on_started(io->started_data, res, &serr);
        if (sr < 0) {
          snprintf(started_why, sizeof started_why, "the sandbox's start cannot be recorded: %s",
                   serr.message[0] ? serr.message : strerror(-sr));
          *why = started_why;
          return sr;
        }
      }
      /* Stage 2 waits for this byte before it runs the command: the start
       * is recorded and the grants made before it are in place. */
      if (r > 0 && send(sync, "", 1, MSG_NOSIGNAL) != 1) {
        *why = "stage 2 cannot be told to start the command";
        return -errno;
      }
      fds[0].fd = -1;
      fds[1].fd = *listener;
    }
    /* A hang-up means no process is left under the filter. */
    if (((fds[1].revents & POLLIN) && serve_listener(*listener, g, obs) < 0) ||
        (fds[1].revents & (POLLHUP | POLLERR | POLLNVAL))) {
      close(*listener);
      *listener = fds[1].fd = -1;
    }
    if (fds[2].revents & (POLLIN | POLLHUP)) {
      gone = true;
      fds[0].fd = fds[1].fd = fds[2].fd = -1;
    }
    shk__relay_handle(relay, fds + 3, n);
  }
  return 0;
}

/* With the host's network, the resolver file may be a symlink into /run,
 * which is private inside: show that one file. OUT is PATH_MAX long; ""
 * when nothing is needed. */
static void host_resolver(char *out)
{
  out[0] = '\0';
  if (realpath("/etc/resolv.conf", out) && strncmp(out, "/run/", 5))
    out[0] = '\0';
}

/* The stage 2 program (stage2-main.c, embedded at build time) in a sealed
 * memory file: it runs from there, so it needs no path in the sandbox and
 * nothing on disk can stand in for it. Returns the descriptor, or -errno
 * where this kernel will not run one (memfd_create refused, or
 * vm.memfd_noexec=2): the launcher then runs `shinken __stage2`. */
extern const unsigned char shk__stage2_image[];
extern const size_t shk__stage2_image_size;

static int stage2_memfd(void)
{
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif
  int fd = memfd_create("shinken-stage2", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
  if (fd < 0 && errno == EINVAL) /* before Linux 6.3, which knows no MFD_EXEC */
    fd = memfd_create("shinken-stage2", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0)
    return -errno;
  size_t off = 0;
  while (off < shk__stage2_image_size) {
    ssize_t w = write(fd, shk__stage2_image + off, shk__stage2_image_size - off);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      int e = w < 0 ? errno : EIO;
      close(fd);
      return -e;
    }
    off += (size_t)w;
  }
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  return fd;
}

/* The session cgroup's paths, for the report: the cgroup itself is removed
 * before the launch returns. */
static int keep_cgroup_paths(const shk_sandbox_cgroup *cg, shk_sandbox_result *res)
{
  size_t n = 0;
  res->cgroup_v1 = cg->procs_fd < 0 && cg->path;
  for (int i = 0; i < SHK_CG1_N; i++)
    if (cg->v1[i] && !(res->cgroup_paths[n++] = strdup(cg->v1[i])))
      return -ENOMEM;
  if (cg->path && cg->procs_fd >= 0 && !(res->cgroup_paths[n++] = strdup(cg->path)))
    return -ENOMEM;
  return 0;
}

/* How many processes the memory limit of CG killed: "oom_kill N" in cgroup
 * v2's memory.events, or in cgroup v1's memory.oom_control. Read before
 * the cgroup is removed, so that the caller can say which limit ended the
 * command; 0 when the kernel does not count them. */
static unsigned oom_kills(const shk_sandbox_cgroup *cg)
{
  const char *dir = cg->v1[SHK_CG1_MEMORY] ? cg->v1[SHK_CG1_MEMORY] : cg->path;
  if (!dir)
    return 0;
  char path[PATH_MAX], line[128];
  snprintf(path, sizeof path, "%s/%s", dir,
           cg->v1[SHK_CG1_MEMORY] ? "memory.oom_control" : "memory.events");
  FILE *f = fopen(path, "re");
  unsigned n = 0;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "oom_kill %u", &n) == 1)
      break;
  if (f)
    fclose(f);
  return n;
}

/* How many forks the pids limit of CG refused: "max N" in pids.events
 * (cgroup v2, and v1's pids controller); 0 when the kernel does not say. */
static unsigned pids_refused(const shk_sandbox_cgroup *cg)
{
  const char *dir = cg->v1[SHK_CG1_PIDS] ? cg->v1[SHK_CG1_PIDS] : cg->path;
  if (!dir)
    return 0;
  char path[PATH_MAX], line[128];
  snprintf(path, sizeof path, "%s/pids.events", dir);
  FILE *f = fopen(path, "re");
  unsigned n = 0;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "max %u", &n) == 1)
      break;
  if (f)
    fclose(f);
  return n;
}

int shk_sandbox_launch(const shk_sandbox_opts *o, const shk_sandbox_env *env,
                       const shk_sandbox_features *f, const shk_sandbox_assessment *a,
                       shk_sandbox_plan *plan, const shk_sandbox_egress *eg,
                       const shk_sandbox_io *io,
                       shk_sandbox_result *res, shk_error *err)
{
  memset(res, 0, sizeof *res);
  /* The plan the caller built is the one the sandbox is made of: the
   * caller may have shown it to the manager (its writable roots), so it is
   * taken over, not resolved again. */
  res->plan = *plan;
  memset(plan, 0, sizeof *plan);
  res->exit_status = -1;
  shk_sandbox_cgroup cg = { NULL, -1, { NULL }, { -1, -1, -1, -1 } };
  int sync[2] = { -1, -1 }, self = -1, exited = -1, listener = -1, exe = -1;
  char **bargv = NULL;
  shk__env_result cenv = { 0 };
  shk__identity id;
  shk__stage2_args s2 = { 0 };
  shk__guard *g = NULL;
  shk__observer *obs = NULL;
  shk__relay *relay = NULL;
  pid_t pid = -1;
  bool handlers = false, reaped = false;
  struct sigaction old[NFORWARDED], old_pipe;
  sigset_t all, mask;
  char resolv[PATH_MAX], resolv_src[PATH_MAX];

  int r = 0;
  bool limits = o->mem || o->pids || o->cpu_milli;
  if (a->cgroup && (r = shk_sandbox_cgroup_create(f, o, &cg, err)) < 0) {
    /* A cgroup asked for the freezer alone is best effort: without it take
     * over stops the processes with signals instead. A limit is never
     * dropped. */
    if (limits)
      goto out;
    r = 0;
    if (err)
      memset(err, 0, sizeof *err);
  }
  if ((r = shk__freezer_attach(&cg)) < 0) {
    nomem(err);
    goto out;
  }
  if ((r = keep_cgroup_paths(&cg, res)) < 0) {
    nomem(err);
    goto out;
  }
  if (o->net == SHK_NET_PROXY && (!eg || !eg->dir)) {
    r = shk__error_set(err, -EINVAL, "--net proxy needs the session's egress directory");
    goto out;
  }
  if (o->net == SHK_NET_PROXY && eg->session && !(res->session = strdup(eg->session))) {
    r = nomem(err);
    goto out;
  }
  /* Host mode shows the host's resolver file where it really is; proxy mode
   * puts the session's own (nameserver 127.0.0.1, the DNS stub) where the
   * host's is, so resolvers inside ask the stub. */
  resolv[0] = resolv_src[0] = '\0';
  if (o->net != SHK_NET_NONE)
    host_resolver(resolv);
  if (o->net == SHK_NET_PROXY &&
      snprintf(resolv_src, sizeof resolv_src, "%s/resolv.conf", eg->dir) >= (int)sizeof resolv_src) {
    r = shk__error_set(err, -ENAMETOOLONG, "the egress directory's path is too long");
    goto out;
  }
  if ((r = shk__relay_open(&relay, io, err)) < 0)
    goto out;
  res->pty = shk__relay_is_pty(relay);
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sync) < 0 ||
      above_stderr(&sync[0]) < 0 || above_stderr(&sync[1]) < 0) {
    r = shk__error_set(err, -errno, "socketpair: %s", strerror(errno));
    goto out;
  }
  /* The kernel attaches the sender's pid to stage 2's report: the process
   * live unlocks mount into (res->pid, for io->on_started). Best effort:
   * without it no live unlock reaches this sandbox, and a grant says so. */
  if (io && io->on_started)
    (void)setsockopt(sync[0], SOL_SOCKET, SO_PASSCRED, &(int){ 1 }, sizeof(int));
  /* --net proxy needs the egress bridge, which lives in the binary. */
  if (o->net != SHK_NET_PROXY && (exe = stage2_memfd()) >= 0 && above_stderr(&exe) < 0)
    exe = -1;
  char self_exe[PATH_MAX];
  const char *binary = env->exe;
  if (exe < 0 && !binary) {
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (n <= 0) {
      r = shk__error_set(err, n < 0 ? -errno : -EIO, "/proc/self/exe: %s",
                         n < 0 ? strerror(errno) : "empty");
      goto out;
    }
    self_exe[n] = '\0';
    binary = self_exe;
  }
  /* The ids the workload runs as: the caller's own unless asked, for an
   * unprivileged caller (a root caller is root inside). Asked for uid and
   * gid 0, it stays at bwrap's and needs no namespace of stage 2's. */
  long map_uid = -1, map_gid = -1;
  if (!env->root) {
    map_uid = o->uid >= 0 ? o->uid : (long)env->uid;
    map_gid = o->gid >= 0 ? o->gid : (long)env->gid;
    if (map_uid == 0 && map_gid == 0)
      map_uid = map_gid = -1;
  } else if (o->uid > 0 || o->gid > 0) {
    r = shk__error_set(err, -EINVAL, "--uid and --gid choose the ids of an unprivileged "
                       "caller inside; a root caller runs as root");
    goto out;
  }
  if ((r = shk__sandbox_identity(o, &id)) < 0) {
    shk__error_set(err, r, "a machine id for the sandbox: %s", strerror(-r));
    goto out;
  }
  bool visible;
  shk_sandbox_plan_access(&res->plan, env->cwd, &visible);
  shk__bwrap_opts l = {
    .bwrap = f->bwrap,
    .exe = binary,
    .egress_dir = o->net == SHK_NET_PROXY ? eg->dir : NULL,
    .resolv = o->net == SHK_NET_NONE ? NULL
              : resolv[0] ? resolv : resolv_src[0] ? "/etc/resolv.conf" : NULL,
    .resolv_src = resolv_src[0] ? resolv_src : NULL,
    .chdir = visible ? env->cwd : NULL,
    .hostname = id.hostname,
    .hostname_file = id.hostname_file,
    .machine_id = id.machine_id,
    .tmpfs_size = o->tmpfs_size,
    .net = o->net,
    .root = env->root,
    .uid = env->uid,
    .gid = env->gid,
    .map_uid = map_uid,
    .map_gid = map_gid,
    .landlock = a->landlock_abi > 0,
    .ceiling = &o->ceiling,
    .seccomp = a->seccomp,
    .guard = a->guard,
    .observe = a->seccomp && !o->no_observe,
    .sync_fd = sync[1],
    .exe_fd = exe >= 0 ? exe : -1,
    .ctty = res->pty,
    .command = o->command,
    .ncommand = o->ncommand,
  };
  if ((r = shk__bwrap_argv(&res->plan, &l, &bargv, &s2)) < 0 ||
      shk__env_for_command(env, o, &cenv) < 0 ||
      (a->guard && !(g = shk__guard_new(o->net == SHK_NET_HOST))) ||
      (l.observe && !(obs = shk__observer_new(&res->plan, io ? io->on_write_refused : NULL,
                                              io ? io->refused_data : NULL)))) {
    r = nomem(err);
    goto out;
  }
  if ((self = (int)syscall(SYS_pidfd_open, getpid(), 0)) < 0) {
    r = shk__error_set(err, -errno, "pidfd_open: %s", strerror(errno));
    goto out;
  }

  /* Signals stay blocked from before the child exists until the handlers
   * are in place and child_pid is known, so none is lost in between. */
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &mask);
  struct sigaction sa = { .sa_handler = forward };
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < NFORWARDED; i++)
    sigaction(forwarded[i], &sa, &old[i]);
  /* A reader of the caller's output that goes away is an EPIPE for the
   * relay (which passes it on to the workload), not the launcher's end. */
  struct sigaction ign = { .sa_handler = SIG_IGN };
  sigaction(SIGPIPE, &ign, &old_pipe);
  handlers = true;
  got_signal = 0;
  child_args ca = { .parent = self, .uid = env->uid, .gid = env->gid, .cg = &cg,
                    .stdio = shk__relay_child_fds(relay),
                    .keep = { exe >= 0 && exe < sync[1] ? exe : sync[1],
                              exe < 0 ? -1 : exe < sync[1] ? sync[1] : exe },
                    .argv = bargv, .envp = cenv.environ,
                    .mask = mask, .pipe_ignored = old_pipe.sa_handler == SIG_IGN,
                    .err = 0, .what = NULL };
  pid = start_bwrap(f, env, &ca);
  if (pid > 0)
    child_pid = pid;
  sigprocmask(SIG_SETMASK, &mask, NULL);
  if (pid < 0) {
    r = shk__error_set(err, pid, "%s: %s", ca.what ? ca.what : "starting bwrap", strerror(-pid));
    pid = -1;
    goto out;
  }
  close(sync[1]);
  sync[1] = -1;
  shk__relay_started(relay);
  if ((exited = (int)syscall(SYS_pidfd_open, pid, 0)) < 0) {
    r = shk__error_set(err, -errno, "pidfd_open: %s", strerror(errno));
    goto out;
  }
  const char *why = NULL;
  if ((r = supervise(exited, sync[0], &s2, g, obs, relay, io, res, &listener, &why)) < 0) {
    shk__error_set(err, r, "%s; the sandbox was killed", why ? why : strerror(-r));
    goto out;
  }
  int status;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      r = shk__error_set(err, -errno, "waitpid: %s", strerror(errno));
      goto out;
    }
  }
  reaped = true;
  /* bwrap exits with the command's status (128+N when signal N ended it);
   * a signal that ended bwrap itself is the launcher's SIGKILL or worse. */
  if (WIFSIGNALED(status))
    res->exit_signal = WTERMSIG(status);
  else
    res->exit_status = WEXITSTATUS(status);
out:
  /* The one way out. A sandbox that is still running when something failed
   * is killed first, then everything is released in reverse order. */
  if (pid > 0 && !reaped) {
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
  }
  child_pid = 0;
  res->launcher_signal = got_signal;
  /* The caller's terminal is put back first, whatever happened. */
  shk__relay_close(relay);
  if (handlers) {
    for (size_t i = 0; i < NFORWARDED; i++)
      sigaction(forwarded[i], &old[i], NULL);
    sigaction(SIGPIPE, &old_pipe, NULL);
  }
  if (listener >= 0)
    close(listener);
  if (exited >= 0)
    close(exited);
  if (self >= 0)
    close(self);
  if (exe >= 0)
    close(exe);
  for (int i = 0; i < 2; i++)
    if (sync[i] >= 0)
      close(sync[i]);
  shk__guard_free(g);
  shk__observer_take(obs, res);
  shk__observer_free(obs);
  res->oom_kills = oom_kills(&cg);
  res->pids_refused = pids_refused(&cg);
  shk__freezer_detach(&cg);
  shk_sandbox_cgroup_destroy(&cg);
  /* Every process of the sandbox died with its pid namespace. */
  shk_sandbox_plan_cleanup(&res->plan);
  shk__strv_free(bargv);
  shk__stage2_args_free(&s2);
  /* The names of the variables the command did not get, for the report. */
  res->env_removed = cenv.removed;
  res->nenv_removed = cenv.nremoved;
  cenv.removed = NULL;
  cenv.nremoved = 0;
  shk__env_result_free(&cenv);
  return r;
}

void shk_sandbox_result_free(shk_sandbox_result *res)
{
  shk_sandbox_plan_free(&res->plan);
  free(res->session);
  for (size_t i = 0; i < res->nenv_removed; i++)
    free(res->env_removed[i]);
  free(res->env_removed);
  for (size_t i = 0; i < sizeof res->cgroup_paths / sizeof res->cgroup_paths[0]; i++)
    free(res->cgroup_paths[i]);
  for (size_t i = 0; i < res->nwrites_refused; i++)
    free(res->writes_refused[i].tree);
  free(res->writes_refused);
  memset(res, 0, sizeof *res);
}
