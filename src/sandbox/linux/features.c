/* SPDX-License-Identifier: Apache-2.0 */
/* What this host can enforce. Everything here only reads: sysctls, stat(),
 * and the Landlock and seccomp version queries; the one exception, asked for
 * by `shinken doctor` alone, creates a throw-away user namespace in a child
 * to see whether it really works. */
#include "shinken/sandbox.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup-internal.h"
#include "common/common.h"

/* Formats one of F's strings. Out of memory, it returns NULL and marks F,
 * whose detection then fails as a whole: each caller may go on without
 * checking. */
char *shk__features_printf(shk_sandbox_features *f, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  if (vasprintf(&s, fmt, ap) < 0) {
    s = NULL;
    f->nomem_ = true;
  }
  va_end(ap);
  return s;
}

#define fstr(...) shk__features_printf(f, __VA_ARGS__)

static const char *const bwrap_paths[] = { "/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap", NULL };

/* Reads a small sysctl as an integer; -1 when it does not exist. */
static long read_long(const char *path)
{
  char *text;
  size_t len;
  if (shk__read_file(path, &text, &len) < 0)
    return -1;
  long v = strtol(text, NULL, 10);
  free(text);
  return v;
}


static int userns_child(void *arg)
{
  (void)arg;
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
    return 1;
  if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    return 2;
  if (mount("shinken-probe", "/tmp", "tmpfs", 0, NULL) < 0)
    return 3;
  return 0;
}

/* Tries a user namespace in a child: unshare, then mount a tmpfs in a new
 * mount namespace, which is what bwrap needs and what Ubuntu's AppArmor
 * restriction takes away. The child touches nothing outside itself. */
