/* Internal interfaces between the manager and its control server. */
#pragma once

#include <jansson.h>

#include "shinken/daemon.h"

typedef struct shk__control shk__control;
typedef struct shk__conn shk__conn;

/* Handles one request arriving on `conn` (NULL when embedded). */
json_t *shk__manager_call(shk_manager *m, json_t *req, shk__conn *conn);
json_t *shk__manager_close_session(shk_manager *m, const char *id, const char *actor);
void shk__manager_set_control(shk_manager *m, shk__control *c);

/* The session `id` ends when `conn` closes. */
void shk__conn_own_session(shk__conn *conn, const char *id);
/* Stops the server thread and closes every connection. NULL is a no-op. */
void shk__control_stop(shk__control *c);
