/* SPDX-License-Identifier: Apache-2.0 */
/* The control API: newline-delimited JSON over a unix stream socket, served
 * by one event loop on the control thread.
 *
 * Why this is safe: the socket is created 0600 inside a 0700 directory of
 * the manager's user (an existing directory that is someone else's, or
 * writable by group or others, is refused), never inside a writable root
 * of a session, and every connection's peer credentials are checked
 * (SO_PEERCRED) to be the manager's own user or root, so no other local
 * user can grant or revoke. A sandboxed workload never sees this socket:
 * it is not bound into the sandbox, and its egress sockets are separate,
 * per session.
 *
 * Why no client can stall the others: every socket is non-blocking, each
 * client's answers wait in its own output buffer, and a client that leaves
 * more than its share unread is dropped; requests are bounded in size;
 * connections are capped in all and per peer uid; a connection that owns no
 * session and sends no request for a while is closed; a new client is
 * refused (with a line saying why) when the process is short of
 * descriptors, and accept never spins on EMFILE. A malformed request is
 * answered with an error and the connection stays usable. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/common.h"
#include "manager/manager-internal.h"

#define MAX_LINE (256 * 1024)

struct shk__conn {
  shk__control *ctl;
  struct bufferevent *bev;
  struct event *idle;      /* closes a connection that owns no session and sends nothing */
  struct event *more;      /* serves requests left waiting by serve_requests */
  struct ucred cred;       /* the peer, from SO_PEERCRED at accept */
  char *exe;               /* the peer's program, from /proc at accept, or NULL */
  char **sessions;
  size_t n_sessions;
  /* A subscriber (op subscribe): the stream's lines, written by whichever
   * thread the approve module delivers on, wait here under the server's
   * sub_mu until the control thread moves them to the client's output. */
  bool subscribed;
  uint64_t sub_id;
  char *pend;
  size_t n_pend, cap_pend;
  bool overflow;           /* it left more unread than it may: dropped */
  struct shk__conn *prev, *next;
};

struct shk__control {
  shk_manager *m;
  shk__control_limits lim;
  rlim_t nofile;           /* the descriptor limit: a new client needs one below it */
  struct event_base *base;
  int listen_fd;
  int spare_fd;            /* held so that a client can be refused when none is left */
  int wake_fd;
  int lines_fd;            /* an eventfd: subscribers have lines waiting */
  pthread_mutex_t sub_mu;
  struct event *accept_ev, *accept_retry, *tick, *wake, *lines;
  pthread_t thread;
  char *path;
  shk__conn *conns;
  unsigned n_conns;
};

int shk__conn_own_session(shk__conn *c, const char *id)
{
  char **nv = realloc(c->sessions, (c->n_sessions + 1) * sizeof(char *));
  if (!nv)
    return -ENOMEM;
  c->sessions = nv;
  if (!(nv[c->n_sessions] = strdup(id)))
    return -ENOMEM;
  c->n_sessions++;
  /* A connection that speaks for a session lives as long as the session. */
  evtimer_del(c->idle);
  return 0;
}

void shk__conn_peer(const shk__conn *c, shk__peer *out)
{
  *out = (shk__peer){ "control", c->cred.uid, c->cred.pid, c->exe };
}

static void conn_close(shk__conn *c)
{
  shk__control *ctl = c->ctl;
  /* After this no line is written for it: the callback is not running and
   * never runs again. */
  if (c->subscribed)
    shk__manager_unsubscribe(ctl->m, c->sub_id);
  free(c->pend);
  /* The launcher that opened a session is gone: its sandbox has no one to
   * speak for it, so the session and all its grants end now. */
  shk__peer by;
  shk__conn_peer(c, &by);
  for (size_t i = 0; i < c->n_sessions; i++) {
    json_decref(shk__manager_close_session(ctl->m, c->sessions[i], &by, "its control connection closed"));
    free(c->sessions[i]);
  }
  free(c->sessions);
  if (c->prev)
    c->prev->next = c->next;
  else
    ctl->conns = c->next;
  if (c->next)
    c->next->prev = c->prev;
  ctl->n_conns--;
  bufferevent_free(c->bev);
  event_free(c->idle);
  event_free(c->more);
  free(c->exe);
  free(c);
}

