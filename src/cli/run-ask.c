/* SPDX-License-Identifier: Apache-2.0 */
/* The inline prompt of `shinken run`: when the run owns an interactive
 * terminal, the cards its embedded manager raises for the run's session (a
 * connection the proxy holds for a human) are drawn at the bottom of the
 * caller's terminal by the relay (shk_sandbox_prompt_ask) and answered
 * with one key: approve once, approve for the session, approve the card's
 * pattern (when it proposes one), deny, cancel, or take over (the sandbox
 * is frozen, and the prompt then offers to resume it or end it).
 *
 * Why the workload cannot answer, draw over or type into the prompt: the
 * card is drawn by the launcher on the caller's own terminal, which the
 * workload never has (it gets a pseudo-terminal of its own); while the
 * card shows, the relay holds the workload's output back, and the key is
 * read from the caller's terminal and never relayed. Bytes the workload
 * wrote earlier cannot be taken for a key either: a key pressed in the
 * first 400 ms, a paste or an escape sequence is not an answer. The text
 * comes from the manager's card (hosts canonical, every control character
 * shown as '?'), so a host name cannot carry an escape sequence onto the
 * screen. The answer goes to the manager in this process, as the
 * embedding process's call with surface "inline"; no socket is involved.
 * With a `shinken daemon` the same cards come on a control connection of
 * this process's, and the answers go on the control socket, which the
 * sandbox cannot reach either.
 *
 * Threads. The manager delivers the card stream on whichever thread is
 * delivering (shk_manager_subscribe): the callback only parses the line,
 * updates the list of open cards under `mu` and wakes the prompt thread,
 * which asks (blocking until the key, the card's deadline or a cancel) and
 * then answers the manager, with no lock held. A card resolved elsewhere
 * (`shinken approve`, its timeout) while it shows is withdrawn at once. */
#include "cli/run-ask.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/common.h"
#include "shinken/approve.h"

/* How long a Notify notice stays on the terminal. */
#define NOTICE_MS 10000

/* A card's id, or for a notice the handle's. */
#define ITEM_ID 96

/* What `shown` holds while the prompt of a taken-over session shows: no
 * card's id (those are hex), so that its "resumed" line can withdraw it. */
#define TAKEN_OVER "taken-over"

typedef struct ask_card {
  char id[ITEM_ID];
  json_t *card;           /* the card as the last "raised" or "updated" line gave it */
  bool asked;             /* drawn once already: not drawn again */
  struct ask_card *next;  /* raised after it */
} ask_card;

struct shk_cli_ask {
  shk_manager *m;          /* the embedded manager, or NULL: a daemon at `socket` */
  char *socket;
  int sub_fd;              /* a daemon's card stream, or -1 */
  pthread_t reader;
  bool reader_started;
  shk_sandbox_prompt *prompt;
  char *sid, *hint;
  uint64_t sub;
  bool subscribed, started;
  pthread_t thread;
  pthread_mutex_t mu;      /* guards what follows */
  pthread_cond_t cv;
  ask_card *cards;         /* the session's open cards, oldest first */
  char shown[ITEM_ID];     /* the card on the screen, or "" */
  bool gone;               /* it left while it shows: withdraw it */
  char *ended;             /* why the Ask loop ended the session, or NULL */
  bool stop;
  /* The withdrawer: a cancel that comes before the prompt thread's ask
   * has begun is lost, so a card that left keeps being withdrawn until the
   * prompt thread is done with it. */
  pthread_t withdrawer;
  bool withdrawer_started;
};

static int64_t wall_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void card_free(ask_card *c)
{
  if (c) {
    json_decref(c->card);
    free(c);
  }
}

/* Caller holds mu. */
static ask_card **card_find(shk_cli_ask *a, const char *id)
{
  ask_card **pp = &a->cards;
  while (*pp && strcmp((*pp)->id, id))
    pp = &(*pp)->next;
  return pp;
}

/* Caller holds mu. A card of this session that waits for a human: added,
 * or its copy replaced (attempts joined). */
