/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for src/approve: the Ask loop's card machine, driven through
 * its public API with a fake clock.
 *
 * Most cases are scenarios: a table of steps (raise an attempt, answer its
 * card, let time pass, check how an attempt was released). After every
 * scenario the module is shut down and each attempt is checked to have
 * been released exactly once if the module took it, and never if it did
 * not. The reviewer tests run real small scripts; the stress test raises
 * from several threads while others resolve, tick and resume. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "approve/approve-internal.h"
#include "shinken/approve.h"

#define MAX_ATT 64

/* ---- the fixture ---- */

typedef struct fx fx;

typedef struct att {
  fx *f;
  int idx;
  int count;                 /* releases */
  bool taken;                /* raise returned >= 0 */
  char card[SHK_APPROVE_ID_HEX];
  shk_approve_result result;
  char pattern[128], reason[512], surface[32], scope[256], text[1024];
  shk_approve_tier tier;
} att;

struct fx {
  int64_t now;
  shk_approve *ap;
  att a[MAX_ATT];
  unsigned ev[16];           /* events by kind */
  int freezes, thaws, ends, freeze_ret;
  char ended[128], end_why[512];
  char *lines;               /* what a subscriber got */
  size_t n_lines;
  char last_reviewed[512];
  pthread_mutex_t mu;
  pthread_cond_t cv;
};

static int64_t fake_clock(void *ud)
{
  return ((fx *)ud)->now;
}

static int on_freeze(void *ud, const char *s)
{
  (void)s;
  fx *f = ud;
  pthread_mutex_lock(&f->mu);
  f->freezes++;
  int r = f->freeze_ret;
  pthread_mutex_unlock(&f->mu);
  return r;
}

static int on_thaw(void *ud, const char *s)
{
  (void)s;
  fx *f = ud;
  pthread_mutex_lock(&f->mu);
  f->thaws++;
  pthread_mutex_unlock(&f->mu);
  return 0;
}

static void on_end(void *ud, const char *s, const char *why)
{
  fx *f = ud;
  pthread_mutex_lock(&f->mu);
  f->ends++;
  snprintf(f->ended, sizeof f->ended, "%s", s);
  snprintf(f->end_why, sizeof f->end_why, "%s", why);
  pthread_mutex_unlock(&f->mu);
}

static void on_event(void *ud, const shk_approve_event *e)
{
  fx *f = ud;
  pthread_mutex_lock(&f->mu);
  f->ev[e->kind]++;
  /* Every event's JSON parses and says what its kind says. */
  json_t *j = json_loads(e->json, JSON_DISABLE_EOF_CHECK, NULL);
  assert_non_null(j);
  assert_string_equal(json_string_value(json_object_get(j, "event")), shk_approve_event_name(e->kind));
  json_decref(j);
  assert_int_equal(e->json[strlen(e->json) - 1], '\n');
  if (e->kind == SHK_APPROVE_EV_REVIEWED)
    snprintf(f->last_reviewed, sizeof f->last_reviewed, "%s", e->json);
  pthread_cond_broadcast(&f->cv);
  pthread_mutex_unlock(&f->mu);
}

static void on_release(void *attempt, const shk_approve_outcome *o)
{
  att *a = attempt;
  pthread_mutex_lock(&a->f->mu);
  a->count++;
  a->result = o->result;
  a->tier = o->tier;
  snprintf(a->pattern, sizeof a->pattern, "%s", o->pattern ? o->pattern : "");
  snprintf(a->reason, sizeof a->reason, "%s", o->reason);
  snprintf(a->surface, sizeof a->surface, "%s", o->by->surface);
  snprintf(a->scope, sizeof a->scope, "%s", o->scope);
  shk_approve_outcome_text(o, a->text, sizeof a->text);
  assert_string_equal(o->card, a->card);
  pthread_cond_broadcast(&a->f->cv);
  pthread_mutex_unlock(&a->f->mu);
}

static void on_line(void *ud, const char *line, size_t len)
{
  fx *f = ud;
  assert_true(len > 0 && line[len - 1] == '\n');
  f->lines = realloc(f->lines, f->n_lines + len + 1);
  memcpy(f->lines + f->n_lines, line, len);
  f->n_lines += len;
  f->lines[f->n_lines] = '\0';
}

typedef struct setup {
  unsigned consecutive, total;
  bool surface;
  bool no_freezer;
  int freeze_ret;
  unsigned max_held;
  const char *const *reviewer;
  int64_t reviewer_timeout_ms;
} setup;

static fx *fx_new(const setup *su)
{
  fx *f = calloc(1, sizeof *f);
  assert_non_null(f);
  pthread_mutex_init(&f->mu, NULL);
  pthread_cond_init(&f->cv, NULL);
  f->now = 1700000000000;
  f->freeze_ret = su->freeze_ret;
  for (int i = 0; i < MAX_ATT; i++) {
    f->a[i].f = f;
    f->a[i].idx = i;
  }
  shk_approve_opts o = {
    .breaker_consecutive = su->consecutive,
    .breaker_total = su->total,
    .max_held = su->max_held,
    .reviewer_argv = su->reviewer,
    .reviewer_timeout_ms = su->reviewer_timeout_ms,
    .clock = fake_clock,
    .freeze = su->no_freezer ? NULL : on_freeze,
    .thaw = su->no_freezer ? NULL : on_thaw,
    .end = on_end,
    .on_event = on_event,
    .ud = f,
  };
  shk_error err = { 0 };
  assert_int_equal(shk_approve_new(&o, &f->ap, &err), 0);
  shk_approve_set_surface(f->ap, su->surface);
  static const char *const names[] = { "s1", "s2" };
  for (size_t i = 0; i < 2; i++) {
    shk_approve_session s = { names[i], i ? "second" : "first", "agent --task", "/work", 1, "agent-x",
                              "model-y" };
    assert_int_equal(shk_approve_session_open(f->ap, &s, &err), 0);
  }
  return f;
}

/* Shuts down, checks exactly-once release of every attempt, frees. */
static void fx_free(fx *f)
{
  shk_approve_shutdown(f->ap);
  for (int i = 0; i < MAX_ATT; i++) {
    if (f->a[i].count != (f->a[i].taken ? 1 : 0))
      fail_msg("attempt %d was released %d times (taken: %d)", i, f->a[i].count, f->a[i].taken);
  }
  assert_int_equal(shk_approve_lost_events(f->ap), 0);
  shk_approve_free(f->ap);
  free(f->lines);
  pthread_cond_destroy(&f->cv);
  pthread_mutex_destroy(&f->mu);
  free(f);
}

static char *scope_of(const char *host, char *buf, size_t len)
{
  snprintf(buf, len, "{\"domains\": [\"%s:443\"]}", host);
  return buf;
}

/* ---- the steps ---- */

typedef enum op {
  S_END,
  S_RAISE,     /* att, host, key, tier, session, cls, wider; expect */
  S_ANSWER,    /* the card of att: how, pattern, reason, who; expect */
  S_WAIT,      /* ms pass, then a tick */
  S_RELEASED,  /* att was released once with result (and pattern/reason containing want) */
  S_HELD,      /* att is still held */
  S_SAME_CARD, /* att and n are on one card (n < 0: on different cards) */
  S_FREEZES,   /* freeze was called n times */
  S_THAWS,
  S_ENDS,      /* end was called n times */
  S_EVENTS,    /* n events of kind */
  S_RESUME,    /* session; who; expect */
  S_TAKEOVER,
  S_SURFACE,   /* n: connected or not */
  S_CLOSE,     /* session_close(session) */
  S_SHUTDOWN,
  S_LISTED,    /* n cards listed for session (NULL: all) */
  S_WITHDRAW,  /* att is taken back; expect */
} op;

typedef struct step {
  op op;
  int att;
  const char *host;
  const char *key;
  const char *tier;       /* NULL: "ask" */
  const char *session;    /* NULL: "s1" */
  const char *cls;        /* NULL: "net.egress" */
  const char *wider;      /* "pattern@tier pattern@tier" */
  shk_approve_how how;
  const char *pattern;
  const char *reason;
  const char *who;        /* NULL: a good CLI peer */
  int expect;
  shk_approve_result result;
  const char *want;
  int64_t ms;
  int n;
  shk_approve_event_kind kind;
} step;

