/* SPDX-License-Identifier: Apache-2.0 */
/* The connect() guard. A read-only mount does not stop connect() on a
 * unix socket of the host, Landlock (up to ABI 7) does not govern it, and a
 * seccomp filter cannot read the address. So stage 2 routes every connect()
 * and every bind() of the workload to the launcher (`shinken run`, outside
 * the sandbox) through a seccomp user notification.
 *
 * The rule: a pathname unix socket may be connected only when it was bound
 * inside this sandbox. Where it lives does not matter: a writable root may
 * hold the host's sockets (tmux, ssh-agent, X11, another session's egress
 * sockets when the working directory is /tmp or a runtime directory), and a
 * socket bound inside may be anywhere the workload can write. Each bind()
 * of a unix socket is recorded by the socket's cookie (the kernel's 64-bit
 * identity of a socket, never reused) before the kernel performs it; a
 * connect() is admitted when the socket file it names is bound to a
 * listening socket with a recorded cookie, which the kernel's unix socket
 * diagnostics (sock_diag) answer from the file's device and inode. The
 * sock_diag socket was made by stage 2 in the sandbox's network namespace,
 * so in the usual modes a host socket is not even listed.
 *
 * The launcher reads the address once, opens the socket file with O_PATH
 * through the caller's /proc/TID/root (RESOLVE_IN_ROOT, relative paths from
 * its working directory), checks that inode, and connects a duplicate of
 * the workload's own socket (pidfd_getfd) through /proc/self/fd/N of that
 * very inode: no SECCOMP_USER_NOTIF_FLAG_CONTINUE for connect(), no window
 * between check and use (an inode is bound to at most one socket, ever). A
 * bind() is let through with CONTINUE once recorded: nothing about its
 * address is decided here, the workload binds with its own Landlock and
 * mounts. A socket keeps the network namespace it was made in, so a network
 * address is reached from the sandbox's. Every thread is served: the
 * notification names a thread, whose thread group the pidfd is opened on. */
#include "sandbox-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/netlink.h>
#include <linux/openat2.h>
#include <linux/rtnetlink.h>
#include <linux/seccomp.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/common.h"

#ifndef SO_COOKIE
#define SO_COOKIE 57
#endif
#ifndef SECCOMP_USER_NOTIF_FLAG_CONTINUE
#define SECCOMP_USER_NOTIF_FLAG_CONTINUE (1UL << 0)
#endif

/* The most sockets recorded at once; past it the dead ones are dropped,
 * and a bind past that is let through unrecorded (its socket then cannot
 * be connected to: the closed outcome). */
#define MAX_BOUND 65536

struct shk__guard {
  bool deny_abstract;
  int diag;          /* NETLINK_SOCK_DIAG in the sandbox's network namespace, or -1 */
  uint64_t *bound;   /* cookies of the unix sockets bound inside, sorted */
  size_t nbound, cap;
  uint32_t seq;
};

shk__guard *shk__guard_new(bool deny_abstract)
{
  shk__guard *g = calloc(1, sizeof *g);
  if (!g)
    return NULL;
  g->deny_abstract = deny_abstract;
  g->diag = -1;
  return g;
}

void shk__guard_attach_diag(shk__guard *g, int diag)
{
  if (g->diag >= 0)
    close(g->diag);
  g->diag = diag;
}

void shk__guard_free(shk__guard *g)
{
  if (!g)
    return;
  if (g->diag >= 0)
    close(g->diag);
  free(g->bound);
  free(g);
}

