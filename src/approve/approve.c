/* SPDX-License-Identifier: Apache-2.0 */
/* The Ask loop's card machine: sessions, raising and batching, the
 * resolutions, timeouts, breakers, take over and resume.
 *
 * Every public function takes the one lock, changes state, queues what has
 * to be called back (releases, events, an end request) and delivers the
 * queue with the lock released (deliver.c). A held attempt is on exactly
 * one card until a resolution moves it into the queue, so it is released
 * exactly once. Whatever fails after a decision was made fails towards
 * refusing more, never towards granting: a breaker that cannot freeze ends
 * the session, a denial that cannot be remembered may prompt again, a
 * timeout that cannot be recorded is retried at the next tick. */
#include "approve/approve-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common/common.h"

#define DEFAULT_TIMEOUT_MS 120000
#define DEFAULT_WINDOW_MS 300
#define DEFAULT_CONSECUTIVE 3
#define DEFAULT_TOTAL 20
#define DEFAULT_MAX_HELD 1024
#define DEFAULT_REVIEWER_TIMEOUT_MS 5000
#define DEFAULT_REVIEWER_MAX 8

/* The resolutions nobody chooses: the same for every card, never freed. */
static shk__resolution res_timeout = {
  0, SHK_APPROVE_TIMED_OUT, SHK_APPROVE_ASK, NULL, "nobody answered in time",
  { "timeout", -1, 0, NULL, NULL } };
static shk__resolution res_ended = {
  0, SHK_APPROVE_ENDED, SHK_APPROVE_ASK, NULL, "the session ended",
  { "manager", -1, 0, NULL, NULL } };
static shk__resolution res_shutdown = {
  0, SHK_APPROVE_SHUTDOWN, SHK_APPROVE_ASK, NULL, "the manager is shutting down",
  { "manager", -1, 0, NULL, NULL } };
static const shk_approve_who who_manager = { "manager", -1, 0, NULL, NULL };

/* ---- names ---- */

const char *shk_approve_tier_name(shk_approve_tier t)
{
  switch (t) {
  case SHK_APPROVE_AUTO: return "auto";
  case SHK_APPROVE_NOTIFY: return "notify";
  case SHK_APPROVE_ASK: return "ask";
  case SHK_APPROVE_BLOCK: return "block";
  }
  return NULL;
}

const char *shk_approve_result_name(shk_approve_result r)
{
  switch (r) {
  case SHK_APPROVE_APPROVED_ONCE: return "approved-once";
  case SHK_APPROVE_APPROVED_SESSION: return "approved-session";
  case SHK_APPROVE_APPROVED_PATTERN: return "approved-pattern";
  case SHK_APPROVE_DENIED: return "denied";
  case SHK_APPROVE_CANCELLED: return "cancelled";
  case SHK_APPROVE_TIMED_OUT: return "timed-out";
  case SHK_APPROVE_ENDED: return "ended";
  case SHK_APPROVE_SHUTDOWN: return "shutdown";
  }
  return NULL;
}

bool shk_approve_result_approved(shk_approve_result r)
{
  return r == SHK_APPROVE_APPROVED_ONCE || r == SHK_APPROVE_APPROVED_SESSION ||
         r == SHK_APPROVE_APPROVED_PATTERN;
}

static const char *const how_names[] = { "once", "session", "pattern", "deny", "cancel",
                                         "takeover", "resume", "end" };

const char *shk_approve_how_name(shk_approve_how h)
{
  return (unsigned)h < sizeof how_names / sizeof *how_names ? how_names[h] : NULL;
}

int shk_approve_how_parse(const char *name, shk_approve_how *out)
{
  for (size_t i = 0; name && i < sizeof how_names / sizeof *how_names; i++)
    if (!strcmp(name, how_names[i])) {
      *out = (shk_approve_how)i;
      return 0;
    }
  return -EINVAL;
}

/* ---- small helpers ---- */

static int64_t real_clock(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t shk__approve_now(shk_approve *ap)
{
  return ap->o.clock ? ap->o.clock(ap->o.ud) : real_clock();
}

/* strdup that lets NULL through; *ok turns false when memory runs out. */
static char *sdup(const char *s, bool *ok)
{
  if (!s)
    return NULL;
  char *d = strdup(s);
  if (!d)
    *ok = false;
  return d;
}

static bool is_credentials(const char *cls)
{
  return !strcmp(cls, "credentials");
}

/* A person reads this: "cli (uid 1000, pid 42, /usr/bin/shinken)". */
static void who_text(const shk_approve_who *w, char *buf, size_t len)
{
  if (!strcmp(w->surface, "panel"))
    snprintf(buf, len, "the panel's user %s", w->user ? w->user : "?");
  else if (!strcmp(w->surface, "reviewer"))
    snprintf(buf, len, "the reviewer %s", w->exe ? w->exe : "");
  else if (!strcmp(w->surface, "timeout") || !strcmp(w->surface, "manager"))
    snprintf(buf, len, "Shinken");
  else
    snprintf(buf, len, "%s (uid %lld, pid %lld, %s)", w->surface, (long long)w->uid,
             (long long)w->pid, w->exe ? w->exe : "?");
}

/* Only an identified human surface may resolve a card: the module's own
 * surfaces (reviewer, timeout, manager) are never accepted from a caller,
 * so nothing outside can pass its answer off as one of them. */
static int check_who(const shk_approve_who *w, shk_error *err)
{
  if (!w || !w->surface || !*w->surface)
    return shk__error_set(err, -EPERM, "an answer must say who gives it (no surface named)");
  const char *s = w->surface;
  if (!strcmp(s, "cli") || !strcmp(s, "harness") || !strcmp(s, "inline")) {
    if (w->uid < 0 || w->pid <= 0 || !w->exe || !*w->exe)
      return shk__error_set(err, -EPERM,
                            "an answer from the %s must carry its peer's uid, pid and executable", s);
    return 0;
  }
  if (!strcmp(s, "panel")) {
    if (!w->user || !*w->user)
      return shk__error_set(err, -EPERM, "an answer from the panel must name the panel's user");
    return 0;
  }
  if (!strcmp(s, "reviewer") || !strcmp(s, "timeout") || !strcmp(s, "manager"))
    return shk__error_set(err, -EPERM, "only Shinken itself answers as the %s", s);
  return shk__error_set(err, -EPERM, "unknown surface '%s' (cli, panel, inline or harness)", s);
}

shk__resolution *shk__approve_resolution_new(shk_approve_result result, shk_approve_tier tier,
                                             const char *pattern, const char *reason,
                                             const shk_approve_who *who)
{
  shk__resolution *r = calloc(1, sizeof *r);
  if (!r)
    return NULL;
  char clean[512];
  shk__approve_clean_text(reason ? reason : "", clean, sizeof clean);
  bool ok = true;
  r->refs = 1;
  r->result = result;
  r->tier = tier;
  r->pattern = sdup(pattern, &ok);
  r->reason = sdup(clean[0] ? clean : result == SHK_APPROVE_DENIED ? "no reason given"
                                   : shk_approve_result_name(result), &ok);
  r->who.surface = sdup(who->surface, &ok);
  r->who.uid = who->uid;
  r->who.pid = who->pid;
  r->who.exe = sdup(who->exe, &ok);
  r->who.user = sdup(who->user, &ok);
  if (!ok) {
    shk__approve_resolution_unref(r);
    return NULL;
  }
  return r;
}

static shk__session *find_session(shk_approve *ap, const char *name)
{
  for (shk__session *s = ap->sessions; name && s; s = s->next)
    if (!strcmp(s->name, name))
      return s;
  return NULL;
}

shk__card *shk__approve_find_card(shk_approve *ap, const char *id)
{
  for (shk__card *c = ap->cards; id && c; c = c->next)
    if (!strcmp(c->id, id))
      return c;
  return NULL;
}

static bool card_open(const shk__card *c)
{
  return c->state != SHK__CARD_RESOLVED;
}

/* When a resolved card may be forgotten: at once, unless a sibling could
 * still be refused with its outcome (a refusal with a batch key), then at
 * the end of the batch window. */
static int64_t forget_at(const shk_approve *ap, const shk__card *c)
{
  bool kept = c->batch_key && !shk_approve_result_approved(c->result);
  return kept ? c->resolved_ms + ap->o.batch_window_ms : 0;
}

/* Whoever waits on the timer thread: a deadline may be earlier now. */
static void kick_timer(shk_approve *ap)
{
  ap->timer_kick = true;
  pthread_cond_signal(&ap->timer_cond);
}

static void attempt_free(shk__attempt *a)
{
  free(a->session);
  free(a->cls);
  free(a->scope);
  free(a);
}

static void card_free(shk__card *c)
{
  for (shk__attempt *a = c->held, *n; a; a = n) {
    n = a->next;
    attempt_free(a); /* only on a module torn down without shutdown: none are left */
  }
  free(c->cls);
  free(c->scope);
  free(c->provenance);
  free(c->rule);
  free(c->why);
  free(c->batch_key);
  free(c->pattern);
  free(c->breaker_why);
  free(c->result_reason);
  json_decref(c->scope_v);
  for (size_t i = 0; i < c->n_wider; i++)
    free((char *)c->wider[i].pattern);
  free(c->wider);
  free(c);
}

static void session_free(shk__session *s)
{
  free(s->name);
  free(s->label);
  free(s->command);
  free(s->cwd);
  free(s->agent);
  free(s->model);
  for (size_t i = 0; i < s->n_denied; i++) {
    free(s->denied[i].key);
    free(s->denied[i].reason);
  }
  free(s->denied);
  free(s);
}

static int new_card_id(char out[SHK_APPROVE_ID_HEX])
{
  unsigned char b[16];
  size_t got = 0;
  while (got < sizeof b) {
    ssize_t n = getrandom(b + got, sizeof b - got, 0);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -EIO;
    }
    got += (size_t)n;
  }
  for (size_t i = 0; i < sizeof b; i++)
    snprintf(out + 2 * i, 3, "%02x", b[i]);
  return 0;
}