#define RAISE(i, h, k, e) { .op = S_RAISE, .att = i, .host = h, .key = k, .expect = e }
#define RAISE_T(i, h, k, t, e) { .op = S_RAISE, .att = i, .host = h, .key = k, .tier = t, .expect = e }
#define RAISE_S(i, s, h, k, e) { .op = S_RAISE, .att = i, .host = h, .key = k, .session = s, .expect = e }
#define RAISE_C(i, c, h, k, e) { .op = S_RAISE, .att = i, .host = h, .key = k, .cls = c, .expect = e }
#define RAISE_W(i, h, k, w, e) { .op = S_RAISE, .att = i, .host = h, .key = k, .wider = w, .expect = e }
#define ANSWER(i, h, e) { .op = S_ANSWER, .att = i, .how = SHK_APPROVE_##h, .expect = e }
#define ANSWER_P(i, p, e) { .op = S_ANSWER, .att = i, .how = SHK_APPROVE_PATTERN, .pattern = p, .expect = e }
#define ANSWER_R(i, h, r, e) { .op = S_ANSWER, .att = i, .how = SHK_APPROVE_##h, .reason = r, .expect = e }
#define ANSWER_W(i, h, w, e) { .op = S_ANSWER, .att = i, .how = SHK_APPROVE_##h, .who = w, .expect = e }
#define WAIT(t) { .op = S_WAIT, .ms = t }
#define RELEASED(i, r) { .op = S_RELEASED, .att = i, .result = SHK_APPROVE_##r }
#define RELEASED_W(i, r, w) { .op = S_RELEASED, .att = i, .result = SHK_APPROVE_##r, .want = w }
#define HELD(i) { .op = S_HELD, .att = i }
#define SAME_CARD(i, j) { .op = S_SAME_CARD, .att = i, .n = j }
#define OTHER_CARD(i, j) { .op = S_SAME_CARD, .att = i, .n = -(j) - 1 }
#define FREEZES(k) { .op = S_FREEZES, .n = k }
#define THAWS(k) { .op = S_THAWS, .n = k }
#define ENDS(k) { .op = S_ENDS, .n = k }
#define EVENTS(k, c) { .op = S_EVENTS, .kind = SHK_APPROVE_EV_##k, .n = c }
#define RESUME(s, e) { .op = S_RESUME, .session = s, .expect = e }
#define TAKEOVER(s, e) { .op = S_TAKEOVER, .session = s, .expect = e }
#define SURFACE(k) { .op = S_SURFACE, .n = k }
#define CLOSE(s) { .op = S_CLOSE, .session = s }
#define SHUTDOWN() { .op = S_SHUTDOWN }
#define LISTED(s, k) { .op = S_LISTED, .session = s, .n = k }
#define WITHDRAW(i, e) { .op = S_WITHDRAW, .att = i, .expect = e }

typedef struct scenario {
  const char *name;
  setup su;
  step steps[48];
} scenario;

static shk_approve_tier tier_of(const char *t)
{
  if (!t || !strcmp(t, "ask"))
    return SHK_APPROVE_ASK;
  if (!strcmp(t, "notify"))
    return SHK_APPROVE_NOTIFY;
  if (!strcmp(t, "auto"))
    return SHK_APPROVE_AUTO;
  return SHK_APPROVE_BLOCK;
}

static shk_approve_who who_of(const char *w)
{
  shk_approve_who good = { "cli", 1000, 4242, "/usr/bin/shinken", NULL };
  if (!w)
    return good;
  if (!strcmp(w, "nobody"))
    return (shk_approve_who){ NULL, -1, 0, NULL, NULL };
  if (!strcmp(w, "reviewer") || !strcmp(w, "timeout") || !strcmp(w, "manager"))
    return (shk_approve_who){ w, 1000, 1, "/x", NULL };
  if (!strcmp(w, "cli-nopid"))
    return (shk_approve_who){ "cli", 1000, 0, "/usr/bin/shinken", NULL };
  if (!strcmp(w, "panel"))
    return (shk_approve_who){ "panel", -1, 0, NULL, "alice" };
  if (!strcmp(w, "panel-nouser"))
    return (shk_approve_who){ "panel", -1, 0, NULL, NULL };
  return (shk_approve_who){ w, 1000, 4242, "/usr/bin/shinken", NULL };
}

static int do_raise(fx *f, const step *st)
{
  att *a = &f->a[st->att];
  char scope[256];
  shk_approve_pattern wider[4];
  char wbuf[256];
  size_t nw = 0;
  if (st->wider) {
    snprintf(wbuf, sizeof wbuf, "%s", st->wider);
    for (char *save, *t = strtok_r(wbuf, " ", &save); t && nw < 4; t = strtok_r(NULL, " ", &save)) {
      char *at = strchr(t, '@');
      *at = '\0';
      wider[nw++] = (shk_approve_pattern){ t, tier_of(at + 1) };
    }
  }
  /* A key shaped like a pattern is the pattern the card proposes (as the
   * manager's keys are); "nopat" proposes none; any other key proposes
   * the host itself. */
  char pattern[160];
  if (st->key && st->key[0] == '*')
    snprintf(pattern, sizeof pattern, "%s", st->key);
  else
    snprintf(pattern, sizeof pattern, "%s:443", st->host);
  bool none = st->key && !strcmp(st->key, "nopat");
  shk_approve_request rq = {
    .session = st->session ? st->session : "s1",
    .cls = st->cls ? st->cls : "net.egress",
    .scope = scope_of(st->host, scope, sizeof scope),
    .provenance = "external",
    .ingested_external = true,
    .tier = tier_of(st->tier),
    .rule = "project.ask-egress",
    .why = "the decision's own line",
    .batch_key = st->key,
    .pattern = none ? NULL : pattern,
    .wider = wider,
    .n_wider = nw,
    .attempt = a,
    .release = on_release,
  };
  shk_error err = { 0 };
  int r = shk_approve_raise(f->ap, &rq, a->card, &err);
  if (r != st->expect)
    fail_msg("raise %d: got %d (%s), want %d", st->att, r, err.message, st->expect);
  if (r < 0)
    assert_true(err.message[0] != '\0');
  a->taken = r >= 0;
  return r;
}

static void check_step(fx *f, const step *st);

static void run_steps(fx *f, const step *steps)
{
  shk_error err = { 0 };
  for (const step *st = steps; st->op != S_END; st++) {
    att *a = &f->a[st->att];
    switch (st->op) {
    case S_RELEASED: case S_HELD: case S_FREEZES: case S_THAWS: case S_ENDS: case S_EVENTS:
      /* What callbacks wrote, read under the lock they write it with. */
      pthread_mutex_lock(&f->mu);
      check_step(f, st);
      pthread_mutex_unlock(&f->mu);
      break;
    case S_END:
      break;
    case S_RAISE:
      do_raise(f, st);
      break;
    case S_ANSWER: {
      shk_approve_granted granted = { .scopes = 0 };
      shk_approve_answer an = { st->how, st->pattern, st->reason, who_of(st->who), &granted };
      int r = shk_approve_resolve(f->ap, a->card, &an, &err);
      if (r != st->expect)
        fail_msg("answer %s on attempt %d: got %d (%s), want %d", shk_approve_how_name(st->how), st->att,
                 r, err.message, st->expect);
      /* n, when set: the distinct exact scopes the answer says it granted. */
      if (!r && st->n && granted.scopes != (unsigned)st->n)
        fail_msg("answer on attempt %d: %u scopes, want %d", st->att, granted.scopes, st->n);
      if (r)
        assert_true(err.message[0] != '\0');
      break;
    }
    case S_WAIT:
      f->now += st->ms;
      shk_approve_tick(f->ap);
      break;
    case S_SAME_CARD: {
      bool same = st->n >= 0;
      att *b = &f->a[same ? st->n : -st->n - 1];
      if (same != !strcmp(a->card, b->card))
        fail_msg("attempts %d and %d: cards %s and %s", st->att, b->idx, a->card, b->card);
      break;
    }
    case S_RESUME:
    case S_TAKEOVER: {
      shk_approve_who w = who_of(st->who);
      const char *s = st->session ? st->session : "s1";
      int r = st->op == S_RESUME ? shk_approve_resume(f->ap, s, &w, &err)
                                 : shk_approve_takeover(f->ap, s, &w, &err);
      if (r != st->expect)
        fail_msg("%s %s: got %d (%s), want %d", st->op == S_RESUME ? "resume" : "takeover", s, r,
                 err.message, st->expect);
      /* What the sessions listing says of it follows what was done. */
      if (r == 0 && shk_approve_session_frozen(f->ap, s) != (st->op == S_TAKEOVER))
        fail_msg("%s %s: frozen is %d after it", st->op == S_RESUME ? "resume" : "takeover", s,
                 shk_approve_session_frozen(f->ap, s));
      break;
    }
    case S_SURFACE:
      shk_approve_set_surface(f->ap, st->n);
      break;
    case S_CLOSE:
      assert_int_equal(shk_approve_session_close(f->ap, st->session), 0);
      break;
    case S_SHUTDOWN:
      shk_approve_shutdown(f->ap);
      break;
    case S_WITHDRAW: {
      int r = shk_approve_withdraw(f->ap, a);
      if (r != st->expect)
        fail_msg("withdraw %d: got %d, want %d", st->att, r, st->expect);
      /* Taken back: the module must never release it now. */
      if (!r)
        a->taken = false;
      break;
    }
    case S_LISTED: {
      char *text = NULL;
      assert_int_equal(shk_approve_list(f->ap, st->session, &text), 0);
      json_t *arr = json_loads(text, 0, NULL);
      assert_true(json_is_array(arr));
      if (json_array_size(arr) != (size_t)st->n)
        fail_msg("%zu cards listed, want %d: %s", json_array_size(arr), st->n, text);
      json_decref(arr);
      free(text);
      break;
    }
    }
  }
}

