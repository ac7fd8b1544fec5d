/* SPDX-License-Identifier: Apache-2.0 */
/* The proxy server: listeners, the per-connection state machine (read the
 * request, decide, hold, resolve, dial, relay), the DNS stub and the audit
 * log. Everything runs on one libevent loop; nothing here blocks. The only
 * state other threads touch is behind shared_mu (the held set and the
 * count of tunnels per tag) and the process-wide descriptor count, an
 * atomic. */
#include "egress/egress-internal.h"

#include "common/common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_ADDRS 16
#define CONNECT_SECONDS 10
#define LINGER_MS 2000
/* The longest text a caller may hand a refused client. */
#define MESSAGE_MAX 2000
/* Descriptors a relayed connection adds to its two sockets: a pipe per
 * direction (see tunnel.c). */
#define RELAY_PIPE_FDS 4
/* Connections refused at accept that linger at once per session. */
#define REFUSING_MAX 64

/* A policy shared by the connections that started under it: a reload
 * swaps the server's pointer, and the old policy lives on until its last
 * connection has decided. */
struct policy {
  shk__eg_config *cfg;
  struct evdns_base *dns;
  int refs;
};

struct listener {
  struct listener *next;
  shk__eg_server *srv;
  shk__eg_listener_kind kind;
  struct evconnlistener *lev;
  struct event *retry;
  char *unix_path;
};

/* The request phase is HEAD, SOCKS_REQ and DNS (reading), then RESOLVE
 * and DIAL (deciding is synchronous); those five are "being set up". A
 * HELD connection waits for resume; RELAY carries bytes; LINGER has been
 * answered and is closing. */
enum conn_state { ST_HEAD, ST_SOCKS_REQ, ST_DNS, ST_RESOLVE, ST_DIAL, ST_HELD, ST_RELAY, ST_LINGER };

struct conn {
  struct conn *prev, *next;
  shk__eg_server *srv;
  struct policy *pol;
  shk__eg_listener_kind kind;
  enum conn_state state;
  shk_egress_proto proto;
  uint64_t id, tag;
  int fd, up_fd;
  int fds;            /* descriptors this connection holds in the process-wide count */
  int sockets;        /* of them, sockets in the session's count */
  bool tunnel_counted; /* counted in the tag table */
  struct event *ev, *timer;
  int64_t deadline_ms, last_read_ms; /* request phase */
  char buf[SHK__HTTP_HEAD_MAX];
  size_t len;
  shk_host host;
  uint16_t port;
  char via[SHK_IP_TEXT_MAX]; /* the synthetic address it came through, or "" */
  shk__http_req req;
  size_t consumed; /* bytes of buf that the handshake used */
  const char *rule;
  bool rule_is_config;
  char *rule_owned; /* a resumed connection's rule */
  char *message;    /* the caller's text for a refused client, or NULL */
  unsigned limit;   /* the limit a session-*-limit refusal names */
  const char *refusing; /* refused at accept: the reason, while it lingers */
  int dial_err;
  shk_ip addrs[MAX_ADDRS];
  size_t n_addrs, next_addr;
  struct evdns_getaddrinfo_request *dnsreq;
  shk__dns_query dq;
  shk__relay *relay;
  unsigned flags;    /* how the hook said to carry it (SHK_EGRESS_INSPECT, _LIMITED) */
  shk__mitm *mitm;   /* an inspected connection's relay */
  const shk__mitm_record *req_rec; /* the request being recorded (audit) */
};

struct tag_count {
  uint64_t tag;
  int n;
};

struct shk__eg_server {
  struct event_base *base;
  struct policy *pol;
  char *name;
  int (*on_verdict)(void *data, const shk_egress_verdict_info *v);
  void *verdict_data;
  shk_egress_hook_fn hook;
  void *hook_data;
  void (*on_abandon)(void *hook_data, const char *session, uint64_t conn_id);
  shk_egress_limits opt_limits; /* the caller's, kept for reloads */
  shk_egress_limits lim;        /* in force */
  struct listener *listeners;
  struct conn *conns;
  uint64_t next_id;
  unsigned n_sockets, n_setup, n_held, n_refusing;
  shk__dns_pool *pool; /* with a DNS listener */
  /* Inspection: the CA (NULL: none, and an inspected connection fails),
   * the rewrite hook, and the TLS contexts, made at the first inspected
   * connection. */
  shk__eg_ca *ca;
  shk_egress_rewrite_fn rewrite;
  void *rewrite_data;
  char *upstream_ca;
  SSL_CTX *tls_server, *tls_client;
  shk__mitm_sessions *tls_sessions;
  /* Read by other threads (shk__eg_server_tunnel_count, _claim_held):
   * held for a few instructions at a time, never across I/O. */
  pthread_mutex_t shared_mu;
  uint64_t *held_ids;
  size_t n_held_ids, cap_held_ids;
  struct tag_count *tags;
  size_t n_tags, cap_tags;
  int n_tunnels;
};

static void conn_free(struct conn *c);

