/* SPDX-License-Identifier: Apache-2.0 */
/* The egress proxy's internal interfaces. Everything declared here except
 * the server (shk__eg_server_*) and the reading of the configuration file
 * (shk__eg_config_load) is a pure function of its input: no I/O, no global
 * state, no allocation that outlives the call unless a *_free is named.
 * That is what lets the fuzz targets and the unit tests call the parsers
 * directly.
 *
 * The refusal of a request is a value, a reason token, rather than a log
 * line: tokens are short, stable, lowercase words joined by '-' (for
 * example "host-bad-char"); they appear verbatim in audit lines, in the
 * X-Shinken-Decision header and in tests. They are static strings: never
 * free them. A bad configuration, which a person reads, is an shk_error
 * sentence instead, and out of memory is -ENOMEM: nothing here exits. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <limits.h>
#include <stdint.h>
#include <sys/socket.h>

#include "shinken/egress.h"
#include "shinken/match.h"

/* ---------------------------------------------------------------------------
 * Hosts (host.c). Host names, IP addresses, CIDRs, ports and patterns are
 * the shared grammar's (shinken/match.h); what is the proxy's own is the
 * authority form of its protocols.
 */

/* Splits "host:port" / "[v6]:port" (authority form, no userinfo) and
 * canonicalizes the host with shk_host_parse. The port is required when
 * default_port is 0. Returns NULL or a reason token. */
const char *shk__authority_parse(const char *in, size_t len, uint16_t default_port,
                                 shk_host *host, uint16_t *port);

/* ---------------------------------------------------------------------------
 * Policy: rules and the None < Allow < Deny lattice of shk_egress_verdict
 * (policy.c)
 */

typedef struct shk__domain_rule {
  shk_host_pattern pattern;
  shk_egress_verdict verdict;
  char *text; /* the rule as written, for audit lines */
} shk__domain_rule;

typedef struct shk__cidr_rule {
  shk_cidr cidr;
  shk_egress_verdict verdict;
  char *text;
} shk__cidr_rule;

typedef struct shk__pin {
  char host[SHK_HOST_MAX + 1];
  shk_ip *ips;
  size_t n_ips;
} shk__pin;

/* The whole configuration. A policy is a configuration (the session API
 * builds one from its allow and deny lists), so one type serves both. */
typedef struct shk__eg_config {
  char *listen_http;   /* "ADDR:PORT" or NULL */
  char *listen_socks5; /* "ADDR:PORT" or NULL */
  struct sockaddr_storage http_addr, socks5_addr;
  socklen_t http_addrlen, socks5_addrlen;
  shk__domain_rule *domains;
  size_t n_domains;
  shk__cidr_rule *cidrs;
  size_t n_cidrs;
  shk_cidr *private_ok; /* allow_private_cidrs */
  size_t n_private_ok;
  shk__pin *pins; /* hosts */
  size_t n_pins;
  bool has_dns_upstream;
  shk_ip dns_upstream;
  uint16_t dns_upstream_port;
  unsigned dns_timeout_ms;
  bool connect_only; /* mode "connect": CONNECT and SOCKS5 only */
  /* The "limits" object: each field SHK__LIMIT_UNSET unless the file
   * gives it (fd_reserve 0 turns the reserve off). */
  shk_egress_limits limits;
  char *audit_path;
  char *upstream_ca; /* "upstream_ca": a PEM bundle, or NULL for the system's store */
  bool allow_non_loopback;
  bool allow_all;
} shk__eg_config;

/* Parses the JSON configuration. An unknown key, a wrong type or a bad
 * value fails with -EINVAL and a message that names the key (for example
 * "domains.*.bad.test: a bare '*' ..."); -ENOMEM. *out is NULL on failure. */
int shk__eg_config_parse(const char *json, size_t len, shk__eg_config **out, shk_error *err);
/* Reads and parses the configuration file at PATH: the one reader of the
 * file, for the standalone proxy and for a session. Errors as for
 * shk__eg_config_parse, each message beginning with PATH (and err->file set
 * to it), and the negative errno of a file that cannot be read. */
int shk__eg_config_load(const char *path, shk__eg_config **out, shk_error *err);
/* An empty configuration (no listeners, nothing allowed); NULL when out of
 * memory. */
shk__eg_config *shk__eg_config_new(void);
/* Adds the domain rule PAT (a host pattern; a bare "*" only in an allow
 * rule of a configuration with dangerously_allow_all) to CFG. 0, -EINVAL
 * with the reason in err, or -ENOMEM. */