static size_t bound_at(const shk__guard *g, uint64_t cookie)
{
  size_t lo = 0, hi = g->nbound;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (g->bound[mid] < cookie)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static bool is_bound(const shk__guard *g, uint64_t cookie)
{
  size_t i = bound_at(g, cookie);
  return i < g->nbound && g->bound[i] == cookie;
}

/* One unix socket the kernel lists: its cookie and the device and inode of
 * the file it is bound to (0 when unbound or abstract). */
typedef struct listed {
  uint64_t cookie;
  uint64_t dev, ino;
} listed;

/* NLMSG_OK and NLMSG_NEXT with an unsigned length: the macros compare the
 * header's unsigned length with a signed one, which clang refuses. */
static bool msg_ok(const struct nlmsghdr *h, size_t len)
{
  return len >= sizeof *h && h->nlmsg_len >= sizeof *h && h->nlmsg_len <= len;
}

static struct nlmsghdr *msg_next(struct nlmsghdr *h, size_t *len)
{
  size_t step = NLMSG_ALIGN(h->nlmsg_len);
  step = step < *len ? step : *len;
  *len -= step;
  return (struct nlmsghdr *)((char *)h + step);
}

/* Lists the unix sockets in STATES (a TCP_* bit mask) of the diag socket's
 * network namespace, calling FN for each until it returns nonzero, which
 * is returned. -errno when the kernel cannot say. */
static int list_sockets(shk__guard *g, unsigned states, int (*fn)(const listed *, void *),
                        void *ctx)
{
  if (g->diag < 0)
    return -ENOTCONN;
  struct {
    struct nlmsghdr h;
    struct unix_diag_req r;
  } req = { .h = { .nlmsg_len = sizeof req, .nlmsg_type = SOCK_DIAG_BY_FAMILY,
                   .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = ++g->seq },
            .r = { .sdiag_family = AF_UNIX, .udiag_states = states,
                   .udiag_show = UDIAG_SHOW_VFS } };
  if (send(g->diag, &req, sizeof req, MSG_NOSIGNAL) != (ssize_t)sizeof req)
    return -errno;
  static _Alignas(struct nlmsghdr) char buf[32768];
  int found = 0;
  for (;;) {
    ssize_t n = recv(g->diag, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return n < 0 ? -errno : -EIO;
    size_t len = (size_t)n;
    for (struct nlmsghdr *h = (struct nlmsghdr *)buf; msg_ok(h, len); h = msg_next(h, &len)) {
      if (h->nlmsg_seq != g->seq)
        continue;
      if (h->nlmsg_type == NLMSG_DONE)
        return found;
      if (h->nlmsg_type == NLMSG_ERROR) {
        const struct nlmsgerr *e = NLMSG_DATA(h);
        return e->error < 0 ? e->error : -EIO;
      }
      if (found || h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
          h->nlmsg_len < NLMSG_LENGTH(sizeof(struct unix_diag_msg)))
        continue;
      const struct unix_diag_msg *m = NLMSG_DATA(h);
      listed l = { (uint64_t)m->udiag_cookie[0] | (uint64_t)m->udiag_cookie[1] << 32, 0, 0 };
      int alen = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof *m));
      for (struct rtattr *a = (struct rtattr *)(m + 1); RTA_OK(a, alen); a = RTA_NEXT(a, alen))
        if (a->rta_type == UNIX_DIAG_VFS && RTA_PAYLOAD(a) >= sizeof(struct unix_diag_vfs)) {
          const struct unix_diag_vfs *v = RTA_DATA(a);
          l.dev = v->udiag_vfs_dev;
          l.ino = v->udiag_vfs_ino;
        }
      found = fn(&l, ctx);
    }
  }
}

/* Keeps the recorded cookies of sockets that still exist. */
static int keep_alive(const listed *l, void *ctx)
{
  shk__guard *g = ctx;
  size_t i = bound_at(g, l->cookie);
  if (i < g->nbound && g->bound[i] == l->cookie)
    g->bound[i] |= 1ULL << 63; /* marked; cookies count up from 1 and never get there */
  return 0;
}

static void prune(shk__guard *g)
{
  if (list_sockets(g, ~0U, keep_alive, g) < 0)
    return;
  size_t out = 0;
  for (size_t i = 0; i < g->nbound; i++)
    if (g->bound[i] >> 63)
      g->bound[out++] = g->bound[i] & ~(1ULL << 63);
  g->nbound = out;
}

