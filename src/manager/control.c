/* The control API: newline-delimited JSON over a unix stream socket.
 *
 * Why this is safe: the socket is created 0600 inside a 0700 directory, and
 * every connection's peer credentials are checked (SO_PEERCRED) to be the
 * manager's own user or root, so no other local user can grant or revoke.
 * A sandboxed workload never sees this socket: it is not bound into the
 * sandbox, and its egress sockets are separate, per session. Requests are
 * bounded in size; a malformed one is answered with an error and the
 * connection stays usable. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/common.h"
#include "manager/manager-internal.h"

#define MAX_CONNS 128
#define MAX_LINE (256 * 1024)

struct shk__conn {
  int fd;
  struct ucred cred;  /* the peer, from SO_PEERCRED at accept */
  char *buf;
  size_t len;
  char **sessions;
  size_t n_sessions;
};

struct shk__control {
  shk_manager *m;
  int listen_fd;
  int wake[2];
  pthread_t thread;
  char *path;
  shk__conn conns[MAX_CONNS];
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
  return 0;
}

void shk__conn_peer(const shk__conn *c, uid_t *uid, pid_t *pid)
{
  *uid = c->cred.uid;
  *pid = c->cred.pid;
}

static void conn_close(shk__control *ctl, shk__conn *c)
{
  /* The launcher that opened a session is gone: its sandbox has no one to
   * speak for it, so the session and all its grants end now. */
  for (size_t i = 0; i < c->n_sessions; i++) {
    json_decref(shk__manager_close_session(ctl->m, c->sessions[i], "control"));
    free(c->sessions[i]);
  }
  free(c->sessions);
  free(c->buf);
  close(c->fd);
  memset(c, 0, sizeof *c);
  c->fd = -1;
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

/* Writes the answer (stolen) as one line; NULL, or an answer that cannot
 * be written out, is out of memory, said so in a line that needs none. */
static bool answer(int fd, json_t *ans)
{
  static const char oom[] = "{\"ok\":false,\"error\":\"out of memory\"}\n";
  char *text = ans ? json_dumps(ans, JSON_COMPACT) : NULL;
  json_decref(ans);
  bool ok = text ? write_all(fd, text, strlen(text)) && write_all(fd, "\n", 1)
                 : write_all(fd, oom, sizeof oom - 1);
  free(text);
  return ok;
}

/* Returns false when the connection must be closed. */
static bool conn_readable(shk__control *ctl, shk__conn *c)
{
  char chunk[4096];
  ssize_t r = recv(c->fd, chunk, sizeof chunk, 0);
  if (r < 0 && (errno == EINTR || errno == EAGAIN))
    return true;
  if (r <= 0)
    return false;
  if (c->len + (size_t)r > MAX_LINE) {
    answer(c->fd, json_pack("{s:b, s:s}", "ok", 0, "error", "request too large"));
    return false;
  }
  char *nb = realloc(c->buf, c->len + (size_t)r + 1);
  if (!nb) {
    answer(c->fd, NULL);
    return false;
  }
  c->buf = nb;
  memcpy(c->buf + c->len, chunk, (size_t)r);
  c->len += (size_t)r;
  char *nl;
  while ((nl = memchr(c->buf, '\n', c->len))) {
    json_t *ans = shk__manager_call_text(ctl->m, c->buf, (size_t)(nl - c->buf), c);
    size_t used = (size_t)(nl - c->buf) + 1;
    memmove(c->buf, nl + 1, c->len - used);
    c->len -= used;
    if (!answer(c->fd, ans))
      return false;
  }
  return true;
}

static bool peer_allowed(const shk__control *ctl, int fd, struct ucred *cred)
{
  socklen_t len = sizeof *cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cred, &len) < 0)
    return false;
  return cred->uid == 0 || cred->uid == shk__manager_uid(ctl->m);
}

