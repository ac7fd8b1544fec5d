/* The one decision: manifest -> provenance promotion -> tier -> Cedar over
 * the admin, project and session tiers -> allow, ask or deny.
 *
 * Why this is safe: everything the answer depends on is an argument (the
 * loaded policy, the session, the request, the approval state the manager
 * holds); nothing is read from the environment, so two calls with the same
 * inputs give the same answer, and a test of the answers is a test of the
 * decision. Every value reaches Cedar as a JSON parameter, never pasted
 * into policy text. A request is allowed only when every element of its
 * scope is allowed with no policy erroring; anything the engine cannot
 * decide is a denial. */
#include "shinken/policy.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/common.h"
#include "policy/policy-internal.h"
#include "shinken/cedar.h"

/* snprintf for messages, where cutting a long line short is intended. */
SHK_PRINTF(3, 4) static void say(char *buf, size_t len, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, len, fmt, ap);
  va_end(ap);
}

/* ---------------------------------------------------------------- names */

static const char *const tier_names[] = { "Auto", "Notify", "Ask", "Block" };

const char *shk_policy_tier_name(shk_policy_tier t)
{
  return (unsigned)t <= SHK_POLICY_TIER_BLOCK ? tier_names[t] : NULL;
}

int shk_policy_tier_parse(const char *name, shk_policy_tier *out)
{
  for (int i = 0; i <= SHK_POLICY_TIER_BLOCK; i++)
    if (name && !strcmp(name, tier_names[i])) {
      *out = (shk_policy_tier)i;
      return 0;
    }
  return -EINVAL;
}

const char *shk_policy_approval_name(shk_policy_approval a)
{
  switch (a) {
  case SHK_POLICY_UNASKED: return "none";
  case SHK_POLICY_APPROVED: return "approved";
  case SHK_POLICY_DENIED: return "denied";
  }
  return NULL;
}

const char *shk_policy_verdict_name(shk_policy_verdict v)
{
  switch (v) {
  case SHK_POLICY_ALLOW: return "allow";
  case SHK_POLICY_ASK: return "ask";
  case SHK_POLICY_DENY: return "deny";
  }
  return NULL;
}

const char *const shk_policy_layers[] = {
  "network", "user-separation", "landlock", "seccomp", "connect-guard", "cgroup", NULL,
};

static bool known_layer(const char *name)
{
  for (const char *const *l = shk_policy_layers; name && *l; l++)
    if (!strcmp(*l, name))
      return true;
  return false;
}

/* ------------------------------------------------------------ promotion */

/* Why: an agent that read attacker-controlled text may have been told what
 * to ask for. Promoting such a request puts a human (or at least a notice)
 * between the injected instruction and the effect. The combination of
 * untrusted input, sensitive data and a way out is the exfiltration shape,
 * so a data-leaving action of such a session always needs a human. */
static shk_policy_tier promote(shk_policy_tier base, bool external, const shk_policy_taint *taint,
                               bool data_leaving, const char **because)
{
  shk_policy_tier t = base;
  *because = NULL;
  if (external && t < SHK_POLICY_TIER_BLOCK) {
    t = (shk_policy_tier)(t + 1);
    *because = "the request derives from external data";
  }
  if (data_leaving && taint->ingested_external && taint->touched_sensitive && t < SHK_POLICY_TIER_ASK) {
    t = SHK_POLICY_TIER_ASK;
    *because = "the session ingested external content and touched sensitive data, and this leaves the machine";
  }
  return t;
}

static bool data_leaving(const shk_cap_scope *sc)
{
  return sc->cls == SHK_CAP_NET_EGRESS || (sc->cls == SHK_CAP_CLIPBOARD && sc->copy_out);
}

/* ------------------------------------------------------------- elements */

/* One Cedar request's worth of a request: the fields of context.request
 * (UseCapability), or the layer (DisableSandbox). */
typedef struct element {
  json_t *fields;
  const char *layer;
  char what[200];
} element;

typedef struct elements {
  element *v;
  size_t n, cap;
  bool oom;
} elements;

static void elements_clear(elements *e)
{
  for (size_t i = 0; i < e->n; i++)
    json_decref(e->v[i].fields);
  free(e->v);
}