/* Records SOCK (the workload's socket, duplicated) as bound inside, when
 * it is a unix socket. */
static void record_bind(shk__guard *g, int sock)
{
  int domain = 0;
  uint64_t cookie = 0;
  socklen_t dl = sizeof domain, cl = sizeof cookie;
  if (getsockopt(sock, SOL_SOCKET, SO_DOMAIN, &domain, &dl) < 0 || domain != AF_UNIX ||
      getsockopt(sock, SOL_SOCKET, SO_COOKIE, &cookie, &cl) < 0 || is_bound(g, cookie))
    return;
  if (g->nbound == MAX_BOUND)
    prune(g);
  if (g->nbound == g->cap) {
    size_t cap = g->cap ? 2 * g->cap : 64;
    if (cap > MAX_BOUND)
      cap = MAX_BOUND;
    uint64_t *v = cap > g->cap ? realloc(g->bound, cap * sizeof *v) : NULL;
    if (!v)
      return;
    g->bound = v;
    g->cap = cap;
  }
  size_t i = bound_at(g, cookie);
  memmove(g->bound + i + 1, g->bound + i, (g->nbound - i) * sizeof *g->bound);
  g->bound[i] = cookie;
  g->nbound++;
}

/* The listening socket bound to a file (device and inode), if one is. */
typedef struct target {
  uint64_t dev, ino;
  bool found;
  uint64_t cookie;
} target;

static int match_target(const listed *l, void *ctx)
{
  target *t = ctx;
  if (l->ino != t->ino || l->dev != t->dev)
    return 0;
  t->found = true;
  t->cookie = l->cookie;
  return 1;
}

/* The thread group of thread TID, from /proc/TID/status: pidfd_open takes
 * a process, and the notification names the thread that called. */
static pid_t thread_group(pid_t tid)
{
  char path[48], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/status", (int)tid);
  shk_autoclose int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  if (n <= 0)
    return -1;
  buf[n] = '\0';
  const char *t = strstr(buf, "\nTgid:");
  return t ? (pid_t)strtol(t + 6, NULL, 10) : -1;
}

/* Opens the socket file PATH names for thread TID, resolved as the kernel
 * would for it: inside its root, a relative path from its working
 * directory, symlinks included. Returns an O_PATH descriptor or -errno. */
static int open_as(pid_t tid, const char *path)
{
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/%d/root", (int)tid);
  shk_autoclose int root = open(proc, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0)
    return -ENOENT;
  char full[PATH_MAX + sizeof(((struct sockaddr_un *)0)->sun_path) + 2];
  if (path[0] == '/') {
    snprintf(full, sizeof full, "%s", path);
  } else {
    char cwd[PATH_MAX];
    snprintf(proc, sizeof proc, "/proc/%d/cwd", (int)tid);
    ssize_t cl = readlink(proc, cwd, sizeof cwd - 1);
    if (cl <= 0 || cwd[0] != '/')
      return -ENOENT;
    cwd[cl] = '\0';
    snprintf(full, sizeof full, "%s/%s", cwd, path);
  }
  struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT };
  int fd = (int)syscall(SYS_openat2, root, full, &how, sizeof how);
  return fd < 0 ? -errno : fd;
}

/* Connects `sock` (the workload's socket, duplicated) to the address the
 * workload gave, after the checks above. Returns 0 or a negative errno for
 * the workload. */
