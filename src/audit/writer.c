/* SPDX-License-Identifier: Apache-2.0 */
/* The one writer of a log: producers copy packed events into a bounded byte
 * ring under a short mutex and return; the writer thread takes everything
 * queued at once, serializes and hashes it, appends it in one SQLite
 * transaction, and signs a checkpoint when one is due.
 *
 * The producer's critical section is a bounds check and one memcpy of at
 * most SHK_AUDIT_EVENT_MAX bytes; it never waits for the writer (a full
 * ring is -EBUSY, not a wait) and never does I/O. */
#include "audit/audit-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/rand.h>
#include <sqlite3.h>

#include "common/common.h"

#define WRAP 0xffffffffu
#define HDR 16 /* u32 length, u32 unused, i64 time */
/* Group commit: once an event is queued the writer lingers up to LINGER_US
 * for more (or until a quarter of the queue is used, a flush or the close
 * asks), so that a trickle of events (a proxy's verdicts, one request at a
 * time) costs one transaction and one fsync per window instead of one per
 * event, and the producers' threads are not woken for every event. */
#define LINGER_US 2000

struct shk_audit {
  /* The queue, under mu. head and tail count bytes since open. */
  pthread_mutex_t mu;
  pthread_cond_t wake;     /* the writer waits on it */
  pthread_cond_t done;     /* flushers wait on it */
  unsigned char *ring;
  size_t cap;
  uint64_t head, tail;
  uint64_t committed;      /* ring position committed to the store */
  uint64_t signed_upto;    /* ring position covered by a checkpoint */
  uint64_t pending_refused;
  bool stop, want_checkpoint;
  bool paused;             /* tests only: the writer takes nothing */
  bool idle;               /* the writer waits for a first event: wake it */
  unsigned flushers;       /* callers of shk_audit_flush waiting: no lingering */
  int failed;              /* sticky: the writer's error */
  char failure[512];
  _Atomic uint64_t refused;

  /* The writer's own, touched by no one else while it runs. */
  pthread_t thread;
  bool started;
  int lock_fd;             /* the store, flock'ed: one writer per log */
  sqlite3 *db;
  sqlite3_stmt *ins_event, *ins_cp;
  shk__note_key key;
  char origin[256];
  shk__mt_compact tree;
  shk__hash prev;
  uint64_t since_cp;
  int64_t last_cp_ms;
  unsigned cp_events, cp_ms;
  shk__abuf json, note;
};

static int64_t now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static size_t align8(size_t n)
{
  return (n + 7) & ~(size_t)7;
}

/* ------------------------------------------------------------------------
 * Producers
 */
static const char *event_name(const shk_audit_event *e, char *buf, size_t len)
{
  if (e->len >= 3 && e->buf[0] == 0xfe) {
    size_t n = e->buf[1] | (size_t)e->buf[2] << 8;
    snprintf(buf, len, "%.*s", (int)(n < len ? n : len - 1), (const char *)e->buf + 3);
  } else {
    snprintf(buf, len, "?");
  }
  return buf;
}

