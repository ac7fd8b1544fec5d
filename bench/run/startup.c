/* SPDX-License-Identifier: Apache-2.0 */
/* The start-up benchmark's driver: times commands in alternation, each
 * started directly with fork and exec (no shell or wrapper process, whose
 * own start would dilute the ratio), optionally as another user, and prints
 * the wall time, CPU time and peak memory of each and their ratios to the
 * last command, the peer.
 *
 * usage: startup RUNS UID GID NAME CMD ARGS... [::: NAME CMD ARGS...]... ::: PEER ARGS...
 * UID and GID are -1 to run as the caller. Each command but the peer is
 * named by the word before it (the peer is "bwrap"). Rounds rotate the
 * order, so a drift in the machine's load hits all of them alike; the
 * median is the headline, the quartiles and minimum show the spread.
 * Exits 1 if a command fails. */
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

#define MAXCMD 8

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

/* The value at quantile Q of the N sorted values V. */
static double at(const double *v, int n, double q)
{
  return v[(int)(q * (n - 1) + 0.5)];
}

int main(int argc, char **argv)
{
  if (argc < 8) {
    fputs("usage: startup RUNS UID GID NAME CMD ARGS... [::: NAME CMD...]... ::: PEER ARGS...\n",
          stderr);
    return 2;
  }
  int n = atoi(argv[1]);
  long uid = atol(argv[2]), gid = atol(argv[3]);
  char **cmd[MAXCMD];
  const char *name[MAXCMD];
  int nc = 0;
  char **start = argv + 4;
  for (int i = 4; i <= argc; i++) {
    if (i < argc && strcmp(argv[i], ":::"))
      continue;
    if (nc == MAXCMD) {
      fputs("startup: too many commands\n", stderr);
      return 2;
    }
    if (i < argc)
      argv[i] = NULL;
    cmd[nc] = start;
    name[nc] = "bwrap";
    nc++;
    start = argv + i + 1;
  }
  /* Every command but the last carries its name in front. */
  for (int c = 0; c < nc - 1; c++) {
    name[c] = cmd[c][0];
    cmd[c]++;
  }
  if (n < 1 || nc < 2) {
    fputs("startup: need RUNS >= 1 and at least two commands separated by :::\n", stderr);
    return 2;
  }
  for (int c = 0; c < nc; c++)
    if (!cmd[c][0]) {
      fputs("startup: an empty command\n", stderr);
      return 2;
    }
  int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (devnull < 0) {
    perror("/dev/null");
    return 1;
  }
  double *wall[MAXCMD], *cpu[MAXCMD], *rss[MAXCMD];
  for (int c = 0; c < nc; c++) {
    wall[c] = calloc((size_t)n, sizeof(double));
    cpu[c] = calloc((size_t)n, sizeof(double));
    rss[c] = calloc((size_t)n, sizeof(double));
  }
  for (int r = -10; r < n; r++)
    for (int k = 0; k < nc; k++) {
      int c = (k + (r + 10) % nc) % nc; /* rotate which goes first */
      sample s = run(cmd[c], uid, gid, devnull);
      if (r >= 0) {
        wall[c][r] = s.wall;
        cpu[c][r] = s.cpu;
        rss[c][r] = (double)s.rss;
      }
    }
  for (int c = 0; c < nc; c++) {
    qsort(wall[c], (size_t)n, sizeof(double), cmp_double);
    qsort(cpu[c], (size_t)n, sizeof(double), cmp_double);
    qsort(rss[c], (size_t)n, sizeof(double), cmp_double);
  }
  int p = nc - 1;
  printf("%-16s %26s %26s %26s %9s %11s\n", "", "wall ms: p25 median p75", "min",
         "ratio p25 median p75", "cpu ms", "peak KiB");
  for (int c = 0; c < nc; c++)
    printf("%-16s %8.2f %8.2f %8.2f %17.2f %8.2fx %6.2fx %6.2fx %9.2f %11.0f\n", name[c],
           at(wall[c], n, .25), at(wall[c], n, .5), at(wall[c], n, .75), wall[c][0],
           at(wall[c], n, .25) / at(wall[p], n, .25), at(wall[c], n, .5) / at(wall[p], n, .5),
           at(wall[c], n, .75) / at(wall[p], n, .75), at(cpu[c], n, .5), at(rss[c], n, .5));
  for (int c = 0; c < p; c++) {
    double ratio = at(wall[c], n, .5) / at(wall[p], n, .5);
    printf("%s: %.2fx bwrap's median wall time (target <= 1.25x): %s\n", name[c], ratio,
           ratio <= 1.25 ? "met" : "NOT met");
  }
  return 0;
}
