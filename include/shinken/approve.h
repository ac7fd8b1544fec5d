/* SPDX-License-Identifier: Apache-2.0 */
/* Shinken's Ask loop: pending requests ("cards"), held attempts, batching,
 * timeouts, breakers and the reviewer hook.
 *
 * The manager raises a card when the one decision answers "ask" for
 * something an enforcement point is holding (a CONNECT that waits). The
 * card waits for a human surface (the CLI, the panel, the inline prompt of
 * `shinken run`, a harness that shows it to its user) to resolve it, or for
 * its timeout. Each held attempt is handed back exactly once, through the
 * release callback it was raised with, with the outcome: the manager then
 * issues a handle through its normal grant path and lets the attempt go on,
 * or refuses it.
 *
 * The module decides nothing about scopes: it carries them as JSON text,
 * compares the caller's batch keys and patterns as strings, and leaves
 * every grant to the caller. It never issues a handle itself.
 *
 * Threading. Every function may be called from any thread. No callback is
 * ever called with the module's lock held, except freeze and thaw (below).
 * Callbacks (release, on_event, subscribers, end) are delivered in the
 * order the module decided them, by whichever thread is inside a
 * shk_approve_* call at that moment (the one that caused them, or one that
 * was already delivering) or by one of the module's own threads (the
 * reviewer threads and the optional timer thread). So:
 *   - a release may run before shk_approve_raise returns, even on the
 *     thread that called it: set the attempt up completely before raising;
 *   - never call a shk_approve_* function while holding a lock that one of
 *     your callbacks takes;
 *   - callbacks may call back into the module (except shk_approve_free),
 *     but should be short: a release that only enqueues the attempt and
 *     wakes its event loop is the intended use.
 * See docs/approve.md for the states of a card and what the manager does
 * with each outcome. */
#ifndef SHINKEN_APPROVE_H
#define SHINKEN_APPROVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "shinken/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct shk_approve shk_approve;

/* A card's id: 128 bits from the kernel's CSPRNG, as 32 lowercase hex
 * digits. */
#define SHK_APPROVE_ID_HEX 33

/* The tiers, in the order of shk_cap_tier: a larger value is stricter. */
typedef enum shk_approve_tier {
  SHK_APPROVE_AUTO,
  SHK_APPROVE_NOTIFY,
  SHK_APPROVE_ASK,
  SHK_APPROVE_BLOCK,
} shk_approve_tier;

/* "auto", "notify", "ask", "block"; NULL for anything else. */
const char *shk_approve_tier_name(shk_approve_tier t);

/* ---- who resolved ---- */

/* The identity of whoever resolves a card. surface is one of "cli",
 * "panel", "inline", "harness" (the surfaces a caller may name), or
 * "reviewer", "timeout", "manager" (which only the module itself uses). A
 * control-socket peer ("cli", "harness") and the terminal of `shinken run`
 * ("inline") are named by uid, pid and executable (from SO_PEERCRED and
 * /proc/PID/exe); the panel by its user. */
typedef struct shk_approve_who {
  const char *surface;
  int64_t uid;      /* -1: unknown */
  int64_t pid;      /* 0: unknown */
  const char *exe;  /* may be NULL for the panel */
  const char *user; /* the panel's user; may be NULL otherwise */
} shk_approve_who;

/* ---- outcomes, as a held attempt is released with them ---- */

typedef enum shk_approve_result {
  SHK_APPROVE_APPROVED_ONCE,    /* a handle good for this one attempt */
  SHK_APPROVE_APPROVED_SESSION, /* the attempt's exact scope, for the session */
  SHK_APPROVE_APPROVED_PATTERN, /* the granted pattern, for the session */
  SHK_APPROVE_DENIED,           /* by a human or the reviewer; remembered */
  SHK_APPROVE_CANCELLED,        /* dismissed; may prompt again */
  SHK_APPROVE_TIMED_OUT,        /* nobody answered in time */
  SHK_APPROVE_ENDED,            /* the session ended */
  SHK_APPROVE_SHUTDOWN,         /* the manager is shutting down */
} shk_approve_result;

/* "approved-once", "approved-session", "approved-pattern", "denied",
 * "cancelled", "timed-out", "ended", "shutdown"; NULL for anything else. */
