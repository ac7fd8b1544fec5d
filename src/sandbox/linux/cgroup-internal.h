/* SPDX-License-Identifier: Apache-2.0 */
/* Between the cgroup code and host detection: the cgroup v1 fallback
 * (cgroup-v1.c), used where cgroup v2 lacks the controllers. */
#pragma once

#include "shinken/sandbox.h"
#include "common/common.h"

/* Formats one of F's strings; NULL out of memory, and F's detection then
 * fails (features.c). */
SHK_PRINTF(2, 3) char *shk__features_printf(shk_sandbox_features *f, const char *fmt, ...);

/* After cgroup v2 detection: when v1 hierarchies give more of the memory,
 * pids and cpu controllers than v2 does, switches `f` to them. */
void shk__cgroup_v1_detect(shk_sandbox_features *f, const shk_sandbox_env *env);
void shk__cgroup_v1_features_free(shk_sandbox_features *f);
/* The v1 halves of shk_sandbox_cgroup_create, _join and _destroy. */
int shk__cgroup_v1_create(const shk_sandbox_features *f, const shk_sandbox_opts *o,
                          shk_sandbox_cgroup *cg, shk_error *err);
int shk__cgroup_v1_join(const shk_sandbox_cgroup *cg);
void shk__cgroup_v1_destroy(shk_sandbox_cgroup *cg);

/* The absolute directory of the session cgroup Shinken made that holds
 * PID (its v1 freezer's when *V1, else its v2 one), or NULL. */
char *shk__cgroup_session_of(pid_t pid, bool *v1);
