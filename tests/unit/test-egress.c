/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the egress proxy's pure parts: the authority form, the
 * policy lattice, the configuration, the HTTP, SOCKS5 and DNS parsers, and
 * a session end to end. Host canonicalization, IP classes, CIDRs and
 * patterns are the shared grammar's, tested in test-match.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "egress/egress-internal.h"

#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pkcs12.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

static void test_authority(void **state)
{
  shk_host h;
  uint16_t port = 0;
  assert_null(shk__authority_parse("Example.test:443", 16, 0, &h, &port));
  assert_string_equal(h.text, "example.test");
  assert_int_equal(port, 443);
  assert_null(shk__authority_parse("[::1]:8080", 10, 0, &h, &port));
  assert_string_equal(h.text, "::1");
  assert_int_equal(port, 8080);
  assert_null(shk__authority_parse("example.test", 12, 80, &h, &port));
  assert_int_equal(port, 80);
  assert_string_equal(shk__authority_parse("example.test", 12, 0, &h, &port), "port-missing");
  assert_string_equal(shk__authority_parse("a.test:0", 8, 0, &h, &port), "port-bad");
  assert_string_equal(shk__authority_parse("a.test:65536", 12, 0, &h, &port), "port-bad");
  assert_string_equal(shk__authority_parse("a.test:+80", 10, 0, &h, &port), "port-bad");
  assert_string_equal(shk__authority_parse("::1:80", 6, 0, &h, &port), "authority-bad");
  assert_string_equal(shk__authority_parse("u@a.test:80", 11, 0, &h, &port), "authority-userinfo");
}

static shk__eg_config *parse_ok(const char *json)
{
  shk__eg_config *cfg;
  shk_error err;
  if (shk__eg_config_parse(json, strlen(json), &cfg, &err) < 0)
    fail_msg("config refused: %s", err.message);
  return cfg;
}

/* The message begins with KEY and, when WANT is given, is exactly
 * "KEY: WANT". */
static void parse_bad_is(const char *json, const char *key, const char *want)
{
  shk__eg_config *cfg;
  shk_error err = { "" };
  assert_int_equal(shk__eg_config_parse(json, strlen(json), &cfg, &err), -EINVAL);
  assert_null(cfg);
  if (!strstr(err.message, key))
    fail_msg("error '%s' does not name '%s'", err.message, key);
  if (want) {
    char full[600];
    snprintf(full, sizeof full, "%s: %s", key, want);
    assert_string_equal(err.message, full);
  }
}

static void parse_bad(const char *json, const char *key)
{
  parse_bad_is(json, key, NULL);
}

static shk_egress_verdict decide(const shk__eg_config *cfg, const char *host, uint16_t port,
                                 const char **rule)
{
  shk_host h;
  assert_int_equal(shk_host_parse(host, strlen(host), &h, NULL, NULL), 0);
  shk__decision d;
  shk__eg_decide(cfg, &h, port, &d);
  if (rule)
    *rule = d.rule;
  return d.verdict;
}

static const char issue_config[] =
  "{ \"listen\": { \"http\": \"127.0.0.1:0\", \"socks5\": \"127.0.0.1:0\" },"
  "  \"domains\": { \"example.test\": \"allow\", \"**.corp.test:443\": \"allow\","
  "                \"*.bad.test\": \"deny\" },"
  "  \"cidrs\": { \"203.0.113.0/24\": \"allow\" },"
  "  \"allow_private_cidrs\": [ \"10.77.0.0/24\" ],"
  "  \"hosts\": { \"api.example.test\": [ \"10.77.0.2\" ] },"
  "  \"dns_upstream\": \"127.0.0.1:5353\", \"mode\": \"full\" }";

static void test_lattice(void **state)
{
  shk__eg_config *cfg = parse_ok(issue_config);
  const char *rule;
  assert_int_equal(decide(cfg, "EXAMPLE.test.", 80, &rule), SHK_EGRESS_ALLOW);
  assert_string_equal(rule, "example.test");
  assert_int_equal(decide(cfg, "www.example.test", 80, NULL), SHK_EGRESS_NONE);
  assert_int_equal(decide(cfg, "corp.test", 443, NULL), SHK_EGRESS_ALLOW);
  assert_int_equal(decide(cfg, "a.b.corp.test", 443, NULL), SHK_EGRESS_ALLOW);
  assert_int_equal(decide(cfg, "a.corp.test", 80, NULL), SHK_EGRESS_NONE);
  assert_int_equal(decide(cfg, "xcorp.test", 443, NULL), SHK_EGRESS_NONE);
  assert_int_equal(decide(cfg, "x.bad.test", 443, &rule), SHK_EGRESS_DENY);
  assert_string_equal(rule, "*.bad.test");
  assert_int_equal(decide(cfg, "bad.test", 443, NULL), SHK_EGRESS_NONE);
  assert_int_equal(decide(cfg, "203.0.113.7", 443, &rule), SHK_EGRESS_ALLOW);
  assert_string_equal(rule, "203.0.113.0/24");
  assert_int_equal(decide(cfg, "0xcb.0.113.7", 443, NULL), SHK_EGRESS_ALLOW);
  assert_int_equal(decide(cfg, "198.51.100.7", 443, NULL), SHK_EGRESS_NONE);
  /* A DNS query (port 0) may resolve a name an allow rule with a port
   * covers; a deny rule with a port does not refuse the name. */
  assert_int_equal(decide(cfg, "a.corp.test", 0, NULL), SHK_EGRESS_ALLOW);
  assert_int_equal(shk__eg_config_add_domain(cfg, "example.test:25", SHK_EGRESS_DENY, NULL), 0);
  assert_int_equal(decide(cfg, "example.test", 0, NULL), SHK_EGRESS_ALLOW);
  assert_int_equal(decide(cfg, "example.test", 25, NULL), SHK_EGRESS_DENY);
  assert_int_equal(decide(cfg, "x.bad.test", 0, NULL), SHK_EGRESS_DENY);
  /* Deny wins over allow, whatever the order. */
  assert_int_equal(shk__eg_config_add_domain(cfg, "evil.corp.test", SHK_EGRESS_DENY, NULL), 0);
  assert_int_equal(decide(cfg, "evil.corp.test", 443, &rule), SHK_EGRESS_DENY);
  assert_string_equal(rule, "evil.corp.test");
  assert_int_equal(decide(cfg, "good.corp.test", 443, NULL), SHK_EGRESS_ALLOW);
  /* The private opt-in and the pins. */
  shk_ip ip;
  assert_int_equal(shk_ip_parse("10.77.0.2", 9, &ip, NULL), 0);
  assert_null(shk__eg_ip_blocked(cfg, &ip));
  assert_int_equal(shk_ip_parse("10.77.1.2", 9, &ip, NULL), 0);
  assert_string_equal(shk__eg_ip_blocked(cfg, &ip), "ip-private");
  assert_int_equal(shk_ip_parse("1.1.1.1", 7, &ip, NULL), 0);
  assert_null(shk__eg_ip_blocked(cfg, &ip));
  const shk__pin *pin = shk__eg_pin_find(cfg, "api.example.test");
  assert_non_null(pin);
  assert_int_equal(pin->n_ips, 1);
  assert_true(cfg->has_dns_upstream);
  assert_int_equal(cfg->dns_upstream_port, 5353);
  shk__eg_config_free(cfg);

  /* An empty allowlist blocks everything. */
  cfg = parse_ok("{}");
  assert_int_equal(decide(cfg, "example.test", 80, NULL), SHK_EGRESS_NONE);
  assert_int_equal(decide(cfg, "1.1.1.1", 80, NULL), SHK_EGRESS_NONE);
  shk__eg_config_free(cfg);

  /* A denied range is denied for addresses a name leads to, too. */
  cfg = parse_ok("{\"cidrs\": {\"1.1.1.0/24\": \"deny\"}}");
  assert_int_equal(shk_ip_parse("1.1.1.1", 7, &ip, NULL), 0);
  assert_string_equal(shk__eg_ip_blocked(cfg, &ip), "policy-deny-cidr");
  shk__eg_config_free(cfg);

  cfg = parse_ok("{\"dangerously_allow_all\": true, \"domains\": {\"*\": \"allow\","
                 " \"x.test\": \"deny\"}}");
  assert_int_equal(decide(cfg, "anything.test", 80, NULL), SHK_EGRESS_ALLOW);
  assert_int_equal(decide(cfg, "x.test", 80, NULL), SHK_EGRESS_DENY);
  shk__eg_config_free(cfg);
}

/* A rule's pattern is the shared grammar's (test-match.c has the table);
 * what the proxy adds is where a bare '*' may stand, and that a pattern
 * keeps its text for audit lines while matching on the canonical form. */
static void test_patterns(void **state)
{
  static const struct {
    const char *pat;
    shk_egress_verdict v;
    bool allow_all;
    const char *err; /* NULL: accepted */
  } cases[] = {
    { "*", SHK_EGRESS_DENY, true,
      "a bare '*' is refused in a deny rule (to deny everything, allow nothing)" },
    { "*", SHK_EGRESS_DENY, false,
      "a bare '*' is refused in a deny rule (to deny everything, allow nothing)" },
    { "*", SHK_EGRESS_ALLOW, false, "a bare '*' (every host) needs dangerously_allow_all: true" },
    { "*", SHK_EGRESS_ALLOW, true, NULL },
    { "*:443", SHK_EGRESS_ALLOW, true, NULL },
    { "a.*.test", SHK_EGRESS_ALLOW, false,
      "'*' may stand only as the whole first label, as in *.host or **.host" },
    { "***.test", SHK_EGRESS_ALLOW, false,
      "'*' may stand only as the whole first label, as in *.host or **.host" },
    { "a.test:99999", SHK_EGRESS_ALLOW, false,
      "the port must be a decimal number from 1 to 65535, without sign or leading zero" },
    { "10.0.0.1", SHK_EGRESS_ALLOW, false,
      "an IP address is not a host pattern (a range of addresses is a CIDR)" },
    { "a_b.test", SHK_EGRESS_DENY, false,
      "the host name contains '_', which host names may not contain" },
    { "**.Corp.Test.:443", SHK_EGRESS_ALLOW, false, NULL },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    shk__eg_config *cfg = shk__eg_config_new();
    assert_non_null(cfg);
    cfg->allow_all = cases[i].allow_all;
    shk_error err = { "" };
    int r = shk__eg_config_add_domain(cfg, cases[i].pat, cases[i].v, &err);
    if (cases[i].err) {
      if (r != -EINVAL)
        fail_msg("case %zu: '%s' accepted", i, cases[i].pat);
      assert_string_equal(err.message, cases[i].err);
      assert_int_equal(cfg->n_domains, 0);
    } else {
      if (r)
        fail_msg("case %zu: '%s' refused: %s", i, cases[i].pat, err.message);
      assert_int_equal(cfg->n_domains, 1);
      assert_string_equal(cfg->domains[0].text, cases[i].pat);
    }
    shk__eg_config_free(cfg);
  }
  shk__eg_config *cfg = shk__eg_config_new();
  assert_int_equal(shk__eg_config_add_domain(cfg, "**.Corp.Test.:443", SHK_EGRESS_ALLOW, NULL), 0);
  assert_int_equal(cfg->domains[0].pattern.kind, SHK_HOST_PATTERN_APEX_SUB);
  assert_string_equal(cfg->domains[0].pattern.host, "corp.test");
  assert_int_equal(cfg->domains[0].pattern.port, 443);
  shk__eg_config_free(cfg);
}

