/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes the strict validator. The input is a schema and a policy set
 * separated by a line "%%"; without one, the whole input is a policy set
 * checked against a fixed schema with a hierarchy, tags, an enumerated type,
 * optional attributes and every extension type. Whatever parses is
 * validated, so the checker sees every tree the parsers can build. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "shinken/cedar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char FIXED[] =
  "namespace N { entity G in [G] { l: Long };\n"
  "entity U in [G] { n: String, a?: Long, m?: U, s: Set<String>, r: { x?: Long } } tags String;\n"
  "entity D { i: ipaddr, t: datetime, d: decimal, u: duration };\n"
  "entity C enum [\"a\", \"b\"];\n"
  "action r; action v in [r] appliesTo { principal: [U, G], resource: D, context: { k: Long, o?: U } };\n"
  "action e in [v] appliesTo { principal: U, resource: [D, U] }; }\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *text = (const char *)data, *schema_text = FIXED;
  size_t schema_len = sizeof FIXED - 1;
  const char *sep = size >= 4 ? memmem(text, size, "\n%%\n", 4) : NULL;
  if (sep) {
    schema_text = text;
    schema_len = (size_t)(sep - text);
    size -= schema_len + 4;
    text = sep + 4;
  }
  shk_error err;
  shk_cedar_schema *schema = NULL;
  shk_cedar_policy_set *ps = NULL;
  if (shk_cedar_schema_parse(schema_text, schema_len, SHK_CEDAR_SCHEMA_TEXT, &schema, &err) == 0 &&
      shk_cedar_policy_set_parse(text, size, &ps, &err) == 0) {
    shk_cedar_validation_result r = { 0 };
    shk_cedar_validate(ps, schema, &r);
    shk_cedar_validation_result_clear(&r);
  }
  shk_cedar_policy_set_free(ps);
  shk_cedar_schema_free(schema);
  return 0;
}