/* Takes `fields` (NULL from a failed json_pack is out of memory). */
SHK_PRINTF(4, 5) static void add(elements *e, json_t *fields, const char *layer, const char *fmt, ...)
{
  if (e->oom || (!fields && !layer)) {
    json_decref(fields);
    e->oom = true;
    return;
  }
  if (e->n == e->cap) {
    size_t nc = e->cap ? e->cap * 2 : 16;
    element *nv = realloc(e->v, nc * sizeof *nv);
    if (!nv) {
      json_decref(fields);
      e->oom = true;
      return;
    }
    e->v = nv;
    e->cap = nc;
  }
  element *el = &e->v[e->n++];
  el->fields = fields;
  el->layer = layer;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(el->what, sizeof el->what, fmt, ap);
  va_end(ap);
}

/* The path is a $PATH directory, inside one, or above one (writing an
 * ancestor could replace the directory itself). */
static bool in_exec_path(const shk_policy_session *s, const char *path)
{
  size_t m = strlen(path);
  for (size_t i = 0; i < s->n_exec_path; i++) {
    const char *dir = s->exec_path[i];
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
      n--;
    if (n == 1 && dir[0] == '/')
      return true;
    if ((m >= n && !strncmp(path, dir, n) && (path[n] == '/' || path[n] == '\0')) ||
        (n > m && !strncmp(dir, path, m) && (dir[m] == '/' || !strcmp(path, "/"))))
      return true;
  }
  return false;
}

static json_t *ports_json(shk_port_range r)
{
  return json_pack("{s:I, s:I}", "lo", (json_int_t)r.lo, "hi", (json_int_t)r.hi);
}

/* A net.egress scope, as the destinations it lets a connection reach, each
 * with each port range it may reach there: a pattern's own port, else the
 * scope's port list, else every port. So a policy about a port sees every
 * port the grant could open, as bounds it can test. */
static void egress_elements(const shk_cap_scope *sc, elements *e)
{
  static const shk_port_range every = { 1, 65535 };
  const shk_port_range *ranges = sc->n_ports ? sc->ports : &every;
  size_t nr = sc->n_ports ? sc->n_ports : 1;
  for (size_t i = 0; i < sc->domains.n; i++) {
    const char *d = sc->domains.v[i], *colon = strrchr(d, ':');
    int hostlen = (int)(colon ? (size_t)(colon - d) : strlen(d));
    shk_port_range own = { 0, 0 };
    if (colon)
      own.lo = own.hi = (uint16_t)atoi(colon + 1);
    for (size_t k = 0; k < (colon ? 1 : nr); k++) {
      shk_port_range pr = colon ? own : ranges[k];
      add(e, json_pack("{s:s%, s:o}", "domain", d, (size_t)hostlen, "ports", ports_json(pr)), NULL,
          "domain %.*s ports %u-%u", hostlen, d, pr.lo, pr.hi);
    }
  }
  for (size_t i = 0; i < sc->cidrs.n; i++)
    for (size_t k = 0; k < nr; k++)
      add(e, json_pack("{s:s, s:o}", "ip", sc->cidrs.v[i], "ports", ports_json(ranges[k])), NULL,
          "ip %s ports %u-%u", sc->cidrs.v[i], ranges[k].lo, ranges[k].hi);
  if (!sc->domains.n && !sc->cidrs.n)
    for (size_t k = 0; k < sc->n_ports; k++)
      add(e, json_pack("{s:o}", "ports", ports_json(ranges[k])), NULL, "ports %u-%u", ranges[k].lo,
          ranges[k].hi);
}

