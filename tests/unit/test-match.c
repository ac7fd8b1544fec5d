/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the shared grammar (src/match): every parser as a table of
 * input -> canonical form or the exact sentence of its refusal, and every
 * matcher as a table of pattern x subject -> verdict. Each accepted input
 * is also checked to be a fixed point: its canonical text parses back to
 * the same value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shinken/match.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------ hosts */

/* The sentence of every host refusal but host-bad-char (which names the
 * character, see host_bad_char). */
static const struct {
  const char *token, *sentence;
} host_sentences[] = {
  { "host-empty", "the host is empty" },
  { "host-nul", "the host contains a NUL byte" },
  { "host-crlf", "the host contains a line break" },
  { "host-control", "the host contains a control character" },
  { "host-space", "the host contains a space" },
  { "host-percent", "the host contains '%' (percent-encoding and IPv6 zone ids are not accepted)" },
  { "host-non-ascii", "the host contains a non-ASCII byte (an internationalized name must be "
                      "given as punycode, xn--...)" },
  { "host-bad-ipv6", "the host is not a valid IPv6 address" },
  { "host-too-long", "the host name is longer than 253 characters" },
  { "host-underscore", "the host name contains '_', which host names may not contain" },
  { "host-empty-label", "the host name has an empty label (a leading dot or two dots in a row)" },
  { "host-label-too-long", "a label of the host name is longer than 63 characters" },
  { "host-bad-hyphen", "a label of the host name begins or ends with '-'" },
  { "host-bad-ipv4", "the host's last label is numeric, but the host is not a valid IPv4 "
                     "address" },
};

static const char *host_sentence(const char *token)
{
  for (size_t i = 0; i < N(host_sentences); i++)
    if (!strcmp(host_sentences[i].token, token))
      return host_sentences[i].sentence;
  return NULL;
}

typedef struct host_case {
  const char *in;
  size_t len;
  shk_host_kind kind; /* 0: refused */
  const char *want;   /* canonical text, or the refusal's token */
} host_case;

#define NAME(in, out) { in, sizeof in - 1, SHK_HOST_NAME, out }
#define V4(in, out) { in, sizeof in - 1, SHK_HOST_IPV4, out }
#define V6(in, out) { in, sizeof in - 1, SHK_HOST_IPV6, out }
#define BADH(in, token) { in, sizeof in - 1, 0, token }

static const host_case host_cases[] = {
  /* names: the case rule, one trailing dot, LDH */
  NAME("example.test", "example.test"),
  NAME("Example.TEST", "example.test"),
  NAME("EXAMPLE.TEST", "example.test"),
  NAME("eXaMpLe.TeSt", "example.test"),
  NAME("example.test.", "example.test"),
  NAME("Example.Test.", "example.test"),
  NAME("localhost", "localhost"),
  NAME("LOCALHOST", "localhost"),
  NAME("a", "a"),
  NAME("A.", "a"),
  NAME("xn--bcher-kva.example", "xn--bcher-kva.example"),
  NAME("XN--BCHER-KVA.EXAMPLE", "xn--bcher-kva.example"),
  NAME("a-b.c0.test", "a-b.c0.test"),
  NAME("a--b.test", "a--b.test"),
  NAME("1e100.net", "1e100.net"),
  NAME("123.example", "123.example"),
  NAME("0x.example", "0x.example"),
  NAME("a.b.c.d.e.f.g", "a.b.c.d.e.f.g"),
  NAME("0xg", "0xg"),
  NAME("1.2.3.4a", "1.2.3.4a"),
  NAME("x1", "x1"),
  NAME("sub.Domain.Example.COM", "sub.domain.example.com"),
  NAME("r2-d2.test", "r2-d2.test"),
  NAME("9gag.com", "9gag.com"),
  NAME("www.xn--n3h.test", "www.xn--n3h.test"),
  /* IPv4 in every historical spelling: the dotted quad it means */
  V4("127.0.0.1", "127.0.0.1"),
  V4("2130706433", "127.0.0.1"),
  V4("0177.0.0.1", "127.0.0.1"),
  V4("0x7f.1", "127.0.0.1"),
  V4("0x7F.0.0.1", "127.0.0.1"),
  V4("0X7F.0.0.1", "127.0.0.1"),
  V4("127.1", "127.0.0.1"),
  V4("127.0.1", "127.0.0.1"),
  V4("0x7f000001", "127.0.0.1"),
  V4("017700000001", "127.0.0.1"),
  V4("127.0.0.1.", "127.0.0.1"),
  V4("0x7f.0x0.0x0.0x1", "127.0.0.1"),
  V4("169.254.169.254", "169.254.169.254"),
  V4("0xa9.0xfe.0xa9.0xfe", "169.254.169.254"),
  V4("2852039166", "169.254.169.254"),
  V4("0", "0.0.0.0"),
  V4("0.0.0.0", "0.0.0.0"),
  V4("00", "0.0.0.0"),
  V4("0x0", "0.0.0.0"),
  V4("1", "0.0.0.1"),
  V4("4294967295", "255.255.255.255"),
  V4("0xffffffff", "255.255.255.255"),
  V4("255.255.255.255", "255.255.255.255"),
  V4("10.1", "10.0.0.1"),
  V4("10.65535", "10.0.255.255"),
  V4("10.1.65535", "10.1.255.255"),
  V4("192.168.1", "192.168.0.1"),
  V4("1.2.3.4", "1.2.3.4"),
  V4("01.02.03.04", "1.2.3.4"),
  V4("010.0.0.1", "8.0.0.1"),
  V4("8.8.8.8", "8.8.8.8"),
  /* IPv6, bracketed or bare: RFC 5952 text */
  V6("[::1]", "::1"),
  V6("::1", "::1"),
  V6("[0:0:0:0:0:0:0:1]", "::1"),
  V6("[::]", "::"),
  V6("::", "::"),
  V6("[::FFFF:127.0.0.1]", "::ffff:127.0.0.1"),
  V6("::ffff:7f00:1", "::ffff:127.0.0.1"),
  V6("2001:DB8::1", "2001:db8::1"),
  V6("2001:db8:0:0:0:0:0:1", "2001:db8::1"),
  V6("2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1"),
  V6("[2001:db8::1]", "2001:db8::1"),
  V6("fe80::1", "fe80::1"),
  V6("FE80::ABCD", "fe80::abcd"),
  V6("2001:db8:1:0:0:1:0:1", "2001:db8:1::1:0:1"),
  V6("2001:db8::1:0:0:1", "2001:db8::1:0:0:1"),
  V6("1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8"),
  V6("64:ff9b::7f00:1", "64:ff9b::7f00:1"),
  V6("::10.0.0.1", "::10.0.0.1"),
  V6("2606:4700::1111", "2606:4700::1111"),
  /* refusals */
  BADH("", "host-empty"),
  BADH(".", "host-empty"),
  BADH("a\0b", "host-nul"),
  BADH("\0", "host-nul"),
  BADH("a\r\nb", "host-crlf"),
  BADH("a\nb", "host-crlf"),
  BADH("a\rb", "host-crlf"),
  BADH("a\tb", "host-control"),
  BADH("a\x01", "host-control"),
  BADH("a\x7f", "host-control"),
  BADH("a\x1b[0m", "host-control"),
  BADH("a b", "host-space"),
  BADH(" a.test", "host-space"),
  BADH("a.test ", "host-space"),
  BADH("a%2eb", "host-percent"),
  BADH("%41.test", "host-percent"),
  BADH("[fe80::1%eth0]", "host-percent"),
  BADH("fe80::1%25eth0", "host-percent"),
  BADH("b\xc3\xbc" "cher.de", "host-non-ascii"),
  BADH("\xff", "host-non-ascii"),
  BADH("a.test\x80", "host-non-ascii"),
  BADH("a_b.test", "host-underscore"),
  BADH("_dmarc.example.test", "host-underscore"),
  BADH("A_B", "host-underscore"),
  BADH("a/b", "host-bad-char"),
  BADH("a@b", "host-bad-char"),
  BADH("a*b", "host-bad-char"),
  BADH("*.test", "host-bad-char"),
  BADH("a!b", "host-bad-char"),
  BADH("a,b", "host-bad-char"),
  BADH("a;b", "host-bad-char"),
  BADH("a\\b", "host-bad-char"),
  BADH("a+b", "host-bad-char"),
  BADH("a=b", "host-bad-char"),
  BADH("a~b", "host-bad-char"),
  BADH("a\"b", "host-bad-char"),
  BADH("example.test..", "host-empty-label"),
  BADH("a..b", "host-empty-label"),
  BADH(".a", "host-empty-label"),
  BADH("..", "host-empty-label"),
  BADH("-a.test", "host-bad-hyphen"),
  BADH("a-.test", "host-bad-hyphen"),
  BADH("a.-b.test", "host-bad-hyphen"),
  BADH("a.b-", "host-bad-hyphen"),
  BADH("-", "host-bad-hyphen"),
  BADH("1.2.3.256", "host-bad-ipv4"),
  BADH("08.1.1.1", "host-bad-ipv4"),
  BADH("09", "host-bad-ipv4"),
  BADH("4294967296", "host-bad-ipv4"),
  BADH("1.2.3.4.5", "host-bad-ipv4"),
  BADH("example.123", "host-bad-ipv4"),
  BADH("a.0x1", "host-bad-ipv4"),
  BADH("example.0x1", "host-bad-ipv4"),
  BADH("0x", "host-bad-ipv4"),
  BADH("1.0x", "host-bad-ipv4"),
  BADH("0xg.1", "host-bad-ipv4"),
  BADH("1.2.65536", "host-bad-ipv4"),
  BADH("256.1", "host-bad-ipv4"),
  BADH("1.16777216", "host-bad-ipv4"),
  BADH("0x100000000", "host-bad-ipv4"),
  BADH("99999999999999999999", "host-bad-ipv4"),
  BADH("1.2.3.0x100", "host-bad-ipv4"),
  BADH("[::1", "host-bad-ipv6"),
  BADH("[1.2.3.4]", "host-bad-ipv6"),
  BADH("[::ffff:0177.0.0.1]", "host-bad-ipv6"),
  BADH("[]", "host-bad-ipv6"),
  BADH("[a.test]", "host-bad-ipv6"),
  BADH("1:2:3:4:5:6:7:8:9", "host-bad-ipv6"),
  BADH("::g", "host-bad-ipv6"),
  BADH("1::2::3", "host-bad-ipv6"),
  BADH("a.test:80", "host-bad-ipv6"),
  BADH("[::1]:80", "host-bad-ipv6"),
  BADH("12345::", "host-bad-ipv6"),
};

