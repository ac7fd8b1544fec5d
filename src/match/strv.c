/* SPDX-License-Identifier: Apache-2.0 */
/* String vectors: one list type for every module that keeps strings. */
#include "shinken/match.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int shk_strv_push(shk_strv *v, const char *s)
{
  char *copy = strdup(s);
  if (!copy)
    return -ENOMEM;
  /* Room for the new string and the NULL that follows it. */
  char **nv = realloc(v->v, (v->n + 2) * sizeof *nv);
  if (!nv) {
    free(copy);
    return -ENOMEM;
  }
  nv[v->n++] = copy;
  nv[v->n] = NULL;
  v->v = nv;
  return 0;
}

int shk_strv_copy(shk_strv *dst, const shk_strv *src)
{
  *dst = (shk_strv){ NULL, 0 };
  for (size_t i = 0; i < src->n; i++) {
    if (shk_strv_push(dst, src->v[i]) < 0) {
      shk_strv_clear(dst);
      return -ENOMEM;
    }
  }
  return 0;
}

void shk_strv_clear(shk_strv *v)
{
  for (size_t i = 0; i < v->n; i++)
    free(v->v[i]);
  free(v->v);
  v->v = NULL;
  v->n = 0;
}
