/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for src/cap: the subset check of every scope type, the handle
 * membrane, lifecycles, and the end of a session. (Tiers and manifests are
 * the decision's: test-policy.c.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shinken/cap.h"

static shk_cap_table *new_table(void)
{
  shk_cap_table *t = NULL;
  assert_int_equal(shk_cap_table_new(&t), 0);
  return t;
}

static shk_cap_scope parse_ok(shk_cap_class c, const char *json)
{
  shk_cap_scope s;
  shk_error err;
  int r = shk_cap_scope_parse(c, json, &s, &err);
  if (r)
    fail_msg("scope %s did not parse: %s", json, err.message);
  return s;
}

/* ---- parsing: table of (class, json, error or canonical form) ---- */
static const struct {
  shk_cap_class cls;
  const char *json;
  const char *err_has; /* NULL: must parse */
  const char *canon;   /* when it parses: a part of its canonical JSON, or NULL */
} parse_cases[] = {
  { SHK_CAP_NET_EGRESS, "{}", NULL, "\"domains\":[]" },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"example.com\",\"*.a.test\",\"**.b.test:443\"]}", NULL,
    "\"domains\":[\"example.com\",\"*.a.test\",\"**.b.test:443\"]" },
  /* The case rule: DNS names are case-insensitive, so a pattern is stored
   * lowercased (the egress proxy reads its rules the same way). */
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"Example.com\"]}", NULL, "\"domains\":[\"example.com\"]" },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"**.Corp.TEST.:443\"]}", NULL,
    "\"domains\":[\"**.corp.test:443\"]" },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"a_b.test\"]}", "domains[0]: the host name contains '_'" },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"*\"]}", "domains[0]: a bare '*' (every host) is not accepted here" },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"a.test:0\"]}", "domains[0]: the port must be" },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"a.test:65536\"]}", "domains[0]: the port must be" },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"a.test: 80\"]}", "domains[0]: the port must be" },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"a..test\"]}", "domains[0]: the host name has an empty label" },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"a%2etest\"]}", "domains[0]: the host contains '%'" },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"ok.test\",\"a.*.test\"]}", "domains[1]: '*' may stand only" },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"10.0.0.1\"]}", "domains[0]: an IP address is not a host pattern" },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"example.123\"]}", "domains[0]: the host's last label is numeric" },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"a\\u0000b\"]}", "scope is not valid JSON: \\u0000 is not allowed" },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[1]}", "domains[0]: expected a string" },
  { SHK_CAP_NET_EGRESS, "{\"domains\":\"a.test\"}", "domains: expected an array of strings" },
  { SHK_CAP_NET_EGRESS, "{\"cidrs\":[\"10.0.0.0/8\",\"2001:DB8::/32\"]}", NULL,
    "\"cidrs\":[\"10.0.0.0/8\",\"2001:db8::/32\"]" },
  { SHK_CAP_NET_EGRESS, "{\"cidrs\":[\"10.0.0.1/8\"]}",
    "cidrs[0]: the address has bits set past the /8 prefix (the range it is in is 10.0.0.0/8)" },
  { SHK_CAP_NET_EGRESS, "{\"cidrs\":[\"10.0.0.0/33\"]}", "cidrs[0]: the prefix length must be a decimal number from 0 to 32" },
  /* A prefix is required: an address alone is written ADDRESS/32. */
  { SHK_CAP_NET_EGRESS, "{\"cidrs\":[\"203.0.113.7\"]}", "cidrs[0]: a CIDR range needs a prefix length" },
  { SHK_CAP_NET_EGRESS, "{\"cidrs\":[\"010.0.0.0/8\"]}", "cidrs[0]: the address of the range is not an IP address" },
  { SHK_CAP_NET_EGRESS, "{\"ports\":[443,\"8000-8080\",\"22\"]}", NULL, "\"ports\":[443,\"8000-8080\",22]" },
  { SHK_CAP_NET_EGRESS, "{\"ports\":[0]}", "ports[0]: a port is a number from 1 to 65535" },
  { SHK_CAP_NET_EGRESS, "{\"ports\":[65536]}", "ports[0]: a port is a number from 1 to 65535" },
  { SHK_CAP_NET_EGRESS, "{\"ports\":[80,\"9-1\"]}", "ports[1]: the range 9-1 ends before it begins" },
  { SHK_CAP_NET_EGRESS, "{\"ports\":[\"+1-9\"]}", "ports[0]: expected a port 1-65535 or a range" },
  { SHK_CAP_NET_EGRESS, "{\"ports\":[\"080-90\"]}", "ports[0]: expected a port 1-65535 or a range" },
  { SHK_CAP_NET_EGRESS, "{\"ports\":[true]}", "ports[0]: expected a port 1-65535 or a string" },
  { SHK_CAP_NET_EGRESS, "{\"ports\":80}", "ports: expected an array" },
  { SHK_CAP_NET_EGRESS, "{\"tls_inspect\":1}", "tls_inspect: expected true or false" },
  { SHK_CAP_NET_EGRESS, "{\"limited\":\"yes\"}", "limited: expected true or false" },
  { SHK_CAP_NET_EGRESS, "{\"domain\":[]}", "unknown field 'domain' for class net.egress" },
  { SHK_CAP_FS_SCOPE, "{\"read\":[\"/\"],\"write\":[\"/w\"],\"deny\":[\"/w/.git\"]}", NULL,
    "\"deny\":[\"/w/.git\"],\"read\":[\"/\"],\"write\":[\"/w\"]" },
  { SHK_CAP_FS_SCOPE, "{\"write\":[\"relative\"]}", "write[0]: the path is not absolute" },
  { SHK_CAP_FS_SCOPE, "{\"write\":[\"/a/../etc\"]}", "write[0]: the path has a '.' or '..' component" },
  { SHK_CAP_FS_SCOPE, "{\"write\":[\"/a/\"]}", "write[0]: the path ends in '/'" },
  { SHK_CAP_FS_SCOPE, "{\"read\":[\"/a//b\"]}", "read[0]: the path has an empty component" },
  /* Paths are case-sensitive: kept as written. */
  { SHK_CAP_FS_SCOPE, "{\"read\":[\"/Work/A\"]}", NULL, "\"read\":[\"/Work/A\"]" },
  { SHK_CAP_CLIPBOARD, "{\"paste_in\":true}", NULL, "\"paste_in\":true" },
  { SHK_CAP_GPU, "{\"device_ids\":[\"0\"],\"mode\":\"exclusive\"}", NULL, "\"mode\":\"exclusive\"" },
  { SHK_CAP_GPU, "{\"device_ids\":[\"a b\"]}", "device_ids[0]: expected a non-empty token" },
  { SHK_CAP_GPU, "{\"device_ids\":[\"\"]}", "device_ids[0]: expected a non-empty token" },
  { SHK_CAP_GPU, "{\"device_ids\":[\"a\\u007f\"]}", "device_ids[0]: expected a non-empty token" },
  { SHK_CAP_CREDENTIALS, "{\"broker_scopes\":[\"gh:d\u00e9p\u00f4t\"]}", NULL, "gh:d" },
  { SHK_CAP_GPU, "{\"mode\":\"all\"}", "mode: expected \"shared\" or \"exclusive\"" },
  { SHK_CAP_INSTALL_PRIVILEGED, "{\"scope\":\"pkg\"}", NULL, "\"scope\":\"pkg\"" },
  { SHK_CAP_INSTALL_PRIVILEGED, "{\"scope\":\"root\"}", "scope: expected \"pkg\" or \"any\"" },
  { SHK_CAP_PERSISTENCE, "{\"paths\":[\"/home/u/.config/app\"],\"survives_session\":true}", NULL,
    "\"survives_session\":true" },
  { SHK_CAP_CREDENTIALS, "{\"broker_scopes\":[\"github:repo\"],\"never_raw\":true}", NULL,
    "\"never_raw\":true" },
  { SHK_CAP_CREDENTIALS, "{\"never_raw\":false}", "never_raw: must be true" },
  { SHK_CAP_PERIPHERAL, "{\"camera\":true,\"input_inject\":false}", NULL, "\"camera\":true" },
  { SHK_CAP_PERIPHERAL, "[]", "scope must be a JSON object" },
  { SHK_CAP_PERIPHERAL, "{", "scope is not valid JSON" },
  { SHK_CAP_PERIPHERAL, "{\"mic\":true,\"mic\":false}", "scope is not valid JSON" },
};

