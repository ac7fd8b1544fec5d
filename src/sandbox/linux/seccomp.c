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

int shk__seccomp_observer(bool guard, const struct sock_filter **prog, size_t *len)
{
  static const struct sock_fprog filters[2] = { PROG(shk__seccomp_observe),
                                                PROG(shk__seccomp_observe_guard) };
  *prog = filters[guard].filter;
  *len = filters[guard].len;
  return 0;
}

static long install(const struct sock_filter *filter, size_t len, bool listener)
{
  struct sock_fprog prog = { (unsigned short)len, (struct sock_filter *)filter };
  return shk__sys(__NR_seccomp, SECCOMP_SET_MODE_FILTER,
                  listener ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0, &prog);
}

/* Safe because a seccomp filter can only narrow what this process and its
 * children may do, and it can never be removed. With the guard, the
 * filter hands every connect() to the listener the kernel creates with it,
 * which stage 2 passes to the launcher. With the observer, its filter is
 * installed first and holds the process's one listener (the guard's rules
 * move into it): the observer's filter allows everything it does not hand
 * to the listener, and the launcher only ever lets an observed call
 * continue, so the main filter and the kernel's own checks decide every
 * call as they would without it. It goes first because the main filter
 * refuses a new listener. */
int shk__seccomp_apply(shk_net_mode net, bool guard, bool observe)
{
  const struct sock_filter *filter;
  size_t len;
  long listener = -1;
  if (observe) {
    shk__seccomp_observer(guard, &filter, &len);
    if ((listener = install(filter, len, true)) < 0)
      return (int)listener;
  }
  int r = shk__seccomp_filter(net, guard && !observe, &filter, &len);
  if (r < 0)
    return r;
  long m = install(filter, len, guard && !observe);
  if (m < 0) {
    if (listener >= 0)
      shk__sys(__NR_close, listener);
    return (int)m;
  }
  return (int)(observe ? listener : m);
}
