/* SPDX-License-Identifier: Apache-2.0 */
/* The seccomp filters stage 2 installs, checked as a table of cases: a
 * system call with its arguments, in a network mode, with and without the
 * connect() guard, and the action the filter must return. The filters are
 * the very programs libseccomp compiled at build time (tools/seccomp-gen.c);
 * each case runs them in the classic-BPF interpreter below, which follows
 * the kernel's (net/core/filter.c) for the instructions seccomp accepts and
 * refuses everything else, in the manner of libseccomp's own bpf_sim.
 * The live probes of tests/sandbox check the same filters in the kernel. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "sandbox/linux/sandbox-internal.h"

#if defined(__x86_64__)
#define NATIVE AUDIT_ARCH_X86_64
#define FOREIGN AUDIT_ARCH_I386
#elif defined(__aarch64__)
#define NATIVE AUDIT_ARCH_AARCH64
#define FOREIGN AUDIT_ARCH_ARM
#endif

/* Runs PROG on D as the kernel would, failing the test on anything the
 * kernel's seccomp checker would refuse: an unknown instruction, a load
 * outside struct seccomp_data or not aligned, a jump out of the program, a
 * scratch word out of range, a path that falls off the end. */
static uint32_t run(const struct sock_filter *prog, size_t len, const struct seccomp_data *d)
{
  uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = { 0 };
  assert_true(len > 0 && len <= BPF_MAXINSNS);
  for (size_t pc = 0; pc < len; pc++) {
    const struct sock_filter *i = &prog[pc];
    uint32_t k = i->k;
    switch (i->code) {
    case BPF_LD | BPF_W | BPF_ABS:
      if (k % 4 || k + 4 > sizeof *d)
        fail_msg("instruction %zu loads offset %u", pc, k);
      memcpy(&a, (const char *)d + k, 4);
      break;
    case BPF_LD | BPF_W | BPF_LEN: a = sizeof *d; break;
    case BPF_LDX | BPF_W | BPF_LEN: x = sizeof *d; break;
    case BPF_LD | BPF_IMM: a = k; break;
    case BPF_LDX | BPF_IMM: x = k; break;
    case BPF_LD | BPF_MEM:
    case BPF_LDX | BPF_MEM:
    case BPF_ST:
    case BPF_STX:
      if (k >= BPF_MEMWORDS)
        fail_msg("instruction %zu uses scratch word %u", pc, k);
      if (i->code == (BPF_LD | BPF_MEM))
        a = mem[k];
      else if (i->code == (BPF_LDX | BPF_MEM))
        x = mem[k];
      else
        mem[k] = i->code == BPF_ST ? a : x;
      break;
    case BPF_MISC | BPF_TAX: x = a; break;
    case BPF_MISC | BPF_TXA: a = x; break;
    case BPF_ALU | BPF_NEG: a = -a; break;
    case BPF_RET | BPF_K: return k;
    case BPF_RET | BPF_A: return a;
    case BPF_JMP | BPF_JA:
      if (pc + 1 + k >= len)
        fail_msg("instruction %zu jumps out of the program", pc);
      pc += k;
      break;
    default:
      if (BPF_CLASS(i->code) == BPF_ALU) {
        uint32_t v = BPF_SRC(i->code) == BPF_X ? x : k;
        switch (BPF_OP(i->code)) {
        case BPF_ADD: a += v; break;
        case BPF_SUB: a -= v; break;
        case BPF_MUL: a *= v; break;
        case BPF_DIV:
          if (!v)
            return 0; /* the kernel's answer to a division by zero */
          a /= v;
          break;
        case BPF_MOD:
          if (!v)
            return 0;
          a %= v;
          break;
        case BPF_OR: a |= v; break;
        case BPF_AND: a &= v; break;
        case BPF_XOR: a ^= v; break;
        case BPF_LSH: a = v < 32 ? a << v : 0; break;
        case BPF_RSH: a = v < 32 ? a >> v : 0; break;
        default: fail_msg("instruction %zu: unknown ALU op 0x%x", pc, i->code);
        }
        break;
      }
      if (BPF_CLASS(i->code) == BPF_JMP) {
        uint32_t v = BPF_SRC(i->code) == BPF_X ? x : k;
        bool t;
        switch (BPF_OP(i->code)) {
        case BPF_JEQ: t = a == v; break;
        case BPF_JGT: t = a > v; break;
        case BPF_JGE: t = a >= v; break;
        case BPF_JSET: t = (a & v) != 0; break;
        default: fail_msg("instruction %zu: unknown jump 0x%x", pc, i->code); return 0;
        }
        if (pc + 1 + i->jt >= len || pc + 1 + i->jf >= len)
          fail_msg("instruction %zu jumps out of the program", pc);
        pc += t ? i->jt : i->jf;
        break;
      }
      fail_msg("instruction %zu: opcode 0x%x is not one seccomp accepts", pc, i->code);
    }
  }
  fail_msg("the program ends without returning");
  return 0;
}