int shk__eg_config_add_domain(shk__eg_config *cfg, const char *pat, shk_egress_verdict v,
                              shk_error *err);
void shk__eg_config_free(shk__eg_config *cfg);

/* A limit field the configuration file does not set. */
#define SHK__LIMIT_UNSET UINT_MAX
/* The largest DNS pool (shk_egress_limits.dns_names). */
#define SHK__DNS_POOL_MAX 65536u
/* The limits in force: for each field the file's value where it gives one,
 * else the caller's where it is nonzero, else the default (see
 * shinken/egress.h). OPTS may be NULL. */
void shk__eg_limits_resolve(const shk_egress_limits *file, const shk_egress_limits *opts,
                            shk_egress_limits *out);

typedef struct shk__decision {
  shk_egress_verdict verdict; /* the join over every matching rule */
  const char *rule;           /* the text of the rule that decided, or NULL */
} shk__decision;

/* Decides a canonical host and port (0 for a DNS query, see policy.c)
 * against the rules: names against the
 * domain rules, IP literals against the cidr rules (and a bare "*"). The
 * result is the join of every match in None < Allow < Deny, so a deny
 * always wins and no match at all is None, which callers treat as a
 * refusal. */
void shk__eg_decide(const shk__eg_config *cfg, const shk_host *host, uint16_t port,
                    shk__decision *d);
/* The check every address goes through before it is used (resolved,
 * pinned or literal): a "deny" cidr rule refuses it ("policy-deny-cidr"),
 * and so does a non-public class unless allow_private_cidrs opts it in.
 * NULL when IP may be dialed, else the reason token. */
const char *shk__eg_ip_blocked(const shk__eg_config *cfg, const shk_ip *ip);
/* The pinned addresses of a canonical name, or NULL. */
const shk__pin *shk__eg_pin_find(const shk__eg_config *cfg, const char *host);

/* ---------------------------------------------------------------------------
 * HTTP request heads (http.c)
 */

#define SHK__HTTP_HEAD_MAX 16384

typedef struct shk__http_req {
  bool is_connect;
  shk_host host;
  uint16_t port;
  size_t head_len;       /* bytes of BUF the head occupied */
  uint64_t content_length; /* request body bytes that follow the head */
  bool chunked;          /* the body is "Transfer-Encoding: chunked" instead */
  /* The head to send upstream (absolute-form requests only): origin-form
   * request line, hop-by-hop headers and Proxy-Authorization removed,
   * "Connection: close" added. Malloc'd; free with shk__http_req_free. */
  char *upstream;
  size_t upstream_len;
} shk__http_req;

typedef struct shk__http_refusal {
  int status;         /* 400, 405, 411, 431, 501, ... */
  const char *reason; /* token */
} shk__http_refusal;

/* Parses a proxy request head from the first LEN bytes of BUF. Returns 1
 * when a complete head was parsed into REQ, 0 when more bytes are needed
 * (and the head is still shorter than SHK__HTTP_HEAD_MAX), -1 when the
 * request is refused (REF says why and with which status). Only
 * absolute-form http:// requests and CONNECT are accepted; smuggling shapes
 * (two Content-Length, Content-Length with Transfer-Encoding, obs-fold,
 * bare LF, whitespace before ':') are refused, and the Host header must
 * name the same host and port as the target. */
int shk__http_parse_head(const char *buf, size_t len, shk__http_req *req,
                         shk__http_refusal *ref);
void shk__http_req_free(shk__http_req *req);
/* The reason phrase of an HTTP status the proxy answers with ("Error" for
 * any other), for its own responses on both paths. */
const char *shk__http_status_text(int status);

/* A chunked request body, framed strictly: hex sizes without extensions,
 * CRLF everywhere, no trailers. The proxy forwards exactly the bytes of
 * the body, so nothing after its last chunk can ride along. */
typedef struct shk__chunked {
  int state;
  uint64_t size;
  unsigned digits;
} shk__chunked;
/* Feeds LEN bytes. Returns how many of them belong to the body (all of
 * them, until the last chunk ends), or -1 for malformed framing (*reason
 * set). */
long shk__chunked_feed(shk__chunked *c, const char *buf, size_t len, const char **reason);
/* Whether the body has ended. */
bool shk__chunked_done(const shk__chunked *c);

/* ---------------------------------------------------------------------------
 * SOCKS5 (socks5.c), RFC 1928, no authentication
 */

