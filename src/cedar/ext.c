/* SPDX-License-Identifier: Apache-2.0 */
/* The four extension types: ipaddr, decimal, datetime and duration.
 *
 * Every parser here accepts exactly the strings the reference engine
 * accepts, no more and no fewer: a string one engine accepts and the other
 * rejects turns an error (a skipped policy) into a value, which can flip a
 * decision. So each parser follows the reference's grammar step by step,
 * including its quirks (an IPv4 prefix of at most two characters, an IPv6
 * address with a dotted tail refused outright, a decimal's sign taken from
 * the text so that "-0.5" is negative). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cedar/cedar-internal.h"

static bool is_digit(char c)
{
  return c >= '0' && c <= '9';
}

/* ---------------------------------------------------------------- ipaddr */

/* The longest address with a prefix the reference accepts:
 * "ABCD:EF01:2345:6789:ABCD:EF01:2345:6789/128". */
#define IP_TEXT_MAX 43

/* A small cursor over the text being parsed. Each reader either consumes
 * what it recognised and returns true, or leaves the cursor untouched. */
typedef struct cursor {
  const char *p, *end;
} cursor;

static bool read_char(cursor *c, char ch)
{
  if (c->p < c->end && *c->p == ch) {
    c->p++;
    return true;
  }
  return false;
}

/* One decimal part of an IPv4 address: 1 to 3 digits, no leading zero
 * unless the part is "0", at most 255. */
static bool read_v4_part(cursor *c, uint8_t *out)
{
  const char *p = c->p;
  unsigned v = 0, n = 0;
  while (p < c->end && is_digit(*p)) {
    v = v * 10 + (unsigned)(*p - '0');
    if (++n > 3 || v > 255)
      return false;
    p++;
  }
  if (n == 0 || (n > 1 && *c->p == '0'))
    return false;
  *out = (uint8_t)v;
  c->p = p;
  return true;
}

static bool read_v4(cursor *c, uint8_t out[4])
{
  cursor save = *c;
  for (int i = 0; i < 4; i++)
    if ((i > 0 && !read_char(c, '.')) || !read_v4_part(c, &out[i])) {
      *c = save;
      return false;
    }
  return true;
}

/* One group of an IPv6 address: 1 to 4 hex digits, leading zeros allowed. */
static bool read_v6_group(cursor *c, uint16_t *out)
{
  const char *p = c->p;
  unsigned v = 0, n = 0;
  int h;
  while (p < c->end && (h = shk__hex_value((unsigned char)*p)) >= 0) {
    if (++n > 4)
      return false;
    v = v * 16 + (unsigned)h;
    p++;
  }
  if (n == 0)
    return false;
  *out = (uint16_t)v;
  c->p = p;
  return true;
}

/* Up to `limit` colon-separated groups; returns how many were read. A
 * separator is consumed only together with the group after it, so "1::"
 * reads one group and leaves "::" for the caller. */
static size_t read_v6_groups(cursor *c, uint16_t *groups, size_t limit)
{
  for (size_t i = 0; i < limit; i++) {
    cursor save = *c;
    if ((i > 0 && !read_char(c, ':')) || !read_v6_group(c, &groups[i])) {
      *c = save;
      return i;
    }
  }
  return limit;
}

/* IPv6 in the standard text forms, with at most one "::". Addresses with a
 * dotted IPv4 tail are not read here: the reference refuses every string
 * with two colons and two dots before it parses, which covers all of them. */
static bool read_v6(cursor *c, uint8_t out[16])
{
  cursor save = *c;
  uint16_t g[8] = { 0 }, tail[7];
  size_t head = read_v6_groups(c, g, 8);
  if (head < 8) {
    if (!read_char(c, ':') || !read_char(c, ':')) {
      *c = save;
      return false;
    }
    size_t nt = read_v6_groups(c, tail, 8 - (head + 1));
    memcpy(&g[8 - nt], tail, nt * sizeof tail[0]);
  }
  for (int i = 0; i < 8; i++) {
    out[2 * i] = (uint8_t)(g[i] >> 8);
    out[2 * i + 1] = (uint8_t)g[i];
  }
  return true;
}

