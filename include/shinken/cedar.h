/* SPDX-License-Identifier: Apache-2.0 */
/* Shinken's Cedar engine: parse policies, schemas and entities once, then
 * decide many requests against them.
 *
 * The library contract of shinken/common.h holds: every function that can
 * fail returns 0 on success or a negative errno, and fills the shk_error
 * it is given (NULL is allowed) with one sentence and, for an error in a
 * text, the line and column (the engine reads texts, not files, so `file`
 * stays empty). The codes are:
 *   -EINVAL  the input is malformed or refused (the message says why)
 *   -ENOENT  no such policy or annotation (shk_cedar_policy_annotation)
 *   -ENOMEM  out of memory; the message is "out of memory", and nothing
 *            was made or changed
 * The functions that return malloc'd text return NULL when out of memory.
 * Nothing here prints or exits, out of memory included. Objects are opaque
 * and freed with their own _free function; a NULL argument to a _free
 * function is allowed. */
#ifndef SHINKEN_CEDAR_H
#define SHINKEN_CEDAR_H

#include <stdbool.h>
#include <stddef.h>

#include "shinken/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The engine's former name for shk_error, the library's one error detail
 * (shinken/common.h). It is the same type, kept so that code written
 * against Shinken 0.1 still compiles; new code writes shk_error. */
typedef shk_error shk_cedar_error;

typedef struct shk_cedar_policy_set shk_cedar_policy_set;
typedef struct shk_cedar_schema shk_cedar_schema;
typedef struct shk_cedar_entities shk_cedar_entities;
typedef struct shk_cedar_request shk_cedar_request;

/* ---- policies ---- */

/* Parses a whole policy file. Policies and templates get the ids "policy0",
 * "policy1", ... in the order they appear, as the reference engine assigns.
 * On failure *out is NULL. */
int shk_cedar_policy_set_parse(const char *text, size_t len,
                               shk_cedar_policy_set **out, shk_error *err);
void shk_cedar_policy_set_free(shk_cedar_policy_set *ps);
size_t shk_cedar_policy_set_count(const shk_cedar_policy_set *ps);

/* Links template `template_id` into a new policy `new_id`. `principal` and
 * `resource` are entity references in policy syntax (User::"alice"), or NULL
 * when the template has no such slot. On failure, -ENOMEM included, the set
 * is as it was. */
int shk_cedar_policy_set_link(shk_cedar_policy_set *ps, const char *template_id,
                              const char *new_id, const char *principal,
                              const char *resource, shk_error *err);

/* ---- schemas ---- */

typedef enum shk_cedar_schema_format {
  SHK_CEDAR_SCHEMA_TEXT, /* the human-readable .cedarschema form */
  SHK_CEDAR_SCHEMA_JSON,
} shk_cedar_schema_format;

/* On failure *out is NULL. */
int shk_cedar_schema_parse(const char *text, size_t len, shk_cedar_schema_format fmt,
                           shk_cedar_schema **out, shk_error *err);
void shk_cedar_schema_free(shk_cedar_schema *s);

/* ---- entities ---- */

/* Parses an entity store from its JSON form (an array of {uid, attrs,
 * parents, tags}). With a schema, values are read as the schema types them
 * and the schema's action entities are added. The ancestor closure is
 * computed once here. On failure *out is NULL. */
int shk_cedar_entities_parse(const char *json, size_t len, const shk_cedar_schema *schema,
                             shk_cedar_entities **out, shk_error *err);
void shk_cedar_entities_free(shk_cedar_entities *es);

/* ---- requests ---- */

/* principal, action and resource are entity references in policy syntax
 * (User::"alice"); context_json is a JSON object or NULL for {}. With a
 * schema the context is read as the action's context type; with `validate`
 * the request is also checked against the schema (the reference's request
 * validation). On failure *out is NULL. */
int shk_cedar_request_new(const char *principal, const char *action, const char *resource,
                          const char *context_json, const shk_cedar_schema *schema,
                          bool validate, shk_cedar_request **out, shk_error *err);
/* Same, with the request as JSON: {"principal": ..., "action": ...,
 * "resource": ..., "context": {...}}, where each entity is either
 * {"type": T, "id": I} or a string in policy syntax. */
int shk_cedar_request_from_json(const char *json, size_t len, const shk_cedar_schema *schema,
                                bool validate, shk_cedar_request **out, shk_error *err);
void shk_cedar_request_free(shk_cedar_request *r);

/* For callers that hold requests inside larger JSON documents (test files).
 * These two take jansson's json_t, which makes jansson part of the API for
 * whoever calls them: such a caller includes <jansson.h> and links jansson
 * itself (nothing else in this header needs it).
 *
 * shk_cedar_json_parse parses JSON text as jansson's json_loadb does,
 * rejecting duplicate keys, except that NUL may also appear in object keys,
 * as Cedar attribute names allow. Strings in the tree carry an internal
 * escape for NUL, so give the tree (or its parts) only to
 * shk_cedar_request_from_json_value, and free it with json_decref. NULL
 * with err filled on a syntax error, or with "out of memory". */