static void check_step(fx *f, const step *st)
{
  att *a = &f->a[st->att];
  if (st->op == S_RELEASED) {
    if (a->count != 1 || a->result != st->result)
      fail_msg("attempt %d: released %d times as %s, want once as %s", st->att, a->count,
               a->count ? shk_approve_result_name(a->result) : "-", shk_approve_result_name(st->result));
    if (st->want && !strstr(a->pattern, st->want) && !strstr(a->reason, st->want) &&
        !strstr(a->surface, st->want))
      fail_msg("attempt %d: pattern '%s', reason '%s', by '%s' do not mention '%s'", st->att, a->pattern,
               a->reason, a->surface, st->want);
  } else if (st->op == S_HELD && a->count) {
    fail_msg("attempt %d was released as %s, want held", st->att, shk_approve_result_name(a->result));
  } else if (st->op == S_FREEZES) {
    assert_int_equal(f->freezes, st->n);
  } else if (st->op == S_THAWS) {
    assert_int_equal(f->thaws, st->n);
  } else if (st->op == S_ENDS) {
    assert_int_equal(f->ends, st->n);
  } else if (st->op == S_EVENTS && f->ev[st->kind] != (unsigned)st->n) {
    fail_msg("%u %s events, want %d", f->ev[st->kind], shk_approve_event_name(st->kind), st->n);
  }
}

/* ---- the scenarios ---- */

static const setup human = { .surface = true };

