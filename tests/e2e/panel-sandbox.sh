#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The Permission Panel against a real `shinken run --panel` sandbox
# (tests/node/panel-sandbox.js): the Sessions view's start report, and an
# fs.scope unlock from the form, judged from outside the sandbox.
. "$SHINKEN_SRCDIR/tests/lib.sh"

[ "$(id -u)" = 0 ] || skip "needs root (host fixtures under /srv, inside the fs.scope ceiling)"
command -v node >/dev/null 2>&1 || skip "node is not installed"
chromium=${SHINKEN_CHROMIUM:-/usr/bin/chromium}
[ -x "$chromium" ] || skip "$chromium is not installed (scripts/install-deps.sh installs Debian's chromium)"
[ -d "$SHINKEN_SRCDIR/tests/node/node_modules/playwright-core" ] ||
  skip "tests/node has no playwright-core: run scripts/install-deps.sh"
exec node "$SHINKEN_SRCDIR/tests/node/panel-sandbox.js" --shinken "$SHINKEN" --src "$SHINKEN_SRCDIR"
