/* SPDX-License-Identifier: Apache-2.0 */
/* The JSON configuration of the standalone proxy (and the admin part of a
 * session's policy). Fail closed: an unknown key, a wrong type or a bad
 * value is an error that names the key; nothing is half-applied, because
 * the caller only ever sees a complete configuration or none. */
#include "egress/egress-internal.h"

#include "common/common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

struct ctx {
  shk_error *err;
};

/* Fills the error with "KEY: MESSAGE" and returns -EINVAL. */
SHK_PRINTF(3, 4) static int fail(struct ctx *c, const char *key, const char *fmt, ...)
{
  char msg[sizeof c->err->message];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return shk__error_set(c->err, -EINVAL, "%s: %s", key, msg);
}

static int oom(struct ctx *c)
{
  return shk__error_set(c->err, -ENOMEM, "out of memory");
}

/* "IP:PORT" or "[IPv6]:PORT" with PORT 0..65535 (0: any free port). */
static int parse_listen(struct ctx *c, const char *key, json_t *v, bool non_loopback_ok,
                        char **text, struct sockaddr_storage *ss, socklen_t *sl)
{
  if (!json_is_string(v))
    return fail(c, key, "must be a string \"ADDRESS:PORT\"");
  const char *s = json_string_value(v);
  size_t len = json_string_length(v);
  const char *colon = memrchr(s, ':', len);
  if (!colon || colon == s)
    return fail(c, key, "must be \"ADDRESS:PORT\"");
  const char *h = s;
  size_t hl = (size_t)(colon - s);
  if (h[0] == '[') {
    if (hl < 3 || h[hl - 1] != ']')
      return fail(c, key, "bad bracketed IPv6 address");
    h++;
    hl -= 2;
  }
  shk_ip ip;
  if (shk_ip_parse(h, hl, &ip, NULL) < 0 || (ip.family == 6 && s[0] != '['))
    return fail(c, key, "bad address (an IP literal, IPv6 in brackets)");
  /* Port 0 asks the kernel for a free port; any other is a port as the
   * shared grammar reads one. */
  const char *p = colon + 1;
  size_t plen = (size_t)(s + len - p);
  uint16_t port = 0;
  if (!(plen == 1 && p[0] == '0') && shk_port_parse(p, plen, &port, NULL) < 0)
    return fail(c, key, "bad port (0 for any free port, or 1 to 65535)");
  static const uint8_t v6_lo[16] = { [15] = 1 };
  bool loopback = ip.family == 4 ? ip.b[0] == 127 : !memcmp(ip.b, v6_lo, 16);
  if (!loopback && !non_loopback_ok)
    return fail(c, key, "listeners are loopback-only (set dangerously_allow_non_loopback to override)");
  memset(ss, 0, sizeof *ss);
  if (ip.family == 4) {
    struct sockaddr_in *sin = (struct sockaddr_in *)ss;
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    memcpy(&sin->sin_addr, ip.b, 4);
    *sl = sizeof *sin;
  } else {
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port);
    memcpy(&sin6->sin6_addr, ip.b, 16);
    *sl = sizeof *sin6;
  }
  *text = strdup(s);
  return *text ? 0 : oom(c);
}

static int parse_verdict(struct ctx *c, const char *key, json_t *v, shk_egress_verdict *out)
{
  const char *s = json_string_value(v);
  if (s && !strcmp(s, "allow"))
    *out = SHK_EGRESS_ALLOW;
  else if (s && !strcmp(s, "deny"))
    *out = SHK_EGRESS_DENY;
  else
    return fail(c, key, "must be \"allow\" or \"deny\"");
  return 0;
}

static int parse_listen_obj(struct ctx *c, json_t *v, shk__eg_config *cfg)
{
  if (!json_is_object(v))
    return fail(c, "listen", "must be an object");
  const char *k;
  json_t *x;
  json_object_foreach(v, k, x) {
    int r;
    if (!strcmp(k, "http"))
      r = parse_listen(c, "listen.http", x, cfg->allow_non_loopback, &cfg->listen_http,
                       &cfg->http_addr, &cfg->http_addrlen);
    else if (!strcmp(k, "socks5"))
      r = parse_listen(c, "listen.socks5", x, cfg->allow_non_loopback, &cfg->listen_socks5,
                       &cfg->socks5_addr, &cfg->socks5_addrlen);
    else
      r = fail(c, "listen", "unknown key '%s' (expected http, socks5)", k);
    if (r < 0)
      return r;
  }
  return 0;
}

