/* SPDX-License-Identifier: Apache-2.0 */
/* shinken daemon: the capability manager as a long-lived process. It keeps
 * the authority timeline in the configured store (audit_db), by default the
 * user's (shk_audit_default_path). */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/common.h"
#include "shinken/manager.h"

int shk_cli_daemon(int argc, char **argv)
{
  static const struct option opts[] = {
    { "config", required_argument, NULL, 'c' },
    { "accept-widening", no_argument, NULL, 'w' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  const char *config = NULL;
  bool accept_widening = false;
  int c;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "+c:h", opts, NULL)) != -1) {
    if (c == 'c')
      config = optarg;
    else if (c == 'w')
      accept_widening = true;
    else if (c == 'h')
      return shk_cli_print_usage("daemon");
    else
      shk_cli_usage_error("daemon", "unknown option or missing value '%s'", argv[optind - 1]);
  }
  if (optind != argc)
    shk_cli_usage_error("daemon", "unexpected argument '%s'", argv[optind]);
  shk_manager_config mc;
  shk_error err;
  if (shk_manager_config_load(config, &mc, &err))
    shk__die(SHK_EXIT_BAD_INPUT, "daemon: %s", err.message);
  if (!mc.opts.audit_db)
    shk__die(SHK_EXIT_BAD_INPUT, "daemon: no place for the audit log: set HOME or XDG_STATE_HOME, or audit_db in the configuration");
  /* The operator accepts a project or session tier wider than the one
   * recorded in the configuration's state_dir. */
  mc.opts.accept_widening = accept_widening;
  shk_manager *m;
  if (shk_manager_new(&mc.opts, &m, &err))
    shk__die(SHK_EXIT_BAD_INPUT, "daemon: %s", err.message);
  /* Block the signals that end the daemon and wait for them here, so the
   * control and proxy threads never run a handler. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);
  int r = shk_manager_serve(m, mc.socket, &err);
  if (r) {
    shk_manager_free(m);
    /* A place the configuration names that may not hold the socket is bad
     * input; a socket that cannot be made is unavailable. */
    const char *hint = r == -EACCES ? shk_cli_socket_hint() : NULL;
    shk__die(r == -EPERM ? SHK_EXIT_BAD_INPUT : SHK_EXIT_UNAVAILABLE, "daemon: %s%s%s", err.message,
             hint ? "; " : "", hint ? hint : "");
  }
  printf("listening %s\naudit log %s\n", mc.socket, mc.opts.audit_db);
  fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  /* Ending the manager ends every session: their grants die with it and
   * their sandboxes lose the network (fail closed). */
  shk_manager_free(m);
  shk_manager_config_clear(&mc);
  return 0;
}
