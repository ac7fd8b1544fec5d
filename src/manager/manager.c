/* SPDX-License-Identifier: Apache-2.0 */
/* The capability manager: the session registry, the grant and revoke
 * protocol, pending requests, the events of the authority timeline, and the
 * egress decision hook.
 *
 * Grant, failing closed at every step, in this order: the decision
 * (shk_policy_decide: manifest, promotion, Cedar) and its event -> an
 * enforcement point for the class on this host -> (ask: a pending request
 * and its event, and stop) -> issue the handle -> prepare the OS delta ->
 * the grant's event -> publish the delta. A step that fails undoes the ones
 * before it, so no authority remains; an event the timeline cannot take
 * (its queue is full) is such a failure.
 * Approval: a pending request is resolved by a human channel (the control
 * peer that answers it, recorded by its uid, pid and program), and the
 * grant is then decided again with the manager's record of that answer.
 * Revoke: flip the bit (the next use fails from that moment) -> close the
 * tunnels opened under the handle or anything derived from it -> the event,
 * which never holds the revoke back.
 *
 * Threads. The control plane (the control server's thread, and callers of
 * shk_manager_call) works under the registry lock `mu`. The data plane (each
 * session's proxy thread, in egress_hook) never takes it: it reads the
 * session's list of egress grants, which is published with an atomic
 * pointer and whose entries never change once published and are freed only
 * after the proxy thread has been joined, and the handles' live bits in the
 * handle table, whose lock is a reader-preferring rwlock never held across
 * I/O. So a flood on one session's proxy never delays a revoke elsewhere:
 * the revoke flips the bit without waiting for any data-plane lock or loop.
 * A session is freed when the last of the registry and the operations
 * working on it outside `mu` lets it go (refs). */
#include "shinken/manager.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "manager/ask.h"
#include "manager/broker.h"
#include "manager/manager-internal.h"
#include "manager/manager-state.h"
#include "manager/session-view.h"
#include "shinken/approve.h"
#include "shinken/audit.h"
#include "shinken/cap.h"
#include "shinken/egress.h"
#include "shinken/policy.h"
#include "shinken/sandbox.h"

/* The longest a session or a grant may last: a year and a day. Longer is
 * not a duration anyone means, and near 2^63 ms it would overflow. */
#define MAX_TTL_MS (366LL * 24 * 3600 * 1000)

/* The one place that says which classes this host can apply to a running
 * sandbox, and by what. A class without a mechanism is refused, never
 * "granted" with no effect; a live unlock for a class fills in its entry. */
static const char *const enforced_by[SHK_CAP__COUNT] = {
  [SHK_CAP_NET_EGRESS] = "egress proxy, checked live on every new connection",
  [SHK_CAP_FS_SCOPE] = "a mount injected into the running sandbox (read-only for read), detached on revoke",
  [SHK_CAP_GPU] = "the device nodes of the gpu mounted into the running sandbox's /dev, detached on revoke",
  [SHK_CAP_PERIPHERAL] = "the device nodes of the peripheral mounted into the running sandbox's /dev, detached "
                         "on revoke",
  [SHK_CAP_PERSISTENCE] = "an overlay injected into the running sandbox over the host's path, its changes kept "
                          "per image in the state directory (past the session only with survives_session)",
  [SHK_CAP_CREDENTIALS] = "the egress proxy's broker: the secret injected into inspected requests to its "
                          "hosts, checked live on every request",
  [SHK_CAP_INSTALL_PRIVILEGED] = "the sudo shim inside the sandbox: each command it sends is checked against "
                                 "the live handle and run in the sandbox's namespaces with a package "
                                 "manager's capabilities, over overlays of /usr, /etc, /var and /opt "
                                 "discarded when the session ends",
};

/* Why a class has no mechanism in this build: said with every refusal, so
 * a grant is never "recorded and does nothing". */
static const char *const not_built[SHK_CAP__COUNT] = {
  [SHK_CAP_CLIPBOARD] = "this version has no clipboard surface to broker it through",
};

/* True for the classes whose grants are mounts in the running sandbox
 * (unlock.c), which a revoke detaches. */
static bool mounts_of(shk_cap_class c)
{
  return c == SHK_CAP_FS_SCOPE || c == SHK_CAP_PERSISTENCE || c == SHK_CAP_GPU || c == SHK_CAP_PERIPHERAL;
}

/* NULL when the class has a mechanism here; else the sentence that says
 * it has none, in buf. */
static const char *no_mechanism(shk_cap_class c, char *buf, size_t len)
{
  const char *missing = c == SHK_CAP_FS_SCOPE || c == SHK_CAP_GPU || c == SHK_CAP_PERIPHERAL
                          ? shk__unlock_missing()
                      : c == SHK_CAP_PERSISTENCE ? shk__persist_missing()
                      : c == SHK_CAP_INSTALL_PRIVILEGED ? shk__sudo_missing()
                                                 : not_built[c];
  if (enforced_by[c] && !missing)
    return NULL;
  snprintf(buf, len, "no enforcement point on this host for %s%s%s", shk_cap_class_name(c),
           missing ? ": " : "", missing ? missing : "");
  return buf;
}

