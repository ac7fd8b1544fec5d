/* SPDX-License-Identifier: Apache-2.0 */
/* The usage of every command, in one place: what --help prints, what a
 * usage error points to, and what `shinken help CMD` prints where no man
 * page is installed. `shinken run`'s options come from the sandbox
 * module's table, so its help cannot drift from its parser. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/common.h"
#include "shinken/sandbox.h"

static const struct usage {
  const char *cmd;
  const char *text;
} usages[] = {
  { "doctor",
    "usage: shinken doctor [--json]\n"
    "What this host can enforce, per class of authority, and by which mechanism;\n"
    "whether a capability manager can be reached or embedded, whether an egress\n"
    "session can be opened, and the Cedar analysis solver.\n"
    "\n"
    "  --json   print one JSON object\n"
    "\n"
    "Exit status: 0 the default sandbox starts here, 3 it does not (see 'missing')." },
  { "proxy",
    "usage: shinken proxy --config FILE\n"
    "The egress proxy, standalone (shinken-proxy(1)).\n"
    "\n"
    "  --config FILE   the proxy's JSON configuration; SIGHUP reads it again" },
  { "daemon",
    "usage: shinken daemon [--config FILE] [--accept-widening]\n"
    "The capability manager, on a unix socket (shinken-daemon(1)).\n"
    "\n"
    "  --config FILE       JSON: policy_dir, manifest, session_policy, standing, event_log, socket\n"
    "  --accept-widening   accept a project or session tier wider than the one recorded" },
  { "panel",
    "usage: shinken panel [--config FILE] [--open]\n"
    "The Permission Panel's login URL, with its one-time token (shinken-panel(1)).\n"
    "\n"
    "  --config FILE   the manager's configuration (where its socket, and so the URL, is)\n"
    "  --open          open the URL with xdg-open instead of printing it" },
  { "sessions",
    "usage: shinken sessions [--json]\n"
    "The manager's sessions: who opened each (pid, user, working directory,\n"
    "command), when, its trust tier, grants and egress.\n"
    "\n"
    "  --json   print the manager's answer as one JSON object" },
  { "grant",
    "usage: shinken grant SESSION CLASS --scope JSON [--ttl DURATION] [--once] [--external]\n"
    "                     [--approve] [--json]\n"
    "Ask the manager for a capability for SESSION (shinken-grant(1)).\n"
    "\n"
    "  --scope JSON      the scope, a JSON object of the class's fields\n"
    "  --ttl DURATION    a lifetime such as 30s, 5m, 2h or 1d\n"
    "  --once            the handle dies after one use\n"
    "  --external        the request derives from external data (its tier is promoted)\n"
    "  --approve         answer the human approval it may need, as the person here\n"
    "  --json            print the manager's answer as one JSON object" },
  { "grants",
    "usage: shinken grants [SESSION] [--json]\n"
    "The live and revoked handles, of one session or all.\n"
    "\n"
    "  --json   print the manager's answer as one JSON object" },
  { "revoke",
    "usage: shinken revoke HANDLE [--json]\n"
    "Revoke a handle and every handle derived from it; its open tunnels close.\n"
    "\n"
    "  --json   print the manager's answer as one JSON object" },
  { "attenuate",
    "usage: shinken attenuate HANDLE --scope JSON [--ttl DURATION] [--json]\n"
    "Derive a narrower handle from HANDLE.\n"
    "\n"
    "  --scope JSON     the narrower scope\n"
    "  --ttl DURATION   a shorter lifetime\n"
    "  --json           print the manager's answer as one JSON object" },
  { "approvals",
    "usage: shinken approvals [SESSION] [-f|--follow] [--json]\n"
    "The cards waiting for a human, of one session or all (shinken-approvals(1)).\n"
    "\n"
    "  -f, --follow   print card events as they come, until the manager goes away\n"
    "  --json         print the manager's answer as one JSON object (-f: one per line)" },
  { "approve",
    "usage: shinken approve CARD [--once|--session|--pattern P] [--reason TEXT] [--json]\n"
    "Approve a card: this once (the default), for the rest of the session, or a pattern it offers.\n"
    "\n"
    "  --once          let the held request on, and ask again next time\n"
    "  --session       let this request on for the rest of the session\n"
    "  --pattern P     grant the pattern P the card offers (as shown: *.pkg.test:443) for the\n"
    "                  session; every held request it covers goes on\n"
    "  --reason TEXT   why, recorded on the timeline\n"
    "  --json          print the manager's answer as one JSON object" },
  { "deny",
    "usage: shinken deny CARD [--reason TEXT] [--json]\n"
    "Deny a card; the agent reads the reason, and the same request is refused from now on.\n"
    "\n"
    "  --reason TEXT   why, for the agent and the timeline\n"
    "  --json          print the manager's answer as one JSON object" },
  { "cancel",
    "usage: shinken cancel CARD [--json]\n"
    "Dismiss a card: the held request is refused now, and may ask again.\n"
    "\n"
    "  --json   print the manager's answer as one JSON object" },
  { "takeover",
    "usage: shinken takeover SESSION [--json]\n"
    "Freeze every process of a session; its cards wait, their countdowns stopped.\n"
    "\n"
    "  --json   print the manager's answer as one JSON object" },
  { "resume",
    "usage: shinken resume SESSION [--json]\n"
    "Continue a session that was taken over or stopped by its breaker.\n"
    "\n"
    "  --json   print the manager's answer as one JSON object" },
  { "persist",
    "usage: shinken persist [--config FILE] [--state-dir DIR] list [IMAGE] [--json]\n"
    "       shinken persist [--config FILE] [--state-dir DIR] show IMAGE PATH [--json]\n"
    "       shinken persist [--config FILE] [--state-dir DIR] rm IMAGE PATH\n"
    "What persistence grants kept, per image, in the manager's state directory:\n"
    "list the entries, show one's changes, delete one (refused while mounted).\n"
    "\n"
    "  --config FILE    the manager's configuration, for its state_dir\n"
    "  --state-dir DIR  the manager's state directory, instead\n"
    "  --json           print one JSON object" },
  { "audit",
    "usage: shinken audit verify [--db FILE] [--key VERIFIER-KEY | --key-file FILE] [--checkpoint FILE]\n"
    "       shinken audit prove [--db FILE] SEQ\n"
    "       shinken audit key [--db FILE | --key-file FILE]\n"
    "       shinken audit tail [--db FILE] [-f] [-n N] [--session S] [--json]\n"
    "       shinken audit show [--db FILE] SEQ\n"
    "       shinken audit export [--db FILE] --format otlp-json|jsonl [--since TIME]\n"
    "       shinken audit runs [--db FILE]\n"
    "The signed authority timeline (shinken-audit(1)). The log is --db FILE, or\n"
    "$XDG_STATE_HOME/shinken/audit.db (--system: /var/lib/shinken/audit.db).\n"
    "Every command but runs takes --run RUN: the log of one shinken run (its\n"
    "name, or its session's id or a unique prefix), signed with the same key.\n"
    "\n"
    "Exit status: 0 done (verify: verified), 3 the log was tampered with, 1 bad input." },
  { "cedar",
    "usage: shinken cedar COMMAND [ARGS...]\n"
    "The Cedar engine (shinken-cedar(1)).\n"
    "\n"
    "commands:\n"
    "  authorize          decide requests against policies and entities\n"
    "  validate           type-check policies against a schema\n"
    "  format             print policies in the canonical layout\n"
    "  translate-policy   convert policies between text and JSON\n"
    "  translate-schema   convert a schema between text and JSON\n"
    "  conformance        run cedar-integration-tests files\n"
    "  analyze            prove properties of policies, compare policy sets (cvc5)" },
  { "cedar authorize",
    "usage: shinken cedar authorize -p|--policies FILE -e|--entities FILE [-s|--schema FILE]\n"
    "         [--schema-format cedar|json]\n"
    "         (--request-json FILE | -l|--principal P -a|--action A -r|--resource R\n"
    "          [-c|--context FILE] | --requests FILE.jsonl) [-k|--template-linked FILE] [--json]\n"
    "\n"
    "Exit status: 0 ALLOW, 2 DENY, 1 bad input." },
  { "cedar validate",
    "usage: shinken cedar validate --schema FILE --policies FILE [--json]\n"
    "\n"
    "Exit status: 0 valid, 3 invalid, 1 bad input." },
  { "cedar format",
    "usage: shinken cedar format --policies FILE [--check]\n"
    "\n"
    "  --check   print nothing; exit 3 when the file is not in the canonical layout" },
  { "cedar translate-policy",
    "usage: shinken cedar translate-policy --direction cedar-to-json|json-to-cedar --policies FILE" },
  { "cedar translate-schema",
    "usage: shinken cedar translate-schema --direction cedar-to-json|json-to-cedar --schema FILE" },
  { "cedar conformance",
    "usage: shinken cedar conformance --root DIR [--files-from FILE] [TEST.json...]\n"
    "\n"
    "Exit status: 0 every test passed, 3 one failed." },
  { "trust",
    "usage: shinken trust [FILE]\n"
    "Record that you have read FILE (default: .shinken.json here), a project's own\n"
    "configuration for shinken run, which is loaded only while it is unchanged since.\n"
    "The record is its SHA-256 in $XDG_STATE_HOME/shinken/trusted.json, which no\n"
    "sandbox can write (shinken-trust(1))." },
  { "secret",
    "usage: shinken secret [--dir DIR] add NAME --host PATTERN [--header 'NAME: TEMPLATE {}']\n"
    "         [--env VAR] [--allow-plain-http] [--replace]\n"
    "       shinken secret [--dir DIR] list [--json]\n"
    "       shinken secret [--dir DIR] rm NAME\n"
    "The secret broker's encrypted store (shinken-secret(1)). add reads the value from\n"
    "a prompt without echo, or from standard input; never from the command line.\n"
    "The proxy injects it on inspected requests to PATTERN for sessions granted\n"
    "credentials {broker_scopes: [NAME]}; list never prints a value.\n"
    "\n"
    "  --host PATTERN       the hosts the secret is sent to (host, *.host, **.host, :PORT)\n"
    "  --header H           the header that carries it (default 'Authorization: Bearer {}')\n"
    "  --env VAR            give sandboxes a sentinel of the same shape in VAR\n"
    "  --allow-plain-http   inject over plain HTTP too (the value crosses the network in clear)\n"
    "  --replace            replace a secret of the same name\n"
    "  --dir DIR            the store (default $XDG_STATE_HOME/shinken/broker)" },
  { "help",
    "usage: shinken help [COMMAND]\n"
    "The manual page of COMMAND (shinken-COMMAND(1)), or its usage where man pages\n"
    "are not installed; without COMMAND, shinken(1)." },
};

static char run_usage[8192];

/* `shinken run`'s usage, from the options table. */
static const char *make_run_usage(void)
{
  if (run_usage[0])
    return run_usage;
  size_t n = (size_t)snprintf(run_usage, sizeof run_usage,
      "usage: shinken run [OPTIONS] [--] CMD [ARGS...]\n"
      "Run CMD with least authority (shinken-run(1)). Options also come from\n"
      "/etc/shinken/config.json, $XDG_CONFIG_HOME/shinken/config.json and a trusted\n"
      ".shinken.json (shinken-config(5)).\n\n");
  const char *name, *value, *help;
  for (size_t i = 0; shk_sandbox_opt_describe(i, &name, &value, &help) && n < sizeof run_usage; i++) {
    char left[64];
    snprintf(left, sizeof left, "--%s%s%s", name, value ? " " : "", value ? value : "");
    n += (size_t)snprintf(run_usage + n, sizeof run_usage - n, "  %-28s %s\n", left, help);
  }
  if (n < sizeof run_usage)
    snprintf(run_usage + n, sizeof run_usage - n,
             "\nExit status: the command's; 125 an error of shinken run itself (nothing was run).");
  return run_usage;
}