static void queue_event(shk_approve *ap, shk__event *e)
{
  if (e)
    shk__approve_queue(ap, &e->q);
}

/* ---- the module ---- */

int shk_approve_new(const shk_approve_opts *o, shk_approve **out, shk_error *err)
{
  *out = NULL;
  shk_approve_opts d = o ? *o : (shk_approve_opts){ 0 };
  if (d.timeout_ms < 0 || d.batch_window_ms < 0 || d.reviewer_timeout_ms < 0)
    return shk__error_set(err, -EINVAL, "approve: times must not be negative");
  if (d.freeze && !d.thaw)
    return shk__error_set(err, -EINVAL, "approve: a freezer needs its thaw as well");
  if (d.reviewer_argv && (!d.reviewer_argv[0] || d.reviewer_argv[0][0] != '/'))
    return shk__error_set(err, -EINVAL,
                          "approve: the reviewer must be an absolute path (its arguments follow it)");
  if (!d.timeout_ms)
    d.timeout_ms = DEFAULT_TIMEOUT_MS;
  if (!d.batch_window_ms)
    d.batch_window_ms = DEFAULT_WINDOW_MS;
  if (!d.breaker_consecutive)
    d.breaker_consecutive = DEFAULT_CONSECUTIVE;
  if (!d.breaker_total)
    d.breaker_total = DEFAULT_TOTAL;
  if (!d.max_held)
    d.max_held = DEFAULT_MAX_HELD;
  if (!d.reviewer_timeout_ms)
    d.reviewer_timeout_ms = DEFAULT_REVIEWER_TIMEOUT_MS;
  if (!d.reviewer_max)
    d.reviewer_max = DEFAULT_REVIEWER_MAX;

  shk_approve *ap = calloc(1, sizeof *ap);
  if (!ap)
    return shk__error_set(err, -ENOMEM, "approve: out of memory");
  ap->o = d;
  ap->o.reviewer_argv = NULL;
  if (d.reviewer_argv) {
    size_t n = 0;
    while (d.reviewer_argv[n])
      n++;
    bool ok = (ap->reviewer_argv = calloc(n + 1, sizeof *ap->reviewer_argv)) != NULL;
    for (size_t i = 0; ok && i < n; i++)
      ap->reviewer_argv[i] = sdup(d.reviewer_argv[i], &ok);
    if (!ok) {
      for (size_t i = 0; ap->reviewer_argv && i < n; i++)
        free(ap->reviewer_argv[i]);
      free(ap->reviewer_argv);
      free(ap);
      return shk__error_set(err, -ENOMEM, "approve: out of memory");
    }
  }
  pthread_mutex_init(&ap->mu, NULL);
  pthread_cond_init(&ap->cond, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&ap->timer_cond, &ca);
  pthread_condattr_destroy(&ca);
  if (d.timer_thread) {
    int r = pthread_create(&ap->timer, NULL, shk__approve_timer_main, ap);
    if (r) {
      shk_approve_free(ap);
      return shk__error_set(err, -r, "approve: could not start the timer thread: %s", strerror(r));
    }
    ap->has_timer = true;
  }
  *out = ap;
  return 0;
}

void shk_approve_free(shk_approve *ap)
{
  if (!ap)
    return;
  shk_approve_shutdown(ap);
  for (shk__card *c = ap->cards, *n; c; c = n) {
    n = c->next;
    card_free(c);
  }
  for (shk__session *s = ap->sessions, *n; s; s = n) {
    n = s->next;
    session_free(s);
  }
  for (shk__sub *s = ap->subs, *n; s; s = n) {
    n = s->next;
    free(s);
  }
  for (size_t i = 0; ap->reviewer_argv && ap->reviewer_argv[i]; i++)
    free(ap->reviewer_argv[i]);
  free(ap->reviewer_argv);
  pthread_cond_destroy(&ap->timer_cond);
  pthread_cond_destroy(&ap->cond);
  pthread_mutex_destroy(&ap->mu);
  free(ap);
}

