/* Shinken's capability manager: sessions, grants, revocation, events, and
 * the control API on a unix socket.
 *
 * The manager lives outside every sandbox. It runs either as `shinken
 * daemon` or embedded in `shinken run` for the life of one command. The
 * egress proxy of each session asks it on every new connection whether a
 * live handle covers the destination; nothing is cached. */
#ifndef SHINKEN_DAEMON_H
#define SHINKEN_DAEMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct shk_manager shk_manager;

typedef struct shk_manager_opts {
  const char *policy_dir;     /* schema.cedarschema, admin.cedar, project.cedar */
  const char *session_policy; /* optional file of session-tier (forbid) policies */
  const char *standing;       /* optional file of standing grants (admin): a JSON
                               * array of {"class", "scope"} every session gets,
                               * each still decided by Cedar */
  const char *manifest;       /* the image manifest (JSON file) */
  const char *event_log;      /* JSON lines; NULL: stderr */
} shk_manager_opts;

/* The manager's configuration file (JSON): {"policy_dir", "manifest",
 * "session_policy", "standing", "event_log", "socket"}, every key optional and an
 * unknown key an error. Defaults: $SHINKEN_POLICY_DIR or the shipped
 * policies/, its manifests/default.json, events on stderr, and
 * shk_manager_socket_path(). path NULL: the defaults alone. */
typedef struct shk_manager_config {
  shk_manager_opts opts;
  const char *socket;
  void *priv;
} shk_manager_config;

int shk_manager_config_load(const char *path, shk_manager_config *out, char *err, size_t errlen);
void shk_manager_config_clear(shk_manager_config *c);

int shk_manager_new(const shk_manager_opts *o, shk_manager **out, char *err, size_t errlen);
/* Ends every session (revoking its grants and closing its tunnels). */
void shk_manager_free(shk_manager *m);

/* Handles one control request (a JSON object with "op") and returns the
 * answer object, which always has "ok" and, on refusal, "error". The
 * operations: open_session, close_session, sessions, grant, grants, revoke,
 * attenuate, taint (a session's exposure: ingested_external,
 * touched_sensitive). The caller owns the answer. */
json_t *shk_manager_call(shk_manager *m, json_t *req);

/* Serves the control API on a unix socket at `path` (created 0600; its
 * directory 0700) on a background thread. A connection that opened a
 * session ends that session when it closes. */
int shk_manager_serve(shk_manager *m, const char *path, char *err, size_t errlen);

/* The control socket's default path: $SHINKEN_SOCKET, else
 * $XDG_RUNTIME_DIR/shinken/manager.sock, else /run/shinken/manager.sock. */
const char *shk_manager_socket_path(void);

/* Client side: connects to the manager at `path` and returns a connected
 * descriptor, or a negative errno. */
int shk_manager_connect(const char *path);
/* Sends one request and reads one answer on a connected descriptor. */
int shk_manager_rpc(int fd, json_t *req, json_t **answer, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