int shk_audit_emit(shk_audit *a, const shk_audit_event *e, shk_error *err)
{
  if (e->error) {
    char name[80];
    const char *f = shk__audit_field_name(e->error_field);
    return shk__error_set(err, e->error, "audit event '%s'%s%s %s",
                          event_name(e, name, sizeof name), f ? ": field " : "", f ? f : "",
                          e->error_what);
  }
  size_t need = align8(HDR + e->len);
  pthread_mutex_lock(&a->mu);
  if (a->failed) {
    pthread_mutex_unlock(&a->mu);
    return shk__error_set(err, -EIO, "the audit log cannot be written: %s", a->failure);
  }
  size_t pos = (size_t)(a->tail % a->cap);
  size_t skip = pos + need > a->cap ? a->cap - pos : 0;
  if (a->tail - a->head + skip + need > a->cap) {
    a->pending_refused++;
    atomic_fetch_add(&a->refused, 1);
    pthread_mutex_unlock(&a->mu);
    return shk__error_set(err, -EBUSY, "the audit queue is full: the action is refused");
  }
  if (skip) {
    uint32_t w = WRAP;
    memcpy(a->ring + pos, &w, 4);
    a->tail += skip;
    pos = 0;
  }
  uint32_t len = (uint32_t)e->len;
  memcpy(a->ring + pos, &len, 4);
  memcpy(a->ring + pos + 8, &e->time_ns, 8);
  memcpy(a->ring + pos + HDR, e->buf, e->len);
  a->tail += need;
  /* The writer is woken when it waits for a first event, or when the
   * queue fills past what its lingering is for; otherwise it comes for
   * the events at the end of its window. */
  if (a->idle || a->tail - a->head >= a->cap / 4) {
    a->idle = false;
    pthread_cond_signal(&a->wake);
  }
  pthread_mutex_unlock(&a->mu);
  return 0;
}

void shk__audit_pause(shk_audit *a, bool paused)
{
  pthread_mutex_lock(&a->mu);
  a->paused = paused;
  pthread_cond_signal(&a->wake);
  pthread_mutex_unlock(&a->mu);
}

uint64_t shk_audit_refused(const shk_audit *a)
{
  return atomic_load(&a->refused);
}

int shk_audit_flush(shk_audit *a, bool checkpoint, shk_error *err)
{
  pthread_mutex_lock(&a->mu);
  uint64_t target = a->tail;
  if (checkpoint)
    a->want_checkpoint = true;
  a->flushers++;
  pthread_cond_signal(&a->wake);
  while (!a->failed && (a->committed < target || (checkpoint && a->signed_upto < target)))
    pthread_cond_wait(&a->done, &a->mu);
  a->flushers--;
  int r = a->failed ? shk__error_set(err, -EIO, "the audit log cannot be written: %s", a->failure)
                    : 0;
  pthread_mutex_unlock(&a->mu);
  return r;
}

/* ------------------------------------------------------------------------
 * The writer
 */