static int parse_domains(struct ctx *c, json_t *v, shk__eg_config *cfg)
{
  if (!json_is_object(v))
    return fail(c, "domains", "must be an object of PATTERN: \"allow\"|\"deny\"");
  const char *k;
  json_t *x;
  json_object_foreach(v, k, x) {
    char key[300];
    snprintf(key, sizeof key, "domains.%s", k);
    shk_egress_verdict verdict = SHK_EGRESS_NONE;
    if (parse_verdict(c, key, x, &verdict) < 0)
      return -EINVAL;
    shk_error perr;
    int r = shk__eg_config_add_domain(cfg, k, verdict, &perr);
    if (r == -ENOMEM)
      return oom(c);
    if (r < 0)
      return fail(c, key, "%s", perr.message);
  }
  return 0;
}

static int parse_cidr(struct ctx *c, const char *key, const char *s, shk_cidr *out)
{
  shk_error cerr;
  if (shk_cidr_parse(s, strlen(s), out, &cerr) < 0)
    return fail(c, key, "bad CIDR range '%s': %s", s, cerr.message);
  return 0;
}

static int parse_cidrs(struct ctx *c, json_t *v, shk__eg_config *cfg)
{
  if (!json_is_object(v))
    return fail(c, "cidrs", "must be an object of CIDR: \"allow\"|\"deny\"");
  cfg->cidrs = calloc(json_object_size(v) + 1, sizeof *cfg->cidrs);
  if (!cfg->cidrs)
    return oom(c);
  const char *k;
  json_t *x;
  json_object_foreach(v, k, x) {
    char key[300];
    snprintf(key, sizeof key, "cidrs.%s", k);
    shk__cidr_rule *rule = &cfg->cidrs[cfg->n_cidrs];
    if (parse_cidr(c, key, k, &rule->cidr) < 0 || parse_verdict(c, key, x, &rule->verdict) < 0)
      return -EINVAL;
    rule->text = strdup(k);
    if (!rule->text)
      return oom(c);
    cfg->n_cidrs++;
  }
  return 0;
}

static int parse_private(struct ctx *c, json_t *v, shk__eg_config *cfg)
{
  if (!json_is_array(v))
    return fail(c, "allow_private_cidrs", "must be an array of CIDR strings");
  cfg->private_ok = calloc(json_array_size(v) + 1, sizeof *cfg->private_ok);
  if (!cfg->private_ok)
    return oom(c);
  size_t i;
  json_t *x;
  json_array_foreach(v, i, x) {
    if (!json_is_string(x))
      return fail(c, "allow_private_cidrs", "element %zu is not a string", i);
    if (parse_cidr(c, "allow_private_cidrs", json_string_value(x), &cfg->private_ok[i]) < 0)
      return -EINVAL;
    cfg->n_private_ok++;
  }
  return 0;
}

static int parse_hosts(struct ctx *c, json_t *v, shk__eg_config *cfg)
{
  if (!json_is_object(v))
    return fail(c, "hosts", "must be an object of NAME: [ADDRESS, ...]");
  cfg->pins = calloc(json_object_size(v) + 1, sizeof *cfg->pins);
  if (!cfg->pins)
    return oom(c);
  const char *k;
  json_t *x;
  json_object_foreach(v, k, x) {
    char key[300];
    snprintf(key, sizeof key, "hosts.%s", k);
    shk_host h;
    shk_error herr;
    if (shk_host_parse(k, strlen(k), &h, NULL, &herr) < 0)
      return fail(c, key, "not a host name: %s", herr.message);
    if (h.kind != SHK_HOST_NAME)
      return fail(c, key, "not a host name: an IP address needs no pin");
    if (shk__eg_pin_find(cfg, h.text))
      return fail(c, key, "the same name twice");
    if (!json_is_array(x) || json_array_size(x) == 0)
      return fail(c, key, "must be a non-empty array of addresses");
    shk__pin *pin = &cfg->pins[cfg->n_pins++];
    memcpy(pin->host, h.text, sizeof pin->host);
    pin->ips = calloc(json_array_size(x), sizeof *pin->ips);
    if (!pin->ips)
      return oom(c);
    size_t i;
    json_t *a;
    json_array_foreach(x, i, a) {
      if (!json_is_string(a) ||
          shk_ip_parse(json_string_value(a), json_string_length(a), &pin->ips[i], NULL) < 0)
        return fail(c, key, "element %zu is not an IP address", i);
      pin->n_ips++;
    }
  }
  return 0;
}