void shk_approve_set_surface(shk_approve *ap, bool connected)
{
  pthread_mutex_lock(&ap->mu);
  ap->surface = connected;
  pthread_mutex_unlock(&ap->mu);
}

uint64_t shk_approve_lost_events(shk_approve *ap)
{
  pthread_mutex_lock(&ap->mu);
  uint64_t n = ap->lost_events;
  pthread_mutex_unlock(&ap->mu);
  return n;
}

/* ---- sessions ---- */

int shk_approve_session_open(shk_approve *ap, const shk_approve_session *si, shk_error *err)
{
  if (!si || !si->name || !*si->name)
    return shk__error_set(err, -EINVAL, "approve: a session needs a name");
  shk__session *s = calloc(1, sizeof *s);
  bool ok = s != NULL;
  if (ok) {
    s->name = sdup(si->name, &ok);
    s->label = sdup(si->label ? si->label : si->name, &ok);
    s->command = sdup(si->command, &ok);
    s->cwd = sdup(si->cwd, &ok);
    s->agent = sdup(si->agent, &ok);
    s->model = sdup(si->model, &ok);
    s->started_ms = si->started_ms;
  }
  if (!ok) {
    if (s)
      session_free(s);
    return shk__error_set(err, -ENOMEM, "approve: out of memory");
  }
  int r = 0;
  pthread_mutex_lock(&ap->mu);
  if (ap->shut)
    r = shk__error_set(err, -EACCES, "approve: the manager is shutting down");
  else if (find_session(ap, si->name))
    r = shk__error_set(err, -EEXIST, "approve: session %s is already open", si->name);
  if (!r) {
    s->next = ap->sessions;
    ap->sessions = s;
  }
  pthread_mutex_unlock(&ap->mu);
  if (r)
    session_free(s);
  return r;
}

/* Moves a card's held attempts into the queue, each with a reference to
 * `res`. */
static void release_held(shk_approve *ap, shk__card *c, shk__resolution *res)
{
  for (shk__attempt *a = c->held, *n; a; a = n) {
    n = a->next;
    a->next = NULL;
    a->res = res;
    if (res->refs)
      res->refs++;
    c->s->n_held--;
    shk__approve_queue(ap, &a->q);
  }
  c->held = c->held_tail = NULL;
}

static void pause_cards(shk_approve *ap, shk__session *s, int64_t now)
{
  for (shk__card *c = ap->cards; c; c = c->next)
    if (c->s == s && !c->breaker && card_open(c) && !c->paused_left_ms)
      c->paused_left_ms = c->deadline_ms > now ? c->deadline_ms - now : 1;
}

static void unpause_cards(shk_approve *ap, shk__session *s, int64_t now)
{
  for (shk__card *c = ap->cards; c; c = c->next)
    if (c->s == s && c->paused_left_ms) {
      c->deadline_ms = now + c->paused_left_ms;
      c->paused_left_ms = 0;
    }
  kick_timer(ap);
}

/* A breaker card ends with "resume" or "end" (or the session's end). */
static void close_breaker(shk_approve *ap, shk__session *s, const char *how, const char *reason,
                          const shk_approve_who *who)
{
  shk__card *c = s->breaker;
  if (!c)
    return;
  s->breaker = NULL;
  c->state = SHK__CARD_RESOLVED;
  c->resolved_ms = shk__approve_now(ap);
  shk__event *e = shk__approve_event(ap, SHK_APPROVE_EV_RESOLVED, c, NULL, true);
  if (e) {
    json_object_set_new(e->root, "resolution", json_string(how));
    shk__approve_event_set(e, NULL, reason, NULL);
    if (who)
      json_object_set_new(e->root, "by", shk__approve_who_json(who));
  }
  queue_event(ap, e);
}

/* The module ends a session (its breaker tripped with nobody to ask, could
 * not freeze it, or was answered "end" or not at all): every held attempt
 * is refused, nothing more is raised, and the manager is asked to end it
 * for real. */
static void end_session(shk_approve *ap, shk__session *s, const char *why, const shk_approve_who *who)
{
  if (s->ended)
    return;
  s->ended = true;
  shk__resolution *res = shk__approve_resolution_new(SHK_APPROVE_ENDED, SHK_APPROVE_ASK, NULL, why,
                                                     &who_manager);
  for (shk__card *c = ap->cards; c; c = c->next)
    if (c->s == s && !c->breaker && card_open(c)) {
      if (res)
        res->refs++;
      shk__approve_finish(ap, c, res ? res : &res_ended);
    }
  shk__approve_resolution_unref(res);
  close_breaker(ap, s, "end", why, who);
  shk__event *e = shk__approve_event(ap, SHK_APPROVE_EV_ENDED, NULL, s, true);
  if (e) {
    shk__approve_event_set(e, NULL, why, NULL);
    if (who)
      json_object_set_new(e->root, "by", shk__approve_who_json(who));
    e->end_session = strdup(s->name);
    e->end_why = strdup(why);
    if (!e->end_session || !e->end_why) {
      shk__approve_event_free(e);
      e = NULL;
      ap->lost_events++;
    }
  }
  /* Without the event the manager is not asked to end the session; the
   * module refuses everything of it all the same, and the loss is
   * counted. */
  queue_event(ap, e);
}

int shk_approve_session_close(shk_approve *ap, const char *name)
{
  pthread_mutex_lock(&ap->mu);
  shk__session *s = find_session(ap, name);
  if (!s) {
    pthread_mutex_unlock(&ap->mu);
    return -ENOENT;
  }
  for (shk__card *c = ap->cards; c; c = c->next)
    if (c->s == s && !c->breaker && card_open(c))
      shk__approve_finish(ap, c, &res_ended);
  close_breaker(ap, s, "end", "the session ended", &who_manager);
  for (shk__card **pp = &ap->cards; *pp;) {
    shk__card *c = *pp;
    if (c->s == s) {
      *pp = c->next;
      card_free(c);
    } else {
      pp = &c->next;
    }
  }
  for (shk__session **pp = &ap->sessions; *pp; pp = &(*pp)->next)
    if (*pp == s) {
      *pp = s->next;
      break;
    }
  session_free(s);
  shk__approve_drain(ap);
  pthread_mutex_unlock(&ap->mu);
  return 0;
}

/* ---- the breaker ---- */

