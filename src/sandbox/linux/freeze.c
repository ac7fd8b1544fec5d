/* SPDX-License-Identifier: Apache-2.0 */
/* Stopping and continuing every process of the sandboxes this process
 * launched: the freezer behind the Ask loop's take over and breakers when
 * the sandbox has no cgroup of its own.
 *
 * Which processes: every descendant of the calling process (the launcher)
 * that lives in another PID namespace than the caller's. bwrap gives each
 * sandbox a PID namespace of its own (--unshare-pid), whose init is a
 * child of bwrap, and an orphan inside is reparented to that init (or a
 * subreaper inside), so every process of the sandbox stays a descendant of
 * the launcher, and nothing outside the sandbox is in those namespaces:
 * bwrap itself, the launcher's own threads and a reviewer hook are in the
 * caller's namespace and are left alone.
 *
 * Why SIGSTOP is enough to hold them: it cannot be caught, blocked or
 * ignored, and a stopped process cannot fork; a process forked while the
 * scan runs is found by the next pass, and passes repeat until one finds
 * nothing left running. A process that the sandbox's own SIGCONT could
 * wake is stopped too, since every process of the sandbox is. Continuing
 * sends SIGCONT to the same set. A shell inside that reports its stopped
 * jobs will see them stop and continue (unlike the cgroup freezer, which
 * nothing inside can observe). Killing sends SIGKILL to the same set,
 * stopped or not, for a session the Ask loop ended while it was frozen. */
#include "sandbox-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"

/* Passes of the stopping scan before it gives up (each after the last
 * found a process still running). */
#define FREEZE_PASSES 200

typedef struct proc_ent {
  pid_t pid, ppid;
  char state;
  bool mine;  /* a descendant of the caller */
} proc_ent;

static int cmp_pid(const void *a, const void *b)
{
  pid_t x = ((const proc_ent *)a)->pid, y = ((const proc_ent *)b)->pid;
  return x < y ? -1 : x > y;
}

static proc_ent *find(proc_ent *v, size_t n, pid_t pid)
{
  proc_ent key = { .pid = pid };
  return bsearch(&key, v, n, sizeof *v, cmp_pid);
}

/* Every process of /proc with its parent and state, sorted by pid. */
static int scan(proc_ent **out, size_t *n_out)
{
  DIR *d = opendir("/proc");
  if (!d)
    return -errno;
  proc_ent *v = NULL;
  size_t n = 0, cap = 0;
  struct dirent *de;
  int r = 0;
  while ((de = readdir(d))) {
    char *end;
    long pid = strtol(de->d_name, &end, 10);
    if (*end || pid <= 0)
      continue;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      continue; /* gone meanwhile */
    ssize_t len = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (len <= 0)
      continue;
    buf[len] = '\0';
    /* "PID (COMM) STATE PPID ...": COMM may hold ')' itself. */
    char *rp = strrchr(buf, ')');
    char state;
    long ppid;
    if (!rp || sscanf(rp + 1, " %c %ld", &state, &ppid) != 2)
      continue;
    if (n == cap) {
      size_t nc = cap ? cap * 2 : 256;
      proc_ent *nv = realloc(v, nc * sizeof *nv);
      if (!nv) {
        r = -ENOMEM;
        break;
      }
      v = nv;
      cap = nc;
    }
    v[n++] = (proc_ent){ (pid_t)pid, (pid_t)ppid, state, false };
  }
  closedir(d);
  if (r) {
    free(v);
    return r;
  }
  qsort(v, n, sizeof *v, cmp_pid);
  *out = v;
  *n_out = n;
  return 0;
}

/* Marks the caller's descendants. */
static void mark_mine(proc_ent *v, size_t n)
{
  pid_t self = getpid();
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < n; i++) {
      if (v[i].mine)
        continue;
      proc_ent *p = v[i].ppid == self ? NULL : find(v, n, v[i].ppid);
      if (v[i].ppid == self || (p && p->mine)) {
        v[i].mine = true;
        changed = true;
      }
    }
  }
}

static bool other_pidns(pid_t pid, ino_t own)
{
  char path[64];
  struct stat st;
  snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)pid);
  return stat(path, &st) == 0 && st.st_ino != own;
}

int shk_sandbox_signal_launched(shk_sandbox_signal what, unsigned *count, shk_error *err)
{
  bool stop = what == SHK_SANDBOX_STOP;
  int sig = what == SHK_SANDBOX_KILL ? SIGKILL : SIGCONT;
  struct stat own;
  if (stat("/proc/self/ns/pid", &own) < 0)
    return shk__error_set(err, -errno, "the freezer cannot read its own PID namespace: %s", strerror(errno));
  unsigned signalled = 0;
  for (int pass = 0; pass < FREEZE_PASSES; pass++) {
    proc_ent *v = NULL;
    size_t n = 0;
    int r = scan(&v, &n);
    if (r)
      return shk__error_set(err, r, "the freezer cannot list the processes: %s", shk_strerror(r));
    mark_mine(v, n);
    bool running = false;
    for (size_t i = 0; i < n; i++) {
      if (!v[i].mine || v[i].state == 'Z' || v[i].state == 'X' || !other_pidns(v[i].pid, own.st_ino))
        continue;
      if (!stop) {
        if (kill(v[i].pid, sig) == 0)
          signalled++;
      } else if (v[i].state != 'T' && v[i].state != 't') {
        running = true;
        if (kill(v[i].pid, SIGSTOP) == 0)
          signalled++;
      }
    }
    free(v);
    if (!stop || !running) {
      if (count)
        *count = signalled;
      return 0;
    }
    /* The stop is delivered asynchronously: look again shortly. */
    nanosleep(&(struct timespec){ .tv_nsec = 2 * 1000000 }, NULL);
  }
  /* Something keeps running (a process that forks faster than it can be
   * stopped should not exist once its parent is stopped): fail, and let
   * the caller end the sandbox instead. */
  return shk__error_set(err, -EAGAIN, "the freezer could not stop every process of the sandbox");
}
