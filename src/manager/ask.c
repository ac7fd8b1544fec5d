/* SPDX-License-Identifier: Apache-2.0 */
/* The manager's Ask loop: a connection no live handle covers is held for a
 * human through the approve module's cards, and a card's resolution issues
 * the handle through the manager's one grant path (manager.c) or refuses
 * the connection. The locking rules are in manager.c's opening comment. */
#include "manager/ask.h"

#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shinken/sandbox.h"

/* ---- the Ask loop: connections held for a human ----
 *
 * A connection no live handle covers is put to the one decision as the
 * narrowest grant that would cover it (net.egress, that host and that
 * port). When the answer is "ask", a card is raised in the approve module
 * and the connection is held by the proxy; the card's resolution comes
 * back through ask_release, which issues the handle through the normal
 * grant path (approved) and lets the same client connection go on, or
 * refuses it with a paragraph written for the agent. Each held attempt
 * counts in its session's n_held, and a session is not freed until every
 * one of them has been released or withdrawn. */

typedef struct held {
  session *s;
  uint64_t conn_id;
  char host[256];        /* what the client asked for (canonical) */
  uint16_t port;
  shk_cap_scope scope;   /* the exact scope: that host and that port */
  char *scope_text;      /* canonical */
  bool by_tier;          /* Auto or Notify: the issuer's, never on a card */
  struct held *next;
  struct held *qnext;    /* by_tier: on the issuer's queue */
} held;

static void held_free(held *h)
{
  if (!h)
    return;
  shk_cap_scope_clear(&h->scope);
  free(h->scope_text);
  free(h);
}

/* Takes h off its session's list (if it is there) and lets the session go
 * on to its end once nothing is held. */
static void held_done(held *h)
{
  session *s = h->s;
  pthread_mutex_lock(&s->held_mu);
  for (held **pp = &s->held; *pp; pp = &(*pp)->next)
    if (*pp == h) {
      *pp = h->next;
      break;
    }
  if (--s->n_held == 0)
    pthread_cond_broadcast(&s->held_cv);
  pthread_mutex_unlock(&s->held_mu);
  held_free(h);
}

/* Who resolved a card, as the grant's events record it. */
static shk__peer peer_of_who(const shk_approve_who *w)
{
  return (shk__peer){ w && w->surface ? w->surface : "manager", w && w->uid >= 0 ? (uid_t)w->uid : (uid_t)-1,
                      w ? (pid_t)w->pid : 0, w ? w->exe : NULL };
}

static egrant *covering(shk_manager *m, session *s, const held *h, int64_t now);

/* The net.egress scope of a card's pattern ("*.PARENT:PORT"), canonical
 * text in *text. 0, or -EINVAL when the pattern is not one. */
static int pattern_scope(const char *pattern, shk_cap_scope *scope, char **text)
{
  char host[300];
  uint16_t port;
  if (shk_approve_pattern_split(pattern, host, sizeof host, &port))
    return -EINVAL;
  json_t *js = json_pack("{s:[s], s:[i]}", "domains", host, "ports", (int)port);
  char *t = js ? json_dumps(js, JSON_COMPACT) : NULL;
  json_decref(js);
  int r = t ? shk_cap_scope_parse(SHK_CAP_NET_EGRESS, t, scope, NULL) : -ENOMEM;
  free(t);
  if (r)
    return -EINVAL;
  if (!(*text = shk_cap_scope_to_json(scope))) {
    shk_cap_scope_clear(scope);
    return -ENOMEM;
  }
  return 0;
}

/* The release of a held connection, exactly once, on whichever thread
 * delivers it (never with the approve module's lock, never with mu). */