static void trip_breaker(shk_approve *ap, shk__session *s)
{
  if (s->breaker || s->ended)
    return;
  char why[256];
  if (s->consecutive >= ap->o.breaker_consecutive)
    snprintf(why, sizeof why, "%u denials or timeouts in a row", s->consecutive);
  else
    snprintf(why, sizeof why, "%u denials or timeouts in this session", s->total);
  char full[384];
  if (!ap->surface) {
    snprintf(full, sizeof full, "%s, and no human surface is connected to ask", why);
    end_session(ap, s, full, NULL);
    return;
  }
  if (!s->frozen) {
    int r = ap->o.freeze ? ap->o.freeze(ap->o.ud, s->name) : -ENOSYS;
    if (r < 0) {
      snprintf(full, sizeof full, "%s, and the session could not be frozen (%s)", why, shk_strerror(r));
      end_session(ap, s, full, NULL);
      return;
    }
    s->frozen = true;
  }
  int64_t now = shk__approve_now(ap);
  pause_cards(ap, s, now);
  shk__card *c = calloc(1, sizeof *c);
  bool ok = c != NULL;
  if (ok) {
    c->breaker = true;
    c->state = SHK__CARD_PENDING;
    c->shown = true;
    c->s = s;
    c->tier = SHK_APPROVE_ASK;
    c->raised_ms = now;
    c->deadline_ms = now + ap->o.timeout_ms;
    c->cls = sdup("session", &ok);
    c->breaker_why = sdup(why, &ok);
    ok = ok && new_card_id(c->id) == 0;
  }
  if (!ok) {
    if (c)
      card_free(c);
    snprintf(full, sizeof full, "%s, and no breaker card could be raised", why);
    end_session(ap, s, full, NULL);
    return;
  }
  c->next = ap->cards;
  ap->cards = c;
  s->breaker = c;
  queue_event(ap, shk__approve_event(ap, SHK_APPROVE_EV_BREAKER, c, NULL, true));
  kick_timer(ap);
}

/* ---- resolving ---- */

/* Adds one remembered denial; takes `key` (NULL when asprintf failed).
 * Out of memory, the denial is not remembered: the request may prompt
 * again, and is never granted for it. */
static void add_denial(shk__session *s, char *key, const char *reason)
{
  char *rs = key ? strdup(reason) : NULL;
  if (rs && s->n_denied == s->cap_denied) {
    size_t cap = s->cap_denied ? 2 * s->cap_denied : 8;
    shk__denial *d = realloc(s->denied, cap * sizeof *d);
    if (d) {
      s->denied = d;
      s->cap_denied = cap;
    }
  }
  if (!rs || s->n_denied == s->cap_denied) {
    free(key);
    free(rs);
    return;
  }
  s->denied[s->n_denied++] = (shk__denial){ key, rs };
}

static char *denial_key(char kind, const char *cls, const char *what)
{
  char *key;
  return asprintf(&key, "%c:%s\n%s", kind, cls, what) < 0 ? NULL : key;
}

/* Remembers that a card was denied: each exact scope on it and its batch
 * key, so that the same request does not prompt again in this session. */
static void remember_denial(shk__session *s, const shk__card *c, const shk__resolution *res)
{
  char who[300], reason[1024];
  who_text(&res->who, who, sizeof who);
  snprintf(reason, sizeof reason, "denied earlier in this session by %s: %s", who, res->reason);
  for (const shk__attempt *a = c->held; a; a = a->next)
    add_denial(s, denial_key('s', c->cls, a->scope), reason);
  if (c->batch_key)
    add_denial(s, denial_key('k', c->cls, c->batch_key), reason);
}

void shk__approve_finish(shk_approve *ap, shk__card *c, shk__resolution *res)
{
  if (NEVER(!card_open(c) || c->breaker))
    return;
  shk__session *s = c->s;
  c->state = SHK__CARD_RESOLVED;
  c->resolved_ms = shk__approve_now(ap);
  c->result = res->result;
  free(c->result_reason);
  c->result_reason = strdup(res->reason);
  bool counts = res->result == SHK_APPROVE_DENIED || res->result == SHK_APPROVE_TIMED_OUT;
  if (counts) {
    s->consecutive++;
    s->total++;
  } else if (shk_approve_result_approved(res->result)) {
    s->consecutive = 0;
  }
  if (res->result == SHK_APPROVE_DENIED)
    remember_denial(s, c, res);
  shk__event *e = shk__approve_event(ap, SHK_APPROVE_EV_RESOLVED, c, NULL, c->shown);
  shk__approve_event_set(e, res, NULL, NULL);
  queue_event(ap, e);
  release_held(ap, c, res);
  shk__approve_resolution_unref(res);
  kick_timer(ap); /* to forget the card */
  if (counts && (s->consecutive >= ap->o.breaker_consecutive || s->total >= ap->o.breaker_total))
    trip_breaker(ap, s);
}

void shk__approve_to_humans(shk_approve *ap, shk__card *c)
{
  if (c->state != SHK__CARD_REVIEWING)
    return;
  c->state = SHK__CARD_PENDING;
  c->shown = true;
  queue_event(ap, shk__approve_event(ap, SHK_APPROVE_EV_RAISED, c, NULL, true));
}

static int takeover_locked(shk_approve *ap, shk__session *s, const shk_approve_who *who, shk_error *err)
{
  if (s->ended)
    return shk__error_set(err, -ENOENT, "session %s has ended", s->name);
  if (s->frozen)
    return 0;
  if (!ap->o.freeze)
    return shk__error_set(err, -ENOSYS, "this manager has no freezer: it cannot take over session %s",
                          s->name);
  int r = ap->o.freeze(ap->o.ud, s->name);
  if (r == -ENOSYS)
    return shk__error_set(err, r, "session %s has no freezer: its sandbox is in no cgroup of its own, and this "
                          "manager did not launch it", s->name);
  if (r < 0)
    return shk__error_set(err, r, "could not freeze session %s: %s", s->name, shk_strerror(r));
  s->frozen = true;
  pause_cards(ap, s, shk__approve_now(ap));
  shk__event *e = shk__approve_event(ap, SHK_APPROVE_EV_FROZEN, NULL, s, true);
  if (e)
    json_object_set_new(e->root, "by", shk__approve_who_json(who));
  queue_event(ap, e);
  return 0;
}

static int resume_locked(shk_approve *ap, shk__session *s, const shk_approve_who *who, shk_error *err)
{
  if (s->ended)
    return shk__error_set(err, -ENOENT, "session %s has ended", s->name);
  if (!s->frozen)
    return shk__error_set(err, -EINVAL, "session %s is not frozen", s->name);
  int r = ap->o.thaw ? ap->o.thaw(ap->o.ud, s->name) : 0;
  if (r < 0)
    return shk__error_set(err, r, "could not thaw session %s: %s", s->name, shk_strerror(r));
  s->frozen = false;
  s->consecutive = s->total = 0;
  unpause_cards(ap, s, shk__approve_now(ap));
  close_breaker(ap, s, "resume", "resumed by a human", who);
  shk__event *e = shk__approve_event(ap, SHK_APPROVE_EV_RESUMED, NULL, s, true);
  if (e)
    json_object_set_new(e->root, "by", shk__approve_who_json(who));
  queue_event(ap, e);
  return 0;
}

/* The patterns a human may choose: the card's own, or a wider one the
 * caller said the manifest allows, at the card's tier or a stricter one
 * and never Block. */
