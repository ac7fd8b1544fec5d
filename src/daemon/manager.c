/* The capability manager: the session registry, the grant and revoke
 * protocol, events, and the egress decision hook.
 *
 * Grant, failing closed at every step, in this order: manifest check ->
 * Cedar -> issue the handle -> push the OS delta -> emit the event. A step
 * that fails undoes the ones before it, so no authority remains.
 * Revoke: flip the bit (the next use fails from that moment) -> close the
 * tunnels opened under the handle or anything derived from it -> event. */
#include "shinken/daemon.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common/common.h"
#include "daemon/daemon-internal.h"
#include "shinken/cap.h"
#include "shinken/egress.h"
#include "shinken/policy.h"

typedef struct grant {
  char id[SHK_CAP_ID_HEX];
  char rule[32];          /* "handle:" and the first hex digits, for audit lines */
  uint64_t tag;           /* binds egress tunnels to this handle */
  shk_cap_class cls;
  bool torn_down;         /* dead, and its tunnels closed: nothing left to do */
} grant;

typedef struct session {
  char id[64];
  char trust_tier[16];
  char model[64];
  int64_t expires_ms;
  shk_cap_taint taint;
  shk_egress_session *egress;
  grant *grants;
  size_t n_grants, cap_grants;
  struct session *next;
} session;

struct shk_manager {
  pthread_mutex_t mu;      /* the registry; the egress hook takes it */
  pthread_mutex_t end_mu;  /* held while a session's proxy may be touched outside mu */
  shk_policy *policy;
  shk_cap_manifest *manifest;
  shk_cap_scope *standing;  /* admin's standing grants, each session gets them */
  size_t n_standing;
  shk_cap_table *table;
  session *sessions;
  uint64_t next_tag;
  FILE *events;
  bool own_events;
  pthread_mutex_t events_mu;
  shk__control *control;
};

static int64_t now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void emit(shk_manager *m, const char *actor, const char *sess, const char *cls, json_t *scope,
                 const char *decision, const char *policy, const char *handle, const char *why)
{
  json_t *e = json_pack("{s:I, s:s, s:s?, s:s?, s:O?, s:s, s:s?, s:s?, s:s?}", "time", (json_int_t)now_ms(),
                        "actor", actor, "session", sess, "class", cls, "scope", scope, "decision",
                        decision, "policy", policy && *policy ? policy : NULL, "handle", handle,
                        "reason", why);
  char *line = json_dumps(e, JSON_COMPACT);
  json_decref(e);
  pthread_mutex_lock(&m->events_mu);
  fprintf(m->events, "%s\n", line);
  fflush(m->events);
  pthread_mutex_unlock(&m->events_mu);
  free(line);
}

/* The admin's standing grants: [{"class": C, "scope": {...}}, ...]. Any
 * malformed entry stops the manager: a half-read list would grant less or
 * more than the admin wrote. */
static int load_standing(shk_manager *m, const char *path, char *err, size_t errlen)
{
  json_error_t jerr;
  json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
  if (!json_is_array(root)) {
    snprintf(err, errlen, "%s: %s", path, root ? "expected an array of {\"class\", \"scope\"}" : jerr.text);
    json_decref(root);
    return -EINVAL;
  }
  m->standing = shk__xcalloc(json_array_size(root) + 1, sizeof *m->standing);
  size_t i;
  json_t *e;
  int r = 0;
  json_array_foreach(root, i, e) {
    const char *cname = json_string_value(json_object_get(e, "class"));
    json_t *scope = json_object_get(e, "scope");
    shk_cap_class cls;
    if (!json_is_object(e) || json_object_size(e) != 2 || !cname || shk_cap_class_parse(cname, &cls) ||
        !json_is_object(scope)) {
      snprintf(err, errlen, "%s: entry %zu: expected {\"class\": one of the eight classes, \"scope\": {...}}", path, i);
      r = -EINVAL;
      break;
    }
    char *text = json_dumps(scope, JSON_COMPACT);
    shk_error serr;
    r = shk_cap_scope_parse(cls, text, &m->standing[m->n_standing], &serr);
    free(text);
    if (r) {
      snprintf(err, errlen, "%s: entry %zu: %s", path, i, serr.message);
      break;
    }
    m->n_standing++;
  }
  json_decref(root);
  return r;
}

