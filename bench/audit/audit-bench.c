/* SPDX-License-Identifier: Apache-2.0 */
/* The audit log's speed, each measurement beside its floor in the same run.
 *
 *   audit-bench append DIR N    one producer emits N events as fast as the
 *                               queue takes them (on -EBUSY it yields and
 *                               retries), the writer
 *                               commits with fsync and signs a checkpoint
 *                               every 1000 events; the time runs until
 *                               close has committed the last one. The floor:
 *                               the same N canonical entries inserted into a
 *                               bare SQLite table in batches of the same
 *                               size, same journal and sync settings, no
 *                               hashing, no signing, no queue.
 *                               Also each emit's latency (median, p99, max):
 *                               the producer's cost, which is what the data
 *                               plane pays.
 *   audit-bench capacity DIR    the writer alone: held while a 64 MiB queue
 *                               fills, then timed until it has committed it
 *                               all (three rounds); the floor: the same rows
 *                               in bare SQLite transactions of the same size.
 *   audit-bench verify DIR      verify the log DIR/audit.db (made by append);
 *                               the floor: reading every row and hashing it.
 *
 * append runs twice: with fsync on every commit (the default) and without
 * (SQLite synchronous=NORMAL, which a process crash cannot hurt), so that
 * what the disk costs and what the writer costs can be told apart.
 *
 * Prints one line per measurement: name, value, unit, and the ratio to the
 * floor. Never fails on a number. */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sched.h>
#include <unistd.h>

#include <openssl/sha.h>