static int pick_pattern(const shk__card *c, const char *p, shk_approve_tier *tier, shk_error *err)
{
  if (!p || (c->pattern && !strcmp(p, c->pattern))) {
    if (!c->pattern)
      return shk__error_set(err, -EPERM, "card %s proposes no pattern to approve", c->id);
    *tier = c->tier;
    return 0;
  }
  for (size_t i = 0; i < c->n_wider; i++) {
    if (strcmp(p, c->wider[i].pattern))
      continue;
    shk_approve_tier t = c->wider[i].tier;
    if (t >= SHK_APPROVE_BLOCK)
      return shk__error_set(err, -EPERM, "pattern %s is at tier block: no one can approve it", p);
    if (t < c->tier)
      return shk__error_set(err, -EPERM,
                            "pattern %s would be at tier %s, laxer than this card's %s: a pattern is "
                            "approved only at the same or a stricter tier", p, shk_approve_tier_name(t),
                            shk_approve_tier_name(c->tier));
    *tier = t;
    return 0;
  }
  char offered[768] = "";
  size_t n = (size_t)snprintf(offered, sizeof offered, "%s", c->pattern ? c->pattern : "");
  for (size_t i = 0; i < c->n_wider && n < sizeof offered; i++)
    n += (size_t)snprintf(offered + n, sizeof offered - n, "%s%s", n ? ", " : "", c->wider[i].pattern);
  return shk__error_set(err, -EPERM, "pattern %s is not one this card offers (%s)", p,
                        offered[0] ? offered : "it offers none");
}

/* How many different exact scopes a card's held attempts name (siblings
 * of a batch differ; repeated attempts at one scope do not). */
static unsigned distinct_scopes(const shk__card *c)
{
  unsigned n = 0;
  for (const shk__attempt *t = c->held; t; t = t->next) {
    bool seen = false;
    for (const shk__attempt *u = c->held; u != t && !seen; u = u->next)
      seen = !strcmp(u->scope, t->scope);
    n += !seen;
  }
  return n;
}

static int resolve_breaker(shk_approve *ap, shk__card *c, const shk_approve_answer *a, shk_error *err)
{
  switch (a->how) {
  case SHK_APPROVE_RESUME:
    return resume_locked(ap, c->s, &a->who, err);
  case SHK_APPROVE_END: {
    char why[600];
    char clean[512];
    shk__approve_clean_text(a->reason ? a->reason : "", clean, sizeof clean);
    snprintf(why, sizeof why, "ended by a human at its breaker%s%s", clean[0] ? ": " : "", clean);
    end_session(ap, c->s, why, &a->who);
    return 0;
  }
  case SHK_APPROVE_TAKEOVER:
    return 0; /* already frozen */
  case SHK_APPROVE_ONCE: case SHK_APPROVE_SESSION: case SHK_APPROVE_PATTERN:
  case SHK_APPROVE_DENY: case SHK_APPROVE_CANCEL:
    break;
  }
  return shk__error_set(err, -EINVAL, "card %s is a breaker card: it is answered with resume or end",
                        c->id);
}

int shk_approve_resolve(shk_approve *ap, const char *id, const shk_approve_answer *a, shk_error *err)
{
  if (!id || !a)
    return shk__error_set(err, -EINVAL, "approve: a card id and an answer are required");
  int r = check_who(&a->who, err);
  if (r)
    return r;
  if (!shk_approve_how_name(a->how))
    return shk__error_set(err, -EINVAL, "approve: unknown answer");
  pthread_mutex_lock(&ap->mu);
  shk__card *c = shk__approve_find_card(ap, id);
  if (!c || !card_open(c)) {
    r = shk__error_set(err, -ENOENT, "no open card %s (never raised, or already resolved)", id);
    goto out;
  }
  if (c->breaker) {
    r = resolve_breaker(ap, c, a, err);
    goto out;
  }
  shk_approve_result result;
  shk_approve_tier tier = c->tier;
  const char *pattern = NULL;
  switch (a->how) {
  case SHK_APPROVE_ONCE: result = SHK_APPROVE_APPROVED_ONCE; break;
  case SHK_APPROVE_SESSION:
    result = SHK_APPROVE_APPROVED_SESSION;
    /* A batch standing for several exact scopes is granted as one handle:
     * the card's proposed pattern. Why that is no wider than the human
     * meant: the card proposes a pattern only when the policy answers Ask
     * for it (its tier is the card's, never a laxer one), the human saw it
     * on the card, and the manager puts it to the decision again when it
     * grants it. With no pattern the exact scopes are granted one by one,
     * and the answer says so. */
    if (distinct_scopes(c) > 1 && c->pattern) {
      result = SHK_APPROVE_APPROVED_PATTERN;
      pattern = c->pattern;
    }
    break;
  case SHK_APPROVE_PATTERN:
    result = SHK_APPROVE_APPROVED_PATTERN;
    if ((r = pick_pattern(c, a->pattern, &tier, err)))
      goto out;
    pattern = a->pattern ? a->pattern : c->pattern;
    break;
  case SHK_APPROVE_DENY: result = SHK_APPROVE_DENIED; break;
  case SHK_APPROVE_CANCEL: result = SHK_APPROVE_CANCELLED; break;
  case SHK_APPROVE_TAKEOVER:
    r = takeover_locked(ap, c->s, &a->who, err);
    goto out;
  case SHK_APPROVE_RESUME: case SHK_APPROVE_END:
  default:
    r = shk__error_set(err, -EINVAL, "resume and end answer a breaker card; card %s asks about a request",
                       id);
    goto out;
  }
  if (a->granted) {
    a->granted->result = result;
    a->granted->scopes = distinct_scopes(c);
    snprintf(a->granted->pattern, sizeof a->granted->pattern, "%s",
             result == SHK_APPROVE_APPROVED_PATTERN && pattern ? pattern : "");
  }
  shk__resolution *res = shk__approve_resolution_new(result, tier, pattern, a->reason, &a->who);
  if (!res) {
    r = shk__error_set(err, -ENOMEM, "approve: out of memory");
    goto out;
  }
  shk__approve_finish(ap, c, res);
out:
  shk__approve_drain(ap);
  pthread_mutex_unlock(&ap->mu);
  return r;
}

int shk_approve_notify(shk_approve *ap, const shk_approve_notice *n, shk_error *err)
{
  if (!n || !n->session || !n->cls || !n->scope || !n->handle)
    return shk__error_set(err, -EINVAL, "a notice needs a session, a class, a scope and a handle");
  json_t *scope_v = json_loads(n->scope, 0, NULL);
  if (!json_is_object(scope_v)) {
    json_decref(scope_v);
    return shk__error_set(err, -EINVAL, "the notice's scope is not a JSON object");
  }
  pthread_mutex_lock(&ap->mu);
  shk__session *s = find_session(ap, n->session);
  int r = 0;
  if (!s) {
    r = shk__error_set(err, -ENOENT, "no such session: %s", n->session);
  } else {
    shk__event *e = shk__approve_event(ap, SHK_APPROVE_EV_NOTICE, NULL, s, true);
    if (e && e->root) {
      char revoke[SHK_APPROVE_ID_HEX + 64];
      snprintf(revoke, sizeof revoke, "shinken revoke %s", n->handle);
      bool ok = !json_object_set_new(e->root, "class", json_string(n->cls)) &&
                !json_object_set_new(e->root, "scope", json_incref(scope_v)) &&
                !json_object_set_new(e->root, "tier", json_string("notify")) &&
                !json_object_set_new(e->root, "handle", json_string(n->handle)) &&
                !json_object_set_new(e->root, "revoke", json_string(revoke)) &&
                (!n->rule || !json_object_set_new(e->root, "rule", json_string(n->rule))) &&
                (!n->why || !json_object_set_new(e->root, "reason", json_string(n->why)));
      if (!ok) {
        json_decref(e->root);
        e->root = NULL; /* queueing it counts it as lost */
      }
    }
    queue_event(ap, e);
  }
  shk__approve_drain(ap);
  pthread_mutex_unlock(&ap->mu);
  json_decref(scope_v);
  return r;
}

