/* SPDX-License-Identifier: Apache-2.0 */
/* The cgroup v1 fallback. On a hybrid host the memory, pids and cpu
 * controllers are bound to v1 hierarchies and the v2 mount has none, so a
 * session gets one cgroup in each v1 hierarchy its limits need (and in the
 * freezer's, to stop it before it is killed), and every process of the
 * session is placed in all of them. */
#include "cgroup-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/common.h"

static const char *const hier_names[SHK_CG1_N] = { "memory", "pids", "cpu", "freezer" };

/* Is `tok` one of the comma-separated words of `list`? */
static bool has_word(const char *list, const char *tok)
{
  size_t n = strlen(tok);
  for (const char *p = list;;) {
    if (!strncmp(p, tok, n) && (p[n] == ',' || p[n] == '\0'))
      return true;
    p = strchr(p, ',');
    if (!p)
      return false;
    p++;
  }
}

/* The mount point and mount root of the v1 hierarchy carrying `ctl` (or of
 * the cgroup v2 mount, for NULL), from
 * /proc/self/mountinfo lines "ID PARENT DEV ROOT POINT OPTS [TAGS] - TYPE
 * SOURCE SUPEROPTS". A name with escaped characters is skipped rather than
 * guessed at. */
static bool find_hierarchy(const char *ctl, char **point, char **root)
{
  char *text;
  size_t len;
  if (shk__read_file("/proc/self/mountinfo", &text, &len) < 0)
    return false;
  bool found = false;
  char *save = NULL;
  for (char *l = strtok_r(text, "\n", &save); l && !found; l = strtok_r(NULL, "\n", &save)) {
    /* fields[0..4] before the tags, post[0..2] after the "-". */
    char *fields[5] = { NULL }, *post[3] = { NULL }, *fsave = NULL;
    int i = 0, j = -1;
    for (char *t = strtok_r(l, " ", &fsave); t; t = strtok_r(NULL, " ", &fsave)) {
      if (i < 5)
        fields[i++] = t;
      else if (j < 0)
        j = strcmp(t, "-") ? -1 : 0;
      else if (j < 3)
        post[j++] = t;
    }
    /* ctl NULL: the cgroup v2 mount. */
    if (!post[2] || (ctl ? strcmp(post[0], "cgroup") || !has_word(post[2], ctl) : strcmp(post[0], "cgroup2")) ||
        strchr(fields[3], '\\') || strchr(fields[4], '\\'))
      continue;
    *root = strdup(fields[3]);
    *point = strdup(fields[4]);
    found = *root && *point;
    if (!found) {
      free(*root);
      free(*point);
      *root = *point = NULL;
      break;
    }
  }
  free(text);
  return found;
}

/* This process's cgroup in the hierarchy carrying `ctl`, from
 * /proc/self/cgroup lines "ID:CONTROLLERS:PATH". */
static char *own_cgroup_v1(const char *ctl)
{
  char *text;
  size_t len;
  if (shk__read_file("/proc/self/cgroup", &text, &len) < 0)
    return NULL;
  char *res = NULL, *save = NULL;
  for (char *l = strtok_r(text, "\n", &save); l && !res; l = strtok_r(NULL, "\n", &save)) {
    char *list = strchr(l, ':');
    char *path = list ? strchr(list + 1, ':') : NULL;
    if (!path)
      continue;
    *path++ = '\0';
    if (has_word(list + 1, ctl) && *path == '/')
      res = strdup(path);
  }
  free(text);
  return res;
}

/* SHINKEN_CGROUP_PARENT is a cgroup path as /proc/self/cgroup shows one:
 * absolute, and without "." or ".." components that could climb out of
 * the hierarchy. */
static bool valid_parent(const char *p)
{
  if (p[0] != '/')
    return false;
  for (const char *c = p; c; c = strchr(c + 1, '/')) {
    size_t n = strcspn(c + 1, "/");
    if ((n == 1 && c[1] == '.') || (n == 2 && c[1] == '.' && c[2] == '.'))
      return false;
  }
  return true;
}

/* Where session cgroups go in the hierarchy of `ctl`: the cgroup `named`
 * (SHINKEN_CGROUP_PARENT) or else this process's own. Root may use
 * any; another user only one delegated to it: the named one when it can
 * write there, or else its own cgroup when it owns that directory (an
 * administrator's chown, the v1 form of delegation). `*mounted` says
 * whether the hierarchy exists at all. */
