/* SPDX-License-Identifier: Apache-2.0 */
/* Privileged commands in a running sandbox (`sudo` inside, approved
 * outside): the manager has decided install.privileged and mounted the
 * system directories' overlays (shk_sandbox_unlock_system, read-only in the
 * sandbox); this starts the command in the sandbox's namespaces with a
 * minimal set of capabilities, the overlays writable in a mount namespace
 * of its own.
 *
 * What the command holds, and why that is bounded:
 *   - Its user namespace is one of its own, a child of the host's, where
 *     it is uid and gid 0 and the ids 0-65535 map to themselves (the
 *     sandbox's own maps uid 0 alone, and package managers need their
 *     system users: apt drops to _apt, files belong to man or games).
 *     Capabilities there reach only what that namespace owns (nothing:
 *     every namespace the command is in but this one belongs to another)
 *     and files whose owners it maps: never the host's namespaces, never a
 *     mount, a network setting or a kernel setting.
 *   - The capabilities are CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER,
 *     CAP_SETUID, CAP_SETGID (and CAP_FSETID, which dpkg needs to keep a
 *     file's mode bits when it changes its owner): permitted, effective and
 *     the whole bounding set, with no_new_privs. Never CAP_SYS_ADMIN: it
 *     can mount nothing, so the mounts are the ones made for it here.
 *   - Its mount namespace is a private copy of the sandbox's, with the
 *     overlays of /usr, /etc, /var and /opt mounted writable over the
 *     sandbox's read-only ones: their upper layers are the store's
 *     entries, so the host's files never change; every other mount keeps
 *     the flags it had (the host's view of / stays read-only, whatever the
 *     capabilities), and that namespace belongs to the host's user
 *     namespace, so the command can change none of it.
 *   - Its network, host name, IPC and pid namespaces are the sandbox's:
 *     the network it reaches is the sandbox's bridge to the egress proxy,
 *     and it ends with the sandbox.
 *   - Its environment is fixed (PATH, HOME, LANG, DEBIAN_FRONTEND): nothing
 *     of the workload's (LD_PRELOAD, an apt configuration) reaches it.
 *     Standard input is /dev/null.
 * It is not under the workload's Landlock or seccomp filter, which stage 2
 * applied to its own descendants only. */
#include "sandbox-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/common.h"
#include "shinken/sandbox.h"

const char *shk_sandbox_sudo_missing(void)
{
  if (geteuid() != 0)
    return "this manager is not root, and an unprivileged user's sandbox does not map the host's root, who "
           "owns the system directories, so no capability inside it could install into them";
  const char *m = shk_sandbox_unlock_missing();
  return m ? m : shk_sandbox_overlay_missing();
}

static const int kept_caps[] = { CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID, CAP_SETUID, CAP_SETGID };

static bool kept(int c)
{
  for (size_t i = 0; i < sizeof kept_caps / sizeof kept_caps[0]; i++)
    if (kept_caps[i] == c)
      return true;
  return false;
}

struct spawn_args {
  const shk_sandbox_target *t;
  const char *const *rw_paths;
  const int *rw_trees;
  size_t n_rw;
  char *const *argv;
  const char *cwd;
  int out, err, status; /* the command's stdout and stderr; where a failure before exec is written */
  int go[2];            /* the helper tells the command its ids are mapped */
  int ready[2];         /* the command tells the helper its user namespace is made */
};

/* In the forked child, before exec: one line saying what failed, then
 * the end. System calls and string copies only (the manager is
 * threaded). */
static int fail(int fd, const char *what, int e)
{
  char msg[512];
  size_t n = 0;
  for (const char *p = what; *p && n < sizeof msg - 80; p++)
    msg[n++] = *p;
  const char *es = strerror(e);
  msg[n++] = ':';
  msg[n++] = ' ';
  for (const char *p = es; *p && n < sizeof msg - 1; p++)
    msg[n++] = *p;
  (void)!write(fd, msg, n);
  return 127;
}

/* The command itself: in the sandbox's pid namespace already. Safe
 * because before exec it holds only uid 0 of a user namespace of its own
 * (which owns none of the namespaces it is in), the six capabilities in
 * every set including the bounding set, no_new_privs, a fixed environment
 * and /dev/null as input; any step that fails ends it before exec. */
