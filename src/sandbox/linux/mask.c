/* Stage 2's mounts: the masks it makes itself, while it still holds
 * CAP_SYS_ADMIN over the sandbox's mount namespace (see bwrap.c for which
 * ones). Each costs a few system calls, where bwrap 0.8 rereads the whole
 * mount table for every bind it makes. Stage 2 code: system calls only
 * (sys.h). */
#include "sandbox-internal.h"

#include <linux/errno.h>
#include <linux/fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <linux/stat.h>
#include <asm/statfs.h>

#include "sys.h"

/* statfs(2)'s flags, as the kernel sets them. */
#define ST_NOSUID 0x0002
#define ST_NOEXEC 0x0008

/* Opens PATH (O_PATH, plus FLAGS) without following a symlink in any of
 * its components: the plan resolved every path on the host, so a symlink
 * there now was put there since, and is refused. openat2 from Linux 5.6;
 * before it, a symlink is refused at the last component only. */
static long open_exact(const char *path, unsigned long flags)
{
  struct open_how how = { .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC | flags,
                          .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
  long fd = shk__sys(__NR_openat2, AT_FDCWD, path, &how, sizeof how);
  if (fd == -ENOSYS)
    fd = shk__sys(__NR_openat, AT_FDCWD, path, how.flags);
  return fd;
}

/* "/proc/self/fd/N" into BUF (40 bytes). */
static char *fd_path(long fd, char *buf)
{
  static const char prefix[] = "/proc/self/fd/";
  for (size_t i = 0; i < sizeof prefix; i++)
    buf[i] = prefix[i];
  shk__s_utoa((uint64_t)fd, buf + sizeof prefix - 1);
  return buf;
}

/* Makes the top mount at PATH, the new one, read-only, nodev and nosuid as
 * bwrap's read-only binds are (a device node behind it, /dev/null for a
 * mask, cannot be opened), keeping the flags it has (a flag the mount
 * inherited from the host may be locked, and a remount that drops one
 * fails). Through a descriptor opened after the mount, which sees the new
 * mount where the one opened before does not. */
static long remount_ro(const char *path)
{
  long fd = open_exact(path, 0);
  if (fd < 0)
    return fd;
  char self[40];
  struct statfs sf;
  long r = shk__sys(__NR_fstatfs, fd, &sf);
  if (r == 0) {
    unsigned long flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV;
    flags |= sf.f_flags & ST_NOEXEC ? MS_NOEXEC : 0;
    r = shk__sys(__NR_mount, 0, fd_path(fd, self), 0, flags, 0);
  }
  shk__sys(__NR_close, fd);
  return r;
}

/* Creates the mount point PATH, a directory or an empty file, in its
 * parent opened as above; one that exists already is left as it is. */
static long create(const char *path, bool dir)
{
  char parent[4096];
  size_t n = shk__s_len(path), slash = n;
  while (slash > 0 && path[slash - 1] != '/')
    slash--;
  if (slash <= 1 || n >= sizeof parent)
    return -EINVAL;
  for (size_t i = 0; i < slash - 1; i++)
    parent[i] = path[i];
  parent[slash - 1] = '\0';
  long pfd = open_exact(parent, O_DIRECTORY);
  if (pfd < 0)
    return pfd;
  const char *name = path + slash;
  long r = dir ? shk__sys(__NR_mkdirat, pfd, name, 0755)
               : shk__sys(__NR_openat, pfd, name,
                          O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (r >= 0 && !dir)
    shk__sys(__NR_close, r);
  shk__sys(__NR_close, pfd);
  return r == -EEXIST || r >= 0 ? 0 : r;
}

/* Safe because it only hides or narrows: the target is opened without
 * following a symlink and must have the expected type, the mount goes onto
 * that very inode (through its descriptor), and the result is read-only.
 * A mount point it creates is created in its parent the same way, and only
 * where the plan found nothing and the parent is writable; the launcher
 * removes it afterwards while it is empty. No process of the workload
 * exists yet, so nothing inside can race it. */
int shk__stage2_mount(const char *path, shk__mount_op op, bool make)
{
  bool dir = op == SHK__MOUNT_MASK_DIR;
  long r = make ? create(path, dir) : 0;
  if (r < 0)
    return (int)r;
  long fd = open_exact(path, 0);
  if (fd < 0)
    return (int)fd;
  struct statx stx;
  r = shk__sys(__NR_statx, fd, "", AT_EMPTY_PATH, STATX_TYPE, &stx);
  unsigned type = r == 0 ? stx.stx_mode & SHK__S_IFMT : 0;
  if (r == 0 && type == SHK__S_IFLNK)
    r = -ELOOP;
  else if (r == 0 && (dir ? type != SHK__S_IFDIR
                      : op == SHK__MOUNT_RO_FILE ? type != SHK__S_IFREG
                      : type == SHK__S_IFDIR))
    r = -EINVAL;
  char self[40];
  fd_path(fd, self);
  if (r == 0) {
    switch (op) {
    case SHK__MOUNT_MASK_FILE:
      r = shk__sys(__NR_mount, "/dev/null", self, 0, MS_BIND, 0);
      break;
    case SHK__MOUNT_RO_FILE:
      r = shk__sys(__NR_mount, self, self, 0, MS_BIND, 0);
      break;
    case SHK__MOUNT_MASK_DIR:
      /* An empty tmpfs, read-only from the start: nothing is nested in
       * it (bwrap makes a mask that has). */
      r = shk__sys(__NR_mount, "tmpfs", self, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY,
                   "mode=0755");
      break;
    }
  }
  shk__sys(__NR_close, fd);
  if (r == 0 && !dir)
    r = remount_ro(path);
  return (int)r;
}
