/* libFuzzer target: the egress host canonicalizer, the authority and port
 * parsers and the strict IP parser. Besides not crashing, a canonical host
 * must be a fixed point (canonicalizing its text again gives the same host)
 * and must contain only what a DNS name or an IP literal may contain: that
 * is the property every later check relies on. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_canonical(const shk__host *h)
{
  size_t n = strnlen(h->text, sizeof h->text);
  if (n == 0 || n > SHK__HOST_MAX)
    abort();
  for (size_t i = 0; i < n; i++) {
    char c = h->text[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
              (h->kind == SHK__HOST_IPV6 && c == ':');
    if (!ok)
      abort();
  }
  if (h->kind == SHK__HOST_NAME && (h->text[n - 1] == '.' || h->text[0] == '.' || strstr(h->text, "..")))
    abort();
  shk__host again;
  if (shk__host_canon(h->text, n, &again) || again.kind != h->kind || strcmp(again.text, h->text))
    abort();
  if (h->kind != SHK__HOST_NAME) {
    shk__ip ip;
    char buf[SHK__IP_TEXT_MAX];
    if (shk__ip_parse(h->text, n, &ip) || memcmp(&ip, &h->ip, sizeof ip))
      abort();
    shk__ip_format(&h->ip, buf);
    if (strcmp(buf, h->text))
      abort();
    /* The classifier is total: it must answer for every address. */
    (void)shk__ip_nonpublic(&h->ip);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *in = (const char *)data;
  shk__host h;
  if (!shk__host_canon(in, size, &h))
    check_canonical(&h);

  uint16_t port = 0;
  if (!shk__authority_parse(in, size, 0, &h, &port)) {
    if (port == 0)
      abort();
    check_canonical(&h);
  }
  if (!shk__authority_parse(in, size, 80, &h, &port)) {
    if (port == 0)
      abort();
    check_canonical(&h);
  }
  if (!shk__port_parse(in, size, &port) && port == 0)
    abort();

  /* The strict parser accepts a subset of what the canonicalizer accepts,
   * and both must agree on the address. */
  shk__ip ip;
  if (!shk__ip_parse(in, size, &ip)) {
    char buf[SHK__IP_TEXT_MAX];
    shk__ip back;
    shk__ip_format(&ip, buf);
    if (shk__ip_parse(buf, strlen(buf), &back) || memcmp(&back, &ip, sizeof ip))
      abort();
    if (shk__host_canon(in, size, &h) || h.kind == SHK__HOST_NAME || memcmp(&h.ip, &ip, sizeof ip))
      abort();
  }
  shk__cidr c;
  if (!shk__cidr_parse(in, size, &c)) {
    if (c.prefix > (c.ip.family == 4 ? 32 : 128) || !shk__cidr_contains(&c, &c.ip))
      abort();
  }
  return 0;
}
