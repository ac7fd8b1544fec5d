/* SPDX-License-Identifier: Apache-2.0 */
/* Build-time generator of stage 2's seccomp filters. libseccomp compiles one
 * filter per network mode, with and without the connect() guard, here,
 * once, and the BPF is written into a C header; stage 2 then installs a
 * constant array with one system call and no work at start-up. Run as:
 * shk-seccomp-gen OUTPUT.h */
#include <errno.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/netlink.h>

/* Refused with EPERM: debugging and memory access to other processes, the
 * kernel's large attack surfaces (io_uring, bpf, perf, userfaultfd), the
 * keyring, every way to change the mount table or enter or create a
 * namespace, kernel images and modules, and host-wide administration. */
static const char *const denied[] = {
  "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise",
  "io_uring_setup", "io_uring_enter", "io_uring_register",
  "bpf", "perf_event_open", "userfaultfd", "fanotify_init",
  "keyctl", "add_key", "request_key",
  "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsmount",
  "fsconfig", "fspick", "mount_setattr", "unshare", "setns",
  "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
  "acct", "swapon", "swapoff", "reboot", "quotactl", "quotactl_fd", "syslog",
  "open_by_handle_at", "name_to_handle_at", "lookup_dcookie", "iopl", "ioperm", "uselib",
  "vhangup", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
  NULL,
};

static void die(const char *what, int r)
{
  fprintf(stderr, "shk-seccomp-gen: %s: %s\n", what, strerror(r < 0 ? -r : r));
  exit(1);
}

static void rule(scmp_filter_ctx ctx, uint32_t action, int nr, unsigned n, const struct scmp_arg_cmp *c)
{
  int r = seccomp_rule_add_array(ctx, action, nr, n, c);
  if (r < 0)
    die(seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr), r);
}

/* One comparison on argument ARG. (libseccomp's SCMP_A0.. macros leave a
 * field to its default, which clang's -Wmissing-field-initializers refuses
 * in this native build, where the project's warning list does not apply.) */
static struct scmp_arg_cmp cmp_arg(unsigned arg, enum scmp_compare op, scmp_datum_t a,
                                   scmp_datum_t b)
{
  struct scmp_arg_cmp c = { arg, op, a, b };
  return c;
}

static int sys(const char *name)
{
  int nr = seccomp_syscall_resolve_name(name);
  if (nr == __NR_SCMP_ERROR)
    die(name, ENOSYS);
  return nr;
}

static int in(const int *list, int v)
{
  for (const int *a = list; *a >= 0; a++)
    if (*a == v)
      return 1;
  return 0;
}

/* Address families: `allowed` lists the ones the mode permits; every other
 * value, including ones with high bits set, is refused with EAFNOSUPPORT.
 * The refused values below AF_MAX are covered by aligned blocks (value &
 * ~(size - 1) == start, as a network is by its prefix), a dozen rules
 * rather than one per family: each rule costs the filter's compilation at
 * every start and a comparison at every socket(). */
static void families(scmp_filter_ctx ctx, const int *allowed, int netlink_route)
{
  uint32_t act = SCMP_ACT_ERRNO(EAFNOSUPPORT);
  const char *calls[] = { "socket", "socketpair" };
  for (int c = 0; c < 2; c++) {
    int nr = sys(calls[c]);
    for (int lo = 0; lo < AF_MAX;) {
      if (in(allowed, lo)) {
        lo++;
        continue;
      }
      int size = 1;
      for (;;) {
        int next = size * 2, free = lo % next == 0 && lo + next <= AF_MAX;
        for (int v = lo; free && v < lo + next; v++)
          free = !in(allowed, v);
        if (!free)
          break;
        size = next;
      }
      struct scmp_arg_cmp cmp = cmp_arg(0, SCMP_CMP_MASKED_EQ, ~(scmp_datum_t)(size - 1),
                                        (scmp_datum_t)lo);
      rule(ctx, act, nr, 1, &cmp);
      lo += size;
    }
    struct scmp_arg_cmp high = cmp_arg(0, SCMP_CMP_GE, AF_MAX, 0);
    rule(ctx, act, nr, 1, &high);
    /* A netlink route socket is what getaddrinfo() and ip(8) use to list
     * interfaces; in a namespace whose only interface is lo, and with no
     * capability, it can read that and nothing else. */
    if (c == 0 && netlink_route) {
      struct scmp_arg_cmp cmp[2] = { cmp_arg(0, SCMP_CMP_EQ, AF_NETLINK, 0),
                                     cmp_arg(2, SCMP_CMP_NE, NETLINK_ROUTE, 0) };
      rule(ctx, act, nr, 2, cmp);
    }
  }
}