typedef int (*session_op)(shk_approve *, shk__session *, const shk_approve_who *, shk_error *);

static int by_session(shk_approve *ap, const char *name, const shk_approve_who *who, session_op op,
                      shk_error *err)
{
  int r = check_who(who, err);
  if (r)
    return r;
  pthread_mutex_lock(&ap->mu);
  shk__session *s = find_session(ap, name);
  r = s ? op(ap, s, who, err) : shk__error_set(err, -ENOENT, "no such session: %s", name ? name : "");
  shk__approve_drain(ap);
  pthread_mutex_unlock(&ap->mu);
  return r;
}

int shk_approve_takeover(shk_approve *ap, const char *session, const shk_approve_who *who, shk_error *err)
{
  return by_session(ap, session, who, takeover_locked, err);
}

int shk_approve_resume(shk_approve *ap, const char *session, const shk_approve_who *who, shk_error *err)
{
  return by_session(ap, session, who, resume_locked, err);
}

int shk_approve_session_frozen(shk_approve *ap, const char *session)
{
  pthread_mutex_lock(&ap->mu);
  const shk__session *s = find_session(ap, session);
  int r = s ? s->frozen : -ENOENT;
  pthread_mutex_unlock(&ap->mu);
  return r;
}

/* ---- raising ---- */

static const shk__denial *denied(const shk__session *s, const char *key)
{
  for (size_t i = 0; key && i < s->n_denied; i++)
    if (!strcmp(s->denied[i].key, key))
      return &s->denied[i];
  return NULL;
}

static bool same_batch(const shk__card *c, const shk__session *s, const shk_approve_request *rq)
{
  return !c->breaker && c->s == s && c->tier == rq->tier && c->batch_key &&
         !strcmp(c->batch_key, rq->batch_key) && !strcmp(c->cls, rq->cls);
}

/* Refuses a raise at once, with an event for the audit. */
static int refuse(shk_approve *ap, const shk_approve_request *rq, const char *scope, shk_error *err,
                  int code, const char *fmt, ...) SHK_PRINTF(6, 7);
static int refuse(shk_approve *ap, const shk_approve_request *rq, const char *scope, shk_error *err,
                  int code, const char *fmt, ...)
{
  char why[1024];
  va_list va;
  va_start(va, fmt);
  vsnprintf(why, sizeof why, fmt, va);
  va_end(va);
  shk__event *e = shk__approve_event(ap, SHK_APPROVE_EV_REFUSED, NULL, NULL, false);
  if (e) {
    json_object_set_new(e->root, "session", json_string(rq->session));
    json_object_set_new(e->root, "class", json_string(rq->cls));
    json_t *sv = json_loads(scope, 0, NULL);
    if (sv)
      json_object_set_new(e->root, "scope", sv);
    json_object_set_new(e->root, "tier", json_string(shk_approve_tier_name(rq->tier)));
    shk__approve_event_set(e, NULL, why, NULL);
  }
  queue_event(ap, e);
  return shk__error_set(err, code, "%s", why);
}

static int check_request(const shk_approve_request *rq, shk_error *err)
{
  if (!rq || !rq->session || !rq->cls || !*rq->cls || !rq->scope || !rq->release)
    return shk__error_set(err, -EINVAL, "approve: a request needs a session, a class, a scope and a release");
  if (rq->tier == SHK_APPROVE_BLOCK)
    return shk__error_set(err, -EINVAL,
                          "approve: a Block-tier request is refused by the decision and never raised");
  if (!shk_approve_tier_name(rq->tier))
    return shk__error_set(err, -EINVAL, "approve: unknown tier");
  if (rq->provenance && strcmp(rq->provenance, "first-party") && strcmp(rq->provenance, "external"))
    return shk__error_set(err, -EINVAL, "approve: provenance must be first-party or external");
  if (rq->timeout_ms < 0)
    return shk__error_set(err, -EINVAL, "approve: a timeout must not be negative");
  if (rq->n_wider && !rq->wider)
    return shk__error_set(err, -EINVAL, "approve: wider patterns are missing");
  for (size_t i = 0; i < rq->n_wider; i++)
    if (!rq->wider[i].pattern || !shk_approve_tier_name(rq->wider[i].tier))
      return shk__error_set(err, -EINVAL, "approve: wider pattern %zu needs a pattern and a tier", i);
  return 0;
}

/* Takes the reference to scope_v when it succeeds. */
static shk__card *card_new(const shk_approve_request *rq, json_t *scope_v, const char *scope, bool batchable)
{
  shk__card *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  bool ok = true;
  c->cls = sdup(rq->cls, &ok);
  c->scope = sdup(scope, &ok);
  c->provenance = sdup(rq->provenance ? rq->provenance : "first-party", &ok);
  c->rule = sdup(rq->rule, &ok);
  c->why = sdup(rq->why, &ok);
  c->batch_key = batchable ? sdup(rq->batch_key, &ok) : NULL;
  c->pattern = sdup(rq->pattern, &ok);
  c->ingested_external = rq->ingested_external;
  c->touched_sensitive = rq->touched_sensitive;
  c->tier = rq->tier;
  if (rq->n_wider && ok) {
    c->wider = calloc(rq->n_wider, sizeof *c->wider);
    ok = c->wider != NULL;
    for (size_t i = 0; ok && i < rq->n_wider; i++, c->n_wider++) {
      c->wider[i].pattern = sdup(rq->wider[i].pattern, &ok);
      c->wider[i].tier = rq->wider[i].tier;
    }
  }
  ok = ok && new_card_id(c->id) == 0;
  if (!ok) {
    card_free(c);
    return NULL;
  }
  c->scope_v = scope_v;
  return c;
}