static void scope_parsing(void **state)
{
  (void)state;
  for (size_t i = 0; i < sizeof parse_cases / sizeof parse_cases[0]; i++) {
    shk_cap_scope s;
    shk_error err = { "" };
    int r = shk_cap_scope_parse(parse_cases[i].cls, parse_cases[i].json, &s, &err);
    if (!parse_cases[i].err_has) {
      if (r)
        fail_msg("case %zu: %s: %s", i, parse_cases[i].json, err.message);
      /* The JSON form is canonical and round-trips. */
      char *j = shk_cap_scope_to_json(&s);
      assert_non_null(j);
      if (parse_cases[i].canon && !strstr(j, parse_cases[i].canon))
        fail_msg("case %zu: %s: canonical form %s lacks %s", i, parse_cases[i].json, j,
                 parse_cases[i].canon);
      shk_cap_scope s2, s3;
      assert_int_equal(shk_cap_scope_parse(parse_cases[i].cls, j, &s2, &err), 0);
      assert_true(shk_cap_scope_subset(&s, &s2, NULL) && shk_cap_scope_subset(&s2, &s, NULL));
      char *j2 = shk_cap_scope_to_json(&s2);
      assert_string_equal(j, j2);
      /* A copy is the same scope. */
      assert_int_equal(shk_cap_scope_copy(&s3, &s), 0);
      char *j3 = shk_cap_scope_to_json(&s3);
      assert_string_equal(j, j3);
      free(j);
      free(j2);
      free(j3);
      shk_cap_scope_clear(&s3);
      shk_cap_scope_clear(&s2);
      shk_cap_scope_clear(&s);
    } else {
      if (r != -EINVAL || strncmp(err.message, parse_cases[i].err_has, strlen(parse_cases[i].err_has)))
        fail_msg("case %zu: %s: expected an error beginning '%s', got %d '%s'", i,
                 parse_cases[i].json, parse_cases[i].err_has, r, err.message);
      /* A refused scope holds nothing. */
      assert_int_equal(s.domains.n + s.cidrs.n + s.n_ports + s.read.n + s.write.n + s.deny.n, 0);
    }
  }
}