static void arm_idle(shk__conn *c)
{
  if (c->n_sessions)
    return;
  struct timeval tv = { c->ctl->lim.idle_ms / 1000, (c->ctl->lim.idle_ms % 1000) * 1000 };
  evtimer_add(c->idle, &tv);
}

static void idle_cb(evutil_socket_t fd, short what, void *arg)
{
  shk__conn *c = arg;
  if (!c->n_sessions)
    conn_close(c);
}

/* Queues the answer (stolen) as one line; NULL, or an answer that cannot be
 * serialized, is out of memory, said in a line that needs none. False when
 * the client has left more unread than it may: then it is dropped. */
static bool answer(shk__conn *c, json_t *ans)
{
  static const char oom[] = "{\"ok\":false,\"error\":\"out of memory\"}\n";
  char *text = ans ? json_dumps(ans, JSON_COMPACT) : NULL;
  json_decref(ans);
  struct evbuffer *out = bufferevent_get_output(c->bev);
  if (text) {
    evbuffer_add(out, text, strlen(text));
    evbuffer_add(out, "\n", 1);
  } else {
    evbuffer_add(out, oom, sizeof oom - 1);
  }
  free(text);
  return evbuffer_get_length(out) <= c->ctl->lim.max_output;
}

/* Says one last thing, if the client's socket takes it now, and closes. */
static void close_with(shk__conn *c, const char *error)
{
  struct evbuffer *out = bufferevent_get_output(c->bev);
  evbuffer_drain(out, evbuffer_get_length(out));
  answer(c, json_pack("{s:b, s:s}", "ok", 0, "error", error));
  evbuffer_write(out, bufferevent_getfd(c->bev));
  conn_close(c);
}

/* Answers the complete requests waiting in the client's input, a few at a
 * time: a client that sends many at once gets the rest after the other
 * clients had their turn. */
static void serve_requests(shk__conn *c)
{
  struct evbuffer *in = bufferevent_get_input(c->bev);
  for (int k = 0;; k++) {
    size_t eol_len = 0;
    struct evbuffer_ptr eol = evbuffer_search_eol(in, NULL, &eol_len, EVBUFFER_EOL_LF);
    if (eol.pos < 0 ? evbuffer_get_length(in) > MAX_LINE : (size_t)eol.pos > MAX_LINE) {
      close_with(c, "request too large");
      return;
    }
    if (eol.pos < 0)
      return;
    if (k == 16) {
      event_active(c->more, EV_TIMEOUT, 0);
      return;
    }
    size_t len = (size_t)eol.pos;
    char *line = (char *)evbuffer_pullup(in, (ev_ssize_t)(len + eol_len));
    json_t *ans = line ? shk__manager_call_text(c->ctl->m, line, len, c) : NULL;
    evbuffer_drain(in, len + eol_len);
    if (!answer(c, ans)) {
      /* It sends requests and reads no answers: it stalls no one but
       * itself, and is dropped once it has left too much unread. */
      conn_close(c);
      return;
    }
    arm_idle(c);
  }
}

static void read_cb(struct bufferevent *bev, void *arg)
{
  (void)bev;
  serve_requests(arg);
}

static void more_cb(evutil_socket_t fd, short what, void *arg)
{
  serve_requests(arg);
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
  if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
    conn_close(arg);
}

/* Tells a client it is not served, without waiting for it, and lets go. */
static void refuse_client(int fd, const char *why)
{
  char line[512];
  int n = snprintf(line, sizeof line, "{\"ok\":false,\"unavailable\":true,\"error\":\"%s\"}\n", why);
  if (send(fd, line, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
    /* The client is gone or its buffer is full: closing says enough. */
  }
  close(fd);
}

static bool peer_allowed(const shk__control *ctl, int fd, struct ucred *cred)
{
  socklen_t len = sizeof *cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cred, &len) < 0)
    return false;
  return cred->uid == 0 || cred->uid == shk__manager_uid(ctl->m);
}