static const scenario scenarios[] = {
  { "approve once releases the held attempt once", human, {
      RAISE(0, "a.example.org", "**.example.org:443", 0), EVENTS(RAISED, 1), HELD(0), LISTED(NULL, 1),
      ANSWER(0, ONCE, 0), RELEASED_W(0, APPROVED_ONCE, "cli"), EVENTS(RESOLVED, 1), LISTED(NULL, 0),
      ANSWER(0, ONCE, -ENOENT), RELEASED(0, APPROVED_ONCE),
      RAISE(1, "a.example.org", "**.example.org:443", 0), OTHER_CARD(1, 0), HELD(1) } },
  { "a withdrawn attempt is never released, and its card stays open for the rest", human, {
      RAISE(0, "a.example.org", "k", 0), RAISE(1, "a.example.org", "k", 1), SAME_CARD(0, 1),
      WITHDRAW(0, 0), WITHDRAW(0, -ENOENT), HELD(0), HELD(1), LISTED(NULL, 1),
      ANSWER(1, ONCE, 0), RELEASED(1, APPROVED_ONCE), HELD(0), WITHDRAW(1, -ENOENT),
      RAISE(2, "b.example.org", "k2", 0), WITHDRAW(2, 0), LISTED(NULL, 1), WAIT(200000), HELD(2) } },
  { "approve for the session", human, {
      RAISE(0, "a.example.org", "k", 0), ANSWER(0, SESSION, 0), RELEASED(0, APPROVED_SESSION),
      ANSWER(0, DENY, -ENOENT), RELEASED(0, APPROVED_SESSION) } },
  { "approving a batch of siblings for the session grants its one pattern", human, {
      RAISE(0, "a.example.org", "*.example.org:443", 0), RAISE(1, "b.example.org", "*.example.org:443", 1),
      RAISE(2, "b.example.org", "*.example.org:443", 1), SAME_CARD(0, 2),
      { .op = S_ANSWER, .att = 0, .how = SHK_APPROVE_SESSION, .n = 2 },
      RELEASED_W(0, APPROVED_PATTERN, "*.example.org:443"), RELEASED_W(1, APPROVED_PATTERN, "*.example.org:443"),
      RELEASED_W(2, APPROVED_PATTERN, "*.example.org:443") } },
  { "a batch with no pattern is approved as its exact scopes", human, {
      RAISE(0, "a.example.org", "nopat", 0), RAISE(1, "b.example.org", "nopat", 1), SAME_CARD(0, 1),
      { .op = S_ANSWER, .att = 0, .how = SHK_APPROVE_SESSION, .n = 2 },
      RELEASED(0, APPROVED_SESSION), RELEASED(1, APPROVED_SESSION) } },
  { "one scope asked twice is approved as that scope", human, {
      RAISE(0, "a.example.org", "*.example.org:443", 0), RAISE(1, "a.example.org", "*.example.org:443", 1),
      { .op = S_ANSWER, .att = 0, .how = SHK_APPROVE_SESSION, .n = 1 },
      RELEASED(0, APPROVED_SESSION), RELEASED(1, APPROVED_SESSION) } },
  { "approve the proposed pattern", human, {
      RAISE(0, "a.example.org", "k", 0), ANSWER_P(0, NULL, 0), RELEASED_W(0, APPROVED_PATTERN, "a.example.org:443") } },
  { "approve a wider pattern the manifest allows", human, {
      RAISE_W(0, "a.example.org", "k", "*.example.org:443@ask **.example.org:443@block", 0),
      ANSWER_P(0, "*.example.org:443", 0), RELEASED_W(0, APPROVED_PATTERN, "*.example.org:443") } },
  { "a pattern outside the allowed list, at a laxer tier or at block is refused", human, {
      RAISE_W(0, "a.example.org", "k", "*.example.org:443@notify **.example.org:443@block x.org@ask", 0),
      ANSWER_P(0, "**.org", -EPERM), ANSWER_P(0, "*.example.org:443", -EPERM),
      ANSWER_P(0, "**.example.org:443", -EPERM), HELD(0), ANSWER_P(0, "x.org", 0),
      RELEASED_W(0, APPROVED_PATTERN, "x.org") } },
  { "deny is remembered for the request and its batch key", human, {
      RAISE(0, "a.example.org", "k", 0), ANSWER_R(0, DENY, "not for this task", 0),
      RELEASED_W(0, DENIED, "not for this task"),
      RAISE(1, "a.example.org", NULL, -EACCES), RAISE(2, "b.example.org", "k", -EACCES),
      WAIT(3600000), RAISE(3, "a.example.org", "k", -EACCES),
      RAISE(4, "c.other.org", "k2", 0), RAISE_S(5, "s2", "a.example.org", "k", 0) } },
  { "cancel is not remembered, but refuses siblings within the batch window", human, {
      RAISE(0, "a.example.org", "k", 0), ANSWER(0, CANCEL, 0), RELEASED(0, CANCELLED),
      WAIT(100), RAISE(1, "b.example.org", "k", -EACCES),
      WAIT(300), RAISE(2, "a.example.org", "k", 0), OTHER_CARD(2, 0), HELD(2) } },
  { "a timeout refuses, and is not a denial", human, {
      RAISE(0, "a.example.org", "k", 0), WAIT(119999), HELD(0), WAIT(1), RELEASED_W(0, TIMED_OUT, "timeout"),
      WAIT(1000), RAISE(1, "a.example.org", "k", 0), HELD(1) } },
  { "a card waits its timeout with no surface connected", { .surface = false }, {
      RAISE(0, "a.example.org", "k", 0), WAIT(60000), HELD(0), ANSWER(0, ONCE, 0), RELEASED(0, APPROVED_ONCE),
      RAISE(1, "b.example.org", "k", 0), WAIT(120000), RELEASED(1, TIMED_OUT) } },
  { "siblings join one card, and one answer releases them all", human, {
      RAISE(0, "a.example.org", "**.example.org:443", 0), RAISE(1, "b.example.org", "**.example.org:443", 1),
      RAISE(2, "c.example.org", "**.example.org:443", 1), SAME_CARD(0, 1), SAME_CARD(0, 2),
      EVENTS(RAISED, 1), EVENTS(UPDATED, 2), LISTED("s1", 1),
      ANSWER(0, ONCE, 0), RELEASED(0, APPROVED_ONCE), RELEASED(1, APPROVED_ONCE), RELEASED(2, APPROVED_ONCE) } },
  { "a request joins an open card long after it was raised", human, {
      RAISE(0, "a.example.org", "k", 0), WAIT(90000), RAISE(1, "b.example.org", "k", 1), SAME_CARD(0, 1),
      WAIT(30000), RELEASED(0, TIMED_OUT), RELEASED(1, TIMED_OUT) } },
  { "never batched across tiers, sessions, classes, credentials or without a key", human, {
      RAISE(0, "a.example.org", "k", 0), RAISE_T(1, "a.example.org", "k", "notify", 0),
      RAISE_S(2, "s2", "a.example.org", "k", 0), RAISE_C(3, "credentials", "a.example.org", "k", 0),
      RAISE_C(4, "credentials", "a.example.org", "k", 0), RAISE(5, "a.example.org", NULL, 0),
      RAISE(6, "a.example.org", NULL, 0), RAISE_C(7, "fs.scope", "a.example.org", "k", 0),
      OTHER_CARD(0, 1), OTHER_CARD(0, 2), OTHER_CARD(3, 4), OTHER_CARD(5, 6), OTHER_CARD(0, 7),
      EVENTS(RAISED, 8), EVENTS(UPDATED, 0) } },
  { "block is never raised, and neither is nonsense", human, {
      RAISE_T(0, "a.example.org", "k", "block", -EINVAL), RAISE_S(1, "nosuch", "a.example.org", "k", -ENOENT),
      EVENTS(RAISED, 0), LISTED(NULL, 0) } },
  { "an answer needs an identity", human, {
      RAISE(0, "a.example.org", "k", 0), ANSWER_W(0, ONCE, "nobody", -EPERM), ANSWER_W(0, ONCE, "reviewer", -EPERM),
      ANSWER_W(0, ONCE, "timeout", -EPERM), ANSWER_W(0, DENY, "manager", -EPERM),
      ANSWER_W(0, ONCE, "cli-nopid", -EPERM), ANSWER_W(0, ONCE, "panel-nouser", -EPERM),
      ANSWER_W(0, ONCE, "browser", -EPERM), HELD(0), ANSWER_W(0, ONCE, "panel", 0),
      RELEASED_W(0, APPROVED_ONCE, "panel") } },
  { "three denials in a row freeze the session behind a breaker card", human, {
      RAISE(0, "a.org", "a", 0), ANSWER(0, DENY, 0), RAISE(1, "b.org", "b", 0), ANSWER(1, DENY, 0),
      RAISE(2, "c.org", "c", 0), RAISE(3, "d.org", "d", 0), WAIT(60000), FREEZES(0), ANSWER(2, DENY, 0),
      FREEZES(1), EVENTS(BREAKER, 1), HELD(3), LISTED(NULL, 2), RAISE(4, "e.org", "e", -EACCES),
      /* Card 3 would have timed out by now; its countdown waits while the
       * session is frozen. */
      WAIT(100000), HELD(3), RESUME("s1", 0), THAWS(1), LISTED(NULL, 1), RAISE(5, "e.org", "e", 0),
      WAIT(59999), HELD(3), WAIT(1), RELEASED(3, TIMED_OUT), HELD(5), WAIT(60000), RELEASED(5, TIMED_OUT),
      ENDS(0) } },
  { "an approval between denials resets the count", human, {
      RAISE(0, "a.org", "a", 0), ANSWER(0, DENY, 0), RAISE(1, "b.org", "b", 0), ANSWER(1, DENY, 0),
      RAISE(2, "c.org", "c", 0), ANSWER(2, ONCE, 0), RAISE(3, "d.org", "d", 0), ANSWER(3, DENY, 0),
      RAISE(4, "e.org", "e", 0), ANSWER(4, CANCEL, 0), RAISE(5, "f.org", "f", 0), ANSWER(5, DENY, 0),
      FREEZES(0), RAISE(6, "g.org", "g", 0), WAIT(120000), RELEASED(6, TIMED_OUT), FREEZES(1) } },
  { "the breaker card is answered with resume or end only", human, {
      RAISE(0, "a.org", "a", 0), ANSWER(0, DENY, 0), RAISE(1, "b.org", "b", 0), ANSWER(1, DENY, 0),
      RAISE(2, "c.org", "c", 0), RAISE(3, "d.org", "d", 0), ANSWER(2, DENY, 0), ANSWER(3, RESUME, -EINVAL),
      RESUME("s2", -EINVAL), TAKEOVER("s1", 0), FREEZES(1), RAISE_S(4, "s2", "a.org", "a", 0), HELD(4) } },
  { "a breaker with no human surface ends the session", { .surface = false }, {
      RAISE(9, "z.org", "z", 0), RAISE(0, "a.org", "a", 0), ANSWER(0, DENY, 0), RAISE(1, "b.org", "b", 0),
      ANSWER(1, DENY, 0), RAISE(2, "c.org", "c", 0), ANSWER(2, DENY, 0), FREEZES(0), ENDS(1),
      RELEASED_W(9, ENDED, "no human surface"), RAISE(3, "d.org", "d", -EACCES), EVENTS(ENDED, 1),
      RAISE_S(4, "s2", "a.org", "a", 0), HELD(4) } },
  { "a breaker that cannot freeze ends the session", { .surface = true, .freeze_ret = -EIO }, {
      RAISE(0, "a.org", "a", 0), WAIT(120000), RAISE(1, "b.org", "b", 0), WAIT(120000),
      RAISE(2, "c.org", "c", 0), WAIT(120000), FREEZES(1), ENDS(1), RAISE(3, "d.org", "d", -EACCES) } },
  { "a breaker card nobody answers ends the session", human, {
      RAISE(0, "a.org", "a", 0), ANSWER(0, DENY, 0), RAISE(1, "b.org", "b", 0), ANSWER(1, DENY, 0),
      RAISE(2, "c.org", "c", 0), RAISE(3, "d.org", "d", 0), ANSWER(2, DENY, 0), EVENTS(BREAKER, 1),
      WAIT(119999), ENDS(0), HELD(3), WAIT(1), ENDS(1), RELEASED(3, ENDED), RESUME("s1", -ENOENT) } },
  { "twenty denials or timeouts in a session trip the breaker", { .surface = true, .consecutive = 100 }, {
      RAISE(0, "a.org", "a", 0), ANSWER(0, DENY, 0), RAISE(1, "b.org", "b", 0), WAIT(120000),
      RAISE(2, "c.org", "c", 0), ANSWER(2, DENY, 0), RAISE(3, "d.org", "d", 0), ANSWER(3, DENY, 0),
      RAISE(4, "e.org", "e", 0), ANSWER(4, DENY, 0), RAISE(5, "f.org", "f", 0), ANSWER(5, DENY, 0),
      RAISE(6, "g.org", "g", 0), ANSWER(6, DENY, 0), RAISE(7, "h.org", "h", 0), ANSWER(7, DENY, 0),
      RAISE(8, "i.org", "i", 0), ANSWER(8, DENY, 0), RAISE(9, "j.org", "j", 0), ANSWER(9, DENY, 0),
      RAISE(10, "k.org", "k", 0), ANSWER(10, DENY, 0), RAISE(11, "l.org", "l", 0), ANSWER(11, DENY, 0),
      RAISE(12, "m.org", "m", 0), ANSWER(12, DENY, 0), RAISE(13, "n.org", "n", 0), ANSWER(13, DENY, 0),
      RAISE(14, "o.org", "o", 0), ANSWER(14, DENY, 0), RAISE(15, "p.org", "p", 0), ANSWER(15, DENY, 0),
      RAISE(16, "q.org", "q", 0), ANSWER(16, DENY, 0), RAISE(17, "r.org", "r", 0), ANSWER(17, DENY, 0),
      RAISE(18, "s.org", "s", 0), ANSWER(18, DENY, 0), FREEZES(0),
      RAISE(19, "t.org", "t", 0), ANSWER(19, DENY, 0), FREEZES(1), EVENTS(BREAKER, 1) } },
  { "take over pauses the countdown until resume", human, {
      RAISE(0, "a.org", "a", 0), WAIT(100000), ANSWER(0, TAKEOVER, 0), FREEZES(1), EVENTS(FROZEN, 1),
      WAIT(3600000), HELD(0), TAKEOVER("s1", 0), FREEZES(1), RESUME("s1", 0), THAWS(1), WAIT(19999),
      HELD(0), WAIT(1), RELEASED(0, TIMED_OUT), RESUME("s1", -EINVAL) } },
  { "take over with no freezer is refused", { .surface = true, .no_freezer = true }, {
      RAISE(0, "a.org", "a", 0), ANSWER(0, TAKEOVER, -ENOSYS), TAKEOVER("s1", -ENOSYS), HELD(0),
      ANSWER(0, DENY, 0), RELEASED(0, DENIED) } },
  { "closing a session releases its attempts as ended", human, {
      RAISE(0, "a.org", "a", 0), RAISE(1, "b.org", "a", 1), RAISE_S(2, "s2", "a.org", "a", 0), CLOSE("s1"),
      RELEASED(0, ENDED), RELEASED(1, ENDED), HELD(2), RAISE(3, "a.org", "a", -ENOENT) } },
  { "shutdown releases everything", human, {
      RAISE(0, "a.org", "a", 0), RAISE(1, "b.org", "a", 1), RAISE_S(2, "s2", "a.org", "a", 0),
      RAISE(3, "c.org", NULL, 0), SHUTDOWN(), RELEASED(0, SHUTDOWN), RELEASED(1, SHUTDOWN),
      RELEASED(2, SHUTDOWN), RELEASED(3, SHUTDOWN), RAISE(4, "a.org", "a", -EACCES), SHUTDOWN() } },
  { "a session holds at most max_held attempts", { .surface = true, .max_held = 2 }, {
      RAISE(0, "a.org", "a", 0), RAISE(1, "a.org", "a", 1), RAISE(2, "a.org", "a", -EBUSY),
      RAISE(3, "b.org", "b", -EBUSY), RAISE_S(4, "s2", "a.org", "a", 0), ANSWER(0, ONCE, 0),
      RAISE(5, "b.org", "b", 0) } },
};

