/* SPDX-License-Identifier: Apache-2.0 */
/* Lines from any thread to one event loop (line-queue.h): a buffer under a
 * mutex and an eventfd that wakes the loop, which takes the whole buffer
 * at once and hands it over line by line. Why bounded: a loop that cannot
 * keep up (a page that stopped reading) must cost the producer a refused
 * line, never the manager's memory. */
#include "manager/line-queue.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct shk__line_queue {
  shk__line_fn fn;
  void *ud;
  size_t max;
  int fd;
  struct event *ev;
  pthread_mutex_t mu;
  char *pend; /* lines, each ending in '\n', under mu */
  size_t n_pend, cap_pend;
};

bool shk__line_queue_push(shk__line_queue *q, const char *line, size_t len)
{
  if (len && line[len - 1] == '\n')
    len--;
  bool ok = false;
  pthread_mutex_lock(&q->mu);
  if (q->n_pend + len + 1 <= q->max) {
    if (q->n_pend + len + 1 > q->cap_pend) {
      size_t cap = (q->n_pend + len + 1) * 2;
      char *np = realloc(q->pend, cap);
      if (np) {
        q->pend = np;
        q->cap_pend = cap;
      }
    }
    if (q->n_pend + len + 1 <= q->cap_pend) {
      memcpy(q->pend + q->n_pend, line, len);
      q->pend[q->n_pend + len] = '\n';
      q->n_pend += len + 1;
      ok = true;
    }
  }
  pthread_mutex_unlock(&q->mu);
  if (ok) {
    uint64_t one = 1;
    ssize_t w = write(q->fd, &one, sizeof one);
    (void)w; /* an eventfd write fails only when its counter would overflow: then it is set anyway */
  }
  return ok;
}

/* On the loop's thread: hands over every line waiting. */
static void deliver(evutil_socket_t fd, short what, void *arg)
{
  shk__line_queue *q = arg;
  uint64_t n;
  ssize_t rd = read(q->fd, &n, sizeof n);
  (void)rd;
  pthread_mutex_lock(&q->mu);
  char *buf = q->pend;
  size_t len = q->n_pend;
  q->pend = NULL;
  q->n_pend = q->cap_pend = 0;
  pthread_mutex_unlock(&q->mu);
  for (size_t off = 0; off < len;) {
    char *nl = memchr(buf + off, '\n', len - off);
    size_t l = nl ? (size_t)(nl - (buf + off)) : len - off;
    if (l)
      q->fn(q->ud, buf + off, l);
    off += l + 1;
  }
  free(buf);
}

void shk__line_queue_free(shk__line_queue *q)
{
  if (!q)
    return;
  if (q->ev)
    event_free(q->ev);
  if (q->fd >= 0)
    close(q->fd);
  pthread_mutex_destroy(&q->mu);
  free(q->pend);
  free(q);
}

int shk__line_queue_new(struct event_base *base, size_t max, shk__line_fn fn, void *ud, shk__line_queue **out)
{
  *out = NULL;
  shk__line_queue *q = calloc(1, sizeof *q);
  if (!q)
    return -ENOMEM;
  q->fn = fn;
  q->ud = ud;
  q->max = max;
  pthread_mutex_init(&q->mu, NULL);
  q->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  q->ev = q->fd >= 0 ? event_new(base, q->fd, EV_READ | EV_PERSIST, deliver, q) : NULL;
  if (!q->ev || event_add(q->ev, NULL)) {
    shk__line_queue_free(q);
    return -ENOMEM;
  }
  *out = q;
  return 0;
}
