/* SPDX-License-Identifier: Apache-2.0 */
/* Shinken egress: the HTTP + SOCKS5 proxy and DNS stub that stand between a
 * sandbox and the network.
 *
 * Two sides use this header:
 *
 *  - the launcher (outside the sandbox) opens a session: the proxy runs on a
 *    background thread and serves three unix sockets, http.sock, socks5.sock
 *    and dns.sock, in a private 0700 directory. The socket a connection
 *    arrives on is the session's identity: nothing the workload sends can
 *    claim another.
 *  - stage 2 (inside the sandbox's network namespace, before the workload
 *    starts) bridges 127.0.0.1:3128 (HTTP proxy), 127.0.0.1:1080 (SOCKS5)
 *    and 127.0.0.1:53 (DNS, UDP and TCP) to those sockets and sets the proxy
 *    variables in the environment.
 *
 * Every function returns 0 or a negative errno (the set of shinken/common.h,
 * and the errno of a system call that failed underneath); none exits or
 * prints, out of memory included. Hosts, patterns and ranges are read with
 * the shared grammar of shinken/match.h. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shinken/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a connection asks for. */
typedef enum shk_egress_proto {
  SHK_EGRESS_HTTP = 1, /* an absolute-form HTTP request */
  SHK_EGRESS_CONNECT,  /* an HTTP CONNECT tunnel */
  SHK_EGRESS_SOCKS5,   /* a SOCKS5 CONNECT tunnel */
  SHK_EGRESS_DNS,      /* an A or AAAA query to the stub resolver */
} shk_egress_proto;

/* The verdicts of the policy lattice None < Allow < Deny: the hook's
 * answer, and every rule's verdict inside the proxy. HOLD is the hook's
 * alone and stands outside the lattice: "ask a human first" (see
 * shk_egress_session_resume). */
typedef enum shk_egress_verdict {
  SHK_EGRESS_NONE = 0,  /* no opinion */
  SHK_EGRESS_ALLOW = 1,
  SHK_EGRESS_DENY = 2,
  SHK_EGRESS_HOLD = 3,
} shk_egress_verdict;

/* One new connection (or DNS query), as the decision hook sees it. host is
 * canonical: a lowercase DNS name without trailing dot, a dotted-quad IPv4
 * address or an IPv6 address without brackets. */
typedef struct shk_egress_request {
  const char *session; /* the session's name (shk_egress_session_opts.name) */
  shk_egress_proto proto;
  const char *host;
  uint16_t port; /* 0 for SHK_EGRESS_DNS */
  uint64_t conn_id; /* unique per connection within a session */
  /* Where the hook may leave the text a refused client reads (the body of
   * the 403, and the audit line's "message"): one short paragraph written
   * for an agent, copied before the hook returns' caller goes on. Leave it
   * NULL for the proxy's own text. */
  const char **message;
  /* The synthetic address the connection was made to, when the workload
   * looked the name up in the DNS stub first and connected to the answer
   * (host is then the name it was handed out for); NULL otherwise. */
  const char *via;
  /* What the configured rules say: SHK_EGRESS_NONE or SHK_EGRESS_ALLOW
   * (the hook is not asked about what they deny). A hook that would ask a
   * human about a destination the configuration already allows should not:
   * the operator allowed it. */
  shk_egress_verdict configured;
  /* Where the hook says how an allowed connection is carried (a mask of
   * SHK_EGRESS_INSPECT and SHK_EGRESS_LIMITED; 0, a plain tunnel, unless
   * the hook sets it). NULL for SHK_EGRESS_DNS. */
  unsigned *flags;
} shk_egress_request;

/* The proxy terminates the client's TLS with a leaf certificate minted for
 * the requested name from the manager's CA, dials the upstream with TLS of
 * its own (verified against the system's trust store or the configured
 * upstream_ca) and reads every request in between. A connection that must
 * be inspected and cannot be fails: it never falls back to a tunnel. */
