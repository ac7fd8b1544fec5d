/* SPDX-License-Identifier: Apache-2.0 */
/* Stage 2: run by bwrap inside the new namespaces, it applies the layers
 * bwrap does not (its own masks, a fresh keyring, the egress bridge,
 * dropping every capability, no-new-privs, Landlock, the connect() guard,
 * seccomp last), tells the launcher what it applied, and execs the
 * workload. Every failure exits 125 before the workload runs: nothing runs
 * with less than what was asked. Its command line is written by the
 * launcher only (stage2-proto.c).
 *
 * It makes its system calls itself and calls nothing of the C library, so
 * that it can run as a program without one: that program starts in a
 * fraction of the time a program with the C library's start-up takes
 * (stage2-main.c). This is the one program of the module that may die. */
#include "sandbox-internal.h"

#include <linux/errno.h>
#include <linux/fcntl.h>
#include <linux/keyctl.h>
#include <linux/prctl.h>
#include <linux/uio.h>
#include <asm/ioctls.h>
#include <asm/socket.h>

#include "sys.h"

#define STAGE2_FAIL 125
#define PATH_MAX_ 4096
#define SIGKILL_ 9

/* The messages of the C library, for the errors stage 2 can meet. */
static const char *error_text(long e)
{
  switch (-e) {
  case EPERM: return "Operation not permitted";
  case ENOENT: return "No such file or directory";
  case ESRCH: return "No such process";
  case EIO: return "Input/output error";
  case E2BIG: return "Argument list too long";
  case ENOEXEC: return "Exec format error";
  case EBADF: return "Bad file descriptor";
  case EAGAIN: return "Resource temporarily unavailable";
  case ENOMEM: return "Cannot allocate memory";
  case EACCES: return "Permission denied";
  case EFAULT: return "Bad address";
  case EBUSY: return "Device or resource busy";
  case EEXIST: return "File exists";
  case EXDEV: return "Invalid cross-device link";
  case ENODEV: return "No such device";
  case ENOTDIR: return "Not a directory";
  case EISDIR: return "Is a directory";
  case EINVAL: return "Invalid argument";
  case ENFILE: return "Too many open files in system";
  case EMFILE: return "Too many open files";
  case ETXTBSY: return "Text file busy";
  case ENOSPC: return "No space left on device";
  case EROFS: return "Read-only file system";
  case EPIPE: return "Broken pipe";
  case ENAMETOOLONG: return "File name too long";
  case ENOSYS: return "Function not implemented";
  case ELOOP: return "Too many levels of symbolic links";
  case EOPNOTSUPP: return "Operation not supported";
  case EADDRINUSE: return "Address already in use";
  case EADDRNOTAVAIL: return "Cannot assign requested address";
  case ENETUNREACH: return "Network is unreachable";
  case ECONNREFUSED: return "Connection refused";
  default: return "Unknown error";
  }
}

static void put(const char *s)
{
  size_t n = shk__s_len(s);
  while (n > 0) {
    long w = shk__sys(__NR_write, 2, s, n);
    if (w == -EINTR)
      continue;
    if (w <= 0)
      return;
    s += w;
    n -= (size_t)w;
  }
}

static __attribute__((noreturn)) void leave(int status)
{
  for (;;)
    shk__sys(__NR_exit_group, status);
}

/* "shinken: stage 2: WHAT[ DETAIL]: the error" and exit 125. */
static __attribute__((noreturn)) void die(const char *what, const char *detail, long err)
{
  put("shinken: stage 2: ");
  put(what);
  if (detail) {
    put(" ");
    put(detail);
  }
  if (err) {
    put(": ");
    put(error_text(err));
  }
  put("\n");
  leave(STAGE2_FAIL);
}

