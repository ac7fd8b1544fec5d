/* SPDX-License-Identifier: Apache-2.0 */
/* The Timeline's stream (panel-stream.c): the audit events recorded since
 * the last look, read from the store on a thread of its own and handed to
 * the panel's event loop. */
#pragma once

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct shk__audit_stream shk__audit_stream;

/* Called on the loop's thread with each batch of new events: the
 * Timeline's answer for them ({"ok", "count", "from", "events"}), as
 * compact JSON of LEN bytes (no newline in it). */
typedef void (*shk__audit_stream_fn)(void *ud, const char *json, size_t len);

/* Starts reading the store DB every quarter of a second, while someone
 * watches, delivering on BASE's loop. 0, or a negative errno. */
int shk__audit_stream_start(struct event_base *base, const char *db, shk__audit_stream_fn fn, void *ud,
                            shk__audit_stream **out);
/* Whether any page holds the event stream: with none, the store is not read. */
void shk__audit_stream_watch(shk__audit_stream *s, bool on);
/* Ends the thread and frees S (NULL: nothing). Call from the loop's thread
 * or after the loop ended, before BASE is freed. */
void shk__audit_stream_stop(shk__audit_stream *s);
