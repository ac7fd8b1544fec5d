/* SPDX-License-Identifier: Apache-2.0 */
/* A bump allocator. Policy sets, schemas and entity stores each own one, and
 * the evaluator resets a scratch arena between requests, so deciding a
 * request does not call malloc once the scratch arena has grown.
 *
 * Out of memory unwinds: an allocation that fails longjmps to the innermost
 * shk__oom_guard() of the thread, which returns -ENOMEM. So the engine's
 * many small allocations need no check each, and the hot path pays nothing
 * for them. */
#include <errno.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cedar/cedar-internal.h"
#include "common/common.h"

typedef struct chunk {
  struct chunk *next;
  size_t size, used;
  _Alignas(16) unsigned char data[];
} chunk;

struct shk__arena {
  chunk *head;
};

#define CHUNK_MIN (64 * 1024 - sizeof(chunk))

/* The innermost guard of this thread; NULL outside every guard. */
static _Thread_local jmp_buf *guard;

int shk__oom_guard(int (*fn)(void *ctx), void *ctx, shk_error *err)
{
  jmp_buf here, *outer = guard;
  /* Nothing here changes between setjmp and the longjmp that may come
   * back to it, so every local keeps its value across the jump. */
  int r;
  guard = &here;
  if (setjmp(here))
    r = shk__error_nomem(err);
  else
    r = fn(ctx);
  guard = outer;
  return r;
}

void shk__oom_unwind(void)
{
  /* Unreachable in a correct engine: every entry point that allocates
   * runs under a guard, which the out-of-memory test checks. A missing one
   * is a bug, reported as every broken belief is. */
  if (!guard)
    shk__assert_fail("an allocation outside any out-of-memory guard", __FILE__, __LINE__);
  longjmp(*guard, 1);
}

void *shk__umalloc(size_t n)
{
  void *p = shk__malloc(n);
  if (!p)
    shk__oom_unwind();
  return p;
}

void *shk__ucalloc(size_t n, size_t m)
{
  void *p = shk__calloc(n, m);
  if (!p)
    shk__oom_unwind();
  return p;
}

void *shk__urealloc(void *p, size_t n, size_t m)
{
  void *q = shk__reallocarray(p, n, m);
  if (!q)
    shk__oom_unwind();
  return q;
}

shk__arena *shk__arena_new(void)
{
  return shk__calloc(1, sizeof(shk__arena));
}

void shk__arena_free(shk__arena *a)
{
  if (!a)
    return;
  for (chunk *c = a->head, *n; c; c = n) {
    n = c->next;
    free(c);
  }
  free(a);
}

void shk__arena_reset(shk__arena *a)
{
  if (!a->head)
    return;
  /* Keep the largest chunk: the next request most likely needs as much. */
  chunk *keep = a->head;
  for (chunk *c = a->head->next, *n; c; c = n) {
    n = c->next;
    if (c->size > keep->size) {
      free(keep);
      keep = c;
    } else {
      free(c);
    }
  }
  keep->next = NULL;
  keep->used = 0;
  a->head = keep;
}

void *shk__arena_alloc(shk__arena *a, size_t n)
{
  if (n > SIZE_MAX / 2)
    shk__oom_unwind();
  n = (n + 15) & ~(size_t)15;
  chunk *c = a->head;
  if (!c || c->size - c->used < n) {
    size_t size = n > CHUNK_MIN ? n : CHUNK_MIN;
    chunk *nc = shk__umalloc(sizeof(chunk) + size);
    nc->size = size;
    nc->used = 0;
    /* A big one-off allocation goes behind the current chunk so the
     * current chunk's free space is not wasted. */
    if (c && n > CHUNK_MIN / 2) {
      nc->next = c->next;
      c->next = nc;
      nc->used = n;
      return nc->data;
    }
    nc->next = c;
    a->head = c = nc;
  }
  void *p = c->data + c->used;
  c->used += n;
  return p;
}

void *shk__arena_calloc(shk__arena *a, size_t n)
{
  void *p = shk__arena_alloc(a, n);
  memset(p, 0, n);
  return p;
}

char *shk__arena_strndup(shk__arena *a, const char *s, size_t n)
{
  char *p = shk__arena_alloc(a, n + 1);
  if (n)
    memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

int shk__str_cmp(shk__str a, shk__str b)
{
  size_t n = a.n < b.n ? a.n : b.n;
  int r = n ? memcmp(a.p, b.p, n) : 0;
  if (r)
    return r;
  return a.n < b.n ? -1 : a.n > b.n;
}
