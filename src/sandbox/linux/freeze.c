/* SPDX-License-Identifier: Apache-2.0 */
/* Stopping and continuing every process of the sandboxes this process
 * launched: the freezer behind the Ask loop's take over and breakers.
 *
 * Where a sandbox has a session cgroup (the launcher attaches it here),
 * the cgroup freezer holds it: cgroup v1's freezer.state set to FROZEN, or
 * cgroup v2's cgroup.freeze set to 1, and the kernel says when every task
 * is frozen. Why that is preferred: a frozen task is held where it stands,
 * whatever it was doing, nothing inside can see it (no job-control
 * notice, no SIGCHLD to a parent) or undo it (no SIGCONT reaches it), and
 * a process forked meanwhile is born in the cgroup and frozen with it.
 * Without a cgroup (an unprivileged caller with no delegated hierarchy, a
 * host with no freezer) signals do it, as follows.
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
 * nothing left running. A process in uninterruptible sleep (state D) does
 * not stop until it leaves the kernel, and one may never leave it while
 * the others are stopped: a shell's vfork(2) parent waits, in D, for a
 * child that was stopped before it could exec. Such a process counts as
 * held once the SIGSTOP sent to it is pending: it runs no instruction of
 * its own before it stops, because the pending stop is taken on its way
 * back to user space (the kernel's own cgroup v2 freezer counts a vfork
 * parent as frozen for the same reason). A process that the sandbox's own SIGCONT could
 * wake is stopped too, since every process of the sandbox is. Continuing
 * sends SIGCONT to the same set. A shell inside that reports its stopped
 * jobs will see them stop and continue (unlike the cgroup freezer, which
 * nothing inside can observe). Killing sends SIGKILL to the same set,
 * stopped or not, for a session the Ask loop ended while it was frozen. */
#include "sandbox-internal.h"
#include "cgroup-internal.h"

#include <dirent.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"

/* How long the kernel may take to freeze a cgroup, in milliseconds, before
 * the freeze is taken as failed (and undone). */
#define FREEZE_WAIT_MS 2000
/* How long one attempt waits before it is undone and made again. */
#define FREEZE_ATTEMPT_MS 200

/* The attached session cgroups: the directory whose freezer holds each
 * sandbox, and whether it is a cgroup v1 freezer's. */
typedef struct frozen_cg {
  struct frozen_cg *next;
  char *dir;
  bool v1;
} frozen_cg;

static pthread_mutex_t cg_mu = PTHREAD_MUTEX_INITIALIZER;
static frozen_cg *cgs;

/* The directory of CG whose freezer holds it: the v1 freezer hierarchy's,
 * or the v2 session cgroup (every non-root v2 cgroup has cgroup.freeze). */
static const char *freezer_dir(const shk_sandbox_cgroup *cg, bool *v1)
{
  *v1 = cg->v1[SHK_CG1_FREEZER] != NULL;
  if (*v1)
    return cg->v1[SHK_CG1_FREEZER];
  return cg->procs_fd >= 0 ? cg->path : NULL;
}

int shk__freezer_attach(const shk_sandbox_cgroup *cg)
{
  bool v1;
  const char *dir = freezer_dir(cg, &v1);
  if (!dir)
    return 0;
  frozen_cg *c = calloc(1, sizeof *c);
  if (!c || !(c->dir = strdup(dir))) {
    free(c);
    return -ENOMEM;
  }
  c->v1 = v1;
  pthread_mutex_lock(&cg_mu);
  c->next = cgs;
  cgs = c;
  pthread_mutex_unlock(&cg_mu);
  return 0;
}

void shk__freezer_detach(const shk_sandbox_cgroup *cg)
{
  bool v1;
  const char *dir = freezer_dir(cg, &v1);
  if (!dir)
    return;
  pthread_mutex_lock(&cg_mu);
  for (frozen_cg **pp = &cgs; *pp; pp = &(*pp)->next)
    if (!strcmp((*pp)->dir, dir)) {
      frozen_cg *c = *pp;
      *pp = c->next;
      free(c->dir);
      free(c);
      break;
    }
  pthread_mutex_unlock(&cg_mu);
}