int shk_manager_new(const shk_manager_opts *o, shk_manager **out, char *err, size_t errlen)
{
  *out = NULL;
  shk_manager *m = shk__xcalloc(1, sizeof *m);
  pthread_mutex_init(&m->mu, NULL);
  pthread_mutex_init(&m->end_mu, NULL);
  pthread_mutex_init(&m->events_mu, NULL);
  m->table = shk_cap_table_new();
  m->next_tag = 1;
  m->events = stderr;
  char *session_text = NULL, *manifest_text = NULL;
  int r;
  if (o->session_policy && (r = shk__read_file(o->session_policy, &session_text, NULL))) {
    snprintf(err, errlen, "%s: %s", o->session_policy, strerror(-r));
    goto fail;
  }
  if ((r = shk_policy_load(o->policy_dir, session_text, &m->policy, err, errlen)))
    goto fail;
  if ((r = shk__read_file(o->manifest, &manifest_text, NULL))) {
    snprintf(err, errlen, "%s: %s", o->manifest, strerror(-r));
    goto fail;
  }
  char merr[256];
  if ((r = shk_cap_manifest_parse(manifest_text, &m->manifest, merr, sizeof merr))) {
    snprintf(err, errlen, "%s: %s", o->manifest, merr);
    goto fail;
  }
  if (o->standing && (r = load_standing(m, o->standing, err, errlen)))
    goto fail;
  if (o->event_log) {
    m->events = fopen(o->event_log, "ae");
    if (!m->events) {
      r = -errno;
      snprintf(err, errlen, "%s: %s", o->event_log, strerror(errno));
      m->events = stderr;
      goto fail;
    }
    m->own_events = true;
  }
  free(session_text);
  free(manifest_text);
  *out = m;
  return 0;
fail:
  free(session_text);
  free(manifest_text);
  shk_manager_free(m);
  return r;
}

static session *find_session(shk_manager *m, const char *id)
{
  for (session *s = m->sessions; s; s = s->next)
    if (id && !strcmp(s->id, id))
      return s;
  return NULL;
}

/* Caller holds m->mu. Revokes every grant (so the hook refuses from now on)
 * and unlinks the session; destroy_session finishes the job. */
static void detach_session(shk_manager *m, session *s)
{
  shk_cap_revoke_session(m->table, s->id);
  for (session **pp = &m->sessions; *pp; pp = &(*pp)->next)
    if (*pp == s) {
      *pp = s->next;
      break;
    }
}

/* Caller does NOT hold m->mu: closing the proxy joins its thread, which may
 * be waiting for m->mu inside the hook. */
static void destroy_session(shk_manager *m, session *s, const char *actor)
{
  pthread_mutex_lock(&m->end_mu);
  shk_egress_session_close(s->egress);
  pthread_mutex_unlock(&m->end_mu);
  emit(m, actor, s->id, NULL, NULL, "session-closed", NULL, NULL, NULL);
  free(s->grants);
  free(s);
}

void shk_manager_free(shk_manager *m)
{
  if (!m)
    return;
  shk__control_stop(m->control);
  for (;;) {
    pthread_mutex_lock(&m->mu);
    session *s = m->sessions;
    if (s)
      detach_session(m, s);
    pthread_mutex_unlock(&m->mu);
    if (!s)
      break;
    destroy_session(m, s, "manager");
  }
  shk_cap_table_free(m->table);
  shk_cap_manifest_free(m->manifest);
  for (size_t i = 0; i < m->n_standing; i++)
    shk_cap_scope_clear(&m->standing[i]);
  free(m->standing);
  shk_policy_free(m->policy);
  if (m->own_events)
    fclose(m->events);
  pthread_mutex_destroy(&m->mu);
  pthread_mutex_destroy(&m->end_mu);
  pthread_mutex_destroy(&m->events_mu);
  free(m);
}

/* The egress hook, on the proxy's thread, for every new connection and DNS
 * query of a session: a live net.egress handle of that session that covers
 * the destination allows it, and tags the tunnel with the handle so a
 * revoke can close it. Nothing is cached: each call reads the handles'
 * revoked bits. No handle: no opinion, and the proxy's deny-by-default
 * stands. */
