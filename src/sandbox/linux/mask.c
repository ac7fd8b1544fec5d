/* SPDX-License-Identifier: Apache-2.0 */
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
#define ST_RDONLY 0x0001
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

/* Writes all of TEXT to FD. */
static long write_all(long fd, const char *text)
{
  size_t len = shk__s_len(text), off = 0;
  while (off < len) {
    long w = shk__sys(__NR_write, fd, text + off, len - off);
    if (w == -EINTR)
      continue;
    if (w <= 0)
      return w < 0 ? w : -EIO;
    off += (size_t)w;
  }
  return 0;
}

/* The parent's times, put back after a mount point is created or removed:
 * the mount point is the sandbox's, not a change the command made, and the
 * host's tools that watch a directory's times (git's untracked cache, a
 * build's) should not see it. Best effort: a caller that does not own the
 * directory cannot set them, and nothing depends on it. */
static void put_times(long pfd, const struct statx *before)
{
  char self[40];
  struct {
    long sec, nsec;
  } ts[2] = { { before->stx_atime.tv_sec, before->stx_atime.tv_nsec },
              { before->stx_mtime.tv_sec, before->stx_mtime.tv_nsec } };
  shk__sys(__NR_utimensat, AT_FDCWD, fd_path(pfd, self), ts, 0);
}

/* Creates the mount point PATH, a directory, an empty file or (given TEXT)
 * a file holding TEXT, in its parent opened as above, keeping the
 * parent's times; one that exists already is left as it is. */
static long create(const char *path, bool dir, const char *text)
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
  struct statx before;
  bool timed = shk__sys(__NR_statx, pfd, "", AT_EMPTY_PATH, STATX_ATIME | STATX_MTIME,
                        &before) == 0;
  const char *name = path + slash;
  long r = dir ? shk__sys(__NR_mkdirat, pfd, name, 0755)
               : shk__sys(__NR_openat, pfd, name,
                          O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, text ? 0644 : 0666);
  if (r >= 0 && !dir) {
    long w = text ? write_all(r, text) : 0;
    shk__sys(__NR_close, r);
    r = w;
  }
  if (r >= 0 && timed)
    put_times(pfd, &before);
  shk__sys(__NR_close, pfd);
  return r == -EEXIST || r >= 0 ? 0 : r;
}

/* Safe because it only hides or narrows: the target is opened without
 * following a symlink and must have the expected type, the mount goes onto
 * that very inode (through its descriptor), and the result is read-only
 * (a pin is a directory bound onto itself, which changes nothing but that
 * it can no longer be renamed or removed). A mount point it creates is
 * created in its parent the same way, and only where the plan found
 * nothing and the parent is writable; the launcher removes it afterwards
 * while it is empty. A symlink is masked only when the plan found one
 * there: /dev/null goes onto the link itself, which can then be neither
 * followed nor replaced. No process of the workload exists yet, so nothing
 * inside can race it. */
int shk__stage2_mount(const char *path, shk__mount_op op, bool make)
{
  bool dir = op == SHK__MOUNT_MASK_DIR || op == SHK__MOUNT_RO_DIR || op == SHK__MOUNT_PIN;
  long r = make ? create(path, dir, NULL) : 0;
  if (r < 0)
    return (int)r;
  long fd = open_exact(path, 0);
  if (fd < 0)
    return (int)fd;
  struct statx stx;
  r = shk__sys(__NR_statx, fd, "", AT_EMPTY_PATH, STATX_TYPE, &stx);
  unsigned type = r == 0 ? stx.stx_mode & SHK__S_IFMT : 0;
  if (r == 0 && op == SHK__MOUNT_MASK_LINK)
    r = type == SHK__S_IFLNK ? 0 : -EINVAL;
  else if (r == 0 && type == SHK__S_IFLNK)
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
    case SHK__MOUNT_MASK_LINK:
      r = shk__sys(__NR_mount, "/dev/null", self, 0, MS_BIND, 0);
      break;
    case SHK__MOUNT_RO_FILE:
      r = shk__sys(__NR_mount, self, self, 0, MS_BIND, 0);
      break;
    case SHK__MOUNT_RO_DIR:
    case SHK__MOUNT_PIN:
      /* Recursive: mounts already made beneath it stay. */
      r = shk__sys(__NR_mount, self, self, 0, MS_BIND | MS_REC, 0);
      break;
    case SHK__MOUNT_FILE:
      r = -EINVAL; /* shk__stage2_data's */
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
  if (r == 0 && op != SHK__MOUNT_MASK_DIR && op != SHK__MOUNT_PIN)
    r = remount_ro(path);
  return (int)r;
}