/* The mounts bwrap left to stage 2 (bwrap.c), while it still may mount. */
static unsigned make_masks(const shk__stage2_args *a)
{
  static const struct {
    size_t offset;
    shk__mount_op op;
    bool create;
  } kinds[] = {
    { offsetof(shk__stage2_args, mask_files), SHK__MOUNT_MASK_FILE, false },
    { offsetof(shk__stage2_args, create_files), SHK__MOUNT_MASK_FILE, true },
    { offsetof(shk__stage2_args, mask_dirs), SHK__MOUNT_MASK_DIR, false },
    { offsetof(shk__stage2_args, create_dirs), SHK__MOUNT_MASK_DIR, true },
    { offsetof(shk__stage2_args, ro_files), SHK__MOUNT_RO_FILE, false },
    { offsetof(shk__stage2_args, mask_links), SHK__MOUNT_MASK_LINK, false },
    { offsetof(shk__stage2_args, ro_dirs), SHK__MOUNT_RO_DIR, false },
    { offsetof(shk__stage2_args, pins), SHK__MOUNT_PIN, false },
  };
  unsigned n = 0;
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    const shk__stage2_list *l = (const shk__stage2_list *)((const char *)a + kinds[k].offset);
    for (size_t i = 0; i < l->n; i++, n++) {
      int r = shk__stage2_mount(l->v[i], kinds[k].op, kinds[k].create);
      if (r < 0)
        die("masking", l->v[i], r);
    }
  }
  for (size_t i = 0; i < a->data_paths.n; i++, n++) {
    int r = shk__stage2_data(a->data_paths.v[i], a->data_texts.v[i], (unsigned)i, false);
    if (r < 0)
      die("the sandbox's own", a->data_paths.v[i], r);
  }
  for (size_t i = 0; i < a->create_data_paths.n; i++, n++) {
    int r = shk__stage2_data(a->create_data_paths.v[i], a->create_data_texts.v[i],
                             (unsigned)(a->data_paths.n + i), true);
    if (r < 0)
      die("masking", a->create_data_paths.v[i], r);
  }
  for (size_t i = 0; i < a->tmpfs.n; i++, n++) {
    int r = shk__stage2_tmpfs_limit(a->tmpfs.v[i], a->tmpfs_size);
    if (r < 0)
      die("bounding the size of", a->tmpfs.v[i], r);
  }
  return n;
}

