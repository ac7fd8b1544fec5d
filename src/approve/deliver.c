/* SPDX-License-Identifier: Apache-2.0 */
/* Ordered delivery of everything the Ask loop calls back, and the JSON of
 * cards and events.
 *
 * Releases, events and end requests are queued under the module's lock in
 * the order they were decided. Whichever thread finds nobody delivering
 * takes the drainer role and empties the queue one item at a time, the lock
 * released around each callback; a thread that queues while another is
 * delivering leaves its items to that thread. So callbacks never run under
 * the lock, run in order, and may call back into the module (what they
 * queue is delivered by the same loop, after what is already queued).
 *
 * An event is built as one JSON object; its typed fields (what on_event
 * receives) are read back from that object when it is queued, so the audit
 * and the surfaces cannot disagree about what happened. An event shares no
 * JSON value with a card (scopes are deep copies): it is read and freed by
 * the delivering thread without the lock, while the card stays under it. */
#include "approve/approve-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"

#define SHOWN_HELD 16

static const char *const ev_names[] = { "raised", "reviewing", "reviewed", "updated", "resolved",
                                        "refused", "breaker", "frozen", "resumed", "ended", "notice" };

const char *shk_approve_event_name(shk_approve_event_kind k)
{
  return (unsigned)k < sizeof ev_names / sizeof *ev_names ? ev_names[k] : NULL;
}

static const char *jstr(const json_t *o, const char *key)
{
  return json_string_value(json_object_get(o, key));
}

/* jansson's setters fail on a NULL value, which is how out of memory shows
 * up; `ok` collects that. NULL strings are simply left out. */
static void put(json_t *o, const char *key, json_t *v, bool *ok)
{
  if (json_object_set_new(o, key, v))
    *ok = false;
}

static void put_str(json_t *o, const char *key, const char *s, bool *ok)
{
  if (s)
    put(o, key, json_string(s), ok);
}

json_t *shk__approve_who_json(const shk_approve_who *w)
{
  json_t *o = json_object();
  bool ok = o != NULL;
  if (ok) {
    put_str(o, "surface", w->surface, &ok);
    if (w->uid >= 0)
      put(o, "uid", json_integer(w->uid), &ok);
    if (w->pid > 0)
      put(o, "pid", json_integer(w->pid), &ok);
    put_str(o, "exe", w->exe, &ok);
    put_str(o, "user", w->user, &ok);
  }
  if (!ok) {
    json_decref(o);
    return NULL;
  }
  return o;
}

