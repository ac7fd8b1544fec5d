/* SPDX-License-Identifier: Apache-2.0 */
/* Privileged commands: the manager's side of `sudo` inside a sandbox.
 *
 * The shim inside (src/cli/sudo.c) reaches the session's sudo.sock through
 * the egress bridge, so the socket a request arrives on is its session's
 * identity, as for the proxy. The request is a command line, and it is
 * untrusted like everything the workload says. It is put to the one
 * decision as install.privileged {scope: pkg} when the command is one of
 * the package managers' own (apt-get, apt, dpkg, pip, pip3, npm -g), else
 * {scope: any}: a live handle of the session that covers it runs it; Auto
 * and Notify issue one with no human; Ask raises a card whose line names
 * the exact command, and the request waits for it (as a held connection
 * waits); Block and unlisted refuse it with the reason. An approval
 * issues the handle through the one grant path (decided again there).
 *
 * The command then runs outside the workload's reach (shk_sandbox_sudo_spawn:
 * the sandbox's namespaces, its uid 0, a package manager's capabilities
 * and no other) over overlays of /usr, /etc, /var and /opt mounted into
 * the sandbox once per session (read-only for the workload, writable only
 * in the command's own mount namespace). Their upper layers are fresh
 * entries of the store, discarded when the session ends: the host's files
 * never change. Its output and exit status go back to the shim.
 *
 * Threads: one accept thread per session; one thread per request, which
 * counts as one of the session's held attempts (n_held), so the session is
 * not freed under it; shk__sudo_stop ends the running commands first. The
 * registry lock mu is taken for the decision and the grant only, never
 * while waiting for a card or a command. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "manager/manager-state.h"
#include "shinken/sandbox.h"

#define REQUEST_MAX (64 * 1024)
#define ARGS_MAX 256
#define RUNNING_MAX 16

/* The system directories a privileged command may change, each through an
 * overlay of its own. */
static const char *const system_dirs[] = { "/usr", "/etc", "/var", "/opt" };
#define N_SYSTEM (sizeof system_dirs / sizeof system_dirs[0])

typedef struct shk__sudo {
  int listen_fd;
  char path[108];           /* the socket's, removed when the session ends */
  int stop_pipe[2];
  pthread_t thread;
  bool started;
  /* Under mu_: the overlays (made at the first command), the commands
   * running (their helpers' pids), and whether the session is ending. */
  pthread_mutex_t mu_;
  bool overlays_made;
  shk_sandbox_unlock *overlays[N_SYSTEM];
  shk_sandbox_persist *stores[N_SYSTEM];
  const char *rw[N_SYSTEM];
  int rw_trees[N_SYSTEM]; /* each overlay's writable clone, for the commands */
  size_t n_rw;
  pid_t running[RUNNING_MAX];
  bool stopping;
} shk__sudo;

/* One request, from accept to its answer. */
typedef struct sudo_req {
  session *s;
  int fd;
  /* The card's outcome, set once by sudo_release (any thread). */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool released;
  bool approved, once;
  char card[SHK_APPROVE_ID_HEX];
  shk__peer by;
  char by_surface[32];
  char text[1024];
} sudo_req;

const char *shk__sudo_missing(void)
{
  static const char *missing;
  static bool probed;
  /* The answer does not change for the life of the process. */
  if (!probed) {
    missing = shk_sandbox_sudo_missing();
    probed = true;
  }
  return missing;
}

/* ---- frames to the shim: a kind byte, a 4-byte big-endian length ---- */

static int send_frame(int fd, char kind, const void *data, size_t len)
{
  unsigned char hdr[5] = { (unsigned char)kind, (unsigned char)(len >> 24), (unsigned char)(len >> 16),
                           (unsigned char)(len >> 8), (unsigned char)len };
  struct iovec iov[2] = { { hdr, sizeof hdr }, { (void *)data, len } };
  struct msghdr mh = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
  size_t want = sizeof hdr + len;
  while (want) {
    ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    want -= (size_t)n;
    while (n > 0 && mh.msg_iovlen) {
      size_t take = (size_t)n < mh.msg_iov[0].iov_len ? (size_t)n : mh.msg_iov[0].iov_len;
      mh.msg_iov[0].iov_base = (char *)mh.msg_iov[0].iov_base + take;
      mh.msg_iov[0].iov_len -= take;
      n -= (ssize_t)take;
      if (!mh.msg_iov[0].iov_len) {
        mh.msg_iov++;
        mh.msg_iovlen--;
      }
    }
  }
  return 0;
}