/* ---- subset: table of (class, child, parent, subset?) ---- */
static const struct {
  shk_cap_class cls;
  const char *child, *parent;
  bool subset;
} subset_cases[] = {
  /* domain patterns */
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"a.test\"]}", "{\"domains\":[\"a.test\"]}", true },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"A.Test\"]}", "{\"domains\":[\"a.test\"]}", true },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"a.test\"]}", "{\"domains\":[\"A.TEST.\"]}", true },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"b.test\"]}", "{\"domains\":[\"a.test\"]}", false },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"x.a.test\"]}", "{\"domains\":[\"*.a.test\"]}", true },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"a.test\"]}", "{\"domains\":[\"*.a.test\"]}", false },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"a.test\"]}", "{\"domains\":[\"**.a.test\"]}", true },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"*.a.test\"]}", "{\"domains\":[\"**.a.test\"]}", true },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"**.a.test\"]}", "{\"domains\":[\"*.a.test\"]}", false },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"**.x.a.test\"]}", "{\"domains\":[\"*.a.test\"]}", true },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"*.a.test\"]}", "{\"domains\":[\"a.test\"]}", false },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"xa.test\"]}", "{\"domains\":[\"**.a.test\"]}", false },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"a.test:443\"]}", "{\"domains\":[\"a.test\"]}", true },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"a.test\"]}", "{\"domains\":[\"a.test:443\"]}", false },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"a.test:80\"]}", "{\"domains\":[\"a.test:443\"]}", false },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"a.test\",\"b.test\"]}", "{\"domains\":[\"a.test\"]}", false },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"a.test\",\"b.test\"]}", "{\"domains\":[\"**.test\"]}", true },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[]}", "{\"domains\":[]}", true },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"a.test\"]}", "{}", false },
  /* CIDRs */
  { SHK_CAP_NET_EGRESS, "{\"cidrs\":[\"10.1.0.0/16\"]}", "{\"cidrs\":[\"10.0.0.0/8\"]}", true },
  { SHK_CAP_NET_EGRESS, "{\"cidrs\":[\"10.0.0.0/8\"]}", "{\"cidrs\":[\"10.1.0.0/16\"]}", false },
  { SHK_CAP_NET_EGRESS, "{\"cidrs\":[\"11.0.0.0/16\"]}", "{\"cidrs\":[\"10.0.0.0/8\"]}", false },
  { SHK_CAP_NET_EGRESS, "{\"cidrs\":[\"::ffff:10.0.0.0/104\"]}", "{\"cidrs\":[\"10.0.0.0/8\"]}", false },
  { SHK_CAP_NET_EGRESS, "{\"cidrs\":[\"2001:db8:1::/48\"]}", "{\"cidrs\":[\"2001:DB8::/32\"]}", true },
  { SHK_CAP_NET_EGRESS, "{\"cidrs\":[\"10.0.0.7/32\"]}", "{\"cidrs\":[\"0.0.0.0/0\"]}", true },
  { SHK_CAP_NET_EGRESS, "{\"cidrs\":[\"::/0\"]}", "{\"cidrs\":[\"0.0.0.0/0\"]}", false },
  /* ports */
  { SHK_CAP_NET_EGRESS, "{\"ports\":[443]}", "{\"ports\":[\"1-1024\"]}", true },
  { SHK_CAP_NET_EGRESS, "{\"ports\":[\"1000-2000\"]}", "{\"ports\":[\"1-1024\"]}", false },
  { SHK_CAP_NET_EGRESS, "{\"ports\":[\"20-30\"]}", "{\"ports\":[22]}", false },
  { SHK_CAP_NET_EGRESS, "{\"ports\":[\"20-30\"]}", "{\"ports\":[\"1-21\",\"22-40\"]}", false },
  { SHK_CAP_NET_EGRESS, "{\"ports\":[80]}", "{\"ports\":[]}", true },
  { SHK_CAP_NET_EGRESS, "{\"ports\":[]}", "{\"ports\":[80]}", false },
  /* tls_inspect narrows */
  { SHK_CAP_NET_EGRESS, "{\"tls_inspect\":true}", "{}", true },
  { SHK_CAP_NET_EGRESS, "{}", "{\"tls_inspect\":true}", false },
  /* limited narrows too: a limited child of a full parent, never the reverse */
  { SHK_CAP_NET_EGRESS, "{\"limited\":true}", "{}", true },
  { SHK_CAP_NET_EGRESS, "{}", "{\"limited\":true}", false },
  /* paths */
  { SHK_CAP_FS_SCOPE, "{\"write\":[\"/w/a\"]}", "{\"write\":[\"/w\"]}", true },
  { SHK_CAP_FS_SCOPE, "{\"write\":[\"/work\"]}", "{\"write\":[\"/w\"]}", false },
  { SHK_CAP_FS_SCOPE, "{\"write\":[\"/W\"]}", "{\"write\":[\"/w\"]}", false },
  { SHK_CAP_FS_SCOPE, "{\"write\":[\"/w\"]}", "{\"write\":[\"/w/a\"]}", false },
  { SHK_CAP_FS_SCOPE, "{\"read\":[\"/etc\"]}", "{\"read\":[\"/\"]}", true },
  { SHK_CAP_FS_SCOPE, "{\"write\":[\"/w\"]}", "{\"read\":[\"/w\"]}", false },
  { SHK_CAP_FS_SCOPE, "{\"write\":[\"/w\"],\"deny\":[\"/w/s\"]}", "{\"write\":[\"/w\"],\"deny\":[\"/w/s\"]}", true },
  { SHK_CAP_FS_SCOPE, "{\"write\":[\"/w\"]}", "{\"write\":[\"/w\"],\"deny\":[\"/w/s\"]}", false },
  { SHK_CAP_FS_SCOPE, "{\"write\":[\"/w\"],\"deny\":[\"/w\"]}", "{\"write\":[\"/w\"],\"deny\":[\"/w/s\"]}", true },
  /* booleans and enums */
  { SHK_CAP_CLIPBOARD, "{\"paste_in\":true}", "{\"paste_in\":true,\"copy_out\":true}", true },
  { SHK_CAP_CLIPBOARD, "{\"copy_out\":true}", "{\"paste_in\":true}", false },
  { SHK_CAP_GPU, "{\"device_ids\":[\"0\"]}", "{\"device_ids\":[\"0\",\"1\"]}", true },
  { SHK_CAP_GPU, "{\"device_ids\":[\"2\"]}", "{\"device_ids\":[\"0\",\"1\"]}", false },
  { SHK_CAP_GPU, "{\"mode\":\"exclusive\"}", "{\"mode\":\"shared\"}", false },
  { SHK_CAP_GPU, "{\"mode\":\"shared\"}", "{\"mode\":\"exclusive\"}", true },
  { SHK_CAP_INSTALL_PRIVILEGED, "{\"scope\":\"any\"}", "{\"scope\":\"pkg\"}", false },
  { SHK_CAP_INSTALL_PRIVILEGED, "{\"scope\":\"pkg\"}", "{\"scope\":\"any\"}", true },
  { SHK_CAP_PERSISTENCE, "{\"survives_session\":true}", "{}", false },
  { SHK_CAP_PERSISTENCE, "{\"paths\":[\"/h/.cfg/a\"]}", "{\"paths\":[\"/h/.cfg\"]}", true },
  { SHK_CAP_CREDENTIALS, "{\"broker_scopes\":[\"gh:read\"]}", "{\"broker_scopes\":[\"gh:read\",\"gh:write\"]}", true },
  { SHK_CAP_CREDENTIALS, "{\"broker_scopes\":[\"gh:admin\"]}", "{\"broker_scopes\":[\"gh:read\"]}", false },
  { SHK_CAP_PERIPHERAL, "{\"mic\":true}", "{\"camera\":true}", false },
  { SHK_CAP_PERIPHERAL, "{}", "{\"camera\":true,\"mic\":true}", true },
};

