/* Requests: the principal, action and resource, and the context record,
 * parsed once (with the schema when there is one) and optionally checked
 * against the schema as the reference's request validation does. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cedar/cedar-eval-internal.h"



static bool type_listed(shk__str t, const shk__str *list, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (shk__str_eq(list[i], t))
      return true;
  return false;
}

/* The reference's request validation: the action is declared, the
 * principal and resource types are among those it applies to, and the
 * context has the declared type. */
static int validate(const shk__schema *s, const shk_cedar_request *r, const shk__action *act,
                    shk_cedar_error *err)
{
  if (!act->has_applies_to ||
      !type_listed(r->principal.type, act->principals, act->n_principals))
    return shk__cedar_fail(err, "principal type %.*s is not valid for action %.*s::\"%.*s\"",
                 Q(r->principal.type), Q(r->action.type), Q(r->action.id));
  if (!type_listed(r->resource.type, act->resources, act->n_resources))
    return shk__cedar_fail(err, "resource type %.*s is not valid for action %.*s::\"%.*s\"",
                 Q(r->resource.type), Q(r->action.type), Q(r->action.id));
  if (!shk__schema_enum_member(s, &r->principal))
    return shk__cedar_fail(err, "principal %.*s::\"%.*s\" is not a member of its enumerated type",
                 Q(r->principal.type), Q(r->principal.id));
  if (!shk__schema_enum_member(s, &r->resource))
    return shk__cedar_fail(err, "resource %.*s::\"%.*s\" is not a member of its enumerated type",
                 Q(r->resource.type), Q(r->resource.id));
  if (!shk__value_has_type(s, &r->context, act->context))
    return shk__cedar_fail(err, "context does not conform to the context type of action %.*s::\"%.*s\"",
                 Q(r->action.type), Q(r->action.id));
  return 0;
}

/* Takes ownership of nothing: `context` (may be NULL) stays the caller's. */
static int finish(shk_cedar_request *r, json_t *context, const shk_cedar_schema *schema,
                  bool do_validate, shk_cedar_error *err)
{
  r->hash[SHK__VAR_PRINCIPAL] = shk__uid_hash(&r->principal);
  r->hash[SHK__VAR_ACTION] = shk__uid_hash(&r->action);
  r->hash[SHK__VAR_RESOURCE] = shk__uid_hash(&r->resource);
  const shk__schema *s = schema ? &schema->s : NULL;
  const shk__action *act = s ? shk__schema_action(s, r->action) : NULL;
  /* With a schema the context is read as the action's context type, so
   * the action must be declared even when the request is not validated. */
  if (s && !act)
    return shk__cedar_fail(err, "request's action %.*s::\"%.*s\" is not declared in the schema",
                 Q(r->action.type), Q(r->action.id));
  json_t *empty = NULL;
  if (!context)
    context = empty = json_object();
  int rc;
  if (!json_is_object(context))
    rc = shk__cedar_fail(err, "context: expected a JSON object");
  else
    rc = shk__json_to_value(r->arena, context, NULL, act ? act->context : NULL, "context",
                            &r->context, err);
  json_decref(empty);
  if (rc == 0 && r->context.kind != SHK__V_RECORD)
    rc = shk__cedar_fail(err, "context: expected a record, got a %s", shk__vkind_name(r->context.kind));
  if (rc == 0 && s && do_validate)
    rc = validate(s, r, act, err);
  return rc;
}

static shk_cedar_request *request_alloc(void)
{
  shk_cedar_request *r = shk__xcalloc(1, sizeof *r);
  r->arena = shk__arena_new();
  return r;
}

int shk_cedar_request_new(const char *principal, const char *action, const char *resource,
                          const char *context_json, const shk_cedar_schema *schema,
                          bool validate_req, shk_cedar_request **out, shk_cedar_error *err)
{
  *out = NULL;
  shk_cedar_request *r = request_alloc();
  const char *texts[3] = { principal, action, resource };
  shk__uid *uids[3] = { &r->principal, &r->action, &r->resource };
  int rc = 0;
  for (int i = 0; i < 3 && rc == 0; i++)
    rc = shk__parse_entity_ref(r->arena, texts[i], strlen(texts[i]), uids[i], err);
  json_t *ctx = NULL;
  if (rc == 0 && context_json) {
    ctx = shk__json_load(context_json, strlen(context_json), "context JSON", err);
    if (!ctx)
      rc = -EINVAL;
  }
  if (rc == 0)
    rc = finish(r, ctx, schema, validate_req, err);
  json_decref(ctx);
  if (rc < 0) {
    shk_cedar_request_free(r);
    return rc;
  }
  *out = r;
  return 0;
}

static int json_entity(shk__arena *a, json_t *j, const char *what, shk__uid *out,
                       shk_cedar_error *err)
{
  if (!j)
    return shk__cedar_fail(err, "request: missing \"%s\"", what);
  if (json_is_string(j)) {
    shk__str s = shk__json_str(a, j);
    return shk__parse_entity_ref(a, s.p, s.n, out, err);
  }
  return shk__json_to_uid(a, j, out, what, err);
}

int shk_cedar_request_from_json_value(const struct json_t *req, const shk_cedar_schema *schema,
                                      bool validate_req, shk_cedar_request **out,
                                      shk_cedar_error *err)
{
  *out = NULL;
  json_t *root = (json_t *)req;
  if (!json_is_object(root))
    return shk__cedar_fail(err, "request JSON: expected an object");
  const char *k;
  json_t *v;
  json_object_foreach(root, k, v)
    if (strcmp(k, "principal") && strcmp(k, "action") && strcmp(k, "resource") &&
        strcmp(k, "context"))
      return shk__cedar_fail(err, "request JSON: unexpected key \"%.80s\"", k);
  shk_cedar_request *r = request_alloc();
  static const char *names[3] = { "principal", "action", "resource" };
  shk__uid *uids[3] = { &r->principal, &r->action, &r->resource };
  int rc = 0;
  for (int i = 0; i < 3 && rc == 0; i++)
    rc = json_entity(r->arena, json_object_get(root, names[i]), names[i], uids[i], err);
  if (rc == 0)
    rc = finish(r, json_object_get(root, "context"), schema, validate_req, err);
  if (rc < 0) {
    shk_cedar_request_free(r);
    return rc;
  }
  *out = r;
  return 0;
}

int shk_cedar_request_from_json(const char *json, size_t len, const shk_cedar_schema *schema,
                                bool validate_req, shk_cedar_request **out, shk_cedar_error *err)
{
  *out = NULL;
  json_t *root = shk__json_load(json, len, "request JSON", err);
  if (!root)
    return -EINVAL;
  int rc = shk_cedar_request_from_json_value(root, schema, validate_req, out, err);
  json_decref(root);
  return rc;
}

struct json_t *shk_cedar_json_parse(const char *text, size_t len, shk_cedar_error *err)
{
  return shk__json_load(text, len, "JSON", err);
}

void shk_cedar_request_free(shk_cedar_request *r)
{
  if (!r)
    return;
  shk__arena_free(r->arena);
  free(r);
}