static void check_host(size_t i, const host_case *c)
{
  shk_host h;
  const char *reason = "unset";
  shk_error err = { "" };
  int r = shk_host_parse(c->in, c->len, &h, &reason, &err);
  if (c->kind) {
    if (r)
      fail_msg("host %zu '%.*s' refused (%s: %s), want '%s'", i, (int)c->len, c->in, reason,
               err.message, c->want);
    assert_int_equal(h.kind, c->kind);
    assert_string_equal(h.text, c->want);
    /* A fixed point: the canonical text is canonical. */
    shk_host again;
    assert_int_equal(shk_host_parse(h.text, strlen(h.text), &again, NULL, NULL), 0);
    assert_int_equal(again.kind, h.kind);
    assert_string_equal(again.text, h.text);
    assert_memory_equal(&again.ip, &h.ip, sizeof h.ip);
    if (h.kind != SHK_HOST_NAME) {
      char text[SHK_IP_TEXT_MAX];
      shk_ip_format(&h.ip, text);
      assert_string_equal(text, h.text);
      assert_int_equal(h.ip.family, h.kind == SHK_HOST_IPV4 ? 4 : 6);
    }
  } else {
    if (!r)
      fail_msg("host %zu '%.*s' accepted as '%s', want %s", i, (int)c->len, c->in, h.text, c->want);
    assert_int_equal(r, -EINVAL);
    assert_string_equal(reason, c->want);
    assert_int_equal(h.kind, 0);
    if (strcmp(c->want, "host-bad-char"))
      assert_string_equal(err.message, host_sentence(c->want));
  }
}

static void host_parse(void **state)
{
  for (size_t i = 0; i < N(host_cases); i++)
    check_host(i, &host_cases[i]);
  /* Without a reason or an error, a refusal is still a refusal. */
  shk_host h;
  assert_int_equal(shk_host_parse("a_b", 3, &h, NULL, NULL), -EINVAL);
  /* Only LEN bytes are read. */
  assert_int_equal(shk_host_parse("a.test_garbage", 6, &h, NULL, NULL), 0);
  assert_string_equal(h.text, "a.test");
}

static void host_bad_char(void **state)
{
  static const char chars[] = "/@*!,;\\+=~\"'()<>?#$&^`{}|[";
  for (const char *c = chars; *c; c++) {
    char in[8] = { 'a', *c, 'b', 0 };
    if (*c == '[')
      in[0] = 'x'; /* a leading '[' is an IPv6 literal; inside a name it is a character */
    shk_host h;
    const char *reason = NULL;
    shk_error err;
    assert_int_equal(shk_host_parse(in, 3, &h, &reason, &err), -EINVAL);
    assert_string_equal(reason, "host-bad-char");
    char want[128];
    snprintf(want, sizeof want,
             "the host name contains '%c', which is not a letter, a digit, '-' or '.'", *c);
    assert_string_equal(err.message, want);
  }
}

static void host_lengths(void **state)
{
  shk_host h;
  const char *reason;
  char label[70];
  memset(label, 'a', 64);
  strcpy(label + 64, ".test");
  assert_int_equal(shk_host_parse(label, strlen(label), &h, &reason, NULL), -EINVAL);
  assert_string_equal(reason, "host-label-too-long");
  /* 63 is the limit */
  assert_int_equal(shk_host_parse(label + 1, strlen(label + 1), &h, NULL, NULL), 0);
  assert_string_equal(h.text, label + 1);
  char name[300];
  for (int i = 0; i < 127; i++)
    memcpy(name + 2 * i, "a.", 2);
  name[254] = '\0'; /* 254 characters, ends in a dot: 253 without it */
  assert_int_equal(shk_host_parse(name, 254, &h, NULL, NULL), 0);
  assert_int_equal(strlen(h.text), 253);
  name[254] = 'b';
  shk_error err;
  assert_int_equal(shk_host_parse(name, 255, &h, &reason, &err), -EINVAL);
  assert_string_equal(reason, "host-too-long");
  assert_string_equal(err.message, "the host name is longer than 253 characters");
  /* 253 without the dot, in capitals: lowercased, not truncated. */
  for (int i = 0; i < 253; i++)
    name[i] = i % 2 ? '.' : 'A';
  assert_int_equal(shk_host_parse(name, 253, &h, NULL, NULL), 0);
  assert_int_equal(strlen(h.text), 253);
  assert_int_equal(h.text[252], 'a');
}

/* ------------------------------------------------------------ IP addresses */

static const char bad_ip[] =
  "not an IP address (a dotted quad without leading zeros, or IPv6 without a zone id)";

