/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the reader of the solver's replies (an S-expression
 * reader, shk__sx_parse), the one text from outside the process that the
 * analyzer parses. Besides not crashing: an expression read consumes input
 * and leaves the position inside it, a text that is not yet complete
 * leaves the position where it was, and an expression written back out
 * (atoms as read, strings as SMT-LIB literals) reads back to the same
 * expression. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/analysis-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* X as text; false when a string holds what no SMT-LIB literal can. */
static bool print(shk__text *t, const shk__sx *x, unsigned depth)
{
  if (depth > 4000)
    abort();
  switch (x->kind) {
  case SHK__SX_ATOM:
    if (x->n == 0 || !x->s)
      abort();
    shk__text_put(t, x->s, x->n);
    return true;
  case SHK__SX_STRING:
    return shk__text_smt_string(t, (shk__str){ x->s, x->n });
  case SHK__SX_LIST:
    shk__text_puts(t, "(");
    for (size_t i = 0; i < x->n_items; i++) {
      if (!x->items[i])
        abort();
      if (i)
        shk__text_puts(t, " ");
      if (!print(t, x->items[i], depth + 1))
        return false;
    }
    shk__text_puts(t, ")");
    return true;
  }
  abort();
}

static void roundtrip(const shk__sx *x)
{
  shk__text a = { 0 }, b = { 0 };
  if (print(&a, x, 0) && !a.oom) {
    shk__pool *p = shk__pool_new();
    size_t pos = 0;
    shk__sx *y = NULL;
    /* A lone atom ends only where the text does; a space marks its end. */
    shk__text_puts(&a, " ");
    int r = p ? shk__sx_parse(p, a.p, a.n, &pos, &y) : -ENOMEM;
    if (r == 1) {
      if (!print(&b, y, 0) || b.oom || b.n + 1 != a.n || memcmp(a.p, b.p, b.n))
        abort();
    } else if (r != -ENOMEM) {
      abort();
    }
    shk__pool_free(p);
  }
  shk__text_free(&a);
  shk__text_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  shk__pool *p = shk__pool_new();
  if (!p)
    return 0;
  const char *text = (const char *)data;
  size_t pos = 0;
  for (int i = 0; i < 256; i++) {
    size_t before = pos;
    shk__sx *x = NULL;
    int r = shk__sx_parse(p, text, size, &pos, &x);
    if (r == 1) {
      if (!x || pos <= before || pos > size)
        abort();
      roundtrip(x);
      continue;
    }
    if (r == 0 && pos != before)
      abort();
    if (r != 0 && r != -EINVAL && r != -ENOMEM)
      abort();
    break;
  }
  shk__pool_free(p);
  return 0;
}