static shk_egress_verdict egress_hook(void *data, const shk_egress_request *req, uint64_t *tag,
                                      const char **rule)
{
  shk_manager *m = data;
  shk_egress_verdict v = SHK_EGRESS_NONE;
  int64_t now = now_ms();
  pthread_mutex_lock(&m->mu);
  session *s = find_session(m, req->session);
  for (size_t i = 0; s && i < s->n_grants && v == SHK_EGRESS_NONE; i++) {
    grant *g = &s->grants[i];
    /* A torn-down grant is revoked for good: skip it without the lookup. */
    if (g->cls != SHK_CAP_NET_EGRESS || g->torn_down || shk_cap_check(m->table, g->id, now))
      continue;
    const shk_cap_scope *sc = shk_cap_scope_of(m->table, g->id);
    if (!sc || !shk_cap_scope_allows_host(sc, req->host, req->port))
      continue;
    /* A DNS answer is not a use; the connection that follows is. */
    if (req->proto != SHK_EGRESS_DNS && shk_cap_use(m->table, g->id, now))
      continue;
    v = SHK_EGRESS_ALLOW;
    *tag = g->tag;
    *rule = g->rule;
  }
  pthread_mutex_unlock(&m->mu);
  return v;
}

/* Caller holds m->mu. Registers an issued handle with its session: from
 * here on the egress hook sees it. */
static void add_grant(shk_manager *m, session *s, grant *g)
{
  g->tag = m->next_tag++;
  snprintf(g->rule, sizeof g->rule, "handle:%.12s", g->id);
  if (s->n_grants == s->cap_grants) {
    s->cap_grants = s->cap_grants ? s->cap_grants * 2 : 8;
    s->grants = shk__xrealloc(s->grants, s->cap_grants * sizeof *s->grants);
  }
  s->grants[s->n_grants++] = *g;
}

static json_t *refuse(const char *fmt, ...) SHK_PRINTF(1, 2);
static json_t *refuse(const char *fmt, ...)
{
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return json_pack("{s:b, s:s}", "ok", 0, "error", buf);
}

static const char *str_or(json_t *req, const char *key, const char *dflt)
{
  const char *v = json_string_value(json_object_get(req, key));
  return v ? v : dflt;
}

static int strlist(json_t *req, const char *key, const char ***out, size_t *n)
{
  json_t *a = json_object_get(req, key);
  *out = NULL;
  *n = 0;
  if (!a)
    return 0;
  if (!json_is_array(a))
    return -EINVAL;
  *out = shk__xcalloc(json_array_size(a) + 1, sizeof(char *));
  size_t i;
  json_t *e;
  json_array_foreach(a, i, e) {
    if (!json_is_string(e))
      return -EINVAL;
    (*out)[(*n)++] = json_string_value(e);
  }
  return 0;
}

static bool known_keys(json_t *req, const char *const *keys, const char **bad)
{
  const char *k;
  json_t *v;
  json_object_foreach(req, k, v) {
    bool ok = false;
    for (const char *const *p = keys; *p && !ok; p++)
      ok = !strcmp(*p, k);
    if (!ok) {
      *bad = k;
      return false;
    }
  }
  return true;
}

/* Caller holds m->mu. The admin's standing grants, for a new session:
 * still decided by Cedar (an admin forbid, such as privileged installs at
 * low trust, holds against them too), with no expiry of their own; they
 * end with the session like every grant, and can be revoked like any. */
