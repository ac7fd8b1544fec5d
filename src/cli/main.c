/* SPDX-License-Identifier: Apache-2.0 */
/* shinken: dispatches to one subcommand. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "shinken/common.h"

struct subcommand {
  const char *name;
  int (*fn)(int, char **);
  const char *help;
  bool own_help; /* parses --help itself (an option's value may be "--help", or
                  * it has subcommands with usages of their own) */
};

static const struct subcommand commands[] = {
  { "run", shk_cli_run, "run a command with least authority", true },
  { "doctor", shk_cli_doctor, "report what this host can enforce", false },
  { "trust", shk_cli_trust, "trust a project's configuration file you have read", false },
  { "cedar", shk_cli_cedar, "the Cedar engine: authorize, validate, format, conformance", true },
  { "proxy", shk_cli_proxy, "the egress proxy, standalone", false },
  { "daemon", shk_cli_daemon, "the capability manager", false },
  { "panel", shk_cli_panel, "print the Permission Panel's login URL", false },
  { "sessions", shk_cli_sessions, "list the manager's sessions", false },
  { "grant", shk_cli_grant, "grant a capability to a session", false },
  { "grants", shk_cli_grants, "list live grants", false },
  { "revoke", shk_cli_revoke, "revoke a handle and everything derived from it", false },
  { "attenuate", shk_cli_attenuate, "derive a narrower handle", false },
  { "approvals", shk_cli_approvals, "list the cards waiting for a human", false },
  { "approve", shk_cli_approve, "approve a card: once, or for the session", false },
  { "deny", shk_cli_deny, "deny a card, with a reason the agent reads", false },
  { "cancel", shk_cli_cancel, "dismiss a card: refused now, may ask again", false },
  { "takeover", shk_cli_takeover, "freeze a session's processes until you resume it", false },
  { "resume", shk_cli_resume, "continue a frozen session", false },
  { "persist", shk_cli_persist, "list, show or delete what persistence grants kept", true },
  { "secret", shk_cli_secret, "the secret broker's store: add, list, rm", true },
  { "audit", shk_cli_audit, "the signed authority timeline: verify, prove, key, tail, show, export", true },
  { "help", shk_cli_help, "the manual page of a command", true },
  /* Re-executed by bwrap inside the sandbox; not for people. */
  { "__stage2", shk_cli_stage2, NULL, true },
};

static void usage(FILE *f)
{
  fputs("usage: shinken COMMAND [ARGS...]\n\ncommands:\n", f);
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (commands[i].help)
      fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
  fputs("\n'shinken COMMAND --help' prints a command's options, 'shinken help COMMAND' its manual.\n",
        f);
}

int main(int argc, char **argv)
{
  /* Called sudo: the shim a sandbox with --net proxy has on its PATH. */
  const char *base = argc > 0 && argv[0] ? strrchr(argv[0], '/') : NULL;
  if (argc > 0 && argv[0] && !strcmp(base ? base + 1 : argv[0], "sudo")) {
    /* It ends with _exit: nothing is left to clean up, and a sanitizer
     * build's leak check at exit cannot run inside the sandbox (it needs
     * ptrace, which the sandbox refuses), so it would change the status. */
    int status = shk_cli_sudo(argc, argv);
    fflush(stdout);
    fflush(stderr);
    _exit(status);
  }
  if (argc < 2) {
    usage(stderr);
    return SHK_EXIT_USAGE;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(stdout);
    return SHK_EXIT_OK;
  }
  if (!strcmp(argv[1], "--version")) {
    printf("shinken %s\n", shk_version());
    return SHK_EXIT_OK;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    const struct subcommand *c = &commands[i];
    if (strcmp(argv[1], c->name))
      continue;
    if (!c->own_help && shk_cli_wants_help(argc - 1, argv + 1))
      return shk_cli_print_usage(c->name);
    /* With --json, errors are JSON on stdout too. */
    if (strcmp(c->name, "run") && strcmp(c->name, "__stage2"))
      for (int k = 2; k < argc && strcmp(argv[k], "--"); k++)
        if (!strcmp(argv[k], "--json"))
          shk__die_json(true);
    return c->fn(argc - 1, argv + 1);
  }
  fprintf(stderr, "shinken: unknown command '%s' (see 'shinken --help')\n", argv[1]);
  return SHK_EXIT_USAGE;
}
