/* SPDX-License-Identifier: Apache-2.0 */
/* The Ask loop's internals: the state shared by the card machine
 * (approve.c), the ordered delivery of callbacks and the JSON of cards and
 * events (deliver.c), and the reviewer hook (reviewer.c).
 *
 * One mutex (shk_approve.mu) guards everything below. Nothing is ever
 * called back with it held except freeze and thaw; every other callback
 * goes through the delivery queue, which the thread holding the "drainer"
 * role empties one item at a time with the lock released. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "shinken/approve.h"

/* ---- the delivery queue ---- */

typedef enum shk__q_kind {
  SHK__Q_RELEASE, /* a held attempt going back to its caller */
  SHK__Q_EVENT,   /* an event for on_event and/or the subscribers */
} shk__q_kind;

typedef struct shk__qnode {
  struct shk__qnode *next;
  shk__q_kind kind;
} shk__qnode;

/* What one resolution says, shared by the attempts it releases. refs is 0
 * for the static ones (timeout, session end, shutdown), which are never
 * freed. */
typedef struct shk__resolution {
  unsigned refs;
  shk_approve_result result;
  shk_approve_tier tier;
  const char *pattern;
  const char *reason;
  shk_approve_who who;  /* its strings are owned (unless static) */
} shk__resolution;

typedef struct shk__attempt {
  shk__qnode q;                 /* first: the attempt is its own queue node */
  struct shk__attempt *next;    /* on its card */
  void *ptr;
  shk_approve_release_fn release;
  char card[SHK_APPROVE_ID_HEX];
  char *session, *cls, *scope;  /* copies: the card may be gone at release */
  shk_approve_tier tier;        /* the card's */
  int64_t raised_ms;
  shk__resolution *res;         /* set when released */
} shk__attempt;

typedef struct shk__event {
  shk__qnode q;
  shk_approve_event e;  /* points into root (and scope) */
  json_t *root;         /* the event as JSON */
  char *line;           /* root as text, with '\n' */
  size_t len;
  char *scope;          /* the scope as text, for e.scope */
  shk_approve_who by;   /* copy of the resolver, pointing into root */
  bool audit;           /* goes to on_event */
  bool human;           /* goes to the subscribers */
  uint64_t target;      /* 0: every subscriber; else only this one */
  char *end_session;    /* when set, call opts.end after delivering */
  char *end_why;
} shk__event;

/* ---- cards and sessions ---- */

typedef enum shk__card_state {
  SHK__CARD_REVIEWING,  /* with the reviewer; no human sees it yet */
  SHK__CARD_PENDING,    /* waits for a human */
  SHK__CARD_RESOLVED,   /* kept for the batch window, then freed */
} shk__card_state;

struct shk__session;

typedef struct shk__card {
  struct shk__card *next;
  char id[SHK_APPROVE_ID_HEX];
  bool breaker;
  shk__card_state state;
  bool shown;                   /* a human surface was told of it */
  struct shk__session *s;
  char *cls, *scope, *provenance, *rule, *why, *batch_key, *pattern, *breaker_why;
  json_t *scope_v;              /* scope, parsed once */
  shk_approve_pattern *wider;   /* owned copies */
  size_t n_wider;
  bool ingested_external, touched_sensitive;
  shk_approve_tier tier;
  int64_t raised_ms, deadline_ms;
  int64_t paused_left_ms;       /* > 0 while its session is frozen */
  int64_t resolved_ms;
  shk_approve_result result;    /* once resolved */
  char *result_reason;          /* for refusing siblings in the window */
  shk__attempt *held, *held_tail;
  unsigned attempts;
} shk__card;

typedef struct shk__denial {
  char *key;     /* "s:" class, newline, exact scope; or "k:" class, newline, batch key */
  char *reason;  /* the sentence a later raise is refused with */
} shk__denial;

typedef struct shk__session {
  struct shk__session *next;
  char *name, *label, *command, *cwd, *agent, *model;
  int64_t started_ms;
  unsigned consecutive, total;
  bool frozen, ended;
  shk__card *breaker;           /* its open breaker card */
  shk__denial *denied;
  size_t n_denied, cap_denied;
  unsigned n_held;
} shk__session;

typedef struct shk__sub {
  struct shk__sub *next;
  uint64_t id;
  uint64_t since;               /* events up to this seq are in its snapshot */
  shk_approve_line_fn fn;
  void *ud;
} shk__sub;

typedef struct shk__review shk__review;

