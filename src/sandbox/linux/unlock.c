/* SPDX-License-Identifier: Apache-2.0 */
/* Live unlocks of the filesystem: a host path granted to a RUNNING sandbox
 * appears at the same path inside it, and goes away again on revoke.
 *
 * Everything happens outside the sandbox, in the process that holds the
 * grant (the capability manager):
 *   1. The host path is opened with openat2(RESOLVE_NO_SYMLINKS |
 *      RESOLVE_NO_MAGICLINKS) in the manager's own view, once: no symlink on
 *      the way, wherever it came from (a writable root is shared with the
 *      sandbox, which could plant one), so the mount is of the path named.
 *   2. Its mount is cloned (open_tree OPEN_TREE_CLONE | AT_RECURSIVE) into a
 *      detached tree nobody else can reach, made nosuid and nodev, and
 *      read-only for a read grant (mount_setattr, recursively).
 *   3. The paths that must stay hidden or read-only inside the tree (the
 *      grant's deny list and the protections the sandbox's plan gives a
 *      root there: git metadata, credentials) are mounted over IN THE
 *      DETACHED TREE, before it is visible anywhere: no moment exists in
 *      which the sandbox could open them.
 *   4. A forked helper enters the sandbox's user namespace (the one that
 *      owns its mount namespace) and mount namespace, opens the target path
 *      from the sandbox's root with RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS
 *      (a symlink the sandbox planted there is refused, not followed), and
 *      attaches the tree there with move_mount, on top of whatever was there
 *      (the read-only view or the mask).
 * Revoke: a helper enters the same namespaces and detaches exactly that
 * mount (the manager keeps its descriptor), with MNT_DETACH: the view
 * underneath (read-only, or masked) is back for every new open at once.
 * Files the workload opened meanwhile stay open, as with any permission
 * change on Unix. */
#include "sandbox-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/mount.h>
#include <linux/nsfs.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/common.h"
#include "shinken/match.h"
#include "shinken/sandbox.h"

#ifndef MOUNT_ATTR_SIZE_VER0
struct mount_attr {
  __u64 attr_set, attr_clr, propagation, userns_fd;
};
#define MOUNT_ATTR_SIZE_VER0 32
#endif


struct shk_sandbox_unlock {
  int tree; /* the attached mount: detached again on revoke */
  char *path;
  char **points; /* mount points that may have been made for covers */
  bool *dirs;
  size_t n_points;
  /* A device grant's: how many components at the end of PATH its attach
   * made in the sandbox's /dev, as mount points, and whether the last one
   * is a directory; removed again after the detach. */
  int dev_made;
  bool dev_dir;
};

static int open_how(int dirfd, const char *path, int flags, unsigned long long resolve)
{
  struct open_how how = { .flags = (unsigned long long)(flags | O_CLOEXEC), .resolve = resolve };
  int fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
  return fd < 0 ? -errno : fd;
}

static bool same_file(int fd, const char *path)
{
  struct stat a, b;
  return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

void shk_sandbox_target_free(shk_sandbox_target *t)
{
  if (!t)
    return;
  if (t->userns >= 0)
    close(t->userns);
  if (t->mntns >= 0)
    close(t->mntns);
  if (t->root >= 0)
    close(t->root);
  for (size_t i = 0; i < sizeof t->other / sizeof t->other[0]; i++)
    if (t->other[i] >= 0)
      close(t->other[i]);
  free(t);
}

/* Safe because it only opens descriptors of namespaces the process PID is
 * in, and refuses any that could be this process's own (mounting there
 * would change the host's view, not a sandbox's) or that belong to another
 * user than FOR_UID (root may name any): the manager mounts only into a
 * sandbox started by the one who asks. The pidfd, opened first and checked
 * last, makes sure all of them came from one process that is still alive,
 * not from a process that took over a recycled pid in between. */
int shk_sandbox_target_open(pid_t pid, uid_t for_uid, shk_sandbox_target **out, shk_error *err)
{
  *out = NULL;
  if (pid <= 0)
    return shk__error_set(err, -EINVAL, "the sandbox's process id must be positive");
  shk_sandbox_target *t = malloc(sizeof *t);
  if (!t)
    return shk__error_set(err, -ENOMEM, "out of memory");
  *t = (shk_sandbox_target){ .userns = -1, .mntns = -1, .root = -1, .pid = pid, .other = { -1, -1, -1, -1 } };
  int r = 0;
  int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  char p[64];
  if (pidfd < 0) {
    r = shk__error_set(err, -errno, "process %d: %s", (int)pid, strerror(errno));
    goto out;
  }
  snprintf(p, sizeof p, "/proc/%d/ns/mnt", (int)pid);
  if ((t->mntns = open(p, O_RDONLY | O_CLOEXEC)) < 0) {
    r = shk__error_set(err, -errno, "%s: %s", p, strerror(errno));
    goto out;
  }
  snprintf(p, sizeof p, "/proc/%d/root", (int)pid);
  if ((t->root = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
    r = shk__error_set(err, -errno, "%s: %s", p, strerror(errno));
    goto out;
  }
  /* The rest of its namespaces, for a privileged command run inside
   * (sudo.c): the network, host name, IPC and pid namespaces of the
   * sandbox, so that such a command reaches nothing the workload cannot. */
  static const char *const other[] = { "net", "uts", "ipc", "pid" };
  for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
    snprintf(p, sizeof p, "/proc/%d/ns/%s", (int)pid, other[i]);
    if ((t->other[i] = open(p, O_RDONLY | O_CLOEXEC)) < 0) {
      r = shk__error_set(err, -errno, "%s: %s", p, strerror(errno));
      goto out;
    }
  }
  if ((t->userns = ioctl(t->mntns, NS_GET_USERNS)) < 0) {
    r = shk__error_set(err, -errno, "the owner of process %d's mount namespace: %s", (int)pid, strerror(errno));
    goto out;
  }
  fcntl(t->userns, F_SETFD, FD_CLOEXEC);
  if (same_file(t->mntns, "/proc/self/ns/mnt") || same_file(t->userns, "/proc/self/ns/user")) {
    r = shk__error_set(err, -EPERM, "process %d is not in a sandbox of its own: its mount namespace is this "
                       "process's", (int)pid);
    goto out;
  }
  uid_t owner;
  if (ioctl(t->userns, NS_GET_OWNER_UID, &owner) < 0) {
    r = shk__error_set(err, -errno, "the owner of process %d's user namespace: %s", (int)pid, strerror(errno));
    goto out;
  }
  t->owner = owner;
  if (for_uid != 0 && owner != for_uid) {
    r = shk__error_set(err, -EPERM, "process %d's sandbox belongs to uid %u, not to uid %u", (int)pid,
                       (unsigned)owner, (unsigned)for_uid);
    goto out;
  }
  if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0) {
    r = shk__error_set(err, -ESRCH, "process %d ended while its sandbox was being looked up", (int)pid);
    goto out;
  }
out:
  if (pidfd >= 0)
    close(pidfd);
  if (r < 0)
    shk_sandbox_target_free(t);
  else
    *out = t;
  return r;
}

