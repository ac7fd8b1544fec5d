#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# One group of the egress proxy's cases (see driver.mjs), run against the
# real shinken binary inside namespaces this test creates (see netns.sh).
. "$SHINKEN_SRCDIR/tests/lib.sh"
. "$SHINKEN_SRCDIR/tests/egress/netns.sh"
group=$1
# The session host (session-host.c), for the groups that need a session.
export EG_SESSION_HOST="${2:-}"
"$SHINKEN" proxy --help >/dev/null 2>&1 || "$SHINKEN" --help 2>&1 | grep -q '^  proxy ' ||
  fail "this shinken has no 'proxy' command"
eg_setup
mkdir -p "$EG_TMP/www"
eg_upstream
# Up to 1,000 tunnels, two descriptors each, plus the clients' own.
ulimit -n 16384 2>/dev/null || true
EG_TMP="$EG_TMP" ip netns exec "$EG_P" node "$SHINKEN_SRCDIR/tests/egress/driver.mjs" "$group"
