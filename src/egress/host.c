/* Host canonicalization: every host the proxy sees, from any protocol, is
 * reduced here to one canonical text before any policy check, so the check
 * and the dial can never disagree about what the name means. */
#include "egress/egress-internal.h"

#include <string.h>

static bool is_ldh(char c)
{
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

/* One part of an IPv4 address as inet_aton reads it: 0x-prefixed hex,
 * 0-prefixed octal, or decimal. Returns false for anything else, and for
 * values past 2^32 (so nothing wraps). */
static bool v4_number(const char *s, size_t len, uint64_t *out)
{
  unsigned base = 10;
  if (len >= 2 && s[0] == '0' && s[1] == 'x') {
    base = 16;
    s += 2;
    len -= 2;
    if (len == 0)
      return false; /* "0x" alone: some readers say 0, refuse it */
  } else if (len >= 2 && s[0] == '0') {
    base = 8;
    s++;
    len--;
  }
  if (len == 0)
    return false;
  uint64_t v = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned d;
    char c = s[i];
    if (c >= '0' && c <= '9')
      d = (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f')
      d = (unsigned)(c - 'a') + 10;
    else
      return false;
    if (d >= base)
      return false;
    v = v * base + d;
    if (v > 0xffffffffu)
      return false;
  }
  *out = v;
  return true;
}

/* Does the last label read as a number? Then the whole name is an IPv4
 * address attempt, as in the URL standard: such a name is never handed to a
 * resolver, which could read it differently. */
static bool ends_in_number(const char *s, size_t len)
{
  const char *dot = memrchr(s, '.', len);
  const char *last = dot ? dot + 1 : s;
  size_t n = (size_t)(s + len - last);
  if (n >= 2 && last[0] == '0' && last[1] == 'x') {
    for (size_t i = 2; i < n; i++)
      if (!((last[i] >= '0' && last[i] <= '9') || (last[i] >= 'a' && last[i] <= 'f')))
        return false;
    return true;
  }
  for (size_t i = 0; i < n; i++)
    if (last[i] < '0' || last[i] > '9')
      return false;
  return n > 0;
}

static const char *parse_v4_any(const char *s, size_t len, shk__ip *ip)
{
  uint64_t parts[4];
  size_t n = 0, start = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i == len || s[i] == '.') {
      if (n == 4 || !v4_number(s + start, i - start, &parts[n]))
        return "host-bad-ipv4";
      n++;
      start = i + 1;
    }
  }
  /* All parts but the last are single bytes; the last fills the rest. */
  for (size_t i = 0; i + 1 < n; i++)
    if (parts[i] > 255)
      return "host-bad-ipv4";
  if (parts[n - 1] >= (1ull << (8 * (5 - n))))
    return "host-bad-ipv4";
  uint32_t v = (uint32_t)parts[n - 1];
  for (size_t i = 0; i + 1 < n; i++)
    v |= (uint32_t)parts[i] << (24 - 8 * i);
  memset(ip, 0, sizeof *ip);
  ip->family = 4;
  ip->b[0] = (uint8_t)(v >> 24);
  ip->b[1] = (uint8_t)(v >> 16);
  ip->b[2] = (uint8_t)(v >> 8);
  ip->b[3] = (uint8_t)v;
  return NULL;
}

static const char *set_ip(const char *s, size_t len, shk__host *out)
{
  if (shk__ip_parse(s, len, &out->ip) < 0 || out->ip.family != 6)
    return "host-bad-ipv6";
  out->kind = SHK__HOST_IPV6;
  shk__ip_format(&out->ip, out->text);
  return NULL;
}

/* Safe on any bytes: every byte is classified before it is used, nothing is
 * written past out->text (the length is checked against SHK__HOST_MAX
 * first), and the result is either a complete canonical host or a refusal. */
const char *shk__host_canon(const char *in, size_t len, shk__host *out)
{
  memset(out, 0, sizeof *out);
  if (len == 0)
    return "host-empty";
  bool colon = false;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)in[i];
    if (c == 0)
      return "host-nul";
    if (c == '\r' || c == '\n')
      return "host-crlf";
    if (c < 0x20 || c == 0x7f)
      return "host-control";
    if (c == ' ')
      return "host-space";
    if (c == '%')
      return "host-percent";
    if (c >= 0x80)
      return "host-non-ascii";
    if (c == ':')
      colon = true;
  }
  if (in[0] == '[') {
    if (len < 3 || in[len - 1] != ']')
      return "host-bad-ipv6";
    return set_ip(in + 1, len - 2, out);
  }
  if (colon)
    return set_ip(in, len, out);

  if (in[len - 1] == '.')
    len--; /* one trailing dot: the root label */
  if (len == 0)
    return "host-empty";
  if (len > SHK__HOST_MAX)
    return "host-too-long";
  char *t = out->text;
  for (size_t i = 0; i < len; i++) {
    char c = in[i];
    if (c >= 'A' && c <= 'Z')
      c = (char)(c - 'A' + 'a');
    if (c == '_')
      return "host-underscore";
    if (c != '.' && !is_ldh(c))
      return "host-bad-char";
    t[i] = c;
  }
  t[len] = '\0';
  size_t start = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i < len && t[i] != '.')
      continue;
    size_t n = i - start;
    if (n == 0)
      return "host-empty-label";
    if (n > 63)
      return "host-label-too-long";
    if (t[start] == '-' || t[i - 1] == '-')
      return "host-bad-hyphen";
    start = i + 1;
  }
  if (ends_in_number(t, len)) {
    const char *r = parse_v4_any(t, len, &out->ip);
    if (r) {
      memset(out, 0, sizeof *out);
      return r;
    }
    out->kind = SHK__HOST_IPV4;
    shk__ip_format(&out->ip, out->text);
    return NULL;
  }
  out->kind = SHK__HOST_NAME;
  return NULL;
}

const char *shk__port_parse(const char *s, size_t len, uint16_t *port)
{
  if (len == 0 || len > 5 || (s[0] == '0'))
    return "port-bad";
  unsigned v = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9')
      return "port-bad";
    v = v * 10 + (unsigned)(s[i] - '0');
  }
  if (v == 0 || v > 65535)
    return "port-bad";
  *port = (uint16_t)v;
  return NULL;
}

const char *shk__authority_parse(const char *in, size_t len, uint16_t default_port,
                                 shk__host *host, uint16_t *port)
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
  const char *r = shk__host_canon(in, hostlen, host);
  if (r)
    return r;
  if (portp)
    return shk__port_parse(portp, (size_t)(in + len - portp), port);
  if (!default_port)
    return "port-missing";
  *port = default_port;
  return NULL;
}
