/* Stage 2's seccomp filters. The BPF was compiled by libseccomp at build
 * time (seccomp-gen.c), so installing one is one system call. Stage 2 code:
 * system calls only (sys.h). */
#include "sandbox-internal.h"

#include <linux/audit.h>
#include <linux/errno.h>
#include <linux/filter.h>
#include <linux/prctl.h>
#include <linux/seccomp.h>

#include "sandbox/seccomp-bpf.h"
#include "sys.h"

#if defined(__x86_64__)
#define NATIVE_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "the connect() guard needs this architecture's AUDIT_ARCH"
#endif

#define PROG(a) { sizeof a / sizeof a[0], (struct sock_filter *)a }

int shk__seccomp_filter(shk_net_mode net, const struct sock_filter **prog, size_t *len)
{
  static const struct sock_fprog filters[] = {
    [SHK_NET_NONE] = PROG(shk__seccomp_net_none),
    [SHK_NET_PROXY] = PROG(shk__seccomp_net_proxy),
    [SHK_NET_HOST] = PROG(shk__seccomp_net_host),
  };
  if ((unsigned)net > SHK_NET_HOST)
    return -EINVAL;
  *prog = filters[net].filter;
  *len = filters[net].len;
  return 0;
}

/* Safe because a seccomp filter can only narrow what this process and its
 * children may do, and it can never be removed. */
int shk__seccomp_apply(shk_net_mode net)
{
  struct sock_fprog prog;
  size_t len;
  int r = shk__seccomp_filter(net, (const struct sock_filter **)&prog.filter, &len);
  if (r < 0)
    return r;
  prog.len = (unsigned short)len;
  return (int)shk__sys(__NR_prctl, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

/* Safe because a seccomp filter only narrows what this process and its
 * children may do; this one hands their connect() calls to the launcher. */
int shk__guard_install(void)
{
  struct sock_filter f[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_AUDIT_ARCH, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW), /* the main filter kills it */
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_connect, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = { sizeof f / sizeof f[0], f };
  return (int)shk__sys(__NR_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
                       &prog);
}
