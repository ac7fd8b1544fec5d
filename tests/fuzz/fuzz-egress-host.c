/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the proxy's authority form ("host:port", "[v6]:port")
 * on top of the shared host parser (whose own target is fuzz-match).
 * Besides not crashing, an accepted authority must give a canonical host
 * that is a fixed point of shk_host_parse and holds only what a DNS name or
 * an IP literal may hold, and a port that is not 0: that is the property
 * every later check of the proxy relies on. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_canonical(const shk_host *h)
{
  size_t n = strnlen(h->text, sizeof h->text);
  if (n == 0 || n > SHK_HOST_MAX)
    abort();
  for (size_t i = 0; i < n; i++) {
    char c = h->text[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
              (h->kind == SHK_HOST_IPV6 && c == ':');
    if (!ok)
      abort();
  }
  shk_host again;
  if (shk_host_parse(h->text, n, &again, NULL, NULL) || again.kind != h->kind ||
      strcmp(again.text, h->text))
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *in = (const char *)data;
  shk_host h;
  uint16_t port = 0;
  for (int dflt = 0; dflt < 2; dflt++) {
    const char *r = shk__authority_parse(in, size, dflt ? 80 : 0, &h, &port);
    if (r) {
      if (!*r)
        abort(); /* a refusal names its reason */
      continue;
    }
    if (port == 0)
      abort();
    check_canonical(&h);
    /* An authority without userinfo or brackets around a name is a host
     * the shared parser accepts as well. */
    if (h.kind == SHK_HOST_NAME && !memchr(in, '[', size)) {
      const char *colon = memchr(in, ':', size);
      shk_host bare;
      if (shk_host_parse(in, colon ? (size_t)(colon - in) : size, &bare, NULL, NULL) ||
          strcmp(bare.text, h.text))
        abort();
    }
  }
  return 0;
}
