/* Grant decisions: a capability request becomes Cedar requests against the
 * managed, project and session tiers of policy. */
#include "shinken/policy.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/common.h"
#include "shinken/cedar.h"

struct shk_policy {
  shk_cedar_schema *schema;
  shk_cedar_policy_set *set;
};

void shk_policy_free(shk_policy *p)
{
  if (!p)
    return;
  shk_cedar_policy_set_free(p->set);
  shk_cedar_schema_free(p->schema);
  free(p);
}

static int read_in(const char *dir, const char *name, char **out, char *err, size_t errlen)
{
  char *path = shk__xasprintf("%s/%s", dir, name);
  int r = shk__read_file(path, out, NULL);
  if (r)
    snprintf(err, errlen, "%s: %s", path, strerror(-r));
  free(path);
  return r;
}

int shk_policy_load(const char *dir, const char *session_text, shk_policy **out, char *err,
                    size_t errlen)
{
  *out = NULL;
  char *schema = NULL, *admin = NULL, *project = NULL, *all = NULL;
  shk_policy *p = shk__xcalloc(1, sizeof *p);
  shk_cedar_error cerr;
  shk_cedar_policy_set *session = NULL;
  int r;
  if ((r = read_in(dir, "schema.cedarschema", &schema, err, errlen)) ||
      (r = read_in(dir, "admin.cedar", &admin, err, errlen)) ||
      (r = read_in(dir, "project.cedar", &project, err, errlen)))
    goto out;
  if ((r = shk_cedar_schema_parse(schema, strlen(schema), SHK_CEDAR_SCHEMA_TEXT, &p->schema, &cerr))) {
    snprintf(err, errlen, "%s/schema.cedarschema:%u:%u: %s", dir, cerr.line, cerr.column, cerr.message);
    goto out;
  }
  /* The session tier may only narrow: it is checked on its own first, and
   * any permit in it is refused. */
  if (session_text) {
    if ((r = shk_cedar_policy_set_parse(session_text, strlen(session_text), &session, &cerr))) {
      snprintf(err, errlen, "session policy:%u:%u: %s", cerr.line, cerr.column, cerr.message);
      goto out;
    }
    for (size_t i = 0; i < shk_cedar_policy_set_count(session); i++)
      if (!shk_cedar_policy_is_forbid(session, i)) {
        snprintf(err, errlen, "session policy %s is a permit: a session may only narrow (forbid)",
                 shk_cedar_policy_id(session, i));
        r = -EPERM;
        goto out;
      }
  }
  all = shk__xasprintf("%s\n%s\n%s\n", admin, project, session_text ? session_text : "");
  if ((r = shk_cedar_policy_set_parse(all, strlen(all), &p->set, &cerr))) {
    snprintf(err, errlen, "policies:%u:%u: %s", cerr.line, cerr.column, cerr.message);
    goto out;
  }
  shk_cedar_validation_result vr = { 0 };
  if ((r = shk_cedar_validate(p->set, p->schema, &vr)) == 0 && vr.n_errors) {
    snprintf(err, errlen, "policy %s does not validate against the schema: %s",
             vr.errors[0].policy_id, vr.errors[0].message);
    r = -EINVAL;
  }
  shk_cedar_validation_result_clear(&vr);
  if (r)
    goto out;
  *out = p;
  p = NULL;
out:
  shk_cedar_policy_set_free(session);
  shk_policy_free(p);
  free(schema);
  free(admin);
  free(project);
  free(all);
  return r;
}

static json_t *uid(const char *type, const char *id)
{
  return json_pack("{s:s, s:s}", "type", type, "id", id);
}

static json_t *datetime_of(int64_t ms)
{
  char buf[64];
  time_t secs = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
           tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
  return json_string(buf);
}

/* The entity store of one decision: the agent, its session and the eight
 * capability classes. Every value is a JSON parameter; nothing is pasted
 * into policy text. */
static int session_entities(shk_policy *p, const shk_policy_session *s, shk_cedar_entities **out,
                            char *why, size_t whylen)
{
  json_t *arr = json_array();
  json_array_append_new(arr, json_pack("{s:o, s:{s:s, s:o}, s:[]}", "uid", uid("Shinken::Session", s->id),
                                       "attrs", "trust_tier", s->trust_tier, "expires",
                                       datetime_of(s->expires_ms), "parents"));
  json_array_append_new(arr, json_pack("{s:o, s:{s:s, s:o}, s:[o]}", "uid", uid("Shinken::Agent", s->id),
                                       "attrs", "model", s->model ? s->model : "", "expires",
                                       datetime_of(s->expires_ms), "parents",
                                       uid("Shinken::Session", s->id)));
  for (int c = 0; c < SHK_CAP__COUNT; c++) {
    const char *name = shk_cap_class_name((shk_cap_class)c);
    json_array_append_new(arr, json_pack("{s:o, s:{s:s}, s:[]}", "uid", uid("Shinken::Capability", name),
                                         "attrs", "class", name, "parents"));
  }
  char *text = json_dumps(arr, JSON_COMPACT);
  json_decref(arr);
  shk_cedar_error cerr;
  int r = shk_cedar_entities_parse(text, strlen(text), p->schema, out, &cerr);
  if (r)
    snprintf(why, whylen, "session entities: %.400s", cerr.message);
  free(text);
  return r;
}

