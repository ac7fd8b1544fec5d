/* The few helpers more than one module needs. Internal to Shinken. */
#pragma once

#include <stdarg.h>
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

/* Prints "shinken: MESSAGE" on stderr and exits with status CODE. Only main
 * and stage 2 may call it: library code returns errors instead. */
SHK_NORETURN SHK_PRINTF(2, 3) void shk__die(int code, const char *fmt, ...);
/* Same, with ": strerror(errno)" appended. */
SHK_NORETURN SHK_PRINTF(2, 3) void shk__die_errno(int code, const char *fmt, ...);
SHK_PRINTF(1, 2) void shk__warn(const char *fmt, ...);

SHK_NORETURN void shk__assert_fail(const char *expr, const char *file, int line);

/* Allocation that cannot fail: out of memory ends the process, which is the
 * only safe reaction in the CLI. Library code on hot paths uses arenas. */
void *shk__xmalloc(size_t n);
void *shk__xcalloc(size_t n, size_t m);
void *shk__xrealloc(void *p, size_t n);
char *shk__xstrdup(const char *s);
SHK_PRINTF(1, 2) char *shk__xasprintf(const char *fmt, ...);

/* Writes `value` (a C string) to the file `name`, relative to `dirfd` (or
 * AT_FDCWD), in one write: for kernel files (cgroup, /proc) where a short
 * write means the value was not taken. Returns 0, -errno, or -EIO. */
int shk__write_at(int dirfd, const char *name, const char *value);

/* Formats one line into a malloc'd *err (NULL when out of memory) and
 * returns -EINVAL, for functions that report errors as text. */
SHK_PRINTF(2, 3) int shk__errf(char **err, const char *fmt, ...);

/* Reads a whole file into a NUL-terminated buffer. Returns 0 or -errno. */
int shk__read_file(const char *path, char **out, size_t *len);

/* Fills *err (when not NULL) with one sentence and returns CODE (a negative
 * errno): `return shk__error_set(err, -EINVAL, "...", ...);`. */
SHK_PRINTF(3, 4) int shk__error_set(shk_error *err, int code, const char *fmt, ...);
/* The same, for an error at a place in a text (file may be NULL). */
SHK_PRINTF(6, 7) int shk__error_at(shk_error *err, int code, const char *file, unsigned line,
                                   unsigned column, const char *fmt, ...);
