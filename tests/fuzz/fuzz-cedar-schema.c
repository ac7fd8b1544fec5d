/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes both schema readers (.cedarschema text and JSON) and the name
 * resolution behind them. The first byte picks the form. A schema that
 * resolves is queried through its lookups for every type and action. */
#include <stddef.h>
#include <stdint.h>

#include "cedar/cedar-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1)
    return 0;
  shk_cedar_schema_format fmt = data[0] & 1 ? SHK_CEDAR_SCHEMA_JSON : SHK_CEDAR_SCHEMA_TEXT;
  shk_cedar_schema *s;
  shk_error err;
  if (shk_cedar_schema_parse((const char *)data + 1, size - 1, fmt, &s, &err) != 0)
    return 0;
  const shk__schema *sc = &s->s;
  for (size_t i = 0; i < sc->n_etypes; i++)
    if (shk__schema_entity_type(sc, sc->etypes[i].name) != &sc->etypes[i])
      __builtin_trap();
  for (size_t i = 0; i < sc->n_actions; i++) {
    if (shk__schema_action(sc, sc->actions[i].uid) != &sc->actions[i])
      __builtin_trap();
    if (!shk__schema_is_action_type(sc, sc->actions[i].uid.type))
      __builtin_trap();
  }
  shk_cedar_schema_free(s);
  return 0;
}