/* The case rule, once for the egress proxy: a rule written in capitals
 * matches the canonical (lowercase) host, as the same pattern in a grant
 * does (test-cap.c). */
static void test_case_rule(void **state)
{
  shk__eg_config *cfg = parse_ok("{\"domains\": {\"Example.TEST\": \"allow\","
                                 " \"*.BAD.Example.Test\": \"deny\"}}");
  const char *rule;
  assert_int_equal(decide(cfg, "example.test", 443, &rule), SHK_EGRESS_ALLOW);
  assert_string_equal(rule, "Example.TEST");
  assert_int_equal(decide(cfg, "EXAMPLE.test", 443, NULL), SHK_EGRESS_ALLOW);
  assert_int_equal(decide(cfg, "x.bad.example.test", 443, NULL), SHK_EGRESS_DENY);
  assert_int_equal(decide(cfg, "X.Bad.Example.TEST", 443, NULL), SHK_EGRESS_DENY);
  shk__eg_config_free(cfg);
}

static void test_config_errors(void **state)
{
  parse_bad("{\"nope\": 1}", "nope");
  parse_bad("{\"listen\": {\"ftp\": \"127.0.0.1:0\"}}", "ftp");
  parse_bad("{\"listen\": {\"http\": \"0.0.0.0:8080\"}}", "listen.http");
  parse_bad("{\"listen\": {\"socks5\": \"127.0.0.1:70000\"}}", "listen.socks5");
  parse_bad("{\"listen\": {\"http\": \"localhost:80\"}}", "listen.http");
  parse_bad("{\"domains\": {\"example.test\": \"maybe\"}}", "domains.example.test");
  parse_bad("{\"domains\": {\"*\": \"deny\"}}", "domains.*");
  parse_bad("{\"domains\": {\"*\": \"allow\"}}", "domains.*");
  parse_bad("{\"domains\": {\"a b.test\": \"allow\"}}", "domains.a b.test");
  parse_bad("{\"domains\": [\"example.test\"]}", "domains");
  parse_bad("{\"cidrs\": {\"10.0.0.1/8\": \"allow\"}}", "cidrs.10.0.0.1/8");
  parse_bad("{\"allow_private_cidrs\": [\"10.0.0.0\"]}", "allow_private_cidrs");
  parse_bad("{\"allow_private_cidrs\": \"10.0.0.0/8\"}", "allow_private_cidrs");
  parse_bad("{\"hosts\": {\"a.test\": [\"010.0.0.1\"]}}", "hosts.a.test");
  parse_bad("{\"hosts\": {\"a.test\": []}}", "hosts.a.test");
  parse_bad("{\"hosts\": {\"1.2.3.4\": [\"10.0.0.1\"]}}", "hosts.1.2.3.4");
  parse_bad("{\"dns_upstream\": \"resolver.test:53\"}", "dns_upstream");
  parse_bad("{\"dns_upstream\": 53}", "dns_upstream");
  parse_bad("{\"mode\": \"half\"}", "mode");
  parse_bad("{\"audit\": 1}", "audit");
  parse_bad("{\"dns_timeout_ms\": 0}", "dns_timeout_ms");
  parse_bad("{\"dangerously_allow_all\": \"yes\"}", "dangerously_allow_all");
  parse_bad("{\"mode\": \"full\", \"mode\": \"full\"}", "json");
  parse_bad("[1]", "top level");
  parse_bad("{", "json");
  /* The sentences of the shared grammar, under the key that held them. */
  parse_bad_is("{\"domains\": {\"a.*.test\": \"allow\"}}", "domains.a.*.test",
               "'*' may stand only as the whole first label, as in *.host or **.host");
  parse_bad_is("{\"domains\": {\"*\": \"deny\"}}", "domains.*",
               "a bare '*' is refused in a deny rule (to deny everything, allow nothing)");
  parse_bad_is("{\"cidrs\": {\"10.0.0.1/8\": \"allow\"}}", "cidrs.10.0.0.1/8",
               "bad CIDR range '10.0.0.1/8': the address has bits set past the /8 prefix (the "
               "range it is in is 10.0.0.0/8)");
  parse_bad_is("{\"allow_private_cidrs\": [\"10.0.0.0\"]}", "allow_private_cidrs",
               "bad CIDR range '10.0.0.0': a CIDR range needs a prefix length: ADDRESS/PREFIX "
               "(one address is /32, or /128 for IPv6)");
  parse_bad_is("{\"hosts\": {\"a_b.test\": [\"10.0.0.1\"]}}", "hosts.a_b.test",
               "not a host name: the host name contains '_', which host names may not contain");
  parse_bad_is("{\"listen\": {\"http\": \"127.0.0.1:0080\"}}", "listen.http",
               "bad port (0 for any free port, or 1 to 65535)");

  shk__eg_config *cfg = parse_ok("{\"dangerously_allow_non_loopback\": true,"
                                 " \"listen\": {\"http\": \"0.0.0.0:0\"}}");
  shk__eg_config_free(cfg);
  cfg = parse_ok("{\"listen\": {\"http\": \"[::1]:0\"}, \"mode\": \"connect\","
                 " \"audit\": \"/dev/null\"}");
  assert_true(cfg->connect_only);
  assert_string_equal(cfg->audit_path, "/dev/null");
  shk__eg_config_free(cfg);
}

/* The one reader of the configuration file, for the standalone proxy and
 * for a session: its errors begin with the file's name, and carry it (and
 * the line, for JSON syntax) in the error's place. */