static void scope_subset(void **state)
{
  (void)state;
  for (size_t i = 0; i < sizeof subset_cases / sizeof subset_cases[0]; i++) {
    shk_cap_scope c = parse_ok(subset_cases[i].cls, subset_cases[i].child);
    shk_cap_scope p = parse_ok(subset_cases[i].cls, subset_cases[i].parent);
    shk_error why = { "" };
    bool got = shk_cap_scope_subset(&c, &p, &why);
    if (got != subset_cases[i].subset)
      fail_msg("case %zu: %s within %s: expected %d, got %d (%s)", i, subset_cases[i].child,
               subset_cases[i].parent, subset_cases[i].subset, got, why.message);
    if (!got)
      assert_true(why.message[0] != '\0');
    shk_cap_scope_clear(&c);
    shk_cap_scope_clear(&p);
  }
  /* Different classes are never subsets. */
  shk_cap_scope a = parse_ok(SHK_CAP_CLIPBOARD, "{}"), b = parse_ok(SHK_CAP_PERIPHERAL, "{}");
  shk_error why;
  assert_false(shk_cap_scope_subset(&a, &b, &why));
  assert_string_equal(why.message, "class clipboard is not peripheral");
  assert_false(shk_cap_scope_subset(&a, &b, NULL));
  /* A list filled in by hand with what the parser would refuse covers
   * nothing and is covered by nothing. */
  shk_cap_scope bad = { .cls = SHK_CAP_NET_EGRESS }, good = parse_ok(SHK_CAP_NET_EGRESS,
                                                                     "{\"domains\":[\"**.test\"]}");
  assert_int_equal(shk_strv_push(&bad.domains, "A_B.test"), 0);
  assert_false(shk_cap_scope_subset(&bad, &good, NULL));
  assert_false(shk_cap_scope_subset(&good, &bad, NULL));
  assert_false(shk_cap_scope_allows_host(&bad, "a_b.test", 443));
  shk_cap_scope_clear(&bad);
  shk_cap_scope_clear(&good);
}

