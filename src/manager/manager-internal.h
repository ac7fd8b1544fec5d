/* Internal interfaces between the manager and its control server. */
#pragma once

#include <jansson.h>
#include <sys/types.h>

#include "shinken/manager.h"

typedef struct shk__control shk__control;
typedef struct shk__conn shk__conn;

/* Handles one request arriving on `conn` (NULL when embedded). NULL only
 * when out of memory. */
json_t *shk__manager_call(shk_manager *m, json_t *req, shk__conn *conn);
/* The same, for the request as text (an answer for text that is not JSON). */
json_t *shk__manager_call_text(shk_manager *m, const char *text, size_t len, shk__conn *conn);
json_t *shk__manager_close_session(shk_manager *m, const char *id, const char *actor);
void shk__manager_set_control(shk_manager *m, shk__control *c);
/* The manager's own user: besides root, the only one its socket admits. */
uid_t shk__manager_uid(const shk_manager *m);

/* The session `id` ends when `conn` closes. 0 or -ENOMEM. */
int shk__conn_own_session(shk__conn *conn, const char *id);
/* The peer's credentials, as SO_PEERCRED gave them when it connected. */
void shk__conn_peer(const shk__conn *conn, uid_t *uid, pid_t *pid);
/* Stops the server thread and closes every connection. NULL is a no-op. */
void shk__control_stop(shk__control *c);