static int parse_upstream(struct ctx *c, json_t *v, shk__eg_config *cfg)
{
  shk_host h;
  uint16_t port;
  if (!json_is_string(v) ||
      shk__authority_parse(json_string_value(v), json_string_length(v), 53, &h, &port) ||
      h.kind == SHK_HOST_NAME)
    return fail(c, "dns_upstream", "must be \"IP[:PORT]\" (IPv6 in brackets)");
  cfg->has_dns_upstream = true;
  cfg->dns_upstream = h.ip;
  cfg->dns_upstream_port = port;
  return 0;
}

static int parse_bool(struct ctx *c, const char *key, json_t *v, bool *out)
{
  if (!json_is_boolean(v))
    return fail(c, key, "must be true or false");
  *out = json_is_true(v);
  return 0;
}

/* The "limits" object. Each bound is what an operator could mean; a
 * value outside it is a mistake, refused with its range. */
static int parse_limits(struct ctx *c, json_t *v, shk__eg_config *cfg)
{
  if (!json_is_object(v))
    return fail(c, "limits", "must be an object");
  static const struct {
    const char *key;
    size_t off;
    json_int_t min, max;
  } keys[] = {
    { "connections", offsetof(shk_egress_limits, connections), 1, 1000000 },
    { "setup", offsetof(shk_egress_limits, setup), 1, 1000000 },
    { "held", offsetof(shk_egress_limits, held), 0, 100000 },
    { "idle_timeout_ms", offsetof(shk_egress_limits, idle_ms), 1, 3600000 },
    { "request_timeout_ms", offsetof(shk_egress_limits, request_ms), 1, 3600000 },
    { "hold_timeout_ms", offsetof(shk_egress_limits, hold_ms), 1, 86400000 },
    { "fd_reserve", offsetof(shk_egress_limits, fd_reserve), 0, 1000000 },
    { "dns_names", offsetof(shk_egress_limits, dns_names), 16, SHK__DNS_POOL_MAX },
  };
  const char *k;
  json_t *x;
  json_object_foreach(v, k, x) {
    size_t i = 0;
    while (i < sizeof keys / sizeof keys[0] && strcmp(keys[i].key, k))
      i++;
    char key[300];
    snprintf(key, sizeof key, "limits.%s", k);
    if (i == sizeof keys / sizeof keys[0])
      return fail(c, key,
                  "unknown key (expected connections, setup, held, idle_timeout_ms, "
                  "request_timeout_ms, hold_timeout_ms, fd_reserve, dns_names)");
    json_int_t n = json_integer_value(x);
    if (!json_is_integer(x) || n < keys[i].min || n > keys[i].max)
      return fail(c, key, "must be an integer from %lld to %lld", (long long)keys[i].min,
                  (long long)keys[i].max);
    *(unsigned *)((char *)&cfg->limits + keys[i].off) = (unsigned)n;
  }
  return 0;
}

/* The resolution below reads the limits as an array of unsigned. */
_Static_assert(sizeof(shk_egress_limits) == 8 * sizeof(unsigned),
               "shk_egress_limits holds exactly eight unsigned fields");

void shk__eg_limits_resolve(const shk_egress_limits *file, const shk_egress_limits *opts,
                            shk_egress_limits *out)
{
  static const shk_egress_limits defaults = {
    .connections = 4096, .setup = 128, .held = 64, .idle_ms = 10000, .request_ms = 30000,
    .hold_ms = 600000, .fd_reserve = 256, .dns_names = 4096,
  };
  static const shk_egress_limits unset = {
    SHK__LIMIT_UNSET, SHK__LIMIT_UNSET, SHK__LIMIT_UNSET, SHK__LIMIT_UNSET,
    SHK__LIMIT_UNSET, SHK__LIMIT_UNSET, SHK__LIMIT_UNSET, SHK__LIMIT_UNSET,
  };
  static const shk_egress_limits zero;
  if (!file)
    file = &unset;
  if (!opts)
    opts = &zero;
  const unsigned *f = (const unsigned *)file, *o = (const unsigned *)opts,
                 *d = (const unsigned *)&defaults;
  unsigned *r = (unsigned *)out;
  for (size_t i = 0; i < sizeof *out / sizeof(unsigned); i++)
    r[i] = f[i] != SHK__LIMIT_UNSET ? f[i] : o[i] ? o[i] : d[i];
  if (out->dns_names > SHK__DNS_POOL_MAX)
    out->dns_names = SHK__DNS_POOL_MAX;
}

