/* SPDX-License-Identifier: Apache-2.0 */
/* The inspecting relay: for a connection the hook marked SHK_EGRESS_INSPECT
 * the proxy is the client's TLS server (a leaf for the granted name, from
 * the manager's CA) and the upstream's TLS client (verified against the
 * trust store), and reads every HTTP/1.1 request in between: the Host must
 * name the granted destination, limited mode lets only GET, HEAD and
 * OPTIONS through, the rewrite hook sees each head, and each exchange is
 * recorded. Nothing is carried that was not read: a TLS failure on either
 * side, a request or response the parser refuses, or an upgrade ends the
 * connection. It is never a tunnel.
 *
 * Both sides are libevent OpenSSL bufferevents on the connection's own
 * sockets. Bodies move between their buffers without copying (evbuffer
 * chains); flow control is by watermarks: a side stops reading while the
 * other side's output holds more than OUT_HIGH. */
#include "egress/egress-internal.h"

#include "common/common.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define OUT_HIGH (1u << 20)
#define OUT_LOW (256u << 10)
#define IO_MAX (256 << 10)
#define MESSAGE_MAX 512

/* The request direction: reading a head, sending its body, or waiting for
 * the response before the next head is read (no pipelining upstream). */
enum req_phase { R_HANDSHAKE, R_HEAD, R_BODY, R_WAIT };
/* The response direction. */
enum resp_phase { S_IDLE, S_HEAD, S_BODY };
enum body_mode { B_NONE, B_LENGTH, B_CHUNKED, B_CLOSE };

struct shk__mitm {
  shk__mitm_opts o;
  char host_text[SHK_HOST_MAX + 1];
  struct bufferevent *cl, *up;
  struct event *done_ev;
  bool cl_ready, up_ready, finished, closing;
  bool sni_refused;
  const char *up_failed; /* the upstream's handshake failed: the reason */
  bool refuse_armed;     /* the 502 waits for the client's request */
  long up_verify;        /* and its verification result */
  shk__http_origin_req req; /* the head being read */
  enum req_phase rp;
  enum resp_phase sp;
  /* The exchange under way. */
  char method[17];
  uint64_t req_left;
  bool req_chunked;
  shk__chunked req_ck;
  bool client_close;
  enum body_mode bm;
  uint64_t resp_left;
  shk__chunked resp_ck;
  int status;
  bool upstream_close;
  uint64_t bytes;
  struct timespec started;
};

static pthread_once_t ex_once = PTHREAD_ONCE_INIT;
static int ex_index = -1;

static void ex_init(void)
{
  ex_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

/* ------------------------------------------------------------------------
 * Upstream sessions: the TLS session of an earlier verified connection to
 * the same host and port is offered again, so that a new connection costs
 * a resumption rather than a full handshake and a chain verification. A
 * session is used once (TLS 1.3 tickets are single-use) and replaced by
 * the ones the upstream sends. Why resuming is safe: the session was made
 * by a handshake that verified this very host against this session's
 * trust store, and resumption proves the upstream still holds its key.
 */

#define SESSIONS_MAX 64

struct shk__mitm_sessions {
  struct {
    char key[SHK_HOST_MAX + 8];
    SSL_SESSION *sess;
  } e[SESSIONS_MAX];
  unsigned next;
};

shk__mitm_sessions *shk__mitm_sessions_new(void)
{
  return calloc(1, sizeof(shk__mitm_sessions));
}

void shk__mitm_sessions_free(shk__mitm_sessions *c)
{
  if (!c)
    return;
  for (unsigned i = 0; i < SESSIONS_MAX; i++)
    SSL_SESSION_free(c->e[i].sess);
  free(c);
}

static void session_key(const shk__mitm_opts *o, char *key, size_t n)
{
  snprintf(key, n, "%s:%u", o->host.text, (unsigned)o->port);
}

/* Takes the cached session for O's destination, or NULL. */
static SSL_SESSION *session_take(shk__mitm_sessions *c, const shk__mitm_opts *o)
{
  char key[SHK_HOST_MAX + 8];
  session_key(o, key, sizeof key);
  for (unsigned i = 0; c && i < SESSIONS_MAX; i++)
    if (c->e[i].sess && !strcmp(c->e[i].key, key)) {
      SSL_SESSION *sess = c->e[i].sess;
      c->e[i].sess = NULL;
      return sess;
    }
  return NULL;
}

static int new_session_cb(SSL *ssl, SSL_SESSION *sess);

static uint64_t elapsed_us(const struct timespec *t0)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  int64_t us = (int64_t)(t.tv_sec - t0->tv_sec) * 1000000 + (t.tv_nsec - t0->tv_nsec) / 1000;
  return us > 0 ? (uint64_t)us : 0;
}