#include "audit/audit-internal.h" /* shk__audit_pause: hold the writer while the queue fills */
#include "shinken/audit.h"

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void event(shk_audit_event *e, unsigned long i)
{
  char session[32], handle[32];
  snprintf(session, sizeof session, "s-%lu", i % 7);
  snprintf(handle, sizeof handle, "h-%08lx", i * 2654435761u);
  if (i % 2) {
    shk_audit_event_init(e, "proxy-verdict");
    shk_audit_str(e, SHK_AUDIT_SESSION, session);
    shk_audit_str(e, SHK_AUDIT_PROTOCOL, "connect");
    shk_audit_int(e, SHK_AUDIT_CONNECTION, (int64_t)i);
    shk_audit_str(e, SHK_AUDIT_HOST, "registry.npmjs.org");
    shk_audit_int(e, SHK_AUDIT_PORT, 443);
    shk_audit_str(e, SHK_AUDIT_DECISION, "allow");
    shk_audit_str(e, SHK_AUDIT_RULE, handle);
    return;
  }
  shk_audit_event_init(e, "grant");
  shk_audit_str(e, SHK_AUDIT_SESSION, session);
  shk_audit_str(e, SHK_AUDIT_AGENT_ID, "agent-1");
  shk_audit_str(e, SHK_AUDIT_CLASS, "net.egress");
  shk_audit_str(e, SHK_AUDIT_SCOPE, "{\"domains\":[\"registry.npmjs.org\"]}");
  shk_audit_str(e, SHK_AUDIT_DECISION, "allow");
  shk_audit_str(e, SHK_AUDIT_POLICY, "project-allow-registry");
  shk_audit_str(e, SHK_AUDIT_TIER, "project");
  shk_audit_str(e, SHK_AUDIT_OUTCOME, "granted");
  shk_audit_str(e, SHK_AUDIT_HANDLE, handle);
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void die(const char *what, const char *msg)
{
  fprintf(stderr, "audit-bench: %s: %s\n", what, msg);
  exit(1);
}

/* The floor: a bare table, the same rows, committed in batches of `batch`. */
static double floor_append(const char *path, unsigned long n, unsigned batch, bool fsync)
{
  sqlite3 *db;
  if (sqlite3_open(path, &db) != SQLITE_OK)
    die(path, sqlite3_errmsg(db));
  sqlite3_exec(db, fsync ? "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                         : "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
               NULL, NULL, NULL);
  sqlite3_exec(db, "CREATE TABLE t(seq INTEGER PRIMARY KEY, entry TEXT, leaf BLOB)", NULL, NULL,
               NULL);
  sqlite3_stmt *st;
  sqlite3_prepare_v2(db, "INSERT INTO t VALUES (?, ?, ?)", -1, &st, NULL);
  char entry[512];
  unsigned char leaf[32] = { 0 };
  double t0 = now();
  for (unsigned long i = 0; i < n; i++) {
    if (i % batch == 0)
      sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
    int len = snprintf(entry, sizeof entry,
                       "{\"event.name\":\"grant\",\"gen_ai.agent.id\":\"agent-1\","
                       "\"gen_ai.conversation.id\":\"s-%lu\",\"prev\":\"%064lu\",\"seq\":%lu,"
                       "\"shinken.class\":\"net.egress\",\"shinken.decision\":\"allow\","
                       "\"shinken.handle.id\":\"h-%08lx\",\"time\":\"2026-01-01T00:00:00.000000000Z\"}",
                       i % 7, i, i, i);
    sqlite3_bind_int64(st, 1, (sqlite3_int64)i);
    sqlite3_bind_text(st, 2, entry, len, SQLITE_STATIC);
    sqlite3_bind_blob(st, 3, leaf, 32, SQLITE_STATIC);
    sqlite3_step(st);
    sqlite3_reset(st);
    if (i % batch == batch - 1 || i == n - 1)
      sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
  }
  double t = now() - t0;
  sqlite3_finalize(st);
  sqlite3_close(db);
  return t;
}

static int append(const char *dir, unsigned long n, bool fsync)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, fsync ? "audit.db" : "nosync/audit.db");
  shk_audit_opts o = { .db_path = path, .checkpoint_events = 1000, .checkpoint_ms = 1000,
                       .no_fsync = !fsync };
  shk_audit *a;
  shk_error err;
  if (shk_audit_open(&o, &a, &err) < 0)
    die("open", err.message);
  double *lat = malloc(n * sizeof *lat);
  if (!lat)
    die("malloc", "out of memory");
  unsigned long busy = 0;
  double t0 = now();
  for (unsigned long i = 0; i < n; i++) {
    shk_audit_event e;
    double s = now();
    event(&e, i);
    int r;
    /* A full queue: yield and retry (a real producer refuses the action
     * instead); the spinning producer competes with the writer for the
     * cores, which `capacity` leaves out. A refused attempt is not the
     * accepted one's latency. */
    while ((r = shk_audit_emit(a, &e, &err)) == -EBUSY) {
      busy++;
      sched_yield();
      s = now();
    }
    lat[i] = now() - s;
    if (r < 0)
      die("emit", err.message);
  }
  if (shk_audit_close(a, &err) < 0)
    die("close", err.message);
  double t = now() - t0;
  qsort(lat, n, sizeof *lat, cmp_double);
  char fpath[4096];
  snprintf(fpath, sizeof fpath, "%s/floor-%s.db", dir, fsync ? "sync" : "nosync");
  double tf = floor_append(fpath, n, 1000, fsync);
  const char *mode = fsync ? "fsync" : "no fsync";
  printf("append (%-8s)  %10.0f events/s   floor %10.0f events/s   ratio %.2f\n", mode, n / t,
         n / tf, t / tf);
  printf("  refusals         %10lu (the producer retried; each is counted in the log)\n", busy);
  printf("  emit latency     median %.2f us  p99 %.2f us  max %.1f us (build + queue, per event)\n",
         lat[n / 2] * 1e6, lat[n * 99 / 100] * 1e6, lat[n - 1] * 1e6);
  free(lat);
  return 0;
}

/* The writer's sustained capacity: the writer is held while one producer
 * fills a 64 MiB queue, then let go, and the time it takes to commit all of
 * it is measured; several rounds, so checkpoints and WAL growth are in it.
 * The floor: the same number of rows in one bare SQLite transaction. */