static void issue_standing(shk_manager *m, session *s)
{
  int64_t now = now_ms();
  for (size_t i = 0; i < m->n_standing; i++) {
    const char *cname = shk_cap_class_name(m->standing[i].cls);
    char *text = shk_cap_scope_to_json(&m->standing[i]);
    json_t *jscope = json_loads(text, 0, NULL);
    free(text);
    shk_policy_session ps = { s->id, s->trust_tier, s->model, s->expires_ms };
    shk_policy_grant pg = { &m->standing[i], SHK_CAP_AUTO, "approved", false, now };
    shk_policy_answer pa;
    grant g = { .cls = m->standing[i].cls };
    if (m->standing[i].cls == SHK_CAP_NET_EGRESS && !s->egress) {
      emit(m, "admin", s->id, cname, jscope, "refused", NULL, NULL, "the session has no egress proxy");
    } else if (shk_policy_decide(m->policy, &ps, &pg, &pa) || !pa.allow) {
      emit(m, "admin", s->id, cname, jscope, "refused", pa.policy, NULL, pa.why);
    } else if (shk_cap_issue(m->table, s->id, &m->standing[i], SHK_CAP_STANDING, 0, g.id) == 0) {
      add_grant(m, s, &g);
      emit(m, "admin", s->id, cname, jscope, "granted", pa.policy, g.id, "standing");
    }
    json_decref(jscope);
  }
}

static json_t *op_open_session(shk_manager *m, json_t *req, shk__conn *conn)
{
  static const char *const keys[] = { "op", "name", "trust_tier", "model", "ttl_ms", "egress",
                                      "allow_domains", "deny_domains", "proxy_config", NULL };
  const char *bad;
  if (!known_keys(req, keys, &bad))
    return refuse("open_session: unknown field '%s'", bad);
  const char *tier = str_or(req, "trust_tier", "standard");
  if (strcmp(tier, "low") && strcmp(tier, "standard") && strcmp(tier, "high"))
    return refuse("open_session: trust_tier must be low, standard or high");
  json_t *ttl = json_object_get(req, "ttl_ms");
  if (ttl && (!json_is_integer(ttl) || json_integer_value(ttl) <= 0))
    return refuse("open_session: ttl_ms must be a positive integer");
  session *s = shk__xcalloc(1, sizeof *s);
  uint8_t rnd[6];
  if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
    free(s);
    return refuse("open_session: no randomness");
  }
  const char *name = str_or(req, "name", NULL);
  if (name && (strlen(name) > 40 || !*name || strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(name))) {
    free(s);
    return refuse("open_session: name must be 1-40 of [a-z0-9-]");
  }
  snprintf(s->id, sizeof s->id, "%s%s%02x%02x%02x%02x%02x%02x", name ? name : "s", "-", rnd[0], rnd[1],
           rnd[2], rnd[3], rnd[4], rnd[5]);
  snprintf(s->trust_tier, sizeof s->trust_tier, "%s", tier);
  snprintf(s->model, sizeof s->model, "%s", str_or(req, "model", ""));
  s->expires_ms = now_ms() + (ttl ? json_integer_value(ttl) : 24LL * 3600 * 1000);
  json_t *ans = NULL;
  if (json_is_true(json_object_get(req, "egress"))) {
    const char **allow = NULL, **deny = NULL;
    size_t na = 0, nd = 0;
    if (strlist(req, "allow_domains", &allow, &na) || strlist(req, "deny_domains", &deny, &nd)) {
      ans = refuse("open_session: allow_domains and deny_domains must be arrays of strings");
    } else {
      shk_egress_session_opts eo = {
        .name = s->id, .allow_domains = allow, .n_allow_domains = na, .deny_domains = deny,
        .n_deny_domains = nd, .config_path = str_or(req, "proxy_config", NULL),
        .audit_fd = fileno(m->events), .hook = egress_hook, .hook_data = m,
      };
      shk_error err;
      int r = shk_egress_session_open(&eo, &s->egress, &err);
      if (r)
        ans = refuse("open_session: egress proxy: %s", err.message);
    }
    free(allow);
    free(deny);
    if (ans) {
      free(s);
      return ans;
    }
  }
  pthread_mutex_lock(&m->mu);
  s->next = m->sessions;
  m->sessions = s;
  issue_standing(m, s);
  pthread_mutex_unlock(&m->mu);
  if (conn)
    shk__conn_own_session(conn, s->id);
  emit(m, "launcher", s->id, NULL, NULL, "session-opened", NULL, NULL, NULL);
  return json_pack("{s:b, s:s, s:s?, s:I}", "ok", 1, "session", s->id, "egress_dir",
                   s->egress ? shk_egress_session_dir(s->egress) : NULL, "expires_ms",
                   (json_int_t)s->expires_ms);
}