/* ---- the check the live egress hook makes: (scope, host, port) -> allowed? ---- */
static const struct {
  const char *scope, *host;
  uint16_t port;
  bool allowed;
} host_cases[] = {
  { "{\"domains\":[\"a.test\"]}", "a.test", 443, true },
  { "{\"domains\":[\"a.test\"]}", "A.Test.", 443, true },
  { "{\"domains\":[\"A.TEST\"]}", "a.test", 443, true },
  { "{\"domains\":[\"a.test\"]}", "b.a.test", 443, false },
  { "{\"domains\":[\"a.test\"]}", "xa.test", 443, false },
  { "{\"domains\":[\"*.a.test\"]}", "b.a.test", 80, true },
  { "{\"domains\":[\"*.a.test\"]}", "c.b.a.test", 80, true },
  { "{\"domains\":[\"*.a.test\"]}", "a.test", 80, false },
  { "{\"domains\":[\"**.a.test\"]}", "a.test", 80, true },
  { "{\"domains\":[\"**.a.test\"]}", "b.a.test", 80, true },
  { "{\"domains\":[\"**.a.test\"]}", "ba.test", 80, false },
  { "{\"domains\":[\"a.test:443\"]}", "a.test", 443, true },
  { "{\"domains\":[\"a.test:443\"]}", "a.test", 80, false },
  /* Port 0 is a lookup of the name alone: a pattern's port does not apply. */
  { "{\"domains\":[\"a.test:443\"]}", "a.test", 0, true },
  { "{\"domains\":[\"a.test\"],\"ports\":[443]}", "a.test", 443, true },
  { "{\"domains\":[\"a.test\"],\"ports\":[443]}", "a.test", 80, false },
  { "{\"domains\":[\"a.test\"],\"ports\":[443]}", "a.test", 0, true },
  { "{\"domains\":[\"a.test\"],\"ports\":[\"8000-8080\"]}", "a.test", 8080, true },
  { "{\"domains\":[\"a.test\"],\"ports\":[\"8000-8080\"]}", "a.test", 8081, false },
  /* An address is matched against the CIDRs only. */
  { "{\"domains\":[\"**.test\"]}", "10.0.0.1", 443, false },
  { "{\"cidrs\":[\"10.0.0.0/8\"]}", "10.0.0.1", 443, true },
  { "{\"cidrs\":[\"10.0.0.0/8\"]}", "11.0.0.1", 443, false },
  { "{\"cidrs\":[\"10.0.0.0/8\"]}", "::ffff:10.0.0.1", 443, false },
  { "{\"cidrs\":[\"2001:db8::/32\"]}", "2001:db8::1", 443, true },
  { "{\"cidrs\":[\"2001:db8::/32\"]}", "[2001:DB8::1]", 443, true },
  { "{\"cidrs\":[\"10.0.0.0/8\"]}", "a.test", 443, false },
  { "{\"cidrs\":[\"10.0.0.0/8\"],\"ports\":[22]}", "10.0.0.1", 443, false },
  /* A host that does not parse admits nothing. */
  { "{\"domains\":[\"**.test\"]}", "a_b.test", 443, false },
  { "{\"domains\":[\"**.test\"]}", "", 443, false },
  { "{\"domains\":[\"**.test\"]}", "a b.test", 443, false },
  { "{}", "a.test", 443, false },
};

