/* SPDX-License-Identifier: Apache-2.0 */
/* Grant and revoke latency of the capability manager, end to end, with the
 * audit timeline on and off side by side, and revoke-to-refusal while
 * another session floods its proxy.
 *
 * Two managers run in this process, each serving its control socket and
 * hosting its sessions' egress proxies: one writes every event to an audit
 * store (fsync on every commit, checkpoints every 1000 events, as a daemon
 * does), the peer keeps no store. The rounds alternate between them, so both
 * see the same machine. A round, over a control connection: grant net.egress
 * for one name (the grant latency: request sent -> handle received), a
 * CONNECT through the session's proxy socket that must succeed, the revoke
 * (the revoke latency: revoke sent -> answer) and at once another CONNECT,
 * which must be refused (revoke -> refusal: revoke sent -> refusal
 * received). HOST is at tier Auto in the bench's manifest, so a grant is
 * one call; ASK_HOST is at Ask: the grant raises a pending request and a
 * resolve approves it ("approved").
 *
 * Then the flood: a second session of each manager holds FLOOD idle
 * connections to its proxy, and the rounds run again in the first session.
 * An upstream in this process counts every connection that reaches it: the
 * count must equal the connections that were admitted before a revoke, so
 * that none was admitted after one returned.
 *
 * usage: grant-revoke POLICY_DIR MANIFEST WORKDIR ITERATIONS FLOOD */
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "shinken/manager.h"

static double now_us(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static __attribute__((noreturn)) void die(const char *what, const char *why)
{
  fprintf(stderr, "grant-revoke: %s: %s\n", what, why);
  exit(1);
}

/* ---- the upstream: accepts, counts, closes ---- */

static atomic_int upstream_accepted;

static void *upstream(void *arg)
{
  int lfd = *(int *)arg;
  for (;;) {
    int c = accept(lfd, NULL, NULL);
    if (c < 0)
      continue;
    atomic_fetch_add(&upstream_accepted, 1);
    close(c);
  }
  return NULL;
}

static int start_upstream(void)
{
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  socklen_t sl = sizeof sa;
  if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) || listen(fd, 512) ||
      getsockname(fd, (struct sockaddr *)&sa, &sl))
    die("upstream", strerror(errno));
  static int lfd;
  lfd = fd;
  pthread_t t;
  if (pthread_create(&t, NULL, upstream, &lfd))
    die("upstream", "no thread");
  pthread_detach(t);
  return ntohs(sa.sin_port);
}

/* ---- clients ---- */

static int unix_connect(const char *path)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
    die(path, strerror(errno));
  return fd;
}

/* CONNECT host:port through the session's HTTP proxy; returns the status. */
static int try_connect(const char *dir, const char *host, int port)
{
  char path[4200], req[512], buf[512];
  snprintf(path, sizeof path, "%s/http.sock", dir);
  int fd = unix_connect(path);
  int n = snprintf(req, sizeof req, "CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n", host, port, host, port);
  if (write(fd, req, (size_t)n) != n)
    die("proxy", strerror(errno));
  ssize_t r = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (r < 12)
    return 0;
  buf[r] = '\0';
  return atoi(buf + 9);
}

/* One call: sends `req` (stolen) and returns the answer when it has "ok":
 * true or says "ask"; exits otherwise. */
static json_t *call(int fd, json_t *req, const char *what)
{
  char *text = json_dumps(req, JSON_COMPACT), *answer = NULL;
  json_decref(req);
  shk_error err;
  if (!text || shk_manager_rpc(fd, text, &answer, &err))
    die(what, text ? err.message : "out of memory");
  free(text);
  json_t *ans = json_loads(answer, 0, NULL);
  free(answer);
  const char *decision = json_string_value(json_object_get(ans, "decision"));
  if (!json_is_true(json_object_get(ans, "ok")) && !(decision && !strcmp(decision, "ask"))) {
    char *dump = json_dumps(ans, 0);
    die(what, dump ? dump : "?");
  }
  return ans;
}

/* Grants `host`, approving the pending request when the policy asks. */
static void grant(int fd, const char *sid, const char *host, char handle[80])
{
  json_t *ans = call(fd, json_pack("{s:s, s:s, s:s, s:{s:[s]}}", "op", "grant", "session", sid, "class",
                                   "net.egress", "scope", "domains", host), "grant");
  if (!json_is_true(json_object_get(ans, "ok"))) {
    json_t *res = json_pack("{s:s, s:s, s:s}", "op", "resolve", "pending",
                            json_string_value(json_object_get(ans, "pending")), "resolution", "approve");
    json_decref(ans);
    ans = call(fd, res, "resolve");
  }
  const char *h = json_string_value(json_object_get(ans, "handle"));
  if (!h)
    die("grant", "no handle in the answer");
  snprintf(handle, 80, "%s", h);
  json_decref(ans);
}