static void test_config_load(void **state)
{
  shk__eg_config *cfg = (shk__eg_config *)1;
  shk_error err;
  assert_int_equal(shk__eg_config_load("/nonexistent/egress.json", &cfg, &err), -ENOENT);
  assert_null(cfg);
  assert_string_equal(err.message, "/nonexistent/egress.json: No such file or directory");
  assert_string_equal(err.file, "/nonexistent/egress.json");

  char path[] = "/tmp/shinken-egress-load-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  static const char bad[] = "{\n  \"mode\": \"full\",\n  \"mode\": \"connect\"\n}\n";
  assert_int_equal(write(fd, bad, sizeof bad - 1), (ssize_t)sizeof bad - 1);
  assert_int_equal(shk__eg_config_load(path, &cfg, &err), -EINVAL);
  assert_null(cfg);
  assert_true(!strncmp(err.message, path, strlen(path)));
  assert_non_null(strstr(err.message, ": (json): line 3: "));
  assert_string_equal(err.file, path);
  assert_int_equal(err.line, 3);

  assert_int_equal(ftruncate(fd, 0), 0);
  static const char badkey[] = "{\"domains\": {\"a_b.test\": \"allow\"}}";
  assert_int_equal(pwrite(fd, badkey, sizeof badkey - 1, 0), (ssize_t)sizeof badkey - 1);
  assert_int_equal(shk__eg_config_load(path, &cfg, &err), -EINVAL);
  char want[300];
  snprintf(want, sizeof want,
           "%s: domains.a_b.test: the host name contains '_', which host names may not contain",
           path);
  assert_string_equal(err.message, want);

  /* A session reads it the same way, and names a bad pattern of its own. */
  shk_egress_session *s = (shk_egress_session *)1;
  shk_egress_session_opts o = { .config_path = path };
  assert_int_equal(shk_egress_session_open(&o, &s, &err), -EINVAL);
  assert_null(s);
  assert_string_equal(err.message, want);
  static const char good[] = "{\"domains\": {\"a.test\": \"allow\"}}                ";
  assert_int_equal(pwrite(fd, good, sizeof good - 1, 0), (ssize_t)sizeof good - 1);
  const char *deny[] = { "ok.test", "*" };
  o.deny_domains = deny;
  o.n_deny_domains = 2;
  assert_int_equal(shk_egress_session_open(&o, &s, &err), -EINVAL);
  assert_null(s);
  assert_string_equal(err.message, "--deny-domain '*': a bare '*' is refused in a deny rule (to "
                                   "deny everything, allow nothing)");
  /* Errors may go nowhere. */
  assert_int_equal(shk_egress_session_open(&o, &s, NULL), -EINVAL);
  close(fd);
  unlink(path);
}

static int http(const char *head, shk__http_req *req, shk__http_refusal *ref)
{
  return shk__http_parse_head(head, strlen(head), req, ref);
}

static void http_refused(const char *head, int status, const char *reason)
{
  shk__http_req req;
  shk__http_refusal ref;
  int r = http(head, &req, &ref);
  shk__http_req_free(&req);
  if (r != -1)
    fail_msg("accepted (%d): %s", r, head);
  assert_int_equal(ref.status, status);
  assert_string_equal(ref.reason, reason);
}

static void test_http(void **state)
{
  shk__http_req req;
  shk__http_refusal ref;
  assert_int_equal(http("GET http://Example.Test/a?b=c HTTP/1.1\r\nHost: example.test\r\n"
                        "Proxy-Authorization: Basic eDp5\r\nConnection: keep-alive, X-Secret\r\n"
                        "X-Secret: 1\r\nKeep-Alive: 5\r\nAccept: */*\r\nContent-Length: 3\r\n"
                        "\r\nabc",
                        &req, &ref),
                   1);
  assert_false(req.is_connect);
  assert_string_equal(req.host.text, "example.test");
  assert_int_equal(req.port, 80);
  assert_int_equal(req.content_length, 3);
  assert_string_equal(req.upstream, "GET /a?b=c HTTP/1.1\r\nHost: example.test\r\n"
                                    "Content-Length: 3\r\nAccept: */*\r\nConnection: close\r\n\r\n");
  assert_int_equal(req.head_len, strlen(
    "GET http://Example.Test/a?b=c HTTP/1.1\r\nHost: example.test\r\n"
    "Proxy-Authorization: Basic eDp5\r\nConnection: keep-alive, X-Secret\r\n"
    "X-Secret: 1\r\nKeep-Alive: 5\r\nAccept: */*\r\nContent-Length: 3\r\n\r\n"));
  shk__http_req_free(&req);

  assert_int_equal(http("CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n", &req, &ref), 1);
  assert_true(req.is_connect);
  assert_int_equal(req.port, 443);
  assert_null(req.upstream);
  assert_int_equal(http("GET http://[::1]:8080 HTTP/1.0\r\n\r\n", &req, &ref), 1);
  assert_string_equal(req.upstream, "GET / HTTP/1.0\r\nHost: [::1]:8080\r\nConnection: close\r\n\r\n");
  shk__http_req_free(&req);
  assert_int_equal(http("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n", &req, &ref), 0);

  http_refused("GET http://a.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n", 400, "http-host-mismatch");
  http_refused("GET http://a.test/ HTTP/1.1\r\nHost: a.test:81\r\n\r\n", 400, "http-host-mismatch");
  http_refused("GET http://a.test/ HTTP/1.1\r\n\r\n", 400, "http-host-missing");
  http_refused("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nHost: a.test\r\n\r\n", 400,
               "http-two-host");
  http_refused("POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 1\r\n"
               "Content-Length: 1\r\n\r\n", 400, "http-two-content-length");
  http_refused("POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 1\r\n"
               "Transfer-Encoding: chunked\r\n\r\n", 400, "http-cl-and-te");
  http_refused("POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\n"
               "Transfer-Encoding: gzip, chunked\r\n\r\n", 501,
               "http-transfer-encoding-unsupported");
  http_refused("POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n"
               "Transfer-Encoding: chunked\r\n\r\n", 501, "http-transfer-encoding-unsupported");
  http_refused("POST http://a.test/ HTTP/1.0\r\nHost: a.test\r\n"
               "Transfer-Encoding: chunked\r\n\r\n", 400, "http-chunked-in-1.0");
  http_refused("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nX: 1\r\n 2\r\n\r\n", 400,
               "http-obs-fold");
  http_refused("GET http://a.test/ HTTP/1.1\nHost: a.test\n\n", 400, "http-bare-lf");
  http_refused("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nX : 1\r\n\r\n", 400,
               "http-bad-header-name");
  http_refused("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: -1\r\n\r\n", 400,
               "http-bad-content-length");
  http_refused("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", 400, "http-not-absolute-form");
  http_refused("GET https://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", 400,
               "http-https-needs-connect");
  http_refused("GET http://u:p@a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", 400,
               "authority-userinfo");
  http_refused("GET http://a%2etest/ HTTP/1.1\r\nHost: a.test\r\n\r\n", 400, "host-percent");
  http_refused("CONNECT a.test HTTP/1.1\r\n\r\n", 400, "port-missing");
  http_refused("GET http://a.test/ HTTP/2.0\r\n\r\n", 505, "http-bad-version");
  char big[SHK__HTTP_HEAD_MAX + 10];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  memcpy(big, "GET http://a.test/ HTTP/1.1\r\nX: ", 32);
  http_refused(big, 431, "http-head-too-large");
}

static void test_chunked(void **state)
{
  shk__http_req req;
  shk__http_refusal ref;
  assert_int_equal(http("POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\n"
                        "Transfer-Encoding: Chunked\r\n\r\n", &req, &ref), 1);
  assert_true(req.chunked);
  assert_non_null(strstr(req.upstream, "\r\nTransfer-Encoding: chunked\r\n"));
  shk__http_req_free(&req);

  static const char body[] = "5\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n";
  static const char next[] = "GET http://evil.test/ HTTP/1.1\r\n\r\n";
  char all[sizeof body + sizeof next];
  snprintf(all, sizeof all, "%s%s", body, next);
  const char *why = NULL;
  shk__chunked c = { 0 };
  assert_int_equal(shk__chunked_feed(&c, all, strlen(all), &why), (long)strlen(body));
  assert_true(shk__chunked_done(&c));
  /* Byte by byte, the same. */
  memset(&c, 0, sizeof c);
  for (size_t i = 0; i < strlen(body); i++) {
    assert_false(shk__chunked_done(&c));
    assert_int_equal(shk__chunked_feed(&c, body + i, 1, &why), 1);
  }
  assert_true(shk__chunked_done(&c));
  static const char *const bad[][2] = {
    { "5\nhello\r\n0\r\n\r\n", "chunk-bad-size" },
    { "5\r\nhello\n0\r\n\r\n", "chunk-bad-end" },
    { "5;ext=1\r\nhello\r\n0\r\n\r\n", "chunk-extension-unsupported" },
    { "0\r\nX-Trailer: 1\r\n\r\n", "chunk-trailer-unsupported" },
    { "10000000000000000\r\n", "chunk-bad-size" },
    { "\r\n", "chunk-bad-size" },
    { "-1\r\n", "chunk-bad-size" },
    { "5\r\nhelloX\r\n", "chunk-bad-end" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    memset(&c, 0, sizeof c);
    why = NULL;
    if (shk__chunked_feed(&c, bad[i][0], strlen(bad[i][0]), &why) != -1)
      fail_msg("accepted chunked body '%s'", bad[i][0]);
    assert_string_equal(why, bad[i][1]);
  }
}

static void test_socks5(void **state)
{
  const char *reason;
  assert_int_equal(shk__socks5_parse_greeting((const uint8_t *)"\x05\x02\x02\x00", 4, &reason), 4);
  assert_int_equal(shk__socks5_parse_greeting((const uint8_t *)"\x05\x02\x02", 3, &reason), 0);
  assert_int_equal(shk__socks5_parse_greeting((const uint8_t *)"\x05\x01\x02", 3, &reason), -1);
  assert_int_equal(shk__socks5_parse_greeting((const uint8_t *)"\x04\x01", 2, &reason), -1);
  shk__socks5_req req;
  uint8_t code;
  const uint8_t dom[] = "\x05\x01\x00\x03\x0c" "Example.TEST" "\x01\xbb";
  assert_int_equal(shk__socks5_parse_request(dom, sizeof dom - 1, &req, &code, &reason),
                   (int)sizeof dom - 1);
  assert_string_equal(req.host.text, "example.test");
  assert_int_equal(req.port, 443);
  assert_int_equal(shk__socks5_parse_request(dom, 10, &req, &code, &reason), 0);
  const uint8_t v4[] = { 5, 1, 0, 1, 169, 254, 169, 254, 0, 80 };
  assert_int_equal(shk__socks5_parse_request(v4, sizeof v4, &req, &code, &reason), 10);
  assert_string_equal(req.host.text, "169.254.169.254");
  const uint8_t bind[] = { 5, 2, 0, 1, 1, 1, 1, 1, 0, 80 };
  assert_int_equal(shk__socks5_parse_request(bind, sizeof bind, &req, &code, &reason), -1);
  assert_int_equal(code, SHK__SOCKS5_CMD_UNSUPPORTED);
  const uint8_t udp[] = { 5, 3, 0, 1, 1, 1, 1, 1, 0, 80 };
  assert_int_equal(shk__socks5_parse_request(udp, sizeof udp, &req, &code, &reason), -1);
  assert_int_equal(code, SHK__SOCKS5_CMD_UNSUPPORTED);
  const uint8_t octal[] = "\x05\x01\x00\x03\x0a" "0177.0.0.1\x00\x50";
  assert_int_equal(shk__socks5_parse_request(octal, sizeof octal - 1, &req, &code, &reason),
                   (int)sizeof octal - 1);
  assert_int_equal(req.host.kind, SHK_HOST_IPV4);
  assert_string_equal(req.host.text, "127.0.0.1");
  const uint8_t nul[] = "\x05\x01\x00\x03\x03" "a\0b\x00\x50";
  assert_int_equal(shk__socks5_parse_request(nul, sizeof nul - 1, &req, &code, &reason), -1);
  assert_int_equal(code, SHK__SOCKS5_NOT_ALLOWED);
  assert_string_equal(reason, "host-nul");
}

static void test_dns(void **state)
{
  static const uint8_t q[] = { 0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0,
                               3, 'A', 'p', 'i', 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 4, 't',
                               'e', 's', 't', 0, 0, 1, 0, 1 };
  shk__dns_query dq;
  assert_null(shk__dns_parse_query(q, sizeof q, &dq));
  assert_true(dq.name_ok);
  assert_string_equal(dq.host.text, "api.example.test");
  assert_int_equal(dq.qtype, 1);
  shk_ip ips[2];
  assert_int_equal(shk_ip_parse("1.1.1.1", 7, &ips[0], NULL), 0);
  assert_int_equal(shk_ip_parse("2606:4700::1111", 15, &ips[1], NULL), 0);
  uint8_t out[512];
  size_t n = shk__dns_build_reply(&dq, ips, 2, out, sizeof out);
  assert_int_equal(n, sizeof q + 16);
  assert_int_equal(out[3] & 0xf, 0);
  assert_int_equal(out[7], 1); /* one A answer; the AAAA address is left out */
  assert_memory_equal(out + n - 4, ips[0].b, 4);
  n = shk__dns_build_reply(&dq, NULL, 0, out, sizeof out);
  assert_int_equal(out[3] & 0xf, 5);
  assert_int_equal(n, sizeof q);
  assert_non_null(shk__dns_parse_query(q, 11, &dq));
  uint8_t ptr[sizeof q];
  memcpy(ptr, q, sizeof q);
  ptr[12] = 0xc0;
  assert_non_null(shk__dns_parse_query(ptr, sizeof ptr, &dq));
}

/* The synthetic address pool: one index per name, both families leading
 * back to it, least recently used first out, and an address is not handed
 * to another name soon after its own was forgotten. */
static void test_pool(void **state)
{
  shk__dns_pool *p = shk__dns_pool_new(16, 7);
  assert_non_null(p);
  assert_null(shk__dns_pool_new(0, 1));
  assert_null(shk__dns_pool_new(SHK__DNS_POOL_MAX + 1, 1));
  uint32_t a, b, again;
  assert_int_equal(shk__dns_pool_get(p, "a.test", &a), 0);
  assert_int_equal(shk__dns_pool_get(p, "b.test", &b), 0);
  assert_int_equal(shk__dns_pool_get(p, "a.test", &again), 0);
  assert_int_equal(again, a);
  assert_int_not_equal(a, b);
  assert_int_equal(shk__dns_pool_get(p, "", &again), -EINVAL);
  for (int fam = 4; fam <= 6; fam += 2) {
    shk_ip ip;
    uint32_t back = 0;
    shk__dns_pool_address(a, fam, &ip);
    assert_int_equal(ip.family, fam);
    assert_true(shk__dns_pool_index(&ip, &back));
    assert_int_equal(back, a);
    assert_string_equal(shk__dns_pool_name(p, back), "a.test");
    /* The addresses are non-public: were one ever dialed as itself, the
     * address check would refuse it. */
    assert_non_null(shk_ip_nonpublic(&ip));
  }
  /* Only the pool's ranges are the pool's. */
  static const struct {
    const char *ip;
    bool in;
  } ranges[] = { { "198.18.0.1", true },      { "198.19.255.254", true },
                 { "198.17.255.255", false }, { "198.20.0.0", false },
                 { "10.77.0.2", false },      { "fd53:686b:6e00::5", true },
                 { "fd53:686b:6e00:0:1::5", true }, { "fd53:686b:6e01::5", false },
                 { "::1", false } };
  for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
    shk_ip ip;
    uint32_t idx = 99;
    assert_int_equal(shk_ip_parse(ranges[i].ip, strlen(ranges[i].ip), &ip, NULL), 0);
    if (shk__dns_pool_index(&ip, &idx) != ranges[i].in)
      fail_msg("%s: in range %d", ranges[i].ip, !ranges[i].in);
    /* Inside the ranges but never handed out: unknown, never a name. */
    if (ranges[i].in && idx != a && idx != b)
      assert_null(shk__dns_pool_name(p, idx));
  }
  /* Full at 16: touching a.test keeps it, so b.test is the oldest and the
   * 17th name forgets it. */
  char name[32];
  for (int i = 0; i < 14; i++) {
    snprintf(name, sizeof name, "n%d.test", i);
    assert_int_equal(shk__dns_pool_get(p, name, &again), 0);
  }
  assert_int_equal(shk__dns_pool_size(p), 16);
  assert_string_equal(shk__dns_pool_name(p, a), "a.test");
  assert_int_equal(shk__dns_pool_get(p, "new.test", &again), 0);
  assert_int_equal(shk__dns_pool_size(p), 16);
  assert_null(shk__dns_pool_name(p, b));
  assert_string_equal(shk__dns_pool_name(p, a), "a.test");
  assert_int_not_equal(again, b);
  /* A flood of names stays within the pool, and no index comes back for a
   * new name within a full turn of a thousand names. */
  uint32_t seen_first = 0;
  for (int i = 0; i < 1000; i++) {
    snprintf(name, sizeof name, "flood%d.test", i);
    uint32_t idx;
    assert_int_equal(shk__dns_pool_get(p, name, &idx), 0);
    if (i == 0)
      seen_first = idx;
    else
      assert_int_not_equal(idx, seen_first);
    assert_int_not_equal(idx, 0);
  }
  assert_int_equal(shk__dns_pool_size(p), 16);
  assert_null(shk__dns_pool_name(p, a));
  shk__dns_pool_free(p);
}

/* The limits in force: the configuration file's value, else the caller's,
 * else the default; and the file's "limits" object is read strictly. */
static void test_limits(void **state)
{
  shk__eg_config *cfg = parse_ok("{\"limits\": {\"connections\": 10, \"fd_reserve\": 0,"
                                 " \"idle_timeout_ms\": 500}}");
  shk_egress_limits opts = { .connections = 20, .setup = 7, .idle_ms = 9000 }, l;
  shk__eg_limits_resolve(&cfg->limits, &opts, &l);
  assert_int_equal(l.connections, 10); /* the file's */
  assert_int_equal(l.fd_reserve, 0);   /* the file's zero: no reserve */
  assert_int_equal(l.idle_ms, 500);
  assert_int_equal(l.setup, 7);        /* the caller's */
  assert_int_equal(l.held, 64);        /* the defaults */
  assert_int_equal(l.request_ms, 30000);
  assert_int_equal(l.hold_ms, 600000);
  assert_int_equal(l.dns_names, 4096);
  shk__eg_limits_resolve(&cfg->limits, NULL, &l);
  assert_int_equal(l.setup, 128);
  assert_int_equal(l.connections, 10);
  shk__eg_config_free(cfg);
  shk__eg_limits_resolve(NULL, NULL, &l);
  assert_int_equal(l.connections, 4096);
  assert_int_equal(l.fd_reserve, 256);
  parse_bad_is("{\"limits\": {\"sockets\": 1}}", "limits.sockets",
               "unknown key (expected connections, setup, held, idle_timeout_ms, "
               "request_timeout_ms, hold_timeout_ms, fd_reserve, dns_names)");
  parse_bad_is("{\"limits\": {\"connections\": 0}}", "limits.connections",
               "must be an integer from 1 to 1000000");
  parse_bad_is("{\"limits\": {\"dns_names\": 70000}}", "limits.dns_names",
               "must be an integer from 16 to 65536");
  parse_bad_is("{\"limits\": {\"held\": \"5\"}}", "limits.held",
               "must be an integer from 0 to 100000");
  parse_bad("{\"limits\": [1]}", "limits");
}

/* What a refused agent reads: what, why, and whether to try again. */
static void test_refusal_text(void **state)
{
  static const struct {
    shk__eg_refusal r;
    const char *want[3];
  } cases[] = {
    { { "policy-no-match", "api.test", 443, NULL, false, 0 },
      { "the connection to api.test:443", "not granted", "ask the user" } },
    { { "policy-deny", "x.bad.test", 80, "*.bad.test", true, 0 },
      { "x.bad.test:80", "administrator's rule \"*.bad.test\"", "will not help" } },
    { { "policy-deny", "v.test", 80, "handle:ab12", false, 0 },
      { "denied (handle:ab12)", "Retrying will not help", NULL } },
    { { "ip-loopback", "lo.test", 80, NULL, false, 0 }, { "non-public address (ip-loopback)", NULL, NULL } },
    { { "session-setup-limit", "a.test", 443, NULL, false, 128 },
      { "128 connections being set up", "then retry", NULL } },
    { { "dns-failure", "nx.test", 7, NULL, false, 0 }, { "could not be resolved", "may help", NULL } },
    { { "policy-no-match", "q.test", 0, NULL, false, 0 }, { "the lookup of q.test", NULL, NULL } },
    { { "connect-refused", "::1", 8080, NULL, false, 0 }, { "[::1]:8080", "connect-refused", NULL } },
    { { "host-bad-char", NULL, 0, NULL, false, 0 }, { "the request", "malformed", "host-bad-char" } },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char out[1024];
    size_t n = shk__eg_refusal_text(&cases[i].r, out, sizeof out);
    assert_int_equal(n, strlen(out));
    for (int k = 0; k < 3 && cases[i].want[k]; k++)
      if (!strstr(out, cases[i].want[k]))
        fail_msg("%s: '%s' not in '%s'", cases[i].r.reason, cases[i].want[k], out);
    assert_null(strchr(out, '\n'));
  }
}

/* ---- A session end to end, over its unix sockets, against a loopback
 * echo server that counts the connections it gets. */

struct echo {
  int lfd;
  uint16_t port;
  int accepted;
  pthread_mutex_t mu;
};

static void *echo_conn(void *arg)
{
  int c = (int)(intptr_t)arg;
  char buf[256];
  ssize_t n;
  while ((n = read(c, buf, sizeof buf)) > 0)
    if (write(c, buf, (size_t)n) != n)
      break;
  close(c);
  return NULL;
}

static void *echo_main(void *arg)
{
  struct echo *e = arg;
  for (;;) {
    int c = accept(e->lfd, NULL, NULL);
    if (c < 0)
      return NULL;
    pthread_mutex_lock(&e->mu);
    e->accepted++;
    pthread_mutex_unlock(&e->mu);
    pthread_t t;
    if (pthread_create(&t, NULL, echo_conn, (void *)(intptr_t)c) == 0)
      pthread_detach(t);
    else
      close(c);
  }
}

static int echo_accepted(struct echo *e)
{
  pthread_mutex_lock(&e->mu);
  int n = e->accepted;
  pthread_mutex_unlock(&e->mu);
  return n;
}

static int unix_connect(const char *dir, const char *name)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  snprintf(sun.sun_path, sizeof sun.sun_path, "%s/%s", dir, name);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  assert_int_equal(connect(fd, (struct sockaddr *)&sun, sizeof sun), 0);
  return fd;
}