static int64_t now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------------
 * Descriptors. Every descriptor a connection holds (its client socket, its
 * upstream socket, its relay's pipes) is counted process-wide, so that all
 * the sessions of a process together leave fd_reserve descriptors to the
 * rest of it (the manager's control plane): the proxy refuses a new
 * connection rather than take them, instead of failing accept() later.
 */

static atomic_long fds_in_use;
static atomic_long fd_limit = 1024;

/* Safe: it only raises the soft limit up to the hard limit the process
 * already has, which any process may do for itself. */
static void raise_nofile(void)
{
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
    return;
  if (rl.rlim_cur < rl.rlim_max) {
    struct rlimit want = { rl.rlim_max, rl.rlim_max };
    /* An unlimited hard limit is capped by fs.nr_open; try that size. */
    if (want.rlim_cur == RLIM_INFINITY)
      want.rlim_cur = want.rlim_max = 1048576;
    if (setrlimit(RLIMIT_NOFILE, &want) == 0)
      rl.rlim_cur = want.rlim_cur;
  }
  atomic_store(&fd_limit, rl.rlim_cur == RLIM_INFINITY ? 1048576 : (long)rl.rlim_cur);
}

/* Takes N descriptors into the count, unless that would leave fewer than
 * the reserve free, or FD (a descriptor just opened, or -1) is itself
 * inside the reserve: the kernel hands out the lowest free number, so a
 * number that high means at most that few are left, whatever holds the
 * others. */
static bool fds_take(struct conn *c, int n, int fd)
{
  long reserve = c->srv->lim.fd_reserve;
  long limit = atomic_load(&fd_limit);
  if (reserve && fd >= 0 && fd >= limit - reserve)
    return false;
  long now = atomic_fetch_add(&fds_in_use, n) + n;
  if (reserve && now > limit - reserve) {
    atomic_fetch_sub(&fds_in_use, n);
    return false;
  }
  c->fds += n;
  return true;
}

/* ------------------------------------------------------------------------
 * The state other threads read
 */

static void tag_add(shk__eg_server *s, uint64_t tag, int d)
{
  pthread_mutex_lock(&s->shared_mu);
  s->n_tunnels += d;
  size_t i = 0;
  while (i < s->n_tags && s->tags[i].tag != tag)
    i++;
  if (i == s->n_tags && d > 0) {
    if (s->n_tags == s->cap_tags) {
      size_t cap = s->cap_tags ? s->cap_tags * 2 : 8;
      struct tag_count *t = realloc(s->tags, cap * sizeof *t);
      if (!t) {
        /* The count per tag is only what close_tunnels reports; the
         * tunnel itself is closed by its tag either way. */
        pthread_mutex_unlock(&s->shared_mu);
        return;
      }
      s->tags = t;
      s->cap_tags = cap;
    }
    s->tags[s->n_tags++] = (struct tag_count){ tag, 0 };
  }
  if (i < s->n_tags && (s->tags[i].n += d) <= 0)
    s->tags[i] = s->tags[--s->n_tags];
  pthread_mutex_unlock(&s->shared_mu);
}

int shk__eg_server_tunnel_count(shk__eg_server *s, uint64_t tag)
{
  pthread_mutex_lock(&s->shared_mu);
  int n = tag ? 0 : s->n_tunnels;
  for (size_t i = 0; tag && i < s->n_tags; i++)
    if (s->tags[i].tag == tag)
      n = s->tags[i].n;
  pthread_mutex_unlock(&s->shared_mu);
  return n;
}

static int held_add(shk__eg_server *s, uint64_t id)
{
  pthread_mutex_lock(&s->shared_mu);
  if (s->n_held_ids == s->cap_held_ids) {
    size_t cap = s->cap_held_ids ? s->cap_held_ids * 2 : 16;
    uint64_t *h = realloc(s->held_ids, cap * sizeof *h);
    if (!h) {
      pthread_mutex_unlock(&s->shared_mu);
      return -ENOMEM;
    }
    s->held_ids = h;
    s->cap_held_ids = cap;
  }
  s->held_ids[s->n_held_ids++] = id;
  pthread_mutex_unlock(&s->shared_mu);
  return 0;
}

int shk__eg_server_claim_held(shk__eg_server *s, uint64_t id)
{
  int r = -ENOENT;
  pthread_mutex_lock(&s->shared_mu);
  for (size_t i = 0; i < s->n_held_ids; i++)
    if (s->held_ids[i] == id) {
      s->held_ids[i] = s->held_ids[--s->n_held_ids];
      r = 0;
      break;
    }
  pthread_mutex_unlock(&s->shared_mu);
  return r;
}

/* ------------------------------------------------------------------------
 * Connection states and the session's counts
 */

static bool is_setup(enum conn_state st)
{
  return st <= ST_DIAL;
}

static void set_state(struct conn *c, enum conn_state st)
{
  shk__eg_server *s = c->srv;
  s->n_setup += (unsigned)is_setup(st) - (unsigned)is_setup(c->state);
  s->n_held += (unsigned)(st == ST_HELD) - (unsigned)(c->state == ST_HELD);
  c->state = st;
}

static void arm(struct conn *c, int64_t ms)
{
  struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
  evtimer_del(c->timer);
  evtimer_add(c->timer, &tv);
}

/* ------------------------------------------------------------------------
 * Policies and resolvers
 */

/* evdns reports nameserver trouble on stderr by default, which is where
 * the standalone proxy writes its audit lines; each lookup's outcome is in
 * the audit line of its decision instead. */
static void quiet_log(int is_warning, const char *msg)
{
  (void)is_warning;
  (void)msg;
}

static struct evdns_base *make_resolver(struct event_base *base, const shk__eg_config *cfg,
                                        shk_error *err)
{
  struct evdns_base *dns;
  evdns_set_log_fn(quiet_log);
  if (cfg->has_dns_upstream) {
    dns = evdns_base_new(base, 0);
    struct sockaddr_storage ss = { 0 };
    socklen_t sl;
    if (cfg->dns_upstream.family == 4) {
      struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
      sin->sin_family = AF_INET;
      sin->sin_port = htons(cfg->dns_upstream_port);
      memcpy(&sin->sin_addr, cfg->dns_upstream.b, 4);
      sl = sizeof *sin;
    } else {
      struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
      sin6->sin6_family = AF_INET6;
      sin6->sin6_port = htons(cfg->dns_upstream_port);
      memcpy(&sin6->sin6_addr, cfg->dns_upstream.b, 16);
      sl = sizeof *sin6;
    }
    if (dns && evdns_base_nameserver_sockaddr_add(dns, (struct sockaddr *)&ss, sl, 0) != 0) {
      evdns_base_free(dns, 1);
      dns = NULL;
    }
  } else {
    /* The system's resolver configuration: /etc/resolv.conf and the hosts
     * file. With no nameserver at all every lookup fails, which refuses. */
    dns = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
                                   EVDNS_BASE_NAMESERVERS_NO_DEFAULT);
  }
  if (!dns) {
    shk__error_set(err, -EINVAL, "cannot set up the DNS resolver");
    return NULL;
  }
  /* The lookup's deadline is the connection's own timer (resolve_timeout);
   * evdns gets twice as long, so the reason in the audit line is
   * "dns-timeout" at exactly the configured time. */
  char t[32];
  unsigned ms = cfg->dns_timeout_ms * 2;
  snprintf(t, sizeof t, "%u.%03u", ms / 1000, ms % 1000);
  evdns_base_set_option(dns, "timeout:", t);
  evdns_base_set_option(dns, "attempts:", "1");
  /* Names are already canonical and absolute: no search list. */
  evdns_base_search_clear(dns);
  return dns;
}

static void policy_unref(struct policy *p)
{
  if (p && --p->refs == 0) {
    evdns_base_free(p->dns, 1);
    shk__eg_config_free(p->cfg);
    free(p);
  }
}

/* ------------------------------------------------------------------------
 * Audit
 */

static const char *proto_name(shk_egress_proto p)
{
  switch (p) {
  case SHK_EGRESS_HTTP:
    return "http";
  case SHK_EGRESS_CONNECT:
    return "connect";
  case SHK_EGRESS_SOCKS5:
    return "socks5";
  case SHK_EGRESS_DNS:
    return "dns";
  }
  return "?";
}

/* One record per decision, handed to the verdict callback. Only canonical
 * hosts (which hold nothing but LDH characters, digits, dots and colons),
 * addresses, rule texts and the caller's own message go in: never a path,
 * a query or a header value. Returns nonzero when it was not recorded. */
static int audit(struct conn *c, const char *decision, const char *reason)
{
  shk__eg_server *s = c->srv;
  if (!s->on_verdict)
    return 0;
  shk_egress_verdict_info v = {
    .session = s->name, .conn_id = c->id, .proto = c->proto,
    .host = c->host.kind ? c->host.text : NULL, .port = c->port, .decision = decision,
    .reason = reason, .rule = c->rule, .via = c->via[0] ? c->via : NULL, .message = c->message,
    .tag = c->tag,
  };
  if (c->req_rec) {
    v.method = c->req_rec->method;
    v.status = c->req_rec->status;
    v.bytes = c->req_rec->bytes;
    v.duration_us = c->req_rec->duration_us;
  }
  return s->on_verdict(s->verdict_data, &v);
}

int shk_egress_verdict_json(const shk_egress_verdict_info *v, char **line)
{
  *line = NULL;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char when[96];
  snprintf(when, sizeof when, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
           tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
  /* A hook's rule or a message that is not UTF-8 is left out rather than
   * losing the whole line. */
  json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:o, s:i, s:s, s:s, s:o?, s:o?, s:o?}", "time",
                        when, "session", v->session ? v->session : "proxy", "conn",
                        (json_int_t)(v->conn_id & ((1ull << 53) - 1)), "protocol",
                        proto_name(v->proto), "host", v->host ? json_string(v->host) : json_null(),
                        "port", (int)v->port, "decision", v->decision, "reason", v->reason,
                        "rule", v->rule ? json_string(v->rule) : NULL, "via",
                        v->via ? json_string(v->via) : NULL, "message",
                        v->message ? json_string(v->message) : NULL);
  if (o && v->method) {
    json_object_set_new(o, "method", json_string(v->method));
    json_object_set_new(o, "status", json_integer(v->status));
    json_object_set_new(o, "bytes", json_integer((json_int_t)v->bytes));
    json_object_set_new(o, "duration_us", json_integer((json_int_t)v->duration_us));
  }
  char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  if (!text)
    return -ENOMEM;
  size_t n = strlen(text);
  char *out = realloc(text, n + 2);
  if (!out) {
    free(text);
    return -ENOMEM;
  }
  out[n] = '\n';
  out[n + 1] = '\0';
  *line = out;
  return 0;
}

/* ------------------------------------------------------------------------
 * Refusals
 */

static void timer_cb(evutil_socket_t fd, short what, void *arg);

static void linger_cb(evutil_socket_t fd, short what, void *arg)
{
  struct conn *c = arg;
  char sink[4096];
  ssize_t n = recv(c->fd, sink, sizeof sink, 0);
  if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR)))
    return;
  conn_free(c);
}

/* Sends REPLY and closes gently: our side is shut for writing, and what
 * the client still sends is read and dropped for a moment, so a close with
 * unread data does not turn into a reset that eats the reply. */
static void close_with(struct conn *c, const char *reply, size_t len)
{
  if (len) {
    ssize_t w = send(c->fd, reply, len, MSG_NOSIGNAL);
    (void)w;
  }
  shutdown(c->fd, SHUT_WR);
  set_state(c, ST_LINGER);
  if (c->dnsreq) {
    evdns_getaddrinfo_cancel(c->dnsreq);
    c->dnsreq = NULL;
  }
  if (c->up_fd >= 0) {
    close(c->up_fd);
    c->up_fd = -1;
    c->srv->n_sockets--;
    c->sockets--;
  }
  event_free(c->ev);
  c->ev = event_new(c->srv->base, c->fd, EV_READ | EV_PERSIST, linger_cb, c);
  event_add(c->ev, NULL);
  arm(c, LINGER_MS);
}

