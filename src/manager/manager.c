/* The capability manager: the session registry, the grant and revoke
 * protocol, pending requests, events, and the egress decision hook.
 *
 * Grant, failing closed at every step, in this order: the decision
 * (shk_policy_decide: manifest, promotion, Cedar) -> an enforcement point
 * for the class on this host -> (ask: a pending request, and stop) -> issue
 * the handle -> push the OS delta -> emit the event. A step that fails
 * undoes the ones before it, so no authority remains.
 * Approval: a pending request is resolved by a human channel (the control
 * peer that answers it, recorded by its uid and pid), and the grant is then
 * decided again with the manager's record of that answer.
 * Revoke: flip the bit (the next use fails from that moment) -> close the
 * tunnels opened under the handle or anything derived from it -> event. */
#include "shinken/manager.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "manager/manager-internal.h"
#include "shinken/cap.h"
#include "shinken/egress.h"
#include "shinken/policy.h"

/* The longest a session or a grant may last: a year and a day. Longer is
 * not a duration anyone means, and near 2^63 ms it would overflow. */
#define MAX_TTL_MS (366LL * 24 * 3600 * 1000)
/* How long a pending request waits for a human, and how many one session
 * may have waiting. */
#define PENDING_TIMEOUT_MS (120 * 1000)
#define MAX_PENDING 64

typedef struct grant {
  char id[SHK_CAP_ID_HEX];
  char rule[32];          /* "handle:" and the first hex digits, for audit lines */
  uint64_t tag;           /* binds egress tunnels to this handle */
  shk_cap_class cls;
  bool torn_down;         /* dead, and its tunnels closed: nothing left to do */
} grant;

/* A grant the policy answered "ask": it waits for a human's answer. */
typedef struct pending {
  char id[33];            /* 128 random bits */
  shk_cap_scope scope;
  int64_t ttl_ms;         /* 0: none of its own */
  bool once, external;
  int64_t raised_ms;
  struct pending *next;
} pending;

typedef struct session {
  char id[64];
  char trust_tier[16];
  char model[64];
  int64_t expires_ms;
  shk_policy_taint taint;
  shk_egress_session *egress;
  grant *grants;
  size_t n_grants, cap_grants;
  pending *pending;
  size_t n_pending;
  struct session *next;
} session;

struct shk_manager {
  pthread_mutex_t mu;      /* the registry; the egress hook takes it */
  pthread_mutex_t end_mu;  /* held while a session's proxy may be touched outside mu */
  shk_policy *policy;
  shk_cap_scope *standing;  /* admin's standing grants, each session gets them */
  size_t n_standing;
  char **exec_path;         /* the human's $PATH directories, literal and resolved */
  size_t n_exec_path;
  uid_t uid;                /* the manager's user: owns the policy, may use the socket */
  shk_cap_table *table;
  session *sessions;
  uint64_t next_tag;
  FILE *events;
  bool own_events;
  pthread_mutex_t events_mu;
  shk__control *control;
};

/* The one place that says which classes this host can apply to a running
 * sandbox, and by what. A class without a mechanism is refused, never
 * "granted" with no effect; a live unlock for a class fills in its entry. */
static const char *const enforced_by[SHK_CAP__COUNT] = {
  [SHK_CAP_NET_EGRESS] = "egress proxy, checked live on every new connection",
};

/* NULL when the class has a mechanism here; else the sentence that says
 * it has none, in buf. */
static const char *no_mechanism(shk_cap_class c, char *buf, size_t len)
{
  if (enforced_by[c])
    return NULL;
  snprintf(buf, len, "no enforcement point on this host for %s", shk_cap_class_name(c));
  return buf;
}

static int64_t now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#if SHK_FAULT_INJECTION
/* Test builds only (meson option fault_injection): SHINKEN_FAULT=POINT
 * makes the step of that name fail, so tests can see that it undoes
 * everything before it. Release builds have no such switch. */
static bool fault(const char *point)
{
  const char *f = getenv("SHINKEN_FAULT");
  return f && !strcmp(f, point);
}
#else
static bool fault(const char *point)
{
  (void)point;
  return false;
}
#endif