const char *shk_approve_result_name(shk_approve_result r);
/* True for the three approvals. */
bool shk_approve_result_approved(shk_approve_result r);

/* What a release callback receives. Every pointer is valid only during the
 * call. */
typedef struct shk_approve_outcome {
  shk_approve_result result;
  const char *card;        /* the card's id */
  const char *session;     /* the session's name */
  const char *cls;         /* the attempt's class */
  const char *scope;       /* the attempt's own exact scope (JSON text) */
  const char *pattern;     /* APPROVED_PATTERN: the granted pattern; else NULL */
  shk_approve_tier tier;   /* the tier of what is granted (the pattern's tier
                            * for APPROVED_PATTERN, else the card's) */
  const char *reason;      /* the human's or reviewer's reason, or a sentence
                            * saying what happened; never NULL */
  const shk_approve_who *by; /* who resolved */
} shk_approve_outcome;

/* One paragraph written for an agent: what was refused (or allowed), why,
 * and whether asking again can help, for the body of a 403 or a tool
 * error. Writes at most `len` bytes including the NUL; returns the length
 * it wanted (as snprintf). */
size_t shk_approve_outcome_text(const shk_approve_outcome *o, char *buf, size_t len);

typedef void (*shk_approve_release_fn)(void *attempt, const shk_approve_outcome *o);

/* ---- events, for the audit writer and the human surfaces ---- */

typedef enum shk_approve_event_kind {
  SHK_APPROVE_EV_RAISED,    /* a card now waits for a human (or a late
                             * subscriber is told of an open one) */
  SHK_APPROVE_EV_REVIEWING, /* a card went to the reviewer first */
  SHK_APPROVE_EV_REVIEWED,  /* the reviewer answered, or failed to */
  SHK_APPROVE_EV_UPDATED,   /* attempts joined a card */
  SHK_APPROVE_EV_RESOLVED,  /* a card was resolved: outcome and by whom */
  SHK_APPROVE_EV_REFUSED,   /* a request was refused at once, with no card */
  SHK_APPROVE_EV_BREAKER,   /* a breaker card: the session was frozen */
  SHK_APPROVE_EV_FROZEN,    /* a session was frozen by a human (take over) */
  SHK_APPROVE_EV_RESUMED,   /* a frozen session was resumed */
  SHK_APPROVE_EV_ENDED,     /* the module ended a session (breaker) */
  SHK_APPROVE_EV_NOTICE,    /* a Notify-tier grant was issued with no human:
                             * the human is told, and may revoke it */
} shk_approve_event_kind;

/* "raised", "reviewing", ... as in the JSON lines. */
const char *shk_approve_event_name(shk_approve_event_kind k);

/* One event with typed fields. Pointers are valid only during the call;
 * absent fields are NULL (or 0). json is the same event as text: one JSON
 * object and a newline, the line subscribers receive. */
typedef struct shk_approve_event {
  shk_approve_event_kind kind;
  uint64_t seq;             /* increasing, per module */
  int64_t time_ms;          /* the module's clock */
  const char *card;
  const char *session;
  const char *cls;
  const char *scope;
  shk_approve_tier tier;
  const char *rule;
  unsigned attempts;        /* attempts the card stands for */
  bool has_result;
  shk_approve_result result;
  const char *pattern;
  const char *reason;
  const shk_approve_who *by;
  const char *json;
} shk_approve_event;

typedef void (*shk_approve_event_fn)(void *ud, const shk_approve_event *e);

/* ---- the module ---- */