static int append(shk_audit *a, const unsigned char *rec, size_t len, int64_t time_ns,
                  shk_error *err)
{
  uint64_t seq = a->tree.size;
  a->json.len = 0;
  int r = shk__audit_serialize(rec, len, time_ns, seq, a->prev, &a->json);
  if (r < 0)
    return shk__error_set(err, r, "cannot serialize event %llu", (unsigned long long)seq);
  shk__hash leaf;
  shk__mt_leaf(a->json.p, a->json.len, leaf);
  sqlite3_stmt *st = a->ins_event;
  sqlite3_bind_int64(st, 1, (sqlite3_int64)seq);
  sqlite3_bind_text(st, 2, a->json.p, (int)a->json.len, SQLITE_STATIC);
  sqlite3_bind_blob(st, 3, leaf, SHK__HASH, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  if (rc != SQLITE_DONE)
    return shk__error_set(err, -EIO, "cannot append event %llu: %s", (unsigned long long)seq,
                          sqlite3_errmsg(a->db));
  shk__mt_compact_append(&a->tree, leaf);
  memcpy(a->prev, leaf, SHK__HASH);
  a->since_cp++;
  return 0;
}

/* An event the writer makes itself (start, stop, overflow). */
static int append_own(shk_audit *a, const char *name, uint64_t count, shk_error *err)
{
  shk_audit_event e;
  shk_audit_event_init(&e, name);
  if (count)
    shk_audit_int(&e, SHK_AUDIT_COUNT, (int64_t)count);
  else
    shk_audit_int(&e, SHK_AUDIT_PID, getpid());
  return append(a, e.buf, e.len, e.time_ns, err);
}

static int checkpoint(shk_audit *a, shk_error *err)
{
  shk__hash root;
  shk__mt_compact_root(&a->tree, root);
  shk__abuf text = { 0 };
  a->note.len = 0;
  int r = shk__checkpoint_text(a->origin, a->tree.size, root, &text);
  if (r == 0)
    r = shk__note_sign(&a->key, text.p, text.len, &a->note, err);
  shk__abuf_free(&text);
  if (r < 0)
    return r;
  sqlite3_stmt *st = a->ins_cp;
  sqlite3_bind_int64(st, 1, (sqlite3_int64)a->tree.size);
  sqlite3_bind_text(st, 2, a->note.p, (int)a->note.len, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  if (rc != SQLITE_DONE)
    return shk__error_set(err, -EIO, "cannot store a checkpoint: %s", sqlite3_errmsg(a->db));
  a->since_cp = 0;
  a->last_cp_ms = now_ms();
  return 0;
}

static int exec(shk_audit *a, const char *sql, shk_error *err)
{
  if (sqlite3_exec(a->db, sql, NULL, NULL, NULL) != SQLITE_OK)
    return shk__error_set(err, -EIO, "the audit store failed: %s", sqlite3_errmsg(a->db));
  return 0;
}

static void *writer(void *arg)
{
  shk_audit *a = arg;
  pthread_mutex_lock(&a->mu);
  for (;;) {
    while ((a->paused && !a->stop) ||
           (a->head == a->tail && !a->stop && !(a->want_checkpoint && a->since_cp > 0) &&
            !(a->since_cp > 0 && now_ms() - a->last_cp_ms >= a->cp_ms))) {
      a->idle = true;
      if (a->since_cp > 0 && !a->paused) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t left = a->cp_ms - (now_ms() - a->last_cp_ms);
        ts.tv_sec += left / 1000;
        ts.tv_nsec += (left % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
          ts.tv_sec++;
          ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&a->wake, &a->mu, &ts);
      } else {
        pthread_cond_wait(&a->wake, &a->mu);
      }
      a->idle = false;
    }
    /* Group commit (LINGER_US): more events may come within the window. */
    if (!a->stop && !a->paused && !a->flushers && !a->want_checkpoint && a->head != a->tail) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += LINGER_US * 1000;
      if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
      }
      while (!a->stop && !a->flushers && !a->want_checkpoint && a->tail - a->head < a->cap / 4 &&
             pthread_cond_timedwait(&a->wake, &a->mu, &ts) == 0) {
      }
    }
    uint64_t from = a->head, to = a->tail, refused = a->pending_refused;
    bool stop = a->stop, want_cp = a->want_checkpoint;
    a->pending_refused = 0;
    a->want_checkpoint = false;
    pthread_mutex_unlock(&a->mu);

    /* The records in [from, to) are the writer's until head moves. */
    shk_error err = { 0 };
    int r = exec(a, "BEGIN", &err);
    for (uint64_t p = from; p < to && r == 0;) {
      size_t pos = (size_t)(p % a->cap);
      uint32_t len;
      memcpy(&len, a->ring + pos, 4);
      if (len == WRAP) {
        p += a->cap - pos;
        continue;
      }
      int64_t t;
      memcpy(&t, a->ring + pos + 8, 8);
      r = append(a, a->ring + pos + HDR, len, t, &err);
      if (r == 0 && a->since_cp >= a->cp_events)
        r = checkpoint(a, &err);
      p += align8(HDR + len);
    }
    /* Refusals are recorded as soon as the queue had room again. */
    if (r == 0 && refused)
      r = append_own(a, "audit-overflow", refused, &err);
    if (r == 0 && a->since_cp > 0 &&
        (stop || want_cp || a->since_cp >= a->cp_events || now_ms() - a->last_cp_ms >= a->cp_ms))
      r = checkpoint(a, &err);
    if (r == 0)
      r = exec(a, "COMMIT", &err);
    if (r < 0)
      sqlite3_exec(a->db, "ROLLBACK", NULL, NULL, NULL);

    pthread_mutex_lock(&a->mu);
    if (r < 0) {
      /* Fail closed: from now on every producer is refused. The batch
       * rolled back is lost as a crash would lose it (docs/audit.md). */
      a->failed = r;
      snprintf(a->failure, sizeof a->failure, "%s", err.message);
      a->pending_refused += refused;
      pthread_cond_broadcast(&a->done);
      break;
    }
    a->head = to;
    a->committed = to;
    if (a->since_cp == 0)
      a->signed_upto = to;
    pthread_cond_broadcast(&a->done);
    if (stop && a->head == a->tail)
      break;
  }
  pthread_mutex_unlock(&a->mu);
  return NULL;
}

