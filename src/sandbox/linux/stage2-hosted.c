/* SPDX-License-Identifier: Apache-2.0 */
/* Stage 2 inside the shinken binary (`shinken __stage2`): the same program
 * as the small one (stage2.c), with the egress bridge, which lives in the
 * binary. The launcher runs this one for --net proxy, and wherever the
 * small one cannot run. */
#include "sandbox-internal.h"

#include "shinken/egress.h"

extern char **environ;

static int bridge(void)
{
  int r = shk_egress_bridge_start(SHK_SANDBOX_EGRESS_DIR);
  return r < 0 ? r : shk_egress_apply_env();
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