int shk_approve_raise(shk_approve *ap, const shk_approve_request *rq, char card_out[SHK_APPROVE_ID_HEX],
                      shk_error *err)
{
  int r = check_request(rq, err);
  if (r)
    return r;
  json_error_t jerr;
  json_t *scope_v = json_loads(rq->scope, JSON_REJECT_DUPLICATES, &jerr);
  if (!json_is_object(scope_v)) {
    json_decref(scope_v);
    return shk__error_set(err, -EINVAL, "approve: the scope must be a JSON object (%s)",
                          scope_v ? "not an object" : jerr.text);
  }
  /* One spelling per scope, so that a remembered denial matches however
   * the caller formats the same scope. */
  char *scope = json_dumps(scope_v, JSON_COMPACT | JSON_SORT_KEYS);
  bool batchable = rq->batch_key && !is_credentials(rq->cls);
  char *skey = scope ? denial_key('s', rq->cls, scope) : NULL;
  char *kkey = batchable ? denial_key('k', rq->cls, rq->batch_key) : NULL;
  shk__attempt *a = calloc(1, sizeof *a);
  bool ok = scope && a && skey && (!batchable || kkey);
  if (ok) {
    a->q.kind = SHK__Q_RELEASE;
    a->ptr = rq->attempt;
    a->release = rq->release;
    a->session = sdup(rq->session, &ok);
    a->cls = sdup(rq->cls, &ok);
    a->scope = sdup(scope, &ok);
    a->tier = rq->tier;
  }
  if (!ok) {
    r = shk__error_set(err, -ENOMEM, "approve: out of memory");
    goto done;
  }

  pthread_mutex_lock(&ap->mu);
  int64_t now = shk__approve_now(ap);
  a->raised_ms = now;
  shk__session *s = find_session(ap, rq->session);
  const shk__denial *d;
  if (ap->shut) {
    r = refuse(ap, rq, scope, err, -EACCES, "the manager is shutting down");
  } else if (!s) {
    r = shk__error_set(err, -ENOENT, "no such session: %s", rq->session);
  } else if (s->ended) {
    r = refuse(ap, rq, scope, err, -EACCES, "session %s has ended", s->name);
  } else if (s->breaker) {
    r = refuse(ap, rq, scope, err, -EACCES,
               "session %s is stopped by its breaker until a human resumes it", s->name);
  } else if ((d = denied(s, skey)) || (d = denied(s, kkey))) {
    r = refuse(ap, rq, scope, err, -EACCES, "%s", d->reason);
  } else if (s->n_held >= ap->o.max_held) {
    r = refuse(ap, rq, scope, err, -EBUSY, "session %s already holds %u attempts", s->name,
               ap->o.max_held);
  }
  if (r)
    goto unlock;

  shk__card *c = NULL, *recent = NULL;
  for (shk__card *i = ap->cards; batchable && i && !c; i = i->next)
    if (same_batch(i, s, rq)) {
      if (card_open(i))
        c = i;
      else if (!recent && now < forget_at(ap, i))
        recent = i;
    }
  if (c) {
    /* Join: the card now stands for one more attempt. */
    memcpy(a->card, c->id, sizeof a->card);
    if (c->held_tail)
      c->held_tail->next = a;
    else
      c->held = a;
    c->held_tail = a;
    c->attempts++;
    s->n_held++;
    a = NULL;
    queue_event(ap, shk__approve_event(ap, SHK_APPROVE_EV_UPDATED, c, NULL, c->shown));
    if (card_out)
      memcpy(card_out, c->id, SHK_APPROVE_ID_HEX);
    r = 1;
    goto unlock;
  }
  if (recent) {
    r = refuse(ap, rq, scope, err, -EACCES, "a request like this one was %s a moment ago: %s",
               shk_approve_result_name(recent->result),
               recent->result_reason ? recent->result_reason : shk_approve_result_name(recent->result));
    goto unlock;
  }

  /* A new card. */
  if (!(c = card_new(rq, scope_v, scope, batchable))) {
    r = shk__error_set(err, -ENOMEM, "approve: out of memory");
    goto unlock;
  }
  scope_v = NULL; /* the card's now */
  c->s = s;
  c->raised_ms = now;
  int64_t timeout = rq->timeout_ms ? rq->timeout_ms : ap->o.timeout_ms;
  c->deadline_ms = now + timeout;
  if (s->frozen)
    c->paused_left_ms = timeout;
  memcpy(a->card, c->id, sizeof a->card);
  c->held = c->held_tail = a;
  c->attempts = 1;
  s->n_held++;
  a = NULL;
  c->next = ap->cards;
  ap->cards = c;
  if (card_out)
    memcpy(card_out, c->id, SHK_APPROVE_ID_HEX);
  /* The reviewer sees Ask-tier cards only, and never credentials. */
  bool review = ap->reviewer_argv && c->tier == SHK_APPROVE_ASK && !is_credentials(c->cls) &&
                ap->n_reviews < ap->o.reviewer_max;
  c->state = review ? SHK__CARD_REVIEWING : SHK__CARD_PENDING;
  if (review) {
    queue_event(ap, shk__approve_event(ap, SHK_APPROVE_EV_REVIEWING, c, NULL, false));
    if (shk__approve_review_start(ap, c) < 0)
      shk__approve_to_humans(ap, c);
  } else {
    c->shown = true;
    queue_event(ap, shk__approve_event(ap, SHK_APPROVE_EV_RAISED, c, NULL, true));
  }
  kick_timer(ap);
  r = 0;
unlock:
  shk__approve_drain(ap);
  pthread_mutex_unlock(&ap->mu);
  shk__approve_review_reap(ap);
done:
  if (a)
    attempt_free(a);
  free(skey);
  free(kkey);
  free(scope);
  json_decref(scope_v);
  return r;
}

int shk_approve_withdraw(shk_approve *ap, void *attempt)
{
  int r = -ENOENT;
  pthread_mutex_lock(&ap->mu);
  for (shk__card *c = ap->cards; c && r; c = c->next) {
    shk__attempt *prev = NULL;
    for (shk__attempt *a = c->held; a; prev = a, a = a->next) {
      if (a->ptr != attempt)
        continue;
      if (prev)
        prev->next = a->next;
      else
        c->held = a->next;
      if (c->held_tail == a)
        c->held_tail = prev;
      c->s->n_held--;
      attempt_free(a);
      r = 0;
      break;
    }
  }
  pthread_mutex_unlock(&ap->mu);
  return r;
}

/* ---- time ---- */

static int64_t next_deadline(shk_approve *ap, int64_t now)
{
  int64_t next = -1;
  for (shk__card *c = ap->cards; c; c = c->next) {
    int64_t at = card_open(c) ? (c->paused_left_ms ? -1 : c->deadline_ms) : forget_at(ap, c);
    if (at < 0)
      continue;
    int64_t in = at > now ? at - now : 0;
    if (next < 0 || in < next)
      next = in;
  }
  return next;
}

static int64_t tick_locked(shk_approve *ap)
{
  int64_t now = shk__approve_now(ap);
  for (shk__card **pp = &ap->cards; *pp;) {
    shk__card *c = *pp;
    if (!card_open(c)) {
      if (now >= forget_at(ap, c)) {
        *pp = c->next;
        card_free(c);
        continue;
      }
    } else if (!c->paused_left_ms && c->deadline_ms <= now) {
      if (c->breaker)
        end_session(ap, c->s, "nobody answered its breaker card in time", NULL);
      else
        shk__approve_finish(ap, c, &res_timeout);
      /* c is resolved now; the next pass over it keeps it for the window.
       * Cards raised meanwhile (a breaker's) went in at the head. */
    }
    pp = &c->next;
  }
  return next_deadline(ap, now);
}

