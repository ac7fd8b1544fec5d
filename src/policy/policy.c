/* SPDX-License-Identifier: Apache-2.0 */
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
 * (UseCapability), or the layer (DisableSandbox). An element that is a
 * pattern also says what it covers: each field's pattern (a path prefix
 * with the scope's deny paths beneath it left out, a host pattern, a CIDR,
 * a port range). */
#define MAX_COVER 2
typedef struct element {
  json_t *fields;
  const char *layer;
  char what[200];
  shk_analysis_cover_field cover[MAX_COVER];
  size_t n_cover;
  char text[MAX_COVER][256];       /* the patterns, as cover[] points to them */
  shk_analysis_except *except;     /* the path's exceptions (malloc'd) */
  size_t n_except;
} element;

typedef struct elements {
  element *v;
  size_t n, cap;
  bool oom;
} elements;

static void elements_clear(elements *e)
{
  for (size_t i = 0; i < e->n; i++) {
    json_decref(e->v[i].fields);
    free(e->v[i].except);
  }
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
  *el = (element){ .fields = fields, .layer = layer };
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(el->what, sizeof el->what, fmt, ap);
  va_end(ap);
}

const char *shk_policy_home_rest(const char *path)
{
  if (!strncmp(path, "/root", 5) && (path[5] == '\0' || path[5] == '/'))
    return path[5] ? path + 6 : "";
  if (!strncmp(path, "/home/", 6) && path[6] && path[6] != '/') {
    const char *slash = strchr(path + 6, '/');
    return slash ? slash + 1 : "";
  }
  return NULL;
}

/* Whether B is A or lies beneath it. */
static bool beneath(const char *b, const char *a)
{
  size_t n = strlen(a);
  while (n > 1 && a[n - 1] == '/')
    n--;
  if (n == 1 && a[0] == '/')
    return true;
  return !strncmp(b, a, n) && (b[n] == '/' || b[n] == '\0');
}

/* Whether a path of the pattern PATH (it and everything beneath it, less
 * the EXCEPT subtrees) could be in an exec path: PATH is a $PATH directory
 * or inside one, or a $PATH directory lies beneath PATH outside the
 * exceptions (writing an ancestor could replace the directory itself). So
 * it is true for a prefix whenever it could be true for a path it covers. */
static bool in_exec_path(const shk_policy_session *s, const char *path, const shk_analysis_except *except,
                         size_t n_except)
{
  for (size_t i = 0; i < s->n_exec_path; i++) {
    const char *dir = s->exec_path[i];
    if (beneath(path, dir))
      return true;
    bool left_out = false;
    for (size_t k = 0; k < n_except && !left_out; k++)
      left_out = beneath(dir, except[k].text);
    if (beneath(dir, path) && !left_out)
      return true;
  }
  return false;
}

static json_t *ports_json(shk_port_range r)
{
  return json_pack("{s:I, s:I}", "lo", (json_int_t)r.lo, "hi", (json_int_t)r.hi);
}

/* Makes the last element added a pattern over FIELD as well. */
SHK_PRINTF(4, 5) static void covers(elements *e, const char *field, shk_analysis_cover_kind kind, const char *fmt,
                                    ...)
{
  if (e->oom || !e->n || NEVER(e->v[e->n - 1].n_cover == MAX_COVER))
    return;
  element *el = &e->v[e->n - 1];
  size_t k = el->n_cover++;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(el->text[k], sizeof el->text[k], fmt, ap);
  va_end(ap);
  el->cover[k] = (shk_analysis_cover_field){ field, kind, el->text[k], NULL, 0 };
}

/* A port range covers more than one port. */
static void cover_ports(elements *e, shk_port_range pr)
{
  if (pr.lo != pr.hi)
    covers(e, "request.ports", SHK_ANALYSIS_PORT_RANGE, "%u-%u", pr.lo, pr.hi);
}

/* A CIDR holds more than one address. */
static bool wide_cidr(const char *cidr)
{
  const char *slash = strchr(cidr, '/');
  int prefix = slash ? atoi(slash + 1) : -1;
  return prefix >= 0 && prefix < (strchr(cidr, ':') ? 128 : 32);
}

