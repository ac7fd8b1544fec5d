/* SPDX-License-Identifier: Apache-2.0 */
/* shinken: dispatches to one subcommand. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "shinken/common.h"

struct subcommand {
  const char *name;
  int (*fn)(int, char **);
  const char *help;
};

static const struct subcommand commands[] = {
  { "run", shk_cli_run, "run a command with least authority" },
  { "doctor", shk_cli_doctor, "report what this host can enforce" },
  { "cedar", shk_cli_cedar, "the Cedar engine: authorize, validate, format, conformance" },
  { "proxy", shk_cli_proxy, "the egress proxy, standalone" },
  { "daemon", shk_cli_daemon, "the capability manager" },
  { "sessions", shk_cli_sessions, "list the manager's sessions" },
  { "grant", shk_cli_grant, "grant a capability to a session" },
  { "grants", shk_cli_grants, "list live grants" },
  { "revoke", shk_cli_revoke, "revoke a handle and everything derived from it" },
  { "attenuate", shk_cli_attenuate, "derive a narrower handle" },
  { "approvals", shk_cli_approvals, "list the cards waiting for a human" },
  { "approve", shk_cli_approve, "approve a card: once, or for the session" },
  { "deny", shk_cli_deny, "deny a card, with a reason the agent reads" },
  { "cancel", shk_cli_cancel, "dismiss a card: refused now, may ask again" },
  { "audit", shk_cli_audit, "the signed authority timeline: verify, prove, key, tail, show, export" },
  /* Re-executed by bwrap inside the sandbox; not for people. */
  { "__stage2", shk_cli_stage2, NULL },
};

static void usage(FILE *f)
{
  fputs("usage: shinken COMMAND [ARGS...]\n\ncommands:\n", f);
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (commands[i].help)
      fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    usage(stderr);
    return 1;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--version")) {
    printf("shinken %s\n", shk_version());
    return 0;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(argv[1], commands[i].name))
      return commands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "shinken: unknown command '%s' (see 'shinken --help')\n", argv[1]);
  return 1;
}
