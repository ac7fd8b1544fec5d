/* A bump allocator. Policy sets, schemas and entity stores each own one, and
 * the evaluator resets a scratch arena between requests, so deciding a
 * request does not call malloc once the scratch arena has grown. */
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

shk__arena *shk__arena_new(void)
{
  return shk__xcalloc(1, sizeof(shk__arena));
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
  n = (n + 15) & ~(size_t)15;
  chunk *c = a->head;
  if (!c || c->size - c->used < n) {
    size_t size = n > CHUNK_MIN ? n : CHUNK_MIN;
    chunk *nc = shk__xmalloc(sizeof(chunk) + size);
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