/* A net.egress scope, as the destinations it lets a connection reach, each
 * with each port range it may reach there: a pattern's own port, else the
 * scope's port list, else every port. So a policy about a port sees every
 * port the grant could open, as bounds it can test; and a host pattern, a
 * CIDR or a range of ports is a pattern over every host, address and port
 * it covers. */
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
      if (d[0] == '*')
        covers(e, "request.domain", SHK_ANALYSIS_HOST_PATTERN, "%.*s", hostlen, d);
      cover_ports(e, pr);
    }
  }
  for (size_t i = 0; i < sc->cidrs.n; i++)
    for (size_t k = 0; k < nr; k++) {
      add(e, json_pack("{s:s, s:o}", "ip", sc->cidrs.v[i], "ports", ports_json(ranges[k])), NULL,
          "ip %s ports %u-%u", sc->cidrs.v[i], ranges[k].lo, ranges[k].hi);
      if (wide_cidr(sc->cidrs.v[i]))
        covers(e, "request.ip", SHK_ANALYSIS_CIDR, "%s", sc->cidrs.v[i]);
      cover_ports(e, ranges[k]);
    }
  if (!sc->domains.n && !sc->cidrs.n)
    for (size_t k = 0; k < sc->n_ports; k++) {
      add(e, json_pack("{s:o}", "ports", ports_json(ranges[k])), NULL, "ports %u-%u", ranges[k].lo,
          ranges[k].hi);
      cover_ports(e, ranges[k]);
    }
}

/* A path that grants (an fs.scope read or write, a persistence path) is a
 * prefix of everything beneath it; the scope's deny paths beneath it are
 * left out of it. */
static void path_element(const shk_policy_session *s, const shk_cap_scope *sc, const char *path, const char *access,
                         elements *e)
{
  shk_analysis_except *ex = NULL;
  size_t n = 0;
  for (size_t i = 0; access && i < sc->deny.n; i++)
    if (beneath(sc->deny.v[i], path)) {
      shk_analysis_except *nx = realloc(ex, (n + 1) * sizeof *nx);
      if (!nx) {
        free(ex);
        e->oom = true;
        return;
      }
      ex = nx;
      ex[n++] = (shk_analysis_except){ sc->deny.v[i], false, 0 };
    }
  json_t *f = json_pack("{s:s, s:b}", "path", path, "in_exec_path", in_exec_path(s, path, ex, n));
  const char *home = shk_policy_home_rest(path);
  if (f && home && json_object_set_new(f, "home_path", json_string(home)) < 0) {
    json_decref(f);
    f = NULL;
  }
  if (f && json_object_set_new(f, access ? "access" : "survives_session",
                               access ? json_string(access) : json_boolean(sc->survives_session)) < 0) {
    json_decref(f);
    f = NULL;
  }
  if (access)
    add(e, f, NULL, "%s on %s", access, path);
  else
    add(e, f, NULL, "persistence of %s", path);
  covers(e, "request.path", SHK_ANALYSIS_PATH_PREFIX, "%s", path);
  if (!e->oom) {
    element *el = &e->v[e->n - 1];
    el->except = ex;
    el->n_except = n;
    el->cover[0].except = ex;
    el->cover[0].n_except = n;
    el->cover[0].home_field = "request.home_path";
  } else {
    free(ex);
  }
}

static void scope_elements(const shk_policy_session *s, const shk_cap_scope *sc, elements *e)
{
  if (sc->cls == SHK_CAP_NET_EGRESS)
    egress_elements(sc, e);
  for (size_t i = 0; i < sc->read.n; i++)
    path_element(s, sc, sc->read.v[i], "read", e);
  for (size_t i = 0; i < sc->write.n; i++)
    path_element(s, sc, sc->write.v[i], "write", e);
  /* A deny path grants nothing: it is no element of its own, only left out
   * of the read and write prefixes above it (so a narrowed grant that
   * leaves out what a forbid protects is not refused by that forbid). */
  for (size_t i = 0; i < sc->device_ids.n; i++)
    add(e, json_pack("{s:s, s:s}", "device_id", sc->device_ids.v[i], "mode",
                     sc->gpu_exclusive ? "exclusive" : "shared"),
        NULL, "device %s", sc->device_ids.v[i]);
  for (size_t i = 0; i < sc->paths.n; i++)
    path_element(s, sc, sc->paths.v[i], NULL, e);
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
 * capability classes, parsed, and as the JSON text it was parsed from (for
 * the analyzer). */
static int session_entities(const shk_policy *p, const shk_policy_session *s, shk_cedar_entities **out,
                            char **text_out, shk_error *err)
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
  if (r) {
    free(text);
    return shk__error_set(err, r == -ENOMEM ? r : -EINVAL, "the session does not fit the schema: %s",
                          cerr.message);
  }
  *text_out = text;
  return 0;
}

/* What one pass over the elements found. */
typedef struct pass {
  bool allow;          /* every element allowed */
  bool forbid;         /* not allowed because a forbid applied (or a policy errored) */
  bool unproven;       /* not allowed because a pattern could not be proven */
  int pattern;         /* the pattern element refused with a counterexample, or -1 */
  char policy[128];    /* the permit (allow), or the forbid, or "" */
  char why[400];
  char counterexample[512];
} pass;