/* Refuses, for FAMILY, every socket type (the low four bits of the type
 * argument; the kernel refuses other bits than SOCK_CLOEXEC and
 * SOCK_NONBLOCK itself) but the ones in OK, with EPERM: a list of what is
 * allowed, so that a type nobody thought of (AF_UNIX SOCK_RAW, which the
 * kernel treats as a datagram socket) is refused too. Aligned blocks of
 * values again. */
static void socket_types(scmp_filter_ctx ctx, const char *call, int family, const int *ok)
{
  int nr = sys(call);
  for (int lo = 0; lo < 16;) {
    if (in(ok, lo)) {
      lo++;
      continue;
    }
    int size = 1;
    for (;;) {
      int next = size * 2, free = lo % next == 0 && lo + next <= 16;
      for (int v = lo; free && v < lo + next; v++)
        free = !in(ok, v);
      if (!free)
        break;
      size = next;
    }
    struct scmp_arg_cmp cmp[2] = { cmp_arg(0, SCMP_CMP_EQ, (scmp_datum_t)family, 0),
                                   cmp_arg(1, SCMP_CMP_MASKED_EQ, 0xf & ~(scmp_datum_t)(size - 1),
                                           (scmp_datum_t)lo) };
    rule(ctx, SCMP_ACT_ERRNO(EPERM), nr, 2, cmp);
    lo += size;
  }
}

/* The socket types each family may use. Unix: stream and seqpacket
 * sockets, which take their peer from connect() alone (the connect()
 * guard sees it; sendto() and sendmsg() with an address are refused or
 * ignored on them). Not datagram sockets (nor SOCK_RAW, the same thing to
 * the kernel), from socket() or socketpair(): every datagram carries its
 * own address, which no filter can read and the guard never sees, so one
 * could reach a host socket in the read-only view; mediating every send
 * would cost every socket write. Internet: TCP and UDP; not SOCK_RAW
 * (which needs a capability the sandbox never has anyway), SOCK_SEQPACKET
 * or SOCK_DCCP, whose protocols are loadable kernel modules a socket()
 * would load, and no protocol number above 63 (SCTP, UDP-Lite, MPTCP, L2TP
 * and the like, also modules, through SOCK_STREAM or SOCK_DGRAM). */
static void types(scmp_filter_ctx ctx, int inet)
{
  static const int unix_ok[] = { SOCK_STREAM, SOCK_SEQPACKET, -1 };
  static const int inet_ok[] = { SOCK_STREAM, SOCK_DGRAM, -1 };
  socket_types(ctx, "socket", AF_UNIX, unix_ok);
  socket_types(ctx, "socketpair", AF_UNIX, unix_ok);
  if (!inet)
    return;
  static const int inet_families[] = { AF_INET, AF_INET6 };
  for (int i = 0; i < 2; i++) {
    socket_types(ctx, "socket", inet_families[i], inet_ok);
    struct scmp_arg_cmp proto[2] = { cmp_arg(0, SCMP_CMP_EQ, (scmp_datum_t)inet_families[i], 0),
                                     cmp_arg(2, SCMP_CMP_GE, 64, 0) };
    rule(ctx, SCMP_ACT_ERRNO(EPERM), sys("socket"), 2, proto);
  }
}