/* A whole address (no prefix): IPv4 first, then IPv6, and nothing may
 * follow. */
static bool parse_addr(const char *p, const char *end, shk__ipaddr *out)
{
  cursor c = { p, end };
  memset(out->addr, 0, sizeof out->addr);
  if (read_v4(&c, out->addr))
    out->v6 = false;
  else if (read_v6(&c, out->addr))
    out->v6 = true;
  else
    return false;
  return c.p == c.end;
}

/* The part after '/': digits only, no leading zero, short (2 characters for
 * IPv4, 3 for IPv6) and at most the address width. */
static bool parse_prefix(const char *p, const char *end, bool v6, uint8_t *out)
{
  size_t n = (size_t)(end - p);
  unsigned v = 0;
  if (n == 0 || n > (v6 ? 3u : 2u) || (p[0] == '0' && n > 1))
    return false;
  for (; p < end; p++) {
    if (!is_digit(*p))
      return false;
    v = v * 10 + (unsigned)(*p - '0');
  }
  if (v > (v6 ? 128u : 32u))
    return false;
  *out = (uint8_t)v;
  return true;
}

static size_t count_char(shk__str s, char ch)
{
  size_t n = 0;
  for (size_t i = 0; i < s.n; i++)
    n += s.p[i] == ch;
  return n;
}

int shk__ipaddr_parse(shk__str s, shk__ipaddr *out)
{
  if (s.n > IP_TEXT_MAX)
    return -EINVAL;
  /* IPv4 embedded in IPv6 ("::ffff:1.2.3.4") is refused to avoid confusing
   * the two families; the reference's test is this coarse one. */
  if (count_char(s, ':') >= 2 && count_char(s, '.') >= 2)
    return -EINVAL;
  const char *end = s.p + s.n;
  const char *slash = memchr(s.p, '/', s.n);
  shk__ipaddr ip;
  if (!parse_addr(s.p, slash ? slash : end, &ip))
    return -EINVAL;
  if (!slash)
    ip.prefix = ip.v6 ? 128 : 32;
  else if (!parse_prefix(slash + 1, end, ip.v6, &ip.prefix))
    return -EINVAL;
  *out = ip;
  return 0;
}

/* Two ipaddr values are equal when address and prefix are: the host bits
 * are kept, so 10.0.0.1/24 differs from 10.0.0.0/24, as in the reference. */
bool shk__ipaddr_eq(const shk__ipaddr *a, const shk__ipaddr *b)
{
  return a->v6 == b->v6 && a->prefix == b->prefix &&
         memcmp(a->addr, b->addr, a->v6 ? 16 : 4) == 0;
}

/* 127.0.0.0/8 and ::1, and only when the prefix keeps the value inside
 * that range. An IPv4-mapped IPv6 address is IPv6 and is not loopback. */
bool shk__ipaddr_is_loopback(const shk__ipaddr *a)
{
  if (!a->v6)
    return a->addr[0] == 127 && a->prefix >= 8;
  for (int i = 0; i < 15; i++)
    if (a->addr[i])
      return false;
  return a->addr[15] == 1 && a->prefix == 128;
}

/* 224.0.0.0/4 and ff00::/8, with the same rule on the prefix. */
bool shk__ipaddr_is_multicast(const shk__ipaddr *a)
{
  if (!a->v6)
    return (a->addr[0] & 0xf0) == 0xe0 && a->prefix >= 4;
  return a->addr[0] == 0xff && a->prefix >= 8;
}

/* Whether the network of `a` lies within the network of `range`: the
 * lowest address of `a` is at or above the lowest of `range`, and its
 * highest at or below the highest of `range`. Mixed families are never in
 * range. Compared bytewise, big-endian, which orders like the integers. */
