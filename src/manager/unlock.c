/* SPDX-License-Identifier: Apache-2.0 */
/* The manager's side of live filesystem unlocks: from an fs.scope or a
 * persistence handle to mounts in the session's running sandbox and back
 * (the mechanisms are the sandbox module's: shk_sandbox_unlock_mount for
 * a host path, shk_sandbox_unlock_overlay over the image's store for
 * persistence). The handle is issued only after the one decision said
 * yes; this file only makes it real, and takes it away again on revoke,
 * expiry or the session's end, when a persistence grant that does not
 * survive the session has what it kept discarded. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "manager/manager-internal.h"
#include "shinken/cap.h"
#include "shinken/sandbox.h"

typedef struct fs_grant {
  char handle[SHK_CAP_ID_HEX];
  shk_sandbox_unlock **mounts;
  shk_sandbox_persist **stores; /* persistence: each mount's store entry; else NULL */
  size_t n;
} fs_grant;

struct shk__fs_state {
  shk_sandbox_target *target;
  char **writable;  /* where the sandbox's Landlock lets it write */
  size_t n_writable;
  fs_grant *grants;
  size_t n, cap;
};

const char *shk__unlock_missing(void)
{
  static const char *missing;
  static bool probed;
  /* The answer does not change for the life of the process. */
  if (!probed) {
    missing = shk_sandbox_unlock_missing();
    probed = true;
  }
  return missing;
}

const char *shk__persist_missing(void)
{
  static const char *missing;
  static bool probed;
  if (!probed) {
    missing = shk_sandbox_overlay_missing();
    probed = true;
  }
  return shk__unlock_missing() ? shk__unlock_missing() : missing;
}

const char *shk__unlock_started(shk__fs_state **st, pid_t pid, uid_t uid, const char *const *writable,
                                size_t n_writable, char *buf, size_t len)
{
  if (*st)
    return "the session's sandbox was already reported";
  shk__fs_state *s = calloc(1, sizeof *s);
  if (!s || !(s->writable = calloc(n_writable + 1, sizeof *s->writable))) {
    free(s);
    return "out of memory";
  }
  for (size_t i = 0; i < n_writable; i++)
    if (writable[i][0] == '/' && (s->writable[s->n_writable] = strdup(writable[i])))
      s->n_writable++;
  shk_error err;
  if (shk_sandbox_target_open(pid, uid, &s->target, &err) < 0) {
    shk__unlock_free(s);
    snprintf(buf, len, "%s", err.message);
    return buf;
  }
  *st = s;
  return NULL;
}

/* Landlock was applied once, at the sandbox's start: a write grant outside
 * what it allowed would be mounted writable and refused at every write,
 * a grant with no effect. It is refused instead, saying so. */
static const char *beyond_landlock(const shk__fs_state *st, const char *path, char *buf, size_t len)
{
  for (size_t i = 0; i < st->n_writable; i++)
    if (shk_path_within(path, st->writable[i]))
      return NULL;
  snprintf(buf, len, "the sandbox's Landlock, applied when it started, lets it write nowhere under %s (not "
           "within the image manifest's fs.scope write paths): start a new sandbox for it", path);
  return buf;
}

static unsigned undo(shk__fs_state *st, fs_grant *g, bool stop)
{
  unsigned stopped = 0, n;
  /* Newest first: a mount nested in an earlier one of the same grant goes
   * before it. */
  for (size_t i = g->n; i-- > 0;) {
    shk_sandbox_unlock_undo(st->target, g->mounts[i], stop, &n, NULL);
    stopped += n;
    /* Unmounted first, so no write is on its way into what is discarded. */
    if (g->stores)
      shk_sandbox_persist_close(g->stores[i], !shk_sandbox_persist_survives(g->stores[i]));
  }
  free(g->mounts);
  free(g->stores);
  g->mounts = NULL;
  g->stores = NULL;
  g->n = 0;
  return stopped;
}

