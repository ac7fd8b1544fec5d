/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the SOCKS5 greeting and request parsers. The first
 * byte chooses which one. Besides not crashing, a parser may never claim
 * more bytes than it was given, an accepted request must name a canonical
 * host and a real port, a refusal must carry a nonzero reply code, and the
 * consumed bytes alone must parse the same way. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1)
    return 0;
  const uint8_t *buf = data + 1;
  size_t len = size - 1;
  const char *reason = NULL;
  if (data[0] & 1) {
    int n = shk__socks5_parse_greeting(buf, len, &reason);
    if (n > (int)len || (n < 0 && !reason))
      abort();
    if (n > 0 && shk__socks5_parse_greeting(buf, (size_t)n, &reason) != n)
      abort();
    return 0;
  }
  shk__socks5_req req;
  uint8_t reply = 0;
  int n = shk__socks5_parse_request(buf, len, &req, &reply, &reason);
  if (n > (int)len)
    abort();
  if (n < 0 && (reply == SHK__SOCKS5_OK || !reason))
    abort();
  if (n > 0) {
    shk_host again;
    if (req.port == 0 || shk_host_parse(req.host.text, strlen(req.host.text), &again, NULL, NULL) ||
        strcmp(again.text, req.host.text))
      abort();
    shk__socks5_req req2;
    if (shk__socks5_parse_request(buf, (size_t)n, &req2, &reply, &reason) != n ||
        req2.port != req.port || strcmp(req2.host.text, req.host.text))
      abort();
  }
  return 0;
}
