/* SPDX-License-Identifier: Apache-2.0 */
/* Hosts and ports: every host the proxy sees, from any protocol, and every
 * host a grant or a rule names, is reduced here to one canonical text
 * before anything compares it, so a check and a dial (or a grant and its
 * use) can never disagree about what a name means. */
#include "shinken/match.h"

#include <errno.h>
#include <string.h>

#include "common/common.h"

/* ------------------------------------------------------------ refusals */

/* Each refusal: the token audit lines carry, and the sentence for people. */
enum refusal {
  R_EMPTY,
  R_NUL,
  R_CRLF,
  R_CONTROL,
  R_SPACE,
  R_PERCENT,
  R_NON_ASCII,
  R_BAD_IPV6,
  R_TOO_LONG,
  R_UNDERSCORE,
  R_BAD_CHAR,
  R_EMPTY_LABEL,
  R_LABEL_TOO_LONG,
  R_BAD_HYPHEN,
  R_BAD_IPV4,
};

static const struct {
  const char *token, *sentence;
} refusals[] = {
  [R_EMPTY] = { "host-empty", "the host is empty" },
  [R_NUL] = { "host-nul", "the host contains a NUL byte" },
  [R_CRLF] = { "host-crlf", "the host contains a line break" },
  [R_CONTROL] = { "host-control", "the host contains a control character" },
  [R_SPACE] = { "host-space", "the host contains a space" },
  [R_PERCENT] = { "host-percent",
                  "the host contains '%' (percent-encoding and IPv6 zone ids are not accepted)" },
  [R_NON_ASCII] = { "host-non-ascii",
                    "the host contains a non-ASCII byte (an internationalized name must be "
                    "given as punycode, xn--...)" },
  [R_BAD_IPV6] = { "host-bad-ipv6", "the host is not a valid IPv6 address" },
  [R_TOO_LONG] = { "host-too-long", "the host name is longer than 253 characters" },
  [R_UNDERSCORE] = { "host-underscore",
                     "the host name contains '_', which host names may not contain" },
  [R_BAD_CHAR] = { "host-bad-char", NULL /* names the character, see refuse() */ },
  [R_EMPTY_LABEL] = { "host-empty-label",
                      "the host name has an empty label (a leading dot or two dots in a row)" },
  [R_LABEL_TOO_LONG] = { "host-label-too-long",
                         "a label of the host name is longer than 63 characters" },
  [R_BAD_HYPHEN] = { "host-bad-hyphen", "a label of the host name begins or ends with '-'" },
  [R_BAD_IPV4] = { "host-bad-ipv4",
                   "the host's last label is numeric, but the host is not a valid IPv4 "
                   "address" },
};

static int refuse(enum refusal r, char c, shk_host *out, const char **reason, shk_error *err)
{
  memset(out, 0, sizeof *out);
  if (reason)
    *reason = refusals[r].token;
  if (r == R_BAD_CHAR)
    return shk__error_set(err, -EINVAL,
                          "the host name contains '%c', which is not a letter, a digit, '-' "
                          "or '.'", c);
  return shk__error_set(err, -EINVAL, "%s", refusals[r].sentence);
}

/* ------------------------------------------------------------ IPv4 spellings */

/* One part of an IPv4 address as inet_aton reads it: 0x-prefixed hex,
 * 0-prefixed octal, or decimal (the input is lowercase by now). False for
 * anything else, and for values past 2^32, so nothing wraps. */
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
 * address attempt, as in the URL standard. */
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

static bool parse_v4_any(const char *s, size_t len, shk_ip *ip)
{
  uint64_t parts[4];
  size_t n = 0, start = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i == len || s[i] == '.') {
      if (n == 4 || !v4_number(s + start, i - start, &parts[n]))
        return false;
      n++;
      start = i + 1;
    }
  }
  /* All parts but the last are single bytes; the last fills the rest. */
  for (size_t i = 0; i + 1 < n; i++)
    if (parts[i] > 255)
      return false;
  if (parts[n - 1] >= (1ull << (8 * (5 - n))))
    return false;
  uint32_t v = (uint32_t)parts[n - 1];
  for (size_t i = 0; i + 1 < n; i++)
    v |= (uint32_t)parts[i] << (24 - 8 * i);
  memset(ip, 0, sizeof *ip);
  ip->family = 4;
  ip->b[0] = (uint8_t)(v >> 24);
  ip->b[1] = (uint8_t)(v >> 16);
  ip->b[2] = (uint8_t)(v >> 8);
  ip->b[3] = (uint8_t)v;
  return true;
}

/* ------------------------------------------------------------ hosts */