bool shk__ipaddr_in_range(const shk__ipaddr *a, const shk__ipaddr *range)
{
  if (a->v6 != range->v6)
    return false;
  int n = a->v6 ? 16 : 4;
  uint8_t a_lo[16], a_hi[16], r_lo[16], r_hi[16];
  for (int i = 0; i < n; i++) {
    int bits = (int)a->prefix - 8 * i, rbits = (int)range->prefix - 8 * i;
    uint8_t m = bits >= 8 ? 0xff : bits <= 0 ? 0 : (uint8_t)(0xff << (8 - bits));
    uint8_t rm = rbits >= 8 ? 0xff : rbits <= 0 ? 0 : (uint8_t)(0xff << (8 - rbits));
    a_lo[i] = a->addr[i] & m;
    a_hi[i] = a->addr[i] | (uint8_t)~m;
    r_lo[i] = range->addr[i] & rm;
    r_hi[i] = range->addr[i] | (uint8_t)~rm;
  }
  return memcmp(r_lo, a_lo, (size_t)n) <= 0 && memcmp(a_hi, r_hi, (size_t)n) <= 0;
}

/* "addr/prefix", the address in the reference's display form: IPv6 in
 * lower-case hex with the longest run of two or more zero groups (the first
 * such run on a tie) written "::", and IPv4-mapped addresses as
 * ::ffff:a.b.c.d. */
int shk__ipaddr_format(const shk__ipaddr *a, char *buf, size_t n)
{
  const uint8_t *b = a->addr;
  if (!a->v6)
    return snprintf(buf, n, "%u.%u.%u.%u/%u", b[0], b[1], b[2], b[3], a->prefix);
  static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
  if (!memcmp(b, mapped, sizeof mapped))
    return snprintf(buf, n, "::ffff:%u.%u.%u.%u/%u", b[12], b[13], b[14], b[15], a->prefix);
  unsigned g[8];
  int best = -1, best_len = 0, run = 0;
  for (int i = 0; i < 8; i++) {
    g[i] = (unsigned)b[2 * i] << 8 | b[2 * i + 1];
    run = g[i] ? 0 : run + 1;
    if (run > best_len) {
      best_len = run;
      best = i - run + 1;
    }
  }
  if (best_len < 2)
    best = -1;
  char tmp[64];
  size_t len = 0;
  for (int i = 0; i < 8; i++) {
    if (i == best) {
      len += (size_t)snprintf(tmp + len, sizeof tmp - len, "::");
      i += best_len - 1;
      continue;
    }
    bool sep = i > 0 && i != best + best_len;
    len += (size_t)snprintf(tmp + len, sizeof tmp - len, "%s%x", sep ? ":" : "", g[i]);
  }
  return snprintf(buf, n, "%s/%u", tmp, a->prefix);
}

/* ---------------------------------------------------------------- decimal */

#define DECIMAL_DIGITS 4

/* Accumulates decimal digits into *v, failing on i64 overflow. */
static bool accumulate(const char *p, const char *end, int64_t *v)
{
  for (; p < end; p++)
    if (__builtin_mul_overflow(*v, 10, v) || __builtin_add_overflow(*v, *p - '0', v))
      return false;
  return true;
}

/* -?[0-9]+\.[0-9]+ with at most four fractional digits, held as the value
 * times 10^4 in an i64; anything out of range is an error. */