static void refuse_to(int fd, const char *fmt, ...) SHK_PRINTF(2, 3);
static void refuse_to(int fd, const char *fmt, ...)
{
  char buf[1400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  (void)send_frame(fd, 'r', buf, strlen(buf));
}

/* ---- the request ---- */

/* Whether ARGV is one of the package managers' own commands (scope pkg):
 * the program named bare or by its path in a system directory (a program
 * of the same name elsewhere, in a directory the workload can write, is
 * any other command), and npm only for global installs. */
static bool package_command(char *const *argv, size_t n)
{
  static const char *const managers[] = { "apt-get", "apt", "dpkg", "pip", "pip3", "npm", NULL };
  static const char *const dirs[] = { "/usr/bin/", "/usr/sbin/", "/bin/", "/sbin/", "/usr/local/bin/", NULL };
  const char *name = argv[0];
  for (const char *const *d = dirs; strchr(name, '/') && *d; d++)
    if (!strncmp(name, *d, strlen(*d)) && !strchr(name + strlen(*d), '/'))
      name += strlen(*d);
  if (strchr(name, '/'))
    return false;
  bool known = false;
  for (const char *const *m = managers; *m && !known; m++)
    known = !strcmp(name, *m);
  if (known && !strcmp(name, "npm")) {
    bool global = false;
    for (size_t i = 1; i < n && !global; i++)
      global = !strcmp(argv[i], "-g") || !strcmp(argv[i], "--global");
    return global;
  }
  return known;
}

/* Reads the one request line, bounded in size and time. NULL (and *why)
 * when it is not one. */
static json_t *read_request(int fd, const char **why)
{
  struct timeval tv = { 10, 0 };
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char *buf = malloc(REQUEST_MAX + 1);
  size_t got = 0;
  *why = "the request is not one line of JSON";
  while (buf && got < REQUEST_MAX) {
    ssize_t n = read(fd, buf + got, REQUEST_MAX - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    got += (size_t)n;
    if (memchr(buf, '\n', got))
      break;
  }
  if (!buf) {
    *why = "out of memory";
    return NULL;
  }
  char *nl = memchr(buf, '\n', got);
  if (!nl) {
    if (got >= REQUEST_MAX)
      *why = "the request is longer than 64 KiB";
    free(buf);
    return NULL;
  }
  json_t *req = json_loadb(buf, (size_t)(nl - buf), JSON_REJECT_DUPLICATES, NULL);
  free(buf);
  return req;
}

/* The release of a request's card, exactly once, on whichever thread
 * delivers it: only the outcome is recorded; the request's own thread
 * issues the handle and runs the command. */
static void sudo_release(void *attempt, const shk_approve_outcome *o)
{
  sudo_req *q = attempt;
  pthread_mutex_lock(&q->mu);
  q->released = true;
  q->approved = shk_approve_result_approved(o->result);
  q->once = o->result == SHK_APPROVE_APPROVED_ONCE;
  snprintf(q->card, sizeof q->card, "%s", o->card ? o->card : "");
  if (o->by) {
    snprintf(q->by_surface, sizeof q->by_surface, "%s", o->by->surface ? o->by->surface : "manager");
    q->by = (shk__peer){ q->by_surface, o->by->uid >= 0 ? (uid_t)o->by->uid : (uid_t)-1, (pid_t)o->by->pid, NULL,
                         NULL };
  } else {
    q->by = (shk__peer){ "manager", (uid_t)-1, 0, NULL, NULL };
  }
  if (!q->approved)
    shk_approve_outcome_text(o, q->text, sizeof q->text);
  pthread_cond_signal(&q->cv);
  pthread_mutex_unlock(&q->mu);
}

/* Caller holds mu. Whether s is still open. */
static bool session_live(shk_manager *m, const session *s)
{
  for (session *t = m->sessions; t; t = t->next)
    if (t == s)
      return true;
  return false;
}

/* Caller holds mu. A live install.privileged handle of s that covers
 * SCOPE, into handle; false when none. */
static bool covering(shk_manager *m, session *s, const shk_cap_scope *scope, char handle[SHK_CAP_ID_HEX])
{
  int64_t now = now_ms();
  for (size_t i = 0; i < s->n_grants; i++) {
    const grant *g = &s->grants[i];
    if (g->cls != SHK_CAP_INSTALL_PRIVILEGED || shk_cap_check(m->table, g->id, now))
      continue;
    const shk_cap_scope *have = shk_cap_scope_of(m->table, g->id);
    shk_cap_lifecycle lc;
    if (have && shk_cap_scope_subset(scope, have, NULL) &&
        !(shk_cap_lifecycle_of(m->table, g->id, &lc) == 0 && lc == SHK_CAP_ONCE)) {
      snprintf(handle, SHK_CAP_ID_HEX, "%s", g->id);
      return true;
    }
  }
  return false;
}

/* Caller holds mu. Issues the handle through the one grant path; true with
 * handle, else false with why. */
static bool issue(shk_manager *m, session *s, const shk_cap_scope *scope, const char *scope_text,
                  shk_policy_approval approval, const shk__peer *by, const char *card, bool once,
                  char handle[SHK_CAP_ID_HEX], char *why, size_t len)
{
  grant_req g = { .s = s, .by = by, .scope = scope, .scope_text = (char *)scope_text, .once = once,
                  .approval = approval, .card = card };
  json_t *ans = shk__manager_grant_locked(m, &g);
  const char *h = json_string_value(json_object_get(ans, "handle"));
  if (h)
    snprintf(handle, SHK_CAP_ID_HEX, "%s", h);
  else
    snprintf(why, len, "%s", json_string_value(json_object_get(ans, "error")) ?: "the grant could not be issued");
  json_decref(ans);
  return h != NULL;
}

/* Waits for the card's release, taking the attempt back when the shim
 * goes away meanwhile (then false: nobody is left to answer). */
static bool wait_card(sudo_req *q)
{
  pthread_mutex_lock(&q->mu);
  while (!q->released) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 250 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&q->cv, &q->mu, &ts);
    if (q->released)
      break;
    pthread_mutex_unlock(&q->mu);
    struct pollfd p = { q->fd, POLLRDHUP, 0 };
    bool gone = poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
    /* Only an attempt the module gives back is ours again: a release
     * already on its way is waited for. */
    if (gone && shk_approve_withdraw(q->s->m->approve, q) == 0)
      return false;
    pthread_mutex_lock(&q->mu);
  }
  pthread_mutex_unlock(&q->mu);
  return true;
}