static bool try_userns(void)
{
  pid_t pid = shk__fork_call(userns_child, NULL);
  if (pid < 0)
    return false;
  int st = -1;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
    ;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Under Ubuntu's AppArmor restriction a program may still get a working
 * user namespace from its own profile, as bwrap does where one ships: the
 * only honest test is to run it. Costs one bwrap start, on such hosts only. */
static int bwrap_child(void *arg)
{
  const char *bwrap = arg;
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
    return 127;
  execl(bwrap, bwrap, "--unshare-user", "--unshare-pid", "--ro-bind", "/", "/", "--proc", "/proc", "--",
        "/bin/true", (char *)NULL);
  return 127;
}

static bool bwrap_userns_works(const char *bwrap)
{
  if (!bwrap)
    return false;
  pid_t pid = shk__fork_call(bwrap_child, (void *)bwrap);
  if (pid < 0)
    return false;
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR)
      return false;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void detect_userns(shk_sandbox_features *f, const shk_sandbox_env *env, unsigned what)
{
  const char *why = NULL;
  long apparmor = env->root ? -1 : read_long("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
  f->apparmor_userns = apparmor >= 0;
  /* The kernel's release names WSL: one system call, where reading
   * /proc/sys/kernel/osrelease takes four. */
  struct utsname u;
  if (uname(&u) < 0)
    u.release[0] = '\0';
  if (strstr(u.release, "Microsoft"))
    why = "WSL 1 has no namespaces";
  else if (read_long("/proc/sys/user/max_user_namespaces") == 0)
    why = "user.max_user_namespaces is 0";
  else if (!env->root && read_long("/proc/sys/kernel/unprivileged_userns_clone") == 0)
    why = "kernel.unprivileged_userns_clone is 0";
  else if (apparmor == 1)
    why = "AppArmor restricts unprivileged user namespaces "
          "(kernel.apparmor_restrict_unprivileged_userns=1)";
  if (why && f->bwrap_setuid) {
    f->userns = true;
    f->userns_detail = fstr("%s, but bwrap is setuid", why);
    return;
  }
  if (why && !strncmp(why, "AppArmor", 8) && bwrap_userns_works(f->bwrap)) {
    f->userns = true;
    f->userns_detail = fstr("%s, but bwrap's own profile allows them", why);
    return;
  }
  if (!why && (what & SHK_DETECT_USERNS_TRY) && !try_userns())
    why = "creating a user namespace with a mount namespace failed";
  f->userns = !why;
  if (why)
    f->userns_detail = fstr("%s", why);
  else if (strstr(u.release, "WSL2"))
    f->userns_detail = fstr("available (WSL 2)");
  else
    f->userns_detail = fstr("%s", env->root ? "available (root)" : "available");
}

static unsigned parse_controllers(const char *path)
{
  char *text;
  size_t len;
  unsigned c = 0;
  if (shk__read_file(path, &text, &len) < 0)
    return 0;
  char *save = NULL;
  for (char *t = strtok_r(text, " \n", &save); t; t = strtok_r(NULL, " \n", &save)) {
    if (!strcmp(t, "memory"))
      c |= SHK_CG_MEMORY;
    else if (!strcmp(t, "pids"))
      c |= SHK_CG_PIDS;
    else if (!strcmp(t, "cpu"))
      c |= SHK_CG_CPU;
  }
  free(text);
  return c;
}

/* The cgroup v2 path of this process ("0::/path" in /proc/self/cgroup). */
static char *own_cgroup(void)
{
  char *text;
  size_t len;
  if (shk__read_file("/proc/self/cgroup", &text, &len) < 0)
    return NULL;
  char *res = NULL;
  char *save = NULL;
  for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
    if (!strncmp(l, "0::/", 4)) {
      res = strdup(l + 3);
      break;
    }
  free(text);
  return res;
}

/* Root puts session cgroups in <mount>/shinken, beneath the root cgroup
 * where controllers can always be enabled. Anyone else needs a delegated
 * subtree: the parent of its own cgroup, writable by it. */
static void detect_cgroup(shk_sandbox_features *f, const shk_sandbox_env *env)
{
  static const char *const mounts[] = { "/sys/fs/cgroup", "/sys/fs/cgroup/unified", NULL };
  for (const char *const *m = mounts; *m && !f->cgroup_mount; m++) {
    char ctl[PATH_MAX];
    snprintf(ctl, sizeof ctl, "%s/cgroup.controllers", *m);
    if (access(ctl, F_OK) == 0)
      f->cgroup_mount = fstr("%s", *m);
  }
  f->cgroup_v2 = f->cgroup_mount != NULL;
  if (!f->cgroup_v2) {
    f->cgroup_detail = fstr("no cgroup v2 hierarchy is mounted");
    return;
  }
  char parent[PATH_MAX] = "", ctl[PATH_MAX + 32];
  f->cgroup_own_parent = env->root;
  if (env->root) {
    snprintf(parent, sizeof parent, "%s/shinken", f->cgroup_mount);
    snprintf(ctl, sizeof ctl, "%s/cgroup.controllers", f->cgroup_mount);
    f->cgroup_controllers = parse_controllers(ctl);
  } else {
    shk_autofree char *own = own_cgroup();
    char *slash = own ? strrchr(own, '/') : NULL;
    char procs[PATH_MAX + 32], sub[PATH_MAX + 32];
    if (slash && slash != own) {
      *slash = '\0';
      snprintf(parent, sizeof parent, "%s%s", f->cgroup_mount, own);
      snprintf(procs, sizeof procs, "%s/cgroup.procs", parent);
      snprintf(sub, sizeof sub, "%s/cgroup.subtree_control", parent);
      if (access(parent, W_OK) == 0 && access(procs, W_OK) == 0 && access(sub, W_OK) == 0) {
        snprintf(ctl, sizeof ctl, "%s/cgroup.controllers", parent);
        f->cgroup_controllers = parse_controllers(ctl);
      } else {
        parent[0] = '\0';
      }
    }
    if (!parent[0]) {
      f->cgroup_detail = fstr("no delegated cgroup v2 subtree is writable by this user");
      return;
    }
  }
  f->cgroup_parent = fstr("%s", parent);
  unsigned all = SHK_CG_MEMORY | SHK_CG_PIDS | SHK_CG_CPU;
  if ((f->cgroup_controllers & all) == all)
    f->cgroup_detail = fstr("memory, pids and cpu controllers available under %s", f->cgroup_mount);
  else
    f->cgroup_detail = fstr("controllers missing from cgroup v2 at %s:%s%s%s "
                                      "(bound to a cgroup v1 hierarchy, or not delegated)",
                                      f->cgroup_mount,
                                      f->cgroup_controllers & SHK_CG_MEMORY ? "" : " memory",
                                      f->cgroup_controllers & SHK_CG_PIDS ? "" : " pids",
                                      f->cgroup_controllers & SHK_CG_CPU ? "" : " cpu");
}

/* Whether the kernel's unix socket diagnostics answer (CONFIG_UNIX_DIAG,
 * often a module the first request loads): a listing of no socket state
 * at all, which ends at once. */
static bool unix_diag_works(void)
{
  int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0)
    return false;
  struct {
    struct nlmsghdr h;
    struct unix_diag_req r;
  } req = { .h = { .nlmsg_len = sizeof req, .nlmsg_type = SOCK_DIAG_BY_FAMILY,
                   .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP },
            .r = { .sdiag_family = AF_UNIX, .udiag_states = 0 } };
  _Alignas(struct nlmsghdr) char buf[256];
  bool ok = send(fd, &req, sizeof req, 0) == (ssize_t)sizeof req;
  ssize_t n = ok ? recv(fd, buf, sizeof buf, 0) : -1;
  const struct nlmsghdr *h = (const struct nlmsghdr *)buf;
  ok = n >= (ssize_t)sizeof *h && h->nlmsg_type == NLMSG_DONE;
  close(fd);
  return ok;
}

/* The connect() guard needs a seccomp listener (5.0), pidfd_getfd and
 * openat2 (5.6), the mount id from statx (5.8), and the unix socket
 * diagnostics. Each probe below fails with EBADF or EFAULT where the call
 * exists, ENOSYS where it does not. */
static bool connect_guard_works(void)
{
  unsigned action = SECCOMP_RET_USER_NOTIF;
  if (syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) < 0)
    return false;
  if (syscall(SYS_pidfd_getfd, -1, 0, 0) == 0 || errno == ENOSYS)
    return false;
  if (syscall(SYS_openat2, -1, NULL, NULL, 0) == 0 || errno == ENOSYS)
    return false;
  struct statx stx;
  return statx(AT_FDCWD, "/", 0, STATX_MNT_ID, &stx) == 0 && (stx.stx_mask & STATX_MNT_ID) &&
         unix_diag_works();
}