typedef struct shk_approve_opts {
  int64_t timeout_ms;            /* a card's default timeout; 0: 120000 */
  int64_t batch_window_ms;       /* 0: 300; see shk_approve_raise */
  unsigned breaker_consecutive;  /* 0: 3 */
  unsigned breaker_total;        /* 0: 20 */
  unsigned max_held;             /* held attempts per session; 0: 1024 */
  /* The reviewer: an absolute path and its arguments, NULL-terminated;
   * NULL for none. Never a shell string. */
  const char *const *reviewer_argv;
  int64_t reviewer_timeout_ms;   /* 0: 5000 (real time, not the clock below) */
  unsigned reviewer_max;         /* reviews at once; 0: 8 (more go to humans) */
  /* The clock, in milliseconds since the epoch; NULL: CLOCK_REALTIME.
   * Tests inject a fake one and call shk_approve_tick. */
  int64_t (*clock)(void *ud);
  /* Starts a thread that calls shk_approve_tick at every deadline (it
   * sleeps in real time, so use it with the real clock only). */
  bool timer_thread;
  /* The manager's side. freeze and thaw stop and continue every process
   * of a session (the cgroup freezer); they are called with the module's
   * lock held, so they must not call into the module, and they return 0 or
   * a negative errno. NULL freeze: take over is refused with -ENOSYS and a
   * breaker ends the session. end asks the manager to end a session; it is
   * called without the lock and should end up in
   * shk_approve_session_close. */
  int (*freeze)(void *ud, const char *session);
  int (*thaw)(void *ud, const char *session);
  void (*end)(void *ud, const char *session, const char *why);
  /* Every event, for the audit writer; may be NULL. */
  shk_approve_event_fn on_event;
  void *ud;                      /* passed to clock, freeze, thaw, end, on_event */
} shk_approve_opts;

/* -EINVAL for a bad option (a reviewer path that is not absolute, a
 * negative time), -ENOMEM, or the error of starting the timer thread. */
int shk_approve_new(const shk_approve_opts *o, shk_approve **out, shk_error *err);
/* Shuts down (if not yet done) and frees. No other thread may be inside
 * the module, and no callback may be running. NULL is a no-op. */
void shk_approve_free(shk_approve *ap);

/* Releases every held attempt with SHK_APPROVE_SHUTDOWN, closes every
 * card, kills running reviewers and waits for the module's threads; every
 * later raise is refused with -EACCES. Idempotent. */
void shk_approve_shutdown(shk_approve *ap);

/* Whether any human surface is able to answer (a panel client, a
 * subscriber that shows cards to a person, a terminal). Only the breaker
 * reads it: a session that trips it with no surface is ended rather than
 * frozen. An ordinary card waits its timeout either way. Default false. */
void shk_approve_set_surface(shk_approve *ap, bool connected);

/* Events that could not be delivered because memory ran out: counted here,
 * never dropped silently. Each such loss fails closed (a card nobody was
 * told of still times out and refuses). */
uint64_t shk_approve_lost_events(shk_approve *ap);

/* ---- sessions ---- */

typedef struct shk_approve_session {
  const char *name;     /* required, unique */
  const char *label;    /* what the reviewer and the surfaces call it; NULL: name */
  const char *command;  /* may be NULL */
  const char *cwd;      /* may be NULL */
  int64_t started_ms;
  const char *agent;    /* where known; may be NULL */
  const char *model;    /* where known; may be NULL */
} shk_approve_session;

/* -EINVAL (no name), -EEXIST, -ENOMEM; -EACCES after shutdown. */
int shk_approve_session_open(shk_approve *ap, const shk_approve_session *s, shk_error *err);
/* The session ended: releases its held attempts with SHK_APPROVE_ENDED,
 * closes its cards (a breaker card too) and forgets its denials and
 * counters. -ENOENT if unknown. */
int shk_approve_session_close(shk_approve *ap, const char *name);

/* ---- raising ---- */

/* A wider pattern the manifest allows, and the tier it would be at. */
typedef struct shk_approve_pattern {
  const char *pattern;
  shk_approve_tier tier;
} shk_approve_pattern;

typedef struct shk_approve_request {
  const char *session;        /* an open session's name */
  const char *cls;            /* "net.egress", ...; "credentials" is never
                               * batched and never sent to the reviewer */
  const char *scope;          /* the exact scope, a JSON object as text */
  const char *provenance;     /* "first-party" or "external"; NULL: first-party */
  bool ingested_external;     /* the session's flags at this moment */
  bool touched_sensitive;
  shk_approve_tier tier;      /* the tier that made it Ask; never BLOCK */
  const char *rule;           /* the deciding rule (policy id); may be NULL */
  const char *why;            /* the decision's one line; may be NULL */
  /* Requests with equal keys are ones a single pattern would cover; NULL:
   * never batched (credentials, anything the caller will not batch). */
  const char *batch_key;
  const char *pattern;        /* the proposed narrowest pattern; may be NULL */
  const shk_approve_pattern *wider; /* the wider ones the manifest allows */
  size_t n_wider;
  int64_t timeout_ms;         /* 0: the module's default */
  void *attempt;              /* the held attempt, opaque */
  shk_approve_release_fn release; /* required */
} shk_approve_request;