/* One path of the grant, with its covers: the protections a sandbox root
 * there would have, and the grant's own deny paths beneath it. */
static const char *mount_one(shk__fs_state *st, fs_grant *g, const char *path, bool write,
                             const shk_cap_scope *scope, const shk__persist_where *pw, const shk_sandbox_env *env,
                             char *buf, size_t len)
{
  shk_sandbox_plan plan;
  shk_sandbox_cover *covers = NULL;
  size_t n = 0;
  shk_error err;
  if (shk_sandbox_unlock_covers(path, write, env, &plan, &covers, &n, &err) < 0) {
    snprintf(buf, len, "%s", err.message);
    return buf;
  }
  shk_sandbox_cover *all = realloc(covers, (n + scope->deny.n + 1) * sizeof *all);
  const char *why = NULL;
  if (!all) {
    why = "out of memory";
  } else {
    covers = all;
    for (size_t i = 0; i < scope->deny.n; i++) {
      if (shk_path_within(path, scope->deny.v[i])) {
        snprintf(buf, len, "%s is inside the grant's own deny path %s", path, scope->deny.v[i]);
        why = buf;
        break;
      }
      if (shk_path_within(scope->deny.v[i], path))
        covers[n++] = (shk_sandbox_cover){ scope->deny.v[i], SHK_SANDBOX_COVER_MASK };
    }
  }
  shk_sandbox_unlock **mm = why ? NULL : realloc(g->mounts, (g->n + 1) * sizeof *mm);
  if (!why && !mm)
    why = "out of memory";
  if (!why)
    g->mounts = mm;
  shk_sandbox_persist **ss = why || !pw ? NULL : realloc(g->stores, (g->n + 1) * sizeof *ss);
  if (!why && pw && !ss)
    why = "out of memory";
  if (ss)
    g->stores = ss;
  shk_sandbox_persist *store = NULL;
  if (!why && pw && shk_sandbox_persist_open(pw->root, pw->image, path, scope->survives_session, pw->session,
                                             &store, &err) < 0) {
    snprintf(buf, len, "%s", err.message);
    why = buf;
  }
  if (!why) {
    int r = pw ? shk_sandbox_unlock_overlay(st->target, path, store, covers, n, &g->mounts[g->n], &err)
               : shk_sandbox_unlock_mount(st->target, path, write, covers, n, &g->mounts[g->n], &err);
    if (r < 0) {
      snprintf(buf, len, "%s", err.message);
      why = buf;
      /* A store made for this grant alone goes with it. */
      shk_sandbox_persist_close(store, store && !scope->survives_session);
    } else {
      if (pw)
        g->stores[g->n] = store;
      g->n++;
    }
  }
  free(covers);
  shk_sandbox_plan_free(&plan);
  return why;
}

/* Room for one more grant in ST's table: 0 or -ENOMEM, before anything is
 * mounted, so a grant never fails after its mounts are made. */
static int reserve(shk__fs_state *st)
{
  if (st->n < st->cap)
    return 0;
  size_t nc = st->cap ? st->cap * 2 : 8;
  fs_grant *ng = realloc(st->grants, nc * sizeof *ng);
  if (!ng)
    return -ENOMEM;
  st->grants = ng;
  st->cap = nc;
  return 0;
}