static void ask_release(void *attempt, const shk_approve_outcome *o)
{
  held *h = attempt;
  session *s = h->s;
  shk_manager *m = s->m;
  char text[1024];
  if (shk_approve_result_approved(o->result)) {
    bool once = o->result == SHK_APPROVE_APPROVED_ONCE;
    shk__peer by = peer_of_who(o->by);
    grant_req q = { .s = s, .by = &by, .scope = &h->scope, .scope_text = h->scope_text, .once = once,
                    .approval = SHK_POLICY_APPROVED, .card = o->card };
    /* A pattern's approval grants the pattern itself, through the same
     * grant path (the decision is put again, so the pattern is never wider
     * than the policy allows whatever the card said). */
    shk_cap_scope pscope;
    char *ptext = NULL;
    bool by_pattern = o->result == SHK_APPROVE_APPROVED_PATTERN && o->pattern;
    if (by_pattern && pattern_scope(o->pattern, &pscope, &ptext)) {
      snprintf(text, sizeof text, "Shinken refused the connection: the approved pattern %s is not a net.egress "
               "pattern.", o->pattern);
      shk_egress_session_resume(s->egress, h->conn_id, SHK_EGRESS_DENY, 0, NULL, text);
      held_done(h);
      return;
    }
    if (by_pattern) {
      q.scope = &pscope;
      q.scope_text = ptext;
    }
    uint64_t tag = 0;
    unsigned flags = 0;
    char rule[sizeof ((egrant *)0)->rule] = "";
    const char *why = NULL;
    json_t *ans = NULL;
    pthread_mutex_lock(&m->mu);
    bool live = false;
    for (session *t = m->sessions; t && !live; t = t->next)
      live = t == s;
    egrant *have = live && !once ? covering(m, s, h, now_ms()) : NULL;
    if (!live) {
      why = "the session ended before the grant was issued";
    } else if (have) {
      /* Several attempts of one card arrive with the same pattern, or the
       * same exact scope: the first one's grant covers the rest, so the
       * card is granted once, as one handle. */
      tag = have->tag;
      flags = shk__egress_flags(&have->scope);
      snprintf(rule, sizeof rule, "%s", have->rule);
    } else {
      ans = shk__manager_grant_locked(m, &q);
      const char *handle = json_string_value(json_object_get(ans, "handle"));
      why = json_string_value(json_object_get(ans, "error"));
      for (egrant *g = atomic_load(&s->egress_grants); handle && g; g = g->next)
        if (!strcmp(g->id, handle)) {
          tag = g->tag;
          flags = shk__egress_flags(&g->scope);
          snprintf(rule, sizeof rule, "%s", g->rule);
          /* A handle for this one attempt is used by it now: the resumed
           * connection does not go through the hook again, and nothing
           * after it may use the handle. */
          if (once) {
            atomic_store(&g->dead, true);
            shk_cap_use(m->table, g->id, now_ms());
          }
          break;
        }
    }
    pthread_mutex_unlock(&m->mu);
    if (by_pattern) {
      shk_cap_scope_clear(&pscope);
      free(ptext);
    }
    if (tag) {
      json_decref(ans);
      shk_egress_session_resume_flags(s->egress, h->conn_id, SHK_EGRESS_ALLOW, tag, flags, rule, NULL);
      held_done(h);
      return;
    }
    snprintf(text, sizeof text,
             "Shinken refused the connection: a human approved it, but the grant could not be issued (%s).",
             why ? why : "refused");
    json_decref(ans);
  } else {
    shk_approve_outcome_text(o, text, sizeof text);
  }
  shk_egress_session_resume(s->egress, h->conn_id, SHK_EGRESS_DENY, 0, NULL, text);
  held_done(h);
}

/* ---- Auto and Notify: a handle with no human ----
 *
 * The proxy thread holds the connection and queues it here; the issuer's
 * thread takes the registry lock, issues a session handle through the one
 * grant path (decided again, recorded with no human: the grant event's
 * tier says Auto or Notify), and resumes the connection under it. So the
 * data plane never waits for the registry lock, and a revoke never waits
 * for a proxy. A Notify grant is then told to every human surface
 * (shk_approve_notify), with the handle a revoke names. */

/* False when the issuer is stopping: the caller refuses h itself. */
static bool issuer_push(shk_manager *m, held *h)
{
  shk__ask_issuer *is = &m->issuer;
  pthread_mutex_lock(&is->mu);
  bool ok = is->started && !is->stop;
  if (ok) {
    h->qnext = NULL;
    if (is->tail)
      is->tail->qnext = h;
    else
      is->head = h;
    is->tail = h;
    pthread_cond_signal(&is->cv);
  }
  pthread_mutex_unlock(&is->mu);
  return ok;
}

/* Caller holds mu. A live net.egress handle of s that covers h, or NULL. */
static egrant *covering(shk_manager *m, session *s, const held *h, int64_t now)
{
  for (egrant *g = atomic_load(&s->egress_grants); g; g = g->next)
    if (!atomic_load(&g->dead) && !g->once && shk_cap_scope_allows_host(&g->scope, h->host, h->port) &&
        !shk_cap_check(m->table, g->id, now))
      return g;
  return NULL;
}

/* Caller holds mu. A revoked net.egress handle of s that covered h, or
 * NULL. A human's revoke is the last word on what it covered for the rest
 * of the session: Auto and Notify do not issue it again behind their back
 * (a Notify notice would otherwise be a revoke that undoes itself). */
static const grant *revoked_covering(shk_manager *m, session *s, const held *h)
{
  for (size_t i = 0; i < s->n_grants; i++) {
    const grant *g = &s->grants[i];
    if (g->eg && shk_cap_is_revoked(m->table, g->id) && shk_cap_scope_allows_host(&g->eg->scope, h->host, h->port))
      return g;
  }
  return NULL;
}

/* Issues (or finds) the handle for one Auto or Notify connection and lets
 * it go on, or refuses it with the reason. */