#define SHK_EGRESS_INSPECT 0x1u
/* With SHK_EGRESS_INSPECT (or on plain HTTP): only GET, HEAD and OPTIONS
 * pass; any other method is refused with 403 and the reason. */
#define SHK_EGRESS_LIMITED 0x2u

/* One header of a request, as the client sent it (NAME without the colon,
 * VALUE without surrounding whitespace). Not NUL-terminated. */
typedef struct shk_egress_header {
  const char *name;
  size_t name_len;
  const char *value;
  size_t value_len;
} shk_egress_header;

/* One request on an inspected connection (or a plain-HTTP request), as
 * the rewrite hook sees it: the same for HTTP/1.1 and HTTP/2 (whose
 * pseudo-headers are not in the list; authority is :authority or Host). */
typedef struct shk_egress_http_request {
  const char *session;
  uint64_t conn_id;
  uint64_t tag;    /* the tag the decision hook gave the connection */
  const char *host; /* the granted destination, canonical */
  uint16_t port;
  bool tls;         /* false for a plain-HTTP request */
  const char *method; /* NUL-terminated */
  const shk_egress_header *headers;
  size_t n_headers;
  /* The request target as the client sent it in origin form (path and
   * query), TARGET_LEN bytes, not NUL-terminated; NULL when unknown. It
   * is given so that a hook can refuse what the request line carries
   * (a sentinel in a query string); it cannot be rewritten. */
  const char *target;
  size_t target_len;
} shk_egress_http_request;

/* The rewrite hook: called on the proxy's thread for each request before it
 * goes upstream, after the proxy's own checks (authority, method in
 * limited mode). It must not block. It returns 0 and leaves *out NULL to
 * send the headers as they are, or 0 and sets *out to a replacement list
 * of *n_out headers, allocated as ONE block that free() releases (names
 * and values inside it) and that the proxy frees once the request is sent;
 * or a negative errno to refuse the request: 403 with *reason (a static
 * token) in X-Shinken-Decision and the audit, and for -ECONNABORTED the
 * connection is closed as well. */
typedef int (*shk_egress_rewrite_fn)(void *data, const shk_egress_http_request *req,
                                     shk_egress_header **out, size_t *n_out,
                                     const char **reason);

/* The per-connection decision hook: the capability manager plugs its live
 * handle check in here. It runs on the proxy's thread for every new
 * connection and DNS query, after the configured policy, and must not
 * block. Its verdict joins the configured one in None < Allow < Deny: it can
 * allow what the configuration does not mention and deny anything, but it
 * cannot override a configured deny. Whatever both say, non-public
 * addresses stay blocked unless the configuration opts them in.
 *
 * SHK_EGRESS_HOLD (for SHK_EGRESS_HTTP, _CONNECT and _SOCKS5) holds the
 * connection: nothing is sent to the client until
 * shk_egress_session_resume is called with its conn_id. It may hold
 * anything it could deny. For SHK_EGRESS_DNS a lookup is never held: the
 * stub answers from the session's pool of synthetic addresses when the
 * verdict is ALLOW or HOLD (a connection to the name would go out, or be
 * held for a human) and REFUSED otherwise; nothing is looked up upstream
 * for a DNS query, only when a connection the hook admits is dialed.
 *
 * *tag binds the connection to a caller-chosen value (a handle id, say; 0
 * by default) so that shk_egress_session_close_tunnels can later close
 * exactly the tunnels a revoked handle let through. *rule, if set, names
 * what decided, for the audit line (a static or long-lived string). */
typedef shk_egress_verdict (*shk_egress_hook_fn)(void *data, const shk_egress_request *req,
                                                 uint64_t *tag, const char **rule);

/* One verdict of the proxy, as it is recorded: one per decision. decision
 * is "allow" (the upstream connection is made, or a DNS query answered),
 * "deny" (refused), "error" (an allowed destination could not be reached)
 * or "hold" (held for the hook). reason is the proxy's token
 * ("allowed", "policy-no-match", "held-denied", "dns-synthetic", ...); rule
 * what decided (a configured rule's text or the hook's rule), via the
 * synthetic address a connection came through, message the caller's text
 * a refused client read; each may be NULL. Only canonical hosts, addresses,
 * rules and the caller's text: never a path, a query or a header value.
 * Every pointer is valid during the call only. */