const char *shk__unlock_grant(shk__fs_state *st, const char *handle, const shk_cap_scope *scope,
                              const shk__persist_where *pw, char *buf, size_t len)
{
  const char *missing = shk__unlock_missing();
  if (missing)
    return missing;
  if (!st)
    return "the session has no running sandbox to mount into (its launcher did not report one)";
  bool persist = scope->cls == SHK_CAP_PERSISTENCE;
  if (persist && !pw)
    return "no store to keep persisted data in";
  if (persist ? !scope->paths.n : !scope->read.n && !scope->write.n)
    return persist ? "the grant names no path to persist" : "the grant names no path to read or write";
  if (reserve(st) < 0)
    return "out of memory";
  fs_grant g = { 0 };
  snprintf(g.handle, sizeof g.handle, "%s", handle);
  shk_sandbox_env env;
  shk_error err;
  if (shk_sandbox_env_from_process(&env, &err) < 0) {
    snprintf(buf, len, "%s", err.message);
    return buf;
  }
  const char *why = NULL;
  /* Read paths first, then write paths: a write path inside a read path
   * lands on top of it, never under it. Persistence writes (into its
   * overlay's upper layer), so Landlock must let it. */
  for (size_t i = 0; !persist && !why && i < scope->read.n; i++)
    why = mount_one(st, &g, scope->read.v[i], false, scope, NULL, &env, buf, len);
  for (size_t i = 0; !persist && !why && i < scope->write.n; i++)
    if (!(why = beyond_landlock(st, scope->write.v[i], buf, len)))
      why = mount_one(st, &g, scope->write.v[i], true, scope, NULL, &env, buf, len);
  for (size_t i = 0; persist && !why && i < scope->paths.n; i++)
    if (!(why = beyond_landlock(st, scope->paths.v[i], buf, len)))
      why = mount_one(st, &g, scope->paths.v[i], true, scope, pw, &env, buf, len);
  shk_sandbox_env_free(&env);
  if (why) {
    undo(st, &g, false);
    return why;
  }
  st->grants[st->n++] = g;
  return NULL;
}

const char *shk__unlock_devices(shk__fs_state *st, const char *handle, const char *root, char *const *rel,
                                size_t n, char *buf, size_t len)
{
  const char *missing = shk__unlock_missing();
  if (missing)
    return missing;
  if (!st)
    return "the session has no running sandbox to mount into (its launcher did not report one)";
  if (reserve(st) < 0)
    return "out of memory";
  fs_grant g = { 0 };
  snprintf(g.handle, sizeof g.handle, "%s", handle);
  const char *why = NULL;
  if (!(g.mounts = calloc(n + 1, sizeof *g.mounts)))
    why = "out of memory";
  for (size_t i = 0; !why && i < n; i++) {
    char host[PATH_MAX], inside[PATH_MAX];
    shk_error err;
    if (snprintf(host, sizeof host, "%s/%s", root, rel[i]) >= (int)sizeof host ||
        snprintf(inside, sizeof inside, "/dev/%s", rel[i]) >= (int)sizeof inside) {
      why = "a device node's path is too long";
    } else if (shk_sandbox_unlock_device(st->target, host, inside, &g.mounts[g.n], &err) < 0) {
      snprintf(buf, len, "%s", err.message);
      why = buf;
    } else {
      g.n++;
    }
  }
  if (why) {
    undo(st, &g, false);
    return why;
  }
  st->grants[st->n++] = g;
  return NULL;
}

size_t shk__unlock_revoke(shk__fs_state *st, const char *handle, bool stop, unsigned *stopped)
{
  size_t done = 0;
  if (stopped)
    *stopped = 0;
  for (size_t i = 0; st && i < st->n; i++) {
    if (strcmp(st->grants[i].handle, handle))
      continue;
    done = st->grants[i].n;
    unsigned n = undo(st, &st->grants[i], stop);
    if (stopped)
      *stopped += n;
    st->grants[i] = st->grants[--st->n];
    break;
  }
  return done;
}

void shk__unlock_free(shk__fs_state *st)
{
  if (!st)
    return;
  for (size_t i = st->n; i-- > 0;)
    undo(st, &st->grants[i], false);
  free(st->grants);
  for (size_t i = 0; i < st->n_writable; i++)
    free(st->writable[i]);
  free(st->writable);
  shk_sandbox_target_free(st->target);
  free(st);
}

const shk_sandbox_target *shk__unlock_target(const shk__fs_state *st)
{
  return st ? st->target : NULL;
}
