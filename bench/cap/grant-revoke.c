/* Grant and revoke latency of the capability manager, end to end.
 *
 * Against a running `shinken daemon` (its socket in $SHINKEN_SOCKET), in a
 * loop: open nothing new, grant net.egress for one name over the control
 * socket (the grant latency: request sent -> handle received), check a
 * CONNECT through the session's proxy socket succeeds, then revoke and
 * immediately CONNECT again (the revoke latency: revoke sent -> the refusal
 * of that next connection received). Every connection after a revoke must
 * be refused; the count of ones that were not is printed and must be 0.
 * HOST is at tier Auto in the bench's manifest, so a grant is one call.
 * Then the same loop for ASK_HOST, at tier Ask: the grant raises a pending
 * request and a resolve approves it ("approved": grant sent -> handle
 * received after both calls).
 *
 * usage: grant-revoke SESSION EGRESS_DIR HOST ASK_HOST PORT ITERATIONS */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* One call: sends `req` (stolen) and returns the answer when it has "ok":
 * true, or exits. `field` (may be NULL) must then be a string in it, else
 * the answer must say "ask". */
static json_t *call(int fd, json_t *req, const char *what)
{
  char *text = json_dumps(req, JSON_COMPACT), *answer = NULL;
  json_decref(req);
  shk_error err;
  if (!text || shk_manager_rpc(fd, text, &answer, &err)) {
    fprintf(stderr, "%s failed: %s\n", what, text ? err.message : "out of memory");
    exit(1);
  }
  free(text);
  json_t *ans = json_loads(answer, 0, NULL);
  free(answer);
  const char *decision = json_string_value(json_object_get(ans, "decision"));
  if (!json_is_true(json_object_get(ans, "ok")) && !(decision && !strcmp(decision, "ask"))) {
    char *dump = json_dumps(ans, 0);
    fprintf(stderr, "%s failed: %s\n", what, dump ? dump : "?");
    exit(1);
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
  if (!h) {
    fprintf(stderr, "grant: no handle in the answer\n");
    exit(1);
  }
  snprintf(handle, 80, "%s", h);
  json_decref(ans);
}

int main(int argc, char **argv)
{
  if (argc != 7) {
    fprintf(stderr, "usage: grant-revoke SESSION EGRESS_DIR HOST ASK_HOST PORT ITERATIONS\n");
    return 1;
  }
  const char *sid = argv[1], *dir = argv[2], *hosts[2] = { argv[3], argv[4] }, *port = argv[5];
  int n = atoi(argv[6]);
  if (n <= 0)
    return 1;
  int fd = shk_manager_connect(shk_manager_socket_path());
  if (fd < 0) {
    fprintf(stderr, "no manager: %s\n", strerror(-fd));
    return 1;
  }
  double *granted[2] = { calloc((size_t)n, sizeof(double)), calloc((size_t)n, sizeof(double)) };
  double *revoke = calloc((size_t)n, sizeof *revoke), *rpc = calloc((size_t)n, sizeof *rpc);
  int leaks = 0, misses = 0;
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < n; i++) {
      char handle[80];
      double t0 = now_us();
      grant(fd, sid, hosts[k], handle);
      granted[k][i] = now_us() - t0;
      if (try_connect(dir, hosts[k], port) != 200)
        misses++;
      t0 = now_us();
      json_decref(call(fd, json_pack("{s:s, s:s}", "op", "revoke", "handle", handle), "revoke"));
      /* The revoke figures are of the Auto loop: the same call either way. */
      if (k == 0)
        rpc[i] = now_us() - t0;
      int st = try_connect(dir, hosts[k], port);
      if (k == 0)
        revoke[i] = now_us() - t0;
      if (st != 403)
        leaks++;
    }
  printf("iterations %d\n", n);
  report("grant", granted[0], n);
  report("approved", granted[1], n);
  report("revoke", rpc, n);
  report("refused", revoke, n);
  printf("(grant: an Auto-tier grant, one call; approved: an Ask-tier grant, the grant call\n"
         " that raises a pending request and the resolve that approves it; revoke: the revoke\n"
         " call until the manager answered; refused: until the next connection through the\n"
         " proxy was refused)\n");
  printf("connections admitted after revoke returned: %d (must be 0)\n", leaks);
  printf("granted connections refused: %d (must be 0)\n", misses);
  printf("revoke p99 vs a 120 s policy-cache window: %.0fx sooner\n",
         120e6 / revoke[(n * 99) / 100]);
  close(fd);
  free(granted[0]);
  free(granted[1]);
  free(revoke);
  free(rpc);
  return leaks || misses ? 1 : 0;
}
