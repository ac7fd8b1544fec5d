/* SPDX-License-Identifier: Apache-2.0 */
/* The manager's own state, shared by the files of the manager module
 * (manager.c: sessions, grants, the control operations; ask.c: the Ask
 * loop). No other module includes it. The locking rules are in manager.c's
 * opening comment. */
#pragma once

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/common.h"
#include "manager/manager-internal.h"
#include "manager/opener.h"
#include "manager/tally.h"
#include "shinken/approve.h"
#include "shinken/audit.h"
#include "shinken/cap.h"
#include "shinken/egress.h"
#include "shinken/policy.h"

/* What the data plane reads: one net.egress handle of a session. Every
 * field but `dead` is written before the entry is published and never
 * after; the entry is freed only when the session is, after its proxy
 * thread has been joined. */
typedef struct egrant {
  struct egrant *next;   /* the one published before it */
  atomic_bool dead;      /* revoked, expired or used up: skip it unread */
  bool once;
  uint64_t tag;          /* binds egress tunnels to this handle */
  char id[SHK_CAP_ID_HEX];
  char rule[32];         /* "handle:" and the first hex digits, for the proxy's lines */
  shk_cap_scope scope;
  /* A credentials grant's broker entry (cls credentials, NULL for
   * net.egress): the secrets it names, loaded from the store when it was
   * granted, in locked memory, and their sentinels under the session's key. */
  struct shk_broker_store *store;
  struct shk_broker_use *uses;
  size_t n_uses;
  char *sentinels;       /* the uses' sentinels, one block */
} egrant;

/* The control plane's record of one handle of a session. */
typedef struct grant {
  char id[SHK_CAP_ID_HEX];
  shk_cap_class cls;
  int64_t expires_ms;     /* 0: none of its own */
  egrant *eg;             /* its data-plane entry (net.egress), or NULL */
  bool torn_down;         /* revoked, and its tunnels closed: nothing left to do */
  bool ended;             /* its end by time or by its one use is recorded */
  bool deferred;          /* a mount class's, made before the sandbox started: mounted at its start */
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
  shk_manager *m;
  /* Set before the session's proxy starts, and never changed after: the
   * data plane reads them. */
  char id[64];
  char model[64];
  _Atomic(egrant *) egress_grants; /* newest first; written under mu */
  /* The key of this session's sentinels (shk_broker_sentinel): random,
   * never leaves the manager. */
  uint8_t broker_key[32];
  /* The control plane's, under mu. */
  char trust_tier[16];
  int64_t expires_ms;
  shk_policy_taint taint;
  shk_egress_session *egress;
  grant *grants;
  size_t n_grants, cap_grants;
  pending *pending;
  size_t n_pending;
  char **roots;            /* the sandbox's writable roots, resolved */
  size_t n_roots;
  int refs;                /* the registry's, and each operation's outside mu */
  /* The connections the Ask loop holds (struct held), under held_mu, which
   * is never held while calling out. The session is not freed while any
   * is held: their release resumes them on its proxy. */
  pthread_mutex_t held_mu;
  pthread_cond_t held_cv;
  struct held *held;
  size_t n_held;
  /* Set at open, before the proxy starts: the opener (a harness with no
   * human to ask) turned the Ask loop off, so what no handle covers is
   * refused at once. */
  bool no_ask;
  /* Set at open: the opener (a launcher) will report a sandbox, so mount
   * grants made before it starts are kept for its start. */
  bool expects_sandbox;
  bool sandbox_started;    /* under mu: a sandbox-start was recorded (sandbox_started) */
  /* Under mu: what stage 2 reported at the start, {"enforced": [...],
   * "degraded": [...]}, for the sessions listing; NULL before the start. */
  json_t *sandbox_report;
  shk__opener opener;      /* set at open, for the listing */
  shk__tally *refusals;    /* its proxy's refusals by kind; its own lock */
  shk__fs_state *fs;       /* its running sandbox and fs.scope mounts (unlock.c), under mu */
  struct shk__sudo *sudo;  /* its privileged commands (sudo.c): the listener, the overlays */
  struct session *next;
  struct session *reap_next; /* ended by the Ask loop's breaker: let go at the next tick */
} session;

/* The Ask loop's issuer (ask.c): the connections an Auto or Notify tier
 * admits with no human are held until its thread has issued their handle,
 * so that the proxy thread never takes the registry lock. */
typedef struct shk__ask_issuer {
  pthread_mutex_t mu;       /* guards the queue and stop; never held while calling out */
  pthread_cond_t cv;
  struct held *head, *tail;
  bool ready, started, stop;
  pthread_t thread;
  /* The embedders' freezers, by session (shk_manager_set_freezer). fz_mu
   * is taken inside the approve module's lock (its freeze and thaw) and
   * nothing is called with it held but the freezer itself. */
  pthread_mutex_t fz_mu;
  struct shk__ask_freezer *freezers;
} shk__ask_issuer;

/* How the connections of a net.egress handle with SCOPE are carried: the
 * SHK_EGRESS_INSPECT and SHK_EGRESS_LIMITED flags (manager.c). */
unsigned shk__egress_flags(const shk_cap_scope *scope);

