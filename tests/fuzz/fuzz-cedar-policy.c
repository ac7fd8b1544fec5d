/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes the policy lexer and parser. A policy set that parses is walked,
 * and every template is linked, so the whole tree is read back, not only
 * built; the entity-reference reader gets the same bytes. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cedar/cedar-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t walk(const shk__expr *e)
{
  if (!e)
    return 0;
  size_t n = 1 + walk(e->a) + walk(e->b) + walk(e->c);
  for (size_t i = 0; i < e->n_items; i++)
    n += walk(e->items[i]) + (e->keys ? e->keys[i].n : 0);
  for (size_t i = 0; i < e->n_pat; i++)
    n += e->pat[i].wildcard;
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  shk__arena *a = shk__arena_new();
  shk__policy **ps;
  size_t n;
  shk_error err;
  const char *text = (const char *)data;
  if (shk__parse_policies(a, text, size, &ps, &n, &err) == 0) {
    shk__uid u = { SHK__STR_LIT("User"), SHK__STR_LIT("alice") };
    for (size_t i = 0; i < n; i++) {
      size_t nodes = 0;
      for (size_t c = 0; c < ps[i]->n_conds; c++)
        nodes += walk(ps[i]->conds[c].body);
      (void)nodes;
      if (ps[i]->is_template) {
        shk__policy *link;
        shk__link_template(a, ps[i], SHK__STR_LIT("link"), ps[i]->principal.slot ? &u : NULL,
                           ps[i]->resource.slot ? &u : NULL, &link, &err);
      }
    }
  }
  shk__uid u;
  shk__parse_entity_ref(a, text, size, &u, &err);
  shk__is_valid_name(text, size);
  shk__arena_free(a);
  return 0;
}
