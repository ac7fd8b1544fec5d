/* The start-up benchmark's driver: times two commands in alternation, each
 * started directly with fork and exec (no shell or wrapper process, whose
 * own start would dilute the ratio), optionally as another user, and prints
 * the wall time, CPU time and peak memory of each and their ratios.
 *
 * usage: startup RUNS UID GID CMD1 ARGS... ::: CMD2 ARGS...
 * UID and GID are -1 to run as the caller. CMD1 is reported as "shinken
 * run", CMD2 as "bwrap". Rounds alternate the order, so a drift in the
 * machine's load hits both; the median is the headline, the minimum the
 * least disturbed run. Exits 1 if either command fails. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct sample {
  double wall, cpu; /* milliseconds */
  long rss;         /* KiB */
} sample;

static double now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static sample run(char **argv, long uid, long gid, int devnull)
{
  double t0 = now_ms();
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    exit(1);
  }
  if (pid == 0) {
    dup2(devnull, 1);
    dup2(devnull, 2);
    if (gid >= 0 && (setgroups(0, NULL) < 0 || setgid((gid_t)gid) < 0))
      _exit(126);
    if (uid >= 0 && setuid((uid_t)uid) < 0)
      _exit(126);
    execv(argv[0], argv);
    _exit(127);
  }
  int status;
  struct rusage ru;
  while (wait4(pid, &status, 0, &ru) < 0)
    if (errno != EINTR) {
      perror("wait4");
      exit(1);
    }
  sample s = { now_ms() - t0, 0, ru.ru_maxrss };
  s.cpu = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
          (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "startup: %s failed (status %d)\n", argv[0], status);
    exit(1);
  }
  return s;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
  if (argc < 7) {
    fputs("usage: startup RUNS UID GID CMD1 ARGS... ::: CMD2 ARGS...\n", stderr);
    return 2;
  }
  int n = atoi(argv[1]);
  long uid = atol(argv[2]), gid = atol(argv[3]);
  char **cmd[2] = { argv + 4, NULL };
  for (int i = 4; i < argc; i++)
    if (!strcmp(argv[i], ":::")) {
      argv[i] = NULL;
      cmd[1] = argv + i + 1;
    }
  if (n < 1 || !cmd[1] || !cmd[1][0]) {
    fputs("startup: need RUNS >= 1 and two commands separated by :::\n", stderr);
    return 2;
  }
  int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (devnull < 0) {
    perror("/dev/null");
    return 1;
  }
  double *wall[2], *cpu[2], *rss[2];
  for (int c = 0; c < 2; c++) {
    wall[c] = calloc((size_t)n, sizeof(double));
    cpu[c] = calloc((size_t)n, sizeof(double));
    rss[c] = calloc((size_t)n, sizeof(double));
  }
  for (int r = -10; r < n; r++)
    for (int k = 0; k < 2; k++) {
      int c = (r & 1) ? 1 - k : k; /* alternate which goes first */
      sample s = run(cmd[c], uid, gid, devnull);
      if (r >= 0) {
        wall[c][r] = s.wall;
        cpu[c][r] = s.cpu;
        rss[c][r] = (double)s.rss;
      }
    }
  double wmin[2], wmed[2], cmed[2], rmed[2];
  for (int c = 0; c < 2; c++) {
    wmed[c] = median(wall[c], n);
    wmin[c] = wall[c][0];
    cmed[c] = median(cpu[c], n);
    rmed[c] = median(rss[c], n);
  }
  double ratio = wmed[0] / wmed[1];
  printf("wall (median of %d runs each)  shinken run %.2f ms   bwrap %.2f ms\n", n, wmed[0], wmed[1]);
  printf("      minimum                   shinken run %.2f ms   bwrap %.2f ms   ratio %.2fx\n",
         wmin[0], wmin[1], wmin[0] / wmin[1]);
  printf("ratio %.2fx bwrap's wall time (target <= 1.50x): %s\n", ratio,
         ratio <= 1.5 ? "met" : "NOT met");
  printf("cpu (user+sys, median)        shinken run %.2f ms   bwrap %.2f ms   ratio %.2fx\n",
         cmed[0], cmed[1], cmed[0] / cmed[1]);
  printf("peak RSS (median)             shinken run %.0f KiB   bwrap %.0f KiB   ratio %.2fx\n",
         rmed[0], rmed[1], rmed[0] / rmed[1]);
  return 0;
}
