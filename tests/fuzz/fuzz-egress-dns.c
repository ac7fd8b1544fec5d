/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the DNS stub's query parser and the synthetic address
 * pool it feeds. The input is a run of framed messages (a two-byte length,
 * then the message). Each is parsed; a query for an acceptable name gets
 * the name's synthetic address, and the invariants the stub relies on must
 * hold: the same name keeps its index while remembered, an index leads
 * back to exactly the name it was handed out for in both address
 * families, the pool never holds more than its bound, and the reply is a
 * well-formed answer to the query. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  shk__dns_pool *pool = shk__dns_pool_new(8, size);
  if (!pool)
    abort();
  while (size >= 2) {
    size_t len = (size_t)(data[0] << 8 | data[1]);
    data += 2;
    size -= 2;
    if (len > size)
      len = size;
    shk__dns_query q;
    if (!shk__dns_parse_query(data, len, &q) && q.name_ok) {
      if (q.host.kind != SHK_HOST_NAME || strlen(q.host.text) > SHK_HOST_MAX)
        abort();
      uint32_t index, again;
      if (shk__dns_pool_get(pool, q.host.text, &index) < 0 ||
          shk__dns_pool_get(pool, q.host.text, &again) < 0 || again != index || index == 0)
        abort();
      if (shk__dns_pool_size(pool) > 8)
        abort();
      for (int family = 4; family <= 6; family += 2) {
        shk_ip ip;
        uint32_t back;
        shk__dns_pool_address(index, family, &ip);
        if (!shk__dns_pool_index(&ip, &back) || back != index || !shk_ip_nonpublic(&ip))
          abort();
        const char *name = shk__dns_pool_name(pool, back);
        if (!name || strcmp(name, q.host.text))
          abort();
      }
      shk_ip ip;
      shk__dns_pool_address(index, q.qtype == 28 ? 6 : 4, &ip);
      uint8_t out[2048];
      size_t n = shk__dns_build_reply(&q, &ip, 1, out, sizeof out);
      if (n < 12 || out[0] != (uint8_t)(q.id >> 8) || out[1] != (uint8_t)q.id || !(out[2] & 0x80))
        abort();
    }
    data += len;
    size -= len;
  }
  shk__dns_pool_free(pool);
  return 0;
}