static void run_scenario(void **state)
{
  const scenario *sc = *state;
  fx *f = fx_new(&sc->su);
  run_steps(f, sc->steps);
  fx_free(f);
}

/* ---- cases that need more than steps ---- */

/* Equal scopes match however they are spelled. */
static void denial_matches_any_spelling(void **state)
{
  (void)state;
  fx *f = fx_new(&human);
  shk_error err = { 0 };
  shk_approve_request rq = { .session = "s1", .cls = "net.egress", .scope = "{\"a\": 1, \"b\": [2]}",
                             .tier = SHK_APPROVE_ASK, .attempt = &f->a[0], .release = on_release };
  assert_int_equal(shk_approve_raise(f->ap, &rq, f->a[0].card, &err), 0);
  f->a[0].taken = true;
  shk_approve_answer an = { SHK_APPROVE_DENY, NULL, "no\x1b[2Jnever", who_of(NULL) };
  assert_int_equal(shk_approve_resolve(f->ap, f->a[0].card, &an, &err), 0);
  assert_string_equal(f->a[0].reason, "no [2Jnever"); /* the escape is gone */
  rq.scope = "{\"b\":[2],\"a\":1}";
  rq.attempt = &f->a[1];
  assert_int_equal(shk_approve_raise(f->ap, &rq, f->a[1].card, &err), -EACCES);
  assert_non_null(strstr(err.message, "denied earlier in this session by cli (uid 1000"));
  rq.scope = "[1]";
  assert_int_equal(shk_approve_raise(f->ap, &rq, NULL, &err), -EINVAL);
  rq.scope = "{\"a\":1,\"a\":2}";
  assert_int_equal(shk_approve_raise(f->ap, &rq, NULL, &err), -EINVAL);
  rq.scope = "{";
  assert_int_equal(shk_approve_raise(f->ap, &rq, NULL, &err), -EINVAL);
  fx_free(f);
}

/* A late subscriber gets every open card first, then events in order; an
 * unsubscribed one gets nothing more. */
static void subscribers(void **state)
{
  (void)state;
  fx *f = fx_new(&human);
  run_steps(f, (const step[]){ RAISE(0, "a.org", "a", 0), RAISE(1, "b.org", "b", 0), ANSWER(1, ONCE, 0),
                               RAISE_S(2, "s2", "c.org", "c", 0), { S_END } });
  uint64_t id;
  shk_error err = { 0 };
  assert_int_equal(shk_approve_subscribe(f->ap, on_line, f, &id, &err), 0);
  json_t *j;
  /* The snapshot: the two open cards, newest first. */
  char *nl = strchr(f->lines, '\n');
  assert_non_null(nl);
  j = json_loadb(f->lines, (size_t)(nl - f->lines), 0, NULL);
  assert_string_equal(json_string_value(json_object_get(j, "event")), "raised");
  assert_true(json_is_true(json_object_get(j, "snapshot")));
  json_t *card = json_object_get(j, "card");
  assert_string_equal(json_string_value(json_object_get(card, "id")), f->a[2].card);
  assert_string_equal(json_string_value(json_object_get(json_object_get(card, "session"), "label")), "second");
  assert_string_equal(json_string_value(json_object_get(card, "model")), "model-y");
  assert_string_equal(json_string_value(json_object_get(card, "rule")), "project.ask-egress");
  assert_string_equal(json_string_value(json_object_get(card, "provenance")), "external");
  assert_true(json_is_true(json_object_get(card, "ingested_external")));
  assert_int_equal(json_integer_value(json_object_get(card, "expires_ms")), f->now + 120000);
  json_decref(j);
  size_t n = 0;
  for (char *p = f->lines; (p = strchr(p, '\n')); p++)
    n++;
  assert_int_equal(n, 2);
  assert_null(strstr(f->lines, f->a[1].card));
  /* Then what happens, as it happens. */
  run_steps(f, (const step[]){ RAISE(3, "a2.org", "a", 1), ANSWER_R(0, DENY, "because", 0), { S_END } });
  char *upd = strstr(f->lines, "\"event\":\"updated\""), *res = strstr(f->lines, "\"event\":\"resolved\"");
  assert_non_null(upd);
  assert_non_null(res);
  assert_true(upd < res);
  assert_non_null(strstr(res, "\"result\":\"denied\""));
  assert_non_null(strstr(res, "\"reason\":\"because\""));
  assert_non_null(strstr(res, "\"surface\":\"cli\""));
  assert_non_null(strstr(res, "\"pid\":4242"));
  shk_approve_unsubscribe(f->ap, id);
  size_t before = f->n_lines;
  run_steps(f, (const step[]){ RAISE(4, "z.org", "z", 0), { S_END } });
  assert_int_equal(f->n_lines, before);
  fx_free(f);
}

/* A Notify notice reaches the subscribers and on_event, holds nothing and
 * raises no card; bad notices are refused. */
static void notices(void **state)
{
  (void)state;
  fx *f = fx_new(&human);
  uint64_t id;
  shk_error err = { 0 };
  assert_int_equal(shk_approve_subscribe(f->ap, on_line, f, &id, &err), 0);
  assert_int_equal(f->n_lines, 0);
  shk_approve_notice n = { .session = "s1", .cls = "net.egress", .scope = "{\"domains\": [\"n.org\"]}",
                           .handle = "h-0123", .rule = "project.notify", .why = "tier Notify" };
  assert_int_equal(shk_approve_notify(f->ap, &n, &err), 0);
  json_t *j = json_loadb(f->lines, f->n_lines, JSON_DISABLE_EOF_CHECK, NULL);
  assert_non_null(j);
  assert_string_equal(json_string_value(json_object_get(j, "event")), "notice");
  assert_string_equal(json_string_value(json_object_get(j, "session")), "s1");
  assert_string_equal(json_string_value(json_object_get(j, "handle")), "h-0123");
  assert_string_equal(json_string_value(json_object_get(j, "revoke")), "shinken revoke h-0123");
  assert_string_equal(json_string_value(json_object_get(j, "tier")), "notify");
  assert_string_equal(json_string_value(json_array_get(json_object_get(json_object_get(j, "scope"), "domains"), 0)),
                      "n.org");
  json_decref(j);
  assert_int_equal(f->ev[SHK_APPROVE_EV_NOTICE], 1);
  char *list = NULL;
  assert_int_equal(shk_approve_list(f->ap, "s1", &list), 0);
  assert_string_equal(list, "[]");
  free(list);
  /* Refused: no such session, no handle, a scope that is not an object. */
  size_t before = f->n_lines;
  n.session = "nope";
  assert_int_equal(shk_approve_notify(f->ap, &n, &err), -ENOENT);
  n.session = "s1";
  n.handle = NULL;
  assert_int_equal(shk_approve_notify(f->ap, &n, &err), -EINVAL);
  n.handle = "h-0123";
  n.scope = "[1]";
  assert_int_equal(shk_approve_notify(f->ap, &n, &err), -EINVAL);
  assert_int_equal(f->n_lines, before);
  assert_int_equal(f->ev[SHK_APPROVE_EV_NOTICE], 1);
  shk_approve_unsubscribe(f->ap, id);
  fx_free(f);
}

/* A card stands for every attempt it holds, and shows the first few. */
static void card_shows_its_attempts(void **state)
{
  (void)state;
  fx *f = fx_new(&human);
  for (int i = 0; i < 20; i++) {
    char host[32];
    snprintf(host, sizeof host, "h%d.example.org", i);
    step st = RAISE(i, host, "**.example.org:443", i ? 1 : 0);
    do_raise(f, &st);
  }
  char *text = NULL;
  assert_int_equal(shk_approve_list(f->ap, NULL, &text), 0);
  json_t *arr = json_loads(text, 0, NULL), *c = json_array_get(arr, 0);
  assert_int_equal(json_array_size(arr), 1);
  assert_int_equal(json_integer_value(json_object_get(c, "attempts")), 20);
  assert_int_equal(json_array_size(json_object_get(c, "held")), 16);
  assert_int_equal(json_integer_value(json_object_get(c, "held_more")), 4);
  assert_string_equal(json_string_value(json_array_get(json_object_get(json_object_get(
                        json_array_get(json_object_get(c, "held"), 1), "scope"), "domains"), 0)),
                      "h1.example.org:443");
  json_decref(arr);
  free(text);
  run_steps(f, (const step[]){ ANSWER(0, SESSION, 0), RELEASED_W(0, APPROVED_PATTERN, "**.example.org:443"),
                               RELEASED_W(19, APPROVED_PATTERN, "**.example.org:443"), { S_END } });
  assert_non_null(strstr(f->a[19].scope, "h19.example.org"));
  fx_free(f);
}

