/* SPDX-License-Identifier: Apache-2.0 */
/* The analyzer's small helpers: a pool that fails softly, text buffers,
 * SMT-LIB string literals and an S-expression reader for the solver's
 * replies. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/analysis-internal.h"

/* ---------------------------------------------------------------- pool */

typedef struct chunk {
  struct chunk *next;
  size_t used, cap;
  max_align_t data[];
} chunk;

struct shk__pool {
  chunk *head;
};

shk__pool *shk__pool_new(void)
{
  return calloc(1, sizeof(shk__pool));
}

void shk__pool_free(shk__pool *p)
{
  if (!p)
    return;
  for (chunk *c = p->head, *next; c; c = next) {
    next = c->next;
    free(c);
  }
  free(p);
}

void *shk__pool_alloc(shk__pool *p, size_t n)
{
  n = (n + 15) & ~(size_t)15;
  if (n == 0)
    n = 16;
  chunk *c = p->head;
  if (!c || c->cap - c->used < n) {
    size_t cap = n > 32768 ? n : 32768;
    chunk *nc = malloc(sizeof *nc + cap);
    if (!nc)
      return NULL;
    nc->used = 0;
    nc->cap = cap;
    nc->next = p->head;
    p->head = nc;
    c = nc;
  }
  void *r = (char *)c->data + c->used;
  c->used += n;
  memset(r, 0, n);
  return r;
}

char *shk__pool_strndup(shk__pool *p, const char *s, size_t n)
{
  char *r = shk__pool_alloc(p, n + 1);
  if (r) {
    memcpy(r, s, n);
    r[n] = '\0';
  }
  return r;
}

/* ---------------------------------------------------------------- text */

static bool reserve(shk__text *t, size_t more)
{
  if (t->oom)
    return false;
  if (t->n + more + 1 <= t->cap)
    return true;
  size_t cap = t->cap ? t->cap : 256;
  while (cap < t->n + more + 1)
    cap *= 2;
  char *p = realloc(t->p, cap);
  if (!p) {
    t->oom = true;
    return false;
  }
  t->p = p;
  t->cap = cap;
  return true;
}

void shk__text_put(shk__text *t, const char *s, size_t n)
{
  if (!reserve(t, n))
    return;
  memcpy(t->p + t->n, s, n);
  t->n += n;
  t->p[t->n] = '\0';
}

void shk__text_puts(shk__text *t, const char *s)
{
  shk__text_put(t, s, strlen(s));
}

void shk__text_printf(shk__text *t, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  char small[256];
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) {
    t->oom = true;
    return;
  }
  if ((size_t)n < sizeof small) {
    shk__text_put(t, small, (size_t)n);
    return;
  }
  if (!reserve(t, (size_t)n))
    return;
  va_start(ap, fmt);
  vsnprintf(t->p + t->n, (size_t)n + 1, fmt, ap);
  va_end(ap);
  t->n += (size_t)n;
}

void shk__text_free(shk__text *t)
{
  free(t->p);
  *t = (shk__text){ 0 };
}

/* One UTF-8 sequence at s[*i]; -1 when it is not one. */
static long utf8_next(const unsigned char *s, size_t n, size_t *i)
{
  unsigned char c = s[*i];
  long cp;
  size_t len;
  if (c < 0x80) {
    cp = c;
    len = 1;
  } else if ((c & 0xe0) == 0xc0) {
    cp = c & 0x1f;
    len = 2;
  } else if ((c & 0xf0) == 0xe0) {
    cp = c & 0x0f;
    len = 3;
  } else if ((c & 0xf8) == 0xf0) {
    cp = c & 0x07;
    len = 4;
  } else {
    return -1;
  }
  if (*i + len > n)
    return -1;
  for (size_t k = 1; k < len; k++) {
    if ((s[*i + k] & 0xc0) != 0x80)
      return -1;
    cp = (cp << 6) | (s[*i + k] & 0x3f);
  }
  *i += len;
  return cp;
}

