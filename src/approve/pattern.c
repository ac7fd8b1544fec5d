/* SPDX-License-Identifier: Apache-2.0 */
/* The pattern a card proposes for a destination: the host's siblings at
 * the same port ("*.PARENT:PORT"), and never wider than one label under
 * the public suffix the host names. The module only derives and parses the
 * text; whether the pattern may be granted is the one decision's question,
 * put to it by the caller. */
#include <shinken/approve.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Public suffixes of more than one label that hosts commonly name. Without
 * the public suffix list on the host this is the short list that matters
 * most; any other name's suffix is its last label. Why a short list is
 * safe: a suffix missing here makes a pattern one label too wide only for
 * that suffix's registrable domains' parents ("*.co.xx"), and such a
 * pattern is still put to the one decision before it is offered, so it is
 * never wider than the manifest allows. */
static const char *const multi_suffixes[] = {
  "co.uk", "org.uk", "ac.uk", "gov.uk", "me.uk", "ltd.uk", "plc.uk", "net.uk",
  "com.au", "net.au", "org.au", "edu.au", "gov.au",
  "co.jp", "ne.jp", "or.jp", "ac.jp", "go.jp",
  "co.nz", "org.nz", "net.nz", "co.za", "org.za", "co.in", "net.in", "org.in",
  "com.br", "net.br", "org.br", "com.cn", "net.cn", "org.cn", "com.mx", "com.tr",
  "co.kr", "or.kr", "com.sg", "com.hk", "com.tw", "co.il", "com.ar",
  "github.io", "gitlab.io", "pages.dev", "workers.dev", "herokuapp.com", "appspot.com",
  "blogspot.com", "cloudfront.net", "azurewebsites.net", "s3.amazonaws.com", "vercel.app",
  "netlify.app", "web.app", "firebaseapp.com", "fly.dev", "onrender.com",
};

static bool is_suffix(const char *name)
{
  if (!strchr(name, '.'))
    return true; /* a top-level label */
  for (size_t i = 0; i < sizeof multi_suffixes / sizeof *multi_suffixes; i++)
    if (!strcmp(name, multi_suffixes[i]))
      return true;
  return false;
}

/* A DNS name as the proxy canonicalises it: lower-case letters, digits,
 * '-', '_' and dots between non-empty labels, not all digits and dots (an
 * address is never a pattern's host: a domain pattern never admits one). */
static bool is_name(const char *h)
{
  size_t n = strlen(h), label = 0;
  bool alpha = false;
  if (!n || n > 253)
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = h[i];
    if (c == '.') {
      if (!label)
        return false;
      label = 0;
      continue;
    }
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
      return false;
    alpha = alpha || !(c >= '0' && c <= '9');
    if (++label > 63)
      return false;
  }
  return label && alpha;
}

int shk_approve_sibling_pattern(const char *host, uint16_t port, char *out, size_t n)
{
  if (!host || !port || !out || !n)
    return -EINVAL;
  out[0] = '\0';
  if (!is_name(host))
    return -ENOENT;
  const char *parent = strchr(host, '.');
  /* Why this is the widest allowed: the pattern covers the names strictly
   * below PARENT, and PARENT must itself be registrable (not a public
   * suffix), so no pattern reaches "*.test", "*.com" or "*.co.uk". */
  if (!parent || is_suffix(parent + 1))
    return -ENOENT;
  int w = snprintf(out, n, "*.%s:%u", parent + 1, (unsigned)port);
  if (w < 0 || (size_t)w >= n) {
    out[0] = '\0';
    return -ENAMETOOLONG;
  }
  return 0;
}

int shk_approve_pattern_split(const char *pattern, char *host, size_t n, uint16_t *port)
{
  if (!pattern || !host || !n || !port)
    return -EINVAL;
  const char *colon = strrchr(pattern, ':');
  if (!colon || colon == pattern || (size_t)(colon - pattern) >= n)
    return -EINVAL;
  char *end;
  errno = 0;
  unsigned long p = strtoul(colon + 1, &end, 10);
  if (errno || *end || end == colon + 1 || colon[1] == '+' || colon[1] == '-' || p == 0 || p > 65535)
    return -EINVAL;
  memcpy(host, pattern, (size_t)(colon - pattern));
  host[colon - pattern] = '\0';
  const char *name = !strncmp(host, "**.", 3) ? host + 3 : !strncmp(host, "*.", 2) ? host + 2 : host;
  if (!is_name(name))
    return -EINVAL;
  *port = (uint16_t)p;
  return 0;
}