static void scope_allows_host(void **state)
{
  (void)state;
  for (size_t i = 0; i < sizeof host_cases / sizeof host_cases[0]; i++) {
    shk_cap_scope s = parse_ok(SHK_CAP_NET_EGRESS, host_cases[i].scope);
    bool got = shk_cap_scope_allows_host(&s, host_cases[i].host, host_cases[i].port);
    if (got != host_cases[i].allowed)
      fail_msg("case %zu: %s, %s:%u: expected %d", i, host_cases[i].scope, host_cases[i].host,
               host_cases[i].port, host_cases[i].allowed);
    shk_cap_scope_clear(&s);
  }
  /* Only net.egress scopes admit hosts. */
  shk_cap_scope fs = parse_ok(SHK_CAP_FS_SCOPE, "{\"read\":[\"/\"]}");
  assert_false(shk_cap_scope_allows_host(&fs, "a.test", 443));
  shk_cap_scope_clear(&fs);
}

/* ---- handles ---- */

static void ids_are_random_and_unforgeable(void **state)
{
  (void)state;
  shk_cap_table *t = new_table();
  shk_cap_scope s = parse_ok(SHK_CAP_CLIPBOARD, "{\"paste_in\":true}");
  char a[SHK_CAP_ID_HEX], b[SHK_CAP_ID_HEX];
  assert_int_equal(shk_cap_issue(t, "s1", &s, SHK_CAP_SESSION, 0, a), 0);
  assert_int_equal(shk_cap_issue(t, "s1", &s, SHK_CAP_SESSION, 0, b), 0);
  assert_int_equal(strlen(a), 64);
  assert_string_not_equal(a, b);
  assert_int_equal(shk_cap_use(t, a, 1), 0);
  /* One flipped hex digit is another, unknown handle. */
  char forged[SHK_CAP_ID_HEX];
  memcpy(forged, a, sizeof forged);
  forged[10] = forged[10] == '0' ? '1' : '0';
  assert_int_equal(shk_cap_use(t, forged, 1), -ENOENT);
  assert_int_equal(shk_cap_use(t, "", 1), -ENOENT);
  assert_int_equal(shk_cap_use(t, "zz", 1), -ENOENT);
  shk_cap_scope_clear(&s);
  shk_cap_table_free(t);
}

