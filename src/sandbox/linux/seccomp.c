/* Installing stage 2's seccomp filter: the BPF was compiled by libseccomp at
 * build time (seccomp-gen.c), so this is one prctl(). */
#include "sandbox-internal.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>

#include "common/common.h"
#include "sandbox/seccomp-bpf.h"

/* Safe because a seccomp filter can only narrow what this process and its
 * children may do, and it can never be removed. */
int shk__seccomp_apply(shk_net_mode net)
{
  struct sock_fprog prog;
  switch (net) {
  case SHK_NET_NONE:
    prog = (struct sock_fprog){ sizeof shk__seccomp_net_none / sizeof shk__seccomp_net_none[0],
                                (struct sock_filter *)shk__seccomp_net_none };
    break;
  case SHK_NET_PROXY:
    prog = (struct sock_fprog){ sizeof shk__seccomp_net_proxy / sizeof shk__seccomp_net_proxy[0],
                                (struct sock_filter *)shk__seccomp_net_proxy };
    break;
  case SHK_NET_HOST:
    prog = (struct sock_fprog){ sizeof shk__seccomp_net_host / sizeof shk__seccomp_net_host[0],
                                (struct sock_filter *)shk__seccomp_net_host };
    break;
  default:
    return -EINVAL;
  }
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
    return -errno;
  return 0;
}