json_t *shk__manager_close_session(shk_manager *m, const char *id, const char *actor)
{
  pthread_mutex_lock(&m->mu);
  session *s = find_session(m, id);
  if (s)
    detach_session(m, s);
  pthread_mutex_unlock(&m->mu);
  if (s)
    destroy_session(m, s, actor);
  return s ? json_pack("{s:b}", "ok", 1) : refuse("no such session: %s", id ? id : "(none)");
}

static json_t *op_sessions(shk_manager *m)
{
  json_t *a = json_array();
  pthread_mutex_lock(&m->mu);
  for (session *s = m->sessions; s; s = s->next)
    json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:I, s:I, s:b}", "session", s->id, "trust_tier",
                                       s->trust_tier, "model", s->model, "expires_ms",
                                       (json_int_t)s->expires_ms, "grants", (json_int_t)s->n_grants,
                                       "egress", s->egress != NULL));
  pthread_mutex_unlock(&m->mu);
  return json_pack("{s:b, s:o}", "ok", 1, "sessions", a);
}

/* Where the grant takes effect: said plainly, never implied. */
static const char *enforced_by(shk_cap_class c)
{
  switch (c) {
  case SHK_CAP_NET_EGRESS:
    return "egress proxy, checked live on every new connection";
  case SHK_CAP_FS_SCOPE:
    return "the next sandbox started for this session (not mounted into a running one)";
  case SHK_CAP_CLIPBOARD: case SHK_CAP_GPU: case SHK_CAP_INSTALL_PRIVILEGED:
  case SHK_CAP_PERSISTENCE: case SHK_CAP_CREDENTIALS: case SHK_CAP_PERIPHERAL:
  case SHK_CAP__COUNT:
    break;
  }
  return "recorded only: no enforcement point for this class exists yet";
}