static void membrane_revokes_descendants(void **state)
{
  (void)state;
  shk_cap_table *t = new_table();
  shk_cap_scope root = parse_ok(SHK_CAP_NET_EGRESS, "{\"domains\":[\"**.a.test\"],\"ports\":[443]}");
  shk_cap_scope mid = parse_ok(SHK_CAP_NET_EGRESS, "{\"domains\":[\"*.a.test\"],\"ports\":[443]}");
  shk_cap_scope leaf = parse_ok(SHK_CAP_NET_EGRESS, "{\"domains\":[\"x.a.test\"],\"ports\":[443]}");
  shk_cap_scope wide = parse_ok(SHK_CAP_NET_EGRESS, "{\"domains\":[\"**.test\"]}");
  char r[SHK_CAP_ID_HEX], m[SHK_CAP_ID_HEX], l[SHK_CAP_ID_HEX], w[SHK_CAP_ID_HEX], sib[SHK_CAP_ID_HEX];
  shk_error why;
  assert_int_equal(shk_cap_issue(t, "s", &root, SHK_CAP_SESSION, 0, r), 0);
  assert_int_equal(shk_cap_attenuate(t, r, &mid, 0, m, &why), 0);
  assert_int_equal(shk_cap_attenuate(t, m, &leaf, 0, l, &why), 0);
  assert_int_equal(shk_cap_attenuate(t, r, &leaf, 0, sib, &why), 0);
  /* Widening is an error, and says which field widens. */
  assert_int_equal(shk_cap_attenuate(t, m, &wide, 0, w, &why), -EPERM);
  assert_non_null(strstr(why.message, "domains"));
  assert_int_equal(shk_cap_use(t, l, 5), 0);
  /* Revoking the middle kills the grandchild but not the root or a sibling. */
  assert_int_equal(shk_cap_revoke(t, m), 0);
  assert_int_equal(shk_cap_use(t, m, 5), -EACCES);
  assert_int_equal(shk_cap_use(t, l, 5), -EACCES);
  assert_int_equal(shk_cap_use(t, r, 5), 0);
  assert_int_equal(shk_cap_use(t, sib, 5), 0);
  assert_true(shk_cap_is_revoked(t, l));
  assert_false(shk_cap_is_revoked(t, sib));
  /* Idempotent; a revoked handle cannot be attenuated. */
  assert_int_equal(shk_cap_revoke(t, m), 0);
  assert_int_equal(shk_cap_attenuate(t, m, &leaf, 0, w, &why), -EACCES);
  /* Removing: only a handle nothing derives from, as the undo of a grant. */
  assert_int_equal(shk_cap_remove(t, r), -EBUSY);
  char fresh[SHK_CAP_ID_HEX];
  assert_int_equal(shk_cap_issue(t, "s", &leaf, SHK_CAP_SESSION, 0, fresh), 0);
  assert_int_equal(shk_cap_remove(t, fresh), 0);
  assert_int_equal(shk_cap_use(t, fresh, 5), -ENOENT);
  assert_int_equal(shk_cap_remove(t, fresh), -ENOENT);
  /* Revoking the root kills everything. */
  assert_int_equal(shk_cap_revoke(t, r), 0);
  assert_int_equal(shk_cap_use(t, sib, 5), -EACCES);
  assert_int_equal(shk_cap_revoke(t, "00"), -ENOENT);
  shk_cap_scope_clear(&root);
  shk_cap_scope_clear(&mid);
  shk_cap_scope_clear(&leaf);
  shk_cap_scope_clear(&wide);
  shk_cap_table_free(t);
}