static int command_main(void *arg)
{
  struct spawn_args *a = arg;
  char c = 0;
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (unshare(CLONE_NEWUSER) < 0)
    return fail(a->status, "a user namespace of its own", errno);
  if (write(a->ready[1], "u", 1) != 1 || read(a->go[0], &c, 1) != 1 || c != 'g')
    return fail(a->status, "mapping its user namespace", EIO);
  int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null < 0 || dup2(null, 0) < 0 || dup2(a->out, 1) < 0 || dup2(a->err, 2) < 0)
    return fail(a->status, "its standard streams", errno);
  if (chdir(a->cwd) < 0 && chdir("/") < 0)
    return fail(a->status, "chdir", errno);
  if (setgroups(0, NULL) < 0 || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
    return fail(a->status, "becoming uid 0 of its user namespace", errno);
  /* The bounding set first (which needs CAP_SETPCAP, still held), then
   * the sets themselves: what exec gives a root process is the bounding
   * set, so this is all the command and its children can ever hold. */
  for (int k = 0; k <= CAP_LAST_CAP; k++)
    if (!kept(k) && prctl(PR_CAPBSET_DROP, k, 0, 0, 0) < 0 && errno != EINVAL)
      return fail(a->status, "dropping a capability from the bounding set", errno);
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
    return fail(a->status, "clearing the ambient capabilities", errno);
  struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
  struct __user_cap_data_struct d[2] = { { 0 } };
  for (size_t i = 0; i < sizeof kept_caps / sizeof kept_caps[0]; i++) {
    d[kept_caps[i] / 32].effective |= 1u << (kept_caps[i] % 32);
    d[kept_caps[i] / 32].permitted |= 1u << (kept_caps[i] % 32);
    d[kept_caps[i] / 32].inheritable |= 1u << (kept_caps[i] % 32);
  }
  if (syscall(SYS_capset, &h, d) < 0)
    return fail(a->status, "setting the capabilities", errno);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    return fail(a->status, "no_new_privs", errno);
  static char env_path[] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  static char env_home[] = "HOME=/root", env_lang[] = "LANG=C.UTF-8";
  static char env_deb[] = "DEBIAN_FRONTEND=noninteractive", env_user[] = "USER=root", env_log[] = "LOGNAME=root";
  char *const envp[] = { env_path, env_home, env_lang, env_deb, env_user, env_log, NULL };
  execvpe(a->argv[0], a->argv, envp);
  return fail(a->status, a->argv[0], errno);
}

/* Writes TEXT to the file NAME of the process PID, through the host's
 * /proc (PROCFD). */
