/* SPDX-License-Identifier: Apache-2.0 */
/* SOCKS5 (RFC 1928): the greeting and the CONNECT request, no
 * authentication. Hosts from the request go through the same
 * canonicalizer as every other host. */
#include "egress/egress-internal.h"

#include <string.h>

int shk__socks5_parse_greeting(const uint8_t *buf, size_t len, const char **reason)
{
  *reason = NULL;
  if (len >= 1 && buf[0] != 5) {
    *reason = "socks5-bad-version";
    return -1;
  }
  if (len < 2)
    return 0;
  size_t n = buf[1];
  if (n == 0) {
    *reason = "socks5-no-methods";
    return -1;
  }
  if (len < 2 + n)
    return 0;
  if (!memchr(buf + 2, 0x00, n)) {
    *reason = "socks5-no-acceptable-method";
    return -1;
  }
  return (int)(2 + n);
}

static int refuse(uint8_t *reply, const char **reason, uint8_t code, const char *why)
{
  *reply = code;
  *reason = why;
  return -1;
}

/* Safe on any bytes: each field is read only after the length check that
 * covers it, and a domain goes through shk_host_parse before use. */
int shk__socks5_parse_request(const uint8_t *buf, size_t len, shk__socks5_req *req,
                              uint8_t *reply, const char **reason)
{
  memset(req, 0, sizeof *req);
  *reply = SHK__SOCKS5_OK;
  *reason = NULL;
  if (len >= 1 && buf[0] != 5)
    return refuse(reply, reason, SHK__SOCKS5_FAILURE, "socks5-bad-version");
  if (len < 5)
    return 0;
  if (buf[1] != 1)
    return refuse(reply, reason, SHK__SOCKS5_CMD_UNSUPPORTED,
                  buf[1] == 2 ? "socks5-bind-refused"
                  : buf[1] == 3 ? "socks5-udp-refused" : "socks5-bad-command");
  if (buf[2] != 0)
    return refuse(reply, reason, SHK__SOCKS5_FAILURE, "socks5-bad-reserved");
  size_t need;
  switch (buf[3]) {
  case 1:
    need = 4 + 4 + 2;
    break;
  case 3:
    if (buf[4] == 0)
      return refuse(reply, reason, SHK__SOCKS5_NOT_ALLOWED, "host-empty");
    need = 4 + 1 + buf[4] + 2;
    break;
  case 4:
    need = 4 + 16 + 2;
    break;
  default:
    return refuse(reply, reason, SHK__SOCKS5_ATYP_UNSUPPORTED, "socks5-bad-address-type");
  }
  if (len < need)
    return 0;
  if (buf[3] == 3) {
    const char *r;
    if (shk_host_parse((const char *)buf + 5, buf[4], &req->host, &r, NULL) < 0)
      return refuse(reply, reason, SHK__SOCKS5_NOT_ALLOWED, r);
  } else {
    shk_host *h = &req->host;
    h->ip.family = buf[3] == 1 ? 4 : 6;
    memcpy(h->ip.b, buf + 4, h->ip.family == 4 ? 4 : 16);
    h->kind = h->ip.family == 4 ? SHK_HOST_IPV4 : SHK_HOST_IPV6;
    shk_ip_format(&h->ip, h->text);
  }
  req->port = (uint16_t)(buf[need - 2] << 8 | buf[need - 1]);
  if (req->port == 0)
    return refuse(reply, reason, SHK__SOCKS5_NOT_ALLOWED, "port-bad");
  return (int)need;
}
