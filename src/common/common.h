/* SPDX-License-Identifier: Apache-2.0 */
/* The few helpers more than one module needs. Internal to Shinken.
 *
 * Everything here keeps the library contract (include/shinken/common.h):
 * it returns an error, it never prints and never exits. The helpers that
 * print and exit are the CLI's own (src/cli/die.h). */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include "shinken/common.h"

/* Defensive checks in the manner of SQLite: ALWAYS(x) and NEVER(x) mark
 * conditions the code believes are always true (or never true) but handles
 * anyway, so a wrong belief degrades into a refusal instead of a crash. In
 * debug builds a wrong belief aborts, so tests find it. */
#ifdef NDEBUG
#define ALWAYS(x) (x)
#define NEVER(x) (x)
#else
#define ALWAYS(x) ((x) ? 1 : (shk__assert_fail(#x, __FILE__, __LINE__), 0))
#define NEVER(x) ((x) ? (shk__assert_fail(#x, __FILE__, __LINE__), 1) : 0)
#endif

#define SHK_UNUSED __attribute__((unused))
#define SHK_NORETURN __attribute__((noreturn))
#define SHK_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* Cleanup helpers in the manner of bubblewrap: a variable declared with one
 * of these is released on every path out of its scope. */
static inline void shk__freep(void *p) { free(*(void **)p); }
static inline void shk__closep(int *fd) { if (*fd >= 0) close(*fd); }
#define shk_autofree __attribute__((cleanup(shk__freep)))
#define shk_autoclose __attribute__((cleanup(shk__closep)))

/* The failure of an ALWAYS() or NEVER() belief: a bug in Shinken, reported
 * on stderr before abort(), as assert() does. Not an error path. */
SHK_NORETURN void shk__assert_fail(const char *expr, const char *file, int line);

/* ---------------------------------------------------------------- allocation */

/* Allocation for library code: NULL when out of memory, and the caller
 * returns -ENOMEM. A size of 0 is taken as 1, so NULL always means failure.
 * Library code allocates through these rather than malloc() so that the
 * fault injection of the test build (below) reaches every allocation. */
void *shk__malloc(size_t n);
/* calloc(), and NULL when n * m overflows. */
void *shk__calloc(size_t n, size_t m);
void *shk__realloc(void *p, size_t n);
/* realloc() for n elements of m bytes; NULL when n * m overflows. On NULL,
 * p is left as it was. */
void *shk__reallocarray(void *p, size_t n, size_t m);
char *shk__strdup(const char *s);
/* The first n bytes of s (which need not be NUL-terminated), plus a NUL. */
char *shk__strndup(const char *s, size_t n);
SHK_PRINTF(1, 2) char *shk__asprintf(const char *fmt, ...);
SHK_PRINTF(1, 0) char *shk__vasprintf(const char *fmt, va_list ap);

/* Fault injection in the manner of SQLite's, compiled in by the build
 * option -Dfault_injection=true (the test build): after
 * shk__fault_arm(N, persist), the Nth allocation made through the helpers
 * above fails (and, with persist, every one after it too), so that a test
 * can walk N = 1, 2, 3, ... over an API and check that each failure comes
 * back as -ENOMEM with nothing leaked. shk__fault_arm(0, false) disarms.
 * The counter is process-wide and not thread-safe: it is for single-threaded
 * tests. Without the option these do nothing, and shk__fault_enabled() is
 * false. */
bool shk__fault_enabled(void);
void shk__fault_arm(unsigned long nth, bool persist);
/* How many allocations were made since the last shk__fault_arm(). */
unsigned long shk__fault_allocs(void);
/* Whether an injected failure happened since the last shk__fault_arm(). */
bool shk__fault_hit(void);

/* ---------------------------------------------------------------- text */

/* A growable NUL-terminated string (malloc'd). An append that runs out of
 * memory leaves the text as it was, marks the buffer failed and returns
 * -ENOMEM; every later append does nothing and returns -ENOMEM too. So a
 * writer may append freely and check once, at shk__buf_take(). Start with
 * shk__buf b = { 0 }. */
typedef struct shk__buf {
  char *p; /* NULL until the first append */
  size_t len, cap;
  bool failed;
} shk__buf;

int shk__buf_put(shk__buf *b, const char *s, size_t n);
int shk__buf_puts(shk__buf *b, const char *s);
SHK_PRINTF(2, 3) int shk__buf_printf(shk__buf *b, const char *fmt, ...);
/* Hands the text to the caller (malloc'd; "" when nothing was appended) and
 * empties the buffer; NULL, with the buffer freed, when an append failed. */
char *shk__buf_take(shk__buf *b);
void shk__buf_free(shk__buf *b);

/* ---------------------------------------------------------------- files */

/* Writes `value` (a C string) to the file `name`, relative to `dirfd` (or
 * AT_FDCWD), in one write: for kernel files (cgroup, /proc) where a short
 * write means the value was not taken. Returns 0, -errno, or -EIO. */
int shk__write_at(int dirfd, const char *name, const char *value);

/* Reads a whole file into a NUL-terminated buffer. Returns 0 or -errno. */
int shk__read_file(const char *path, char **out, size_t *len);

/* ---------------------------------------------------------------- errors */

/* Formats one line into a malloc'd *err (NULL when out of memory) and
 * returns -EINVAL, for functions that report errors as text. The older
 * convention, until every module takes a shk_error. */
SHK_PRINTF(2, 3) int shk__errf(char **err, const char *fmt, ...);

/* Fills *err (when not NULL) with one sentence and returns CODE (a negative
 * errno): `return shk__error_set(err, -EINVAL, "...", ...);`. */
SHK_PRINTF(3, 4) int shk__error_set(shk_error *err, int code, const char *fmt, ...);
/* The same, for an error at a place in a text (file may be NULL). */
SHK_PRINTF(6, 7) int shk__error_at(shk_error *err, int code, const char *file, unsigned line,
                                   unsigned column, const char *fmt, ...);
/* The same, with a va_list. */
SHK_PRINTF(6, 0) int shk__error_vat(shk_error *err, int code, const char *file, unsigned line,
                                    unsigned column, const char *fmt, va_list ap);
/* The effective user id this process acts for. It is the one place Shinken
 * asks who its caller is: the sandbox's environment (shk_sandbox_env) maps
 * it into the user namespace, and the manager trusts policy files, socket
 * directories and peers by comparing against it. Keeping the question in
 * one function keeps every trust decision on the same answer. */
uid_t shk__self_uid(void);

/* Runs FN(ARG) in a child process made with fork(2) and returns the
 * child's pid, or -errno. The child ends with FN's return value as its
 * exit status. This is the one place library code ends a process, and it
 * is always the child it has just made: no library function exits its
 * caller. */
pid_t shk__fork_call(int (*fn)(void *), void *arg);
/* Fills *err with "out of memory" and returns -ENOMEM. */
int shk__error_nomem(shk_error *err);