static unsigned conns_of(const shk__control *ctl, uid_t uid)
{
  unsigned n = 0;
  for (const shk__conn *c = ctl->conns; c; c = c->next)
    n += c->cred.uid == uid;
  return n;
}

/* Takes one accepted client, or refuses it with one line saying why. */
static void admit(shk__control *ctl, int fd)
{
  struct ucred cred;
  char why[160];
  /* Descriptors are handed out lowest first, so one this high means fewer
   * than the reserve are left: they are kept for the clients already here
   * (opening a session takes several). */
  if ((rlim_t)fd + ctl->lim.fd_reserve >= ctl->nofile) {
    snprintf(why, sizeof why, "the manager is short of file descriptors; try again later");
    refuse_client(fd, why);
    return;
  }
  if (!peer_allowed(ctl, fd, &cred)) {
    refuse_client(fd, "permission denied");
    return;
  }
  if (ctl->n_conns >= ctl->lim.max_clients) {
    snprintf(why, sizeof why, "too many control connections (%u)", ctl->lim.max_clients);
    refuse_client(fd, why);
    return;
  }
  if (conns_of(ctl, cred.uid) >= ctl->lim.max_per_uid) {
    snprintf(why, sizeof why, "too many control connections from uid %u (%u)", (unsigned)cred.uid,
             ctl->lim.max_per_uid);
    refuse_client(fd, why);
    return;
  }
  shk__conn *c = calloc(1, sizeof *c);
  if (c) {
    c->ctl = ctl;
    c->cred = cred;
    c->bev = bufferevent_socket_new(ctl->base, fd, BEV_OPT_CLOSE_ON_FREE);
    c->idle = evtimer_new(ctl->base, idle_cb, c);
    c->more = event_new(ctl->base, -1, 0, more_cb, c);
  }
  if (!c || !c->bev || !c->idle || !c->more) {
    if (c && c->bev)
      bufferevent_free(c->bev);
    else
      close(fd);
    if (c && c->idle)
      event_free(c->idle);
    if (c && c->more)
      event_free(c->more);
    free(c);
    return;
  }
  char link[64], exe[PATH_MAX];
  snprintf(link, sizeof link, "/proc/%d/exe", (int)cred.pid);
  ssize_t n = readlink(link, exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    c->exe = strdup(exe);
  }
  c->next = ctl->conns;
  if (ctl->conns)
    ctl->conns->prev = c;
  ctl->conns = c;
  ctl->n_conns++;
  bufferevent_setcb(c->bev, read_cb, NULL, event_cb, c);
  bufferevent_enable(c->bev, EV_READ | EV_WRITE);
  arm_idle(c);
}

static void retry_cb(evutil_socket_t fd, short what, void *arg)
{
  shk__control *ctl = arg;
  event_add(ctl->accept_ev, NULL);
}

/* Stops accepting for a moment: the listening socket stays readable while
 * no descriptor is free, and polling it again at once would spin. */
static void pause_accept(shk__control *ctl)
{
  struct timeval tv = { 0, 100 * 1000 };
  event_del(ctl->accept_ev);
  evtimer_add(ctl->accept_retry, &tv);
}

static void accept_cb(evutil_socket_t lfd, short what, void *arg)
{
  shk__control *ctl = arg;
  for (int k = 0; k < 64; k++) {
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      admit(ctl, fd);
      continue;
    }
    if (errno == EAGAIN || errno == EINTR)
      return;
    if (errno == ECONNABORTED)
      continue;
    if ((errno == EMFILE || errno == ENFILE) && ctl->spare_fd >= 0) {
      /* No descriptor left: the spare one takes the client, which is told
       * so instead of waiting in the backlog for nothing. */
      close(ctl->spare_fd);
      fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0)
        refuse_client(fd, "the manager is out of file descriptors; try again later");
      ctl->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd >= 0 && ctl->spare_fd >= 0)
        continue;
    }
    pause_accept(ctl);
    return;
  }
}

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
  shk__control *ctl = arg;
  shk__manager_tick(ctl->m);
}

