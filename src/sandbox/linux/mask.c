/* Stage 2's mount helper: a mask stage 2 makes itself, over an existing
 * file, while it still holds CAP_SYS_ADMIN over the sandbox's mount
 * namespace (see bwrap.c for when). */
#include "sandbox-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"

/* Safe because it only hides: the target is opened without following a
 * symlink and must be a regular file, the bind goes onto that very file
 * (through its descriptor), and the mount is read-only. No process of the
 * workload exists yet, so nothing inside can race it. */
int shk__mask_file(const char *path)
{
  int fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  struct stat st;
  char self[64];
  snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
  int r = fstat(fd, &st) < 0 ? -errno : S_ISREG(st.st_mode) ? 0 : -EINVAL;
  if (r == 0 && mount("/dev/null", self, NULL, MS_BIND, NULL) < 0)
    r = -errno;
  close(fd);
  /* The new mount is the top one at PATH now; remounting takes its flags,
   * which bwrap's own read-only binds also get. */
  if (r == 0 && mount(NULL, path, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID, NULL) < 0)
    r = -errno;
  return r;
}