struct shk_approve {
  pthread_mutex_t mu;
  pthread_cond_t cond;          /* delivery progress, reviews ending */
  pthread_cond_t timer_cond;    /* a deadline may have moved earlier */
  shk_approve_opts o;
  char **reviewer_argv;         /* owned copy */
  shk__session *sessions;
  shk__card *cards;
  shk__sub *subs;
  uint64_t next_sub;
  uint64_t seq;
  uint64_t lost_events;
  bool surface;
  bool shut;
  bool timer_kick;              /* set when a deadline may have moved */
  /* the delivery queue */
  shk__qnode *qhead, *qtail;
  bool draining;
  pthread_t drainer;
  uint64_t delivering;          /* the subscriber being called, or 0 */
  /* the reviewers */
  shk__review *reviews;
  unsigned n_reviews;
  /* the timer thread */
  bool has_timer;
  pthread_t timer;
};

/* ---- approve.c ---- */

int64_t shk__approve_now(shk_approve *ap);
shk__card *shk__approve_find_card(shk_approve *ap, const char *id);
/* A card leaves review for the humans (the reviewer escalated or failed). */
void shk__approve_to_humans(shk_approve *ap, shk__card *c);
/* Resolves a request card with `res` (takes one reference). */
void shk__approve_finish(shk_approve *ap, shk__card *c, shk__resolution *res);
shk__resolution *shk__approve_resolution_new(shk_approve_result result, shk_approve_tier tier,
                                             const char *pattern, const char *reason,
                                             const shk_approve_who *who);
/* The optional timer thread. */
void *shk__approve_timer_main(void *arg);

/* ---- deliver.c (all with mu held) ---- */

/* Builds an event about card c (or about session s when c is NULL), for
 * the audit and, when `human`, for the subscribers; kind decides the JSON's
 * shape. The caller may add fields to e->root, then queues it. NULL (and
 * the event counted as lost) when memory runs out. */
shk__event *shk__approve_event(shk_approve *ap, shk_approve_event_kind kind, const shk__card *c,
                               const shk__session *s, bool human);
/* Adds a resolution's fields (result, reason, pattern, by), a reason and a
 * reviewer's decision, each when not NULL. e may be NULL: nothing happens. */
void shk__approve_event_set(shk__event *e, const shk__resolution *res, const char *reason,
                            const char *decision);
/* Appends a release or an event (an event's typed fields and line are made
 * here; one that cannot be is freed and counted as lost). */
void shk__approve_queue(shk_approve *ap, shk__qnode *n);
/* Delivers the queue unless another thread is; returns with mu held. */
void shk__approve_drain(shk_approve *ap);
/* Waits until the queue is empty and nobody delivers (unless the caller is
 * the one delivering). */
void shk__approve_quiesce(shk_approve *ap);
/* The "raised" (or "breaker") line a late subscriber gets for an open
 * card: no seq of its own, for subscriber `target` only. */
shk__event *shk__approve_snapshot_event(shk_approve *ap, const shk__card *c, uint64_t target);
json_t *shk__approve_card_json(const shk__card *c);
json_t *shk__approve_who_json(const shk_approve_who *w);
void shk__approve_event_free(shk__event *e);
void shk__approve_resolution_unref(shk__resolution *r);

/* ---- reviewer.c ---- */

typedef enum shk__review_decision {
  SHK__REVIEW_APPROVE,
  SHK__REVIEW_DENY,
  SHK__REVIEW_ESCALATE,
} shk__review_decision;

typedef struct shk__review_answer {
  shk__review_decision decision;
  char reason[512];
} shk__review_answer;

/* Parses a reviewer's answer: exactly one JSON object with "decision"
 * ("approve", "deny" or "escalate") and an optional "reason" (a string or
 * null), nothing else, surrounded by nothing but white space. The reason is
 * cleaned (shk__approve_clean_text). 0 or -EINVAL (with err). */
int shk__approve_parse_answer(const char *text, size_t len, shk__review_answer *out, shk_error *err);

/* Copies `in` into out[len]: control characters become spaces, the text is
 * cut at `len - 1` bytes on a UTF-8 boundary. For every sentence a human or
 * a reviewer writes that an agent or a terminal will show. */
void shk__approve_clean_text(const char *in, char *out, size_t len);

/* Starts a review of card c on its own thread (mu held). Returns 0, or a
 * negative errno when it could not start (then the card goes to humans). */
int shk__approve_review_start(shk_approve *ap, shk__card *c);
/* Kills every running reviewer and waits for the review threads (mu NOT
 * held). */
void shk__approve_review_stop_all(shk_approve *ap);
/* Joins review threads that have finished (mu NOT held). */
void shk__approve_review_reap(shk_approve *ap);