typedef struct shk_egress_verdict_info {
  const char *session;
  uint64_t conn_id;
  shk_egress_proto proto;
  const char *host; /* NULL before the request named one (a parse error) */
  uint16_t port;
  const char *decision;
  const char *reason;
  const char *rule;
  const char *via;
  const char *message;
  uint64_t tag; /* the hook's tag (0: none) */
  /* One request on an inspected connection (method non-NULL): its
   * method, the response's status (or the proxy's refusal's; 0: none),
   * the response body's bytes and how long the exchange took. Never its
   * target, a header or a body. */
  const char *method;
  int status;
  uint64_t bytes;
  uint64_t duration_us;
} shk_egress_verdict_info;

/* The verdict as one JSON line (malloc'd, ending in '\n', with the time
 * it was made), as `shinken proxy` writes its audit lines. 0 or -ENOMEM. */
int shk_egress_verdict_json(const shk_egress_verdict_info *v, char **line);

/* Per-session limits: what one sandbox may hold of the process that hosts
 * its proxy, so that no session can starve another or the control plane.
 * Over a limit a new connection is refused at once (HTTP 429, or 503 for
 * the descriptor reserve, with X-Shinken-Decision; SOCKS5 0x02; DNS
 * REFUSED) and the refusal is in the audit line. Zero means the default. */
typedef struct shk_egress_limits {
  /* Open sockets of the session, client and upstream sides counted (a
   * tunnel is two, and holds two pipes besides); default 4096. */
  unsigned connections;
  /* Connections still in their request phase (reading the request,
   * deciding, resolving, dialing); default 128. */
  unsigned setup;
  /* Connections held for the hook (SHK_EGRESS_HOLD); default 64. */
  unsigned held;
  /* A connection in its request phase that sends nothing for this long is
   * closed (slowloris); default 10000 ms. */
  unsigned idle_ms;
  /* The whole request phase, however slowly it trickles; default
   * 30000 ms. */
  unsigned request_ms;
  /* The longest a connection stays held before it is refused (and
   * reported to on_abandon); default 600000 ms. Keep it above the Ask
   * loop's own timeout. */
  unsigned hold_ms;
  /* Descriptors kept free for the rest of the process (the control
   * plane): new connections are refused while fewer would be left;
   * default 256. */
  unsigned fd_reserve;
  /* Names the DNS stub remembers in the session's synthetic address pool
   * (least recently used first out); default 4096, at most 65536. */
  unsigned dns_names;
} shk_egress_limits;

