/* SPDX-License-Identifier: Apache-2.0 */
/* The Timeline's stream (panel-stream.h).
 *
 * Why a thread of its own: the audit store has one writer, the manager,
 * and a reader may have to wait for the writer's lock (SQLite's busy
 * handler sleeps up to tens of milliseconds at a time). Done on the
 * panel's event loop, that wait would delay every request behind it, a
 * human's click on Approve among them. Here the wait costs only this
 * thread; the loop gets each batch of new events as one line, through an
 * eventfd, as it gets the card stream's. */
#include "manager/panel-stream.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "manager/panel-internal.h"
#include "shinken/audit.h"

#define POLL_MS 250
#define MAX_EVENTS 200
/* Batches waiting for the loop, at most this many bytes: past it the
 * thread waits and reads the same events again later, so none is lost. */
#define MAX_PENDING (4u << 20)

struct shk__audit_stream {
  char *db;
  shk__audit_stream_fn fn;
  void *ud;
  int fd;
  struct event *ev;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool stop, watching;   /* under mu */
  char *pend;            /* batches, each ending in '\n', under mu */
  size_t n_pend, cap_pend;
};

/* Adds one batch; false when the loop has too much waiting already. */
static bool queue(shk__audit_stream *s, const char *text, size_t len)
{
  bool ok = false;
  pthread_mutex_lock(&s->mu);
  if (s->n_pend + len + 1 <= MAX_PENDING) {
    if (s->n_pend + len + 1 > s->cap_pend) {
      size_t cap = (s->n_pend + len + 1) * 2;
      char *np = realloc(s->pend, cap);
      if (np) {
        s->pend = np;
        s->cap_pend = cap;
      }
    }
    if (s->n_pend + len + 1 <= s->cap_pend) {
      memcpy(s->pend + s->n_pend, text, len);
      s->pend[s->n_pend + len] = '\n';
      s->n_pend += len + 1;
      ok = true;
    }
  }
  pthread_mutex_unlock(&s->mu);
  if (ok) {
    uint64_t one = 1;
    ssize_t w = write(s->fd, &one, sizeof one);
    (void)w; /* an eventfd write fails only when its counter would overflow: then it is set anyway */
  }
  return ok;
}

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
        if (text && queue(s, text, strlen(text)))
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

/* On the loop's thread: hands over every batch waiting. */
static void deliver(evutil_socket_t fd, short what, void *arg)
{
  shk__audit_stream *s = arg;
  uint64_t n;
  ssize_t rd = read(s->fd, &n, sizeof n);
  (void)rd;
  pthread_mutex_lock(&s->mu);
  char *buf = s->pend;
  size_t len = s->n_pend;
  s->pend = NULL;
  s->n_pend = s->cap_pend = 0;
  pthread_mutex_unlock(&s->mu);
  for (size_t off = 0; off < len;) {
    char *nl = memchr(buf + off, '\n', len - off);
    size_t l = nl ? (size_t)(nl - (buf + off)) : len - off;
    if (l)
      s->fn(s->ud, buf + off, l);
    off += l + 1;
  }
  free(buf);
}

static void stream_free(shk__audit_stream *s)
{
  if (s->ev)
    event_free(s->ev);
  if (s->fd >= 0)
    close(s->fd);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s->pend);
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
  s->fn = fn;
  s->ud = ud;
  s->fd = -1;
  pthread_mutex_init(&s->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s->cv, &ca);
  pthread_condattr_destroy(&ca);
  s->db = strdup(db);
  s->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  s->ev = s->fd >= 0 ? event_new(base, s->fd, EV_READ | EV_PERSIST, deliver, s) : NULL;
  if (!s->db || !s->ev || event_add(s->ev, NULL)) {
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
