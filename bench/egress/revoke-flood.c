/* SPDX-License-Identifier: Apache-2.0 */
/* Revoke under flood: how long from a revoke to the refusal of the next
 * connection, in one session, while another session of the same process
 * is flooded with idle connections; and whether anything is admitted after
 * a revoke has returned.
 *
 * Two egress sessions in this process, as a manager hosts them, each with
 * a decision hook that reads a grant's live bit (an atomic, as the
 * manager's handles are). A loopback upstream is pinned by name. Each
 * iteration, in session B: grant (a fresh tag), open a CONNECT tunnel
 * through it, then revoke: flip the bit, call close_tunnels, and at once
 * CONNECT again. Measured from the flip: close_tunnels returning, the
 * refusal of the next connection arriving, the revoked tunnel's close
 * arriving. The same loop runs three times in one run, side by side:
 *   no flood           session A idle (the peer)
 *   flood, held        A holds FLOOD idle connections (its limits raised
 *                      so that it keeps them all) and a churn thread opens
 *                      and closes more without pause
 *   flood, refused     A at its default limits: the same flood, refused at
 *                      accept past its setup limit, and the same churn
 * usage: revoke-flood [ITERATIONS [FLOOD]]   (defaults 1000, 3000) */
#include <stdbool.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "shinken/egress.h"

static void die(const char *what)
{
  perror(what);
  exit(1);
}

static double now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- the upstream: accepts, and keeps each connection until it closes */

static int up_fd;
static uint16_t up_port;

static void *upstream_main(void *arg)
{
  for (;;) {
    int c = accept4(up_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) {
      if (errno == EINVAL || errno == EBADF)
        return NULL;
      struct pollfd p = { up_fd, POLLIN, 0 };
      poll(&p, 1, 100);
      continue;
    }
    /* Closed by the peer's close: the kernel drains it; the bench only
     * needs the connection to be accepted. Kept in a small ring. */
    static int ring[4096];
    static unsigned next;
    if (ring[next % 4096] > 0)
      close(ring[next % 4096]);
    ring[next++ % 4096] = c;
  }
}

/* ---- the hook: one grant per session at a time, its tag the live bit
 * (0: none live), read with no lock, as the manager reads a handle's */

struct side {
  const char *name;
  atomic_ulong live_tag;
};

static struct side side_a = { "a" }, side_b = { "b" };

static shk_egress_verdict hook(void *data, const shk_egress_request *req, uint64_t *tag,
                               const char **rule)
{
  struct side *sd = data;
  unsigned long t = atomic_load_explicit(&sd->live_tag, memory_order_acquire);
  if (!t || strcmp(req->host, "up.test"))
    return SHK_EGRESS_NONE;
  *tag = t;
  *rule = "bench-grant";
  return SHK_EGRESS_ALLOW;
}

/* ---- clients */

static int unix_connect(const char *dir, const char *name)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  snprintf(sun.sun_path, sizeof sun.sun_path, "%s/%s", dir, name);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  if (connect(fd, (struct sockaddr *)&sun, sizeof sun) < 0) {
    int e = -errno;
    close(fd);
    return e;
  }
  return fd;
}

/* CONNECT up.test through DIR's http.sock; the status, and the socket in
 * *FD when it is 200. */
static int connect_status(const char *dir, int *fd)
{
  int c = unix_connect(dir, "http.sock");
  if (c < 0)
    die("connect to session B");
  char req[128], buf[4096];
  int n = snprintf(req, sizeof req, "CONNECT up.test:%u HTTP/1.1\r\nHost: up.test:%u\r\n\r\n",
                   up_port, up_port);
  if (write(c, req, (size_t)n) != n)
    die("write");
  size_t len = 0;
  while (len < sizeof buf - 1) {
    ssize_t r = read(c, buf + len, sizeof buf - 1 - len);
    if (r <= 0)
      break;
    len += (size_t)r;
    buf[len] = '\0';
    if (strstr(buf, "\r\n\r\n"))
      break;
  }
  buf[len] = '\0';
  int status = len > 12 ? atoi(buf + 9) : 0;
  if (status == 200 && fd)
    *fd = c;
  else
    close(c);
  return status;
}

/* ---- the flood on session A */

struct flood {
  const char *dir;
  int n;
  atomic_bool stop;
  atomic_long opened, churned;
  int *fds;
  pthread_t th;
};

