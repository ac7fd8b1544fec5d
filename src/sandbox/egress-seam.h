/* Whether this build has the egress proxy: its header and both halves of
 * its implementation (the launcher's session, stage 2's bridge). Checked at
 * compile time so that `--net proxy` in a build without it is a clear
 * refusal instead of a link error. */
#pragma once

#if __has_include("shinken/egress.h") && __has_include("egress/session.c") && \
    __has_include("egress/bridge.c")
#define SHK_HAVE_EGRESS 1
#include "shinken/egress.h"
#else
#define SHK_HAVE_EGRESS 0
#endif