enum { NONE = 1 << SHK_NET_NONE, PROXY = 1 << SHK_NET_PROXY, HOST = 1 << SHK_NET_HOST,
       ALL = NONE | PROXY | HOST };
enum { NOGUARD = 1, GUARD = 2, EITHER = 3 };

#define ALLOW SECCOMP_RET_ALLOW
#define ERRNO(e) (SECCOMP_RET_ERRNO | (e))
#define KILL SECCOMP_RET_KILL_PROCESS
#define NOTIFY SECCOMP_RET_USER_NOTIF

typedef struct scase {
  const char *what;
  int nr;
  uint64_t args[6];
  unsigned modes, guard;
  uint32_t expect;
  uint32_t arch; /* 0: the native one */
} scase;

/* The filter's argument 0 of personality(2): the default and the query. */
#define QUERY 0xffffffffULL

static const scase cases[] = {
  /* Ordinary calls pass. */
  { "read", SYS_read, { 0 }, ALL, EITHER, ALLOW },
  { "getpid", SYS_getpid, { 0 }, ALL, EITHER, ALLOW },
  { "execve", SYS_execve, { 0 }, ALL, EITHER, ALLOW },
  { "landlock_create_ruleset", SYS_landlock_create_ruleset, { 0 }, ALL, EITHER, ALLOW },
  /* Another architecture's numbers are not the ones checked here. */
  { "read, foreign arch", 3, { 0 }, ALL, EITHER, KILL, FOREIGN },
  { "ptrace, foreign arch", 26, { 0 }, ALL, EITHER, KILL, FOREIGN },
#if defined(__x86_64__)
  { "x32 read", 0x40000000 | SYS_read, { 0 }, ALL, EITHER, KILL },
  { "x32 ptrace", 0x40000000 | SYS_ptrace, { 0 }, ALL, EITHER, KILL },
  { "iopl", SYS_iopl, { 3 }, ALL, EITHER, ERRNO(EPERM) },
  { "ioperm", SYS_ioperm, { 0 }, ALL, EITHER, ERRNO(EPERM) },
#endif
  /* Refused outright. */
  { "ptrace", SYS_ptrace, { 16 /* PTRACE_ATTACH */ }, ALL, EITHER, ERRNO(EPERM) },
  { "process_vm_readv", SYS_process_vm_readv, { 0 }, ALL, EITHER, ERRNO(EPERM) },
  { "process_vm_writev", SYS_process_vm_writev, { 0 }, ALL, EITHER, ERRNO(EPERM) },
  { "kcmp", SYS_kcmp, { 0 }, ALL, EITHER, ERRNO(EPERM) },
  { "pidfd_getfd", SYS_pidfd_getfd, { 0 }, ALL, EITHER, ERRNO(EPERM) },
  { "io_uring_setup", SYS_io_uring_setup, { 0 }, ALL, EITHER, ERRNO(EPERM) },
  { "io_uring_enter", SYS_io_uring_enter, { 0 }, ALL, EITHER, ERRNO(EPERM) },
  { "bpf", SYS_bpf, { 0 }, ALL, EITHER, ERRNO(EPERM) },
  { "perf_event_open", SYS_perf_event_open, { 0 }, ALL, EITHER, ERRNO(EPERM) },
  { "userfaultfd", SYS_userfaultfd, { 0 }, ALL, EITHER, ERRNO(EPERM) },
  { "keyctl", SYS_keyctl, { 0 }, ALL, EITHER, ERRNO(EPERM) },
  { "add_key", SYS_add_key, { 0 }, ALL, EITHER, ERRNO(EPERM) },
  { "mount", SYS_mount, { 0 }, ALL, EITHER, ERRNO(EPERM) },
  { "umount2", SYS_umount2, { 0 }, ALL, EITHER, ERRNO(EPERM) },
  { "open_tree", SYS_open_tree, { 0 }, ALL, EITHER, ERRNO(EPERM) },
  { "move_mount", SYS_move_mount, { 0 }, ALL, EITHER, ERRNO(EPERM) },
  { "fsopen", SYS_fsopen, { 0 }, ALL, EITHER, ERRNO(EPERM) },
  { "mount_setattr", SYS_mount_setattr, { 0 }, ALL, EITHER, ERRNO(EPERM) },
  { "pivot_root", SYS_pivot_root, { 0 }, ALL, EITHER, ERRNO(EPERM) },
  { "chroot", SYS_chroot, { 0 }, ALL, EITHER, ERRNO(EPERM) },
  { "unshare", SYS_unshare, { CLONE_NEWUSER }, ALL, EITHER, ERRNO(EPERM) },
  { "setns", SYS_setns, { 0 }, ALL, EITHER, ERRNO(EPERM) },
  { "init_module", SYS_init_module, { 0 }, ALL, EITHER, ERRNO(EPERM) },
  { "kexec_load", SYS_kexec_load, { 0 }, ALL, EITHER, ERRNO(EPERM) },
  { "reboot", SYS_reboot, { 0 }, ALL, EITHER, ERRNO(EPERM) },
  { "open_by_handle_at", SYS_open_by_handle_at, { 0 }, ALL, EITHER, ERRNO(EPERM) },
  { "settimeofday", SYS_settimeofday, { 0 }, ALL, EITHER, ERRNO(EPERM) },
  { "syslog", SYS_syslog, { 0 }, ALL, EITHER, ERRNO(EPERM) },
  /* clone: threads and processes, never a namespace; clone3 hides its
   * flags in memory, so libc is sent back to clone. */
  { "clone, a thread", SYS_clone,
    { CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM |
      CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID },
    ALL, EITHER, ALLOW },
  { "clone, fork", SYS_clone, { SIGCHLD }, ALL, EITHER, ALLOW },
  { "clone, vfork", SYS_clone, { CLONE_VM | CLONE_VFORK | SIGCHLD }, ALL, EITHER, ALLOW },
  { "clone NEWUSER", SYS_clone, { CLONE_NEWUSER | SIGCHLD }, ALL, EITHER, ERRNO(EPERM) },
  { "clone NEWNS", SYS_clone, { CLONE_NEWNS }, ALL, EITHER, ERRNO(EPERM) },
  { "clone NEWPID", SYS_clone, { CLONE_NEWPID | SIGCHLD }, ALL, EITHER, ERRNO(EPERM) },
  { "clone NEWNET", SYS_clone, { CLONE_NEWNET }, ALL, EITHER, ERRNO(EPERM) },
  { "clone NEWUTS", SYS_clone, { CLONE_NEWUTS }, ALL, EITHER, ERRNO(EPERM) },
  { "clone NEWIPC", SYS_clone, { CLONE_NEWIPC }, ALL, EITHER, ERRNO(EPERM) },
  { "clone NEWCGROUP", SYS_clone, { CLONE_NEWCGROUP }, ALL, EITHER, ERRNO(EPERM) },
  { "clone NEWTIME", SYS_clone, { 0x80 }, ALL, EITHER, ERRNO(EPERM) },
  { "clone, a thread with NEWNS", SYS_clone, { CLONE_VM | CLONE_THREAD | CLONE_NEWNS }, ALL,
    EITHER, ERRNO(EPERM) },
  { "clone3", SYS_clone3, { 0 }, ALL, EITHER, ERRNO(ENOSYS) },
  /* personality: the default and the query only. */
  { "personality(0)", SYS_personality, { 0 }, ALL, EITHER, ALLOW },
  { "personality(query)", SYS_personality, { QUERY }, ALL, EITHER, ALLOW },
  { "personality(ADDR_NO_RANDOMIZE)", SYS_personality, { 0x0040000 }, ALL, EITHER, ERRNO(EPERM) },
  { "personality(READ_IMPLIES_EXEC)", SYS_personality, { 0x0400000 }, ALL, EITHER, ERRNO(EPERM) },
  { "personality(PER_LINUX32)", SYS_personality, { 0x0008 }, ALL, EITHER, ERRNO(EPERM) },
  { "personality(0xfffffffe)", SYS_personality, { 0xfffffffe }, ALL, EITHER, ERRNO(EPERM) },
  { "personality(1 << 32)", SYS_personality, { 1ULL << 32 }, ALL, EITHER, ERRNO(EPERM) },
  { "personality(query | 1 << 32)", SYS_personality, { QUERY | 1ULL << 32 }, ALL, EITHER,
    ERRNO(EPERM) },
  /* Typing into a terminal, whatever the upper 32 bits of the request. */
  { "ioctl TIOCSTI", SYS_ioctl, { 0, TIOCSTI }, ALL, EITHER, ERRNO(EPERM) },
  { "ioctl TIOCSTI, high bits", SYS_ioctl, { 0, 0xdead00000000ULL | TIOCSTI }, ALL, EITHER,
    ERRNO(EPERM) },
  { "ioctl TIOCLINUX", SYS_ioctl, { 0, TIOCLINUX }, ALL, EITHER, ERRNO(EPERM) },
  { "ioctl TCGETS", SYS_ioctl, { 0, TCGETS }, ALL, EITHER, ALLOW },
  { "ioctl FIONREAD", SYS_ioctl, { 3, FIONREAD }, ALL, EITHER, ALLOW },
  /* No seccomp listener of the workload's own (it would take precedence
   * over the guard's); other filters may be added. */
  { "seccomp NEW_LISTENER", SYS_seccomp,
    { SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER }, ALL, EITHER, ERRNO(EPERM) },
  { "seccomp TSYNC|NEW_LISTENER", SYS_seccomp,
    { SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC | SECCOMP_FILTER_FLAG_NEW_LISTENER },
    ALL, EITHER, ERRNO(EPERM) },
  { "seccomp, a filter", SYS_seccomp, { SECCOMP_SET_MODE_FILTER, 0 }, ALL, EITHER, ALLOW },
  { "seccomp GET_ACTION_AVAIL", SYS_seccomp, { SECCOMP_GET_ACTION_AVAIL, 0 }, ALL, EITHER, ALLOW },
  /* socket(): the families of the mode. */
  { "socket AF_UNIX stream", SYS_socket, { AF_UNIX, SOCK_STREAM }, ALL, EITHER, ALLOW },
  { "socket AF_UNIX seqpacket", SYS_socket, { AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC }, ALL,
    EITHER, ALLOW },
  { "socket AF_UNIX dgram", SYS_socket, { AF_UNIX, SOCK_DGRAM }, ALL, EITHER, ERRNO(EPERM) },
  { "socket AF_UNIX dgram|cloexec|nonblock", SYS_socket,
    { AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK }, ALL, EITHER, ERRNO(EPERM) },
  { "socket AF_INET", SYS_socket, { AF_INET, SOCK_STREAM }, NONE, EITHER, ERRNO(EAFNOSUPPORT) },
  { "socket AF_INET", SYS_socket, { AF_INET, SOCK_STREAM }, PROXY | HOST, EITHER, ALLOW },
  { "socket AF_INET dgram", SYS_socket, { AF_INET, SOCK_DGRAM }, PROXY | HOST, EITHER, ALLOW },
  { "socket AF_INET6", SYS_socket, { AF_INET6, SOCK_STREAM }, NONE, EITHER,
    ERRNO(EAFNOSUPPORT) },
  { "socket AF_INET6", SYS_socket, { AF_INET6, SOCK_STREAM }, PROXY | HOST, EITHER, ALLOW },
  { "socket netlink route", SYS_socket, { AF_NETLINK, SOCK_RAW, NETLINK_ROUTE }, NONE, EITHER,
    ERRNO(EAFNOSUPPORT) },
  { "socket netlink route", SYS_socket, { AF_NETLINK, SOCK_RAW, NETLINK_ROUTE }, PROXY | HOST,
    EITHER, ALLOW },
  { "socket netlink audit", SYS_socket, { AF_NETLINK, SOCK_RAW, NETLINK_AUDIT }, ALL, EITHER,
    ERRNO(EAFNOSUPPORT) },
  { "socket netlink uevent", SYS_socket, { AF_NETLINK, SOCK_DGRAM, NETLINK_KOBJECT_UEVENT }, ALL,
    EITHER, ERRNO(EAFNOSUPPORT) },
  { "socket AF_PACKET", SYS_socket, { AF_PACKET, SOCK_RAW }, ALL, EITHER, ERRNO(EAFNOSUPPORT) },
  { "socket AF_VSOCK", SYS_socket, { AF_VSOCK, SOCK_STREAM }, ALL, EITHER, ERRNO(EAFNOSUPPORT) },
  { "socket AF_BLUETOOTH", SYS_socket, { AF_BLUETOOTH, SOCK_RAW }, ALL, EITHER,
    ERRNO(EAFNOSUPPORT) },
  { "socket AF_ALG", SYS_socket, { AF_ALG, SOCK_SEQPACKET }, ALL, EITHER, ERRNO(EAFNOSUPPORT) },
  { "socket AF_MAX", SYS_socket, { AF_MAX, SOCK_STREAM }, ALL, EITHER, ERRNO(EAFNOSUPPORT) },
  { "socket family with high bits", SYS_socket, { (1ULL << 32) | AF_UNIX, SOCK_STREAM }, ALL,
    EITHER, ERRNO(EAFNOSUPPORT) },
  { "socketpair AF_UNIX stream", SYS_socketpair, { AF_UNIX, SOCK_STREAM }, ALL, EITHER, ALLOW },
  { "socketpair AF_UNIX dgram", SYS_socketpair, { AF_UNIX, SOCK_DGRAM }, ALL, EITHER,
    ERRNO(EPERM) },
  { "socketpair AF_INET", SYS_socketpair, { AF_INET, SOCK_STREAM }, NONE, EITHER,
    ERRNO(EAFNOSUPPORT) },
  { "socketpair AF_PACKET", SYS_socketpair, { AF_PACKET, SOCK_RAW }, ALL, EITHER,
    ERRNO(EAFNOSUPPORT) },
  /* connect(): to the launcher with the guard, untouched without. */
  { "connect", SYS_connect, { 3 }, ALL, GUARD, NOTIFY },
  { "connect", SYS_connect, { 3 }, ALL, NOGUARD, ALLOW },
  { "sendto", SYS_sendto, { 3 }, ALL, EITHER, ALLOW },
  /* bind(): to the launcher with the guard, which records the unix
   * sockets bound inside (the only ones a connect() may reach). */
  { "bind", SYS_bind, { 3 }, ALL, GUARD, NOTIFY },
  { "bind", SYS_bind, { 3 }, ALL, NOGUARD, ALLOW },
  /* Socket types by list: unix stream and seqpacket; SOCK_RAW on AF_UNIX
   * is a datagram socket to the kernel. */
  { "socket AF_UNIX raw", SYS_socket, { AF_UNIX, SOCK_RAW }, ALL, EITHER, ERRNO(EPERM) },
  { "socket AF_UNIX rdm", SYS_socket, { AF_UNIX, SOCK_RDM }, ALL, EITHER, ERRNO(EPERM) },
  { "socket AF_UNIX type 0", SYS_socket, { AF_UNIX, 0 }, ALL, EITHER, ERRNO(EPERM) },
  { "socket AF_UNIX type 15", SYS_socket, { AF_UNIX, 15 }, ALL, EITHER, ERRNO(EPERM) },
  { "socket AF_UNIX stream|cloexec|nonblock", SYS_socket,
    { AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK }, ALL, EITHER, ALLOW },
  { "socketpair AF_UNIX raw", SYS_socketpair, { AF_UNIX, SOCK_RAW }, ALL, EITHER, ERRNO(EPERM) },
  { "socketpair AF_UNIX seqpacket", SYS_socketpair, { AF_UNIX, SOCK_SEQPACKET }, ALL, EITHER,
    ALLOW },
  /* Internet sockets: TCP and UDP, no module-loading protocol. */
  { "socket AF_INET raw", SYS_socket, { AF_INET, SOCK_RAW, 1 }, PROXY | HOST, EITHER,
    ERRNO(EPERM) },
  { "socket AF_INET seqpacket", SYS_socket, { AF_INET, SOCK_SEQPACKET, 132 }, PROXY | HOST,
    EITHER, ERRNO(EPERM) },
  { "socket AF_INET6 dccp", SYS_socket, { AF_INET6, SOCK_DCCP }, PROXY | HOST, EITHER,
    ERRNO(EPERM) },
  { "socket AF_INET stream sctp", SYS_socket, { AF_INET, SOCK_STREAM, 132 }, PROXY | HOST, EITHER,
    ERRNO(EPERM) },
  { "socket AF_INET6 dgram udplite", SYS_socket, { AF_INET6, SOCK_DGRAM, 136 }, PROXY | HOST,
    EITHER, ERRNO(EPERM) },
  { "socket AF_INET stream mptcp", SYS_socket, { AF_INET, SOCK_STREAM, 262 }, PROXY | HOST, EITHER,
    ERRNO(EPERM) },
  { "socket AF_INET stream tcp", SYS_socket, { AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 6 },
    PROXY | HOST, EITHER, ALLOW },
  { "socket AF_INET dgram icmp", SYS_socket, { AF_INET, SOCK_DGRAM, 1 }, PROXY | HOST, EITHER,
    ALLOW },
  { "socket AF_INET6 dgram udp", SYS_socket, { AF_INET6, SOCK_DGRAM, 17 }, PROXY | HOST, EITHER,
    ALLOW },
  /* No set-user-ID or set-group-ID bit, set or created. */
  { "chmod 0755", SYS_chmod, { 0, 0755 }, ALL, EITHER, ALLOW },
  { "chmod 04755", SYS_chmod, { 0, 04755 }, ALL, EITHER, ERRNO(EPERM) },
  { "chmod 02755", SYS_chmod, { 0, 02755 }, ALL, EITHER, ERRNO(EPERM) },
  { "chmod 0100644 (a st_mode)", SYS_chmod, { 0, 0100644 }, ALL, EITHER, ALLOW },
  { "chmod 01777", SYS_chmod, { 0, 01777 }, ALL, EITHER, ALLOW },
  { "fchmod 06755", SYS_fchmod, { 3, 06755 }, ALL, EITHER, ERRNO(EPERM) },
  { "fchmod 0644", SYS_fchmod, { 3, 0644 }, ALL, EITHER, ALLOW },
  { "fchmodat 04711", SYS_fchmodat, { 3, 0, 04711 }, ALL, EITHER, ERRNO(EPERM) },
  { "fchmodat 0711", SYS_fchmodat, { 3, 0, 0711 }, ALL, EITHER, ALLOW },
  { "fchmodat2 02711", 452 /* fchmodat2 */, { 3, 0, 02711 }, ALL, EITHER, ERRNO(EPERM) },
  { "fchmodat2 0711", 452, { 3, 0, 0711, 0 }, ALL, EITHER, ALLOW },
  { "open O_CREAT 04755", SYS_open, { 0, 0100 /* O_CREAT */, 04755 }, ALL, EITHER, ERRNO(EPERM) },
  { "open O_CREAT 0644", SYS_open, { 0, 0100, 0644 }, ALL, EITHER, ALLOW },
  { "openat O_CREAT 02755", SYS_openat, { 3, 0, 0100, 02755 }, ALL, EITHER, ERRNO(EPERM) },
  { "openat O_CREAT 0600", SYS_openat, { 3, 0, 0100, 0600 }, ALL, EITHER, ALLOW },
  { "creat 04755", SYS_creat, { 0, 04755 }, ALL, EITHER, ERRNO(EPERM) },
  { "mknod S_IFREG|04755", SYS_mknod, { 0, 0104755 }, ALL, EITHER, ERRNO(EPERM) },
  { "mknodat S_IFIFO|0644", SYS_mknodat, { 3, 0, 010644 }, ALL, EITHER, ALLOW },
  { "mknodat S_IFREG|02755", SYS_mknodat, { 3, 0, 0102755 }, ALL, EITHER, ERRNO(EPERM) },
  { "mkdir 02775", SYS_mkdir, { 0, 02775 }, ALL, EITHER, ERRNO(EPERM) },
  { "mkdirat 0755", SYS_mkdirat, { 3, 0, 0755 }, ALL, EITHER, ALLOW },
  { "mkdirat 02755", SYS_mkdirat, { 3, 0, 02755 }, ALL, EITHER, ERRNO(EPERM) },
  { "openat2", SYS_openat2, { 3, 0, 0, 24 }, ALL, EITHER, ERRNO(ENOSYS) },
  /* Another process's limits are not the workload's to change. */
  { "prlimit64(0, NOFILE, new)", SYS_prlimit64, { 0, 7, 0x1000, 0 }, ALL, EITHER, ALLOW },
  { "prlimit64(pid, NOFILE, new)", SYS_prlimit64, { 42, 7, 0x1000, 0 }, ALL, EITHER,
    ERRNO(EPERM) },
  { "prlimit64(pid | 1 << 32, NOFILE, new)", SYS_prlimit64, { 1ULL << 32, 7, 0x1000, 0 }, ALL,
    EITHER, ERRNO(EPERM) },
  { "prlimit64(pid, NOFILE, NULL, old)", SYS_prlimit64, { 42, 7, 0, 0x1000 }, ALL, EITHER,
    ALLOW },
};