static json_t *op_grant(shk_manager *m, json_t *req, const char *actor)
{
  static const char *const keys[] = { "op", "session", "class", "scope", "ttl_ms", "once",
                                      "provenance", "approval", NULL };
  const char *bad;
  if (!known_keys(req, keys, &bad))
    return refuse("grant: unknown field '%s'", bad);
  const char *sid = str_or(req, "session", NULL), *cname = str_or(req, "class", NULL);
  const char *prov = str_or(req, "provenance", "first-party");
  const char *approval = str_or(req, "approval", "none");
  json_t *jscope = json_object_get(req, "scope");
  json_t *jttl = json_object_get(req, "ttl_ms");
  shk_cap_class cls;
  if (!cname || shk_cap_class_parse(cname, &cls))
    return refuse("grant: unknown capability class '%s'", cname ? cname : "");
  if (strcmp(prov, "first-party") && strcmp(prov, "external"))
    return refuse("grant: provenance must be first-party or external");
  if (strcmp(approval, "none") && strcmp(approval, "approved") && strcmp(approval, "denied"))
    return refuse("grant: approval must be none, approved or denied");
  if (jttl && (!json_is_integer(jttl) || json_integer_value(jttl) <= 0))
    return refuse("grant: ttl_ms must be a positive integer");
  if (jscope && !json_is_object(jscope))
    return refuse("grant: scope must be a JSON object");
  char *scope_text = jscope ? json_dumps(jscope, JSON_COMPACT) : shk__xstrdup("{}");
  shk_cap_scope scope;
  shk_error serr;
  char err[512];
  int r = shk_cap_scope_parse(cls, scope_text, &scope, &serr);
  free(scope_text);
  if (r)
    return refuse("grant: scope: %s", serr.message);
  json_t *ans = NULL;
  int64_t now = now_ms();

  pthread_mutex_lock(&m->mu);
  session *s = find_session(m, sid);
  if (!s) {
    ans = refuse("grant: no such session: %s", sid ? sid : "(none)");
    goto out;
  }
  /* 1. The manifest: a request outside it never reaches Cedar. */
  shk_cap_tier tier;
  int entry = shk_cap_manifest_check(m->manifest, &scope, &tier, err, sizeof err);
  if (entry < 0) {
    emit(m, actor, s->id, cname, jscope, "refused", NULL, NULL, err);
    ans = json_pack("{s:b, s:s, s:s, s:s}", "ok", 0, "decision", "refused", "decided_by", "manifest",
                    "error", err);
    goto out;
  }
  bool external = !strcmp(prov, "external");
  bool leaves = cls == SHK_CAP_NET_EGRESS || (cls == SHK_CAP_CLIPBOARD && scope.copy_out);
  if (external)
    s->taint.ingested_external = true;
  tier = shk_cap_effective_tier(tier, external, &s->taint, leaves);
  /* 2. Cedar. */
  shk_policy_session ps = { s->id, s->trust_tier, s->model, s->expires_ms };
  shk_policy_grant pg = { &scope, tier, approval, external, now };
  shk_policy_answer pa;
  r = shk_policy_decide(m->policy, &ps, &pg, &pa);
  if (r || !pa.allow) {
    emit(m, actor, s->id, cname, jscope, "refused", pa.policy, NULL, pa.why);
    ans = json_pack("{s:b, s:s, s:s, s:s, s:s, s:s, s:i}", "ok", 0, "decision", "refused", "decided_by",
                    "policy", "policy", pa.policy, "error", pa.why, "tier", shk_cap_tier_name(tier),
                    "manifest_entry", entry);
    goto out;
  }
  /* 3. The handle. A session grant dies with the session at the latest. */
  int64_t expires = s->expires_ms;
  if (jttl && now + json_integer_value(jttl) < expires)
    expires = now + json_integer_value(jttl);
  bool once = json_is_true(json_object_get(req, "once"));
  grant g = { .cls = cls };
  if ((r = shk_cap_issue(m->table, s->id, &scope, once ? SHK_CAP_ONCE : SHK_CAP_SESSION, expires, g.id))) {
    ans = refuse("grant: could not issue a handle: %s", strerror(-r));
    goto out;
  }
  /* 4. The OS delta: registering the handle with its session is what the
   * egress hook reads, so from here on it is live. A net.egress grant to a
   * session without an egress proxy has nowhere to go; that, or an
   * injected fault (SHINKEN_FAULT=grant-delta, for the tests), undoes the
   * handle: nothing remains, and the event says why. */
  const char *fault = getenv("SHINKEN_FAULT");
  const char *delta_err = fault && !strcmp(fault, "grant-delta") ? "injected fault"
                        : cls == SHK_CAP_NET_EGRESS && !s->egress ? "the session has no egress proxy" : NULL;
  if (delta_err) {
    if (shk_cap_remove(m->table, g.id))
      shk_cap_revoke(m->table, g.id); /* cannot happen for a fresh handle; fail closed anyway */
    char why[256];
    snprintf(why, sizeof why, "the OS delta failed (%s); nothing was granted", delta_err);
    emit(m, actor, s->id, cname, jscope, "refused", pa.policy, NULL, why);
    ans = json_pack("{s:b, s:s, s:s, s:s}", "ok", 0, "decision", "refused", "decided_by", "enforcement",
                    "error", why);
    goto out;
  }
  add_grant(m, s, &g);
  /* 5. The event. */
  emit(m, actor, s->id, cname, jscope, "granted", pa.policy, g.id, NULL);
  ans = json_pack("{s:b, s:s, s:s, s:s, s:s, s:i, s:s, s:I, s:b, s:s}", "ok", 1, "decision", "granted",
                  "handle", g.id, "policy", pa.policy, "tier", shk_cap_tier_name(tier), "manifest_entry",
                  entry, "session", s->id, "expires_ms", (json_int_t)expires, "once", once,
                  "enforced_by", enforced_by(cls));
out:
  pthread_mutex_unlock(&m->mu);
  shk_cap_scope_clear(&scope);
  return ans;
}

static session *session_of_handle(shk_manager *m, const char *id, size_t *idx)
{
  for (session *s = m->sessions; s; s = s->next)
    for (size_t i = 0; i < s->n_grants; i++)
      if (!strcmp(s->grants[i].id, id)) {
        *idx = i;
        return s;
      }
  return NULL;
}

