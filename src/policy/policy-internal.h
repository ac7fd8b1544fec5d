/* Internal interfaces of the decision layer: the image manifest. */
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

/* What shk_policy_load read: the tiers in one Cedar set, their schema, and
 * the manifest. Only read after loading, so threads may share it. */
struct shk_policy {
  shk_cedar_schema *schema;
  shk_cedar_policy_set *set;
  shk__manifest *manifest;
};
