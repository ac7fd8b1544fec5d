/* SPDX-License-Identifier: Apache-2.0 */
/* One cgroup v2 per session: the limits asked for, and a way to kill every
 * process of the session at once however `shinken run` ends. */
#include "shinken/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cgroup-internal.h"
#include "common/common.h"

static int write_file(const char *dir, const char *name, const char *value)
{
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
    return -ENAMETOOLONG;
  return shk__write_at(AT_FDCWD, path, value);
}

/* "WHAT: strerror(R)" into ERR; returns R. */
static int fail(shk_error *err, int r, const char *fmt, ...) SHK_PRINTF(3, 4);
static int fail(shk_error *err, int r, const char *fmt, ...)
{
  char msg[SHK_SANDBOX_TEXT_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return shk__error_set(err, r, "%s: %s", msg, strerror(-r));
}

/* Enables the controllers the limits need in `dir`'s subtree_control. */
static int enable(const char *dir, unsigned need, shk_error *err)
{
  static const struct { unsigned bit; const char *name; } ctl[] = {
    { SHK_CG_MEMORY, "+memory" }, { SHK_CG_PIDS, "+pids" }, { SHK_CG_CPU, "+cpu" },
  };
  for (size_t i = 0; i < sizeof ctl / sizeof ctl[0]; i++) {
    if (!(need & ctl[i].bit))
      continue;
    int r = write_file(dir, "cgroup.subtree_control", ctl[i].name);
    if (r < 0)
      return fail(err, r, "cgroup %s: enabling %s", dir, ctl[i].name + 1);
  }
  return 0;
}

/* Safe because it only creates a new, empty cgroup beneath the parent that
 * detection chose (root's <mount>/shinken, or the caller's own delegated
 * subtree) and only lowers limits inside it. */
int shk_sandbox_cgroup_create(const shk_sandbox_features *f, const shk_sandbox_opts *o,
                              shk_sandbox_cgroup *cg, shk_error *err)
{
  cg->path = NULL;
  cg->procs_fd = -1;
  if (f->cgroup_v1)
    return shk__cgroup_v1_create(f, o, cg, err);
  unsigned need = (o->mem ? SHK_CG_MEMORY : 0) | (o->pids ? SHK_CG_PIDS : 0) |
                  (o->cpu_milli ? SHK_CG_CPU : 0);
  if (!f->cgroup_parent)
    return shk__error_set(err, -ENOSYS, "%s", f->cgroup_detail ? f->cgroup_detail : "no cgroup v2");
  int r;
  if (f->cgroup_own_parent) {
    if (mkdir(f->cgroup_parent, 0755) < 0 && errno != EEXIST)
      return fail(err, -errno, "creating %s", f->cgroup_parent);
    if ((r = enable(f->cgroup_mount, need, err)) < 0)
      return r;
  }
  if ((r = enable(f->cgroup_parent, need, err)) < 0)
    return r;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  char *path = NULL;
  if (asprintf(&path, "%s/session-%ld-%ld", f->cgroup_parent, (long)getpid(), (long)ts.tv_nsec) < 0)
    return shk__error_set(err, -ENOMEM, "out of memory");
  if (mkdir(path, 0755) < 0) {
    r = fail(err, -errno, "creating %s", path);
    free(path);
    return r;
  }
  cg->path = path;
  char buf[64];
  if (o->mem) {
    snprintf(buf, sizeof buf, "%" PRIu64, o->mem);
    if ((r = write_file(path, "memory.max", buf)) < 0)
      goto fail_limit;
    /* Without this the memory limit could be bypassed through swap. */
    r = write_file(path, "memory.swap.max", "0");
    if (r < 0 && r != -ENOENT)
      goto fail_limit;
  }
  if (o->pids) {
    snprintf(buf, sizeof buf, "%" PRIu64, o->pids);
    if ((r = write_file(path, "pids.max", buf)) < 0)
      goto fail_limit;
  }
  if (o->cpu_milli) {
    snprintf(buf, sizeof buf, "%" PRIu64 " 100000", (uint64_t)o->cpu_milli * 100);
    if ((r = write_file(path, "cpu.max", buf)) < 0)
      goto fail_limit;
  }
  char procs[PATH_MAX];
  snprintf(procs, sizeof procs, "%s/cgroup.procs", path);
  cg->procs_fd = open(procs, O_WRONLY | O_CLOEXEC);
  r = -errno;
  if (cg->procs_fd < 0)
    goto fail_limit;
  return 0;
fail_limit:
  fail(err, r, "cgroup %s: setting a limit", path);
  shk_sandbox_cgroup_destroy(cg);
  return r;
}

int shk_sandbox_cgroup_join(const shk_sandbox_cgroup *cg)
{
  if (cg->procs_fd < 0)
    return shk__cgroup_v1_join(cg);
  return write(cg->procs_fd, "0", 1) == 1 ? 0 : -errno;
}

static bool populated(const char *path)
{
  char events[PATH_MAX];
  if (snprintf(events, sizeof events, "%s/cgroup.events", path) >= (int)sizeof events)
    return false;
  char *text;
  size_t len;
  if (shk__read_file(events, &text, &len) < 0)
    return false;
  bool pop = strstr(text, "populated 1") != NULL;
  free(text);
  return pop;
}

/* Kills with cgroup.kill where the kernel has it (5.14), otherwise process
 * by process until the cgroup is empty; then removes it. */
void shk_sandbox_cgroup_destroy(shk_sandbox_cgroup *cg)
{
  shk__cgroup_v1_destroy(cg); /* nothing unless the session has v1 cgroups */
  if (cg->procs_fd >= 0)
    close(cg->procs_fd);
  cg->procs_fd = -1;
  if (!cg->path)
    return;
  bool have_kill = write_file(cg->path, "cgroup.kill", "1") == 0;
  for (int tries = 0; tries < 1000 && populated(cg->path); tries++) {
    if (!have_kill) {
      char procs[PATH_MAX];
      snprintf(procs, sizeof procs, "%s/cgroup.procs", cg->path);
      char *text;
      size_t len;
      if (shk__read_file(procs, &text, &len) == 0) {
        char *save = NULL;
        for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
          kill((pid_t)strtol(l, NULL, 10), SIGKILL);
        free(text);
      }
    }
    struct timespec ms = { 0, 1000000 };
    nanosleep(&ms, NULL);
  }
  rmdir(cg->path);
  free(cg->path);
  cg->path = NULL;
}
