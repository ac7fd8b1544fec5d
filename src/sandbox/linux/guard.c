/* The connect() guard. A read-only mount does not stop connect() on a
 * unix socket of the host, Landlock (up to ABI 7) does not govern it, and a
 * seccomp filter cannot read the address. So stage 2 routes every connect()
 * of the workload to the launcher (`shinken run`, outside the sandbox)
 * through a seccomp user notification. The launcher reads the address once;
 * a pathname socket is opened with O_PATH through the caller's
 * /proc/PID/root or /proc/PID/cwd and allowed only on a mount the sandbox
 * grants writing to; then the launcher connects a duplicate of the
 * workload's own socket (pidfd_getfd) through /proc/self/fd, so that what
 * was checked is what gets connected: no SECCOMP_USER_NOTIF_FLAG_CONTINUE,
 * no window between check and use. A socket keeps the network namespace it
 * was made in, so a network address is reached from the sandbox's. */
#include "sandbox-internal.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>

#include "common/common.h"

#define MAX_ALLOWED 64

struct shk__guard {
  char **paths; /* where connect() may reach a pathname socket, as seen inside */
  size_t npaths;
  uint64_t mnt[MAX_ALLOWED]; /* their mounts, resolved at the first request */
  size_t nmnt;
  bool resolved;
  bool deny_abstract;
};

shk__guard *shk__guard_new(const char *const *allowed, size_t n, bool deny_abstract)
{
  shk__guard *g = calloc(1, sizeof *g);
  if (!g || !(g->paths = calloc(n ? n : 1, sizeof *g->paths))) {
    free(g);
    return NULL;
  }
  for (size_t i = 0; i < n; i++) {
    if (!(g->paths[i] = strdup(allowed[i]))) {
      shk__guard_free(g);
      return NULL;
    }
    g->npaths++;
  }
  g->deny_abstract = deny_abstract;
  return g;
}

void shk__guard_free(shk__guard *g)
{
  if (!g)
    return;
  for (size_t i = 0; i < g->npaths; i++)
    free(g->paths[i]);
  free(g->paths);
  free(g);
}

static int mount_id(int dirfd, const char *path, int flags, uint64_t *id)
{
  struct statx stx;
  if (statx(dirfd, path, flags, STATX_MNT_ID, &stx) < 0)
    return -errno;
  if (!(stx.stx_mask & STATX_MNT_ID))
    return -ENOTSUP;
  *id = stx.stx_mnt_id;
  return 0;
}

/* The allowed mounts as the sandbox has them: through the root of a
 * process inside, which all share one mount namespace. */
static void resolve_allowed(shk__guard *g, int root)
{
  for (size_t i = 0; i < g->npaths && g->nmnt < MAX_ALLOWED; i++)
    if (mount_id(root, g->paths[i][1] ? g->paths[i] + 1 : ".", 0, &g->mnt[g->nmnt]) == 0)
      g->nmnt++;
  g->resolved = true;
}

static bool allowed_mount(const shk__guard *g, uint64_t id)
{
  for (size_t i = 0; i < g->nmnt; i++)
    if (g->mnt[i] == id)
      return true;
  return false;
}

/* Connects `sock` (the workload's socket, duplicated) to the address the
 * workload gave, after the checks above. Returns 0 or a negative errno for
 * the workload. */
static int connect_for(shk__guard *g, pid_t pid, int sock, struct sockaddr_storage *ss,
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
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/%d/root", (int)pid);
  shk_autoclose int root = open(proc, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0)
    return -ENOENT;
  if (!g->resolved)
    resolve_allowed(g, root);
  /* The path as the caller sees it: a relative one from its working
   * directory (as its root shows it). RESOLVE_IN_ROOT resolves it, symlinks
   * included, as the kernel would for the caller. */
  char full[PATH_MAX + sizeof path + 1];
  if (path[0] == '/') {
    snprintf(full, sizeof full, "%s", path);
  } else {
    char cwd[PATH_MAX];
    snprintf(proc, sizeof proc, "/proc/%d/cwd", (int)pid);
    ssize_t cl = readlink(proc, cwd, sizeof cwd - 1);
    if (cl <= 0 || cwd[0] != '/')
      return -ENOENT;
    cwd[cl] = '\0';
    snprintf(full, sizeof full, "%s/%s", cwd, path);
  }
  struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT };
  shk_autoclose int target = (int)syscall(SYS_openat2, root, full, &how, sizeof how);
  if (target < 0)
    return -errno;
  uint64_t id = 0;
  int r = mount_id(target, "", AT_EMPTY_PATH, &id);
  if (r < 0)
    return r;
  if (!allowed_mount(g, id))
    return -EACCES;
  struct sockaddr_un via = { .sun_family = AF_UNIX };
  snprintf(via.sun_path, sizeof via.sun_path, "/proc/self/fd/%d", target);
  return connect(sock, (struct sockaddr *)&via, sizeof via) < 0 ? -errno : 0;
}

/* Safe because it only ever performs, on the workload's own socket, a
 * connect the workload asked for, and only to a socket on a mount the
 * sandbox already grants writing to, or to a network address, which the
 * socket's network namespace and the allowed socket families confine. */
int shk__guard_serve(shk__guard *g, int listener)
{
  struct seccomp_notif req;
  struct seccomp_notif_resp resp;
  memset(&req, 0, sizeof req);
  if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0)
    return errno == EINTR || errno == ENOENT ? 0 : -errno;
  memset(&resp, 0, sizeof resp);
  resp.id = req.id;
  int fd = (int)req.data.args[0];
  socklen_t len = (socklen_t)req.data.args[2];
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  int r = 0;
  if (req.data.args[2] > sizeof ss) {
    r = -EINVAL;
  } else if (len > 0) {
    struct iovec local = { &ss, len }, remote = { (void *)(uintptr_t)req.data.args[1], len };
    r = process_vm_readv(req.pid, &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -EFAULT;
  }
  shk_autoclose int pidfd = r == 0 ? (int)syscall(SYS_pidfd_open, req.pid, 0) : -1;
  /* The request must still be live: the pid was not reused meanwhile. */
  if (r == 0 && (pidfd < 0 || ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &req.id) < 0))
    r = -ESRCH;
  shk_autoclose int sock = r == 0 ? (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0) : -1;
  if (r == 0 && sock < 0)
    r = -EBADF;
  if (r == 0)
    r = connect_for(g, req.pid, sock, &ss, len);
  resp.error = r;
  if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp) < 0 && errno != ENOENT)
    return -errno;
  return 0;
}