static bool in_exec_path(const char *path)
{
  const char *env = getenv("PATH");
  if (!env)
    return false;
  char *copy = shk__xstrdup(env), *save = NULL;
  bool hit = false;
  for (char *d = strtok_r(copy, ":", &save); d && !hit; d = strtok_r(NULL, ":", &save)) {
    char real[PATH_MAX];
    const char *dir = realpath(d, real) ? real : d;
    size_t n = strlen(dir), m = strlen(path);
    /* The path is a $PATH directory, inside one, or above one (writing an
     * ancestor could replace the directory itself). */
    hit = (m >= n && !strncmp(path, dir, n) && (path[n] == '/' || path[n] == '\0')) ||
          (n > m && !strncmp(dir, path, m) && (dir[m] == '/' || !strcmp(path, "/")));
  }
  free(copy);
  return hit;
}

/* Puts one request to Cedar. */
static int ask(shk_policy *p, const shk_cedar_entities *es, const shk_policy_session *s,
               const char *action, const char *cls, json_t *context, shk_policy_answer *ans,
               const char *what)
{
  json_t *req = json_pack("{s:o, s:o, s:o, s:o}", "principal", uid("Shinken::Agent", s->id), "action",
                          uid("Shinken::Action", action), "resource", uid("Shinken::Capability", cls),
                          "context", context);
  char *text = json_dumps(req, JSON_COMPACT);
  json_decref(req);
  shk_cedar_request *r = NULL;
  shk_cedar_error cerr;
  int rc = shk_cedar_request_from_json(text, strlen(text), p->schema, true, &r, &cerr);
  free(text);
  if (rc) {
    snprintf(ans->why, sizeof ans->why, "%.60s: the request does not fit the schema: %.400s", what, cerr.message);
    ans->allow = false;
    return rc;
  }
  shk_cedar_response resp = { 0 };
  rc = shk_cedar_is_authorized(p->set, es, r, &resp);
  shk_cedar_request_free(r);
  if (rc) {
    ans->allow = false;
    snprintf(ans->why, sizeof ans->why, "%s: the policy engine failed", what);
    shk_cedar_response_clear(&resp);
    return rc;
  }
  ans->allow = resp.decision == SHK_CEDAR_ALLOW;
  const char *pid = resp.n_reasons ? resp.reasons[0] : NULL;
  /* Name the deciding policy by its @id when it has one. */
  if (!pid || shk_cedar_policy_annotation(p->set, pid, "id", ans->policy, sizeof ans->policy) < 0)
    snprintf(ans->policy, sizeof ans->policy, "%s", pid ? pid : "");
  if (ans->allow)
    snprintf(ans->why, sizeof ans->why, "permitted by %s", ans->policy);
  else if (pid)
    snprintf(ans->why, sizeof ans->why, "%s: forbidden by %s", what, ans->policy);
  else
    snprintf(ans->why, sizeof ans->why, "%s: no policy permits it (deny by default)%s", what,
             resp.n_errors ? "; a policy errored" : "");
  shk_cedar_response_clear(&resp);
  return 0;
}

static json_t *base_context(const shk_policy_session *s, const shk_policy_grant *g)
{
  return json_pack("{s:s, s:s, s:s, s:o, s:s, s:{}}", "trust_tier", s->trust_tier, "tier",
                   shk_cap_tier_name(g->tier), "approval_state", g->approval ? g->approval : "none",
                   "now", datetime_of(g->now_ms), "provenance", g->external ? "external" : "first-party",
                   "request");
}

typedef struct element {
  const char *key;     /* the request field */
  json_t *value;
  const char *key2;    /* an optional second field */
  json_t *value2;
} element;