static void issue_one(shk_manager *m, held *h)
{
  session *s = h->s;
  char handle[SHK_CAP_ID_HEX] = "", rule[sizeof ((egrant *)0)->rule] = "", why[600] = "";
  uint64_t tag = 0;
  bool notify = false;
  char policy[128] = "", decided[512] = "";
  pthread_mutex_lock(&m->mu);
  bool live = false;
  for (session *t = m->sessions; t && !live; t = t->next)
    live = t == s;
  egrant *g = live ? covering(m, s, h, now_ms()) : NULL;
  const grant *revoked = live && !g ? revoked_covering(m, s, h) : NULL;
  if (!live) {
    snprintf(why, sizeof why, "the session ended before the grant was issued");
  } else if (revoked) {
    snprintf(why, sizeof why, "a human revoked the grant that covered it (handle %.12s) in this session; "
             "retrying will not help, ask the user", revoked->id);
  } else if (!g) {
    /* Another connection to the same place may have been issued for
     * meanwhile (covering, above); otherwise this one is. */
    grant_req q = { .s = s, .scope = &h->scope, .scope_text = h->scope_text, .approval = SHK_POLICY_UNASKED };
    json_t *ans = shk__manager_grant_locked(m, &q);
    const char *id = json_string_value(json_object_get(ans, "handle"));
    const char *tier = json_string_value(json_object_get(ans, "tier"));
    for (egrant *e = atomic_load(&s->egress_grants); id && e && !g; e = e->next)
      if (!strcmp(e->id, id))
        g = e;
    notify = g && tier && !strcmp(tier, shk_policy_tier_name(SHK_POLICY_TIER_NOTIFY));
    snprintf(policy, sizeof policy, "%s", json_string_value(json_object_get(ans, "policy")) ?: "");
    snprintf(decided, sizeof decided, "issued with no human: tier %s", tier ? tier : "?");
    if (!g)
      snprintf(why, sizeof why, "%s",
               json_string_value(json_object_get(ans, "error")) ?: "the grant could not be issued");
    json_decref(ans);
  }
  unsigned flags = 0;
  if (g) {
    tag = g->tag;
    flags = shk__egress_flags(&g->scope);
    snprintf(handle, sizeof handle, "%s", g->id);
    snprintf(rule, sizeof rule, "%s", g->rule);
  }
  pthread_mutex_unlock(&m->mu);
  if (tag) {
    shk_egress_session_resume_flags(s->egress, h->conn_id, SHK_EGRESS_ALLOW, tag, flags, rule, NULL);
  } else {
    char text[800];
    snprintf(text, sizeof text, "Shinken refused the connection to %s:%u: %s.", h->host, (unsigned)h->port, why);
    shk_egress_session_resume(s->egress, h->conn_id, SHK_EGRESS_DENY, 0, NULL, text);
  }
  /* Told after the lock is let go: the approve module is never called into
   * while mu is held. The grant stands whether or not a surface hears. */
  if (notify) {
    shk_approve_notice n = { .session = s->id, .cls = shk_cap_class_name(SHK_CAP_NET_EGRESS),
                             .scope = h->scope_text, .handle = handle, .rule = policy[0] ? policy : NULL,
                             .why = decided };
    shk_approve_notify(m->approve, &n, NULL);
  }
  held_done(h);
}

static void *issuer_main(void *arg)
{
  shk_manager *m = arg;
  shk__ask_issuer *is = &m->issuer;
  pthread_mutex_lock(&is->mu);
  for (;;) {
    held *h = is->head;
    if (!h && is->stop)
      break;
    if (!h) {
      pthread_cond_wait(&is->cv, &is->mu);
      continue;
    }
    is->head = h->qnext;
    if (!is->head)
      is->tail = NULL;
    bool stopping = is->stop;
    pthread_mutex_unlock(&is->mu);
    if (stopping) {
      shk_egress_session_resume(h->s->egress, h->conn_id, SHK_EGRESS_DENY, 0, NULL,
                                "Shinken refused the connection: the manager stopped.");
      held_done(h);
    } else {
      issue_one(m, h);
    }
    pthread_mutex_lock(&is->mu);
  }
  pthread_mutex_unlock(&is->mu);
  return NULL;
}

/* ---- freezers: take over and breakers ---- */

/* An embedder's freezer (fn), or the manager's own for a session whose
 * sandbox another program launched (fn NULL): the session cgroup of the
 * process the sandbox reported, named by a pidfd. */
typedef struct shk__ask_freezer {
  struct shk__ask_freezer *next;
  shk_manager_freeze_fn fn;
  void *ud;
  int pidfd;
  pid_t pid;
  char session[64];
} shk__ask_freezer;

