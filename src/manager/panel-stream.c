/* SPDX-License-Identifier: Apache-2.0 */
/* The Timeline's stream (panel-stream.h).
 *
 * Why a thread of its own: the audit store has one writer, the manager,
 * and a reader may have to wait for the writer's lock (SQLite's busy
 * handler sleeps up to tens of milliseconds at a time). Done on the
 * panel's event loop, that wait would delay every request behind it, a
 * human's click on Approve among them. Here the wait costs only this
 * thread; the loop gets each batch of new events as one line, through a
 * line queue, as it gets the card stream's. */
#include "manager/panel-stream.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "manager/line-queue.h"
#include "manager/panel-internal.h"
#include "shinken/audit.h"

#define POLL_MS 250
#define MAX_EVENTS 200
/* Batches waiting for the loop, at most this many bytes: past it the
 * thread waits and reads the same events again later, so none is lost. */
#define MAX_PENDING (4u << 20)

struct shk__audit_stream {
  char *db;
  shk__line_queue *lines; /* batches to the loop, each one line */
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool stop, watching;   /* under mu */
};

static void *run(void *arg)
{
  shk__audit_stream *s = arg;
  shk_audit_reader *r = NULL;
  uint64_t seen = 0;
  pthread_mutex_lock(&s->mu);
  while (!s->stop) {
    if (s->watching) {
      pthread_mutex_unlock(&s->mu);
      if (!r)
        shk_audit_reader_open(s->db, &r, NULL);
      uint64_t count;
      if (r && shk_audit_reader_count(r, &count, NULL) == 0 && count != seen) {
        json_t *fresh = shk__panel_timeline(r, seen, MAX_EVENTS);
        char *text = json_is_true(json_object_get(fresh, "ok")) ? json_dumps(fresh, JSON_COMPACT) : NULL;
        json_decref(fresh);
        if (text && shk__line_queue_push(s->lines, text, strlen(text)))
          seen = count;
        free(text);
      }
      pthread_mutex_lock(&s->mu);
    }
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += POLL_MS * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    if (!s->stop)
      pthread_cond_timedwait(&s->cv, &s->mu, &until);
  }
  pthread_mutex_unlock(&s->mu);
  if (r)
    shk_audit_reader_close(r);
  return NULL;
}

static void stream_free(shk__audit_stream *s)
{
  shk__line_queue_free(s->lines);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s->db);
  free(s);
}

int shk__audit_stream_start(struct event_base *base, const char *db, shk__audit_stream_fn fn, void *ud,
                            shk__audit_stream **out)
{
  *out = NULL;
  shk__audit_stream *s = calloc(1, sizeof *s);
  if (!s)
    return -ENOMEM;
  pthread_mutex_init(&s->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s->cv, &ca);
  pthread_condattr_destroy(&ca);
  s->db = strdup(db);
  if (!s->db || shk__line_queue_new(base, MAX_PENDING, fn, ud, &s->lines)) {
    stream_free(s);
    return -ENOMEM;
  }
  int r = pthread_create(&s->thread, NULL, run, s);
  if (r) {
    stream_free(s);
    return -r;
  }
  *out = s;
  return 0;
}

void shk__audit_stream_watch(shk__audit_stream *s, bool on)
{
  if (!s)
    return;
  pthread_mutex_lock(&s->mu);
  s->watching = on;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

void shk__audit_stream_stop(shk__audit_stream *s)
{
  if (!s)
    return;
  pthread_mutex_lock(&s->mu);
  s->stop = true;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->thread, NULL);
  stream_free(s);
}