static void lifecycles(void **state)
{
  (void)state;
  shk_cap_table *t = new_table();
  shk_cap_scope s = parse_ok(SHK_CAP_CLIPBOARD, "{\"copy_out\":true}");
  char once[SHK_CAP_ID_HEX], timed[SHK_CAP_ID_HEX], child[SHK_CAP_ID_HEX], other[SHK_CAP_ID_HEX];
  shk_error why;
  assert_int_equal(shk_cap_issue(t, "s", &s, SHK_CAP_ONCE, 0, once), 0);
  assert_int_equal(shk_cap_check(t, once, 1), 0);
  assert_int_equal(shk_cap_use(t, once, 1), 0);
  assert_int_equal(shk_cap_use(t, once, 1), -EACCES);
  /* Used up is not revoked: its one use (an open tunnel) stands. */
  assert_false(shk_cap_is_revoked(t, once));
  /* Expiry, inherited by children: a child asking for more time gets the parent's. */
  assert_int_equal(shk_cap_issue(t, "s", &s, SHK_CAP_SESSION, 1000, timed), 0);
  assert_int_equal(shk_cap_attenuate(t, timed, &s, 5000, child, &why), 0);
  assert_int_equal(shk_cap_use(t, child, 999), 0);
  assert_int_equal(shk_cap_use(t, child, 1000), -EACCES);
  assert_int_equal(shk_cap_use(t, timed, 1000), -EACCES);
  /* The end of a session revokes its handles and no other session's. */
  assert_int_equal(shk_cap_issue(t, "other", &s, SHK_CAP_SESSION, 0, other), 0);
  char live[SHK_CAP_ID_HEX];
  assert_int_equal(shk_cap_issue(t, "s", &s, SHK_CAP_SESSION, 0, live), 0);
  shk_cap_revoke_session(t, "s");
  assert_int_equal(shk_cap_use(t, live, 1), -EACCES);
  assert_int_equal(shk_cap_use(t, other, 1), 0);
  shk_cap_scope_clear(&s);
  shk_cap_table_free(t);
}

static void many_handles(void **state)
{
  (void)state;
  shk_cap_table *t = new_table();
  shk_cap_scope s = parse_ok(SHK_CAP_CLIPBOARD, "{}");
  enum { N = 5000 };
  char (*ids)[SHK_CAP_ID_HEX] = calloc(N, SHK_CAP_ID_HEX);
  for (int i = 0; i < N; i++)
    assert_int_equal(shk_cap_issue(t, i % 2 ? "odd" : "even", &s, SHK_CAP_SESSION, 0, ids[i]), 0);
  for (int i = 0; i < N; i += 3)
    assert_int_equal(shk_cap_revoke(t, ids[i]), 0);
  for (int i = 0; i < N; i++)
    assert_int_equal(shk_cap_use(t, ids[i], 1), i % 3 ? 0 : -EACCES);
  free(ids);
  shk_cap_scope_clear(&s);
  shk_cap_table_free(t);
}

/* A closed session's handles leave the table, children included, and
 * nothing of another session goes with them (300 sessions of ten grants
 * each once left 3,000 dead handles behind). */
static void closed_sessions_leave_the_table(void **state)
{
  (void)state;
  shk_cap_table *t = new_table();
  shk_cap_scope s = parse_ok(SHK_CAP_NET_EGRESS, "{\"domains\":[\"**.a.test\"]}");
  char keep[SHK_CAP_ID_HEX], id[SHK_CAP_ID_HEX], child[SHK_CAP_ID_HEX];
  shk_error why;
  assert_int_equal(shk_cap_issue(t, "kept", &s, SHK_CAP_SESSION, 0, keep), 0);
  for (int n = 0; n < 300; n++) {
    char name[32];
    snprintf(name, sizeof name, "s%d", n);
    for (int k = 0; k < 5; k++) {
      assert_int_equal(shk_cap_issue(t, name, &s, SHK_CAP_SESSION, 0, id), 0);
      assert_int_equal(shk_cap_attenuate(t, id, &s, 0, child, &why), 0);
    }
    shk_cap_revoke_session(t, name);
    assert_int_equal(shk_cap_remove_session(t, name), 10);
  }
  assert_int_equal(shk_cap_count(t), 1);
  assert_int_equal(shk_cap_use(t, keep, 1), 0);
  assert_int_equal(shk_cap_use(t, id, 1), -ENOENT);
  assert_null(shk_cap_scope_of(t, child));
  assert_int_equal(shk_cap_remove_session(t, "no-such"), 0);
  shk_cap_scope_clear(&s);
  shk_cap_table_free(t);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(scope_parsing),
    cmocka_unit_test(scope_subset),
    cmocka_unit_test(scope_allows_host),
    cmocka_unit_test(ids_are_random_and_unforgeable),
    cmocka_unit_test(membrane_revokes_descendants),
    cmocka_unit_test(lifecycles),
    cmocka_unit_test(many_handles),
    cmocka_unit_test(closed_sessions_leave_the_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