/* DIR (under /run, a tmpfs of the sandbox's own) as a directory; one that
 * exists already is fine. */
static long ensure_dir(const char *dir)
{
  long r = shk__sys(__NR_mkdirat, AT_FDCWD, dir, 0755);
  return r == -EEXIST ? 0 : r;
}


/* Safe because the file it writes lives in the sandbox's private /run, and
 * the bind it makes is read-only, onto a regular file the plan saw or, with
 * MAKE, one it created where the plan found nothing in a writable
 * directory (opened without following a symlink), through its
 * descriptor. */
int shk__stage2_data(const char *target, const char *text, unsigned index, bool make)
{
  static const char dir[] = "/run/shinken";
  char src[64] = "/run/shinken/data-";
  shk__s_utoa(index, src + sizeof "/run/shinken/data-" - 1);
  long r = ensure_dir(dir);
  if (r < 0)
    return (int)r;
  long fd = shk__sys(__NR_openat, AT_FDCWD, src,
                     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
  if (fd < 0)
    return (int)fd;
  r = write_all(fd, text);
  shk__sys(__NR_close, fd);
  if (r == 0 && make)
    r = create(target, false, text);
  if (r < 0)
    return (int)r;
  long t = open_exact(target, 0);
  if (t < 0)
    return (int)t;
  struct statx stx;
  r = shk__sys(__NR_statx, t, "", AT_EMPTY_PATH, STATX_TYPE, &stx);
  if (r == 0 && (stx.stx_mode & SHK__S_IFMT) != SHK__S_IFREG)
    r = -EINVAL;
  char self[40];
  if (r == 0)
    r = shk__sys(__NR_mount, src, fd_path(t, self), 0, MS_BIND, 0);
  shk__sys(__NR_close, t);
  if (r == 0)
    r = remount_ro(target);
  return (int)r;
}

/* Safe because it only lowers the size of a tmpfs of the sandbox's own
 * (bwrap made it, empty), keeping the flags its mount has. */
int shk__stage2_tmpfs_limit(const char *path, uint64_t size)
{
  long fd = open_exact(path, O_DIRECTORY);
  if (fd < 0)
    return (int)fd;
  struct statfs sf;
  long r = shk__sys(__NR_fstatfs, fd, &sf);
  /* One inode per 16 KiB: the kernel's own memory for inodes and names is
   * not counted in the size, so the number of files is bounded too. */
  uint64_t inodes = size / 16384 < 1024 ? 1024 : size / 16384;
  char opts[64] = "size=", num[24];
  size_t n = 5;
  for (const char *d = shk__s_utoa(size, num); *d; d++)
    opts[n++] = *d;
  for (const char *d = ",nr_inodes="; *d; d++)
    opts[n++] = *d;
  for (const char *d = shk__s_utoa(inodes, num); *d; d++)
    opts[n++] = *d;
  opts[n] = '\0';
  char self[40];
  if (r == 0) {
    unsigned long flags = MS_REMOUNT | MS_NOSUID | MS_NODEV;
    flags |= sf.f_flags & ST_NOEXEC ? MS_NOEXEC : 0;
    flags |= sf.f_flags & ST_RDONLY ? MS_RDONLY : 0;
    r = shk__sys(__NR_mount, 0, fd_path(fd, self), 0, flags, opts);
  }
  shk__sys(__NR_close, fd);
  return (int)r;
}
