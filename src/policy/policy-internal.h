/* SPDX-License-Identifier: Apache-2.0 */
/* Internal interfaces of the decision layer: the image manifest, the
 * grant-time proofs about patterns, and the record of accepted tiers. */
#pragma once

#include "shinken/cap.h"
#include "shinken/cedar.h"
#include "shinken/common.h"
#include "shinken/policy.h"

typedef struct shk__manifest shk__manifest;

/* Parses a manifest: {"image": NAME, "capabilities": [{"class": C,
 * "scope": {...}, "tier": T}]}. An unknown field, a field of the wrong type
 * or a bad scope is -EINVAL naming it; -ENOMEM. */
int shk__manifest_parse(const char *json, shk__manifest **out, shk_error *err);
void shk__manifest_free(shk__manifest *m);
const char *shk__manifest_image(const shk__manifest *m);
/* Finds the first entry that covers `req` (same class, req a subset of its
 * scope). Returns its index and tier, or -EPERM with err saying why. */
int shk__manifest_check(const shk__manifest *m, const shk_cap_scope *req, shk_policy_tier *tier,
                        shk_error *err);

/* ---- patterns (pattern.c) ---- */

/* The analysis a loaded policy keeps: one solver session (started at the
 * first question), the policy set prepared for analysis, and the proofs
 * already made. Everything in it is behind its own lock. */
typedef struct shk__pattern shk__pattern;

int shk__pattern_new(const shk_policy_source *src, shk__pattern **out, shk_error *err);
void shk__pattern_free(shk__pattern *pt);

/* One pattern element, in the context of one decision. */
typedef struct shk__pattern_q {
  const char *request;     /* the element's Cedar request (JSON), literal values in place */
  const char *entities;    /* the decision's entity store (JSON) */
  const shk_analysis_cover_field *fields; /* what the element covers */
  size_t n_fields;
  int64_t now_ms;          /* the decision's instant */
  int64_t until_ms;        /* the proof should hold up to here (the session's end) */
} shk__pattern_q;

/* The outcome: *allowed, or a refusal in res (with a counterexample and
 * the forbidding policy), or, with a negative return, no proof at all: err
 * says why (the solver is missing, failed or timed out; the policies use
 * what the analyzer does not encode). -ENOMEM is the caller's to return. */
int shk__pattern_check(const shk_policy *p, const shk__pattern_q *q, bool *allowed, shk_analysis_cover_result *res,
                       shk_error *err);
/* The parts to leave out of a refused pattern at now_ms (at most
 * SHK_POLICY_MAX_EXCEPT): 0 with *out filled (out->found may be false), or
 * a negative errno. */
int shk__pattern_narrow(const shk_policy *p, const shk__pattern_q *q, shk_analysis_narrowing *out, shk_error *err);

/* The solver session and the loaded set, for the widening check at load
 * time (single-threaded then, but under the lock all the same). */
int shk__pattern_compare(const shk_policy *p, const shk_analysis_set *old_set, const shk_analysis_set *new_set,
                         shk_analysis_comparison *out, shk_error *err);

/* ---- accepted tiers (widen.c) ---- */

/* Before a load succeeds: refuses (-EPERM) a project or session tier more
 * permissive than its record in src->state_dir, unless the operator
 * accepts the widening. ADMIN, PROJECT, SESSION are the texts loaded. */
int shk__widen_check(const shk_policy *p, const shk_policy_source *src, const char *admin, const char *project,
                     const char *session, shk_error *err);
/* After it succeeded: records the tiers (0600, atomically). */
int shk__widen_record(const shk_policy_source *src, const char *project, const char *session, shk_error *err);

/* What shk_policy_load read: the tiers in one Cedar set, their schema, and
 * the manifest, which are only read after loading, so threads may share
 * them; and the pattern analysis, which keeps its own lock. */
struct shk_policy {
  shk_cedar_schema *schema;
  shk_cedar_policy_set *set;
  shk__manifest *manifest;
  shk__pattern *pattern;
};
