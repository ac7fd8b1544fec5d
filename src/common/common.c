/* SPDX-License-Identifier: Apache-2.0 */
/* The helpers of src/common/common.h. */
#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

uid_t shk__self_uid(void)
{
  return geteuid();
}

pid_t shk__fork_call(int (*fn)(void *), void *arg)
{
  pid_t pid = fork();
  if (pid < 0)
    return -errno;
  if (pid == 0)
    _exit(fn(arg) & 0xff);
  return pid;
}

void shk__assert_fail(const char *expr, const char *file, int line)
{
  fprintf(stderr, "shinken: internal error: %s at %s:%d\n", expr, file, line);
  abort();
}

/* ---------------------------------------------------------------- allocation */

#if SHK_FAULT_INJECTION
static unsigned long fault_nth, fault_count;
static bool fault_persist, fault_was_hit;

bool shk__fault_enabled(void)
{
  return true;
}

void shk__fault_arm(unsigned long nth, bool persist)
{
  fault_nth = nth;
  fault_persist = persist;
  fault_count = 0;
  fault_was_hit = false;
}

unsigned long shk__fault_allocs(void)
{
  return fault_count;
}

bool shk__fault_hit(void)
{
  return fault_was_hit;
}

/* True when this allocation is to fail. Unarmed, it touches nothing, so
 * threads of a program that never arms it do not share a counter. */
static bool fault_now(void)
{
  if (!fault_nth)
    return false;
  fault_count++;
  if (fault_count == fault_nth || (fault_persist && fault_count > fault_nth)) {
    fault_was_hit = true;
    return true;
  }
  return false;
}
#else
bool shk__fault_enabled(void)
{
  return false;
}

void shk__fault_arm(unsigned long nth, bool persist)
{
  (void)nth;
  (void)persist;
}

unsigned long shk__fault_allocs(void)
{
  return 0;
}

bool shk__fault_hit(void)
{
  return false;
}

static inline bool fault_now(void)
{
  return false;
}
#endif

void *shk__malloc(size_t n)
{
  return fault_now() ? NULL : malloc(n ? n : 1);
}

void *shk__calloc(size_t n, size_t m)
{
  size_t total;
  if (__builtin_mul_overflow(n, m, &total) || fault_now())
    return NULL;
  return calloc(total ? total : 1, 1);
}

void *shk__realloc(void *p, size_t n)
{
  return fault_now() ? NULL : realloc(p, n ? n : 1);
}

void *shk__reallocarray(void *p, size_t n, size_t m)
{
  size_t total;
  if (__builtin_mul_overflow(n, m, &total))
    return NULL;
  return shk__realloc(p, total);
}

