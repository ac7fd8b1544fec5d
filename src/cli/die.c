/* SPDX-License-Identifier: Apache-2.0 */
/* The helpers that print and exit (src/cli/die.h): for the CLI and stage 2
 * only. */
#include "cli/die.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

static bool json_errors;

void shk__die_json(bool on)
{
  json_errors = on;
}

SHK_PRINTF(1, 0) static void vmsg(const char *fmt, va_list ap, int err, int code)
{
  char msg[2048];
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  if (err && n >= 0 && (size_t)n < sizeof msg)
    snprintf(msg + n, sizeof msg - (size_t)n, ": %s", strerror(err));
  fprintf(stderr, "shinken: %s\n", msg);
  if (code < 0 || !json_errors)
    return;
  /* The first line only: a usage text after it is for people. */
  msg[strcspn(msg, "\n")] = '\0';
  json_t *o = json_pack("{s:b, s:s, s:i}", "ok", 0, "error", msg, "status", code);
  char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
  if (s)
    printf("%s\n", s);
  fflush(stdout);
  free(s);
  json_decref(o);
}

void shk__die(int code, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vmsg(fmt, ap, 0, code);
  va_end(ap);
  exit(code);
}

void shk__die_errno(int code, const char *fmt, ...)
{
  int err = errno;
  va_list ap;
  va_start(ap, fmt);
  vmsg(fmt, ap, err, code);
  va_end(ap);
  exit(code);
}

void shk__warn(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vmsg(fmt, ap, 0, -1);
  va_end(ap);
}

void *shk__xmalloc(size_t n)
{
  void *p = shk__malloc(n);
  if (!p)
    shk__die(4, "out of memory");
  return p;
}

void *shk__xcalloc(size_t n, size_t m)
{
  void *p = shk__calloc(n, m);
  if (!p)
    shk__die(4, "out of memory");
  return p;
}

void *shk__xrealloc(void *p, size_t n)
{
  p = shk__realloc(p, n);
  if (!p)
    shk__die(4, "out of memory");
  return p;
}

char *shk__xstrdup(const char *s)
{
  char *p = shk__strdup(s);
  if (!p)
    shk__die(4, "out of memory");
  return p;
}

char *shk__xasprintf(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  char *s = shk__vasprintf(fmt, ap);
  va_end(ap);
  if (!s)
    shk__die(4, "out of memory");
  return s;
}
