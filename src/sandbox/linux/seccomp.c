/* SPDX-License-Identifier: Apache-2.0 */
/* Stage 2's seccomp filters. The BPF was compiled by libseccomp at build
 * time (tools/seccomp-gen.c), so installing one is one system call. Stage 2 code:
 * system calls only (sys.h). */
#include "sandbox-internal.h"

#include <linux/errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "sandbox/seccomp-bpf.h"
#include "sys.h"

#define PROG(a) { sizeof a / sizeof a[0], (struct sock_filter *)a }

int shk__seccomp_filter(shk_net_mode net, bool guard, const struct sock_filter **prog, size_t *len)
{
  static const struct sock_fprog filters[2][3] = {
    { [SHK_NET_NONE] = PROG(shk__seccomp_net_none),
      [SHK_NET_PROXY] = PROG(shk__seccomp_net_proxy),
      [SHK_NET_HOST] = PROG(shk__seccomp_net_host) },
    { [SHK_NET_NONE] = PROG(shk__seccomp_net_none_guard),
      [SHK_NET_PROXY] = PROG(shk__seccomp_net_proxy_guard),
      [SHK_NET_HOST] = PROG(shk__seccomp_net_host_guard) },
  };
  if ((unsigned)net > SHK_NET_HOST)
    return -EINVAL;
  *prog = filters[guard][net].filter;
  *len = filters[guard][net].len;
  return 0;
}

/* Safe because a seccomp filter can only narrow what this process and its
 * children may do, and it can never be removed. With the guard, the
 * filter hands every connect() to the listener the kernel creates with it,
 * which stage 2 passes to the launcher. */
int shk__seccomp_apply(shk_net_mode net, bool guard)
{
  struct sock_fprog prog;
  size_t len;
  int r = shk__seccomp_filter(net, guard, (const struct sock_filter **)&prog.filter, &len);
  if (r < 0)
    return r;
  prog.len = (unsigned short)len;
  return (int)shk__sys(__NR_seccomp, SECCOMP_SET_MODE_FILTER,
                       guard ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0, &prog);
}