static char *v1_parent(const char *ctl, const char *named, const shk_sandbox_env *env,
                       bool *mounted)
{
  shk_autofree char *point = NULL;
  shk_autofree char *root = NULL;
  *mounted = find_hierarchy(ctl, &point, &root);
  if (!*mounted)
    return NULL;
  shk_autofree char *cg = named ? strdup(named) : own_cgroup_v1(ctl);
  if (!cg)
    return NULL;
  /* A hierarchy mounted from a sub-cgroup shows only what lies beneath
   * its mount root. */
  size_t n = strcmp(root, "/") ? strlen(root) : 0;
  if (strncmp(cg, root, n) || (cg[n] != '/' && cg[n] != '\0'))
    return NULL;
  char *dir = NULL;
  if (asprintf(&dir, "%s%s", point, strcmp(cg + n, "/") ? cg + n : "") < 0)
    return NULL;
  struct stat st;
  bool ok = stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
  if (ok && !env->root)
    ok = access(dir, W_OK) == 0 && (named || st.st_uid == env->uid);
  if (!ok) {
    free(dir);
    return NULL;
  }
  return dir;
}

static int bits(unsigned v)
{
  return __builtin_popcount(v);
}

void shk__cgroup_v1_detect(shk_sandbox_features *f, const shk_sandbox_env *env)
{
  const unsigned all = SHK_CG_MEMORY | SHK_CG_PIDS | SHK_CG_CPU;
  unsigned v2 = f->cgroup_parent ? f->cgroup_controllers & all : 0;
  if (v2 == all)
    return;
  const char *named = env->cgroup_parent;
  bool bad_env = named && !valid_parent(named);
  char *parent[SHK_CG1_N] = { NULL };
  unsigned have = 0, mounted = 0;
  for (int i = 0; i < SHK_CG1_N && !bad_env; i++) {
    bool m;
    parent[i] = v1_parent(hier_names[i], named, env, &m);
    if (i < SHK_CG1_FREEZER) {
      have |= parent[i] ? 1u << i : 0;
      mounted |= m ? 1u << i : 0;
    }
  }
  char *old = f->cgroup_detail;
  if (bits(have) <= bits(v2)) {
    /* Say why v1 gives nothing here, when it carries what v2 lacks. */
    unsigned lost = mounted & ~v2 & ~have;
    if (bad_env)
      f->cgroup_detail = shk__features_printf(f, "%s; SHINKEN_CGROUP_PARENT=%s is not an absolute "
                                        "cgroup path without . or ..", old, named);
    else if (lost)
      f->cgroup_detail = shk__features_printf(f, 
          "%s; cgroup v1 hierarchies%s%s%s: no usable parent%s", old,
          lost & SHK_CG_MEMORY ? " memory" : "", lost & SHK_CG_PIDS ? " pids" : "",
          lost & SHK_CG_CPU ? " cpu" : "",
          env->root ? "" : named ? " (SHINKEN_CGROUP_PARENT is not a directory this user can write)"
                                    : " (none delegated to this user: SHINKEN_CGROUP_PARENT "
                                      "names a delegated parent)");
    if (f->cgroup_detail != old)
      free(old);
    for (int i = 0; i < SHK_CG1_N; i++)
      free(parent[i]);
    return;
  }
  f->cgroup_v1 = true;
  free(f->cgroup_parent);
  f->cgroup_parent = NULL;
  f->cgroup_controllers = have;
  memcpy(f->cgroup_v1_parent, parent, sizeof parent);
  char *at[SHK_CG1_N];
  for (int i = 0; i < SHK_CG1_N; i++)
    at[i] = parent[i] ? shk__features_printf(f, " %s at %s;", hier_names[i], parent[i])
                      : shk__features_printf(f, " no %s%s;", hier_names[i],
                                       i == SHK_CG1_FREEZER ? " (killed process by process)" : "");
  f->cgroup_detail = shk__features_printf(f, "cgroup v1 hierarchies (cgroup v2 has no usable "
                                    "controllers):%s%s%s%s %s", at[0] ? at[0] : "",
                                    at[1] ? at[1] : "", at[2] ? at[2] : "", at[3] ? at[3] : "",
                                    env->root ? "as root"
                                    : named ? "delegated to this user (SHINKEN_CGROUP_PARENT)"
                                          : "delegated to this user (owns its cgroup)");
  for (int i = 0; i < SHK_CG1_N; i++)
    free(at[i]);
  free(old);
}

void shk__cgroup_v1_features_free(shk_sandbox_features *f)
{
  for (int i = 0; i < SHK_CG1_N; i++) {
    free(f->cgroup_v1_parent[i]);
    f->cgroup_v1_parent[i] = NULL;
  }
}