/* `extra` (stolen, may be NULL) adds fields to the event. */
static void emit(shk_manager *m, const char *actor, const char *sess, const char *cls, json_t *scope,
                 const char *decision, const char *policy, const char *handle, const char *why,
                 json_t *extra)
{
  json_t *e = json_pack("{s:I, s:s, s:s?, s:s?, s:O?, s:s, s:s?, s:s?, s:s?}", "time", (json_int_t)now_ms(),
                        "actor", actor, "session", sess, "class", cls, "scope", scope, "decision",
                        decision, "policy", policy && *policy ? policy : NULL, "handle", handle,
                        "reason", why);
  if (e && extra)
    json_object_update(e, extra);
  json_decref(extra);
  char *line = e ? json_dumps(e, JSON_COMPACT) : NULL;
  json_decref(e);
  pthread_mutex_lock(&m->events_mu);
  fprintf(m->events, "%s\n", line ? line : "{\"decision\":\"event-lost\",\"reason\":\"out of memory\"}");
  fflush(m->events);
  pthread_mutex_unlock(&m->events_mu);
  free(line);
}

static json_t *scope_json(const shk_cap_scope *sc)
{
  char *text = shk_cap_scope_to_json(sc);
  json_t *j = text ? json_loads(text, 0, NULL) : NULL;
  free(text);
  return j;
}

/* The admin's standing grants: [{"class": C, "scope": {...}}, ...]. Any
 * malformed entry stops the manager: a half-read list would grant less or
 * more than the admin wrote. */
static int load_standing(shk_manager *m, const char *path, shk_error *err)
{
  char *text;
  int r = shk_policy_read_file(path, m->uid, &text, err);
  if (r)
    return r;
  json_error_t jerr;
  json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
  free(text);
  if (!json_is_array(root)) {
    r = shk__error_set(err, -EINVAL, "%s: %s", path, root ? "expected an array of {\"class\", \"scope\"}" : jerr.text);
    json_decref(root);
    return r;
  }
  m->standing = calloc(json_array_size(root) + 1, sizeof *m->standing);
  if (!m->standing) {
    json_decref(root);
    return shk__error_set(err, -ENOMEM, "out of memory");
  }
  size_t i;
  json_t *e;
  json_array_foreach(root, i, e) {
    const char *cname = json_string_value(json_object_get(e, "class"));
    json_t *scope = json_object_get(e, "scope");
    shk_cap_class cls;
    if (!json_is_object(e) || json_object_size(e) != 2 || !cname || shk_cap_class_parse(cname, &cls) ||
        !json_is_object(scope)) {
      r = shk__error_set(err, -EINVAL, "%s: entry %zu: expected {\"class\": one of the eight classes, \"scope\": {...}}",
                         path, i);
      break;
    }
    char *stext = json_dumps(scope, JSON_COMPACT);
    shk_error serr;
    r = stext ? shk_cap_scope_parse(cls, stext, &m->standing[m->n_standing], &serr) : -ENOMEM;
    free(stext);
    if (r) {
      shk__error_set(err, r, "%s: entry %zu: %s", path, i, r == -ENOMEM ? "out of memory" : serr.message);
      break;
    }
    m->n_standing++;
  }
  json_decref(root);
  return r;
}

static int add_exec_dir(shk_manager *m, const char *dir)
{
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/')
    n--;
  for (size_t i = 0; i < m->n_exec_path; i++)
    if (strlen(m->exec_path[i]) == n && !strncmp(m->exec_path[i], dir, n))
      return 0;
  char **nv = realloc(m->exec_path, (m->n_exec_path + 1) * sizeof *nv);
  if (!nv)
    return -ENOMEM;
  m->exec_path = nv;
  if (!(nv[m->n_exec_path] = strndup(dir, n)))
    return -ENOMEM;
  m->n_exec_path++;
  return 0;
}

/* The human's $PATH as the decision's input: each absolute directory as
 * written and as it resolves (a write to /bin and to /usr/bin is the same
 * write on a merged-/usr system). */
static int set_exec_path(shk_manager *m, const char *path)
{
  char *copy = path ? strdup(path) : NULL, *save = NULL;
  if (path && !copy)
    return -ENOMEM;
  int r = 0;
  for (char *d = copy ? strtok_r(copy, ":", &save) : NULL; d && !r; d = strtok_r(NULL, ":", &save)) {
    char real[PATH_MAX];
    if (d[0] == '/')
      r = add_exec_dir(m, d);
    if (!r && realpath(d, real))
      r = add_exec_dir(m, real);
  }
  free(copy);
  return r;
}

