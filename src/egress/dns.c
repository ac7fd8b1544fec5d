/* SPDX-License-Identifier: Apache-2.0 */
/* DNS messages for the stub resolver: one question in, A or AAAA answers
 * (or REFUSED) out. Nothing here follows compression pointers in a query
 * or echoes additional records, which keeps the parser a straight line. */
#include "egress/egress-internal.h"

#include <string.h>

#define QTYPE_A 1
#define QTYPE_AAAA 28

static uint16_t rd16(const uint8_t *p)
{
  return (uint16_t)(p[0] << 8 | p[1]);
}

static void wr16(uint8_t *p, uint16_t v)
{
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}

/* Safe on any bytes: every label is bounds-checked against LEN before it
 * is read, and the name is rebuilt into a fixed buffer of DNS's own limit. */
const char *shk__dns_parse_query(const uint8_t *msg, size_t len, shk__dns_query *q)
{
  memset(q, 0, sizeof *q);
  if (len < 12)
    return "dns-short";
  q->id = rd16(msg);
  uint16_t flags = rd16(msg + 2);
  if ((flags & 0x8000) || ((flags >> 11) & 0xf) != 0)
    return "dns-not-a-query";
  q->rd = flags & 0x0100;
  if (rd16(msg + 4) != 1 || rd16(msg + 6) != 0 || rd16(msg + 8) != 0)
    return "dns-not-one-question";
  char name[256];
  size_t nl = 0, off = 12;
  bool ok = true;
  for (;;) {
    if (off >= len)
      return "dns-short";
    uint8_t l = msg[off++];
    if (l == 0)
      break;
    if (l > 63)
      return "dns-bad-label"; /* compression pointers have no place in a query */
    if (off + l > len || nl + l + 1 >= sizeof name)
      return "dns-bad-name";
    if (memchr(msg + off, '.', l))
      ok = false; /* a dot inside a label has no text form we accept */
    if (nl)
      name[nl++] = '.';
    memcpy(name + nl, msg + off, l);
    nl += l;
    off += l;
  }
  if (off + 4 > len)
    return "dns-short";
  q->qtype = rd16(msg + off);
  if (rd16(msg + off + 2) != 1)
    return "dns-not-class-in";
  off += 4;
  q->question = msg + 12;
  q->question_len = off - 12;
  q->name_ok = ok && shk_host_parse(name, nl, &q->host, NULL, NULL) == 0 &&
              q->host.kind == SHK_HOST_NAME;
  return NULL;
}

size_t shk__dns_build_reply(const shk__dns_query *q, const shk_ip *ips, size_t n_ips,
                            uint8_t *out, size_t cap)
{
  uint8_t want = q->qtype == QTYPE_A ? 4 : q->qtype == QTYPE_AAAA ? 6 : 0;
  if (!want || !q->name_ok)
    ips = NULL; /* only A and AAAA for an accepted name are ever answered */
  size_t n = 0;
  for (size_t i = 0; ips && i < n_ips; i++)
    n += ips[i].family == want;
  size_t rdlen = want == 4 ? 4 : 16;
  size_t need = 12 + q->question_len + n * (12 + rdlen);
  if (need > cap || n > 0xffff)
    return 0;
  wr16(out, q->id);
  wr16(out + 2, (uint16_t)(0x8080 | (q->rd ? 0x0100 : 0) | (ips ? 0 : 5)));
  wr16(out + 4, 1);
  wr16(out + 6, (uint16_t)n);
  wr16(out + 8, 0);
  wr16(out + 10, 0);
  memcpy(out + 12, q->question, q->question_len);
  uint8_t *p = out + 12 + q->question_len;
  for (size_t i = 0; ips && i < n_ips; i++) {
    if (ips[i].family != want)
      continue;
    wr16(p, 0xc00c); /* the name of the question */
    wr16(p + 2, q->qtype);
    wr16(p + 4, 1);
    wr16(p + 6, 0);
    wr16(p + 8, 60); /* short TTL: a policy change applies soon */
    wr16(p + 10, (uint16_t)rdlen);
    memcpy(p + 12, ips[i].b, rdlen);
    p += 12 + rdlen;
  }
  return (size_t)(p - out);
}