static const struct {
  const char *in;
  const char *want; /* canonical, or NULL: refused */
} ip_cases[] = {
  { "0.0.0.0", "0.0.0.0" },
  { "1.2.3.4", "1.2.3.4" },
  { "10.77.0.2", "10.77.0.2" },
  { "255.255.255.255", "255.255.255.255" },
  { "127.0.0.1", "127.0.0.1" },
  { "::", "::" },
  { "::1", "::1" },
  { "::FFFF:1.2.3.4", "::ffff:1.2.3.4" },
  { "2001:DB8::", "2001:db8::" },
  { "2001:db8:0:0:0:0:0:0", "2001:db8::" },
  { "fd77::2", "fd77::2" },
  { "1:0:0:1:0:0:0:1", "1:0:0:1::1" },
  { "0:0:0:0:0:0:0:0", "::" },
  { "01.2.3.4", NULL },
  { "1.2.3.04", NULL },
  { "1.2.3", NULL },
  { "1.2.3.4.5", NULL },
  { "1.2.3.4 ", NULL },
  { " 1.2.3.4", NULL },
  { "1.2.3.256", NULL },
  { "1.2.3.-1", NULL },
  { "+1.2.3.4", NULL },
  { "1..3.4", NULL },
  { "1.2.3.", NULL },
  { "0x7f.0.0.1", NULL },
  { "2130706433", NULL },
  { "1234.1.1.1", NULL },
  { "", NULL },
  { "a.test", NULL },
  { "fe80::1%1", NULL },
  { "fe80::1%eth0", NULL },
  { "[::1]", NULL },
  { ":::", NULL },
  { "1:2:3:4:5:6:7:8:9", NULL },
  { "::ffff:01.2.3.4", NULL },
  { "g::", NULL },
  { "1::2::3", NULL },
  { "0000000000000000000000000000000000000000000000000::", NULL },
};

static void ip_parse(void **state)
{
  for (size_t i = 0; i < N(ip_cases); i++) {
    shk_ip ip;
    shk_error err = { "" };
    int r = shk_ip_parse(ip_cases[i].in, strlen(ip_cases[i].in), &ip, &err);
    if (ip_cases[i].want) {
      if (r)
        fail_msg("ip %zu '%s' refused: %s", i, ip_cases[i].in, err.message);
      char text[SHK_IP_TEXT_MAX];
      shk_ip_format(&ip, text);
      assert_string_equal(text, ip_cases[i].want);
      shk_ip back;
      assert_int_equal(shk_ip_parse(text, strlen(text), &back, NULL), 0);
      assert_memory_equal(&back, &ip, sizeof ip);
    } else {
      if (!r)
        fail_msg("ip %zu '%s' accepted", i, ip_cases[i].in);
      assert_int_equal(r, -EINVAL);
      assert_string_equal(err.message, bad_ip);
    }
  }
  /* Only LEN bytes are read: "1.2.3.4" of "1.2.3.4x". */
  shk_ip ip;
  assert_int_equal(shk_ip_parse("1.2.3.4x", 7, &ip, NULL), 0);
  assert_int_equal(ip.family, 4);
}

/* ------------------------------------------------------------ CIDRs */

static const struct {
  const char *in;
  const char *want; /* canonical text, or the exact sentence of the refusal */
  bool ok;
} cidr_cases[] = {
  { "10.0.0.0/8", "10.0.0.0/8", true },
  { "0.0.0.0/0", "0.0.0.0/0", true },
  { "1.2.3.4/32", "1.2.3.4/32", true },
  { "192.168.0.0/16", "192.168.0.0/16", true },
  { "100.64.0.0/10", "100.64.0.0/10", true },
  { "172.16.0.0/12", "172.16.0.0/12", true },
  { "10.77.0.0/24", "10.77.0.0/24", true },
  { "10.77.0.2/32", "10.77.0.2/32", true },
  { "128.0.0.0/1", "128.0.0.0/1", true },
  { "::/0", "::/0", true },
  { "::1/128", "::1/128", true },
  { "fc00::/7", "fc00::/7", true },
  { "FC00::/7", "fc00::/7", true },
  { "2001:DB8::/32", "2001:db8::/32", true },
  { "2001:db8:0:0::/64", "2001:db8::/64", true },
  { "2001:0db8:0001::/48", "2001:db8:1::/48", true },
  { "fd77::/64", "fd77::/64", true },
  { "::ffff:10.0.0.0/104", "::ffff:10.0.0.0/104", true },
  { "64:ff9b::/96", "64:ff9b::/96", true },
  { "8000::/1", "8000::/1", true },
  { "10.0.0.1/8", "the address has bits set past the /8 prefix (the range it is in is 10.0.0.0/8)", false },
  { "11.0.0.0/7", "the address has bits set past the /7 prefix (the range it is in is 10.0.0.0/7)", false },
  { "10.0.0.0/7", "10.0.0.0/7", true },
  { "192.168.1.1/16", "the address has bits set past the /16 prefix (the range it is in is 192.168.0.0/16)", false },
  { "1.2.3.4/0", "the address has bits set past the /0 prefix (the range it is in is 0.0.0.0/0)", false },
  { "2001:db8::1/32", "the address has bits set past the /32 prefix (the range it is in is 2001:db8::/32)", false },
  { "::1/127", "the address has bits set past the /127 prefix (the range it is in is ::/127)", false },
  { "10.0.0.0/33", "the prefix length must be a decimal number from 0 to 32", false },
  { "10.0.0.0/08", "the prefix length must be a decimal number from 0 to 32", false },
  { "10.0.0.0/", "the prefix length must be a decimal number from 0 to 32", false },
  { "10.0.0.0/-1", "the prefix length must be a decimal number from 0 to 32", false },
  { "10.0.0.0/+8", "the prefix length must be a decimal number from 0 to 32", false },
  { "10.0.0.0/ 8", "the prefix length must be a decimal number from 0 to 32", false },
  { "10.0.0.0/8 ", "the prefix length must be a decimal number from 0 to 32", false },
  { "10.0.0.0/0008", "the prefix length must be a decimal number from 0 to 32", false },
  { "10.0.0.0/8/8", "the prefix length must be a decimal number from 0 to 32", false },
  { "10.0.0.0/x", "the prefix length must be a decimal number from 0 to 32", false },
  { "::/129", "the prefix length must be a decimal number from 0 to 128", false },
  { "::/1000", "the prefix length must be a decimal number from 0 to 128", false },
  { "::/", "the prefix length must be a decimal number from 0 to 128", false },
  { "10.0.0.0", "a CIDR range needs a prefix length: ADDRESS/PREFIX (one address is /32, or /128 for IPv6)", false },
  { "2001:db8::", "a CIDR range needs a prefix length: ADDRESS/PREFIX (one address is /32, or /128 for IPv6)", false },
  { "", "a CIDR range needs a prefix length: ADDRESS/PREFIX (one address is /32, or /128 for IPv6)", false },
  { "010.77.0.0/24", "the address of the range is not an IP address (a dotted quad without leading zeros, or IPv6 without a zone id)", false },
  { "300.1.1.1/8", "the address of the range is not an IP address (a dotted quad without leading zeros, or IPv6 without a zone id)", false },
  { "not-a-cidr/8", "the address of the range is not an IP address (a dotted quad without leading zeros, or IPv6 without a zone id)", false },
  { "/8", "the address of the range is not an IP address (a dotted quad without leading zeros, or IPv6 without a zone id)", false },
  { "10/8", "the address of the range is not an IP address (a dotted quad without leading zeros, or IPv6 without a zone id)", false },
  { "fe80::%1/64", "the address of the range is not an IP address (a dotted quad without leading zeros, or IPv6 without a zone id)", false },
  { "[::]/0", "the address of the range is not an IP address (a dotted quad without leading zeros, or IPv6 without a zone id)", false },
};

static shk_cidr cidr(const char *s)
{
  shk_cidr c;
  shk_error err;
  if (shk_cidr_parse(s, strlen(s), &c, &err))
    fail_msg("cidr '%s': %s", s, err.message);
  return c;
}