static void card_put(shk_cli_ask *a, json_t *card)
{
  const char *id = json_string_value(json_object_get(card, "id"));
  json_t *session = json_object_get(card, "session");
  const char *sname = json_string_value(json_object_get(session, "name"));
  const char *state = json_string_value(json_object_get(card, "state"));
  if (!id || strlen(id) >= ITEM_ID || !sname || strcmp(sname, a->sid) || !state ||
      strcmp(state, "pending"))
    return;
  ask_card **pp = card_find(a, id);
  if (*pp) {
    json_decref((*pp)->card);
    (*pp)->card = json_incref(card);
    return;
  }
  ask_card *c = calloc(1, sizeof *c);
  if (!c)
    return; /* the card waits its timeout; another surface can answer it */
  snprintf(c->id, sizeof c->id, "%s", id);
  c->card = json_incref(card);
  *pp = c;
  pthread_cond_broadcast(&a->cv);
}

/* Caller holds mu. A Notify grant of this session: shown like a card that
 * offers to revoke it, and that goes by itself after NOTICE_MS. */
static void notice_put(shk_cli_ask *a, json_t *ev)
{
  const char *handle = json_string_value(json_object_get(ev, "handle"));
  const char *sname = json_string_value(json_object_get(ev, "session"));
  if (!handle || strlen(handle) >= ITEM_ID || !sname || strcmp(sname, a->sid) || *card_find(a, handle))
    return;
  ask_card *c = calloc(1, sizeof *c);
  json_t *copy = json_deep_copy(ev);
  if (!c || !copy || json_object_set_new(copy, "kind", json_string("notice"))) {
    free(c);
    json_decref(copy);
    return; /* the grant stands; approvals -f and the timeline still say it */
  }
  snprintf(c->id, sizeof c->id, "%s", handle);
  c->card = copy;
  *card_find(a, handle) = c;
  pthread_cond_broadcast(&a->cv);
}

/* Caller holds mu. The card left (answered anywhere, timed out, or its
 * session ended): off the list, and off the screen if it shows. */
static void card_gone(shk_cli_ask *a, const char *id)
{
  ask_card **pp = card_find(a, id);
  if (*pp) {
    ask_card *c = *pp;
    *pp = c->next;
    card_free(c);
  }
  if (a->shown[0] && !strcmp(a->shown, id)) {
    a->gone = true;
    shk_sandbox_prompt_cancel(a->prompt);
    pthread_cond_broadcast(&a->cv);
  }
}

/* The manager's card stream (shk_manager_subscribe), on the thread that
 * delivers it: short, and never calls the manager. */
static void on_line(void *ud, const char *line, size_t len)
{
  shk_cli_ask *a = ud;
  json_t *ev = json_loadb(line, len, 0, NULL);
  const char *kind = json_string_value(json_object_get(ev, "event"));
  json_t *card = json_object_get(ev, "card");
  pthread_mutex_lock(&a->mu);
  if (!kind) {
    /* Unparsable (out of memory): nothing to draw. */
  } else if (!strcmp(kind, "raised") || !strcmp(kind, "updated") || !strcmp(kind, "breaker")) {
    if (json_is_object(card))
      card_put(a, card);
  } else if (!strcmp(kind, "notice")) {
    notice_put(a, ev);
  } else if (!strcmp(kind, "resolved")) {
    if (json_is_string(card))
      card_gone(a, json_string_value(card));
  } else if (!strcmp(kind, "resumed")) {
    /* Resumed elsewhere while this terminal offers to resume it. */
    const char *sname = json_string_value(json_object_get(ev, "session"));
    if (sname && !strcmp(sname, a->sid))
      card_gone(a, TAKEN_OVER);
  } else if (!strcmp(kind, "ended")) {
    const char *sname = json_string_value(json_object_get(ev, "session"));
    bool mine = sname && !strcmp(sname, a->sid);
    while (mine && a->cards) {
      char id[ITEM_ID];
      snprintf(id, sizeof id, "%s", a->cards->id);
      card_gone(a, id);
    }
    /* The Ask loop ended the session (its breaker: a human said end, or
     * nobody answered): its grants are gone, and so must its processes
     * be, stopped or not. */
    if (mine && !a->ended) {
      const char *why = json_string_value(json_object_get(ev, "reason"));
      a->ended = shk__xstrdup(why ? why : "the Ask loop ended it");
      (void)shk_sandbox_signal_launched(SHK_SANDBOX_KILL, NULL, NULL);
    }
  }
  pthread_mutex_unlock(&a->mu);
  json_decref(ev);
}

