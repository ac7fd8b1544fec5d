/* SPDX-License-Identifier: Apache-2.0 */
/* IP addresses: the strict textual forms, CIDR ranges, and the classifier
 * of non-public addresses that every dial of the egress proxy goes
 * through. */
#include "shinken/match.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "common/common.h"

static const char bad_ip[] =
  "not an IP address (a dotted quad without leading zeros, or IPv6 without a zone id)";

static int parse_v4_strict(const char *s, size_t len, uint8_t out[4])
{
  size_t i = 0;
  for (int part = 0; part < 4; part++) {
    if (part > 0) {
      if (i >= len || s[i] != '.')
        return -EINVAL;
      i++;
    }
    size_t start = i;
    unsigned v = 0;
    while (i < len && s[i] >= '0' && s[i] <= '9' && i - start < 3)
      v = v * 10 + (unsigned)(s[i++] - '0');
    /* No digits, a leading zero (an octal spelling elsewhere) or > 255. */
    if (i == start || (s[start] == '0' && i - start > 1) || v > 255)
      return -EINVAL;
    out[part] = (uint8_t)v;
  }
  return i == len ? 0 : -EINVAL;
}

int shk_ip_parse(const char *s, size_t len, shk_ip *out, shk_error *err)
{
  memset(out, 0, sizeof *out);
  if (memchr(s, ':', len)) {
    /* inet_pton wants a C string; the copy is bounded by the longest text
     * an IPv6 address has, and a NUL or a zone id inside is refused. */
    char buf[INET6_ADDRSTRLEN];
    if (len >= sizeof buf || memchr(s, '%', len) || memchr(s, '\0', len))
      return shk__error_set(err, -EINVAL, "%s", bad_ip);
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (inet_pton(AF_INET6, buf, out->b) != 1)
      return shk__error_set(err, -EINVAL, "%s", bad_ip);
    out->family = 6;
    return 0;
  }
  if (parse_v4_strict(s, len, out->b) < 0) {
    memset(out, 0, sizeof *out);
    return shk__error_set(err, -EINVAL, "%s", bad_ip);
  }
  out->family = 4;
  return 0;
}

void shk_ip_format(const shk_ip *ip, char buf[SHK_IP_TEXT_MAX])
{
  if (!inet_ntop(ip->family == 4 ? AF_INET : AF_INET6, ip->b, buf, SHK_IP_TEXT_MAX))
    strcpy(buf, "?");
}

static bool prefix_match(const uint8_t *a, const uint8_t *b, unsigned bits)
{
  unsigned full = bits / 8, rest = bits % 8;
  if (memcmp(a, b, full))
    return false;
  if (!rest)
    return true;
  uint8_t mask = (uint8_t)(0xff << (8 - rest));
  return (a[full] & mask) == (b[full] & mask);
}

int shk_cidr_parse(const char *s, size_t len, shk_cidr *out, shk_error *err)
{
  memset(out, 0, sizeof *out);
  const char *slash = memchr(s, '/', len);
  if (!slash)
    return shk__error_set(err, -EINVAL,
                          "a CIDR range needs a prefix length: ADDRESS/PREFIX (one address is "
                          "/32, or /128 for IPv6)");
  if (shk_ip_parse(s, (size_t)(slash - s), &out->ip, NULL) < 0)
    return shk__error_set(err, -EINVAL, "the address of the range is %s", bad_ip);
  const char *p = slash + 1, *end = s + len;
  unsigned max = out->ip.family == 4 ? 32 : 128, v = 0;
  bool ok = p < end && end - p <= 3 && !(*p == '0' && end - p > 1);
  for (; ok && p < end; p++) {
    ok = *p >= '0' && *p <= '9';
    v = v * 10 + (unsigned)(*p - '0');
  }
  if (!ok || v > max) {
    memset(out, 0, sizeof *out);
    return shk__error_set(err, -EINVAL,
                          "the prefix length must be a decimal number from 0 to %u", max);
  }
  out->prefix = (uint8_t)v;
  shk_ip masked = out->ip;
  for (unsigned bit = v; bit < max; bit++)
    masked.b[bit / 8] &= (uint8_t)~(0x80 >> (bit % 8));
  if (memcmp(masked.b, out->ip.b, sizeof masked.b)) {
    char text[SHK_IP_TEXT_MAX];
    shk_ip_format(&masked, text);
    memset(out, 0, sizeof *out);
    return shk__error_set(err, -EINVAL,
                          "the address has bits set past the /%u prefix (the range it is in "
                          "is %s/%u)", v, text, v);
  }
  return 0;
}