/* Writes `value` to the file `name` of the cgroup directory `dir`. */
static int put(int dir, const char *name, const char *value)
{
  return shk__write_at(dir, name, value);
}

/* The limit of hierarchy `i`. A file the kernel does not have (swap not
 * accounted, no OOM control) is skipped: what it adds is not claimed. */
static int set_limit(int dir, int i, const shk_sandbox_opts *o)
{
  char buf[64];
  int r = 0;
  switch (i) {
  case SHK_CG1_MEMORY:
    snprintf(buf, sizeof buf, "%" PRIu64, o->mem);
    if ((r = put(dir, "memory.limit_in_bytes", buf)) < 0)
      return r;
    /* Memory and swap together: without it the limit could be bypassed
     * through swap. */
    if ((r = put(dir, "memory.memsw.limit_in_bytes", buf)) < 0 && r != -ENOENT)
      return r;
    /* The OOM killer must act at the limit: a parent with it disabled
     * would leave the session stalled forever, holding its memory. */
    if ((r = put(dir, "memory.oom_control", "0")) < 0 && r != -ENOENT)
      return r;
    return 0;
  case SHK_CG1_PIDS:
    snprintf(buf, sizeof buf, "%" PRIu64, o->pids);
    return put(dir, "pids.max", buf);
  case SHK_CG1_CPU:
    snprintf(buf, sizeof buf, "%" PRIu64, (uint64_t)o->cpu_milli * 100);
    if ((r = put(dir, "cpu.cfs_period_us", "100000")) < 0)
      return r;
    return put(dir, "cpu.cfs_quota_us", buf);
  default:
    return 0;
  }
}

/* Safe because it only creates new, empty cgroups beneath the parents
 * detection chose (root's own cgroups, or ones delegated to the caller)
 * and only lowers limits inside them. */
int shk__cgroup_v1_create(const shk_sandbox_features *f, const shk_sandbox_opts *o,
                          shk_sandbox_cgroup *cg, shk_error *err)
{
  for (int i = 0; i < SHK_CG1_N; i++) {
    cg->v1[i] = NULL;
    cg->v1_procs[i] = -1;
  }
  bool need[SHK_CG1_N] = { o->mem != 0, o->pids != 0, o->cpu_milli != 0,
                           f->cgroup_v1_parent[SHK_CG1_FREEZER] != NULL };
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int r = 0;
  for (int i = 0; i < SHK_CG1_N; i++) {
    if (!need[i])
      continue;
    if (!f->cgroup_v1_parent[i]) {
      r = shk__error_set(err, -ENOSYS, "no cgroup v1 %s hierarchy usable here", hier_names[i]);
      goto fail;
    }
    char *path = NULL;
    if (asprintf(&path, "%s/shinken-%ld-%ld", f->cgroup_v1_parent[i], (long)getpid(),
                 (long)ts.tv_nsec) < 0) {
      r = shk__error_set(err, -ENOMEM, "out of memory");
      goto fail;
    }
    if (mkdir(path, 0755) < 0) {
      r = -errno;
      shk__error_set(err, r, "creating %s: %s", path, strerror(-r));
      free(path);
      goto fail;
    }
    cg->v1[i] = path;
    shk_autoclose int dir = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    r = dir < 0 ? -errno : set_limit(dir, i, o);
    if (r == 0) {
      cg->v1_procs[i] = openat(dir, "cgroup.procs", O_WRONLY | O_CLOEXEC);
      r = cg->v1_procs[i] < 0 ? -errno : 0;
    }
    if (r < 0) {
      shk__error_set(err, r, "cgroup %s: setting a limit: %s", path, strerror(-r));
      goto fail;
    }
    if (!cg->path && !(cg->path = strdup(path))) {
      r = shk__error_set(err, -ENOMEM, "out of memory");
      goto fail;
    }
  }
  return 0;
fail:
  shk__cgroup_v1_destroy(cg);
  return r;
}

int shk__cgroup_v1_join(const shk_sandbox_cgroup *cg)
{
  for (int i = 0; i < SHK_CG1_N; i++)
    if (cg->v1[i] && write(cg->v1_procs[i], "0", 1) != 1)
      return -errno;
  return 0;
}

static void pause_ms(void)
{
  struct timespec ms = { 0, 1000000 };
  nanosleep(&ms, NULL);
}

/* SIGKILL to every process listed in any of the session's cgroups; whether
 * one was listed. */