/* What a card asks for, in a few words: "api.test:443" for an egress
 * card, else the class and the scope as JSON. Malloc'd. */
static char *card_what(json_t *card)
{
  const char *cls = json_string_value(json_object_get(card, "class"));
  json_t *scope = json_object_get(card, "scope");
  json_t *domains = json_object_get(scope, "domains"), *ports = json_object_get(scope, "ports");
  if (cls && !strcmp(cls, "net.egress") && json_array_size(domains) == 1 && json_array_size(ports) <= 1 &&
      json_is_string(json_array_get(domains, 0))) {
    const char *host = json_string_value(json_array_get(domains, 0));
    json_t *port = json_array_get(ports, 0);
    return json_is_integer(port) ? shk__xasprintf("a connection to %s:%lld", host, (long long)json_integer_value(port))
                                 : shk__xasprintf("connections to %s", host);
  }
  /* A privileged command's card names the exact command line in its
   * why ("sudo CMD (...)"): that is what the human approves. */
  const char *why = json_string_value(json_object_get(card, "why"));
  if (cls && !strcmp(cls, "install.privileged") && why && !strncmp(why, "sudo ", 5)) {
    const char *scope_name = json_string_value(json_object_get(scope, "scope"));
    return shk__xasprintf("%s, install.privileged scope %s", why, scope_name ? scope_name : "?");
  }
  shk_autofree char *text = scope ? json_dumps(scope, JSON_COMPACT) : NULL;
  return shk__xasprintf("%s %s", cls ? cls : "a capability", text ? text : "{}");
}

/* The lines of the prompt for CARD, and the keys that answer it. */
static char *card_text(json_t *card, int64_t left_ms, const char **keys)
{
  const char *kind = json_string_value(json_object_get(card, "kind"));
  long secs = (long)((left_ms + 999) / 1000);
  if (kind && !strcmp(kind, "notice")) {
    shk_autofree char *what = card_what(card);
    *keys = "rk";
    return shk__xasprintf("shinken: granted with no human (tier notify): %s\n"
                          "  [r] revoke it   [k] keep it (this goes in %ld s)",
                          what, secs);
  }
  if (kind && !strcmp(kind, "breaker")) {
    const char *why = json_string_value(json_object_get(card, "reason"));
    *keys = "re";
    return shk__xasprintf("shinken: this session was stopped: %s\n"
                          "  it ends in %ld s unless you resume it\n"
                          "  [r] resume   [e] end the session",
                          why ? why : "too many refusals", secs);
  }
  shk_autofree char *what = card_what(card);
  const char *tier = json_string_value(json_object_get(card, "tier"));
  const char *rule = json_string_value(json_object_get(card, "rule"));
  json_int_t attempts = json_integer_value(json_object_get(card, "attempts"));
  /* [p] only when the card proposes a pattern: the manager offered it
   * because the decision allows it, and it grants that pattern alone. */
  const char *pattern = json_string_value(json_object_get(card, "pattern"));
  *keys = pattern ? "ospdct" : "osdct";
  shk_autofree char *pline = pattern ? shk__xasprintf("   [p] approve the pattern %s", pattern) : NULL;
  return shk__xasprintf("shinken: the sandbox asks for %s (tier %s%s%s)\n"
                        "  %lld attempt%s held; refused in %ld s if nobody answers\n"
                        "  [o] approve once   [s] approve for this session%s\n"
                        "  [d] deny   [c] cancel (refused now, may ask again)   [t] take over (freeze the sandbox)",
                        what, tier ? tier : "ask", rule ? ", rule " : "", rule ? rule : "",
                        (long long)attempts, attempts == 1 ? "" : "s", secs, pline ? pline : "");
}

/* One request REQ (taken over) to the manager: the embedded one, or the
 * daemon on a connection of its own (the subscribed one carries the
 * stream). Whether it was taken; a card resolved meanwhile by someone else
 * is refused, and there is nothing to do then but take the next. */