/* In a forked child of a possibly threaded process: system calls only,
 * until the child ends. Enters the sandbox's namespaces; 0 or -errno. */
static int enter(const shk_sandbox_target *t)
{
  if (setns(t->userns, CLONE_NEWUSER) < 0 || setns(t->mntns, CLONE_NEWNS) < 0)
    return -errno;
  return 0;
}

static int attach_child(const shk_sandbox_target *t, int tree, const char *path)
{
  int r = enter(t);
  if (r < 0)
    return r;
  /* The target is looked up from the sandbox's root, with no symlink
   * followed: the sandbox may have replaced a path it can write with a
   * link, and the mount must land at the path granted or nowhere. */
  int fd = open_how(t->root, path, O_PATH, RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
  if (fd < 0)
    return fd;
  if (syscall(SYS_move_mount, tree, "", fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
    return -errno;
  return 0;
}

static int detach_child(const shk_sandbox_target *t, int tree)
{
  /* The mount is named through this process's descriptor in the host's
   * /proc, opened before leaving the host's mount namespace (the sandbox's
   * /proc does not list this process). */
  int fds = open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fds < 0)
    return -errno;
  int r = enter(t);
  if (r < 0)
    return r;
  char name[16];
  snprintf(name, sizeof name, "%d", tree);
  if (fchdir(fds) < 0 || umount2(name, MNT_DETACH) < 0)
    return -errno;
  return 0;
}

struct in_child_args {
  int (*fn)(const shk_sandbox_target *, int, const char *);
  const shk_sandbox_target *t;
  int tree;
  const char *path;
  int out; /* where the child writes FN's result */
};

static int in_child_main(void *arg)
{
  struct in_child_args *a = arg;
  int r = a->fn(a->t, a->tree, a->path);
  return write(a->out, &r, sizeof r) == (ssize_t)sizeof r ? 0 : 1;
}

/* Runs FN in a forked child and returns what it returned. The child is
 * single-threaded, as setns() into a user namespace needs. */
static int in_child(int (*fn)(const shk_sandbox_target *, int, const char *), const shk_sandbox_target *t,
                    int tree, const char *path)
{
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) < 0)
    return -errno;
  struct in_child_args a = { fn, t, tree, path, pipefd[1] };
  pid_t pid = shk__fork_call(in_child_main, &a);
  close(pipefd[1]);
  if (pid < 0) {
    close(pipefd[0]);
    return pid;
  }
  int r = -EIO;
  ssize_t n;
  while ((n = read(pipefd[0], &r, sizeof r)) < 0 && errno == EINTR)
    ;
  if (n != (ssize_t)sizeof r)
    r = -EIO;
  close(pipefd[0]);
  while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
    ;
  return r;
}

static int attach_fn(const shk_sandbox_target *t, int tree, const char *path)
{
  return attach_child(t, tree, path);
}

static int detach_fn(const shk_sandbox_target *t, int tree, const char *path)
{
  (void)path;
  return detach_child(t, tree);
}

/* In the child, in the sandbox's namespaces: removes the last MADE
 * components of PATH (mount points a device attach made), the last one a
 * directory when LEAF_DIR; a directory only while empty. Each parent is
 * reached from the sandbox's root through no symlink. */
static void unmake_points(const shk_sandbox_target *t, const char *path, int made, bool leaf_dir)
{
  char p[PATH_MAX];
  if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p)
    return;
  for (int i = 0; i < made; i++) {
    char *slash = strrchr(p, '/');
    if (!slash || slash == p)
      return;
    *slash = 0;
    int dir = open_how(t->root, p, O_PATH | O_DIRECTORY, RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
    if (dir < 0)
      return;
    unlinkat(dir, slash + 1, i == 0 && !leaf_dir ? 0 : AT_REMOVEDIR);
    close(dir);
  }
}

/* In a forked child: enters the sandbox's namespaces and attaches TREE (a
 * device node, or a directory of them when DIR) at PATH, beneath the
 * sandbox's /dev, making the mount point and any directory above it that
 * is missing (the sandbox's /dev is a private tmpfs: bwrap made only the
 * basic nodes there). Each component is opened from its parent through no
 * symlink, so a link the workload planted is refused, not followed.
 * Returns how many components it made (>= 0), or -errno, having removed
 * them again. */
static int attach_dev_child(const shk_sandbox_target *t, int tree, const char *path, bool dir)
{
  int r = enter(t);
  if (r < 0)
    return r;
  char p[PATH_MAX];
  if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p)
    return -ENAMETOOLONG;
  int at = dup(t->root);
  if (at < 0)
    return -errno;
  int made = 0;
  const unsigned long long how = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  for (char *c = p + 1; c && *c && r == 0;) {
    char *end = strchr(c, '/');
    if (end)
      *end = 0;
    bool last = !end;
    int next = open_how(at, c, O_PATH | O_NOFOLLOW | (last ? 0 : O_DIRECTORY), how);
    if (next == -ENOENT) {
      if (!last || dir)
        next = mkdirat(at, c, 0755) < 0 ? -errno : 0;
      else if ((next = openat(at, c, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600)) >= 0)
        next = close(next) < 0 ? -errno : 0;
      else
        next = -errno;
      if (next == 0) {
        made++;
        next = open_how(at, c, O_PATH | O_NOFOLLOW | (last ? 0 : O_DIRECTORY), how);
      }
    }
    close(at);
    at = -1;
    if (next < 0) {
      r = next;
      break;
    }
    at = next;
    c = end ? end + 1 : NULL;
  }
  if (r == 0 && syscall(SYS_move_mount, tree, "", at, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
    r = -errno;
  if (at >= 0)
    close(at);
  if (r < 0) {
    unmake_points(t, path, made, dir);
    return r;
  }
  return made;
}

static int attach_dev_file_fn(const shk_sandbox_target *t, int tree, const char *path)
{
  return attach_dev_child(t, tree, path, false);
}

static int attach_dev_dir_fn(const shk_sandbox_target *t, int tree, const char *path)
{
  return attach_dev_child(t, tree, path, true);
}

/* The second argument carries what unmake_points needs: how many
 * components were made, and DEV_DIR_BIT when the last is a directory. */
#define DEV_DIR_BIT 0x10000
static int unpoint_fn(const shk_sandbox_target *t, int made, const char *path)
{
  int r = enter(t);
  if (r < 0)
    return r;
  unmake_points(t, path, made & ~DEV_DIR_BIT, made & DEV_DIR_BIT);
  return 0;
}

/* A read-only, empty tmpfs, or /dev/null, for a mask. */
static int mask_source(bool dir)
{
  if (!dir) {
    int fd = (int)syscall(SYS_open_tree, AT_FDCWD, "/dev/null", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    return fd < 0 ? -errno : fd;
  }
  int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
  if (fs < 0)
    return -errno;
  int m = -1;
  if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "mode", "0", 0) == 0 &&
      syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "size", "4k", 0) == 0 &&
      syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0)
    m = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
                     MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
  int e = -errno;
  close(fs);
  return m < 0 ? e : m;
}

