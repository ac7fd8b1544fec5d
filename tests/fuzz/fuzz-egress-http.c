/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the proxy's HTTP request-head parser. Besides not
 * crashing or leaking, an accepted head must be self-consistent: it fits in
 * the input, the same bytes alone parse to the same target (so a request is
 * never judged on bytes that belong to the next one), its host is canonical,
 * and the head sent upstream carries no proxy credentials and no bare LF. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "egress/egress-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool contains_ci(const char *s, size_t n, const char *needle)
{
  size_t k = strlen(needle);
  for (size_t i = 0; i + k <= n; i++)
    if (!strncasecmp(s + i, needle, k))
      return true;
  return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *buf = (const char *)data;
  shk__http_req req;
  shk__http_refusal ref;
  memset(&req, 0, sizeof req);
  int r = shk__http_parse_head(buf, size, &req, &ref);
  if (r == -1) {
    if (ref.status < 400 || ref.status > 599 || !ref.reason || !*ref.reason)
      abort();
    return 0;
  }
  if (r == 0) {
    if (size >= SHK__HTTP_HEAD_MAX)
      abort(); /* an over-long head must be refused, not waited on forever */
    return 0;
  }
  if (r != 1 || req.head_len == 0 || req.head_len > size || req.port == 0)
    abort();
  shk_host again;
  if (shk_host_parse(req.host.text, strlen(req.host.text), &again, NULL, NULL) || strcmp(again.text, req.host.text))
    abort();
  if (!req.is_connect) {
    if (!req.upstream || req.upstream_len < 4)
      abort();
    if (contains_ci(req.upstream, req.upstream_len, "\nproxy-authorization:") ||
        contains_ci(req.upstream, req.upstream_len, "\nproxy-connection:") ||
        contains_ci(req.upstream, req.upstream_len, "\nkeep-alive:"))
      abort();
    for (size_t i = 0; i < req.upstream_len; i++)
      if (req.upstream[i] == '\n' && (i == 0 || req.upstream[i - 1] != '\r'))
        abort();
    if (memcmp(req.upstream + req.upstream_len - 4, "\r\n\r\n", 4))
      abort();
  }

  /* The head alone must parse to the same request. */
  shk__http_req again_req;
  memset(&again_req, 0, sizeof again_req);
  if (shk__http_parse_head(buf, req.head_len, &again_req, &ref) != 1 ||
      again_req.head_len != req.head_len || again_req.port != req.port ||
      strcmp(again_req.host.text, req.host.text) || again_req.is_connect != req.is_connect ||
      again_req.content_length != req.content_length)
    abort();
  shk__http_req_free(&again_req);
  shk__http_req_free(&req);
  return 0;
}
