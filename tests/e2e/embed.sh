#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The embedding example (examples/cedar-embed.c) decides its requests as
# Cedar's semantics require: each line below is the decision and the
# determining policies one request must get, and the two error paths must
# report an error rather than a decision.
#   embed.sh PATH-TO-cedar-embed
. "$SHINKEN_SRCDIR/tests/lib.sh"
prog=${1:?usage: embed.sh PATH-TO-cedar-embed}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$prog" >"$out" || fail "cedar-embed exited with status $?"

expect() {
  grep -qxF "$1" "$out" || { cat "$out" >&2; fail "missing line: $1"; }
}
# An Auto-tier capability: the first policy alone.
expect 'Agent::"a1" UseCapability Capability::"clipboard": ALLOW by policy0 (@id auto-tier)'
# Egress needs approval: allowed when approved, denied (no policy) when pending.
expect 'Agent::"a1" UseCapability Capability::"net": ALLOW by policy1 (@id approved-egress)'
expect 'Agent::"a1" UseCapability Capability::"net": DENY'
# The template link, for the agent's session, names the link and its template's @id.
expect 'Agent::"a1" UseCapability Capability::"gpu0": ALLOW by grant-s1-gpu0 (@id session-grant)'
# A permit holds, but the forbid overrides it and is the only reason.
expect 'Agent::"a2" UseCapability Capability::"net": DENY by policy2 (@id untrusted-session)'
# Errors are reported with their place or reason, never as decisions.
grep -q '^broken policy rejected at 1:[0-9][0-9]*: .' "$out" || fail "no parse error with a place"
grep -q '^Agent::"a1" UseCapability Session::"s1": rejected: .' "$out" ||
  fail "the request of the wrong resource type was not rejected"
[ "$(grep -c ': ALLOW\|: DENY' "$out")" = 5 ] || { cat "$out" >&2; fail "expected exactly five decisions"; }
echo "ok: embedding example"