static shk_ip ip(const char *s)
{
  shk_ip a;
  if (shk_ip_parse(s, strlen(s), &a, NULL))
    fail_msg("ip '%s'", s);
  return a;
}

static void cidr_parse(void **state)
{
  for (size_t i = 0; i < N(cidr_cases); i++) {
    shk_cidr c;
    shk_error err = { "" };
    int r = shk_cidr_parse(cidr_cases[i].in, strlen(cidr_cases[i].in), &c, &err);
    if (cidr_cases[i].ok) {
      if (r)
        fail_msg("cidr %zu '%s' refused: %s", i, cidr_cases[i].in, err.message);
      char text[SHK_CIDR_TEXT_MAX];
      shk_cidr_format(&c, text);
      assert_string_equal(text, cidr_cases[i].want);
      shk_cidr back = cidr(text);
      assert_memory_equal(&back, &c, sizeof c);
      /* A range holds its own first address and covers itself. */
      assert_true(shk_cidr_contains(&c, &c.ip));
      assert_true(shk_cidr_covers(&c, &c));
    } else {
      if (!r)
        fail_msg("cidr %zu '%s' accepted", i, cidr_cases[i].in);
      assert_int_equal(r, -EINVAL);
      assert_string_equal(err.message, cidr_cases[i].want);
    }
  }
}

static const struct {
  const char *range, *addr;
  bool in;
} contains_cases[] = {
  { "10.0.0.0/8", "10.0.0.0", true },
  { "10.0.0.0/8", "10.255.255.255", true },
  { "10.0.0.0/8", "11.0.0.0", false },
  { "10.0.0.0/8", "9.255.255.255", false },
  { "10.77.0.0/24", "10.77.0.2", true },
  { "10.77.0.0/24", "10.77.1.2", false },
  { "10.77.0.2/32", "10.77.0.2", true },
  { "10.77.0.2/32", "10.77.0.3", false },
  { "0.0.0.0/0", "1.2.3.4", true },
  { "0.0.0.0/0", "::1", false },
  { "::/0", "1.2.3.4", false },
  { "::/0", "2001:db8::1", true },
  { "10.0.0.0/8", "::ffff:10.0.0.1", false },
  { "::ffff:10.0.0.0/104", "10.0.0.1", false },
  { "::ffff:10.0.0.0/104", "::ffff:10.0.0.1", true },
  { "172.16.0.0/12", "172.31.255.255", true },
  { "172.16.0.0/12", "172.32.0.0", false },
  { "172.16.0.0/12", "172.15.255.255", false },
  { "100.64.0.0/10", "100.127.255.255", true },
  { "100.64.0.0/10", "100.128.0.0", false },
  { "128.0.0.0/1", "127.255.255.255", false },
  { "128.0.0.0/1", "128.0.0.0", true },
  { "fc00::/7", "fd12:3456::1", true },
  { "fc00::/7", "fe00::1", false },
  { "2001:db8::/32", "2001:db8:ffff::1", true },
  { "2001:db8::/32", "2001:db9::1", false },
  { "fe80::/10", "febf::1", true },
  { "fe80::/10", "fec0::1", false },
  { "::1/128", "::1", true },
  { "::1/128", "::2", false },
};

static void cidr_contains(void **state)
{
  for (size_t i = 0; i < N(contains_cases); i++) {
    shk_cidr c = cidr(contains_cases[i].range);
    shk_ip a = ip(contains_cases[i].addr);
    if (shk_cidr_contains(&c, &a) != contains_cases[i].in)
      fail_msg("contains %zu: %s in %s: expected %d", i, contains_cases[i].addr,
               contains_cases[i].range, contains_cases[i].in);
  }
}

static const struct {
  const char *outer, *inner;
  bool covers;
} cidr_covers_cases[] = {
  { "10.0.0.0/8", "10.1.0.0/16", true },
  { "10.0.0.0/8", "10.0.0.0/8", true },
  { "10.1.0.0/16", "10.0.0.0/8", false },
  { "10.0.0.0/8", "11.0.0.0/16", false },
  { "10.0.0.0/8", "10.255.255.255/32", true },
  { "0.0.0.0/0", "10.0.0.0/8", true },
  { "0.0.0.0/0", "0.0.0.0/0", true },
  { "10.0.0.0/8", "0.0.0.0/0", false },
  { "0.0.0.0/0", "::/0", false },
  { "::/0", "0.0.0.0/0", false },
  { "::/0", "2001:db8::/32", true },
  { "2001:db8::/32", "2001:db8:1::/48", true },
  { "2001:db8:1::/48", "2001:db8::/32", false },
  { "2001:db8::/32", "2001:db9::/32", false },
  { "10.0.0.0/8", "::ffff:10.0.0.0/104", false },
  { "::ffff:0.0.0.0/96", "::ffff:10.0.0.0/104", true },
  { "192.168.0.0/16", "192.168.255.0/24", true },
  { "192.168.0.0/24", "192.168.1.0/24", false },
  { "128.0.0.0/1", "192.0.0.0/2", true },
  { "128.0.0.0/1", "64.0.0.0/2", false },
};

static void cidr_covers(void **state)
{
  for (size_t i = 0; i < N(cidr_covers_cases); i++) {
    shk_cidr o = cidr(cidr_covers_cases[i].outer), in = cidr(cidr_covers_cases[i].inner);
    if (shk_cidr_covers(&o, &in) != cidr_covers_cases[i].covers)
      fail_msg("covers %zu: %s within %s: expected %d", i, cidr_covers_cases[i].inner,
               cidr_covers_cases[i].outer, cidr_covers_cases[i].covers);
    /* Covering implies containing the inner range's first address. */
    if (cidr_covers_cases[i].covers)
      assert_true(shk_cidr_contains(&o, &in.ip));
  }
}

/* ------------------------------------------------------------ IP classes */

static const struct {
  const char *addr;
  const char *cls; /* NULL: public */
} class_cases[] = {
  { "0.0.0.0", "ip-this-network" },
  { "0.1.2.3", "ip-this-network" },
  { "10.0.0.1", "ip-private" },
  { "100.64.0.1", "ip-cgnat" },
  { "100.127.255.255", "ip-cgnat" },
  { "127.0.0.1", "ip-loopback" },
  { "127.255.255.255", "ip-loopback" },
  { "169.254.169.254", "ip-link-local" },
  { "172.16.0.1", "ip-private" },
  { "172.31.255.255", "ip-private" },
  { "192.0.0.8", "ip-ietf-reserved" },
  { "192.0.2.1", "ip-test-net" },
  { "192.88.99.1", "ip-6to4-relay" },
  { "192.168.1.1", "ip-private" },
  { "198.18.0.1", "ip-benchmark" },
  { "198.19.255.255", "ip-benchmark" },
  { "198.51.100.7", "ip-test-net" },
  { "203.0.113.9", "ip-test-net" },
  { "224.0.0.1", "ip-multicast" },
  { "239.255.255.250", "ip-multicast" },
  { "240.0.0.1", "ip-reserved" },
  { "255.255.255.255", "ip-reserved" },
  { "::", "ip-unspecified" },
  { "::1", "ip-loopback" },
  { "::ffff:127.0.0.1", "ip-loopback" },
  { "::ffff:10.1.2.3", "ip-private" },
  { "::ffff:169.254.169.254", "ip-link-local" },
  { "::127.0.0.1", "ip-loopback" },
  { "::10.0.0.1", "ip-private" },
  { "::ffff:1.1.1.1", "ip-v4-embedded" },
  { "::1.1.1.1", "ip-v4-embedded" },
  { "64:ff9b::7f00:1", "ip-loopback" },
  { "64:ff9b::a9fe:a9fe", "ip-link-local" },
  { "64:ff9b:1::1", "ip-nat64-local" },
  { "2002:7f00:1::", "ip-loopback" },
  { "2002:a9fe:a9fe::1", "ip-link-local" },
  { "2002:c0a8:101::", "ip-private" },
  { "fc00::1", "ip-private" },
  { "fd12:3456::1", "ip-private" },
  { "fe80::1", "ip-link-local" },
  { "febf::1", "ip-link-local" },
  { "fec0::1", "ip-site-local" },
  { "ff02::1", "ip-multicast" },
  { "2001:db8::1", "ip-test-net" },
  { "100::1", "ip-discard" },
  { "4000::1", "ip-reserved" },
  { "::2", "ip-this-network" }, /* IPv4-compatible 0.0.0.2 */
  { "2001::1", "ip-teredo" },
  { "2001:2::1", "ip-benchmark" },
  { "1.1.1.1", NULL },
  { "8.8.8.8", NULL },
  { "100.63.255.255", NULL },
  { "100.128.0.0", NULL },
  { "172.15.255.255", NULL },
  { "172.32.0.0", NULL },
  { "198.17.255.255", NULL },
  { "198.20.0.0", NULL },
  { "223.255.255.255", NULL },
  { "11.0.0.0", NULL },
  { "9.255.255.255", NULL },
  { "2606:4700::1111", NULL },
  { "2a00:1450::1", NULL },
  { "64:ff9b::101:101", NULL },
  { "2002:101:101::1", NULL },
};

