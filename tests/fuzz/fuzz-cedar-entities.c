/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes the entity and context JSON readers, with and without a schema.
 * The first byte picks the mode; the rest is the JSON. A store that loads
 * is also queried, so that the ancestor closure and attribute values are
 * read back, not only built. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shinken/cedar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char SCHEMA[] =
  "entity Group in [Group] { name: String };\n"
  "entity User in [Group] { age: Long, home?: ipaddr, boss?: User, tags?: Set<String>,\n"
  "  limits?: { max: decimal, since?: datetime, ttl?: duration } } tags String;\n"
  "entity Color enum [\"red\", \"blue\"];\n"
  "action view appliesTo { principal: [User], resource: [Group, Color],\n"
  "  context: { ip?: ipaddr, who?: User, n?: Long, set?: Set<Long> } };\n"
  "action edit in [view];\n";

static const char POLICIES[] =
  "permit(principal in Group::\"g\", action, resource) when {\n"
  "  principal has age && principal.age > 1 && context has n && context.n == 1 };\n"
  "forbid(principal, action, resource) when { principal.hasTag(\"x\") &&\n"
  "  principal.getTag(\"x\") == \"y\" };\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static shk_cedar_schema *schema;
  static shk_cedar_policy_set *ps;
  shk_error err;
  if (!schema) {
    if (shk_cedar_schema_parse(SCHEMA, strlen(SCHEMA), SHK_CEDAR_SCHEMA_TEXT, &schema, &err) < 0 ||
        shk_cedar_policy_set_parse(POLICIES, strlen(POLICIES), &ps, &err) < 0)
      __builtin_trap();
  }
  if (size < 1)
    return 0;
  const shk_cedar_schema *s = (data[0] & 1) ? schema : NULL;
  const char *json = (const char *)data + 1;
  size_t len = size - 1;

  shk_cedar_entities *es = NULL;
  if (!(data[0] & 2)) {
    if (shk_cedar_entities_parse(json, len, s, &es, &err) < 0)
      return 0;
  }
  /* As a context (it must be NUL-terminated for this entry point). */
  char *ctx = NULL;
  if (data[0] & 2) {
    ctx = malloc(len + 1);
    memcpy(ctx, json, len);
    ctx[len] = '\0';
  }
  shk_cedar_request *req = NULL;
  if (shk_cedar_request_new("User::\"u\"", "Action::\"view\"", "Group::\"g\"", ctx, s,
                            (data[0] & 4) != 0, &req, &err) == 0) {
    shk_cedar_response resp = { 0 };
    shk_cedar_is_authorized(ps, es, req, &resp);
    shk_cedar_response_clear(&resp);
    shk_cedar_request_free(req);
  }
  free(ctx);
  shk_cedar_entities_free(es);
  return 0;
}