static void freezer_free(shk__ask_freezer *f)
{
  if (!f->fn && f->pidfd >= 0)
    close(f->pidfd);
  free(f);
}

int shk_manager_set_freezer(shk_manager *m, const char *sid, shk_manager_freeze_fn fn, void *ud)
{
  shk__ask_issuer *is = &m->issuer;
  shk__ask_freezer *add = NULL;
  if (fn && !(add = calloc(1, sizeof *add)))
    return -ENOMEM;
  pthread_mutex_lock(&is->fz_mu);
  for (shk__ask_freezer **pp = &is->freezers; *pp;)
    if (!strcmp((*pp)->session, sid)) {
      shk__ask_freezer *f = *pp;
      *pp = f->next;
      freezer_free(f);
    } else {
      pp = &(*pp)->next;
    }
  if (add) {
    add->fn = fn;
    add->ud = ud;
    snprintf(add->session, sizeof add->session, "%s", sid);
    add->next = is->freezers;
    is->freezers = add;
  }
  pthread_mutex_unlock(&is->fz_mu);
  return 0;
}

int shk__ask_hosted_freezer(shk_manager *m, const char *sid, pid_t pid)
{
  shk__ask_issuer *is = &m->issuer;
  shk__ask_freezer *add = calloc(1, sizeof *add);
  if (!add)
    return -ENOMEM;
  add->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (add->pidfd < 0) {
    int r = -errno;
    free(add);
    return r;
  }
  add->pid = pid;
  snprintf(add->session, sizeof add->session, "%s", sid);
  pthread_mutex_lock(&is->fz_mu);
  bool have = false;
  for (shk__ask_freezer *f = is->freezers; f && !have; f = f->next)
    have = !strcmp(f->session, sid);
  /* The embedder's own freezer, which knows its processes, comes first. */
  if (!have) {
    add->next = is->freezers;
    is->freezers = add;
  }
  pthread_mutex_unlock(&is->fz_mu);
  if (have)
    freezer_free(add);
  return 0;
}

/* The approve module's freeze and thaw, with its lock held: only fz_mu is
 * taken here (never mu, which is taken before the module's lock elsewhere),
 * and the embedder's freezer calls nothing back. -ENOSYS for a session
 * with no freezer (a daemon's session whose sandbox has no cgroup of its
 * own, or never reported its start), so take over is refused and a
 * breaker ends it. */
static int ask_freeze_as(shk_manager *m, const char *sid, bool stop)
{
  shk__ask_issuer *is = &m->issuer;
  int r = -ENOSYS;
  pthread_mutex_lock(&is->fz_mu);
  for (shk__ask_freezer *f = is->freezers; f; f = f->next)
    if (!strcmp(f->session, sid)) {
      r = f->fn ? f->fn(f->ud, stop) : shk_sandbox_freeze_process(f->pidfd, f->pid, stop, NULL);
      break;
    }
  pthread_mutex_unlock(&is->fz_mu);
  return r;
}

static int ask_freeze(void *ud, const char *sid)
{
  return ask_freeze_as(ud, sid, true);
}

static int ask_thaw(void *ud, const char *sid)
{
  return ask_freeze_as(ud, sid, false);
}

int shk__ask_start(shk_manager *m, const shk_manager_opts *o, shk_error *err)
{
  shk__ask_issuer *is = &m->issuer;
  pthread_mutex_init(&is->mu, NULL);
  pthread_mutex_init(&is->fz_mu, NULL);
  pthread_cond_init(&is->cv, NULL);
  is->ready = true;
  shk_approve_opts apo = { .timeout_ms = o->card_timeout_ms, .batch_window_ms = o->batch_window_ms,
                           .timer_thread = true, .on_event = shk__ask_event, .end = shk__ask_end,
                           .freeze = ask_freeze, .thaw = ask_thaw, .ud = m };
  int r = shk_approve_new(&apo, &m->approve, err);
  if (r)
    return r;
  if ((r = pthread_create(&is->thread, NULL, issuer_main, m)))
    return shk__error_set(err, -r, "a thread for the Ask loop: %s", strerror(r));
  is->started = true;
  return 0;
}

void shk__ask_stop(shk_manager *m)
{
  shk__ask_issuer *is = &m->issuer;
  if (!is->ready)
    return;
  pthread_mutex_lock(&is->mu);
  bool join = is->started && !is->stop;
  is->stop = true;
  pthread_cond_broadcast(&is->cv);
  pthread_mutex_unlock(&is->mu);
  if (join)
    pthread_join(is->thread, NULL);
}

void shk__ask_free(shk_manager *m)
{
  shk__ask_stop(m);
  shk_approve_free(m->approve);
  if (m->issuer.ready) {
    for (shk__ask_freezer *f = m->issuer.freezers, *n; f; f = n) {
      n = f->next;
      freezer_free(f);
    }
    pthread_cond_destroy(&m->issuer.cv);
    pthread_mutex_destroy(&m->issuer.fz_mu);
    pthread_mutex_destroy(&m->issuer.mu);
  }
}