static void wake_cb(evutil_socket_t fd, short what, void *arg)
{
  shk__control *ctl = arg;
  event_base_loopbreak(ctl->base);
}

/* A line of the stream, on whichever thread delivers it: it is only
 * copied here, and the control thread is woken to send it. */
static void sub_line(void *ud, const char *line, size_t len)
{
  shk__conn *c = ud;
  shk__control *ctl = c->ctl;
  pthread_mutex_lock(&ctl->sub_mu);
  if (!c->overflow && c->n_pend + len > ctl->lim.max_output) {
    c->overflow = true;
  } else if (!c->overflow) {
    if (c->n_pend + len > c->cap_pend) {
      size_t cap = (c->n_pend + len) * 2;
      char *p = realloc(c->pend, cap);
      if (p) {
        c->pend = p;
        c->cap_pend = cap;
      }
    }
    /* A line that cannot be kept is a gap in the stream: the subscriber
     * is dropped rather than shown a stream with a hole in it. */
    if (c->n_pend + len <= c->cap_pend) {
      memcpy(c->pend + c->n_pend, line, len);
      c->n_pend += len;
    } else {
      c->overflow = true;
    }
  }
  pthread_mutex_unlock(&ctl->sub_mu);
  uint64_t one = 1;
  ssize_t w = write(ctl->lines_fd, &one, sizeof one);
  (void)w; /* an eventfd write fails only when its counter would overflow: then it is set anyway */
}

int shk__conn_subscribe(shk__conn *c, shk_error *err)
{
  if (c->subscribed)
    return shk__error_set(err, -EALREADY, "this connection is already subscribed");
  int r = shk__manager_subscribe(c->ctl->m, sub_line, c, &c->sub_id, err);
  if (r)
    return r;
  c->subscribed = true;
  /* A subscriber is a surface that stays: it is never closed as idle. */
  evtimer_del(c->idle);
  return 0;
}

/* Moves the subscribers' waiting lines to their outputs (control thread). */
static void lines_cb(evutil_socket_t fd, short what, void *arg)
{
  shk__control *ctl = arg;
  uint64_t n;
  ssize_t rd = read(ctl->lines_fd, &n, sizeof n);
  (void)rd;
  for (shk__conn *c = ctl->conns, *next; c; c = next) {
    next = c->next;
    if (!c->subscribed)
      continue;
    pthread_mutex_lock(&ctl->sub_mu);
    struct evbuffer *out = bufferevent_get_output(c->bev);
    if (c->n_pend)
      evbuffer_add(out, c->pend, c->n_pend);
    c->n_pend = 0;
    bool drop = c->overflow || evbuffer_get_length(out) > ctl->lim.max_output;
    pthread_mutex_unlock(&ctl->sub_mu);
    if (drop)
      conn_close(c);
  }
}

static void *serve(void *arg)
{
  shk__control *ctl = arg;
  /* Signals belong to the process's main thread. */
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  event_base_loop(ctl->base, EVLOOP_NO_EXIT_ON_EMPTY);
  while (ctl->conns)
    conn_close(ctl->conns);
  return NULL;
}

const char *shk_manager_socket_path(void)
{
  static char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
  const char *env = getenv("SHINKEN_SOCKET");
  const char *xdg = getenv("XDG_RUNTIME_DIR");
  if (env && *env)
    snprintf(path, sizeof path, "%s", env);
  else if (xdg && *xdg)
    snprintf(path, sizeof path, "%s/shinken/manager.sock", xdg);
  else
    snprintf(path, sizeof path, "/run/shinken/manager.sock");
  return path;
}