void shk_cidr_format(const shk_cidr *c, char buf[SHK_CIDR_TEXT_MAX])
{
  char ip[SHK_IP_TEXT_MAX];
  shk_ip_format(&c->ip, ip);
  size_t n = strlen(ip);
  memcpy(buf, ip, n);
  buf[n++] = '/';
  unsigned p = c->prefix;
  if (p >= 100)
    buf[n++] = (char)('0' + p / 100);
  if (p >= 10)
    buf[n++] = (char)('0' + p / 10 % 10);
  buf[n++] = (char)('0' + p % 10);
  buf[n] = '\0';
}

bool shk_cidr_contains(const shk_cidr *c, const shk_ip *ip)
{
  return c->ip.family == ip->family && prefix_match(c->ip.b, ip->b, c->prefix);
}

bool shk_cidr_covers(const shk_cidr *outer, const shk_cidr *inner)
{
  return outer->ip.family == inner->ip.family && inner->prefix >= outer->prefix &&
         prefix_match(outer->ip.b, inner->ip.b, outer->prefix);
}

struct range {
  uint8_t b[16];
  uint8_t prefix;
  const char *reason;
};

/* IANA's special-purpose registries, reduced to what must never be dialed
 * from a sandbox: everything that is not plainly on the public Internet. */
static const struct range v4_ranges[] = {
  { { 0 }, 8, "ip-this-network" },
  { { 10 }, 8, "ip-private" },
  { { 100, 64 }, 10, "ip-cgnat" },
  { { 127 }, 8, "ip-loopback" },
  { { 169, 254 }, 16, "ip-link-local" },
  { { 172, 16 }, 12, "ip-private" },
  { { 192, 0, 0 }, 24, "ip-ietf-reserved" },
  { { 192, 0, 2 }, 24, "ip-test-net" },
  { { 192, 88, 99 }, 24, "ip-6to4-relay" },
  { { 192, 168 }, 16, "ip-private" },
  { { 198, 18 }, 15, "ip-benchmark" },
  { { 198, 51, 100 }, 24, "ip-test-net" },
  { { 203, 0, 113 }, 24, "ip-test-net" },
  { { 224 }, 4, "ip-multicast" },
  { { 240 }, 4, "ip-reserved" }, /* includes 255.255.255.255 */
};

static const struct range v6_ranges[] = {
  { { 0x01, 0x00 }, 64, "ip-discard" },
  { { 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01 }, 48, "ip-nat64-local" },
  { { 0x20, 0x01, 0x00, 0x00 }, 32, "ip-teredo" },
  { { 0x20, 0x01, 0x00, 0x02, 0x00, 0x00 }, 48, "ip-benchmark" },
  { { 0x20, 0x01, 0x0d, 0xb8 }, 32, "ip-test-net" },
  { { 0xfc }, 7, "ip-private" },
  { { 0xfe, 0x80 }, 10, "ip-link-local" },
  { { 0xfe, 0xc0 }, 10, "ip-site-local" },
  { { 0xff }, 8, "ip-multicast" },
};

static const char *classify_v4(const uint8_t *b)
{
  for (size_t i = 0; i < sizeof v4_ranges / sizeof v4_ranges[0]; i++)
    if (prefix_match(b, v4_ranges[i].b, v4_ranges[i].prefix))
      return v4_ranges[i].reason;
  return NULL;
}

/* Security-relevant: a NULL answer lets the egress proxy dial the
 * address. It fails closed: an unknown family, and every IPv6 address
 * outside the allocated global unicast 2000::/3, is non-public. */
const char *shk_ip_nonpublic(const shk_ip *ip)
{
  if (ip->family == 4)
    return classify_v4(ip->b);
  if (ip->family != 6)
    return "ip-bad-family";
  static const uint8_t zero[16], mapped[12] = { [10] = 0xff, [11] = 0xff },
                               nat64[12] = { 0x00, 0x64, 0xff, 0x9b };
  const uint8_t *b = ip->b;
  if (!memcmp(b, zero, 16))
    return "ip-unspecified";
  if (!memcmp(b, zero, 15) && b[15] == 1)
    return "ip-loopback";
  /* Forms that carry an IPv4 address: judged by that address, because a
   * kernel or a NAT64 gateway may well deliver them to it. An embedded
   * public address is still refused for the mapped and compatible forms:
   * a proxy has no reason to dial them and they only serve to disguise. */
  if (!memcmp(b, mapped, 12) || !memcmp(b, zero, 12)) {
    const char *r = classify_v4(b + 12);
    return r ? r : "ip-v4-embedded";
  }
  if (!memcmp(b, nat64, 12))
    return classify_v4(b + 12);
  if (b[0] == 0x20 && b[1] == 0x02)
    return classify_v4(b + 2);
  for (size_t i = 0; i < sizeof v6_ranges / sizeof v6_ranges[0]; i++)
    if (prefix_match(b, v6_ranges[i].b, v6_ranges[i].prefix))
      return v6_ranges[i].reason;
  /* Only 2000::/3 is allocated global unicast; anything else is reserved. */
  if ((b[0] & 0xe0) != 0x20)
    return "ip-reserved";
  return NULL;
}