struct shk_manager {
  pthread_mutex_t mu;       /* the registry; the data plane never takes it */
  shk_policy *policy;
  shk_cap_scope *standing;  /* admin's standing grants, each session gets them */
  size_t n_standing;
  char **exec_path;         /* the human's $PATH directories, literal and resolved */
  size_t n_exec_path;
  uid_t uid;                /* the manager's user: owns the policy, may use the socket */
  shk_cap_table *table;
  session *sessions;
  uint64_t next_tag;
  shk_audit *audit;         /* the timeline's writer, or NULL */
  unsigned max_pending;
  unsigned panel_max_conns;
  int64_t pending_timeout_ms;
  shk__control_limits limits;
  char *socket;             /* the control socket, resolved, or NULL */
  char *ca_dir;             /* the TLS inspection CA's directory, or NULL: no inspection */
  char *persist_root;       /* the store of persisted data, or NULL: none can be named */
  char *device_root;        /* where gpu and peripheral nodes are found; NULL: /dev */
  char self_exe[PATH_MAX];  /* this process's program, for embedded calls */
  shk__control *control;
  shk__panel *panel;        /* the Permission Panel's server, or NULL */
  shk_approve *approve;     /* the Ask loop's cards; never called into while mu is held */
  shk__ask_issuer issuer;   /* the Ask loop's Auto and Notify issuance */
  session *reap;            /* sessions the breaker ended, whose reference the tick lets go */
  unsigned subscribers;     /* control connections that receive the card stream */
  /* An embedder's copy of every proxy verdict (shk_manager_opts). */
  int (*on_verdict)(void *data, const shk_egress_verdict_info *v);
  void *verdict_data;
};

/* A grant request as the events show it. */
typedef struct grant_req {
  session *s;
  const shk__peer *by;        /* who asked; NULL for a standing grant */
  const shk_cap_scope *scope;
  json_t *jscope;             /* as the request gave it, for answers; may be NULL */
  char *scope_text;           /* canonical, for the timeline (may be NULL) */
  int64_t ttl_ms;             /* 0: none of its own */
  bool once, external, standing;
  shk_policy_approval approval;
  const char *card;           /* the pending request a human answered, or NULL */
} grant_req;

/* ---- small helpers of both files ---- */

/* The wall clock, in milliseconds. */
static inline int64_t now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* An answer that refuses, with the sentence that says why. */
static inline json_t *refuse(const char *fmt, ...) SHK_PRINTF(1, 2);
static inline json_t *refuse(const char *fmt, ...)
{
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return json_pack("{s:b, s:s}", "ok", 0, "error", buf);
}

/* Hands the event to the writer without waiting. 0, or a negative errno
 * with err saying why the timeline did not take it (then the caller refuses
 * the action the event records, unless it cannot be undone). Safe from any
 * thread: shk_audit_emit never blocks. */
static inline int ev_emit(shk_manager *m, const shk_audit_event *e, shk_error *err)
{
  if (!m->audit)
    return 0;
  shk_error aerr;
  int r = shk_audit_emit(m->audit, e, &aerr);
  if (r)
    shk__error_set(err, r, "the audit log cannot record it (%s)", r == -EBUSY ? "its queue is full" : aerr.message);
  return r;
}

/* Caller holds mu. The open session `id`, or NULL. */
static inline session *find_session(shk_manager *m, const char *id)
{
  for (session *s = m->sessions; s; s = s->next)
    if (id && !strcmp(s->id, id))
      return s;
  return NULL;
}

/* The string field `key` of a request, or dflt. */
static inline const char *str_or(json_t *req, const char *key, const char *dflt)
{
  const char *v = json_string_value(json_object_get(req, key));
  return v ? v : dflt;
}

/* False (and *bad naming it) when the request has a field not in keys. */
static inline bool known_keys(json_t *req, const char *const *keys, const char **bad)
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

/* ---- the grant path (manager.c), for the Ask loop ---- */

/* Caller holds mu. The grant protocol for one request, with the approval
 * state the manager holds for it. */
json_t *shk__manager_grant_locked(shk_manager *m, const grant_req *q);
/* The session as the one decision sees it. */
shk_policy_session shk__manager_policy_session(const shk_manager *m, const session *s);
/* The "decision" event of a grant request. 0, or a negative errno (err). */
int shk__manager_ev_decision(shk_manager *m, const grant_req *q, const shk_policy_answer *pa, shk_error *err);

/* ---- privileged commands: the sudo shim's requests (sudo.c) ---- */

/* NULL when this manager can run privileged commands in its sessions'
 * sandboxes; else why not (static). */
const char *shk__sudo_missing(void);
/* Listens on the session's sudo.sock (in its egress directory) for the
 * shim's requests. 0, or -errno with err. */
int shk__sudo_open(session *s, shk_error *err);
/* Stops listening and ends the session's running privileged commands;
 * called as the session is destroyed, before its held attempts are
 * waited for (each request counts as one). */
void shk__sudo_stop(session *s);
/* Detaches the system directories' overlays and discards what they kept;
 * before the session's sandbox target goes. */
void shk__sudo_free(session *s);