static void test_table(void **state)
{
  (void)state;
  size_t checked = 0;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const scase *t = &cases[c];
    for (int net = SHK_NET_NONE; net <= SHK_NET_HOST; net++) {
      if (!(t->modes & (1u << net)))
        continue;
      for (int guard = 0; guard < 2; guard++) {
        if (!(t->guard & (guard ? GUARD : NOGUARD)))
          continue;
        const struct sock_filter *prog;
        size_t len;
        assert_int_equal(shk__seccomp_filter((shk_net_mode)net, guard, &prog, &len), 0);
        struct seccomp_data d = { .nr = t->nr, .arch = t->arch ? t->arch : NATIVE };
        memcpy(d.args, t->args, sizeof d.args);
        uint32_t got = run(prog, len, &d);
        if (got != t->expect)
          fail_msg("%s (net %s, %s guard): action 0x%08x, expected 0x%08x", t->what,
                   shk_net_mode_name((shk_net_mode)net), guard ? "with" : "without", got,
                   t->expect);
        checked++;
      }
    }
  }
  printf("# %zu cases checked against 6 filters\n", checked);
}

/* Every syscall number the table does not name, with zero arguments, is
 * allowed unless it is one the filter refuses by name: the list of refused
 * numbers is exactly the table's, so nothing is refused (or allowed) by
 * accident. */
