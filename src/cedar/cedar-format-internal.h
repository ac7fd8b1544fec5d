/* Internal interfaces of the formatter (format.c) and the policy JSON
 * writer and reader (est.c). */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "cedar/cedar-internal.h"

/* A growable, NUL-terminated text buffer (malloc'd). */
typedef struct shk__buf {
  char *p;
  size_t len, cap;
} shk__buf;

void shk__buf_put(shk__buf *b, const char *s, size_t n);
void shk__buf_puts(shk__buf *b, const char *s);
void shk__buf_printf(shk__buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A Cedar string literal; in a pattern a literal '*' is written \*. */
void shk__buf_quote(shk__buf *b, const char *s, size_t n, bool pattern);
void shk__buf_uid(shk__buf *b, shk__uid u);

/* One policy as Cedar text, ending with ";\n". */
void shk__format_policy(shk__buf *b, const shk__policy *p);