int shk_manager_new(const shk_manager_opts *o, shk_manager **out, shk_error *err)
{
  *out = NULL;
  shk_manager *m = calloc(1, sizeof *m);
  if (!m)
    return shk__error_set(err, -ENOMEM, "out of memory");
  pthread_mutex_init(&m->mu, NULL);
  pthread_mutex_init(&m->end_mu, NULL);
  pthread_mutex_init(&m->events_mu, NULL);
  m->uid = geteuid();
  m->next_tag = 1;
  m->events = stderr;
  char *session_text = NULL;
  int r;
  if ((r = shk_cap_table_new(&m->table))) {
    shk__error_set(err, r, "out of memory");
    goto fail;
  }
  if ((r = set_exec_path(m, o->exec_path))) {
    shk__error_set(err, r, "out of memory");
    goto fail;
  }
  if (o->session_policy && (r = shk_policy_read_file(o->session_policy, m->uid, &session_text, err)))
    goto fail;
  shk_policy_source src = { o->policy_dir, o->manifest, session_text, m->uid };
  src.state_dir = o->state_dir;
  src.accept_widening = o->accept_widening;
  if ((r = shk_policy_load(&src, &m->policy, err)))
    goto fail;
  if (o->standing && (r = load_standing(m, o->standing, err)))
    goto fail;
  if (o->event_log) {
    m->events = fopen(o->event_log, "ae");
    if (!m->events) {
      r = shk__error_set(err, -errno, "%s: %s", o->event_log, strerror(errno));
      m->events = stderr;
      goto fail;
    }
    m->own_events = true;
  }
  free(session_text);
  *out = m;
  return 0;
fail:
  free(session_text);
  shk_manager_free(m);
  return r;
}

uid_t shk__manager_uid(const shk_manager *m)
{
  return m->uid;
}

static session *find_session(shk_manager *m, const char *id)
{
  for (session *s = m->sessions; s; s = s->next)
    if (id && !strcmp(s->id, id))
      return s;
  return NULL;
}

static void pending_free(pending *p)
{
  shk_cap_scope_clear(&p->scope);
  free(p);
}

/* Caller holds m->mu. Revokes every grant (so the hook refuses from now on),
 * takes the session's handles out of the table (their history is in the
 * events), drops its pending requests, and unlinks the session;
 * destroy_session finishes the job. */