static void test_default_allow(void **state)
{
  (void)state;
  for (int net = SHK_NET_NONE; net <= SHK_NET_HOST; net++) {
    const struct sock_filter *prog;
    size_t len;
    assert_int_equal(shk__seccomp_filter((shk_net_mode)net, true, &prog, &len), 0);
    for (int nr = 0; nr < 512; nr++) {
      bool named = false;
      for (size_t c = 0; c < sizeof cases / sizeof cases[0] && !named; c++)
        named = cases[c].nr == nr && !cases[c].arch;
      struct seccomp_data d = { .nr = nr, .arch = NATIVE };
      uint32_t got = run(prog, len, &d);
      /* The ones the table names were checked above; the socket family 0
       * (AF_UNSPEC), the only one zero arguments give, is refused. */
      if (named || nr == SYS_socket || nr == SYS_socketpair)
        continue;
      static const int refused_unnamed[] = {
#if defined(__x86_64__)
        SYS_uselib, SYS_vhangup, SYS_acct, SYS_swapon, SYS_swapoff, SYS_quotactl,
        SYS_lookup_dcookie, SYS_clock_settime, SYS_clock_adjtime, SYS_adjtimex,
        SYS_name_to_handle_at, SYS_finit_module, SYS_delete_module, SYS_kexec_file_load,
        SYS_request_key, SYS_io_uring_register, SYS_fanotify_init, SYS_fsconfig, SYS_fsmount,
        SYS_fspick, SYS_process_madvise, SYS_quotactl_fd,
#endif
      };
      bool refused = false;
      for (size_t i = 0; i < sizeof refused_unnamed / sizeof refused_unnamed[0]; i++)
        refused |= refused_unnamed[i] == nr;
      uint32_t want = refused ? ERRNO(EPERM) : ALLOW;
      if (got != want)
        fail_msg("syscall %d (net %s): action 0x%08x, expected 0x%08x", nr,
                 shk_net_mode_name((shk_net_mode)net), got, want);
    }
  }
}

