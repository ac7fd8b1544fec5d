/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP proxy request head: absolute-form requests and CONNECT. The
 * parser is strict on purpose; every shape two parsers could read
 * differently (the basis of request smuggling) is refused rather than
 * normalized, and the head sent upstream is rebuilt from what was parsed,
 * never copied wholesale. */
#include "egress/egress-internal.h"

#include "common/common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_CONN_TOKENS 16

static bool is_tchar(unsigned char c)
{
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
    return true;
  return c && strchr("!#$%&'*+-.^_`|~", c);
}

static int refuse(shk__http_refusal *ref, int status, const char *reason)
{
  ref->status = status;
  ref->reason = reason;
  return -1;
}

struct slice {
  const char *p;
  size_t n;
};

static bool slice_eq(struct slice s, const char *lit)
{
  return s.n == strlen(lit) && !strncasecmp(s.p, lit, s.n);
}

struct header {
  struct slice name, value;
};

/* Hop-by-hop headers (RFC 9110 7.6.1) plus the proxy's own credentials,
 * which are for this hop and must never reach the origin. */
static bool is_hop_by_hop(struct slice name)
{
  static const char *const hop[] = { "connection", "keep-alive", "proxy-connection",
                                     "proxy-authorization", "proxy-authenticate", "te",
                                     "trailer", "transfer-encoding", "upgrade", "host",
                                     "content-length" };
  for (size_t i = 0; i < sizeof hop / sizeof hop[0]; i++)
    if (slice_eq(name, hop[i]))
      return true;
  return false;
}

/* Out of memory frees the buffer and leaves *buf NULL, and every later
 * append does nothing, so the caller checks once, at the end. */
static void append(char **buf, size_t *len, size_t *cap, const char *p, size_t n)
{
  if (!*buf)
    return;
  if (*len + n + 1 > *cap) {
    *cap = (*len + n + 1) * 2;
    char *nb = realloc(*buf, *cap);
    if (!nb) {
      free(*buf);
      *buf = NULL;
      return;
    }
    *buf = nb;
  }
  memcpy(*buf + *len, p, n);
  *len += n;
  (*buf)[*len] = '\0';
}

static void appends(char **buf, size_t *len, size_t *cap, const char *s)
{
  append(buf, len, cap, s, strlen(s));
}

/* Locates the end of the head, refusing bare LF, bare CR and NUL on the
 * way. Returns the head length, 0 for "need more", -1 for a refusal. */
static long find_end(const char *buf, size_t len, shk__http_refusal *ref)
{
  size_t lim = len < SHK__HTTP_HEAD_MAX ? len : SHK__HTTP_HEAD_MAX;
  for (size_t i = 0; i < lim; i++) {
    char c = buf[i];
    if (c == '\0')
      return refuse(ref, 400, "http-nul");
    if (c == '\n' && (i == 0 || buf[i - 1] != '\r'))
      return refuse(ref, 400, "http-bare-lf");
    if (c == '\r' && i + 1 < len && buf[i + 1] != '\n')
      return refuse(ref, 400, "http-bare-cr");
    if (c == '\n' && i >= 3 && buf[i - 2] == '\n')
      return (long)(i + 1);
  }
  if (len >= SHK__HTTP_HEAD_MAX)
    return refuse(ref, 431, "http-head-too-large");
  return 0;
}

/* The framing and connection headers of one head, read once. */
struct fields {
  struct header hs[SHK__HTTP_MAX_HEADERS];
  size_t nh;
  struct slice conn_tokens[MAX_CONN_TOKENS];
  size_t nconn;
  int n_host, n_cl, n_te;
  struct slice host_value, te_value;
  uint64_t content_length;
  bool upgrade;
};

static bool conn_has(const struct fields *f, const char *token)
{
  for (size_t i = 0; i < f->nconn; i++)
    if (slice_eq(f->conn_tokens[i], token))
      return true;
  return false;
}

/* Reads the header fields from P to the head's end E (which ends in the
 * empty line). Safe on any bytes: every read stops at a CR, and the head
 * was checked to end in CRLF CRLF. */
