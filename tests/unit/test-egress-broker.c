/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the secret broker: the encrypted store (round trip,
 * tampering, file modes, bad input), sentinels and the header rewriter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shinken/broker.h"

#define TOKEN "ghp_abcdefghijklmnopqrstuvwxyz0123456789AB"

static char dir[64];

static int setup(void **state)
{
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/shk-broker-XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

static shk_broker_store *filled(void)
{
  shk_broker_store *st = NULL;
  shk_error e;
  assert_int_equal(shk_broker_store_open(dir, true, &st, &e), 0);
  shk_broker_spec gh = { .name = "gh", .host = "**.github.test", .env = "GH_TOKEN" };
  assert_int_equal(shk_broker_store_add(st, &gh, TOKEN, strlen(TOKEN), false, &e), 0);
  shk_broker_spec npm = { .name = "npm", .host = "registry.npm.test:443",
                          .header = "X-Npm-Auth: token={};", .allow_plain_http = true };
  const char *v = "npm_0123456789abcdefXYZ";
  assert_int_equal(shk_broker_store_add(st, &npm, v, strlen(v), false, &e), 0);
  return st;
}

static void test_store_round_trip(void **state)
{
  (void)state;
  shk_broker_store *st = filled();
  shk_error e;
  assert_int_equal(shk_broker_store_save(st, &e), 0);
  shk_broker_store_free(st);

  char path[128];
  struct stat sb;
  snprintf(path, sizeof path, "%s/secrets", dir);
  assert_int_equal(stat(path, &sb), 0);
  assert_int_equal(sb.st_mode & 0777, 0600);
  snprintf(path, sizeof path, "%s/secrets.key", dir);
  assert_int_equal(stat(path, &sb), 0);
  assert_int_equal(sb.st_mode & 0777, 0600);
  assert_int_equal(sb.st_size, 32);

  /* The value is not in the file in the clear. */
  char *text = NULL;
  snprintf(path, sizeof path, "%s/secrets", dir);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  char buf[4096];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  assert_null(memmem(buf, n, "abcdefghijklmnop", 16));
  (void)text;

  assert_int_equal(shk_broker_store_open(dir, false, &st, &e), 0);
  assert_int_equal(shk_broker_store_count(st), 2);
  const shk_broker_secret *s = shk_broker_store_find(st, "gh");
  assert_non_null(s);
  assert_int_equal(s->value_len, strlen(TOKEN));
  assert_memory_equal(s->value, TOKEN, strlen(TOKEN));
  assert_string_equal(s->host, "**.github.test");
  assert_string_equal(s->header_name, "Authorization");
  assert_string_equal(s->header_tmpl, "Bearer {}");
  assert_string_equal(s->env, "GH_TOKEN");
  assert_false(s->allow_plain_http);
  s = shk_broker_store_find(st, "npm");
  assert_non_null(s);
  assert_string_equal(s->header_name, "X-Npm-Auth");
  assert_string_equal(s->header_tmpl, "token={};");
  assert_null(s->env);
  assert_true(s->allow_plain_http);

  assert_int_equal(shk_broker_store_rm(st, "gh", &e), 0);
  assert_int_equal(shk_broker_store_rm(st, "gh", &e), -ENOENT);
  assert_int_equal(shk_broker_store_save(st, &e), 0);
  shk_broker_store_free(st);
  assert_int_equal(shk_broker_store_open(dir, false, &st, &e), 0);
  assert_int_equal(shk_broker_store_count(st), 1);
  assert_null(shk_broker_store_find(st, "gh"));
  shk_broker_store_free(st);
}

static void test_store_tampered(void **state)
{
  (void)state;
  shk_broker_store *st = filled();
  shk_error e;
  assert_int_equal(shk_broker_store_save(st, &e), 0);
  shk_broker_store_free(st);
  char path[128];
  snprintf(path, sizeof path, "%s/secrets", dir);
  int fd = open(path, O_RDWR);
  assert_true(fd >= 0);
  char c;
  assert_int_equal(pread(fd, &c, 1, 30), 1);
  c ^= 1;
  assert_int_equal(pwrite(fd, &c, 1, 30), 1);
  assert_int_equal(shk_broker_store_open(dir, false, &st, &e), -EBADMSG);
  assert_null(st);
  assert_non_null(strstr(e.message, "does not decrypt"));
  c ^= 1;
  assert_int_equal(pwrite(fd, &c, 1, 30), 1);
  close(fd);
  /* A store another user could read is refused. */
  assert_int_equal(chmod(path, 0644), 0);
  assert_int_equal(shk_broker_store_open(dir, false, &st, &e), -EPERM);
  assert_non_null(strstr(e.message, "0600"));
  assert_int_equal(chmod(path, 0600), 0);
  assert_int_equal(shk_broker_store_open(dir, false, &st, &e), 0);
  shk_broker_store_free(st);
}

static void test_store_bad_input(void **state)
{
  (void)state;
  shk_broker_store *st = NULL;
  shk_error e;
  assert_int_equal(shk_broker_store_open(dir, true, &st, &e), 0);
  struct {
    shk_broker_spec spec;
    const char *value, *msg;
  } bad[] = {
    { { .name = "", .host = "a.test" }, TOKEN, "name" },
    { { .name = "a b", .host = "a.test" }, TOKEN, "name" },
    { { .name = "x", .host = "a_b.test" }, TOKEN, "--host" },
    { { .name = "x", .host = "*" }, TOKEN, "--host" },
    { { .name = "x", .host = "a.test", .header = "NoColon" }, TOKEN, "--header" },
    { { .name = "x", .host = "a.test", .header = "X: no place" }, TOKEN, "{}" },
    { { .name = "x", .host = "a.test", .header = "X: {} {}" }, TOKEN, "{}" },
    { { .name = "x", .host = "a.test", .header = "X: {}\r\nY: 1" }, TOKEN, "{}" },
    { { .name = "x", .host = "a.test", .env = "1X" }, TOKEN, "--env" },
    { { .name = "x", .host = "a.test" }, "ghp_short", "fewer than 12" },
    { { .name = "x", .host = "a.test" }, "abc def ghi jkl mno pqr", "space" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    e.message[0] = 0;
    assert_int_equal(shk_broker_store_add(st, &bad[i].spec, bad[i].value, strlen(bad[i].value), false,
                                          &e),
                     -EINVAL);
    assert_non_null(strstr(e.message, bad[i].msg));
    /* An error never quotes the value. */
    assert_null(strstr(e.message, bad[i].value));
  }
  shk_broker_spec ok = { .name = "x", .host = "a.test" };
  assert_int_equal(shk_broker_store_add(st, &ok, TOKEN, strlen(TOKEN), false, &e), 0);
  assert_int_equal(shk_broker_store_add(st, &ok, TOKEN, strlen(TOKEN), false, &e), -EEXIST);
  assert_int_equal(shk_broker_store_add(st, &ok, TOKEN "C", strlen(TOKEN) + 1, true, &e), 0);
  assert_int_equal(shk_broker_store_count(st), 1);
  assert_int_equal(shk_broker_store_find(st, "x")->value_len, strlen(TOKEN) + 1);
  shk_broker_store_free(st);
}

static void classes_match(const char *a, const char *b, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    char x = a[i], y = b[i];
    bool same = (x >= '0' && x <= '9') ? (y >= '0' && y <= '9')
              : (x >= 'a' && x <= 'z') ? (y >= 'a' && y <= 'z')
              : (x >= 'A' && x <= 'Z') ? (y >= 'A' && y <= 'Z')
                                       : x == y;
    assert_true(same);
  }
}

static void test_sentinel(void **state)
{
  (void)state;
  shk_broker_store *st = filled();
  const shk_broker_secret *s = shk_broker_store_find(st, "gh");
  uint8_t k1[SHK_BROKER_KEY_LEN] = { 1 }, k2[SHK_BROKER_KEY_LEN] = { 2 };
  char a[128], b[128], c[128];
  assert_int_equal(shk_broker_sentinel(s, k1, a, sizeof a), 0);
  assert_int_equal(shk_broker_sentinel(s, k1, b, sizeof b), 0);
  assert_int_equal(shk_broker_sentinel(s, k2, c, sizeof c), 0);
  assert_int_equal(strlen(a), strlen(TOKEN));
  assert_memory_equal(a, "ghp_", 4);
  assert_string_equal(a, b); /* the same per session */
  assert_string_not_equal(a, c); /* and another in another session */
  assert_string_not_equal(a, TOKEN);
  classes_match(TOKEN, a, strlen(TOKEN));
  /* Too small a buffer is refused, not truncated. */
  assert_int_equal(shk_broker_sentinel(s, k1, a, strlen(TOKEN)), -EINVAL);
  shk_broker_store_free(st);
}

static shk_egress_http_request request(const char *host, uint16_t port, bool tls,
                                       const shk_egress_header *h, size_t n)
{
  return (shk_egress_http_request){ .session = "s", .host = host, .port = port, .tls = tls,
                                    .method = "GET", .headers = h, .n_headers = n };
}

#define HDR(n, v) { n, sizeof n - 1, v, sizeof v - 1 }

static const shk_egress_header *get(const shk_egress_header *h, size_t n, const char *name)
{
  for (size_t i = 0; i < n; i++)
    if (h[i].name_len == strlen(name) && !strncasecmp(h[i].name, name, h[i].name_len))
      return &h[i];
  return NULL;
}

static void test_rewrite(void **state)
{
  (void)state;
  shk_broker_store *st = filled();
  const shk_broker_secret *gh = shk_broker_store_find(st, "gh"), *npm = shk_broker_store_find(st, "npm");
  uint8_t key[SHK_BROKER_KEY_LEN] = { 7 };
  char sent[128];
  assert_int_equal(shk_broker_sentinel(gh, key, sent, sizeof sent), 0);
  shk_broker_use uses[2] = {
    { .secret = gh, .sentinel = sent, .sentinel_len = strlen(sent), .live = true },
    { .secret = npm, .live = true },
  };
  shk_egress_header *out = NULL;
  size_t n_out = 0;
  const char *reason = NULL;
  const shk_broker_use *hit = NULL;
  bool injected[2];

  /* The secret's host: the client's Authorization goes, the real one comes. */
  shk_egress_header h1[] = { HDR("Host", "api.github.test"), HDR("authorization", "Bearer mine"),
                             HDR("Accept", "*/*") };
  shk_egress_http_request r = request("api.github.test", 443, true, h1, 3);
  assert_int_equal(shk_broker_rewrite(uses, 2, &r, &out, &n_out, &reason, &hit, injected), 0);
  assert_non_null(out);
  assert_int_equal(n_out, 3);
  assert_true(injected[0]);
  assert_false(injected[1]);
  const shk_egress_header *a = get(out, n_out, "Authorization");
  assert_non_null(a);
  assert_int_equal(a->value_len, 7 + strlen(TOKEN));
  assert_memory_equal(a->value, "Bearer " TOKEN, a->value_len);
  assert_non_null(get(out, n_out, "Accept"));
  free(out);

  /* Its sentinel, in any header, becomes the secret there. */
  shk_egress_header h2[] = { { "X-Token", 7, sent, strlen(sent) } };
  r = request("github.test", 443, true, h2, 1);
  assert_int_equal(shk_broker_rewrite(uses, 2, &r, &out, &n_out, &reason, &hit, NULL), 0);
  const shk_egress_header *x = get(out, n_out, "X-Token");
  assert_non_null(x);
  assert_int_equal(x->value_len, strlen(TOKEN));
  assert_memory_equal(x->value, TOKEN, x->value_len);
  free(out);

  /* Another host: nothing changes, a client's Authorization passes. */
  r = request("example.test", 443, true, h1, 3);
  assert_int_equal(shk_broker_rewrite(uses, 2, &r, &out, &n_out, &reason, &hit, NULL), 0);
  assert_null(out);

  /* The sentinel sent to another host is refused and never replaced. */
  r = request("example.test", 443, true, h2, 1);
  assert_int_equal(shk_broker_rewrite(uses, 2, &r, &out, &n_out, &reason, &hit, NULL), -EACCES);
  assert_null(out);
  assert_string_equal(reason, "broker-sentinel-refused");
  assert_ptr_equal(hit, &uses[0]);

  /* In the request target, as sent or %-escaped, it is refused on
   * another host too; on the secret's own host it goes as sent. */
  shk_egress_header h4[] = { HDR("Accept", "*/*") };
  char target[256], escaped[256];
  snprintf(target, sizeof target, "/search?q=%s&x=1", sent);
  size_t e = (size_t)snprintf(escaped, sizeof escaped, "/p/");
  for (const char *c = sent; *c; c++)
    e += (size_t)snprintf(escaped + e, sizeof escaped - e, "%%%02X", (unsigned char)*c);
  r = request("example.test", 443, true, h4, 1);
  r.target = "/search?q=harmless";
  r.target_len = strlen(r.target);
  assert_int_equal(shk_broker_rewrite(uses, 2, &r, &out, &n_out, &reason, &hit, NULL), 0);
  assert_null(out);
  r.target = target;
  r.target_len = strlen(target);
  hit = NULL;
  assert_int_equal(shk_broker_rewrite(uses, 2, &r, &out, &n_out, &reason, &hit, NULL), -EACCES);
  assert_null(out);
  assert_string_equal(reason, "broker-sentinel-refused");
  assert_ptr_equal(hit, &uses[0]);
  r.target = escaped;
  r.target_len = e;
  assert_int_equal(shk_broker_rewrite(uses, 2, &r, &out, &n_out, &reason, &hit, NULL), -EACCES);
  /* Without its last escaped character the sentinel is not there. */
  r.target_len = e - 3;
  assert_int_equal(shk_broker_rewrite(uses, 2, &r, &out, &n_out, &reason, &hit, NULL), 0);
  r = request("api.github.test", 443, true, h4, 1);
  r.target = target;
  r.target_len = strlen(target);
  assert_int_equal(shk_broker_rewrite(uses, 2, &r, &out, &n_out, &reason, &hit, NULL), 0);
  free(out);
  out = NULL;

  /* Over plain HTTP only a secret opted in is injected. */
  r = request("api.github.test", 80, false, h1, 3);
  assert_int_equal(shk_broker_rewrite(uses, 2, &r, &out, &n_out, &reason, &hit, NULL), -EACCES);
  assert_string_equal(reason, "broker-plain-http");
  shk_egress_header h3[] = { HDR("X-Npm-Auth", "mine"), HDR("User-Agent", "npm") };
  r = request("registry.npm.test", 443, false, h3, 2);
  assert_int_equal(shk_broker_rewrite(uses, 2, &r, &out, &n_out, &reason, &hit, NULL), 0);
  assert_int_equal(n_out, 2);
  x = get(out, n_out, "X-Npm-Auth");
  assert_non_null(x);
  assert_memory_equal(x->value, "token=npm_0123456789abcdefXYZ;", x->value_len);
  free(out);
  /* The pattern's port counts. */
  r = request("registry.npm.test", 8443, true, h3, 2);
  assert_int_equal(shk_broker_rewrite(uses, 2, &r, &out, &n_out, &reason, &hit, NULL), 0);
  assert_null(out);

  /* Revoked: the sentinel is refused everywhere, and a request to the
   * secret's host closes the connection. */
  uses[0].live = false;
  uses[0].revoked = true;
  r = request("api.github.test", 443, true, h2, 1);
  assert_int_equal(shk_broker_rewrite(uses, 2, &r, &out, &n_out, &reason, &hit, NULL), -EACCES);
  r = request("api.github.test", 443, true, h1, 3);
  assert_int_equal(shk_broker_rewrite(uses, 2, &r, &out, &n_out, &reason, &hit, NULL), -ECONNABORTED);
  assert_string_equal(reason, "broker-revoked");
  assert_null(out);
  shk_broker_store_free(st);
}

/* The VmFlags of the mapping that holds P, from /proc/self/smaps. */
static void vm_flags(const void *p, char *out, size_t len)
{
  FILE *f = fopen("/proc/self/smaps", "r");
  assert_non_null(f);
  char line[512];
  bool in = false;
  out[0] = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long a, b;
    if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, ' ') < strchr(line, '\n'))
      in = (uintptr_t)p >= a && (uintptr_t)p < b;
    else if (in && !strncmp(line, "VmFlags:", 8))
      snprintf(out, len, "%.200s", line + 8);
  }
  fclose(f);
}

static void test_secure_memory(void **state)
{
  (void)state;
  char *p = shk_broker_secure_alloc(100);
  assert_non_null(p);
  char flags[256];
  vm_flags(p, flags, sizeof flags);
  /* Locked ("lo") and left out of core dumps ("dd"). */
  assert_non_null(strstr(flags, " lo"));
  assert_non_null(strstr(flags, " dd"));
  shk_broker_secure_free(p, 100);
  /* Control: ordinary memory has neither. */
  char *q = malloc(1 << 20);
  assert_non_null(q);
  vm_flags(q, flags, sizeof flags);
  assert_null(strstr(flags, " dd"));
  free(q);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_store_round_trip, setup, teardown),
    cmocka_unit_test_setup_teardown(test_store_tampered, setup, teardown),
    cmocka_unit_test_setup_teardown(test_store_bad_input, setup, teardown),
    cmocka_unit_test_setup_teardown(test_sentinel, setup, teardown),
    cmocka_unit_test_setup_teardown(test_rewrite, setup, teardown),
    cmocka_unit_test(test_secure_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
