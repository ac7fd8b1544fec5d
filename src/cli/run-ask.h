/* SPDX-License-Identifier: Apache-2.0 */
/* The inline prompt of `shinken run` (run-ask.c): the cards of the run's
 * own session, raised by its embedded manager, drawn on the caller's
 * terminal through the relay's prompt and answered with a key. */
#pragma once

#include "shinken/manager.h"
#include "shinken/sandbox.h"

typedef struct shk_cli_ask shk_cli_ask;

/* Starts drawing the cards of session SID of the embedded manager M on
 * PROMPT, from a thread of its own. HINT is the line that says how to
 * answer a card from elsewhere (`shinken approve` with the run's socket),
 * said on stderr when the prompt cannot be drawn; NULL: none. Returns NULL
 * when it could not start (then no card is drawn: each waits its timeout,
 * and the CLI can still answer it). */
shk_cli_ask *shk_cli_ask_start(shk_manager *m, const char *sid, shk_sandbox_prompt *prompt, const char *hint);
/* The same for a session of the `shinken daemon` at PATH: its card
 * stream comes on a control connection of its own, and the answers go on
 * fresh ones. */
shk_cli_ask *shk_cli_ask_start_daemon(const char *path, const char *sid, shk_sandbox_prompt *prompt,
                                      const char *hint);
/* Stops drawing (a prompt on the screen is withdrawn) and frees; before M
 * and PROMPT go. NULL is a no-op. */
void shk_cli_ask_stop(shk_cli_ask *a);
