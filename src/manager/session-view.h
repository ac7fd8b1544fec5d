/* SPDX-License-Identifier: Apache-2.0 */
/* What the sessions listing says of a session beyond its registry fields:
 * the sandbox start report stage 2 sent (what it enforced, what it could
 * not), and whether the Ask loop froze the session. */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "shinken/manager.h"

/* Replaces *REPORT with {"enforced": [...], "degraded": [...]} made from the
 * two lists. On allocation failure *REPORT becomes NULL, which the listing
 * shows as "not started": the report is for humans to read and decides
 * nothing. */
void shk__sandbox_report_set(json_t **report, const char *const *enforced, size_t ne,
                             const char *const *degraded, size_t nd);

/* Adds "frozen": true or false to every object of the sessions listing A,
 * by its "session" field. Called without the registry lock held (the
 * approve module is never called into with it held). 0, or -ENOMEM. */
int shk__ask_sessions_frozen(shk_manager *m, json_t *a);