/* Raises a card for a held attempt, or joins the attempt to an open card
 * of the same session, tier, class and batch key. Never blocks: the
 * attempt is released later, exactly once, through rq->release (possibly
 * before this returns, see the threading rules above).
 *
 * Returns 0 when a new card was raised, 1 when the attempt joined an open
 * card; card_out (if not NULL) gets the card's id. On a negative return the
 * module did not take the attempt and will never release it; the caller
 * refuses it itself, with err's sentence:
 *   -EACCES  refused at once: this request was denied earlier in this
 *            session; a card with its batch key was cancelled, timed out or
 *            denied less than the batch window ago; the session is stopped
 *            (frozen by its breaker, or ended); or the module shut down
 *   -EBUSY   the session holds max_held attempts already
 *   -ENOENT  no such session
 *   -EINVAL  a missing field, a scope that is not a JSON object, tier BLOCK
 *   -ENOMEM */
int shk_approve_raise(shk_approve *ap, const shk_approve_request *rq,
                      char card_out[SHK_APPROVE_ID_HEX], shk_error *err);

/* Takes a held attempt back before it is released: its client went away
 * (the proxy's on_abandon). The attempt is never released; the card keeps
 * counting it among the attempts it stands for and stays open (an approval
 * for the session or a pattern still applies to what comes next). Returns
 * 0, after which the caller owns the attempt again, or -ENOENT when it is
 * not held (never raised, already released, or being released: then its
 * release comes, or has come, as usual). */
int shk_approve_withdraw(shk_approve *ap, void *attempt);

/* ---- notices ---- */

/* A grant the manager issued with no human because its tier is Notify. */
typedef struct shk_approve_notice {
  const char *session;   /* an open session's name */
  const char *cls;
  const char *scope;     /* JSON object as text */
  const char *handle;    /* the handle issued: what a revoke names */
  const char *rule;      /* the deciding rule; may be NULL */
  const char *why;       /* the decision's one line; may be NULL */
} shk_approve_notice;

/* Tells every human surface (a "notice" line to the subscribers, with
 * "handle" and the command that revokes it) and on_event. Nothing is held
 * and nothing waits: the grant already stands. 0, -EINVAL (a missing
 * field, a scope that is not a JSON object), -ENOENT (no such session),
 * -ENOMEM. */
int shk_approve_notify(shk_approve *ap, const shk_approve_notice *n, shk_error *err);

/* ---- resolving ---- */

typedef enum shk_approve_how {
  SHK_APPROVE_ONCE,      /* each held attempt once; nothing later */
  SHK_APPROVE_SESSION,   /* for the session: the card's pattern when its held
                          * attempts name several exact scopes and it
                          * proposes one, else each attempt's exact scope */
  SHK_APPROVE_PATTERN,   /* the proposed pattern or one of the wider ones */
  SHK_APPROVE_DENY,
  SHK_APPROVE_CANCEL,
  SHK_APPROVE_TAKEOVER,  /* freeze the card's session; the card stays open */
  SHK_APPROVE_RESUME,    /* a breaker card: thaw the session */
  SHK_APPROVE_END,       /* a breaker card: end the session */
} shk_approve_how;

/* "once", "session", "pattern", "deny", "cancel", "takeover", "resume",
 * "end". _parse returns 0 or -EINVAL. */
const char *shk_approve_how_name(shk_approve_how h);
int shk_approve_how_parse(const char *name, shk_approve_how *out);

/* What an approval for the session granted, for the answer the human
 * reads: a batch whose held attempts name more than one exact scope is
 * granted as the card's pattern when it proposes one, else as each exact
 * scope on its own. */
typedef struct shk_approve_granted {
  shk_approve_result result; /* the result the held attempts are released with */
  unsigned scopes;           /* distinct exact scopes the card's attempts named */
  char pattern[300];         /* APPROVED_PATTERN: the granted pattern; else "" */
} shk_approve_granted;

