/* SPDX-License-Identifier: Apache-2.0 */
/* The run report as a JSON value, for the module's own writer and for the
 * audit events that will carry it. Internal: jansson's types stay out of
 * the public header. */
#pragma once

#include <jansson.h>

#include "shinken/sandbox.h"

/* A new reference, or NULL when out of memory. */
json_t *shk__sandbox_report_json(const shk_sandbox_opts *o, const shk_sandbox_assessment *a,
                                 const shk_sandbox_result *res);
