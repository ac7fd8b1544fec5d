/* SPDX-License-Identifier: Apache-2.0 */
/* The panel's Timeline (panel-timeline.c), for its server (panel.c). */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "shinken/audit.h"

/* The events from `since` on, at most the last `max` of them, and the
 * latest checkpoint: {"ok", "count", "from", "events": [{"seq", "event"}],
 * "checkpoint"}. NULL only when out of memory. */
json_t *shk__panel_timeline(shk_audit_reader *r, uint64_t since, unsigned max);
/* One event's inclusion proof against the latest checkpoint. */
json_t *shk__panel_proof(shk_audit_reader *r, uint64_t seq);
/* The whole chain verified now (shk_audit_verify), with when. */
json_t *shk__panel_verify(const char *db);
/* The Host view (panel-host.c): the sandbox's levels per class on this
 * host, and the capability classes a running sandbox can be granted. */
json_t *shk__panel_host(void);
