/* SPDX-License-Identifier: Apache-2.0 */
/* One function per subcommand, each in its own file of src/cli/. Each takes
 * the arguments after the subcommand's name (argv[0] is the subcommand) and
 * returns the process exit status. */
#pragma once

#include <stdbool.h>

/* The CLI may print and exit: it has the helpers that do. */
#include "cli/die.h"
#include "shinken/sandbox.h"

/* Exit statuses: one table for every subcommand, written out in
 * shinken(1), EXIT STATUS.
 *
 *   0    done: allowed, valid, verified, granted
 *   1    bad input: a value, a file or a request the command cannot use
 *        (a malformed scope, a policy that does not parse, an unknown
 *        session, an event that does not exist)
 *   2    refused: a decision said no, or it waits for a human (a grant the
 *        policy refused, cedar authorize's DENY)
 *   3    a check found a problem: policies that do not validate, text that
 *        is not formatted, a tampered log, a failed conformance test, a
 *        host where the default sandbox cannot start (doctor)
 *   4    unavailable: what the command needs cannot be reached or made (no
 *        manager, a socket or listener that cannot be opened, out of memory)
 *   64   usage: an unknown option, a missing or extra argument
 *
 * shinken run is the exception, as env(1), nice(1) and docker run are: 125
 * for an error of its own (any of the above, before the command ran),
 * otherwise the command's status, 126 when it cannot be executed, 127 when
 * it is not found, and 128+N when signal N ended it. */
enum {
  SHK_EXIT_OK = 0,
  SHK_EXIT_BAD_INPUT = 1,
  SHK_EXIT_REFUSED = 2,
  SHK_EXIT_CHECK = 3,
  SHK_EXIT_UNAVAILABLE = 4,
  SHK_EXIT_USAGE = 64,
  SHK_EXIT_RUN_ERROR = 125,
  SHK_EXIT_RUN_NOEXEC = 126,
  SHK_EXIT_RUN_NOTFOUND = 127,
};

/* The exit status of a manager's answer ANS (a JSON object; anything else
 * is no answer) by the table above: the control commands (grant.c) and the
 * Ask loop's (approvals.c) decide it here. */
struct json_t;
int shk_cli_answer_status(const struct json_t *ans);

int shk_cli_cedar(int argc, char **argv);
int shk_cli_run(int argc, char **argv);
int shk_cli_stage2(int argc, char **argv);
/* The sudo shim inside a sandbox (sudo.c): argv[0] is "sudo". */
int shk_cli_sudo(int argc, char **argv);
int shk_cli_doctor(int argc, char **argv);
int shk_cli_proxy(int argc, char **argv);
int shk_cli_daemon(int argc, char **argv);
int shk_cli_panel(int argc, char **argv);
int shk_cli_sessions(int argc, char **argv);
int shk_cli_grant(int argc, char **argv);
int shk_cli_grants(int argc, char **argv);
int shk_cli_revoke(int argc, char **argv);
int shk_cli_attenuate(int argc, char **argv);
int shk_cli_audit(int argc, char **argv);
int shk_cli_secret(int argc, char **argv);
int shk_cli_approvals(int argc, char **argv);
int shk_cli_approve(int argc, char **argv);
int shk_cli_deny(int argc, char **argv);
int shk_cli_cancel(int argc, char **argv);
int shk_cli_takeover(int argc, char **argv);
int shk_cli_resume(int argc, char **argv);
int shk_cli_trust(int argc, char **argv);
int shk_cli_persist(int argc, char **argv);
int shk_cli_help(int argc, char **argv);

/* `shinken cedar SUB`: src/cli/cedar.c dispatches; these live in their own
 * files (cedar-validate.c, cedar-format.c). */
int shk_cli_cedar_validate(int argc, char **argv);
int shk_cli_cedar_format(int argc, char **argv);
int shk_cli_cedar_translate_policy(int argc, char **argv);
int shk_cli_cedar_translate_schema(int argc, char **argv);
int shk_cli_cedar_analyze(int argc, char **argv); /* cedar-analyze.c */

/* ---- configuration files (trust.c) ---- */

/* A project's own configuration, in the working directory. */
#define SHK_CLI_PROJECT_CONFIG ".shinken.json"
/* Each fills OUT (PATH_MAX long); false when there is no such place. */
bool shk_cli_trust_store(char *out);
bool shk_cli_user_config(char *out);
const char *shk_cli_admin_config(void);