/* Reads until CRLFCRLF, EOF or 3 s; returns what arrived. */
static void read_head(int fd, char *buf, size_t cap)
{
  size_t len = 0;
  buf[0] = '\0';
  while (len + 1 < cap && !strstr(buf, "\r\n\r\n")) {
    struct pollfd p = { fd, POLLIN, 0 };
    if (poll(&p, 1, 3000) != 1)
      break;
    ssize_t n = read(fd, buf + len, cap - 1 - len);
    if (n <= 0)
      break;
    len += (size_t)n;
    buf[len] = '\0';
  }
}

static int connect_via(const char *dir, const char *host, uint16_t port, char *head, size_t cap)
{
  int fd = unix_connect(dir, "http.sock");
  char req[256];
  int n = snprintf(req, sizeof req, "CONNECT %s:%u HTTP/1.1\r\nHost: %s:%u\r\n\r\n", host, port,
                   host, port);
  assert_int_equal(write(fd, req, (size_t)n), n);
  read_head(fd, head, cap);
  return fd;
}

/* What the hook side of a test session knows: the held connections it was
 * told of, the abandoned ones, and a gate that keeps the hook (and with it
 * the proxy's loop) waiting while "slow.test" is being decided. */
struct hookside {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint64_t held[16], abandoned[16];
  int n_held, n_abandoned;
  bool in_slow, release_slow;
};

