/* SPDX-License-Identifier: Apache-2.0 */
/* Who opened a session, as `shinken sessions` shows it, so that two
 * sessions can be told apart: the opener's command line, working
 * directory, pid and user, and when it opened. */
#pragma once

#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "manager/manager-internal.h"

typedef struct shk__opener {
  pid_t pid;
  uid_t uid;
  int64_t started_ms;
  char user[64];      /* the name of uid, or "" when it has none */
  char command[512];  /* its command line, words joined by spaces; "" when unreadable */
  char cwd[PATH_MAX]; /* its working directory; "" when unreadable */
} shk__opener;

/* Fills OUT from BY (the peer whose open_session this is) at NOW_MS.
 * Cannot fail: what /proc does not say is left empty. */
void shk__opener_take(shk__opener *out, const shk__peer *by, int64_t now_ms);
/* Adds the opener's fields (command, cwd, pid, uid, user, started_ms) to
 * OBJ. -1 when out of memory. */
int shk__opener_add_json(const shk__opener *o, json_t *obj);