static void scope_elements(const shk_policy_session *s, const shk_cap_scope *sc, elements *e)
{
  if (sc->cls == SHK_CAP_NET_EGRESS)
    egress_elements(sc, e);
  const shk_strv *fs[] = { &sc->read, &sc->write, &sc->deny };
  const char *access[] = { "read", "write", "deny" };
  for (int k = 0; k < 3; k++)
    for (size_t i = 0; i < fs[k]->n; i++)
      add(e, json_pack("{s:s, s:s, s:b}", "path", fs[k]->v[i], "access", access[k], "in_exec_path",
                       in_exec_path(s, fs[k]->v[i])),
          NULL, "path %s (%s)", fs[k]->v[i], access[k]);
  for (size_t i = 0; i < sc->device_ids.n; i++)
    add(e, json_pack("{s:s, s:s}", "device_id", sc->device_ids.v[i], "mode",
                     sc->gpu_exclusive ? "exclusive" : "shared"),
        NULL, "device %s", sc->device_ids.v[i]);
  for (size_t i = 0; i < sc->paths.n; i++)
    add(e, json_pack("{s:s, s:b}", "path", sc->paths.v[i], "survives_session", sc->survives_session), NULL,
        "path %s", sc->paths.v[i]);
  for (size_t i = 0; i < sc->broker_scopes.n; i++)
    add(e, json_pack("{s:s, s:b}", "scope", sc->broker_scopes.v[i], "raw", 0), NULL, "scope %s",
        sc->broker_scopes.v[i]);
  if (sc->cls == SHK_CAP_INSTALL_PRIVILEGED)
    add(e, json_pack("{s:s}", "scope", sc->install_any ? "any" : "pkg"), NULL, "scope %s",
        sc->install_any ? "any" : "pkg");
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
      add(e, json_pack("{s:s}", "flag", flags[i].name), NULL, "flag %s", flags[i].name);
  /* An empty scope still asks about the class itself. */
  if (e->n == 0 && !e->oom)
    add(e, json_object(), NULL, "the class");
}

/* ------------------------------------------------------------- Cedar */

static json_t *uid(const char *type, const char *id)
{
  return json_pack("{s:s, s:s}", "type", type, "id", id);
}

static json_t *datetime_of(int64_t ms)
{
  char buf[64];
  if (ms < 0)
    ms = 0;
  time_t secs = (time_t)(ms / 1000);
  struct tm tm;
  if (!gmtime_r(&secs, &tm) || tm.tm_year + 1900 > 9999)
    return json_string("9999-12-31T23:59:59.999Z");
  snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
           tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
  return json_string(buf);
}

/* The entity store of one decision: the agent, its session and the eight
 * capability classes. */
static int session_entities(const shk_policy *p, const shk_policy_session *s, shk_cedar_entities **out,
                            shk_error *err)
{
  json_t *arr = json_array();
  int bad = !arr;
  bad |= json_array_append_new(arr, json_pack("{s:o, s:{s:s, s:o}, s:[]}", "uid", uid("Shinken::Session", s->id),
                                              "attrs", "trust_tier", s->trust_tier, "expires",
                                              datetime_of(s->expires_ms), "parents"));
  bad |= json_array_append_new(arr, json_pack("{s:o, s:{s:s, s:o}, s:[o]}", "uid", uid("Shinken::Agent", s->id),
                                              "attrs", "model", s->model ? s->model : "", "expires",
                                              datetime_of(s->expires_ms), "parents",
                                              uid("Shinken::Session", s->id)));
  for (int c = 0; c < SHK_CAP__COUNT; c++) {
    const char *name = shk_cap_class_name((shk_cap_class)c);
    bad |= json_array_append_new(arr, json_pack("{s:o, s:{s:s}, s:[]}", "uid", uid("Shinken::Capability", name),
                                                "attrs", "class", name, "parents"));
  }
  char *text = bad ? NULL : json_dumps(arr, JSON_COMPACT);
  json_decref(arr);
  if (!text)
    return shk__error_set(err, -ENOMEM, "out of memory");
  shk_cedar_error cerr;
  int r = shk_cedar_entities_parse(text, strlen(text), p->schema, out, &cerr);
  free(text);
  if (r)
    return shk__error_set(err, r == -ENOMEM ? r : -EINVAL, "the session does not fit the schema: %s",
                          cerr.message);
  return 0;
}

/* What one pass over the elements found. */
typedef struct pass {
  bool allow;          /* every element allowed */
  bool forbid;         /* not allowed because a forbid applied */
  char policy[128];    /* the permit (allow), or the forbid, or "" */
  char why[400];
} pass;

/* The @id of a policy when it has one, else its Cedar id. */
static void policy_name(const shk_policy *p, const char *id, char *buf, size_t len)
{
  if (!id)
    buf[0] = '\0';
  else if (shk_cedar_policy_annotation(p->set, id, "id", buf, len) < 0)
    say(buf, len, "%s", id);
}

