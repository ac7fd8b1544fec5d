/* Grant and revoke latency of the capability manager, end to end.
 *
 * Against a running `shinken daemon` (its socket in $SHINKEN_SOCKET), in a
 * loop: open nothing new, grant net.egress for one name over the control
 * socket (the grant latency: request sent -> handle received), check a
 * CONNECT through the session's proxy socket succeeds, then revoke and
 * immediately CONNECT again (the revoke latency: revoke sent -> the refusal
 * of that next connection received). Every connection after a revoke must
 * be refused; the count of ones that were not is printed and must be 0.
 *
 * usage: grant-revoke SESSION EGRESS_DIR HOST PORT ITERATIONS */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "shinken/daemon.h"

static double now_us(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* CONNECT host:port through the session's HTTP proxy; returns the status. */
static int try_connect(const char *dir, const char *host, const char *port)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s/http.sock", dir);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
    perror("connect to the session proxy");
    exit(1);
  }
  char req[512], buf[512];
  int n = snprintf(req, sizeof req, "CONNECT %s:%s HTTP/1.1\r\nHost: %s:%s\r\n\r\n", host, port, host, port);
  if (write(fd, req, (size_t)n) != n) {
    perror("write");
    exit(1);
  }
  ssize_t r = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (r < 12)
    return 0;
  buf[r] = '\0';
  return atoi(buf + 9);
}

static int cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void report(const char *what, double *v, int n)
{
  qsort(v, (size_t)n, sizeof *v, cmp);
  printf("%-8s p50 %8.1f us   p99 %8.1f us   max %8.1f us\n", what, v[n / 2], v[(n * 99) / 100], v[n - 1]);
}

int main(int argc, char **argv)
{
  if (argc != 6) {
    fprintf(stderr, "usage: grant-revoke SESSION EGRESS_DIR HOST PORT ITERATIONS\n");
    return 1;
  }
  const char *sid = argv[1], *dir = argv[2], *host = argv[3], *port = argv[4];
  int n = atoi(argv[5]);
  if (n <= 0)
    return 1;
  int fd = shk_manager_connect(shk_manager_socket_path());
  if (fd < 0) {
    fprintf(stderr, "no manager: %s\n", strerror(-fd));
    return 1;
  }
  double *grant = calloc((size_t)n, sizeof *grant), *revoke = calloc((size_t)n, sizeof *revoke);
  double *rpc = calloc((size_t)n, sizeof *rpc);
  int leaks = 0, misses = 0;
  char err[256];
  for (int i = 0; i < n; i++) {
    json_t *req = json_pack("{s:s, s:s, s:s, s:{s:[s]}, s:s}", "op", "grant", "session", sid, "class",
                            "net.egress", "scope", "domains", host, "approval", "approved");
    json_t *ans;
    double t0 = now_us();
    if (shk_manager_rpc(fd, req, &ans, err, sizeof err) || !json_is_true(json_object_get(ans, "ok"))) {
      fprintf(stderr, "grant failed: %s\n", ans ? json_dumps(ans, 0) : err);
      return 1;
    }
    grant[i] = now_us() - t0;
    char handle[80];
    snprintf(handle, sizeof handle, "%s", json_string_value(json_object_get(ans, "handle")));
    json_decref(ans);
    json_decref(req);
    if (try_connect(dir, host, port) != 200)
      misses++;
    req = json_pack("{s:s, s:s}", "op", "revoke", "handle", handle);
    t0 = now_us();
    if (shk_manager_rpc(fd, req, &ans, err, sizeof err) || !json_is_true(json_object_get(ans, "ok"))) {
      fprintf(stderr, "revoke failed\n");
      return 1;
    }
    rpc[i] = now_us() - t0;
    int st = try_connect(dir, host, port);
    revoke[i] = now_us() - t0;
    if (st != 403)
      leaks++;
    json_decref(ans);
    json_decref(req);
  }
  printf("iterations %d\n", n);
  report("grant", grant, n);
  report("revoke", rpc, n);
  report("refused", revoke, n);
  printf("(revoke: the revoke call until the manager answered; refused: until the next\n"
         " connection through the proxy was refused)\n");
  printf("connections admitted after revoke returned: %d (must be 0)\n", leaks);
  printf("granted connections refused: %d (must be 0)\n", misses);
  printf("revoke p99 vs a 120 s policy-cache window: %.0fx sooner\n",
         120e6 / revoke[(n * 99) / 100]);
  close(fd);
  free(grant);
  free(revoke);
  free(rpc);
  return leaks || misses ? 1 : 0;
}