/* The overlays of the system directories in s's sandbox, made once. NULL,
 * or why not (in buf). */
static const char *overlays(shk_manager *m, session *s, const shk_sandbox_target *t, char *buf, size_t len)
{
  shk__sudo *st = s->sudo;
  const char *why = NULL;
  pthread_mutex_lock(&st->mu_);
  for (size_t i = 0; !st->overlays_made && !why && i < N_SYSTEM; i++) {
    struct stat sb;
    /* A directory the host lacks has nothing to overlay. */
    if (lstat(system_dirs[i], &sb) < 0 || !S_ISDIR(sb.st_mode))
      continue;
    shk_error err;
    /* A fresh entry of the store for this session: discarded at its end,
     * so a privileged install lasts as long as the session. */
    int r = shk_sandbox_persist_open(m->persist_root, "sudo", system_dirs[i], false, s->id, &st->stores[i], &err);
    if (r == 0)
      r = shk_sandbox_unlock_system(t, system_dirs[i], st->stores[i], &st->overlays[i], &st->rw_trees[st->n_rw],
                                    &err);
    /* A directory the sandbox's view does not show (--restrict-reads
     * binds the system directories it lists) stays out of it: nothing is
     * mounted there, and the command does without. */
    if (r == -ENOENT && st->stores[i]) {
      shk_sandbox_persist_close(st->stores[i], true);
      st->stores[i] = NULL;
      continue;
    }
    if (r < 0) {
      snprintf(buf, len, "%s", err.message);
      why = buf;
      shk_sandbox_persist_close(st->stores[i], true);
      st->stores[i] = NULL;
      break;
    }
    st->rw[st->n_rw++] = system_dirs[i];
  }
  if (why) {
    for (size_t i = 0; i < st->n_rw; i++)
      close(st->rw_trees[i]);
    for (size_t i = N_SYSTEM; i-- > 0;) {
      shk_sandbox_unlock_undo(t, st->overlays[i], false, NULL, NULL);
      st->overlays[i] = NULL;
      shk_sandbox_persist_close(st->stores[i], true);
      st->stores[i] = NULL;
    }
    st->n_rw = 0;
  } else {
    st->overlays_made = true;
  }
  pthread_mutex_unlock(&st->mu_);
  return why;
}