/* No set-user-ID or set-group-ID bit is ever made inside: a caller that is
 * root outside stays the owner of root's files, and a root-owned
 * set-user-ID program left in the working directory would run as root for
 * any local user afterwards (and a set-group-ID one with the group). The
 * bits are refused (EPERM) in the mode argument of every call that sets a
 * mode: chmod and its variants, and every call that creates a file, a
 * device node or a directory with one. open() and openat() are judged by
 * their mode alone, which the kernel reads only with O_CREAT or O_TMPFILE:
 * the C libraries pass 0 otherwise, and two rules per call are cheaper
 * than four. openat2() carries its mode in memory, where the filter cannot
 * look: it fails with ENOSYS, so callers fall back to openat(). */
static void no_setid(scmp_filter_ctx ctx)
{
  static const struct {
    const char *name;
    unsigned mode;
  } calls[] = {
    { "chmod", 1 }, { "fchmod", 1 }, { "fchmodat", 2 }, { "fchmodat2", 2 },
    { "creat", 1 }, { "open", 2 }, { "openat", 3 },
    { "mknod", 1 }, { "mknodat", 2 }, { "mkdir", 1 }, { "mkdirat", 2 },
  };
  static const scmp_datum_t bits[] = { 04000 /* S_ISUID */, 02000 /* S_ISGID */ };
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++)
    for (size_t b = 0; b < 2; b++) {
      struct scmp_arg_cmp cmp = cmp_arg(calls[i].mode, SCMP_CMP_MASKED_EQ, bits[b], bits[b]);
      rule(ctx, SCMP_ACT_ERRNO(EPERM), sys(calls[i].name), 1, &cmp);
    }
  rule(ctx, SCMP_ACT_ERRNO(ENOSYS), sys("openat2"), 0, NULL);
}

/* The write observer's calls (observe.c): every call that creates,
 * removes, renames or truncates a name, and open() and openat() when their
 * flags ask to write (an access mode that writes, O_CREAT or O_TRUNC: four
 * rules, since a filter compares a masked value with one other). openat2()
 * is not among them: the main filter refuses it (ENOSYS), which takes
 * precedence over a notification. */
static void observed(scmp_filter_ctx ctx)
{
  static const char *const always[] = {
    "creat", "mkdir", "mkdirat", "mknod", "mknodat", "unlink", "unlinkat", "rmdir", "rename",
    "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat", "truncate", NULL,
  };
  for (const char *const *c = always; *c; c++)
    rule(ctx, SCMP_ACT_NOTIFY, sys(*c), 0, NULL);
  static const struct {
    const char *name;
    unsigned flags;
  } opens[] = { { "open", 1 }, { "openat", 2 } };
  static const scmp_datum_t bits[] = { 01 /* O_WRONLY */, 02 /* O_RDWR */, 0100 /* O_CREAT */,
                                       01000 /* O_TRUNC */ };
  for (size_t i = 0; i < 2; i++)
    for (size_t b = 0; b < 4; b++) {
      struct scmp_arg_cmp cmp = cmp_arg(opens[i].flags, SCMP_CMP_MASKED_EQ, bits[b], bits[b]);
      rule(ctx, SCMP_ACT_NOTIFY, sys(opens[i].name), 1, &cmp);
    }
}

/* A filter that allows by default, with BADARCH for a foreign
 * architecture's calls. */
static scmp_filter_ctx new_filter(uint32_t badarch)
{
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx)
    die("seccomp_init", ENOMEM);
  int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, badarch);
  if (r < 0)
    die("badarch", r);
  /* Syscall numbers in a binary tree rather than a list. Loading a filter
   * makes the kernel run it once per syscall number to cache the ones it
   * always allows, which walks the whole list for most numbers: the tree
   * loads in 65 us instead of 111 us here, and every syscall of the
   * workload takes a few comparisons instead of up to a hundred. */
  if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0)
    die("optimize", r);
  /* Stage 2 sets NO_NEW_PRIVS itself, before Landlock. */
  if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0)) < 0)
    die("nnp", r);
  return ctx;
}