char *shk__strndup(const char *s, size_t n)
{
  char *p = shk__malloc(n + 1);
  if (!p)
    return NULL;
  if (n)
    memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

char *shk__strdup(const char *s)
{
  return shk__strndup(s, strlen(s));
}

char *shk__vasprintf(const char *fmt, va_list ap)
{
  va_list again;
  va_copy(again, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  char *s = n < 0 ? NULL : shk__malloc((size_t)n + 1);
  if (s)
    vsnprintf(s, (size_t)n + 1, fmt, again);
  va_end(again);
  return s;
}

char *shk__asprintf(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  char *s = shk__vasprintf(fmt, ap);
  va_end(ap);
  return s;
}

/* ---------------------------------------------------------------- text */

int shk__buf_put(shk__buf *b, const char *s, size_t n)
{
  if (b->failed)
    return -ENOMEM;
  if (b->len + n + 1 > b->cap) {
    size_t cap = (b->len + n + 1) * 2;
    char *p = shk__realloc(b->p, cap);
    if (!p) {
      b->failed = true;
      return -ENOMEM;
    }
    b->p = p;
    b->cap = cap;
  }
  if (n)
    memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
  return 0;
}

int shk__buf_puts(shk__buf *b, const char *s)
{
  return shk__buf_put(b, s, strlen(s));
}

int shk__buf_printf(shk__buf *b, const char *fmt, ...)
{
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n >= 0 && (size_t)n < sizeof tmp)
    return shk__buf_put(b, tmp, (size_t)n);
  va_start(ap, fmt);
  char *big = n < 0 ? NULL : shk__vasprintf(fmt, ap);
  va_end(ap);
  if (!big) {
    b->failed = true;
    return -ENOMEM;
  }
  int r = shk__buf_put(b, big, (size_t)n);
  free(big);
  return r;
}

char *shk__buf_take(shk__buf *b)
{
  if (!b->failed && !b->p)
    shk__buf_put(b, "", 0);
  char *p = b->failed ? NULL : b->p;
  if (!p)
    free(b->p);
  *b = (shk__buf){ 0 };
  return p;
}

void shk__buf_free(shk__buf *b)
{
  free(b->p);
  *b = (shk__buf){ 0 };
}

/* ---------------------------------------------------------------- files */

int shk__read_file(const char *path, char **out, size_t *len)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  struct stat st;
  if (fstat(fd, &st) < 0 || S_ISDIR(st.st_mode)) {
    int e = S_ISDIR(st.st_mode) ? EISDIR : errno;
    close(fd);
    return -e;
  }
  size_t cap = st.st_size > 0 ? (size_t)st.st_size + 1 : 4096, n = 0;
  char *buf = shk__malloc(cap);
  if (!buf) {
    close(fd);
    return -ENOMEM;
  }
  for (;;) {
    if (n + 1 >= cap) {
      char *nb = shk__realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        close(fd);
        return -ENOMEM;
      }
      buf = nb;
      cap *= 2;
    }
    ssize_t r = read(fd, buf + n, cap - n - 1);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      int e = errno;
      free(buf);
      close(fd);
      return -e;
    }
    if (r == 0)
      break;
    n += (size_t)r;
  }
  close(fd);
  buf[n] = '\0';
  *out = buf;
  if (len)
    *len = n;
  return 0;
}

int shk__write_at(int dirfd, const char *name, const char *value)
{
  int fd = openat(dirfd, name, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  size_t len = strlen(value);
  ssize_t n = write(fd, value, len);
  int e = errno;
  close(fd);
  if (n < 0)
    return -e;
  return (size_t)n == len ? 0 : -EIO;
}

int shk__errf(char **err, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  *err = shk__vasprintf(fmt, ap);
  va_end(ap);
  return -EINVAL;
}

int shk__error_vat(shk_error *err, int code, const char *file, unsigned line, unsigned column,
                   const char *fmt, va_list ap)
{
  if (err) {
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    snprintf(err->file, sizeof err->file, "%s", file ? file : "");
    err->line = line;
    err->column = column;
  }
  return code;
}

int shk__error_at(shk_error *err, int code, const char *file, unsigned line, unsigned column,
                  const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  shk__error_vat(err, code, file, line, column, fmt, ap);
  va_end(ap);
  return code;
}

int shk__error_set(shk_error *err, int code, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  shk__error_vat(err, code, NULL, 0, 0, fmt, ap);
  va_end(ap);
  return code;
}

int shk__error_nomem(shk_error *err)
{
  return shk__error_set(err, -ENOMEM, "out of memory");
}

const char *shk_strerror(int code)
{
  switch (code < 0 ? -code : code) {
  case 0: return "success";
  case EINVAL: return "bad input";
  case ENOMEM: return "out of memory";
  case ENOENT: return "no such object";
  case EEXIST: return "already exists";
  case EACCES: return "refused";
  case EPERM: return "not permitted";
  case EBUSY: return "in use";
  case ENOSYS: return "no enforcement mechanism on this host";
  case ETIMEDOUT: return "timed out";
  case EIO: return "system error";
  default: return strerror(code < 0 ? -code : code);
  }
}

const char *shk_version(void)
{
  return SHK_VERSION;
}