/* One record per exchange (or per refusal): method, status, bytes and
 * duration, never the target, a header or a body. */
static void record(shk__mitm *m, const char *decision, const char *reason, int status)
{
  shk__mitm_record r = { .decision = decision, .reason = reason,
                         .method = m->method[0] ? m->method : NULL, .status = status,
                         .bytes = m->bytes, .duration_us = elapsed_us(&m->started) };
  m->o.record(m->o.arg, &r);
}

static void done_cb(evutil_socket_t fd, short what, void *arg)
{
  shk__mitm *m = arg;
  m->o.done(m->o.arg);
}

/* The end is reported from the loop, never from inside a callback of the
 * bufferevents that its caller then frees. */
static void finish(shk__mitm *m)
{
  if (m->finished)
    return;
  m->finished = true;
  bufferevent_disable(m->cl, EV_READ | EV_WRITE);
  if (m->up)
    bufferevent_disable(m->up, EV_READ | EV_WRITE);
  struct timeval now = { 0, 0 };
  evtimer_add(m->done_ev, &now);
}

/* Ends the connection once what the client is owed has been written. */
static void close_after_flush(shk__mitm *m)
{
  /* A client that never reads what it is owed is not waited on for long. */
  struct timeval linger = { 2, 0 };
  if (!m->closing && !m->finished)
    evtimer_add(m->done_ev, &linger);
  m->closing = true;
  if (m->up)
    bufferevent_disable(m->up, EV_READ);
  bufferevent_disable(m->cl, EV_READ);
  if (evbuffer_get_length(bufferevent_get_output(m->cl)) == 0)
    finish(m);
}

/* A refusal the client reads inside its TLS session, then the end. */
static void refuse(shk__mitm *m, int status, const char *reason, const char *text)
{
  char body[MESSAGE_MAX];
  int bl = snprintf(body, sizeof body, "%s\n", text);
  if (bl < 0 || (size_t)bl >= sizeof body)
    bl = 0;
  evbuffer_add_printf(bufferevent_get_output(m->cl),
                      "HTTP/1.1 %d %s\r\nX-Shinken-Decision: %s\r\nContent-Type: text/plain; "
                      "charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
                      status, shk__http_status_text(status), reason, bl, body);
  close_after_flush(m);
}

static void client_read(struct bufferevent *bev, void *arg);
static void refuse_upstream(shk__mitm *m);
/* Moves up to N bytes of body from IN to OUT, counting chunked framing
 * when CK is set: returns the bytes moved, or -1 with *why for framing the
 * chunked reader refuses. */
static long move_body(struct evbuffer *in, struct evbuffer *out, uint64_t n, shk__chunked *ck,
                      const char **why)
{
  size_t avail = evbuffer_get_length(in);
  size_t take = (uint64_t)avail < n ? avail : (size_t)n;
  if (ck) {
    /* The framing is read where it lies, chain by chain. */
    struct evbuffer_iovec v[16];
    int nv = evbuffer_peek(in, (ev_ssize_t)avail, NULL, v, 16);
    if (nv > 16)
      nv = 16;
    take = 0;
    for (int i = 0; i < nv && !shk__chunked_done(ck); i++) {
      long k = shk__chunked_feed(ck, v[i].iov_base, v[i].iov_len, why);
      if (k < 0)
        return -1;
      take += (size_t)k;
    }
  }
  if (take && evbuffer_remove_buffer(in, out, take) != (int)take) {
    *why = "proxy-out-of-memory";
    return -1;
  }
  return (long)take;
}