static int set_attr(int tree, uint64_t set)
{
  struct mount_attr a = { .attr_set = set };
  if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, MOUNT_ATTR_SIZE_VER0) < 0)
    return -errno;
  return 0;
}

/* A read-only file holding TEXT, from a small tmpfs of its own. */
static int text_source(const char *text)
{
  int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
  if (fs < 0)
    return -errno;
  int m = -1, r = 0;
  if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "size", "4k", 0) < 0 ||
      syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
      (m = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)) < 0)
    r = -errno;
  close(fs);
  if (r < 0)
    return r;
  int f = openat(m, "file", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0444);
  size_t len = strlen(text);
  if (f < 0 || write(f, text, len) != (ssize_t)len)
    r = f < 0 ? -errno : -EIO;
  if (f >= 0)
    close(f);
  int t = r < 0 ? -1 : (int)syscall(SYS_open_tree, m, "file", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  if (!r && t < 0)
    r = -errno;
  close(m);
  if (!r && (r = set_attr(t, MOUNT_ATTR_RDONLY)) < 0)
    close(t);
  return r < 0 ? r : t;
}

/* Makes the mount point of a cover that is missing: REL beneath TREE, its
 * parent reached with no symlink and not left. */
static int make_point(int tree, const char *rel, bool dir)
{
  char parent[PATH_MAX];
  const char *slash = strrchr(rel, '/');
  int pfd;
  if (slash) {
    if ((size_t)(slash - rel) >= sizeof parent)
      return -ENAMETOOLONG;
    memcpy(parent, rel, (size_t)(slash - rel));
    parent[slash - rel] = 0;
    pfd = open_how(tree, parent, O_PATH | O_DIRECTORY, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
  } else {
    pfd = dup(tree);
    if (pfd < 0)
      pfd = -errno;
  }
  if (pfd < 0)
    return pfd;
  const char *name = slash ? slash + 1 : rel;
  int r = 0;
  if (dir) {
    if (mkdirat(pfd, name, 0755) < 0)
      r = -errno;
  } else {
    int f = openat(pfd, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (f < 0)
      r = -errno;
    else
      close(f);
  }
  close(pfd);
  return r;
}

/* Covers one protected path inside the detached TREE (rooted at ROOT on
 * the host): its path is beneath ROOT. */
static int cover(int tree, const char *root, const shk_sandbox_cover *c, shk_error *err)
{
  const char *rel = c->path + strlen(root);
  while (*rel == '/')
    rel++;
  /* Beneath the tree and through no symlink: a link planted inside a
   * writable tree must not move the mask elsewhere (a link at the path
   * itself is opened as the link, and masked where it is). */
  const unsigned long long how = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  int at = open_how(tree, rel, O_PATH | O_NOFOLLOW, how);
  bool dir = c->dir || c->kind == SHK_SANDBOX_COVER_RO || c->kind == SHK_SANDBOX_COVER_PIN;
  if (at == -ENOENT && c->create) {
    /* The workload could create it through the writable grant: it gets a
     * mount point now, as in a fresh sandbox. */
    int r = make_point(tree, rel, c->kind == SHK_SANDBOX_COVER_MASK ? c->dir : c->kind != SHK_SANDBOX_COVER_TEXT && dir);
    at = r < 0 && r != -EEXIST ? r : open_how(tree, rel, O_PATH | O_NOFOLLOW, how);
  }
  if (at == -ENOENT && !c->create && c->kind != SHK_SANDBOX_COVER_RO && c->kind != SHK_SANDBOX_COVER_PIN)
    return 0; /* nothing there, and the grant cannot make it */
  if (at < 0)
    return shk__error_set(err, at, "%s, which must stay protected inside the grant: %s", c->path, strerror(-at));
  struct stat st;
  int src = -1, r = 0;
  if (fstat(at, &st) < 0) {
    r = -errno;
  } else if (c->kind == SHK_SANDBOX_COVER_MASK || S_ISLNK(st.st_mode)) {
    src = mask_source(S_ISDIR(st.st_mode));
  } else if (c->kind == SHK_SANDBOX_COVER_TEXT) {
    src = S_ISDIR(st.st_mode) ? mask_source(true) : text_source(c->text ? c->text : "");
  } else {
    /* Read-only, or pinned (bound onto itself so it cannot be renamed
     * away): a clone of the path itself. */
    src = (int)syscall(SYS_open_tree, at, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
    if (src < 0)
      src = -errno;
    else if (c->kind == SHK_SANDBOX_COVER_RO)
      r = set_attr(src, MOUNT_ATTR_RDONLY);
  }
  if (src < 0 && !r)
    r = src;
  if (!r && syscall(SYS_move_mount, src, "", at, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
    r = -errno;
  if (src >= 0)
    close(src);
  close(at);
  if (r < 0)
    return shk__error_set(err, r, "%s, which must stay protected inside the grant, could not be covered "
                          "before the mount (%s); nothing was mounted", c->path, strerror(-r));
  return 0;
}

/* After the mount is gone: removes the mount points made for covers of
 * missing paths, when they are still empty (as shk_sandbox_plan_cleanup
 * does for a fresh sandbox's), newest first. */
static void remove_points(const char *root, char **points, const bool *dirs, size_t n)
{
  int rfd = open_how(AT_FDCWD, root, O_PATH | O_DIRECTORY, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
  for (size_t i = n; rfd >= 0 && i-- > 0;) {
    const char *rel = points[i] + strlen(root);
    while (*rel == '/')
      rel++;
    int fd = open_how(rfd, rel, O_PATH | O_NOFOLLOW, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
    struct stat st;
    if (fd < 0)
      continue;
    bool empty_file = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0 && !dirs[i];
    close(fd);
    /* unlinkat needs the parent: the path is resolved once more, beneath
     * the root and with no symlink, by the same rules. */
    char parent[PATH_MAX];
    const char *slash = strrchr(rel, '/');
    int pfd = rfd;
    if (slash && (size_t)(slash - rel) < sizeof parent) {
      memcpy(parent, rel, (size_t)(slash - rel));
      parent[slash - rel] = 0;
      pfd = open_how(rfd, parent, O_PATH | O_DIRECTORY, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
    } else if (slash) {
      continue;
    }
    if (pfd < 0)
      continue;
    /* O_PATH descriptors cannot be unlinked from; reopen the parent. */
    int dfd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      if (dirs[i])
        unlinkat(dfd, slash ? slash + 1 : rel, AT_REMOVEDIR); /* fails unless empty */
      else if (empty_file)
        unlinkat(dfd, slash ? slash + 1 : rel, 0);
      close(dfd);
    }
    if (pfd != rfd)
      close(pfd);
  }
  if (rfd >= 0)
    close(rfd);
}

/* The layers of a persistence overlay: descriptors of its upper and work
 * directories in the store (persist.c). */
typedef struct layers {
  int upper, work;
  const char *dir; /* the entry's directory, which holds both */
} layers;

/* In a mount namespace of our own, the layers' mounts must be its copies:
 * the overlay refuses layers on another namespace's mounts. The same
 * directories are opened again there, through no symlink, and must be
 * the very ones the descriptors name. */
static int reopen_layers(const layers *ov, layers *out)
{
  const char *name[2] = { "upper", "work" };
  int had[2] = { ov->upper, ov->work }, got[2] = { -1, -1 };
  int r = 0;
  for (int i = 0; i < 2 && !r; i++) {
    char p[PATH_MAX];
    struct stat a, b;
    if (snprintf(p, sizeof p, "%s/%s", ov->dir, name[i]) >= (int)sizeof p)
      r = -ENAMETOOLONG;
    else if ((got[i] = open_how(AT_FDCWD, p, O_RDONLY | O_DIRECTORY, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)) < 0)
      r = got[i];
    else if (fstat(got[i], &a) < 0 || fstat(had[i], &b) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
      r = -ESTALE;
  }
  if (r < 0) {
    for (int i = 0; i < 2; i++)
      if (got[i] >= 0)
        close(got[i]);
    return r;
  }
  *out = (layers){ got[0], got[1], ov->dir };
  return 0;
}

/* Gives the overlay being configured on FS the layer KEY: the directory
 * FD itself (Linux 6.13), or else its /proc/self/fd name, which leads to
 * that very directory (both are opened already: no path is looked up
 * again). */
static int set_layer(int fs, const char *key, int fd)
{
  if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_FD, key, NULL, fd) == 0)
    return 0;
  if (errno != EINVAL)
    return -errno;
  char p[32];
  snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
  const char *k = strcmp(key, "lowerdir+") ? key : "lowerdir";
  if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, k, p, 0) < 0)
    return -errno;
  return 0;
}

/* A detached overlay of the host directory LOWER (a descriptor) with the
 * layers OV. In a user namespace of its own the overlay keeps its
 * metadata in user.* extended attributes (trusted.* needs the host's
 * CAP_SYS_ADMIN). */
static int overlay_tree(int lower, const layers *ov, bool userxattr, int *out)
{
  int fs = (int)syscall(SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
  if (fs < 0)
    return -errno;
  int r = set_layer(fs, "lowerdir+", lower);
  if (!r)
    r = set_layer(fs, "upperdir", ov->upper);
  if (!r)
    r = set_layer(fs, "workdir", ov->work);
  if (!r && userxattr && syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0)
    r = -errno;
  if (!r && syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
    r = -errno;
  int m = r < 0 ? -1 : (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
  if (!r && m < 0)
    r = -errno;
  close(fs);
  if (r < 0)
    return r;
  *out = m;
  return 0;
}

/* Builds the detached tree of PATH with its covers, in this process's
 * mount namespace: a clone of its mount, or with OV an overlay of it.
 * 0 with *tree, or -errno with err. */
static int build_tree(const char *path, bool write, const layers *ov, bool device, bool userns,
                      const shk_sandbox_cover *covers, size_t n_covers, int *tree_out, shk_error *err)
{
  int src = open_how(AT_FDCWD, path, ov ? O_RDONLY | O_DIRECTORY : device ? O_PATH | O_NOFOLLOW : O_PATH,
                     RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
  struct stat st;
  /* A device grant mounts character devices (or a directory of them, as
   * /dev/snd): never a block device, which would be a whole disk. */
  if (device && src >= 0 && (fstat(src, &st) < 0 || !(S_ISCHR(st.st_mode) || S_ISDIR(st.st_mode)))) {
    close(src);
    return shk__error_set(err, -EINVAL, "%s is not a character device nor a directory of them; nothing was "
                          "mounted", path);
  }
  if (src == -ELOOP)
    return shk__error_set(err, src, "%s leads through a symbolic link: grant the path it resolves to", path);
  if (src == -ENOTDIR && ov)
    return shk__error_set(err, src, "%s is not a directory: persistence is of directories", path);
  if (src < 0)
    return shk__error_set(err, src, "%s: %s", path, strerror(-src));
  int tree = -1, r = 0;
  if (ov && userns) {
    layers own;
    if ((r = reopen_layers(ov, &own)) == 0) {
      r = overlay_tree(src, &own, true, &tree);
      close(own.upper);
      close(own.work);
    }
  } else if (ov) {
    r = overlay_tree(src, ov, false, &tree);
  } else {
    tree = (int)syscall(SYS_open_tree, src, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
    r = tree < 0 ? -errno : 0;
  }
  close(src);
  if (r < 0)
    return shk__error_set(err, r, "%s the mount of %s: %s", ov ? "making an overlay of" : "cloning", path,
                          strerror(-r));
  /* Every tree is nosuid; all but a device grant's are nodev too, and a
   * device grant's is noexec instead. */
  uint64_t attrs = device ? MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC
                          : MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (write ? 0 : MOUNT_ATTR_RDONLY);
  if ((r = set_attr(tree, attrs)) < 0) {
    shk__error_set(err, r, "making the mount of %s %s: %s", path, write ? "nosuid" : "read-only",
                   strerror(-r));
    close(tree);
    return r;
  }
  for (size_t i = 0; i < n_covers; i++)
    if ((r = cover(tree, path, &covers[i], err)) < 0) {
      close(tree);
      return r;
    }
  *tree_out = tree;
  return 0;
}

/* What the child that built a tree says, with the tree's descriptor. */
typedef struct built {
  int r;
  char message[sizeof(((shk_error *)0)->message)];
} built;

/* Writes "ID ID 1" (this process's own id only) to /proc/self/FILE. */
static int map_self(const char *file, unsigned id)
{
  char p[32], line[48];
  snprintf(p, sizeof p, "/proc/self/%s", file);
  int n = snprintf(line, sizeof line, "%u %u 1\n", id, id);
  int fd = open(p, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  int r = write(fd, line, (size_t)n) == n ? 0 : -errno;
  close(fd);
  return r;
}

struct tree_child_args {
  const char *path;
  bool writable;
  const layers *ov;
  bool device;
  const shk_sandbox_cover *covers;
  size_t n_covers;
  uid_t uid;
  gid_t gid;
  int out; /* where the child sends its answer and the tree */
};

/* One message of LEN bytes over the socket SOCK of a helper child, with
 * the descriptor FD attached when it is one (the helpers' only way of
 * handing a mount they cloned back to the manager). */
static int send_with_fd(int sock, const void *buf, size_t len, int fd)
{
  struct iovec iov = { (void *)buf, len };
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
  } u;
  struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
  if (fd >= 0) {
    mh.msg_control = u.buf;
    mh.msg_controllen = sizeof u.buf;
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  return sendmsg(sock, &mh, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

/* Receives what send_with_fd sent: returns the byte count (or -1) and puts
 * the attached descriptor, if any, in *FD (close-on-exec). */
static ssize_t recv_with_fd(int sock, void *buf, size_t len, int *fd)
{
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
  } u;
  struct iovec iov = { buf, len };
  struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf };
  ssize_t n;
  while ((n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
    ;
  struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL;
  if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
    memcpy(fd, CMSG_DATA(c), sizeof *fd);
  return n;
}

/* The child of build_tree_userns: a user namespace of its own, the tree
 * built in it, and the answer sent with the tree's descriptor. */
static int tree_child_main(void *arg)
{
  struct tree_child_args *a = arg;
  built b = { 0 };
  shk_error cerr = { 0 };
  int tree = -1, fd;
  b.r = unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0 ? -errno : 0;
  if (b.r == 0 && (fd = open("/proc/self/setgroups", O_WRONLY | O_CLOEXEC)) >= 0) {
    if (write(fd, "deny", 4) != 4)
      b.r = -errno;
    close(fd);
  }
  if (b.r == 0)
    b.r = map_self("uid_map", a->uid);
  if (b.r == 0)
    b.r = map_self("gid_map", a->gid);
  if (b.r < 0)
    shk__error_set(&cerr, b.r, "a user namespace to clone %s in: %s", a->path, strerror(-b.r));
  else
    b.r = build_tree(a->path, a->writable, a->ov, a->device, true, a->covers, a->n_covers, &tree, &cerr);
  memcpy(b.message, cerr.message, sizeof b.message);
  return send_with_fd(a->out, &b, sizeof b, tree) == 0 ? 0 : 1;
}

/* Safe because the child holds nothing more than the caller: a new user
 * namespace maps only the caller's own ids, and the mount namespace it
 * comes with is a private copy of the caller's view, so what it clones from
 * there is exactly what the caller may see, with the host's locks on it
 * (a read-only or nosuid mount of the host stays so: the kernel locks the
 * flags of mounts copied into a less privileged namespace). Only the tree's
 * descriptor leaves the child. */
static int build_tree_userns(const char *path, bool writable, const layers *ov, bool device,
                             const shk_sandbox_cover *covers, size_t n_covers, int *tree_out, shk_error *err)
{
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
    return shk__error_set(err, -errno, "socketpair: %s", strerror(errno));
  struct tree_child_args a = { path, writable, ov, device, covers, n_covers, shk__self_uid(), getegid(), sv[1] };
  pid_t pid = shk__fork_call(tree_child_main, &a);
  if (pid < 0) {
    close(sv[0]);
    close(sv[1]);
    return shk__error_set(err, pid, "fork: %s", strerror(-pid));
  }
  close(sv[1]);
  built b = { .r = -EIO };
  int tree = -1;
  ssize_t n = recv_with_fd(sv[0], &b, sizeof b, &tree);
  close(sv[0]);
  while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
    ;
  if (n != (ssize_t)sizeof b)
    b.r = -EIO, snprintf(b.message, sizeof b.message, "the helper that clones %s ended without an answer", path);
  if (b.r == 0 && tree < 0)
    b.r = -EIO, snprintf(b.message, sizeof b.message, "the helper that clones %s sent no mount", path);
  if (b.r < 0) {
    if (tree >= 0)
      close(tree);
    b.message[sizeof b.message - 1] = 0;
    return shk__error_set(err, b.r, "%s", b.message);
  }
  *tree_out = tree;
  return 0;
}

/* A grant that failed leaves no mount point behind. */
static void drop_points(const char *path, const shk_sandbox_cover *covers, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (covers[i].create) {
      char *one = (char *)covers[i].path;
      bool dir = covers[i].kind == SHK_SANDBOX_COVER_MASK && covers[i].dir;
      remove_points(path, &one, &dir, 1);
    }
}

/* Safe because the tree is built and checked while detached (only this
 * process holds it), its protected paths covered before it is attached,
 * and any failure closes it: a grant either appears whole, with its
 * protections, or not at all. A manager that may not clone mounts of its
 * own mount namespace (an unprivileged user's) builds the tree in a user
 * namespace of its own (build_tree_userns). */
static int inject(const shk_sandbox_target *t, const char *path, bool write, const layers *ov,
                  const shk_sandbox_cover *covers, size_t n_covers, shk_sandbox_unlock **out, shk_error *err)
{
  *out = NULL;
  if (!path || path[0] != '/')
    return shk__error_set(err, -EINVAL, "'%s' is not an absolute path", path ? path : "");
  /* An overlay's cover points are made in its upper layer, which keeps
   * them: none is made on, or removed from, the host. */
  size_t n_host_points = ov ? 0 : n_covers;
  int tree = -1;
  int r = build_tree(path, write, ov, false, false, covers, n_covers, &tree, err);
  if (r == -EPERM)
    r = build_tree_userns(path, write, ov, false, covers, n_covers, &tree, err);
  if (r < 0) {
    drop_points(path, covers, n_host_points);
    return r;
  }
  if ((r = in_child(attach_fn, t, tree, path)) < 0) {
    if (r == -ELOOP)
      shk__error_set(err, r, "%s inside the sandbox leads through a symbolic link; nothing was mounted", path);
    else if (r == -ENOENT)
      shk__error_set(err, r, "%s is not in the sandbox's view (a directory above it is masked or not "
                     "bound); grant the directory that is", path);
    else
      shk__error_set(err, r, "mounting %s into the sandbox: %s", path, strerror(-r));
    goto fail;
  }
  shk_sandbox_unlock *u = calloc(1, sizeof *u);
  char *copy = strdup(path);
  size_t np = 0;
  for (size_t i = 0; i < n_host_points; i++)
    np += covers[i].create;
  char **points = calloc(np + 1, sizeof *points);
  bool *dirs = calloc(np + 1, sizeof *dirs);
  bool nomem = !u || !copy || !points || !dirs;
  for (size_t i = 0, j = 0; !nomem && i < n_host_points; i++)
    if (covers[i].create) {
      dirs[j] = covers[i].kind == SHK_SANDBOX_COVER_MASK && covers[i].dir;
      nomem = !(points[j++] = strdup(covers[i].path));
    }
  if (nomem) {
    for (size_t i = 0; points && i < np; i++)
      free(points[i]);
    free(points);
    free(dirs);
    free(u);
    free(copy);
    /* Attached but not recordable: take it away again. */
    in_child(detach_fn, t, tree, NULL);
    r = shk__error_set(err, -ENOMEM, "out of memory");
    goto fail;
  }
  u->tree = tree;
  u->path = copy;
  u->points = points;
  u->dirs = dirs;
  u->n_points = np;
  *out = u;
  return 0;
fail:
  close(tree);
  drop_points(path, covers, n_host_points);
  return r;
}

int shk_sandbox_unlock_mount(const shk_sandbox_target *t, const char *path, bool write,
                             const shk_sandbox_cover *covers, size_t n_covers, shk_sandbox_unlock **out,
                             shk_error *err)
{
  return inject(t, path, write, NULL, covers, n_covers, out, err);
}

/* Safe as shk_sandbox_unlock_mount is, and because the overlay's only
 * writable layer is the store's entry (this user's alone, outside every
 * sandbox's view): nothing the sandbox does through it reaches the host's
 * PATH. */
int shk_sandbox_unlock_overlay(const shk_sandbox_target *t, const char *path, const shk_sandbox_persist *p,
                               const shk_sandbox_cover *covers, size_t n_covers, shk_sandbox_unlock **out,
                               shk_error *err)
{
  *out = NULL;
  layers ov = { shk_sandbox_persist_layer(p, "upper"), shk_sandbox_persist_layer(p, "work"),
                shk_sandbox_persist_where(p) };
  int r;
  if (ov.upper < 0 || ov.work < 0)
    r = shk__error_set(err, ov.upper < 0 ? ov.upper : ov.work, "the store's layers for %s: %s", path,
                       strerror(ov.upper < 0 ? -ov.upper : -ov.work));
  else
    r = inject(t, path, true, &ov, covers, n_covers, out, err);
  if (ov.upper >= 0)
    close(ov.upper);
  if (ov.work >= 0)
    close(ov.work);
  return r;
}

/* The mount id of what PATH (a /proc magic link) leads to, or 0. */
static uint64_t mnt_of(const char *path)
{
  struct statx stx;
  if (statx(AT_FDCWD, path, 0, STATX_MNT_ID, &stx) < 0 || !(stx.stx_mask & STATX_MNT_ID))
    return 0;
  return stx.stx_mnt_id;
}

static bool holds(const char *pid, uint64_t mnt)
{
  char p[PATH_MAX];
  snprintf(p, sizeof p, "/proc/%s/cwd", pid);
  if (mnt_of(p) == mnt)
    return true;
  snprintf(p, sizeof p, "/proc/%s/root", pid);
  if (mnt_of(p) == mnt)
    return true;
  snprintf(p, sizeof p, "/proc/%s/fd", pid);
  DIR *d = opendir(p);
  bool found = false;
  for (struct dirent *e; d && !found && (e = readdir(d));) {
    if (e->d_name[0] == '.')
      continue;
    snprintf(p, sizeof p, "/proc/%s/fd/%s", pid, e->d_name);
    found = mnt_of(p) == mnt;
  }
  if (d)
    closedir(d);
  return found;
}

/* Safe because it only signals processes of the sandbox T (their mount
 * namespace is the sandbox's, checked again through a pidfd just before
 * the signal, so a recycled pid is never hit) that hold a descriptor, a
 * working directory or a root on the mount MNT: the workload's own
 * processes, which the human asked to stop with the grant. */
static unsigned stop_holders(const shk_sandbox_target *t, uint64_t mnt)
{
  struct stat ns;
  if (!mnt || fstat(t->mntns, &ns) < 0)
    return 0;
  unsigned n = 0;
  DIR *d = opendir("/proc");
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9')
      continue;
    char p[PATH_MAX];
    snprintf(p, sizeof p, "/proc/%s/ns/mnt", e->d_name);
    int pidfd = (int)syscall(SYS_pidfd_open, atoi(e->d_name), 0);
    struct stat st;
    bool in = pidfd >= 0 && stat(p, &st) == 0 && st.st_dev == ns.st_dev && st.st_ino == ns.st_ino;
    if (in && holds(e->d_name, mnt) && stat(p, &st) == 0 && st.st_ino == ns.st_ino &&
        syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0) == 0)
      n++;
    if (pidfd >= 0)
      close(pidfd);
  }
  if (d)
    closedir(d);
  return n;
}

int shk_sandbox_unlock_undo(const shk_sandbox_target *t, shk_sandbox_unlock *u, bool stop, unsigned *stopped,
                            shk_error *err)
{
  if (stopped)
    *stopped = 0;
  if (!u)
    return 0;
  struct statx stx;
  uint64_t mnt = statx(u->tree, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) == 0 && (stx.stx_mask & STATX_MNT_ID)
               ? stx.stx_mnt_id : 0;
  int r = t ? in_child(detach_fn, t, u->tree, NULL) : 0;
  if (r < 0)
    shk__error_set(err, r, "detaching %s from the sandbox: %s", u->path, strerror(-r));
  /* Detached first, so nothing opens it anew; then what still holds it.
   * The mount lives on (lazily detached) while held, so its id still
   * names it. */
  if (t && stop && stopped)
    *stopped = stop_holders(t, mnt);
  close(u->tree);
  if (r == 0 || !t)
    remove_points(u->path, u->points, u->dirs, u->n_points);
  if (r == 0 && t && u->dev_made > 0)
    in_child(unpoint_fn, t, u->dev_made | (u->dev_dir ? DEV_DIR_BIT : 0), u->path);
  for (size_t i = 0; i < u->n_points; i++)
    free(u->points[i]);
  free(u->points);
  free(u->dirs);
  free(u->path);
  free(u);
  return r;
}

/* PATH names a node beneath /dev, canonically: no "." or ".." component,
 * no doubled or trailing slash. */
static bool dev_path_ok(const char *path)
{
  if (strncmp(path, "/dev/", 5) || !path[5] || strlen(path) >= PATH_MAX || strstr(path, "//") ||
      path[strlen(path) - 1] == '/')
    return false;
  for (const char *c = path + 1; c; c = strchr(c, '/') ? strchr(c, '/') + 1 : NULL)
    if (!strncmp(c, "./", 2) || !strcmp(c, ".") || !strncmp(c, "../", 3) || !strcmp(c, ".."))
      return false;
  return true;
}

/* Safe because the node is opened on the host once, through no symlink,
 * and must be a character device or a directory (never a block device);
 * its clone is detached until attached (nosuid, noexec), and lands only
 * beneath the sandbox's own /dev, each component reached through no
 * symlink. The mount is the whole grant: nothing else about the sandbox
 * changes, and the detach takes it away. */
int shk_sandbox_unlock_device(const shk_sandbox_target *t, const char *host, const char *inside,
                              shk_sandbox_unlock **out, shk_error *err)
{
  *out = NULL;
  if (!host || host[0] != '/')
    return shk__error_set(err, -EINVAL, "'%s' is not an absolute path", host ? host : "");
  if (!inside || !dev_path_ok(inside))
    return shk__error_set(err, -EINVAL, "'%s' is not a canonical path beneath /dev", inside ? inside : "");
  int tree = -1;
  int r = build_tree(host, true, NULL, true, false, NULL, 0, &tree, err);
  if (r == -EPERM)
    r = build_tree_userns(host, true, NULL, true, NULL, 0, &tree, err);
  if (r < 0)
    return r;
  struct stat st;
  bool dir = fstat(tree, &st) == 0 && S_ISDIR(st.st_mode);
  int made = in_child(dir ? attach_dev_dir_fn : attach_dev_file_fn, t, tree, inside);
  if (made < 0) {
    close(tree);
    if (made == -ELOOP)
      return shk__error_set(err, made, "%s inside the sandbox leads through a symbolic link; nothing was mounted",
                            inside);
    return shk__error_set(err, made, "mounting %s into the sandbox at %s: %s", host, inside, strerror(-made));
  }
  shk_sandbox_unlock *u = calloc(1, sizeof *u);
  char *copy = strdup(inside);
  if (!u || !copy) {
    free(u);
    free(copy);
    in_child(detach_fn, t, tree, NULL);
    in_child(unpoint_fn, t, made | (dir ? DEV_DIR_BIT : 0), inside);
    close(tree);
    return shk__error_set(err, -ENOMEM, "out of memory");
  }
  u->tree = tree;
  u->path = copy;
  u->dev_made = made;
  u->dev_dir = dir;
  *out = u;
  return 0;
}

const char *shk_sandbox_unlock_path(const shk_sandbox_unlock *u)
{
  return u ? u->path : NULL;
}

/* The probe: does this process have what the mechanism needs (open_tree,
 * mount_setattr, move_mount; the right to clone a mount of its own mount
 * namespace, or a user namespace of its own to clone it in)? NULL, or a
 * static sentence saying what is missing. */
const char *shk_sandbox_unlock_missing(void)
{
  shk_error err;
  int tree = -1;
  int r = build_tree("/", false, NULL, false, false, NULL, 0, &tree, &err);
  if (r == -EPERM)
    r = build_tree_userns("/", false, NULL, false, NULL, 0, &tree, &err);
  if (tree >= 0)
    close(tree);
  if (r == -ENOSYS)
    return "the kernel lacks the mount API live unlocks use (open_tree, Linux 5.2; mount_setattr, 5.12)";
  if (r == -EPERM || r == -EACCES)
    return "this user may neither clone mounts of the host's mount namespace nor create a user namespace "
           "to clone them in";
  if (r < 0)
    return "cloning a mount of / failed";
  return NULL;
}

const char *shk_sandbox_overlay_missing(void)
{
  /* Creating a filesystem context is all it takes to know the kernel has
   * the overlay filesystem (it is loaded on demand); EPERM means only that
   * this process must make it in a user namespace of its own, which
   * shk_sandbox_unlock_missing answers for. */
  int fs = (int)syscall(SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
  if (fs >= 0) {
    close(fs);
    return NULL;
  }
  if (errno == ENODEV)
    return "the kernel has no overlay filesystem to keep persisted data in";
  if (errno == ENOSYS)
    return "the kernel lacks the mount API persistence uses (fsopen, Linux 5.2)";
  return NULL;
}

/* ---- the system directories' overlay of privileged commands (sudo) ---- */

/* The mount points of the sandbox's own mounts strictly beneath PATH (in
 * its /proc/PID/mountinfo, which names them relative to its root), the
 * outermost of each nest only: a recursive clone of one carries the rest.
 * 0 with *out (NULL-terminated), or -errno. A mount point mountinfo had to
 * escape (a space, a backslash) is refused, not skipped: skipping it would
 * let what it hides show through the overlay. */
static int submounts(pid_t pid, const char *path, char ***out, size_t *n_out)
{
  char p[64];
  snprintf(p, sizeof p, "/proc/%d/mountinfo", (int)pid);
  FILE *f = fopen(p, "re");
  if (!f)
    return -errno;
  char **v = NULL;
  size_t n = 0;
  int r = 0;
  char *line = NULL;
  size_t cap = 0;
  while (r == 0 && getline(&line, &cap, f) > 0) {
    /* id parent major:minor root mountpoint ... */
    char *save = NULL, *tok = strtok_r(line, " ", &save);
    for (int i = 0; tok && i < 4; i++)
      tok = strtok_r(NULL, " ", &save);
    if (!tok || !shk_path_within(tok, path) || !strcmp(tok, path))
      continue;
    if (strchr(tok, '\\')) {
      r = -EINVAL;
      break;
    }
    bool nested = false;
    for (size_t i = 0; i < n && !nested; i++)
      nested = shk_path_within(tok, v[i]);
    if (nested)
      continue;
    /* A mount that comes later and is outer than earlier ones replaces
     * them (it was mounted over their parent). */
    for (size_t i = 0; i < n;)
      if (shk_path_within(v[i], tok)) {
        free(v[i]);
        v[i] = v[--n];
      } else {
        i++;
      }
    char **nv = realloc(v, (n + 2) * sizeof *v);
    if (!nv || !(nv[n] = strdup(tok))) {
      v = nv ? nv : v;
      r = -ENOMEM;
      break;
    }
    v = nv;
    v[++n] = NULL;
  }
  free(line);
  fclose(f);
  if (r < 0) {
    for (size_t i = 0; i < n; i++)
      free(v[i]);
    free(v);
    return r;
  }
  *out = v;
  *n_out = n;
  return 0;
}

struct clone_args {
  const shk_sandbox_target *t;
  char *const *paths;
  size_t n;
  int out;
};

/* The child of carry_submounts: in the sandbox's namespaces, a recursive
 * clone of each mount point, sent back one message each ({r} and the
 * clone's descriptor). */
static int clone_child_main(void *arg)
{
  struct clone_args *a = arg;
  int r = enter(a->t);
  for (size_t i = 0; i < a->n; i++) {
    int fd = -1, tree = -1;
    if (r == 0)
      fd = open_how(a->t->root, a->paths[i], O_PATH | O_NOFOLLOW,
                    RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
    int one = r < 0 ? r : fd < 0 ? fd : 0;
    if (one == 0 && (tree = (int)syscall(SYS_open_tree, fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE |
                                                            AT_EMPTY_PATH)) < 0)
      one = -errno;
    if (fd >= 0)
      close(fd);
    if (send_with_fd(a->out, &one, sizeof one, tree) < 0)
      return 1;
    if (tree >= 0)
      close(tree);
  }
  return 0;
}

/* Puts a clone of each of the sandbox's own mounts beneath PATH (its
 * private /var/tmp, its /etc/resolv.conf, /etc/hostname, masks) at the
 * same place in the detached TREE, an overlay of the host's PATH: what the
 * sandbox hid or replaced there stays so in the overlay. */
static int carry_submounts(const shk_sandbox_target *t, int tree, const char *path, shk_error *err)
{
  char **v = NULL;
  size_t n = 0;
  int r = submounts(t->pid, path, &v, &n);
  if (r < 0)
    return shk__error_set(err, r, "the sandbox's mounts beneath %s: %s", path, strerror(-r));
  int sv[2] = { -1, -1 };
  pid_t pid = -1;
  if (n && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
    r = shk__error_set(err, -errno, "socketpair: %s", strerror(errno));
  struct clone_args a = { t, v, n, sv[1] };
  if (n && r == 0 && (pid = shk__fork_call(clone_child_main, &a)) < 0)
    r = shk__error_set(err, pid, "fork: %s", strerror(-pid));
  if (sv[1] >= 0)
    close(sv[1]);
  for (size_t i = 0; r == 0 && i < n; i++) {
    int one = -EIO, clone = -1;
    if (recv_with_fd(sv[0], &one, sizeof one, &clone) != (ssize_t)sizeof one)
      one = -EIO;
    if (one == 0 && clone < 0)
      one = -EIO;
    const char *rel = v[i] + strlen(path);
    while (*rel == '/')
      rel++;
    const unsigned long long how = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    int at = one < 0 ? one : open_how(tree, rel, O_PATH | O_NOFOLLOW, how);
    if (at == -ENOENT) {
      /* The host's directory lacks it (the sandbox made its mount point):
       * the overlay gets one, in its upper layer. */
      struct stat st;
      int m = fstat(clone, &st) < 0 ? -errno : make_point(tree, rel, S_ISDIR(st.st_mode));
      at = m < 0 && m != -EEXIST ? m : open_how(tree, rel, O_PATH | O_NOFOLLOW, how);
    }
    if (at >= 0 && syscall(SYS_move_mount, clone, "", at, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
      one = -errno;
    else if (at < 0)
      one = at;
    if (at >= 0)
      close(at);
    if (clone >= 0)
      close(clone);
    if (one < 0)
      r = shk__error_set(err, one, "the sandbox's own mount at %s could not be carried into the overlay of %s "
                         "(%s); nothing was mounted", v[i], path, strerror(-one));
  }
  if (sv[0] >= 0)
    close(sv[0]);
  if (pid > 0) {
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
      ;
  }
  for (size_t i = 0; i < n; i++)
    free(v[i]);
  free(v);
  return r;
}

/* Safe because the overlay's only writable layer is the store's entry
 * (outside every sandbox's view): nothing written through it reaches the
 * host's PATH. It is attached read-only (its top mount; what the sandbox
 * had mounted beneath PATH is carried over on top with its own flags), so
 * the workload gains no write there: only a privileged command, in a
 * mount namespace of its own, sees it writable (sudo.c). Built and
 * completed while detached, attached whole or not at all. Root only: an
 * unprivileged user's sandbox does not map the host's root, who owns these
 * directories (shk_sandbox_sudo_missing). */
int shk_sandbox_unlock_system(const shk_sandbox_target *t, const char *path, const shk_sandbox_persist *p,
                              shk_sandbox_unlock **out, int *rw_tree, shk_error *err)
{
  *out = NULL;
  *rw_tree = -1;
  if (!path || path[0] != '/')
    return shk__error_set(err, -EINVAL, "'%s' is not an absolute path", path ? path : "");
  layers ov = { shk_sandbox_persist_layer(p, "upper"), shk_sandbox_persist_layer(p, "work"),
                shk_sandbox_persist_where(p) };
  int r = 0, tree = -1;
  if (ov.upper < 0 || ov.work < 0)
    r = shk__error_set(err, ov.upper < 0 ? ov.upper : ov.work, "the store's layers for %s: %s", path,
                       strerror(ov.upper < 0 ? -ov.upper : -ov.work));
  if (r == 0)
    r = build_tree(path, true, &ov, false, false, NULL, 0, &tree, err);
  if (ov.upper >= 0)
    close(ov.upper);
  if (ov.work >= 0)
    close(ov.work);
  if (r == 0)
    r = carry_submounts(t, tree, path, err);
  /* The privileged commands' writable view: a clone of the whole tree
   * taken before its top is made read-only, kept detached (only this
   * process holds it) and mounted in each command's own namespace. */
  int rw = -1;
  if (r == 0 && (rw = (int)syscall(SYS_open_tree, tree, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE |
                                                     AT_EMPTY_PATH)) < 0)
    r = shk__error_set(err, -errno, "a writable clone of the overlay of %s: %s", path, strerror(errno));
  struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY };
  if (r == 0 && syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &ro, MOUNT_ATTR_SIZE_VER0) < 0)
    r = shk__error_set(err, -errno, "making the overlay of %s read-only: %s", path, strerror(errno));
  if (r == 0 && (r = in_child(attach_fn, t, tree, path)) < 0)
    shk__error_set(err, r, "mounting the overlay of %s into the sandbox: %s", path, strerror(-r));
  if (r < 0) {
    if (tree >= 0)
      close(tree);
    if (rw >= 0)
      close(rw);
    return r;
  }
  shk_sandbox_unlock *u = calloc(1, sizeof *u);
  char *copy = strdup(path);
  if (!u || !copy) {
    free(u);
    free(copy);
    in_child(detach_fn, t, tree, NULL);
    close(tree);
    close(rw);
    return shk__error_set(err, -ENOMEM, "out of memory");
  }
  u->tree = tree;
  u->path = copy;
  *out = u;
  *rw_tree = rw;
  return 0;
}