/* Writes CTX's BPF into OUT as the array NAME. */
static void emit(FILE *out, const char *name, scmp_filter_ctx ctx);

/* The filter of the write observer, installed beside the main one: its
 * only action besides ALLOW is the notification, so it can never refuse
 * anything itself. With GUARD it also carries the connect() guard's two
 * rules, and the main filter is then installed without them: the kernel
 * allows one filter with a listener per process, and the guard's and the
 * observer's notifications share it. */
static void build_observer(FILE *out, const char *name, int guard)
{
  /* A foreign architecture is the main filter's to kill. */
  scmp_filter_ctx ctx = new_filter(SCMP_ACT_ALLOW);
  observed(ctx);
  if (guard) {
    rule(ctx, SCMP_ACT_NOTIFY, sys("connect"), 0, NULL);
    rule(ctx, SCMP_ACT_NOTIFY, sys("bind"), 0, NULL);
  }
  emit(out, name, ctx);
}

static void build(FILE *out, const char *name, const int *allowed, int netlink_route, int guard)
{
  /* A foreign architecture (i386, x32) would reach syscalls by other
   * numbers than the ones checked here: kill it. */
  scmp_filter_ctx ctx = new_filter(SCMP_ACT_KILL_PROCESS);
  uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
  for (const char *const *d = denied; *d; d++)
    rule(ctx, eperm, sys(*d), 0, NULL);
  static const unsigned long ns_flags[] = {
    CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWUTS, CLONE_NEWIPC,
    CLONE_NEWCGROUP, 0x00000080 /* CLONE_NEWTIME */,
  };
  for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags[0]; i++) {
    struct scmp_arg_cmp cmp = cmp_arg(0, SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]);
    rule(ctx, eperm, sys("clone"), 1, &cmp);
  }
  /* clone3 passes its flags in memory, where seccomp cannot look: ENOSYS
   * makes the C library fall back to clone, which is checked above. */
  rule(ctx, SCMP_ACT_ERRNO(ENOSYS), sys("clone3"), 0, NULL);
  /* Only the default personality (0) and the query (0xffffffff) are
   * allowed: the others turn off address-space randomization or make data
   * executable. libseccomp takes one comparison per argument, so the rest is
   * covered by value ranges: anything above 32 bits, and every 32-bit value
   * that has some bit set next to a clear one, which is every value but the
   * two allowed. */
  struct scmp_arg_cmp high32 = cmp_arg(0, SCMP_CMP_GT, 0xffffffffUL, 0);
  rule(ctx, eperm, sys("personality"), 1, &high32);
  for (unsigned bit = 0; bit < 32; bit++) {
    scmp_datum_t set = 1UL << bit, clear = 1UL << ((bit + 1) % 32);
    struct scmp_arg_cmp cmp = cmp_arg(0, SCMP_CMP_MASKED_EQ, set | clear, set);
    rule(ctx, eperm, sys("personality"), 1, &cmp);
  }
  /* Typing into a terminal is refused even where a terminal is shared. */
  static const unsigned long tty_ioctls[] = { TIOCSTI, TIOCLINUX };
  for (size_t i = 0; i < 2; i++) {
    struct scmp_arg_cmp cmp = cmp_arg(1, SCMP_CMP_MASKED_EQ, 0xffffffffUL, tty_ioctls[i]);
    rule(ctx, eperm, sys("ioctl"), 1, &cmp);
  }
  /* A seccomp listener of the workload's own would take precedence over
   * the connect() guard's (the most recent user-notification filter wins)
   * and could let connect() through: no new listeners. */
  struct scmp_arg_cmp listener[2] = {
    cmp_arg(0, SCMP_CMP_EQ, SECCOMP_SET_MODE_FILTER, 0),
    cmp_arg(1, SCMP_CMP_MASKED_EQ, SECCOMP_FILTER_FLAG_NEW_LISTENER,
            SECCOMP_FILTER_FLAG_NEW_LISTENER),
  };
  rule(ctx, eperm, sys("seccomp"), 2, listener);
  families(ctx, allowed, netlink_route);
  types(ctx, netlink_route);
  no_setid(ctx);
  /* The limits of another process (Shinken's egress bridge helper runs
   * beside the workload, as the same user) are not the workload's to
   * change: prlimit64 with a pid other than 0 (the caller itself) and new
   * limits is refused. Reading them (no new limits) is what /proc/PID/limits
   * shows anyway. */
  struct scmp_arg_cmp prlimit[2] = { cmp_arg(0, SCMP_CMP_NE, 0, 0), cmp_arg(2, SCMP_CMP_NE, 0, 0) };
  rule(ctx, eperm, sys("prlimit64"), 2, prlimit);
  /* The connect() guard: every connect() goes to the launcher's listener
   * (guard.c), which the filter is installed with, and so does every
   * bind(), so that the launcher knows which unix sockets were bound inside
   * (the only ones a connect() may reach). One filter rather than a second
   * one for this: each filter costs its load at every start and a run at
   * every system call. */
  if (guard) {
    rule(ctx, SCMP_ACT_NOTIFY, sys("connect"), 0, NULL);
    rule(ctx, SCMP_ACT_NOTIFY, sys("bind"), 0, NULL);
  }
  emit(out, name, ctx);
}

