/* SPDX-License-Identifier: Apache-2.0 */
/* The Permission Panel's server: HTTP on a loopback address, on a thread
 * and event loop of its own (libevent's evhttp). It serves the page's
 * assets, embedded in the binary at build time (src/panel/), and a JSON API
 * that is the control socket's operations through the same dispatcher
 * (shk__manager_call_as), with Server-Sent Events for live updates.
 *
 * Why this is safe, layer by layer:
 * - It listens on a loopback address only (a non-loopback one is refused
 *   before anything is bound), so no other host can reach it. A workload in
 *   `shinken run --net proxy` has a network namespace of its own, whose
 *   loopback is not this one, and the egress proxy refuses loopback
 *   destinations.
 * - Every request's Host header must name the panel's own address and
 *   port exactly; a page on another origin that rebinds its name to
 *   127.0.0.1 (DNS rebinding) sends its own name and is refused.
 * - Nothing but the login answers without a session cookie. The login
 *   takes a one-time token of 256 random bits, which the manager writes to
 *   a 0600 file in its own 0700 runtime directory (so only the manager's
 *   user can read it); a used token is replaced at once, so a replayed one
 *   is refused. The token travels in the URL's fragment, which a browser
 *   never sends to a server or in a Referer. Failed logins are rate
 *   limited.
 * - The cookie is HttpOnly (no script reads it) and SameSite=Strict (no
 *   other site's page makes the browser send it). Every state-changing
 *   request must also carry the session's CSRF token in a header and come
 *   from the panel's own Origin, and carry a JSON body (which a cross-site
 *   form cannot send without a preflight, which this server never answers
 *   with CORS headers).
 * - Every answer carries a strict Content-Security-Policy (no inline
 *   script, no other origin), X-Frame-Options DENY, nosniff and no-store.
 * - Only the operations a human surface needs pass (sessions, grants,
 *   cards, grant, revoke, resolve, takeover, resume); each is decided by
 *   the manager exactly as on the control socket, and recorded as the
 *   panel's.
 * - At most a fixed number of connections are open at once
 *   (panel-conns.c), so that another local user's flood of idle ones can
 *   take neither the page nor the descriptors the control socket needs. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "manager/manager-internal.h"
#include "manager/panel-assets.h"
#include "manager/panel-conns.h"
#include "manager/panel-internal.h"
#include "manager/line-queue.h"
#include "manager/panel-stream.h"

#define TOKEN_BYTES 32
#define TOKEN_HEX (TOKEN_BYTES * 2 + 1)
#define MAX_LOGINS 16
#define LOGIN_TTL_MS (12LL * 3600 * 1000)
#define MAX_BODY (64 * 1024)
/* At most this many failed logins in a window; then every login is refused
 * until the window ends. A token has 256 bits, so the limit is not what
 * keeps it secret: it keeps a guessing loop from costing the manager. */
#define FAIL_LIMIT 5
#define FAIL_WINDOW_MS (60LL * 1000)
#define STATE_POLL_MS 250
#define SSE_PING_MS 10000
#define MAX_SSE 32

static const char csp[] = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                          "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

typedef struct login {
  char cookie[TOKEN_HEX];
  char csrf[TOKEN_HEX];
  char user[96];          /* who answers through it, for the record */
  int64_t expires_ms;
} login;

typedef struct sse {
  struct evhttp_request *req;
  struct evhttp_connection *conn; /* as it was when the stream began */
  struct sse *next;
} sse;

struct shk__panel {
  shk_manager *m;
  shk__peer peer;
  struct event_base *base;
  struct evhttp *http;
  shk__panel_conns *conns;  /* its connections, counted and capped */
  pthread_t thread;
  int wake_fd;
  struct event *wake, *tick;
  char host[80];        /* what the Host header must say: ADDR:PORT */
  char origin[96];      /* what the Origin header must say */
  char *login_file;
  /* The panel thread's alone, once it runs. */
  char token[TOKEN_HEX]; /* the one login token now valid */
  login logins[MAX_LOGINS];
  int64_t fail_since_ms;
  unsigned fails;
  unsigned n_logged_in;  /* logins so far, to tell them apart in the record */
  char user_name[64];    /* the manager's user's name */
  sse *clients;
  unsigned n_clients;
  bool subscribed;
  uint64_t sub_id;
  char *last_state;
  int64_t last_ping_ms;
  char *audit_db;            /* the manager's store, or NULL */
  shk_audit_reader *reader;  /* opened on first use */
  shk__audit_stream *stream; /* the Timeline's new events, read on a thread of its own */
  json_t *host_view;         /* the Host view's answer, and when it was made */
  int64_t host_at_ms;
  /* The card stream's lines, from whichever thread delivers them, until
   * the panel thread sends them. */
  shk__line_queue *lines;
};