int shk_policy_decide(shk_policy *p, const shk_policy_session *s, const shk_policy_grant *g,
                      shk_policy_answer *ans)
{
  memset(ans, 0, sizeof *ans);
  const shk_cap_scope *sc = g->scope;
  const char *cls = shk_cap_class_name(sc->cls);
  shk_cedar_entities *es = NULL;
  int r = session_entities(p, s, &es, ans->why, sizeof ans->why);
  if (r)
    return r;

  /* Every element of the scope, as request fields. */
  size_t cap = 16 + sc->domains.n + sc->cidrs.n + sc->n_ports + sc->read.n + sc->write.n + sc->deny.n +
               sc->device_ids.n + sc->paths.n + sc->broker_scopes.n;
  element *el = shk__xcalloc(cap, sizeof *el);
  size_t n = 0;
#define ADD(k, v) (el[n++] = (element){ (k), (v), NULL, NULL })
#define ADD2(k, v, k2, v2) (el[n++] = (element){ (k), (v), (k2), (v2) })
  for (size_t i = 0; i < sc->domains.n; i++)
    ADD("domain", json_string(sc->domains.v[i]));
  for (size_t i = 0; i < sc->cidrs.n; i++)
    ADD("ip", json_string(sc->cidrs.v[i]));
  for (size_t i = 0; i < sc->n_ports; i++)
    ADD("port", json_integer(sc->ports[i].lo));
  const shk_strv *fs[] = { &sc->read, &sc->write, &sc->deny };
  const char *access[] = { "read", "write", "deny" };
  for (int k = 0; k < 3; k++)
    for (size_t i = 0; i < fs[k]->n; i++)
      ADD2("path", json_string(fs[k]->v[i]), "access", json_string(access[k]));
  for (size_t i = 0; i < sc->device_ids.n; i++)
    ADD2("device_id", json_string(sc->device_ids.v[i]), "mode",
         json_string(sc->gpu_exclusive ? "exclusive" : "shared"));
  for (size_t i = 0; i < sc->paths.n; i++)
    ADD2("path", json_string(sc->paths.v[i]), "survives_session", json_boolean(sc->survives_session));
  for (size_t i = 0; i < sc->broker_scopes.n; i++)
    ADD2("scope", json_string(sc->broker_scopes.v[i]), "raw", json_false());
  if (sc->cls == SHK_CAP_INSTALL_PRIVILEGED)
    ADD("scope", json_string(sc->install_any ? "any" : "pkg"));
  const struct { bool on; const char *name; } flags[] = {
    { sc->cls == SHK_CAP_CLIPBOARD && sc->paste_in, "paste_in" },
    { sc->cls == SHK_CAP_CLIPBOARD && sc->copy_out, "copy_out" },
    { sc->cls == SHK_CAP_PERIPHERAL && sc->camera, "camera" },
    { sc->cls == SHK_CAP_PERIPHERAL && sc->mic, "mic" },
    { sc->cls == SHK_CAP_PERIPHERAL && sc->usb, "usb" },
    { sc->cls == SHK_CAP_PERIPHERAL && sc->input_inject, "input_inject" },
  };
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
    if (flags[i].on)
      ADD("flag", json_string(flags[i].name));
#undef ADD
#undef ADD2

  /* An empty scope still asks about the class itself. */
  ans->allow = true;
  for (size_t i = 0; i < (n ? n : 1) && r == 0 && ans->allow; i++) {
    json_t *ctx = base_context(s, g);
    json_t *req = json_object_get(ctx, "request");
    char what[300] = "the class";
    if (n) {
      json_object_set(req, el[i].key, el[i].value);
      if (el[i].key2)
        json_object_set(req, el[i].key2, el[i].value2);
      const char *sv = json_string_value(el[i].value);
      if (sv)
        snprintf(what, sizeof what, "%s %s", el[i].key, sv);
      else
        snprintf(what, sizeof what, "%s %lld", el[i].key, (long long)json_integer_value(el[i].value));
      if (!strcmp(el[i].key, "path") && el[i].key2 && !strcmp(el[i].key2, "access"))
        json_object_set_new(req, "in_exec_path", json_boolean(in_exec_path(sv)));
    }
    r = ask(p, es, s, "UseCapability", cls, ctx, ans, what);
  }
  for (size_t i = 0; i < n; i++) {
    json_decref(el[i].value);
    json_decref(el[i].value2);
  }
  free(el);
  shk_cedar_entities_free(es);
  if (r)
    ans->allow = false;
  return r;
}

int shk_policy_decide_disable(shk_policy *p, const shk_policy_session *s, const char *setting,
                              int64_t now_ms, shk_policy_answer *ans)
{
  memset(ans, 0, sizeof *ans);
  shk_cedar_entities *es = NULL;
  int r = session_entities(p, s, &es, ans->why, sizeof ans->why);
  if (r)
    return r;
  json_t *ctx = json_pack("{s:s, s:o, s:s}", "trust_tier", s->trust_tier, "now", datetime_of(now_ms),
                          "setting", setting);
  r = ask(p, es, s, "DisableSandbox", "net.egress", ctx, ans, setting);
  shk_cedar_entities_free(es);
  if (r)
    ans->allow = false;
  return r;
}