/* Whether the one decision answers Ask for a grant of PATTERN in this
 * session: the only answer under which a human may approve it (Block and
 * unlisted are refused, and a laxer tier than the card's is never
 * offered). */
static bool pattern_askable(shk_manager *m, const shk_policy_session *ps, const char *pattern)
{
  shk_cap_scope scope;
  char *text = NULL;
  if (pattern_scope(pattern, &scope, &text))
    return false;
  free(text);
  shk_policy_request pr = { .kind = SHK_POLICY_GRANT, .scope = &scope, .approval = SHK_POLICY_UNASKED,
                            .now_ms = now_ms() };
  shk_policy_answer pa;
  bool ask = !shk_policy_decide(m->policy, ps, &pr, &pa, NULL) && pa.verdict == SHK_POLICY_ASK;
  shk_cap_scope_clear(&scope);
  return ask;
}

/* The egress hook's answer for what no live handle covers. Proxy thread:
 * it takes no lock the control plane holds across work (held_mu only
 * guards the session's list of held connections), and raising a card
 * never blocks. DNS is never held: a name the decision would ask about is
 * answered from the pool (HOLD), so that the connection to it can be. */
shk_egress_verdict shk__ask_connection(session *s, const shk_egress_request *req, const char **message)
{
  static _Thread_local char msg[600];
  shk_manager *m = s->m;
  bool dns = req->proto == SHK_EGRESS_DNS;
  json_t *js = dns ? json_pack("{s:[s]}", "domains", req->host)
                   : json_pack("{s:[s], s:[i]}", "domains", req->host, "ports", (int)req->port);
  char *text = js ? json_dumps(js, JSON_COMPACT) : NULL;
  json_decref(js);
  held *h = calloc(1, sizeof *h);
  if (!text || !h || shk_cap_scope_parse(SHK_CAP_NET_EGRESS, text, &h->scope, NULL)) {
    free(text);
    free(h);
    return SHK_EGRESS_NONE;
  }
  free(text);
  h->s = s;
  h->conn_id = req->conn_id;
  snprintf(h->host, sizeof h->host, "%s", req->host);
  h->port = req->port;
  h->scope_text = shk_cap_scope_to_json(&h->scope);
  shk_policy_session ps = shk__manager_policy_session(m, s);
  shk_policy_request pr = { .kind = SHK_POLICY_GRANT, .scope = &h->scope, .approval = SHK_POLICY_UNASKED,
                            .now_ms = now_ms() };
  shk_policy_answer pa;
  grant_req q = { .s = s, .scope = &h->scope, .scope_text = h->scope_text, .approval = SHK_POLICY_UNASKED };
  if (!h->scope_text || shk_policy_decide(m->policy, &ps, &pr, &pa, NULL)) {
    held_free(h);
    return SHK_EGRESS_NONE;
  }
  /* Auto and Notify need no human: a handle is issued (off this thread)
   * and the connection goes on. Why that is safe: this answer only decides
   * that the connection waits for the issuer; the issuer puts the request
   * to the one decision again under the registry lock (grant_locked), and
   * only what it grants, with its event recorded first, lets the
   * connection through. The opener's "ask": false turns off only the
   * asking. */
  bool by_tier = pa.verdict == SHK_POLICY_ALLOW &&
                 (pa.tier == SHK_POLICY_TIER_AUTO || pa.tier == SHK_POLICY_TIER_NOTIFY);
  bool ask = pa.verdict == SHK_POLICY_ASK && !s->no_ask;
  if ((!by_tier && !ask) || (!dns && ask && shk__manager_ev_decision(m, &q, &pa, NULL))) {
    held_free(h);
    return SHK_EGRESS_NONE;
  }
  if (dns) {
    held_free(h);
    return SHK_EGRESS_HOLD;
  }
  h->by_tier = by_tier;
  pthread_mutex_lock(&s->held_mu);
  h->next = s->held;
  s->held = h;
  s->n_held++;
  pthread_mutex_unlock(&s->held_mu);
  if (by_tier) {
    if (issuer_push(m, h))
      return SHK_EGRESS_HOLD;
    snprintf(msg, sizeof msg, "Shinken refused the connection to %s:%u: the manager is stopping", req->host,
             (unsigned)req->port);
    *message = msg;
    held_done(h);
    return SHK_EGRESS_DENY;
  }
  /* The pattern this card proposes, and its batch key: siblings of the
   * host at the same port join one card. Why that is safe: the pattern is
   * only offered when the one decision answers Ask for the pattern itself
   * (a rule that blocks any name it covers, or a manifest that does not
   * reach all of them, makes it Block or unlisted, and then none is
   * offered and the card batches only its exact scope); approving it puts
   * the pattern to the decision again under the registry lock. */
  char pattern[300];
  bool offer = !shk_approve_sibling_pattern(h->host, h->port, pattern, sizeof pattern) &&
               pattern_askable(m, &ps, pattern);
  shk_approve_request rq = {
    .session = s->id, .cls = shk_cap_class_name(SHK_CAP_NET_EGRESS), .scope = h->scope_text,
    .ingested_external = s->taint.ingested_external, .touched_sensitive = s->taint.touched_sensitive,
    .tier = SHK_APPROVE_ASK, .rule = pa.policy[0] ? pa.policy : NULL, .why = pa.why,
    .batch_key = offer ? pattern : h->scope_text, .pattern = offer ? pattern : NULL,
    .attempt = h, .release = ask_release,
  };
  shk_error err;
  if (shk_approve_raise(m->approve, &rq, NULL, &err) < 0) {
    snprintf(msg, sizeof msg, "Shinken refused the connection to %s:%u: %s", req->host, (unsigned)req->port,
             err.message);
    *message = msg;
    held_done(h);
    return SHK_EGRESS_DENY;
  }
  return SHK_EGRESS_HOLD;
}