static void ev_command(shk_manager *m, session *s, const char *name, const char *handle, const char *line,
                       const char *outcome, int code)
{
  shk_audit_event e;
  shk_audit_event_init(&e, name);
  shk_audit_str(&e, SHK_AUDIT_SESSION, s->id);
  shk_audit_str(&e, SHK_AUDIT_CLASS, shk_cap_class_name(SHK_CAP_INSTALL_PRIVILEGED));
  shk_audit_str(&e, SHK_AUDIT_HANDLE, handle);
  shk_audit_str(&e, SHK_AUDIT_TOOL, line);
  shk_audit_str(&e, SHK_AUDIT_OUTCOME, outcome);
  if (code >= 0)
    shk_audit_int(&e, SHK_AUDIT_EXIT_CODE, code);
  ev_emit(m, &e, NULL);
}

/* Runs the command and relays its output and status to the shim. */
static void run(shk_manager *m, session *s, const shk_sandbox_target *t, int fd, char *const *argv,
                const char *cwd, const char *handle, const char *line)
{
  shk__sudo *st = s->sudo;
  int out[2] = { -1, -1 }, err2[2] = { -1, -1 };
  if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err2, O_CLOEXEC) < 0) {
    refuse_to(fd, "Shinken could not start the command: %s", strerror(errno));
    goto done;
  }
  pid_t pid;
  int status_fd;
  shk_error err;
  pthread_mutex_lock(&st->mu_);
  size_t slot = RUNNING_MAX;
  for (size_t i = 0; i < RUNNING_MAX && slot == RUNNING_MAX; i++)
    if (!st->running[i])
      slot = i;
  int r = st->stopping ? -ESHUTDOWN : slot == RUNNING_MAX ? -EBUSY
        : shk_sandbox_sudo_spawn(t, st->rw, st->rw_trees, st->n_rw, argv, cwd, out[1], err2[1], &pid, &status_fd,
                                 &err);
  if (r == 0)
    st->running[slot] = pid;
  pthread_mutex_unlock(&st->mu_);
  close(out[1]);
  close(err2[1]);
  out[1] = err2[1] = -1;
  if (r < 0) {
    refuse_to(fd, "Shinken could not start the command: %s",
              r == -ESHUTDOWN ? "the session is ending" : r == -EBUSY ? "too many privileged commands run at once"
                                                                      : err.message);
    goto done;
  }
  ev_command(m, s, "privileged-start", handle, line, "started", -1);
  /* Output until both streams end; a shim that goes away ends the
   * command. */
  char buf[16384];
  struct pollfd p[3] = { { out[0], POLLIN, 0 }, { err2[0], POLLIN, 0 }, { fd, POLLRDHUP, 0 } };
  int open_streams = 2;
  bool gone = false;
  while (open_streams && !gone) {
    if (poll(p, 3, -1) < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    for (int i = 0; i < 2; i++) {
      if (p[i].fd < 0 || !p[i].revents)
        continue;
      ssize_t n = read(p[i].fd, buf, sizeof buf);
      if (n > 0 && send_frame(fd, i ? 'e' : 'o', buf, (size_t)n) == 0)
        continue;
      if (n < 0 && errno == EINTR)
        continue;
      if (n > 0)
        gone = true;
      p[i].fd = -1;
      open_streams--;
    }
    if (p[2].revents & (POLLRDHUP | POLLHUP | POLLERR))
      gone = true;
  }
  if (gone)
    kill(pid, SIGKILL);
  char msg[600] = "";
  ssize_t mn = 0, k;
  while ((size_t)mn < sizeof msg - 1 && (k = read(status_fd, msg + mn, sizeof msg - 1 - (size_t)mn)) != 0) {
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0)
      break;
    mn += k;
  }
  msg[mn] = 0;
  close(status_fd);
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
    ;
  pthread_mutex_lock(&st->mu_);
  st->running[slot] = 0;
  pthread_mutex_unlock(&st->mu_);
  int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
  if (msg[0]) {
    refuse_to(fd, "Shinken could not start the command: %s", msg);
    ev_command(m, s, "privileged-exit", handle, line, "not-started", -1);
  } else {
    unsigned char c[4] = { (unsigned char)(code >> 24), (unsigned char)(code >> 16), (unsigned char)(code >> 8),
                           (unsigned char)code };
    (void)send_frame(fd, 'x', c, sizeof c);
    ev_command(m, s, "privileged-exit", handle, line, gone ? "ended-by-caller" : "exited", code);
  }
