/* SPDX-License-Identifier: Apache-2.0 */
/* The panel's HTTP connections, counted and capped (panel-conns.c).
 * libevent 2.1's evhttp has no limit on connections of its own, and an
 * idle connection costs the manager a descriptor that its control socket
 * and its sessions' proxies need too; so the panel keeps at most a fixed
 * number, and when a new one comes at the cap it closes the oldest one
 * that has not shown a logged-in browser's cookie. */
#pragma once

#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>

typedef struct shk__panel_conns shk__panel_conns;

/* Told when evhttp frees a connection (evhttp has one close callback per
 * connection, and this module holds it). */
typedef void (*shk__panel_close_fn)(struct evhttp_connection *evcon, void *ud);

/* Counts the connections of HTTP (on BASE, whose listener is LISTENER), at
 * most MAX at once, and calls ON_CLOSE(conn, UD) as each is freed. Call
 * before the first connection is accepted. 0 or -ENOMEM. */
int shk__panel_conns_new(struct evhttp *http, struct event_base *base, struct evconnlistener *listener,
                         unsigned max, shk__panel_close_fn on_close, void *ud, shk__panel_conns **out);
/* The connection CONN carried a request of a logged-in browser: it is kept
 * when others are closed to make room. */
void shk__panel_conns_trust(shk__panel_conns *c, struct evhttp_connection *conn);
/* Before the evhttp it counts is freed (it frees the listener first). */
void shk__panel_conns_stop(shk__panel_conns *c);
/* After the evhttp it counts was freed. */
void shk__panel_conns_free(shk__panel_conns *c);