static bool kill_listed(const shk_sandbox_cgroup *cg)
{
  bool any = false;
  for (int i = 0; i < SHK_CG1_N; i++) {
    if (!cg->v1[i])
      continue;
    char procs[PATH_MAX];
    if (snprintf(procs, sizeof procs, "%s/cgroup.procs", cg->v1[i]) >= (int)sizeof procs)
      continue;
    char *text;
    size_t len;
    if (shk__read_file(procs, &text, &len) < 0)
      continue;
    char *save = NULL;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
      pid_t pid = (pid_t)strtol(l, NULL, 10);
      if (pid > 0) {
        kill(pid, SIGKILL);
        any = true;
      }
    }
    free(text);
  }
  return any;
}

/* v1 has no cgroup.kill. Frozen, the session cannot fork while it is being
 * killed, so one pass over cgroup.procs finds every process; without a
 * freezer the passes repeat until the cgroups are empty, which pids.max
 * keeps finite. Then the directories are removed. */
void shk__cgroup_v1_destroy(shk_sandbox_cgroup *cg)
{
  bool have = false;
  for (int i = 0; i < SHK_CG1_N; i++) {
    if (cg->v1[i] && cg->v1_procs[i] >= 0)
      close(cg->v1_procs[i]);
    cg->v1_procs[i] = -1;
    have |= cg->v1[i] != NULL;
  }
  if (!have)
    return;
  shk_autoclose int fz = cg->v1[SHK_CG1_FREEZER]
      ? open(cg->v1[SHK_CG1_FREEZER], O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
  bool frozen = fz >= 0 && put(fz, "freezer.state", "FROZEN") == 0;
  if (frozen) {
    char state[PATH_MAX];
    snprintf(state, sizeof state, "%s/freezer.state", cg->v1[SHK_CG1_FREEZER]);
    for (int tries = 0; tries < 1000; tries++) {
      char *text;
      size_t len;
      bool done = false;
      if (shk__read_file(state, &text, &len) == 0) {
        done = !strncmp(text, "FROZEN", 6);
        free(text);
      }
      if (done)
        break;
      pause_ms();
    }
  }
  for (int tries = 0; tries < 2000; tries++) {
    bool any = kill_listed(cg);
    /* Killed while frozen, they die as soon as they are thawed. */
    if (frozen && put(fz, "freezer.state", "THAWED") == 0)
      frozen = false;
    if (!any)
      break;
    pause_ms();
  }
  for (int i = 0; i < SHK_CG1_N; i++) {
    if (!cg->v1[i])
      continue;
    /* The last processes may still be leaving their cgroups. */
    for (int tries = 0; tries < 1000 && rmdir(cg->v1[i]) < 0 && errno == EBUSY; tries++)
      pause_ms();
    free(cg->v1[i]);
    cg->v1[i] = NULL;
  }
  free(cg->path);
  cg->path = NULL;
}

/* The session cgroup that holds PID, by the /proc/PID/cgroup lines
 * "ID:CONTROLLERS:PATH": its cgroup v1 freezer's, else its cgroup v2 one.
 * Only a cgroup Shinken made for a session is taken (named shinken-* in v1,
 * session-* in v2, by shk_sandbox_cgroup_create): a process's cgroup may
 * also be a user's slice or a service's, which must never be frozen. */
char *shk__cgroup_session_of(pid_t pid, bool *v1)
{
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
  char *text;
  size_t len;
  if (shk__read_file(path, &text, &len) < 0)
    return NULL;
  char *fz = NULL, *uni = NULL, *save = NULL;
  for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
    char *list = strchr(l, ':');
    char *cg = list ? strchr(list + 1, ':') : NULL;
    if (!cg || cg[1] != '/')
      continue;
    *cg++ = '\0';
    const char *base = strrchr(cg, '/') + 1;
    if (has_word(list + 1, "freezer") && !strncmp(base, "shinken-", 8))
      fz = cg;
    else if (list[1] == '\0' && !strncmp(base, "session-", 8))
      uni = cg;
  }
  char *res = NULL;
  char *point = NULL, *root = NULL;
  const char *cg = fz ? fz : uni;
  /* The mount shows the hierarchy from its root: the path beneath it. */
  if (cg && find_hierarchy(fz ? "freezer" : NULL, &point, &root)) {
    size_t n = strcmp(root, "/") ? strlen(root) : 0;
    if (!strncmp(cg, root, n) && cg[n] == '/' && asprintf(&res, "%s%s", point, cg + n) < 0)
      res = NULL;
  }
  *v1 = fz != NULL;
  free(point);
  free(root);
  free(text);
  return res;
}
