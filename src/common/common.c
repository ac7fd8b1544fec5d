#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

SHK_PRINTF(1, 0) static void vmsg(const char *fmt, va_list ap, int err)
{
  fputs("shinken: ", stderr);
  vfprintf(stderr, fmt, ap);
  if (err)
    fprintf(stderr, ": %s", strerror(err));
  fputc('\n', stderr);
}

void shk__die(int code, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vmsg(fmt, ap, 0);
  va_end(ap);
  exit(code);
}

void shk__die_errno(int code, const char *fmt, ...)
{
  int err = errno;
  va_list ap;
  va_start(ap, fmt);
  vmsg(fmt, ap, err);
  va_end(ap);
  exit(code);
}

void shk__warn(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vmsg(fmt, ap, 0);
  va_end(ap);
}

void shk__assert_fail(const char *expr, const char *file, int line)
{
  fprintf(stderr, "shinken: internal error: %s at %s:%d\n", expr, file, line);
  abort();
}

void *shk__xmalloc(size_t n)
{
  void *p = malloc(n ? n : 1);
  if (!p)
    shk__die(1, "out of memory");
  return p;
}

void *shk__xcalloc(size_t n, size_t m)
{
  void *p = calloc(n ? n : 1, m ? m : 1);
  if (!p)
    shk__die(1, "out of memory");
  return p;
}

void *shk__xrealloc(void *p, size_t n)
{
  p = realloc(p, n ? n : 1);
  if (!p)
    shk__die(1, "out of memory");
  return p;
}

char *shk__xstrdup(const char *s)
{
  char *p = strdup(s);
  if (!p)
    shk__die(1, "out of memory");
  return p;
}

char *shk__xasprintf(const char *fmt, ...)
{
  va_list ap;
  char *s = NULL;
  va_start(ap, fmt);
  int r = vasprintf(&s, fmt, ap);
  va_end(ap);
  if (r < 0)
    shk__die(1, "out of memory");
  return s;
}

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
  char *buf = malloc(cap);
  if (!buf) {
    close(fd);
    return -ENOMEM;
  }
  for (;;) {
    if (n + 1 >= cap) {
      char *nb = realloc(buf, cap * 2);
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
  if (vasprintf(err, fmt, ap) < 0)
    *err = NULL;
  va_end(ap);
  return -EINVAL;
}

int shk__error_set(shk_error *err, int code, const char *fmt, ...)
{
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    err->file[0] = '\0';
    err->line = err->column = 0;
  }
  return code;
}

int shk__error_at(shk_error *err, int code, const char *file, unsigned line, unsigned column,
                  const char *fmt, ...)
{
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    snprintf(err->file, sizeof err->file, "%s", file ? file : "");
    err->line = line;
    err->column = column;
  }
  return code;
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