typedef struct shk_approve_answer {
  shk_approve_how how;
  const char *pattern;   /* PATTERN: the chosen one; NULL: the proposed */
  const char *reason;    /* optional; the agent reads a denial's */
  shk_approve_who who;   /* required */
  shk_approve_granted *granted; /* optional: filled for an approval */
} shk_approve_answer;

/* Resolves a card. Returns 0, or:
 *   -EPERM   no identity (an unknown surface, a surface only the module
 *            uses, a peer without uid and pid, a panel answer without a
 *            user), or a pattern the card does not offer or whose tier is
 *            laxer than the card's
 *   -EINVAL  an answer this kind of card does not take (approve on a
 *            breaker card, resume on a request card)
 *   -ENOENT  no such open card (never raised, or already resolved)
 *   -ENOSYS  take over with no freezer; or the freezer's error
 *   -ENOMEM */
int shk_approve_resolve(shk_approve *ap, const char *card, const shk_approve_answer *a,
                        shk_error *err);

/* Take over and resume by session, for `shinken takeover` and
 * `shinken resume`. Resume resolves an open breaker card of the session
 * and restarts the countdown of its other cards; it resets the breaker's
 * counters. -ENOENT no such session, -EINVAL (resume) not frozen, -EPERM
 * no identity, or the freezer's error. Taking over a frozen session is 0. */
int shk_approve_takeover(shk_approve *ap, const char *session, const shk_approve_who *who,
                         shk_error *err);
int shk_approve_resume(shk_approve *ap, const char *session, const shk_approve_who *who,
                       shk_error *err);

/* Times out every card whose deadline passed (its held attempts are
 * released SHK_APPROVE_TIMED_OUT; a breaker card that times out ends its
 * session) and forgets resolved cards older than the batch window. Returns
 * the milliseconds until the next deadline, or -1 when there is none. */
int64_t shk_approve_tick(shk_approve *ap);

/* ---- reading ---- */

/* The open cards that wait for a human (of `session`, or all when NULL),
 * newest first, as a JSON array (malloc'd text). 0 or -ENOMEM. */
int shk_approve_list(shk_approve *ap, const char *session, char **json_out);

/* Whether SESSION is frozen (by its breaker, or a human's take over): 1
 * frozen, 0 not, -ENOENT no such session. */
int shk_approve_session_frozen(shk_approve *ap, const char *session);

/* Subscribes to the stream of card events, each one JSON object on one
 * line ending in '\n'. The subscriber first gets a "raised" line for every
 * open card that waits for a human, then every later event that human
 * surfaces see (raised, updated, resolved, breaker, frozen, resumed,
 * ended), in order. Returns 0 and the subscription's id, or -ENOMEM. After
 * shk_approve_unsubscribe returns, fn is not running and is never called
 * again (unless it is the caller: unsubscribing from inside fn is
 * allowed). */
typedef void (*shk_approve_line_fn)(void *ud, const char *line, size_t len);
int shk_approve_subscribe(shk_approve *ap, shk_approve_line_fn fn, void *ud, uint64_t *id_out,
                          shk_error *err);
void shk_approve_unsubscribe(shk_approve *ap, uint64_t id);

/* ---- patterns ----
 *
 * The pattern a card proposes for a held attempt to HOST:PORT: the host's
 * siblings at that port, "*.PARENT:PORT", where PARENT is HOST less its
 * first label. Never wider than one label under the public suffix HOST
 * names: none is proposed when PARENT is itself a public suffix ("test",
 * "com", "co.uk"), for an address, or for a name of one label. The caller
 * still puts the pattern to its decision before offering it. Returns 0 with
 * the pattern in out, -ENOENT when there is none, -ENAMETOOLONG, -EINVAL. */
int shk_approve_sibling_pattern(const char *host, uint16_t port, char *out, size_t n);

/* Splits "HOST:PORT" (HOST may start with "*." or "**.") into its host
 * pattern and port. 0, or -EINVAL for anything else. */
int shk_approve_pattern_split(const char *pattern, char *host, size_t n, uint16_t *port);

#ifdef __cplusplus
}
#endif
#endif