static int64_t now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* 256 bits from the kernel's generator, as hex. */
static int random_hex(char out[TOKEN_HEX])
{
  unsigned char b[TOKEN_BYTES];
  size_t got = 0;
  while (got < sizeof b) {
    ssize_t n = getrandom(b + got, sizeof b - got, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -EIO;
    got += (size_t)n;
  }
  for (size_t i = 0; i < sizeof b; i++)
    snprintf(out + 2 * i, 3, "%02x", b[i]);
  OPENSSL_cleanse(b, sizeof b);
  return 0;
}

/* Equal strings, in time that does not depend on where they differ. */
static bool secret_eq(const char *a, const char *b)
{
  size_t la = strlen(a), lb = strlen(b);
  return la == lb && la > 0 && CRYPTO_memcmp(a, b, la) == 0;
}

int shk_manager_panel_listen_check(const char *listen, shk_error *err)
{
  char addr[64];
  const char *colon = strrchr(listen, ':');
  if (!colon || colon == listen || !colon[1])
    return shk__error_set(err, -EINVAL, "panel listen '%s': expected ADDRESS:PORT, such as 127.0.0.1:0", listen);
  size_t alen = (size_t)(colon - listen);
  if (alen >= sizeof addr)
    return shk__error_set(err, -EINVAL, "panel listen '%s': the address is too long", listen);
  memcpy(addr, listen, alen);
  addr[alen] = '\0';
  char *end;
  errno = 0;
  unsigned long port = strtoul(colon + 1, &end, 10);
  if (errno || *end || port > 65535 || colon[1] == '-' || colon[1] == '+')
    return shk__error_set(err, -EINVAL, "panel listen '%s': the port must be a number from 0 to 65535", listen);
  struct in_addr a4;
  if (inet_pton(AF_INET, addr, &a4) == 1) {
    /* The whole of 127.0.0.0/8 is this host's loopback. */
    if ((ntohl(a4.s_addr) >> 24) != 127)
      return shk__error_set(err, -EINVAL, "panel listen '%s': the panel listens on a loopback address only "
                                          "(127.0.0.1 or [::1]), never on one other hosts can reach", listen);
    return 0;
  }
  if (!strcmp(addr, "[::1]"))
    return 0;
  return shk__error_set(err, -EINVAL, "panel listen '%s': the panel listens on a loopback address only "
                                      "(127.0.0.1 or [::1]), never on one other hosts can reach", listen);
}

int shk_manager_panel_login_path(const char *socket, char *buf, size_t len)
{
  /* SOCKET with its ".sock" replaced by ".panel-login": one login file per
   * manager, so that a daemon and the runs beside it (run-PID.sock) never
   * share one. */
  const char *slash = strrchr(socket, '/');
  if (!slash || slash == socket || !slash[1])
    return -EINVAL;
  size_t stem = strlen(socket);
  if (stem > 5 && !strcmp(socket + stem - 5, ".sock"))
    stem -= 5;
  int n = snprintf(buf, len, "%.*s.panel-login", (int)stem, socket);
  return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Writes the login URL with the current token to the login file, made
 * 0600 afresh and renamed into place so that no reader sees half of it.
 * Why this is safe: the file is created with O_EXCL and O_NOFOLLOW, so a
 * link planted at the temporary name is not followed, in a directory that
 * the start checked is this user's and writable by no one else. */
static int write_login_file(shk__panel *p, shk_error *err)
{
  char tmp[PATH_MAX];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", p->login_file) >= (int)sizeof tmp)
    return shk__error_set(err, -ENAMETOOLONG, "%s: path too long", p->login_file);
  unlink(tmp);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return shk__error_set(err, -errno, "%s: %s", tmp, strerror(errno));
  char line[256];
  int n = snprintf(line, sizeof line, "%s/login#%s\n", p->origin, p->token);
  bool ok = write(fd, line, (size_t)n) == n;
  ok = fsync(fd) == 0 && ok;
  ok = close(fd) == 0 && ok;
  OPENSSL_cleanse(line, sizeof line);
  if (!ok || rename(tmp, p->login_file) < 0) {
    int e = errno ? errno : EIO;
    unlink(tmp);
    return shk__error_set(err, -e, "%s: %s", p->login_file, strerror(e));
  }
  return 0;
}

/* ---- answers ---- */

static void security_headers(struct evhttp_request *req)
{
  struct evkeyvalq *h = evhttp_request_get_output_headers(req);
  evhttp_add_header(h, "Content-Security-Policy", csp);
  evhttp_add_header(h, "X-Frame-Options", "DENY");
  evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
  evhttp_add_header(h, "Referrer-Policy", "no-referrer");
  evhttp_add_header(h, "Cache-Control", "no-store");
  evhttp_add_header(h, "Cross-Origin-Opener-Policy", "same-origin");
  evhttp_add_header(h, "Cross-Origin-Resource-Policy", "same-origin");
}

/* Sends `ans` (stolen; NULL is out of memory) as JSON. */
static void reply_json(struct evhttp_request *req, int code, const char *reason, json_t *ans)
{
  char *text = ans ? json_dumps(ans, JSON_COMPACT) : NULL;
  json_decref(ans);
  struct evbuffer *b = evbuffer_new();
  if (!b) {
    free(text);
    evhttp_send_error(req, 500, "Out of memory");
    return;
  }
  if (text)
    evbuffer_add(b, text, strlen(text));
  else {
    code = 500;
    reason = "Out of memory";
    evbuffer_add_printf(b, "{\"ok\":false,\"error\":\"out of memory\"}");
  }
  free(text);
  evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json; charset=utf-8");
  evhttp_send_reply(req, code, reason, b);
  evbuffer_free(b);
}

static void refuse(struct evhttp_request *req, int code, const char *reason, const char *why)
{
  reply_json(req, code, reason, json_pack("{s:b, s:s}", "ok", 0, "error", why));
}

/* ---- who is asking ---- */

static const char *cookie_value(struct evhttp_request *req)
{
  static const char name[] = "shk_panel=";
  const char *c = evhttp_find_header(evhttp_request_get_input_headers(req), "Cookie");
  for (const char *s = c; s && *s;) {
    while (*s == ' ' || *s == ';')
      s++;
    if (!strncmp(s, name, sizeof name - 1))
      return s + sizeof name - 1;
    s = strchr(s, ';');
  }
  return NULL;
}

/* The logged-in browser session the request's cookie names, or NULL. */
static login *logged_in(shk__panel *p, struct evhttp_request *req)
{
  const char *v = cookie_value(req);
  if (!v)
    return NULL;
  char val[TOKEN_HEX];
  size_t n = strcspn(v, "; ");
  if (n != TOKEN_HEX - 1)
    return NULL;
  memcpy(val, v, n);
  val[n] = '\0';
  int64_t now = now_ms();
  for (size_t i = 0; i < MAX_LOGINS; i++) {
    login *l = &p->logins[i];
    if (l->cookie[0] && l->expires_ms <= now)
      memset(l, 0, sizeof *l);
    if (l->cookie[0] && secret_eq(l->cookie, val))
      return l;
  }
  return NULL;
}

static char *body_text(struct evhttp_request *req)
{
  struct evbuffer *in = evhttp_request_get_input_buffer(req);
  size_t n = evbuffer_get_length(in);
  if (n > MAX_BODY)
    return NULL;
  char *t = malloc(n + 1);
  if (!t)
    return NULL;
  evbuffer_copyout(in, t, n);
  t[n] = '\0';
  return t;
}

static bool is_json_body(struct evhttp_request *req)
{
  const char *ct = evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Type");
  return ct && !strncmp(ct, "application/json", 16) && (ct[16] == '\0' || ct[16] == ';');
}

/* ---- the routes ---- */

static void serve_asset(struct evhttp_request *req, const shk__panel_asset *a)
{
  struct evbuffer *b = evbuffer_new();
  if (!b) {
    evhttp_send_error(req, 500, "Out of memory");
    return;
  }
  evbuffer_add_reference(b, a->data, *a->size, NULL, NULL);
  evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", a->type);
  evhttp_send_reply(req, 200, "OK", b);
  evbuffer_free(b);
}

/* POST /api/login {"token": T}: T is the one login token now valid.
 * Wrong tokens are rate limited; the right one is never refused for them,
 * so that another local user who floods the port with guesses cannot
 * lock the human out (a guess of 256 bits is hopeless anyway: the limit
 * keeps a guessing loop from costing the manager). */
static void route_login(shk__panel *p, struct evhttp_request *req)
{
  int64_t now = now_ms();
  if (now - p->fail_since_ms > FAIL_WINDOW_MS) {
    p->fail_since_ms = now;
    p->fails = 0;
  }
  char *text = is_json_body(req) ? body_text(req) : NULL;
  json_t *body = text ? json_loads(text, JSON_REJECT_DUPLICATES, NULL) : NULL;
  free(text);
  const char *tok = json_string_value(json_object_get(body, "token"));
  bool ok = tok && p->token[0] && secret_eq(tok, p->token);
  json_decref(body);
  if (!ok && p->fails >= FAIL_LIMIT) {
    refuse(req, 429, "Too Many Requests", "too many failed logins; wait a minute and use the URL `shinken panel` "
                                          "prints");
    return;
  }
  if (!ok) {
    p->fails++;
    refuse(req, 403, "Forbidden", "this login token is not valid (each one logs in once; `shinken panel` prints the "
                                  "current one)");
    return;
  }
  /* The token is spent now, whatever follows: a replay of it is refused. */
  shk_error err;
  char old[TOKEN_HEX];
  memcpy(old, p->token, sizeof old);
  if (random_hex(p->token) || write_login_file(p, &err)) {
    /* No new token could be made or written: none is valid, and the next
     * login waits for the manager to be restarted. Fail closed. */
    p->token[0] = '\0';
  }
  OPENSSL_cleanse(old, sizeof old);
  login *slot = NULL;
  for (size_t i = 0; i < MAX_LOGINS && !slot; i++)
    if (!p->logins[i].cookie[0] || p->logins[i].expires_ms <= now)
      slot = &p->logins[i];
  if (!slot) {
    /* The oldest browser session makes room. */
    slot = &p->logins[0];
    for (size_t i = 1; i < MAX_LOGINS; i++)
      if (p->logins[i].expires_ms < slot->expires_ms)
        slot = &p->logins[i];
  }
  if (random_hex(slot->cookie) || random_hex(slot->csrf)) {
    memset(slot, 0, sizeof *slot);
    refuse(req, 500, "Internal Server Error", "the kernel gave no random bytes");
    return;
  }
  slot->expires_ms = now + LOGIN_TTL_MS;
  snprintf(slot->user, sizeof slot->user, "%s (panel login %u)", p->user_name, ++p->n_logged_in);
  char cookie[160];
  /* No Secure flag: the panel is plain HTTP on loopback, which never leaves
   * the host; SameSite=Strict and HttpOnly are what keep it in. */
  snprintf(cookie, sizeof cookie, "shk_panel=%s; Path=/; HttpOnly; SameSite=Strict; Max-Age=%lld", slot->cookie,
           LOGIN_TTL_MS / 1000);
  evhttp_add_header(evhttp_request_get_output_headers(req), "Set-Cookie", cookie);
  shk__panel_conns_trust(p->conns, evhttp_request_get_connection(req));
  reply_json(req, 200, "OK", json_pack("{s:b, s:s}", "ok", 1, "csrf", slot->csrf));
}

static json_t *call_by(shk__panel *p, json_t *req, const login *l)
{
  shk__peer by = p->peer;
  by.user = l ? l->user : NULL;
  return shk__manager_call_as(p->m, req, NULL, &by);
}

static json_t *call(shk__panel *p, json_t *req)
{
  return call_by(p, req, NULL);
}

static json_t *call_op(shk__panel *p, const char *op)
{
  json_t *req = json_pack("{s:s}", "op", op);
  json_t *ans = req ? call(p, req) : NULL;
  json_decref(req);
  return ans;
}

/* Everything the page shows, in one answer. */
static json_t *state(shk__panel *p)
{
  json_t *s = call_op(p, "sessions"), *g = call_op(p, "grants"), *c = call_op(p, "cards");
  json_t *ans = NULL;
  if (s && g && c)
    ans = json_pack("{s:b, s:O?, s:O?, s:O?}", "ok", 1, "sessions", json_object_get(s, "sessions"), "grants",
                    json_object_get(g, "grants"), "cards", json_object_get(c, "cards"));
  json_decref(s);
  json_decref(g);
  json_decref(c);
  return ans;
}

/* The operations a human surface may ask for (takeover and resume freeze
 * and thaw a session, as its card's answers do). open_session and
 * sandbox_ran belong to launchers, subscribe to the control socket, taint
 * and decide_layers to a harness and the operator's own run. */
static bool op_allowed(const char *op)
{
  static const char *const ok[] = { "sessions", "grants", "cards", "grant", "revoke", "resolve", "takeover", "resume",
                                    NULL };
  for (size_t i = 0; op && ok[i]; i++)
    if (!strcmp(op, ok[i]))
      return true;
  return false;
}

/* POST /api/call {"op": ...}: one operation of the control API. */
static void route_call(shk__panel *p, struct evhttp_request *req, const login *l)
{
  char *text = is_json_body(req) ? body_text(req) : NULL;
  if (!text) {
    refuse(req, 415, "Unsupported Media Type", "the body must be a JSON object (Content-Type: application/json, "
                                               "at most 64 KiB)");
    return;
  }
  json_error_t jerr;
  json_t *body = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
  free(text);
  const char *op = json_string_value(json_object_get(body, "op"));
  if (!json_is_object(body)) {
    json_decref(body);
    refuse(req, 400, "Bad Request", "the body must be a JSON object with \"op\"");
    return;
  }
  if (!op_allowed(op)) {
    json_t *a = json_pack("{s:b, s:s+}", "ok", 0, "error", "the panel does not offer op ", op ? op : "(none)");
    json_decref(body);
    reply_json(req, 403, "Forbidden", a);
    return;
  }
  json_t *ans = call_by(p, body, l);
  json_decref(body);
  reply_json(req, 200, "OK", ans);
}

/* ---- live updates ---- */

static void sse_drop(shk__panel *p, sse *c, bool finish);
static shk_audit_reader *reader(shk__panel *p);

/* A connection is freed (panel-conns.c holds evhttp's close callback and
 * tells this): if it carried a stream, the browser went away. evhttp has either detached the unfinished
 * request from its connection (then it is ours to free, which ending the
 * reply does) or frees it with the connection after this returns. */
static void sse_close_cb(struct evhttp_connection *conn, void *arg)
{
  shk__panel *p = arg;
  for (sse *c = p->clients; c; c = c->next)
    if (c->conn == conn) {
      sse_drop(p, c, evhttp_request_get_connection(c->req) == NULL);
      return;
    }
}

static void sub_line(void *ud, const char *line, size_t len)
{
  shk__panel *p = ud;
  /* A browser that cannot keep up loses lines, not the manager's memory:
   * each line only tells the page to fetch the state again. */
  shk__line_queue_push(p->lines, line, len);
}

/* Forgets a stream; `finish` ends its reply too (which frees a request
 * whose connection is gone). */
static void sse_drop(shk__panel *p, sse *c, bool finish)
{
  for (sse **pp = &p->clients; *pp; pp = &(*pp)->next)
    if (*pp == c) {
      *pp = c->next;
      break;
    }
  p->n_clients--;
  if (finish)
    evhttp_send_reply_end(c->req);
  free(c);
  if (!p->n_clients)
    shk__audit_stream_watch(p->stream, false);
  /* The last page is gone: no panel is a surface that can answer now. */
  if (!p->n_clients && p->subscribed) {
    shk__manager_unsubscribe(p->m, p->sub_id);
    p->subscribed = false;
  }
}

/* Streams whose connection failed without telling us: let them go. */
static void sse_sweep(shk__panel *p)
{
  for (sse *c = p->clients, *next; c; c = next) {
    next = c->next;
    if (!evhttp_request_get_connection(c->req))
      sse_drop(p, c, true);
  }
}

static void sse_send_one(sse *c, const char *event, const char *data, size_t len)
{
  struct evbuffer *b = evbuffer_new();
  if (!b)
    return;
  evbuffer_add_printf(b, "event: %s\ndata: ", event);
  evbuffer_add(b, data, len);
  evbuffer_add(b, "\n\n", 2);
  evhttp_send_reply_chunk(c->req, b);
  evbuffer_free(b);
}

static void sse_send(shk__panel *p, const char *event, const char *data, size_t len)
{
  sse_sweep(p);
  for (sse *c = p->clients; c; c = c->next)
    sse_send_one(c, event, data, len);
}

/* GET /api/events: an event stream. "card" carries each line of the card
 * stream as it comes; "state" says sessions, grants or cards changed;
 * "audit" carries the audit events recorded since the last one. */
static void route_events(shk__panel *p, struct evhttp_request *req)
{
  if (p->n_clients >= MAX_SSE) {
    refuse(req, 503, "Service Unavailable", "too many panel pages are open");
    return;
  }
  sse *c = calloc(1, sizeof *c);
  if (!c) {
    evhttp_send_error(req, 500, "Out of memory");
    return;
  }
  if (!p->subscribed) {
    /* A page is open: the panel is a surface that can answer cards. */
    shk_error err;
    if (shk__manager_subscribe(p->m, sub_line, p, &p->sub_id, &err)) {
      free(c);
      refuse(req, 503, "Service Unavailable", err.message);
      return;
    }
    p->subscribed = true;
  }
  c->req = req;
  c->conn = evhttp_request_get_connection(req);
  c->next = p->clients;
  p->clients = c;
  if (p->n_clients++ == 0)
    shk__audit_stream_watch(p->stream, true);
  struct evkeyvalq *h = evhttp_request_get_output_headers(req);
  evhttp_add_header(h, "Content-Type", "text/event-stream");
  evhttp_send_reply_start(req, 200, "OK");
  /* Only the new page is greeted: it fetches what it shows once. */
  static const char hello[] = "{}";
  sse_send_one(c, "hello", hello, sizeof hello - 1);
}

static void card_line(void *ud, const char *line, size_t len)
{
  sse_send(ud, "card", line, len);
}

/* A batch of new audit events, from the stream's thread, to every page. */
static void audit_batch(void *ud, const char *json, size_t len)
{
  sse_send(ud, "audit", json, len);
}

/* Sends "state" when what the page shows changed since the last look. */
static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
  shk__panel *p = arg;
  if (!p->n_clients)
    return;
  int64_t now = now_ms();
  json_t *st = state(p);
  char *text = st ? json_dumps(st, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  json_decref(st);
  if (text && (!p->last_state || strcmp(text, p->last_state))) {
    free(p->last_state);
    p->last_state = text;
    static const char changed[] = "{}";
    sse_send(p, "state", changed, sizeof changed - 1);
    p->last_ping_ms = now;
  } else {
    free(text);
  }
  if (now - p->last_ping_ms >= SSE_PING_MS) {
    sse_sweep(p);
    for (sse *c = p->clients; c; c = c->next) {
      struct evbuffer *b = evbuffer_new();
      if (b) {
        evbuffer_add_printf(b, ": ping\n\n");
        evhttp_send_reply_chunk(c->req, b);
        evbuffer_free(b);
      }
    }
    p->last_ping_ms = now;
  }
}

/* ---- the timeline ---- */

static shk_audit_reader *reader(shk__panel *p)
{
  if (!p->reader && p->audit_db)
    shk_audit_reader_open(p->audit_db, &p->reader, NULL);
  return p->reader;
}

/* A whole number from the query, or dflt. */
static uint64_t query_num(struct evhttp_request *req, const char *key, uint64_t dflt, bool *bad)
{
  const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
  struct evkeyvalq kv;
  TAILQ_INIT(&kv);
  uint64_t v = dflt;
  if (q && evhttp_parse_query_str(q, &kv) == 0) {
    const char *x = evhttp_find_header(&kv, key);
    if (x) {
      char *end;
      errno = 0;
      unsigned long long n = strtoull(x, &end, 10);
      if (errno || *end || !*x || *x == '-')
        *bad = true;
      else
        v = n;
    }
  }
  evhttp_clear_headers(&kv);
  return v;
}

/* GET /api/timeline?since=SEQ, /api/proof?seq=SEQ, /api/verify. */
static void route_timeline(shk__panel *p, struct evhttp_request *req, const char *path)
{
  if (!p->audit_db) {
    refuse(req, 404, "Not Found", "this manager keeps no audit store");
    return;
  }
  if (!strcmp(path, "/api/verify")) {
    reply_json(req, 200, "OK", shk__panel_verify(p->audit_db));
    return;
  }
  shk_audit_reader *r = reader(p);
  if (!r) {
    refuse(req, 503, "Service Unavailable", "the audit store cannot be read yet");
    return;
  }
  bool bad = false;
  if (!strcmp(path, "/api/proof")) {
    uint64_t seq = query_num(req, "seq", UINT64_MAX, &bad);
    if (bad || seq == UINT64_MAX)
      refuse(req, 400, "Bad Request", "seq must be an event's sequence number");
    else
      reply_json(req, 200, "OK", shk__panel_proof(r, seq));
    return;
  }
  uint64_t since = query_num(req, "since", 0, &bad);
  if (bad)
    refuse(req, 400, "Bad Request", "since must be a sequence number");
  else
    reply_json(req, 200, "OK", shk__panel_timeline(r, since, 200));
}

/* GET /api/host: asked afresh at most once a minute (it forks to try a
 * user namespace, as doctor does). */
static void route_host(shk__panel *p, struct evhttp_request *req)
{
  int64_t now = now_ms();
  if (!p->host_view || now - p->host_at_ms > 60 * 1000) {
    json_decref(p->host_view);
    p->host_view = shk__panel_host();
    p->host_at_ms = now;
  }
  reply_json(req, 200, "OK", p->host_view ? json_incref(p->host_view) : NULL);
}

/* ---- the one entry point ---- */

static void request_cb(struct evhttp_request *req, void *arg)
{
  shk__panel *p = arg;
  security_headers(req);
  struct evkeyvalq *in = evhttp_request_get_input_headers(req);
  /* DNS rebinding: a page of another site whose name now points here
   * still sends its own name as Host. Only the panel's own is served. */
  const char *host = evhttp_find_header(in, "Host");
  if (!host || strcmp(host, p->host)) {
    refuse(req, 421, "Misdirected Request", "this panel answers only requests addressed to its own loopback address");
    return;
  }
  const char *uri = evhttp_request_get_uri(req);
  char path[128];
  size_t n = strcspn(uri, "?#");
  if (n >= sizeof path) {
    refuse(req, 404, "Not Found", "no such page");
    return;
  }
  memcpy(path, uri, n);
  path[n] = '\0';
  enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
  if (cmd == EVHTTP_REQ_POST) {
    /* A state-changing request comes from the panel's own page: a browser
     * always names the page's origin on a POST, and no other site's page
     * can claim this one. */
    const char *origin = evhttp_find_header(in, "Origin");
    if (!origin || strcmp(origin, p->origin)) {
      refuse(req, 403, "Forbidden", "a request that changes anything must come from the panel's own page (Origin)");
      return;
    }
    if (!strcmp(path, "/api/login")) {
      route_login(p, req);
      return;
    }
    login *l = logged_in(p, req);
    if (!l) {
      refuse(req, 401, "Unauthorized", "not logged in: open the URL `shinken panel` prints");
      return;
    }
    shk__panel_conns_trust(p->conns, evhttp_request_get_connection(req));
    const char *csrf = evhttp_find_header(in, "X-CSRF-Token");
    if (!csrf || !secret_eq(csrf, l->csrf)) {
      refuse(req, 403, "Forbidden", "the request lacks this session's CSRF token");
      return;
    }
    if (!strcmp(path, "/api/call"))
      route_call(p, req, l);
    else if (!strcmp(path, "/api/logout")) {
      memset(l, 0, sizeof *l);
      reply_json(req, 200, "OK", json_pack("{s:b}", "ok", 1));
    } else
      refuse(req, 404, "Not Found", "no such operation");
    return;
  }
  if (cmd != EVHTTP_REQ_GET) {
    refuse(req, 405, "Method Not Allowed", "the panel answers GET and POST only");
    return;
  }
  const shk__panel_asset *a = shk__panel_asset_find(path);
  if (a) {
    serve_asset(req, a);
    return;
  }
  if (strncmp(path, "/api/", 5)) {
    refuse(req, 404, "Not Found", "no such page");
    return;
  }
  login *l = logged_in(p, req);
  if (!l) {
    refuse(req, 401, "Unauthorized", "not logged in: open the URL `shinken panel` prints");
    return;
  }
  shk__panel_conns_trust(p->conns, evhttp_request_get_connection(req));
  if (!strcmp(path, "/api/session"))
    reply_json(req, 200, "OK", json_pack("{s:b, s:s}", "ok", 1, "csrf", l->csrf));
  else if (!strcmp(path, "/api/state"))
    reply_json(req, 200, "OK", state(p));
  else if (!strcmp(path, "/api/events"))
    route_events(p, req);
  else if (!strcmp(path, "/api/host"))
    route_host(p, req);
  else if (!strcmp(path, "/api/timeline") || !strcmp(path, "/api/proof") || !strcmp(path, "/api/verify"))
    route_timeline(p, req, path);
  else
    refuse(req, 404, "Not Found", "no such operation");
}

static void wake_cb(evutil_socket_t fd, short what, void *arg)
{
  shk__panel *p = arg;
  event_base_loopbreak(p->base);
}

static void *serve(void *arg)
{
  shk__panel *p = arg;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  event_base_loop(p->base, EVLOOP_NO_EXIT_ON_EMPTY);
  while (p->clients)
    sse_drop(p, p->clients, true);
  return NULL;
}

static void panel_free(shk__panel *p)
{
  shk__audit_stream_stop(p->stream);
  shk__panel_conns_stop(p->conns);
  if (p->http)
    evhttp_free(p->http);
  shk__panel_conns_free(p->conns);
  if (p->wake)
    event_free(p->wake);
  shk__line_queue_free(p->lines);
  if (p->tick)
    event_free(p->tick);
  if (p->base)
    event_base_free(p->base);
  if (p->wake_fd >= 0)
    close(p->wake_fd);
  if (p->login_file)
    unlink(p->login_file);
  OPENSSL_cleanse(p->token, sizeof p->token);
  OPENSSL_cleanse(p->logins, sizeof p->logins);
  free(p->login_file);
  free(p->last_state);
  if (p->reader)
    shk_audit_reader_close(p->reader);
  free(p->audit_db);
  json_decref(p->host_view);
  free(p);
}

void shk__panel_stop(shk__panel *p)
{
  if (!p)
    return;
  uint64_t one = 1;
  if (write(p->wake_fd, &one, sizeof one) < 0) {
    /* An eventfd write fails only when its counter would overflow, which
     * one write after creation cannot do. */
  }
  pthread_join(p->thread, NULL);
  panel_free(p);
}

/* The login file's directory must be this user's and writable by no one
 * else: whoever could write it could plant the file the CLI prints. */
static int check_dir(const char *file, shk_error *err)
{
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", file);
  char *slash = strrchr(dir, '/');
  if (!slash || slash == dir)
    return shk__error_set(err, -EINVAL, "%s: the login file's path must be absolute", file);
  *slash = '\0';
  struct stat st;
  if (lstat(dir, &st) < 0)
    return shk__error_set(err, -errno, "%s: %s", dir, strerror(errno));
  if (!S_ISDIR(st.st_mode) || st.st_uid != shk__self_uid() || (st.st_mode & (S_IRWXG | S_IRWXO)))
    return shk__error_set(err, -EPERM, "%s: the panel's login file goes only in a directory of this user that no "
                                       "one else may open (mode 0700)", dir);
  return 0;
}

int shk_manager_serve_panel(shk_manager *m, const char *listen, const char *login_file, const char *audit_db,
                            char **url, shk_error *err)
{
  *url = NULL;
  int r = shk_manager_panel_listen_check(listen, err);
  if (r || (r = check_dir(login_file, err)))
    return r;
  shk__panel *p = calloc(1, sizeof *p);
  if (!p)
    return shk__error_set(err, -ENOMEM, "out of memory");
  p->m = m;
  p->wake_fd = -1;
  /* Who answers through the panel: the holder of a token only this user
   * can read, so the manager's own user, recorded as the panel surface. */
  p->peer = (shk__peer){ "panel", shk__self_uid(), getpid(), NULL, NULL };
  struct passwd pw, *pwp = NULL;
  char pwbuf[4096];
  if (getpwuid_r(shk__self_uid(), &pw, pwbuf, sizeof pwbuf, &pwp) == 0 && pwp)
    snprintf(p->user_name, sizeof p->user_name, "%s", pw.pw_name);
  else
    snprintf(p->user_name, sizeof p->user_name, "uid %u", (unsigned)shk__self_uid());
  char addr[64];
  const char *colon = strrchr(listen, ':');
  size_t alen = (size_t)(colon - listen);
  memcpy(addr, listen, alen);
  addr[alen] = '\0';
  bool v6 = addr[0] == '[';
  if (v6) {
    memmove(addr, addr + 1, alen - 2);
    addr[alen - 2] = '\0';
  }
  unsigned port = (unsigned)strtoul(colon + 1, NULL, 10);
  p->base = event_base_new();
  p->http = p->base ? evhttp_new(p->base) : NULL;
  p->login_file = strdup(login_file);
  p->audit_db = audit_db ? strdup(audit_db) : NULL;
  p->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (!p->http || !p->login_file || (audit_db && !p->audit_db) || p->wake_fd < 0 ||
      shk__line_queue_new(p->base, 1u << 20, card_line, p, &p->lines)) {
    r = shk__error_set(err, -ENOMEM, "panel: cannot set up its event loop");
    goto fail;
  }
  struct evhttp_bound_socket *bs = evhttp_bind_socket_with_handle(p->http, addr, (ev_uint16_t)port);
  if (!bs) {
    r = shk__error_set(err, -EADDRNOTAVAIL, "panel: cannot listen on %s", listen);
    goto fail;
  }
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  if (getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&ss, &sl) < 0) {
    r = shk__error_set(err, -errno, "panel: %s", strerror(errno));
    goto fail;
  }
  if ((r = shk__panel_conns_new(p->http, p->base, evhttp_bound_socket_get_listener(bs),
                                shk__manager_panel_max_conns(m), sse_close_cb, p, &p->conns))) {
    shk__error_set(err, r, "panel: out of memory");
    goto fail;
  }
  port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                        : ((struct sockaddr_in *)&ss)->sin_port);
  snprintf(p->host, sizeof p->host, v6 ? "[%s]:%u" : "%s:%u", addr, port);
  snprintf(p->origin, sizeof p->origin, "http://%s", p->host);
  evhttp_set_allowed_methods(p->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD | EVHTTP_REQ_OPTIONS |
                                          EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_PATCH);
  evhttp_set_max_body_size(p->http, MAX_BODY);
  evhttp_set_max_headers_size(p->http, 16 * 1024);
  evhttp_set_timeout(p->http, 60);
  evhttp_set_gencb(p->http, request_cb, p);
  if ((r = random_hex(p->token))) {
    shk__error_set(err, r, "panel: the kernel gave no random bytes");
    goto fail;
  }
  if ((r = write_login_file(p, err)))
    goto fail;
  if (p->audit_db && (r = shk__audit_stream_start(p->base, p->audit_db, audit_batch, p, &p->stream))) {
    shk__error_set(err, r, "panel: the Timeline's reader: %s", strerror(-r));
    goto fail;
  }
  p->wake = event_new(p->base, p->wake_fd, EV_READ, wake_cb, p);
  p->tick = event_new(p->base, -1, EV_PERSIST, tick_cb, p);
  struct timeval poll = { 0, STATE_POLL_MS * 1000 };
  if (!p->wake || !p->tick || event_add(p->wake, NULL) || event_add(p->tick, &poll)) {
    r = shk__error_set(err, -ENOMEM, "panel: cannot set up its event loop");
    goto fail;
  }
  if (asprintf(url, "%s/login#%s", p->origin, p->token) < 0) {
    *url = NULL;
    r = shk__error_set(err, -ENOMEM, "out of memory");
    goto fail;
  }
  if ((r = -pthread_create(&p->thread, NULL, serve, p))) {
    shk__error_set(err, r, "panel thread: %s", strerror(-r));
    goto fail;
  }
  shk__manager_set_panel(m, p);
  return 0;
fail:
  free(*url);
  *url = NULL;
  panel_free(p);
  return r;
}
