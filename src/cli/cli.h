/* One function per subcommand, each in its own file of src/cli/. Each takes
 * the arguments after the subcommand's name (argv[0] is the subcommand) and
 * returns the process exit status. */
#pragma once

/* The CLI may print and exit: it has the helpers that do. */
#include "cli/die.h"

int shk_cli_cedar(int argc, char **argv);
int shk_cli_run(int argc, char **argv);
int shk_cli_stage2(int argc, char **argv);
int shk_cli_doctor(int argc, char **argv);
int shk_cli_proxy(int argc, char **argv);
int shk_cli_daemon(int argc, char **argv);
int shk_cli_sessions(int argc, char **argv);
int shk_cli_grant(int argc, char **argv);
int shk_cli_grants(int argc, char **argv);
int shk_cli_revoke(int argc, char **argv);
int shk_cli_attenuate(int argc, char **argv);
int shk_cli_audit(int argc, char **argv);
int shk_cli_approvals(int argc, char **argv);
int shk_cli_approve(int argc, char **argv);
int shk_cli_deny(int argc, char **argv);
int shk_cli_cancel(int argc, char **argv);

/* `shinken cedar SUB`: src/cli/cedar.c dispatches; these live in their own
 * files (cedar-validate.c, cedar-format.c). */
int shk_cli_cedar_validate(int argc, char **argv);
int shk_cli_cedar_format(int argc, char **argv);
int shk_cli_cedar_translate_policy(int argc, char **argv);
int shk_cli_cedar_translate_schema(int argc, char **argv);
int shk_cli_cedar_analyze(int argc, char **argv); /* cedar-analyze.c */