json_t *shk__approve_card_json(const shk__card *c)
{
  const shk__session *s = c->s;
  json_t *o = json_object(), *so = json_object(), *answers = json_array();
  bool ok = o && so && answers;
  if (!ok) {
    json_decref(o);
    json_decref(so);
    json_decref(answers);
    return NULL;
  }
  static const char *const states[] = { "reviewing", "pending", "resolved" };
  put_str(o, "id", c->id, &ok);
  put_str(o, "kind", c->breaker ? "breaker" : "request", &ok);
  put_str(o, "state", states[c->state], &ok);
  put_str(so, "name", s->name, &ok);
  put_str(so, "label", s->label, &ok);
  put_str(so, "command", s->command, &ok);
  put_str(so, "cwd", s->cwd, &ok);
  put(so, "started_ms", json_integer(s->started_ms), &ok);
  put(so, "frozen", json_boolean(s->frozen), &ok);
  put(o, "session", so, &ok);
  put_str(o, "agent", s->agent, &ok);
  put_str(o, "model", s->model, &ok);
  put_str(o, "class", c->cls, &ok);
  put(o, "raised_ms", json_integer(c->raised_ms), &ok);
  if (c->paused_left_ms) {
    put(o, "paused", json_true(), &ok);
    put(o, "remaining_ms", json_integer(c->paused_left_ms), &ok);
  } else {
    put(o, "expires_ms", json_integer(c->deadline_ms), &ok);
  }
  if (c->breaker) {
    put_str(o, "reason", c->breaker_why, &ok);
    ok = ok && !json_array_append_new(answers, json_string("resume")) &&
         !json_array_append_new(answers, json_string("end"));
    put(o, "answers", answers, &ok);
    goto out;
  }
  put(o, "scope", json_deep_copy(c->scope_v), &ok);
  put_str(o, "provenance", c->provenance, &ok);
  put(o, "ingested_external", json_boolean(c->ingested_external), &ok);
  put(o, "touched_sensitive", json_boolean(c->touched_sensitive), &ok);
  put_str(o, "tier", shk_approve_tier_name(c->tier), &ok);
  put_str(o, "rule", c->rule, &ok);
  put_str(o, "why", c->why, &ok);
  put(o, "attempts", json_integer(c->attempts), &ok);
  put_str(o, "pattern", c->pattern, &ok);
  json_t *pats = json_array(), *held = json_array();
  /* The proposed pattern heads the list of those the human may choose, at
   * the card's own tier; the wider ones the caller allows follow. */
  if (pats && c->pattern &&
      json_array_append_new(pats, json_pack("{s:s, s:s}", "pattern", c->pattern, "tier", shk_approve_tier_name(c->tier))))
    ok = false;
  for (size_t i = 0; pats && i < c->n_wider; i++)
    if (json_array_append_new(pats, json_pack("{s:s, s:s}", "pattern", c->wider[i].pattern, "tier",
                                              shk_approve_tier_name(c->wider[i].tier))))
      ok = false;
  /* The first few held attempts: a card is redrawn on every join, and a
   * flood of siblings must not make each join cost more than the last. */
  unsigned shown = 0;
  for (const shk__attempt *a = c->held; held && a && shown < SHOWN_HELD; a = a->next, shown++)
    if (json_array_append_new(held, json_pack("{s:o?, s:I}", "scope", json_loads(a->scope, 0, NULL),
                                              "raised_ms", (json_int_t)a->raised_ms)))
      ok = false;
  put(o, "patterns", pats, &ok);
  put(o, "held", held, &ok);
  if (c->attempts > shown)
    put(o, "held_more", json_integer(c->attempts - shown), &ok);
  static const char *const request_answers[] = { "once", "session", "pattern", "deny", "cancel",
                                                 "takeover" };
  for (size_t i = 0; i < sizeof request_answers / sizeof *request_answers; i++)
    if ((i != 2 || c->pattern) && json_array_append_new(answers, json_string(request_answers[i])))
      ok = false;
  put(o, "answers", answers, &ok);
out:
  if (!ok) {
    json_decref(o);
    return NULL;
  }
  return o;
}

static shk__event *ev_build(shk_approve *ap, shk_approve_event_kind kind, const shk__card *c,
                            const shk__session *s, bool counted)
{
  shk__event *ev = calloc(1, sizeof *ev);
  json_t *root = json_object();
  bool ok = ev && root;
  if (ok) {
    ev->q.kind = SHK__Q_EVENT;
    ev->root = root;
    ev->e.kind = kind;
    ev->e.seq = counted ? ++ap->seq : 0;
    ev->e.time_ms = shk__approve_now(ap);
    put_str(root, "event", shk_approve_event_name(kind), &ok);
    if (counted)
      put(root, "seq", json_integer((json_int_t)ev->e.seq), &ok);
    put(root, "time_ms", json_integer(ev->e.time_ms), &ok);
  }
  bool whole = kind == SHK_APPROVE_EV_RAISED || kind == SHK_APPROVE_EV_REVIEWING ||
               kind == SHK_APPROVE_EV_UPDATED || kind == SHK_APPROVE_EV_BREAKER;
  if (ok && c && whole) {
    put(root, "card", shk__approve_card_json(c), &ok);
  } else if (ok && c) {
    /* An event about a card that is leaving: enough to stand on its own
     * in the audit, which may never have seen the card. */
    put_str(root, "card", c->id, &ok);
    put_str(root, "session", c->s->name, &ok);
    put_str(root, "class", c->cls, &ok);
    if (c->scope_v)
      put(root, "scope", json_deep_copy(c->scope_v), &ok);
    if (!c->breaker)
      put_str(root, "tier", shk_approve_tier_name(c->tier), &ok);
    put_str(root, "rule", c->rule, &ok);
    put(root, "attempts", json_integer(c->attempts), &ok);
  } else if (ok && s) {
    put_str(root, "session", s->name, &ok);
  }
  if (!ok) {
    if (ev)
      ev->root = NULL;
    json_decref(root);
    free(ev);
    ap->lost_events++;
    return NULL;
  }
  ev->audit = true;
  return ev;
}

