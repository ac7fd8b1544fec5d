/* SPDX-License-Identifier: Apache-2.0 */
/* The logs of `shinken run`'s embedded managers: one store per run, in a
 * directory beside the user's log, each signed with the user's key under an
 * origin of its own (docs/audit.md, "The logs of shinken run"). Several runs
 * of one user may be alive at once and a store has one writer, so each run
 * writes its own; the key is the user's one key, so that one verifier key
 * (`shinken audit key`) checks them all. */
#include "audit/audit-internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/rand.h>

#include "common/common.h"

int shk_audit_runs_dir(const char *db_path, char *buf, size_t len, shk_error *err)
{
  char db[4096];
  int r = 0;
  if (!db_path)
    r = shk_audit_default_path(false, db, sizeof db, err);
  else if (snprintf(db, sizeof db, "%s", db_path) >= (int)sizeof db)
    r = shk__error_set(err, -EINVAL, "the audit log's path is too long");
  if (r < 0)
    return r;
  char *slash = strrchr(db, '/');
  if (slash)
    *slash = '\0';
  int n = snprintf(buf, len, "%s/runs", slash ? (slash == db ? "" : db) : ".");
  if (n < 0 || (size_t)n >= len)
    return shk__error_set(err, -EINVAL, "the runs' log directory's path is too long");
  return 0;
}

int shk_audit_run_name(char *buf, size_t len, shk_error *err)
{
  unsigned char rnd[3];
  if (RAND_bytes(rnd, sizeof rnd) != 1)
    return shk__error_set(err, -EIO, "OpenSSL cannot make random bytes");
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  int n = snprintf(buf, len, "%04d%02d%02d-%02d%02d%02d-%d-%02x%02x%02x", tm.tm_year + 1900,
                   tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)getpid(),
                   rnd[0], rnd[1], rnd[2]);
  if (n < 0 || (size_t)n >= len)
    return shk__error_set(err, -EINVAL, "no room for a log name");
  return 0;
}

int shk_audit_ensure_key(const char *db_path, shk_error *err)
{
  char key[4096];
  int r = shk__audit_key_path(db_path, NULL, key, sizeof key, err);
  if (r < 0 || access(key, F_OK) == 0)
    return r;
  /* The key is made with its own log, never alone: a key with no log
   * beside it would stop that log from ever being started (shk_audit_open
   * refuses a missing log whose key exists, since a log by that key may
   * have existed). The log then holds this writer's start and stop. */
  shk_audit *a;
  shk_audit_opts o = { .db_path = db_path };
  r = shk_audit_open(&o, &a, err);
  if (r == 0)
    return shk_audit_close(a, err);
  /* Another process holds it: a writer that is making the key right now
   * (another run doing this) has it on disk within moments, a writer that
   * is running has it already. */
  for (int i = 0; r == -EBUSY && i < 500; i++) {
    if (access(key, F_OK) == 0)
      return 0;
    usleep(10000);
  }
  return r;
}