/* Puts every element to Cedar as `approval` would have it, stopping at the
 * first that is not allowed. */
static int one_pass(const shk_policy *p, const shk_cedar_entities *es, const shk_policy_session *s,
                    const shk_policy_request *r, shk_policy_tier tier, shk_policy_approval approval,
                    const elements *els, shk_cedar_response *resp, pass *out, shk_error *err)
{
  memset(out, 0, sizeof *out);
  out->allow = true;
  bool disable = r->kind == SHK_POLICY_DISABLE;
  for (size_t i = 0; i < els->n && out->allow; i++) {
    const element *el = &els->v[i];
    json_t *ctx = disable
      ? json_pack("{s:s, s:o, s:s}", "trust_tier", s->trust_tier, "now", datetime_of(r->now_ms),
                  "approval_state", shk_policy_approval_name(approval))
      : json_pack("{s:s, s:s, s:s, s:o, s:s, s:O}", "trust_tier", s->trust_tier, "tier",
                  shk_policy_tier_name(tier), "approval_state", shk_policy_approval_name(approval), "now",
                  datetime_of(r->now_ms), "provenance",
                  r->kind == SHK_POLICY_GRANT && r->external ? "external" : "first-party", "request",
                  el->fields);
    json_t *req = ctx ? json_pack("{s:o, s:o, s:o, s:o}", "principal", uid("Shinken::Agent", s->id), "action",
                                  uid("Shinken::Action", disable ? "DisableSandbox" : "UseCapability"),
                                  "resource",
                                  disable ? uid("Shinken::Layer", el->layer)
                                          : uid("Shinken::Capability", shk_cap_class_name(r->scope->cls)),
                                  "context", ctx)
                      : NULL;
    char *text = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (!text)
      return shk__error_set(err, -ENOMEM, "out of memory");
    shk_cedar_request *cr = NULL;
    shk_cedar_error cerr;
    int rc = shk_cedar_request_from_json(text, strlen(text), p->schema, true, &cr, &cerr);
    free(text);
    if (rc)
      return shk__error_set(err, rc == -ENOMEM ? rc : -EINVAL, "%s: the request does not fit the schema: %s",
                            el->what, cerr.message);
    rc = shk_cedar_is_authorized(p->set, es, cr, resp);
    shk_cedar_request_free(cr);
    if (rc)
      return shk__error_set(err, rc, "%s: the policy engine failed: %s", el->what, shk_strerror(rc));
    const char *id = resp->n_reasons ? resp->reasons[0] : NULL;
    if (resp->n_errors) {
      /* A policy that errors is skipped by Cedar; here it stops the grant,
       * since a forbid that errored would otherwise let it through. */
      out->allow = false;
      policy_name(p, resp->errors[0].policy_id, out->policy, sizeof out->policy);
      out->forbid = true;
      say(out->why, sizeof out->why, "%s: policy %s errored: %.200s", el->what, out->policy,
          resp->errors[0].message);
    } else if (resp->decision == SHK_CEDAR_ALLOW) {
      if (i == 0) {
        policy_name(p, id, out->policy, sizeof out->policy);
        say(out->why, sizeof out->why, "permitted by %s", out->policy);
      }
    } else {
      out->allow = false;
      out->forbid = id != NULL;
      policy_name(p, id, out->policy, sizeof out->policy);
      if (id)
        say(out->why, sizeof out->why, "%s: forbidden by %s", el->what, out->policy);
      else
        say(out->why, sizeof out->why, "%s: no policy permits it (deny by default)", el->what);
    }
  }
  return 0;
}

static int build_elements(const shk_policy_session *s, const shk_policy_request *r, elements *els,
                          shk_error *err)
{
  if (r->kind == SHK_POLICY_DISABLE) {
    if (!r->n_layers)
      return shk__error_set(err, -EINVAL, "no layer named to turn off");
    for (size_t i = 0; i < r->n_layers; i++) {
      if (!known_layer(r->layers[i]))
        return shk__error_set(err, -EINVAL, "unknown layer '%s'", r->layers[i] ? r->layers[i] : "");
      add(els, NULL, r->layers[i], "turning off %s", r->layers[i]);
    }
  } else {
    scope_elements(s, r->scope, els);
  }
  return els->oom ? shk__error_set(err, -ENOMEM, "out of memory") : 0;
}