static bool call(shk_cli_ask *a, json_t *req)
{
  shk_autofree char *text = req ? json_dumps(req, JSON_COMPACT) : NULL;
  json_decref(req);
  if (!text)
    return false;
  char *ans = NULL;
  int fd = -1;
  shk_error err;
  if (a->m) {
    if (shk_manager_call(a->m, text, &ans) < 0)
      ans = NULL;
  } else if ((fd = shk_manager_connect(a->socket)) < 0 || shk_manager_rpc(fd, text, &ans, &err) < 0) {
    ans = NULL;
  }
  if (fd >= 0)
    close(fd);
  json_t *j = ans ? json_loads(ans, 0, NULL) : NULL;
  bool ok = json_is_true(json_object_get(j, "ok"));
  json_decref(j);
  free(ans);
  return ok;
}

/* Answers card ID with RESOLUTION, as the terminal of this run (surface
 * "inline"). */
static bool answer(shk_cli_ask *a, const char *id, const char *resolution)
{
  json_t *req = json_pack("{s:s, s:s, s:s, s:s}", "op", "resolve", "card", id, "resolution", resolution,
                          "surface", "inline");
  if (req && !strcmp(resolution, "deny"))
    json_object_set_new(req, "reason", json_string("denied at the terminal of shinken run"));
  return call(a, req);
}

/* Withdraws the card on the screen that has left (or every prompt, once
 * stopping), every 20 ms until the prompt thread is done with it. */
static void *withdrawer_thread(void *arg)
{
  shk_cli_ask *a = arg;
  pthread_mutex_lock(&a->mu);
  while (!a->stop || a->shown[0]) {
    if (!(a->gone || a->stop) || !a->shown[0]) {
      pthread_cond_wait(&a->cv, &a->mu);
      continue;
    }
    shk_sandbox_prompt_cancel(a->prompt);
    pthread_mutex_unlock(&a->mu);
    nanosleep(&(struct timespec){ .tv_nsec = 20 * 1000000 }, NULL);
    pthread_mutex_lock(&a->mu);
  }
  pthread_mutex_unlock(&a->mu);
  return NULL;
}

/* Revokes the handle a notice named, as the embedding process. */
static void revoke_handle(shk_cli_ask *a, const char *handle)
{
  call(a, json_pack("{s:s, s:s}", "op", "revoke", "handle", handle));
}

/* Caller holds mu. Card ID is drawn again (its session resumed, or take
 * over refused): its countdown runs again, and it still waits for a key. */
static void card_again(shk_cli_ask *a, const char *id)
{
  ask_card *c = *card_find(a, id);
  if (c) {
    c->asked = false;
    pthread_cond_broadcast(&a->cv);
  }
}

/* The session was taken over from this terminal: its sandbox is frozen
 * until the key here says resume (the manager's resume, answered as the
 * terminal's) or end (this process kills the sandbox it launched, and the
 * run ends saying so). Resumed elsewhere, the prompt is withdrawn. The
 * card that was taken over is drawn again after a resume. */
static void taken_over(shk_cli_ask *a, const char *id)
{
  pthread_mutex_lock(&a->mu);
  snprintf(a->shown, sizeof a->shown, "%s", TAKEN_OVER);
  a->gone = false;
  bool stop = a->stop;
  pthread_mutex_unlock(&a->mu);
  int r = stop ? -ECANCELED
               : shk_sandbox_prompt_ask(a->prompt, "shinken: you took over this session: every process of the "
                                                   "sandbox is frozen\n"
                                                   "  [r] resume it   [e] end the session (its processes are killed)",
                                        "re", 0);
  if (r == 'r')
    (void)call(a, json_pack("{s:s, s:s, s:s}", "op", "resume", "session", a->sid, "surface", "inline"));
  pthread_mutex_lock(&a->mu);
  if (r == 'e' && !a->ended) {
    a->ended = shk__xstrdup("ended at the terminal of shinken run while taken over");
    (void)shk_sandbox_signal_launched(SHK_SANDBOX_KILL, NULL, NULL);
  } else {
    card_again(a, id);
  }
  pthread_mutex_unlock(&a->mu);
}