/* Caller holds mu. A handle was just issued to s by any path (a human's
 * grant from the CLI, an approved card): the connections its proxy holds
 * that the handle covers go on now, under it, rather than wait for their
 * cards. Each is first taken back from its card (shk_approve_withdraw),
 * so that it is released exactly once; one whose release is already on
 * its way is left to it. The module's lock is taken under mu here, which
 * is safe because the module calls back with its lock held only into
 * freeze and thaw (ask_freeze_as), which never take mu. */
void shk__ask_release_covered(session *s, egrant *eg)
{
  for (;;) {
    held *h = NULL;
    pthread_mutex_lock(&s->held_mu);
    for (held *x = s->held; x && !h; x = x->next)
      if (!x->by_tier && shk_cap_scope_allows_host(&eg->scope, x->host, x->port))
        h = x;
    pthread_mutex_unlock(&s->held_mu);
    if (!h || shk_approve_withdraw(s->m->approve, h))
      return;
    /* A once handle is this connection's: used now, and by nothing else. */
    if (eg->once) {
      atomic_store(&eg->dead, true);
      shk_cap_use(s->m->table, eg->id, now_ms());
    }
    shk_egress_session_resume_flags(s->egress, h->conn_id, SHK_EGRESS_ALLOW, eg->tag,
                                    shk__egress_flags(&eg->scope), eg->rule, NULL);
    held_done(h);
    if (eg->once)
      return;
  }
}

/* The proxy's on_abandon: the client of a held connection went away. Its
 * attempt is taken back from its card (which stays open: an approval for
 * the session still applies to the next attempt). */
void shk__ask_abandon(void *data, const char *session_name, uint64_t conn_id)
{
  (void)session_name;
  session *s = data;
  held *h = NULL;
  pthread_mutex_lock(&s->held_mu);
  for (held *x = s->held; x && !h; x = x->next)
    if (x->conn_id == conn_id && !x->by_tier)
      h = x;
  pthread_mutex_unlock(&s->held_mu);
  /* An Auto or Notify connection is the issuer's: its resume finds the
   * client gone, and it is let go then. Only the address is compared until the module says it gave h back:
   * a release that won the race frees it. */
  if (h && shk_approve_withdraw(s->m->approve, h) == 0)
    held_done(h);
}

/* Every event of the approve module, on the timeline. */
void shk__ask_event(void *ud, const shk_approve_event *e)
{
  shk_manager *m = ud;
  char name[40];
  snprintf(name, sizeof name, "card-%s", shk_approve_event_name(e->kind));
  shk_audit_event ev;
  shk_audit_event_init(&ev, name);
  shk_audit_str(&ev, SHK_AUDIT_SESSION, e->session);
  shk_audit_str(&ev, SHK_AUDIT_CARD, e->card);
  shk_audit_str(&ev, SHK_AUDIT_CLASS, e->cls);
  shk_audit_str(&ev, SHK_AUDIT_SCOPE, e->scope);
  shk_audit_str(&ev, SHK_AUDIT_POLICY, e->rule);
  if (e->attempts)
    shk_audit_int(&ev, SHK_AUDIT_COUNT, e->attempts);
  shk_audit_str(&ev, SHK_AUDIT_OUTCOME, e->has_result ? shk_approve_result_name(e->result) : NULL);
  /* A pattern's approval is recorded with the pattern it granted (the
   * grant event that follows carries it as its scope too). */
  char reason[600];
  if (e->pattern && e->has_result && e->result == SHK_APPROVE_APPROVED_PATTERN) {
    snprintf(reason, sizeof reason, "approved the pattern %s%s%s", e->pattern,
             e->reason && strcmp(e->reason, shk_approve_result_name(e->result)) ? ": " : "",
             e->reason && strcmp(e->reason, shk_approve_result_name(e->result)) ? e->reason : "");
    shk_audit_str(&ev, SHK_AUDIT_REASON, reason);
  } else {
    shk_audit_str(&ev, SHK_AUDIT_REASON, e->reason);
  }
  if (e->by) {
    if (e->by->uid >= 0)
      shk_audit_int(&ev, SHK_AUDIT_HUMAN_UID, e->by->uid);
    shk_audit_str(&ev, SHK_AUDIT_HUMAN_SURFACE, e->by->surface);
    shk_audit_str(&ev, SHK_AUDIT_HUMAN_NAME, e->by->user);
    if (e->by->pid > 0)
      shk_audit_int(&ev, SHK_AUDIT_PID, e->by->pid);
    shk_audit_str(&ev, SHK_AUDIT_EXECUTABLE, e->by->exe);
  }
  ev_emit(m, &ev, NULL);
}

