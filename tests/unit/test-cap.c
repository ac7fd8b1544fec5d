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
  char err[256];
  int r = shk_cap_scope_parse(c, json, &s, err, sizeof err);
  if (r)
    fail_msg("scope %s did not parse: %s", json, err);
  return s;
}

/* ---- parsing: table of (class, json, ok) ---- */
static const struct {
  shk_cap_class cls;
  const char *json;
  const char *err_has; /* NULL: must parse */
} parse_cases[] = {
  { SHK_CAP_NET_EGRESS, "{}", NULL },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"example.com\",\"*.a.test\",\"**.b.test:443\"]}", NULL },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"Example.com\"]}", "domains[0]" },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"a_b.test\"]}", "domains[0]" },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"*\"]}", "domains[0]" },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"a.test:0\"]}", "domains[0]" },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"a.test:65536\"]}", "domains[0]" },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"a..test\"]}", "domains[0]" },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"a%2etest\"]}", "domains[0]" },
  { SHK_CAP_NET_EGRESS, "{\"cidrs\":[\"10.0.0.0/8\",\"2001:db8::/32\"]}", NULL },
  { SHK_CAP_NET_EGRESS, "{\"cidrs\":[\"10.0.0.1/8\"]}", "cidrs[0]" },
  { SHK_CAP_NET_EGRESS, "{\"cidrs\":[\"10.0.0.0/33\"]}", "cidrs[0]" },
  { SHK_CAP_NET_EGRESS, "{\"ports\":[443,\"8000-8080\"]}", NULL },
  { SHK_CAP_NET_EGRESS, "{\"ports\":[0]}", "ports[0]" },
  { SHK_CAP_NET_EGRESS, "{\"ports\":[\"9-1\"]}", "ports[0]" },
  { SHK_CAP_NET_EGRESS, "{\"tls_inspect\":1}", "tls_inspect" },
  { SHK_CAP_NET_EGRESS, "{\"domain\":[]}", "unknown field 'domain'" },
  { SHK_CAP_FS_SCOPE, "{\"read\":[\"/\"],\"write\":[\"/w\"],\"deny\":[\"/w/.git\"]}", NULL },
  { SHK_CAP_FS_SCOPE, "{\"write\":[\"relative\"]}", "write[0]" },
  { SHK_CAP_FS_SCOPE, "{\"write\":[\"/a/../etc\"]}", "write[0]" },
  { SHK_CAP_FS_SCOPE, "{\"write\":[\"/a/\"]}", "write[0]" },
  { SHK_CAP_CLIPBOARD, "{\"paste_in\":true}", NULL },
  { SHK_CAP_GPU, "{\"device_ids\":[\"0\"],\"mode\":\"exclusive\"}", NULL },
  { SHK_CAP_GPU, "{\"mode\":\"all\"}", "mode" },
  { SHK_CAP_INSTALL_PRIVILEGED, "{\"scope\":\"pkg\"}", NULL },
  { SHK_CAP_INSTALL_PRIVILEGED, "{\"scope\":\"root\"}", "scope" },
  { SHK_CAP_PERSISTENCE, "{\"paths\":[\"/home/u/.config/app\"],\"survives_session\":true}", NULL },
  { SHK_CAP_CREDENTIALS, "{\"broker_scopes\":[\"github:repo\"],\"never_raw\":true}", NULL },
  { SHK_CAP_CREDENTIALS, "{\"never_raw\":false}", "never_raw" },
  { SHK_CAP_PERIPHERAL, "{\"camera\":true,\"input_inject\":false}", NULL },
  { SHK_CAP_PERIPHERAL, "[]", "JSON object" },
  { SHK_CAP_PERIPHERAL, "{", "not valid JSON" },
};

