/* SPDX-License-Identifier: Apache-2.0 */
/* The Ask loop's side of the manager (ask.c): connections held for a
 * human, their cards in the approve module, and the control operations on
 * cards. */
#pragma once

#include "manager/manager-state.h"

/* The Ask loop of a new manager: its approve module (with o's timeouts)
 * and the thread that issues Auto and Notify handles. 0, or a negative
 * errno (err). */
int shk__ask_start(shk_manager *m, const shk_manager_opts *o, shk_error *err);
/* After shk_approve_shutdown: the connections still waiting for an Auto or
 * Notify handle are refused, and the thread is joined. */
void shk__ask_stop(shk_manager *m);
/* Frees what shk__ask_start made, once no session is left. */
void shk__ask_free(shk_manager *m);
/* The manager's own freezer for session SID, whose sandbox another
 * program launched: the session cgroup of process PID (the one its start
 * reported). Kept only when no embedder gave the session a freezer; it
 * goes with the session (shk_manager_set_freezer with NULL). */
int shk__ask_hosted_freezer(shk_manager *m, const char *sid, pid_t pid);
/* The egress hook's answer for what no live handle covers (proxy thread). */
shk_egress_verdict shk__ask_connection(session *s, const shk_egress_request *req, const char **message);
/* Caller holds mu. A handle was just issued to s: the held connections it
 * covers go on under it. */
void shk__ask_release_covered(session *s, egrant *eg);
/* The proxy's on_abandon: the client of a held connection went away. */
void shk__ask_abandon(void *data, const char *session_name, uint64_t conn_id);
/* The approve module's on_event and end (shk_approve_opts). */
void shk__ask_event(void *ud, const shk_approve_event *e);
void shk__ask_end(void *ud, const char *session_name, const char *why);
/* The control operations "cards" and "resolve" (with a card). */
json_t *shk__ask_op_cards(shk_manager *m, json_t *req);
json_t *shk__ask_op_resolve_card(shk_manager *m, json_t *req, const shk__peer *by);
/* The control operations "takeover" and "resume" (of a session). */
json_t *shk__ask_op_session(shk_manager *m, json_t *req, const shk__peer *by, bool takeover);
