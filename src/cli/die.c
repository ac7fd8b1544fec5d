/* SPDX-License-Identifier: Apache-2.0 */
/* The helpers that print and exit (src/cli/die.h): for the CLI and stage 2
 * only. */
#include "cli/die.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

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

void *shk__xmalloc(size_t n)
{
  void *p = shk__malloc(n);
  if (!p)
    shk__die(1, "out of memory");
  return p;
}

void *shk__xcalloc(size_t n, size_t m)
{
  void *p = shk__calloc(n, m);
  if (!p)
    shk__die(1, "out of memory");
  return p;
}

void *shk__xrealloc(void *p, size_t n)
{
  p = shk__realloc(p, n);
  if (!p)
    shk__die(1, "out of memory");
  return p;
}

char *shk__xstrdup(const char *s)
{
  char *p = shk__strdup(s);
  if (!p)
    shk__die(1, "out of memory");
  return p;
}

char *shk__xasprintf(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  char *s = shk__vasprintf(fmt, ap);
  va_end(ap);
  if (!s)
    shk__die(1, "out of memory");
  return s;
}
