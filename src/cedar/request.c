/* SPDX-License-Identifier: Apache-2.0 */
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
                    shk_error *err)
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

/* Building one request, under a guard. What an unwind must not leak
 * lives here: the caller frees the request and the context trees. */
typedef struct build {
  shk_cedar_request *r;
  const char *texts[3];      /* shk_cedar_request_new: the entity references */
  const char *context_json;  /* shk_cedar_request_new: the context text, or NULL */
  const json_t *root;        /* shk_cedar_request_from_json_value: the request */
  const shk_cedar_schema *schema;
  bool validate;
  json_t *context;           /* the context tree, when parsed here */
  json_t *empty;             /* {}, standing in for a missing context */
  shk_error *err;
} build;

/* Hashes the uids and reads the context (a tree the caller owns, or NULL
 * for {}). */
static int finish(build *b, const json_t *context)
{
  shk_cedar_request *r = b->r;
  shk_error *err = b->err;
  r->hash[SHK__VAR_PRINCIPAL] = shk__uid_hash(&r->principal);
  r->hash[SHK__VAR_ACTION] = shk__uid_hash(&r->action);
  r->hash[SHK__VAR_RESOURCE] = shk__uid_hash(&r->resource);
  const shk__schema *s = b->schema ? &b->schema->s : NULL;
  const shk__action *act = s ? shk__schema_action(s, r->action) : NULL;
  /* With a schema the context is read as the action's context type, so
   * the action must be declared even when the request is not validated. */
  if (s && !act)
    return shk__cedar_fail(err, "request's action %.*s::\"%.*s\" is not declared in the schema",
                 Q(r->action.type), Q(r->action.id));
  if (!context && !(context = b->empty = json_object()))
    shk__oom_unwind();
  int rc;
  if (!json_is_object(context))
    rc = shk__cedar_fail(err, "context: expected a JSON object");
  else
    rc = shk__json_to_value(r->arena, (json_t *)context, NULL, act ? act->context : NULL, "context",
                            &r->context, err);
  if (rc == 0 && r->context.kind != SHK__V_RECORD)
    rc = shk__cedar_fail(err, "context: expected a record, got a %s", shk__vkind_name(r->context.kind));
  if (rc == 0 && s && b->validate)
    rc = validate(s, r, act, err);
  return rc;
}

static int from_text(void *ctx)
{
  build *b = ctx;
  shk__uid *uids[3] = { &b->r->principal, &b->r->action, &b->r->resource };
  int rc = 0;
  for (int i = 0; i < 3 && rc == 0; i++)
    rc = shk__parse_entity_ref(b->r->arena, b->texts[i], strlen(b->texts[i]), uids[i], b->err);
  if (rc == 0 && b->context_json &&
      !(b->context = shk__json_load(b->context_json, strlen(b->context_json), "context JSON", b->err)))
    rc = -EINVAL;
  return rc < 0 ? rc : finish(b, b->context);
}

static int json_entity(shk__arena *a, json_t *j, const char *what, shk__uid *out,
                       shk_error *err)
{
  if (!j)
    return shk__cedar_fail(err, "request: missing \"%s\"", what);
  if (json_is_string(j)) {
    shk__str s = shk__json_str(a, j);
    return shk__parse_entity_ref(a, s.p, s.n, out, err);
  }
  return shk__json_to_uid(a, j, out, what, err);
}

static int from_json(void *ctx)
{
  build *b = ctx;
  json_t *root = (json_t *)b->root;
  if (!json_is_object(root))
    return shk__cedar_fail(b->err, "request JSON: expected an object");
  const char *k;
  json_t *v;
  json_object_foreach(root, k, v)
    if (strcmp(k, "principal") && strcmp(k, "action") && strcmp(k, "resource") &&
        strcmp(k, "context"))
      return shk__cedar_fail(b->err, "request JSON: unexpected key \"%.80s\"", k);
  static const char *names[3] = { "principal", "action", "resource" };
  shk__uid *uids[3] = { &b->r->principal, &b->r->action, &b->r->resource };
  int rc = 0;
  for (int i = 0; i < 3 && rc == 0; i++)
    rc = json_entity(b->r->arena, json_object_get(root, names[i]), names[i], uids[i], b->err);
  return rc < 0 ? rc : finish(b, json_object_get(root, "context"));
}

/* Runs fn on a new request; *out gets it when fn succeeds. */
static int run(build *b, int (*fn)(void *), shk_cedar_request **out)
{
  *out = NULL;
  b->r = shk__calloc(1, sizeof *b->r);
  if (!b->r || !(b->r->arena = shk__arena_new())) {
    free(b->r);
    return shk__error_nomem(b->err);
  }
  int rc = shk__oom_guard(fn, b, b->err);
  json_decref(b->context);
  json_decref(b->empty);
  if (rc < 0) {
    shk_cedar_request_free(b->r);
    return rc;
  }
  *out = b->r;
  return 0;
}

int shk_cedar_request_new(const char *principal, const char *action, const char *resource,
                          const char *context_json, const shk_cedar_schema *schema,
                          bool validate_req, shk_cedar_request **out, shk_error *err)
{
  build b = { .texts = { principal, action, resource }, .context_json = context_json,
              .schema = schema, .validate = validate_req, .err = err };
  return run(&b, from_text, out);
}

int shk_cedar_request_from_json_value(const struct json_t *req, const shk_cedar_schema *schema,
                                      bool validate_req, shk_cedar_request **out,
                                      shk_error *err)
{
  build b = { .root = req, .schema = schema, .validate = validate_req, .err = err };
  return run(&b, from_json, out);
}

typedef struct load {
  const char *json, *what;
  size_t len;
  json_t *root;
  shk_error *err;
} load;

static int load_json(void *ctx)
{
  load *l = ctx;
  l->root = shk__json_load(l->json, l->len, l->what, l->err);
  return l->root ? 0 : -EINVAL;
}

int shk_cedar_request_from_json(const char *json, size_t len, const shk_cedar_schema *schema,
                                bool validate_req, shk_cedar_request **out, shk_error *err)
{
  *out = NULL;
  load l = { .json = json, .what = "request JSON", .len = len, .err = err };
  int rc = shk__oom_guard(load_json, &l, err);
  if (rc == 0)
    rc = shk_cedar_request_from_json_value(l.root, schema, validate_req, out, err);
  json_decref(l.root);
  return rc;
}

struct json_t *shk_cedar_json_parse(const char *text, size_t len, shk_error *err)
{
  load l = { .json = text, .what = "JSON", .len = len, .err = err };
  shk__oom_guard(load_json, &l, err);
  return l.root;
}

void shk_cedar_request_free(shk_cedar_request *r)
{
  if (!r)
    return;
  shk__arena_free(r->arena);
  free(r);
}