/* The module's end: a breaker ended a session. This runs while the
 * module delivers, so the session's last reference is not let go here (its
 * end waits for held connections that this very thread may have yet to
 * release): the next tick lets go of it. */
void shk__ask_end(void *ud, const char *session_name, const char *why)
{
  shk_manager *m = ud;
  pthread_mutex_lock(&m->mu);
  session *s = find_session(m, session_name);
  if (s) {
    s->refs++;
    s->reap_next = m->reap;
    m->reap = s;
  }
  pthread_mutex_unlock(&m->mu);
  if (s)
    json_decref(shk__manager_close_session(m, session_name, NULL, why));
}

int shk__manager_subscribe(shk_manager *m, shk_approve_line_fn fn, void *ud, uint64_t *id, shk_error *err)
{
  int r = shk_approve_subscribe(m->approve, fn, ud, id, err);
  if (!r) {
    /* A subscriber shows cards to someone (the breaker reads it). Set
     * under mu so that the count and the module's flag agree; the module
     * takes only its own lock for it and calls nothing back. */
    pthread_mutex_lock(&m->mu);
    if (m->subscribers++ == 0)
      shk_approve_set_surface(m->approve, true);
    pthread_mutex_unlock(&m->mu);
  }
  return r;
}

void shk__manager_unsubscribe(shk_manager *m, uint64_t id)
{
  shk_approve_unsubscribe(m->approve, id);
  pthread_mutex_lock(&m->mu);
  if (--m->subscribers == 0)
    shk_approve_set_surface(m->approve, false);
  pthread_mutex_unlock(&m->mu);
}

int shk_manager_subscribe(shk_manager *m, shk_approve_line_fn fn, void *ud, uint64_t *id, shk_error *err)
{
  return shk__manager_subscribe(m, fn, ud, id, err);
}

void shk_manager_unsubscribe(shk_manager *m, uint64_t id)
{
  shk__manager_unsubscribe(m, id);
}

/* The open cards of the Ask loop (of one session, or all). */
json_t *shk__ask_op_cards(shk_manager *m, json_t *req)
{
  static const char *const keys[] = { "op", "session", NULL };
  const char *bad;
  if (!known_keys(req, keys, &bad))
    return refuse("cards: unknown field '%s'", bad);
  char *text;
  if (shk_approve_list(m->approve, str_or(req, "session", NULL), &text))
    return refuse("cards: out of memory");
  json_t *cards = json_loads(text, 0, NULL);
  free(text);
  return cards ? json_pack("{s:b, s:o}", "ok", 1, "cards", cards) : refuse("cards: out of memory");
}

/* "inline" is the terminal of a `shinken run`: the one that embeds this
 * manager, or a control peer running this manager's own program (a run
 * attached to this daemon). Any other peer is whatever program connected,
 * and its answer is recorded as the CLI's or a harness's. Why that is
 * safe: the surface changes only how the answer is labelled, never whether
 * it is taken (the peer's uid, pid and program are recorded either way),
 * and the sandboxed workload can make neither kind of call (it reaches
 * neither this process's memory nor the control socket). */
static bool inline_ok(const shk_manager *m, const shk__peer *by)
{
  return !strcmp(by->surface, "embedded") || (by->exe && m->self_exe[0] && !strcmp(by->exe, m->self_exe));
}

/* The surfaces a human's answer may name: cli, harness, or inline from the
 * terminal of a run (inline_ok). */
static bool surface_ok(const shk_manager *m, const shk__peer *by, const char *surface)
{
  return !strcmp(surface, "cli") || !strcmp(surface, "harness") || (!strcmp(surface, "inline") && inline_ok(m, by));
}