typedef struct shk_egress_session_opts {
  /* The session's name in audit lines; "session" if NULL. */
  const char *name;
  /* Domain patterns (`host`, `*.host`, `**.host`, each with an optional
   * `:port`), as `shinken run --allow-domain/--deny-domain` take them. */
  const char *const *allow_domains;
  size_t n_allow_domains;
  const char *const *deny_domains;
  size_t n_deny_domains;
  /* Optional JSON configuration file (the standalone proxy's format, see
   * shinken-proxy(1)); its listen keys are ignored, its policy is joined
   * with the patterns above. NULL: nothing but the patterns. */
  const char *config_path;
  shk_egress_hook_fn hook; /* may be NULL */
  void *hook_data;
  /* Per-session limits; a zero field takes the default. A value the
   * configuration file's "limits" object gives wins over the field. */
  shk_egress_limits limits;
  /* Called on the proxy's thread when a held connection ends before it
   * was resumed: the client went away, or it was held longer than
   * limits.hold_ms. It must not block; shk_egress_session_resume for that
   * id returns -ENOENT from then on. Not called at session close. May be
   * NULL. */
  void (*on_abandon)(void *hook_data, const char *session, uint64_t conn_id);
  /* Every verdict (see shk_egress_verdict_info), on the proxy's thread:
   * it must not block (the manager hands it to the audit queue). A nonzero
   * return says it was not recorded: an allow is then not given (HTTP 503
   * with X-Shinken-Decision "proxy-audit-refused", SOCKS5 0x01, DNS
   * REFUSED), and a refusal stands (the recorder counts what it lost).
   * May be NULL: nothing is recorded. A configuration file's "audit" key
   * is the standalone proxy's and is refused in a session. */
  int (*on_verdict)(void *hook_data, const shk_egress_verdict_info *v);
  /* Each request on an inspected connection and each plain-HTTP request
   * (see shk_egress_rewrite_fn), called with hook_data; NULL: headers pass
   * as the client sent them. */
  shk_egress_rewrite_fn rewrite;
  /* The directory of the manager's inspection CA (created 0700 on first
   * use; ca.pem in it, 0600, holds the key and the certificate). With it
   * the session can inspect: its directory holds ca-bundle.crt (the
   * system's trust store and the CA), for the sandbox to trust. NULL, or
   * a CA that cannot be read or made (shk_egress_session_ca_error): a
   * connection the hook marks SHK_EGRESS_INSPECT fails. */
  const char *ca_dir;
  /* A PEM bundle the upstreams of inspected connections are verified
   * against instead of the system's trust store (the configuration file's
   * "upstream_ca" wins over it). NULL: the system's. */
  const char *upstream_ca;
} shk_egress_session_opts;

typedef struct shk_egress_session shk_egress_session;

/* Launcher side. Starts the proxy for one session on a background thread
 * and creates a private 0700 directory (under $XDG_RUNTIME_DIR or /tmp)
 * holding http.sock, socks5.sock and dns.sock, and resolv.conf
 * ("nameserver 127.0.0.1", to bind over the sandbox's /etc/resolv.conf so
 * the DNS stub is its resolver). The stub answers A and AAAA queries from
 * the session's own pool of synthetic addresses (198.18.0.0/15 and
 * fd53:686b:6e00::/64, which exist only inside this proxy) and maps a
 * connection to one of them back to its name. Raises the process's soft
 * RLIMIT_NOFILE to its hard limit, once: the limits above, not the
 * descriptor table, are what bound a session. On failure returns a
 * negative errno and fills err (may be NULL) with one sentence: -EINVAL
 * for a bad pattern or configuration, -ENOMEM, or the errno of the file,
 * directory, socket or thread that could not be made. */
int shk_egress_session_open(const shk_egress_session_opts *opts, shk_egress_session **out,
                            shk_error *err);
/* The directory holding the three sockets. */
const char *shk_egress_session_dir(const shk_egress_session *s);
/* The file of the session directory holding the sandbox's trust store
 * (the system's bundle and the inspection CA), when the session has a CA;
 * and the path the sandbox sees it at, in place of the system's. */
#define SHK_EGRESS_CA_BUNDLE "ca-bundle.crt"
#define SHK_EGRESS_SYSTEM_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
/* The same certificates as a PKCS#12 trust store for Java, which reads no
 * PEM bundle; the sandbox sees it read-only in its egress directory. Its
 * password only keys the store's checksum (the contents are public), so
 * it is Java's own well-known one. */
#define SHK_EGRESS_JAVA_STORE "ca-truststore.p12"
#define SHK_EGRESS_JAVA_STORE_PASSWORD "changeit"
/* The session directory's socket for privileged commands (`sudo` inside):
 * the session's manager listens on it, and the bridge inside the sandbox
 * leads 127.0.0.1:SHK_EGRESS_SUDO_PORT to it. */
#define SHK_EGRESS_SUDO_SOCK "sudo.sock"
#define SHK_EGRESS_SUDO_PORT 3130
/* The inspection CA's certificate (PEM), or NULL without ca_dir. */
const char *shk_egress_session_ca_pem(const shk_egress_session *s);
/* Why the session has no CA though ca_dir was given (one sentence: the
 * directory or file could not be made, or is not safe to use), or NULL.
 * Such a session opens, and its inspected connections fail. */