static void *serve(void *arg)
{
  shk__control *ctl = arg;
  struct pollfd pfd[MAX_CONNS + 2];
  for (;;) {
    pfd[0] = (struct pollfd){ ctl->wake[0], POLLIN, 0 };
    pfd[1] = (struct pollfd){ ctl->listen_fd, POLLIN, 0 };
    for (int i = 0; i < MAX_CONNS; i++)
      pfd[i + 2] = (struct pollfd){ ctl->conns[i].fd, POLLIN, 0 };
    if (poll(pfd, MAX_CONNS + 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    if (pfd[0].revents)
      break;
    if (pfd[1].revents & POLLIN) {
      int fd = accept4(ctl->listen_fd, NULL, NULL, SOCK_CLOEXEC);
      if (fd >= 0) {
        int slot = -1;
        struct ucred cred;
        for (int i = 0; i < MAX_CONNS && slot < 0; i++)
          if (ctl->conns[i].fd < 0)
            slot = i;
        if (slot < 0 || !peer_allowed(ctl, fd, &cred)) {
          answer(fd, json_pack("{s:b, s:s}", "ok", 0, "error",
                               slot < 0 ? "too many connections" : "permission denied"));
          close(fd);
        } else {
          ctl->conns[slot].fd = fd;
          ctl->conns[slot].cred = cred;
        }
      }
    }
    for (int i = 0; i < MAX_CONNS; i++)
      if (ctl->conns[i].fd >= 0 && (pfd[i + 2].revents & (POLLIN | POLLHUP | POLLERR)) &&
          !conn_readable(ctl, &ctl->conns[i]))
        conn_close(ctl, &ctl->conns[i]);
  }
  for (int i = 0; i < MAX_CONNS; i++)
    if (ctl->conns[i].fd >= 0)
      conn_close(ctl, &ctl->conns[i]);
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

int shk_manager_serve(shk_manager *m, const char *path, shk_error *err)
{
  struct sockaddr_un sa;
  if (fill_addr(path, &sa))
    return shk__error_set(err, -ENAMETOOLONG, "%s: socket path too long", path);
  /* The directory is private to the manager's user. */
  char dir[sizeof sa.sun_path];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash && slash != dir) {
    *slash = '\0';
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
      return shk__error_set(err, -errno, "%s: %s", dir, strerror(errno));
  }
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
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int r = fd < 0 ? -errno : 0;
  if (!r) {
    mode_t old = umask(0177);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 64) < 0)
      r = -errno;
    umask(old);
  }
  if (r) {
    shk__error_set(err, r, "%s: %s", path, strerror(-r));
    if (fd >= 0)
      close(fd);
    free(ctl->path);
    free(ctl);
    return r;
  }
  ctl->m = m;
  ctl->listen_fd = fd;
  for (int i = 0; i < MAX_CONNS; i++)
    ctl->conns[i].fd = -1;
  if (pipe2(ctl->wake, O_CLOEXEC) < 0) {
    r = shk__error_set(err, -errno, "control thread: %s", strerror(errno));
  } else if ((r = pthread_create(&ctl->thread, NULL, serve, ctl))) {
    close(ctl->wake[0]);
    close(ctl->wake[1]);
    r = shk__error_set(err, -r, "control thread: %s", strerror(r));
  }
  if (r) {
    close(fd);
    unlink(path);
    free(ctl->path);
    free(ctl);
    return r;
  }
  shk__manager_set_control(m, ctl);
  return 0;
}

void shk__control_stop(shk__control *c)
{
  if (!c)
    return;
  if (write(c->wake[1], "x", 1) < 0) {
    /* The thread is blocked in poll on this pipe; a failed write would only
     * happen with a broken pipe, and then there is nothing left to wake. */
  }
  pthread_join(c->thread, NULL);
  close(c->wake[0]);
  close(c->wake[1]);
  close(c->listen_fd);
  unlink(c->path);
  free(c->path);
  free(c);
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

int shk_manager_rpc(int fd, const char *req, char **ans, shk_error *err)
{
  *ans = NULL;
  if (strchr(req, '\n'))
    return shk__error_set(err, -EINVAL, "a request is one line of JSON");
  if (!write_all(fd, req, strlen(req)) || !write_all(fd, "\n", 1))
    return shk__error_set(err, -EPIPE, "the manager closed the connection");
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