static bool is_ldh(char c)
{
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

static int set_v6(const char *s, size_t len, shk_host *out, const char **reason, shk_error *err)
{
  if (shk_ip_parse(s, len, &out->ip, NULL) < 0 || out->ip.family != 6)
    return refuse(R_BAD_IPV6, 0, out, reason, err);
  out->kind = SHK_HOST_IPV6;
  shk_ip_format(&out->ip, out->text);
  return 0;
}

/* Safe on any bytes: every byte is classified before it is used, nothing
 * is written past out->text (the length is checked against SHK_HOST_MAX
 * first), and the result is either a complete canonical host or a
 * refusal with *out zeroed. */
int shk_host_parse(const char *in, size_t len, shk_host *out, const char **reason,
                   shk_error *err)
{
  memset(out, 0, sizeof *out);
  if (len == 0)
    return refuse(R_EMPTY, 0, out, reason, err);
  bool colon = false;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)in[i];
    if (c == 0)
      return refuse(R_NUL, 0, out, reason, err);
    if (c == '\r' || c == '\n')
      return refuse(R_CRLF, 0, out, reason, err);
    if (c < 0x20 || c == 0x7f)
      return refuse(R_CONTROL, 0, out, reason, err);
    if (c == ' ')
      return refuse(R_SPACE, 0, out, reason, err);
    if (c == '%')
      return refuse(R_PERCENT, 0, out, reason, err);
    if (c >= 0x80)
      return refuse(R_NON_ASCII, 0, out, reason, err);
    if (c == ':')
      colon = true;
  }
  if (in[0] == '[') {
    if (len < 3 || in[len - 1] != ']')
      return refuse(R_BAD_IPV6, 0, out, reason, err);
    return set_v6(in + 1, len - 2, out, reason, err);
  }
  if (colon)
    return set_v6(in, len, out, reason, err);

  if (in[len - 1] == '.')
    len--; /* one trailing dot: the root label */
  if (len == 0)
    return refuse(R_EMPTY, 0, out, reason, err);
  if (len > SHK_HOST_MAX)
    return refuse(R_TOO_LONG, 0, out, reason, err);
  /* The case rule (see shinken/match.h): names are lowercased here. */
  char *t = out->text;
  for (size_t i = 0; i < len; i++) {
    char c = in[i];
    if (c >= 'A' && c <= 'Z')
      c = (char)(c - 'A' + 'a');
    if (c == '_')
      return refuse(R_UNDERSCORE, 0, out, reason, err);
    if (c != '.' && !is_ldh(c))
      return refuse(R_BAD_CHAR, c, out, reason, err);
    t[i] = c;
  }
  t[len] = '\0';
  size_t start = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i < len && t[i] != '.')
      continue;
    size_t n = i - start;
    if (n == 0)
      return refuse(R_EMPTY_LABEL, 0, out, reason, err);
    if (n > 63)
      return refuse(R_LABEL_TOO_LONG, 0, out, reason, err);
    if (t[start] == '-' || t[i - 1] == '-')
      return refuse(R_BAD_HYPHEN, 0, out, reason, err);
    start = i + 1;
  }
  if (ends_in_number(t, len)) {
    if (!parse_v4_any(t, len, &out->ip))
      return refuse(R_BAD_IPV4, 0, out, reason, err);
    out->kind = SHK_HOST_IPV4;
    shk_ip_format(&out->ip, out->text);
    return 0;
  }
  out->kind = SHK_HOST_NAME;
  return 0;
}

/* ------------------------------------------------------------ ports */

int shk_port_parse(const char *s, size_t len, uint16_t *out, shk_error *err)
{
  unsigned v = 0;
  bool ok = len > 0 && len <= 5 && s[0] != '0';
  for (size_t i = 0; ok && i < len; i++) {
    ok = s[i] >= '0' && s[i] <= '9';
    v = v * 10 + (unsigned)(s[i] - '0');
  }
  if (!ok || v > 65535)
    return shk__error_set(err, -EINVAL,
                          "the port must be a decimal number from 1 to 65535, without sign or "
                          "leading zero");
  *out = (uint16_t)v;
  return 0;
}

int shk_port_range_parse(const char *s, size_t len, shk_port_range *out, shk_error *err)
{
  const char *dash = memchr(s, '-', len);
  size_t lo_len = dash ? (size_t)(dash - s) : len;
  uint16_t lo, hi;
  if (shk_port_parse(s, lo_len, &lo, NULL) < 0 ||
      (dash && shk_port_parse(dash + 1, len - lo_len - 1, &hi, NULL) < 0))
    return shk__error_set(err, -EINVAL,
                          "expected a port 1-65535 or a range LO-HI of them (decimal, without "
                          "sign or leading zero)");
  if (!dash)
    hi = lo;
  if (lo > hi)
    return shk__error_set(err, -EINVAL, "the range %u-%u ends before it begins", lo, hi);
  out->lo = lo;
  out->hi = hi;
  return 0;
}

void shk_port_range_format(const shk_port_range *r, char buf[SHK_PORT_RANGE_TEXT_MAX])
{
  char *p = buf;
  for (int side = 0; side < 2; side++) {
    unsigned v = side ? r->hi : r->lo;
    if (side) {
      if (r->hi == r->lo)
        break;
      *p++ = '-';
    }
    char digits[5];
    int n = 0;
    do
      digits[n++] = (char)('0' + v % 10);
    while ((v /= 10) && n < 5);
    while (n)
      *p++ = digits[--n];
  }
  *p = '\0';
}

bool shk_port_range_contains(const shk_port_range *r, uint16_t port)
{
  return port >= r->lo && port <= r->hi;
}

bool shk_port_range_covers(const shk_port_range *outer, const shk_port_range *inner)
{
  return inner->lo >= outer->lo && inner->hi <= outer->hi;
}