static int read_fields(const char *p, const char *e, struct fields *f, shk__http_refusal *ref)
{
  memset(f, 0, sizeof *f);
  while (p < e && *p != '\r') {
    if (*p == ' ' || *p == '\t')
      return refuse(ref, 400, "http-obs-fold");
    if (f->nh == SHK__HTTP_MAX_HEADERS)
      return refuse(ref, 431, "http-too-many-headers");
    struct header *h = &f->hs[f->nh++];
    h->name.p = p;
    while (p < e && is_tchar((unsigned char)*p))
      p++;
    h->name.n = (size_t)(p - h->name.p);
    if (h->name.n == 0 || *p != ':')
      return refuse(ref, 400, "http-bad-header-name");
    p++;
    while (*p == ' ' || *p == '\t')
      p++;
    h->value.p = p;
    while (*p != '\r') {
      unsigned char c = (unsigned char)*p;
      if ((c < 0x20 && c != '\t') || c == 0x7f)
        return refuse(ref, 400, "http-bad-header-value");
      p++;
    }
    const char *ve = p;
    while (ve > h->value.p && (ve[-1] == ' ' || ve[-1] == '\t'))
      ve--;
    h->value.n = (size_t)(ve - h->value.p);
    p += 2;
    if (slice_eq(h->name, "host")) {
      f->n_host++;
      f->host_value = h->value;
    } else if (slice_eq(h->name, "content-length")) {
      if (++f->n_cl > 1)
        return refuse(ref, 400, "http-two-content-length");
      if (h->value.n == 0 || h->value.n > 15)
        return refuse(ref, 400, "http-bad-content-length");
      for (size_t i = 0; i < h->value.n; i++) {
        if (h->value.p[i] < '0' || h->value.p[i] > '9')
          return refuse(ref, 400, "http-bad-content-length");
        f->content_length = f->content_length * 10 + (uint64_t)(h->value.p[i] - '0');
      }
    } else if (slice_eq(h->name, "transfer-encoding")) {
      f->n_te++;
      f->te_value = h->value;
    } else if (slice_eq(h->name, "upgrade")) {
      f->upgrade = true;
    } else if (slice_eq(h->name, "connection")) {
      const char *t = h->value.p, *te = h->value.p + h->value.n;
      while (t < te) {
        while (t < te && (*t == ' ' || *t == '\t' || *t == ','))
          t++;
        const char *ts = t;
        while (t < te && is_tchar((unsigned char)*t))
          t++;
        if (t == ts) {
          if (t < te)
            return refuse(ref, 400, "http-bad-connection");
          break;
        }
        if (f->nconn == MAX_CONN_TOKENS)
          return refuse(ref, 400, "http-bad-connection");
        f->conn_tokens[f->nconn++] = (struct slice){ ts, (size_t)(t - ts) };
      }
    }
  }
  if (f->n_cl && f->n_te)
    return refuse(ref, 400, "http-cl-and-te");
  if (f->n_te > 1 || (f->n_te && !slice_eq(f->te_value, "chunked")))
    return refuse(ref, 501, "http-transfer-encoding-unsupported");
  return 0;
}

/* Whether header NAME is one the proxy owns on an inspected hop: the
 * hop-by-hop ones, Host and the framing. */
static bool is_proxy_owned(const struct fields *f, struct slice name)
{
  if (is_hop_by_hop(name))
    return true;
  for (size_t j = 0; f && j < f->nconn; j++)
    if (name.n == f->conn_tokens[j].n && !strncasecmp(name.p, f->conn_tokens[j].p, name.n))
      return true;
  return false;
}

/* The request line: METHOD SP TARGET SP HTTP/1.x CRLF, single spaces.
 * Advances *P past it. */
static int read_request_line(const char **pp, const char *e, struct slice *method,
                             struct slice *target, struct slice *version, shk__http_refusal *ref)
{
  const char *p = *pp;
  *method = (struct slice){ p, 0 };
  while (p < e && is_tchar((unsigned char)*p))
    p++;
  method->n = (size_t)(p - method->p);
  if (method->n == 0 || method->n > 16 || *p != ' ')
    return refuse(ref, 400, "http-bad-request-line");
  target->p = ++p;
  while (p < e && *p != ' ' && *p != '\r')
    p++;
  target->n = (size_t)(p - target->p);
  if (target->n == 0 || *p != ' ')
    return refuse(ref, 400, "http-bad-request-line");
  version->p = ++p;
  while (p < e && *p != '\r')
    p++;
  version->n = (size_t)(p - version->p);
  if (!(version->n == 8 && (!memcmp(version->p, "HTTP/1.1", 8) || !memcmp(version->p, "HTTP/1.0", 8))))
    return refuse(ref, 505, "http-bad-version");
  *pp = p + 2;
  return 0;
}