static void ip_classes(void **state)
{
  for (size_t i = 0; i < N(class_cases); i++) {
    shk_ip a = ip(class_cases[i].addr);
    const char *got = shk_ip_nonpublic(&a);
    if ((got == NULL) != (class_cases[i].cls == NULL) ||
        (got && strcmp(got, class_cases[i].cls)))
      fail_msg("class %zu: %s: expected %s, got %s", i, class_cases[i].addr,
               class_cases[i].cls ? class_cases[i].cls : "public", got ? got : "public");
  }
  /* An address of no known family is never public. */
  shk_ip odd = { .family = 5 };
  assert_string_equal(shk_ip_nonpublic(&odd), "ip-bad-family");
}

/* ------------------------------------------------------------ ports */

static const char bad_port[] =
  "the port must be a decimal number from 1 to 65535, without sign or leading zero";
static const char bad_range[] =
  "expected a port 1-65535 or a range LO-HI of them (decimal, without sign or leading zero)";

static const struct {
  const char *in;
  unsigned want; /* 0: refused */
} port_cases[] = {
  { "1", 1 },       { "80", 80 },     { "443", 443 },   { "8080", 8080 }, { "65535", 65535 },
  { "1024", 1024 }, { "22", 22 },     { "0", 0 },       { "00", 0 },      { "080", 0 },
  { "65536", 0 },   { "99999", 0 },   { "100000", 0 },  { "", 0 },        { "+80", 0 },
  { "-80", 0 },     { " 80", 0 },     { "80 ", 0 },     { "8o", 0 },      { "0x50", 0 },
  { "1e3", 0 },     { "80.0", 0 },    { "４４３", 0 },
};

static void port_parse(void **state)
{
  for (size_t i = 0; i < N(port_cases); i++) {
    uint16_t p = 7;
    shk_error err = { "" };
    int r = shk_port_parse(port_cases[i].in, strlen(port_cases[i].in), &p, &err);
    if (port_cases[i].want) {
      if (r)
        fail_msg("port %zu '%s' refused", i, port_cases[i].in);
      assert_int_equal(p, port_cases[i].want);
    } else {
      if (!r)
        fail_msg("port %zu '%s' accepted as %u", i, port_cases[i].in, p);
      assert_int_equal(r, -EINVAL);
      assert_string_equal(err.message, bad_port);
      assert_int_equal(p, 7); /* untouched */
    }
  }
}

static const struct {
  const char *in;
  unsigned lo, hi; /* lo 0: refused with err */
  const char *err;
  const char *canon;
} range_cases[] = {
  { "443", 443, 443, NULL, "443" },
  { "1-65535", 1, 65535, NULL, "1-65535" },
  { "8000-8080", 8000, 8080, NULL, "8000-8080" },
  { "22-22", 22, 22, NULL, "22" },
  { "1-1", 1, 1, NULL, "1" },
  { "20-30", 20, 30, NULL, "20-30" },
  { "9-1", 0, 0, "the range 9-1 ends before it begins", NULL },
  { "65535-1", 0, 0, "the range 65535-1 ends before it begins", NULL },
  { "0-10", 0, 0, bad_range, NULL },
  { "1-0", 0, 0, bad_range, NULL },
  { "1-65536", 0, 0, bad_range, NULL },
  { "080-90", 0, 0, bad_range, NULL },
  { "80-090", 0, 0, bad_range, NULL },
  { "-80", 0, 0, bad_range, NULL },
  { "80-", 0, 0, bad_range, NULL },
  { "-", 0, 0, bad_range, NULL },
  { "", 0, 0, bad_range, NULL },
  { "1-2-3", 0, 0, bad_range, NULL },
  { "+1-9", 0, 0, bad_range, NULL },
  { "1 - 9", 0, 0, bad_range, NULL },
  { "1-9 ", 0, 0, bad_range, NULL },
  { "a-b", 0, 0, bad_range, NULL },
  { "1..9", 0, 0, bad_range, NULL },
  { "1:9", 0, 0, bad_range, NULL },
};

static void port_ranges(void **state)
{
  for (size_t i = 0; i < N(range_cases); i++) {
    shk_port_range r;
    shk_error err = { "" };
    int rc = shk_port_range_parse(range_cases[i].in, strlen(range_cases[i].in), &r, &err);
    if (range_cases[i].lo) {
      if (rc)
        fail_msg("range %zu '%s' refused: %s", i, range_cases[i].in, err.message);
      assert_int_equal(r.lo, range_cases[i].lo);
      assert_int_equal(r.hi, range_cases[i].hi);
      char text[SHK_PORT_RANGE_TEXT_MAX];
      shk_port_range_format(&r, text);
      assert_string_equal(text, range_cases[i].canon);
      shk_port_range back;
      assert_int_equal(shk_port_range_parse(text, strlen(text), &back, NULL), 0);
      assert_memory_equal(&back, &r, sizeof r);
      assert_true(shk_port_range_covers(&r, &r));
      assert_true(shk_port_range_contains(&r, r.lo) && shk_port_range_contains(&r, r.hi));
      assert_false(r.lo > 1 && shk_port_range_contains(&r, (uint16_t)(r.lo - 1)));
      assert_false(r.hi < 65535 && shk_port_range_contains(&r, (uint16_t)(r.hi + 1)));
    } else {
      if (!rc)
        fail_msg("range %zu '%s' accepted", i, range_cases[i].in);
      assert_int_equal(rc, -EINVAL);
      assert_string_equal(err.message, range_cases[i].err);
    }
  }
  static const struct {
    shk_port_range outer, inner;
    bool covers;
  } covers[] = {
    { { 1, 1024 }, { 443, 443 }, true },   { { 1, 1024 }, { 1000, 2000 }, false },
    { { 22, 22 }, { 20, 30 }, false },     { { 20, 30 }, { 22, 22 }, true },
    { { 1, 65535 }, { 1, 65535 }, true },  { { 2, 65535 }, { 1, 65535 }, false },
    { { 1, 65534 }, { 1, 65535 }, false }, { { 80, 80 }, { 81, 81 }, false },
  };
  for (size_t i = 0; i < N(covers); i++)
    if (shk_port_range_covers(&covers[i].outer, &covers[i].inner) != covers[i].covers)
      fail_msg("range covers %zu: expected %d", i, covers[i].covers);
}

/* ------------------------------------------------------------ host patterns */

