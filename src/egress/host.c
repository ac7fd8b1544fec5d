/* SPDX-License-Identifier: Apache-2.0 */
/* The authority form of the proxy's protocols ("host:port", "[v6]:port").
 * The host itself is canonicalized by the shared grammar
 * (shk_host_parse), so that every host the proxy sees, from any protocol,
 * is reduced to one canonical text before any policy check, and the check
 * and the dial can never disagree about what the name means. */
#include "egress/egress-internal.h"

#include <string.h>

const char *shk__authority_parse(const char *in, size_t len, uint16_t default_port,
                                 shk_host *host, uint16_t *port)
{
  size_t hostlen = len;
  const char *portp = NULL;
  if (memchr(in, '@', len))
    return "authority-userinfo";
  if (len > 0 && in[0] == '[') {
    const char *close = memchr(in, ']', len);
    if (!close)
      return "host-bad-ipv6";
    hostlen = (size_t)(close - in) + 1;
    if (hostlen < len) {
      if (in[hostlen] != ':')
        return "authority-bad";
      portp = in + hostlen + 1;
    }
  } else {
    const char *colon = memchr(in, ':', len);
    if (colon) {
      if (memchr(colon + 1, ':', (size_t)(in + len - colon - 1)))
        return "authority-bad"; /* a bare IPv6 literal needs brackets here */
      hostlen = (size_t)(colon - in);
      portp = colon + 1;
    }
  }
  const char *reason;
  if (shk_host_parse(in, hostlen, host, &reason, NULL) < 0)
    return reason;
  if (portp)
    return shk_port_parse(portp, (size_t)(in + len - portp), port, NULL) < 0 ? "port-bad" : NULL;
  if (!default_port)
    return "port-missing";
  *port = default_port;
  return NULL;
}