/* A blocking connect: when the proxy falls behind and its backlog is
 * full, the flood waits, as a real client would. */
static int flood_open(const char *dir)
{
  return unix_connect(dir, "http.sock");
}

static void *flood_main(void *arg)
{
  struct flood *f = arg;
  for (int i = 0; i < f->n; i++) {
    f->fds[i] = flood_open(f->dir);
    if (f->fds[i] >= 0)
      atomic_fetch_add(&f->opened, 1);
  }
  /* Churn: the oldest goes, a new one comes, without pause. */
  for (long i = 0; !atomic_load(&f->stop); i++) {
    int k = (int)(i % f->n);
    if (f->fds[k] >= 0)
      close(f->fds[k]);
    f->fds[k] = flood_open(f->dir);
    atomic_fetch_add(&f->churned, 1);
  }
  return NULL;
}

/* ---- measuring */

static int cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

struct stats {
  double p50, p99, max;
};

static struct stats stats_of(double *v, int n)
{
  qsort(v, (size_t)n, sizeof *v, cmp);
  return (struct stats){ v[n / 2], v[(n * 99) / 100], v[n - 1] };
}

struct result {
  struct stats call, refusal, closed;
  int admitted, miscounted, failed_grants;
};

static struct result measure(shk_egress_session *b, int iters)
{
  const char *dir = shk_egress_session_dir(b);
  double *call = calloc((size_t)iters, sizeof *call), *refusal = calloc((size_t)iters, sizeof *refusal),
         *closed = calloc((size_t)iters, sizeof *closed);
  if (!call || !refusal || !closed)
    die("calloc");
  struct result r = { 0 };
  int done = 0;
  for (int i = 0; i < iters; i++) {
    unsigned long tag = 1 + (unsigned long)i;
    atomic_store_explicit(&side_b.live_tag, tag, memory_order_release);
    int tunnel = -1;
    if (connect_status(dir, &tunnel) != 200) {
      r.failed_grants++;
      atomic_store(&side_b.live_tag, 0);
      continue;
    }
    double t0 = now_ms();
    atomic_store_explicit(&side_b.live_tag, 0, memory_order_release);
    int n = shk_egress_session_close_tunnels(b, tag);
    double t1 = now_ms();
    int status = connect_status(dir, NULL);
    double t2 = now_ms();
    r.admitted += status == 200;
    r.miscounted += n != 1;
    struct pollfd p = { tunnel, POLLIN, 0 };
    char c;
    while (poll(&p, 1, 5000) == 1 && read(tunnel, &c, 1) > 0)
      ;
    double t3 = now_ms();
    close(tunnel);
    call[done] = (t1 - t0) * 1000; /* microseconds */
    refusal[done] = t2 - t0;
    closed[done] = t3 - t0;
    done++;
  }
  if (done) {
    r.call = stats_of(call, done);
    r.refusal = stats_of(refusal, done);
    r.closed = stats_of(closed, done);
  }
  free(call);
  free(refusal);
  free(closed);
  return r;
}

static shk_egress_session *open_session(struct side *sd, const char *cfg_path)
{
  shk_egress_session_opts o = { .name = sd->name, .config_path = cfg_path,
                                .hook = hook, .hook_data = sd };
  shk_egress_session *s;
  shk_error err;
  if (shk_egress_session_open(&o, &s, &err) < 0) {
    fprintf(stderr, "session %s: %s\n", sd->name, err.message);
    exit(1);
  }
  return s;
}

static void write_config(char *path, const char *limits)
{
  int fd = mkstemp(path);
  if (fd < 0)
    die("mkstemp");
  char text[512];
  int n = snprintf(text, sizeof text,
                   "{\"allow_private_cidrs\": [\"127.0.0.1/32\"], \"hosts\": {\"up.test\": "
                   "[\"127.0.0.1\"]}%s%s}",
                   limits ? ", \"limits\": " : "", limits ? limits : "");
  if (write(fd, text, (size_t)n) != n)
    die("write config");
  close(fd);
}

