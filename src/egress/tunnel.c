/* SPDX-License-Identifier: Apache-2.0 */
/* The byte relay under every tunnel and forwarded request: splice(2)
 * through a pipe per direction, so bulk data never crosses into userspace.
 * Flow control is the kernel's: a direction stops reading while its pipe
 * holds bytes the other socket will not take yet. */
#include "egress/egress-internal.h"

#include "common/common.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CHUNK (1 << 20)

struct dir {
  shk__relay *r;
  int from, to;
  int pipe[2];
  size_t in_pipe;
  char *pre;
  size_t pre_len, pre_off, pre_cap;
  uint64_t limit;
  bool chunked;
  shk__chunked ck;
  bool eof;  /* nothing more will be read from FROM */
  bool done; /* everything read has been written */
  struct event *rev, *wev;
};

struct shk__relay {
  struct dir d[2]; /* 0: client to upstream, 1: upstream to client */
  bool http, finished;
  void (*done)(void *);
  void *arg;
};

static void finish(shk__relay *r)
{
  if (r->finished)
    return;
  r->finished = true;
  for (int i = 0; i < 2; i++) {
    event_del(r->d[i].rev);
    event_del(r->d[i].wev);
  }
  r->done(r->arg);
}

static void dir_done(struct dir *d)
{
  shk__relay *r = d->r;
  d->done = true;
  event_del(d->rev);
  event_del(d->wev);
  /* A tunnel passes the half-close on; a plain HTTP request does not, as
   * some origins drop the whole exchange on a half-close. */
  if (!r->http || d == &r->d[1])
    shutdown(d->to, SHUT_WR);
  if (r->d[1].done && (r->d[0].done || r->http))
    finish(r);
}

/* Why wiped: the bytes sent first may be a plain-HTTP head the rewrite
 * hook rebuilt with a brokered secret in it; freed memory keeps it no
 * longer than the relay needs it. */
static void wipe_free(char *p, size_t n)
{
  if (p)
    explicit_bzero(p, n);
  free(p);
}

/* Sends what is left of PRE: 1 when it is all sent, 0 when the socket is
 * full, -1 on an error. */
static int flush_pre(struct dir *d)
{
  while (d->pre_off < d->pre_len) {
    ssize_t n = send(d->to, d->pre + d->pre_off, d->pre_len - d->pre_off, MSG_NOSIGNAL);
    if (n < 0)
      return errno == EAGAIN || errno == EINTR ? 0 : -1;
    d->pre_off += (size_t)n;
  }
  return 1;
}

static void wait_for(struct dir *d, bool write)
{
  event_del(write ? d->rev : d->wev);
  event_add(write ? d->wev : d->rev, NULL);
}

#define CHUNKED_BUF 16384

/* A chunked request body passes through userspace, so that its framing is
 * read and the relay stops exactly where the body ends. Malformed framing
 * ends the exchange. */
static int pump_chunked(struct dir *d)
{
  if (d->pre_cap < CHUNKED_BUF) {
    wipe_free(d->pre, d->pre_cap);
    d->pre_cap = 0;
    d->pre = malloc(CHUNKED_BUF);
    if (!d->pre)
      return -1; /* out of memory ends the exchange, as bad framing does */
    d->pre_cap = CHUNKED_BUF;
  }
  for (int round = 0; round < 8; round++) {
    if (shk__chunked_done(&d->ck)) {
      d->eof = true;
      dir_done(d);
      return 0;
    }
    ssize_t n = recv(d->from, d->pre, CHUNKED_BUF, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
      break;
    if (n <= 0)
      return -1; /* the body ended before its last chunk */
    const char *why;
    long k = shk__chunked_feed(&d->ck, d->pre, (size_t)n, &why);
    if (k < 0)
      return -1;
    d->pre_len = (size_t)k;
    d->pre_off = 0;
    int r = flush_pre(d);
    if (r <= 0) {
      if (r == 0)
        wait_for(d, true);
      return r;
    }
  }
  wait_for(d, false);
  return 0;
}

/* Moves what can move now; returns -1 on a socket error. */
static int pump(struct dir *d)
{
  int pre = flush_pre(d);
  if (pre < 0)
    return -1;
  if (pre == 0)
    goto wait_write;
  if (d->chunked)
    return pump_chunked(d);
  /* A few rounds per wake-up, so one fast stream cannot starve the other
   * connections on the loop; the level-triggered event brings it back. */
  for (int round = 0; round < 8; round++) {
    while (d->in_pipe > 0) {
      ssize_t n = splice(d->pipe[0], NULL, d->to, NULL, d->in_pipe,
                         SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR)
          goto wait_write;
        return -1;
      }
      d->in_pipe -= (size_t)n;
    }
    if (d->eof || d->limit == 0) {
      d->eof = true;
      dir_done(d);
      return 0;
    }
    size_t want = d->limit < CHUNK ? (size_t)d->limit : CHUNK;
    ssize_t n = splice(d->from, NULL, d->pipe[1], NULL, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR)
        break;
      return -1;
    }
    if (n == 0)
      d->eof = true;
    d->in_pipe += (size_t)n;
    if (d->limit != UINT64_MAX)
      d->limit -= (uint64_t)n;
  }
  /* Out of rounds with bytes still in the pipe: the source may stay quiet
   * now, so come back when the destination can take them. */
  wait_for(d, d->in_pipe > 0);
  return 0;