const char *shk_cli_usage(const char *cmd)
{
  if (!strcmp(cmd, "run"))
    return make_run_usage();
  for (size_t i = 0; i < sizeof usages / sizeof usages[0]; i++)
    if (!strcmp(usages[i].cmd, cmd))
      return usages[i].text;
  return NULL;
}

int shk_cli_print_usage(const char *cmd)
{
  const char *u = shk_cli_usage(cmd);
  puts(u ? u : "no help for this command");
  return SHK_EXIT_OK;
}

bool shk_cli_wants_help(int argc, char **argv)
{
  for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
      return true;
  return false;
}

void shk_cli_usage_error(const char *cmd, const char *fmt, ...)
{
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  shk__die(SHK_EXIT_USAGE, "%s: %s (see 'shinken %s --help')", cmd, msg, cmd);
}

/* `shinken help [CMD]`: man(1) on CMD's page when man is there and finds
 * the page (installed, or on $MANPATH), else the usage. */
int shk_cli_help(int argc, char **argv)
{
  if (argc > 3)
    shk_cli_usage_error("help", "expected at most one command, got %d", argc - 1);
  const char *cmd = argc >= 2 ? argv[1] : NULL;
  if (cmd && (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")))
    return shk_cli_print_usage("help");
  char key[64] = "";
  if (cmd && argc == 3)
    snprintf(key, sizeof key, "%s %s", cmd, argv[2]);
  else if (cmd)
    snprintf(key, sizeof key, "%s", cmd);
  if (cmd && !shk_cli_usage(key))
    shk_cli_usage_error("help", "no command '%s' (see 'shinken --help')", key);
  /* The control commands share a page with the daemon no longer: each
   * has its own. A subcommand of cedar or audit is on its command's page. */
  char page[80];
  snprintf(page, sizeof page, cmd ? "shinken-%s" : "shinken", cmd ? cmd : "");
  {
    pid_t pid = fork();
    if (pid == 0) {
      /* -w: only find the page; a missing one fails quietly. */
      int null = open("/dev/null", O_WRONLY);
      if (null >= 0) {
        dup2(null, 1);
        dup2(null, 2);
      }
      execlp("man", "man", "-w", page, (char *)NULL);
      _exit(127);
    }
    int st = 0;
    while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
      execlp("man", "man", page, (char *)NULL);
      shk__warn("help: man %s: %s; the usage follows", page, strerror(errno));
    }
  }
  if (!cmd) {
    puts("usage: shinken COMMAND [ARGS...]   (shinken --help lists the commands)");
    return SHK_EXIT_OK;
  }
  return shk_cli_print_usage(key);
}