int shk__decimal_parse(shk__str s, int64_t *out)
{
  const char *p = s.p, *end = s.p + s.n;
  bool neg = p < end && *p == '-';
  if (neg)
    p++;
  const char *int_start = p;
  while (p < end && is_digit(*p))
    p++;
  const char *dot = p;
  if (dot == int_start || dot == end || *dot != '.')
    return -EINVAL;
  const char *frac = dot + 1;
  for (p = frac; p < end; p++)
    if (!is_digit(*p))
      return -EINVAL;
  size_t nfrac = (size_t)(end - frac);
  if (nfrac == 0 || nfrac > DECIMAL_DIGITS)
    return -EINVAL;
  /* The integer part is read with its sign, as an i64 would be, so that
   * -922337203685477.5808 (exactly INT64_MIN) is in range. */
  int64_t ip = 0, fp = 0;
  if (!accumulate(int_start, dot, &ip))
    return -EINVAL;
  if (neg)
    ip = -ip;
  if (__builtin_mul_overflow(ip, (int64_t)10000, &ip))
    return -EINVAL;
  accumulate(frac, end, &fp);
  for (size_t i = nfrac; i < DECIMAL_DIGITS; i++)
    fp *= 10;
  int64_t v;
  if (neg ? __builtin_sub_overflow(ip, fp, &v) : __builtin_add_overflow(ip, fp, &v))
    return -EINVAL;
  *out = v;
  return 0;
}

/* The integer part, a point and all four fractional digits: "-1.0500". */
int shk__decimal_format(int64_t d, char *buf, size_t n)
{
  /* Work in unsigned so that INT64_MIN has a magnitude. */
  uint64_t mag = d < 0 ? -(uint64_t)d : (uint64_t)d;
  return snprintf(buf, n, "%s%llu.%04llu", d < 0 ? "-" : "", (unsigned long long)(mag / 10000),
                  (unsigned long long)(mag % 10000));
}

/* ---------------------------------------------------------------- datetime */

#define MS_PER_DAY INT64_C(86400000)

/* Exactly `n` ASCII digits at p, as a number. */
static bool fixed_digits(const char *p, const char *end, int n, int *out)
{
  int v = 0;
  if (end - p < n)
    return false;
  for (int i = 0; i < n; i++) {
    if (!is_digit(p[i]))
      return false;
    v = v * 10 + (p[i] - '0');
  }
  *out = v;
  return true;
}

