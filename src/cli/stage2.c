/* SPDX-License-Identifier: Apache-2.0 */
/* `shinken __stage2`: re-executed by bwrap inside the sandbox; the program
 * is the sandbox module's (src/sandbox/linux/stage2.c). */
#include "cli/cli.h"
#include "shinken/sandbox.h"

int shk_cli_stage2(int argc, char **argv)
{
  return shk_sandbox_stage2(argc, argv);
}