/* The refusal of C as an HTTP response, into OUT: the token in
 * X-Shinken-Decision, and a body written for an agent (the caller's
 * message, or the proxy's own text). */
static size_t http_refusal(const struct conn *c, int status, const char *reason, char *out,
                           size_t cap)
{
  char body[MESSAGE_MAX + 2];
  size_t bl;
  if (c->message) {
    bl = strlen(c->message);
    if (bl > MESSAGE_MAX)
      bl = MESSAGE_MAX;
    memcpy(body, c->message, bl);
  } else {
    shk__eg_refusal r = { .reason = reason, .host = c->host.kind ? c->host.text : NULL,
                          .port = c->port, .rule = c->rule, .rule_is_config = c->rule_is_config,
                          .limit = c->limit };
    bl = shk__eg_refusal_text(&r, body, MESSAGE_MAX + 1);
    if (bl > MESSAGE_MAX)
      bl = MESSAGE_MAX;
  }
  body[bl++] = '\n';
  int n = snprintf(out, cap,
                   "HTTP/1.1 %d %s\r\nX-Shinken-Decision: %s\r\nContent-Type: text/plain; "
                   "charset=utf-8\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                   status, shk__http_status_text(status), reason, bl);
  if (n < 0 || (size_t)n + bl > cap)
    return 0;
  memcpy(out + n, body, bl);
  return (size_t)n + bl;
}

static void dns_reply(struct conn *c, const shk_ip *ips, size_t n);

/* A refusal of the request that has been parsed, in the connection's own
 * protocol, and its audit line: "deny" for a refusal, "error" for an
 * allowed destination that could not be reached. */
static void refuse(struct conn *c, const char *decision, const char *reason, int http_status,
                   uint8_t socks_code)
{
  audit(c, decision, reason);
  if (c->kind == SHK__LISTEN_HTTP) {
    char r[MESSAGE_MAX + 512];
    close_with(c, r, http_refusal(c, http_status, reason, r, sizeof r));
  } else if (c->kind == SHK__LISTEN_SOCKS5) {
    uint8_t r[10] = { 5, socks_code, 0, 1 };
    close_with(c, (const char *)r, sizeof r);
  } else {
    dns_reply(c, NULL, 0);
  }
}

static void deny(struct conn *c, const char *reason, int http_status, uint8_t socks_code)
{
  refuse(c, "deny", reason, http_status, socks_code);
}

/* ------------------------------------------------------------------------
 * Dialing
 */

static void relay_done(void *arg)
{
  conn_free(arg);
}

static void free_cb(evutil_socket_t fd, short what, void *arg)
{
  conn_free(arg);
}

/* ------------------------------------------------------------------------
 * Inspected connections (mitm.c)
 */

static void mitm_record(void *arg, const shk__mitm_record *r)
{
  struct conn *c = arg;
  c->req_rec = r;
  audit(c, r->decision, r->reason);
  c->req_rec = NULL;
}

/* The client is told the tunnel is up, in its protocol, and then the
 * proxy is its TLS server. Why it fails rather than tunnel when it cannot
 * inspect: the grant said the connection must be read, and a tunnel would
 * carry what nobody read. */
static void start_mitm(struct conn *c)
{
  shk__eg_server *s = c->srv;
  if (!s->ca) {
    free(c->message);
    c->message = strdup("This destination is granted with TLS inspection, but this session has "
                        "no inspection CA, so the connection was refused rather than carried "
                        "unread.");
    refuse(c, "error", "inspect-no-ca", 502, SHK__SOCKS5_FAILURE);
    return;
  }
  if (c->len > c->consumed) {
    /* TLS bytes sent before the tunnel was up: no client does that, and
     * the handshake could not be read from the socket alone. */
    deny(c, "inspect-early-data", 400, SHK__SOCKS5_FAILURE);
    return;
  }
  if (!s->tls_server) {
    shk_error err;
    int r = shk__mitm_contexts(s->upstream_ca, &s->tls_server, &s->tls_client, &err);
    /* Without a cache every connection does a full handshake. */
    if (r == 0)
      s->tls_sessions = shk__mitm_sessions_new();
    if (r < 0) {
      refuse(c, "error", r == -ENOMEM ? "proxy-out-of-memory" : "inspect-upstream-ca", 502,
             SHK__SOCKS5_FAILURE);
      return;
    }
  }
  X509 *leaf = shk__eg_ca_leaf(s->ca, &c->host);
  if (!leaf) {
    deny(c, "proxy-out-of-memory", 503, SHK__SOCKS5_FAILURE);
    return;
  }
  if (audit(c, "allow", "inspect")) {
    refuse(c, "deny", "proxy-audit-refused", 503, SHK__SOCKS5_FAILURE);
    return;
  }
  static const char ok_http[] = "HTTP/1.1 200 Connection established\r\n\r\n";
  static const uint8_t ok_socks[10] = { 5, 0, 0, 1 };
  bool http = c->proto == SHK_EGRESS_CONNECT;
  size_t n = http ? sizeof ok_http - 1 : sizeof ok_socks;
  /* A reply this short goes into an empty socket buffer whole. */
  if (send(c->fd, http ? ok_http : (const char *)ok_socks, n, MSG_NOSIGNAL) != (ssize_t)n) {
    conn_free(c);
    return;
  }
  event_del(c->ev);
  evtimer_del(c->timer);
  set_state(c, ST_RELAY);
  tag_add(s, c->tag, 1);
  c->tunnel_counted = true;
  shk__mitm_opts o = { .client_fd = c->fd, .up_fd = c->up_fd, .host = c->host, .port = c->port,
                       .flags = c->flags, .server_ctx = s->tls_server,
                       .client_ctx = s->tls_client, .sessions = s->tls_sessions, .leaf = leaf,
                       .leaf_key = shk__eg_ca_leaf_key(s->ca), .session = s->name,
                       .conn_id = c->id, .tag = c->tag, .rewrite = s->rewrite,
                       .rewrite_data = s->rewrite_data, .record = mitm_record, .done = relay_done,
                       .arg = c };
  c->fd = c->up_fd = -1; /* the relay owns them now, even when it failed */
  c->mitm = shk__mitm_new(s->base, &o);
  if (!c->mitm) {
    struct timeval now = { 0, 0 };
    event_base_once(s->base, -1, EV_TIMEOUT, free_cb, c, &now);
  }
}

static void established(struct conn *c)
{
  if ((c->flags & SHK_EGRESS_INSPECT) && c->proto != SHK_EGRESS_HTTP) {
    start_mitm(c);
    return;
  }
  if (!fds_take(c, RELAY_PIPE_FDS, -1)) {
    deny(c, "proxy-descriptor-reserve", 503, SHK__SOCKS5_NOT_ALLOWED);
    return;
  }
  shk__relay_opts o = { .client_fd = c->fd, .up_fd = c->up_fd, .c2u_limit = UINT64_MAX,
                        .done = relay_done, .arg = c };
  size_t extra = c->len - c->consumed;
  if (c->proto == SHK_EGRESS_HTTP) {
    /* The origin gets the rebuilt head and exactly the body (Content-Length
     * bytes, or the chunks up to the last); whatever else the client sent
     * is never forwarded. */
    uint64_t body = c->req.content_length;
    size_t now = extra < body ? extra : (size_t)body;
    if (c->req.chunked) {
      const char *why;
      long k = shk__chunked_feed(&o.chunk, c->buf + c->consumed, extra, &why);
      if (k < 0) {
        deny(c, why, 400, 0);
        return;
      }
      now = (size_t)k;
      body = shk__chunked_done(&o.chunk) ? now : UINT64_MAX;
      o.c2u_chunked = !shk__chunked_done(&o.chunk);
    }
    o.c2u_pre = malloc(c->req.upstream_len + now);
    if (!o.c2u_pre)
      goto oom;
    memcpy(o.c2u_pre, c->req.upstream, c->req.upstream_len);
    memcpy(o.c2u_pre + c->req.upstream_len, c->buf + c->consumed, now);
    o.c2u_pre_len = c->req.upstream_len + now;
    o.c2u_limit = body == UINT64_MAX ? UINT64_MAX : body - now;
    o.http = true;
  } else {
    if (extra) {
      o.c2u_pre = malloc(extra);
      if (!o.c2u_pre)
        goto oom;
      memcpy(o.c2u_pre, c->buf + c->consumed, extra);
      o.c2u_pre_len = extra;
    }
    static const char ok_http[] = "HTTP/1.1 200 Connection established\r\n\r\n";
    static const uint8_t ok_socks[10] = { 5, 0, 0, 1 };
    size_t n = c->proto == SHK_EGRESS_CONNECT ? sizeof ok_http - 1 : sizeof ok_socks;
    o.u2c_pre = malloc(n);
    if (!o.u2c_pre)
      goto oom;
    memcpy(o.u2c_pre, c->proto == SHK_EGRESS_CONNECT ? ok_http : (const char *)ok_socks, n);
    o.u2c_pre_len = n;
  }
  /* An allow the record does not take is not given. */
  if (audit(c, "allow", "allowed")) {
    if (o.c2u_pre)
      explicit_bzero(o.c2u_pre, o.c2u_pre_len);
    free(o.c2u_pre);
    free(o.u2c_pre);
    refuse(c, "deny", "proxy-audit-refused", 503, SHK__SOCKS5_FAILURE);
    return;
  }
  event_del(c->ev);
  evtimer_del(c->timer);
  set_state(c, ST_RELAY);
  tag_add(c->srv, c->tag, 1);
  c->tunnel_counted = true;
  c->relay = shk__relay_new(c->srv->base, &o);
  c->fd = c->up_fd = -1; /* the relay owns them now, even when it failed */
  if (!c->relay) {
    /* Freed from the loop, not here: a caller up the stack (a resolver
     * callback run synchronously) may still hold C. */
    struct timeval now = { 0, 0 };
    event_base_once(c->srv->base, -1, EV_TIMEOUT, free_cb, c, &now);
  }
  return;
oom:
  free(o.c2u_pre);
  deny(c, "proxy-out-of-memory", 503, SHK__SOCKS5_FAILURE);
}

static void try_dial(struct conn *c);

static void dial_cb(evutil_socket_t fd, short what, void *arg)
{
  struct conn *c = arg;
  int err = ETIMEDOUT;
  socklen_t el = sizeof err;
  if ((what & EV_WRITE) && getsockopt(c->up_fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
    err = errno;
  if (err == 0) {
    established(c);
    return;
  }
  c->dial_err = err;
  close(c->up_fd);
  c->up_fd = -1;
  c->srv->n_sockets--;
  c->sockets--;
  try_dial(c);
}

/* The second check: on the very address about to be dialed, with no
 * lookup between this check and connect(), so a DNS answer that changes
 * (rebinding) cannot slip a private address in. */
static void try_dial(struct conn *c)
{
  const shk__eg_config *cfg = c->pol->cfg;
  shk__eg_server *s = c->srv;
  while (c->next_addr < c->n_addrs) {
    const shk_ip *ip = &c->addrs[c->next_addr++];
    const char *blocked = shk__eg_ip_blocked(cfg, ip);
    if (blocked) {
      deny(c, blocked, 403, SHK__SOCKS5_NOT_ALLOWED);
      return;
    }
    if (s->n_sockets + 1 > s->lim.connections) {
      c->limit = s->lim.connections;
      deny(c, "session-connection-limit", 429, SHK__SOCKS5_NOT_ALLOWED);
      return;
    }
    struct sockaddr_storage ss = { 0 };
    socklen_t sl;
    if (ip->family == 4) {
      struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
      sin->sin_family = AF_INET;
      sin->sin_port = htons(c->port);
      memcpy(&sin->sin_addr, ip->b, 4);
      sl = sizeof *sin;
    } else {
      struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
      sin6->sin6_family = AF_INET6;
      sin6->sin6_port = htons(c->port);
      memcpy(&sin6->sin6_addr, ip->b, 16);
      sl = sizeof *sin6;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      c->dial_err = errno;
      continue;
    }
    /* The upstream socket is counted once, for the first address; a
     * connection dials one address at a time. */
    if (c->fds < 2 && !fds_take(c, 1, fd)) {
      close(fd);
      deny(c, "proxy-descriptor-reserve", 503, SHK__SOCKS5_NOT_ALLOWED);
      return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS) {
      c->dial_err = errno;
      close(fd);
      continue;
    }
    c->up_fd = fd;
    s->n_sockets++;
    c->sockets++;
    set_state(c, ST_DIAL);
    event_free(c->ev);
    c->ev = event_new(s->base, fd, EV_WRITE, dial_cb, c);
    struct timeval tv = { CONNECT_SECONDS, 0 };
    event_add(c->ev, &tv);
    return;
  }
  /* Every address failed: say how, in each protocol's terms. */
  switch (c->dial_err) {
  case ECONNREFUSED:
    refuse(c, "error", "connect-refused", 502, SHK__SOCKS5_REFUSED);
    break;
  case ENETUNREACH:
    refuse(c, "error", "connect-unreachable", 502, SHK__SOCKS5_NET_UNREACH);
    break;
  case EHOSTUNREACH:
  case EHOSTDOWN:
    refuse(c, "error", "connect-unreachable", 502, SHK__SOCKS5_HOST_UNREACH);
    break;
  case ETIMEDOUT:
    refuse(c, "error", "connect-timeout", 504, SHK__SOCKS5_HOST_UNREACH);
    break;
  default:
    refuse(c, "error", "connect-failed", 502, SHK__SOCKS5_FAILURE);
  }
}

/* ------------------------------------------------------------------------
 * Deciding, holding and resolving
 */

static void dns_reply(struct conn *c, const shk_ip *ips, size_t n)
{
  uint8_t out[2 + 2048];
  size_t len = shk__dns_build_reply(&c->dq, ips, n, out + 2, sizeof out - 2);
  if (!len)
    len = shk__dns_build_reply(&c->dq, NULL, 0, out + 2, sizeof out - 2);
  out[0] = (uint8_t)(len >> 8);
  out[1] = (uint8_t)len;
  ssize_t w = send(c->fd, out, len + 2, MSG_NOSIGNAL);
  (void)w;
  /* The stub answers one query per connection (the bridge opens one per
   * datagram); the close tells the client the answer is complete. */
  close_with(c, NULL, 0);
}

/* All addresses are checked; one non-public address refuses the whole
 * answer, because a later lookup could pick any of them. */
static void addresses_known(struct conn *c)
{
  for (size_t i = 0; i < c->n_addrs; i++) {
    const char *blocked = shk__eg_ip_blocked(c->pol->cfg, &c->addrs[i]);
    if (blocked) {
      deny(c, blocked, 403, SHK__SOCKS5_NOT_ALLOWED);
      return;
    }
  }
  try_dial(c);
}

static void resolved_cb(int result, struct evutil_addrinfo *res, void *arg)
{
  struct conn *c = arg;
  c->dnsreq = NULL;
  evtimer_del(c->timer);
  if (result == EVUTIL_EAI_CANCEL) {
    /* Only conn_free and a policy teardown cancel; neither wants more. */
    if (res)
      evutil_freeaddrinfo(res);
    return;
  }
  if (result != 0 || !res) {
    if (res)
      evutil_freeaddrinfo(res);
    deny(c, "dns-failure", 403, SHK__SOCKS5_HOST_UNREACH);
    return;
  }
  c->n_addrs = 0;
  bool overflow = false;
  for (struct evutil_addrinfo *a = res; a; a = a->ai_next) {
    if (c->n_addrs == MAX_ADDRS) {
      overflow = true;
      break;
    }
    shk_ip *ip = &c->addrs[c->n_addrs];
    memset(ip, 0, sizeof *ip);
    if (a->ai_family == AF_INET) {
      ip->family = 4;
      memcpy(ip->b, &((struct sockaddr_in *)a->ai_addr)->sin_addr, 4);
    } else if (a->ai_family == AF_INET6) {
      ip->family = 6;
      memcpy(ip->b, &((struct sockaddr_in6 *)a->ai_addr)->sin6_addr, 16);
    } else {
      continue;
    }
    c->n_addrs++;
  }
  evutil_freeaddrinfo(res);
  /* An answer too long to check in full is refused, not checked in part. */
  if (overflow) {
    deny(c, "dns-too-many-addresses", 403, SHK__SOCKS5_NOT_ALLOWED);
    return;
  }
  if (c->n_addrs == 0) {
    deny(c, "dns-failure", 403, SHK__SOCKS5_HOST_UNREACH);
    return;
  }
  addresses_known(c);
}

/* The connection is allowed: its addresses, then the dial. Only here does
 * a name go to the upstream resolver, so a name leaves the proxy only as
 * the destination of a connection the policy admitted. */
/* A plain-HTTP request gets the checks of an inspected one before any
 * upstream is dialed: limited mode's methods, and the rewrite hook on its
 * headers. The head the parser rebuilt (origin-form, the checked Host,
 * Connection: close) is read again as an origin-form head, so the hook
 * sees the same list an inspected request gives it, and the head is
 * rebuilt from what the hook returns. False when it was refused. */
static bool http_checks(struct conn *c)
{
  shk__eg_server *s = c->srv;
  if (!(c->flags & SHK_EGRESS_LIMITED) && !s->rewrite)
    return true;
  shk__http_origin_req *req = malloc(sizeof *req);
  shk__http_refusal ref;
  if (!req) {
    deny(c, "proxy-out-of-memory", 503, 0);
    return false;
  }
  if (shk__http_parse_origin(c->req.upstream, c->req.upstream_len, &c->host, c->port, 80, req,
                             &ref) != 1) {
    free(req);
    deny(c, ref.reason ? ref.reason : "http-bad-request-line", ref.status ? ref.status : 400, 0);
    return false;
  }
  /* Why: limited mode is a read-only grant; see mitm.c. */
  if ((c->flags & SHK_EGRESS_LIMITED) && strcmp(req->method, "GET") &&
      strcmp(req->method, "HEAD") && strcmp(req->method, "OPTIONS")) {
    free(c->message);
    c->message = strdup("This destination is granted in limited mode: only GET, HEAD and OPTIONS "
                        "requests pass. Ask for a grant without limited mode to send others.");
    free(req);
    deny(c, "inspect-limited-method", 403, 0);
    return false;
  }
  shk_egress_header *rw = NULL;
  size_t n_rw = 0;
  if (s->rewrite) {
    const char *reason = NULL;
    shk_egress_http_request hr = { .session = s->name, .conn_id = c->id, .tag = c->tag,
                                   .host = c->host.text, .port = c->port, .tls = false,
                                   .method = req->method, .headers = req->headers,
                                   .n_headers = req->n_headers, .target = req->target,
                                   .target_len = req->target_len };
    if (s->rewrite(s->rewrite_data, &hr, &rw, &n_rw, &reason) < 0) {
      free(rw);
      free(req);
      deny(c, reason ? reason : "rewrite-refused", 403, 0);
      return false;
    }
  }
  char *head = NULL;
  size_t head_len = 0;
  int r = 0;
  if (rw)
    r = shk__http_build_origin(req, &c->host, c->port, 80, rw, n_rw, &head, &head_len);
  /* Why wiped: the hook's values may hold a brokered secret. */
  for (size_t i = 0; rw && i < n_rw; i++)
    OPENSSL_cleanse((void *)rw[i].value, rw[i].value_len);
  free(rw);
  free(req);
  if (r < 0) {
    if (r == -E2BIG)
      deny(c, "http-too-many-headers", 431, 0);
    else
      deny(c, "proxy-out-of-memory", 503, 0);
    return false;
  }
  if (head) {
    /* The head the hook replaced holds only what the client sent, but it
     * is wiped all the same, so that no head of a request that went
     * through the hook is left in freed memory. */
    explicit_bzero(c->req.upstream, c->req.upstream_len);
    free(c->req.upstream);
    c->req.upstream = head;
    c->req.upstream_len = head_len;
  }
  return true;
}

static void proceed(struct conn *c)
{
  if (c->proto == SHK_EGRESS_HTTP && !http_checks(c))
    return;
  if (c->host.kind != SHK_HOST_NAME) {
    c->addrs[0] = c->host.ip;
    c->n_addrs = 1;
    addresses_known(c);
    return;
  }
  const shk__pin *pin = shk__eg_pin_find(c->pol->cfg, c->host.text);
  if (pin) {
    c->n_addrs = 0;
    for (size_t i = 0; i < pin->n_ips && c->n_addrs < MAX_ADDRS; i++)
      c->addrs[c->n_addrs++] = pin->ips[i];
    addresses_known(c);
    return;
  }
  struct evutil_addrinfo hints = { 0 };
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  set_state(c, ST_RESOLVE);
  arm(c, c->pol->cfg->dns_timeout_ms);
  /* The callback may run before evdns_getaddrinfo returns (an answer from
   * the cache or an immediate failure); dnsreq is then NULL. */
  c->dnsreq = (struct evdns_getaddrinfo_request *)1;
  struct evdns_getaddrinfo_request *req =
    evdns_getaddrinfo(c->pol->dns, c->host.text, NULL, &hints, resolved_cb, c);
  if (c->dnsreq)
    c->dnsreq = req;
}

/* A DNS query for a name the policy admits (or would hold): the name's
 * synthetic address, and nothing asked upstream. */
static void dns_synthetic(struct conn *c)
{
  uint32_t index;
  if (shk__dns_pool_get(c->srv->pool, c->host.text, &index) < 0) {
    deny(c, "proxy-out-of-memory", 0, 0);
    return;
  }
  shk_ip ip;
  shk__dns_pool_address(index, c->dq.qtype == 1 ? 4 : 6, &ip);
  shk_ip_format(&ip, c->via);
  if (audit(c, "allow", "dns-synthetic")) {
    deny(c, "proxy-audit-refused", 0, 0);
    return;
  }
  dns_reply(c, &ip, 1);
}

static void held_cb(evutil_socket_t fd, short what, void *arg);

/* The hook asked for a human: the connection waits, nothing is sent to
 * the client, until shk__eg_server_resume or the hold deadline. Its id is
 * in the held set already (see decide), and a resume may even have claimed
 * it: that resume is then queued and goes on with it in a moment. */
static void hold(struct conn *c)
{
  shk__eg_server *s = c->srv;
  const char *why = NULL;
  /* Edge-triggered: what the client sends meanwhile (a body, early TLS
   * bytes) is kept while it fits, and beyond that left in the socket; its
   * leaving is noticed either way, without a readable socket that nobody
   * reads waking the loop again and again. A hold that could not notice
   * its client leaving is not kept. */
  struct event *ev = NULL;
  if (s->n_held + 1 > s->lim.held) {
    c->limit = s->lim.held;
    why = "session-held-limit";
  } else if (!(ev = event_new(s->base, c->fd, EV_READ | EV_CLOSED | EV_ET | EV_PERSIST, held_cb,
                              c)) ||
             event_add(ev, NULL) < 0) {
    why = "proxy-out-of-memory";
  }
  if (why) {
    if (ev)
      event_free(ev);
    /* The hook side may have raised a request for it already. */
    bool was_held = shk__eg_server_claim_held(s, c->id) == 0;
    uint64_t id = c->id;
    deny(c, why, why[0] == 's' ? 429 : 503, SHK__SOCKS5_NOT_ALLOWED);
    if (was_held && s->on_abandon)
      s->on_abandon(s->hook_data, s->name, id);
    return;
  }
  event_free(c->ev);
  c->ev = ev;
  set_state(c, ST_HELD);
  audit(c, "hold", "held");
  arm(c, s->lim.hold_ms);
}

/* A held connection ends without a resume. The manager hears of it only if
 * no resume took it first. */
static void abandon(struct conn *c, const char *reason, bool client_gone)
{
  shk__eg_server *s = c->srv;
  uint64_t id = c->id;
  bool was_held = shk__eg_server_claim_held(s, id) == 0;
  if (!was_held && !client_gone)
    return; /* a resume took it and is on its way */
  if (client_gone) {
    audit(c, "deny", reason);
    conn_free(c);
  } else {
    deny(c, reason, 403, SHK__SOCKS5_NOT_ALLOWED);
  }
  if (was_held && s->on_abandon)
    s->on_abandon(s->hook_data, s->name, id);
}

static void held_cb(evutil_socket_t fd, short what, void *arg)
{
  struct conn *c = arg;
  while (c->len < sizeof c->buf) {
    ssize_t n = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
    if (n > 0) {
      c->len += (size_t)n;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
      break;
    abandon(c, "held-abandoned", true);
    return;
  }
  struct pollfd p = { c->fd, POLLRDHUP, 0 };
  if (poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
    abandon(c, "held-abandoned", true);
}

static void decide(struct conn *c)
{
  shk__decision d;
  shk__eg_decide(c->pol->cfg, &c->host, c->kind == SHK__LISTEN_DNS ? 0 : c->port, &d);
  shk_egress_verdict v = d.verdict;
  c->rule = d.rule;
  c->rule_is_config = d.rule != NULL;
  if (c->srv->hook && v != SHK_EGRESS_DENY) {
    /* A connection the hook may hold is in the held set before the hook
     * runs: the hook side may resume it from inside the hook, or from
     * another thread before the hook has returned. */
    bool may_hold = c->kind != SHK__LISTEN_DNS;
    if (may_hold && held_add(c->srv, c->id) < 0) {
      deny(c, "proxy-out-of-memory", 503, SHK__SOCKS5_FAILURE);
      return;
    }
    const char *hook_rule = NULL, *message = NULL;
    shk_egress_request r = { .session = c->srv->name, .proto = c->proto, .host = c->host.text,
                             .port = c->port, .conn_id = c->id, .message = &message,
                             .via = c->via[0] ? c->via : NULL, .configured = v,
                             .flags = may_hold ? &c->flags : NULL };
    shk_egress_verdict hv = c->srv->hook(c->srv->hook_data, &r, &c->tag, &hook_rule);
    if (hv == SHK_EGRESS_DENY || hv == SHK_EGRESS_HOLD ||
        (hv == SHK_EGRESS_ALLOW && v == SHK_EGRESS_NONE)) {
      v = hv;
      c->rule = hook_rule;
      c->rule_is_config = false;
    } else if (hv != SHK_EGRESS_NONE && hv != SHK_EGRESS_ALLOW) {
      v = SHK_EGRESS_DENY; /* an unknown answer is a refusal */
      c->rule = NULL;
      c->rule_is_config = false;
    }
    /* A message that cannot be copied leaves the proxy's own text. */
    if (message && hv == SHK_EGRESS_DENY)
      c->message = strndup(message, MESSAGE_MAX);
    if (may_hold && v != SHK_EGRESS_HOLD)
      (void)shk__eg_server_claim_held(c->srv, c->id);
  }
  if (c->kind == SHK__LISTEN_DNS) {
    if (v == SHK_EGRESS_ALLOW || v == SHK_EGRESS_HOLD)
      dns_synthetic(c);
    else
      deny(c, v == SHK_EGRESS_DENY ? "policy-deny" : "policy-no-match", 0, 0);
    return;
  }
  if (v == SHK_EGRESS_HOLD) {
    hold(c);
    return;
  }
  if (v != SHK_EGRESS_ALLOW) {
    deny(c, v == SHK_EGRESS_DENY ? "policy-deny" : "policy-no-match", 403,
         SHK__SOCKS5_NOT_ALLOWED);
    return;
  }
  proceed(c);
}

void shk__eg_server_resume(shk__eg_server *s, uint64_t id, shk_egress_verdict v, uint64_t tag,
                           unsigned flags, char *rule, char *reason)
{
  struct conn *c = s->conns;
  while (c && !(c->id == id && c->state == ST_HELD))
    c = c->next;
  if (!c) {
    /* The client left after the resume claimed it. */
    free(rule);
    free(reason);
    return;
  }
  event_del(c->ev);
  evtimer_del(c->timer);
  free(c->rule_owned);
  c->rule = c->rule_owned = rule;
  c->rule_is_config = false;
  if (v == SHK_EGRESS_ALLOW) {
    free(reason);
    c->tag = tag;
    c->flags = flags;
    set_state(c, ST_RESOLVE);
    proceed(c);
  } else {
    free(c->message);
    c->message = reason;
    deny(c, "held-denied", 403, SHK__SOCKS5_NOT_ALLOWED);
  }
}

/* A literal address from the session's synthetic pool is the name it was
 * handed out for: the connection is decided, held and dialed as that
 * name. False when it was refused. */
static bool map_synthetic(struct conn *c)
{
  uint32_t index;
  if (!c->srv->pool || c->host.kind == SHK_HOST_NAME || !shk__dns_pool_index(&c->host.ip, &index))
    return true;
  shk_ip_format(&c->host.ip, c->via);
  const char *name = shk__dns_pool_name(c->srv->pool, index);
  if (!name || shk_host_parse(name, strlen(name), &c->host, NULL, NULL) < 0) {
    deny(c, "dns-synthetic-unknown", 403, SHK__SOCKS5_HOST_UNREACH);
    return false;
  }
  return true;
}

/* ------------------------------------------------------------------------
 * Reading requests
 */

static void handle_http(struct conn *c)
{
  shk__http_refusal ref;
  int r = shk__http_parse_head(c->buf, c->len, &c->req, &ref);
  if (r == 0)
    return;
  if (r < 0) {
    c->proto = SHK_EGRESS_HTTP;
    deny(c, ref.reason, ref.status, 0);
    return;
  }
  c->host = c->req.host;
  c->port = c->req.port;
  c->consumed = c->req.head_len;
  c->proto = c->req.is_connect ? SHK_EGRESS_CONNECT : SHK_EGRESS_HTTP;
  if (!c->req.is_connect && c->pol->cfg->connect_only) {
    deny(c, "mode-connect-only", 405, 0);
    return;
  }
  event_del(c->ev);
  evtimer_del(c->timer);
  if (map_synthetic(c))
    decide(c);
}

static void handle_socks5(struct conn *c)
{
  const uint8_t *b = (const uint8_t *)c->buf;
  const char *reason;
  if (c->state == ST_HEAD) {
    int n = shk__socks5_parse_greeting(b, c->len, &reason);
    if (n == 0)
      return;
    if (n < 0) {
      audit(c, "deny", reason);
      close_with(c, "\x05\xff", 2);
      return;
    }
    ssize_t w = send(c->fd, "\x05\x00", 2, MSG_NOSIGNAL);
    if (w != 2) {
      conn_free(c);
      return;
    }
    memmove(c->buf, c->buf + n, c->len - (size_t)n);
    c->len -= (size_t)n;
    set_state(c, ST_SOCKS_REQ);
  }
  shk__socks5_req req;
  uint8_t code;
  int n = shk__socks5_parse_request(b, c->len, &req, &code, &reason);
  if (n == 0)
    return;
  if (n < 0) {
    deny(c, reason, 0, code);
    return;
  }
  c->host = req.host;
  c->port = req.port;
  c->consumed = (size_t)n;
  event_del(c->ev);
  evtimer_del(c->timer);
  if (map_synthetic(c))
    decide(c);
}

static void handle_dns(struct conn *c)
{
  if (c->len < 2)
    return;
  size_t mlen = (size_t)((uint8_t)c->buf[0] << 8 | (uint8_t)c->buf[1]);
  if (c->len < 2 + mlen)
    return;
  const char *bad = shk__dns_parse_query((const uint8_t *)c->buf + 2, mlen, &c->dq);
  if (bad) {
    audit(c, "deny", bad);
    close_with(c, NULL, 0);
    return;
  }
  if (c->refusing) {
    /* Refused at accept, before its query was in: the answer is REFUSED. */
    if (c->dq.name_ok)
      c->host = c->dq.host;
    deny(c, c->refusing, 0, 0);
    return;
  }
  event_del(c->ev);
  evtimer_del(c->timer);
  set_state(c, ST_DNS);
  c->host = c->dq.host;
  if (!c->dq.name_ok || (c->dq.qtype != 1 && c->dq.qtype != 28) || NEVER(!c->srv->pool)) {
    if (!c->dq.name_ok)
      memset(&c->host, 0, sizeof c->host);
    deny(c, c->dq.name_ok ? "dns-type-refused" : "host-bad-char", 0, 0);
    return;
  }
  decide(c);
}

static void read_cb(evutil_socket_t fd, short what, void *arg)
{
  struct conn *c = arg;
  if (c->len == sizeof c->buf) {
    /* Only the HTTP parser can want this much, and it refuses first. */
    conn_free(c);
    return;
  }
  ssize_t n = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (n <= 0) {
    conn_free(c);
    return;
  }
  c->last_read_ms = now_ms();
  c->len += (size_t)n;
  switch (c->kind) {
  case SHK__LISTEN_HTTP:
    handle_http(c);
    break;
  case SHK__LISTEN_SOCKS5:
    handle_socks5(c);
    break;
  case SHK__LISTEN_DNS:
    handle_dns(c);
    break;
  }
}

/* The request phase ran out: the whole of it (request_ms), or a silence
 * (idle_ms) that slowloris would stretch out. */
static void request_timeout(struct conn *c)
{
  int64_t now = now_ms();
  int64_t idle_end = c->last_read_ms + c->srv->lim.idle_ms;
  const char *why = NULL;
  if (now >= c->deadline_ms)
    why = "request-timeout";
  else if (now >= idle_end)
    why = "request-idle-timeout";
  if (!why) {
    arm(c, (idle_end < c->deadline_ms ? idle_end : c->deadline_ms) - now);
    return;
  }
  if (c->kind == SHK__LISTEN_HTTP) {
    deny(c, why, 408, 0);
  } else {
    /* SOCKS5 has no reply before its request, DNS none without a query. */
    audit(c, "deny", why);
    conn_free(c);
  }
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
  struct conn *c = arg;
  switch (c->state) {
  case ST_HEAD:
  case ST_SOCKS_REQ:
  case ST_DNS:
    request_timeout(c);
    break;
  case ST_RESOLVE:
    if (c->dnsreq) {
      /* Cancelling runs resolved_cb at once with EVUTIL_EAI_CANCEL. */
      evdns_getaddrinfo_cancel(c->dnsreq);
      c->dnsreq = NULL;
    }
    deny(c, "dns-timeout", 403, SHK__SOCKS5_HOST_UNREACH);
    break;
  case ST_HELD:
    abandon(c, "hold-timeout", false);
    break;
  case ST_DIAL: /* the dial's own event has its timeout */
  case ST_RELAY:
  case ST_LINGER: /* the linger is over */
    conn_free(c);
    break;
  }
}

/* Over a limit at accept: the client is answered at once in its own
 * protocol, from what it has sent so far. The socket then lingers like any
 * refused one, so that a client that writes before it reads (a SOCKS5
 * request after the method choice, a DNS query) still finds its answer
 * rather than a broken pipe; at most REFUSING_MAX of them per session, and
 * none when descriptors are what is short: beyond that it is closed at
 * once. */
static void refuse_at_accept(struct conn *c, const char *reason, int status)
{
  shk__eg_server *s = c->srv;
  ssize_t n = recv(c->fd, c->buf, sizeof c->buf, MSG_DONTWAIT);
  c->len = n > 0 ? (size_t)n : 0;
  char out[MESSAGE_MAX + 512];
  size_t len = 0;
  bool dns_waits = false;
  if (c->kind == SHK__LISTEN_HTTP) {
    shk__http_refusal ref;
    if (shk__http_parse_head(c->buf, c->len, &c->req, &ref) == 1) {
      c->host = c->req.host;
      c->port = c->req.port;
      c->proto = c->req.is_connect ? SHK_EGRESS_CONNECT : SHK_EGRESS_HTTP;
    }
    len = http_refusal(c, status, reason, out, sizeof out);
  } else if (c->kind == SHK__LISTEN_SOCKS5) {
    /* The method choice and the refusal together: a client reads the
     * first, sends its request, and finds the second waiting. */
    const char *why;
    int g = shk__socks5_parse_greeting((const uint8_t *)c->buf, c->len, &why);
    static const uint8_t r[] = { 5, 0, 5, SHK__SOCKS5_NOT_ALLOWED, 0, 1, 0, 0, 0, 0, 0, 0 };
    memcpy(out, g < 0 ? "\x05\xff" : (const char *)r, g < 0 ? 2 : sizeof r);
    len = g < 0 ? 2 : sizeof r;
    shk__socks5_req req;
    uint8_t code;
    if (g > 0 && shk__socks5_parse_request((const uint8_t *)c->buf + g, c->len - (size_t)g, &req,
                                           &code, &why) > 0) {
      c->host = req.host;
      c->port = req.port;
    }
  } else {
    size_t mlen = c->len >= 2 ? (size_t)((uint8_t)c->buf[0] << 8 | (uint8_t)c->buf[1]) : 0;
    if (c->len >= 2 && c->len >= 2 + mlen &&
        !shk__dns_parse_query((const uint8_t *)c->buf + 2, mlen, &c->dq)) {
      if (c->dq.name_ok)
        c->host = c->dq.host;
      len = shk__dns_build_reply(&c->dq, NULL, 0, (uint8_t *)out + 2, sizeof out - 2);
      out[0] = (char)(len >> 8);
      out[1] = (char)len;
      len += 2;
    } else {
      dns_waits = true; /* answered REFUSED when its query is in (handle_dns) */
    }
  }
  bool linger = strcmp(reason, "proxy-descriptor-reserve") && s->n_refusing < REFUSING_MAX;
  if (linger) {
    c->ev = event_new(s->base, c->fd, EV_READ | EV_PERSIST, dns_waits ? read_cb : linger_cb, c);
    c->timer = evtimer_new(s->base, timer_cb, c);
    if (!c->ev || !c->timer) {
      if (c->ev)
        event_free(c->ev);
      if (c->timer)
        event_free(c->timer);
      c->ev = c->timer = NULL;
      linger = false;
    }
  }
  if (!dns_waits || !linger)
    audit(c, "deny", reason);
  if (len) {
    ssize_t w = send(c->fd, out, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w;
  }
  if (!linger) {
    close(c->fd);
    atomic_fetch_sub(&fds_in_use, c->fds);
    shk__http_req_free(&c->req);
    free(c);
    return;
  }
  /* A lingering refusal: counted as a socket of the session, in no state
   * of the request phase. */
  c->refusing = reason;
  s->n_refusing++;
  c->pol = s->pol;
  c->pol->refs++;
  s->n_sockets++;
  c->sockets = 1;
  c->next = s->conns;
  if (s->conns)
    s->conns->prev = c;
  s->conns = c;
  if (!dns_waits)
    shutdown(c->fd, SHUT_WR);
  event_add(c->ev, NULL);
  arm(c, LINGER_MS);
}

static void accept_cb(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa,
                      int sl, void *arg)
{
  struct listener *l = arg;
  shk__eg_server *s = l->srv;
  struct conn *c = calloc(1, sizeof *c);
  if (!c) {
    /* Out of memory: the connection is dropped unanswered, which the
     * client sees as a refusal; the listener goes on. */
    close(fd);
    return;
  }
  c->srv = s;
  c->kind = l->kind;
  c->fd = fd;
  c->up_fd = -1;
  c->id = ++s->next_id;
  c->proto = l->kind == SHK__LISTEN_SOCKS5 ? SHK_EGRESS_SOCKS5
             : l->kind == SHK__LISTEN_DNS  ? SHK_EGRESS_DNS
                                           : SHK_EGRESS_HTTP;
  c->state = ST_LINGER; /* counted in no state until it is set up */
  /* The limits, before anything is spent on the connection: the process's
   * descriptor reserve, then the session's sockets and its connections
   * in setup. */
  if (!fds_take(c, 1, fd)) {
    refuse_at_accept(c, "proxy-descriptor-reserve", 503);
    return;
  }
  if (s->n_sockets + 1 > s->lim.connections) {
    c->limit = s->lim.connections;
    refuse_at_accept(c, "session-connection-limit", 429);
    return;
  }
  if (s->n_setup + 1 > s->lim.setup) {
    c->limit = s->lim.setup;
    refuse_at_accept(c, "session-setup-limit", 429);
    return;
  }
  c->ev = event_new(s->base, fd, EV_READ | EV_PERSIST, read_cb, c);
  c->timer = evtimer_new(s->base, timer_cb, c);
  if (!c->ev || !c->timer) {
    if (c->ev)
      event_free(c->ev);
    if (c->timer)
      event_free(c->timer);
    c->ev = c->timer = NULL;
    refuse_at_accept(c, "proxy-out-of-memory", 503);
    return;
  }
  c->pol = s->pol;
  c->pol->refs++;
  set_state(c, ST_HEAD);
  s->n_sockets++;
  c->sockets = 1;
  if (sa->sa_family != AF_UNIX) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  c->next = s->conns;
  if (s->conns)
    s->conns->prev = c;
  s->conns = c;
  c->last_read_ms = now_ms();
  c->deadline_ms = c->last_read_ms + s->lim.request_ms;
  arm(c, s->lim.idle_ms < s->lim.request_ms ? s->lim.idle_ms : s->lim.request_ms);
  event_add(c->ev, NULL);
}

static void conn_free(struct conn *c)
{
  shk__eg_server *s = c->srv;
  if (c->prev)
    c->prev->next = c->next;
  else
    s->conns = c->next;
  if (c->next)
    c->next->prev = c->prev;
  if (c->state == ST_HELD)
    (void)shk__eg_server_claim_held(s, c->id);
  set_state(c, ST_LINGER);
  if (c->refusing)
    s->n_refusing--;
  s->n_sockets -= (unsigned)c->sockets;
  atomic_fetch_sub(&fds_in_use, c->fds);
  if (c->tunnel_counted)
    tag_add(s, c->tag, -1);
  if (c->dnsreq)
    evdns_getaddrinfo_cancel(c->dnsreq);
  if (c->ev)
    event_free(c->ev);
  if (c->timer)
    event_free(c->timer);
  shk__relay_free(c->relay);
  shk__mitm_free(c->mitm);
  if (c->fd >= 0)
    close(c->fd);
  if (c->up_fd >= 0)
    close(c->up_fd);
  shk__http_req_free(&c->req);
  policy_unref(c->pol);
  free(c->rule_owned);
  free(c->message);
  free(c);
}

/* ------------------------------------------------------------------------
 * Listeners and the server
 */

static void retry_cb(evutil_socket_t fd, short what, void *arg)
{
  struct listener *l = arg;
  evconnlistener_enable(l->lev);
}

/* accept() failed with something other than EAGAIN, EINTR or
 * ECONNABORTED: out of descriptors, most likely, because something else
 * in the process took the reserve. The listening socket stays readable, so
 * retrying at once would spin a core: the listener pauses for a moment. */
static void accept_error_cb(struct evconnlistener *lev, void *arg)
{
  struct listener *l = arg;
  struct timeval tv = { 0, 100 * 1000 };
  evconnlistener_disable(lev);
  evtimer_add(l->retry, &tv);
}

static int add_listener(shk__eg_server *s, shk__eg_listener_kind kind, int fd, const char *path)
{
  if (kind == SHK__LISTEN_DNS && !s->pool) {
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed)
      seed = (uint64_t)now_ms() ^ (uint64_t)(uintptr_t)s;
    s->pool = shk__dns_pool_new(s->lim.dns_names, seed);
    if (!s->pool) {
      close(fd);
      return -ENOMEM;
    }
  }
  struct listener *l = calloc(1, sizeof *l);
  if (!l) {
    close(fd);
    return -ENOMEM;
  }
  l->srv = s;
  l->kind = kind;
  l->lev = evconnlistener_new(s->base, accept_cb, l, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC,
                              128, fd);
  l->retry = evtimer_new(s->base, retry_cb, l);
  l->unix_path = path ? strdup(path) : NULL;
  if (!l->lev || !l->retry || (path && !l->unix_path)) {
    if (l->lev)
      evconnlistener_free(l->lev);
    else
      close(fd);
    if (l->retry)
      event_free(l->retry);
    free(l->unix_path);
    free(l);
    return -ENOMEM;
  }
  evconnlistener_set_error_cb(l->lev, accept_error_cb);
  l->next = s->listeners;
  s->listeners = l;
  return 0;
}

int shk__eg_server_listen_tcp(shk__eg_server *s, shk__eg_listener_kind kind,
                              const struct sockaddr *sa, socklen_t sl, char *bound,
                              size_t boundlen)
{
  int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_storage ss;
  socklen_t bl = sizeof ss;
  if (bind(fd, sa, sl) < 0 || listen(fd, 128) < 0 ||
      getsockname(fd, (struct sockaddr *)&ss, &bl) < 0) {
    int e = -errno;
    close(fd);
    return e;
  }
  shk_ip ip = { .family = ss.ss_family == AF_INET ? 4 : 6 };
  char host[SHK_IP_TEXT_MAX];
  uint16_t port;
  if (ss.ss_family == AF_INET) {
    memcpy(ip.b, &((struct sockaddr_in *)&ss)->sin_addr, 4);
    port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
  } else {
    memcpy(ip.b, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
    port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
  }
  shk_ip_format(&ip, host);
  snprintf(bound, boundlen, ip.family == 4 ? "%s:%u" : "[%s]:%u", host, port);
  return add_listener(s, kind, fd, NULL);
}

/* The socket is created under a umask that leaves it 0600 from the first
 * moment, and it lives in a 0700 directory the caller made: only the
 * session's own user can connect, and the path is the session's identity. */
int shk__eg_server_listen_unix(shk__eg_server *s, shk__eg_listener_kind kind, const char *path)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  if (strlen(path) >= sizeof sun.sun_path)
    return -ENAMETOOLONG;
  strcpy(sun.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  mode_t old = umask(0177);
  int r = bind(fd, (struct sockaddr *)&sun, sizeof sun);
  umask(old);
  if (r < 0 || listen(fd, 128) < 0) {
    int e = -errno;
    close(fd);
    return e;
  }
  return add_listener(s, kind, fd, path);
}

int shk__eg_server_new(struct event_base *base, shk__eg_config *cfg,
                       const shk__eg_server_opts *o, shk__eg_server **out, shk_error *err)
{
  *out = NULL;
  struct evdns_base *dns = make_resolver(base, cfg, err);
  if (!dns) {
    shk__eg_config_free(cfg);
    return -EINVAL;
  }
  shk__eg_server *s = calloc(1, sizeof *s);
  struct policy *p = calloc(1, sizeof *p);
  char *name = strdup(o->name ? o->name : "proxy");
  if (!s || !p || !name) {
    free(s);
    free(p);
    free(name);
    evdns_base_free(dns, 1);
    shk__eg_config_free(cfg);
    return shk__error_set(err, -ENOMEM, "out of memory");
  }
  raise_nofile();
  pthread_mutex_init(&s->shared_mu, NULL);
  s->base = base;
  s->pol = p;
  s->pol->cfg = cfg;
  s->pol->dns = dns;
  s->pol->refs = 1;
  s->name = name;
  s->on_verdict = o->on_verdict;
  s->verdict_data = o->verdict_data;
  s->hook = o->hook;
  s->hook_data = o->hook_data;
  s->on_abandon = o->on_abandon;
  s->ca = o->ca;
  s->rewrite = o->rewrite;
  s->rewrite_data = o->hook_data;
  if (o->upstream_ca && !(s->upstream_ca = strdup(o->upstream_ca))) {
    shk__eg_server_free(s);
    *out = NULL;
    return shk__error_set(err, -ENOMEM, "out of memory");
  }
  if (o->limits)
    s->opt_limits = *o->limits;
  shk__eg_limits_resolve(&cfg->limits, &s->opt_limits, &s->lim);
  *out = s;
  return 0;
}

int shk__eg_server_set_config(shk__eg_server *s, shk__eg_config *cfg, shk_error *err)
{
  struct evdns_base *dns = make_resolver(s->base, cfg, err);
  if (!dns) {
    shk__eg_config_free(cfg);
    return -EINVAL;
  }
  struct policy *p = calloc(1, sizeof *p);
  if (!p) {
    evdns_base_free(dns, 1);
    shk__eg_config_free(cfg);
    return shk__error_set(err, -ENOMEM, "out of memory");
  }
  p->cfg = cfg;
  p->dns = dns;
  p->refs = 1;
  policy_unref(s->pol);
  s->pol = p;
  /* New limits apply to what comes next; the pool keeps its size. */
  unsigned names = s->lim.dns_names;
  shk__eg_limits_resolve(&cfg->limits, &s->opt_limits, &s->lim);
  s->lim.dns_names = names;
  return 0;
}

int shk__eg_server_close_tunnels(shk__eg_server *s, uint64_t tag)
{
  int n = 0;
  struct conn *c = s->conns, *next;
  for (; c; c = next) {
    next = c->next;
    if (c->state != ST_HELD && (tag == 0 || c->tag == tag)) {
      if (c->state == ST_RELAY)
        n++;
      conn_free(c);
    }
  }
  return n;
}

void shk__eg_server_free(shk__eg_server *s)
{
  if (!s)
    return;
  while (s->listeners) {
    struct listener *l = s->listeners;
    s->listeners = l->next;
    evconnlistener_free(l->lev);
    event_free(l->retry);
    if (l->unix_path)
      unlink(l->unix_path);
    free(l->unix_path);
    free(l);
  }
  /* Held connections are answered before they go: the client learns why. */
  for (struct conn *c = s->conns, *next; c; c = next) {
    next = c->next;
    if (c->state == ST_HELD) {
      (void)shk__eg_server_claim_held(s, c->id);
      event_del(c->ev);
      deny(c, "session-closed", 403, SHK__SOCKS5_NOT_ALLOWED);
    }
  }
  while (s->conns)
    conn_free(s->conns);
  policy_unref(s->pol);
  shk__dns_pool_free(s->pool);
  pthread_mutex_destroy(&s->shared_mu);
  SSL_CTX_free(s->tls_server);
  SSL_CTX_free(s->tls_client);
  shk__mitm_sessions_free(s->tls_sessions);
  free(s->upstream_ca);
  free(s->held_ids);
  free(s->tags);
  free(s->name);
  free(s);
}
