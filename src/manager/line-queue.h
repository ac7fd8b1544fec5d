/* SPDX-License-Identifier: Apache-2.0 */
/* Lines handed from any thread to one event loop (line-queue.c): the
 * panel's card stream and its Timeline stream both arrive on threads other
 * than the panel's, and are sent to the pages on its loop. */
#pragma once

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct shk__line_queue shk__line_queue;

/* Called on the loop's thread with each line (LEN bytes, no newline). */
typedef void (*shk__line_fn)(void *ud, const char *line, size_t len);

/* A queue delivering on BASE's loop, holding at most MAX bytes waiting.
 * 0 or -ENOMEM. */
int shk__line_queue_new(struct event_base *base, size_t max, shk__line_fn fn, void *ud, shk__line_queue **out);
/* Any thread: queues LINE (LEN bytes without a newline; a trailing one is
 * dropped) and wakes the loop. False when MAX bytes are already waiting or
 * memory ran out: the line is not queued, and the caller decides whether
 * that loses it. */
bool shk__line_queue_push(shk__line_queue *q, const char *line, size_t len);
/* From the loop's thread or after the loop ended (NULL: nothing). */
void shk__line_queue_free(shk__line_queue *q);
