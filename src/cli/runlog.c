/* SPDX-License-Identifier: Apache-2.0 */
/* The timeline of `shinken run`'s embedded manager: a log of the run's own
 * (runs/NAME.db beside the user's audit.db), signed with the user's key,
 * so that concurrent runs never share a store (a store has one writer) and
 * one verifier key checks every run (docs/audit.md, "The logs of shinken
 * run"). A run with a daemon has no log of its own: the daemon's records
 * its session. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/common.h"
#include "shinken/audit.h"
#include "shinken/manager.h"

char *shk_cli_run_log(shk_manager_opts *o, shk_cli_run_log_info *info)
{
  memset(info, 0, sizeof *info);
  /* No home and no configured store: nowhere to keep it, as for a daemon
   * with no store; the run goes on with the events built and not kept. */
  if (!o->audit_db)
    return NULL;
  char dir[4096], name[96];
  shk_error err;
  if (shk_audit_runs_dir(o->audit_db, dir, sizeof dir, &err) < 0 ||
      shk_audit_run_name(name, sizeof name, &err) < 0)
    return shk__xasprintf("the run's audit log: %s", err.message);
  /* The key must exist before a named log can be signed with it; making it
   * makes the user's own log beside it (and its directory, 0700). */
  if (shk_audit_ensure_key(o->audit_db, &err) < 0)
    return shk__xasprintf("the audit log %s: %s", o->audit_db, err.message);
  info->path = shk__xasprintf("%s/%s.db", dir, name);
  info->name = shk__xstrdup(name);
  /* The user's key: audit.key beside the user's log. */
  const char *slash = strrchr(o->audit_db, '/');
  info->key = slash ? shk__xasprintf("%.*s/audit.key", (int)(slash - o->audit_db), o->audit_db)
                    : shk__xstrdup("audit.key");
  o->audit_db = info->path;
  o->audit_key = info->key;
  o->audit_log_name = info->name;
  return NULL;
}

void shk_cli_run_log_say(const shk_cli_run_log_info *info, bool say)
{
  if (!info->path || !say)
    return;
  shk_audit_reader *r;
  uint64_t n = 0;
  shk_error err;
  if (shk_audit_reader_open(info->path, &r, &err) == 0) {
    if (shk_audit_reader_count(r, &n, &err) < 0)
      n = 0;
    shk_audit_reader_close(r);
  }
  fprintf(stderr, "shinken: this run's timeline: %llu events in %s; read it with: shinken audit tail "
                  "--run %s\n", (unsigned long long)n, info->path, info->name);
}

void shk_cli_run_log_clear(shk_cli_run_log_info *info)
{
  free(info->path);
  free(info->name);
  free(info->key);
  memset(info, 0, sizeof *info);
}
