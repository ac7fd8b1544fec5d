/* SPDX-License-Identifier: Apache-2.0 */
/* The egress proxy's added latency with the authority timeline on against
 * off, in one run: two capability managers in this process, the same in
 * every way but one (the first keeps no store, the second writes every
 * event to a store in DIR), each with one session whose proxy allows the
 * bench host (pinned to 127.0.0.1). A tiny loopback HTTP server answers
 * each request and closes. N absolute-form requests, each on a new
 * connection to the session's http.sock (where a sandbox's bridge
 * connects), alternate between the two sessions, so that both see the
 * same load on the machine; each is timed from connect to the answer's
 * end. Every request through the session with the timeline costs the
 * events the manager writes for it (an egress-check and a proxy-verdict).
 * usage: proxy-bench DIR N   (SHINKEN_POLICY_DIR names the policy) */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "shinken/audit.h"
#include "shinken/manager.h"

static void die(const char *what, const char *why)
{
  fprintf(stderr, "proxy-bench: %s: %s\n", what, why ? why : strerror(errno));
  exit(1);
}

static double now_us(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* The origin: answers each request with a small 200 and closes. */
static void *http_server(void *arg)
{
  int lfd = *(int *)arg;
  static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
  char buf[2048];
  for (;;) {
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0)
      continue;
    size_t got = 0;
    ssize_t n;
    while (got < sizeof buf - 1 && (n = read(fd, buf + got, sizeof buf - 1 - got)) > 0) {
      got += (size_t)n;
      buf[got] = '\0';
      if (strstr(buf, "\r\n\r\n"))
        break;
    }
    if (write(fd, answer, sizeof answer - 1) < 0) {
    }
    close(fd);
  }
  return NULL;
}

typedef struct side {
  shk_manager *m;
  char sock[sizeof(((struct sockaddr_un *)0)->sun_path)];
  double *t;
} side;

static void open_side(side *s, const char *db, const char *proxy_config, int n)
{
  shk_manager_config mc;
  shk_error err;
  if (shk_manager_config_load(NULL, &mc, &err) < 0)
    die("the manager's configuration", err.message);
  mc.opts.audit_db = db;
  if (shk_manager_new(&mc.opts, &s->m, &err) < 0)
    die("the manager", err.message);
  shk_manager_config_clear(&mc);
  json_t *req = json_pack("{s:s, s:s, s:b, s:[s], s:s, s:b}", "op", "open_session", "name", "bench",
                          "egress", 1, "allow_domains", "bench.test", "proxy_config", proxy_config,
                          "ask", 0);
  char *text = json_dumps(req, JSON_COMPACT), *answer = NULL;
  json_decref(req);
  if (shk_manager_call(s->m, text, &answer) < 0)
    die("open_session", "no answer");
  free(text);
  json_t *ans = json_loads(answer, 0, NULL);
  const char *dir = json_string_value(json_object_get(ans, "egress_dir"));
  if (!dir)
    die("open_session", answer);
  snprintf(s->sock, sizeof s->sock, "%s/http.sock", dir);
  json_decref(ans);
  free(answer);
  s->t = calloc((size_t)n, sizeof *s->t);
}

static double one(const side *s, uint16_t port)
{
  double t0 = now_us();
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", s->sock);
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
    die(s->sock, NULL);
  char req[256], buf[4096];
  int len = snprintf(req, sizeof req, "GET http://bench.test:%u/ HTTP/1.1\r\nHost: bench.test:%u\r\n\r\n",
                     port, port);
  if (write(fd, req, (size_t)len) != len)
    die("write", NULL);
  size_t got = 0;
  ssize_t r;
  while ((r = read(fd, buf + got, sizeof buf - got)) > 0 && got + (size_t)r < sizeof buf)
    got += (size_t)r;
  close(fd);
  if (got < 12 || memcmp(buf + 9, "200", 3))
    die("a request was not answered 200", got ? buf : "no answer");
  return now_us() - t0;
}

static int cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
  if (argc != 3) {
    fprintf(stderr, "usage: proxy-bench DIR N\n");
    return 2;
  }
  const char *dir = argv[1];
  int n = atoi(argv[2]);
  if (n < 100)
    die("N", "at least 100 requests");
  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  socklen_t sl = sizeof sin;
  if (lfd < 0 || bind(lfd, (struct sockaddr *)&sin, sizeof sin) < 0 || listen(lfd, 512) < 0 ||
      getsockname(lfd, (struct sockaddr *)&sin, &sl) < 0)
    die("the origin's listener", NULL);
  uint16_t port = ntohs(sin.sin_port);
  pthread_t th;
  pthread_create(&th, NULL, http_server, &lfd);

  char cfg[4096], db[4096];
  snprintf(cfg, sizeof cfg, "%s/proxy.json", dir);
  snprintf(db, sizeof db, "%s/proxy-audit.db", dir);
  FILE *f = fopen(cfg, "w");
  if (!f)
    die(cfg, NULL);
  fprintf(f, "{\"allow_private_cidrs\": [\"127.0.0.1/32\"], \"hosts\": {\"bench.test\": [\"127.0.0.1\"]}}\n");
  fclose(f);
  side off = { 0 }, on = { 0 };
  open_side(&off, NULL, cfg, n);
  open_side(&on, db, cfg, n);

  /* Warm-up, then N of each, alternating (which goes first alternates too). */
  for (int i = 0; i < n / 10; i++) {
    one(&off, port);
    one(&on, port);
  }
  for (int i = 0; i < n; i++) {
    if (i & 1) {
      on.t[i] = one(&on, port);
      off.t[i] = one(&off, port);
    } else {
      off.t[i] = one(&off, port);
      on.t[i] = one(&on, port);
    }
  }
  qsort(off.t, (size_t)n, sizeof(double), cmp);
  qsort(on.t, (size_t)n, sizeof(double), cmp);
  double m0 = off.t[n / 2], m1 = on.t[n / 2], p0 = off.t[(n * 99) / 100], p1 = on.t[(n * 99) / 100];
  printf("proxy-latency      timeline off: median %.0f us, p99 %.0f us (%d requests)\n", m0, p0, n);
  printf("proxy-latency      timeline on:  median %.0f us, p99 %.0f us\n", m1, p1);
  printf("proxy-latency      on/off: median %.3fx, p99 %.3fx (targets: no measurable difference "
         "at the median, < 1.10x at p99)\n", m1 / m0, p1 / p0);
  shk_manager_free(off.m);
  shk_manager_free(on.m);
  shk_audit_reader *r;
  uint64_t count = 0;
  shk_error err;
  if (shk_audit_reader_open(db, &r, &err) == 0) {
    shk_audit_reader_count(r, &count, &err);
    shk_audit_reader_close(r);
  }
  printf("proxy-latency      the timeline holds %llu events for %d requests\n",
         (unsigned long long)count, n + n / 10);
  return 0;
}
