#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The Permission Panel in a real browser (tests/node/panel-browser.js):
# Debian's chromium, headless, driven by playwright-core, both installed by
# scripts/install-deps.sh.
. "$SHINKEN_SRCDIR/tests/lib.sh"

command -v node >/dev/null 2>&1 || skip "node is not installed"
chromium=${SHINKEN_CHROMIUM:-/usr/bin/chromium}
[ -x "$chromium" ] || skip "$chromium is not installed (scripts/install-deps.sh installs Debian's chromium)"
[ -d "$SHINKEN_SRCDIR/tests/node/node_modules/playwright-core" ] ||
  skip "tests/node has no playwright-core: run scripts/install-deps.sh"
exec node "$SHINKEN_SRCDIR/tests/node/panel-browser.js" --shinken "$SHINKEN" --src "$SHINKEN_SRCDIR"