int shk_policy_decide(const shk_policy *p, const shk_policy_session *s, const shk_policy_request *r,
                      shk_policy_answer *ans, shk_error *err)
{
  memset(ans, 0, sizeof *ans);
  ans->verdict = SHK_POLICY_DENY;
  ans->decided_by = SHK_POLICY_BY_CEDAR;
  ans->manifest_entry = -1;
  say(ans->why, sizeof ans->why, "the question could not be put");
  if (!p || !s || !r || !s->id || !s->trust_tier || (s->n_exec_path && !s->exec_path))
    return shk__error_set(err, -EINVAL, "the decision needs a policy, a session and a request");
  if (r->kind != SHK_POLICY_GRANT && r->kind != SHK_POLICY_STANDING && r->kind != SHK_POLICY_DISABLE)
    return shk__error_set(err, -EINVAL, "unknown kind of request");
  if (r->kind != SHK_POLICY_DISABLE && (!r->scope || !shk_cap_class_name(r->scope->cls)))
    return shk__error_set(err, -EINVAL, "a grant needs a scope of a known class");

  /* 1. The manifest, and 2. provenance promotion. */
  const char *promoted = NULL;
  shk_policy_tier tier = r->kind == SHK_POLICY_DISABLE ? SHK_POLICY_TIER_ASK : SHK_POLICY_TIER_AUTO;
  if (r->kind == SHK_POLICY_GRANT) {
    shk_error merr;
    int entry = shk__manifest_check(p->manifest, r->scope, &tier, &merr);
    if (entry < 0) {
      ans->decided_by = SHK_POLICY_BY_MANIFEST;
      say(ans->why, sizeof ans->why, "%s", merr.message);
      return 0;
    }
    ans->manifest_entry = entry;
  }
  ans->base_tier = tier;
  if (r->kind == SHK_POLICY_GRANT)
    tier = promote(tier, r->external, &s->taint, data_leaving(r->scope), &promoted);
  ans->tier = tier;

  /* 3. Cedar: as things stand, and when no human has answered yet, as
   * they would stand once one approved. */
  elements els = { 0 };
  shk_cedar_entities *es = NULL;
  shk_cedar_response resp = { 0 };
  pass now, then;
  int rc = build_elements(s, r, &els, err);
  if (!rc)
    rc = session_entities(p, s, &es, err);
  if (!rc)
    rc = one_pass(p, es, s, r, tier, r->approval, &els, &resp, &now, err);
  bool askable = !rc && !now.allow && r->approval == SHK_POLICY_UNASKED;
  if (askable)
    rc = one_pass(p, es, s, r, tier, SHK_POLICY_APPROVED, &els, &resp, &then, err);
  shk_cedar_response_clear(&resp);
  shk_cedar_entities_free(es);
  elements_clear(&els);
  if (rc)
    return rc;

  if (now.allow) {
    ans->verdict = SHK_POLICY_ALLOW;
    say(ans->policy, sizeof ans->policy, "%s", now.policy);
    say(ans->why, sizeof ans->why, "%s", now.why);
  } else if (askable && then.allow) {
    ans->verdict = SHK_POLICY_ASK;
    say(ans->policy, sizeof ans->policy, "%s", then.policy);
    char rule[300];
    if (r->kind == SHK_POLICY_DISABLE)
      say(rule, sizeof rule, "turning a layer of enforcement off needs a human's approval");
    else if (promoted)
      say(rule, sizeof rule, "promoted from %s to %s: %s", shk_policy_tier_name(ans->base_tier),
          shk_policy_tier_name(tier), promoted);
    else if (tier == SHK_POLICY_TIER_ASK)
      say(rule, sizeof rule, "manifest entry %d puts it at Ask", ans->manifest_entry);
    else
      say(rule, sizeof rule, "%s", now.why);
    say(ans->why, sizeof ans->why, "%s; once a human approves, %s", rule, then.why);
  } else {
    /* What stops it even with a human's approval, when that is a forbid;
     * else what stops it now. */
    const pass *d = askable && then.forbid ? &then : &now;
    say(ans->policy, sizeof ans->policy, "%s", d->policy);
    say(ans->why, sizeof ans->why, "%s", d->why);
  }
  return 0;
}
