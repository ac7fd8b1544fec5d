/* SPDX-License-Identifier: Apache-2.0 */
/* What stage 2 uses instead of the C library: system calls made directly,
 * returning -errno as the kernel does, and the few string helpers it
 * needs. Stage 2 runs as a small program without a C library (its start-up
 * would cost more than everything stage 2 does), and the same code runs in
 * `shinken __stage2`, so everything here works in both. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <asm/unistd.h>

#if defined(__x86_64__)
static inline long shk__syscall6(long n, long a, long b, long c, long d, long e, long f)
{
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  long ret;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
}
#elif defined(__aarch64__)
static inline long shk__syscall6(long n, long a, long b, long c, long d, long e, long f)
{
  register long x8 __asm__("x8") = n;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  register long x4 __asm__("x4") = e;
  register long x5 __asm__("x5") = f;
  __asm__ volatile("svc 0"
                   : "+r"(x0)
                   : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                   : "memory");
  return x0;
}
#else
#error "stage 2 needs this architecture's system call convention"
#endif

/* shk__sys(__NR_x, args...): up to six arguments, each cast to long. */
#define SHK__SYS_N(_0, _1, _2, _3, _4, _5, _6, n, ...) n
#define SHK__SYS_ARG(x) ((long)(x))
#define shk__sys(...) SHK__SYS_N(__VA_ARGS__, shk__sys6, shk__sys5, shk__sys4, shk__sys3, \
                                 shk__sys2, shk__sys1, shk__sys0, )(__VA_ARGS__)
#define shk__sys0(n) shk__syscall6(n, 0, 0, 0, 0, 0, 0)
#define shk__sys1(n, a) shk__syscall6(n, SHK__SYS_ARG(a), 0, 0, 0, 0, 0)
#define shk__sys2(n, a, b) shk__syscall6(n, SHK__SYS_ARG(a), SHK__SYS_ARG(b), 0, 0, 0, 0)
#define shk__sys3(n, a, b, c) \
  shk__syscall6(n, SHK__SYS_ARG(a), SHK__SYS_ARG(b), SHK__SYS_ARG(c), 0, 0, 0)
#define shk__sys4(n, a, b, c, d) \
  shk__syscall6(n, SHK__SYS_ARG(a), SHK__SYS_ARG(b), SHK__SYS_ARG(c), SHK__SYS_ARG(d), 0, 0)
#define shk__sys5(n, a, b, c, d, e)                                                             \
  shk__syscall6(n, SHK__SYS_ARG(a), SHK__SYS_ARG(b), SHK__SYS_ARG(c), SHK__SYS_ARG(d), \
                SHK__SYS_ARG(e), 0)
#define shk__sys6(n, a, b, c, d, e, f)                                                          \
  shk__syscall6(n, SHK__SYS_ARG(a), SHK__SYS_ARG(b), SHK__SYS_ARG(c), SHK__SYS_ARG(d), \
                SHK__SYS_ARG(e), SHK__SYS_ARG(f))

/* File types of stx_mode (which <linux/stat.h> leaves to the C library's
 * headers). */
#define SHK__S_IFMT 0170000
#define SHK__S_IFDIR 0040000
#define SHK__S_IFREG 0100000
#define SHK__S_IFLNK 0120000

static inline size_t shk__s_len(const char *s)
{
  size_t n = 0;
  while (s[n])
    n++;
  return n;
}

static inline bool shk__s_eq(const char *a, const char *b)
{
  while (*a && *a == *b)
    a++, b++;
  return *a == *b;
}

static inline bool shk__s_prefix(const char *s, const char *prefix)
{
  while (*prefix && *s == *prefix)
    s++, prefix++;
  return !*prefix;
}

/* A decimal number below 2^32, no sign; -1 when S is not one. */
static inline long shk__s_atou(const char *s)
{
  long v = 0;
  int n = 0;
  for (; *s >= '0' && *s <= '9' && n < 10; s++, n++)
    v = v * 10 + (*s - '0');
  return n == 0 || *s || v > 0xffffffffL ? -1 : v;
}

/* V in decimal into BUF (at least 21 bytes); returns BUF. */
static inline char *shk__s_utoa(uint64_t v, char *buf)
{
  char tmp[21];
  int n = 0;
  do
    tmp[n++] = (char)('0' + v % 10);
  while ((v /= 10) && n < 20);
  for (int i = 0; i < n; i++)
    buf[i] = tmp[n - 1 - i];
  buf[n] = '\0';
  return buf;
}