struct json_t;
struct json_t *shk_cedar_json_parse(const char *text, size_t len, shk_error *err);
/* shk_cedar_request_from_json, for an object of a tree from
 * shk_cedar_json_parse. */
int shk_cedar_request_from_json_value(const struct json_t *req, const shk_cedar_schema *schema,
                                      bool validate, shk_cedar_request **out,
                                      shk_error *err);

/* ---- decisions ---- */

typedef enum shk_cedar_decision {
  SHK_CEDAR_DENY = 0,
  SHK_CEDAR_ALLOW = 1,
} shk_cedar_decision;

/* One policy that errored during evaluation, and why. */
typedef struct shk_cedar_policy_error {
  const char *policy_id;
  const char *message;
} shk_cedar_policy_error;

typedef struct shk_cedar_response {
  shk_cedar_decision decision;
  const char **reasons;          /* ids of the determining policies */
  size_t n_reasons;
  shk_cedar_policy_error *errors;
  size_t n_errors;
  void *priv;
} shk_cedar_response;

/* Deny by default, forbid overrides permit; a policy whose evaluation errors
 * is skipped and reported in errors. `resp` starts zeroed
 * (shk_cedar_response r = { 0 }). The response stays valid until
 * shk_cedar_response_clear, or until it is passed to this function again
 * (which reuses its memory, so a loop over requests does not allocate).
 * `es` may be NULL for an empty store. The objects are only read, so
 * threads may share them, each with its own response. Returns 0, or
 * -ENOMEM with the decision DENY and no reasons or errors: a decision that
 * could not be finished is never an ALLOW. */
int shk_cedar_is_authorized(const shk_cedar_policy_set *ps, const shk_cedar_entities *es,
                            const shk_cedar_request *req, shk_cedar_response *resp);
void shk_cedar_response_clear(shk_cedar_response *resp);


/* ---- formats ---- */

/* Each text below is malloc'd (free it with free()), or NULL when out of
 * memory. */

/* The set's policies and templates as formatted Cedar text; parsing it
 * gives the same policies. Links are not part of the text. */
char *shk_cedar_policy_set_to_text(const shk_cedar_policy_set *ps);
/* The set in the reference's JSON policy format (EST): {"staticPolicies",
 * "templates", "templateLinks"}. */
char *shk_cedar_policy_set_to_json(const shk_cedar_policy_set *ps);
/* Reads one policy or a policy set in the JSON policy format. Policies get
 * the ids policy0, policy1, ... in the order they appear. On failure *out
 * is NULL. */
int shk_cedar_policy_set_parse_json(const char *json, size_t len, shk_cedar_policy_set **out,
                                    shk_error *err);

/* The schema in the JSON form and in the .cedarschema form, written from
 * its resolved form: names fully qualified, common types inlined. Either
 * parses back to the same entity types and actions. */
char *shk_cedar_schema_to_json(const shk_cedar_schema *s);
char *shk_cedar_schema_to_text(const shk_cedar_schema *s);

/* ---- policy metadata ---- */

/* The id of the i-th policy, template or link of the set (file order). */
const char *shk_cedar_policy_id(const shk_cedar_policy_set *ps, size_t i);
/* True when the i-th policy is a forbid. */
bool shk_cedar_policy_is_forbid(const shk_cedar_policy_set *ps, size_t i);
/* Copies the value of annotation @key("value") of policy `policy_id` into
 * buf (NUL-terminated, truncated to len - 1) and returns its full length;
 * -ENOENT when the policy or the annotation does not exist, -EINVAL when
 * the value holds a NUL and so cannot be C text. Allocates nothing. */
int shk_cedar_policy_annotation(const shk_cedar_policy_set *ps, const char *policy_id,
                                const char *key, char *buf, size_t len);

/* ---- validation ---- */

/* One finding of the strict validator: the policy, where, and why. */
typedef struct shk_cedar_validation_error {
  char *policy_id;
  char *message;
  unsigned line;
  unsigned column;
} shk_cedar_validation_error;

typedef struct shk_cedar_validation_result {
  shk_cedar_validation_error *errors;
  size_t n_errors;
} shk_cedar_validation_result;

/* Type-checks every policy and template of `ps` against `schema` in strict
 * mode, the reference's default. Returns 0 when the check ran (the policies
 * are valid exactly when out->n_errors == 0); -EINVAL for a NULL argument,
 * -ENOMEM with no findings when out of memory. */
int shk_cedar_validate(const shk_cedar_policy_set *ps, const shk_cedar_schema *schema,
                       shk_cedar_validation_result *out);
void shk_cedar_validation_result_clear(shk_cedar_validation_result *r);

#ifdef __cplusplus
}
#endif
#endif