/* A human's answer to a card: {"card": ID, "resolution": once | session |
 * pattern | deny | cancel | takeover | resume | end, "reason", "pattern",
 * "surface": "cli" (default), "harness", or "inline" from the embedding
 * process}. Who answered is the peer the
 * control socket names (its uid, pid and program), never what the request
 * says of itself; the approve module records it and releases the held
 * connections (ask_release) before this returns or soon after. */
json_t *shk__ask_op_resolve_card(shk_manager *m, json_t *req, const shk__peer *by)
{
  static const char *const keys[] = { "op", "card", "resolution", "reason", "pattern", "surface", NULL };
  const char *bad;
  if (!known_keys(req, keys, &bad))
    return refuse("resolve: unknown field '%s'", bad);
  const char *card = str_or(req, "card", NULL), *res = str_or(req, "resolution", "");
  const char *surface = str_or(req, "surface", "cli");
  shk_approve_answer a = { .pattern = str_or(req, "pattern", NULL), .reason = str_or(req, "reason", NULL) };
  if (!card || shk_approve_how_parse(res, &a.how))
    return refuse("resolve: card (an id) and resolution (once, session, pattern, deny, cancel, takeover, resume or "
                  "end) are required");
  if (!surface_ok(m, by, surface))
    return refuse(inline_ok(m, by) ? "resolve: surface must be cli, harness or inline"
                                   : "resolve: surface must be cli or harness");
  /* The panel's transport names its own surface: a request that arrived
   * through it is the panel's answer whatever it says of itself. */
  if (!strcmp(by->surface, "panel"))
    surface = "panel";
  a.who = (shk_approve_who){ .surface = surface, .uid = by->uid, .pid = by->pid, .exe = by->exe,
                             .user = by->user };
  shk_approve_granted granted = { .result = SHK_APPROVE_DENIED };
  a.granted = &granted;
  shk_error err;
  if (shk_approve_resolve(m->approve, card, &a, &err))
    return refuse("resolve: %s", err.message);
  json_t *ans = json_pack("{s:b, s:s, s:s}", "ok", 1, "card", card, "resolution", shk_approve_how_name(a.how));
  /* What an approval for the session granted, so that the human reads
   * whether the batch became one handle or several. */
  if (ans && a.how == SHK_APPROVE_SESSION && granted.scopes > 1) {
    char note[512];
    if (granted.result == SHK_APPROVE_APPROVED_PATTERN)
      snprintf(note, sizeof note, "the batch's %u scopes are granted as one handle for the pattern %s",
               granted.scopes, granted.pattern);
    else
      snprintf(note, sizeof note, "the batch's %u scopes share no pattern the manifest allows at this tier: each "
               "exact scope is granted as a handle of its own", granted.scopes);
    json_object_set_new(ans, "granted", granted.result == SHK_APPROVE_APPROVED_PATTERN
                                            ? json_pack("{s:s}", "pattern", granted.pattern)
                                            : json_pack("{s:s}", "exact", "each"));
    json_object_set_new(ans, "note", json_string(note));
  }
  return ans;
}

/* A human takes over a session or gives it back: {"op": "takeover" |
 * "resume", "session": ID, "surface": "cli" (default), "harness", or
 * "inline" from the terminal of a run}. Take
 * over freezes every process of the session (its embedder's freezer) and
 * stops its cards' countdowns; resume continues them. Recorded, like a
 * card's answer, with the control peer's uid, pid and program. */
json_t *shk__ask_op_session(shk_manager *m, json_t *req, const shk__peer *by, bool takeover)
{
  const char *what = takeover ? "takeover" : "resume";
  static const char *const keys[] = { "op", "session", "surface", NULL };
  const char *bad;
  if (!known_keys(req, keys, &bad))
    return refuse("%s: unknown field '%s'", what, bad);
  const char *sid = str_or(req, "session", NULL), *surface = str_or(req, "surface", "cli");
  if (!sid)
    return refuse("%s: session (an id) is required", what);
  if (!surface_ok(m, by, surface))
    return refuse("%s: surface must be cli or harness%s", what, inline_ok(m, by) ? " or inline" : "");
  /* As for a card's answer: the panel's transport names its own surface. */
  if (!strcmp(by->surface, "panel"))
    surface = "panel";
  shk_approve_who who = { .surface = surface, .uid = by->uid, .pid = by->pid, .exe = by->exe, .user = by->user };
  shk_error err;
  int r = takeover ? shk_approve_takeover(m->approve, sid, &who, &err) : shk_approve_resume(m->approve, sid, &who, &err);
  if (r)
    return refuse("%s: %s", what, err.message);
  return json_pack("{s:b, s:s, s:b}", "ok", 1, "session", sid, "frozen", takeover);
}