enum {
  SHK__SOCKS5_OK = 0x00,
  SHK__SOCKS5_FAILURE = 0x01,
  SHK__SOCKS5_NOT_ALLOWED = 0x02,
  SHK__SOCKS5_NET_UNREACH = 0x03,
  SHK__SOCKS5_HOST_UNREACH = 0x04,
  SHK__SOCKS5_REFUSED = 0x05,
  SHK__SOCKS5_TTL = 0x06,
  SHK__SOCKS5_CMD_UNSUPPORTED = 0x07,
  SHK__SOCKS5_ATYP_UNSUPPORTED = 0x08,
};

/* The greeting: VER NMETHODS METHODS. Returns the byte count consumed (>0)
 * when the client offers "no authentication", 0 when more bytes are needed,
 * -1 when it is malformed or does not offer method 0 (*reason set). */
int shk__socks5_parse_greeting(const uint8_t *buf, size_t len, const char **reason);

typedef struct shk__socks5_req {
  shk_host host;
  uint16_t port;
} shk__socks5_req;

/* The request: VER CMD RSV ATYP ADDR PORT. Returns the byte count consumed
 * (>0) for a well-formed CONNECT, 0 when more bytes are needed, -1 when
 * refused: *reply is the SOCKS5 reply code to send and *reason the token.
 * BIND and UDP ASSOCIATE are refused with "command not supported". */
int shk__socks5_parse_request(const uint8_t *buf, size_t len, shk__socks5_req *req,
                              uint8_t *reply, const char **reason);

/* ---------------------------------------------------------------------------
 * DNS messages for the stub resolver (dns.c)
 */

typedef struct shk__dns_query {
  uint16_t id;
  bool rd;           /* recursion desired, echoed in the reply */
  uint16_t qtype;    /* 1 A, 28 AAAA; anything else is answered REFUSED */
  size_t question_len; /* bytes of the question section, to echo back */
  const uint8_t *question;
  shk_host host; /* valid when name_ok */
  bool name_ok;
} shk__dns_query;

/* Parses a query (exactly one question, class IN, opcode QUERY, QR 0).
 * Returns NULL or a reason token for a message that cannot even be answered
 * REFUSED (too short, not a query), in which case it is dropped. */
const char *shk__dns_parse_query(const uint8_t *msg, size_t len, shk__dns_query *q);
/* Builds the response to Q into OUT (at least 512 bytes of CAP): RCODE
 * REFUSED when ips is NULL, else one answer per address of Q's type.
 * Returns the length, or 0 if it does not fit. */
size_t shk__dns_build_reply(const shk__dns_query *q, const shk_ip *ips, size_t n_ips,
                            uint8_t *out, size_t cap);

/* ---------------------------------------------------------------------------
 * The DNS stub's synthetic address pool (pool.c)
 */

/* The names a session's DNS stub handed out addresses for, at most CAP
 * (1 to SHK__DNS_POOL_MAX), least recently used first out. SEED randomizes
 * the hash. NULL when out of memory or for a bad CAP. */
typedef struct shk__dns_pool shk__dns_pool;
shk__dns_pool *shk__dns_pool_new(unsigned cap, uint64_t seed);
void shk__dns_pool_free(shk__dns_pool *p);
/* The index of NAME (canonical), added if it is new; -ENOMEM, -EINVAL. */
int shk__dns_pool_get(shk__dns_pool *p, const char *name, uint32_t *index);
/* The name INDEX was handed out for, or NULL when it is unknown or was
 * forgotten. Counts as a use of the name. */
const char *shk__dns_pool_name(shk__dns_pool *p, uint32_t index);
unsigned shk__dns_pool_size(const shk__dns_pool *p);
/* The address of INDEX in FAMILY (4 or 6). */
void shk__dns_pool_address(uint32_t index, int family, shk_ip *out);
/* Whether IP is in the pool's ranges; *index is then its index (0, which
 * names nothing, for an address of the ranges that is never handed out). */
bool shk__dns_pool_index(const shk_ip *ip, uint32_t *index);

/* ---------------------------------------------------------------------------
 * What a refused client reads (refusal.c)
 */

typedef struct shk__eg_refusal {
  const char *reason; /* the token */
  const char *host;   /* canonical, or NULL */
  uint16_t port;      /* 0 for a DNS lookup */
  const char *rule;   /* what decided, or NULL */
  bool rule_is_config; /* the rule is the administrator's (the file's) */
  unsigned limit;     /* for a session-*-limit refusal */
} shk__eg_refusal;
/* The proxy's own text for a refusal, one paragraph for an agent: what was
 * refused, why, and whether trying again can help. As snprintf. */