static bool out_full(struct bufferevent *bev)
{
  return evbuffer_get_length(bufferevent_get_output(bev)) > OUT_HIGH;
}

/* The request body toward the upstream. */
static void pump_request(shk__mitm *m)
{
  struct evbuffer *in = bufferevent_get_input(m->cl);
  const char *why = NULL;
  long k = move_body(in, bufferevent_get_output(m->up), m->req_chunked ? UINT64_MAX : m->req_left,
                     m->req_chunked ? &m->req_ck : NULL, &why);
  if (k < 0) {
    record(m, "deny", why, 400);
    close_after_flush(m);
    return;
  }
  if (!m->req_chunked)
    m->req_left -= (uint64_t)k;
  if (m->req_chunked ? shk__chunked_done(&m->req_ck) : m->req_left == 0)
    m->rp = R_WAIT;
  if (out_full(m->up))
    bufferevent_disable(m->cl, EV_READ);
}

static void exchange_done(shk__mitm *m)
{
  record(m, "allow", "inspected", m->status);
  m->sp = S_IDLE;
  m->method[0] = '\0';
  /* A response that came before the request's body was all sent (an
   * early refusal by the upstream) leaves the two sides out of step: the
   * connection ends rather than guess where the next request begins. */
  if (m->client_close || m->upstream_close || m->rp == R_BODY) {
    close_after_flush(m);
    return;
  }
  if (m->rp == R_WAIT) {
    m->rp = R_HEAD;
    /* A request the client sent meanwhile is read now. */
    if (evbuffer_get_length(bufferevent_get_input(m->cl)))
      client_read(m->cl, m);
  }
}

static void pump_response(shk__mitm *m)
{
  struct evbuffer *in = bufferevent_get_input(m->up), *out = bufferevent_get_output(m->cl);
  while (!m->finished && !m->closing) {
    if (m->sp == S_HEAD) {
      size_t avail = evbuffer_get_length(in);
      if (!avail)
        return;
      size_t want = avail < SHK__HTTP_HEAD_MAX ? avail : SHK__HTTP_HEAD_MAX;
      const char *buf = (const char *)evbuffer_pullup(in, (ev_ssize_t)want);
      shk__http_resp resp;
      const char *why = NULL;
      int r = shk__http_parse_response(buf, want, m->method, &resp, &why);
      if (r == 0)
        return;
      if (r < 0) {
        record(m, "error", why ? why : "upstream-bad-head", 502);
        refuse(m, 502, why ? why : "upstream-bad-head",
               "The destination's response could not be read, so it was not passed on.");
        return;
      }
      m->status = resp.status;
      if (evbuffer_remove_buffer(in, out, resp.head_len) != (int)resp.head_len) {
        finish(m);
        return;
      }
      if (resp.status < 200)
        continue; /* 100 Continue and the like: the final response follows */
      m->upstream_close = resp.close;
      memset(&m->resp_ck, 0, sizeof m->resp_ck);
      if (!shk__http_resp_has_body(m->method, resp.status))
        m->bm = B_NONE;
      else if (resp.chunked)
        m->bm = B_CHUNKED;
      else if (resp.has_length)
        m->bm = B_LENGTH, m->resp_left = resp.content_length;
      else
        m->bm = B_CLOSE, m->upstream_close = true;
      m->sp = S_BODY;
    }
    if (m->sp == S_BODY) {
      const char *why = NULL;
      long k = 0;
      if (m->bm != B_NONE) {
        k = move_body(in, out, m->bm == B_LENGTH ? m->resp_left : UINT64_MAX,
                      m->bm == B_CHUNKED ? &m->resp_ck : NULL, &why);
        if (k < 0) {
          /* The head is out already: the client sees the connection end
           * inside the body, which it reads as a failure. */
          record(m, "error", why, m->status);
          finish(m);
          return;
        }
      }
      m->bytes += (uint64_t)k;
      if (m->bm == B_LENGTH)
        m->resp_left -= (uint64_t)k;
      bool done = m->bm == B_NONE || (m->bm == B_LENGTH && m->resp_left == 0) ||
                  (m->bm == B_CHUNKED && shk__chunked_done(&m->resp_ck));
      if (out_full(m->cl))
        bufferevent_disable(m->up, EV_READ);
      if (!done)
        return;
      exchange_done(m);
      if (m->sp != S_HEAD)
        return;
    }
    if (m->sp == S_IDLE) {
      if (evbuffer_get_length(in)) {
        /* Bytes no request asked for. */
        record(m, "error", "upstream-unsolicited", 0);
        finish(m);
      }
      return;
    }
  }
}