static const char bad_wildcard[] = "'*' may stand only as the whole first label, as in *.host or **.host";
static const char ip_not_pattern[] = "an IP address is not a host pattern (a range of addresses is a CIDR)";
static const char no_any[] = "a bare '*' (every host) is not accepted here";

static const struct {
  const char *in;
  unsigned flags;
  const char *want; /* canonical text, or the exact sentence */
  bool ok;
  shk_host_pattern_kind kind;
  uint16_t port;
} pattern_cases[] = {
  { "example.test", 0, "example.test", true, SHK_HOST_PATTERN_EXACT, 0 },
  { "Example.TEST", 0, "example.test", true, SHK_HOST_PATTERN_EXACT, 0 },
  { "example.test.", 0, "example.test", true, SHK_HOST_PATTERN_EXACT, 0 },
  { "example.test:443", 0, "example.test:443", true, SHK_HOST_PATTERN_EXACT, 443 },
  { "EXAMPLE.test.:8080", 0, "example.test:8080", true, SHK_HOST_PATTERN_EXACT, 8080 },
  { "*.a.test", 0, "*.a.test", true, SHK_HOST_PATTERN_SUB, 0 },
  { "*.A.Test", 0, "*.a.test", true, SHK_HOST_PATTERN_SUB, 0 },
  { "*.a.test:1", 0, "*.a.test:1", true, SHK_HOST_PATTERN_SUB, 1 },
  { "**.a.test", 0, "**.a.test", true, SHK_HOST_PATTERN_APEX_SUB, 0 },
  { "**.Corp.Test.:443", 0, "**.corp.test:443", true, SHK_HOST_PATTERN_APEX_SUB, 443 },
  { "**.test", 0, "**.test", true, SHK_HOST_PATTERN_APEX_SUB, 0 },
  { "*.test:65535", 0, "*.test:65535", true, SHK_HOST_PATTERN_SUB, 65535 },
  { "xn--bcher-kva.test", 0, "xn--bcher-kva.test", true, SHK_HOST_PATTERN_EXACT, 0 },
  { "localhost", 0, "localhost", true, SHK_HOST_PATTERN_EXACT, 0 },
  { "*", SHK_HOST_PATTERN_ALLOW_ANY, "*", true, SHK_HOST_PATTERN_ANY, 0 },
  { "*:443", SHK_HOST_PATTERN_ALLOW_ANY, "*:443", true, SHK_HOST_PATTERN_ANY, 443 },
  { "*", 0, no_any, false, 0, 0 },
  { "*:443", 0, no_any, false, 0, 0 },
  { "**", 0, bad_wildcard, false, 0, 0 },
  { "**", SHK_HOST_PATTERN_ALLOW_ANY, bad_wildcard, false, 0, 0 },
  { "***.test", 0, bad_wildcard, false, 0, 0 },
  { "a.*.test", 0, bad_wildcard, false, 0, 0 },
  { "*.*.test", 0, bad_wildcard, false, 0, 0 },
  { "*a.test", 0, bad_wildcard, false, 0, 0 },
  { "a*.test", 0, bad_wildcard, false, 0, 0 },
  { "test.*", 0, bad_wildcard, false, 0, 0 },
  { "*.", 0, bad_wildcard, false, 0, 0 },
  { "**.", 0, bad_wildcard, false, 0, 0 },
  { "*.**.test", 0, bad_wildcard, false, 0, 0 },
  { "a.test:0", 0, bad_port, false, 0, 0 },
  { "a.test:65536", 0, bad_port, false, 0, 0 },
  { "a.test:99999", 0, bad_port, false, 0, 0 },
  { "a.test:080", 0, bad_port, false, 0, 0 },
  { "a.test:", 0, bad_port, false, 0, 0 },
  { "a.test: 80", 0, bad_port, false, 0, 0 },
  { "a.test:+80", 0, bad_port, false, 0, 0 },
  { "a.test:80:80", 0, bad_port, false, 0, 0 },
  { "a.test:http", 0, bad_port, false, 0, 0 },
  { "10.0.0.1", 0, ip_not_pattern, false, 0, 0 },
  { "*.10.0.0.1", 0, ip_not_pattern, false, 0, 0 },
  { "**.127.1", 0, ip_not_pattern, false, 0, 0 },
  { "2130706433", 0, ip_not_pattern, false, 0, 0 },
  { "0x7f.1:80", 0, ip_not_pattern, false, 0, 0 },
  { "a_b.test", 0, "the host name contains '_', which host names may not contain", false, 0, 0 },
  { "a b.test", 0, "the host contains a space", false, 0, 0 },
  { "a..test", 0, "the host name has an empty label (a leading dot or two dots in a row)", false, 0, 0 },
  { "*..test", 0, "the host name has an empty label (a leading dot or two dots in a row)", false, 0, 0 },
  { "a%2eb.test", 0, "the host contains '%' (percent-encoding and IPv6 zone ids are not accepted)", false, 0, 0 },
  { "b\xc3\xbc" "cher.test", 0, "the host contains a non-ASCII byte (an internationalized name must be given as punycode, xn--...)", false, 0, 0 },
  { "", 0, "the host is empty", false, 0, 0 },
  { ":443", 0, "the host is empty", false, 0, 0 },
  { "example.123", 0, "the host's last label is numeric, but the host is not a valid IPv4 address", false, 0, 0 },
  { "-a.test", 0, "a label of the host name begins or ends with '-'", false, 0, 0 },
  { "a/b.test", 0, "the host name contains '/', which is not a letter, a digit, '-' or '.'", false, 0, 0 },
  { "[::1]", 0, ip_not_pattern, false, 0, 0 },
  { "[::1]:443", 0, ip_not_pattern, false, 0, 0 },
  { "::1", 0, ip_not_pattern, false, 0, 0 },
  { "2001:db8::1", 0, ip_not_pattern, false, 0, 0 },
};

static shk_host_pattern pattern(const char *s)
{
  shk_host_pattern p;
  shk_error err;
  if (shk_host_pattern_parse(s, strlen(s), SHK_HOST_PATTERN_ALLOW_ANY, &p, &err))
    fail_msg("pattern '%s': %s", s, err.message);
  return p;
}

static shk_host host(const char *s)
{
  shk_host h;
  if (shk_host_parse(s, strlen(s), &h, NULL, NULL))
    fail_msg("host '%s'", s);
  return h;
}

static void pattern_parse(void **state)
{
  for (size_t i = 0; i < N(pattern_cases); i++) {
    shk_host_pattern p;
    shk_error err = { "" };
    const char *in = pattern_cases[i].in;
    int r = shk_host_pattern_parse(in, strlen(in), pattern_cases[i].flags, &p, &err);
    if (pattern_cases[i].ok) {
      if (r)
        fail_msg("pattern %zu '%s' refused: %s", i, in, err.message);
      assert_int_equal(p.kind, pattern_cases[i].kind);
      assert_int_equal(p.port, pattern_cases[i].port);
      char text[SHK_HOST_PATTERN_TEXT_MAX];
      shk_host_pattern_format(&p, text);
      assert_string_equal(text, pattern_cases[i].want);
      shk_host_pattern back;
      assert_int_equal(shk_host_pattern_parse(text, strlen(text), pattern_cases[i].flags, &back,
                                              NULL), 0);
      assert_memory_equal(&back, &p, sizeof p);
      assert_true(shk_host_pattern_covers(&p, &p));
    } else {
      if (!r)
        fail_msg("pattern %zu '%s' accepted", i, in);
      assert_int_equal(r, -EINVAL);
      assert_string_equal(err.message, pattern_cases[i].want);
      assert_int_equal(p.kind, 0);
    }
  }
  /* The longest pattern fits its text buffer. */
  char name[SHK_HOST_MAX + 1];
  for (int i = 0; i < SHK_HOST_MAX; i++)
    name[i] = i % 2 ? '.' : 'a';
  name[SHK_HOST_MAX] = '\0';
  char in[SHK_HOST_PATTERN_TEXT_MAX + 8];
  snprintf(in, sizeof in, "**.%s:65535", name);
  shk_host_pattern p = pattern(in);
  char text[SHK_HOST_PATTERN_TEXT_MAX];
  shk_host_pattern_format(&p, text);
  assert_string_equal(text, in);
}