/* ---- help (help.c) ---- */

/* The usage text of CMD ("run", "grant", "cedar authorize", ...): its
 * synopsis and options, for --help and for usage errors. NULL for an
 * unknown command. */
const char *shk_cli_usage(const char *cmd);
/* Prints CMD's usage on stdout and returns 0: the answer to --help. */
int shk_cli_print_usage(const char *cmd);
/* Whether ARGV (ARGC entries from 1, up to a "--") holds --help or -h. */
bool shk_cli_wants_help(int argc, char **argv);
/* "shinken: CMD: MESSAGE (see 'shinken CMD --help')" and exit 64. */
SHK_NORETURN SHK_PRINTF(2, 3) void shk_cli_usage_error(const char *cmd, const char *fmt, ...);

/* ---- advice (advice.c) ---- */

/* "WHAT: no manager at PATH ..." for a connection that failed with ERR (a
 * positive errno), saying the next step that is right for this user (a
 * manager of another user's is not one to start again), and exit 4. */
SHK_NORETURN void shk_cli_die_no_manager(const char *what, const char *path, int err);
/* For a user (not root) with neither SHINKEN_SOCKET nor XDG_RUNTIME_DIR,
 * whose manager's default place is root's: what to do instead, as a
 * sentence; NULL otherwise. */
const char *shk_cli_socket_hint(void);
/* One line on stderr for a manager's answer ANS that holds a decision
 * other than granted (it waits for a human, or it was refused), in terms of
 * the next step: who can approve it and how, or why no approval can. */
void shk_cli_say_decision(const char *what, const struct json_t *ans);

/* ---- the timeline of shinken run's embedded manager (runlog.c) ---- */

/* The log of one run: its store, its name and the user's key. */
typedef struct shk_cli_run_log_info {
  char *path, *name, *key;
} shk_cli_run_log_info;

/* Points O (an embedded manager's options, audit_db the user's log or
 * NULL) at a new log of this run's own beside it, signed with the user's
 * key; with no audit_db, keeps none. Returns NULL, or one line saying why
 * the log cannot be kept. */
struct shk_manager_opts;
char *shk_cli_run_log(struct shk_manager_opts *o, shk_cli_run_log_info *info);
/* One line on stderr saying where the run's events are and how many (when
 * SAY). */
void shk_cli_run_log_say(const shk_cli_run_log_info *info, bool say);
void shk_cli_run_log_clear(shk_cli_run_log_info *info);

/* ---- the refusals of a session (refusals.c) ---- */

/* Counts the refusals among the verdicts an embedded manager hands over
 * (shk_manager_opts.on_verdict = shk_cli_refusals_take), says each on
 * stderr as it comes with LIVE, and appends every verdict to LOG (a JSON
 * line each) when it is not NULL. NULL when LOG cannot be opened (errno). */
typedef struct shk_cli_refusals shk_cli_refusals;
struct shk_egress_verdict_info;
shk_cli_refusals *shk_cli_refusals_new(bool live, const char *log);
int shk_cli_refusals_take(void *data, const struct shk_egress_verdict_info *v);
/* The refusals a daemon counted for SESSION, its connection FD still open
 * (the session ends when it closes), for the same summary; NULL when the
 * daemon does not answer. */
shk_cli_refusals *shk_cli_refusals_hosted(int fd, const char *session);
/* One line per kind of refusal on stderr, and KEPT_AT, the log's path,
 * when there is one. */
void shk_cli_refusals_print(shk_cli_refusals *r, const char *kept_at);
void shk_cli_refusals_free(shk_cli_refusals *r);
/* The workload's refused writes (the sandbox's write observer): live, one
 * line each (shk_sandbox_io.on_write_refused, with --verbose), and at exit
 * one line per tree, on shinken's own stderr. */
struct shk_sandbox_write_refusal;
struct shk_sandbox_result;
void shk_cli_refusals_write_live(void *data, const struct shk_sandbox_write_refusal *w);
void shk_cli_refusals_print_writes(const struct shk_sandbox_result *res);
/* The image manifest's fs.scope write ceiling, into o->ceiling (ceiling.c):
 * what Landlock must allow for live grants to work. */
void shk_cli_fs_ceiling(shk_sandbox_opts *o);