/* The @id of a policy when it has one, else its Cedar id. */
static void policy_name(const shk_policy *p, const char *id, char *buf, size_t len)
{
  if (!id)
    buf[0] = '\0';
  else if (shk_cedar_policy_annotation(p->set, id, "id", buf, len) < 0)
    say(buf, len, "%s", id);
}

/* The Cedar request of one element as `approval` would have it, as JSON
 * text (NULL when out of memory). */
static char *element_request(const shk_policy_session *s, const shk_policy_request *r, shk_policy_tier tier,
                             shk_policy_approval approval, const element *el)
{
  bool disable = r->kind == SHK_POLICY_DISABLE;
  json_t *ctx = disable
    ? json_pack("{s:s, s:o, s:s}", "trust_tier", s->trust_tier, "now", datetime_of(r->now_ms),
                "approval_state", shk_policy_approval_name(approval))
    : json_pack("{s:s, s:s, s:s, s:o, s:s, s:O}", "trust_tier", s->trust_tier, "tier",
                shk_policy_tier_name(tier), "approval_state", shk_policy_approval_name(approval), "now",
                datetime_of(r->now_ms), "provenance",
                r->kind == SHK_POLICY_GRANT && r->external ? "external" : "first-party", "request",
                el->fields);
  json_t *req = ctx ? json_pack("{s:o, s:o, s:o, s:o}", "principal", uid("Shinken::Agent", s->id), "action",
                                uid("Shinken::Action", disable ? "DisableSandbox" : "UseCapability"), "resource",
                                disable ? uid("Shinken::Layer", el->layer)
                                        : uid("Shinken::Capability", shk_cap_class_name(r->scope->cls)),
                                "context", ctx)
                    : NULL;
  char *text = req ? json_dumps(req, JSON_COMPACT) : NULL;
  json_decref(req);
  return text;
}

/* The pattern question of one element. */
static shk__pattern_q pattern_q(const shk_policy_session *s, const shk_policy_request *r, const element *el,
                                const char *request, const char *entities)
{
  return (shk__pattern_q){ request, entities, el->cover, el->n_cover, r->now_ms, s->expires_ms - 1 };
}

/* A counterexample as the refusal shows it: "x.evil.org port 22". */
static void counterexample(const element *el, const shk_analysis_cover_result *res, char *buf, size_t len)
{
  size_t o = 0;
  buf[0] = '\0';
  for (size_t k = 0; k < el->n_cover && o < len; k++) {
    bool port = el->cover[k].kind == SHK_ANALYSIS_PORT_RANGE;
    o += (size_t)snprintf(buf + o, len - o, "%s%s%.400s", k ? " " : "", port ? "port " : "", res->witness[k]);
  }
}

/* Puts every element to Cedar as `approval` would have it, stopping at the
 * first that is not allowed; an element that is a pattern is allowed only
 * when every element it covers is. */
static int one_pass(const shk_policy *p, const shk_cedar_entities *es, const char *es_text,
                    const shk_policy_session *s, const shk_policy_request *r, shk_policy_tier tier,
                    shk_policy_approval approval, const elements *els, shk_cedar_response *resp, pass *out,
                    shk_error *err)
{
  memset(out, 0, sizeof *out);
  out->allow = true;
  out->pattern = -1;
  for (size_t i = 0; i < els->n && out->allow; i++) {
    const element *el = &els->v[i];
    char *text = element_request(s, r, tier, approval, el);
    if (!text)
      return shk__error_set(err, -ENOMEM, "out of memory");
    shk_cedar_request *cr = NULL;
    shk_cedar_error cerr;
    int rc = shk_cedar_request_from_json(text, strlen(text), p->schema, true, &cr, &cerr);
    if (rc) {
      free(text);
      return shk__error_set(err, rc == -ENOMEM ? rc : -EINVAL, "%s: the request does not fit the schema: %s",
                            el->what, cerr.message);
    }
    rc = shk_cedar_is_authorized(p->set, es, cr, resp);
    shk_cedar_request_free(cr);
    if (rc) {
      free(text);
      return shk__error_set(err, rc, "%s: the policy engine failed: %s", el->what, shk_strerror(rc));
    }
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
    if (out->allow && el->n_cover) {
      shk__pattern_q q = pattern_q(s, r, el, text, es_text);
      bool allowed = false;
      shk_analysis_cover_result res;
      shk_error perr = { 0 };
      rc = shk__pattern_check(p, &q, &allowed, &res, &perr);
      if (rc == -ENOMEM) {
        free(text);
        return shk__error_set(err, rc, "%s: out of memory", el->what);
      }
      if (rc < 0) {
        out->allow = false;
        out->unproven = true;
        out->policy[0] = '\0';
        say(out->why, sizeof out->why, "cannot prove that %s covers nothing forbidden: %s", el->what, perr.message);
      } else if (!allowed) {
        out->allow = false;
        out->forbid = res.policy[0] != '\0';
        out->pattern = (int)i;
        say(out->policy, sizeof out->policy, "%s", res.policy);
        counterexample(el, &res, out->counterexample, sizeof out->counterexample);
        if (res.policy[0])
          say(out->why, sizeof out->why, "%s covers %s, %s %s", el->what, out->counterexample,
              strstr(res.why, "an error stops it") ? "where an error stops it in" : "forbidden by", res.policy);
        else
          say(out->why, sizeof out->why, "%s covers %s, which no policy permits", el->what, out->counterexample);
      }
    }
    free(text);
  }
  return 0;
}