shk__event *shk__approve_event(shk_approve *ap, shk_approve_event_kind kind, const shk__card *c,
                               const shk__session *s, bool human)
{
  shk__event *ev = ev_build(ap, kind, c, s, true);
  if (ev)
    ev->human = human;
  return ev;
}

shk__event *shk__approve_snapshot_event(shk_approve *ap, const shk__card *c, uint64_t target)
{
  shk__event *ev = ev_build(ap, c->breaker ? SHK_APPROVE_EV_BREAKER : SHK_APPROVE_EV_RAISED, c, NULL,
                            false);
  if (ev) {
    ev->audit = false;
    ev->human = true;
    ev->target = target;
    if (json_object_set_new(ev->root, "snapshot", json_true())) {
      shk__approve_event_free(ev);
      return NULL;
    }
  }
  return ev;
}

void shk__approve_event_set(shk__event *e, const shk__resolution *res, const char *reason,
                            const char *decision)
{
  if (!e)
    return;
  bool ok = true;
  json_t *r = e->root;
  if (res) {
    put_str(r, "result", shk_approve_result_name(res->result), &ok);
    put_str(r, "reason", res->reason, &ok);
    put_str(r, "pattern", res->pattern, &ok);
    if (res->result == SHK_APPROVE_APPROVED_PATTERN)
      put_str(r, "pattern_tier", shk_approve_tier_name(res->tier), &ok);
    put(r, "by", shk__approve_who_json(&res->who), &ok);
  }
  put_str(r, "reason", reason, &ok);
  put_str(r, "decision", decision, &ok);
  if (!ok) {
    json_decref(r);
    e->root = NULL; /* queueing it counts it as lost */
  }
}

void shk__approve_event_free(shk__event *e)
{
  if (!e)
    return;
  json_decref(e->root);
  free(e->line);
  free(e->scope);
  free(e->end_session);
  free(e->end_why);
  free(e);
}

void shk__approve_resolution_unref(shk__resolution *r)
{
  if (!r || !r->refs || --r->refs)
    return;
  free((char *)r->pattern);
  free((char *)r->reason);
  free((char *)r->who.surface);
  free((char *)r->who.exe);
  free((char *)r->who.user);
  free(r);
}

static bool parse_tier(const char *name, shk_approve_tier *out)
{
  for (int t = SHK_APPROVE_AUTO; name && t <= SHK_APPROVE_BLOCK; t++)
    if (!strcmp(name, shk_approve_tier_name((shk_approve_tier)t))) {
      *out = (shk_approve_tier)t;
      return true;
    }
  return false;
}

static bool parse_result(const char *name, shk_approve_result *out)
{
  for (int r = SHK_APPROVE_APPROVED_ONCE; name && r <= SHK_APPROVE_SHUTDOWN; r++)
    if (!strcmp(name, shk_approve_result_name((shk_approve_result)r))) {
      *out = (shk_approve_result)r;
      return true;
    }
  return false;
}

/* Reads the typed fields back from the JSON and formats the line. */
static bool finalize(shk__event *ev)
{
  json_t *r = ev->root;
  if (!r)
    return false;
  json_t *card = json_object_get(r, "card");
  const json_t *src = json_is_object(card) ? card : r;
  shk_approve_event *e = &ev->e;
  e->card = json_is_string(card) ? json_string_value(card) : jstr(card, "id");
  json_t *sess = json_object_get(src, "session");
  e->session = json_is_string(sess) ? json_string_value(sess) : jstr(sess, "name");
  e->cls = jstr(src, "class");
  json_t *scope = json_object_get(src, "scope");
  if (scope && !(e->scope = ev->scope = json_dumps(scope, JSON_COMPACT | JSON_SORT_KEYS)))
    return false;
  if (!parse_tier(jstr(src, "tier"), &e->tier))
    e->tier = SHK_APPROVE_ASK;
  e->rule = jstr(src, "rule");
  e->attempts = (unsigned)json_integer_value(json_object_get(src, "attempts"));
  e->has_result = parse_result(jstr(r, "result"), &e->result);
  e->pattern = jstr(r, "pattern");
  e->reason = jstr(r, "reason") ? jstr(r, "reason") : jstr(src, "reason");
  json_t *by = json_object_get(r, "by");
  if (json_is_object(by)) {
    json_t *uid = json_object_get(by, "uid"), *pid = json_object_get(by, "pid");
    ev->by = (shk_approve_who){ jstr(by, "surface"), uid ? json_integer_value(uid) : -1,
                                pid ? json_integer_value(pid) : 0, jstr(by, "exe"), jstr(by, "user") };
    e->by = &ev->by;
  }
  char *text = json_dumps(r, JSON_COMPACT);
  if (!text)
    return false;
  size_t n = strlen(text);
  ev->line = realloc(text, n + 2);
  if (!ev->line) {
    free(text);
    return false;
  }
  ev->line[n] = '\n';
  ev->line[n + 1] = '\0';
  ev->len = n + 1;
  e->json = ev->line;
  return true;
}