/* One request head: parsed, checked, rewritten, sent. */
/* Wipes and frees a request head the upstream's output buffer held. */
static void wipe_head(const void *data, size_t len, void *arg)
{
  (void)arg;
  OPENSSL_cleanse((void *)data, len);
  free((void *)data);
}

static void next_request(shk__mitm *m)
{
  struct evbuffer *in = bufferevent_get_input(m->cl);
  size_t avail = evbuffer_get_length(in);
  if (!avail)
    return;
  size_t want = avail < SHK__HTTP_HEAD_MAX ? avail : SHK__HTTP_HEAD_MAX;
  const char *buf = (const char *)evbuffer_pullup(in, (ev_ssize_t)want);
  shk__http_origin_req *req = &m->req;
  shk__http_refusal ref;
  int r = shk__http_parse_origin(buf, want, &m->o.host, m->o.port, 443, req, &ref);
  if (r == 0)
    return;
  clock_gettime(CLOCK_MONOTONIC, &m->started);
  m->bytes = 0;
  if (r < 0) {
    m->method[0] = '\0';
    record(m, "deny", ref.reason, ref.status);
    refuse(m, ref.status, ref.reason,
           !strcmp(ref.reason, "inspect-host-mismatch")
             ? "The Host header names another destination than the one this connection was "
               "granted for; the request was not sent."
             : "The request could not be read exactly, so it was not sent.");
    return;
  }
  snprintf(m->method, sizeof m->method, "%s", req->method);
  /* Why: limited mode is a read-only grant; a method that can change
   * state on the destination is refused before anything reaches it. */
  if ((m->o.flags & SHK_EGRESS_LIMITED) && strcmp(req->method, "GET") &&
      strcmp(req->method, "HEAD") && strcmp(req->method, "OPTIONS")) {
    record(m, "deny", "inspect-limited-method", 403);
    refuse(m, 403, "inspect-limited-method",
           "This destination is granted in limited mode: only GET, HEAD and OPTIONS requests "
           "pass. Ask for a grant without limited mode to send others.");
    return;
  }
  shk_egress_header *rw = NULL;
  size_t n_rw = 0;
  if (m->o.rewrite) {
    const char *reason = NULL;
    shk_egress_http_request hr = { .session = m->o.session, .conn_id = m->o.conn_id,
                                   .tag = m->o.tag, .host = m->host_text, .port = m->o.port,
                                   .tls = true, .method = req->method, .headers = req->headers,
                                   .n_headers = req->n_headers, .target = req->target,
                                   .target_len = req->target_len };
    int rr = m->o.rewrite(m->o.rewrite_data, &hr, &rw, &n_rw, &reason);
    if (rr < 0) {
      free(rw);
      const char *why = reason ? reason : "rewrite-refused";
      record(m, "deny", why, 403);
      refuse(m, 403, why, "The request was refused by the credential broker.");
      return;
    }
  }
  char *head;
  size_t head_len;
  int br = shk__http_build_origin(req, &m->o.host, m->o.port, 443, rw ? rw : req->headers,
                                  rw ? n_rw : req->n_headers, &head, &head_len);
  /* Why wiped: a rewritten head may carry a brokered secret, which must
   * not stay behind in freed memory (a core dump, a later allocation). */
  for (size_t i = 0; rw && i < n_rw; i++)
    OPENSSL_cleanse((void *)rw[i].value, rw[i].value_len);
  free(rw);
  if (br == -E2BIG) {
    record(m, "deny", "http-too-many-headers", 431);
    refuse(m, 431, "http-too-many-headers", "The request has more header fields than the proxy forwards.");
    return;
  }
  if (br < 0) {
    record(m, "deny", "proxy-out-of-memory", 503);
    refuse(m, 503, "proxy-out-of-memory", "The proxy is out of memory.");
    return;
  }
  m->client_close = req->close;
  m->req_left = req->content_length;
  m->req_chunked = req->chunked;
  memset(&m->req_ck, 0, sizeof m->req_ck);
  evbuffer_drain(in, req->head_len);
  /* The head is handed over by reference, not copied, and wiped when the
   * output buffer lets it go. */
  int ar = evbuffer_add_reference(bufferevent_get_output(m->up), head, head_len, wipe_head, NULL);
  if (ar < 0)
    wipe_head(head, head_len, NULL);
  if (ar < 0) {
    finish(m);
    return;
  }
  m->status = 0;
  m->sp = S_HEAD;
  m->rp = (m->req_chunked || m->req_left) ? R_BODY : R_WAIT;
  if (m->rp == R_BODY)
    pump_request(m);
}