/* The name of a covered field in an offer: "path", "domain", "ip", "ports". */
static const char *short_field(const char *field)
{
  const char *dot = strrchr(field, '.');
  return dot ? dot + 1 : field;
}

/* The narrowed grant of a refused pattern element, as a human's approval
 * would have it; no offer when there is none within the bound or the
 * analysis fails (no offer is always safe). */
static void offer(const shk_policy *p, const shk_policy_session *s, const shk_policy_request *r,
                  shk_policy_tier tier, const element *el, const char *es_text, shk_policy_offer *o)
{
  char *text = element_request(s, r, tier, SHK_POLICY_APPROVED, el);
  if (!text)
    return;
  shk__pattern_q q = pattern_q(s, r, el, text, es_text);
  shk_analysis_narrowing nw;
  if (shk__pattern_narrow(p, &q, &nw, NULL) == 0 && nw.found && NEVER(nw.n_except > SHK_POLICY_MAX_EXCEPT) == 0) {
    o->offered = true;
    say(o->element, sizeof o->element, "%s", el->what);
    size_t w = (size_t)snprintf(o->why, sizeof o->why, "%s without", el->what);
    for (size_t i = 0; i < nw.n_except; i++) {
      const shk_analysis_except *x = &nw.except[i];
      say(o->except[i].field, sizeof o->except[i].field, "%s", short_field(el->cover[x->field].field));
      say(o->except[i].text, sizeof o->except[i].text, "%s", x->text);
      o->except[i].exact = x->exact;
      if (w < sizeof o->why)
        w += (size_t)snprintf(o->why + w, sizeof o->why - w, "%s %s %s%s", i ? "," : "", o->except[i].field,
                              x->text, x->exact ? " (this path alone)" : "");
    }
    o->n_except = nw.n_except;
  }
  shk_analysis_narrowing_clear(&nw);
  free(text);
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
  char *es_text = NULL;
  shk_cedar_response resp = { 0 };
  pass now, then;
  int rc = build_elements(s, r, &els, err);
  if (!rc)
    rc = session_entities(p, s, &es, &es_text, err);
  if (!rc)
    rc = one_pass(p, es, es_text, s, r, tier, r->approval, &els, &resp, &now, err);
  /* A pattern that could not be proven now cannot be proven once approved
   * either (the solver is missing or failing): no second attempt. */
  bool askable = !rc && !now.allow && !now.unproven && r->approval == SHK_POLICY_UNASKED;
  if (askable)
    rc = one_pass(p, es, es_text, s, r, tier, SHK_POLICY_APPROVED, &els, &resp, &then, err);
  shk_cedar_response_clear(&resp);
  shk_cedar_entities_free(es);

  if (rc) {
    /* Nothing was decided. */
  } else if (now.allow) {
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
    /* What stops it even with a human's approval, when that is a forbid or
     * a pattern; else what stops it now. */
    const pass *d = askable && (then.forbid || then.unproven || then.pattern >= 0) ? &then : &now;
    say(ans->policy, sizeof ans->policy, "%s", d->policy);
    say(ans->why, sizeof ans->why, "%s", d->why);
    say(ans->counterexample, sizeof ans->counterexample, "%s", d->counterexample);
    /* A narrower grant a human could approve instead: never against a
     * human's own denial. */
    if (d->pattern >= 0 && r->approval != SHK_POLICY_DENIED)
      offer(p, s, r, tier, &els.v[d->pattern], es_text, &ans->offer);
  }
  elements_clear(&els);
  free(es_text);
  return rc;
}