void shk__approve_queue(shk_approve *ap, shk__qnode *n)
{
  if (n->kind == SHK__Q_EVENT && !finalize((shk__event *)n)) {
    shk__approve_event_free((shk__event *)n);
    ap->lost_events++;
    return;
  }
  n->next = NULL;
  if (ap->qtail)
    ap->qtail->next = n;
  else
    ap->qhead = n;
  ap->qtail = n;
}

static void deliver_release(shk_approve *ap, shk__attempt *a)
{
  shk__resolution *res = a->res;
  shk_approve_outcome o = {
    .result = res->result,
    .card = a->card,
    .session = a->session,
    .cls = a->cls,
    .scope = a->scope,
    .pattern = res->pattern,
    .tier = res->result == SHK_APPROVE_APPROVED_PATTERN ? res->tier : a->tier,
    .reason = res->reason,
    .by = &res->who,
  };
  pthread_mutex_unlock(&ap->mu);
  a->release(a->ptr, &o);
  pthread_mutex_lock(&ap->mu);
  shk__approve_resolution_unref(res);
  free(a->session);
  free(a->cls);
  free(a->scope);
  free(a);
}

/* The subscriber after `last` that should get `ev`, if any. Subscribers
 * are in the order of their ids. */
static shk__sub *next_sub(shk_approve *ap, const shk__event *ev, uint64_t last)
{
  for (shk__sub *s = ap->subs; s; s = s->next)
    if (s->id > last && (ev->target ? s->id == ev->target : ev->e.seq > s->since))
      return s;
  return NULL;
}

static void deliver_event(shk_approve *ap, shk__event *ev)
{
  if (ev->audit && ap->o.on_event) {
    shk_approve_event_fn fn = ap->o.on_event;
    void *ud = ap->o.ud;
    pthread_mutex_unlock(&ap->mu);
    fn(ud, &ev->e);
    pthread_mutex_lock(&ap->mu);
  }
  for (uint64_t last = 0; ev->human;) {
    shk__sub *s = next_sub(ap, ev, last);
    if (!s)
      break;
    last = s->id;
    shk_approve_line_fn fn = s->fn;
    void *ud = s->ud;
    ap->delivering = s->id;
    pthread_mutex_unlock(&ap->mu);
    fn(ud, ev->line, ev->len);
    pthread_mutex_lock(&ap->mu);
    ap->delivering = 0;
    pthread_cond_broadcast(&ap->cond);
  }
  if (ev->end_session && ap->o.end) {
    void (*end)(void *, const char *, const char *) = ap->o.end;
    void *ud = ap->o.ud;
    pthread_mutex_unlock(&ap->mu);
    end(ud, ev->end_session, ev->end_why);
    pthread_mutex_lock(&ap->mu);
  }
  shk__approve_event_free(ev);
}

void shk__approve_drain(shk_approve *ap)
{
  if (ap->draining)
    return;
  ap->draining = true;
  ap->drainer = pthread_self();
  while (ap->qhead) {
    shk__qnode *n = ap->qhead;
    ap->qhead = n->next;
    if (!ap->qhead)
      ap->qtail = NULL;
    if (n->kind == SHK__Q_RELEASE)
      deliver_release(ap, (shk__attempt *)n);
    else
      deliver_event(ap, (shk__event *)n);
  }
  ap->draining = false;
  pthread_cond_broadcast(&ap->cond);
}

void shk__approve_quiesce(shk_approve *ap)
{
  for (;;) {
    if (!ap->draining && ap->qhead)
      shk__approve_drain(ap);
    if (!ap->draining || pthread_equal(ap->drainer, pthread_self()))
      return;
    pthread_cond_wait(&ap->cond, &ap->mu);
  }
}