static const struct {
  const char *pattern, *host;
  uint16_t port;
  bool match;
} match_cases[] = {
  /* exact */
  { "a.test", "a.test", 443, true },
  { "a.test", "A.TEST", 443, true },
  { "A.Test", "a.test.", 80, true },
  { "a.test", "b.a.test", 443, false },
  { "a.test", "xa.test", 443, false },
  { "a.test", "a.test.x", 443, false },
  { "a.test", "test", 443, false },
  { "a.test", "a.tes", 443, false },
  /* *.host: strictly below */
  { "*.a.test", "b.a.test", 443, true },
  { "*.a.test", "c.b.a.test", 443, true },
  { "*.a.test", "a.test", 443, false },
  { "*.a.test", "ba.test", 443, false },
  { "*.a.test", "b.xa.test", 443, false },
  { "*.a.test", "B.A.TEST", 443, true },
  /* **.host: the apex and below */
  { "**.a.test", "a.test", 443, true },
  { "**.a.test", "b.a.test", 443, true },
  { "**.a.test", "c.b.a.test", 443, true },
  { "**.a.test", "ba.test", 443, false },
  { "**.a.test", "test", 443, false },
  { "**.test", "anything.test", 80, true },
  { "**.test", "test", 80, true },
  { "**.test", "testx", 80, false },
  { "**.test", "x.testing", 80, false },
  /* ports */
  { "a.test:443", "a.test", 443, true },
  { "a.test:443", "a.test", 80, false },
  { "a.test:443", "a.test", 0, true },
  { "a.test", "a.test", 0, true },
  { "a.test", "a.test", 1, true },
  { "a.test", "a.test", 65535, true },
  { "*.a.test:8080", "b.a.test", 8080, true },
  { "*.a.test:8080", "b.a.test", 8081, false },
  { "**.a.test:22", "a.test", 22, true },
  { "**.a.test:22", "a.test", 2222, false },
  /* addresses: only '*' admits one */
  { "a.test", "10.0.0.1", 443, false },
  { "**.test", "127.0.0.1", 443, false },
  { "localhost", "127.0.0.1", 80, false },
  { "**.test", "::1", 443, false },
  { "*", "10.0.0.1", 443, true },
  { "*", "::1", 443, true },
  { "*", "a.test", 443, true },
  { "*", "a.test", 0, true },
  { "*:443", "a.test", 443, true },
  { "*:443", "a.test", 80, false },
  { "*:443", "10.0.0.1", 443, true },
};

static void pattern_matches(void **state)
{
  for (size_t i = 0; i < N(match_cases); i++) {
    shk_host_pattern p = pattern(match_cases[i].pattern);
    shk_host h = host(match_cases[i].host);
    if (shk_host_pattern_matches(&p, &h, match_cases[i].port) != match_cases[i].match)
      fail_msg("match %zu: %s against %s:%u: expected %d", i, match_cases[i].host,
               match_cases[i].pattern, match_cases[i].port, match_cases[i].match);
  }
}

static const struct {
  const char *outer, *inner;
  bool covers;
} pattern_covers_cases[] = {
  { "a.test", "a.test", true },
  { "a.test", "A.TEST.", true },
  { "a.test", "b.test", false },
  { "a.test", "*.a.test", false },
  { "a.test", "**.a.test", false },
  { "a.test", "x.a.test", false },
  { "*.a.test", "x.a.test", true },
  { "*.a.test", "y.x.a.test", true },
  { "*.a.test", "a.test", false },
  { "*.a.test", "*.a.test", true },
  { "*.a.test", "*.x.a.test", true },
  { "*.a.test", "**.a.test", false },
  { "*.a.test", "**.x.a.test", true },
  { "*.a.test", "xa.test", false },
  { "*.a.test", "*.xa.test", false },
  { "**.a.test", "a.test", true },
  { "**.a.test", "x.a.test", true },
  { "**.a.test", "*.a.test", true },
  { "**.a.test", "**.a.test", true },
  { "**.a.test", "**.x.a.test", true },
  { "**.a.test", "**.test", false },
  { "**.a.test", "xa.test", false },
  { "**.a.test", "**.xa.test", false },
  { "**.test", "a.b.c.test", true },
  /* ports: a pattern with a port admits that port only */
  { "a.test", "a.test:443", true },
  { "a.test:443", "a.test", false },
  { "a.test:443", "a.test:443", true },
  { "a.test:443", "a.test:80", false },
  { "**.a.test:443", "x.a.test:443", true },
  { "**.a.test:443", "x.a.test", false },
  { "*.a.test", "**.x.a.test:8080", true },
  /* the bare '*' */
  { "*", "a.test", true },
  { "*", "**.test:443", true },
  { "*", "*", true },
  { "*:443", "*", false },
  { "*:443", "a.test:443", true },
  { "*:443", "a.test", false },
  { "**.test", "*", false },
  { "a.test", "*", false },
};

static void pattern_covers(void **state)
{
  for (size_t i = 0; i < N(pattern_covers_cases); i++) {
    shk_host_pattern o = pattern(pattern_covers_cases[i].outer);
    shk_host_pattern in = pattern(pattern_covers_cases[i].inner);
    if (shk_host_pattern_covers(&o, &in) != pattern_covers_cases[i].covers)
      fail_msg("covers %zu: %s within %s: expected %d", i, pattern_covers_cases[i].inner,
               pattern_covers_cases[i].outer, pattern_covers_cases[i].covers);
  }
  /* Covering agrees with matching: whatever a covered pattern admits among
   * these hosts and ports, its cover admits too. */
  static const char *const hosts[] = { "test", "a.test", "x.a.test", "y.x.a.test", "xa.test",
                                       "b.test", "10.0.0.1" };
  static const uint16_t ports[] = { 0, 22, 80, 443, 8080 };
  for (size_t i = 0; i < N(pattern_covers_cases); i++) {
    if (!pattern_covers_cases[i].covers)
      continue;
    shk_host_pattern o = pattern(pattern_covers_cases[i].outer);
    shk_host_pattern in = pattern(pattern_covers_cases[i].inner);
    for (size_t h = 0; h < N(hosts); h++)
      for (size_t p = 0; p < N(ports); p++) {
        shk_host hh = host(hosts[h]);
        if (shk_host_pattern_matches(&in, &hh, ports[p]) &&
            !shk_host_pattern_matches(&o, &hh, ports[p]))
          fail_msg("%s covers %s, but admits %s:%u only through the latter",
                   pattern_covers_cases[i].outer, pattern_covers_cases[i].inner, hosts[h], ports[p]);
      }
  }
}

/* ------------------------------------------------------------ paths */