/* ---- one manager under test ---- */

typedef struct side {
  const char *name;
  shk_manager *m;
  int fd;                /* the control connection */
  char sid[80], dir[4096];
  char flood_sid[80], flood_dir[4096];
  double *grant_us, *approved_us, *revoke_us, *refused_us, *flood_refused_us;
  int admitted, leaks, misses;
} side;

static void open_session(side *s, const char *proxy_cfg, char *sid, char *dir)
{
  json_t *a = call(s->fd, json_pack("{s:s, s:b, s:s}", "op", "open_session", "egress", 1, "proxy_config", proxy_cfg),
                   "open_session");
  snprintf(sid, 80, "%s", json_string_value(json_object_get(a, "session")));
  snprintf(dir, 4096, "%s", json_string_value(json_object_get(a, "egress_dir")));
  json_decref(a);
}

static void side_start(side *s, const char *name, const shk_manager_opts *o, const char *work, const char *proxy_cfg,
                       const char *flood_cfg, int n)
{
  shk_error err;
  char sock[4200];
  s->name = name;
  if (shk_manager_new(o, &s->m, &err))
    die(name, err.message);
  snprintf(sock, sizeof sock, "%s/%s.sock", work, name);
  if (shk_manager_serve(s->m, sock, &err))
    die(name, err.message);
  s->fd = unix_connect(sock);
  open_session(s, proxy_cfg, s->sid, s->dir);
  open_session(s, flood_cfg, s->flood_sid, s->flood_dir);
  s->grant_us = calloc((size_t)n, sizeof(double));
  s->approved_us = calloc((size_t)n, sizeof(double));
  s->revoke_us = calloc((size_t)n, sizeof(double));
  s->refused_us = calloc((size_t)n, sizeof(double));
  s->flood_refused_us = calloc((size_t)n, sizeof(double));
}

/* One round; `ask` uses the Ask-tier name. Records the times in slot i. */
static void round_of(side *s, int i, bool ask, bool flood, int port)
{
  char handle[80];
  const char *host = ask ? "ask.test" : "api.test";
  double t0 = now_us();
  grant(s->fd, s->sid, host, handle);
  (ask ? s->approved_us : s->grant_us)[i] = now_us() - t0;
  int before = atomic_load(&upstream_accepted);
  if (try_connect(s->dir, host, port) == 200)
    s->admitted++;
  else
    s->misses++;
  /* The upstream counts the connection once its accept ran. */
  for (int k = 0; k < 5000 && atomic_load(&upstream_accepted) == before; k++)
    usleep(100);
  t0 = now_us();
  json_decref(call(s->fd, json_pack("{s:s, s:s}", "op", "revoke", "handle", handle), "revoke"));
  double answered = now_us() - t0;
  int returned = atomic_load(&upstream_accepted);
  int st = try_connect(s->dir, host, port);
  double refused = now_us() - t0;
  if (st != 403 || atomic_load(&upstream_accepted) != returned)
    s->leaks++;
  if (ask)
    return;
  if (flood) {
    s->flood_refused_us[i] = refused;
  } else {
    s->revoke_us[i] = answered;
    s->refused_us[i] = refused;
  }
}

static int cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double pct(double *v, int n, int p)
{
  qsort(v, (size_t)n, sizeof *v, cmp);
  return v[(n * p) / 100 < n ? (n * p) / 100 : n - 1];
}

static void row(const char *what, double *on, double *off, int n)
{
  double a50 = pct(on, n, 50), a99 = pct(on, n, 99), b50 = pct(off, n, 50), b99 = pct(off, n, 99);
  printf("%-22s p50 %8.1f  p99 %8.1f  | p50 %8.1f  p99 %8.1f  | %5.2fx %5.2fx\n", what, a50, a99, b50, b99,
         a50 / b50, a99 / b99);
}

