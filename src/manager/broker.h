/* SPDX-License-Identifier: Apache-2.0 */
/* The manager's side of the secret broker (broker.c). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "shinken/cap.h"
#include "shinken/egress.h"

struct egrant;

/* Caller holds mu. Loads the secrets SCOPE (credentials) names into E and
 * derives their sentinels under the session's KEY. NULL, or why it could
 * not (a sentence in WHY or a static one); E is then released by
 * shk__broker_release. */
const char *shk__broker_prepare(const uint8_t key[32], const struct shk_cap_scope *scope, struct egrant *e,
                                char *why, size_t len);
void shk__broker_release(struct egrant *e);
/* {VAR: sentinel} for every secret of the store with --env, under KEY:
 * what the session's sandbox gets in its environment. */
json_t *shk__broker_sentinels(const uint8_t key[32]);
/* The session's rewrite hook (shk_egress_rewrite_fn), data the session. */
int shk__broker_rewrite(void *data, const shk_egress_http_request *req, shk_egress_header **out,
                        size_t *n_out, const char **reason);