static void client_read(struct bufferevent *bev, void *arg)
{
  shk__mitm *m = arg;
  if (m->finished || m->closing)
    return;
  if (m->up_failed) {
    if (m->refuse_armed)
      refuse_upstream(m);
    return;
  }
  if (m->rp == R_HEAD && m->sp == S_IDLE)
    next_request(m);
  else if (m->rp == R_BODY)
    pump_request(m);
  /* R_WAIT: what comes next stays in the buffer until the response is
   * over; the read watermark stops the socket being read meanwhile. */
}

static void upstream_read(struct bufferevent *bev, void *arg)
{
  shk__mitm *m = arg;
  if (m->finished || m->closing)
    return;
  if (m->sp == S_IDLE && evbuffer_get_length(bufferevent_get_input(bev))) {
    record(m, "error", "upstream-unsolicited", 0);
    finish(m);
    return;
  }
  pump_response(m);
}

/* Output drained below the low watermark: the other side may read again. */
static void client_write(struct bufferevent *bev, void *arg)
{
  shk__mitm *m = arg;
  if (m->closing) {
    if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
      finish(m);
    return;
  }
  if (m->up_ready && m->up)
    bufferevent_enable(m->up, EV_READ);
}

static void upstream_write(struct bufferevent *bev, void *arg)
{
  shk__mitm *m = arg;
  if (!m->closing && m->cl_ready)
    bufferevent_enable(m->cl, EV_READ);
}

static void both_ready(shk__mitm *m)
{
  if (!m->cl_ready || !m->up_ready || m->rp != R_HANDSHAKE)
    return;
  m->rp = R_HEAD;
  bufferevent_enable(m->cl, EV_READ);
  bufferevent_enable(m->up, EV_READ);
  client_read(m->cl, m);
}

static void refuse_upstream_now(shk__mitm *m)
{
  char text[MESSAGE_MAX - 64];
  snprintf(text, sizeof text,
           "The destination's TLS certificate could not be verified (%s), so the proxy did not "
           "send anything to it.",
           m->up_verify != X509_V_OK ? X509_verify_cert_error_string(m->up_verify)
                                     : "the handshake failed");
  refuse(m, 502, m->up_failed, text);
}

/* Why the refusal waits for the client's request: answered the moment its
 * handshake is up, the client's request then arrives at a socket the
 * proxy is closing, and the reset that unread data causes can destroy
 * the 502 before the client reads it, leaving it an empty reply and no
 * reason. What the client sent is dropped unread: nothing goes upstream.
 * A client that sends nothing is not waited on for long. */