/* What the agent reads says what happened and whether to ask again. */
static void outcome_text(void **state)
{
  (void)state;
  fx *f = fx_new(&human);
  run_steps(f, (const step[]){ RAISE(0, "a.org", "a", 0), ANSWER_R(0, DENY, "use the mirror", 0),
                               RAISE(1, "b.org", "b", 0), WAIT(120000), RAISE(2, "c.org", "c", 0),
                               ANSWER(2, CANCEL, 0), { S_END } });
  assert_non_null(strstr(f->a[0].text, "use the mirror"));
  assert_non_null(strstr(f->a[0].text, "will not help"));
  assert_non_null(strstr(f->a[0].text, "a.org:443"));
  assert_non_null(strstr(f->a[1].text, "timed out waiting for a human"));
  assert_non_null(strstr(f->a[2].text, "You may ask again"));
  fx_free(f);
}

/* ---- the reviewer ---- */

static char tmpdir[64];

static const char *script(const char *name, const char *body)
{
  static char path[16][128];
  static int n;
  char *p = path[n++ % 16];
  snprintf(p, 128, "%s/%s", tmpdir, name);
  FILE *fp = fopen(p, "w");
  assert_non_null(fp);
  fprintf(fp, "#!/bin/sh\n%s\n", body);
  fclose(fp);
  chmod(p, 0755);
  return p;
}

/* Waits (bounded, on a condition variable: no sleep) for an event of
 * `kind`, or (kind < 0) for attempt i's release. */
static void wait_for(fx *f, int i, int kind)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += 40;
  pthread_mutex_lock(&f->mu);
  while (kind < 0 ? f->a[i].count == 0 : f->ev[kind] == 0)
    if (pthread_cond_timedwait(&f->cv, &f->mu, &ts)) {
      pthread_mutex_unlock(&f->mu);
      fail_msg("waited 40 s for %s", kind < 0 ? "a release" : shk_approve_event_name(kind));
    }
  pthread_mutex_unlock(&f->mu);
}
#define RELEASE (-1)

typedef struct review_case {
  const char *name;
  const char *body;
  const char *tier;
  const char *cls;
  enum { TO_HUMAN, APPROVED, DENIED, NOT_REVIEWED } want;
  const char *reviewed; /* substring of the reviewed event */
} review_case;

static const review_case review_cases[] = {
  { "approve", "cat >/dev/null; echo '{\"decision\":\"approve\",\"reason\":\"a docs mirror\"}'", NULL, NULL,
    APPROVED, "\"decision\":\"approve\"" },
  { "deny", "cat >/dev/null; printf '{\"decision\": \"deny\", \"reason\": \"exfil\"}\\n\\n'", NULL, NULL,
    DENIED, "\"decision\":\"deny\"" },
  { "escalate", "cat >/dev/null; echo '{\"decision\":\"escalate\",\"reason\":null}'", NULL, NULL, TO_HUMAN,
    "\"decision\":\"escalate\"" },
  { "hang", "exec sleep 30", NULL, NULL, TO_HUMAN, "did not answer within" },
  { "answer then hang", "echo '{\"decision\":\"approve\"}'; exec sleep 30", NULL, NULL, TO_HUMAN,
    "did not answer within" },
  { "crash", "echo '{\"decision\":\"approve\"}'; kill -SEGV $$", NULL, NULL, TO_HUMAN, "killed by signal 11" },
  { "exit status", "echo '{\"decision\":\"approve\"}'; exit 3", NULL, NULL, TO_HUMAN, "exited with status 3" },
  { "garbage", "echo 'yes, approve it'", NULL, NULL, TO_HUMAN, "not a JSON object" },
  { "two answers", "echo '{\"decision\":\"approve\"}{\"decision\":\"approve\"}'", NULL, NULL, TO_HUMAN,
    "\"decision\":\"failed\"" },
  { "unknown field", "echo '{\"decision\":\"approve\",\"grant\":\"**\"}'", NULL, NULL, TO_HUMAN,
    "unknown field" },
  { "other decision", "echo '{\"decision\":\"allow\"}'", NULL, NULL, TO_HUMAN, "approve, deny or escalate" },
  { "silence", "exit 0", NULL, NULL, TO_HUMAN, "\"decision\":\"failed\"" },
  { "credentials never reviewed", "echo '{\"decision\":\"approve\"}'", NULL, "credentials", NOT_REVIEWED, NULL },
  { "notify tier never reviewed", "echo '{\"decision\":\"approve\"}'", "notify", NULL, NOT_REVIEWED, NULL },
};

static void run_review(void **state)
{
  const review_case *rc = *state;
  const char *argv[] = { script("reviewer", rc->body), NULL };
  /* Only the reviewers that hang meet their deadline; the others get a
   * generous one, so a loaded machine does not turn an answer into a hang. */
  bool hangs = strstr(rc->body, "sleep") != NULL;
  setup su = { .surface = true, .reviewer = argv, .reviewer_timeout_ms = hangs ? 400 : 20000 };
  fx *f = fx_new(&su);
  step st = RAISE(0, "a.org", "a", 0);
  st.tier = rc->tier;
  st.cls = rc->cls;
  do_raise(f, &st);
  if (rc->want == NOT_REVIEWED) {
    run_steps(f, (const step[]){ EVENTS(REVIEWING, 0), EVENTS(RAISED, 1), HELD(0), LISTED(NULL, 1), { S_END } });
    fx_free(f);
    return;
  }
  wait_for(f, 0, rc->want == TO_HUMAN ? SHK_APPROVE_EV_RAISED : RELEASE);
  wait_for(f, 0, SHK_APPROVE_EV_REVIEWED);
  pthread_mutex_lock(&f->mu);
  if (!strstr(f->last_reviewed, rc->reviewed))
    fail_msg("reviewed event %s does not say %s", f->last_reviewed, rc->reviewed);
  pthread_mutex_unlock(&f->mu);
  switch (rc->want) {
  case APPROVED:
    run_steps(f, (const step[]){ RELEASED_W(0, APPROVED_ONCE, "reviewer"), EVENTS(RAISED, 0), { S_END } });
    break;
  case DENIED:
    run_steps(f, (const step[]){ RELEASED_W(0, DENIED, "exfil"), RAISE(1, "a.org", "a", -EACCES),
                                 EVENTS(RAISED, 0), { S_END } });
    break;
  case TO_HUMAN:
    /* Not answered: the card reaches the humans, like any other. The
     * review thread may still be delivering, and then it delivers the
     * release too. */
    run_steps(f, (const step[]){ HELD(0), EVENTS(RAISED, 1), LISTED(NULL, 1), ANSWER(0, DENY, 0), { S_END } });
    wait_for(f, 0, RELEASE);
    run_steps(f, (const step[]){ RELEASED_W(0, DENIED, "cli"), { S_END } });
    break;
  case NOT_REVIEWED:
    break;
  }
  fx_free(f);
}

/* The reviewer reads the stripped record: the label, class, scope and
 * provenance, never the decision's explanation. */
static void reviewer_record(void **state)
{
  (void)state;
  char out[128];
  snprintf(out, sizeof out, "%s/record", tmpdir);
  char body[256];
  snprintf(body, sizeof body, "cat > %s; echo '{\"decision\":\"escalate\"}'", out);
  const char *argv[] = { script("record", body), NULL };
  setup su = { .surface = true, .reviewer = argv, .reviewer_timeout_ms = 5000 };
  fx *f = fx_new(&su);
  run_steps(f, (const step[]){ RAISE(0, "a.org", "a", 0), { S_END } });
  wait_for(f, 0, SHK_APPROVE_EV_RAISED);
  char *text = NULL;
  FILE *fp = fopen(out, "r");
  assert_non_null(fp);
  text = calloc(1, 4096);
  size_t n = fread(text, 1, 4095, fp);
  fclose(fp);
  assert_true(n > 0);
  json_t *j = json_loads(text, 0, NULL);
  assert_non_null(j);
  assert_string_equal(json_string_value(json_object_get(j, "session")), "first");
  assert_string_equal(json_string_value(json_object_get(j, "class")), "net.egress");
  assert_string_equal(json_string_value(json_object_get(j, "provenance")), "external");
  assert_string_equal(json_string_value(json_object_get(json_object_get(j, "actor"), "agent")), "agent-x");
  assert_non_null(json_object_get(j, "scope"));
  assert_null(strstr(text, "decision's own line"));
  assert_null(strstr(text, "agent --task"));
  json_decref(j);
  free(text);
  fx_free(f);
}

/* ---- the reviewer's answer parser ---- */

