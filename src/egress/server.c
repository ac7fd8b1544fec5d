/* The proxy server: listeners, the per-connection state machine (read the
 * request, decide, resolve, dial, relay), the DNS stub and the audit log.
 * Everything runs on one libevent loop; nothing here blocks. */
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
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_ADDRS 16
#define HANDSHAKE_SECONDS 30
#define CONNECT_SECONDS 10

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

enum conn_state { ST_HEAD, ST_SOCKS_REQ, ST_RESOLVE, ST_DIAL, ST_RELAY, ST_LINGER, ST_DNS };

struct conn {
  struct conn *prev, *next;
  shk__eg_server *srv;
  struct policy *pol;
  shk__eg_listener_kind kind;
  enum conn_state state;
  shk_egress_proto proto;
  uint64_t id, tag;
  int fd, up_fd;
  struct event *ev, *timer;
  char buf[SHK__HTTP_HEAD_MAX];
  size_t len;
  shk_host host;
  uint16_t port;
  shk__http_req req;
  size_t consumed; /* bytes of buf that the handshake used */
  const char *rule;
  shk_ip addrs[MAX_ADDRS];
  size_t n_addrs, next_addr;
  struct evdns_getaddrinfo_request *dnsreq;
  shk__dns_query dq;
  shk__relay *relay;
};

struct shk__eg_server {
  struct event_base *base;
  struct policy *pol;
  char *name;
  int audit_fd;
  shk_egress_hook_fn hook;
  void *hook_data;
  struct listener *listeners;
  struct conn *conns;
  uint64_t next_id;
};

static void conn_free(struct conn *c);

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

/* One line per decision. Only canonical hosts (which hold nothing but
 * LDH characters, digits, dots and colons) and rule texts are logged:
 * never a path, a query or a header value. */
static void audit(struct conn *c, const char *decision, const char *reason)
{
  shk__eg_server *s = c->srv;
  if (s->audit_fd < 0)
    return;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char when[96];
  snprintf(when, sizeof when, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
           tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
  json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:o, s:i, s:s, s:s, s:o?}", "time", when, "session",
                        s->name, "conn", (json_int_t)c->id, "protocol", proto_name(c->proto),
                        "host", c->host.kind ? json_string(c->host.text) : json_null(), "port",
                        (int)c->port, "decision", decision, "reason", reason, "rule",
                        /* A hook's rule that is not UTF-8 is logged as null rather
                         * than losing the whole line. */
                        c->rule ? json_string(c->rule) : NULL);
  char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  if (!line)
    return;
  size_t n = strlen(line);
  line[n] = '\n';
  /* One write per line, so lines from concurrent writers never interleave. */
  ssize_t w = write(s->audit_fd, line, n + 1);
  (void)w;
  free(line);
}

/* ------------------------------------------------------------------------
 * Refusals
 */

static void linger_cb(evutil_socket_t fd, short what, void *arg)
{
  struct conn *c = arg;
  char sink[4096];
  if (what & EV_READ) {
    ssize_t n = recv(c->fd, sink, sizeof sink, 0);
    if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR)))
      return;
  }
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
  c->state = ST_LINGER;
  if (c->dnsreq) {
    evdns_getaddrinfo_cancel(c->dnsreq);
    c->dnsreq = NULL;
  }
  if (c->up_fd >= 0) {
    close(c->up_fd);
    c->up_fd = -1;
  }
  event_free(c->ev);
  c->ev = event_new(c->srv->base, c->fd, EV_READ | EV_PERSIST, linger_cb, c);
  event_add(c->ev, NULL);
  struct timeval tv = { 2, 0 };
  evtimer_del(c->timer);
  evtimer_assign(c->timer, c->srv->base, linger_cb, c);
  evtimer_add(c->timer, &tv);
}

static void refuse_http(struct conn *c, int status, const char *reason)
{
  const char *text = status == 403 ? "Forbidden"
                     : status == 400 ? "Bad Request"
                     : status == 405 ? "Method Not Allowed"
                     : status == 431 ? "Request Header Fields Too Large"
                     : status == 501 ? "Not Implemented"
                     : status == 502 ? "Bad Gateway"
                     : status == 503 ? "Service Unavailable"
                     : status == 504 ? "Gateway Timeout"
                     : status == 505 ? "HTTP Version Not Supported" : "Error";
  char r[512];
  int n = snprintf(r, sizeof r,
                   "HTTP/1.1 %d %s\r\nX-Shinken-Decision: %s\r\nContent-Type: text/plain\r\n"
                   "Content-Length: %zu\r\nConnection: close\r\n\r\n%s\n",
                   status, text, reason, strlen(reason) + 1, reason);
  close_with(c, r, (size_t)n);
}

static void refuse_socks(struct conn *c, uint8_t code)
{
  uint8_t r[10] = { 5, code, 0, 1 };
  close_with(c, (const char *)r, sizeof r);
}

