/* SPDX-License-Identifier: Apache-2.0 */
/* Launcher side of a sandboxed session: the proxy on a background thread,
 * serving three unix sockets in a private directory. The directory is
 * created 0700 by mkdtemp and the sockets 0600, so the only way in is to be
 * given the path (bwrap binds it into the one sandbox it belongs to): the
 * socket a connection arrives on is the session's identity. */
#include "shinken/egress.h"

#include "common/common.h"
#include "egress/egress-internal.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Work another thread hands to the loop: nothing crosses threads but
 * these, under mu, and the eventfd that wakes the loop. */
struct post {
  struct post *next;
  enum { POST_CLOSE_TUNNELS, POST_RESUME } kind;
  uint64_t id; /* the tag to close, or the held connection */
  shk_egress_verdict verdict;
  uint64_t tag;
  unsigned flags;
  char *rule, *reason;
};

struct shk_egress_session {
  char dir[PATH_MAX];
  struct event_base *base;
  shk__eg_server *srv;
  /* Other threads never touch the event base: they queue a post under mu
   * and poke this eventfd, and the loop thread does the work. No caller
   * ever waits for the loop, except shk_egress_session_close, which joins
   * it. */
  int wake_fd;
  struct event *wake;
  pthread_t thread;
  bool running;
  pthread_mutex_t mu;
  struct post *head, *tail;
  bool stop;
  shk__eg_ca *ca; /* the inspection CA, or NULL */
  char ca_error[512]; /* why there is none, though ca_dir was given */
};

static void post_free(struct post *p)
{
  free(p->rule);
  free(p->reason);
  free(p);
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
  shk_egress_session *s = arg;
  uint64_t n;
  if (read(s->wake_fd, &n, sizeof n) < 0 && errno != EAGAIN)
    return;
  pthread_mutex_lock(&s->mu);
  struct post *p = s->head;
  s->head = s->tail = NULL;
  bool stop = s->stop;
  pthread_mutex_unlock(&s->mu);
  /* In the order they were posted: a resume and a close of its tag land
   * as their callers made them. */
  while (p) {
    struct post *next = p->next;
    if (p->kind == POST_CLOSE_TUNNELS) {
      shk__eg_server_close_tunnels(s->srv, p->id);
    } else {
      shk__eg_server_resume(s->srv, p->id, p->verdict, p->tag, p->flags, p->rule, p->reason);
      p->rule = p->reason = NULL;
    }
    post_free(p);
    p = next;
  }
  if (stop) {
    shk__eg_server_free(s->srv);
    s->srv = NULL;
    event_base_loopbreak(s->base);
  }
}

static void *loop_main(void *arg)
{
  shk_egress_session *s = arg;
  /* Signals belong to the launcher's main thread; a SIGPIPE from a peer
   * that left mid-splice stays blocked here and shows up as EPIPE. */
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  event_base_loop(s->base, EVLOOP_NO_EXIT_ON_EMPTY);
  return NULL;
}

/* Queues P for the loop and wakes it; never blocks (the eventfd is
 * non-blocking, and a counter that is already nonzero wakes the loop as
 * well as one more would). */
static void post(shk_egress_session *s, struct post *p)
{
  pthread_mutex_lock(&s->mu);
  if (s->tail)
    s->tail->next = p;
  else
    s->head = p;
  s->tail = p;
  pthread_mutex_unlock(&s->mu);
  uint64_t one = 1;
  ssize_t w = write(s->wake_fd, &one, sizeof one);
  (void)w;
}

static int build_config(const shk_egress_session_opts *o, shk__eg_config **out, shk_error *err)
{
  shk__eg_config *cfg = NULL;
  int r = 0;
  if (o->config_path)
    r = shk__eg_config_load(o->config_path, &cfg, err);
  else if (!(cfg = shk__eg_config_new()))
    r = shk__error_set(err, -ENOMEM, "out of memory");
  for (int pass = 0; pass < 2 && r == 0; pass++) {
    const char *const *pats = pass ? o->deny_domains : o->allow_domains;
    size_t n = pass ? o->n_deny_domains : o->n_allow_domains;
    for (size_t i = 0; i < n && r == 0; i++) {
      shk_error perr;
      r = shk__eg_config_add_domain(cfg, pats[i], pass ? SHK_EGRESS_DENY : SHK_EGRESS_ALLOW,
                                    &perr);
      if (r < 0)
        shk__error_set(err, r, "--%s-domain '%s': %s", pass ? "deny" : "allow", pats[i],
                       perr.message);
    }
  }
  if (r < 0) {
    shk__eg_config_free(cfg);
    return r;
  }
  *out = cfg;
  return 0;
}