/* The write observer's filter: it notifies exactly the write-intent calls
 * (and, in its guard variant, connect() and bind()), an open only when its
 * flags ask to write, and allows everything else, a foreign architecture
 * included: it has no action that could refuse a call. */
static void test_observer(void **state)
{
  (void)state;
  static const struct {
    const char *what;
    int nr;
    uint64_t args[6];
  } notified[] = {
    { "openat O_WRONLY", SYS_openat, { 3, 0, 01 } },
    { "openat O_RDWR|O_CLOEXEC", SYS_openat, { 3, 0, 02 | 02000000 } },
    { "openat O_RDONLY|O_CREAT", SYS_openat, { 3, 0, 0100, 0644 } },
    { "openat O_RDONLY|O_TRUNC", SYS_openat, { 3, 0, 01000 } },
    { "openat O_WRONLY, high bits", SYS_openat, { 3, 0, 0xffffffff00000001ULL } },
    { "mkdirat", SYS_mkdirat, { 3, 0, 0755 } },
    { "mknodat", SYS_mknodat, { 3, 0, 010644 } },
    { "unlinkat", SYS_unlinkat, { 3, 0, 0 } },
    { "renameat2", SYS_renameat2, { 3, 0, 3, 0, 0 } },
    { "renameat", SYS_renameat, { 3, 0, 3, 0 } },
    { "linkat", SYS_linkat, { 3, 0, 3, 0, 0 } },
    { "symlinkat", SYS_symlinkat, { 0, 3, 0 } },
    { "truncate", SYS_truncate, { 0, 0 } },
#if defined(__x86_64__)
    { "open O_WRONLY|O_APPEND", SYS_open, { 0, 01 | 02000 } },
    { "creat", SYS_creat, { 0, 0644 } },
    { "mkdir", SYS_mkdir, { 0, 0755 } },
    { "mknod", SYS_mknod, { 0, 010644 } },
    { "unlink", SYS_unlink, { 0 } },
    { "rmdir", SYS_rmdir, { 0 } },
    { "rename", SYS_rename, { 0, 0 } },
    { "link", SYS_link, { 0, 0 } },
    { "symlink", SYS_symlink, { 0, 0 } },
#endif
  };
  static const struct {
    const char *what;
    int nr;
    uint64_t args[6];
  } allowed[] = {
    { "openat O_RDONLY", SYS_openat, { 3, 0, 0 } },
    { "openat O_RDONLY|O_DIRECTORY|O_CLOEXEC", SYS_openat, { 3, 0, 0200000 | 02000000 } },
    { "openat O_PATH", SYS_openat, { 3, 0, 010000000 } },
    { "read", SYS_read, { 3, 0, 10 } },
    { "write", SYS_write, { 1, 0, 10 } },
    { "ftruncate", SYS_ftruncate, { 3, 0 } },
    { "execve", SYS_execve, { 0, 0, 0 } },
#if defined(__x86_64__)
    { "open O_RDONLY", SYS_open, { 0, 0 } },
#endif
  };
  for (int guard = 0; guard < 2; guard++) {
    const struct sock_filter *prog;
    size_t len;
    assert_int_equal(shk__seccomp_observer(guard, &prog, &len), 0);
    for (size_t c = 0; c < sizeof notified / sizeof notified[0]; c++) {
      struct seccomp_data d = { .nr = notified[c].nr, .arch = NATIVE };
      memcpy(d.args, notified[c].args, sizeof d.args);
      if (run(prog, len, &d) != NOTIFY)
        fail_msg("%s is not notified (%s guard)", notified[c].what, guard ? "with" : "without");
    }
    for (size_t c = 0; c < sizeof allowed / sizeof allowed[0]; c++) {
      struct seccomp_data d = { .nr = allowed[c].nr, .arch = NATIVE };
      memcpy(d.args, allowed[c].args, sizeof d.args);
      if (run(prog, len, &d) != ALLOW)
        fail_msg("%s is not allowed (%s guard)", allowed[c].what, guard ? "with" : "without");
    }
    int net_calls[] = { SYS_connect, SYS_bind };
    for (size_t c = 0; c < 2; c++) {
      struct seccomp_data d = { .nr = net_calls[c], .arch = NATIVE };
      assert_int_equal(run(prog, len, &d), guard ? NOTIFY : ALLOW);
    }
    /* Every number, with any of a few argument patterns, gets one of the
     * two actions: nothing is refused here. */
    static const uint64_t patterns[] = { 0, 1, 0x41, ~0ULL };
    for (int nr = 0; nr < 512; nr++)
      for (size_t p = 0; p < 4; p++) {
        struct seccomp_data d = { .nr = nr, .arch = NATIVE };
        for (int i = 0; i < 6; i++)
          d.args[i] = patterns[p];
        uint32_t got = run(prog, len, &d);
        if (got != ALLOW && got != NOTIFY)
          fail_msg("syscall %d: action 0x%08x in the observer's filter", nr, got);
      }
    struct seccomp_data foreign = { .nr = SYS_openat, .arch = FOREIGN, .args = { 3, 0, 01 } };
    assert_int_equal(run(prog, len, &foreign), ALLOW);
  }
}

/* The interpreter itself refuses what the kernel would. */
static void test_interpreter(void **state)
{
  (void)state;
  struct seccomp_data d = { .nr = 1, .arch = NATIVE };
  const struct sock_filter ok[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 1, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, ERRNO(7)),
    BPF_STMT(BPF_RET | BPF_K, ALLOW),
  };
  assert_int_equal(run(ok, 4, &d), ERRNO(7));
  d.nr = 2;
  assert_int_equal(run(ok, 4, &d), ALLOW);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_interpreter),
    cmocka_unit_test(test_table),
    cmocka_unit_test(test_default_allow),
    cmocka_unit_test(test_observer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
