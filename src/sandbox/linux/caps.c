/* Stage 2 drops every capability it starts with. bwrap already drops them
 * for an unprivileged caller; for root, and in proxy mode where stage 2
 * keeps a few to set the network bridge up, this is what takes them away. */
#include "sandbox-internal.h"

#include <errno.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/common.h"

/* Safe because it only ever removes authority: the bounding set first (so
 * nothing can be regained through exec of a file with capabilities), each
 * drop checked, then the ambient set, then the process's own sets, which it
 * reads back empty before reporting success. */
int shk__drop_caps(void)
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
