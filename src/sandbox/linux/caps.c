/* Stage 2 drops every capability it starts with. bwrap already drops them
 * for an unprivileged caller; for root, and where stage 2 keeps a few to
 * make its masks or set the network bridge up, this is what takes them
 * away. Stage 2 code: system calls only (sys.h). */
#include "sandbox-internal.h"

#include <linux/capability.h>
#include <linux/errno.h>
#include <linux/prctl.h>

#include "sys.h"

/* Safe because it only ever removes authority: the bounding set first (so
 * nothing can be regained through exec of a file with capabilities), each
 * drop checked, then the ambient set, then the process's own sets, which it
 * reads back empty before reporting success. */
int shk__drop_caps(void)
{
  /* Dropping a capability already gone succeeds, and one past the
   * kernel's last is EINVAL: one call per capability, where reading each
   * first took two. */
  for (int cap = 0; cap < 64; cap++) {
    long r = shk__sys(__NR_prctl, PR_CAPBSET_DROP, cap, 0, 0, 0);
    if (r == -EINVAL && cap > 0 && shk__sys(__NR_prctl, PR_CAPBSET_READ, cap, 0, 0, 0) < 0)
      break;
    if (r < 0)
      return (int)r;
  }
  long r = shk__sys(__NR_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  if (r < 0 && r != -EINVAL) /* a kernel without ambient capabilities */
    return (int)r;
  struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
  struct __user_cap_data_struct data[2] = { { 0, 0, 0 }, { 0, 0, 0 } };
  if ((r = shk__sys(__NR_capset, &hdr, data)) < 0 || (r = shk__sys(__NR_capget, &hdr, data)) < 0)
    return (int)r;
  for (int i = 0; i < 2; i++)
    if (data[i].effective || data[i].permitted || data[i].inheritable)
      return -EPERM;
  return 0;
}
