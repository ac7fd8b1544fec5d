/* SPDX-License-Identifier: Apache-2.0 */
/* Shinken's capability manager: sessions, grants, pending requests,
 * revocation, events, and the control API on a unix socket.
 *
 * The manager lives outside every sandbox. It runs either as `shinken
 * daemon` or embedded in `shinken run` for the life of one command. The
 * egress proxy of each session asks it on every new connection whether a
 * live handle covers the destination; nothing is cached. Every grant,
 * standing grant and request to turn a layer off is decided by
 * shk_policy_decide (shinken/policy.h).
 *
 * The control API speaks JSON text; no third-party type crosses this
 * header. */
#ifndef SHINKEN_MANAGER_H
#define SHINKEN_MANAGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shinken/approve.h"
#include "shinken/cap.h"
#include "shinken/common.h"
#include "shinken/egress.h"
#include "shinken/policy.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct shk_manager shk_manager;

typedef struct shk_manager_opts {
  const char *policy_dir;     /* schema.cedarschema, admin.cedar, project.cedar */
  const char *session_policy; /* optional file of session-tier (forbid) policies */
  const char *standing;       /* optional file of standing grants (admin): a JSON
                               * array of {"class", "scope"} every session gets,
                               * each still decided by the policy */
  const char *manifest;       /* the image manifest (JSON file) */
  const char *exec_path;      /* the human's $PATH (colon-separated), for the
                               * rule on writes into it; NULL: none */
  /* The authority timeline (shinken/audit.h): the store this manager's one
   * writer appends every event to. NULL: no store (an embedder that keeps
   * no log); the events are still built, and nothing is refused for them. */
  const char *audit_db;
  /* Also given every verdict of the sessions' proxies, on a proxy's thread
   * (it must not block, nor call the manager); NULL: none. For an embedder
   * that tells its user what was refused (shinken run). */
  int (*on_verdict)(void *data, const shk_egress_verdict_info *v);
  void *verdict_data;
  unsigned audit_checkpoint_events; /* 0: the audit module's default */
  unsigned audit_checkpoint_ms;     /* 0: the audit module's default */
  /* With audit_db: the signing key (NULL: audit.key beside audit_db), and
   * the name of a log of its own under that key (shk_audit_opts.log_name;
   * NULL: the key's own log). shinken run's embedded manager writes one
   * such log per run. */
  const char *audit_key;
  const char *audit_log_name;
  /* The control socket this manager serves or will serve. No session may
   * have it, or its directory, inside a writable root; NULL: checked once
   * shk_manager_serve names it. */
  const char *socket;
  /* Per session: how many grant requests may wait for a human at once
   * (0: 64), and how long one waits before it times out (0: 120000 ms). */
  unsigned max_pending;
  int64_t pending_timeout_ms;
  /* The Ask loop's cards (shinken/approve.h), for the connections a
   * session's proxy holds for a human: how long a card waits before it
   * times out and its held connections are refused (0: 120000 ms), and the
   * window in which the same request joins an open card (0: 300 ms). */
  int64_t card_timeout_ms;
  int64_t batch_window_ms;
  /* The control server (shk_manager_serve): connections in all (0: 1024)
   * and per peer uid (0: 512); how long a connection that owns no session
   * may send nothing before it is closed (0: 30000 ms); how many bytes of
   * answers a client may leave unread before it is dropped (0: 1 MiB); how
   * many descriptors the server keeps free for its clients' requests: a new
   * client is refused when fewer are left (0: 64). */
  unsigned control_max_clients;
  unsigned control_max_per_uid;
  int64_t control_idle_ms;
  size_t control_max_output;
  unsigned control_fd_reserve;
  const char *state_dir;      /* where the accepted project and session tiers
                               * are recorded, so that a wider one is refused
                               * (shk_policy_source.state_dir); NULL: none */
  bool accept_widening;       /* the operator accepts a wider tier */
  /* Where gpu and peripheral grants find the host's device nodes (absolute;
   * NULL: "/dev"): a node ROOT/REL appears at /dev/REL in the sandbox. */
  const char *device_root;
  /* The Permission Panel's address ("127.0.0.1:PORT" or "[::1]:PORT"; port
   * 0 picks a free one): its embedder serves it with
   * shk_manager_serve_panel. NULL: no panel. */
  const char *panel_listen;
  /* At most this many HTTP connections to the panel at once (0: 64); at the
   * cap a new one closes the oldest that no logged-in browser used. */
  unsigned panel_max_connections;
} shk_manager_opts;