static void refuse_upstream(shk__mitm *m)
{
  struct evbuffer *in = bufferevent_get_input(m->cl);
  if (evbuffer_get_length(in) == 0 && !m->refuse_armed) {
    struct timeval wait = { 2, 0 };
    m->refuse_armed = true;
    bufferevent_setwatermark(m->cl, EV_READ, 0, 0);
    bufferevent_enable(m->cl, EV_READ);
    evtimer_add(m->done_ev, &wait);
    return;
  }
  evtimer_del(m->done_ev);
  evbuffer_drain(in, evbuffer_get_length(in));
  refuse_upstream_now(m);
}

static void client_event(struct bufferevent *bev, short what, void *arg)
{
  shk__mitm *m = arg;
  if (what & BEV_EVENT_CONNECTED) {
    m->cl_ready = true;
    if (m->up_failed)
      refuse_upstream(m);
    else
      both_ready(m);
    return;
  }
  if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) || m->finished)
    return;
  if (!m->cl_ready) {
    /* A client that does not trust the CA (a pinned certificate, or a
     * trust store of its own) ends its handshake here: the connection
     * fails, it is never tunnelled instead. */
    const char *why = m->sni_refused ? "inspect-sni-mismatch" : "inspect-client-handshake";
    record(m, "deny", why, 0);
  } else if (m->sp != S_IDLE || m->rp == R_BODY) {
    record(m, "error", "client-closed", m->status);
  }
  finish(m);
}

static void upstream_event(struct bufferevent *bev, short what, void *arg)
{
  shk__mitm *m = arg;
  if (what & BEV_EVENT_CONNECTED) {
    m->up_ready = true;
    both_ready(m);
    return;
  }
  if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) || m->finished)
    return;
  if (!m->up_ready) {
    /* Why: the proxy vouches for the destination to the client with its
     * own certificate, so it must first have verified the real one. */
    SSL *ssl = bufferevent_openssl_get_ssl(bev);
    m->up_verify = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
    m->up_failed = m->up_verify != X509_V_OK ? "inspect-upstream-unverified"
                                             : "inspect-upstream-handshake";
    record(m, "error", m->up_failed, 502);
    /* The client learns why inside its own TLS session, once it is up. */
    bufferevent_disable(bev, EV_READ | EV_WRITE);
    if (m->cl_ready)
      refuse_upstream(m);
    return;
  }
  if (m->sp == S_BODY && m->bm == B_CLOSE) {
    /* The body that runs to the connection's end has ended. */
    pump_response(m);
    m->upstream_close = true;
    if (m->sp == S_BODY)
      exchange_done(m);
    return;
  }
  if (m->sp != S_IDLE)
    record(m, "error", "upstream-closed", m->status);
  /* Idle: the upstream ended its keep-alive; so does the client's. */
  close_after_flush(m);
}

