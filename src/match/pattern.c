/* SPDX-License-Identifier: Apache-2.0 */
/* Host patterns: "host", "*.host", "**.host", each with an optional
 * ":port", and a bare "*" where the caller allows it. One parser, one
 * matcher (a host against a pattern) and one cover test (a pattern within
 * a pattern, which attenuation rests on).
 *
 * Both the cover test and the matcher are written to fail closed: anything
 * they cannot prove admitted is not admitted. */
#include "shinken/match.h"

#include <errno.h>
#include <string.h>

#include "common/common.h"

static const char ip_not_pattern[] =
  "an IP address is not a host pattern (a range of addresses is a CIDR)";

/* The pattern is built in p and copied out only when whole, so a refusal
 * leaves *out empty. */
int shk_host_pattern_parse(const char *s, size_t len, unsigned flags, shk_host_pattern *out,
                           shk_error *err)
{
  shk_host_pattern p = { 0 };
  memset(out, 0, sizeof *out);
  const char *colon = memchr(s, ':', len);
  /* An IPv6 literal, bracketed or bare, is named as such before its colons
   * are read as a port. */
  shk_ip ip;
  if ((len && s[0] == '[') || (colon && shk_ip_parse(s, len, &ip, NULL) == 0))
    return shk__error_set(err, -EINVAL, "%s", ip_not_pattern);
  if (colon) {
    if (shk_port_parse(colon + 1, len - (size_t)(colon + 1 - s), &p.port, err) < 0)
      return -EINVAL;
    len = (size_t)(colon - s);
  }
  const char *host = s;
  if (len == 1 && s[0] == '*') {
    if (!(flags & SHK_HOST_PATTERN_ALLOW_ANY))
      return shk__error_set(err, -EINVAL, "a bare '*' (every host) is not accepted here");
    p.kind = SHK_HOST_PATTERN_ANY;
    *out = p;
    return 0;
  }
  if (len > 3 && !memcmp(s, "**.", 3)) {
    p.kind = SHK_HOST_PATTERN_APEX_SUB;
    host += 3;
    len -= 3;
  } else if (len > 2 && !memcmp(s, "*.", 2)) {
    p.kind = SHK_HOST_PATTERN_SUB;
    host += 2;
    len -= 2;
  } else {
    p.kind = SHK_HOST_PATTERN_EXACT;
  }
  if (memchr(host, '*', len))
    return shk__error_set(err, -EINVAL,
                          "'*' may stand only as the whole first label, as in *.host or "
                          "**.host");
  shk_host h;
  if (shk_host_parse(host, len, &h, NULL, err) < 0)
    return -EINVAL;
  if (h.kind != SHK_HOST_NAME)
    return shk__error_set(err, -EINVAL, "%s", ip_not_pattern);
  memcpy(p.host, h.text, sizeof p.host);
  *out = p;
  return 0;
}

void shk_host_pattern_format(const shk_host_pattern *p, char buf[SHK_HOST_PATTERN_TEXT_MAX])
{
  static const char *const prefix[] = {
    [SHK_HOST_PATTERN_EXACT] = "", [SHK_HOST_PATTERN_SUB] = "*.",
    [SHK_HOST_PATTERN_APEX_SUB] = "**.", [SHK_HOST_PATTERN_ANY] = "*",
  };
  const char *pre = (unsigned)p->kind < sizeof prefix / sizeof prefix[0] && prefix[p->kind]
                      ? prefix[p->kind] : "?";
  size_t n = strlen(pre), hl = strnlen(p->host, SHK_HOST_MAX);
  memcpy(buf, pre, n);
  if (p->kind != SHK_HOST_PATTERN_ANY) {
    memcpy(buf + n, p->host, hl);
    n += hl;
  }
  if (p->port) {
    shk_port_range one = { p->port, p->port };
    buf[n++] = ':';
    shk_port_range_format(&one, buf + n);
  } else {
    buf[n] = '\0';
  }
}

/* True when name a (length an) equals b or lies below it; strictly below
 * when strict. Bytewise, because both are canonical (lowercase). */
static bool name_within(const char *a, size_t an, const char *b, size_t bn, bool strict)
{
  if (an == bn)
    return !strict && !memcmp(a, b, an);
  return an > bn && a[an - bn - 1] == '.' && !memcmp(a + an - bn, b, bn);
}

bool shk_host_pattern_matches(const shk_host_pattern *p, const shk_host *h, uint16_t port)
{
  if (p->port && port && p->port != port)
    return false;
  if (p->kind == SHK_HOST_PATTERN_ANY)
    return true;
  if (h->kind != SHK_HOST_NAME)
    return false;
  size_t hn = strlen(h->text), pn = strlen(p->host);
  switch (p->kind) {
  case SHK_HOST_PATTERN_EXACT:
    return hn == pn && !memcmp(h->text, p->host, hn);
  case SHK_HOST_PATTERN_SUB:
    return name_within(h->text, hn, p->host, pn, true);
  case SHK_HOST_PATTERN_APEX_SUB:
    return name_within(h->text, hn, p->host, pn, false);
  case SHK_HOST_PATTERN_ANY:
    break;
  }
  return false;
}

bool shk_host_pattern_covers(const shk_host_pattern *outer, const shk_host_pattern *inner)
{
  /* A pattern with a port admits that port only; one without, every port. */
  if (outer->port && outer->port != inner->port)
    return false;
  if (outer->kind == SHK_HOST_PATTERN_ANY)
    return true;
  if (inner->kind == SHK_HOST_PATTERN_ANY)
    return false;
  const char *i = inner->host, *o = outer->host;
  size_t in = strlen(i), on = strlen(o);
  switch (outer->kind) {
  case SHK_HOST_PATTERN_EXACT: /* only the same exact name */
    return inner->kind == SHK_HOST_PATTERN_EXACT && in == on && !memcmp(i, o, in);
  case SHK_HOST_PATTERN_SUB:
    /* *.o admits the names strictly below o: an exact name or a **.name
     * must be strictly below, a *.name may be o itself. */
    return name_within(i, in, o, on, inner->kind != SHK_HOST_PATTERN_SUB);
  case SHK_HOST_PATTERN_APEX_SUB:
    return name_within(i, in, o, on, false);
  case SHK_HOST_PATTERN_ANY:
    break;
  }
  return false;
}