bool shk__text_smt_string(shk__text *t, shk__str s)
{
  /* Checked first, so that nothing is appended for a string we refuse. */
  for (size_t i = 0; i < s.n;) {
    long cp = utf8_next((const unsigned char *)s.p, s.n, &i);
    if (cp < 0 || cp > 0x2ffff)
      return false;
  }
  shk__text_put(t, "\"", 1);
  for (size_t i = 0; i < s.n;) {
    long cp = utf8_next((const unsigned char *)s.p, s.n, &i);
    if (cp == '"')
      shk__text_put(t, "\"\"", 2);
    else if (cp >= 0x20 && cp < 0x7f && cp != '\\')
      shk__text_put(t, (const char[]){ (char)cp }, 1);
    else
      shk__text_printf(t, "\\u{%lx}", cp);
  }
  shk__text_put(t, "\"", 1);
  return true;
}

/* ---------------------------------------------------------------- S-expressions */

static void utf8_put(shk__text *t, unsigned long cp)
{
  char b[4];
  size_t n;
  if (cp < 0x80) {
    b[0] = (char)cp;
    n = 1;
  } else if (cp < 0x800) {
    b[0] = (char)(0xc0 | (cp >> 6));
    b[1] = (char)(0x80 | (cp & 0x3f));
    n = 2;
  } else if (cp < 0x10000) {
    b[0] = (char)(0xe0 | (cp >> 12));
    b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    b[2] = (char)(0x80 | (cp & 0x3f));
    n = 3;
  } else {
    b[0] = (char)(0xf0 | (cp >> 18));
    b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    b[3] = (char)(0x80 | (cp & 0x3f));
    n = 4;
  }
  shk__text_put(t, b, n);
}

/* Decodes the body of an SMT-LIB 2.6 string literal: "" is a quote, and
 * \u{X} (1 to 5 hex digits) and \uXXXX are code points; any other
 * backslash stands for itself. */
static int decode_string(shk__pool *p, const char *s, size_t n, shk__sx *out)
{
  shk__text t = { 0 };
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '"' && i + 1 < n && s[i + 1] == '"') {
      shk__text_put(&t, "\"", 1);
      i++;
      continue;
    }
    if (s[i] == '\\' && i + 1 < n && s[i + 1] == 'u') {
      size_t j = i + 2, digits = 0;
      unsigned long cp = 0;
      bool braces = j < n && s[j] == '{';
      if (braces)
        j++;
      while (j < n && digits < (braces ? 5u : 4u) && shk__hex_value((unsigned char)s[j]) >= 0) {
        cp = cp * 16 + (unsigned long)shk__hex_value((unsigned char)s[j]);
        j++;
        digits++;
      }
      bool ok = braces ? digits >= 1 && j < n && s[j] == '}' : digits == 4;
      if (ok) {
        utf8_put(&t, cp);
        i = braces ? j : j - 1;
        continue;
      }
    }
    shk__text_put(&t, &s[i], 1);
  }
  if (t.oom) {
    shk__text_free(&t);
    return -ENOMEM;
  }
  out->s = shk__pool_strndup(p, t.p ? t.p : "", t.n);
  out->n = t.n;
  shk__text_free(&t);
  return out->s ? 0 : -ENOMEM;
}