static void *prompt_thread(void *arg)
{
  shk_cli_ask *a = arg;
  pthread_mutex_lock(&a->mu);
  for (;;) {
    ask_card *c = a->cards;
    while (c && c->asked)
      c = c->next;
    if (a->stop)
      break;
    if (!c) {
      pthread_cond_wait(&a->cv, &a->mu);
      continue;
    }
    c->asked = true;
    char id[ITEM_ID];
    snprintf(id, sizeof id, "%s", c->id);
    snprintf(a->shown, sizeof a->shown, "%s", id);
    a->gone = false;
    json_t *card = json_incref(c->card);
    pthread_mutex_unlock(&a->mu);

    const char *kind = json_string_value(json_object_get(card, "kind"));
    bool breaker = kind && !strcmp(kind, "breaker"), notice = kind && !strcmp(kind, "notice");
    json_t *exp = notice ? NULL : json_object_get(card, "expires_ms");
    /* A paused card (its session taken over) has no deadline: it waits for
     * the key. Otherwise the prompt goes when the card times out. */
    bool timed = notice || json_is_integer(exp);
    int64_t left = notice ? NOTICE_MS : timed ? json_integer_value(exp) - wall_ms() : 0;
    const char *keys = NULL;
    shk_autofree char *text = card_text(card, left > 0 ? left : 0, &keys);
    json_decref(card); /* nothing of it is read after this */
    int r = timed && left <= 0 ? -ETIMEDOUT
          : shk_sandbox_prompt_ask(a->prompt, text, keys, timed ? (int)(left < INT32_MAX ? left : INT32_MAX) : 0);
    if (notice) {
      if (r == 'r')
        revoke_handle(a, id);
      pthread_mutex_lock(&a->mu);
      card_gone(a, id);
      pthread_mutex_unlock(&a->mu);
    } else if (r == 'o')
      answer(a, id, "once");
    else if (r == 's')
      answer(a, id, "session");
    else if (r == 'p')
      answer(a, id, "pattern");
    else if (r == 'd')
      answer(a, id, "deny");
    else if (r == 'c' && !breaker)
      answer(a, id, "cancel");
    else if (r == 't' && !breaker) {
      /* Refused (no freezer, or the freeze failed): the card stays, and
       * is drawn again. */
      if (answer(a, id, "takeover"))
        taken_over(a, id);
      else {
        pthread_mutex_lock(&a->mu);
        card_again(a, id);
        pthread_mutex_unlock(&a->mu);
      }
    }
    else if (r == 'r' && breaker)
      answer(a, id, "resume");
    else if (r == 'e' && breaker)
      answer(a, id, "end");
    pthread_mutex_lock(&a->mu);
    /* No relay draws (the terminal went, or the run is ending): the card
     * still waits its timeout for another surface. */
    if (r == -ENOTTY && a->hint && !a->stop)
      fprintf(stderr, "shinken: a card waits for an answer: %s %s\n", a->hint, id);
    a->shown[0] = '\0';
    a->gone = false;
    pthread_cond_broadcast(&a->cv);
  }
  pthread_mutex_unlock(&a->mu);
  return NULL;
}

/* The Ask loop's freezer for the run's session (take over, breakers):
 * every process of the sandbox this process launched. Called with the
 * Ask loop's lock held; it only scans /proc and sends signals. */
static int freeze_sandbox(void *ud, bool stop)
{
  (void)ud;
  return shk_sandbox_signal_launched(stop ? SHK_SANDBOX_STOP : SHK_SANDBOX_CONTINUE, NULL, NULL);
}

static shk_cli_ask *ask_start_on(shk_manager *m, const char *path, const char *sid,
                                 shk_sandbox_prompt *prompt, const char *hint);

/* A daemon's card stream, line by line, until the connection ends. */
static void *reader_thread(void *arg)
{
  shk_cli_ask *a = arg;
  FILE *in = fdopen(dup(a->sub_fd), "re");
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  while (in && (n = getline(&line, &cap, in)) > 0)
    on_line(a, line, (size_t)n);
  free(line);
  if (in)
    fclose(in);
  return NULL;
}