static json_t *op_revoke(shk_manager *m, json_t *req, const char *actor)
{
  const char *id = str_or(req, "handle", NULL);
  if (!id)
    return refuse("revoke: handle is required");
  /* 1. Flip the bit first: the next use fails from this moment on. */
  if (shk_cap_revoke(m->table, id))
    return refuse("revoke: no such handle");
  /* 2. Tear down what is open: tunnels of this handle and of every handle
   * derived from it (they are all dead now, so close the dead ones). The
   * tags are collected under mu and the tunnels closed outside it, because
   * closing waits for the proxy thread, which may be waiting for mu in the
   * hook. end_mu keeps the session's proxy alive meanwhile: sessions are
   * destroyed only under end_mu. */
  pthread_mutex_lock(&m->end_mu);
  pthread_mutex_lock(&m->mu);
  size_t idx, n_tags = 0;
  session *s = session_of_handle(m, id, &idx);
  uint64_t *tags = shk__xcalloc(s ? s->n_grants + 1 : 1, sizeof *tags);
  shk_egress_session *eg = s ? s->egress : NULL;
  char sid[sizeof s->id] = "";
  const char *cls = s ? shk_cap_class_name(s->grants[idx].cls) : NULL;
  if (s)
    snprintf(sid, sizeof sid, "%s", s->id);
  /* A revoked handle admits no new tunnel (the hook checks liveness), so
   * its tunnels need closing once; later revokes skip it. A once handle
   * that was merely used keeps the tunnel that was its one use. */
  for (size_t i = 0; eg && i < s->n_grants; i++) {
    grant *g = &s->grants[i];
    if (g->cls == SHK_CAP_NET_EGRESS && !g->torn_down && shk_cap_is_revoked(m->table, g->id)) {
      tags[n_tags++] = g->tag;
      g->torn_down = true;
    }
  }
  pthread_mutex_unlock(&m->mu);
  int closed = 0;
  for (size_t i = 0; i < n_tags; i++) {
    int c = shk_egress_session_close_tunnels(eg, tags[i]);
    if (c > 0)
      closed += c;
  }
  pthread_mutex_unlock(&m->end_mu);
  free(tags);
  /* 3. The event. */
  emit(m, actor, sid[0] ? sid : NULL, cls, NULL, "revoked", NULL, id, NULL);
  return json_pack("{s:b, s:s, s:i}", "ok", 1, "handle", id, "tunnels_closed", closed);
}

static json_t *op_attenuate(shk_manager *m, json_t *req, const char *actor)
{
  const char *id = str_or(req, "handle", NULL);
  json_t *jscope = json_object_get(req, "scope");
  json_t *jttl = json_object_get(req, "ttl_ms");
  if (!id || !json_is_object(jscope))
    return refuse("attenuate: handle and scope (an object) are required");
  if (jttl && (!json_is_integer(jttl) || json_integer_value(jttl) <= 0))
    return refuse("attenuate: ttl_ms must be a positive integer");
  pthread_mutex_lock(&m->mu);
  json_t *ans;
  size_t idx;
  session *s = session_of_handle(m, id, &idx);
  const shk_cap_scope *parent = shk_cap_scope_of(m->table, id);
  if (!s || !parent) {
    ans = refuse("attenuate: no such handle");
    goto out;
  }
  char *text = json_dumps(jscope, JSON_COMPACT);
  shk_cap_scope scope;
  shk_error serr;
  char err[512];
  int r = shk_cap_scope_parse(parent->cls, text, &scope, &serr);
  free(text);
  if (r) {
    ans = refuse("attenuate: scope: %s", serr.message);
    goto out;
  }
  grant g = { .cls = parent->cls };
  int64_t expires = jttl ? now_ms() + json_integer_value(jttl) : 0;
  r = shk_cap_attenuate(m->table, id, &scope, expires, g.id, err, sizeof err);
  shk_cap_scope_clear(&scope);
  if (r) {
    emit(m, actor, s->id, shk_cap_class_name(g.cls), jscope, "refused", NULL, id, err);
    ans = refuse("attenuate: %s", err);
    goto out;
  }
  add_grant(m, s, &g);
  emit(m, actor, s->id, shk_cap_class_name(g.cls), jscope, "attenuated", NULL, g.id, NULL);
  ans = json_pack("{s:b, s:s, s:s, s:s}", "ok", 1, "handle", g.id, "parent", id, "session", s->id);
out:
  pthread_mutex_unlock(&m->mu);
  return ans;
}