static struct hookside hs = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER };

static shk_egress_verdict test_hook(void *data, const shk_egress_request *req, uint64_t *tag,
                                    const char **rule)
{
  struct hookside *h = data;
  if (!strcmp(req->host, "hooked.test")) {
    *tag = 9;
    *rule = "test-handle";
    return SHK_EGRESS_ALLOW;
  }
  if (!strcmp(req->host, "told.test")) {
    *req->message = "Refused: told.test is off limits for this test.";
    return SHK_EGRESS_DENY;
  }
  if (!strcmp(req->host, "held.test")) {
    if (req->proto == SHK_EGRESS_DNS)
      return SHK_EGRESS_HOLD;
    pthread_mutex_lock(&h->mu);
    if (h->n_held < 16)
      h->held[h->n_held++] = req->conn_id;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    return SHK_EGRESS_HOLD;
  }
  if (!strcmp(req->host, "slow.test")) {
    pthread_mutex_lock(&h->mu);
    h->in_slow = true;
    pthread_cond_broadcast(&h->cv);
    while (!h->release_slow)
      pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
    return SHK_EGRESS_NONE;
  }
  return strcmp(req->host, "vetoed.test") ? SHK_EGRESS_NONE : SHK_EGRESS_DENY;
}

static void test_abandon(void *data, const char *session, uint64_t conn_id)
{
  struct hookside *h = data;
  assert_string_equal(session, "t");
  pthread_mutex_lock(&h->mu);
  if (h->n_abandoned < 16)
    h->abandoned[h->n_abandoned++] = conn_id;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
}

/* Waits up to 3 s for *COUNT to reach N; returns the N-th value. */
static uint64_t hook_wait(const int *count, const uint64_t *ids, int n)
{
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 3;
  pthread_mutex_lock(&hs.mu);
  while (*count < n && pthread_cond_timedwait(&hs.cv, &hs.mu, &until) == 0)
    ;
  uint64_t id = *count >= n ? ids[n - 1] : 0;
  pthread_mutex_unlock(&hs.mu);
  if (!id)
    fail_msg("the hook side was not told within 3 s");
  return id;
}

static size_t dns_ask(const char *dir, const char *name, uint16_t qtype, uint8_t *ans, size_t cap)
{
  uint8_t q[300] = { 0, 0, 0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0 };
  size_t len = 14;
  for (const char *p = name; *p;) {
    const char *dot = strchr(p, '.');
    size_t l = dot ? (size_t)(dot - p) : strlen(p);
    q[len++] = (uint8_t)l;
    memcpy(q + len, p, l);
    len += l;
    p += l + (dot ? 1 : 0);
  }
  q[len++] = 0;
  q[len++] = (uint8_t)(qtype >> 8);
  q[len++] = (uint8_t)qtype;
  q[len++] = 0;
  q[len++] = 1;
  q[0] = (uint8_t)((len - 2) >> 8);
  q[1] = (uint8_t)(len - 2);
  int fd = unix_connect(dir, "dns.sock");
  assert_int_equal(write(fd, q, len), (ssize_t)len);
  size_t got = 0;
  ssize_t n;
  struct pollfd p = { fd, POLLIN, 0 };
  while (got < cap && poll(&p, 1, 3000) == 1 && (n = read(fd, ans + got, cap - got)) > 0)
    got += (size_t)n;
  close(fd);
  return got;
}

/* A running session in front of a loopback echo server. */
struct fixture {
  struct echo e;
  pthread_t th;
  char cfgpath[40];
  shk_egress_session *s;
  const char *dir;
};

static void fixture_up(struct fixture *f)
{
  f->e = (struct echo){ .lfd = socket(AF_INET, SOCK_STREAM, 0) };
  pthread_mutex_init(&f->e.mu, NULL);
  struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  socklen_t sl = sizeof sin;
  assert_int_equal(bind(f->e.lfd, (struct sockaddr *)&sin, sizeof sin), 0);
  assert_int_equal(listen(f->e.lfd, 16), 0);
  assert_int_equal(getsockname(f->e.lfd, (struct sockaddr *)&sin, &sl), 0);
  f->e.port = ntohs(sin.sin_port);
  assert_int_equal(pthread_create(&f->th, NULL, echo_main, &f->e), 0);

  strcpy(f->cfgpath, "/tmp/shinken-egress-test-XXXXXX");
  int cfd = mkstemp(f->cfgpath);
  assert_true(cfd >= 0);
  static const char cfg[] =
    "{\"allow_private_cidrs\": [\"127.0.0.1/32\"], \"hosts\": {\"echo.test\": [\"127.0.0.1\"],"
    " \"hooked.test\": [\"127.0.0.1\"], \"vetoed.test\": [\"127.0.0.1\"],"
    " \"held.test\": [\"127.0.0.1\"], \"private.test\": [\"127.0.0.2\"]}}";
  assert_int_equal(write(cfd, cfg, sizeof cfg - 1), (ssize_t)sizeof cfg - 1);
  close(cfd);
  const char *allow[] = { "echo.test", "vetoed.test", "private.test" };
  pthread_mutex_lock(&hs.mu);
  hs.n_held = hs.n_abandoned = 0;
  hs.in_slow = hs.release_slow = false;
  pthread_mutex_unlock(&hs.mu);
  shk_egress_session_opts o = { .name = "t", .allow_domains = allow, .n_allow_domains = 3,
                                .config_path = f->cfgpath, .hook = test_hook,
                                .hook_data = &hs, .on_abandon = test_abandon,
                                .limits = { .held = 3 } };
  shk_error err;
  if (shk_egress_session_open(&o, &f->s, &err) < 0)
    fail_msg("session: %s", err.message);
  f->dir = shk_egress_session_dir(f->s);
}

static void fixture_down(struct fixture *f)
{
  char saved[4096];
  struct stat st;
  snprintf(saved, sizeof saved, "%s", f->dir);
  shk_egress_session_close(f->s);
  assert_int_equal(stat(saved, &st), -1);
  unlink(f->cfgpath);
  shutdown(f->e.lfd, SHUT_RDWR);
  close(f->e.lfd);
  pthread_join(f->th, NULL);
}

