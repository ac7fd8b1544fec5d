/* SPDX-License-Identifier: Apache-2.0 */
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
  /* One call per capability where stage 2 holds CAP_SETPCAP (in its own
   * user namespace it holds all of them): the drop succeeds also for one
   * already gone, and fails with EINVAL past the kernel's last. Without
   * CAP_SETPCAP every drop fails with EPERM, which is right only for a
   * capability the bounding set holds. */
  for (int cap = 0; cap < 64; cap++) {
    long r = shk__sys(__NR_prctl, PR_CAPBSET_DROP, cap, 0, 0, 0);
    if (r == 0)
      continue;
    long in = shk__sys(__NR_prctl, PR_CAPBSET_READ, cap, 0, 0, 0);
    if (in < 0)
      break; /* past the kernel's last capability */
    if (in == 1)
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
