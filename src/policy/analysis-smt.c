/* SPDX-License-Identifier: Apache-2.0 */
/* The solver process: cvc5 as a child speaking SMT-LIB 2 over a socket.
 *
 * One process serves many checks (incremental mode: push and pop keep what
 * checks share). Every reply is read with a deadline: the solver's own
 * per-check limit (--tlimit-per) plus a grace period, after which the
 * process is killed. Any failure (an error reply, an unexpected answer, an
 * exit, a deadline) kills the process and fails the call: nothing read
 * from a solver in an unknown state is believed. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "policy/analysis-internal.h"

struct shk__smt {
  pid_t pid;
  int fd;
  unsigned timeout_ms;
  bool dead;
  char version[64];
  char *in;                /* replies received, not yet consumed */
  size_t in_n, in_cap, in_pos;
};

static int64_t now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The deadline of one exchange: the solver's own limit, then a grace
 * period for it to notice and say "unknown". */
static int64_t deadline_of(const shk__smt *s)
{
  return now_ms() + s->timeout_ms + 1000 + s->timeout_ms / 2;
}

static void kill_child(shk__smt *s)
{
  if (s->pid > 0) {
    kill(s->pid, SIGKILL);
    while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
      ;
    s->pid = -1;
  }
  if (s->fd >= 0)
    close(s->fd);
  s->fd = -1;
  s->dead = true;
}

/* Fails the call and ends the process: after an unexpected event the
 * solver's state is unknown. */
static int die(shk__smt *s, int code)
{
  kill_child(s);
  return code;
}

void shk__smt_stop(shk__smt *s)
{
  if (!s)
    return;
  kill_child(s);
  free(s->in);
  free(s);
}

bool shk__smt_alive(const shk__smt *s)
{
  return s && !s->dead;
}

const char *shk__smt_version(const shk__smt *s)
{
  return s->version;
}

/* Reads what the solver has written, waiting until DEADLINE. Returns 0,
 * -ETIMEDOUT or -EIO. */