static void detach_session(shk_manager *m, session *s)
{
  shk_cap_revoke_session(m->table, s->id);
  shk_cap_remove_session(m->table, s->id);
  for (pending *p = s->pending, *n; p; p = n) {
    n = p->next;
    pending_free(p);
  }
  s->pending = NULL;
  s->n_pending = 0;
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
  emit(m, actor, s->id, NULL, NULL, "session-closed", NULL, NULL, NULL, NULL);
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
  for (size_t i = 0; i < m->n_standing; i++)
    shk_cap_scope_clear(&m->standing[i]);
  free(m->standing);
  for (size_t i = 0; i < m->n_exec_path; i++)
    free(m->exec_path[i]);
  free(m->exec_path);
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
 * stands. The scopes it reads stay valid because handles leave the table
 * only under m->mu, which it holds. */
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
static int add_grant(shk_manager *m, session *s, grant *g)
{
  if (s->n_grants == s->cap_grants) {
    size_t nc = s->cap_grants ? s->cap_grants * 2 : 8;
    grant *ng = realloc(s->grants, nc * sizeof *ng);
    if (!ng)
      return -ENOMEM;
    s->grants = ng;
    s->cap_grants = nc;
  }
  g->tag = m->next_tag++;
  snprintf(g->rule, sizeof g->rule, "handle:%.12s", g->id);
  s->grants[s->n_grants++] = *g;
  return 0;
}

/* Undoes an issued handle that has no children. */
static void unissue(shk_manager *m, const char *id)
{
  if (shk_cap_remove(m->table, id))
    shk_cap_revoke(m->table, id); /* cannot happen for a fresh handle; fail closed anyway */
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

/* *out (malloc'd, NULL when absent) points into `req`. */
static int strlist(json_t *req, const char *key, const char ***out, size_t *n)
{
  json_t *a = json_object_get(req, key);
  *out = NULL;
  *n = 0;
  if (!a)
    return 0;
  if (!json_is_array(a))
    return -EINVAL;
  if (!(*out = calloc(json_array_size(a) + 1, sizeof(char *))))
    return -ENOMEM;
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

/* A ttl_ms field: absent (0), or a positive number of milliseconds up to
 * MAX_TTL_MS. Returns NULL, or the sentence that says what is wrong. */
static const char *ttl_of(json_t *req, int64_t *out)
{
  json_t *v = json_object_get(req, "ttl_ms");
  *out = 0;
  if (!v)
    return NULL;
  if (!json_is_integer(v) || json_integer_value(v) <= 0)
    return "ttl_ms must be a positive integer";
  if (json_integer_value(v) > MAX_TTL_MS)
    return "ttl_ms must be at most 31622400000 (a year and a day)";
  *out = json_integer_value(v);
  return NULL;
}

static shk_policy_session policy_session(const shk_manager *m, const session *s)
{
  return (shk_policy_session){
    .id = s->id, .trust_tier = s->trust_tier, .model = s->model, .expires_ms = s->expires_ms,
    .taint = s->taint, .exec_path = (const char *const *)m->exec_path, .n_exec_path = m->n_exec_path,
  };
}

/* Caller holds m->mu. Purges the session's pending requests whose human
 * did not answer in time: each is recorded as timed out, not as denied. */
static void expire_pending(shk_manager *m, session *s, int64_t now)
{
  for (pending **pp = &s->pending; *pp;) {
    pending *p = *pp;
    if (now - p->raised_ms < PENDING_TIMEOUT_MS) {
      pp = &p->next;
      continue;
    }
    *pp = p->next;
    s->n_pending--;
    emit(m, "manager", s->id, shk_cap_class_name(p->scope.cls), NULL, "timed-out", NULL, NULL,
         "no human answered the pending request in time", json_pack("{s:s}", "pending", p->id));
    pending_free(p);
  }
}

/* Caller holds m->mu. A grant the policy answered "ask" waits here. */
static json_t *raise_pending(shk_manager *m, session *s, const shk_cap_scope *scope, int64_t ttl, bool once,
                             bool external, const char *actor, json_t *jscope, const shk_policy_answer *pa)
{
  const char *cname = shk_cap_class_name(scope->cls);
  if (s->n_pending >= MAX_PENDING)
    return refuse("grant: session %s already has %d requests waiting for a human", s->id, MAX_PENDING);
  uint8_t rnd[16];
  pending *p = calloc(1, sizeof *p);
  if (!p)
    return refuse("grant: out of memory");
  int r = shk_cap_scope_copy(&p->scope, scope);
  if (r || getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
    if (!r)
      shk_cap_scope_clear(&p->scope);
    free(p);
    return refuse("grant: could not record the pending request");
  }
  for (size_t i = 0; i < sizeof rnd; i++)
    snprintf(p->id + 2 * i, 3, "%02x", rnd[i]);
  p->ttl_ms = ttl;
  p->once = once;
  p->external = external;
  p->raised_ms = now_ms();
  p->next = s->pending;
  s->pending = p;
  s->n_pending++;
  emit(m, actor, s->id, cname, jscope, "pending", pa->policy, NULL, pa->why,
       json_pack("{s:s, s:s}", "pending", p->id, "tier", shk_policy_tier_name(pa->tier)));
  char why[700];
  snprintf(why, sizeof why, "needs a human's approval: %s", pa->why);
  return json_pack("{s:b, s:s, s:s, s:s, s:s, s:O?, s:s, s:s, s:i, s:I, s:s}", "ok", 0, "decision", "ask",
                   "pending", p->id, "session", s->id, "class", cname, "scope", jscope, "tier",
                   shk_policy_tier_name(pa->tier), "policy", pa->policy, "manifest_entry", pa->manifest_entry,
                   "times_out_ms", (json_int_t)(p->raised_ms + PENDING_TIMEOUT_MS), "error", why);
}

/* Caller holds m->mu. The grant protocol for one request of session s,
 * with the approval state the manager holds for it; jscope (borrowed, may
 * be NULL) is the scope as the events and answers show it. */
static json_t *grant_locked(shk_manager *m, session *s, const shk_cap_scope *scope, json_t *jscope, int64_t ttl,
                            bool once, bool external, shk_policy_approval approval, const char *actor)
{
  const char *cname = shk_cap_class_name(scope->cls);
  json_t *ans = NULL;
  int64_t now = now_ms();
  /* 1. The decision. */
  shk_policy_session ps = policy_session(m, s);
  shk_policy_request pr = { .kind = SHK_POLICY_GRANT, .scope = scope, .external = external,
                            .approval = approval, .now_ms = now };
  shk_policy_answer pa;
  shk_error derr;
  if (shk_policy_decide(m->policy, &ps, &pr, &pa, &derr)) {
    emit(m, actor, s->id, cname, jscope, "refused", NULL, NULL, derr.message, NULL);
    ans = refuse("grant: the request could not be decided: %s", derr.message);
    goto out;
  }
  if (pa.verdict == SHK_POLICY_DENY) {
    emit(m, actor, s->id, cname, jscope, "refused", pa.policy, NULL, pa.why, NULL);
    bool by_cedar = pa.decided_by == SHK_POLICY_BY_CEDAR;
    ans = json_pack("{s:b, s:s, s:s, s:s, s:s, s:s?, s:i}", "ok", 0, "decision", "refused", "decided_by",
                    by_cedar ? "policy" : "manifest", "policy", pa.policy, "error", pa.why, "tier",
                    by_cedar ? shk_policy_tier_name(pa.tier) : NULL, "manifest_entry", pa.manifest_entry);
    goto out;
  }
  /* 2. A mechanism that applies it, before any human is asked. */
  char why[128];
  if (no_mechanism(scope->cls, why, sizeof why)) {
    emit(m, actor, s->id, cname, jscope, "refused", NULL, NULL, why, NULL);
    ans = json_pack("{s:b, s:s, s:s, s:s}", "ok", 0, "decision", "refused", "decided_by", "enforcement",
                    "error", why);
    goto out;
  }
  if (pa.verdict == SHK_POLICY_ASK) {
    if (ALWAYS(approval == SHK_POLICY_UNASKED))
      ans = raise_pending(m, s, scope, ttl, once, external, actor, jscope, &pa);
    else
      ans = refuse("grant: still not permitted after the human's answer");
    goto out;
  }
  /* 3. The handle. A session grant dies with the session at the latest. */
  int64_t expires = s->expires_ms;
  if (ttl && now + ttl < expires)
    expires = now + ttl;
  grant g = { .cls = scope->cls };
  int r = shk_cap_issue(m->table, s->id, scope, once ? SHK_CAP_ONCE : SHK_CAP_SESSION, expires, g.id);
  if (r) {
    ans = refuse("grant: could not issue a handle: %s", shk_strerror(r));
    goto out;
  }
  /* 4. The OS delta: registering the handle with its session is what the
   * egress hook reads, so from here on it is live. A net.egress grant to a
   * session without an egress proxy has nowhere to go; that, or an
   * injected fault (test builds), undoes the handle: nothing remains, and
   * the event says why. */
  const char *delta_err = fault("grant-delta") ? "injected fault"
                        : scope->cls == SHK_CAP_NET_EGRESS && !s->egress ? "the session has no egress proxy" : NULL;
  if (!delta_err && add_grant(m, s, &g))
    delta_err = "out of memory";
  if (delta_err) {
    unissue(m, g.id);
    char failed[256];
    snprintf(failed, sizeof failed, "the OS delta failed (%s); nothing was granted", delta_err);
    emit(m, actor, s->id, cname, jscope, "refused", pa.policy, NULL, failed, NULL);
    ans = json_pack("{s:b, s:s, s:s, s:s}", "ok", 0, "decision", "refused", "decided_by", "enforcement",
                    "error", failed);
    goto out;
  }
  /* 5. The event. */
  emit(m, actor, s->id, cname, jscope, "granted", pa.policy, g.id, NULL,
       json_pack("{s:s}", "tier", shk_policy_tier_name(pa.tier)));
  ans = json_pack("{s:b, s:s, s:s, s:s, s:s, s:i, s:s, s:I, s:b, s:s}", "ok", 1, "decision", "granted",
                  "handle", g.id, "policy", pa.policy, "tier", shk_policy_tier_name(pa.tier), "manifest_entry",
                  pa.manifest_entry, "session", s->id, "expires_ms", (json_int_t)expires, "once", once,
                  "enforced_by", enforced_by[scope->cls]);
out:
  return ans;
}

/* Caller holds m->mu. The admin's standing grants, for a new session:
 * decided like every grant (an admin forbid, such as privileged installs at
 * low trust, holds against them too, and a class with no enforcement point
 * is refused), with no expiry of their own; they end with the session like
 * every grant, and can be revoked like any. */
static void issue_standing(shk_manager *m, session *s)
{
  int64_t now = now_ms();
  for (size_t i = 0; i < m->n_standing; i++) {
    const shk_cap_scope *sc = &m->standing[i];
    const char *cname = shk_cap_class_name(sc->cls);
    json_t *jscope = scope_json(sc);
    shk_policy_session ps = policy_session(m, s);
    shk_policy_request pr = { .kind = SHK_POLICY_STANDING, .scope = sc, .now_ms = now };
    shk_policy_answer pa;
    shk_error derr;
    grant g = { .cls = sc->cls };
    char why[128];
    if (shk_policy_decide(m->policy, &ps, &pr, &pa, &derr)) {
      emit(m, "admin", s->id, cname, jscope, "refused", NULL, NULL, derr.message, NULL);
    } else if (pa.verdict != SHK_POLICY_ALLOW) {
      emit(m, "admin", s->id, cname, jscope, "refused", pa.policy, NULL, pa.why, NULL);
    } else if (no_mechanism(sc->cls, why, sizeof why)) {
      emit(m, "admin", s->id, cname, jscope, "refused", NULL, NULL, why, NULL);
    } else if (sc->cls == SHK_CAP_NET_EGRESS && !s->egress) {
      emit(m, "admin", s->id, cname, jscope, "refused", NULL, NULL, "the session has no egress proxy", NULL);
    } else if (shk_cap_issue(m->table, s->id, sc, SHK_CAP_STANDING, 0, g.id) == 0) {
      if (add_grant(m, s, &g)) {
        unissue(m, g.id);
        emit(m, "admin", s->id, cname, jscope, "refused", NULL, NULL, "out of memory", NULL);
      } else {
        emit(m, "admin", s->id, cname, jscope, "granted", pa.policy, g.id, "standing", NULL);
      }
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
  int64_t ttl;
  const char *ttl_bad = ttl_of(req, &ttl);
  if (ttl_bad)
    return refuse("open_session: %s", ttl_bad);
  const char *name = str_or(req, "name", NULL);
  if (name && (strlen(name) > 40 || !*name || strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(name)))
    return refuse("open_session: name must be 1-40 of [a-z0-9-]");
  uint8_t rnd[6];
  if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
    return refuse("open_session: no randomness");
  session *s = calloc(1, sizeof *s);
  if (!s)
    return refuse("open_session: out of memory");
  snprintf(s->id, sizeof s->id, "%s%s%02x%02x%02x%02x%02x%02x", name ? name : "s", "-", rnd[0], rnd[1],
           rnd[2], rnd[3], rnd[4], rnd[5]);
  snprintf(s->trust_tier, sizeof s->trust_tier, "%s", tier);
  snprintf(s->model, sizeof s->model, "%s", str_or(req, "model", ""));
  s->expires_ms = now_ms() + (ttl ? ttl : 24LL * 3600 * 1000);
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
  if (conn && shk__conn_own_session(conn, s->id)) {
    shk_egress_session_close(s->egress);
    free(s);
    return refuse("open_session: out of memory");
  }
  pthread_mutex_lock(&m->mu);
  s->next = m->sessions;
  m->sessions = s;
  issue_standing(m, s);
  pthread_mutex_unlock(&m->mu);
  emit(m, "launcher", s->id, NULL, NULL, "session-opened", NULL, NULL, NULL, NULL);
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
  for (session *s = m->sessions; s && a; s = s->next)
    if (json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:I, s:I, s:b, s:I}", "session", s->id, "trust_tier",
                                           s->trust_tier, "model", s->model, "expires_ms",
                                           (json_int_t)s->expires_ms, "grants", (json_int_t)s->n_grants,
                                           "egress", s->egress != NULL, "pending", (json_int_t)s->n_pending))) {
      json_decref(a);
      a = NULL;
    }
  pthread_mutex_unlock(&m->mu);
  return a ? json_pack("{s:b, s:o}", "ok", 1, "sessions", a) : refuse("sessions: out of memory");
}

static json_t *op_grant(shk_manager *m, json_t *req, const char *actor)
{
  static const char *const keys[] = { "op", "session", "class", "scope", "ttl_ms", "once", "provenance", NULL };
  const char *bad;
  if (!known_keys(req, keys, &bad))
    return refuse(!strcmp(bad, "approval") ? "grant: approval is not a field of a grant: a human "
                                              "answers the pending request (op resolve)"
                                            : "grant: unknown field '%s'", bad);
  const char *sid = str_or(req, "session", NULL), *cname = str_or(req, "class", NULL);
  const char *prov = str_or(req, "provenance", "first-party");
  json_t *jscope = json_object_get(req, "scope");
  shk_cap_class cls;
  if (!cname || shk_cap_class_parse(cname, &cls))
    return refuse("grant: unknown capability class '%s'", cname ? cname : "");
  if (strcmp(prov, "first-party") && strcmp(prov, "external"))
    return refuse("grant: provenance must be first-party or external");
  int64_t ttl;
  const char *ttl_bad = ttl_of(req, &ttl);
  if (ttl_bad)
    return refuse("grant: %s", ttl_bad);
  if (jscope && !json_is_object(jscope))
    return refuse("grant: scope must be a JSON object");
  char *scope_text = jscope ? json_dumps(jscope, JSON_COMPACT) : strdup("{}");
  if (!scope_text)
    return refuse("grant: out of memory");
  shk_cap_scope scope;
  shk_error serr;
  int r = shk_cap_scope_parse(cls, scope_text, &scope, &serr);
  free(scope_text);
  if (r)
    return refuse("grant: scope: %s", serr.message);
  bool external = !strcmp(prov, "external");
  json_t *ans;
  pthread_mutex_lock(&m->mu);
  session *s = find_session(m, sid);
  if (!s) {
    ans = refuse("grant: no such session: %s", sid ? sid : "(none)");
  } else {
    expire_pending(m, s, now_ms());
    /* A request built from external data shows the session took it in. */
    if (external)
      s->taint.ingested_external = true;
    ans = grant_locked(m, s, &scope, jscope, ttl, json_is_true(json_object_get(req, "once")), external,
                       SHK_POLICY_UNASKED, actor);
  }
  pthread_mutex_unlock(&m->mu);
  shk_cap_scope_clear(&scope);
  return ans;
}

/* Who answered: the control peer's credentials from SO_PEERCRED, or the
 * process that embeds the manager. */
static json_t *resolver(shk_manager *m, shk__conn *conn)
{
  uid_t uid = m->uid;
  pid_t pid = getpid();
  if (conn)
    shk__conn_peer(conn, &uid, &pid);
  return json_pack("{s:s, s:I, s:I}", "channel", conn ? "control" : "embedded", "uid", (json_int_t)uid, "pid",
                   (json_int_t)pid);
}

/* A human's answer to a pending request. Approve decides the grant again
 * with the manager's record that a human approved it; deny refuses it. */
static json_t *op_resolve(shk_manager *m, json_t *req, shk__conn *conn, const char *actor)
{
  static const char *const keys[] = { "op", "pending", "resolution", NULL };
  const char *bad;
  if (!known_keys(req, keys, &bad))
    return refuse("resolve: unknown field '%s'", bad);
  const char *id = str_or(req, "pending", NULL), *res = str_or(req, "resolution", "");
  bool approve = !strcmp(res, "approve");
  if (!id || (!approve && strcmp(res, "deny")))
    return refuse("resolve: pending (an id) and resolution (approve or deny) are required");
  json_t *by = resolver(m, conn);
  if (!by)
    return refuse("resolve: out of memory");
  json_t *ans = NULL;
  int64_t now = now_ms();
  pthread_mutex_lock(&m->mu);
  session *s;
  pending *p = NULL, **pp = NULL;
  for (s = m->sessions; s; s = s->next) {
    expire_pending(m, s, now);
    for (pp = &s->pending; *pp; pp = &(*pp)->next)
      if (!strcmp((*pp)->id, id)) {
        p = *pp;
        break;
      }
    if (p)
      break;
  }
  if (!p) {
    ans = refuse("resolve: no pending request %s (answered, timed out, or never raised)", id);
  } else {
    *pp = p->next;
    s->n_pending--;
    const char *cname = shk_cap_class_name(p->scope.cls);
    json_t *jscope = scope_json(&p->scope);
    emit(m, actor, s->id, cname, jscope, approve ? "approved" : "denied", NULL, NULL, NULL,
         json_pack("{s:s, s:O}", "pending", p->id, "resolved_by", by));
    ans = approve ? grant_locked(m, s, &p->scope, jscope, p->ttl_ms, p->once, p->external, SHK_POLICY_APPROVED,
                                 actor)
                  : json_pack("{s:b, s:s}", "ok", 1, "decision", "denied");
    json_decref(jscope);
    if (ans) {
      json_object_set_new(ans, "pending", json_string(p->id));
      json_object_set(ans, "resolved_by", by);
    }
    pending_free(p);
  }
  pthread_mutex_unlock(&m->mu);
  json_decref(by);
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
  uint64_t *tags = calloc(s ? s->n_grants + 1 : 1, sizeof *tags);
  shk_egress_session *eg = s ? s->egress : NULL;
  char sid[sizeof s->id] = "";
  const char *cls = s ? shk_cap_class_name(s->grants[idx].cls) : NULL;
  if (s)
    snprintf(sid, sizeof sid, "%s", s->id);
  /* A revoked handle admits no new tunnel (the hook checks liveness), so
   * its tunnels need closing once; later revokes skip it. A once handle
   * that was merely used keeps the tunnel that was its one use. Out of
   * memory for the list: every egress tunnel of the session is closed
   * instead (tag 0), which closes at least the ones that must go. */
  for (size_t i = 0; eg && i < s->n_grants; i++) {
    grant *g = &s->grants[i];
    if (g->cls == SHK_CAP_NET_EGRESS && !g->torn_down && shk_cap_is_revoked(m->table, g->id)) {
      if (tags)
        tags[n_tags++] = g->tag;
      g->torn_down = true;
    }
  }
  pthread_mutex_unlock(&m->mu);
  int closed = 0;
  for (size_t i = 0; i < n_tags || (!tags && eg && i == 0); i++) {
    int c = shk_egress_session_close_tunnels(eg, tags ? tags[i] : 0);
    if (c > 0)
      closed += c;
  }
  pthread_mutex_unlock(&m->end_mu);
  free(tags);
  /* 3. The event. */
  emit(m, actor, sid[0] ? sid : NULL, cls, NULL, "revoked", NULL, id, NULL, NULL);
  return json_pack("{s:b, s:s, s:i}", "ok", 1, "handle", id, "tunnels_closed", closed);
}

static json_t *op_attenuate(shk_manager *m, json_t *req, const char *actor)
{
  const char *id = str_or(req, "handle", NULL);
  json_t *jscope = json_object_get(req, "scope");
  if (!id || !json_is_object(jscope))
    return refuse("attenuate: handle and scope (an object) are required");
  int64_t ttl;
  const char *ttl_bad = ttl_of(req, &ttl);
  if (ttl_bad)
    return refuse("attenuate: %s", ttl_bad);
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
  int r = text ? shk_cap_scope_parse(parent->cls, text, &scope, &serr) : -ENOMEM;
  free(text);
  if (r) {
    ans = refuse("attenuate: scope: %s", r == -ENOMEM ? "out of memory" : serr.message);
    goto out;
  }
  grant g = { .cls = parent->cls };
  shk_error aerr;
  r = shk_cap_attenuate(m->table, id, &scope, ttl ? now_ms() + ttl : 0, g.id, &aerr);
  shk_cap_scope_clear(&scope);
  if (!r && add_grant(m, s, &g)) {
    unissue(m, g.id);
    r = shk__error_set(&aerr, -ENOMEM, "out of memory");
  }
  if (r) {
    emit(m, actor, s->id, shk_cap_class_name(g.cls), jscope, "refused", NULL, id, aerr.message, NULL);
    ans = refuse("attenuate: %s", aerr.message);
    goto out;
  }
  emit(m, actor, s->id, shk_cap_class_name(g.cls), jscope, "attenuated", NULL, g.id, NULL, NULL);
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
  bool live = shk_cap_check(c->t, info->id, c->now) == 0;
  if (c->arr && json_array_append_new(c->arr, json_pack("{s:s, s:s?, s:s, s:s, s:o, s:s, s:I, s:b}", "handle",
                                                        info->id, "parent", info->parent[0] ? info->parent : NULL,
                                                        "session", info->session, "class",
                                                        shk_cap_class_name(info->scope->cls), "scope",
                                                        scope_json(info->scope), "lifecycle", lc[info->lifecycle],
                                                        "expires_ms", (json_int_t)info->expires_ms, "live", live))) {
    json_decref(c->arr);
    c->arr = NULL;
  }
}

static json_t *op_grants(shk_manager *m, json_t *req)
{
  list_ctx c = { json_array(), now_ms(), m->table };
  shk_cap_foreach(m->table, str_or(req, "session", NULL), list_one, &c);
  return c.arr ? json_pack("{s:b, s:o}", "ok", 1, "grants", c.arr) : refuse("grants: out of memory");
}

/* What a session has been exposed to, as its runtime reports it; exposure
 * only ever grows. It feeds tier promotion: a data-leaving grant of a
 * session that ingested external content and touched sensitive data needs
 * a human. */
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
         : s->taint.ingested_external ? "external" : s->taint.touched_sensitive ? "sensitive" : "none", NULL);
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
  if (!strcmp(op, "resolve"))
    return op_resolve(m, req, conn, actor);
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

json_t *shk__manager_call_text(shk_manager *m, const char *text, size_t len, shk__conn *conn)
{
  json_error_t jerr;
  json_t *req = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  json_t *ans = req ? shk__manager_call(m, req, conn) : refuse("request is not valid JSON");
  json_decref(req);
  return ans;
}

int shk_manager_call(shk_manager *m, const char *request, char **answer)
{
  json_t *ans = shk__manager_call_text(m, request, strlen(request), NULL);
  *answer = ans ? json_dumps(ans, JSON_COMPACT) : NULL;
  json_decref(ans);
  return *answer ? 0 : -ENOMEM;
}

void shk__manager_set_control(shk_manager *m, shk__control *c)
{
  m->control = c;
}
