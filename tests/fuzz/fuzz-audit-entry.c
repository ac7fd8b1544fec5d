/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the checker of stored entries, which reads whatever a
 * tampered store holds. Besides not crashing: what it accepts has every
 * key once and in order; here it is checked that an accepted entry is a
 * JSON object ending at its last byte (a byte more, or a changed last byte,
 * is refused), and that whatever the builder accepts, the serializer turns
 * into an entry the checker accepts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  uint64_t seq;
  shk__hash prev;
  shk_error err;
  const char *s = (const char *)data;
  if (shk__audit_entry_check(s, size, &seq, prev, &err) == 0) {
    if (size < 2 || s[0] != '{' || s[size - 1] != '}')
      abort();
    char *copy = malloc(size + 1);
    if (!copy)
      return 0;
    memcpy(copy, s, size);
    copy[size] = ' ';
    if (shk__audit_entry_check(copy, size + 1, &seq, prev, &err) == 0)
      abort();
    copy[size - 1] = ']';
    if (shk__audit_entry_check(copy, size, &seq, prev, &err) == 0)
      abort();
    free(copy);
  }
  /* Any event the builder accepts serializes to an entry the checker
   * accepts: the input read as (setter and field, length, bytes) runs. */
  shk_audit_event e;
  shk_audit_event_init(&e, "fuzz");
  for (size_t i = 0; i + 2 <= size;) {
    int f = data[i] % SHK_AUDIT_FIELD_COUNT, how = data[i] >> 6;
    size_t n = data[i + 1];
    i += 2;
    if (n > size - i)
      n = size - i;
    char v[256];
    memcpy(v, data + i, n);
    v[n] = '\0';
    i += n;
    const char *list[] = { v, v, NULL };
    if (how == 0)
      shk_audit_str(&e, (shk_audit_field)f, v);
    else if (how == 1)
      shk_audit_int(&e, (shk_audit_field)f, (int64_t)n * 1000003 - 77777);
    else if (how == 2)
      shk_audit_strv(&e, (shk_audit_field)f, list);
    else
      shk_audit_hashed(&e, n % 2 ? "a" : "b_1", v, n);
  }
  if (e.error == 0) {
    shk__abuf out = { 0 };
    shk__hash zero = { 0 };
    if (shk__audit_serialize(e.buf, e.len, e.time_ns, 1, zero, &out) != 0 ||
        shk__audit_entry_check(out.p, out.len, &seq, prev, &err) != 0 || seq != 1)
      abort();
    shk__abuf_free(&out);
  }
  return 0;
}