/* ------------------------------------------------------------------------
 * Opening: a new log, or the same log continued
 */

/* Creates the state directory. Safe because each missing component is made
 * 0700, so the key and the store are never in a directory others can
 * list or write, and an existing directory is used as it is (its owner
 * chose its mode). */
static int make_dirs(const char *db_path, shk_error *err)
{
  char dir[4096];
  if (snprintf(dir, sizeof dir, "%s", db_path) >= (int)sizeof dir)
    return shk__error_set(err, -EINVAL, "the audit log's path is too long");
  char *slash = strrchr(dir, '/');
  if (!slash || slash == dir)
    return 0;
  *slash = '\0';
  for (char *p = dir + 1;; p++) {
    if (*p == '/' || *p == '\0') {
      char c = *p;
      *p = '\0';
      if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return shk__error_set(err, -errno, "cannot create %s: %s", dir, strerror(errno));
      *p = c;
      if (!c)
        break;
    }
  }
  return 0;
}

static int load_tree(shk_audit *a, shk_error *err)
{
  /* The last checkpoint, which the rebuilt tree must match. */
  sqlite3_stmt *st = NULL;
  shk__checkpoint cp = { 0 };
  bool have_cp = false;
  int r = 0;
  if (sqlite3_prepare_v2(a->db, "SELECT size, note FROM checkpoints ORDER BY size DESC LIMIT 1",
                         -1, &st, NULL) != SQLITE_OK)
    return shk__error_set(err, -EIO, "cannot read the audit log: %s", sqlite3_errmsg(a->db));
  if (sqlite3_step(st) == SQLITE_ROW) {
    const char *note = sqlite3_column_blob(st, 1);
    r = shk__checkpoint_open(note ? note : "", (size_t)sqlite3_column_bytes(st, 1), &a->key, &cp,
                             err);
    if (r == 0 && (cp.size != (uint64_t)sqlite3_column_int64(st, 0) || strcmp(cp.origin, a->origin)))
      r = shk__error_set(err, -EIO, "the last checkpoint's size or origin is not its own");
    have_cp = true;
  }
  sqlite3_finalize(st);
  if (r < 0)
    return shk__error_set(err, -EIO, "the audit log's last checkpoint is bad (%s): run shinken "
                                     "audit verify", err ? err->message : "");
  if (sqlite3_prepare_v2(a->db, "SELECT seq, leaf FROM events ORDER BY seq", -1, &st, NULL) !=
      SQLITE_OK)
    return shk__error_set(err, -EIO, "cannot read the audit log: %s", sqlite3_errmsg(a->db));
  int rc;
  bool matched = !have_cp || cp.size == 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if ((uint64_t)sqlite3_column_int64(st, 0) != a->tree.size ||
        sqlite3_column_bytes(st, 1) != SHK__HASH) {
      r = shk__error_set(err, -EIO, "the audit log is damaged at event %llu: run shinken audit "
                                    "verify", (unsigned long long)a->tree.size);
      break;
    }
    shk__mt_compact_append(&a->tree, sqlite3_column_blob(st, 1));
    memcpy(a->prev, sqlite3_column_blob(st, 1), SHK__HASH);
    if (have_cp && a->tree.size == cp.size) {
      shk__hash root;
      shk__mt_compact_root(&a->tree, root);
      matched = memcmp(root, cp.root, SHK__HASH) == 0;
      if (!matched)
        break;
    }
  }
  if (r == 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
    r = shk__error_set(err, -EIO, "cannot read the audit log: %s", sqlite3_errmsg(a->db));
  sqlite3_finalize(st);
  if (r == 0 && !matched)
    r = shk__error_set(err, -EIO, "the audit log's events do not match its last checkpoint (size "
                                  "%llu): run shinken audit verify", (unsigned long long)cp.size);
  a->since_cp = have_cp ? a->tree.size - cp.size : a->tree.size;
  return r;
}