wait_write:
  wait_for(d, true);
  return 0;
}

static void on_event(evutil_socket_t fd, short what, void *arg)
{
  struct dir *d = arg;
  if (d->done || d->r->finished)
    return;
  if (pump(d) < 0)
    finish(d->r);
}

static int dir_init(shk__relay *r, struct event_base *base, int i, int from, int to, char *pre,
                    size_t pre_len, uint64_t limit)
{
  struct dir *d = &r->d[i];
  d->r = r;
  d->from = from;
  d->to = to;
  d->pre = pre;
  d->pre_len = d->pre_cap = pre_len;
  d->limit = limit;
  if (pipe2(d->pipe, O_CLOEXEC | O_NONBLOCK) < 0)
    return -errno;
  /* A bigger pipe means fewer wake-ups per megabyte; failure is harmless. */
  (void)fcntl(d->pipe[1], F_SETPIPE_SZ, CHUNK);
  d->rev = event_new(base, from, EV_READ | EV_PERSIST, on_event, d);
  d->wev = event_new(base, to, EV_WRITE | EV_PERSIST, on_event, d);
  return d->rev && d->wev ? 0 : -ENOMEM;
}

shk__relay *shk__relay_new(struct event_base *base, const shk__relay_opts *o)
{
  shk__relay *r = calloc(1, sizeof *r);
  if (!r) {
    /* What the relay owns from the call on is released on failure too. */
    close(o->client_fd);
    close(o->up_fd);
    wipe_free(o->c2u_pre, o->c2u_pre_len);
    free(o->u2c_pre);
    return NULL;
  }
  r->http = o->http;
  r->done = o->done;
  r->arg = o->arg;
  for (int i = 0; i < 2; i++)
    r->d[i].pipe[0] = r->d[i].pipe[1] = -1;
  r->d[1].pre = o->u2c_pre; /* freed with R even when the first direction fails */
  if (dir_init(r, base, 0, o->client_fd, o->up_fd, o->c2u_pre, o->c2u_pre_len, o->c2u_limit) < 0 ||
      dir_init(r, base, 1, o->up_fd, o->client_fd, o->u2c_pre, o->u2c_pre_len, UINT64_MAX) < 0) {
    shk__relay_free(r);
    return NULL;
  }
  r->d[0].chunked = o->c2u_chunked;
  r->d[0].ck = o->chunk;
  /* Start both directions from the loop (PRE may be waiting, and data may
   * already be readable), so DONE never runs before the caller has R. */
  event_active(r->d[0].rev, EV_READ, 0);
  event_active(r->d[1].rev, EV_READ, 0);
  return r;
}

void shk__relay_free(shk__relay *r)
{
  if (!r)
    return;
  for (int i = 0; i < 2; i++) {
    struct dir *d = &r->d[i];
    if (d->rev)
      event_free(d->rev);
    if (d->wev)
      event_free(d->wev);
    if (d->pipe[0] >= 0)
      close(d->pipe[0]);
    if (d->pipe[1] >= 0)
      close(d->pipe[1]);
    wipe_free(d->pre, d->pre_cap);
  }
  if (r->d[0].from >= 0)
    close(r->d[0].from);
  if (r->d[0].to >= 0)
    close(r->d[0].to);
  free(r);
}