static void emit(FILE *out, const char *name, scmp_filter_ctx ctx)
{
  int r;
  FILE *tmp = tmpfile();
  if (!tmp)
    die("tmpfile", errno);
  if ((r = seccomp_export_bpf(ctx, fileno(tmp))) < 0)
    die("seccomp_export_bpf", r);
  long len = (long)lseek(fileno(tmp), 0, SEEK_END);
  if (len <= 0 || len % 8)
    die("exported filter", EINVAL);
  rewind(tmp);
  fprintf(out, "static const struct sock_filter %s[] = {\n", name);
  for (long i = 0; i < len / 8; i++) {
    unsigned char b[8];
    if (fread(b, 1, 8, tmp) != 8)
      die("reading the filter", EIO);
    unsigned code = b[0] | (unsigned)b[1] << 8;
    unsigned k = b[4] | (unsigned)b[5] << 8 | (unsigned)b[6] << 16 | (unsigned)b[7] << 24;
    fprintf(out, "  { 0x%04x, %u, %u, 0x%08x },\n", code, b[2], b[3], k);
  }
  fputs("};\n\n", out);
  fclose(tmp);
  seccomp_release(ctx);
}

int main(int argc, char **argv)
{
  if (argc != 2) {
    fputs("usage: shk-seccomp-gen OUTPUT.h\n", stderr);
    return 2;
  }
  FILE *out = fopen(argv[1], "w");
  if (!out)
    die(argv[1], errno);
  /* The kernel features the filters may use (KILL_PROCESS: level 3, user
   * notification: level 5), fixed rather than probed on the build host. */
  int r = seccomp_api_set(5);
  if (r < 0)
    die("seccomp_api_set", r);
  fputs("/* Generated by shk-seccomp-gen at build time; do not edit. */\n"
        "#include <linux/filter.h>\n\n", out);
  static const int unix_only[] = { AF_UNIX, -1 };
  static const int inet[] = { AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, -1 };
  build(out, "shk__seccomp_net_none", unix_only, 0, 0);
  build(out, "shk__seccomp_net_proxy", inet, 1, 0);
  build(out, "shk__seccomp_net_host", inet, 1, 0);
  build(out, "shk__seccomp_net_none_guard", unix_only, 0, 1);
  build(out, "shk__seccomp_net_proxy_guard", inet, 1, 1);
  build(out, "shk__seccomp_net_host_guard", inet, 1, 1);
  build_observer(out, "shk__seccomp_observe", 0);
  build_observer(out, "shk__seccomp_observe_guard", 1);
  if (fclose(out) != 0)
    die(argv[1], errno);
  return 0;
}
