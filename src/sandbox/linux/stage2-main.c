/* SPDX-License-Identifier: Apache-2.0 */
/* The stage 2 program: stage2.c as an executable of its own, without the C
 * library. A program with the C library pays for its start-up at every
 * run: in a static binary, relocating itself, reading the CPU's features
 * (on a virtual machine each CPUID instruction traps to the hypervisor) and
 * setting up threads and stdio, about 0.3 ms on the development VM, more
 * than stage 2's own work. This one starts at _start, applies its own
 * relocations (it is a static PIE, so it keeps address-space layout
 * randomisation) and calls shk__stage2_main.
 *
 * The launcher runs it from a sealed copy in memory (launch.c), so nothing
 * needs installing and nothing on disk can be swapped for it. */
#include "sandbox-internal.h"

#include <elf.h>

#include "sys.h"

/* The compiler may emit calls to these for copies and initializers; with
 * no C library the program brings its own. (Built with
 * -fno-tree-loop-distribute-patterns, so the loops do not become calls to
 * themselves.) */
void *memcpy(void *dst, const void *src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);

void *memcpy(void *dst, const void *src, size_t n)
{
  unsigned char *d = dst;
  const unsigned char *s = src;
  while (n--)
    *d++ = *s++;
  return dst;
}

void *memmove(void *dst, const void *src, size_t n)
{
  unsigned char *d = dst;
  const unsigned char *s = src;
  if (d < s)
    while (n--)
      *d++ = *s++;
  else
    while (n--)
      d[n] = s[n];
  return dst;
}

void *memset(void *dst, int c, size_t n)
{
  unsigned char *d = dst;
  while (n--)
    *d++ = (unsigned char)c;
  return dst;
}

int memcmp(const void *a, const void *b, size_t n)
{
  const unsigned char *x = a, *y = b;
  for (; n--; x++, y++)
    if (*x != *y)
      return *x - *y;
  return 0;
}

#if defined(__x86_64__)
#define RELATIVE R_X86_64_RELATIVE
__asm__(".text\n"
        ".global _start\n"
        ".type _start, @function\n"
        "_start:\n"
        "  xor %rbp, %rbp\n"
        "  mov %rsp, %rdi\n"
        "  and $-16, %rsp\n"
        "  call shk__stage2_start\n"
        "  hlt\n");
#elif defined(__aarch64__)
#define RELATIVE R_AARCH64_RELATIVE
__asm__(".text\n"
        ".global _start\n"
        ".type _start, %function\n"
        "_start:\n"
        "  mov x29, #0\n"
        "  mov x30, #0\n"
        "  mov x0, sp\n"
        "  bl shk__stage2_start\n"
        "  brk #0\n");
#endif

/* The linker's symbols for the program's own ELF header and dynamic
 * section; hidden, so that reaching them needs no relocation. */
extern const char __ehdr_start[] __attribute__((visibility("hidden")));
extern const Elf64_Dyn _DYNAMIC[] __attribute__((visibility("hidden")));

static void fail(const char *msg)
{
  shk__sys(__NR_write, 2, msg, shk__s_len(msg));
  for (;;)
    shk__sys(__NR_exit_group, 125);
}

void shk__stage2_start(long *sp);

/* Relocates the program (the kernel loaded it at a random base; only
 * relative relocations exist in a static PIE without a dynamic loader),
 * then runs stage 2 with its arguments from "__stage2" on. */
__attribute__((used, noreturn)) void shk__stage2_start(long *sp)
{
  uintptr_t base = (uintptr_t)__ehdr_start;
  const Elf64_Rela *rela = NULL;
  size_t size = 0;
  for (const Elf64_Dyn *d = _DYNAMIC; d->d_tag != DT_NULL; d++) {
    if (d->d_tag == DT_RELA)
      rela = (const Elf64_Rela *)(base + d->d_un.d_ptr);
    else if (d->d_tag == DT_RELASZ)
      size = d->d_un.d_val;
    else if (d->d_tag == DT_REL || d->d_tag == DT_RELR)
      fail("shinken: stage 2: relocations of a kind this program does not apply\n");
  }
  for (size_t i = 0; rela && i < size / sizeof *rela; i++) {
    if (ELF64_R_TYPE(rela[i].r_info) != RELATIVE)
      fail("shinken: stage 2: a relocation this program does not apply\n");
    *(uintptr_t *)(base + rela[i].r_offset) = base + (uintptr_t)rela[i].r_addend;
  }
  int argc = (int)sp[0];
  char **argv = (char **)(sp + 1);
  char **envp = argv + argc + 1;
  if (argc < 2)
    fail("shinken: stage 2 is run by 'shinken run' only\n");
  shk__stage2_main(argc - 1, argv + 1, envp, NULL);
}