size_t shk__eg_refusal_text(const shk__eg_refusal *r, char *out, size_t cap);

/* ---------------------------------------------------------------------------
 * The server (server.c, tunnel.c): listeners, connections, resolution,
 * audit. Not pure; lives on one libevent loop.
 */

struct event_base;
typedef struct shk__eg_server shk__eg_server;

/* A relay between two connected sockets (tunnel.c). Bytes move with
 * splice(2) through a pipe per direction, never through a userspace
 * buffer; only PRE (bytes that arrived with the handshake, or the proxy's
 * own reply) is written from memory, before anything else in its
 * direction. The client-to-upstream direction stops after C2U_LIMIT bytes
 * (UINT64_MAX: no limit). DONE runs once, when the relay has finished or
 * failed; the caller then frees it. */
typedef struct shk__relay shk__relay;
typedef struct shk__relay_opts {
  int client_fd, up_fd; /* owned by the relay from now on */
  char *c2u_pre;        /* malloc'd or NULL; owned by the relay */
  size_t c2u_pre_len;
  uint64_t c2u_limit;
  /* Plain HTTP with a chunked body: the request ends where its framing
   * says; those bytes go through userspace to be read. */
  bool c2u_chunked;
  shk__chunked chunk;
  /* Plain HTTP: the request ends at C2U_LIMIT and the relay ends with the
   * response, without half-closing the origin. Tunnels: each side's EOF is
   * passed on, and the relay ends when both directions have. */
  bool http;
  char *u2c_pre;
  size_t u2c_pre_len;
  void (*done)(void *arg);
  void *arg;
} shk__relay_opts;
shk__relay *shk__relay_new(struct event_base *base, const shk__relay_opts *o);
/* Closes both sockets. */
void shk__relay_free(shk__relay *r);

/* The server (server.c): listeners, connections, resolution, audit. */
typedef enum shk__eg_listener_kind {
  SHK__LISTEN_HTTP = 1,
  SHK__LISTEN_SOCKS5,
  SHK__LISTEN_DNS, /* DNS over a stream, each message with a 2-byte length */
} shk__eg_listener_kind;

typedef struct shk__eg_server_opts {
  const char *name; /* session name for audit lines */
  shk_egress_hook_fn hook;
  void *hook_data;
  /* Every verdict (shk_egress_session_opts.on_verdict), called with
   * verdict_data; NULL: none recorded. */
  int (*on_verdict)(void *data, const shk_egress_verdict_info *v);
  void *verdict_data;
  const shk_egress_limits *limits; /* the caller's; NULL: the defaults */
  void (*on_abandon)(void *hook_data, const char *session, uint64_t conn_id);
  bool dns_pool; /* answer DNS from the synthetic pool (a session's stub) */
  /* Inspection (see shk_egress_session_opts): the CA, borrowed (it must
   * outlive the server; NULL: none), the rewrite hook (called with
   * hook_data), the upstreams' trust bundle (NULL: the system's). */
  struct shk__eg_ca *ca;
  shk_egress_rewrite_fn rewrite;
  const char *upstream_ca;
} shk__eg_server_opts;

/* Creates a server on BASE with CFG, which it owns from now on (and frees
 * when it fails). -EINVAL (no DNS resolver could be set up) or -ENOMEM. */
int shk__eg_server_new(struct event_base *base, shk__eg_config *cfg,
                       const shk__eg_server_opts *o, shk__eg_server **out, shk_error *err);
/* Listens on a TCP address; writes the bound "ADDR:PORT" into bound. */
int shk__eg_server_listen_tcp(shk__eg_server *s, shk__eg_listener_kind kind,
                              const struct sockaddr *sa, socklen_t sl, char *bound,
                              size_t boundlen);
/* Listens on a unix socket at PATH (mode 0600). */
int shk__eg_server_listen_unix(shk__eg_server *s, shk__eg_listener_kind kind, const char *path);
/* Replaces the policy (CFG owned from now on, freed when it fails); it
 * applies from the next connection. Resolver settings are rebuilt. */
int shk__eg_server_set_config(shk__eg_server *s, shk__eg_config *cfg, shk_error *err);
/* Closes the tunnels whose hook tag is TAG (all when 0), and the
 * connections with that tag still being set up; held connections are left
 * alone. Loop thread only. */
