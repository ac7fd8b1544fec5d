/* SPDX-License-Identifier: Apache-2.0 */
/* The SQLite store and its readers (docs/audit.md, "Store").
 *
 * Three tables. Every column is either covered by a hash or a signature or
 * checked against what is:
 *   events(seq, entry, leaf)  seq is also inside the entry; leaf is
 *                             SHA-256(0x00 || entry); the entry also holds
 *                             the previous event's leaf hash (prev)
 *   checkpoints(size, note)   the note is signed and states its size
 *   meta(key, value)          origin and verifier key, checked against the
 *                             notes' origin and the signing key */
#include "audit/audit-internal.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "common/common.h"

static const char schema[] =
  "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL);"
  "CREATE TABLE IF NOT EXISTS events(seq INTEGER PRIMARY KEY, entry TEXT NOT NULL,"
  " leaf BLOB NOT NULL);"
  "CREATE TABLE IF NOT EXISTS checkpoints(size INTEGER PRIMARY KEY, note TEXT NOT NULL);";

int shk__audit_db_open(const char *path, bool create, bool readonly, sqlite3 **out,
                       shk_error *err)
{
  *out = NULL;
  int flags = readonly ? SQLITE_OPEN_READONLY
                       : SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
  sqlite3 *db = NULL;
  int rc = sqlite3_open_v2(path, &db, flags | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW, NULL);
  if (rc != SQLITE_OK) {
    int e = rc == SQLITE_CANTOPEN ? -ENOENT : rc == SQLITE_NOMEM ? -ENOMEM : -EIO;
    shk__error_set(err, e, "cannot open the audit log %s: %s", path,
                   db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close(db);
    return e;
  }
  sqlite3_busy_timeout(db, 10000);
  char *msg = NULL;
  if (!readonly)
    rc = sqlite3_exec(db, "PRAGMA journal_mode=WAL;", NULL, NULL, &msg);
  if (rc == SQLITE_OK && create)
    rc = sqlite3_exec(db, schema, NULL, NULL, &msg);
  if (rc == SQLITE_OK) {
    /* A file that is not a log (or not a database) says so here. */
    sqlite3_stmt *st = NULL;
    rc = sqlite3_prepare_v2(db, "SELECT 1 FROM events, checkpoints, meta LIMIT 0", -1, &st,
                            NULL);
    sqlite3_finalize(st);
    if (rc != SQLITE_OK)
      msg = sqlite3_mprintf("%s", sqlite3_errmsg(db));
  }
  if (rc != SQLITE_OK) {
    int e = shk__error_set(err, -EIO, "%s is not an audit log: %s", path, msg ? msg : "?");
    sqlite3_free(msg);
    sqlite3_close(db);
    return e;
  }
  *out = db;
  return 0;
}

int shk__audit_key_path(const char *db_path, const char *key_path, char *out, size_t len,
                        shk_error *err)
{
  int n;
  if (key_path) {
    n = snprintf(out, len, "%s", key_path);
  } else {
    char copy[PATH_MAX];
    if (snprintf(copy, sizeof copy, "%s", db_path) >= (int)sizeof copy)
      return shk__error_set(err, -EINVAL, "the audit log's path is too long");
    n = snprintf(out, len, "%s/audit.key", dirname(copy));
  }
  if (n < 0 || (size_t)n >= len)
    return shk__error_set(err, -EINVAL, "the signing key's path is too long");
  return 0;
}

int shk__audit_meta_get(sqlite3 *db, const char *key, char **out, shk_error *err)
{
  sqlite3_stmt *st = NULL;
  *out = NULL;
  int rc = sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = ?", -1, &st, NULL);
  if (rc == SQLITE_OK)
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  if (rc == SQLITE_OK)
    rc = sqlite3_step(st);
  int r = 0;
  if (rc == SQLITE_ROW) {
    const char *v = (const char *)sqlite3_column_text(st, 0);
    *out = strdup(v ? v : "");
    r = *out ? 0 : -ENOMEM;
  } else if (rc == SQLITE_DONE) {
    r = -ENOENT;
  } else {
    r = shk__error_set(err, -EIO, "cannot read the audit log: %s", sqlite3_errmsg(db));
  }
  sqlite3_finalize(st);
  return r;
}

int shk_audit_default_path(bool system, char *buf, size_t len, shk_error *err)
{
  int n;
  const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
  if (system)
    n = snprintf(buf, len, "/var/lib/shinken/audit.db");
  else if (state && state[0] == '/')
    n = snprintf(buf, len, "%s/shinken/audit.db", state);
  else if (home && home[0] == '/')
    n = snprintf(buf, len, "%s/.local/state/shinken/audit.db", home);
  else
    return shk__error_set(err, -ENOENT, "neither XDG_STATE_HOME nor HOME is set: name the audit "
                                        "log's path");
  if (n < 0 || (size_t)n >= len)
    return shk__error_set(err, -EINVAL, "the audit log's path is too long");
  return 0;
}

int shk_audit_verifier_key(const char *db_path, const char *key_path, char **out, shk_error *err)
{
  char path[4096];
  shk__note_key k;
  int r = shk__audit_key_path(db_path, key_path, path, sizeof path, err);
  if (r == 0)
    r = shk__note_key_load(path, &k, err);
  if (r == 0 && shk__note_key_verifier(&k, out) < 0)
    r = -ENOMEM;
  explicit_bzero(&k, sizeof k);
  return r;
}

/* ------------------------------------------------------------------------
 * Readers
 */
struct shk_audit_reader {
  sqlite3 *db;
};

int shk_audit_reader_open(const char *db_path, shk_audit_reader **out, shk_error *err)
{
  *out = NULL;
  shk_audit_reader *r = calloc(1, sizeof *r);
  if (!r)
    return -ENOMEM;
  int e = shk__audit_db_open(db_path, false, true, &r->db, err);
  if (e < 0) {
    free(r);
    return e;
  }
  *out = r;
  return 0;
}

void shk_audit_reader_close(shk_audit_reader *r)
{
  if (!r)
    return;
  sqlite3_close(r->db);
  free(r);
}

static int dberr(sqlite3 *db, shk_error *err)
{
  return shk__error_set(err, -EIO, "cannot read the audit log: %s", sqlite3_errmsg(db));
}

int shk_audit_reader_count(shk_audit_reader *r, uint64_t *out, shk_error *err)
{
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(r->db, "SELECT COALESCE(MAX(seq) + 1, 0) FROM events", -1, &st, NULL);
  if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
    *out = (uint64_t)sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return 0;
  }
  sqlite3_finalize(st);
  return dberr(r->db, err);
}

