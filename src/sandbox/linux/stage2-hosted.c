/* SPDX-License-Identifier: Apache-2.0 */
/* Stage 2 inside the shinken binary (`shinken __stage2`): the same program
 * as the small one (stage2.c), with the egress bridge, which lives in the
 * binary. The launcher runs this one for --net proxy, and wherever the
 * small one cannot run. */
#include "sandbox-internal.h"

#include "shinken/egress.h"

extern char **environ;

#include <unistd.h>

static int bridge(void)
{
  int r = shk_egress_bridge_start(SHK_SANDBOX_EGRESS_DIR);
  if (r == 0)
    r = shk_egress_apply_env();
  /* The session can inspect: the launcher bound its trust store over the
   * system's; the runtimes with stores of their own are pointed at it. */
  if (r == 0 && access(SHK_SANDBOX_EGRESS_DIR "/" SHK_EGRESS_CA_BUNDLE, R_OK) == 0)
    r = shk_egress_apply_ca_env(SHK_EGRESS_SYSTEM_BUNDLE);
  if (r == 0 && access(SHK_SANDBOX_EGRESS_DIR "/" SHK_EGRESS_JAVA_STORE, R_OK) == 0)
    r = shk_egress_apply_java_trust(SHK_SANDBOX_EGRESS_DIR "/" SHK_EGRESS_JAVA_STORE);
  return r;
}

static char **current_environ(void)
{
  return environ;
}

int shk_sandbox_stage2(int argc, char **argv)
{
  static const shk__stage2_hooks hooks = { bridge, current_environ };
  shk__stage2_main(argc, argv, environ, &hooks);
}