int shk_sandbox_features_detect(shk_sandbox_features *f, const shk_sandbox_env *env,
                                unsigned what)
{
  memset(f, 0, sizeof *f);
  for (const char *const *b = bwrap_paths; *b && !f->bwrap; b++) {
    struct stat st;
    if (stat(*b, &st) == 0 && S_ISREG(st.st_mode) && access(*b, X_OK) == 0) {
      f->bwrap = fstr("%s", *b);
      f->bwrap_setuid = (st.st_mode & S_ISUID) && st.st_uid == 0;
    }
  }
  detect_userns(f, env, what);
  long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
  f->landlock_abi = abi > 0 ? (int)abi : 0;
  unsigned action = SECCOMP_RET_KILL_PROCESS;
  f->seccomp = syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0;
  f->connect_guard = f->seccomp && connect_guard_works();
  if (what & SHK_DETECT_CGROUP) {
    detect_cgroup(f, env);
    shk__cgroup_v1_detect(f, env);
  }
  if (f->nomem_) {
    shk_sandbox_features_free(f);
    return -ENOMEM;
  }
  return 0;
}

void shk_sandbox_features_free(shk_sandbox_features *f)
{
  free(f->bwrap);
  free(f->userns_detail);
  free(f->cgroup_mount);
  free(f->cgroup_parent);
  free(f->cgroup_detail);
  shk__cgroup_v1_features_free(f);
  memset(f, 0, sizeof *f);
}
