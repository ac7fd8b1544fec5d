/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the secret broker's header rewriter. The input is a
 * byte of flags (bit 0: TLS, bits 1-2: which of the two secrets are live),
 * a host line (the host, then after a space the request target, if any),
 * then header lines "name:value". Besides not crashing or
 * leaking, every answer must keep the broker's promises: a secret's value
 * goes only to a host its pattern matches, over TLS unless the secret was
 * opted in to plain HTTP, and only while its use is live; no sentinel ever
 * leaves (it is replaced or the request is refused), and one in the
 * request target goes only to the secret's own hosts; an injected request
 * carries exactly one header of the secret's name; a refusal names its
 * reason and returns no list. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "shinken/broker.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define GH_VALUE "ghp_SECRETvalue0123456789abcdefghijkl"
#define GH_SENTINEL "ghp_SENTINELxx0123456789abcdefghijkl"
#define NPM_VALUE "npm_SECRETnpm0123456789abcdef"

static bool has(const char *s, size_t n, const char *needle)
{
  return memmem(s, n, needle, strlen(needle)) != NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1)
    return 0;
  unsigned flags = data[0];
  const char *in = (const char *)data + 1, *end = (const char *)data + size;
  const char *nl = memchr(in, '\n', (size_t)(end - in));
  size_t hl = nl ? (size_t)(nl - in) : (size_t)(end - in);
  if (hl > 253)
    return 0;
  char host[254];
  memcpy(host, in, hl);
  host[hl] = 0;
  if (memchr(host, 0, hl))
    return 0;
  const char *target = NULL;
  size_t target_len = 0;
  char *sp = strchr(host, ' ');
  if (sp) {
    *sp = 0;
    target = in + (sp - host) + 1;
    target_len = hl - (size_t)(sp - host) - 1;
    hl = (size_t)(sp - host);
  }

  shk_egress_header hs[64];
  size_t n = 0;
  for (const char *p = nl ? nl + 1 : end; p < end && n < 64;) {
    const char *e = memchr(p, '\n', (size_t)(end - p));
    const char *le = e ? e : end;
    const char *colon = memchr(p, ':', (size_t)(le - p));
    if (colon)
      hs[n++] = (shk_egress_header){ p, (size_t)(colon - p), colon + 1, (size_t)(le - colon - 1) };
    p = e ? e + 1 : end;
  }

  shk_broker_secret gh = { .name = "gh", .host = "**.github.test", .header_name = "Authorization",
                           .header_tmpl = "Bearer {}", .value = GH_VALUE,
                           .value_len = sizeof GH_VALUE - 1 };
  shk_broker_secret npm = { .name = "npm", .host = "registry.npm.test:443", .header_name = "X-Npm",
                            .header_tmpl = "{}", .allow_plain_http = true, .value = NPM_VALUE,
                            .value_len = sizeof NPM_VALUE - 1 };
  if (shk_host_pattern_parse(gh.host, strlen(gh.host), 0, &gh.pattern, NULL) ||
      shk_host_pattern_parse("registry.npm.test:443", 21, 0, &npm.pattern, NULL))
    abort();
  shk_broker_use uses[2] = {
    { .secret = &gh, .sentinel = GH_SENTINEL, .sentinel_len = sizeof GH_SENTINEL - 1,
      .live = flags & 2, .revoked = !(flags & 2) && (flags & 16) },
    { .secret = &npm, .live = flags & 4 },
  };
  shk_egress_http_request req = { .session = "s", .host = host, .port = (flags & 8) ? 80 : 443,
                                  .tls = flags & 1, .method = "GET", .headers = hs, .n_headers = n,
                                  .target = target, .target_len = target_len };
  shk_egress_header *out = NULL;
  size_t n_out = 0;
  const char *reason = NULL;
  const shk_broker_use *hit = NULL;
  bool injected[2] = { false, false };
  int r = shk_broker_rewrite(uses, 2, &req, &out, &n_out, &reason, &hit, injected);
  if (r) {
    if (out || !reason || !*reason || !hit)
      abort();
    return 0;
  }
  /* A sentinel in the target, which is never rewritten, goes only where
   * its secret is injected. */
  if (target && has(target, target_len, GH_SENTINEL) && !injected[0])
    abort();
  /* A sentinel never leaves as it was sent. */
  for (size_t i = 0; i < (out ? n_out : n); i++) {
    const shk_egress_header *h = out ? &out[i] : &hs[i];
    if (has(h->value, h->value_len, GH_SENTINEL) || has(h->name, h->name_len, GH_SENTINEL))
      abort();
  }
  shk_host canon;
  bool host_ok = !shk_host_parse(host, hl, &canon, NULL, NULL);
  for (int u = 0; u < 2; u++) {
    const shk_broker_secret *s = uses[u].secret;
    bool may = uses[u].live && host_ok && shk_host_pattern_matches(&s->pattern, &canon, req.port) &&
               (req.tls || s->allow_plain_http);
    if (injected[u] && !may)
      abort();
    if (!injected[u])
      continue;
    size_t named = 0;
    for (size_t i = 0; i < n_out; i++)
      named += out[i].name_len == strlen(s->header_name) &&
               !strncasecmp(out[i].name, s->header_name, out[i].name_len);
    if (named != 1)
      abort();
  }
  /* Where a secret was not injected, its value (absent from the input by
   * construction of the sentinel) appears nowhere. */
  for (size_t i = 0; out && i < n_out; i++)
    for (int u = 0; u < 2; u++)
      if (!injected[u] && memmem(out[i].value, out[i].value_len, uses[u].secret->value,
                                 uses[u].secret->value_len) &&
          !memmem(data, size, uses[u].secret->value, uses[u].secret->value_len))
        abort();
  if (out && !injected[0] && !injected[1])
    abort();
  free(out);
  return 0;
}
