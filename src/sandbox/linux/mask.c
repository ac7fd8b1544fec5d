/* Stage 2's mounts: the masks it makes itself, while it still holds
 * CAP_SYS_ADMIN over the sandbox's mount namespace (see bwrap.c for which
 * ones). Each costs a few system calls, where bwrap 0.8 rereads the whole
 * mount table for every bind it makes. Stage 2 code: system calls only
 * (sys.h). */
#include "sandbox-internal.h"

#include <linux/errno.h>
#include <linux/fcntl.h>
#include <linux/mount.h>
#include <linux/stat.h>
#include <asm/statfs.h>

#include "sys.h"

/* statfs(2)'s flags, as the kernel sets them. */
#define ST_NOSUID 0x0002
#define ST_NODEV 0x0004
#define ST_NOEXEC 0x0008

/* Makes PATH read-only: its top mount, the new one, remounted with the
 * flags it has (a flag the mount inherited from the host may be locked,
 * and a remount that drops one fails). */
static int remount_ro(const char *path)
{
  struct statfs sf;
  long r = shk__sys(__NR_statfs, path, &sf);
  if (r < 0)
    return (int)r;
  unsigned long flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID;
  flags |= sf.f_flags & ST_NODEV ? MS_NODEV : 0;
  flags |= sf.f_flags & ST_NOEXEC ? MS_NOEXEC : 0;
  return (int)shk__sys(__NR_mount, 0, path, 0, flags, 0);
}

/* Safe because it only hides or narrows: the target is opened without
 * following a symlink and must have the expected type, the mount goes onto
 * that very inode (through its descriptor), and the result is read-only.
 * A mount point it creates is created without following a symlink either,
 * and only where the plan found nothing and the parent is writable; the
 * launcher removes it afterwards while it is empty. No process of the
 * workload exists yet, so nothing inside can race it. */
int shk__stage2_mount(const char *path, shk__mount_op op, bool create)
{
  bool dir = op == SHK__MOUNT_MASK_DIR;
  long r;
  if (create) {
    r = dir ? shk__sys(__NR_mkdirat, AT_FDCWD, path, 0755)
            : shk__sys(__NR_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                       0666);
    if (r < 0 && r != -EEXIST)
      return (int)r;
    if (r >= 0 && !dir)
      shk__sys(__NR_close, r);
  }
  long fd = shk__sys(__NR_openat, AT_FDCWD, path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return (int)fd;
  struct statx stx;
  r = shk__sys(__NR_statx, fd, "", AT_EMPTY_PATH, STATX_TYPE, &stx);
  unsigned type = r == 0 ? stx.stx_mode & SHK__S_IFMT : 0;
  if (r == 0 && (dir ? type != SHK__S_IFDIR
                 : op == SHK__MOUNT_RO_FILE ? type != SHK__S_IFREG
                 : type == SHK__S_IFDIR || type == 0120000 /* a symlink */))
    r = -EINVAL;
  char self[40] = "/proc/self/fd/";
  shk__s_utoa((uint64_t)fd, self + 14);
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
  /* The new mount is the top one at PATH now, which the descriptor (opened
   * before it) does not see. */
  if (r == 0 && !dir)
    r = remount_ro(path);
  return (int)r;
}