static int parse_root(struct ctx *c, json_t *root, shk__eg_config *cfg)
{
  if (!json_is_object(root))
    return fail(c, "(top level)", "must be a JSON object");
  /* The two dangerous switches change how other keys are read, so they are
   * read first, whatever their position in the text. */
  json_t *x = json_object_get(root, "dangerously_allow_non_loopback");
  if (x && parse_bool(c, "dangerously_allow_non_loopback", x, &cfg->allow_non_loopback) < 0)
    return -EINVAL;
  x = json_object_get(root, "dangerously_allow_all");
  if (x && parse_bool(c, "dangerously_allow_all", x, &cfg->allow_all) < 0)
    return -EINVAL;
  const char *k;
  json_object_foreach(root, k, x) {
    int r = 0;
    if (!strcmp(k, "listen"))
      r = parse_listen_obj(c, x, cfg);
    else if (!strcmp(k, "domains"))
      r = parse_domains(c, x, cfg);
    else if (!strcmp(k, "cidrs"))
      r = parse_cidrs(c, x, cfg);
    else if (!strcmp(k, "allow_private_cidrs"))
      r = parse_private(c, x, cfg);
    else if (!strcmp(k, "hosts"))
      r = parse_hosts(c, x, cfg);
    else if (!strcmp(k, "dns_upstream"))
      r = parse_upstream(c, x, cfg);
    else if (!strcmp(k, "limits"))
      r = parse_limits(c, x, cfg);
    else if (!strcmp(k, "dns_timeout_ms")) {
      json_int_t t = json_integer_value(x);
      if (!json_is_integer(x) || t < 1 || t > 60000)
        r = fail(c, k, "must be an integer from 1 to 60000");
      else
        cfg->dns_timeout_ms = (unsigned)t;
    } else if (!strcmp(k, "mode")) {
      const char *m = json_string_value(x);
      if (m && !strcmp(m, "full"))
        cfg->connect_only = false;
      else if (m && !strcmp(m, "connect"))
        cfg->connect_only = true;
      else
        r = fail(c, k, "must be \"full\" or \"connect\"");
    } else if (!strcmp(k, "upstream_ca")) {
      /* The bundle the upstreams of inspected connections are verified
       * against; read when the first one is dialed. */
      if (!json_is_string(x) || json_string_value(x)[0] != '/')
        r = fail(c, k, "must be the absolute path of a PEM bundle of CA certificates");
      else if (!(cfg->upstream_ca = strdup(json_string_value(x))))
        r = oom(c);
    } else if (!strcmp(k, "audit")) {
      if (!json_is_string(x) || json_string_length(x) == 0)
        r = fail(c, k, "must be a file name");
      else if (!(cfg->audit_path = strdup(json_string_value(x))))
        r = oom(c);
    } else if (strcmp(k, "dangerously_allow_non_loopback") && strcmp(k, "dangerously_allow_all"))
      r = fail(c, k, "unknown key");
    if (r < 0)
      return r;
  }
  return 0;
}

int shk__eg_config_parse(const char *json, size_t len, shk__eg_config **out, shk_error *err)
{
  struct ctx c = { err };
  *out = NULL;
  json_error_t jerr;
  /* Without JSON_ALLOW_NUL jansson refuses "\u0000" in keys and strings,
   * so every string below is an ordinary C string. */
  json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!root)
    return shk__error_at(err, -EINVAL, NULL, (unsigned)(jerr.line > 0 ? jerr.line : 0),
                         (unsigned)(jerr.column > 0 ? jerr.column : 0), "(json): line %d: %s",
                         jerr.line, jerr.text);
  shk__eg_config *cfg = shk__eg_config_new();
  int r = cfg ? parse_root(&c, root, cfg) : oom(&c);
  json_decref(root);
  if (r < 0) {
    shk__eg_config_free(cfg);
    return r;
  }
  *out = cfg;
  return 0;
}

int shk__eg_config_load(const char *path, shk__eg_config **out, shk_error *err)
{
  *out = NULL;
  shk_autofree char *text = NULL;
  size_t len;
  int r = shk__read_file(path, &text, &len);
  if (r < 0)
    return shk__error_at(err, r, path, 0, 0, "%s: %s", path, strerror(-r));
  shk_error perr;
  r = shk__eg_config_parse(text, len, out, &perr);
  if (r < 0)
    return shk__error_at(err, r, path, perr.line, perr.column, "%s: %s", path, perr.message);
  return 0;
}