static int fill_addr(const char *path, struct sockaddr_un *sa)
{
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  if (strlen(path) >= sizeof sa->sun_path)
    return -ENAMETOOLONG;
  memcpy(sa->sun_path, path, strlen(path));
  return 0;
}

/* The socket's directory: made 0700 if missing; if present, it must be a
 * directory (not a symlink) of this user that no one else may write, since
 * whoever can write it can replace the socket. */
static int socket_dir(const char *path, shk_error *err)
{
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash)
    return shk__error_set(err, -EINVAL, "%s: the socket's path must be absolute", path);
  if (slash == dir)
    slash[1] = '\0';
  else
    *slash = '\0';
  if (mkdir(dir, 0700) < 0 && errno != EEXIST)
    return shk__error_set(err, -errno, "%s: %s", dir, strerror(errno));
  struct stat st;
  if (lstat(dir, &st) < 0)
    return shk__error_set(err, -errno, "%s: %s", dir, strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return shk__error_set(err, -EPERM, "%s: the socket's directory is not a directory", dir);
  if (st.st_uid != shk__self_uid())
    return shk__error_set(err, -EPERM, "%s: the socket's directory belongs to uid %u, not to this user; "
                                       "refusing to create the socket there", dir, (unsigned)st.st_uid);
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return shk__error_set(err, -EPERM, "%s: the socket's directory is writable by group or others; refusing to "
                                       "create the socket there", dir);
  return 0;
}

static void control_free(shk__control *ctl)
{
  if (ctl->accept_ev)
    event_free(ctl->accept_ev);
  if (ctl->accept_retry)
    event_free(ctl->accept_retry);
  if (ctl->tick)
    event_free(ctl->tick);
  if (ctl->wake)
    event_free(ctl->wake);
  if (ctl->lines)
    event_free(ctl->lines);
  if (ctl->base)
    event_base_free(ctl->base);
  if (ctl->listen_fd >= 0)
    close(ctl->listen_fd);
  if (ctl->spare_fd >= 0)
    close(ctl->spare_fd);
  if (ctl->wake_fd >= 0)
    close(ctl->wake_fd);
  if (ctl->lines_fd >= 0)
    close(ctl->lines_fd);
  pthread_mutex_destroy(&ctl->sub_mu);
  free(ctl->path);
  free(ctl);
}

