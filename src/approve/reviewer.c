/* SPDX-License-Identifier: Apache-2.0 */
/* The reviewer hook: before an Ask-tier card reaches a human, a configured
 * command may answer it. It gets a stripped record on stdin (who acts, the
 * class, the exact scope, provenance and the session's label: never the
 * agent's own explanation or any tool output, which an injected prompt
 * could have written) and answers one JSON object on stdout within a
 * bounded time. Anything but a clean "approve" or "deny" from a process
 * that exited 0 sends the card to the humans: a reviewer can refuse or
 * defer, and its failure can never grant.
 *
 * Each review runs on its own thread, never the caller's, so a hanging
 * reviewer delays nothing but its own card. */
#include "approve/approve-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"

extern char **environ;

#define ANSWER_MAX 65536

struct shk__review {
  shk__review *next;
  shk_approve *ap;
  pthread_t th;
  char card[SHK_APPROVE_ID_HEX];
  char *record;
  pid_t pid;        /* the running reviewer (under mu), or 0 */
  bool done;        /* the thread has finished with the module */
};

/* ---- text ---- */

/* Decodes one UTF-8 sequence at s (n bytes left); returns its length and
 * the code point, or 0 for an invalid sequence. */
static size_t utf8_next(const unsigned char *s, size_t n, unsigned *cp)
{
  if (s[0] < 0x80) {
    *cp = s[0];
    return 1;
  }
  size_t len = s[0] < 0xC2 ? 0 : s[0] < 0xE0 ? 2 : s[0] < 0xF0 ? 3 : s[0] <= 0xF4 ? 4 : 0;
  if (!len || len > n)
    return 0;
  unsigned v = s[0] & (0x7F >> len);
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80)
      return 0;
    v = (v << 6) | (s[i] & 0x3F);
  }
  static const unsigned min[] = { 0, 0, 0x80, 0x800, 0x10000 };
  if (v < min[len] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
    return 0;
  *cp = v;
  return len;
}

/* A reason is shown on a terminal, in a browser and to a model: no control
 * characters (C0, DEL, C1: a terminal's escapes), no bidirectional
 * overrides (which make a card read differently than it is), valid UTF-8
 * only. */
void shk__approve_clean_text(const char *in, char *out, size_t len)
{
  if (!len)
    return;
  const unsigned char *s = (const unsigned char *)in;
  size_t n = strlen(in), o = 0;
  for (size_t i = 0; i < n;) {
    unsigned cp;
    size_t l = utf8_next(s + i, n - i, &cp);
    const char *put;
    size_t put_len;
    if (!l) {
      put = "?";
      put_len = 1;
      l = 1;
    } else if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0) || (cp >= 0x202A && cp <= 0x202E) ||
               (cp >= 0x2066 && cp <= 0x2069) || cp == 0x2028 || cp == 0x2029) {
      put = " ";
      put_len = 1;
    } else {
      put = (const char *)s + i;
      put_len = l;
    }
    if (o + put_len >= len)
      break;
    memcpy(out + o, put, put_len);
    o += put_len;
    i += l;
  }
  out[o] = '\0';
}