static void row(const char *what, const struct result *r, long flood_opened, long churned)
{
  printf("%-34s revoke->refusal p50 %6.3f p99 %6.3f max %7.3f ms | close_tunnels p50 %5.1f "
         "p99 %6.1f us | tunnel closed p99 %6.3f ms | admitted after revoke: %d",
         what, r->refusal.p50, r->refusal.p99, r->refusal.max, r->call.p50, r->call.p99,
         r->closed.p99, r->admitted);
  if (flood_opened >= 0)
    printf(" | flood: %ld open, %ld churned", flood_opened, churned);
  if (r->failed_grants)
    printf(" | %d grants failed", r->failed_grants);
  if (r->miscounted)
    printf(" | close_tunnels miscounted %d times", r->miscounted);
  printf("\n");
}

int main(int argc, char **argv)
{
  int iters = argc > 1 ? atoi(argv[1]) : 1000;
  int flood_n = argc > 2 ? atoi(argv[2]) : 3000;
  if (iters <= 0 || flood_n <= 0 || flood_n > 100000) {
    fprintf(stderr, "usage: revoke-flood [ITERATIONS [FLOOD]]\n");
    return 2;
  }
  up_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  socklen_t sl = sizeof sin;
  if (up_fd < 0 || bind(up_fd, (struct sockaddr *)&sin, sizeof sin) < 0 || listen(up_fd, 1024) < 0 ||
      getsockname(up_fd, (struct sockaddr *)&sin, &sl) < 0)
    die("upstream");
  up_port = ntohs(sin.sin_port);
  pthread_t up;
  if (pthread_create(&up, NULL, upstream_main, NULL))
    die("pthread_create");

  char cfg_b[] = "/tmp/shinken-revoke-b-XXXXXX", cfg_held[] = "/tmp/shinken-revoke-a-XXXXXX",
       cfg_def[] = "/tmp/shinken-revoke-d-XXXXXX";
  write_config(cfg_b, NULL);
  char held_limits[200];
  snprintf(held_limits, sizeof held_limits,
           "{\"connections\": %d, \"setup\": %d, \"idle_timeout_ms\": 3600000, "
           "\"request_timeout_ms\": 3600000}",
           4 * flood_n, 2 * flood_n);
  write_config(cfg_held, held_limits);
  write_config(cfg_def, NULL);
  shk_egress_session *b = open_session(&side_b, cfg_b);
  printf("revoke under flood: %d iterations per row, a flood of %d idle connections on another "
         "session of the same process\n",
         iters, flood_n);

  /* The peer: the same loop with the other session idle. */
  shk_egress_session *a = open_session(&side_a, cfg_def);
  struct result base = measure(b, iters);
  row("no flood", &base, -1, 0);
  shk_egress_session_close(a);

  struct result rs[2];
  const char *names[2] = { "flood, held by the other session", "flood, refused by its limits" };
  for (int k = 0; k < 2; k++) {
    a = open_session(&side_a, k == 0 ? cfg_held : cfg_def);
    struct flood f = { .dir = shk_egress_session_dir(a), .n = flood_n };
    f.fds = malloc((size_t)flood_n * sizeof *f.fds);
    if (!f.fds)
      die("malloc");
    for (int i = 0; i < flood_n; i++)
      f.fds[i] = -1;
    if (pthread_create(&f.th, NULL, flood_main, &f))
      die("pthread_create");
    /* Measure once the flood is in place. */
    while (atomic_load(&f.opened) < flood_n && atomic_load(&f.churned) == 0)
      usleep(10000);
    rs[k] = measure(b, iters);
    atomic_store(&f.stop, true);
    pthread_join(f.th, NULL);
    row(names[k], &rs[k], atomic_load(&f.opened), atomic_load(&f.churned));
    for (int i = 0; i < flood_n; i++)
      if (f.fds[i] >= 0)
        close(f.fds[i]);
    free(f.fds);
    shk_egress_session_close(a);
  }
  printf("p99 revoke->refusal, flood / no flood: %.2fx (held), %.2fx (refused); target p99 < 5 ms, "
         "0 admitted after a revoke returned\n",
         rs[0].refusal.p99 / base.refusal.p99, rs[1].refusal.p99 / base.refusal.p99);
  shk_egress_session_close(b);
  shutdown(up_fd, SHUT_RDWR);
  close(up_fd);
  unlink(cfg_b);
  unlink(cfg_held);
  unlink(cfg_def);
  int bad = base.admitted + rs[0].admitted + rs[1].admitted + base.miscounted + rs[0].miscounted +
            rs[1].miscounted;
  return bad ? 1 : 0;
}