/* Subscribes to the daemon at a->socket: the first line is the answer. */
static bool subscribe_remote(shk_cli_ask *a)
{
  a->sub_fd = shk_manager_connect(a->socket);
  if (a->sub_fd < 0)
    return false;
  static const char req[] = "{\"op\":\"subscribe\"}\n";
  char first[256];
  size_t got = 0;
  if (write(a->sub_fd, req, sizeof req - 1) != (ssize_t)(sizeof req - 1))
    return false;
  /* Byte by byte up to the newline: what follows is the stream, read by
   * the reader thread. */
  while (got < sizeof first - 1 && read(a->sub_fd, first + got, 1) == 1 && first[got] != '\n')
    got++;
  first[got] = '\0';
  json_t *ans = json_loads(first, 0, NULL);
  bool ok = json_is_true(json_object_get(ans, "subscribed"));
  json_decref(ans);
  return ok && pthread_create(&a->reader, NULL, reader_thread, a) == 0 && (a->reader_started = true);
}

shk_cli_ask *shk_cli_ask_start_daemon(const char *path, const char *sid, shk_sandbox_prompt *prompt,
                                      const char *hint)
{
  return ask_start_on(NULL, path, sid, prompt, hint);
}

shk_cli_ask *shk_cli_ask_start(shk_manager *m, const char *sid, shk_sandbox_prompt *prompt, const char *hint)
{
  return ask_start_on(m, NULL, sid, prompt, hint);
}

static shk_cli_ask *ask_start_on(shk_manager *m, const char *path, const char *sid,
                                 shk_sandbox_prompt *prompt, const char *hint)
{
  shk_cli_ask *a = calloc(1, sizeof *a);
  if (!a)
    return NULL;
  a->m = m;
  a->socket = path ? shk__xstrdup(path) : NULL;
  a->sub_fd = -1;
  a->prompt = prompt;
  a->sid = shk__xstrdup(sid);
  a->hint = hint ? shk__xstrdup(hint) : NULL;
  pthread_mutex_init(&a->mu, NULL);
  pthread_cond_init(&a->cv, NULL);
  shk_error err;
  if (pthread_create(&a->thread, NULL, prompt_thread, a) == 0)
    a->started = true;
  if (a->started && pthread_create(&a->withdrawer, NULL, withdrawer_thread, a) == 0)
    a->withdrawer_started = true;
  if (a->withdrawer_started && (m ? shk_manager_subscribe(m, on_line, a, &a->sub, &err) == 0 : subscribe_remote(a)))
    a->subscribed = true;
  if (!a->subscribed) {
    shk_cli_ask_stop(a);
    return NULL;
  }
  /* Without it a breaker ends the session instead of freezing it. A
   * daemon cannot reach this process's freezer (yet): its breaker ends
   * the session, and the "ended" line kills the sandbox here. */
  if (m)
    (void)shk_manager_set_freezer(m, sid, freeze_sandbox, NULL);
  return a;
}

void shk_cli_ask_stop(shk_cli_ask *a)
{
  if (!a)
    return;
  /* After this, on_line is not running and is never called again. */
  if (a->subscribed && a->m) {
    shk_manager_unsubscribe(a->m, a->sub);
    shk_manager_set_freezer(a->m, a->sid, NULL, NULL);
  }
  if (a->sub_fd >= 0)
    shutdown(a->sub_fd, SHUT_RDWR);
  if (a->reader_started)
    pthread_join(a->reader, NULL);
  if (a->sub_fd >= 0)
    close(a->sub_fd);
  pthread_mutex_lock(&a->mu);
  a->stop = true;
  pthread_cond_broadcast(&a->cv);
  pthread_mutex_unlock(&a->mu);
  if (a->started)
    pthread_join(a->thread, NULL);
  if (a->withdrawer_started)
    pthread_join(a->withdrawer, NULL);
  for (ask_card *c = a->cards, *n; c; c = n) {
    n = c->next;
    card_free(c);
  }
  if (a->ended)
    shk__warn("the session was ended: %s", a->ended);
  free(a->ended);
  pthread_cond_destroy(&a->cv);
  pthread_mutex_destroy(&a->mu);
  free(a->sid);
  free(a->hint);
  free(a->socket);
  free(a);
}