const char *shk_egress_session_ca_error(const shk_egress_session *s);
/* Closes the tunnels of S whose hook tag equals TAG (every tunnel when TAG
 * is 0), and every connection with that tag still being set up. Safe from
 * any thread, including from inside the hook, and never waits for the
 * proxy's thread: it hands the work to the proxy's loop and returns at
 * once, with the number of tunnels of that tag open at the moment of the
 * call (or -ENOMEM). They close shortly after. Call it after the handle is
 * dead in the hook's eyes: from that moment no new connection gets the
 * tag, because the hook refuses it, so nothing the hook admitted is left
 * open. Held connections are not tunnels and are left to resume. */
int shk_egress_session_close_tunnels(shk_egress_session *s, uint64_t tag);
/* Releases a connection the hook held (SHK_EGRESS_HOLD): VERDICT is
 * SHK_EGRESS_ALLOW (the connection goes on on the same client connection
 * as if the hook had allowed it, tagged TAG, with RULE in its audit line:
 * resolve, dial, then 200, SOCKS5 success or the forwarded request) or
 * SHK_EGRESS_DENY (the client is refused: 403 with X-Shinken-Decision
 * "held-denied" and REASON as the body, or SOCKS5 0x02, with REASON in the
 * audit line; NULL REASON gives the proxy's own text). RULE and REASON are
 * copied. Safe from any thread, never blocks (the work is done on the
 * proxy's loop). Returns 0, -ENOENT when CONN_ID is not held (unknown,
 * already resumed, abandoned, or timed out), -EINVAL for another verdict,
 * or -ENOMEM. */
int shk_egress_session_resume(shk_egress_session *s, uint64_t conn_id, shk_egress_verdict verdict,
                              uint64_t tag, const char *rule, const char *reason);
/* shk_egress_session_resume with FLAGS (SHK_EGRESS_INSPECT,
 * SHK_EGRESS_LIMITED) for an allowed connection: how it is carried, as the
 * decision hook's *req->flags says for a connection it allows at once. */
int shk_egress_session_resume_flags(shk_egress_session *s, uint64_t conn_id,
                                    shk_egress_verdict verdict, uint64_t tag, unsigned flags,
                                    const char *rule, const char *reason);
/* Stops the proxy, closes every connection (open tunnels included; a held
 * connection is refused first: 403 "session-closed", SOCKS5 0x02),
 * removes the sockets and the directory, frees S. NULL is a no-op. */
void shk_egress_session_close(shk_egress_session *s);

/* Stage-2 side. Inside the new network namespace: brings lo up, binds
 * 127.0.0.1:3128 and :1080 (TCP) and :53 (UDP and TCP), and forks a
 * non-dumpable helper that relays them to the sockets in DIR. Returns once
 * every listener is bound, so the workload can connect at once. The helper
 * dies with its parent. */
int shk_egress_bridge_start(const char *dir);
/* Sets the proxy variables (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY in both
 * cases, NO_PROXY limited to loopback, and the tool-specific keys of npm,
 * yarn, pip, git, cargo, docker, Java/Gradle, Node, gRPC, rsync and the
 * cloud SDKs), overriding whatever was set. */
int shk_egress_apply_env(void);
/* Points the trust-store variables of the common runtimes (SSL_CERT_FILE,
 * NODE_EXTRA_CA_CERTS, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, GIT_SSL_CAINFO,
 * PIP_CERT, npm_config_cafile) at BUNDLE, overriding whatever was set:
 * stage 2 does it when the session can inspect. */
int shk_egress_apply_ca_env(const char *bundle);
/* Adds the trust-store options (-Djavax.net.ssl.trustStore=STORE, its
 * type PKCS12 and its password) after the caller's own in
 * JAVA_TOOL_OPTIONS, GRADLE_OPTS and MAVEN_OPTS: stage 2 does it when the
 * session can inspect. */
int shk_egress_apply_java_trust(const char *store);

#ifdef __cplusplus
}
#endif
