/* What stage 2 does with the capabilities it starts with, then dropping
 * every one. bwrap already drops them for an unprivileged caller; for root,
 * and in proxy mode where stage 2 keeps a few to set the network bridge up,
 * this is what takes them away. */
#include "shinken/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/common.h"

/* Safe because it only hides: the target is opened without following a
 * symlink and must be a regular file, the bind goes onto that very file
 * (through its descriptor), and the mount is read-only. No process of the
 * workload exists yet, so nothing inside can race it. */
int shk_sandbox_mask_file(const char *path)
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

/* Safe because it only ever removes authority: the bounding set first (so
 * nothing can be regained through exec of a file with capabilities), each
 * drop checked, then the ambient set, then the process's own sets, which it
 * reads back empty before reporting success. */
int shk_sandbox_drop_caps(void)
{
  for (int cap = 0; cap < 64; cap++) {
    int in = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
    if (in < 0)
      break; /* past the kernel's last capability */
    if (in == 1 && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
      return -errno;
  }
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
    return -errno;
  struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
  struct __user_cap_data_struct data[2] = { { 0, 0, 0 }, { 0, 0, 0 } };
  if (syscall(SYS_capset, &hdr, data) < 0)
    return -errno;
  if (syscall(SYS_capget, &hdr, data) < 0)
    return -errno;
  for (int i = 0; i < 2; i++)
    if (data[i].effective || data[i].permitted || data[i].inheritable)
      return -EPERM;
  return 0;
}