shk__mitm *shk__mitm_new(struct event_base *base, const shk__mitm_opts *o)
{
  shk__mitm *m = calloc(1, sizeof *m);
  SSL *cs = NULL, *us = NULL;
  if (!m)
    goto fail;
  m->o = *o;
  if (!(m->done_ev = evtimer_new(base, done_cb, m)))
    goto fail;
  snprintf(m->host_text, sizeof m->host_text, "%s", o->host.text);
  clock_gettime(CLOCK_MONOTONIC, &m->started);
  cs = SSL_new(o->server_ctx);
  us = SSL_new(o->client_ctx);
  if (!cs || !us || SSL_use_certificate(cs, o->leaf) != 1 ||
      SSL_use_PrivateKey(cs, o->leaf_key) != 1)
    goto fail;
  SSL_set_ex_data(cs, ex_index, m);
  /* The upstream: SNI the granted name, and its certificate must name it
   * (an address's must hold it). */
  if (o->host.kind == SHK_HOST_NAME) {
    if (SSL_set_tlsext_host_name(us, o->host.text) != 1 || SSL_set1_host(us, o->host.text) != 1)
      goto fail;
  } else if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(us), o->host.text) != 1) {
    goto fail;
  }
  SSL_set_verify(us, SSL_VERIFY_PEER, NULL);
  SSL_set_ex_data(us, ex_index, m);
  SSL_SESSION *resume = session_take(o->sessions, o);
  if (resume) {
    SSL_set_session(us, resume);
    SSL_SESSION_free(resume);
  }
  static const unsigned char alpn[] = "\x08http/1.1";
  if (SSL_set_alpn_protos(us, alpn, sizeof alpn - 1) != 0)
    goto fail;
  m->cl = bufferevent_openssl_socket_new(base, o->client_fd, cs, BUFFEREVENT_SSL_ACCEPTING,
                                         BEV_OPT_CLOSE_ON_FREE);
  cs = NULL; /* the bufferevent owns it (and the socket) even when it failed */
  m->up = bufferevent_openssl_socket_new(base, o->up_fd, us, BUFFEREVENT_SSL_CONNECTING,
                                         BEV_OPT_CLOSE_ON_FREE);
  us = NULL;
  if (!m->cl || !m->up)
    goto fail_bev;
  bufferevent_setcb(m->cl, client_read, client_write, client_event, m);
  bufferevent_setcb(m->up, upstream_read, upstream_write, upstream_event, m);
  /* Bulk data moves in large reads and writes: libevent's default of 16
   * KiB per call costs a callback (and a small TLS record) per 16 KiB. */
  bufferevent_set_max_single_read(m->cl, IO_MAX);
  bufferevent_set_max_single_read(m->up, IO_MAX);
  bufferevent_set_max_single_write(m->cl, IO_MAX);
  bufferevent_set_max_single_write(m->up, IO_MAX);
  bufferevent_setwatermark(m->cl, EV_READ, 0, 256u << 10);
  bufferevent_setwatermark(m->up, EV_READ, 0, 256u << 10);
  bufferevent_setwatermark(m->cl, EV_WRITE, OUT_LOW, 0);
  bufferevent_setwatermark(m->up, EV_WRITE, OUT_LOW, 0);
  bufferevent_enable(m->cl, EV_READ | EV_WRITE);
  bufferevent_enable(m->up, EV_READ | EV_WRITE);
  return m;
fail:
  SSL_free(cs);
  SSL_free(us);
  if (o->client_fd >= 0)
    close(o->client_fd);
  if (o->up_fd >= 0)
    close(o->up_fd);
  if (m && m->done_ev)
    event_free(m->done_ev);
  free(m);
  return NULL;
fail_bev:
  event_free(m->done_ev);
  if (m->cl)
    bufferevent_free(m->cl);
  else
    close(o->client_fd);
  if (m->up)
    bufferevent_free(m->up);
  else
    close(o->up_fd);
  free(m);
  return NULL;
}

static void ssl_close(struct bufferevent *bev)
{
  SSL *ssl = bufferevent_openssl_get_ssl(bev);
  /* A close_notify, best effort: a client reading a body to the end of
   * the connection learns that it ended rather than broke. */
  if (ssl && SSL_is_init_finished(ssl))
    (void)SSL_shutdown(ssl);
  bufferevent_free(bev);
}

void shk__mitm_free(shk__mitm *m)
{
  if (!m)
    return;
  if (m->cl)
    ssl_close(m->cl);
  if (m->up)
    ssl_close(m->up);
  event_free(m->done_ev);
  free(m);
}

/* ------------------------------------------------------------------------
 * The TLS contexts of a session
 */

/* A session the upstream handed out, kept for the next connection to the
 * same destination (the one of its slot, or the oldest slot). Only a
 * verified connection's: an unverified one never gets this far. */