/* Whether the file NAME of DIR holds a line starting with WANT. */
static bool file_says(const char *dir, const char *name, const char *want)
{
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
    return false;
  char *text;
  size_t len;
  if (shk__read_file(path, &text, &len) < 0)
    return false;
  size_t n = strlen(want);
  bool found = false;
  for (char *l = text; l && !found; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
    found = !strncmp(l, want, n);
  free(text);
  return found;
}

/* How many processes cgroup.procs of DIR lists. */
static unsigned count_procs(const char *dir)
{
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s/cgroup.procs", dir) >= (int)sizeof path)
    return 0;
  char *text;
  size_t len;
  if (shk__read_file(path, &text, &len) < 0)
    return 0;
  unsigned n = 0;
  for (size_t i = 0; i < len; i++)
    n += text[i] == '\n';
  free(text);
  return n;
}

/* Freezes (FREEZE) or thaws one cgroup, and for a freeze waits until the
 * kernel says every task is frozen: v1's freezer.state reads FROZEN (not
 * FREEZING), v2's cgroup.events says "frozen 1". A freeze that does not
 * complete is undone and fails: a half-frozen session is not held.
 *
 * An attempt that has not completed after FREEZE_ATTEMPT_MS is undone and
 * made again, until FREEZE_WAIT_MS. Why: the cgroup v1 freezer never
 * completes when it freezes a vfork(2) child before it could exec (a
 * shell such as dash starts every command so): its parent waits for it in
 * the kernel, where v1 does not count it as frozen, and the child never
 * goes on while frozen. Thawed, the child execs and the parent leaves
 * that wait, and the next attempt finds them elsewhere. Only FROZEN is
 * taken for held, so a retry never reports a session held that is not. */
static int freeze_cg(const frozen_cg *c, bool freeze)
{
  shk_autoclose int dir = open(c->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0)
    return -errno;
  const char *file = c->v1 ? "freezer.state" : "cgroup.freeze";
  const char *on = c->v1 ? "FROZEN" : "1", *off = c->v1 ? "THAWED" : "0";
  if (!freeze)
    return shk__write_at(dir, file, off);
  for (int spent = 0; spent < FREEZE_WAIT_MS;) {
    int r = shk__write_at(dir, file, on);
    if (r < 0)
      return r;
    for (int ms = 0; ms < FREEZE_ATTEMPT_MS && spent < FREEZE_WAIT_MS; ms++, spent++) {
      if (c->v1 ? file_says(c->dir, "freezer.state", "FROZEN") : file_says(c->dir, "cgroup.events", "frozen 1"))
        return 0;
      nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
    }
    (void)shk__write_at(dir, file, off);
  }
  return -ETIMEDOUT;
}

/* The cgroup freezer's part of shk_sandbox_signal_launched: -ENOENT when
 * no sandbox has an attached cgroup (signals do it then). Killing thaws,
 * so that the SIGKILLs the scan sent are acted on. */
static int freeze_cgroups(shk_sandbox_signal what, unsigned *count, shk_error *err)
{
  pthread_mutex_lock(&cg_mu);
  int r = cgs ? 0 : -ENOENT;
  unsigned n = 0;
  for (frozen_cg *c = cgs; c && r == 0; c = c->next) {
    if ((r = freeze_cg(c, what == SHK_SANDBOX_STOP)) < 0)
      shk__error_set(err, r, "the cgroup freezer of %s: %s", c->dir, shk_strerror(r));
    else
      n += count_procs(c->dir);
  }
  /* A session only partly frozen is thawed whole again. */
  if (r < 0 && r != -ENOENT && what == SHK_SANDBOX_STOP)
    for (frozen_cg *c = cgs; c; c = c->next)
      (void)freeze_cg(c, false);
  pthread_mutex_unlock(&cg_mu);
  if (r == 0 && count)
    *count = n;
  return r;
}

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

/* Whether a SIGSTOP is pending for PID (its thread group's or its own
 * thread's), read from /proc/PID/status. False when it cannot be read: the
 * process is then not taken for held. */
static bool stop_pending(pid_t pid)
{
  char path[64], buf[2048];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  ssize_t len = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (len <= 0)
    return false;
  buf[len] = '\0';
  const unsigned long long bit = 1ULL << (SIGSTOP - 1);
  bool found = false;
  for (char *l = buf; l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
    unsigned long long mask;
    if ((!strncmp(l, "SigPnd:", 7) || !strncmp(l, "ShdPnd:", 7)) && sscanf(l + 7, " %llx", &mask) == 1)
      found |= (mask & bit) != 0;
  }
  return found;
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
  if (what != SHK_SANDBOX_KILL) {
    int r = freeze_cgroups(what, count, err);
    if (r != -ENOENT)
      return r;
  }
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
      } else if (v[i].state != 'T' && v[i].state != 't' && !(v[i].state == 'D' && stop_pending(v[i].pid))) {
        running = true;
        if (kill(v[i].pid, SIGSTOP) == 0)
          signalled++;
      }
    }
    free(v);
    if (!stop || !running) {
      /* Killed while frozen, they die as soon as they are thawed. */
      if (what == SHK_SANDBOX_KILL)
        (void)freeze_cgroups(SHK_SANDBOX_CONTINUE, NULL, NULL);
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

/* Safe because it freezes only a cgroup Shinken made for a session
 * (shk__cgroup_session_of) that holds the process the pidfd names, and
 * the pidfd is checked alive after the cgroup was read: a pid reused
 * meanwhile by another process is not taken for the sandbox. */
int shk_sandbox_freeze_process(int pidfd, pid_t pid, bool stop, shk_error *err)
{
  frozen_cg c = { 0 };
  c.dir = shk__cgroup_session_of(pid, &c.v1);
  if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0) {
    free(c.dir);
    return shk__error_set(err, -ESRCH, "the session's sandbox has ended");
  }
  if (!c.dir)
    return shk__error_set(err, -ENOSYS, "the session's sandbox has no cgroup of its own to freeze");
  int r = freeze_cg(&c, stop);
  if (r < 0)
    shk__error_set(err, r, "the cgroup freezer of %s: %s", c.dir, shk_strerror(r));
  free(c.dir);
  return r;
}
