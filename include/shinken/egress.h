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
 * answer, and every rule's verdict inside the proxy. */
typedef enum shk_egress_verdict {
  SHK_EGRESS_NONE = 0,  /* no opinion */
  SHK_EGRESS_ALLOW = 1,
  SHK_EGRESS_DENY = 2,
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
} shk_egress_request;

/* The per-connection decision hook: the capability manager plugs its live
 * handle check in here. It runs on the proxy's thread for every new
 * connection and DNS query, after the configured policy, and must not
 * block. Its verdict joins the configured one in None < Allow < Deny: it can
 * allow what the configuration does not mention and deny anything, but it
 * cannot override a configured deny. Whatever both say, non-public
 * addresses stay blocked unless the configuration opts them in.
 *
 * *tag binds the connection to a caller-chosen value (a handle id, say; 0
 * by default) so that shk_egress_session_close_tunnels can later close
 * exactly the tunnels a revoked handle let through. *rule, if set, names
 * what decided, for the audit line (a static or long-lived string). */
typedef shk_egress_verdict (*shk_egress_hook_fn)(void *data, const shk_egress_request *req,
                                                 uint64_t *tag, const char **rule);

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
  /* Where audit lines go: an open descriptor (not closed by the session),
   * or -1 for none. The config's "audit" key, if any, wins. */
  int audit_fd;
  shk_egress_hook_fn hook; /* may be NULL */
  void *hook_data;
} shk_egress_session_opts;

typedef struct shk_egress_session shk_egress_session;

/* Launcher side. Starts the proxy for one session on a background thread
 * and creates a private 0700 directory (under $XDG_RUNTIME_DIR or /tmp)
 * holding http.sock, socks5.sock and dns.sock, and resolv.conf
 * ("nameserver 127.0.0.1", to bind over the sandbox's /etc/resolv.conf so
 * the DNS stub is its resolver). On failure returns a negative errno and
 * fills err (may be NULL) with one sentence: -EINVAL for a bad pattern or
 * configuration, -ENOMEM, or the errno of the file, directory, socket or
 * thread that could not be made. */
int shk_egress_session_open(const shk_egress_session_opts *opts, shk_egress_session **out,
                            shk_error *err);
/* The directory holding the three sockets. */
const char *shk_egress_session_dir(const shk_egress_session *s);
/* Closes the tunnels of S whose hook tag equals TAG (every tunnel when TAG
 * is 0) and returns how many it closed. Safe from any thread, including
 * from inside the hook; returns once they are closed. */
int shk_egress_session_close_tunnels(shk_egress_session *s, uint64_t tag);
/* Stops the proxy, closes every connection (open tunnels included),
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

#ifdef __cplusplus
}
#endif