/* The manager's configuration file (JSON), every key optional and an
 * unknown key an error. Strings: "policy_dir", "manifest",
 * "session_policy", "standing", "socket", "audit_db", "state_dir",
 * "device_root".
 * Positive integers: "audit_checkpoint_events", "audit_checkpoint_ms",
 * "max_pending", "pending_timeout_ms", "card_timeout_ms", "batch_window_ms",
 * "control_max_clients",
 * "control_max_clients_per_uid", "control_idle_ms", "control_max_output",
 * "control_fd_reserve" (the fields above). "panel": {"listen": ADDRESS,
 * "max_connections": N}, where ADDRESS must be a loopback one (panel_listen,
 * panel_max_connections). The policy directory comes from
 * the file, else $SHINKEN_POLICY_DIR, else the installed copy (DATADIR/
 * shinken/policies); never from the source tree. Other defaults: the
 * directory's manifests/default.json, the audit store
 * shk_audit_default_path(false) names (NULL when no home is known; the
 * sessions' proxy verdicts are events of the same log),
 * shk_manager_socket_path() (also set as opts.socket), and $PATH for
 * exec_path. path NULL: the defaults alone. -EINVAL (err naming
 * the key) or -ENOMEM. */
typedef struct shk_manager_config {
  shk_manager_opts opts;
  const char *socket;
  void *priv;
} shk_manager_config;

int shk_manager_config_load(const char *path, shk_manager_config *out, shk_error *err);
void shk_manager_config_clear(shk_manager_config *c);

/* Loads the policy (refusing a policy directory or file that anyone but
 * root and this process's user could change: shk_policy_read_file) and the
 * standing grants, opens the audit store, and raises the process's soft
 * RLIMIT_NOFILE to its hard limit (the sessions' proxies and the control
 * server share the process's descriptors). -EINVAL, -EPERM, -ENOENT,
 * -ENOMEM, -EIO, -EBUSY (another process writes the audit store), err
 * saying which file and why. */
int shk_manager_new(const shk_manager_opts *o, shk_manager **out, shk_error *err);
/* Ends every session (revoking its grants and closing its tunnels). */
void shk_manager_free(shk_manager *m);

/* Handles one control request, a JSON object with "op", given as text,
 * and sets *answer to the answer (malloc'd JSON text), an object that
 * always has "ok" and, on refusal, "error". Returns 0, or -ENOMEM (then
 * *answer is NULL). The operations: open_session (its "writable_roots", the
 * absolute paths the sandbox may write, are checked against the control
 * socket), close_session, sessions, grant, grants, revoke, attenuate, taint
 * (a session's exposure: ingested_external, touched_sensitive), resolve (a
 * human's answer to a pending request: {"pending": ID, "resolution":
 * "approve" | "deny"}), decide_layers (may the operator's own run turn off
 * "layers"; "on_command_line": the operator asked for it there).
 * A grant the policy answers "ask" raises a pending request and answers
 * {"ok": false, "decision": "ask", "pending": ID, ...}; only a resolve
 * approves it, recorded with who resolved it. Every event goes to the audit
 * timeline first: an action whose event the timeline cannot take (its
 * queue is full, its writer failed) is refused, except a revoke and a
 * session's end, which always happen. Calls made here (not on the socket)
 * are recorded as the embedding process's. */
int shk_manager_call(shk_manager *m, const char *request, char **answer);

/* The stream of the Ask loop's card events, for an embedder that shows
 * cards to its user (the inline prompt of `shinken run`): one JSON object
 * per line, as shk_approve_subscribe gives them (a "raised" line for each
 * open card first). While any subscriber is there, the manager counts a
 * human surface as connected (a breaker freezes rather than ends). fn runs
 * on whichever thread delivers: it must be short and must not call into the
 * manager (hand the line to a thread of your own). An embedder answers a
 * card with shk_manager_call: {"op": "resolve", "card": ID, "resolution":
 * ..., "surface": "inline"}; "inline" is taken only from the embedding
 * process, or from a control-socket peer that runs this manager's own
 * program (a `shinken run` attached to a daemon). After shk_manager_unsubscribe
 * returns, fn is not running and is never called again. 0, or -ENOMEM
 * (err). */