int shk__approve_parse_answer(const char *text, size_t len, shk__review_answer *out, shk_error *err)
{
  memset(out, 0, sizeof *out);
  out->decision = SHK__REVIEW_ESCALATE;
  json_error_t jerr;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  int r = 0;
  if (!json_is_object(root)) {
    r = shk__error_set(err, -EINVAL, "the reviewer's answer is not a JSON object (%s)",
                       root ? "another JSON value" : jerr.text);
    goto out;
  }
  const char *key;
  json_t *v;
  bool have = false;
  json_object_foreach(root, key, v) {
    if (!strcmp(key, "decision")) {
      const char *d = json_string_value(v);
      if (d && !strcmp(d, "approve"))
        out->decision = SHK__REVIEW_APPROVE;
      else if (d && !strcmp(d, "deny"))
        out->decision = SHK__REVIEW_DENY;
      else if (d && !strcmp(d, "escalate"))
        out->decision = SHK__REVIEW_ESCALATE;
      else {
        r = shk__error_set(err, -EINVAL, "the reviewer's decision must be approve, deny or escalate");
        goto out;
      }
      have = true;
    } else if (!strcmp(key, "reason")) {
      if (!json_is_string(v) && !json_is_null(v)) {
        r = shk__error_set(err, -EINVAL, "the reviewer's reason must be a string");
        goto out;
      }
      shk__approve_clean_text(json_is_string(v) ? json_string_value(v) : "", out->reason,
                              sizeof out->reason);
    } else {
      r = shk__error_set(err, -EINVAL, "the reviewer's answer has an unknown field '%s'", key);
      goto out;
    }
  }
  if (!have)
    r = shk__error_set(err, -EINVAL, "the reviewer's answer has no decision");
out:
  if (r) {
    out->decision = SHK__REVIEW_ESCALATE;
    out->reason[0] = '\0';
  }
  json_decref(root);
  return r;
}

/* ---- running the reviewer ---- */

static int64_t mono_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for `fd` to be ready for `events` until `deadline`; 1 ready, 0
 * timed out, negative errno. */
static int wait_fd(int fd, short events, int64_t deadline)
{
  for (;;) {
    int64_t left = deadline - mono_ms();
    if (left <= 0)
      return 0;
    struct pollfd p = { fd, events, 0 };
    int n = poll(&p, 1, left > 1000000 ? 1000000 : (int)left);
    if (n > 0)
      return 1;
    if (n < 0 && errno != EINTR)
      return -errno;
  }
}

/* Runs the reviewer once. Returns 0 with its answer in buf (it exited 0
 * in time), or a negative errno with `why` filled.
 *
 * Why this is safe: the command is an absolute path with an argv, never a
 * shell string; the child gets only stdin (the record), stdout (the answer)
 * and /dev/null, every other descriptor of the manager closed (the control
 * socket, the sessions' proxies), default signal dispositions and its own
 * process group, which is killed whole at the deadline. Writing uses
 * MSG_NOSIGNAL on a socket, so a reviewer that exits without reading cannot
 * kill the manager with SIGPIPE. */