done:
  for (int i = 0; i < 2; i++) {
    if (out[i] >= 0)
      close(out[i]);
    if (err2[i] >= 0)
      close(err2[i]);
  }
}

/* The command line as one line of text, for the card and the timeline. */
static char *command_line(char *const *argv, size_t n)
{
  size_t len = 1;
  for (size_t i = 0; i < n; i++)
    len += strlen(argv[i]) + 3;
  char *s = malloc(len);
  if (!s)
    return NULL;
  s[0] = 0;
  for (size_t i = 0; i < n; i++) {
    bool plain = argv[i][0] && strcspn(argv[i], " \t\n'\"\\$`") == strlen(argv[i]);
    strcat(s, i ? " " : "");
    strcat(s, plain ? "" : "'");
    strcat(s, argv[i]);
    strcat(s, plain ? "" : "'");
  }
  for (char *c = s; *c; c++)
    if (*c == '\n' || *c == '\r' || (unsigned char)*c < 0x20)
      *c = '?';
  return s;
}

/* One request, on its own thread. Safe because everything it learns from
 * the shim is data: the command line is classified here (the decision's
 * scope), shown to a human, and run only under a handle the one decision
 * issued; the session it acts for is the socket's, never a field. */
static void handle_request(sudo_req *q)
{
  session *s = q->s;
  shk_manager *m = s->m;
  int fd = q->fd;
  const char *why = NULL;
  json_t *req = read_request(fd, &why);
  json_t *jargv = json_object_get(req, "argv"), *jcwd = json_object_get(req, "cwd");
  const char *k;
  json_t *v;
  json_object_foreach(req, k, v) if (strcmp(k, "argv") && strcmp(k, "cwd"))
  {
    why = "the request has a field other than argv and cwd";
    json_decref(req);
    req = NULL;
    break;
  }
  size_t n = json_array_size(jargv);
  if (req && (!json_is_array(jargv) || n == 0 || n > ARGS_MAX || (jcwd && !json_is_string(jcwd)))) {
    why = "the request needs argv, 1 to 256 strings, and cwd, a string";
    json_decref(req);
    req = NULL;
  }
  char **argv = req ? calloc(n + 1, sizeof *argv) : NULL;
  for (size_t i = 0; argv && i < n; i++) {
    const char *a = json_string_value(json_array_get(jargv, i));
    if (!a) {
      why = "every element of argv must be a string";
      free(argv);
      argv = NULL;
      break;
    }
    argv[i] = (char *)a;
  }
  if (!argv) {
    refuse_to(fd, "Shinken refused the request: %s.", why ? why : "out of memory");
    json_decref(req);
    return;
  }
  const char *cwd = json_string_value(jcwd);
  bool pkg = package_command(argv, n);
  char *line = command_line(argv, n);
  shk_cap_scope scope;
  const char *scope_text = pkg ? "{\"scope\":\"pkg\"}" : "{\"scope\":\"any\"}";
  const char *missing = shk__sudo_missing();
  if (!line || shk_cap_scope_parse(SHK_CAP_INSTALL_PRIVILEGED, scope_text, &scope, NULL)) {
    refuse_to(fd, "Shinken refused the command: out of memory.");
    free(line);
    free(argv);
    json_decref(req);
    return;
  }
  if (missing) {
    refuse_to(fd, "Shinken refused %s: no enforcement point on this host for install.privileged: %s.", line, missing);
    goto out;
  }
  char handle[SHK_CAP_ID_HEX] = "", text[1400] = "";
  const shk_sandbox_target *t = NULL;
  bool ask = false;
  shk_policy_answer pa;
  shk_policy_taint taint = { 0 };
  pthread_mutex_lock(&m->mu);
  if (!session_live(m, s)) {
    snprintf(text, sizeof text, "the session has ended");
  } else if (!(t = shk__unlock_target(s->fs))) {
    snprintf(text, sizeof text, "the session's sandbox has not reported its start");
  } else if (shk_sandbox_sudo_refuses(t, text, sizeof text)) {
    t = NULL;
  } else if (!m->persist_root) {
    snprintf(text, sizeof text, "the manager has no state directory to keep the system directories' overlays in");
  } else if (!covering(m, s, &scope, handle)) {
    shk_policy_session ps = shk__manager_policy_session(m, s);
    shk_policy_request pr = { .kind = SHK_POLICY_GRANT, .scope = &scope, .approval = SHK_POLICY_UNASKED,
                              .now_ms = now_ms() };
    grant_req gq = { .s = s, .scope = &scope, .scope_text = (char *)scope_text, .approval = SHK_POLICY_UNASKED };
    if (shk_policy_decide(m->policy, &ps, &pr, &pa, NULL)) {
      snprintf(text, sizeof text, "the request could not be decided");
    } else if (pa.verdict == SHK_POLICY_ALLOW) {
      issue(m, s, &scope, scope_text, SHK_POLICY_UNASKED, NULL, NULL, false, handle, text, sizeof text);
    } else if (pa.verdict == SHK_POLICY_ASK) {
      bool recorded = shk__manager_ev_decision(m, &gq, &pa, NULL) == 0;
      ask = recorded && !s->no_ask;
      taint = s->taint;
      if (!recorded)
        snprintf(text, sizeof text, "the audit log cannot record the decision");
      else if (s->no_ask)
        snprintf(text, sizeof text, "the session asks no human (its opener turned the Ask loop off), and "
                 "install.privileged %s needs one", scope_text);
    } else {
      /* Recorded as any refused grant is, through the one grant path. */
      issue(m, s, &scope, scope_text, SHK_POLICY_UNASKED, NULL, NULL, false, handle, text, sizeof text);
    }
  }
  pthread_mutex_unlock(&m->mu);
  if (ask) {
    char cwhy[1400];
    snprintf(cwhy, sizeof cwhy, "sudo %.800s (%.500s)", line, pa.why);
    shk_approve_request rq = {
      .session = s->id, .cls = shk_cap_class_name(SHK_CAP_INSTALL_PRIVILEGED), .scope = scope_text,
      .ingested_external = taint.ingested_external, .touched_sensitive = taint.touched_sensitive,
      .tier = SHK_APPROVE_ASK, .rule = pa.policy[0] ? pa.policy : NULL, .why = cwhy,
      .batch_key = NULL, .attempt = q, .release = sudo_release,
    };
    shk_error err;
    if (shk_approve_raise(m->approve, &rq, NULL, &err) < 0) {
      snprintf(text, sizeof text, "%s", err.message);
    } else if (!wait_card(q)) {
      goto out;
    } else if (!q->approved) {
      snprintf(text, sizeof text, "%s", q->text);
    } else {
      pthread_mutex_lock(&m->mu);
      if (!session_live(m, s))
        snprintf(text, sizeof text, "the session ended before the grant was issued");
      else
        issue(m, s, &scope, scope_text, SHK_POLICY_APPROVED, &q->by, q->card[0] ? q->card : NULL, q->once, handle,
              text, sizeof text);
      pthread_mutex_unlock(&m->mu);
      if (!handle[0]) {
        char tmp[1400];
        snprintf(tmp, sizeof tmp, "a human approved it, but the grant could not be issued (%.1200s)", text);
        snprintf(text, sizeof text, "%s", tmp);
      }
    }
  }
  if (!handle[0]) {
    refuse_to(fd, "Shinken refused %.600s: %.700s", line, text[0] ? text : "refused");
    goto out;
  }
  char owhy[1024];
  const char *no = overlays(m, s, t, owhy, sizeof owhy);
  if (no) {
    refuse_to(fd, "Shinken could not prepare the system directories for %.400s: %.900s", line, no);
    goto out;
  }
  /* A handle for this one command is used by it now. */
  pthread_mutex_lock(&m->mu);
  shk_cap_lifecycle lc;
  if (shk_cap_lifecycle_of(m->table, handle, &lc) == 0 && lc == SHK_CAP_ONCE)
    shk_cap_use(m->table, handle, now_ms());
  pthread_mutex_unlock(&m->mu);
  run(m, s, t, fd, argv, cwd, handle, line);
out:
  shk_cap_scope_clear(&scope);
  free(line);
  free(argv);
  json_decref(req);
}