static void parse_answer(void **state)
{
  (void)state;
  static const struct {
    const char *text;
    int r;
    shk__review_decision d;
    const char *reason;
  } cases[] = {
    { "{\"decision\":\"approve\"}", 0, SHK__REVIEW_APPROVE, "" },
    { " {\"decision\":\"deny\",\"reason\":\"x\\ny\"}\n", 0, SHK__REVIEW_DENY, "x y" },
    { "{\"reason\":null,\"decision\":\"escalate\"}", 0, SHK__REVIEW_ESCALATE, "" },
    { "{\"decision\":\"deny\",\"reason\":\"\\u202eevil\"}", 0, SHK__REVIEW_DENY, " evil" },
    { "{\"decision\":\"APPROVE\"}", -EINVAL, SHK__REVIEW_ESCALATE, "" },
    { "{\"decision\":true}", -EINVAL, SHK__REVIEW_ESCALATE, "" },
    { "{\"decision\":\"approve\",\"decision\":\"deny\"}", -EINVAL, SHK__REVIEW_ESCALATE, "" },
    { "{\"decision\":\"approve\",\"reason\":1}", -EINVAL, SHK__REVIEW_ESCALATE, "" },
    { "{\"decision\":\"approve\"} x", -EINVAL, SHK__REVIEW_ESCALATE, "" },
    { "[\"approve\"]", -EINVAL, SHK__REVIEW_ESCALATE, "" },
    { "{}", -EINVAL, SHK__REVIEW_ESCALATE, "" },
    { "", -EINVAL, SHK__REVIEW_ESCALATE, "" },
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    shk__review_answer a;
    shk_error err = { 0 };
    int r = shk__approve_parse_answer(cases[i].text, strlen(cases[i].text), &a, &err);
    if (r != cases[i].r || a.decision != cases[i].d || strcmp(a.reason, cases[i].reason))
      fail_msg("case %zu (%s): %d %d '%s' (%s)", i, cases[i].text, r, a.decision, a.reason, err.message);
  }
  char out[8];
  shk__approve_clean_text("abc\xc3\xa9\xc3\xa9\xc3\xa9", out, sizeof out); /* cut on a boundary */
  assert_string_equal(out, "abc\xc3\xa9\xc3\xa9");
  shk__approve_clean_text("\xff\xc2\x9b" "a", out, sizeof out);
  assert_string_equal(out, "? a");
  shk__approve_clean_text("\xf7\x87\x87" "b", out, sizeof out); /* no such lead byte */
  assert_string_equal(out, "???b");
  shk__approve_clean_text("\xed\xa0\x80" "\xe2\x80\xae", out, sizeof out); /* a surrogate, an override */
  assert_string_equal(out, "??? ");
}

/* ---- stress: exactly once, under threads ---- */

#define STRESS_RAISERS 4
#define STRESS_EACH 400

typedef struct stress {
  shk_approve *ap;
  _Atomic int64_t now;
  atomic_int released[STRESS_RAISERS * STRESS_EACH];
  atomic_bool taken[STRESS_RAISERS * STRESS_EACH];
  atomic_int raisers_done;
  atomic_uint lines;
  atomic_int unexpected;       /* answers outside the documented set */
  atomic_int refused, busy, ends;
} stress;

typedef struct stress_att {
  stress *s;
  int idx;
} stress_att;

static stress_att stress_atts[STRESS_RAISERS * STRESS_EACH];

static int64_t stress_clock(void *ud)
{
  return atomic_load(&((stress *)ud)->now);
}

static int stress_freeze(void *ud, const char *s)
{
  (void)ud;
  (void)s;
  return 0;
}

/* The manager's answer to "end this session": close it, and (for the
 * test) open a new one under the same name, from inside the callback. */
static void stress_end(void *ud, const char *session, const char *why)
{
  (void)why;
  stress *s = ud;
  char name[16];
  snprintf(name, sizeof name, "%s", session);
  if (shk_approve_session_close(s->ap, name) ||
      shk_approve_session_open(s->ap, &(shk_approve_session){ .name = name }, NULL))
    atomic_fetch_add(&s->unexpected, 1);
  atomic_fetch_add(&s->ends, 1);
}

static void stress_release(void *attempt, const shk_approve_outcome *o)
{
  (void)o;
  stress_att *a = attempt;
  atomic_fetch_add(&a->s->released[a->idx], 1);
}

static void stress_line(void *ud, const char *line, size_t len)
{
  (void)line;
  (void)len;
  atomic_fetch_add(&((stress *)ud)->lines, 1);
}

static void *stress_raiser(void *arg)
{
  stress_att *base = arg;
  stress *s = base->s;
  unsigned seed = (unsigned)base->idx + 1;
  for (int i = 0; i < STRESS_EACH; i++) {
    stress_att *a = &base[i];
    /* Ten hosts share a batch key; some keys are credentials, some are
     * not batched: enough distinct requests that denials (remembered)
     * leave most of them raisable. */
    char scope[64], key[16];
    int host = rand_r(&seed) % 2000, k = host / 10;
    snprintf(scope, sizeof scope, "{\"domains\":[\"h%d.org:443\"]}", host);
    snprintf(key, sizeof key, "k%d", k);
    shk_approve_request rq = { .session = k % 2 ? "s1" : "s2", .cls = k % 17 ? "net.egress" : "credentials",
                               .scope = scope, .tier = k % 3 ? SHK_APPROVE_ASK : SHK_APPROVE_NOTIFY,
                               .batch_key = k % 13 ? key : NULL, .pattern = "h.org:443",
                               .attempt = a, .release = stress_release };
    shk_error err = { 0 };
    int r = shk_approve_raise(s->ap, &rq, NULL, &err);
    if (r == -EACCES)
      atomic_fetch_add(&s->refused, 1);
    if (r == -EBUSY)
      atomic_fetch_add(&s->busy, 1);
    /* -ENOENT: between the end handler's close and its reopen. */
    if (!(r == 0 || r == 1 || r == -EACCES || r == -EBUSY || r == -ENOENT)) {
      fprintf(stderr, "raise: %d %s\n", r, err.message);
      atomic_fetch_add(&s->unexpected, 1);
    }
    atomic_store(&s->taken[a->idx], r >= 0);
  }
  atomic_fetch_add(&s->raisers_done, 1);
  return NULL;
}

static void *stress_resolver(void *arg)
{
  stress *s = arg;
  unsigned seed = 7;
  shk_approve_who who = { "harness", 1000, 77, "/usr/bin/harness", NULL };
  while (atomic_load(&s->raisers_done) < STRESS_RAISERS) {
    char *text = NULL;
    if (shk_approve_list(s->ap, NULL, &text)) {
      atomic_fetch_add(&s->unexpected, 1);
      break;
    }
    json_t *arr = json_loads(text, 0, NULL);
    free(text);
    size_t i;
    json_t *c;
    json_array_foreach(arr, i, c) {
      const char *id = json_string_value(json_object_get(c, "id"));
      bool breaker = !strcmp(json_string_value(json_object_get(c, "kind")), "breaker");
      static const shk_approve_how hows[] = { SHK_APPROVE_ONCE, SHK_APPROVE_SESSION, SHK_APPROVE_PATTERN,
                                              SHK_APPROVE_DENY, SHK_APPROVE_CANCEL };
      shk_approve_answer an = { breaker ? SHK_APPROVE_RESUME : hows[rand_r(&seed) % 5], NULL, "r", who };
      shk_error err = { 0 };
      int r = shk_approve_resolve(s->ap, id, &an, &err);
      if (!(r == 0 || r == -ENOENT || (r == -EPERM && an.how == SHK_APPROVE_PATTERN))) {
        fprintf(stderr, "resolve %s: %d %s\n", shk_approve_how_name(an.how), r, err.message);
        atomic_fetch_add(&s->unexpected, 1);
      }
    }
    json_decref(arr);
    for (const char *sess = "s1"; sess; sess = !strcmp(sess, "s1") ? "s2" : NULL) {
      int r = shk_approve_resume(s->ap, sess, &who, NULL);
      if (!(r == 0 || r == -EINVAL || r == -ENOENT))
        atomic_fetch_add(&s->unexpected, 1);
    }
  }
  return NULL;
}

static void *stress_ticker(void *arg)
{
  stress *s = arg;
  while (atomic_load(&s->raisers_done) < STRESS_RAISERS) {
    atomic_fetch_add(&s->now, 1000);
    shk_approve_tick(s->ap);
  }
  return NULL;
}

static void stress_exactly_once(void **state)
{
  (void)state;
  stress *s = calloc(1, sizeof *s);
  assert_non_null(s);
  s->now = 1;
  shk_approve_opts o = { .clock = stress_clock, .freeze = stress_freeze, .thaw = stress_freeze,
                         .end = stress_end, .max_held = 200, .ud = s };
  assert_int_equal(shk_approve_new(&o, &s->ap, NULL), 0);
  shk_approve_set_surface(s->ap, true);
  for (const char *n = "s1"; n; n = !strcmp(n, "s1") ? "s2" : NULL)
    assert_int_equal(shk_approve_session_open(s->ap, &(shk_approve_session){ .name = n }, NULL), 0);
  uint64_t sub;
  assert_int_equal(shk_approve_subscribe(s->ap, stress_line, s, &sub, NULL), 0);
  for (int i = 0; i < STRESS_RAISERS * STRESS_EACH; i++)
    stress_atts[i] = (stress_att){ s, i };
  pthread_t r[STRESS_RAISERS], res, tick;
  for (int i = 0; i < STRESS_RAISERS; i++)
    assert_int_equal(pthread_create(&r[i], NULL, stress_raiser, &stress_atts[i * STRESS_EACH]), 0);
  assert_int_equal(pthread_create(&res, NULL, stress_resolver, s), 0);
  assert_int_equal(pthread_create(&tick, NULL, stress_ticker, s), 0);
  for (int i = 0; i < STRESS_RAISERS; i++)
    pthread_join(r[i], NULL);
  pthread_join(res, NULL);
  pthread_join(tick, NULL);
  assert_int_equal(atomic_load(&s->unexpected), 0);
  shk_approve_unsubscribe(s->ap, sub);
  unsigned lines = atomic_load(&s->lines);
  shk_approve_shutdown(s->ap);
  assert_int_equal(atomic_load(&s->lines), lines);
  int taken = 0;
  for (int i = 0; i < STRESS_RAISERS * STRESS_EACH; i++) {
    int want = atomic_load(&s->taken[i]) ? 1 : 0;
    taken += want;
    if (atomic_load(&s->released[i]) != want)
      fail_msg("attempt %d released %d times, want %d", i, atomic_load(&s->released[i]), want);
  }
  /* The module took a good share, and resolved most of them before the
   * shutdown: the test tested something. */
  print_message("%d of %d attempts taken (%d refused, %d busy), %u lines, %d sessions ended\n", taken,
                STRESS_RAISERS * STRESS_EACH, atomic_load(&s->refused), atomic_load(&s->busy), lines,
                atomic_load(&s->ends));
  assert_true(taken > STRESS_EACH / 2);
  assert_true(lines > 0);
  shk_approve_free(s->ap);
  free(s);
}