typedef struct list_ctx {
  json_t *arr;
  int64_t now;
  shk_cap_table *t;
} list_ctx;

static void list_one(const shk_cap_info *info, void *ud)
{
  list_ctx *c = ud;
  static const char *const lc[] = { "once", "session", "standing" };
  char *scope = shk_cap_scope_to_json(info->scope);
  bool live = shk_cap_check(c->t, info->id, c->now) == 0;
  json_array_append_new(c->arr, json_pack("{s:s, s:s?, s:s, s:s, s:o, s:s, s:I, s:b}", "handle", info->id,
                                          "parent", info->parent[0] ? info->parent : NULL, "session",
                                          info->session, "class", shk_cap_class_name(info->scope->cls),
                                          "scope", json_loads(scope, 0, NULL), "lifecycle",
                                          lc[info->lifecycle], "expires_ms", (json_int_t)info->expires_ms,
                                          "live", live));
  free(scope);
}

static json_t *op_grants(shk_manager *m, json_t *req)
{
  list_ctx c = { json_array(), now_ms(), m->table };
  shk_cap_foreach(m->table, str_or(req, "session", NULL), list_one, &c);
  return json_pack("{s:b, s:o}", "ok", 1, "grants", c.arr);
}

/* What a session has been exposed to, as its runtime reports it; exposure
 * only ever grows. It feeds tier promotion: a data-leaving grant of a
 * session that ingested external content and touched sensitive data needs
 * a human (shk_cap_effective_tier). */
static json_t *op_taint(shk_manager *m, json_t *req, const char *actor)
{
  static const char *const keys[] = { "op", "session", "ingested_external", "touched_sensitive", NULL };
  const char *bad;
  if (!known_keys(req, keys, &bad))
    return refuse("taint: unknown field '%s'", bad);
  json_t *ext = json_object_get(req, "ingested_external"), *sens = json_object_get(req, "touched_sensitive");
  if ((ext && !json_is_boolean(ext)) || (sens && !json_is_boolean(sens)))
    return refuse("taint: ingested_external and touched_sensitive are true or false");
  pthread_mutex_lock(&m->mu);
  session *s = find_session(m, str_or(req, "session", NULL));
  json_t *ans;
  if (!s) {
    ans = refuse("taint: no such session");
  } else {
    s->taint.ingested_external |= json_is_true(ext);
    s->taint.touched_sensitive |= json_is_true(sens);
    emit(m, actor, s->id, NULL, NULL, "tainted", NULL, NULL,
         s->taint.ingested_external && s->taint.touched_sensitive ? "external and sensitive"
         : s->taint.ingested_external ? "external" : s->taint.touched_sensitive ? "sensitive" : "none");
    ans = json_pack("{s:b, s:b, s:b}", "ok", 1, "ingested_external", s->taint.ingested_external,
                    "touched_sensitive", s->taint.touched_sensitive);
  }
  pthread_mutex_unlock(&m->mu);
  return ans;
}

json_t *shk__manager_call(shk_manager *m, json_t *req, shk__conn *conn)
{
  const char *op = json_is_object(req) ? str_or(req, "op", NULL) : NULL;
  const char *actor = conn ? "control" : "embedded";
  if (!op)
    return refuse("request must be a JSON object with \"op\"");
  if (!strcmp(op, "open_session"))
    return op_open_session(m, req, conn);
  if (!strcmp(op, "close_session"))
    return shk__manager_close_session(m, str_or(req, "session", NULL), actor);
  if (!strcmp(op, "sessions"))
    return op_sessions(m);
  if (!strcmp(op, "grant"))
    return op_grant(m, req, actor);
  if (!strcmp(op, "grants"))
    return op_grants(m, req);
  if (!strcmp(op, "revoke"))
    return op_revoke(m, req, actor);
  if (!strcmp(op, "attenuate"))
    return op_attenuate(m, req, actor);
  if (!strcmp(op, "taint"))
    return op_taint(m, req, actor);
  return refuse("unknown op '%s'", op);
}

json_t *shk_manager_call(shk_manager *m, json_t *req)
{
  return shk__manager_call(m, req, NULL);
}

void shk__manager_set_control(shk_manager *m, shk__control *c)
{
  m->control = c;
}