int shk_manager_subscribe(shk_manager *m, shk_approve_line_fn fn, void *ud, uint64_t *id, shk_error *err);
void shk_manager_unsubscribe(shk_manager *m, uint64_t id);

/* An embedder's freezer for one of its sessions (shinken run: the sandbox
 * it launched), for the Ask loop's take over and breakers: fn(ud, true)
 * stops every process of the session, fn(ud, false) continues them; 0 or a
 * negative errno. It runs with the Ask loop's lock held, so it must not
 * call into the manager. fn NULL removes it. A session without one cannot
 * be taken over, and its breaker ends it instead of freezing it. 0, or
 * -ENOMEM. */
typedef int (*shk_manager_freeze_fn)(void *ud, bool stop);
int shk_manager_set_freezer(shk_manager *m, const char *session, shk_manager_freeze_fn fn, void *ud);

/* Serves the control API on a unix socket at `path` (created 0600; its
 * directory 0700, or an existing directory of this user that no one else
 * may write) on a background thread with an event loop. A connection that
 * opened a session ends that session when it closes; one that owns no
 * session and sends nothing for opts.control_idle_ms is closed, and so is
 * one that leaves more than opts.control_max_output bytes of answers
 * unread. -EPERM when the directory is someone else's or writable by group
 * or others, or when the socket would lie inside a writable root of an open
 * session; -EADDRINUSE when a manager already serves there. */
int shk_manager_serve(shk_manager *m, const char *path, shk_error *err);

/* Serves the Permission Panel (shinken-panel(1)): HTTP on `listen`, which
 * must be a loopback address (anything else is refused, -EINVAL), on a
 * background thread, until shk_manager_free. It writes the login URL with
 * a one-time token to `login_file` (0600; its directory must be this
 * user's, mode 0700: -EPERM otherwise) and sets *url to it (malloc'd). A
 * token logs in once; the file then holds the next one. The page's JSON
 * API is the control API's sessions, grants, cards, grant, revoke and
 * resolve, decided and recorded as the panel's; its Timeline reads
 * `audit_db` (the manager's store, read-only; NULL: none). */
int shk_manager_serve_panel(shk_manager *m, const char *listen, const char *login_file, const char *audit_db,
                            char **url, shk_error *err);
/* 0 when `listen` is a loopback ADDRESS:PORT the panel may use; else
 * -EINVAL, err saying why. */
int shk_manager_panel_listen_check(const char *listen, shk_error *err);
/* The panel's login file for the control socket at `socket`: beside it, in
 * the same 0700 directory, named as the socket with ".panel-login" for its
 * ".sock" (manager.sock: manager.panel-login). 0, -EINVAL or -ENAMETOOLONG. */
int shk_manager_panel_login_path(const char *socket, char *buf, size_t len);

/* The control socket's default path: $SHINKEN_SOCKET, else
 * $XDG_RUNTIME_DIR/shinken/manager.sock, else /run/shinken/manager.sock. */
const char *shk_manager_socket_path(void);

/* Client side: connects to the manager at `path` and returns a connected
 * descriptor, or a negative errno. */
int shk_manager_connect(const char *path);
/* Sends one request (JSON text, no newline) and reads one answer (malloc'd
 * JSON text) on a connected descriptor. -EPIPE, -EMSGSIZE, -EPROTO, -ENOMEM,
 * err saying which. */
int shk_manager_rpc(int fd, const char *request, char **answer, shk_error *err);

/* Whether the operator's own `shinken run` may turn off `layers` (names
 * from shk_policy_layers): the run is a session at trust tier "high", and
 * `approved` says the operator asked for it on the command line (a human
 * channel). The policy is the one shk_manager_config_load(NULL) names.
 * Returns 0 with ans filled (allow, ask: no human asked yet, or deny), or a
 * negative errno when the policy could not be loaded or asked (err says
 * why): then nothing may be turned off. */
int shk_manager_decide_layers(const char *const *layers, size_t n_layers, bool approved,
                              shk_policy_answer *ans, shk_error *err);

/* How a grant of class C reaches a running sandbox on this host, for this
 * process as a manager: 1 with BUF naming the mechanism, 0 with BUF saying
 * why there is none (such a grant is refused with that sentence), or
 * -EINVAL for an unknown class. */
int shk_manager_class_mechanism(shk_cap_class c, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