int shk__eg_server_close_tunnels(shk__eg_server *s, uint64_t tag);
/* The number of tunnels with tag TAG (all when 0) open now. Any thread. */
int shk__eg_server_tunnel_count(shk__eg_server *s, uint64_t tag);
/* Takes connection ID off the held set, so that exactly one resume goes
 * on with it: 0, or -ENOENT when it is not held. Any thread. */
int shk__eg_server_claim_held(shk__eg_server *s, uint64_t id);
/* Goes on with a claimed held connection (see shk_egress_session_resume);
 * owns RULE and REASON (malloc'd or NULL) from now on. Nothing happens when
 * the connection has gone meanwhile. Loop thread only. */
void shk__eg_server_resume(shk__eg_server *s, uint64_t id, shk_egress_verdict v, uint64_t tag,
                           unsigned flags, char *rule, char *reason);
/* Closes every listener and connection. */
void shk__eg_server_free(shk__eg_server *s);

/* ---------------------------------------------------------------------------
 * Inspection: the CA (ca.c), HTTP/1.1 on an inspected connection (http.c)
 * and the inspecting relay (mitm.c)
 */

typedef struct x509_st X509;
typedef struct evp_pkey_st EVP_PKEY;

/* Leaves a CA object keeps (least recently used out). */
#define SHK__EG_LEAF_CACHE 256

typedef struct shk__eg_ca shk__eg_ca;
/* Loads DIR/ca.pem (the key and the certificate), or creates it with a new
 * P-256 key when there is none (DIR made 0700, the file 0600). -EPERM for
 * a file or directory another user could have written or read, -EINVAL
 * for a file that is not a key and its certificate, or the errno of what
 * failed, with one sentence in err. */
int shk__eg_ca_open(const char *dir, shk__eg_ca **out, shk_error *err);
/* The CA's certificate, PEM. */
const char *shk__eg_ca_pem(const shk__eg_ca *ca);
X509 *shk__eg_ca_cert(const shk__eg_ca *ca);
/* The one key of every leaf this object mints. */
EVP_PKEY *shk__eg_ca_leaf_key(const shk__eg_ca *ca);
/* The leaf for HOST (subjectAltName exactly HOST: DNS for a name, IP for
 * an address; valid a day), from the cache or minted now. Borrowed: valid
 * until the next call. NULL when out of memory. */
X509 *shk__eg_ca_leaf(shk__eg_ca *ca, const shk_host *host);
/* Leaves signed so far, and leaves in the cache. */
unsigned long shk__eg_ca_minted(const shk__eg_ca *ca);
size_t shk__eg_ca_cached(const shk__eg_ca *ca);
void shk__eg_ca_free(shk__eg_ca *ca);
/* Writes the sandbox's trust files into DIR (new, 0644): SHK_EGRESS_CA_BUNDLE,
 * the system's bundle followed by the CA's certificate, and
 * SHK_EGRESS_JAVA_STORE, the same certificates for Java. Both are built
 * once per CA and system bundle and kept in the CA's directory: the Java
 * store costs tens of milliseconds to build, which no session's start
 * should pay. 0 or a negative errno with err. */
int shk__eg_ca_trust_files(const shk__eg_ca *ca, const char *dir, shk_error *err);
/* Writes OUT (0644, new) as a PKCS#12 trust store for Java holding every
 * certificate of the PEM file BUNDLE as a trusted entry, its MAC keyed
 * with SHK_EGRESS_JAVA_STORE_PASSWORD. 0 or a negative errno with err. */
int shk__eg_java_store_write(const char *bundle, const char *out, shk_error *err);

#define SHK__HTTP_MAX_HEADERS 100

/* One request head on an inspected connection: origin-form ("/path") or
 * asterisk-form ("*", OPTIONS only). The slices point into the buffer
 * parsed. */
typedef struct shk__http_origin_req {
  char method[17];
  const char *target;
  size_t target_len;
  bool http10;
  size_t head_len;
  /* The end-to-end headers as the client sent them: hop-by-hop ones, Host,
   * Content-Length and Transfer-Encoding are the proxy's and not here. */
  shk_egress_header headers[SHK__HTTP_MAX_HEADERS];
  size_t n_headers;
  uint64_t content_length;
  bool chunked;
  bool close; /* the client ends the connection after this exchange */
} shk__http_origin_req;
/* Parses a request head from BUF for the granted HOST and PORT (whose
 * scheme's port is DEFAULT_PORT): 1 when complete, 0 when more is needed,
 * -1 when refused (REF). Besides the smuggling shapes the proxy's own
 * parser refuses, a Host that does not name HOST:PORT, a missing Host, an
 * Upgrade (what follows could not be read) and a target in another form
 * are refused. */