/* What every request parser starts with: the head's end (returned: its
 * length, 0 for more bytes, -1 refused) and its request line, with *P
 * just past it. */
static long read_start(const char *buf, size_t len, const char **p, struct slice *method,
                       struct slice *target, struct slice *version, shk__http_refusal *ref)
{
  ref->status = 0;
  ref->reason = NULL;
  long end = find_end(buf, len, ref);
  if (end <= 0)
    return end;
  *p = buf;
  if (read_request_line(p, buf + end, method, target, version, ref) < 0)
    return -1;
  return end;
}

static int parse_target(struct slice method, struct slice target, shk__http_req *req,
                        struct slice *path, shk__http_refusal *ref)
{
  const char *r;
  if (slice_eq(method, "CONNECT")) {
    req->is_connect = true;
    r = shk__authority_parse(target.p, target.n, 0, &req->host, &req->port);
    return r ? refuse(ref, 400, r) : 0;
  }
  if (target.n < 7 || strncasecmp(target.p, "http://", 7)) {
    if (target.n >= 8 && !strncasecmp(target.p, "https://", 8))
      return refuse(ref, 400, "http-https-needs-connect");
    return refuse(ref, 400, "http-not-absolute-form");
  }
  const char *a = target.p + 7, *end = target.p + target.n, *q = a;
  while (q < end && *q != '/' && *q != '?' && *q != '#')
    q++;
  r = shk__authority_parse(a, (size_t)(q - a), 80, &req->host, &req->port);
  if (r)
    return refuse(ref, 400, r);
  for (const char *p = q; p < end; p++)
    if (*p == '#' || (unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
      return refuse(ref, 400, "http-bad-target");
  path->p = q;
  path->n = (size_t)(end - q);
  return 0;
}

/* Safe on any bytes: every read is bounded by the head length found first,
 * and the result is either a complete request or a refusal. */
int shk__http_parse_head(const char *buf, size_t len, shk__http_req *req,
                         shk__http_refusal *ref)
{
  memset(req, 0, sizeof *req);
  const char *p;
  struct slice method, target, version, path = { NULL, 0 };
  long end = read_start(buf, len, &p, &method, &target, &version, ref);
  if (end <= 0)
    return (int)end;
  const char *e = buf + end;
  if (parse_target(method, target, req, &path, ref) < 0)
    return -1;

  struct fields f;
  if (read_fields(p, e, &f, ref) < 0)
    return -1;
  req->content_length = f.content_length;
  if (f.n_te && version.p[7] == '0')
    return refuse(ref, 400, "http-chunked-in-1.0");
  req->chunked = f.n_te == 1;
  if (req->is_connect && req->chunked)
    return refuse(ref, 400, "http-connect-with-body");
  if (f.n_host > 1)
    return refuse(ref, 400, "http-two-host");
  if (req->is_connect && req->content_length)
    return refuse(ref, 400, "http-connect-with-body");
  if (f.n_host == 0 && !req->is_connect && version.p[7] == '1')
    return refuse(ref, 400, "http-host-missing");
  if (f.n_host) {
    shk_host hh;
    uint16_t hp;
    if (shk__authority_parse(f.host_value.p, f.host_value.n, req->is_connect ? req->port : 80,
                             &hh, &hp) ||
        strcmp(hh.text, req->host.text) || hp != req->port)
      return refuse(ref, 400, "http-host-mismatch");
  }
  req->head_len = (size_t)end;
  if (req->is_connect)
    return 1;

  /* The head for the origin: origin-form target, our own Host (the
   * canonical one that was checked), the end-to-end headers, and
   * Connection: close so the origin ends the exchange after one response
   * and nothing the client sends later can ride along unchecked. */
  size_t cap = (size_t)end + 128, ulen = 0;
  char *u = malloc(cap);
  if (u)
    u[0] = '\0';
  append(&u, &ulen, &cap, method.p, method.n);
  appends(&u, &ulen, &cap, " ");
  if (path.n == 0 || path.p[0] == '?')
    appends(&u, &ulen, &cap, "/");
  append(&u, &ulen, &cap, path.p ? path.p : "", path.n);
  /* The client's own version: an HTTP/1.0 client must not be sent a
   * chunked response it cannot read. */
  appends(&u, &ulen, &cap, " ");
  append(&u, &ulen, &cap, version.p, version.n);
  appends(&u, &ulen, &cap, "\r\nHost: ");
  bool v6 = req->host.kind == SHK_HOST_IPV6;
  if (v6)
    appends(&u, &ulen, &cap, "[");
  appends(&u, &ulen, &cap, req->host.text);
  if (v6)
    appends(&u, &ulen, &cap, "]");
  if (req->port != 80) {
    char port[8];
    snprintf(port, sizeof port, ":%u", req->port);
    appends(&u, &ulen, &cap, port);
  }
  appends(&u, &ulen, &cap, "\r\n");
  if (req->chunked)
    appends(&u, &ulen, &cap, "Transfer-Encoding: chunked\r\n");
  if (f.n_cl) {
    char cl[32];
    snprintf(cl, sizeof cl, "Content-Length: %llu\r\n", (unsigned long long)req->content_length);
    appends(&u, &ulen, &cap, cl);
  }
  for (size_t i = 0; i < f.nh; i++) {
    if (is_proxy_owned(&f, f.hs[i].name))
      continue;
    append(&u, &ulen, &cap, f.hs[i].name.p, f.hs[i].name.n);
    appends(&u, &ulen, &cap, ": ");
    append(&u, &ulen, &cap, f.hs[i].value.p, f.hs[i].value.n);
    appends(&u, &ulen, &cap, "\r\n");
  }
  appends(&u, &ulen, &cap, "Connection: close\r\n\r\n");
  if (!u)
    return refuse(ref, 503, "proxy-out-of-memory");
  req->upstream = u;
  req->upstream_len = ulen;
  return 1;
}

const char *shk__http_status_text(int status)
{
  switch (status) {
  case 400: return "Bad Request";
  case 403: return "Forbidden";
  case 405: return "Method Not Allowed";
  case 408: return "Request Timeout";
  case 411: return "Length Required";
  case 429: return "Too Many Requests";
  case 431: return "Request Header Fields Too Large";
  case 501: return "Not Implemented";
  case 502: return "Bad Gateway";
  case 503: return "Service Unavailable";
  case 504: return "Gateway Timeout";
  case 505: return "HTTP Version Not Supported";
  }
  return "Error";
}

void shk__http_req_free(shk__http_req *req)
{
  /* Why wiped: once the rewrite hook has run, the rebuilt head may carry
   * a brokered secret, which must not stay behind in freed memory (a
   * core dump, a later allocation that is sent somewhere). */
  if (req->upstream)
    explicit_bzero(req->upstream, req->upstream_len);
  free(req->upstream);
  req->upstream = NULL;
}

enum { CK_SIZE, CK_SIZE_LF, CK_DATA, CK_DATA_CR, CK_DATA_LF, CK_END_CR, CK_END_LF, CK_DONE };

/* Safe on any bytes: one byte at a time through a small state machine,
 * sizes capped at 16 hex digits so nothing overflows, and data bytes are
 * only counted, never interpreted. */
long shk__chunked_feed(shk__chunked *c, const char *buf, size_t len, const char **reason)
{
  size_t i = 0;
  while (i < len && c->state != CK_DONE) {
    char ch = buf[i];
    switch (c->state) {
    case CK_SIZE: {
      int d = ch >= '0' && ch <= '9' ? ch - '0'
              : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
              : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
      if (d >= 0 && c->digits < 16) {
        c->size = c->size * 16 + (uint64_t)d;
        c->digits++;
      } else if (ch == '\r' && c->digits > 0) {
        c->state = CK_SIZE_LF;
      } else {
        *reason = ch == ';' ? "chunk-extension-unsupported" : "chunk-bad-size";
        return -1;
      }
      i++;
      break;
    }
    case CK_SIZE_LF:
      if (ch != '\n') {
        *reason = "chunk-bare-cr";
        return -1;
      }
      c->state = c->size ? CK_DATA : CK_END_CR;
      i++;
      break;
    case CK_DATA: {
      size_t n = len - i;
      if ((uint64_t)n > c->size)
        n = (size_t)c->size;
      c->size -= n;
      i += n;
      if (c->size == 0)
        c->state = CK_DATA_CR;
      break;
    }
    case CK_DATA_CR:
    case CK_END_CR:
      if (ch != '\r') {
        *reason = c->state == CK_END_CR ? "chunk-trailer-unsupported" : "chunk-bad-end";
        return -1;
      }
      c->state++;
      i++;
      break;
    case CK_DATA_LF:
    case CK_END_LF:
      if (ch != '\n') {
        *reason = "chunk-bare-cr";
        return -1;
      }
      c->state = c->state == CK_DATA_LF ? CK_SIZE : CK_DONE;
      c->digits = 0;
      i++;
      break;
    default:
      *reason = "chunk-state";
      return -1;
    }
  }
  return (long)i;
}

bool shk__chunked_done(const shk__chunked *c)
{
  return c->state == CK_DONE;
}

/* ------------------------------------------------------------------------
 * HTTP/1.1 on an inspected connection: origin-form request heads and the
 * upstream's response heads. The same strictness as the proxy's own
 * requests: one reading of every head, or a refusal.
 */

int shk__http_parse_origin(const char *buf, size_t len, const shk_host *host, uint16_t port,
                           uint16_t default_port, shk__http_origin_req *req,
                           shk__http_refusal *ref)
{
  memset(req, 0, sizeof *req);
  const char *p;
  struct slice method, target, version;
  long end = read_start(buf, len, &p, &method, &target, &version, ref);
  if (end <= 0)
    return (int)end;
  const char *e = buf + end;
  if (slice_eq(method, "CONNECT"))
    return refuse(ref, 405, "inspect-connect-inside");
  bool asterisk = target.n == 1 && target.p[0] == '*';
  if (asterisk ? !slice_eq(method, "OPTIONS") : target.p[0] != '/')
    return refuse(ref, 400, "inspect-not-origin-form");
  for (size_t i = 0; i < target.n; i++)
    if (target.p[i] == '#' || (unsigned char)target.p[i] <= 0x20 ||
        (unsigned char)target.p[i] >= 0x7f)
      return refuse(ref, 400, "http-bad-target");
  struct fields f;
  if (read_fields(p, e, &f, ref) < 0)
    return -1;
  req->http10 = version.p[7] == '0';
  if (f.n_te && req->http10)
    return refuse(ref, 400, "http-chunked-in-1.0");
  if (f.n_host > 1)
    return refuse(ref, 400, "http-two-host");
  if (f.n_host == 0)
    return refuse(ref, 400, "http-host-missing");
  /* Why: the request goes to the destination the grant names and nowhere
   * else; a Host naming another (virtual) host on the same address would
   * reach what was never granted. */
  shk_host hh;
  uint16_t hp;
  if (shk__authority_parse(f.host_value.p, f.host_value.n, default_port, &hh, &hp) ||
      strcmp(hh.text, host->text) || hp != port)
    return refuse(ref, 400, "inspect-host-mismatch");
  /* Why: after an upgrade the bytes are another protocol the proxy does
   * not read; carrying them unread would be a tunnel it was told not to
   * be. */
  if (f.upgrade || conn_has(&f, "upgrade"))
    return refuse(ref, 501, "inspect-upgrade-unsupported");
  memcpy(req->method, method.p, method.n);
  req->method[method.n] = '\0';
  req->target = target.p;
  req->target_len = target.n;
  req->content_length = f.content_length;
  req->chunked = f.n_te == 1;
  req->close = conn_has(&f, "close") || (req->http10 && !conn_has(&f, "keep-alive"));
  for (size_t i = 0; i < f.nh; i++) {
    if (is_proxy_owned(&f, f.hs[i].name))
      continue;
    req->headers[req->n_headers++] = (shk_egress_header){ f.hs[i].name.p, f.hs[i].name.n,
                                                          f.hs[i].value.p, f.hs[i].value.n };
  }
  req->head_len = (size_t)end;
  return 1;
}

/* A header value the hook hands back goes on one line: a CR, LF or NUL
 * in it would start a header (or a request) of its own. */
static bool field_ok(const shk_egress_header *h)
{
  if (h->name_len == 0)
    return false;
  for (size_t i = 0; i < h->name_len; i++)
    if (!is_tchar((unsigned char)h->name[i]))
      return false;
  for (size_t i = 0; i < h->value_len; i++) {
    unsigned char c = (unsigned char)h->value[i];
    if ((c < 0x20 && c != '\t') || c == 0x7f)
      return false;
  }
  return true;
}

int shk__http_build_origin(const shk__http_origin_req *req, const shk_host *host, uint16_t port,
                           uint16_t default_port, const shk_egress_header *h, size_t n,
                           char **out, size_t *out_len)
{
  *out = NULL;
  size_t cap = 512, ulen = 0;
  for (size_t i = 0; i < n; i++)
    cap += h[i].name_len + h[i].value_len + 4;
  char *u = malloc(cap);
  if (!u)
    return -ENOMEM;
  u[0] = '\0';
  appends(&u, &ulen, &cap, req->method);
  appends(&u, &ulen, &cap, " ");
  append(&u, &ulen, &cap, req->target, req->target_len);
  appends(&u, &ulen, &cap, req->http10 ? " HTTP/1.0\r\nHost: " : " HTTP/1.1\r\nHost: ");
  bool v6 = host->kind == SHK_HOST_IPV6;
  if (v6)
    appends(&u, &ulen, &cap, "[");
  appends(&u, &ulen, &cap, host->text);
  if (v6)
    appends(&u, &ulen, &cap, "]");
  char line[64];
  if (port != default_port) {
    snprintf(line, sizeof line, ":%u", port);
    appends(&u, &ulen, &cap, line);
  }
  appends(&u, &ulen, &cap, "\r\n");
  if (req->chunked)
    appends(&u, &ulen, &cap, "Transfer-Encoding: chunked\r\n");
  else if (req->content_length) {
    snprintf(line, sizeof line, "Content-Length: %llu\r\n", (unsigned long long)req->content_length);
    appends(&u, &ulen, &cap, line);
  }
  /* Why counted: the proxy never sends a head it would refuse itself, so
   * both hops read every head the same way; the client's own head may be
   * at the limit and the proxy adds Host, framing and Connection. */
  size_t fields = 1 + (req->chunked || req->content_length) + (req->close || req->http10);
  for (size_t i = 0; i < n; i++) {
    struct slice name = { h[i].name, h[i].name_len };
    if (!field_ok(&h[i]) || is_proxy_owned(NULL, name))
      continue;
    if (++fields > SHK__HTTP_MAX_HEADERS) {
      free(u);
      return -E2BIG;
    }
    append(&u, &ulen, &cap, h[i].name, h[i].name_len);
    appends(&u, &ulen, &cap, ": ");
    append(&u, &ulen, &cap, h[i].value, h[i].value_len);
    appends(&u, &ulen, &cap, "\r\n");
  }
  /* The proxy keeps its upstream connection open across requests while
   * the client does; an HTTP/1.0 origin is asked to as well. */
  appends(&u, &ulen, &cap, req->close ? "Connection: close\r\n\r\n"
                           : req->http10 ? "Connection: keep-alive\r\n\r\n" : "\r\n");
  if (!u)
    return -ENOMEM;
  *out = u;
  *out_len = ulen;
  return 0;
}

bool shk__http_resp_has_body(const char *method, int status)
{
  return strcmp(method, "HEAD") && status >= 200 && status != 204 && status != 304;
}

int shk__http_parse_response(const char *buf, size_t len, const char *method,
                             shk__http_resp *resp, const char **reason)
{
  memset(resp, 0, sizeof *resp);
  shk__http_refusal ref = { 0, NULL };
  long end = find_end(buf, len, &ref);
  if (end <= 0) {
    *reason = ref.reason;
    return (int)end;
  }
  const char *p = buf, *e = buf + end;
  /* Status line: HTTP/1.x SP 3DIGIT SP reason CRLF. */
  if (end < 14 || memcmp(p, "HTTP/1.", 7) || (p[7] != '0' && p[7] != '1') || p[8] != ' ' ||
      p[9] < '1' || p[9] > '5' || p[10] < '0' || p[10] > '9' || p[11] < '0' || p[11] > '9' ||
      (p[12] != ' ' && p[12] != '\r')) {
    *reason = "upstream-bad-status-line";
    return -1;
  }
  bool http10 = p[7] == '0';
  resp->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
  while (p < e && *p != '\r') {
    unsigned char c = (unsigned char)*p;
    if ((c < 0x20 && c != '\t') || c == 0x7f) {
      *reason = "upstream-bad-status-line";
      return -1;
    }
    p++;
  }
  p += 2;
  struct fields f;
  if (read_fields(p, e, &f, &ref) < 0) {
    *reason = "upstream-bad-head";
    return -1;
  }
  resp->head_len = (size_t)end;
  resp->chunked = f.n_te == 1;
  resp->has_length = f.n_cl == 1;
  resp->content_length = f.content_length;
  resp->close = conn_has(&f, "close") || (http10 && !conn_has(&f, "keep-alive"));
  if (resp->status == 101) {
    *reason = "upstream-upgrade";
    return -1;
  }
  return 1;
}