static const struct {
  const char *in;
  const char *err; /* NULL: canonical */
} path_check_cases[] = {
  { "/", NULL },
  { "/w", NULL },
  { "/work", NULL },
  { "/home/u/.config/app", NULL },
  { "/a/b/c", NULL },
  { "/.git", NULL },
  { "/a/.../b", NULL },
  { "/a/..b", NULL },
  { "/a/b..", NULL },
  { "/a/.b", NULL },
  { "/W/A", NULL },
  { "/a b/c", NULL },
  { "relative", "the path is not absolute" },
  { "", "the path is not absolute" },
  { "./a", "the path is not absolute" },
  { "~/a", "the path is not absolute" },
  { "//", "the path has an empty component ('//')" },
  { "//a", "the path has an empty component ('//')" },
  { "/a//b", "the path has an empty component ('//')" },
  { "/a/", "the path ends in '/'" },
  { "/a/b/", "the path ends in '/'" },
  { "/.", "the path has a '.' or '..' component" },
  { "/..", "the path has a '.' or '..' component" },
  { "/a/.", "the path has a '.' or '..' component" },
  { "/a/..", "the path has a '.' or '..' component" },
  { "/a/../etc", "the path has a '.' or '..' component" },
  { "/a/./b", "the path has a '.' or '..' component" },
  { "/../a", "the path has a '.' or '..' component" },
};

static void path_check(void **state)
{
  for (size_t i = 0; i < N(path_check_cases); i++) {
    shk_error err = { "" };
    int r = shk_path_check(path_check_cases[i].in, &err);
    if (!path_check_cases[i].err) {
      if (r)
        fail_msg("path %zu '%s' refused: %s", i, path_check_cases[i].in, err.message);
      /* A canonical path normalizes to itself. */
      char *n;
      assert_int_equal(shk_path_normalize(path_check_cases[i].in, NULL, &n, NULL), 0);
      assert_string_equal(n, path_check_cases[i].in);
      free(n);
    } else {
      if (!r)
        fail_msg("path %zu '%s' accepted", i, path_check_cases[i].in);
      assert_int_equal(r, -EINVAL);
      assert_string_equal(err.message, path_check_cases[i].err);
    }
  }
}

static const struct {
  const char *in, *cwd;
  const char *want; /* NULL: refused with err */
  const char *err;
} normalize_cases[] = {
  { "/", NULL, "/", NULL },
  { "/a/b", NULL, "/a/b", NULL },
  { "/a/b/", NULL, "/a/b", NULL },
  { "//a///b//", NULL, "/a/b", NULL },
  { "/a/./b", NULL, "/a/b", NULL },
  { "/a/../b", NULL, "/b", NULL },
  { "/a/b/../../c", NULL, "/c", NULL },
  { "/..", NULL, "/", NULL },
  { "/../..", NULL, "/", NULL },
  { "/../a", NULL, "/a", NULL },
  { "/a/..", NULL, "/", NULL },
  { "/a/.", NULL, "/a", NULL },
  { "/.", NULL, "/", NULL },
  { "/a/..b/.c/...", NULL, "/a/..b/.c/...", NULL },
  { "a", "/w", "/w/a", NULL },
  { "a/b", "/w/x", "/w/x/a/b", NULL },
  { ".", "/w", "/w", NULL },
  { "..", "/w", "/", NULL },
  { "../a", "/w/x", "/w/a", NULL },
  { "../../../a", "/w", "/a", NULL },
  { "./a/", "/w/", "/w/a", NULL },
  { "a", "/", "/a", NULL },
  { "a", "//w//", "/w/a", NULL },
  { "a", "/w/../v", "/v/a", NULL },
  { "/abs", "/ignored", "/abs", NULL },
  { "", "/w", NULL, "the path is empty" },
  { "", NULL, NULL, "the path is empty" },
  { "a", NULL, NULL,
    "the path is relative and there is no absolute directory to resolve it against" },
  { "a", "w", NULL,
    "the path is relative and there is no absolute directory to resolve it against" },
  { "a", "", NULL,
    "the path is relative and there is no absolute directory to resolve it against" },
};

static void path_normalize(void **state)
{
  for (size_t i = 0; i < N(normalize_cases); i++) {
    char *out = (char *)"unset";
    shk_error err = { "" };
    int r = shk_path_normalize(normalize_cases[i].in, normalize_cases[i].cwd, &out, &err);
    if (normalize_cases[i].want) {
      if (r)
        fail_msg("normalize %zu '%s': %s", i, normalize_cases[i].in, err.message);
      assert_string_equal(out, normalize_cases[i].want);
      /* What comes out is canonical. */
      assert_int_equal(shk_path_check(out, NULL), 0);
      free(out);
    } else {
      if (!r)
        fail_msg("normalize %zu '%s' accepted as %s", i, normalize_cases[i].in, out);
      assert_int_equal(r, -EINVAL);
      assert_null(out);
      assert_string_equal(err.message, normalize_cases[i].err);
    }
  }
}

static const struct {
  const char *path, *prefix;
  bool within;
} within_cases[] = {
  { "/w", "/w", true },
  { "/w/a", "/w", true },
  { "/w/a/b", "/w", true },
  { "/work", "/w", false },
  { "/w", "/w/a", false },
  { "/", "/", true },
  { "/etc", "/", true },
  { "/etc/passwd", "/", true },
  { "/", "/etc", false },
  { "/etcetera", "/etc", false },
  { "/etc", "/etcetera", false },
  { "/a/b", "/a/b/c", false },
  { "/a/bc", "/a/b", false },
  { "/a/b/c", "/a/b", true },
  { "/W", "/w", false },
  { "/w", "/W", false },
  { "/tmp/x", "/tmp", true },
  { "/tmpx", "/tmp", false },
  { "/home/u/.config", "/home/u", true },
  { "/home/user", "/home/u", false },
  { "/a/b.c", "/a/b", false },
  { "/a/b/.c", "/a/b", true },
};

static void path_within(void **state)
{
  for (size_t i = 0; i < N(within_cases); i++)
    if (shk_path_within(within_cases[i].path, within_cases[i].prefix) != within_cases[i].within)
      fail_msg("within %zu: %s under %s: expected %d", i, within_cases[i].path,
               within_cases[i].prefix, within_cases[i].within);
}

/* ------------------------------------------------------------ string vectors */

static void strv(void **state)
{
  shk_strv v = { 0 };
  assert_null(v.v);
  for (int i = 0; i < 100; i++) {
    char s[16];
    snprintf(s, sizeof s, "s%d", i);
    assert_int_equal(shk_strv_push(&v, s), 0);
    assert_int_equal(v.n, (size_t)i + 1);
    assert_null(v.v[v.n]); /* usable as an argv at every step */
  }
  assert_string_equal(v.v[0], "s0");
  assert_string_equal(v.v[99], "s99");
  shk_strv c;
  assert_int_equal(shk_strv_copy(&c, &v), 0);
  assert_int_equal(c.n, 100);
  for (size_t i = 0; i < c.n; i++) {
    assert_string_equal(c.v[i], v.v[i]);
    assert_ptr_not_equal(c.v[i], v.v[i]);
  }
  assert_null(c.v[c.n]);
  shk_strv_clear(&v);
  assert_null(v.v);
  assert_int_equal(v.n, 0);
  assert_string_equal(c.v[50], "s50"); /* the copy is its own */
  shk_strv_clear(&c);
  shk_strv empty = { 0 }, e2;
  assert_int_equal(shk_strv_copy(&e2, &empty), 0);
  assert_int_equal(e2.n, 0);
  shk_strv_clear(&e2);
  shk_strv_clear(&empty); /* clearing an empty vector is fine */
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(host_parse),      cmocka_unit_test(host_bad_char),
    cmocka_unit_test(host_lengths),    cmocka_unit_test(ip_parse),
    cmocka_unit_test(cidr_parse),      cmocka_unit_test(cidr_contains),
    cmocka_unit_test(cidr_covers),     cmocka_unit_test(ip_classes),
    cmocka_unit_test(port_parse),      cmocka_unit_test(port_ranges),
    cmocka_unit_test(pattern_parse),   cmocka_unit_test(pattern_matches),
    cmocka_unit_test(pattern_covers),  cmocka_unit_test(path_check),
    cmocka_unit_test(path_normalize),  cmocka_unit_test(path_within),
    cmocka_unit_test(strv),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