int main(int argc, char **argv)
{
  if (argc != 6) {
    fprintf(stderr, "usage: grant-revoke POLICY_DIR MANIFEST WORKDIR ITERATIONS FLOOD\n");
    return 1;
  }
  const char *policy_dir = argv[1], *manifest = argv[2], *work = argv[3];
  int n = atoi(argv[4]), flood = atoi(argv[5]);
  if (n <= 0 || flood < 0)
    return 1;
  struct rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur != RLIM_INFINITY && (rlim_t)flood * 4 + 256 > rl.rlim_cur)
    die("flood", "the descriptor limit is too low for it (both managers' proxies hold each connection too)");
  int port = start_upstream();
  char proxy_cfg[4200], db[4200];
  snprintf(proxy_cfg, sizeof proxy_cfg, "%s/proxy.json", work);
  FILE *f = fopen(proxy_cfg, "w");
  if (!f)
    die(proxy_cfg, strerror(errno));
  fputs("{\"allow_private_cidrs\":[\"127.0.0.1/32\"],\"hosts\":{\"api.test\":[\"127.0.0.1\"],"
        "\"ask.test\":[\"127.0.0.1\"]}}", f);
  fclose(f);
  /* The flooding session's proxy has its own limits lifted, so that the
   * flood reaches the manager (the proxy's limits are bench/egress's). */
  char flood_cfg[4200];
  snprintf(flood_cfg, sizeof flood_cfg, "%s/flood.json", work);
  if (!(f = fopen(flood_cfg, "w")))
    die(flood_cfg, strerror(errno));
  fputs("{\"limits\":{\"connections\":1000000,\"setup\":1000000,\"fd_reserve\":0,"
        "\"idle_timeout_ms\":600000,\"request_timeout_ms\":600000}}", f);
  fclose(f);
  snprintf(db, sizeof db, "%s/audit/audit.db", work);
  shk_manager_opts on = { .policy_dir = policy_dir, .manifest = manifest,
                          .audit_db = db };
  shk_manager_opts off = on;
  off.audit_db = NULL;
  side sides[2] = { 0 };
  side_start(&sides[0], "audit-on", &on, work, proxy_cfg, flood_cfg, n);
  side_start(&sides[1], "audit-off", &off, work, proxy_cfg, flood_cfg, n);
  /* Alternating, so that both sides see the same machine. */
  for (int i = 0; i < n; i++)
    for (int k = 0; k < 2; k++) {
      round_of(&sides[k], i, false, false, port);
      round_of(&sides[k], i, true, false, port);
    }
  /* The flood: each manager's second session holds idle connections. */
  int *held = calloc((size_t)flood * 2 + 1, sizeof *held);
  for (int k = 0; k < 2; k++) {
    char path[4200];
    snprintf(path, sizeof path, "%s/http.sock", sides[k].flood_dir);
    for (int i = 0; i < flood; i++)
      held[k * flood + i] = unix_connect(path);
  }
  usleep(500 * 1000); /* let the proxies accept them */
  for (int i = 0; i < n; i++)
    for (int k = 0; k < 2; k++)
      round_of(&sides[k], i, false, true, port);
  usleep(200 * 1000);
  int admitted = sides[0].admitted + sides[1].admitted, leaks = sides[0].leaks + sides[1].leaks;
  int misses = sides[0].misses + sides[1].misses, seen = atomic_load(&upstream_accepted);

  printf("iterations %d per side, flood %d idle connections in another session of the same manager\n", n, flood);
  printf("%-22s %-29s | %-29s | on/off\n", "(microseconds)", "audit log on (fsync)", "audit log off");
  row("grant", sides[0].grant_us, sides[1].grant_us, n);
  row("approved", sides[0].approved_us, sides[1].approved_us, n);
  row("revoke", sides[0].revoke_us, sides[1].revoke_us, n);
  row("revoke -> refusal", sides[0].refused_us, sides[1].refused_us, n);
  row("  under the flood", sides[0].flood_refused_us, sides[1].flood_refused_us, n);
  for (int k = 0; k < 2; k++)
    printf("%s: revoke -> refusal under the flood / without it: p50 %.2fx, p99 %.2fx\n", sides[k].name,
           pct(sides[k].flood_refused_us, n, 50) / pct(sides[k].refused_us, n, 50),
           pct(sides[k].flood_refused_us, n, 99) / pct(sides[k].refused_us, n, 99));
  printf("(grant: an Auto-tier grant, one call; approved: an Ask-tier grant, the grant call\n"
         " that raises a pending request and the resolve that approves it; revoke: the revoke\n"
         " call until the manager answered; revoke -> refusal: until the next connection\n"
         " through the proxy was refused)\n");
  printf("connections admitted after a revoke returned: %d (must be 0)\n", leaks);
  printf("granted connections refused: %d (must be 0)\n", misses);
  printf("connections the upstream saw: %d, admitted before a revoke: %d (must be equal)\n", seen, admitted);
  for (int i = 0; i < flood * 2; i++)
    close(held[i]);
  free(held);
  for (int k = 0; k < 2; k++) {
    close(sides[k].fd);
    shk_manager_free(sides[k].m);
    free(sides[k].grant_us);
    free(sides[k].approved_us);
    free(sides[k].revoke_us);
    free(sides[k].refused_us);
    free(sides[k].flood_refused_us);
  }
  return leaks || misses || seen != admitted ? 1 : 0;
}