int shk_manager_class_mechanism(shk_cap_class c, char *buf, size_t len)
{
  if ((unsigned)c >= SHK_CAP__COUNT)
    return -EINVAL;
  if (no_mechanism(c, buf, len))
    return 0;
  snprintf(buf, len, "%s", enforced_by[c]);
  return 1;
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

/* ---- paths ---- */

/* True when `path` is `root` or lies beneath it (both absolute, resolved). */
static bool path_within(const char *path, const char *root)
{
  size_t n = strlen(root);
  while (n > 1 && root[n - 1] == '/')
    n--;
  if (n == 1 && root[0] == '/')
    return true;
  return !strncmp(path, root, n) && (path[n] == '\0' || path[n] == '/');
}

/* The absolute path `p` with its longest existing prefix resolved
 * (symlinks followed) and the rest as written, which must hold no "." or
 * ".." component. False when p is not such a path. */
static bool resolve_path(const char *p, char out[PATH_MAX])
{
  char buf[PATH_MAX];
  size_t len = strlen(p);
  while (len > 1 && p[len - 1] == '/')
    len--;
  if (p[0] != '/' || len >= sizeof buf)
    return false;
  for (const char *c = p; (c = strstr(c, "/.")); c++)
    if (c[2] == '\0' || c[2] == '/' || (c[2] == '.' && (c[3] == '\0' || c[3] == '/')))
      return false;
  memcpy(buf, p, len);
  buf[len] = '\0';
  for (size_t keep = len;;) {
    char real[PATH_MAX];
    if (realpath(keep ? buf : "/", real)) {
      const char *base = strcmp(real, "/") || keep == len ? real : "";
      int n = snprintf(out, PATH_MAX, "%s%.*s", base, (int)(len - keep), p + keep);
      return n > 0 && n < PATH_MAX;
    }
    keep = (size_t)(strrchr(buf, '/') - buf);
    buf[keep] = '\0';
  }
}

/* ---- the timeline ---- */

/* The event's subject: the session (id and model) and who asked. */
static void ev_init(shk_audit_event *e, const char *name, const session *s, const shk__peer *by)
{
  shk_audit_event_init(e, name);
  if (s) {
    shk_audit_str(e, SHK_AUDIT_SESSION, s->id);
    shk_audit_str(e, SHK_AUDIT_MODEL, s->model[0] ? s->model : NULL);
  }
  if (by) {
    shk_audit_int(e, SHK_AUDIT_HUMAN_UID, by->uid);
    shk_audit_str(e, SHK_AUDIT_HUMAN_SURFACE, by->surface);
    shk_audit_int(e, SHK_AUDIT_PID, by->pid);
    shk_audit_str(e, SHK_AUDIT_EXECUTABLE, by->exe);
  }
}

/* "once", "standing", an ISO 8601 duration, or "session". */
static const char *lifetime(const grant_req *q, char buf[40])
{
  if (q->once)
    return "once";
  if (q->standing)
    return "standing";
  if (!q->ttl_ms)
    return "session";
  if (q->ttl_ms % 1000)
    snprintf(buf, 40, "PT%lld.%03lldS", (long long)(q->ttl_ms / 1000), (long long)(q->ttl_ms % 1000));
  else
    snprintf(buf, 40, "PT%lldS", (long long)(q->ttl_ms / 1000));
  return buf;
}

static void ev_request(shk_audit_event *e, const char *name, const grant_req *q)
{
  char buf[40];
  ev_init(e, name, q->s, q->by);
  shk_audit_str(e, SHK_AUDIT_CLASS, shk_cap_class_name(q->scope->cls));
  shk_audit_str(e, SHK_AUDIT_SCOPE, q->scope_text);
  shk_audit_str(e, SHK_AUDIT_PROVENANCE, q->standing ? "admin" : q->external ? "external" : "first-party");
  shk_audit_str(e, SHK_AUDIT_LIFETIME, lifetime(q, buf));
  shk_audit_str(e, SHK_AUDIT_CARD, q->card);
}

/* The deciding policy, the tier (when the tiers of policy decided) and why. */
static void ev_answer(shk_audit_event *e, const shk_policy_answer *pa)
{
  shk_audit_str(e, SHK_AUDIT_DECISION, shk_policy_verdict_name(pa->verdict));
  shk_audit_str(e, SHK_AUDIT_POLICY, pa->policy[0] ? pa->policy : NULL);
  shk_audit_str(e, SHK_AUDIT_TIER, pa->decided_by == SHK_POLICY_BY_CEDAR ? shk_policy_tier_name(pa->tier) : NULL);
}

/* The "decision" event: every answer of the one decision function. */
int shk__manager_ev_decision(shk_manager *m, const grant_req *q, const shk_policy_answer *pa, shk_error *err)
{
  shk_audit_event e;
  ev_request(&e, "decision", q);
  ev_answer(&e, pa);
  shk_audit_str(&e, SHK_AUDIT_REASON, pa->why);
  return ev_emit(m, &e, err);
}

/* The "grant" event: granted (with the handle) or refused after the
 * decision (with why, and a short class of error). */
static int ev_grant(shk_manager *m, const grant_req *q, const shk_policy_answer *pa, const char *handle,
                    const char *why, const char *error_type, shk_error *err)
{
  shk_audit_event e;
  ev_request(&e, "grant", q);
  if (pa)
    ev_answer(&e, pa);
  shk_audit_str(&e, SHK_AUDIT_OUTCOME, handle ? "granted" : "refused");
  shk_audit_str(&e, SHK_AUDIT_HANDLE, handle);
  shk_audit_str(&e, SHK_AUDIT_REASON, why);
  shk_audit_str(&e, SHK_AUDIT_ERROR_TYPE, error_type);
  return ev_emit(m, &e, err);
}

static const char *proto_name(shk_egress_proto p)
{
  switch (p) {
  case SHK_EGRESS_HTTP:
    return "http";
  case SHK_EGRESS_CONNECT:
    return "connect";
  case SHK_EGRESS_SOCKS5:
    return "socks5";
  case SHK_EGRESS_DNS:
    return "dns";
  }
  return NULL;
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

/* The sessions' proxies and the control server share this process's
 * descriptors, and the hard limit is what the administrator allows: take
 * it, so that one session's connections do not run the others out. Safe:
 * raising the soft limit up to the hard one needs no privilege and gives
 * the sandbox nothing it could not take itself. */
static void raise_nofile(void)
{
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

/* Where the TLS inspection CA lives: in the user's Shinken state
 * directory. Why there and not in a configured state_dir: the sandbox's
 * built-in protections mask that directory whole, wherever
 * $XDG_STATE_HOME puts it, and the key must never be readable inside a
 * sandbox (it signs what every sandbox of this user trusts). NULL (no
 * inspection) when no home is known, or out of memory. */
static char *inspection_ca_dir(void)
{
  const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
  char *dir = NULL;
  int n = -1;
  if (state && state[0] == '/')
    n = asprintf(&dir, "%s/shinken/ca", state);
  else if (home && home[0] == '/')
    n = asprintf(&dir, "%s/.local/state/shinken/ca", home);
  return n < 0 ? NULL : dir;
}

int shk_manager_new(const shk_manager_opts *o, shk_manager **out, shk_error *err)
{
  *out = NULL;
  shk_manager *m = calloc(1, sizeof *m);
  if (!m)
    return shk__error_set(err, -ENOMEM, "out of memory");
  pthread_mutex_init(&m->mu, NULL);
  m->uid = shk__self_uid();
  m->ca_dir = inspection_ca_dir();
  m->next_tag = 1;
  m->max_pending = o->max_pending ? o->max_pending : 64;
  m->panel_max_conns = o->panel_max_connections ? o->panel_max_connections : 64;
  m->on_verdict = o->on_verdict;
  m->verdict_data = o->verdict_data;
  m->pending_timeout_ms = o->pending_timeout_ms > 0 ? o->pending_timeout_ms : 120 * 1000;
  m->limits = (shk__control_limits){
    .max_clients = o->control_max_clients ? o->control_max_clients : 1024,
    .max_per_uid = o->control_max_per_uid ? o->control_max_per_uid : 512,
    .fd_reserve = o->control_fd_reserve ? o->control_fd_reserve : 64,
    .idle_ms = o->control_idle_ms > 0 ? o->control_idle_ms : 30 * 1000,
    .max_output = o->control_max_output ? o->control_max_output : 1u << 20,
  };
  ssize_t n = readlink("/proc/self/exe", m->self_exe, sizeof m->self_exe - 1);
  m->self_exe[n > 0 ? n : 0] = '\0';
  raise_nofile();
  char *session_text = NULL;
  int r;
  char real[PATH_MAX];
  if (o->socket && (!resolve_path(o->socket, real) || !(m->socket = strdup(real)))) {
    r = shk__error_set(err, -EINVAL, "%s: the control socket's path must be absolute and canonical", o->socket);
    goto fail;
  }
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
  if (o->device_root && (o->device_root[0] != '/' || !(m->device_root = strdup(o->device_root)))) {
    r = shk__error_set(err, o->device_root[0] != '/' ? -EINVAL : -ENOMEM, "%s",
                       o->device_root[0] != '/' ? "device_root must be an absolute path" : "out of memory");
    goto fail;
  }
  /* Where persistence grants keep their data; none (the grants are then
   * refused, saying why) when no state directory can be named. */
  char proot[PATH_MAX];
  if (shk_sandbox_persist_root(o->state_dir, proot, sizeof proot, NULL) == 0 && !(m->persist_root = strdup(proot))) {
    r = shk__error_set(err, -ENOMEM, "out of memory");
    goto fail;
  }
  src.accept_widening = o->accept_widening;
  if ((r = shk_policy_load(&src, &m->policy, err)))
    goto fail;
  if (o->standing && (r = load_standing(m, o->standing, err)))
    goto fail;
  if ((r = shk__ask_start(m, o, err)))
    goto fail;
  if (o->audit_db) {
    shk_audit_opts ao = { .db_path = o->audit_db, .checkpoint_events = o->audit_checkpoint_events,
                          .checkpoint_ms = o->audit_checkpoint_ms, .key_path = o->audit_key,
                          .log_name = o->audit_log_name };
    shk_error aerr;
    if ((r = shk_audit_open(&ao, &m->audit, &aerr))) {
      shk__error_set(err, r, "the audit log: %s", aerr.message);
      goto fail;
    }
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

const shk__control_limits *shk__manager_limits(const shk_manager *m)
{
  return &m->limits;
}

shk_audit *shk__manager_audit(shk_manager *m)
{
  return m->audit;
}

/* ---- sessions ---- */

static void pending_free(pending *p)
{
  shk_cap_scope_clear(&p->scope);
  free(p);
}

/* Frees a session nothing refers to any more. Closing its proxy joins the
 * proxy's thread, so from then on no hook reads its egress grants. */
static void session_destroy(session *s)
{
  /* No new privileged command, and the running ones end: each is a held
   * attempt waited for below. */
  shk__sudo_stop(s);
  /* The approve module has been told the session ended, so every held
   * connection's release is on its way (on whichever thread delivers it):
   * the proxy they resume on stays open until they have all come. */
  pthread_mutex_lock(&s->held_mu);
  while (s->n_held)
    pthread_cond_wait(&s->held_cv, &s->held_mu);
  pthread_mutex_unlock(&s->held_mu);
  shk_egress_session_close(s->egress);
  for (egrant *g = atomic_load(&s->egress_grants), *n; g; g = n) {
    n = g->next;
    shk__broker_release(g);
    shk_cap_scope_clear(&g->scope);
    free(g);
  }
  for (pending *p = s->pending, *n; p; p = n) {
    n = p->next;
    pending_free(p);
  }
  for (size_t i = 0; i < s->n_roots; i++)
    free(s->roots[i]);
  free(s->roots);
  free(s->grants);
  shk__tally_free(s->refusals);
  shk__sudo_free(s);
  shk__unlock_free(s->fs);
  json_decref(s->sandbox_report);
  pthread_cond_destroy(&s->held_cv);
  pthread_mutex_destroy(&s->held_mu);
  free(s);
}

/* Lets go of one reference; the last one frees the session, outside mu
 * (closing the proxy waits for its thread). */
static void session_put(shk_manager *m, session *s)
{
  if (!s)
    return;
  pthread_mutex_lock(&m->mu);
  bool last = --s->refs == 0;
  pthread_mutex_unlock(&m->mu);
  if (last)
    session_destroy(s);
}

/* The "card-resolved" event of a pending request. */
static int ev_resolved(shk_manager *m, const session *s, const pending *p, const shk__peer *by, const char *outcome,
                       const char *why, shk_error *err)
{
  char *scope_text = shk_cap_scope_to_json(&p->scope);
  shk_audit_event e;
  ev_init(&e, "card-resolved", s, by);
  shk_audit_str(&e, SHK_AUDIT_CARD, p->id);
  shk_audit_str(&e, SHK_AUDIT_CLASS, shk_cap_class_name(p->scope.cls));
  shk_audit_str(&e, SHK_AUDIT_SCOPE, scope_text);
  shk_audit_str(&e, SHK_AUDIT_OUTCOME, outcome);
  shk_audit_str(&e, SHK_AUDIT_REASON, why);
  free(scope_text);
  return ev_emit(m, &e, err);
}

/* Caller holds mu. Records what time ended in session s: its pending
 * requests no human answered in time (timed out, not denied), its handles
 * past their expiry, and (silently) its once handles used up. */
static void sweep_session(shk_manager *m, session *s, int64_t now)
{
  for (pending **pp = &s->pending; *pp;) {
    pending *p = *pp;
    if (now - p->raised_ms < m->pending_timeout_ms) {
      pp = &p->next;
      continue;
    }
    *pp = p->next;
    s->n_pending--;
    /* The request is gone whether or not the timeline takes the event. */
    ev_resolved(m, s, p, NULL, "timed-out", "no human answered the pending request in time", NULL);
    pending_free(p);
  }
  for (size_t i = 0; i < s->n_grants; i++) {
    grant *g = &s->grants[i];
    if (g->torn_down || g->ended)
      continue;
    if (g->eg && atomic_load(&g->eg->dead)) {
      g->ended = true; /* used: the hook recorded its one use */
      continue;
    }
    if (!g->expires_ms || now < g->expires_ms)
      continue;
    g->ended = true;
    if (g->eg)
      atomic_store(&g->eg->dead, true);
    shk__unlock_revoke(s->fs, g->id, false, NULL); /* an expired grant's mounts go too */
    shk_audit_event e;
    ev_init(&e, "expire", s, NULL);
    shk_audit_str(&e, SHK_AUDIT_CLASS, shk_cap_class_name(g->cls));
    shk_audit_str(&e, SHK_AUDIT_HANDLE, g->id);
    shk_audit_str(&e, SHK_AUDIT_OUTCOME, "expired");
    ev_emit(m, &e, NULL); /* it expired whether or not this is recorded */
  }
}

void shk__manager_tick(shk_manager *m)
{
  int64_t now = now_ms();
  pthread_mutex_lock(&m->mu);
  for (session *s = m->sessions; s; s = s->next)
    sweep_session(m, s, now);
  session *reap = m->reap;
  m->reap = NULL;
  pthread_mutex_unlock(&m->mu);
  for (session *s = reap, *n; s; s = n) {
    n = s->reap_next;
    session_put(m, s);
  }
}

/* Caller holds mu. Revokes every grant (so the hook refuses from now on),
 * takes the session's handles out of the table (their history is in the
 * events), cancels its pending requests, and unlinks the session. Returns
 * how many handles left the table. */
static size_t detach_session(shk_manager *m, session *s)
{
  sweep_session(m, s, now_ms());
  shk_cap_revoke_session(m->table, s->id);
  for (size_t i = 0; i < s->n_grants; i++)
    if (s->grants[i].eg)
      atomic_store(&s->grants[i].eg->dead, true);
  size_t n = shk_cap_remove_session(m->table, s->id);
  for (pending *p = s->pending, *next; p; p = next) {
    next = p->next;
    ev_resolved(m, s, p, NULL, "cancelled", "the session ended", NULL);
    pending_free(p);
  }
  s->pending = NULL;
  s->n_pending = 0;
  for (session **pp = &m->sessions; *pp; pp = &(*pp)->next)
    if (*pp == s) {
      *pp = s->next;
      break;
    }
  return n;
}

json_t *shk__manager_close_session(shk_manager *m, const char *id, const shk__peer *by, const char *why)
{
  pthread_mutex_lock(&m->mu);
  session *s = find_session(m, id);
  size_t handles = s ? detach_session(m, s) : 0;
  pthread_mutex_unlock(&m->mu);
  if (!s)
    return refuse("no such session: %s", id ? id : "(none)");
  /* Its cards close and its held connections are refused. */
  shk_approve_session_close(m->approve, s->id);
  (void)shk_manager_set_freezer(m, s->id, NULL, NULL);
  /* A session's end is never refused: it only takes authority away. */
  shk_audit_event e;
  ev_init(&e, "session-close", s, by);
  shk_audit_str(&e, SHK_AUDIT_OUTCOME, "closed");
  shk_audit_str(&e, SHK_AUDIT_REASON, why);
  shk_audit_int(&e, SHK_AUDIT_COUNT, (int64_t)handles);
  ev_emit(m, &e, NULL);
  session_put(m, s); /* the registry's reference */
  return json_pack("{s:b}", "ok", 1);
}

void shk_manager_free(shk_manager *m)
{
  if (!m)
    return;
  shk__panel_stop(m->panel);
  shk__control_stop(m->control);
  /* Every held connection is refused, every card closed, before the
   * sessions end. */
  if (m->approve)
    shk_approve_shutdown(m->approve);
  shk__ask_stop(m);
  for (;;) {
    pthread_mutex_lock(&m->mu);
    char id[sizeof m->sessions->id] = "";
    if (m->sessions)
      snprintf(id, sizeof id, "%s", m->sessions->id);
    pthread_mutex_unlock(&m->mu);
    if (!id[0])
      break;
    json_decref(shk__manager_close_session(m, id, NULL, "the manager stopped"));
  }
  shk__manager_tick(m); /* lets go of the sessions a breaker ended */
  shk__ask_free(m);
  shk_cap_table_free(m->table);
  for (size_t i = 0; i < m->n_standing; i++)
    shk_cap_scope_clear(&m->standing[i]);
  free(m->standing);
  for (size_t i = 0; i < m->n_exec_path; i++)
    free(m->exec_path[i]);
  free(m->exec_path);
  shk_policy_free(m->policy);
  shk_audit_close(m->audit, NULL);
  free(m->socket);
  free(m->ca_dir);
  free(m->persist_root);
  free(m->device_root);
  pthread_mutex_destroy(&m->mu);
  free(m);
}

/* ---- the data plane ---- */

/* The egress hook, on the session's proxy thread, for every new connection
 * and DNS query: a live net.egress handle of the session that covers the
 * destination allows it, and tags the tunnel with the handle so a revoke
 * can close it. Nothing is cached: each call reads the handles' live bits.
 * No handle: no opinion, and the proxy's deny-by-default stands.
 * Why this is safe without the registry lock: the list it walks is
 * published with release ordering and its entries are immutable and freed
 * only after this thread is joined; a handle that left the table reads as
 * unknown (refused). It never blocks: the table's read lock is never held
 * across I/O, and shk_audit_emit only copies into a queue. Its verdict is
 * recorded first (destination and port, never a path or a header): an
 * allow the timeline cannot take is not given. */

/* Why: a handle's scope says how its connections are carried, whether the
 * hook admits them at once or a held one is resumed under it: an inspected
 * grant's connections are read request by request (and fail when they
 * cannot be), a limited one's pass read-only methods only. */
unsigned shk__egress_flags(const shk_cap_scope *scope)
{
  return (scope->tls_inspect ? SHK_EGRESS_INSPECT : 0u) | (scope->limited ? SHK_EGRESS_LIMITED : 0u);
}

static shk_egress_verdict egress_hook(void *data, const shk_egress_request *req, uint64_t *tag,
                                      const char **rule)
{
  session *s = data;
  shk_manager *m = s->m;
  int64_t now = now_ms();
  bool dns = req->proto == SHK_EGRESS_DNS;
  const egrant *hit = NULL;
  for (egrant *g = atomic_load_explicit(&s->egress_grants, memory_order_acquire); g && !hit; g = g->next) {
    if (g->scope.cls != SHK_CAP_NET_EGRESS || atomic_load(&g->dead) ||
        !shk_cap_scope_allows_host(&g->scope, req->host, req->port))
      continue;
    /* A DNS answer is not a use; the connection that follows is. */
    if (dns ? shk_cap_check(m->table, g->id, now) : shk_cap_use(m->table, g->id, now))
      continue;
    hit = g;
    if (g->once && !dns)
      atomic_store(&g->dead, true);
  }
  shk_audit_event e;
  ev_init(&e, "egress-check", s, NULL);
  shk_audit_str(&e, SHK_AUDIT_PROTOCOL, proto_name(req->proto));
  shk_audit_int(&e, SHK_AUDIT_CONNECTION, (int64_t)(req->conn_id & ((1ull << 53) - 1)));
  shk_audit_str(&e, SHK_AUDIT_HOST, req->host);
  if (req->port)
    shk_audit_int(&e, SHK_AUDIT_PORT, req->port);
  shk_audit_str(&e, SHK_AUDIT_DECISION, hit ? "allow" : "none");
  shk_audit_str(&e, SHK_AUDIT_HANDLE, hit ? hit->id : NULL);
  shk_audit_str(&e, SHK_AUDIT_RULE, hit ? hit->rule : NULL);
  shk_audit_str(&e, SHK_AUDIT_LIFETIME, hit && hit->once && !dns ? "once" : NULL);
  int r = ev_emit(m, &e, NULL);
  if (hit && hit->once && !dns) {
    ev_init(&e, "use-once", s, NULL);
    shk_audit_str(&e, SHK_AUDIT_CLASS, shk_cap_class_name(SHK_CAP_NET_EGRESS));
    shk_audit_str(&e, SHK_AUDIT_HANDLE, hit->id);
    shk_audit_str(&e, SHK_AUDIT_HOST, req->host);
    shk_audit_int(&e, SHK_AUDIT_PORT, req->port);
    shk_audit_str(&e, SHK_AUDIT_OUTCOME, "used");
    r = r ? r : ev_emit(m, &e, NULL);
  }
  if (r)
    return SHK_EGRESS_NONE;
  /* What no handle covers is the Ask loop's (Auto, Notify, Ask), unless
   * the operator's own configuration already allows it. */
  if (!hit)
    return req->configured != SHK_EGRESS_ALLOW ? shk__ask_connection(s, req, req->message) : SHK_EGRESS_NONE;
  *tag = hit->tag;
  *rule = hit->rule;
  if (req->flags)
    *req->flags = shk__egress_flags(&hit->scope);
  return SHK_EGRESS_ALLOW;
}

/* The proxy's verdict on one connection or DNS query, as the timeline's
 * "proxy-verdict" event: what the client was finally told, after the
 * configured rules, the hook and the upstream had their say (egress_hook's
 * "egress-check" records only what the live handles said).
 *
 * Why this is safe on the proxy thread: it takes no lock and only copies
 * the event into the audit queue (shk_audit_emit never blocks). The info
 * holds canonical hosts, addresses, reason tokens and rule texts only,
 * never a path, a query or a header value, and the text the client read is
 * left out: the reason token says the same. A nonzero return (the queue
 * is full, or the writer failed) makes the proxy refuse an allow rather
 * than let it through unrecorded. */
static int egress_verdict(void *data, const shk_egress_verdict_info *v)
{
  session *s = data;
  shk_audit_event e;
  ev_init(&e, "proxy-verdict", s, NULL);
  shk_audit_str(&e, SHK_AUDIT_PROTOCOL, proto_name(v->proto));
  shk_audit_int(&e, SHK_AUDIT_CONNECTION, (int64_t)(v->conn_id & ((1ull << 53) - 1)));
  shk_audit_str(&e, SHK_AUDIT_HOST, v->host);
  if (v->port)
    shk_audit_int(&e, SHK_AUDIT_PORT, v->port);
  shk_audit_str(&e, SHK_AUDIT_DECISION, v->decision);
  shk_audit_str(&e, SHK_AUDIT_REASON, v->reason);
  shk_audit_str(&e, SHK_AUDIT_RULE, v->rule);
  if (v->method) {
    /* One request of an inspected connection: what was asked and how it
     * went, never what for (no target, header or body). */
    shk_audit_str(&e, SHK_AUDIT_HTTP_METHOD, v->method);
    if (v->status)
      shk_audit_int(&e, SHK_AUDIT_HTTP_STATUS, v->status);
    shk_audit_int(&e, SHK_AUDIT_HTTP_BYTES, (int64_t)v->bytes);
    shk_audit_int(&e, SHK_AUDIT_DURATION_US, (int64_t)v->duration_us);
  }
  int r = ev_emit(s->m, &e, NULL);
  shk__tally_add(s->refusals, v);
  if (s->m->on_verdict)
    s->m->on_verdict(s->m->verdict_data, v);
  return r;
}

/* ---- the control plane ---- */

/* Caller holds mu. Makes room for one more grant of s, and for a net.egress
 * grant builds its data-plane entry, so that publishing it cannot fail.
 * 0 or -ENOMEM. */
static int prepare_grant(session *s, const grant *g, const shk_cap_scope *scope, bool once, egrant **eg)
{
  *eg = NULL;
  if (s->n_grants == s->cap_grants) {
    size_t nc = s->cap_grants ? s->cap_grants * 2 : 8;
    grant *ng = realloc(s->grants, nc * sizeof *ng);
    if (!ng)
      return -ENOMEM;
    s->grants = ng;
    s->cap_grants = nc;
  }
  if (g->cls != SHK_CAP_NET_EGRESS && g->cls != SHK_CAP_CREDENTIALS)
    return 0;
  egrant *e = calloc(1, sizeof *e);
  if (!e || shk_cap_scope_copy(&e->scope, scope)) {
    free(e);
    return -ENOMEM;
  }
  snprintf(e->id, sizeof e->id, "%s", g->id);
  snprintf(e->rule, sizeof e->rule, "handle:%.12s", g->id);
  e->once = once;
  *eg = e;
  return 0;
}

static void unprepare(egrant *eg)
{
  if (eg) {
    shk__broker_release(eg);
    shk_cap_scope_clear(&eg->scope);
    free(eg);
  }
}

/* Caller holds mu. Registers an issued handle with its session: from the
 * store on, the egress hook sees it. */
static void publish_grant(shk_manager *m, session *s, grant *g, egrant *eg)
{
  g->eg = eg;
  s->grants[s->n_grants++] = *g;
  if (eg) {
    eg->tag = m->next_tag++;
    eg->next = atomic_load_explicit(&s->egress_grants, memory_order_relaxed);
    atomic_store_explicit(&s->egress_grants, eg, memory_order_release);
  }
}

/* Undoes an issued handle that has no children. */
static void unissue(shk_manager *m, const char *id)
{
  if (shk_cap_remove(m->table, id))
    shk_cap_revoke(m->table, id); /* cannot happen for a fresh handle; fail closed anyway */
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

shk_policy_session shk__manager_policy_session(const shk_manager *m, const session *s)
{
  return (shk_policy_session){
    .id = s->id, .trust_tier = s->trust_tier, .model = s->model, .expires_ms = s->expires_ms,
    .taint = s->taint, .exec_path = (const char *const *)m->exec_path, .n_exec_path = m->n_exec_path,
  };
}

/* Who asked: the control peer, or the process that embeds the manager. */
static shk__peer peer_of(const shk_manager *m, shk__conn *conn)
{
  shk__peer p = { "embedded", getuid(), getpid(), m->self_exe[0] ? m->self_exe : NULL };
  if (conn)
    shk__conn_peer(conn, &p);
  return p;
}

/* Caller holds mu. A grant the policy answered "ask" waits here, if the
 * session has room for one more and the timeline takes the card. */
static json_t *raise_pending(shk_manager *m, const grant_req *q, const shk_policy_answer *pa)
{
  session *s = q->s;
  char why[700];
  shk_error aerr;
  if (s->n_pending >= m->max_pending) {
    snprintf(why, sizeof why, "session %s already has %u requests waiting for a human", s->id, m->max_pending);
    ev_grant(m, q, pa, NULL, why, "too-many-pending", NULL);
    return refuse("grant: %s", why);
  }
  uint8_t rnd[16];
  pending *p = calloc(1, sizeof *p);
  if (!p)
    return refuse("grant: out of memory");
  int r = shk_cap_scope_copy(&p->scope, q->scope);
  if (r || getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
    if (!r)
      shk_cap_scope_clear(&p->scope);
    free(p);
    return refuse("grant: could not record the pending request");
  }
  for (size_t i = 0; i < sizeof rnd; i++)
    snprintf(p->id + 2 * i, 3, "%02x", rnd[i]);
  p->ttl_ms = q->ttl_ms;
  p->once = q->once;
  p->external = q->external;
  p->raised_ms = now_ms();
  grant_req card = *q;
  card.card = p->id;
  shk_audit_event e;
  ev_request(&e, "card-raised", &card);
  ev_answer(&e, pa);
  shk_audit_str(&e, SHK_AUDIT_REASON, pa->why);
  if (ev_emit(m, &e, &aerr)) {
    pending_free(p);
    return refuse("grant: refused: %s", aerr.message);
  }
  p->next = s->pending;
  s->pending = p;
  s->n_pending++;
  snprintf(why, sizeof why, "needs a human's approval: %s", pa->why);
  return json_pack("{s:b, s:s, s:s, s:s, s:s, s:O?, s:s, s:s, s:i, s:I, s:s}", "ok", 0, "decision", "ask",
                   "pending", p->id, "session", s->id, "class", shk_cap_class_name(q->scope->cls), "scope",
                   q->jscope, "tier", shk_policy_tier_name(pa->tier), "policy", pa->policy, "manifest_entry",
                   pa->manifest_entry, "times_out_ms", (json_int_t)(p->raised_ms + m->pending_timeout_ms),
                   "error", why);
}

/* Caller holds mu. Why the store of persisted data cannot take the
 * persistence grant SCOPE of session s, or NULL. Safe to refuse rather
 * than mount: a store inside one of the sandbox's writable roots would let
 * the workload edit what it persisted behind the overlay (and other
 * images' data too); an overlay cannot keep its changes inside the
 * directory it covers; and an overlay over a writable root would take the
 * workload's writes there away from the host, silently. */
static const char *store_unfit(const shk_manager *m, const session *s, const shk_cap_scope *scope, char *buf,
                               size_t len)
{
  if (!m->persist_root)
    return "neither XDG_STATE_HOME nor HOME is set: there is no state directory to keep persisted data in";
  if (!shk_policy_image(m->policy))
    return "the manifest names no image to keep persisted data for";
  for (size_t i = 0; i < s->n_roots; i++)
    if (path_within(m->persist_root, s->roots[i])) {
      snprintf(buf, len, "the store of persisted data %s is inside the sandbox's writable root %s: the workload "
                         "could change it directly; set the manager's state_dir elsewhere", m->persist_root,
               s->roots[i]);
      return buf;
    }
  for (size_t i = 0; i < scope->paths.n; i++) {
    const char *p = scope->paths.v[i];
    if (path_within(m->persist_root, p)) {
      snprintf(buf, len, "the store of persisted data %s is inside %s: an overlay cannot keep its changes in the "
                         "directory it covers; persist a directory beneath %s, or set the manager's state_dir "
                         "elsewhere", m->persist_root, p, p);
      return buf;
    }
    for (size_t j = 0; j < s->n_roots; j++)
      if (path_within(s->roots[j], p)) {
        snprintf(buf, len, "%s holds the sandbox's writable root %s: under an overlay its writes would no longer "
                           "reach the host; persist a directory that does not hold it", p, s->roots[j]);
        return buf;
      }
  }
  return NULL;
}

/* Caller holds mu. What can be checked of a mount class's grant before
 * there is a sandbox to mount into: the store of persistence, and that a
 * device grant names nodes this host has. NULL, or why not (in buf). */
static const char *mount_checks(shk_manager *m, session *s, const shk_cap_scope *scope, char *buf, size_t len)
{
  if (scope->cls == SHK_CAP_PERSISTENCE)
    return store_unfit(m, s, scope, buf, len);
  if (scope->cls == SHK_CAP_GPU || scope->cls == SHK_CAP_PERIPHERAL) {
    char **rel = NULL;
    size_t n_rel = 0;
    const char *why = shk__devices_of(m->device_root ? m->device_root : "/dev", scope, &rel, &n_rel, buf, len);
    shk__devices_free(rel, n_rel);
    return why;
  }
  return NULL;
}

/* Caller holds mu. The OS delta of the grant ID of a mount class, into
 * session s's running sandbox (unlock.c): fs.scope's and persistence's
 * paths, a gpu's or a peripheral's device nodes. All or nothing. NULL, or
 * why nothing was mounted (in buf). */
static const char *mount_delta(shk_manager *m, session *s, const char *id, const shk_cap_scope *scope, char *buf,
                               size_t len)
{
  const char *why = mount_checks(m, s, scope, buf, len);
  if (why)
    return why;
  if (scope->cls == SHK_CAP_FS_SCOPE)
    return shk__unlock_grant(s->fs, id, scope, NULL, buf, len);
  if (scope->cls == SHK_CAP_PERSISTENCE) {
    shk__persist_where pw = { m->persist_root, shk_policy_image(m->policy), s->id };
    return shk__unlock_grant(s->fs, id, scope, &pw, buf, len);
  }
  char **rel = NULL;
  size_t n_rel = 0;
  const char *root = m->device_root ? m->device_root : "/dev";
  why = shk__devices_of(root, scope, &rel, &n_rel, buf, len);
  if (!why)
    why = shk__unlock_devices(s->fs, id, root, rel, n_rel, buf, len);
  shk__devices_free(rel, n_rel);
  return why;
}

/* Caller holds mu. The sandbox of session s has started (its fs state is
 * set, or NO says why live unlocks cannot reach it): the grants made
 * before it are mounted now, before its command runs. One that cannot be
 * is revoked, with the event saying why: a handle never stays "granted"
 * for a mount that is not there. */
static void apply_deferred(shk_manager *m, session *s, const char *no)
{
  for (size_t i = 0; i < s->n_grants; i++) {
    grant *g = &s->grants[i];
    if (!g->deferred || g->torn_down || g->ended)
      continue;
    g->deferred = false;
    const shk_cap_scope *scope = shk_cap_scope_of(m->table, g->id);
    char buf[PATH_MAX + 256];
    const char *why = no ? no : !scope ? "the handle is gone" : mount_delta(m, s, g->id, scope, buf, sizeof buf);
    shk_audit_event e;
    ev_init(&e, why ? "revoke" : "grant-applied", s, NULL);
    shk_audit_str(&e, SHK_AUDIT_CLASS, shk_cap_class_name(g->cls));
    shk_audit_str(&e, SHK_AUDIT_HANDLE, g->id);
    shk_audit_str(&e, SHK_AUDIT_OUTCOME, why ? "os-delta-failed" : "applied at the sandbox's start");
    if (why) {
      char reason[1024];
      snprintf(reason, sizeof reason, "the grant made before the sandbox started could not be applied at its "
               "start: %.900s", why);
      shk_audit_str(&e, SHK_AUDIT_REASON, reason);
      shk_cap_revoke(m->table, g->id);
      g->torn_down = true;
    }
    ev_emit(m, &e, NULL); /* it was applied, or revoked, whether or not this is recorded */
  }
}

/* Caller holds mu. The grant protocol for one request, with the approval
 * state the manager holds for it. */
json_t *shk__manager_grant_locked(shk_manager *m, const grant_req *q)
{
  session *s = q->s;
  const shk_cap_scope *scope = q->scope;
  int64_t now = now_ms();
  shk_error aerr;
  /* 1. The decision, and its record. */
  shk_policy_session ps = shk__manager_policy_session(m, s);
  shk_policy_request pr = { .kind = q->standing ? SHK_POLICY_STANDING : SHK_POLICY_GRANT, .scope = scope,
                            .external = q->external, .approval = q->approval, .now_ms = now };
  shk_policy_answer pa;
  shk_error derr;
  if (shk_policy_decide(m->policy, &ps, &pr, &pa, &derr)) {
    ev_grant(m, q, NULL, NULL, derr.message, "undecidable", NULL);
    return refuse("grant: the request could not be decided: %s", derr.message);
  }
  if (shk__manager_ev_decision(m, q, &pa, &aerr))
    return refuse("grant: refused: %s", aerr.message);
  bool by_cedar = pa.decided_by == SHK_POLICY_BY_CEDAR;
  if (pa.verdict == SHK_POLICY_DENY || (pa.verdict == SHK_POLICY_ASK && q->standing))
    return json_pack("{s:b, s:s, s:s, s:s, s:s, s:s?, s:i}", "ok", 0, "decision", "refused", "decided_by",
                     by_cedar ? "policy" : "manifest", "policy", pa.policy, "error", pa.why, "tier",
                     by_cedar ? shk_policy_tier_name(pa.tier) : NULL, "manifest_entry", pa.manifest_entry);
  /* 2. A mechanism that applies it, before any human is asked. */
  char why[1024];
  if (no_mechanism(scope->cls, why, sizeof why)) {
    ev_grant(m, q, &pa, NULL, why, "no-enforcement-point", NULL);
    return json_pack("{s:b, s:s, s:s, s:s}", "ok", 0, "decision", "refused", "decided_by", "enforcement",
                     "error", why);
  }
  /* A device this host does not have is refused now too: a human asked
   * to approve it would approve nothing. */
  if (scope->cls == SHK_CAP_GPU || scope->cls == SHK_CAP_PERIPHERAL) {
    char **rel = NULL, dwhy[PATH_MAX + 256];
    size_t n_rel = 0;
    const char *no = shk__devices_of(m->device_root ? m->device_root : "/dev", scope, &rel, &n_rel, dwhy,
                                     sizeof dwhy);
    shk__devices_free(rel, n_rel);
    if (no) {
      snprintf(why, sizeof why, "no enforcement point on this host for %s: %.900s", shk_cap_class_name(scope->cls),
               no);
      ev_grant(m, q, &pa, NULL, why, "no-enforcement-point", NULL);
      return json_pack("{s:b, s:s, s:s, s:s}", "ok", 0, "decision", "refused", "decided_by", "enforcement",
                       "error", why);
    }
  }
  if (pa.verdict == SHK_POLICY_ASK) {
    if (ALWAYS(q->approval == SHK_POLICY_UNASKED))
      return raise_pending(m, q, &pa);
    return refuse("grant: still not permitted after the human's answer");
  }
  /* 3. The handle. A session grant dies with the session at the latest. */
  int64_t expires = q->standing ? 0 : s->expires_ms;
  if (q->ttl_ms && now + q->ttl_ms < expires)
    expires = now + q->ttl_ms;
  grant g = { .cls = scope->cls, .expires_ms = expires };
  shk_cap_lifecycle lc = q->standing ? SHK_CAP_STANDING : q->once ? SHK_CAP_ONCE : SHK_CAP_SESSION;
  int r = shk_cap_issue(m->table, s->id, scope, lc, expires, g.id);
  if (r) {
    snprintf(why, sizeof why, "could not issue a handle: %s", shk_strerror(r));
    ev_grant(m, q, &pa, NULL, why, "handle", NULL);
    return refuse("grant: %s", why);
  }
  /* 4. The OS delta, prepared: the egress hook's entry for the handle. A
   * net.egress grant to a session without an egress proxy has nowhere to
   * go; that, or an injected fault (test builds), undoes the handle:
   * nothing remains, and the event says why. */
  egrant *eg = NULL;
  const char *delta_err = fault("grant-delta") ? "injected fault"
                        : (scope->cls == SHK_CAP_NET_EGRESS || scope->cls == SHK_CAP_CREDENTIALS) && !s->egress
                            ? "the session has no egress proxy" : NULL;
  if (!delta_err && prepare_grant(s, &g, scope, q->once, &eg))
    delta_err = "out of memory";
  /* A credentials grant's delta is its secrets, loaded from the store now:
   * a name the store does not hold is refused, not granted empty. */
  char br_why[512];
  if (!delta_err && scope->cls == SHK_CAP_CREDENTIALS)
    delta_err = shk__broker_prepare(s->broker_key, scope, eg, br_why, sizeof br_why);
  /* A mount class's delta is its mounts in the running sandbox, made now
   * (all or nothing) and taken away again if a later step fails; or, for a
   * session whose launcher has said a sandbox is coming and that has not
   * started yet, made when it starts (apply_deferred), before its command
   * runs. */
  char fs_why[PATH_MAX + 256];
  bool mounts = mounts_of(scope->cls);
  bool defer = mounts && !s->fs && s->expects_sandbox && !s->sandbox_started;
  if (!delta_err && mounts && q->once)
    delta_err = "a mount cannot be used once: grant it for the session or with a ttl";
  if (!delta_err && mounts)
    delta_err = defer ? mount_checks(m, s, scope, fs_why, sizeof fs_why)
                      : mount_delta(m, s, g.id, scope, fs_why, sizeof fs_why);
  g.deferred = defer && !delta_err;
  if (delta_err) {
    unprepare(eg);
    unissue(m, g.id);
    snprintf(why, sizeof why, "the OS delta failed (%.960s); nothing was granted", delta_err);
    ev_grant(m, q, &pa, NULL, why, "os-delta", NULL);
    return json_pack("{s:b, s:s, s:s, s:s}", "ok", 0, "decision", "refused", "decided_by", "enforcement",
                     "error", why);
  }
  /* 5. The event, then the delta: a grant the timeline cannot take is not
   * given. */
  if (ev_grant(m, q, &pa, g.id, NULL, NULL, &aerr)) {
    unprepare(eg);
    shk__unlock_revoke(s->fs, g.id, false, NULL);
    unissue(m, g.id);
    return refuse("grant: refused: %s; nothing was granted", aerr.message);
  }
  publish_grant(m, s, &g, eg);
  if (eg)
    shk__ask_release_covered(s, eg);
  return json_pack("{s:b, s:s, s:s, s:s, s:s, s:i, s:s, s:I, s:b, s:s, s:b}", "ok", 1, "decision", "granted",
                   "handle", g.id, "policy", pa.policy, "tier", shk_policy_tier_name(pa.tier), "manifest_entry",
                   pa.manifest_entry, "session", s->id, "expires_ms", (json_int_t)expires, "once", q->once,
                   "enforced_by", enforced_by[scope->cls], "at_start", g.deferred);
}

/* Caller holds mu. The admin's standing grants, for a new session:
 * decided like every grant (an admin forbid, such as privileged installs at
 * low trust, holds against them too, and a class with no enforcement point
 * is refused), with no expiry of their own; they end with the session like
 * every grant, and can be revoked like any. */
static void issue_standing(shk_manager *m, session *s)
{
  for (size_t i = 0; i < m->n_standing; i++) {
    grant_req q = { .s = s, .scope = &m->standing[i], .scope_text = shk_cap_scope_to_json(&m->standing[i]),
                  .standing = true, .approval = SHK_POLICY_UNASKED };
    json_decref(shk__manager_grant_locked(m, &q));
    free(q.scope_text);
  }
}

/* Caller holds mu. The sentence that refuses session roots that hold the
 * control socket, or NULL. */
static const char *socket_reachable(const shk_manager *m, char *const *roots, size_t n, char *buf, size_t len)
{
  for (size_t i = 0; m->socket && i < n; i++)
    if (path_within(m->socket, roots[i])) {
      snprintf(buf, len, "the control socket %s is inside the writable root %s: a command in the sandbox could "
                         "reach it; put the socket elsewhere (SHINKEN_SOCKET, XDG_RUNTIME_DIR) or write elsewhere",
               m->socket, roots[i]);
      return buf;
    }
  return NULL;
}

int shk__manager_claim_socket(shk_manager *m, const char *path, shk_error *err)
{
  char real[PATH_MAX];
  if (!resolve_path(path, real))
    return shk__error_set(err, -EINVAL, "%s: the control socket's path must be absolute, without . or ..", path);
  char *copy = strdup(real);
  if (!copy)
    return shk__error_set(err, -ENOMEM, "out of memory");
  int r = 0;
  pthread_mutex_lock(&m->mu);
  for (session *s = m->sessions; s && !r; s = s->next)
    for (size_t i = 0; i < s->n_roots && !r; i++)
      if (path_within(copy, s->roots[i]))
        r = shk__error_set(err, -EPERM, "%s is inside the writable root %s of session %s: a command in its "
                                        "sandbox could reach the control socket", copy, s->roots[i], s->id);
  if (!r) {
    free(m->socket);
    m->socket = copy;
    copy = NULL;
  }
  pthread_mutex_unlock(&m->mu);
  free(copy);
  return r;
}

/* The session's writable roots, resolved, into s. NULL, or why not. */
static const char *take_roots(session *s, json_t *req, char *buf, size_t len)
{
  const char **roots;
  size_t n;
  int r = strlist(req, "writable_roots", &roots, &n);
  const char *bad = r == -ENOMEM ? "out of memory" : r ? "writable_roots must be an array of strings" : NULL;
  if (!bad && !(s->roots = calloc(n + 1, sizeof *s->roots)))
    bad = "out of memory";
  for (size_t i = 0; !bad && i < n; i++) {
    char real[PATH_MAX];
    if (!resolve_path(roots[i], real)) {
      snprintf(buf, len, "writable_roots: '%s' is not an absolute path without . or ..", roots[i]);
      bad = buf;
    } else if (!(s->roots[s->n_roots++] = strdup(real))) {
      bad = "out of memory";
    }
  }
  free(roots);
  return bad;
}

static json_t *op_open_session(shk_manager *m, json_t *req, shk__conn *conn, const shk__peer *by)
{
  static const char *const keys[] = { "op", "name", "trust_tier", "model", "ttl_ms", "egress", "allow_domains",
                                      "deny_domains", "proxy_config", "writable_roots", "ask", "sandbox", NULL };
  const char *bad;
  if (!known_keys(req, keys, &bad))
    return refuse("open_session: unknown field '%s'", bad);
  json_t *jsandbox = json_object_get(req, "sandbox");
  if (jsandbox && !json_is_boolean(jsandbox))
    return refuse("open_session: sandbox must be true or false");
  json_t *jask = json_object_get(req, "ask");
  if (jask && !json_is_boolean(jask))
    return refuse("open_session: ask must be true or false");
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
  if (getrandom(s->broker_key, sizeof s->broker_key, 0) != (ssize_t)sizeof s->broker_key) {
    free(s);
    return refuse("open_session: no randomness");
  }
  s->m = m;
  s->refs = 1;
  pthread_mutex_init(&s->held_mu, NULL);
  pthread_cond_init(&s->held_cv, NULL);
  s->no_ask = json_is_false(jask);
  s->expects_sandbox = json_is_true(jsandbox);
  snprintf(s->id, sizeof s->id, "%s%s%02x%02x%02x%02x%02x%02x", name ? name : "s", "-", rnd[0], rnd[1],
           rnd[2], rnd[3], rnd[4], rnd[5]);
  snprintf(s->trust_tier, sizeof s->trust_tier, "%s", tier);
  snprintf(s->model, sizeof s->model, "%s", str_or(req, "model", ""));
  s->expires_ms = now_ms() + (ttl ? ttl : 24LL * 3600 * 1000);
  shk__opener_take(&s->opener, by, now_ms());
  if (!(s->refusals = shk__tally_new())) {
    session_destroy(s);
    return refuse("open_session: out of memory");
  }
  char why[PATH_MAX * 2 + 256];
  json_t *ans = NULL;
  if ((bad = take_roots(s, req, why, sizeof why))) {
    ans = refuse("open_session: %s", bad);
  } else {
    /* Checked before anything is started, and again under the lock that
     * makes the session visible (a socket may be claimed meanwhile). */
    pthread_mutex_lock(&m->mu);
    bad = socket_reachable(m, s->roots, s->n_roots, why, sizeof why);
    pthread_mutex_unlock(&m->mu);
    if (bad)
      ans = refuse("open_session: %s", bad);
  }
  if (!ans && json_is_true(json_object_get(req, "egress"))) {
    const char **allow = NULL, **deny = NULL;
    size_t na = 0, nd = 0;
    if (strlist(req, "allow_domains", &allow, &na) || strlist(req, "deny_domains", &deny, &nd)) {
      ans = refuse("open_session: allow_domains and deny_domains must be arrays of strings");
    } else {
      shk_egress_session_opts eo = {
        .name = s->id, .allow_domains = allow, .n_allow_domains = na, .deny_domains = deny,
        .n_deny_domains = nd, .config_path = str_or(req, "proxy_config", NULL),
        .hook = egress_hook, .hook_data = s, .on_verdict = egress_verdict, .on_abandon = shk__ask_abandon,
        .rewrite = shk__broker_rewrite,
        .ca_dir = m->ca_dir, .upstream_ca = str_or(req, "upstream_ca", NULL),
      };
      shk_error err;
      if (shk_egress_session_open(&eo, &s->egress, &err))
        ans = refuse("open_session: egress proxy: %s", err.message);
      /* The sudo shim's socket beside the proxy's, in the directory the
       * sandbox's bridge reaches. */
      else if (shk__sudo_open(s, &err))
        ans = refuse("open_session: privileged commands: %s", err.message);
    }
    free(allow);
    free(deny);
  }
  if (ans) {
    session_destroy(s);
    return ans;
  }
  shk_error aerr;
  pthread_mutex_lock(&m->mu);
  if ((bad = socket_reachable(m, s->roots, s->n_roots, why, sizeof why))) {
    ans = refuse("open_session: %s", bad);
  } else {
    shk_audit_event e;
    char tier_line[64];
    snprintf(tier_line, sizeof tier_line, "trust tier %s", s->trust_tier);
    ev_init(&e, "session-open", s, by);
    shk_audit_str(&e, SHK_AUDIT_OUTCOME, "opened");
    shk_audit_str(&e, SHK_AUDIT_REASON, tier_line);
    if (ev_emit(m, &e, &aerr))
      ans = refuse("open_session: refused: %s", aerr.message);
  }
  bool opened = !ans;
  char sid[sizeof s->id];
  snprintf(sid, sizeof sid, "%s", s->id);
  if (opened) {
    s->next = m->sessions;
    m->sessions = s;
    issue_standing(m, s);
    /* The sentinels of the store's --env secrets: tools that insist on a
     * token find one, and only the proxy can turn it into the secret. */
    ans = json_pack("{s:b, s:s, s:s?, s:I, s:s?, s:o}", "ok", 1, "session", s->id, "egress_dir",
                    s->egress ? shk_egress_session_dir(s->egress) : NULL, "expires_ms", (json_int_t)s->expires_ms,
                    "inspection_error", s->egress ? shk_egress_session_ca_error(s->egress) : NULL,
                    "sentinels", s->egress ? shk__broker_sentinels(s->broker_key) : json_object());
  }
  pthread_mutex_unlock(&m->mu);
  if (!opened) {
    session_destroy(s);
    return ans;
  }
  /* From here the session may be closed by another thread at any time:
   * only its id is used. Its cards: until it is open in the approve
   * module, whatever its proxy would ask about is refused. */
  shk_approve_session as = { .name = sid, .started_ms = now_ms() };
  shk_error aperr;
  if (shk_approve_session_open(m->approve, &as, &aperr)) {
    json_decref(shk__manager_close_session(m, sid, by, "the Ask loop could not take the session"));
    json_decref(ans);
    return refuse("open_session: %s", aperr.message);
  }
  if (!ans || (conn && shk__conn_own_session(conn, sid))) {
    json_decref(shk__manager_close_session(m, sid, by, "out of memory"));
    json_decref(ans);
    return refuse("open_session: out of memory");
  }
  return ans;
}

static json_t *op_sessions(shk_manager *m)
{
  json_t *a = json_array();
  pthread_mutex_lock(&m->mu);
  for (session *s = m->sessions; s && a; s = s->next) {
    json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:b, s:I, s:O?}", "session", s->id, "trust_tier",
                          s->trust_tier, "model", s->model, "expires_ms", (json_int_t)s->expires_ms, "grants",
                          (json_int_t)s->n_grants, "egress", s->egress != NULL, "pending", (json_int_t)s->n_pending,
                          "sandbox", s->sandbox_report);
    if (!o || shk__opener_add_json(&s->opener, o) || json_array_append_new(a, o)) {
      json_decref(a);
      a = NULL;
    }
  }
  pthread_mutex_unlock(&m->mu);
  /* Whether the Ask loop froze it (a breaker, or a human's take over):
   * asked of the approve module after mu is let go, since it is never
   * called into with mu held. */
  if (a && shk__ask_sessions_frozen(m, a)) {
    json_decref(a);
    a = NULL;
  }
  return a ? json_pack("{s:b, s:o}", "ok", 1, "sessions", a) : refuse("sessions: out of memory");
}

/* Whether SCOPE grants nothing: the class's empty scope already covers it
 * ({}, or ports without domains or CIDRs to reach), by the subset rule
 * attenuation uses. install.privileged is the exception: its scope is one
 * choice, and the empty one is the narrower choice ("pkg", installing
 * packages), which grants something. */
static bool grants_nothing(const shk_cap_scope *scope)
{
  if (scope->cls == SHK_CAP_INSTALL_PRIVILEGED)
    return false;
  shk_cap_scope none = { .cls = scope->cls };
  return shk_cap_scope_subset(scope, &none, NULL);
}

static json_t *op_grant(shk_manager *m, json_t *req, const shk__peer *by)
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
  grant_req q = { .by = by, .scope = &scope, .jscope = jscope, .scope_text = shk_cap_scope_to_json(&scope),
                .ttl_ms = ttl, .once = json_is_true(json_object_get(req, "once")),
                .external = !strcmp(prov, "external"), .approval = SHK_POLICY_UNASKED };
  json_t *ans;
  pthread_mutex_lock(&m->mu);
  q.s = find_session(m, sid);
  if (!q.s) {
    ans = refuse("grant: no such session: %s", sid ? sid : "(none)");
  } else if (grants_nothing(&scope)) {
    /* Bad input, not a decision: such a grant would record a handle that
     * can do nothing, and its holder would believe it had been given
     * something. Said after the session, so an unknown one is said first. */
    char *text = jscope ? json_dumps(jscope, JSON_COMPACT) : NULL;
    ans = refuse("grant: the scope %s grants nothing for %s%s", text ? text : "{}", cname,
                 cls == SHK_CAP_NET_EGRESS ? " (it needs domains or cidrs to reach)" : "");
    free(text);
  } else {
    sweep_session(m, q.s, now_ms());
    /* A request built from external data shows the session took it in. */
    if (q.external)
      q.s->taint.ingested_external = true;
    ans = shk__manager_grant_locked(m, &q);
  }
  pthread_mutex_unlock(&m->mu);
  free(q.scope_text);
  shk_cap_scope_clear(&scope);
  return ans;
}

/* A launcher's account of the sandbox it ran for a session, once it is
 * gone: the exit ("exit_status", "signal": a number, "limit": the limit
 * that acted on it, if any: memory when it killed, pids when it refused a
 * fork), whether it started at all, and what stage 2 reported it enforced
 * ("enforced", "degraded"). It is recorded as "sandbox-exit", preceded by
 * "sandbox-start" when it started and no sandbox_started recorded that
 * (a launcher that reports only at the end). A launcher that dies first
 * leaves the session's close as the record. Nothing here grants anything,
 * and the events are taken whether or not the timeline has room (they are
 * counted if not). */
static json_t *op_sandbox_ran(shk_manager *m, json_t *req, const shk__peer *by)
{
  static const char *const keys[] = { "op", "session", "started", "pid", "exit_status", "signal", "limit",
                                      "enforced", "degraded", NULL };
  const char *bad;
  if (!known_keys(req, keys, &bad))
    return refuse("sandbox_ran: unknown field '%s'", bad);
  const char **enforced = NULL, **degraded = NULL;
  size_t ne, nd;
  json_t *st = json_object_get(req, "exit_status"), *sig = json_object_get(req, "signal");
  json_t *pid = json_object_get(req, "pid");
  json_t *ans = NULL;
  if (strlist(req, "enforced", &enforced, &ne) || strlist(req, "degraded", &degraded, &nd) ||
      (st && !json_is_integer(st)) || (sig && (!json_is_integer(sig) || json_integer_value(sig) < 0 ||
                                               json_integer_value(sig) >= 65)) ||
      (pid && !json_is_integer(pid)) || !json_is_boolean(json_object_get(req, "started")))
    ans = refuse("sandbox_ran: started (a boolean) is required; enforced and degraded are arrays of strings, "
                 "exit_status, pid and signal integers");
  pthread_mutex_lock(&m->mu);
  session *s = ans ? NULL : find_session(m, str_or(req, "session", NULL));
  if (!ans && !s)
    ans = refuse("sandbox_ran: no such session");
  if (s)
    s->refs++;
  bool recorded = s && s->sandbox_started;
  pthread_mutex_unlock(&m->mu);
  if (!ans) {
    shk_audit_event e;
    if (json_is_true(json_object_get(req, "started")) && !recorded) {
      ev_init(&e, "sandbox-start", s, by);
      shk_audit_strv(&e, SHK_AUDIT_ENFORCED, enforced);
      shk_audit_strv(&e, SHK_AUDIT_DEGRADED, degraded);
      ev_emit(m, &e, NULL);
    }
    ev_init(&e, "sandbox-exit", s, by);
    if (st)
      shk_audit_int(&e, SHK_AUDIT_EXIT_CODE, json_integer_value(st));
    char signame[32];
    const char *abbrev = sig && json_integer_value(sig) ? sigabbrev_np((int)json_integer_value(sig)) : NULL;
    /* The signal's name as docs/audit.md gives it: SIGKILL, ... */
    snprintf(signame, sizeof signame, "SIG%s", abbrev ? abbrev : "");
    shk_audit_str(&e, SHK_AUDIT_SIGNAL, abbrev ? signame : NULL);
    shk_audit_str(&e, SHK_AUDIT_LIMIT, str_or(req, "limit", NULL));
    shk_audit_str(&e, SHK_AUDIT_OUTCOME, json_is_true(json_object_get(req, "started")) ? "exited" : "not-started");
    ev_emit(m, &e, NULL);
    ans = json_pack("{s:b}", "ok", 1);
  }
  session_put(m, s);
  free(enforced);
  free(degraded);
  return ans;
}

/* A human's answer to a pending request. Approve decides the grant again
 * with the manager's record that a human approved it; deny refuses it. The
 * answer is recorded first, with who gave it: an approval the timeline
 * cannot take does not take effect (the request stays pending), a denial
 * always does. */
static json_t *op_resolve(shk_manager *m, json_t *req, const shk__peer *by)
{
  static const char *const keys[] = { "op", "pending", "resolution", NULL };
  const char *bad;
  if (!known_keys(req, keys, &bad))
    return refuse("resolve: unknown field '%s'", bad);
  const char *id = str_or(req, "pending", NULL), *res = str_or(req, "resolution", "");
  bool approve = !strcmp(res, "approve");
  if (!id || (!approve && strcmp(res, "deny")))
    return refuse("resolve: pending (an id) and resolution (approve or deny) are required");
  json_t *who = json_pack("{s:s, s:I, s:I, s:s?}", "channel", by->surface, "uid", (json_int_t)by->uid, "pid",
                          (json_int_t)by->pid, "exe", by->exe);
  if (!who)
    return refuse("resolve: out of memory");
  json_t *ans = NULL;
  int64_t now = now_ms();
  pthread_mutex_lock(&m->mu);
  session *s;
  pending *p = NULL, **pp = NULL;
  for (s = m->sessions; s; s = s->next) {
    sweep_session(m, s, now);
    for (pp = &s->pending; *pp; pp = &(*pp)->next)
      if (!strcmp((*pp)->id, id)) {
        p = *pp;
        break;
      }
    if (p)
      break;
  }
  shk_error aerr;
  if (!p) {
    ans = refuse("resolve: no pending request %s (answered, timed out, or never raised)", id);
  } else if (ev_resolved(m, s, p, by, approve ? "approved" : "denied", NULL, &aerr) && approve) {
    ans = refuse("resolve: the approval is not taken: %s; the request still waits", aerr.message);
  } else {
    *pp = p->next;
    s->n_pending--;
    json_t *jscope = NULL;
    grant_req q = { .s = s, .by = by, .scope = &p->scope, .scope_text = shk_cap_scope_to_json(&p->scope),
                  .ttl_ms = p->ttl_ms, .once = p->once, .external = p->external,
                  .approval = SHK_POLICY_APPROVED, .card = p->id };
    if (q.scope_text)
      q.jscope = jscope = json_loads(q.scope_text, 0, NULL);
    ans = approve ? shk__manager_grant_locked(m, &q) : json_pack("{s:b, s:s}", "ok", 1, "decision", "denied");
    if (ans) {
      json_object_set_new(ans, "pending", json_string(p->id));
      json_object_set(ans, "resolved_by", who);
    }
    json_decref(jscope);
    free(q.scope_text);
    pending_free(p);
  }
  pthread_mutex_unlock(&m->mu);
  json_decref(who);
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

static json_t *op_revoke(shk_manager *m, json_t *req, const shk__peer *by)
{
  const char *id = str_or(req, "handle", NULL);
  if (!id)
    return refuse("revoke: handle is required");
  /* "stop": also end the sandbox's processes that still hold open what an
   * fs.scope handle mounted (a revoke alone takes the path, not a file
   * already open). */
  json_t *jstop = json_object_get(req, "stop");
  if (jstop && !json_is_boolean(jstop))
    return refuse("revoke: stop must be true or false");
  bool stop = json_is_true(jstop);
  /* A second revoke would change nothing; saying so keeps a client from
   * believing it just cut off something still live. (Two revokes at once
   * may both pass here: both then flip a bit already flipped.) */
  shk_cap_lifecycle known;
  if (!shk_cap_lifecycle_of(m->table, id, &known) && shk_cap_is_revoked(m->table, id))
    return refuse("revoke: handle %s was already revoked", id);
  /* 1. Flip the bit first, holding no lock of the manager: the next use
   * fails from this moment on, whatever any session's proxy is doing. */
  if (shk_cap_revoke(m->table, id))
    return refuse("revoke: no such handle");
  /* 2. What is open: tunnels of this handle and of every handle derived
   * from it (they are all dead now, so take the dead ones). A revoked
   * handle admits no new tunnel, so its tunnels need closing once; later
   * revokes skip it. A once handle that was merely used keeps the tunnel
   * that was its one use. Out of memory for the list: every egress tunnel
   * of the session is closed instead (tag 0), which closes at least the
   * ones that must go. The session is held by a reference meanwhile. */
  pthread_mutex_lock(&m->mu);
  size_t idx, n_tags = 0;
  int closed = 0, detached = 0, stopped = 0; /* tunnels closed, mounts detached, holders stopped */
  session *s = session_of_handle(m, id, &idx);
  uint64_t *tags = calloc(s ? 2 * s->n_grants + 1 : 1, sizeof *tags);
  shk_cap_class cls = s ? s->grants[idx].cls : SHK_CAP_NET_EGRESS;
  for (size_t i = 0; s && i < s->n_grants; i++) {
    grant *g = &s->grants[i];
    if (!g->torn_down && shk_cap_is_revoked(m->table, g->id)) {
      g->torn_down = true;
      /* Its mounts (fs.scope) are detached now: the next open fails. */
      if (mounts_of(g->cls)) {
        unsigned n;
        detached += (int)shk__unlock_revoke(s->fs, g->id, stop, &n);
        stopped += (int)n;
      }
      if (g->eg) {
        atomic_store(&g->eg->dead, true);
        if (tags)
          tags[n_tags++] = g->eg->tag;
      }
      /* A revoked credential closes the session's inspected connections:
       * none goes on with a secret injected into its earlier requests. */
      for (size_t k = 0; tags && g->cls == SHK_CAP_CREDENTIALS && k < s->n_grants; k++) {
        const egrant *o = s->grants[k].eg;
        if (o && o->scope.cls == SHK_CAP_NET_EGRESS && o->scope.tls_inspect && n_tags < 2 * s->n_grants + 1)
          tags[n_tags++] = o->tag;
      }
    }
  }
  shk_egress_session *eg = s ? s->egress : NULL;
  if (s)
    s->refs++;
  pthread_mutex_unlock(&m->mu);
  /* 3. Close them, with no manager lock held. This hands the work to the
   * session's proxy loop and returns at once (the count is of the tunnels
   * open at the call); the hook refuses the tag from step 1 on, so nothing
   * it admitted is left open. */
  for (size_t i = 0; eg && (i < n_tags || (!tags && i == 0)); i++) {
    int c = shk_egress_session_close_tunnels(eg, tags ? tags[i] : 0);
    if (c > 0)
      closed += c;
  }
  free(tags);
  /* 4. The event. A revoke is never refused: if the timeline's queue is
   * full, the audit module counts the event it could not take. */
  shk_audit_event e;
  ev_init(&e, "revoke", s, by);
  shk_audit_str(&e, SHK_AUDIT_CLASS, shk_cap_class_name(cls));
  shk_audit_str(&e, SHK_AUDIT_HANDLE, id);
  shk_audit_str(&e, SHK_AUDIT_OUTCOME, "revoked");
  shk_audit_int(&e, SHK_AUDIT_COUNT, mounts_of(cls) ? detached : closed); /* what the revoke took */
  ev_emit(m, &e, NULL);
  session_put(m, s);
  return json_pack("{s:b, s:s, s:i, s:i, s:i}", "ok", 1, "handle", id, "tunnels_closed", closed,
                   "mounts_detached", detached, "processes_stopped", stopped);
}

static json_t *op_attenuate(shk_manager *m, json_t *req, const shk__peer *by)
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
  /* Valid until the handle leaves the table, which happens only under mu. */
  const shk_cap_scope *parent = shk_cap_scope_of(m->table, id);
  if (!s || !parent) {
    pthread_mutex_unlock(&m->mu);
    return refuse("attenuate: no such handle");
  }
  char *text = json_dumps(jscope, JSON_COMPACT);
  shk_cap_scope scope;
  shk_error serr, aerr;
  int r = text ? shk_cap_scope_parse(parent->cls, text, &scope, &serr) : -ENOMEM;
  free(text);
  if (r) {
    pthread_mutex_unlock(&m->mu);
    return refuse("attenuate: scope: %s", r == -ENOMEM ? "out of memory" : serr.message);
  }
  grant_req q = { .s = s, .by = by, .scope = &scope, .scope_text = shk_cap_scope_to_json(&scope), .ttl_ms = ttl };
  shk_cap_lifecycle plc = SHK_CAP_SESSION;
  shk_cap_lifecycle_of(m->table, id, &plc);
  q.once = plc == SHK_CAP_ONCE;
  grant g = { .cls = parent->cls };
  egrant *eg = NULL;
  r = shk_cap_attenuate(m->table, id, &scope, ttl ? now_ms() + ttl : 0, g.id, &aerr);
  char br_why[512];
  const char *br_bad = NULL;
  if (!r && prepare_grant(s, &g, &scope, q.once, &eg)) {
    unissue(m, g.id);
    r = shk__error_set(&aerr, -ENOMEM, "out of memory");
  } else if (!r && g.cls == SHK_CAP_CREDENTIALS &&
             (br_bad = shk__broker_prepare(s->broker_key, &scope, eg, br_why, sizeof br_why))) {
    unprepare(eg);
    eg = NULL;
    unissue(m, g.id);
    r = shk__error_set(&aerr, -EINVAL, "%s", br_bad);
  }
  shk_audit_event e;
  ev_request(&e, "attenuate", &q);
  shk_audit_str(&e, SHK_AUDIT_HANDLE_PARENT, id);
  shk_audit_str(&e, SHK_AUDIT_HANDLE, r ? NULL : g.id);
  shk_audit_str(&e, SHK_AUDIT_OUTCOME, r ? "refused" : "attenuated");
  shk_audit_str(&e, SHK_AUDIT_REASON, r ? aerr.message : NULL);
  int er = ev_emit(m, &e, r ? NULL : &serr);
  if (r) {
    ans = refuse("attenuate: %s", aerr.message);
  } else if (er) {
    unprepare(eg);
    unissue(m, g.id);
    ans = refuse("attenuate: refused: %s; nothing was derived", serr.message);
  } else {
    /* A child never outlives its parent (shk_cap_attenuate's rule). */
    int64_t pexp = s->grants[idx].expires_ms;
    g.expires_ms = ttl ? now_ms() + ttl : 0;
    if (pexp && (!g.expires_ms || g.expires_ms > pexp))
      g.expires_ms = pexp;
    publish_grant(m, s, &g, eg);
    ans = json_pack("{s:b, s:s, s:s, s:s}", "ok", 1, "handle", g.id, "parent", id, "session", s->id);
  }
  pthread_mutex_unlock(&m->mu);
  free(q.scope_text);
  shk_cap_scope_clear(&scope);
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
  const char *sid = str_or(req, "session", NULL);
  shk_cap_foreach(m->table, sid, list_one, &c);
  /* A session that has ended may still have handles listed; one the
   * manager neither hosts nor has handles of was never there, and an empty
   * list would say it had none. */
  if (sid && c.arr && !json_array_size(c.arr)) {
    pthread_mutex_lock(&m->mu);
    bool open = find_session(m, sid) != NULL;
    pthread_mutex_unlock(&m->mu);
    if (!open) {
      json_decref(c.arr);
      return refuse("grants: no session '%s' (see 'shinken sessions')", sid);
    }
  }
  return c.arr ? json_pack("{s:b, s:o}", "ok", 1, "grants", c.arr) : refuse("grants: out of memory");
}

/* The refusals of an open session's proxy, by kind: what the process that
 * started it says at its end. Read-only, like the grants listing. */
static json_t *op_refusals(shk_manager *m, json_t *req)
{
  const char *sid = str_or(req, "session", NULL);
  pthread_mutex_lock(&m->mu);
  session *s = find_session(m, sid);
  json_t *list = s ? shk__tally_json(s->refusals) : NULL;
  pthread_mutex_unlock(&m->mu);
  if (!s)
    return refuse("refusals: no open session '%s'", sid ? sid : "");
  return list ? json_pack("{s:b, s:o}", "ok", 1, "refusals", list) : refuse("refusals: out of memory");
}

/* What a session has been exposed to, as its runtime reports it; exposure
 * only ever grows. It feeds tier promotion: a data-leaving grant of a
 * session that ingested external content and touched sensitive data needs
 * a human. Never refused for the timeline: it only restricts. */
static json_t *op_taint(shk_manager *m, json_t *req, const shk__peer *by)
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
    shk_audit_event e;
    ev_init(&e, "taint", s, by);
    shk_audit_str(&e, SHK_AUDIT_OUTCOME, "tainted");
    shk_audit_str(&e, SHK_AUDIT_REASON,
                  s->taint.ingested_external && s->taint.touched_sensitive ? "external and sensitive"
                  : s->taint.ingested_external ? "external" : s->taint.touched_sensitive ? "sensitive" : "none");
    ev_emit(m, &e, NULL);
    ans = json_pack("{s:b, s:b, s:b}", "ok", 1, "ingested_external", s->taint.ingested_external,
                    "touched_sensitive", s->taint.touched_sensitive);
  }
  pthread_mutex_unlock(&m->mu);
  return ans;
}

/* May the operator's own run turn off these layers: the one decision, with
 * this manager's policy, recorded. An answer the timeline cannot take is a
 * refusal: nothing may be turned off. */
static json_t *op_decide_layers(shk_manager *m, json_t *req, const shk__peer *by)
{
  static const char *const keys[] = { "op", "layers", "on_command_line", NULL };
  const char *bad;
  if (!known_keys(req, keys, &bad))
    return refuse("decide_layers: unknown field '%s'", bad);
  json_t *asked = json_object_get(req, "on_command_line");
  const char **layers;
  size_t n;
  if (strlist(req, "layers", &layers, &n) || !n || (asked && !json_is_boolean(asked))) {
    free(layers);
    return refuse("decide_layers: layers (an array of layer names) is required, and on_command_line is true or "
                  "false");
  }
  shk_policy_session ps;
  shk_policy_request pr;
  shk__layers_request(layers, n, json_is_true(asked), now_ms(), &ps, &pr);
  shk_policy_answer pa;
  shk_error derr, aerr;
  json_t *ans;
  if (shk_policy_decide(m->policy, &ps, &pr, &pa, &derr)) {
    ans = refuse("decide_layers: %s", derr.message);
  } else {
    json_t *jl = json_object_get(req, "layers");
    char *text = json_dumps(jl, JSON_COMPACT);
    shk_audit_event e;
    ev_init(&e, "decision", NULL, by);
    shk_audit_str(&e, SHK_AUDIT_CLASS, "layer");
    shk_audit_str(&e, SHK_AUDIT_SCOPE, text);
    ev_answer(&e, &pa);
    shk_audit_str(&e, SHK_AUDIT_REASON, pa.why);
    free(text);
    if (ev_emit(m, &e, &aerr))
      ans = refuse("decide_layers: refused: %s", aerr.message);
    else
      ans = json_pack("{s:b, s:s, s:s, s:s}", "ok", 1, "decision", shk_policy_verdict_name(pa.verdict), "policy",
                      pa.policy, "reason", pa.why);
  }
  free(layers);
  return ans;
}

/* A launcher's word that stage 2 has reported the sandbox complete: what it
 * enforced and what it could not ("enforced", "degraded": lists of layer
 * names), recorded as "sandbox-start" while the sandbox runs, and the
 * process it runs as ("pid", with Landlock's "ceiling" of live grants): what
 * fs.scope grants mount into. An answer of ok false (the timeline cannot
 * take the event) tells the launcher to kill the sandbox: a sandbox that
 * goes on running has its start recorded. A sandbox that live unlocks
 * cannot reach still runs (the answer's "unlocks" says why not): its
 * fs.scope grants are then refused with a reason, so nothing is granted
 * that has no effect. Only the sandbox of the asker's own user is taken
 * (shk__unlock_started). */
static json_t *op_sandbox_started(shk_manager *m, json_t *req, const shk__peer *by)
{
  static const char *const keys[] = { "op", "session", "enforced", "degraded", "pid", "ceiling", "limits", NULL };
  const char *bad;
  if (!known_keys(req, keys, &bad))
    return refuse("sandbox_started: unknown field '%s'", bad);
  json_t *jpid = json_object_get(req, "pid");
  if (jpid && (!json_is_integer(jpid) || json_integer_value(jpid) <= 0 || json_integer_value(jpid) > INT_MAX))
    return refuse("sandbox_started: pid must be a positive integer");
  const char **enforced = NULL, **degraded = NULL, **ceiling = NULL;
  size_t ne, nd, n_ceiling = 0;
  json_t *ans = NULL;
  if (strlist(req, "enforced", &enforced, &ne) || strlist(req, "degraded", &degraded, &nd))
    ans = refuse("sandbox_started: enforced and degraded are arrays of strings");
  else if (strlist(req, "ceiling", &ceiling, &n_ceiling))
    ans = refuse("sandbox_started: ceiling must be an array of paths");
  json_t *limits = json_object_get(req, "limits");
  if (!ans && limits && !shk__sandbox_limits_valid(limits))
    ans = refuse("sandbox_started: limits must be {\"memory\", \"pids\", \"cpu_milli\": whole numbers, "
                 "\"net\": \"none\", \"proxy\" or \"host\", \"cgroup\": a boolean}");
  pthread_mutex_lock(&m->mu);
  session *s = ans ? NULL : find_session(m, str_or(req, "session", NULL));
  if (!ans && !s)
    ans = refuse("sandbox_started: no such session");
  if (s)
    s->refs++;
  pthread_mutex_unlock(&m->mu);
  if (!ans) {
    shk_audit_event e;
    shk_error err;
    ev_init(&e, "sandbox-start", s, by);
    shk_audit_strv(&e, SHK_AUDIT_ENFORCED, enforced);
    shk_audit_strv(&e, SHK_AUDIT_DEGRADED, degraded);
    /* The test point stands for a timeline that cannot take the event
     * (its queue full, its disk gone). */
    if ((fault("sandbox-start-record")
           ? shk__error_set(&err, -EBUSY, "the audit log cannot record it (its queue is full)")
           : ev_emit(m, &e, &err)) < 0)
      ans = refuse("sandbox_started: %s", err.message);
  }
  if (!ans) {
    const char *no = NULL;
    char why[512];
    pthread_mutex_lock(&m->mu);
    s->sandbox_started = true;
    shk__sandbox_report_set(&s->sandbox_report, enforced, ne, degraded, nd, limits, ceiling, n_ceiling);
    if (jpid) {
      /* Where the sandbox's Landlock lets it write: its writable roots, as
       * the session was opened with, and the ceiling it was started with. */
      const char **writable = calloc(s->n_roots + n_ceiling + 1, sizeof *writable);
      for (size_t i = 0; writable && i < s->n_roots; i++)
        writable[i] = s->roots[i];
      for (size_t i = 0; writable && i < n_ceiling; i++)
        writable[s->n_roots + i] = ceiling[i];
      no = !writable ? "out of memory"
                     : shk__unlock_started(&s->fs, (pid_t)json_integer_value(jpid), by->uid, writable,
                                           s->n_roots + n_ceiling, why, sizeof why);
      free(writable);
    }
    apply_deferred(m, s, no ? no : !jpid ? "the launcher did not say which process the sandbox runs as" : NULL);
    pthread_mutex_unlock(&m->mu);
    /* Take over of a session whose sandbox this manager did not launch
     * freezes the session cgroup of the reported process. Only once that
     * process was checked to be a sandbox of the asker's own user (the
     * target above): a peer cannot have another user's processes frozen. */
    if (jpid && !no)
      (void)shk__ask_hosted_freezer(m, s->id, (pid_t)json_integer_value(jpid));
    ans = no ? json_pack("{s:b, s:s}", "ok", 1, "unlocks", no) : json_pack("{s:b}", "ok", 1);
  }
  session_put(m, s);
  free(enforced);
  free(degraded);
  free(ceiling);
  return ans;
}

json_t *shk__manager_call(shk_manager *m, json_t *req, shk__conn *conn)
{
  shk__peer by = peer_of(m, conn);
  return shk__manager_call_as(m, req, conn, &by);
}

json_t *shk__manager_call_as(shk_manager *m, json_t *req, shk__conn *conn, const shk__peer *peer)
{
  const char *op = json_is_object(req) ? str_or(req, "op", NULL) : NULL;
  shk__peer by = *peer;
  if (!op)
    return refuse("request must be a JSON object with \"op\"");
  if (!strcmp(op, "open_session"))
    return op_open_session(m, req, conn, &by);
  if (!strcmp(op, "close_session"))
    return shk__manager_close_session(m, str_or(req, "session", NULL), &by, "closed by request");
  if (!strcmp(op, "sessions"))
    return op_sessions(m);
  if (!strcmp(op, "grant"))
    return op_grant(m, req, &by);
  if (!strcmp(op, "resolve"))
    return json_object_get(req, "card") ? shk__ask_op_resolve_card(m, req, &by) : op_resolve(m, req, &by);
  if (!strcmp(op, "cards"))
    return shk__ask_op_cards(m, req);
  if (!strcmp(op, "takeover") || !strcmp(op, "resume"))
    return shk__ask_op_session(m, req, &by, !strcmp(op, "takeover"));
  if (!strcmp(op, "sandbox_ran"))
    return op_sandbox_ran(m, req, &by);
  if (!strcmp(op, "sandbox_started"))
    return op_sandbox_started(m, req, &by);
  if (!strcmp(op, "subscribe")) {
    /* The stream follows on the same connection, so there must be one. */
    shk_error err;
    if (!conn)
      return refuse("subscribe: only on the control socket");
    if (shk__conn_subscribe(conn, &err))
      return refuse("subscribe: %s", err.message);
    return json_pack("{s:b, s:b}", "ok", 1, "subscribed", 1);
  }
  if (!strcmp(op, "grants"))
    return op_grants(m, req);
  if (!strcmp(op, "refusals"))
    return op_refusals(m, req);
  if (!strcmp(op, "revoke"))
    return op_revoke(m, req, &by);
  if (!strcmp(op, "attenuate"))
    return op_attenuate(m, req, &by);
  if (!strcmp(op, "taint"))
    return op_taint(m, req, &by);
  if (!strcmp(op, "decide_layers"))
    return op_decide_layers(m, req, &by);
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

unsigned shk__manager_panel_max_conns(const shk_manager *m)
{
  return m->panel_max_conns;
}

void shk__manager_set_panel(shk_manager *m, shk__panel *p)
{
  m->panel = p;
}