static int write_map(int procfd, pid_t pid, const char *name, const char *text)
{
  char p[64];
  snprintf(p, sizeof p, "%d/%s", (int)pid, name);
  int fd = openat(procfd, p, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  size_t len = strlen(text);
  int r = write(fd, text, len) == (ssize_t)len ? 0 : -errno;
  close(fd);
  return r;
}

/* Safe because every namespace it enters is the sandbox's (opened from the
 * sandbox's process, checked by shk_sandbox_target_open), the mount
 * namespace it then makes is a copy of the sandbox's in which only the
 * overlays' writable clones are added, and it never execs anything itself:
 * the command it starts gives up the host's root in a user namespace of
 * its own before it runs (command_main).
 *
 * The helper: root of the host, it enters the sandbox's mount, network,
 * host name, IPC and pid namespaces, mounts the writable trees in a copy of
 * the mount namespace of its own, starts the command in the sandbox's pid
 * namespace, maps the command's new user namespace, and ends with the
 * command's status. */
static int helper_main(void *arg)
{
  struct spawn_args *a = arg;
  const shk_sandbox_target *t = a->t;
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  /* The host's /proc, for the command's id maps (its pid is the host's). */
  int procfd = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (procfd < 0)
    return fail(a->status, "/proc", errno);
  if (setns(t->mntns, CLONE_NEWNS) < 0)
    return fail(a->status, "entering the sandbox's mount namespace", errno);
  static const int kinds[] = { CLONE_NEWNET, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWPID };
  for (size_t i = 0; i < 4; i++)
    if (setns(t->other[i], kinds[i]) < 0)
      return fail(a->status, "entering the sandbox's namespaces", errno);
  if (unshare(CLONE_NEWNS) < 0)
    return fail(a->status, "a mount namespace of its own", errno);
  for (size_t i = 0; i < a->n_rw; i++) {
    struct open_how how = { .flags = O_PATH | O_CLOEXEC,
                            .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
    int at = (int)syscall(SYS_openat2, AT_FDCWD, a->rw_paths[i], &how, sizeof how);
    int tree = at < 0 ? -1 : (int)syscall(SYS_open_tree, a->rw_trees[i], "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
                                                                    AT_RECURSIVE | AT_EMPTY_PATH);
    if (at < 0 || tree < 0 ||
        syscall(SYS_move_mount, tree, "", at, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
      return fail(a->status, a->rw_paths[i], errno);
    close(tree);
    close(at);
  }
  pid_t pid = shk__fork_call(command_main, a);
  if (pid < 0)
    return fail(a->status, "fork", -pid);
  char c = 0;
  int st;
  if (read(a->ready[0], &c, 1) == 1 && c == 'u') {
    int r = write_map(procfd, pid, "uid_map", "0 0 65536\n");
    if (r == 0)
      r = write_map(procfd, pid, "setgroups", "allow\n");
    if (r == 0)
      r = write_map(procfd, pid, "gid_map", "0 0 65536\n");
    if (r < 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return fail(a->status, "mapping the command's user namespace", -r);
    }
    (void)!write(a->go[1], "g", 1);
  }
  close(a->status);
  close(a->go[1]);
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR)
      return 127;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Safe to refuse: a sandbox made by another user than root maps only
 * that user, and a command given package managers' capabilities over the
 * host's ids there would hold more than its caller ever could. */
const char *shk_sandbox_sudo_refuses(const shk_sandbox_target *t, char *buf, size_t len)
{
  if (t->owner != 0) {
    snprintf(buf, len, "the sandbox belongs to uid %u, and an unprivileged user's sandbox does not map the host's "
             "root, who owns the system directories: a privileged command runs only in a root caller's sandbox",
             (unsigned)t->owner);
    return buf;
  }
  /* A sandbox whose root is not the host's (--restrict-reads: a root of
   * its own with the system directories bound in) has Landlock rules on
   * those directories' own files, which an overlay over them would hide:
   * the workload could read nothing there any more. */
  struct stat a, b;
  if (fstat(t->root, &a) < 0 || stat("/", &b) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
    snprintf(buf, len, "the sandbox restricts reads (--restrict-reads): its Landlock rules name the system "
             "directories' own files, so the workload could not use what an overlay over them would show");
    return buf;
  }
  return NULL;
}

int shk_sandbox_sudo_spawn(const shk_sandbox_target *t, const char *const *rw_paths, const int *rw_trees,
                           size_t n_rw, char *const *argv, const char *cwd, int out_fd, int err_fd, pid_t *pid,
                           int *status_fd, shk_error *err)
{
  *pid = -1;
  *status_fd = -1;
  if (!argv || !argv[0])
    return shk__error_set(err, -EINVAL, "no command");
  char why[256];
  if (shk_sandbox_sudo_refuses(t, why, sizeof why))
    return shk__error_set(err, -EPERM, "%s", why);
  int sp[2], go[2], ready[2];
  if (pipe2(sp, O_CLOEXEC) < 0)
    return shk__error_set(err, -errno, "pipe: %s", strerror(errno));
  if (pipe2(go, O_CLOEXEC) < 0) {
    close(sp[0]);
    close(sp[1]);
    return shk__error_set(err, -errno, "pipe: %s", strerror(errno));
  }
  if (pipe2(ready, O_CLOEXEC) < 0) {
    close(sp[0]);
    close(sp[1]);
    close(go[0]);
    close(go[1]);
    return shk__error_set(err, -errno, "pipe: %s", strerror(errno));
  }
  struct spawn_args a = { t, rw_paths, rw_trees, n_rw, argv, cwd && cwd[0] == '/' ? cwd : "/", out_fd, err_fd,
                          sp[1], { go[0], go[1] }, { ready[0], ready[1] } };
  pid_t p = shk__fork_call(helper_main, &a);
  close(sp[1]);
  close(go[0]);
  close(go[1]);
  close(ready[0]);
  close(ready[1]);
  if (p < 0) {
    close(sp[0]);
    return shk__error_set(err, p, "fork: %s", strerror(-p));
  }
  *pid = p;
  *status_fd = sp[0];
  return 0;
}