/* Ends request Q: its connection closes and it leaves the session's count
 * of held attempts (which the session's end waits to reach zero). */
static void request_end(sudo_req *q)
{
  session *s = q->s;
  close(q->fd);
  pthread_cond_destroy(&q->cv);
  pthread_mutex_destroy(&q->mu);
  free(q);
  pthread_mutex_lock(&s->held_mu);
  if (--s->n_held == 0)
    pthread_cond_broadcast(&s->held_cv);
  pthread_mutex_unlock(&s->held_mu);
}

/* The end of a request: its count among the session's held attempts. */
static void *request_main(void *arg)
{
  sudo_req *q = arg;
  handle_request(q);
  request_end(q);
  return NULL;
}

static void *accept_main(void *arg)
{
  session *s = arg;
  shk__sudo *st = s->sudo;
  for (;;) {
    struct pollfd p[2] = { { st->listen_fd, POLLIN, 0 }, { st->stop_pipe[0], POLLIN, 0 } };
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    if (p[1].revents)
      break;
    int fd = accept4(st->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE)
        poll(NULL, 0, 100);
      continue;
    }
    sudo_req *q = calloc(1, sizeof *q);
    if (!q) {
      close(fd);
      continue;
    }
    q->s = s;
    q->fd = fd;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    pthread_mutex_lock(&s->held_mu);
    s->n_held++;
    pthread_mutex_unlock(&s->held_mu);
    pthread_attr_t at;
    pthread_t th;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int r = pthread_create(&th, &at, request_main, q);
    pthread_attr_destroy(&at);
    if (r) {
      refuse_to(fd, "Shinken refused the request: no thread to handle it");
      request_end(q);
    }
  }
  return NULL;
}