static void scope_parsing(void **state)
{
  (void)state;
  for (size_t i = 0; i < sizeof parse_cases / sizeof parse_cases[0]; i++) {
    shk_cap_scope s;
    char err[256] = "";
    int r = shk_cap_scope_parse(parse_cases[i].cls, parse_cases[i].json, &s, err, sizeof err);
    if (!parse_cases[i].err_has) {
      if (r)
        fail_msg("case %zu: %s: %s", i, parse_cases[i].json, err);
      /* The JSON form round-trips. */
      char *j = shk_cap_scope_to_json(&s);
      shk_cap_scope s2;
      assert_int_equal(shk_cap_scope_parse(parse_cases[i].cls, j, &s2, err, sizeof err), 0);
      assert_true(shk_cap_scope_subset(&s, &s2, NULL, 0) && shk_cap_scope_subset(&s2, &s, NULL, 0));
      free(j);
      shk_cap_scope_clear(&s2);
      shk_cap_scope_clear(&s);
    } else {
      if (r != -EINVAL || !strstr(err, parse_cases[i].err_has))
        fail_msg("case %zu: %s: expected error with '%s', got %d '%s'", i, parse_cases[i].json,
                 parse_cases[i].err_has, r, err);
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
  { SHK_CAP_NET_EGRESS, "{\"domains\":[]}", "{\"domains\":[]}", true },
  { SHK_CAP_NET_EGRESS, "{\"domains\":[\"a.test\"]}", "{}", false },
  /* CIDRs */
  { SHK_CAP_NET_EGRESS, "{\"cidrs\":[\"10.1.0.0/16\"]}", "{\"cidrs\":[\"10.0.0.0/8\"]}", true },
  { SHK_CAP_NET_EGRESS, "{\"cidrs\":[\"10.0.0.0/8\"]}", "{\"cidrs\":[\"10.1.0.0/16\"]}", false },
  { SHK_CAP_NET_EGRESS, "{\"cidrs\":[\"11.0.0.0/16\"]}", "{\"cidrs\":[\"10.0.0.0/8\"]}", false },
  { SHK_CAP_NET_EGRESS, "{\"cidrs\":[\"::ffff:10.0.0.0/104\"]}", "{\"cidrs\":[\"10.0.0.0/8\"]}", false },
  { SHK_CAP_NET_EGRESS, "{\"cidrs\":[\"2001:db8:1::/48\"]}", "{\"cidrs\":[\"2001:db8::/32\"]}", true },
  /* ports */
  { SHK_CAP_NET_EGRESS, "{\"ports\":[443]}", "{\"ports\":[\"1-1024\"]}", true },
  { SHK_CAP_NET_EGRESS, "{\"ports\":[\"1000-2000\"]}", "{\"ports\":[\"1-1024\"]}", false },
  { SHK_CAP_NET_EGRESS, "{\"ports\":[80]}", "{\"ports\":[]}", true },
  { SHK_CAP_NET_EGRESS, "{\"ports\":[]}", "{\"ports\":[80]}", false },
  /* tls_inspect narrows */
  { SHK_CAP_NET_EGRESS, "{\"tls_inspect\":true}", "{}", true },
  { SHK_CAP_NET_EGRESS, "{}", "{\"tls_inspect\":true}", false },
  /* paths */
  { SHK_CAP_FS_SCOPE, "{\"write\":[\"/w/a\"]}", "{\"write\":[\"/w\"]}", true },
  { SHK_CAP_FS_SCOPE, "{\"write\":[\"/work\"]}", "{\"write\":[\"/w\"]}", false },
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
    char why[256] = "";
    bool got = shk_cap_scope_subset(&c, &p, why, sizeof why);
    if (got != subset_cases[i].subset)
      fail_msg("case %zu: %s within %s: expected %d, got %d (%s)", i, subset_cases[i].child,
               subset_cases[i].parent, subset_cases[i].subset, got, why);
    if (!got)
      assert_true(why[0] != '\0');
    shk_cap_scope_clear(&c);
    shk_cap_scope_clear(&p);
  }
  /* Different classes are never subsets. */
  shk_cap_scope a = parse_ok(SHK_CAP_CLIPBOARD, "{}"), b = parse_ok(SHK_CAP_PERIPHERAL, "{}");
  assert_false(shk_cap_scope_subset(&a, &b, NULL, 0));
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
    cmocka_unit_test(ids_are_random_and_unforgeable),
    cmocka_unit_test(membrane_revokes_descendants),
    cmocka_unit_test(lifecycles),
    cmocka_unit_test(many_handles),
    cmocka_unit_test(closed_sessions_leave_the_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