/* Writes TEXT to /proc/self/FILE in one write. */
static long write_self(const char *file, const char *text)
{
  char path[32] = "/proc/self/";
  size_t n = 11;
  for (const char *f = file; *f; f++)
    path[n++] = *f;
  path[n] = '\0';
  long fd = shk__sys(__NR_openat, AT_FDCWD, path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return fd;
  size_t len = shk__s_len(text);
  long w = shk__sys(__NR_write, fd, text, len);
  shk__sys(__NR_close, fd);
  return w < 0 ? w : (size_t)w == len ? 0 : -EIO;
}

/* "ID 0 1": ID inside is the 0 outside (the uid bwrap set stage 2 up with,
 * which is the caller's own id further out). */
static long map_to_0(const char *file, long id)
{
  char line[40];
  shk__s_utoa((uint64_t)id, line);
  size_t n = shk__s_len(line);
  const char *tail = " 0 1";
  for (size_t i = 0; tail[i]; i++)
    line[n++] = tail[i];
  line[n] = '\0';
  return write_self(file, line);
}

/* Safe because a new user namespace only ever holds less: the command runs
 * as the caller's ids (or the --uid and --gid asked), which map to the ids
 * stage 2 already had, and the
 * capabilities it gets in the new namespace are dropped below, before
 * anything else runs. This is what bwrap does at the end of its set-up
 * for an unprivileged caller; stage 2 does it instead so that it keeps,
 * until here, the capabilities its own mounts need over the sandbox's
 * mount namespace. */
static void enter_userns(long uid, long gid)
{
  long r = shk__sys(__NR_unshare, 0x10000000 /* CLONE_NEWUSER */);
  if (r == 0)
    r = write_self("setgroups", "deny");
  if (r == 0)
    r = map_to_0("uid_map", uid);
  if (r == 0)
    r = map_to_0("gid_map", gid);
  if (r < 0)
    die("a user namespace for the command", NULL, r);
}

/* The layout of the kernel's msghdr and cmsghdr (the C library's
 * <sys/socket.h> is not available to stage 2). */
struct s2_msghdr {
  void *name;
  int namelen;
  struct iovec *iov;
  size_t iovlen;
  void *control;
  size_t controllen;
  unsigned flags;
};
struct s2_cmsghdr {
  size_t len;
  int level;
  int type;
};
#define S2_SCM_RIGHTS 1

/* The report that tells the launcher the sandbox is complete, with the
 * seccomp listener (the connect() guard's, the write observer's) and the
 * guard's sock_diag socket, when there are. */
static long send_report(int sock, const shk__stage2_report *rep, int listener, int diag)
{
  struct iovec iov = { (void *)rep, sizeof *rep };
  union {
    struct s2_cmsghdr h;
    char buf[sizeof(struct s2_cmsghdr) + 8];
  } u;
  struct s2_msghdr mh = { .iov = &iov, .iovlen = 1 };
  if (listener >= 0) {
    size_t nfd = diag >= 0 ? 2 : 1;
    u.h = (struct s2_cmsghdr){ sizeof(struct s2_cmsghdr) + nfd * sizeof(int), SOL_SOCKET,
                               S2_SCM_RIGHTS };
    int *fds = (int *)(u.buf + sizeof(struct s2_cmsghdr));
    fds[0] = listener;
    fds[1] = diag;
    mh.control = u.buf;
    mh.controllen = nfd == 2 ? sizeof u.buf : sizeof(struct s2_cmsghdr) + sizeof(int);
  }
  long r = shk__sys(__NR_sendmsg, sock, &mh, 0x4000 /* MSG_NOSIGNAL */);
  return r == (long)sizeof *rep ? 0 : r < 0 ? r : -EIO;
}

/* The value of NAME (with its '=') in ENVP, or NULL. */
static const char *env_get(char **envp, const char *name)
{
  for (char **e = envp; e && *e; e++)
    if (shk__s_prefix(*e, name))
      return *e + shk__s_len(name);
  return NULL;
}

/* execve, and a file that is not a binary run by /bin/sh, as execvp does. */
static long exec_file(const char *file, char *const *argv, size_t argc, char **envp)
{
  long r = shk__sys(__NR_execve, file, argv, envp);
  if (r != -ENOEXEC)
    return r;
  const char *sh[argc + 2];
  sh[0] = "/bin/sh";
  sh[1] = file;
  for (size_t i = 1; i <= argc; i++)
    sh[i + 1] = argv[i]; /* argv[argc] is NULL */
  shk__sys(__NR_execve, "/bin/sh", sh, envp);
  return r;
}

/* execvp(3): a name without '/' is looked for in $PATH. Returns the error
 * that stopped it. */
static long exec_command(char *const *argv, size_t argc, char **envp)
{
  const char *cmd = argv[0];
  for (const char *c = cmd; *c; c++)
    if (*c == '/')
      return exec_file(cmd, argv, argc, envp);
  if (!*cmd)
    return -ENOENT;
  const char *path = env_get(envp, "PATH=");
  if (!path)
    path = "/bin:/usr/bin";
  size_t clen = shk__s_len(cmd);
  bool denied = false;
  for (const char *d = path;; d++) {
    const char *end = d;
    while (*end && *end != ':')
      end++;
    size_t dlen = (size_t)(end - d);
    char full[PATH_MAX_];
    if (dlen + clen + 2 <= sizeof full) {
      size_t n = 0;
      for (const char *p = d; p < end; p++)
        full[n++] = *p;
      if (n > 0)
        full[n++] = '/';
      for (size_t i = 0; i <= clen; i++)
        full[n + i] = cmd[i];
      long r = exec_file(full, argv, argc, envp);
      switch (-r) {
      case EACCES:
        denied = true;
        break;
      case ENOENT: case ENOTDIR: case ENODEV: case ETIMEDOUT: case ESTALE:
        break;
      default:
        return r;
      }
    }
    if (!*end)
      break;
    d = end;
  }
  return denied ? -EACCES : -ENOENT;
}

void shk__stage2_main(int argc, char **argv, char **envp, const shk__stage2_hooks *hooks)
{
  shk__stage2_args a;
  const char *why;
  if (shk__stage2_args_parse(argc, argv, &a, &why) < 0) {
    put("shinken: ");
    put(why);
    put("\n");
    leave(STAGE2_FAIL);
  }
  /* Neither the copy of stage 2 it was run from nor the socket that tells
   * the launcher it started may reach the workload. */
  if (a.exe_fd >= 0)
    shk__sys(__NR_close, a.exe_fd);
  long r = shk__sys(__NR_fcntl, a.sync_fd, F_SETFD, FD_CLOEXEC);
  if (r < 0)
    die("sync fd", NULL, r);
  if ((r = shk__sys(__NR_prctl, PR_SET_PDEATHSIG, SIGKILL_, 0, 0, 0)) < 0)
    die("PR_SET_PDEATHSIG", NULL, r);

  shk__stage2_report rep = { .magic = SHK__STAGE2_MAGIC, .size = sizeof rep };
  /* Safe because the terminal is the workload's own pseudo-terminal (the
   * launcher holds its master, outside): this process, which becomes the
   * workload, leads a session of its own (bwrap --new-session made it one)
   * and takes that terminal as the session's controlling terminal, so that
   * the workload's shell has job control and Ctrl-C, Ctrl-Z and resizes
   * reach its foreground job. */
  if (a.ctty) {
    r = shk__sys(__NR_setsid);
    if (r < 0 && r != -EPERM)
      die("setsid", NULL, r);
    if ((r = shk__sys(__NR_ioctl, 0, TIOCSCTTY, 0)) < 0)
      die("the workload's terminal", NULL, r);
    rep.flags |= SHK__APPLIED_CTTY;
  }
  rep.masks = make_masks(&a);
  /* bwrap changed into the working directory before stage 2's binds of
   * directories onto themselves: one of them may hold it, so the path is
   * looked up again, through the new mounts. */
  if (a.pins.n || a.ro_dirs.n) {
    char cwd[PATH_MAX_];
    if (shk__sys(__NR_getcwd, cwd, sizeof cwd) > 0 && cwd[0] == '/')
      shk__sys(__NR_chdir, cwd);
  }
  if (a.net == SHK_NET_PROXY) {
    if (!hooks || !hooks->bridge)
      die("--net proxy needs the egress bridge of the shinken binary", NULL, -EINVAL);
    /* The bridge helper keeps running beside the workload: nothing inside
     * may ptrace it or read its memory. */
    if ((r = shk__sys(__NR_prctl, PR_SET_DUMPABLE, 0, 0, 0, 0)) < 0)
      die("PR_SET_DUMPABLE", NULL, r);
    if ((r = hooks->bridge()) < 0)
      die("egress bridge", NULL, r);
    rep.flags |= SHK__APPLIED_BRIDGE;
  }
  /* After the mounts and the bridge, which need the capabilities of uid 0
   * over the sandbox's namespaces: the workload gets the caller's ids (or
   * the ones asked for) in a user namespace of its own. */
  if (a.map_uid >= 0) {
    enter_userns(a.map_uid, a.map_gid);
    rep.flags |= SHK__APPLIED_USERNS;
  }
  /* Safe because it only replaces this process's session keyring with a
   * new, empty one: keys of the caller's session are never reachable
   * inside. */
  if ((r = shk__sys(__NR_keyctl, KEYCTL_JOIN_SESSION_KEYRING, 0)) < 0)
    die("a fresh session keyring", NULL, r);
  rep.flags |= SHK__APPLIED_KEYRING;
  if ((r = shk__drop_caps()) < 0)
    die("dropping capabilities", NULL, r);
  rep.flags |= SHK__APPLIED_CAPS;
  if ((r = shk__sys(__NR_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) < 0)
    die("PR_SET_NO_NEW_PRIVS", NULL, r);
  rep.flags |= SHK__APPLIED_NNP;
  if (a.landlock) {
    unsigned ll = 0;
    int abi = shk__landlock_apply(&a, &ll);
    if (abi < 0)
      die("Landlock", NULL, abi);
    rep.landlock_abi = abi;
    rep.flags |= ll;
  }
  int listener = -1, diag = -1;
  /* The connect() guard asks the kernel's unix socket diagnostics which
   * socket a file is bound to, in the sandbox's network namespace: the
   * socket that asks must be made here, before the filter refuses it. */
  if (a.seccomp && a.guard &&
      (diag = (int)shk__sys(__NR_socket, 16 /* AF_NETLINK */, 2 | 02000000 /* SOCK_DGRAM |
                            SOCK_CLOEXEC */, 4 /* NETLINK_SOCK_DIAG */)) < 0)
    die("the connect() guard's sock_diag socket", NULL, diag);
  if (a.seccomp) {
    if ((r = shk__seccomp_apply(a.net, a.guard, a.observe)) < 0)
      die(a.observe ? "seccomp (with the write observer)"
          : a.guard ? "seccomp (with the connect() guard)" : "seccomp", NULL, r);
    rep.flags |= SHK__APPLIED_SECCOMP | (a.guard ? SHK__APPLIED_GUARD : 0) |
                 (a.observe ? SHK__APPLIED_OBSERVE : 0);
    listener = a.guard || a.observe ? (int)r : -1;
  }
  if ((r = send_report(a.sync_fd, &rep, listener, diag)) < 0)
    die("sync socket", NULL, r);
  if (listener >= 0)
    shk__sys(__NR_close, listener);
  if (diag >= 0)
    shk__sys(__NR_close, diag);
  /* The command starts only once the launcher says so: it has recorded
   * the start, and the session's manager has mounted the grants made
   * before it. No answer (the launcher gone, or refusing the start) is no
   * start: fail closed. */
  char go = 0;
  do
    r = shk__sys(__NR_read, a.sync_fd, &go, 1);
  while (r == -EINTR);
  if (r != 1)
    die("the launcher did not let the command start", NULL, r < 0 ? r : 0);
  for (size_t i = 0; i < a.warnings.n; i++) {
    put("shinken: warning: ");
    put(a.warnings.v[i]);
    put("\n");
  }
  if (hooks && hooks->environ)
    envp = hooks->environ();
  r = exec_command(a.command, a.ncommand, envp);
  put("shinken: ");
  put(a.command[0]);
  put(": ");
  put(error_text(r));
  put("\n");
  leave(r == -ENOENT ? 127 : 126);
}
