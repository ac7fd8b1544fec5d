/* SPDX-License-Identifier: Apache-2.0 */
/* The refusals of one session's egress proxy, counted by kind (protocol,
 * host, port, reason, rule), so that the process that started the session
 * can say at its end what was refused, also when a daemon hosts it. */
#pragma once

#include <jansson.h>

#include "shinken/egress.h"

typedef struct shk__tally shk__tally;

/* NULL when out of memory. */
shk__tally *shk__tally_new(void);
void shk__tally_free(shk__tally *t);
/* Counts V when it is a refusal ("deny"); other verdicts are left out.
 * Safe on a proxy's thread: it takes only the tally's own lock, which is
 * never held across a call out, and allocates nothing once the tally holds
 * as many kinds as it keeps (past that, refusals are counted as others). */
void shk__tally_add(shk__tally *t, const shk_egress_verdict_info *v);
/* The kinds as a JSON array of {proto, host, port, reason, rule, count},
 * and, past the kinds it keeps, one more with only a count. NULL when out
 * of memory. */
json_t *shk__tally_json(shk__tally *t);
