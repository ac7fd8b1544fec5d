/* SPDX-License-Identifier: Apache-2.0 */
/* What the sessions listing says of a session beyond its registry fields:
 * the sandbox start report stage 2 sent (what it enforced, what it could
 * not), and whether the Ask loop froze the session. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "shinken/manager.h"

/* Replaces *REPORT with {"enforced": [...], "degraded": [...], "limits":
 * LIMITS or null, "ceiling": [...]} made from the lists: the layers, the
 * limits the launcher started the sandbox with (memory bytes, pids,
 * cpu_milli, 0 for none asked, and the net mode), and the paths live
 * grants may ever make writable. On allocation failure *REPORT becomes
 * NULL, which the listing shows as "not started": the report is for humans
 * to read and decides nothing. */
void shk__sandbox_report_set(json_t **report, const char *const *enforced, size_t ne,
                             const char *const *degraded, size_t nd, json_t *limits,
                             const char *const *ceiling, size_t n_ceiling);
/* Whether LIMITS is {"memory", "pids", "cpu_milli": whole numbers, "net":
 * "none" | "proxy" | "host", "cgroup": a boolean}, every key optional and
 * no other. */
bool shk__sandbox_limits_valid(json_t *limits);

/* Adds "frozen": true or false to every object of the sessions listing A,
 * by its "session" field. Called without the registry lock held (the
 * approve module is never called into with it held). 0, or -ENOMEM. */
int shk__ask_sessions_frozen(shk_manager *m, json_t *a);