static int fill(shk__smt *s, int64_t deadline, shk_error *err)
{
  if (s->in_pos > 0 && s->in_pos == s->in_n)
    s->in_pos = s->in_n = 0;
  if (s->in_cap - s->in_n < 4096) {
    size_t cap = s->in_cap ? s->in_cap * 2 : 65536;
    char *p = realloc(s->in, cap);
    if (!p)
      return die(s, shk__error_set(err, -ENOMEM, "out of memory reading the solver's reply"));
    s->in = p;
    s->in_cap = cap;
  }
  for (;;) {
    int64_t left = deadline - now_ms();
    if (left <= 0)
      return die(s, shk__error_set(err, -ETIMEDOUT, "the solver gave no answer within %u ms",
                                   s->timeout_ms));
    struct pollfd pfd = { s->fd, POLLIN, 0 };
    int r = poll(&pfd, 1, left > 60000 ? 60000 : (int)left);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return die(s, shk__error_set(err, -EIO, "waiting for the solver: %s", strerror(errno)));
    if (r == 0)
      continue;
    ssize_t n = recv(s->fd, s->in + s->in_n, s->in_cap - s->in_n - 1, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (n <= 0)
      return die(s, shk__error_set(err, -EIO, "the solver exited unexpectedly"));
    s->in_n += (size_t)n;
    s->in[s->in_n] = '\0';
    return 0;
  }
}

/* The next reply, parsed into P. */
static int reply(shk__smt *s, shk__pool *p, shk__sx **out, int64_t deadline, shk_error *err)
{
  for (;;) {
    if (s->in_n > s->in_pos) {
      int r = shk__sx_parse(p, s->in, s->in_n, &s->in_pos, out);
      if (r == -ENOMEM)
        return die(s, shk__error_set(err, -ENOMEM, "out of memory reading the solver's reply"));
      if (r == 1)
        return 0;
      if (r < 0)
        return die(s, shk__error_set(err, -EIO, "the solver's reply is not an S-expression"));
    }
    int r = fill(s, deadline, err);
    if (r < 0)
      return r;
  }
}

/* A reply that is (error "..."): the solver refused a command. */
static bool is_error(const shk__sx *x, const char **msg)
{
  if (x->kind != SHK__SX_LIST || x->n_items < 1 || !shk__sx_is(x->items[0], "error"))
    return false;
  *msg = x->n_items > 1 && x->items[1]->kind == SHK__SX_STRING ? x->items[1]->s : "";
  return true;
}

int shk__smt_send(shk__smt *s, const char *text, size_t n, shk_error *err)
{
  if (s->dead)
    return shk__error_set(err, -EIO, "the solver is not running");
  int64_t deadline = deadline_of(s);
  size_t off = 0;
  while (off < n) {
    int64_t left = deadline - now_ms();
    if (left <= 0)
      return die(s, shk__error_set(err, -ETIMEDOUT, "the solver stopped reading its input"));
    /* While writing, drain what the solver says (an early error reply),
     * so that neither side waits on a full buffer. */
    struct pollfd pfd = { s->fd, POLLOUT | POLLIN, 0 };
    int r = poll(&pfd, 1, left > 60000 ? 60000 : (int)left);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return die(s, shk__error_set(err, -EIO, "writing to the solver: %s", strerror(errno)));
    if (pfd.revents & POLLIN) {
      int fr = fill(s, deadline, err);
      if (fr < 0)
        return fr;
    }
    if (pfd.revents & (POLLERR | POLLHUP))
      return die(s, shk__error_set(err, -EIO, "the solver exited unexpectedly"));
    if (!(pfd.revents & POLLOUT))
      continue;
    ssize_t w = send(s->fd, text + off, n - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (w < 0)
      return die(s, shk__error_set(err, -EIO, "writing to the solver: %s", strerror(errno)));
    off += (size_t)w;
  }
  return 0;
}

static int send_str(shk__smt *s, const char *t, shk_error *err)
{
  return shk__smt_send(s, t, strlen(t), err);
}

/* Why is this safe: the solver runs from an argument vector (never a shell
 * string) with an empty environment, its standard input and output on one
 * end of a private socket pair, its standard error on /dev/null and every
 * other descriptor of ours closed before it runs; it inherits no privilege
 * we do not have and is killed with SIGKILL on any failure. What it reads
 * is the formula we write; what it writes is parsed with bounds and
 * believed only after the engine checks it. */
int shk__smt_start(const char *path, unsigned timeout_ms, shk__smt **out, shk_error *err)
{
  *out = NULL;
  shk__smt *s = calloc(1, sizeof *s);
  if (!s)
    return shk__error_set(err, -ENOMEM, "out of memory starting the solver");
  s->fd = -1;
  s->pid = -1;
  s->timeout_ms = timeout_ms;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
    int e = errno;
    shk__smt_stop(s);
    return shk__error_set(err, -EIO, "cannot create the solver's socket: %s", strerror(e));
  }
  char limit[48];
  snprintf(limit, sizeof limit, "--tlimit-per=%u", timeout_ms);
  char *const argv[] = { (char *)path, (char *)"--lang=smt2", (char *)"--incremental",
                         (char *)"--produce-models", (char *)"--strings-exp",
                         /* Models without let-bindings: the reader takes values as written. */
                         (char *)"--dag-thresh=0",
                         /* Quantifiers appear only bounded by set membership. */
                         (char *)"--fmf-bound", limit, NULL };
  char *const envp[] = { NULL };
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  pid_t pid;
  int r = strchr(path, '/') ? posix_spawn(&pid, path, &fa, NULL, argv, envp)
                            : posix_spawnp(&pid, path, &fa, NULL, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  close(sv[1]);
  s->fd = sv[0];
  if (r != 0) {
    shk__smt_stop(s);
    if (r == ENOENT)
      return shk__error_set(err, -ENOENT, "the solver '%s' is not installed (install cvc5)", path);
    return shk__error_set(err, -EIO, "cannot start the solver '%s': %s", path, strerror(r));
  }
  s->pid = pid;
  /* A solver that is not cvc5 (or not one we speak to) fails here. */
  shk__sx *x = NULL;
  shk__pool *pool = shk__pool_new();
  r = pool ? send_str(s, "(set-logic ALL)\n(get-info :name)\n(get-info :version)\n", err)
           : shk__error_set(err, -ENOMEM, "out of memory starting the solver");
  for (int i = 0; r == 0 && i < 2; i++) {
    r = reply(s, pool, &x, now_ms() + 10000, err);
    const char *msg;
    if (r == 0 && (x->kind != SHK__SX_LIST || x->n_items != 2 ||
                   x->items[1]->kind != SHK__SX_STRING || is_error(x, &msg)))
      r = die(s, shk__error_set(err, -EIO, "'%s' does not answer as the cvc5 solver does", path));
    if (r == 0 && i == 0 && strcmp(x->items[1]->s, "cvc5"))
      r = die(s, shk__error_set(err, -EIO, "'%s' is not cvc5 (it says it is \"%.60s\")", path,
                                x->items[1]->s));
    if (r == 0 && i == 1)
      snprintf(s->version, sizeof s->version, "cvc5 %.40s", x->items[1]->s);
  }
  shk__pool_free(pool);
  if (r < 0) {
    shk__smt_stop(s);
    return r;
  }
  *out = s;
  return 0;
}

static int check(shk__smt *s, shk__pool *p, bool *sat, shk_error *err)
{
  int r = send_str(s, "(check-sat)\n", err);
  if (r < 0)
    return r;
  shk__sx *x;
  if ((r = reply(s, p, &x, deadline_of(s), err)) < 0)
    return r;
  const char *msg;
  if (is_error(x, &msg))
    return die(s, shk__error_set(err, -EIO, "the solver refused the formula: %.300s", msg));
  if (shk__sx_is(x, "sat") || shk__sx_is(x, "unsat")) {
    *sat = shk__sx_is(x, "sat");
    return 0;
  }
  if (!shk__sx_is(x, "unknown"))
    return die(s, shk__error_set(err, -EIO, "the solver answered neither sat nor unsat"));
  if ((r = send_str(s, "(get-info :reason-unknown)\n", err)) < 0 ||
      (r = reply(s, p, &x, deadline_of(s), err)) < 0)
    return r;
  const char *why = x->kind == SHK__SX_LIST && x->n_items == 2 && x->items[1]->kind == SHK__SX_ATOM
                        ? x->items[1]->s
                        : "unknown";
  if (!strcmp(why, "timeout"))
    return die(s, shk__error_set(err, -ETIMEDOUT, "the solver found no answer within %u ms",
                                 s->timeout_ms));
  return die(s, shk__error_set(err, -EIO, "the solver could not decide the question (%.60s)", why));
}

int shk__smt_check(shk__smt *s, bool *sat, shk_error *err)
{
  shk__pool *p = shk__pool_new();
  if (!p)
    return shk__error_set(err, -ENOMEM, "out of memory asking the solver");
  int r = check(s, p, sat, err);
  shk__pool_free(p);
  return r;
}

int shk__smt_get_value(shk__smt *s, shk__pool *p, const char *terms, size_t n_terms,
                       shk__sx ***values, shk_error *err)
{
  shk__text cmd = { 0 };
  shk__text_printf(&cmd, "(get-value (%s))\n", terms);
  if (cmd.oom) {
    shk__text_free(&cmd);
    return shk__error_set(err, -ENOMEM, "out of memory asking for the model");
  }
  int r = shk__smt_send(s, cmd.p, cmd.n, err);
  shk__text_free(&cmd);
  shk__sx *x;
  if (r < 0 || (r = reply(s, p, &x, deadline_of(s), err)) < 0)
    return r;
  const char *msg;
  if (is_error(x, &msg))
    return die(s, shk__error_set(err, -EIO, "the solver refused to give the model: %.300s", msg));
  if (x->kind != SHK__SX_LIST || x->n_items != n_terms)
    return die(s, shk__error_set(err, -EIO, "the solver's model has %zu values for %zu terms",
                                 x->kind == SHK__SX_LIST ? x->n_items : 0, n_terms));
  shk__sx **v = shk__pool_alloc(p, (n_terms ? n_terms : 1) * sizeof *v);
  if (!v)
    return shk__error_set(err, -ENOMEM, "out of memory reading the model");
  for (size_t i = 0; i < n_terms; i++) {
    if (x->items[i]->kind != SHK__SX_LIST || x->items[i]->n_items != 2)
      return die(s, shk__error_set(err, -EIO, "the solver's model is malformed"));
    v[i] = x->items[i]->items[1];
  }
  *values = v;
  return 0;
}
