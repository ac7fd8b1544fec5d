/* SPDX-License-Identifier: Apache-2.0 */
/* What one CPUID instruction costs on this machine, in microseconds: the
 * median of 50 batches of 40 (the leaf glibc's start-up reads most, the
 * cache descriptors). On a virtual machine each one traps to the
 * hypervisor, and every program with the C library runs 68 of them as it
 * starts (glibc 2.36), so this cost decides much of the start-up ratio:
 * the launcher is one such program more than bwrap's chain. Prints "-"
 * where there is no CPUID (not x86). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static double now_us(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(void)
{
  enum { BATCHES = 50, PER = 40 };
  double t[BATCHES];
  unsigned a, b, c, d;
  for (int i = 0; i < BATCHES; i++) {
    double t0 = now_us();
    for (int k = 0; k < PER; k++) {
      __cpuid_count(4, k & 3, a, b, c, d);
      __asm__ volatile("" : : "r"(a), "r"(b), "r"(c), "r"(d));
    }
    t[i] = (now_us() - t0) / PER;
  }
  qsort(t, BATCHES, sizeof t[0], cmp);
  printf("%.2f\n", t[BATCHES / 2]);
  return 0;
}
#else
int main(void)
{
  puts("-");
  return 0;
}
#endif