int shk_manager_serve(shk_manager *m, const char *path, shk_error *err)
{
  struct sockaddr_un sa;
  if (fill_addr(path, &sa))
    return shk__error_set(err, -ENAMETOOLONG, "%s: socket path too long", path);
  /* Where it goes is checked before anything is made there. */
  int r = shk__manager_claim_socket(m, path, err);
  if (r || (r = socket_dir(path, err)))
    return r;
  /* A live manager keeps its socket: refuse to steal it. A stale file left
   * by a dead one is removed. */
  int probe = shk_manager_connect(path);
  if (probe >= 0) {
    close(probe);
    return shk__error_set(err, -EADDRINUSE, "%s: a manager is already running there", path);
  }
  unlink(path);
  shk__control *ctl = calloc(1, sizeof *ctl);
  if (!ctl || !(ctl->path = strdup(path))) {
    free(ctl);
    return shk__error_set(err, -ENOMEM, "out of memory");
  }
  ctl->m = m;
  ctl->lim = *shk__manager_limits(m);
  ctl->listen_fd = ctl->spare_fd = ctl->wake_fd = ctl->lines_fd = -1;
  pthread_mutex_init(&ctl->sub_mu, NULL);
  struct rlimit rl;
  ctl->nofile = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? rl.rlim_cur : 1u << 20;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  r = fd < 0 ? -errno : 0;
  if (!r) {
    mode_t old = umask(0177);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 128) < 0)
      r = -errno;
    umask(old);
  }
  ctl->listen_fd = fd;
  if (r) {
    shk__error_set(err, r, "%s: %s", path, strerror(-r));
    control_free(ctl);
    return r;
  }
  ctl->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ctl->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  ctl->lines_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  ctl->base = event_base_new();
  if (ctl->base) {
    ctl->accept_ev = event_new(ctl->base, fd, EV_READ | EV_PERSIST, accept_cb, ctl);
    ctl->accept_retry = evtimer_new(ctl->base, retry_cb, ctl);
    ctl->tick = event_new(ctl->base, -1, EV_PERSIST, tick_cb, ctl);
    ctl->wake = ctl->wake_fd >= 0 ? event_new(ctl->base, ctl->wake_fd, EV_READ, wake_cb, ctl) : NULL;
    ctl->lines = ctl->lines_fd >= 0 ? event_new(ctl->base, ctl->lines_fd, EV_READ | EV_PERSIST, lines_cb, ctl)
                                    : NULL;
  }
  struct timeval second = { 1, 0 };
  if (ctl->spare_fd < 0 || !ctl->base || !ctl->accept_ev || !ctl->accept_retry || !ctl->tick || !ctl->wake ||
      !ctl->lines || event_add(ctl->accept_ev, NULL) || event_add(ctl->tick, &second) ||
      event_add(ctl->wake, NULL) || event_add(ctl->lines, NULL))
    r = shk__error_set(err, -ENOMEM, "control server: cannot set up its event loop");
  else if ((r = -pthread_create(&ctl->thread, NULL, serve, ctl)))
    shk__error_set(err, r, "control thread: %s", strerror(-r));
  if (r) {
    unlink(path);
    control_free(ctl);
    return r;
  }
  shk__manager_set_control(m, ctl);
  return 0;
}

void shk__control_stop(shk__control *c)
{
  if (!c)
    return;
  uint64_t one = 1;
  if (write(c->wake_fd, &one, sizeof one) < 0) {
    /* An eventfd write fails only when its counter would overflow, which
     * one write after creation cannot do. */
  }
  pthread_join(c->thread, NULL);
  unlink(c->path);
  control_free(c);
}

int shk_manager_connect(const char *path)
{
  struct sockaddr_un sa;
  if (fill_addr(path, &sa))
    return -ENAMETOOLONG;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  return fd;
}

static bool write_all(int fd, const char *p, size_t n)
{
  while (n) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    p += w;
    n -= (size_t)w;
  }
  return true;
}

int shk_manager_rpc(int fd, const char *req, char **ans, shk_error *err)
{
  *ans = NULL;
  if (strchr(req, '\n'))
    return shk__error_set(err, -EINVAL, "a request is one line of JSON");
  /* A manager that refuses the connection says why and closes at once, so
   * the request may not get through while the refusal is already here to
   * read: read in any case. */
  if (!write_all(fd, req, strlen(req)) || !write_all(fd, "\n", 1))
    shutdown(fd, SHUT_WR);
  size_t len = 0, cap = 4096;
  char *buf = malloc(cap);
  if (!buf)
    return shk__error_set(err, -ENOMEM, "out of memory");
  for (;;) {
    if (len + 1 >= cap) {
      char *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        return shk__error_set(err, -ENOMEM, "out of memory");
      }
      buf = nb;
      cap *= 2;
    }
    ssize_t r = recv(fd, buf + len, 1, 0);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      free(buf);
      return shk__error_set(err, -EPIPE, "the manager closed the connection");
    }
    if (buf[len] == '\n')
      break;
    if (++len > MAX_LINE) {
      free(buf);
      return shk__error_set(err, -EMSGSIZE, "the manager's answer is too large");
    }
  }
  buf[len] = '\0';
  json_error_t jerr;
  json_t *check = json_loads(buf, 0, &jerr);
  if (!json_is_object(check)) {
    json_decref(check);
    free(buf);
    return shk__error_set(err, -EPROTO, "the manager's answer is not a JSON object");
  }
  json_decref(check);
  *ans = buf;
  return 0;
}
