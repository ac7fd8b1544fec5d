/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the HTTP/1.1 parsers of an inspected connection, the
 * origin-form request head and the upstream's response head, and the head
 * rebuilt for the upstream. Besides not crashing or leaking: an accepted
 * request names the granted host, its head alone parses the same, no
 * header the list hands the rewrite hook is one the proxy owns (framing,
 * Host, hop-by-hop), and the rebuilt head has exactly one Host, no bare LF
 * and no framing but the parser's own. The first input byte picks the
 * parser. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "egress/egress-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t count_ci(const char *s, size_t n, const char *needle)
{
  size_t k = strlen(needle), c = 0;
  for (size_t i = 0; i + k <= n; i++)
    if (!strncasecmp(s + i, needle, k))
      c++;
  return c;
}

static void request(const char *buf, size_t size)
{
  shk_host host;
  if (shk_host_parse("api.test", 8, &host, NULL, NULL))
    abort();
  static shk__http_origin_req req, again;
  shk__http_refusal ref;
  int r = shk__http_parse_origin(buf, size, &host, 443, 443, &req, &ref);
  if (r == -1) {
    if (ref.status < 400 || ref.status > 599 || !ref.reason || !*ref.reason)
      abort();
    return;
  }
  if (r == 0) {
    if (size >= SHK__HTTP_HEAD_MAX)
      abort();
    return;
  }
  if (r != 1 || req.head_len == 0 || req.head_len > size || !req.method[0])
    abort();
  if (req.chunked && req.content_length)
    abort();
  for (size_t i = 0; i < req.n_headers; i++) {
    const shk_egress_header *h = &req.headers[i];
    static const char *const owned[] = { "host", "content-length", "transfer-encoding",
                                         "connection", "proxy-authorization", "upgrade" };
    for (size_t j = 0; j < sizeof owned / sizeof owned[0]; j++)
      if (h->name_len == strlen(owned[j]) && !strncasecmp(h->name, owned[j], h->name_len))
        abort();
    if (h->name < buf || h->value < buf || h->value + h->value_len > buf + req.head_len)
      abort();
  }
  if (shk__http_parse_origin(buf, req.head_len, &host, 443, 443, &again, &ref) != 1 ||
      again.head_len != req.head_len || strcmp(again.method, req.method) ||
      again.content_length != req.content_length || again.chunked != req.chunked ||
      again.n_headers != req.n_headers)
    abort();
  char *up;
  size_t ulen;
  if (shk__http_build_origin(&req, &host, 443, 443, req.headers, req.n_headers, &up, &ulen) < 0)
    return;
  if (count_ci(up, ulen, "\r\nhost:") != 1 || count_ci(up, ulen, "\r\ntransfer-encoding:") > 1 ||
      count_ci(up, ulen, "\r\ncontent-length:") > 1 || ulen < 4 || memcmp(up + ulen - 4, "\r\n\r\n", 4))
    abort();
  for (size_t i = 0; i < ulen; i++)
    if (up[i] == '\n' && (i == 0 || up[i - 1] != '\r'))
      abort();
  /* The rebuilt head is itself one request the parser reads the same. */
  if (shk__http_parse_origin(up, ulen, &host, 443, 443, &again, &ref) != 1 ||
      again.head_len != ulen || again.content_length != req.content_length ||
      again.chunked != req.chunked)
    abort();
  free(up);
}

static void response(const char *buf, size_t size, const char *method)
{
  shk__http_resp resp;
  const char *why = NULL;
  int r = shk__http_parse_response(buf, size, method, &resp, &why);
  if (r == -1) {
    if (!why || !*why)
      abort();
    return;
  }
  if (r == 0) {
    if (size >= SHK__HTTP_HEAD_MAX)
      abort();
    return;
  }
  if (r != 1 || resp.head_len == 0 || resp.head_len > size || resp.status < 100 ||
      resp.status > 599 || (resp.chunked && resp.has_length))
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1)
    return 0;
  const char *buf = (const char *)data + 1;
  size--;
  switch (data[0] % 3) {
  case 0:
    request(buf, size);
    break;
  case 1:
    response(buf, size, "GET");
    break;
  default:
    response(buf, size, "HEAD");
  }
  return 0;
}