/* The origin a log named NAME has under the key K: the key's name, "/run/"
 * and NAME (shk_audit_opts.log_name). */
static int named_origin(const shk__note_key *k, const char *name, char *out, size_t len,
                        shk_error *err)
{
  size_t n = strlen(name);
  if (!n || n > 64 || strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") != n)
    return shk__error_set(err, -EINVAL, "the log name '%s' is not [a-z0-9-]{1,64}", name);
  int w = snprintf(out, len, "%s/run/%s", k->name, name);
  if (w < 0 || (size_t)w >= len || !shk__note_name_ok(out, (size_t)w))
    return shk__error_set(err, -EINVAL, "the log name '%s' makes too long an origin", name);
  return 0;
}

static int write_meta(shk_audit *a, const char *origin, const char *vkey, shk_error *err)
{
  sqlite3_stmt *st = NULL;
  int r = exec(a, "BEGIN", err);
  if (r == 0 && sqlite3_prepare_v2(a->db, "INSERT INTO meta(key, value) VALUES ('format', "
                                          "'shinken-audit-1'), ('origin', ?), ('key', ?)",
                                   -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_text(st, 1, origin, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, vkey, -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE)
      r = shk__error_set(err, -EIO, "cannot create the audit log: %s", sqlite3_errmsg(a->db));
  } else if (r == 0) {
    r = shk__error_set(err, -EIO, "cannot create the audit log: %s", sqlite3_errmsg(a->db));
  }
  sqlite3_finalize(st);
  if (r == 0)
    r = exec(a, "COMMIT", err);
  return r;
}

/* A named log (one `shinken run`'s) under a key that signs other logs too:
 * the key must exist already, and the log's origin is its own. A new log
 * under an existing key is safe here, unlike for the key's own log: its
 * checkpoints carry an origin no other log has (the name is new for every
 * log), and a checkpoint verifies only against a log of the same origin,
 * so no checkpoint of it can contradict another log's. */
static int setup_named(shk_audit *a, const shk_audit_opts *o, const char *key_path,
                       shk_error *err)
{
  char *origin = NULL, *vkey = NULL, *mine = NULL;
  int r = shk__note_key_load(key_path, &a->key, err);
  if (r == 0)
    r = named_origin(&a->key, o->log_name, a->origin, sizeof a->origin, err);
  if (r == 0 && shk__note_key_verifier(&a->key, &mine) < 0)
    r = -ENOMEM;
  if (r == 0 && (r = shk__audit_meta_get(a->db, "origin", &origin, err)) == -ENOENT)
    r = write_meta(a, a->origin, mine, err);
  else if (r == 0 && strcmp(origin, a->origin))
    r = shk__error_set(err, -EIO, "the log %s is '%s', not '%s'", o->db_path, origin, a->origin);
  else if (r == 0 && (r = shk__audit_meta_get(a->db, "key", &vkey, err)) == 0 && strcmp(vkey, mine))
    r = shk__error_set(err, -EIO, "the signing key %s is not this log's key (%s)", key_path, vkey);
  else if (r == 0)
    r = load_tree(a, err);
  free(origin);
  free(vkey);
  free(mine);
  return r;
}

static int setup_log(shk_audit *a, const shk_audit_opts *o, const char *key_path, shk_error *err)
{
  if (o->log_name)
    return setup_named(a, o, key_path, err);
  char *origin = NULL, *vkey = NULL;
  int r = shk__audit_meta_get(a->db, "origin", &origin, err);
  if (r == -ENOENT) {
    /* A new log. An existing key means a log under it existed and is gone:
     * a new one would sign checkpoints that contradict the old ones. */
    if (access(key_path, F_OK) == 0)
      return shk__error_set(err, -EIO, "the signing key %s exists but its log %s is empty or "
                                       "missing: move the key away to start a new log",
                            key_path, o->db_path);
    char gen[64];
    const char *name = o->origin;
    if (!name) {
      unsigned char rnd[8];
      if (RAND_bytes(rnd, sizeof rnd) != 1)
        return shk__error_set(err, -EIO, "OpenSSL cannot make random bytes");
      int n = snprintf(gen, sizeof gen, "shinken.audit/");
      for (int i = 0; i < 8; i++)
        n += snprintf(gen + n, sizeof gen - (size_t)n, "%02x", rnd[i]);
      name = gen;
    }
    if ((r = shk__note_key_generate(name, &a->key, err)) < 0)
      return r;
    if ((r = shk__note_key_save(key_path, &a->key, err)) < 0)
      return r;
    if (shk__note_key_verifier(&a->key, &vkey) < 0)
      return -ENOMEM;
    r = write_meta(a, a->key.name, vkey, err);
    free(vkey);
    snprintf(a->origin, sizeof a->origin, "%s", a->key.name);
    return r;
  }
  if (r < 0)
    return r;
  snprintf(a->origin, sizeof a->origin, "%s", origin);
  free(origin);
  if ((r = shk__note_key_load(key_path, &a->key, err)) < 0)
    return r;
  r = shk__audit_meta_get(a->db, "key", &vkey, err);
  char *mine = NULL;
  if (r == 0 && shk__note_key_verifier(&a->key, &mine) < 0)
    r = -ENOMEM;
  if (r == 0 && (strcmp(mine, vkey) || strcmp(a->key.name, a->origin)))
    r = shk__error_set(err, -EIO, "the signing key %s is not this log's key (%s)", key_path, vkey);
  free(mine);
  free(vkey);
  return r < 0 ? r : load_tree(a, err);
}

static void destroy(shk_audit *a)
{
  sqlite3_finalize(a->ins_event);
  sqlite3_finalize(a->ins_cp);
  sqlite3_close(a->db);
  /* Closed after SQLite's own descriptors: closing a descriptor of the
   * file drops the process's POSIX locks on it, which SQLite holds. */
  if (a->lock_fd >= 0)
    close(a->lock_fd);
  shk__abuf_free(&a->json);
  shk__abuf_free(&a->note);
  explicit_bzero(&a->key, sizeof a->key);
  free(a->ring);
  pthread_mutex_destroy(&a->mu);
  pthread_cond_destroy(&a->wake);
  pthread_cond_destroy(&a->done);
  free(a);
}

int shk_audit_open(const shk_audit_opts *o, shk_audit **out, shk_error *err)
{
  *out = NULL;
  shk_audit_opts opts = o ? *o : (shk_audit_opts){ 0 };
  char dbp[4096], keyp[4096];
  int r = 0;
  if (!opts.db_path) {
    if ((r = shk_audit_default_path(false, dbp, sizeof dbp, err)) < 0)
      return r;
    opts.db_path = dbp;
  }
  if ((r = shk__audit_key_path(opts.db_path, opts.key_path, keyp, sizeof keyp, err)) < 0)
    return r;
  if (opts.queue_bytes && opts.queue_bytes < 65536)
    return shk__error_set(err, -EINVAL, "the audit queue must have at least 65536 bytes");
  shk_audit *a = calloc(1, sizeof *a);
  if (!a)
    return -ENOMEM;
  pthread_mutex_init(&a->mu, NULL);
  pthread_cond_init(&a->wake, NULL);
  pthread_cond_init(&a->done, NULL);
  a->lock_fd = -1;
  a->cap = opts.queue_bytes ? align8(opts.queue_bytes) : 4u << 20;
  a->cp_events = opts.checkpoint_events ? opts.checkpoint_events : 1000;
  a->cp_ms = opts.checkpoint_ms ? opts.checkpoint_ms : 1000;
  a->last_cp_ms = now_ms();
  if (!(a->ring = malloc(a->cap))) {
    destroy(a);
    return -ENOMEM;
  }
  /* What agents were allowed to do is for the log's owner to read: a new
   * store is created 0600 before SQLite opens it (an empty file is an empty
   * database), and SQLite gives its WAL and index files the same mode. */
  if ((r = make_dirs(opts.db_path, err)) == 0) {
    int fd = open(opts.db_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0)
      close(fd);
    else if (errno != EEXIST)
      r = shk__error_set(err, -errno, "cannot create %s: %s", opts.db_path, strerror(errno));
  }
  /* One writer per log: two would both append the same sequence numbers to
   * trees each thinks it alone extends. The lock (flock, which SQLite's
   * POSIX locks do not touch) is held until the writer closes. */
  if (r == 0 && (a->lock_fd = open(opts.db_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
    r = shk__error_set(err, -errno, "cannot open %s: %s", opts.db_path, strerror(errno));
  if (r == 0 && flock(a->lock_fd, LOCK_EX | LOCK_NB) < 0)
    r = errno == EWOULDBLOCK
          ? shk__error_set(err, -EBUSY, "another process is writing the audit log %s", opts.db_path)
          : shk__error_set(err, -errno, "cannot lock %s: %s", opts.db_path, strerror(errno));
  if (r == 0)
    r = shk__audit_db_open(opts.db_path, true, false, &a->db, err);
  if (r == 0)
    r = exec(a, opts.no_fsync ? "PRAGMA synchronous=NORMAL" : "PRAGMA synchronous=FULL", err);
  if (r == 0)
    r = setup_log(a, &opts, keyp, err);
  if (r == 0 &&
      (sqlite3_prepare_v2(a->db, "INSERT INTO events(seq, entry, leaf) VALUES (?, ?, ?)", -1,
                          &a->ins_event, NULL) != SQLITE_OK ||
       sqlite3_prepare_v2(a->db, "INSERT INTO checkpoints(size, note) VALUES (?, ?)", -1,
                          &a->ins_cp, NULL) != SQLITE_OK))
    r = shk__error_set(err, -EIO, "cannot prepare the audit store: %s", sqlite3_errmsg(a->db));
  /* The start of every writer is itself an event, so a crash shows as a
   * start with no stop before it. */
  if (r == 0) {
    shk_error e2 = { 0 };
    if ((r = exec(a, "BEGIN", err)) == 0 && (r = append_own(a, "audit-start", 0, &e2)) == 0)
      r = exec(a, "COMMIT", err);
    else if (r < 0 && err)
      *err = e2;
  }
  if (r == 0) {
    if ((r = -pthread_create(&a->thread, NULL, writer, a)) < 0)
      shk__error_set(err, r, "cannot start the audit writer: %s", strerror(-r));
    else
      a->started = true;
  }
  if (r < 0) {
    destroy(a);
    return r;
  }
  *out = a;
  return 0;
}

int shk_audit_close(shk_audit *a, shk_error *err)
{
  if (!a)
    return 0;
  int r = 0;
  if (a->started) {
    /* The stop event waits for room like no producer may: closing is the
     * one place that must not give up. */
    shk_audit_event e;
    shk_audit_event_init(&e, "audit-stop");
    shk_audit_int(&e, SHK_AUDIT_COUNT, (int64_t)shk_audit_refused(a));
    while ((r = shk_audit_emit(a, &e, err)) == -EBUSY)
      usleep(1000);
    pthread_mutex_lock(&a->mu);
    a->stop = true;
    pthread_cond_signal(&a->wake);
    pthread_mutex_unlock(&a->mu);
    pthread_join(a->thread, NULL);
    if (a->failed)
      r = shk__error_set(err, a->failed, "the audit log cannot be written: %s", a->failure);
  }
  destroy(a);
  return r;
}