int shk__sudo_open(session *s, shk_error *err)
{
  if (!s->egress)
    return 0;
  shk__sudo *st = calloc(1, sizeof *st);
  if (!st)
    return shk__error_set(err, -ENOMEM, "out of memory");
  st->listen_fd = -1;
  st->stop_pipe[0] = st->stop_pipe[1] = -1;
  pthread_mutex_init(&st->mu_, NULL);
  s->sudo = st;
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  if ((size_t)snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s", shk_egress_session_dir(s->egress),
                       SHK_EGRESS_SUDO_SOCK) >= sizeof sa.sun_path)
    return shk__error_set(err, -ENAMETOOLONG, "the session directory's path is too long for a socket");
  if ((st->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
      bind(st->listen_fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
      (snprintf(st->path, sizeof st->path, "%s", sa.sun_path), listen(st->listen_fd, 16) < 0) ||
      pipe2(st->stop_pipe, O_CLOEXEC) < 0)
    return shk__error_set(err, -errno, "cannot listen on %s: %s", sa.sun_path, strerror(errno));
  int r = pthread_create(&st->thread, NULL, accept_main, s);
  if (r)
    return shk__error_set(err, -r, "a thread for privileged commands: %s", strerror(r));
  st->started = true;
  return 0;
}

void shk__sudo_stop(session *s)
{
  shk__sudo *st = s->sudo;
  if (!st)
    return;
  if (st->started) {
    (void)!write(st->stop_pipe[1], "x", 1);
    pthread_join(st->thread, NULL);
    st->started = false;
  }
  /* Before the proxy's directory is removed, which it is in. */
  if (st->listen_fd >= 0) {
    close(st->listen_fd);
    st->listen_fd = -1;
  }
  if (st->path[0])
    unlink(st->path);
  st->path[0] = 0;
  /* The session is ending: its running commands end with it (their
   * threads then answer their shims and let the session go). */
  pthread_mutex_lock(&st->mu_);
  st->stopping = true;
  for (size_t i = 0; i < RUNNING_MAX; i++)
    if (st->running[i] > 0)
      kill(st->running[i], SIGKILL);
  pthread_mutex_unlock(&st->mu_);
}

void shk__sudo_free(session *s)
{
  shk__sudo *st = s->sudo;
  if (!st)
    return;
  const shk_sandbox_target *t = shk__unlock_target(s->fs);
  for (size_t i = 0; i < st->n_rw; i++)
    close(st->rw_trees[i]);
  for (size_t i = N_SYSTEM; i-- > 0;) {
    /* Detached first, so nothing writes into what is discarded. */
    shk_sandbox_unlock_undo(t, st->overlays[i], false, NULL, NULL);
    shk_sandbox_persist_close(st->stores[i], true);
  }
  if (st->listen_fd >= 0)
    close(st->listen_fd);
  for (int i = 0; i < 2; i++)
    if (st->stop_pipe[i] >= 0)
      close(st->stop_pipe[i]);
  pthread_mutex_destroy(&st->mu_);
  free(st);
  s->sudo = NULL;
}