static int new_session_cb(SSL *ssl, SSL_SESSION *sess)
{
  shk__mitm *m = SSL_get_ex_data(ssl, ex_index);
  shk__mitm_sessions *c = m ? m->o.sessions : NULL;
  if (!c || SSL_get_verify_result(ssl) != X509_V_OK)
    return 0;
  char key[SHK_HOST_MAX + 8];
  session_key(&m->o, key, sizeof key);
  unsigned slot = c->next;
  for (unsigned i = 0; i < SESSIONS_MAX; i++)
    if (c->e[i].sess && !strcmp(c->e[i].key, key)) {
      slot = i;
      break;
    }
  if (slot == c->next)
    c->next = (c->next + 1) % SESSIONS_MAX;
  SSL_SESSION_free(c->e[slot].sess);
  snprintf(c->e[slot].key, sizeof c->e[slot].key, "%s", key);
  c->e[slot].sess = sess;
  return 1; /* the cache keeps the reference */
}

/* SNI must name the granted destination: a client asking this connection
 * for another name is refused in the handshake (unrecognized_name), before
 * it has sent anything. No SNI is accepted (clients send none for an
 * address). */
static int servername_cb(SSL *ssl, int *alert, void *arg)
{
  shk__mitm *m = SSL_get_ex_data(ssl, ex_index);
  const char *sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  if (!m || !sni)
    return SSL_TLSEXT_ERR_NOACK;
  if (strcasecmp(sni, m->host_text)) {
    m->sni_refused = true;
    *alert = SSL_AD_UNRECOGNIZED_NAME;
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  return SSL_TLSEXT_ERR_OK;
}

/* ALPN: HTTP/1.1 only, the one protocol the proxy reads. A client that
 * offers only others (h2 alone) fails the handshake rather than speak a
 * protocol nobody here reads. */
static int alpn_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                   const unsigned char *in, unsigned int inlen, void *arg)
{
  for (unsigned i = 0; i < inlen;) {
    unsigned n = in[i];
    if (i + 1 + n > inlen)
      break;
    if (n == 8 && !memcmp(in + i + 1, "http/1.1", 8)) {
      *out = in + i + 1;
      *outlen = 8;
      return SSL_TLSEXT_ERR_OK;
    }
    i += 1 + n;
  }
  return SSL_TLSEXT_ERR_ALERT_FATAL;
}

int shk__mitm_contexts(const char *upstream_ca, SSL_CTX **server, SSL_CTX **client,
                       shk_error *err)
{
  *server = *client = NULL;
  pthread_once(&ex_once, ex_init);
  SSL_CTX *s = SSL_CTX_new(TLS_server_method());
  SSL_CTX *c = SSL_CTX_new(TLS_client_method());
  if (!s || !c || ex_index < 0) {
    SSL_CTX_free(s);
    SSL_CTX_free(c);
    return shk__error_set(err, -ENOMEM, "out of memory");
  }
  SSL_CTX_set_min_proto_version(s, TLS1_2_VERSION);
  SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
  SSL_CTX_set_tlsext_servername_callback(s, servername_cb);
  SSL_CTX_set_alpn_select_cb(s, alpn_cb, NULL);
  /* No session tickets to the client: each connection is checked afresh. */
  SSL_CTX_set_options(s, SSL_OP_NO_TICKET);
  SSL_CTX_set_session_cache_mode(s, SSL_SESS_CACHE_OFF);
  int ok = upstream_ca ? SSL_CTX_load_verify_locations(c, upstream_ca, NULL)
                       : SSL_CTX_set_default_verify_paths(c);
  if (ok != 1) {
    SSL_CTX_free(s);
    SSL_CTX_free(c);
    ERR_clear_error();
    return shk__error_set(err, -EINVAL, "upstream_ca %s: not a readable PEM bundle of certificates",
                          upstream_ca ? upstream_ca : "(the system's)");
  }
  SSL_CTX_set_verify(c, SSL_VERIFY_PEER, NULL);
  SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_sess_set_new_cb(c, new_session_cb);
  *server = s;
  *client = c;
  return 0;
}