static void test_session(void **state)
{
  struct fixture f;
  fixture_up(&f);
  struct echo *e = &f.e;
  shk_egress_session *s = f.s;
  const char *dir = f.dir;
  struct stat st;
  assert_int_equal(stat(dir, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);
  char rpath[4200], text[64] = "";
  snprintf(rpath, sizeof rpath, "%s/resolv.conf", dir);
  FILE *rf = fopen(rpath, "r");
  assert_non_null(rf);
  assert_non_null(fgets(text, sizeof text, rf));
  fclose(rf);
  assert_string_equal(text, "nameserver 127.0.0.1\n");

  char head[1024];
  int a = connect_via(dir, "echo.test", e->port, head, sizeof head);
  assert_non_null(strstr(head, " 200 "));
  assert_int_equal(write(a, "ping", 4), 4);
  char buf[8] = "";
  assert_int_equal(read(a, buf, 4), 4);
  assert_memory_equal(buf, "ping", 4);

  int b = connect_via(dir, "hooked.test", e->port, head, sizeof head);
  assert_non_null(strstr(head, " 200 "));
  /* A round trip, so the echo server has surely counted this one. */
  assert_int_equal(write(b, "ping", 4), 4);
  assert_int_equal(read(b, buf, 4), 4);
  int before = echo_accepted(e);
  static const char *const refused[][2] = { { "vetoed.test", "policy-deny" },
                                            { "nope.test", "policy-no-match" },
                                            { "private.test", "ip-loopback" },
                                            { "told.test", "policy-deny" } };
  for (size_t i = 0; i < 4; i++) {
    int c = connect_via(dir, refused[i][0], e->port, head, sizeof head);
    assert_non_null(strstr(head, " 403 "));
    char want[80];
    snprintf(want, sizeof want, "X-Shinken-Decision: %s\r\n", refused[i][1]);
    if (!strstr(head, want))
      fail_msg("%s: %s", refused[i][0], head);
    /* The body is written for the agent: the hook's own text when it gave
     * one, else the proxy's, which names what was refused. */
    char body[1024];
    read_head(c, body, sizeof body);
    const char *want_body = i == 3 ? "Refused: told.test is off limits for this test.\n"
                                   : refused[i][0];
    if (!strstr(body, want_body) && !strstr(head, want_body))
      fail_msg("%s: body does not say '%s': %s%s", refused[i][0], want_body, head, body);
    close(c);
  }
  /* Revoking the hook's handle closes exactly its tunnel: close_tunnels
   * counts it and returns, and the tunnel closes right after. */
  assert_int_equal(shk_egress_session_close_tunnels(s, 9), 1);
  struct pollfd p = { b, POLLIN, 0 };
  assert_int_equal(poll(&p, 1, 3000), 1);
  assert_int_equal(read(b, buf, 1), 0);
  assert_int_equal(write(a, "pong", 4), 4);
  assert_int_equal(read(a, buf, 4), 4);
  assert_memory_equal(buf, "pong", 4);
  close(a);
  close(b);
  assert_int_equal(shk_egress_session_close_tunnels(s, 9), 0);
  assert_int_equal(echo_accepted(e), before); /* nothing refused got through */

  /* The DNS stub answers from the synthetic pool, the same address for
   * the same name, REFUSED for a name the policy does not admit and for
   * other types. */
  uint8_t ans[512];
  size_t n = dns_ask(dir, "Echo.Test", 1, ans, sizeof ans);
  assert_true(n >= 2 + 12 + 16);
  assert_int_equal(ans[2 + 3] & 0xf, 0);
  assert_int_equal(ans[2 + 7], 1);
  uint8_t echo_v4[4];
  memcpy(echo_v4, ans + n - 4, 4);
  assert_int_equal(echo_v4[0], 198);
  assert_int_equal(echo_v4[1] & 0xfe, 18);
  n = dns_ask(dir, "echo.test", 1, ans, sizeof ans);
  assert_memory_equal(ans + n - 4, echo_v4, 4);
  n = dns_ask(dir, "echo.test", 28, ans, sizeof ans);
  assert_true(n >= 2 + 12 + 28);
  assert_int_equal(ans[2 + 7], 1);
  assert_memory_equal(ans + n - 16, "\xfd\x53\x68\x6b\x6e\x00\x00\x00", 8);
  n = dns_ask(dir, "nope.test", 1, ans, sizeof ans);
  assert_true(n >= 14);
  assert_int_equal(ans[2 + 3] & 0xf, 5);
  n = dns_ask(dir, "echo.test", 16, ans, sizeof ans);
  assert_true(n >= 14);
  assert_int_equal(ans[2 + 3] & 0xf, 5);
  n = dns_ask(dir, "vetoed.test", 1, ans, sizeof ans);
  assert_int_equal(ans[2 + 3] & 0xf, 5);
  /* A name the hook would hold gets an address, so that the connection
   * that follows can be held. */
  n = dns_ask(dir, "held.test", 1, ans, sizeof ans);
  assert_int_equal(ans[2 + 3] & 0xf, 0);
  assert_int_equal(ans[2 + 7], 1);
  /* private.test is admitted by name, so it gets an address too: nothing
   * was looked up to answer, and the connection is what gets refused. */
  n = dns_ask(dir, "private.test", 1, ans, sizeof ans);
  assert_int_equal(ans[2 + 3] & 0xf, 0);
  uint8_t priv_v4[4];
  memcpy(priv_v4, ans + n - 4, 4);

  /* A connection to the synthetic address is a connection to the name. */
  char lit[32];
  snprintf(lit, sizeof lit, "%u.%u.%u.%u", echo_v4[0], echo_v4[1], echo_v4[2], echo_v4[3]);
  before = echo_accepted(e);
  int c = connect_via(dir, lit, e->port, head, sizeof head);
  assert_non_null(strstr(head, " 200 "));
  assert_int_equal(write(c, "ping", 4), 4);
  assert_int_equal(read(c, buf, 4), 4);
  close(c);
  assert_int_equal(echo_accepted(e), before + 1);
  snprintf(lit, sizeof lit, "%u.%u.%u.%u", priv_v4[0], priv_v4[1], priv_v4[2], priv_v4[3]);
  c = connect_via(dir, lit, e->port, head, sizeof head);
  assert_non_null(strstr(head, "X-Shinken-Decision: ip-loopback\r\n"));
  close(c);
  c = connect_via(dir, "198.19.1.2", e->port, head, sizeof head);
  assert_non_null(strstr(head, "X-Shinken-Decision: dns-synthetic-unknown\r\n"));
  close(c);
  assert_int_equal(echo_accepted(e), before + 1);

  fixture_down(&f);
}

/* Sends a CONNECT and returns the socket without reading anything. */
static int connect_send(const char *dir, const char *host, uint16_t port)
{
  int fd = unix_connect(dir, "http.sock");
  char req[256];
  int n = snprintf(req, sizeof req, "CONNECT %s:%u HTTP/1.1\r\nHost: %s:%u\r\n\r\n", host, port,
                   host, port);
  assert_int_equal(write(fd, req, (size_t)n), n);
  return fd;
}

static bool silent_for(int fd, int ms)
{
  struct pollfd p = { fd, POLLIN, 0 };
  return poll(&p, 1, ms) == 0;
}

struct resume_arg {
  shk_egress_session *s;
  uint64_t id;
  shk_egress_verdict v;
  const char *reason;
  int r;
};

static void *resume_thread(void *arg)
{
  struct resume_arg *ra = arg;
  ra->r = shk_egress_session_resume(ra->s, ra->id, ra->v, 77, "test-approval", ra->reason);
  return NULL;
}

/* A held connection gets nothing until it is resumed, from any thread:
 * allow goes on on the same connection, deny refuses with the caller's
 * text; a client that leaves is reported; the held limit holds; session
 * close refuses what is still held. */
static void test_hold(void **state)
{
  struct fixture f;
  fixture_up(&f);
  struct echo *e = &f.e;
  char head[2048], buf[8];
  int before = echo_accepted(e);

  int a = connect_send(f.dir, "held.test", e->port);
  uint64_t id = hook_wait(&hs.n_held, hs.held, 1);
  assert_true(silent_for(a, 300));
  assert_int_equal(echo_accepted(e), before);
  /* Early bytes sent while held go upstream after the resume. */
  assert_int_equal(write(a, "early", 5), 5);
  struct resume_arg ra = { f.s, id, SHK_EGRESS_ALLOW, NULL, 1 };
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, resume_thread, &ra), 0);
  pthread_join(t, NULL);
  assert_int_equal(ra.r, 0);
  assert_int_equal(shk_egress_session_resume(f.s, id, SHK_EGRESS_ALLOW, 77, NULL, NULL), -ENOENT);
  assert_int_equal(shk_egress_session_resume(f.s, 999999, SHK_EGRESS_DENY, 0, NULL, NULL),
                   -ENOENT);
  assert_int_equal(shk_egress_session_resume(f.s, id, SHK_EGRESS_HOLD, 0, NULL, NULL), -EINVAL);
  read_head(a, head, sizeof head);
  assert_non_null(strstr(head, " 200 "));
  /* The echo may have come with the reply in one read. */
  char *rest = strstr(head, "\r\n\r\n") + 4;
  char early[6] = "";
  size_t got = strlen(rest);
  memcpy(early, rest, got > 5 ? 5 : got);
  while (got < 5) {
    ssize_t k = read(a, early + got, 5 - got);
    assert_true(k > 0);
    got += (size_t)k;
  }
  assert_memory_equal(early, "early", 5);
  assert_int_equal(echo_accepted(e), before + 1);
  /* Tagged as the resume said: close_tunnels(77) closes it. */
  assert_int_equal(shk_egress_session_close_tunnels(f.s, 77), 1);
  struct pollfd p = { a, POLLIN, 0 };
  assert_int_equal(poll(&p, 1, 3000), 1);
  assert_int_equal(read(a, buf, 1), 0);
  close(a);

  /* Deny: 403 with the caller's text as the body. */
  int b = connect_send(f.dir, "held.test", e->port);
  id = hook_wait(&hs.n_held, hs.held, 2);
  assert_int_equal(shk_egress_session_resume(f.s, id, SHK_EGRESS_DENY, 0, "human",
                                             "Refused: denied by a human: not today."),
                   0);
  read_head(b, head, sizeof head);
  assert_non_null(strstr(head, " 403 "));
  assert_non_null(strstr(head, "X-Shinken-Decision: held-denied\r\n"));
  char body[256] = "";
  read_head(b, body, sizeof body);
  if (!strstr(head, "denied by a human: not today.") && !strstr(body, "denied by a human: not today."))
    fail_msg("no reason in the refusal: %s%s", head, body);
  close(b);

  /* Abandon: the client leaves, the hook side hears of it, and the id is
   * no longer held. */
  int c = connect_send(f.dir, "held.test", e->port);
  id = hook_wait(&hs.n_held, hs.held, 3);
  close(c);
  assert_int_equal(hook_wait(&hs.n_abandoned, hs.abandoned, 1), id);
  assert_int_equal(shk_egress_session_resume(f.s, id, SHK_EGRESS_ALLOW, 0, NULL, NULL), -ENOENT);

  /* The held limit (3 in the fixture), then session close refuses what is
   * still held. */
  int h[4];
  for (int i = 0; i < 3; i++) {
    h[i] = connect_send(f.dir, "held.test", e->port);
    hook_wait(&hs.n_held, hs.held, 4 + i);
  }
  h[3] = connect_send(f.dir, "held.test", e->port);
  read_head(h[3], head, sizeof head);
  assert_non_null(strstr(head, " 429 "));
  assert_non_null(strstr(head, "X-Shinken-Decision: session-held-limit\r\n"));
  close(h[3]);
  /* The hook had been told of it: it hears that it is gone. */
  assert_int_equal(hook_wait(&hs.n_abandoned, hs.abandoned, 2), hook_wait(&hs.n_held, hs.held, 7));
  for (int i = 0; i < 3; i++)
    assert_true(silent_for(h[i], 50));
  assert_int_equal(echo_accepted(e), before + 1);
  fixture_down(&f);
  for (int i = 0; i < 3; i++) {
    read_head(h[i], head, sizeof head);
    assert_non_null(strstr(head, " 403 "));
    assert_non_null(strstr(head, "X-Shinken-Decision: session-closed\r\n"));
    close(h[i]);
  }
  assert_int_equal(hs.n_abandoned, 2); /* closing is not abandoning */
}

struct slow_arg {
  const char *dir;
  uint16_t port;
  char head[512];
};

static void *slow_client(void *arg)
{
  struct slow_arg *sa = arg;
  int fd = connect_via(sa->dir, "slow.test", sa->port, sa->head, sizeof sa->head);
  close(fd);
  return NULL;
}

/* A revoke never waits for the proxy's loop: with the loop stuck inside
 * the hook, close_tunnels still returns at once with its count, and the
 * tunnel closes as soon as the loop runs again. */
static void test_close_async(void **state)
{
  struct fixture f;
  fixture_up(&f);
  char head[1024], buf[4];
  int b = connect_via(f.dir, "hooked.test", f.e.port, head, sizeof head);
  assert_non_null(strstr(head, " 200 "));
  struct slow_arg sa = { f.dir, f.e.port, "" };
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, slow_client, &sa), 0);
  pthread_mutex_lock(&hs.mu);
  while (!hs.in_slow)
    pthread_cond_wait(&hs.cv, &hs.mu);
  pthread_mutex_unlock(&hs.mu);
  /* The loop is inside the hook now, and stays there. */
  assert_int_equal(shk_egress_session_close_tunnels(f.s, 9), 1);
  assert_int_equal(shk_egress_session_resume(f.s, 12345, SHK_EGRESS_DENY, 0, NULL, NULL), -ENOENT);
  assert_true(silent_for(b, 100)); /* not closed yet: the loop is still held */
  pthread_mutex_lock(&hs.mu);
  hs.release_slow = true;
  pthread_cond_broadcast(&hs.cv);
  pthread_mutex_unlock(&hs.mu);
  pthread_join(t, NULL);
  assert_non_null(strstr(sa.head, " 403 "));
  struct pollfd p = { b, POLLIN, 0 };
  assert_int_equal(poll(&p, 1, 3000), 1);
  assert_int_equal(read(b, buf, 1), 0);
  close(b);
  fixture_down(&f);
}