int64_t shk_approve_tick(shk_approve *ap)
{
  pthread_mutex_lock(&ap->mu);
  int64_t next = tick_locked(ap);
  shk__approve_drain(ap);
  pthread_mutex_unlock(&ap->mu);
  shk__approve_review_reap(ap);
  return next;
}

void *shk__approve_timer_main(void *arg)
{
  shk_approve *ap = arg;
  pthread_mutex_lock(&ap->mu);
  while (!ap->shut) {
    ap->timer_kick = false;
    int64_t next = tick_locked(ap);
    shk__approve_drain(ap);
    if (ap->shut || ap->timer_kick)
      continue;
    if (next < 0) {
      pthread_cond_wait(&ap->timer_cond, &ap->mu);
    } else {
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      ts.tv_sec += next / 1000;
      ts.tv_nsec += (next % 1000) * 1000000;
      if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
      }
      pthread_cond_timedwait(&ap->timer_cond, &ap->mu, &ts);
    }
  }
  pthread_mutex_unlock(&ap->mu);
  return NULL;
}

void shk_approve_shutdown(shk_approve *ap)
{
  pthread_mutex_lock(&ap->mu);
  bool first = !ap->shut;
  ap->shut = true;
  for (shk__card *c = ap->cards; first && c; c = c->next) {
    if (!card_open(c))
      continue;
    if (c->breaker)
      close_breaker(ap, c->s, "end", "the manager is shutting down", NULL);
    else
      shk__approve_finish(ap, c, &res_shutdown);
  }
  kick_timer(ap);
  shk__approve_drain(ap);
  shk__approve_quiesce(ap);
  bool join_timer = ap->has_timer && !pthread_equal(pthread_self(), ap->timer);
  ap->has_timer = ap->has_timer && !join_timer;
  pthread_mutex_unlock(&ap->mu);
  shk__approve_review_stop_all(ap);
  if (join_timer)
    pthread_join(ap->timer, NULL);
}

/* ---- reading ---- */

int shk_approve_list(shk_approve *ap, const char *session, char **json_out)
{
  *json_out = NULL;
  json_t *arr = json_array();
  bool ok = arr != NULL;
  pthread_mutex_lock(&ap->mu);
  for (shk__card *c = ap->cards; ok && c; c = c->next)
    if (c->state == SHK__CARD_PENDING && (!session || !strcmp(session, c->s->name)))
      ok = json_array_append_new(arr, shk__approve_card_json(c)) == 0;
  pthread_mutex_unlock(&ap->mu);
  if (ok)
    *json_out = json_dumps(arr, JSON_COMPACT);
  json_decref(arr);
  return *json_out ? 0 : -ENOMEM;
}

int shk_approve_subscribe(shk_approve *ap, shk_approve_line_fn fn, void *ud, uint64_t *id_out,
                          shk_error *err)
{
  if (!fn)
    return shk__error_set(err, -EINVAL, "approve: a subscriber needs a function");
  shk__sub *sub = calloc(1, sizeof *sub);
  if (!sub)
    return shk__error_set(err, -ENOMEM, "approve: out of memory");
  sub->fn = fn;
  sub->ud = ud;
  pthread_mutex_lock(&ap->mu);
  /* The snapshot first, made under the same lock hold that registers the
   * subscriber: every later event has a larger seq than `since`, so the
   * subscriber sees each card once, in order. */
  shk__event *snap = NULL, **tail = &snap;
  bool ok = true;
  sub->id = ++ap->next_sub;
  sub->since = ap->seq;
  for (shk__card *c = ap->cards; ok && c; c = c->next) {
    if (c->state != SHK__CARD_PENDING)
      continue;
    shk__event *e = shk__approve_snapshot_event(ap, c, sub->id);
    ok = e != NULL;
    if (e) {
      *tail = e;
      tail = (shk__event **)&e->q.next;
    }
  }
  if (!ok) {
    while (snap) {
      shk__event *n = (shk__event *)snap->q.next;
      shk__approve_event_free(snap);
      snap = n;
    }
    pthread_mutex_unlock(&ap->mu);
    free(sub);
    return shk__error_set(err, -ENOMEM, "approve: out of memory");
  }
  shk__sub **pp = &ap->subs;
  while (*pp)
    pp = &(*pp)->next;
  *pp = sub;
  while (snap) {
    shk__event *n = (shk__event *)snap->q.next;
    shk__approve_queue(ap, &snap->q);
    snap = n;
  }
  if (id_out)
    *id_out = sub->id;
  shk__approve_drain(ap);
  pthread_mutex_unlock(&ap->mu);
  return 0;
}

void shk_approve_unsubscribe(shk_approve *ap, uint64_t id)
{
  pthread_mutex_lock(&ap->mu);
  for (shk__sub **pp = &ap->subs; *pp; pp = &(*pp)->next)
    if ((*pp)->id == id) {
      shk__sub *s = *pp;
      *pp = s->next;
      free(s);
      break;
    }
  while (ap->delivering == id && !(ap->draining && pthread_equal(ap->drainer, pthread_self())))
    pthread_cond_wait(&ap->cond, &ap->mu);
  pthread_mutex_unlock(&ap->mu);
}

/* ---- what the agent reads ---- */

size_t shk_approve_outcome_text(const shk_approve_outcome *o, char *buf, size_t len)
{
  char who[300] = "";
  if (o->by)
    who_text(o->by, who, sizeof who);
  bool reviewer = o->by && o->by->surface && !strcmp(o->by->surface, "reviewer");
  const char *what = o->cls ? o->cls : "the request";
  const char *scope = o->scope ? o->scope : "";
  int n;
  switch (o->result) {
  case SHK_APPROVE_APPROVED_ONCE:
  case SHK_APPROVE_APPROVED_SESSION:
  case SHK_APPROVE_APPROVED_PATTERN:
    n = snprintf(buf, len, "Approved by %s: %s %s%s%s.", who, what, scope,
                 o->pattern ? " under the pattern " : "", o->pattern ? o->pattern : "");
    break;
  case SHK_APPROVE_DENIED:
    n = snprintf(buf, len,
                 "Refused: %s %s was denied by %s%s. Reason: %s. Asking again in this session will not "
                 "help; do the task another way or ask the user.", what, scope,
                 reviewer ? "" : "a human, ", who, o->reason);
    break;
  case SHK_APPROVE_CANCELLED:
    n = snprintf(buf, len,
                 "Refused: %s %s was dismissed by a human (%s) without a decision. You may ask again "
                 "if it is still needed.", what, scope, who);
    break;
  case SHK_APPROVE_TIMED_OUT:
    n = snprintf(buf, len,
                 "Refused: %s %s timed out waiting for a human to approve it. Asking again helps only "
                 "when someone is there to answer.", what, scope);
    break;
  case SHK_APPROVE_ENDED:
    n = snprintf(buf, len, "Refused: %s %s: the session ended (%s).", what, scope, o->reason);
    break;
  case SHK_APPROVE_SHUTDOWN:
  default:
    n = snprintf(buf, len, "Refused: %s %s: the permission manager is shutting down.", what, scope);
    break;
  }
  return n < 0 ? 0 : (size_t)n;
}
