/* SPDX-License-Identifier: Apache-2.0 */
/* The panel's HTTP connections, counted and capped (panel-conns.h).
 *
 * evhttp makes each connection's bufferevent through a callback
 * (evhttp_set_bevcb): that is where a new connection is counted. Its end
 * is evhttp's close callback of the connection, which evhttp calls when it
 * frees one; the connection is reached from its bufferevent, whose
 * callbacks' argument evhttp makes the connection, once the accept that
 * made it is over (an event made active in the bevcb runs before the loop
 * looks for I/O again, so no request can be read on it before then). A
 * reference on the bufferevent, held as long as it is counted, keeps it,
 * and its descriptor, alive whatever evhttp does: a bufferevent evhttp let
 * go of without the close callback (its callbacks cleared) is found and
 * let go of here, and no descriptor number is reused while it is counted.
 *
 * Why this is safe: the panel's connections can never hold more than the
 * cap (and a small slack, for connections being closed) of the manager's
 * descriptors, so a local user who floods the port with idle connections
 * cannot starve the control socket or the sessions' proxies of them. The
 * connections closed to make room are the oldest that never carried a
 * logged-in browser's cookie, so the flood closes itself, and a human's
 * page, whose connections have shown the cookie, stays. A connection is
 * closed by shutting its socket down, never by freeing what evhttp owns:
 * evhttp sees the end of the stream and frees the connection itself. */
#include "manager/panel-conns.h"

#include <errno.h>
#include <event2/bufferevent.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>

/* Connections being closed may make the count go over the cap by this
 * many; beyond it nothing more is accepted until they are gone (they wait
 * in the kernel's backlog meanwhile). */
#define SLACK 16

typedef struct conn {
  struct conn *prev, *next;         /* oldest first */
  struct bufferevent *bev;
  struct evhttp_connection *evcon;  /* NULL until adopted */
  bool trusted, closing;
} conn;

struct shk__panel_conns {
  struct evconnlistener *listener;
  struct event *adopt;
  shk__panel_close_fn on_close;
  void *ud;
  unsigned max, n;
  bool paused;
  conn *head, *tail;
};

static void unlink_conn(shk__panel_conns *c, conn *k)
{
  if (k->prev)
    k->prev->next = k->next;
  else
    c->head = k->next;
  if (k->next)
    k->next->prev = k->prev;
  else
    c->tail = k->prev;
  c->n--;
  bufferevent_decref(k->bev);
  free(k);
  if (c->paused && c->listener && c->n < c->max + SLACK) {
    c->paused = false;
    evconnlistener_enable(c->listener);
  }
}

/* evhttp frees the connection CONN. */
static void conn_closed(struct evhttp_connection *evcon, void *arg)
{
  shk__panel_conns *c = arg;
  if (c->on_close)
    c->on_close(evcon, c->ud);
  for (conn *k = c->head; k; k = k->next)
    if (k->evcon == evcon) {
      unlink_conn(c, k);
      return;
    }
}

/* After the accepts, and before making room: each new bufferevent's
 * connection gets the close callback, and those evhttp let go of (freeing
 * or resetting a connection clears its bufferevent's callbacks) are
 * forgotten, their descriptors closed by the last reference. */
static void adopt_cb(evutil_socket_t fd, short what, void *arg)
{
  shk__panel_conns *c = arg;
  for (conn *k = c->head, *next; k; k = next) {
    next = k->next;
    bufferevent_event_cb ecb = NULL;
    void *cbarg = NULL;
    bufferevent_getcb(k->bev, NULL, NULL, &ecb, &cbarg);
    if (!ecb || !cbarg) {
      unlink_conn(c, k);
    } else if (!k->evcon) {
      k->evcon = cbarg;
      evhttp_connection_set_closecb(k->evcon, conn_closed, c);
    }
  }
}

/* Closes the oldest connection that no logged-in browser used, or, when
 * every one did, the oldest of all: a new connection is always let in, so
 * that a human's page can reach the panel however many are open. */
static void make_room(shk__panel_conns *c)
{
  conn *victim = NULL;
  for (conn *k = c->head; k && !victim; k = k->next)
    if (k->evcon && !k->closing && !k->trusted)
      victim = k;
  for (conn *k = c->head; k && !victim; k = k->next)
    if (k->evcon && !k->closing)
      victim = k;
  if (!victim)
    return;
  victim->closing = true;
  evutil_socket_t fd = bufferevent_getfd(victim->bev);
  if (fd >= 0)
    shutdown(fd, SHUT_RDWR);
}

static struct bufferevent *new_bev(struct event_base *base, void *arg)
{
  shk__panel_conns *c = arg;
  if (c->n >= c->max) {
    adopt_cb(-1, 0, c);
    make_room(c);
  }
  conn *k = calloc(1, sizeof *k);
  struct bufferevent *bev = k ? bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE) : NULL;
  if (!bev) {
    /* Out of memory: evhttp tries a bufferevent of its own, which is not
     * counted, and fails in the same shortage, and the connection with it. */
    free(k);
    return NULL;
  }
  bufferevent_incref(bev);
  k->bev = bev;
  k->prev = c->tail;
  if (c->tail)
    c->tail->next = k;
  else
    c->head = k;
  c->tail = k;
  event_active(c->adopt, EV_TIMEOUT, 0);
  if (++c->n >= c->max + SLACK && !c->paused) {
    c->paused = true;
    evconnlistener_disable(c->listener);
  }
  return bev;
}

int shk__panel_conns_new(struct evhttp *http, struct event_base *base, struct evconnlistener *listener,
                         unsigned max, shk__panel_close_fn on_close, void *ud, shk__panel_conns **out)
{
  shk__panel_conns *c = calloc(1, sizeof *c);
  if (!c || !(c->adopt = event_new(base, -1, 0, adopt_cb, c))) {
    free(c);
    return -ENOMEM;
  }
  c->listener = listener;
  c->max = max ? max : 1;
  c->on_close = on_close;
  c->ud = ud;
  evhttp_set_bevcb(http, new_bev, c);
  *out = c;
  return 0;
}

void shk__panel_conns_trust(shk__panel_conns *c, struct evhttp_connection *evcon)
{
  for (conn *k = c && evcon ? c->head : NULL; k; k = k->next)
    if (k->evcon == evcon) {
      k->trusted = true;
      return;
    }
}

void shk__panel_conns_stop(shk__panel_conns *c)
{
  /* evhttp frees its listener before its connections: those closed after
   * this touch the count, never the listener. */
  if (c)
    c->listener = NULL;
}

void shk__panel_conns_free(shk__panel_conns *c)
{
  if (!c)
    return;
  /* evhttp freed its connections, and each unlinked itself; what is left
   * is let go of here. */
  while (c->head)
    unlink_conn(c, c->head);
  event_free(c->adopt);
  free(c);
}