int shk_egress_session_open(const shk_egress_session_opts *opts, shk_egress_session **out,
                            shk_error *err)
{
  *out = NULL;
  shk__eg_config *cfg;
  int r = build_config(opts, &cfg, err);
  if (r < 0)
    return r;
  shk_egress_session *s = calloc(1, sizeof *s);
  if (!s) {
    shk__eg_config_free(cfg);
    return shk__error_set(err, -ENOMEM, "out of memory");
  }
  s->wake_fd = -1;
  pthread_mutex_init(&s->mu, NULL);
  /* A session's verdicts are the manager's to record, on its own log: a
   * file of the configuration's would be a second record that nobody
   * verifies. */
  if (cfg->audit_path) {
    r = shk__error_set(err, -EINVAL, "%s: audit: a session's verdicts go to the manager's audit "
                       "log; the \"audit\" key is the standalone proxy's (remove it)",
                       opts->config_path ? opts->config_path : "the configuration");
    shk__eg_config_free(cfg);
    shk_egress_session_close(s);
    return r;
  }
  const char *rt = getenv("XDG_RUNTIME_DIR");
  if (!rt || rt[0] != '/' || access(rt, W_OK) != 0)
    rt = "/tmp";
  snprintf(s->dir, sizeof s->dir, "%s/shinken-egress-XXXXXX", rt);
  s->base = event_base_new();
  if (!s->base) {
    s->dir[0] = '\0';
    shk__eg_config_free(cfg);
    shk_egress_session_close(s);
    return shk__error_set(err, -ENOMEM, "cannot create the proxy's event loop");
  }
  if (!mkdtemp(s->dir)) {
    r = shk__error_set(err, -errno, "cannot create the session directory under %s: %s", rt,
                       strerror(errno));
    s->dir[0] = '\0';
    shk__eg_config_free(cfg);
    shk_egress_session_close(s);
    return r;
  }
  if (opts->ca_dir) {
    /* A CA that cannot be had leaves a session that cannot inspect: its
     * inspected connections fail (inspect-no-ca), the others go on as
     * before. Out of memory, or a bundle that cannot be written, fails. */
    shk_error cerr;
    r = shk__eg_ca_open(opts->ca_dir, &s->ca, &cerr);
    if (r < 0 && r != -ENOMEM)
      snprintf(s->ca_error, sizeof s->ca_error, "%s", cerr.message);
    else if (r == 0)
      /* The trust store the sandbox sees in place of the system's: the
       * system's bundle followed by the inspection CA, so that what the
       * workload verifies against is what it would have trusted anyway
       * plus the one CA the proxy signs with (and the same for Java). */
      r = shk__eg_ca_trust_files(s->ca, s->dir, err);
    else
      shk__error_set(err, r, "out of memory");
    if (r < 0 && !s->ca_error[0]) {
      shk__eg_config_free(cfg);
      shk_egress_session_close(s);
      return r;
    }
  }
  /* The file's upstream_ca wins: it is the operator's. */
  shk_autofree char *upstream_ca =
    cfg->upstream_ca ? strdup(cfg->upstream_ca) : opts->upstream_ca ? strdup(opts->upstream_ca) : NULL;
  if ((cfg->upstream_ca || opts->upstream_ca) && !upstream_ca) {
    shk__eg_config_free(cfg);
    shk_egress_session_close(s);
    return shk__error_set(err, -ENOMEM, "out of memory");
  }
  shk__eg_server_opts so = { .name = opts->name ? opts->name : "session",
                             .on_verdict = opts->on_verdict, .verdict_data = opts->hook_data,
                             .hook = opts->hook, .hook_data = opts->hook_data,
                             .limits = &opts->limits, .on_abandon = opts->on_abandon,
                             .ca = s->ca, .rewrite = opts->rewrite, .upstream_ca = upstream_ca };
  r = shk__eg_server_new(s->base, cfg, &so, &s->srv, err);
  if (r < 0) {
    shk_egress_session_close(s);
    return r;
  }
  static const struct {
    const char *name;
    shk__eg_listener_kind kind;
  } socks[] = { { "http.sock", SHK__LISTEN_HTTP },
                { "socks5.sock", SHK__LISTEN_SOCKS5 },
                { "dns.sock", SHK__LISTEN_DNS } };
  for (size_t i = 0; i < 3; i++) {
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/%s", s->dir, socks[i].name);
    r = shk__eg_server_listen_unix(s->srv, socks[i].kind, path);
    if (r < 0) {
      shk__error_set(err, r, "cannot listen on %s: %s", path, strerror(-r));
      shk_egress_session_close(s);
      return r;
    }
  }
  /* The sandbox's resolver file, for the launcher to bind over
   * /etc/resolv.conf: the stub behind the bridge is the only resolver. */
  char rpath[PATH_MAX + 16];
  snprintf(rpath, sizeof rpath, "%s/resolv.conf", s->dir);
  int rfd = open(rpath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  static const char text[] = "nameserver 127.0.0.1\n";
  if (rfd < 0 || write(rfd, text, sizeof text - 1) != (ssize_t)sizeof text - 1) {
    r = shk__error_set(err, rfd < 0 ? -errno : -EIO, "cannot write %s", rpath);
    if (rfd >= 0)
      close(rfd);
    shk_egress_session_close(s);
    return r;
  }
  close(rfd);
  s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (s->wake_fd >= 0)
    s->wake = event_new(s->base, s->wake_fd, EV_READ | EV_PERSIST, on_wake, s);
  r = s->wake && event_add(s->wake, NULL) == 0 ? -pthread_create(&s->thread, NULL, loop_main, s)
                                                : -ENOMEM;
  if (r < 0) {
    shk__error_set(err, r, "cannot start the proxy thread: %s", strerror(-r));
    shk_egress_session_close(s);
    return r;
  }
  s->running = true;
  *out = s;
  return 0;
}

const char *shk_egress_session_ca_pem(const shk_egress_session *s)
{
  return s->ca ? shk__eg_ca_pem(s->ca) : NULL;
}

const char *shk_egress_session_ca_error(const shk_egress_session *s)
{
  return s->ca_error[0] ? s->ca_error : NULL;
}

const char *shk_egress_session_dir(const shk_egress_session *s)
{
  return s->dir;
}

int shk_egress_session_close_tunnels(shk_egress_session *s, uint64_t tag)
{
  if (!s->running)
    return shk__eg_server_close_tunnels(s->srv, tag);
  struct post *p = calloc(1, sizeof *p);
  if (!p)
    return -ENOMEM;
  p->kind = POST_CLOSE_TUNNELS;
  p->id = tag;
  /* The count first: the loop may close them as soon as the post is in. */
  int n = shk__eg_server_tunnel_count(s->srv, tag);
  post(s, p);
  return n;
}

int shk_egress_session_resume(shk_egress_session *s, uint64_t conn_id, shk_egress_verdict verdict,
                              uint64_t tag, const char *rule, const char *reason)
{
  return shk_egress_session_resume_flags(s, conn_id, verdict, tag, 0, rule, reason);
}

int shk_egress_session_resume_flags(shk_egress_session *s, uint64_t conn_id,
                                    shk_egress_verdict verdict, uint64_t tag, unsigned flags,
                                    const char *rule, const char *reason)
{
  if (verdict != SHK_EGRESS_ALLOW && verdict != SHK_EGRESS_DENY)
    return -EINVAL;
  if (!s->running)
    return -ENOENT;
  /* Everything that can fail comes before the claim: once a resume has
   * claimed the connection, it is the one that goes on with it. */
  struct post *p = calloc(1, sizeof *p);
  if (!p || (rule && !(p->rule = strdup(rule))) || (reason && !(p->reason = strdup(reason)))) {
    if (p)
      post_free(p);
    return -ENOMEM;
  }
  if (shk__eg_server_claim_held(s->srv, conn_id) < 0) {
    post_free(p);
    return -ENOENT;
  }
  p->kind = POST_RESUME;
  p->id = conn_id;
  p->verdict = verdict;
  p->tag = tag;
  p->flags = flags;
  post(s, p);
  return 0;
}

void shk_egress_session_close(shk_egress_session *s)
{
  if (!s)
    return;
  if (s->running) {
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_mutex_unlock(&s->mu);
    uint64_t one = 1;
    ssize_t w = write(s->wake_fd, &one, sizeof one);
    (void)w;
    pthread_join(s->thread, NULL);
  }
  shk__eg_server_free(s->srv);
  while (s->head) {
    struct post *p = s->head;
    s->head = p->next;
    post_free(p);
  }
  if (s->wake)
    event_free(s->wake);
  if (s->base)
    event_base_free(s->base);
  if (s->wake_fd >= 0)
    close(s->wake_fd);
  if (s->dir[0]) {
    char rpath[PATH_MAX + 32];
    snprintf(rpath, sizeof rpath, "%s/resolv.conf", s->dir);
    unlink(rpath);
    snprintf(rpath, sizeof rpath, "%s/" SHK_EGRESS_CA_BUNDLE, s->dir);
    unlink(rpath);
    snprintf(rpath, sizeof rpath, "%s/" SHK_EGRESS_JAVA_STORE, s->dir);
    unlink(rpath);
    rmdir(s->dir);
  }
  shk__eg_ca_free(s->ca);
  pthread_mutex_destroy(&s->mu);
  free(s);
}
