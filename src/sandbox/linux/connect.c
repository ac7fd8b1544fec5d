/* The connect() guard. A read-only mount does not stop connect() on a
 * unix socket of the host, Landlock (up to ABI 7) does not govern it, and a
 * seccomp filter cannot read the address. So stage 2 routes every connect()
 * of the workload to a helper through a seccomp user notification. The
 * helper reads the address once, opens a pathname socket with O_PATH and
 * checks which mount it lies on (a writable root or a private tmpfs: yes;
 * the read-only view of the host: no), then connects a duplicate of the
 * workload's own socket (pidfd_getfd) through /proc/self/fd, so that what
 * was checked is what gets connected: no SECCOMP_USER_NOTIF_FLAG_CONTINUE,
 * no window between check and use. */
#include "shinken/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>

#include "common/common.h"

#if defined(__x86_64__)
#define NATIVE_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "the connect() guard needs this architecture's AUDIT_ARCH"
#endif

#define MAX_ALLOWED 64

typedef struct guard {
  uint64_t mnt[MAX_ALLOWED];
  size_t nmnt;
} guard;

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

static bool allowed_mount(const guard *g, uint64_t id)
{
  for (size_t i = 0; i < g->nmnt; i++)
    if (g->mnt[i] == id)
      return true;
  return false;
}

/* Connects `sock` (the workload's socket, duplicated) to the address the
 * workload gave, after the checks above. Returns 0 or a negative errno for
 * the workload. */
static int connect_for(const guard *g, pid_t pid, int sock, struct sockaddr_storage *ss,
                       socklen_t len)
{
  if (len < sizeof(sa_family_t) || ss->ss_family != AF_UNIX)
    return connect(sock, (struct sockaddr *)ss, len) < 0 ? -errno : 0;
  struct sockaddr_un *un = (struct sockaddr_un *)ss;
  size_t plen = len - offsetof(struct sockaddr_un, sun_path);
  /* Unnamed or abstract: the helper shares the workload's Landlock domain,
   * so the kernel scopes this connect as it would have the workload's. */
  if (plen == 0 || un->sun_path[0] == '\0')
    return connect(sock, (struct sockaddr *)ss, len) < 0 ? -errno : 0;
  char path[sizeof un->sun_path + 1];
  memcpy(path, un->sun_path, plen < sizeof un->sun_path ? plen : sizeof un->sun_path);
  path[plen < sizeof un->sun_path ? plen : sizeof un->sun_path] = '\0';
  /* A relative path is the workload's, from its working directory. */
  shk_autoclose int dir = -1;
  if (path[0] != '/') {
    char cwd[64];
    snprintf(cwd, sizeof cwd, "/proc/%d/cwd", (int)pid);
    dir = open(cwd, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
      return -ENOENT;
  }
  shk_autoclose int target = openat(path[0] == '/' ? AT_FDCWD : dir, path, O_PATH | O_CLOEXEC);
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

static int serve_one(const guard *g, int listener)
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
  int r;
  if (len > sizeof ss) {
    r = -EINVAL;
  } else {
    struct iovec local = { &ss, len }, remote = { (void *)(uintptr_t)req.data.args[1], len };
    r = process_vm_readv(req.pid, &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -EFAULT;
  }
  shk_autoclose int pidfd = r == 0 ? (int)syscall(SYS_pidfd_open, req.pid, 0) : -1;
  /* The request must still be live: the pid was not reused meanwhile. */
  if (r == 0 && (pidfd < 0 || ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &req.id) < 0))
    r = -ESRCH;
  shk_autoclose int sock = r == 0 ? (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0) : -1;
  if (r == 0 && sock < 0)
    r = errno == EBADF ? -EBADF : -ENOTSOCK;
  if (r == 0)
    r = connect_for(g, req.pid, sock, &ss, len);
  resp.error = r;
  resp.val = 0;
  if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp) < 0 && errno != ENOENT)
    return -errno;
  return 0;
}

SHK_NORETURN static void helper(guard *g, int ctl)
{
  /* Receive the listener once the filter is installed. */
  char b;
  struct iovec iov = { &b, 1 };
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
  } u;
  struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf };
  if (recvmsg(ctl, &mh, MSG_CMSG_CLOEXEC) != 1)
    _exit(0);
  struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
  if (!c || c->cmsg_type != SCM_RIGHTS)
    _exit(1);
  int listener;
  memcpy(&listener, CMSG_DATA(c), sizeof listener);
  close(ctl);
  for (;;)
    if (serve_one(g, listener) < 0)
      _exit(1);
}

/* Safe because the helper only ever performs, on the workload's own
 * socket, a connect the workload asked for, and only to a socket on a mount
 * the sandbox already grants writing to (or to a network address, which
 * the namespace and the socket families already confine). It is started
 * after Landlock, so it is in the workload's domain; it is not dumpable,
 * dies with stage 2, and keeps no other descriptor. */
int shk_sandbox_connect_guard_start(const char *const *allowed, size_t nallowed, int *ctl)
{
  static guard g;
  memset(&g, 0, sizeof g);
  for (size_t i = 0; i < nallowed && g.nmnt < MAX_ALLOWED; i++)
    if (mount_id(AT_FDCWD, allowed[i], 0, &g.mnt[g.nmnt]) == 0)
      g.nmnt++;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
    return -errno;
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int e = -errno;
    close(sv[0]);
    close(sv[1]);
    return e;
  }
  if (pid == 0) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent ||
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
      _exit(1);
    /* Nothing but the control socket: the sync pipe in particular must
     * close when the workload's exec does. */
    if (dup2(sv[1], 3) < 0 || close_range(4, ~0U, 0) < 0)
      _exit(1);
    helper(&g, 3);
  }
  close(sv[1]);
  *ctl = sv[0];
  return 0;
}

int shk_sandbox_connect_guard_arm(int ctl)
{
  struct sock_filter f[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_AUDIT_ARCH, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW), /* the main filter kills it */
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_connect, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = { sizeof f / sizeof f[0], f };
  int listener = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                              SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
  if (listener < 0) {
    int e = -errno;
    close(ctl);
    return e;
  }
  char b = 'L';
  struct iovec iov = { &b, 1 };
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
  } u;
  memset(&u, 0, sizeof u);
  struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf };
  struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &listener, sizeof listener);
  ssize_t n = sendmsg(ctl, &mh, 0);
  int e = n == 1 ? 0 : -errno;
  close(listener);
  close(ctl);
  return e;
}