static bool is_leap(int y)
{
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar
 * (Howard Hinnant's days_from_civil), for years 0 to 9999. */
static int64_t days_from_civil(int y, int m, int d)
{
  y -= m <= 2;
  int era = (y >= 0 ? y : y - 399) / 400;
  int yoe = y - era * 400;
  int doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return (int64_t)era * 146097 + doe - 719468;
}

/* YYYY-MM-DD, optionally followed by Thh:mm:ss, an optional .SSS, and Z
 * or an offset (+|-)hhmm with hh < 24 and mm < 60. Dates and times are
 * checked for existence (no February 30th, no second 60). */
int shk__datetime_parse(shk__str s, int64_t *out_ms)
{
  static const int mdays[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
  const char *p = s.p, *end = s.p + s.n;
  int y, mo, d, h = 0, mi = 0, sec = 0, ms = 0, off = 0;
  if (!fixed_digits(p, end, 4, &y) || end - p < 10 || p[4] != '-' ||
      !fixed_digits(p + 5, end, 2, &mo) || p[7] != '-' || !fixed_digits(p + 8, end, 2, &d))
    return -EINVAL;
  if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] + (mo == 2 && is_leap(y)))
    return -EINVAL;
  p += 10;
  if (p != end) {
    if (end - p < 9 || p[0] != 'T' || !fixed_digits(p + 1, end, 2, &h) || p[3] != ':' ||
        !fixed_digits(p + 4, end, 2, &mi) || p[6] != ':' || !fixed_digits(p + 7, end, 2, &sec))
      return -EINVAL;
    if (h > 23 || mi > 59 || sec > 59)
      return -EINVAL;
    p += 9;
    if (p < end && *p == '.') {
      if (!fixed_digits(p + 1, end, 3, &ms))
        return -EINVAL;
      p += 4;
    }
    if (end - p == 1 && *p == 'Z') {
      off = 0;
    } else if (end - p == 5 && (*p == '+' || *p == '-')) {
      int oh, om;
      if (!fixed_digits(p + 1, end, 2, &oh) || !fixed_digits(p + 3, end, 2, &om))
        return -EINVAL;
      if (oh >= 24 || om >= 60)
        return -EINVAL;
      off = (oh * 3600 + om * 60) * (*p == '+' ? 1 : -1);
    } else {
      return -EINVAL;
    }
  }
  int64_t secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - off;
  *out_ms = secs * 1000 + ms;
  return 0;
}

/* Units in the only order the reference allows them: d, h, m, s, ms. */
static const int64_t unit_ms[5] = { MS_PER_DAY, 3600000, 60000, 1000, 1 };

/* A duration is an optional '-' and one or more quantity-unit pairs with
 * distinct units in the order d h m s ms ("1d2h", "-90m", "1s500ms"). The
 * total is summed as the reference sums it (ms first, then s, m, h, d, each
 * term checked), so the same strings overflow. */
int shk__duration_parse(shk__str s, int64_t *out_ms)
{
  const char *p = s.p, *end = s.p + s.n;
  bool neg = p < end && *p == '-';
  uint64_t q[5] = { 0 };
  int last = -1;
  bool overflow = false;
  if (neg)
    p++;
  if (p == end)
    return -EINVAL;
  while (p < end) {
    uint64_t v = 0;
    const char *digits = p;
    for (; p < end && is_digit(*p); p++)
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)(*p - '0'), &v))
        overflow = true;
    if (p == digits || p == end)
      return -EINVAL;
    int unit;
    switch (*p++) {
    case 'd': unit = 0; break;
    case 'h': unit = 1; break;
    case 'm':
      if (p < end && *p == 's') {
        p++;
        unit = 4;
      } else {
        unit = 2;
      }
      break;
    case 's': unit = 3; break;
    default: return -EINVAL;
    }
    if (unit <= last)
      return -EINVAL;
    last = unit;
    q[unit] = v;
  }
  /* Overflow of a quantity is checked only once the whole string matched,
   * as the reference matches its pattern first; both are errors anyway. */
  if (overflow)
    return -EINVAL;
  int64_t total;
  if (neg) {
    if (q[4] > (uint64_t)INT64_MAX + 1)
      return -EINVAL;
    total = q[4] == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)q[4];
  } else {
    if (q[4] > (uint64_t)INT64_MAX)
      return -EINVAL;
    total = (int64_t)q[4];
  }
  for (int u = 3; u >= 0; u--) {
    int64_t term;
    if (q[u] > (uint64_t)INT64_MAX || __builtin_mul_overflow((int64_t)q[u], unit_ms[u], &term))
      return -EINVAL;
    if (neg ? __builtin_sub_overflow(total, term, &total) : __builtin_add_overflow(total, term, &total))
      return -EINVAL;
  }
  *out_ms = total;
  return 0;
}

int shk__datetime_offset(int64_t dt, int64_t dur, int64_t *out)
{
  return __builtin_add_overflow(dt, dur, out) ? -ERANGE : 0;
}

int shk__datetime_duration_since(int64_t dt, int64_t other, int64_t *out)
{
  return __builtin_sub_overflow(dt, other, out) ? -ERANGE : 0;
}

/* Midnight (UTC) of the day `dt` falls in, rounding towards the past; the
 * earliest datetimes have no representable midnight. */
int shk__datetime_to_date(int64_t dt, int64_t *out)
{
  if (dt >= 0 || dt % MS_PER_DAY == 0) {
    *out = dt - dt % MS_PER_DAY;
    return 0;
  }
  return __builtin_mul_overflow(dt / MS_PER_DAY - 1, MS_PER_DAY, out) ? -ERANGE : 0;
}

/* The time of day of `dt` as a duration, always in [0, 1 day). */
int shk__datetime_to_time(int64_t dt, int64_t *out)
{
  int64_t r = dt % MS_PER_DAY;
  *out = r < 0 ? r + MS_PER_DAY : r;
  return 0;
}