int shk_audit_reader_scan(shk_audit_reader *r, uint64_t from, shk_audit_read_fn fn, void *data,
                          shk_error *err)
{
  return shk__audit_scan_db(r->db, from, fn, data, err);
}

int shk__audit_scan_db(sqlite3 *db, uint64_t from, shk_audit_read_fn fn, void *data,
                       shk_error *err)
{
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db, "SELECT seq, entry, leaf FROM events WHERE seq >= ? ORDER BY seq",
                         -1, &st, NULL) != SQLITE_OK)
    return dberr(db, err);
  sqlite3_bind_int64(st, 1, (sqlite3_int64)(from > INT64_MAX ? INT64_MAX : from));
  int rc, ret = 0;
  static const unsigned char none[32];
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *e = sqlite3_column_blob(st, 1);
    size_t n = (size_t)sqlite3_column_bytes(st, 1);
    const unsigned char *leaf = sqlite3_column_blob(st, 2);
    if (sqlite3_column_bytes(st, 2) != 32)
      leaf = none;
    if ((ret = fn(data, (uint64_t)sqlite3_column_int64(st, 0), e ? e : "", n, leaf)) != 0)
      break;
  }
  if (ret == 0 && rc != SQLITE_DONE)
    ret = dberr(db, err);
  sqlite3_finalize(st);
  return ret;
}

int shk_audit_reader_checkpoint(shk_audit_reader *r, char **note, shk_error *err)
{
  sqlite3_stmt *st = NULL;
  *note = NULL;
  if (sqlite3_prepare_v2(r->db, "SELECT note FROM checkpoints ORDER BY size DESC LIMIT 1", -1, &st,
                         NULL) != SQLITE_OK)
    return dberr(r->db, err);
  int rc = sqlite3_step(st), ret = 0;
  if (rc == SQLITE_ROW) {
    const char *t = (const char *)sqlite3_column_text(st, 0);
    *note = strdup(t ? t : "");
    ret = *note ? 0 : -ENOMEM;
  } else if (rc == SQLITE_DONE) {
    ret = shk__error_set(err, -ENOENT, "the log has no checkpoint yet");
  } else {
    ret = dberr(r->db, err);
  }
  sqlite3_finalize(st);
  return ret;
}

void shk_audit_proof_clear(shk_audit_proof *p)
{
  free(p->entry);
  free(p->path);
  free(p->checkpoint);
  memset(p, 0, sizeof *p);
}

typedef struct prove_ctx {
  shk__mt_tree tree;
  uint64_t want, limit;
  char *entry;
  int err;
} prove_ctx;

static int prove_row(void *data, uint64_t seq, const char *entry, size_t len,
                     const unsigned char leaf[32])
{
  prove_ctx *c = data;
  if (seq != c->tree.size)
    return c->err = -EIO;
  if (seq >= c->limit)
    return 1;
  if (seq == c->want && !(c->entry = strndup(entry, len)))
    return c->err = -ENOMEM;
  int r = shk__mt_tree_append(&c->tree, leaf);
  return r ? (c->err = r) : 0;
}

int shk_audit_prove(shk_audit_reader *r, uint64_t seq, shk_audit_proof *out, shk_error *err)
{
  memset(out, 0, sizeof *out);
  int e = shk_audit_reader_checkpoint(r, &out->checkpoint, err);
  if (e < 0)
    return e;
  shk__checkpoint cp;
  if ((e = shk__checkpoint_open(out->checkpoint, strlen(out->checkpoint), NULL, &cp, err)) < 0) {
    shk_audit_proof_clear(out);
    return e;
  }
  if (seq >= cp.size) {
    shk_audit_proof_clear(out);
    return shk__error_set(err, -ENOENT, "no checkpoint covers event %llu yet (the latest covers "
                                        "%llu events)", (unsigned long long)seq,
                          (unsigned long long)cp.size);
  }
  prove_ctx c = { .want = seq, .limit = cp.size };
  e = shk_audit_reader_scan(r, 0, prove_row, &c, err);
  if (e >= 0 && c.err == 0 && c.tree.size == cp.size && c.entry) {
    out->seq = seq;
    out->tree_size = cp.size;
    out->entry = c.entry;
    memcpy(out->leaf, c.tree.level[0][seq], 32);
    e = shk__mt_tree_inclusion(&c.tree, seq, cp.size, &out->path, &out->path_len);
  } else {
    free(c.entry);
    e = e < 0 ? e : c.err == -ENOMEM ? -ENOMEM
                  : shk__error_set(err, -EIO, "the log's events are not a complete sequence up to "
                                              "its checkpoint: run shinken audit verify");
  }
  shk__mt_tree_free(&c.tree);
  if (e < 0)
    shk_audit_proof_clear(out);
  return e;
}