/* With the timer thread and the real clock, a short timeout fires by
 * itself. */
static void timer_thread(void **state)
{
  (void)state;
  fx *f = calloc(1, sizeof *f);
  pthread_mutex_init(&f->mu, NULL);
  pthread_cond_init(&f->cv, NULL);
  f->a[0].f = f;
  shk_approve_opts o = { .timer_thread = true, .on_event = on_event, .ud = f };
  assert_int_equal(shk_approve_new(&o, &f->ap, NULL), 0);
  assert_int_equal(shk_approve_session_open(f->ap, &(shk_approve_session){ .name = "s1" }, NULL), 0);
  shk_approve_request rq = { .session = "s1", .cls = "net.egress", .scope = "{}", .tier = SHK_APPROVE_ASK,
                             .timeout_ms = 50, .attempt = &f->a[0], .release = on_release };
  assert_int_equal(shk_approve_raise(f->ap, &rq, f->a[0].card, NULL), 0);
  f->a[0].taken = true;
  wait_for(f, 0, RELEASE);
  assert_int_equal(f->a[0].result, SHK_APPROVE_TIMED_OUT);
  fx_free(f);
}

static void bad_options(void **state)
{
  (void)state;
  shk_approve *ap = NULL;
  shk_error err = { 0 };
  const char *rel[] = { "reviewer.sh", NULL };
  assert_int_equal(shk_approve_new(&(shk_approve_opts){ .reviewer_argv = rel }, &ap, &err), -EINVAL);
  assert_non_null(strstr(err.message, "absolute path"));
  assert_int_equal(shk_approve_new(&(shk_approve_opts){ .timeout_ms = -1 }, &ap, &err), -EINVAL);
  assert_int_equal(shk_approve_new(&(shk_approve_opts){ .freeze = on_freeze }, &ap, &err), -EINVAL);
  assert_null(ap);
  assert_int_equal(shk_approve_new(NULL, &ap, &err), 0);
  assert_int_equal(shk_approve_session_open(ap, &(shk_approve_session){ .name = "x" }, &err), 0);
  assert_int_equal(shk_approve_session_open(ap, &(shk_approve_session){ .name = "x" }, &err), -EEXIST);
  assert_int_equal(shk_approve_session_open(ap, &(shk_approve_session){ .name = NULL }, &err), -EINVAL);
  assert_int_equal(shk_approve_session_close(ap, "y"), -ENOENT);
  shk_approve_how h;
  assert_int_equal(shk_approve_how_parse("pattern", &h), 0);
  assert_int_equal(h, SHK_APPROVE_PATTERN);
  assert_int_equal(shk_approve_how_parse("yes", &h), -EINVAL);
  shk_approve_free(ap);
}

/* The pattern a card proposes: the host's siblings at its port, never
 * wider than one label under the public suffix, none for an address. */
static void sibling_patterns(void **state)
{
  (void)state;
  static const struct { const char *host; uint16_t port; const char *want; } cases[] = {
    { "a.pkg.test", 443, "*.pkg.test:443" },
    { "b.pkg.test", 443, "*.pkg.test:443" },
    { "x.y.example.org", 8443, "*.y.example.org:8443" },
    { "www.example.co.uk", 443, "*.example.co.uk:443" },
    { "a.test", 443, NULL },          /* no "*.test" */
    { "api.example.com", 443, "*.example.com:443" },
    { "example.com", 443, NULL },     /* no "*.com" */
    { "example.co.uk", 443, NULL },   /* no "*.co.uk" */
    { "alice.github.io", 443, NULL }, /* a multi-label suffix */
    { "localhost", 80, NULL },
    { "10.0.0.1", 443, NULL },        /* an address is never a pattern */
    { "1.2.3.4.5", 443, NULL },
    { "a..test", 443, NULL },
    { ".pkg.test", 443, NULL },
    { "*.pkg.test", 443, NULL },
    { "A.PKG.test", 443, NULL },      /* not canonical */
    { "", 443, NULL },
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char out[300];
    int r = shk_approve_sibling_pattern(cases[i].host, cases[i].port, out, sizeof out);
    if (cases[i].want) {
      if (r != 0 || strcmp(out, cases[i].want))
        fail_msg("%s:%u: got %d '%s', want '%s'", cases[i].host, cases[i].port, r, out, cases[i].want);
    } else if (r != -ENOENT || out[0]) {
      fail_msg("%s:%u: got %d '%s', want no pattern", cases[i].host, cases[i].port, r, out);
    }
  }
  char small[8];
  assert_int_equal(shk_approve_sibling_pattern("a.pkg.test", 443, small, sizeof small), -ENAMETOOLONG);
  assert_string_equal(small, "");
  assert_int_equal(shk_approve_sibling_pattern("a.pkg.test", 0, small, sizeof small), -EINVAL);

  char host[64];
  uint16_t port = 0;
  assert_int_equal(shk_approve_pattern_split("*.pkg.test:443", host, sizeof host, &port), 0);
  assert_string_equal(host, "*.pkg.test");
  assert_int_equal(port, 443);
  assert_int_equal(shk_approve_pattern_split("**.example.org:8443", host, sizeof host, &port), 0);
  assert_string_equal(host, "**.example.org");
  assert_int_equal(port, 8443);
  static const char *const bad[] = { "*.pkg.test", "*.pkg.test:", "*.pkg.test:0", "*.pkg.test:65536",
                                     "*.pkg.test:-1", "*.pkg.test:+4", "*.pkg.test:44x", ":443",
                                     "*..test:443", "a b:443", "***.x.test:443" };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    if (shk_approve_pattern_split(bad[i], host, sizeof host, &port) != -EINVAL)
      fail_msg("'%s' was taken for a pattern", bad[i]);
  assert_int_equal(shk_approve_pattern_split("*.a-very-long-name.test:443", host, 8, &port), -EINVAL);
}

int main(int argc, char **argv)
{
  if (argc > 1)
    cmocka_set_test_filter(argv[1]); /* for a person running one case */
  snprintf(tmpdir, sizeof tmpdir, "/tmp/shk-test-approve-XXXXXX");
  if (!mkdtemp(tmpdir))
    return 1;
  size_t ns = sizeof scenarios / sizeof *scenarios, nr = sizeof review_cases / sizeof *review_cases;
  static const struct CMUnitTest fixed[] = {
    cmocka_unit_test(denial_matches_any_spelling),
    cmocka_unit_test(subscribers),
    cmocka_unit_test(notices),
    cmocka_unit_test(card_shows_its_attempts),
    cmocka_unit_test(outcome_text),
    cmocka_unit_test(reviewer_record),
    cmocka_unit_test(parse_answer),
    cmocka_unit_test(stress_exactly_once),
    cmocka_unit_test(timer_thread),
    cmocka_unit_test(bad_options),
    cmocka_unit_test(sibling_patterns),
  };
  size_t nf = sizeof fixed / sizeof *fixed;
  struct CMUnitTest *tests = calloc(ns + nr + nf, sizeof *tests);
  char names[64][96];
  for (size_t i = 0; i < ns; i++)
    tests[i] = (struct CMUnitTest){ scenarios[i].name, run_scenario, NULL, NULL, (void *)&scenarios[i] };
  for (size_t i = 0; i < nr; i++) {
    snprintf(names[i], sizeof names[i], "reviewer: %s", review_cases[i].name);
    tests[ns + i] = (struct CMUnitTest){ names[i], run_review, NULL, NULL, (void *)&review_cases[i] };
  }
  memcpy(tests + ns + nr, fixed, sizeof fixed);
  int r = _cmocka_run_group_tests("approve", tests, ns + nr + nf, NULL, NULL);
  free(tests);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  if (system(cmd))
    r = r ? r : 1;
  return r;
}