static void dns_reply(struct conn *c, const shk_ip *ips, size_t n);

/* A refusal of the request that has been parsed, in the connection's own
 * protocol, and its audit line. */
static void deny(struct conn *c, const char *reason, int http_status, uint8_t socks_code)
{
  /* A refusal is a "deny"; an upstream that could not be reached after
   * the policy allowed it is an "error". */
  audit(c, http_status >= 500 ? "error" : "deny", reason);
  if (c->kind == SHK__LISTEN_HTTP)
    refuse_http(c, http_status, reason);
  else if (c->kind == SHK__LISTEN_SOCKS5)
    refuse_socks(c, socks_code);
  else
    dns_reply(c, NULL, 0);
}

/* ------------------------------------------------------------------------
 * Dialing
 */

static void relay_done(void *arg)
{
  conn_free(arg);
}

static void timeout_cb(evutil_socket_t fd, short what, void *arg)
{
  conn_free(arg);
}

static void established(struct conn *c)
{
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
  audit(c, "allow", "allowed");
  event_del(c->ev);
  evtimer_del(c->timer);
  c->state = ST_RELAY;
  c->relay = shk__relay_new(c->srv->base, &o);
  c->fd = c->up_fd = -1; /* the relay owns them now, even when it failed */
  if (!c->relay) {
    /* Freed from the loop, not here: a caller up the stack (a resolver
     * callback run synchronously) may still hold C. */
    struct timeval now = { 0, 0 };
    event_base_once(c->srv->base, -1, EV_TIMEOUT, timeout_cb, c, &now);
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
  close(c->up_fd);
  c->up_fd = -1;
  try_dial(c);
}

/* The second check: on the very address about to be dialed, with no
 * lookup between this check and connect(), so a DNS answer that changes
 * (rebinding) cannot slip a private address in. */
static void try_dial(struct conn *c)
{
  const shk__eg_config *cfg = c->pol->cfg;
  while (c->next_addr < c->n_addrs) {
    const shk_ip *ip = &c->addrs[c->next_addr++];
    const char *blocked = shk__eg_ip_blocked(cfg, ip);
    if (blocked) {
      deny(c, blocked, 403, SHK__SOCKS5_NOT_ALLOWED);
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
    if (fd < 0)
      continue;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS) {
      close(fd);
      continue;
    }
    c->up_fd = fd;
    c->state = ST_DIAL;
    event_free(c->ev);
    c->ev = event_new(c->srv->base, fd, EV_WRITE, dial_cb, c);
    struct timeval tv = { CONNECT_SECONDS, 0 };
    event_add(c->ev, &tv);
    return;
  }
  deny(c, "connect-failed", 502, SHK__SOCKS5_REFUSED);
}

/* ------------------------------------------------------------------------
 * Deciding and resolving
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
 * answer, because the client (or a later lookup) could pick any of them. */
static void addresses_known(struct conn *c)
{
  for (size_t i = 0; i < c->n_addrs; i++) {
    const char *blocked = shk__eg_ip_blocked(c->pol->cfg, &c->addrs[i]);
    if (blocked) {
      deny(c, blocked, 403, SHK__SOCKS5_NOT_ALLOWED);
      return;
    }
  }
  if (c->kind == SHK__LISTEN_DNS) {
    audit(c, "allow", "allowed");
    dns_reply(c, c->addrs, c->n_addrs);
    return;
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
  if (c->kind == SHK__LISTEN_DNS && c->dq.qtype == 28 && result != 0) {
    /* No IPv6 address for an allowed name: an empty answer, so the client
     * goes on with IPv4. libevent reports a name without AAAA records as a
     * failure (EAI_FAIL), indistinguishable from other failures, so every
     * failed AAAA lookup is answered this way. An empty answer carries no
     * address, so nothing is let through by it; A queries keep their
     * refusal, which is what tells a client the name failed. */
    if (res)
      evutil_freeaddrinfo(res);
    audit(c, "allow", "allowed");
    dns_reply(c, c->addrs, 0);
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
  if (overflow || c->n_addrs == 0) {
    deny(c, overflow ? "dns-too-many-addresses" : "dns-failure", 403, SHK__SOCKS5_HOST_UNREACH);
    return;
  }
  addresses_known(c);
}

static void resolve_timeout(evutil_socket_t fd, short what, void *arg)
{
  struct conn *c = arg;
  if (c->dnsreq) {
    /* Cancelling runs resolved_cb at once with EVUTIL_EAI_CANCEL. */
    evdns_getaddrinfo_cancel(c->dnsreq);
    c->dnsreq = NULL;
  }
  deny(c, "dns-timeout", 403, SHK__SOCKS5_HOST_UNREACH);
}

static void decide(struct conn *c)
{
  shk__decision d;
  shk__eg_decide(c->pol->cfg, &c->host, c->kind == SHK__LISTEN_DNS ? 0 : c->port, &d);
  shk_egress_verdict v = d.verdict;
  c->rule = d.rule;
  if (c->srv->hook && v != SHK_EGRESS_DENY) {
    shk_egress_request r = { c->srv->name, c->proto, c->host.text, c->port, c->id };
    const char *hook_rule = NULL;
    shk_egress_verdict hv = c->srv->hook(c->srv->hook_data, &r, &c->tag, &hook_rule);
    if (hv == SHK_EGRESS_DENY || (hv == SHK_EGRESS_ALLOW && v == SHK_EGRESS_NONE)) {
      v = hv;
      c->rule = hook_rule;
    } else if (hv != SHK_EGRESS_NONE && hv != SHK_EGRESS_ALLOW) {
      v = SHK_EGRESS_DENY; /* an unknown answer is a refusal */
      c->rule = NULL;
    }
  }
  if (v != SHK_EGRESS_ALLOW) {
    deny(c, v == SHK_EGRESS_DENY ? "policy-deny" : "policy-no-match", 403,
         SHK__SOCKS5_NOT_ALLOWED);
    return;
  }
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
      if (c->kind != SHK__LISTEN_DNS || pin->ips[i].family == (c->dq.qtype == 1 ? 4 : 6))
        c->addrs[c->n_addrs++] = pin->ips[i];
    addresses_known(c);
    return;
  }
  struct evutil_addrinfo hints = { 0 };
  hints.ai_family = AF_UNSPEC;
  if (c->kind == SHK__LISTEN_DNS)
    hints.ai_family = c->dq.qtype == 1 ? AF_INET : AF_INET6;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  c->state = ST_RESOLVE;
  unsigned ms = c->pol->cfg->dns_timeout_ms;
  struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
  evtimer_del(c->timer);
  evtimer_assign(c->timer, c->srv->base, resolve_timeout, c);
  evtimer_add(c->timer, &tv);
  /* The callback may run before evdns_getaddrinfo returns (an answer from
   * the cache or an immediate failure); dnsreq is then NULL. */
  c->dnsreq = (struct evdns_getaddrinfo_request *)1;
  struct evdns_getaddrinfo_request *req =
    evdns_getaddrinfo(c->pol->dns, c->host.text, NULL, &hints, resolved_cb, c);
  if (c->dnsreq)
    c->dnsreq = req;
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
    c->state = ST_SOCKS_REQ;
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
  event_del(c->ev);
  c->state = ST_DNS;
  c->host = c->dq.host;
  if (!c->dq.name_ok || (c->dq.qtype != 1 && c->dq.qtype != 28)) {
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
  if (what & EV_TIMEOUT) {
    conn_free(c);
    return;
  }
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
  c->pol = s->pol;
  c->pol->refs++;
  c->state = ST_HEAD;
  if (sa->sa_family != AF_UNIX) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  c->next = s->conns;
  if (s->conns)
    s->conns->prev = c;
  s->conns = c;
  c->ev = event_new(s->base, fd, EV_READ | EV_PERSIST, read_cb, c);
  c->timer = evtimer_new(s->base, timeout_cb, c);
  struct timeval tv = { HANDSHAKE_SECONDS, 0 };
  evtimer_add(c->timer, &tv);
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
  if (c->dnsreq)
    evdns_getaddrinfo_cancel(c->dnsreq);
  if (c->ev)
    event_free(c->ev);
  if (c->timer)
    event_free(c->timer);
  shk__relay_free(c->relay);
  if (c->fd >= 0)
    close(c->fd);
  if (c->up_fd >= 0)
    close(c->up_fd);
  shk__http_req_free(&c->req);
  policy_unref(c->pol);
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

/* accept() failed (out of descriptors, most likely): pause this listener
 * for a moment instead of spinning on a socket that stays readable. */
static void accept_error_cb(struct evconnlistener *lev, void *arg)
{
  struct listener *l = arg;
  struct timeval tv = { 0, 100 * 1000 };
  evconnlistener_disable(lev);
  evtimer_add(l->retry, &tv);
}

static int add_listener(shk__eg_server *s, shk__eg_listener_kind kind, int fd, const char *path)
{
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
  s->base = base;
  s->pol = p;
  s->pol->cfg = cfg;
  s->pol->dns = dns;
  s->pol->refs = 1;
  s->name = name;
  s->audit_fd = o->audit_fd;
  s->hook = o->hook;
  s->hook_data = o->hook_data;
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
  return 0;
}

int shk__eg_server_close_tunnels(shk__eg_server *s, uint64_t tag)
{
  int n = 0;
  struct conn *c = s->conns, *next;
  for (; c; c = next) {
    next = c->next;
    if (tag == 0 || c->tag == tag) {
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
  shk__eg_server_close_tunnels(s, 0);
  policy_unref(s->pol);
  free(s->name);
  free(s);
}