/* Inside a network namespace of its own, a child runs the stage-2 bridge:
 * through 127.0.0.1:3128 and :53 it reaches what the session allows, and
 * nothing else, not even the echo server it could dial directly before. */
static int bridge_child(const char *dir, uint16_t port)
{
  if (unshare(CLONE_NEWNET) < 0 && unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
    return 77;
  if (shk_egress_bridge_start(dir) < 0)
    return 2;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(3128),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  if (connect(fd, (struct sockaddr *)&sin, sizeof sin) < 0)
    return 3;
  char req[128], head[512];
  int n = snprintf(req, sizeof req, "CONNECT echo.test:%u HTTP/1.1\r\n\r\n", port);
  if (write(fd, req, (size_t)n) != n)
    return 4;
  read_head(fd, head, sizeof head);
  char buf[4];
  if (!strstr(head, " 200 ") || write(fd, "ping", 4) != 4 || read(fd, buf, 4) != 4 ||
      memcmp(buf, "ping", 4))
    return 5;
  close(fd);
  /* Ignoring the proxy gets nowhere: the echo server is not in here. */
  fd = socket(AF_INET, SOCK_STREAM, 0);
  sin.sin_port = htons(port);
  if (connect(fd, (struct sockaddr *)&sin, sizeof sin) == 0)
    return 6;
  close(fd);
  /* The DNS stub over UDP. */
  static const uint8_t q[] = { 0xab, 0xcd, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 4, 'e', 'c', 'h',
                               'o', 4, 't', 'e', 's', 't', 0, 0, 1, 0, 1 };
  fd = socket(AF_INET, SOCK_DGRAM, 0);
  sin.sin_port = htons(53);
  uint8_t ans[512];
  struct pollfd p = { fd, POLLIN, 0 };
  if (sendto(fd, q, sizeof q, 0, (struct sockaddr *)&sin, sizeof sin) != (ssize_t)sizeof q ||
      poll(&p, 1, 3000) != 1)
    return 7;
  ssize_t r = recv(fd, ans, sizeof ans, 0);
  /* A synthetic address: nothing was looked up to answer. */
  if (r < (ssize_t)sizeof q + 16 || ans[0] != 0xab || (ans[3] & 0xf) != 0 || ans[r - 4] != 198 ||
      (ans[r - 3] & 0xfe) != 18)
    return 8;
  close(fd);
  /* A program that resolves first and then hands the proxy the address
   * reaches the name it looked up. */
  fd = socket(AF_INET, SOCK_STREAM, 0);
  sin.sin_port = htons(3128);
  if (connect(fd, (struct sockaddr *)&sin, sizeof sin) < 0)
    return 9;
  n = snprintf(req, sizeof req, "CONNECT %u.%u.%u.%u:%u HTTP/1.1\r\n\r\n", ans[r - 4], ans[r - 3],
               ans[r - 2], ans[r - 1], port);
  if (write(fd, req, (size_t)n) != n)
    return 10;
  read_head(fd, head, sizeof head);
  if (!strstr(head, " 200 ") || write(fd, "pong", 4) != 4 || read(fd, buf, 4) != 4 ||
      memcmp(buf, "pong", 4))
    return 11;
  return 0;
}

static void test_bridge(void **state)
{
  struct fixture f;
  fixture_up(&f);
  int before = echo_accepted(&f.e);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0)
    _exit(bridge_child(f.dir, f.e.port));
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  if (code != 77) {
    if (code != 0)
      fail_msg("bridge child failed at step %d", code);
    assert_int_equal(echo_accepted(&f.e), before + 2);
  }
  fixture_down(&f);
  if (code == 77) {
    if (getenv("SHINKEN_MUST_WORK") && !strcmp(getenv("SHINKEN_MUST_WORK"), "1"))
      fail_msg("no network namespace available (SHINKEN_MUST_WORK=1)");
    skip();
  }
}


/* The inspection CA: made once (0600 in a 0700 directory), read back the
 * same by a second opener; a leaf names exactly its host (DNS or IP SAN),
 * chains to the CA, is cached (no new signature for a name seen before)
 * and the cache is bounded, least recently used out. */