static int capacity(const char *dir, bool fsync)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/capacity-%s/audit.db", dir, fsync ? "sync" : "nosync");
  shk_audit_opts o = { .db_path = path, .checkpoint_events = 1000, .checkpoint_ms = 1000,
                       .queue_bytes = 64u << 20, .no_fsync = !fsync };
  shk_audit *a;
  shk_error err;
  if (shk_audit_open(&o, &a, &err) < 0)
    die("open", err.message);
  double total = 0, cpu = 0;
  unsigned long n = 0, round_n = 0;
  for (int round = 0; round < 3; round++) {
    shk__audit_pause(a, true);
    unsigned long k = 0;
    for (;; k++) {
      shk_audit_event e;
      event(&e, n + k);
      if (shk_audit_emit(a, &e, &err) == -EBUSY)
        break;
    }
    double t0 = now(), c0 = cpu_now();
    shk__audit_pause(a, false);
    if (shk_audit_flush(a, false, &err) < 0)
      die("flush", err.message);
    total += now() - t0;
    /* The producer sleeps in the flush: the process's CPU time is the
     * writer's (and SQLite's system calls), whatever else the machine
     * runs, so this figure moves less with the load than the rate. */
    cpu += cpu_now() - c0;
    n += k;
    round_n = k;
  }
  if (shk_audit_close(a, &err) < 0)
    die("close", err.message);
  char fpath[4096];
  snprintf(fpath, sizeof fpath, "%s/capacity-floor-%s.db", dir, fsync ? "sync" : "nosync");
  double tf = floor_append(fpath, n, (unsigned)round_n, fsync);
  printf("writer (%-8s)  %10.0f events/s   floor %10.0f events/s   ratio %.2f   (%lu events in "
         "batches of %lu)\n", fsync ? "fsync" : "no fsync", n / total, n / tf, total / tf, n,
         round_n);
  printf("  writer CPU       %10.2f us per event (%.0f events per CPU second; wall/CPU %.2f)\n",
         cpu / n * 1e6, n / cpu, total / cpu);
  return 0;
}

static int verify(const char *dir)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/audit.db", dir);
  shk_audit_verify_opts o = { .db_path = path };
  shk_audit_report rep;
  shk_error err;
  double t0 = now();
  if (shk_audit_verify(&o, &rep, &err) < 0)
    die("verify", err.message);
  double t = now() - t0;
  if (rep.tampered)
    die("verify", rep.problem);
  /* The floor: every row read and its entry hashed once. */
  sqlite3 *db;
  sqlite3_stmt *st;
  sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL);
  sqlite3_prepare_v2(db, "SELECT seq, entry, leaf FROM events ORDER BY seq", -1, &st, NULL);
  unsigned char h[32], acc = 0;
  t0 = now();
  while (sqlite3_step(st) == SQLITE_ROW) {
    SHA256(sqlite3_column_blob(st, 1), (size_t)sqlite3_column_bytes(st, 1), h);
    acc ^= h[0];
  }
  double tf = now() - t0;
  sqlite3_finalize(st);
  sqlite3_close(db);
  printf("verify             %10.2f s for %llu events, %llu checkpoints   floor %.2f s   ratio %.2f%s\n",
         t, (unsigned long long)rep.events, (unsigned long long)rep.checkpoints, tf, t / tf,
         acc == 0xff ? " " : "");
  return 0;
}

int main(int argc, char **argv)
{
  if (argc == 4 && !strcmp(argv[1], "append"))
    return append(argv[2], strtoul(argv[3], NULL, 10), true) ||
           append(argv[2], strtoul(argv[3], NULL, 10), false);
  if (argc == 3 && !strcmp(argv[1], "capacity"))
    return capacity(argv[2], true) || capacity(argv[2], false);
  if (argc == 3 && !strcmp(argv[1], "verify"))
    return verify(argv[2]);
  fprintf(stderr, "usage: audit-bench append DIR N | capacity DIR | verify DIR\n");
  return 1;
}
