/* SPDX-License-Identifier: Apache-2.0 */
/* `shinken trust [FILE]`: records the SHA-256 of a project's configuration
 * file that the user has read, so that `shinken run` loads it while it is
 * unchanged (src/sandbox/linux/config.c). Also where the CLI finds the
 * configuration files and the trust store. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/common.h"
#include "shinken/sandbox.h"

/* $VAR/SUB when VAR is an absolute path, else $HOME/FALLBACK/SUB, into OUT
 * (PATH_MAX long); false when there is neither. */
static bool xdg_path(const char *var, const char *fallback, const char *sub, char *out)
{
  const char *base = getenv(var), *home = getenv("HOME");
  int n;
  if (base && base[0] == '/')
    n = snprintf(out, PATH_MAX, "%s/%s", base, sub);
  else if (home && home[0] == '/')
    n = snprintf(out, PATH_MAX, "%s/%s/%s", home, fallback, sub);
  else
    return false;
  return n > 0 && n < PATH_MAX;
}

bool shk_cli_trust_store(char *out)
{
  return xdg_path("XDG_STATE_HOME", ".local/state", "shinken/trusted.json", out);
}

bool shk_cli_user_config(char *out)
{
  return xdg_path("XDG_CONFIG_HOME", ".config", "shinken/config.json", out);
}

const char *shk_cli_admin_config(void)
{
#if SHK_FAULT_INJECTION
  /* Test builds only: the tests' administrator's file, so that they need
   * not write /etc. A build people run reads /etc/shinken/config.json and
   * nothing else. */
  const char *t = getenv("SHINKEN_TEST_ADMIN_CONFIG");
  if (t && *t)
    return t;
#endif
  return "/etc/shinken/config.json";
}

int shk_cli_trust(int argc, char **argv)
{
  if (argc > 2)
    shk_cli_usage_error("trust", "expected at most one file");
  if (argc == 2 && argv[1][0] == '-')
    shk_cli_usage_error("trust", "unknown option '%s'", argv[1]);
  const char *file = argc == 2 ? argv[1] : SHK_CLI_PROJECT_CONFIG;
  char real[PATH_MAX], store[PATH_MAX], hex[65];
  if (!realpath(file, real))
    shk__die(SHK_EXIT_BAD_INPUT, "trust: %s: %s", file, strerror(errno));
  if (!shk_cli_trust_store(store))
    shk__die(SHK_EXIT_UNAVAILABLE, "trust: no place for the trust store: set HOME or XDG_STATE_HOME");
  shk_error e;
  if (shk_sandbox_trust_hash(real, hex, &e) < 0)
    shk__die(SHK_EXIT_BAD_INPUT, "trust: %s", e.message);
  /* A file that is not a valid profile is refused now, not at the next run. */
  shk_sandbox_opts o;
  shk_sandbox_opts_init(&o);
  char *text = NULL;
  size_t len;
  if (shk__read_file(real, &text, &len) == 0 && shk_sandbox_profile_apply(&o, text, real, &e) < 0) {
    free(text);
    shk__die(SHK_EXIT_BAD_INPUT, "trust: %s", e.message);
  }
  free(text);
  shk_sandbox_opts_free(&o);
  if (shk_sandbox_trust(store, real, hex, &e) < 0)
    shk__die(SHK_EXIT_UNAVAILABLE, "trust: %s", e.message);
  printf("trusted %s (sha256 %s), recorded in %s; an edit makes it untrusted again\n", real, hex,
         store);
  return SHK_EXIT_OK;
}
