/* SPDX-License-Identifier: Apache-2.0 */
/* cgroup-kill [nofreezer]: a session cgroup in which processes keep forking
 * (new sessions, orphans reparented away from the launcher) is emptied and
 * removed by shk_sandbox_cgroup_destroy, judged from outside: every process
 * that ever ran in it is gone and its directories no longer exist. With
 * "nofreezer" the cgroup v1 freezer is not used, so the kill goes process by
 * process. Needs root; exit 77 without a usable cgroup. */
#include "shinken/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void pause_ms(long ms)
{
  struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
  nanosleep(&ts, NULL);
}

/* Each process records its pid, then keeps forking (pids.max refuses most
 * forks); every child starts a session of its own. */
static _Noreturn void storm(int out)
{
  for (;;) {
    pid_t me = getpid();
    if (write(out, &me, sizeof me) != sizeof me)
      _exit(1);
    for (;;) {
      pid_t k = fork();
      if (k == 0) {
        setsid();
        break;
      }
      pause_ms(k < 0 ? 5 : 1);
    }
  }
}

static bool dead(pid_t pid)
{
  char path[64], *line = NULL;
  size_t n = 0;
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "re");
  if (!f)
    return true;
  bool zombie = false;
  while (getline(&line, &n, f) > 0)
    if (!strncmp(line, "State:", 6))
      zombie = strchr(line, 'Z') != NULL;
  free(line);
  fclose(f);
  return zombie;
}

/* After a failure: ends what destroy left, so the test leaves nothing. */
static void clean_up(char **dirs, size_t n)
{
  for (int tries = 0; tries < 500; tries++) {
    bool any = false;
    for (size_t i = 0; i < n; i++) {
      char path[4200];
      snprintf(path, sizeof path, "%s/cgroup.procs", dirs[i]);
      FILE *f = fopen(path, "re");
      int pid;
      while (f && fscanf(f, "%d", &pid) == 1) {
        kill(pid, SIGKILL);
        any = true;
      }
      if (f)
        fclose(f);
    }
    if (!any)
      break;
    pause_ms(10);
  }
  for (size_t i = 0; i < n; i++)
    rmdir(dirs[i]);
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(int argc, char **argv)
{
  if (geteuid() != 0) {
    fprintf(stderr, "SKIP: needs root\n");
    return 77;
  }
  shk_sandbox_env env;
  shk_error e;
  if (shk_sandbox_env_from_process(&env, &e) < 0) {
    fprintf(stderr, "FAIL: %s\n", e.message);
    return 1;
  }
  shk_sandbox_features f;
  if (shk_sandbox_features_detect(&f, &env, SHK_DETECT_CGROUP) < 0) {
    fprintf(stderr, "FAIL: out of memory\n");
    return 1;
  }
  if (argc > 1 && !strcmp(argv[1], "nofreezer")) {
    free(f.cgroup_v1_parent[SHK_CG1_FREEZER]);
    f.cgroup_v1_parent[SHK_CG1_FREEZER] = NULL;
  }
  unsigned need = SHK_CG_MEMORY | SHK_CG_PIDS;
  if (!(f.cgroup_parent || f.cgroup_v1) || (f.cgroup_controllers & need) != need) {
    fprintf(stderr, "SKIP: no usable cgroup: %s\n", f.cgroup_detail);
    return 77;
  }
  shk_sandbox_opts o;
  shk_sandbox_opts_init(&o);
  o.pids = 48;
  o.mem = 256 << 20;
  shk_sandbox_cgroup cg = { NULL, -1 };
  if (shk_sandbox_cgroup_create(&f, &o, &cg, &e) < 0) {
    fprintf(stderr, "FAIL: creating the cgroup: %s\n", e.message);
    return 1;
  }
  /* The directories, to look for after destroy. */
  char *dirs[SHK_CG1_N + 1];
  size_t ndirs = 0;
  for (int i = 0; i < SHK_CG1_N; i++)
    if (cg.v1[i])
      dirs[ndirs++] = strdup(cg.v1[i]);
  if (!ndirs)
    dirs[ndirs++] = strdup(cg.path);
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0)
    return 1;
  pid_t child = fork();
  if (child < 0)
    return 1;
  if (child == 0) {
    close(p[0]);
    if (shk_sandbox_cgroup_join(&cg) < 0)
      _exit(1);
    storm(p[1]);
  }
  close(p[1]);
  pause_ms(500);
  shk_sandbox_cgroup_destroy(&cg);
  /* The first process is this one's to reap: gone only if destroy killed it. */
  bool reaped = false;
  for (int tries = 0; tries < 200 && !reaped; tries++) {
    reaped = waitpid(child, NULL, WNOHANG) == child;
    if (!reaped)
      pause_ms(10);
  }

  pid_t pids[4096];
  size_t n = 0;
  fcntl(p[0], F_SETFL, O_NONBLOCK);
  while (n < 4096 && read(p[0], &pids[n], sizeof pids[n]) == sizeof pids[n])
    n++;
  if (n < 10) {
    fprintf(stderr, "FAIL: the storm ran only %zu processes, so this test proves nothing\n", n);
    clean_up(dirs, ndirs);
    return 1;
  }
  int bad = 0;
  /* Orphans are reaped by whoever adopted them: give that a moment. */
  for (int tries = 0; tries < 100; tries++) {
    bad = 0;
    for (size_t i = 0; i < n; i++)
      bad += !dead(pids[i]);
    if (!bad)
      break;
    pause_ms(20);
  }
  if (bad || !reaped) {
    fprintf(stderr, "FAIL: %d of the %zu processes outlived destroy\n", bad ? bad : 1, n);
    clean_up(dirs, ndirs);
    return 1;
  }
  for (size_t i = 0; i < ndirs; i++) {
    struct stat st;
    if (stat(dirs[i], &st) == 0 || errno != ENOENT) {
      fprintf(stderr, "FAIL: %s is still there\n", dirs[i]);
      clean_up(dirs, ndirs);
      return 1;
    }
    free(dirs[i]);
  }
  printf("ok: %zu processes (%s), all killed; %zu cgroup directories removed\n", n,
         f.cgroup_v1 ? "cgroup v1" : "cgroup v2", ndirs);
  shk_sandbox_opts_free(&o);
  shk_sandbox_features_free(&f);
  shk_sandbox_env_free(&env);
  return 0;
}