static void test_ca(void **state)
{
  char dir[] = "/tmp/shk-ca-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char cadir[sizeof dir + 8];
  snprintf(cadir, sizeof cadir, "%s/ca", dir);
  shk__eg_ca *ca, *ca2;
  shk_error err;
  assert_int_equal(shk__eg_ca_open(cadir, &ca, &err), 0);
  char path[sizeof cadir + 16];
  snprintf(path, sizeof path, "%s/ca.pem", cadir);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  assert_int_equal(stat(cadir, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);
  assert_int_equal(shk__eg_ca_open(cadir, &ca2, &err), 0);
  assert_string_equal(shk__eg_ca_pem(ca), shk__eg_ca_pem(ca2));
  shk__eg_ca_free(ca2);

  shk_host h, ip;
  assert_int_equal(shk_host_parse("api.test", 8, &h, NULL, NULL), 0);
  assert_int_equal(shk_host_parse("127.0.0.1", 9, &ip, NULL, NULL), 0);
  X509 *leaf = shk__eg_ca_leaf(ca, &h);
  assert_non_null(leaf);
  assert_int_equal(X509_check_host(leaf, "api.test", 0, 0, NULL), 1);
  assert_int_equal(X509_check_host(leaf, "other.test", 0, 0, NULL), 0);
  assert_int_equal(X509_check_host(leaf, "x.api.test", 0, 0, NULL), 0);
  assert_int_equal(X509_check_ca(leaf), 0);
  assert_int_equal(X509_check_issued(shk__eg_ca_cert(ca), leaf), X509_V_OK);
  EVP_PKEY *capub = X509_get0_pubkey(shk__eg_ca_cert(ca));
  assert_int_equal(X509_verify(leaf, capub), 1);
  assert_int_equal(X509_check_private_key(leaf, shk__eg_ca_leaf_key(ca)), 1);
  /* Short validity: a day at most. */
  int days = 0, secs = 0;
  assert_int_equal(ASN1_TIME_diff(&days, &secs, X509_get0_notBefore(leaf), X509_get0_notAfter(leaf)), 1);
  assert_true(days * 86400 + secs <= 25 * 3600);
  X509 *leaf_ip = shk__eg_ca_leaf(ca, &ip);
  assert_int_equal(X509_check_ip_asc(leaf_ip, "127.0.0.1", 0), 1);
  assert_int_equal(shk__eg_ca_minted(ca), 2);
  assert_ptr_equal(shk__eg_ca_leaf(ca, &h), leaf);
  assert_int_equal(shk__eg_ca_minted(ca), 2);
  /* Bounded: past the cache's size the least recently used goes (api.test
   * was used last of the first two, so 127.0.0.1 goes first). */
  for (unsigned i = 0; i < SHK__EG_LEAF_CACHE; i++) {
    char name[32];
    shk_host n;
    int len = snprintf(name, sizeof name, "h%u.test", i);
    assert_int_equal(shk_host_parse(name, (size_t)len, &n, NULL, NULL), 0);
    if (i == SHK__EG_LEAF_CACHE - 10)
      assert_non_null(shk__eg_ca_leaf(ca, &h)); /* keeps api.test recent */
    assert_non_null(shk__eg_ca_leaf(ca, &n));
  }
  assert_int_equal(shk__eg_ca_cached(ca), SHK__EG_LEAF_CACHE);
  unsigned long minted = shk__eg_ca_minted(ca);
  assert_non_null(shk__eg_ca_leaf(ca, &h));
  assert_int_equal(shk__eg_ca_minted(ca), minted); /* still cached */
  assert_non_null(shk__eg_ca_leaf(ca, &ip));
  assert_int_equal(shk__eg_ca_minted(ca), minted + 1); /* was evicted */

  /* Java's trust store: every certificate of the bundle, as a certificate
   * bag carrying Java's trusted-key-usage attribute (anyExtendedKeyUsage),
   * behind a MAC keyed with the store's password. */
  char bundle[sizeof dir + 16], store[sizeof dir + 16];
  snprintf(bundle, sizeof bundle, "%s/b.pem", dir);
  snprintf(store, sizeof store, "%s/t.p12", dir);
  FILE *bf = fopen(bundle, "w");
  assert_non_null(bf);
  fprintf(bf, "%s\n%s", shk__eg_ca_pem(ca), shk__eg_ca_pem(ca));
  fclose(bf);
  assert_int_equal(shk__eg_java_store_write(bundle, store, &err), 0);
  assert_int_equal(shk__eg_java_store_write(bundle, store, &err), -EEXIST); /* never over a file */
  BIO *sb = BIO_new_file(store, "rb");
  PKCS12 *p12 = d2i_PKCS12_bio(sb, NULL);
  BIO_free(sb);
  assert_non_null(p12);
  assert_int_equal(PKCS12_verify_mac(p12, SHK_EGRESS_JAVA_STORE_PASSWORD, -1), 1);
  assert_int_equal(PKCS12_verify_mac(p12, "wrong", -1), 0);
  STACK_OF(PKCS7) *safes = PKCS12_unpack_authsafes(p12);
  assert_non_null(safes);
  assert_int_equal(sk_PKCS7_num(safes), 1);
  STACK_OF(PKCS12_SAFEBAG) *bags = PKCS12_unpack_p7data(sk_PKCS7_value(safes, 0));
  assert_non_null(bags);
  assert_int_equal(sk_PKCS12_SAFEBAG_num(bags), 2);
  for (int i = 0; i < 2; i++) {
    const PKCS12_SAFEBAG *bag = sk_PKCS12_SAFEBAG_value(bags, i);
    assert_int_equal(PKCS12_SAFEBAG_get_nid(bag), NID_certBag);
    X509 *bx = PKCS12_SAFEBAG_get1_cert(bag);
    assert_int_equal(X509_cmp(bx, shk__eg_ca_cert(ca)), 0);
    X509_free(bx);
    const STACK_OF(X509_ATTRIBUTE) *attrs = PKCS12_SAFEBAG_get0_attrs(bag);
    bool trusted = false;
    for (int a = 0; a < X509at_get_attr_count(attrs); a++) {
      X509_ATTRIBUTE *at = X509at_get_attr(attrs, a);
      char oid[64];
      OBJ_obj2txt(oid, sizeof oid, X509_ATTRIBUTE_get0_object(at), 1);
      if (strcmp(oid, "2.16.840.1.113894.746875.1.1"))
        continue;
      ASN1_TYPE *v = X509_ATTRIBUTE_get0_type(at, 0);
      assert_non_null(v);
      assert_int_equal(ASN1_TYPE_get(v), V_ASN1_OBJECT);
      assert_int_equal(OBJ_obj2nid(v->value.object), NID_anyExtendedKeyUsage);
      trusted = true;
    }
    assert_true(trusted);
  }
  sk_PKCS12_SAFEBAG_pop_free(bags, PKCS12_SAFEBAG_free);
  sk_PKCS7_pop_free(safes, PKCS7_free);
  PKCS12_free(p12);
  unlink(store);
  /* A file with no certificate in it gives no store. */
  bf = fopen(bundle, "w");
  assert_non_null(bf);
  fputs("not a certificate\n", bf);
  fclose(bf);
  assert_int_equal(shk__eg_java_store_write(bundle, store, &err), -EINVAL);
  assert_non_null(strstr(err.message, "holds no certificate"));
  assert_int_equal(access(store, F_OK), -1);
  unlink(bundle);

  /* The sandbox's trust files: built once, kept in the CA's directory and
   * copied into each session's; a second session gets the kept ones, not
   * a new build, and nothing is written over a file. */
  char s1[sizeof dir + 8], s2[sizeof dir + 8];
  snprintf(s1, sizeof s1, "%s/s1", dir);
  snprintf(s2, sizeof s2, "%s/s2", dir);
  assert_int_equal(mkdir(s1, 0700), 0);
  assert_int_equal(mkdir(s2, 0700), 0);
  assert_int_equal(shk__eg_ca_trust_files(ca, s1, &err), 0);
  char kept[2][sizeof cadir + 260];
  int n_kept = 0;
  DIR *cd = opendir(cadir);
  assert_non_null(cd);
  for (struct dirent *e; (e = readdir(cd));)
    if (!strncmp(e->d_name, "trust-", 6) && n_kept < 2)
      snprintf(kept[n_kept++], sizeof kept[0], "%s/%s", cadir, e->d_name);
  closedir(cd);
  assert_int_equal(n_kept, 2);
  struct stat k1, k2;
  assert_int_equal(stat(kept[0], &k1), 0);
  assert_int_equal(shk__eg_ca_trust_files(ca, s2, &err), 0);
  assert_int_equal(stat(kept[0], &k2), 0);
  assert_true(k1.st_ino == k2.st_ino && k1.st_mtim.tv_nsec == k2.st_mtim.tv_nsec);
  for (int i = 0; i < 2; i++) {
    const char *name = i ? SHK_EGRESS_JAVA_STORE : SHK_EGRESS_CA_BUNDLE;
    char a[sizeof s1 + 32], b[sizeof s2 + 32];
    snprintf(a, sizeof a, "%s/%s", s1, name);
    snprintf(b, sizeof b, "%s/%s", s2, name);
    char *da, *db;
    size_t la, lb;
    assert_int_equal(shk__read_file(a, &da, &la), 0);
    assert_int_equal(shk__read_file(b, &db, &lb), 0);
    assert_true(la == lb && la > 0 && !memcmp(da, db, la));
    /* The bundle ends with the CA's certificate. */
    size_t pl = strlen(shk__eg_ca_pem(ca));
    if (!i)
      assert_true(la > pl && !memcmp(da + la - pl, shk__eg_ca_pem(ca), pl));
    free(da);
    free(db);
    unlink(b);
  }
  assert_int_equal(shk__eg_ca_trust_files(ca, s1, &err), -EEXIST);
  for (int i = 0; i < 2; i++) {
    char a[sizeof s1 + 32];
    snprintf(a, sizeof a, "%s/%s", s1, i ? SHK_EGRESS_JAVA_STORE : SHK_EGRESS_CA_BUNDLE);
    unlink(a);
    unlink(kept[i]);
  }
  rmdir(s1);
  rmdir(s2);
  shk__eg_ca_free(ca);

  /* A key file others can read is refused, not used. */
  assert_int_equal(chmod(path, 0644), 0);
  assert_int_equal(shk__eg_ca_open(cadir, &ca, &err), -EPERM);
  assert_non_null(strstr(err.message, "mode 0600"));
  assert_int_equal(chmod(path, 0600), 0);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("not a key\n", f);
  fclose(f);
  assert_int_equal(shk__eg_ca_open(cadir, &ca, &err), -EINVAL);
  unlink(path);
  rmdir(cadir);
  rmdir(dir);
}

/* Origin-form heads on an inspected connection and the response heads of
 * its upstream. */
static void test_http_origin(void **state)
{
  shk_host h;
  assert_int_equal(shk_host_parse("api.test", 8, &h, NULL, NULL), 0);
  static shk__http_origin_req req;
  shk__http_refusal ref;
  const char *ok = "GET /a?b=c HTTP/1.1\r\nHost: API.test\r\nAuthorization: Bearer x\r\n"
                   "Connection: keep-alive, X-Drop\r\nX-Drop: 1\r\nAccept: */*\r\n\r\n";
  assert_int_equal(shk__http_parse_origin(ok, strlen(ok), &h, 443, 443, &req, &ref), 1);
  assert_string_equal(req.method, "GET");
  assert_int_equal(req.n_headers, 2); /* Authorization and Accept */
  assert_int_equal(req.headers[0].name_len, 13);
  assert_false(req.close);
  char *up;
  size_t ulen;
  shk_egress_header extra[] = { { "Authorization", 13, "Bearer real", 11 },
                                { "Content-Length", 14, "99", 2 },
                                { "X-Bad", 5, "a\r\nEvil: 1", 10 } };
  assert_int_equal(shk__http_build_origin(&req, &h, 443, 443, extra, 3, &up, &ulen), 0);
  assert_string_equal(up, "GET /a?b=c HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer real\r\n\r\n");
  free(up);
  /* The port is in Host when it is not the scheme's. */
  const char *p8443 = "GET / HTTP/1.1\r\nHost: api.test:8443\r\n\r\n";
  assert_int_equal(shk__http_parse_origin(p8443, strlen(p8443), &h, 8443, 443, &req, &ref), 1);
  assert_int_equal(shk__http_parse_origin(p8443, strlen(p8443), &h, 443, 443, &req, &ref), -1);
  assert_string_equal(ref.reason, "inspect-host-mismatch");
  static const struct { const char *head; const char *reason; } bad[] = {
    { "GET / HTTP/1.1\r\nHost: other.test\r\n\r\n", "inspect-host-mismatch" },
    { "GET / HTTP/1.1\r\n\r\n", "http-host-missing" },
    { "GET / HTTP/1.1\r\nHost: api.test\r\nHost: api.test\r\n\r\n", "http-two-host" },
    { "GET http://api.test/ HTTP/1.1\r\nHost: api.test\r\n\r\n", "inspect-not-origin-form" },
    { "CONNECT api.test:443 HTTP/1.1\r\nHost: api.test\r\n\r\n", "inspect-connect-inside" },
    { "GET / HTTP/1.1\r\nHost: api.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
      "inspect-upgrade-unsupported" },
    { "POST / HTTP/1.1\r\nHost: api.test\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
      "http-cl-and-te" },
    { "POST / HTTP/1.1\r\nHost: api.test\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
      "http-two-content-length" },
    { "GET / HTTP/1.1\r\nHost: api.test\r\n X: folded\r\n\r\n", "http-obs-fold" },
    { "GET / HTTP/1.1\nHost: api.test\r\n\r\n", "http-bare-lf" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(shk__http_parse_origin(bad[i].head, strlen(bad[i].head), &h, 443, 443, &req, &ref), -1);
    assert_string_equal(ref.reason, bad[i].reason);
  }
  const char *partial = "GET / HTTP/1.1\r\nHost: api";
  assert_int_equal(shk__http_parse_origin(partial, strlen(partial), &h, 443, 443, &req, &ref), 0);

  shk__http_resp resp;
  const char *why;
  const char *r1 = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
  assert_int_equal(shk__http_parse_response(r1, strlen(r1), "GET", &resp, &why), 1);
  assert_int_equal(resp.status, 200);
  assert_true(resp.has_length);
  assert_int_equal(resp.content_length, 5);
  assert_int_equal(resp.head_len, strlen(r1) - 5);
  const char *r2 = "HTTP/1.0 200 OK\r\n\r\n";
  assert_int_equal(shk__http_parse_response(r2, strlen(r2), "GET", &resp, &why), 1);
  assert_true(resp.close);
  assert_false(resp.has_length);
  const char *r3 = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n";
  assert_int_equal(shk__http_parse_response(r3, strlen(r3), "GET", &resp, &why), -1);
  const char *r4 = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n";
  assert_int_equal(shk__http_parse_response(r4, strlen(r4), "GET", &resp, &why), -1);
  assert_string_equal(why, "upstream-upgrade");
  assert_false(shk__http_resp_has_body("HEAD", 200));
  assert_false(shk__http_resp_has_body("GET", 304));
  assert_true(shk__http_resp_has_body("GET", 200));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_authority),      cmocka_unit_test(test_lattice),
    cmocka_unit_test(test_patterns),       cmocka_unit_test(test_case_rule),
    cmocka_unit_test(test_config_errors),  cmocka_unit_test(test_config_load),
    cmocka_unit_test(test_http),
    cmocka_unit_test(test_socks5),         cmocka_unit_test(test_dns),
    cmocka_unit_test(test_chunked),        cmocka_unit_test(test_pool),
    cmocka_unit_test(test_limits),         cmocka_unit_test(test_refusal_text),
    cmocka_unit_test(test_session),        cmocka_unit_test(test_hold),
    cmocka_unit_test(test_close_async),    cmocka_unit_test(test_bridge),
    cmocka_unit_test(test_ca),             cmocka_unit_test(test_http_origin),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