static int run_reviewer(shk__review *rv, char *buf, size_t *len, char *why, size_t whylen)
{
  shk_approve *ap = rv->ap;
  int in[2] = { -1, -1 }, out[2] = { -1, -1 };
  int r = 0;
  pid_t pid = 0;
  shk_autoclose int pidfd = -1;
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) < 0 || pipe2(out, O_CLOEXEC) < 0) {
    r = -errno;
    snprintf(why, whylen, "the reviewer could not be started: %s", strerror(errno));
    goto out;
  }
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&at);
  posix_spawn_file_actions_adddup2(&fa, in[1], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&at, &all);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setpgroup(&at, 0);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  int e = posix_spawn(&pid, ap->reviewer_argv[0], &fa, &at, ap->reviewer_argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  close(in[1]);
  close(out[1]);
  in[1] = out[1] = -1;
  if (e) {
    pid = 0;
    r = -e;
    snprintf(why, whylen, "the reviewer %s could not be started: %s", ap->reviewer_argv[0], strerror(e));
    goto out;
  }
  pthread_mutex_lock(&ap->mu);
  rv->pid = pid;
  if (ap->shut)
    kill(-pid, SIGKILL);
  pthread_mutex_unlock(&ap->mu);
  pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  int64_t deadline = mono_ms() + ap->o.reviewer_timeout_ms;
  bool late = pidfd < 0;

  /* The record, then end of input. */
  size_t rec_len = strlen(rv->record), sent = 0;
  while (!late && sent < rec_len) {
    int w = wait_fd(in[0], POLLOUT, deadline);
    if (w <= 0) {
      late = w == 0;
      break;
    }
    ssize_t n = send(in[0], rv->record + sent, rec_len - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
      continue;
    if (n < 0)
      break; /* it stopped reading: its answer (or exit) decides */
    sent += (size_t)n;
  }
  shutdown(in[0], SHUT_WR);

  /* The answer, until end of output. */
  bool too_long = false;
  while (!late) {
    int w = wait_fd(out[0], POLLIN, deadline);
    if (w <= 0) {
      late = w == 0;
      break;
    }
    char chunk[4096];
    ssize_t n = read(out[0], chunk, sizeof chunk);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    if (*len + (size_t)n > ANSWER_MAX) {
      too_long = true;
      break;
    }
    memcpy(buf + *len, chunk, (size_t)n);
    *len += (size_t)n;
  }
  /* Its exit, still within the deadline. */
  if (!late && !too_long && wait_fd(pidfd, POLLIN, deadline) <= 0)
    late = true;
  pthread_mutex_lock(&ap->mu);
  if (late || too_long)
    kill(-pid, SIGKILL);
  rv->pid = 0;
  pthread_mutex_unlock(&ap->mu);
  int st = 0;
  pid_t w;
  while ((w = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
    ;
  if (late) {
    r = -ETIMEDOUT;
    snprintf(why, whylen, pidfd < 0 ? "the reviewer could not be watched (no pidfd)"
                                    : "the reviewer did not answer within %lld ms",
             (long long)ap->o.reviewer_timeout_ms);
  } else if (too_long) {
    r = -EINVAL;
    snprintf(why, whylen, "the reviewer's answer is longer than %d bytes", ANSWER_MAX);
  } else if (w != pid) {
    r = -EIO;
    snprintf(why, whylen, "the reviewer's exit status is unknown (is SIGCHLD ignored?)");
  } else if (WIFSIGNALED(st)) {
    r = -EIO;
    snprintf(why, whylen, "the reviewer was killed by signal %d", WTERMSIG(st));
  } else if (!WIFEXITED(st) || WEXITSTATUS(st)) {
    r = -EIO;
    snprintf(why, whylen, "the reviewer exited with status %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  }
out:
  for (int i = 0; i < 2; i++) {
    if (in[i] >= 0)
      close(in[i]);
    if (out[i] >= 0)
      close(out[i]);
  }
  return r;
}

static void *review_main(void *arg)
{
  shk__review *rv = arg;
  shk_approve *ap = rv->ap;
  char *buf = malloc(ANSWER_MAX);
  size_t len = 0;
  char why[512] = "";
  shk__review_answer ans = { SHK__REVIEW_ESCALATE, "" };
  int r = buf ? run_reviewer(rv, buf, &len, why, sizeof why) : -ENOMEM;
  if (!buf)
    snprintf(why, sizeof why, "out of memory");
  shk_error perr = { 0 };
  if (!r && (r = shk__approve_parse_answer(buf, len, &ans, &perr)))
    snprintf(why, sizeof why, "%s", perr.message);
  free(buf);
  static const char *const names[] = { "approve", "deny", "escalate" };

  pthread_mutex_lock(&ap->mu);
  shk__card *c = shk__approve_find_card(ap, rv->card);
  bool open = c && c->state == SHK__CARD_REVIEWING;
  /* Defence in depth: the raise never sends these, and an answer about
   * them is never applied. */
  if (open && (c->tier != SHK_APPROVE_ASK || !strcmp(c->cls, "credentials"))) {
    r = -EPERM;
    snprintf(why, sizeof why, "the reviewer may not answer a card of this tier or class");
  }
  /* The reviewer's answer is recorded as the reviewer's, applied or not
   * (a human may have answered first, or the card may be gone). */
  shk__event *e = shk__approve_event(ap, SHK_APPROVE_EV_REVIEWED, c, NULL, false);
  if (e) {
    if (!c)
      json_object_set_new(e->root, "card", json_string(rv->card));
    json_object_set_new(e->root, "applied", json_boolean(open && !r && ans.decision != SHK__REVIEW_ESCALATE));
    shk__approve_event_set(e, NULL, r ? why : ans.reason[0] ? ans.reason : NULL,
                           r ? "failed" : names[ans.decision]);
    shk__approve_queue(ap, &e->q);
  }
  if (open) {
    shk_approve_who who = { "reviewer", (int64_t)getuid(), 0, ap->reviewer_argv[0], NULL };
    shk__resolution *res = NULL;
    if (!r && ans.decision == SHK__REVIEW_APPROVE)
      res = shk__approve_resolution_new(SHK_APPROVE_APPROVED_ONCE, c->tier, NULL,
                                        ans.reason[0] ? ans.reason : "approved by the reviewer", &who);
    else if (!r && ans.decision == SHK__REVIEW_DENY)
      res = shk__approve_resolution_new(SHK_APPROVE_DENIED, c->tier, NULL, ans.reason, &who);
    if (res)
      shk__approve_finish(ap, c, res);
    else
      shk__approve_to_humans(ap, c);
  }
  ap->n_reviews--;
  shk__approve_drain(ap);
  /* Last, with nothing left to deliver: whoever joins this thread does
   * not wait for its callbacks. */
  rv->done = true;
  pthread_mutex_unlock(&ap->mu);
  return NULL;
}

/* The stripped record: what acts, on what, from where. */
static char *review_record(const shk__card *c)
{
  json_t *o = json_pack("{s:{s:s?, s:s?}, s:s, s:s, s:O, s:s, s:b, s:b}", "actor", "agent", c->s->agent,
                        "model", c->s->model, "session", c->s->label, "class", c->cls, "scope",
                        c->scope_v, "provenance", c->provenance, "ingested_external",
                        c->ingested_external, "touched_sensitive", c->touched_sensitive);
  char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  if (!text)
    return NULL;
  size_t n = strlen(text);
  char *line = realloc(text, n + 2);
  if (!line) {
    free(text);
    return NULL;
  }
  line[n] = '\n';
  line[n + 1] = '\0';
  return line;
}

int shk__approve_review_start(shk_approve *ap, shk__card *c)
{
  shk__review *rv = calloc(1, sizeof *rv);
  if (!rv)
    return -ENOMEM;
  rv->ap = ap;
  memcpy(rv->card, c->id, sizeof rv->card);
  if (!(rv->record = review_record(c))) {
    free(rv);
    return -ENOMEM;
  }
  /* The review thread blocks no signal the caller's thread takes. */
  int e = pthread_create(&rv->th, NULL, review_main, rv);
  if (e) {
    free(rv->record);
    free(rv);
    return -e;
  }
  rv->next = ap->reviews;
  ap->reviews = rv;
  ap->n_reviews++;
  return 0;
}

/* Takes the finished reviews (or all, at shutdown) off the list under the
 * lock, and joins them without it. */
static void join_reviews(shk_approve *ap, bool all)
{
  pthread_mutex_lock(&ap->mu);
  if (all) {
    for (shk__review *rv = ap->reviews; rv; rv = rv->next)
      if (rv->pid > 0)
        kill(-rv->pid, SIGKILL);
  }
  shk__review *done = NULL;
  for (shk__review **pp = &ap->reviews; *pp;) {
    shk__review *rv = *pp;
    if ((rv->done || all) && !pthread_equal(rv->th, pthread_self())) {
      *pp = rv->next;
      rv->next = done;
      done = rv;
    } else {
      pp = &rv->next;
    }
  }
  pthread_mutex_unlock(&ap->mu);
  while (done) {
    shk__review *n = done->next;
    pthread_join(done->th, NULL);
    free(done->record);
    free(done);
    done = n;
  }
}

void shk__approve_review_reap(shk_approve *ap)
{
  join_reviews(ap, false);
}

void shk__approve_review_stop_all(shk_approve *ap)
{
  join_reviews(ap, true);
}