static int connect_for(shk__guard *g, pid_t tid, int sock, struct sockaddr_storage *ss,
                       socklen_t len)
{
  if (len < sizeof(sa_family_t) || ss->ss_family != AF_UNIX)
    return connect(sock, (struct sockaddr *)ss, len) < 0 ? -errno : 0;
  struct sockaddr_un *un = (struct sockaddr_un *)ss;
  size_t plen = len - offsetof(struct sockaddr_un, sun_path);
  if (plen == 0 || un->sun_path[0] == '\0') {
    /* Unnamed, or abstract: the namespace of the socket's network
     * namespace, the sandbox's own unless --net host. There it is the
     * host's, and the workload's Landlock scoping would not apply to a
     * connect made from here. */
    if (plen > 0 && g->deny_abstract)
      return -EPERM;
    return connect(sock, (struct sockaddr *)ss, len) < 0 ? -errno : 0;
  }
  size_t n = plen < sizeof un->sun_path ? plen : sizeof un->sun_path;
  char path[sizeof un->sun_path + 1];
  memcpy(path, un->sun_path, n);
  path[n] = '\0';
  shk_autoclose int fd = open_as(tid, path);
  if (fd < 0)
    return fd;
  struct stat st;
  if (fstat(fd, &st) < 0)
    return -errno;
  if (!S_ISSOCK(st.st_mode))
    return -ECONNREFUSED;
  /* The kernel's dev_t, as sock_diag reports it. */
  target t = { ((uint64_t)major(st.st_dev) << 20) | minor(st.st_dev), st.st_ino, false, 0 };
  if (list_sockets(g, 1U << 10 /* TCP_LISTEN */, match_target, &t) < 0)
    return -EACCES;
  /* Nothing listening there in the sandbox's network namespace: a host
   * socket (in the usual modes), or one whose server is gone. */
  if (!t.found)
    return -ECONNREFUSED;
  if (!is_bound(g, t.cookie))
    return -EACCES;
  struct sockaddr_un via = { .sun_family = AF_UNIX };
  snprintf(via.sun_path, sizeof via.sun_path, "/proc/self/fd/%d", fd);
  return connect(sock, (struct sockaddr *)&via, sizeof via) < 0 ? -errno : 0;
}

/* Safe because it only ever performs, on the workload's own socket, a
 * connect the workload asked for, and only to a unix socket bound inside
 * this sandbox or to a network address, which the socket's network
 * namespace and the allowed socket families confine; and it lets a bind()
 * through unchanged (the workload's own Landlock and mounts apply to it),
 * only noting which socket it was. */
int shk__guard_serve(shk__guard *g, int listener, const struct seccomp_notif *request)
{
  struct seccomp_notif req = *request;
  struct seccomp_notif_resp resp;
  memset(&resp, 0, sizeof resp);
  resp.id = req.id;
  bool bind_call = req.data.nr == SYS_bind;
  int fd = (int)req.data.args[0];
  socklen_t len = (socklen_t)req.data.args[2];
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  int r = 0;
  if (!bind_call && req.data.args[2] > sizeof ss) {
    r = -EINVAL;
  } else if (!bind_call && len > 0) {
    struct iovec local = { &ss, len }, remote = { (void *)(uintptr_t)req.data.args[1], len };
    r = process_vm_readv(req.pid, &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -EFAULT;
  }
  pid_t tgid = r == 0 ? thread_group(req.pid) : -1;
  shk_autoclose int pidfd = tgid > 0 ? (int)syscall(SYS_pidfd_open, tgid, 0) : -1;
  /* The request must still be live: the thread did not die and its id was
   * not reused meanwhile, so the thread group read above is its own. */
  if (r == 0 && (pidfd < 0 || ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &req.id) < 0))
    r = -ESRCH;
  shk_autoclose int sock = r == 0 ? (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0) : -1;
  if (bind_call) {
    /* A descriptor that is not there: the kernel's bind() says so. */
    if (sock >= 0)
      record_bind(g, sock);
    if (r == -ESRCH) {
      resp.error = -ESRCH;
    } else {
      resp.error = 0;
      resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    }
  } else {
    if (r == 0 && sock < 0)
      r = -EBADF;
    if (r == 0)
      r = connect_for(g, req.pid, sock, &ss, len);
    resp.error = r;
  }
  if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp) < 0 && errno != ENOENT)
    return -errno;
  return 0;
}
