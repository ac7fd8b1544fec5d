/* SPDX-License-Identifier: Apache-2.0 */
/* Internal interfaces between the manager and its control server. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "shinken/approve.h"
#include "shinken/audit.h"
#include "shinken/cap.h"
#include "shinken/manager.h"
#include "shinken/policy.h"

typedef struct shk__control shk__control;
typedef struct shk__conn shk__conn;
typedef struct shk__panel shk__panel;

/* Who asked, for the timeline: a control peer as SO_PEERCRED gave it when
 * it connected, or the process that embeds the manager. */
typedef struct shk__peer {
  const char *surface; /* "control" or "embedded" */
  uid_t uid;
  pid_t pid;
  const char *exe;     /* its /proc/PID/exe, or NULL when unreadable */
  const char *user;    /* the panel's: which login answered; else NULL */
} shk__peer;

/* The control server's limits, defaults applied (shk_manager_opts). */
typedef struct shk__control_limits {
  unsigned max_clients, max_per_uid, fd_reserve;
  int64_t idle_ms;
  size_t max_output;
} shk__control_limits;

/* Handles one request arriving on `conn` (NULL when embedded). NULL only
 * when out of memory. */
json_t *shk__manager_call(shk_manager *m, json_t *req, shk__conn *conn);
/* The same, on behalf of `by` (the panel's transport names its own peer:
 * surface "panel"). */
json_t *shk__manager_call_as(shk_manager *m, json_t *req, shk__conn *conn, const shk__peer *by);
/* The same, for the request as text (an answer for text that is not JSON). */
json_t *shk__manager_call_text(shk_manager *m, const char *text, size_t len, shk__conn *conn);
/* Ends a session: `by` asked (NULL: the manager itself), `why` says why. */
json_t *shk__manager_close_session(shk_manager *m, const char *id, const shk__peer *by, const char *why);
/* Records what time ended: handles past their expiry, pending requests no
 * human answered in time. Every call sweeps too; the control thread calls
 * this about once a second so that the record does not wait for a call. */
void shk__manager_tick(shk_manager *m);
void shk__manager_set_control(shk_manager *m, shk__control *c);
const shk__control_limits *shk__manager_limits(const shk_manager *m);
/* The manager's own user: besides root, the only one its socket admits. */
uid_t shk__manager_uid(const shk_manager *m);
/* Takes `path` (resolved here) as the manager's control socket: -EPERM (err
 * saying which session and root) when it lies inside a writable root of an
 * open session; from then on no session that has it inside a writable root
 * may open. */
int shk__manager_claim_socket(shk_manager *m, const char *path, shk_error *err);
/* The manager's audit writer, or NULL (tests). */
shk_audit *shk__manager_audit(shk_manager *m);
/* The question "may the operator's own run turn off these layers", as the
 * one decision takes it (config.c). */
void shk__layers_request(const char *const *layers, size_t n_layers, bool on_command_line, int64_t now,
                         shk_policy_session *s, shk_policy_request *req);

/* The session `id` ends when `conn` closes, and the connection is no
 * longer idle while it holds one. 0 or -ENOMEM. */
int shk__conn_own_session(shk__conn *conn, const char *id);
/* The peer, as SO_PEERCRED and /proc gave it when it connected; valid while
 * the connection is. */
void shk__conn_peer(const shk__conn *conn, shk__peer *out);
/* Makes `conn` a subscriber (op subscribe): from now on it receives the
 * stream of card events after its answers. 0 or a negative errno (err). */
int shk__conn_subscribe(shk__conn *conn, shk_error *err);
/* The stream of card events (shk_approve_subscribe), for a subscriber of
 * the control server; after shk__manager_unsubscribe returns, fn is not
 * running and is never called again. */
int shk__manager_subscribe(shk_manager *m, shk_approve_line_fn fn, void *ud, uint64_t *id, shk_error *err);
void shk__manager_unsubscribe(shk_manager *m, uint64_t id);
/* Stops the server thread and closes every connection. NULL is a no-op. */
void shk__control_stop(shk__control *c);

/* ---- live unlocks of the filesystem (unlock.c) ---- */

/* A session's running sandbox, and the mounts its fs.scope and
 * persistence grants put there. */
typedef struct shk__fs_state shk__fs_state;

/* NULL when this host and process can inject mounts into a running
 * sandbox; else a static sentence saying why not. */
const char *shk__unlock_missing(void);
/* The same for persistence, which also needs the overlay filesystem. */
const char *shk__persist_missing(void);
/* The sandbox of the session runs as process PID (in the manager's pid
 * namespace), started for UID, its Landlock letting it write beneath the
 * N_WRITABLE paths WRITABLE (its writable roots and the ceiling of live
 * grants) and nowhere else: *st is set (replacing nothing: a second call is
 * refused). NULL, or the sentence that says why not (static or in buf). */
const char *shk__unlock_started(shk__fs_state **st, pid_t pid, uid_t uid, const char *const *writable,
                                size_t n_writable, char *buf, size_t len);
/* Where a persistence grant keeps what it persists: the store
 * (shk_sandbox_persist_root), the image's name, and the session's. */
typedef struct shk__persist_where {
  const char *root, *image, *session;
} shk__persist_where;
/* The OS delta of an fs.scope grant: each read and write path mounted into
 * the running sandbox, with its deny paths and the sandbox's protections
 * covered inside; of a persistence grant (PW says where its store is):
 * each path mounted as an overlay over the host's, its changes kept in
 * the store. All or nothing. NULL, or the sentence that says why nothing
 * was mounted (in buf). */
const char *shk__unlock_grant(shk__fs_state *st, const char *handle, const shk_cap_scope *scope,
                              const shk__persist_where *pw, char *buf, size_t len);
/* The OS delta of a gpu or peripheral grant: each of the N device nodes
 * REL (beneath the device root ROOT) mounted at /dev/REL in the running
 * sandbox. All or nothing. NULL, or why nothing was mounted (in buf). */
const char *shk__unlock_devices(shk__fs_state *st, const char *handle, const char *root, char *const *rel,
                                size_t n, char *buf, size_t len);
/* The device nodes a gpu or peripheral scope names that exist beneath
 * ROOT, relative to it ("dri/card0", "snd"; devices.c): *out (free with
 * shk__devices_free). NULL, or the sentence that refuses the grant (a
 * device this host does not have, input_inject, exclusive mode). */
const char *shk__devices_of(const char *root, const shk_cap_scope *scope, char ***out, size_t *n, char *buf,
                            size_t len);
void shk__devices_free(char **v, size_t n);
/* Detaches the mounts of HANDLE, if any; how many. With STOP, then kills
 * the sandbox's processes that still hold them open (how many: *stopped,
 * which may be NULL). */
size_t shk__unlock_revoke(shk__fs_state *st, const char *handle, bool stop, unsigned *stopped);
/* Detaches everything and frees ST (NULL is a no-op). */
void shk__unlock_free(shk__fs_state *st);
/* The running sandbox ST reaches (NULL for NULL), valid until
 * shk__unlock_free. */
struct shk_sandbox_target;
const struct shk_sandbox_target *shk__unlock_target(const shk__fs_state *st);

/* The Permission Panel's server (panel.c): the same, for its HTTP server. */
void shk__manager_set_panel(shk_manager *m, shk__panel *p);
/* How many HTTP connections the panel keeps at most (shk_manager_opts). */
unsigned shk__manager_panel_max_conns(const shk_manager *m);
void shk__panel_stop(shk__panel *p);