int shk__http_parse_origin(const char *buf, size_t len, const shk_host *host, uint16_t port,
                           uint16_t default_port, shk__http_origin_req *req,
                           shk__http_refusal *ref);
/* The head to send upstream for REQ with the header list H (the client's
 * or the rewrite hook's): REQ's request line, Host for HOST:PORT, REQ's
 * framing, and H without any header that is the proxy's (hop-by-hop, Host,
 * framing), so a rewrite cannot change how the body is delimited.
 * Malloc'd into *out; -ENOMEM, or -E2BIG when the head would hold more
 * than SHK__HTTP_MAX_HEADERS fields (the proxy's own parser's limit). */
int shk__http_build_origin(const shk__http_origin_req *req, const shk_host *host, uint16_t port,
                           uint16_t default_port, const shk_egress_header *h, size_t n,
                           char **out, size_t *out_len);

/* A response head from the upstream of an inspected connection. */
typedef struct shk__http_resp {
  int status;
  size_t head_len;
  bool chunked;
  bool has_length;
  uint64_t content_length;
  bool close; /* the upstream ends the connection after it */
} shk__http_resp;
/* Parses a response head (HTTP/1.x) to a request with method METHOD: 1
 * complete, 0 more needed, -1 refused (*reason). Two lengths, a length with
 * a transfer coding and codings other than chunked are refused: the body's
 * end must be known exactly, or be the connection's. */
int shk__http_parse_response(const char *buf, size_t len, const char *method,
                             shk__http_resp *resp, const char **reason);
/* Whether a response of status STATUS to METHOD has a body at all. */
bool shk__http_resp_has_body(const char *method, int status);

typedef struct ssl_ctx_st SSL_CTX;

/* The TLS contexts of a session's inspected connections: the server side
 * (TLS 1.2 and up, ALPN http/1.1 only, SNI checked against the granted
 * name) and the client side, which verifies upstreams against UPSTREAM_CA
 * (a PEM bundle) or, when NULL, the system's trust store. -EINVAL for a
 * bundle that cannot be read, -ENOMEM. */
int shk__mitm_contexts(const char *upstream_ca, SSL_CTX **server, SSL_CTX **client,
                       shk_error *err);

/* One exchange (or refusal) on an inspected connection, for the audit. */
typedef struct shk__mitm_record {
  const char *decision; /* allow, deny, error */
  const char *reason;
  const char *method; /* NULL before a request was read */
  int status;         /* the response's status, or what the proxy answered; 0: none */
  uint64_t bytes;     /* response body bytes relayed */
  uint64_t duration_us;
} shk__mitm_record;

typedef struct shk__mitm shk__mitm;
/* A session's cache of upstream TLS sessions (mitm.c), for resumption;
 * bounded. Loop thread only. NULL when out of memory. */
typedef struct shk__mitm_sessions shk__mitm_sessions;
shk__mitm_sessions *shk__mitm_sessions_new(void);
void shk__mitm_sessions_free(shk__mitm_sessions *c);
typedef struct shk__mitm_opts {
  int client_fd, up_fd; /* connected; owned by the relay from now on */
  shk_host host;        /* the granted destination */
  uint16_t port;
  unsigned flags;       /* SHK_EGRESS_INSPECT, SHK_EGRESS_LIMITED */
  SSL_CTX *server_ctx, *client_ctx;
  shk__mitm_sessions *sessions; /* of CLIENT_CTX's upstreams; may be NULL */
  X509 *leaf;           /* for HOST; the relay takes its own reference */
  EVP_PKEY *leaf_key;
  const char *session;
  uint64_t conn_id, tag;
  shk_egress_rewrite_fn rewrite;
  void *rewrite_data;
  void (*record)(void *arg, const shk__mitm_record *r);
  void (*done)(void *arg); /* once, when the connection has ended; then free it */
  void *arg;
} shk__mitm_opts;
/* Starts both handshakes. NULL when out of memory (both sockets closed). */
shk__mitm *shk__mitm_new(struct event_base *base, const shk__mitm_opts *o);
/* Closes both sides. */
void shk__mitm_free(shk__mitm *m);