static bool is_space(char c)
{
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* The end of the expression starting at `i`, or 0 when the text ends
 * first; -1 when it is malformed. A first pass, so the second allocates
 * only for complete expressions. */
static long sx_extent(const char *t, size_t n, size_t i)
{
  int depth = 0;
  while (i < n) {
    char c = t[i];
    if (is_space(c) && depth == 0)
      return -1;
    if (c == '"') {
      for (i++;; i++) {
        if (i >= n)
          return 0;
        if (t[i] == '"') {
          if (i + 1 < n && t[i + 1] == '"') {
            i++;
            continue;
          }
          if (i + 1 >= n)
            return depth == 0 ? (long)(i + 1) : 0;
          break;
        }
      }
      i++;
      if (depth == 0)
        return (long)i;
      continue;
    }
    if (c == '|') {
      for (i++; i < n && t[i] != '|'; i++)
        ;
      if (i >= n)
        return 0;
      i++;
      if (depth == 0)
        return (long)i;
      continue;
    }
    if (c == '(') {
      depth++;
      i++;
      continue;
    }
    if (c == ')') {
      if (depth == 0)
        return -1;
      depth--;
      i++;
      if (depth == 0)
        return (long)i;
      continue;
    }
    if (is_space(c)) {
      i++;
      continue;
    }
    /* An atom. */
    size_t j = i;
    while (j < n && !is_space(t[j]) && t[j] != '(' && t[j] != ')' && t[j] != '"')
      j++;
    if (depth == 0)
      return j < n ? (long)j : 0;
    i = j;
  }
  return 0;
}

static int sx_build(shk__pool *p, const char *t, size_t end, size_t *i, shk__sx **out,
                    unsigned depth)
{
  if (depth > 2000)
    return -EINVAL;
  while (*i < end && is_space(t[*i]))
    (*i)++;
  if (*i >= end)
    return -EINVAL;
  shk__sx *x = shk__pool_alloc(p, sizeof *x);
  if (!x)
    return -ENOMEM;
  char c = t[*i];
  if (c == '(') {
    (*i)++;
    size_t cap = 0;
    x->kind = SHK__SX_LIST;
    for (;;) {
      while (*i < end && is_space(t[*i]))
        (*i)++;
      if (*i >= end)
        return -EINVAL;
      if (t[*i] == ')') {
        (*i)++;
        break;
      }
      if (x->n_items == cap) {
        size_t nc = cap ? cap * 2 : 4;
        shk__sx **items = shk__pool_alloc(p, nc * sizeof *items);
        if (!items)
          return -ENOMEM;
        if (cap)
          memcpy(items, x->items, cap * sizeof *items);
        x->items = items;
        cap = nc;
      }
      int r = sx_build(p, t, end, i, &x->items[x->n_items], depth + 1);
      if (r < 0)
        return r;
      x->n_items++;
    }
  } else if (c == '"') {
    size_t j = *i + 1;
    for (;; j++) {
      if (j >= end)
        return -EINVAL;
      if (t[j] == '"') {
        if (j + 1 < end && t[j + 1] == '"') {
          j++;
          continue;
        }
        break;
      }
    }
    x->kind = SHK__SX_STRING;
    int r = decode_string(p, t + *i + 1, j - *i - 1, x);
    if (r < 0)
      return r;
    *i = j + 1;
  } else if (c == ')') {
    return -EINVAL;
  } else {
    size_t j = *i;
    if (c == '|') {
      for (j++; j < end && t[j] != '|'; j++)
        ;
      j++;
    } else {
      while (j < end && !is_space(t[j]) && t[j] != '(' && t[j] != ')' && t[j] != '"')
        j++;
    }
    x->kind = SHK__SX_ATOM;
    x->s = shk__pool_strndup(p, t + *i, j - *i);
    x->n = j - *i;
    if (!x->s)
      return -ENOMEM;
    *i = j;
  }
  *out = x;
  return 0;
}

int shk__sx_parse(shk__pool *p, const char *text, size_t n, size_t *pos, shk__sx **out)
{
  size_t i = *pos;
  while (i < n && is_space(text[i]))
    i++;
  if (i >= n)
    return 0;
  long end = sx_extent(text, n, i);
  if (end < 0)
    return -EINVAL;
  if (end == 0)
    return 0;
  int r = sx_build(p, text, (size_t)end, &i, out, 0);
  if (r < 0)
    return r;
  *pos = (size_t)end;
  return 1;
}

bool shk__sx_is(const shk__sx *x, const char *atom)
{
  return x && x->kind == SHK__SX_ATOM && x->n == strlen(atom) && !memcmp(x->s, atom, x->n);
}
