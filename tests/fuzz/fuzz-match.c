/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: every parser of the shared grammar (src/match) on the
 * same input. Besides not crashing or leaking, each accepted input must
 * hold the properties the callers rely on: a canonical form is a fixed
 * point (it parses back to the same value), a canonical host holds only
 * what a DNS name or an IP literal may hold, a pattern and a range cover
 * themselves, a normalized path is canonical, and a refusal always says
 * why. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shinken/match.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void refused_with_reason(int r, const shk_error *err)
{
  if (r != -EINVAL || !err->message[0] || !memchr(err->message, 0, sizeof err->message))
    abort();
}

static void host(const char *in, size_t size)
{
  shk_host h;
  const char *reason = NULL;
  shk_error err = { "" };
  int r = shk_host_parse(in, size, &h, &reason, &err);
  if (r) {
    refused_with_reason(r, &err);
    if (!reason || strncmp(reason, "host-", 5) || h.kind)
      abort();
    return;
  }
  size_t n = strnlen(h.text, sizeof h.text);
  if (n == 0 || n > SHK_HOST_MAX)
    abort();
  for (size_t i = 0; i < n; i++) {
    char c = h.text[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
          (h.kind == SHK_HOST_IPV6 && c == ':')))
      abort();
  }
  if (h.kind == SHK_HOST_NAME && (h.text[0] == '.' || h.text[n - 1] == '.' || strstr(h.text, "..")))
    abort();
  shk_host again;
  if (shk_host_parse(h.text, n, &again, NULL, NULL) || again.kind != h.kind ||
      strcmp(again.text, h.text) || memcmp(&again.ip, &h.ip, sizeof h.ip))
    abort();
  if (h.kind != SHK_HOST_NAME) {
    shk_ip ip;
    char buf[SHK_IP_TEXT_MAX];
    if (shk_ip_parse(h.text, n, &ip, NULL) || memcmp(&ip, &h.ip, sizeof ip))
      abort();
    shk_ip_format(&h.ip, buf);
    if (strcmp(buf, h.text))
      abort();
    (void)shk_ip_nonpublic(&h.ip); /* total: an answer for every address */
  }
}

static void ip_and_cidr(const char *in, size_t size)
{
  shk_ip ip;
  shk_error err = { "" };
  int r = shk_ip_parse(in, size, &ip, &err);
  if (r) {
    refused_with_reason(r, &err);
  } else {
    /* The strict form is a host spelling too, and they agree. */
    char buf[SHK_IP_TEXT_MAX];
    shk_ip back;
    shk_host h;
    shk_ip_format(&ip, buf);
    if (shk_ip_parse(buf, strlen(buf), &back, NULL) || memcmp(&back, &ip, sizeof ip))
      abort();
    if (shk_host_parse(in, size, &h, NULL, NULL) || h.kind == SHK_HOST_NAME ||
        memcmp(&h.ip, &ip, sizeof ip))
      abort();
  }
  shk_cidr c;
  err.message[0] = '\0';
  r = shk_cidr_parse(in, size, &c, &err);
  if (r) {
    refused_with_reason(r, &err);
    return;
  }
  if (c.prefix > (c.ip.family == 4 ? 32 : 128) || !shk_cidr_contains(&c, &c.ip) ||
      !shk_cidr_covers(&c, &c))
    abort();
  char buf[SHK_CIDR_TEXT_MAX];
  shk_cidr back;
  shk_cidr_format(&c, buf);
  if (shk_cidr_parse(buf, strlen(buf), &back, NULL) || memcmp(&back, &c, sizeof c))
    abort();
}

static void ports(const char *in, size_t size)
{
  uint16_t port = 0;
  shk_error err = { "" };
  int r = shk_port_parse(in, size, &port, &err);
  if (r)
    refused_with_reason(r, &err);
  else if (port == 0)
    abort();
  shk_port_range pr;
  err.message[0] = '\0';
  r = shk_port_range_parse(in, size, &pr, &err);
  if (r) {
    refused_with_reason(r, &err);
    return;
  }
  if (pr.lo == 0 || pr.lo > pr.hi || !shk_port_range_covers(&pr, &pr))
    abort();
  char buf[SHK_PORT_RANGE_TEXT_MAX];
  shk_port_range back;
  shk_port_range_format(&pr, buf);
  if (shk_port_range_parse(buf, strlen(buf), &back, NULL) || back.lo != pr.lo || back.hi != pr.hi)
    abort();
}

static void patterns(const char *in, size_t size)
{
  for (unsigned flags = 0; flags <= SHK_HOST_PATTERN_ALLOW_ANY; flags++) {
    shk_host_pattern p;
    shk_error err = { "" };
    int r = shk_host_pattern_parse(in, size, flags, &p, &err);
    if (r) {
      refused_with_reason(r, &err);
      continue;
    }
    if (p.kind == SHK_HOST_PATTERN_ANY && !flags)
      abort();
    char buf[SHK_HOST_PATTERN_TEXT_MAX];
    shk_host_pattern back;
    shk_host_pattern_format(&p, buf);
    if (strnlen(buf, sizeof buf) == sizeof buf ||
        shk_host_pattern_parse(buf, strlen(buf), flags, &back, NULL) ||
        memcmp(&back, &p, sizeof p) || !shk_host_pattern_covers(&p, &p))
      abort();
    /* A name pattern admits its own host, and never an address. */
    if (p.kind != SHK_HOST_PATTERN_ANY) {
      shk_host h;
      if (shk_host_parse(p.host, strlen(p.host), &h, NULL, NULL) || h.kind != SHK_HOST_NAME)
        abort();
      bool apex = shk_host_pattern_matches(&p, &h, p.port);
      if (apex != (p.kind != SHK_HOST_PATTERN_SUB))
        abort();
      shk_host lo;
      if (shk_host_parse("127.0.0.1", 9, &lo, NULL, NULL) || shk_host_pattern_matches(&p, &lo, 0))
        abort();
    }
  }
}

static void paths(const char *in, size_t size)
{
  /* The path functions take C strings: the input up to its first NUL. */
  char *s = strndup(in, size);
  if (!s)
    return;
  shk_error err = { "" };
  int r = shk_path_check(s, &err);
  if (r)
    refused_with_reason(r, &err);
  char *n = NULL;
  int nr = shk_path_normalize(s, "/cwd", &n, NULL);
  if (nr == 0) {
    if (shk_path_check(n, NULL) || !shk_path_within(n, "/") || !shk_path_within(n, n))
      abort();
    if (r == 0 && strcmp(n, s))
      abort(); /* a canonical path normalizes to itself */
    char *twice = NULL;
    if (shk_path_normalize(n, NULL, &twice, NULL) || strcmp(twice, n))
      abort();
    free(twice);
  } else if (nr != -EINVAL && nr != -ENOMEM) {
    abort();
  }
  free(n);
  free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *in = (const char *)data;
  host(in, size);
  ip_and_cidr(in, size);
  ports(in, size);
  patterns(in, size);
  paths(in, size);
  return 0;
}
