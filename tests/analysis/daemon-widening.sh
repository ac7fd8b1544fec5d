#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# `shinken daemon` with a state directory: the project tier it accepted is
# recorded there; a wider one makes the next start fail with an example
# request, unless the operator gives --accept-widening; a narrower one
# starts. The daemon is judged from outside: whether it starts listening,
# its exit status and what it says.
. "$SHINKEN_SRCDIR/tests/lib.sh"
command -v cvc5 >/dev/null 2>&1 || skip "cvc5 is not installed (scripts/install-deps.sh)"
tmp=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
mkdir -p "$tmp/policies/manifests"
cp "$SHINKEN_SRCDIR/policies/schema.cedarschema" "$SHINKEN_SRCDIR/policies/admin.cedar" \
  "$SHINKEN_SRCDIR/policies/project.cedar" "$tmp/policies/"
cp "$SHINKEN_SRCDIR/policies/manifests/default.json" "$tmp/policies/manifests/"
printf '{"socket":"%s/m.sock","audit_db":"%s/audit.db","policy_dir":"%s/policies","state_dir":"%s/state"}\n' \
  "$tmp" "$tmp" "$tmp" "$tmp" >"$tmp/daemon.json"

# start [FLAGS]: runs the daemon; 0 when it listens (then stops it), else
# its exit status, with what it said in $tmp/err.
start() {
  : >"$tmp/out"
  "$SHINKEN" daemon --config "$tmp/daemon.json" "$@" >"$tmp/out" 2>"$tmp/err" &
  pid=$!
  i=0
  while [ $i -lt 300 ]; do
    if grep -q '^listening' "$tmp/out"; then
      kill "$pid"
      wait "$pid" || true
      pid=""
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      rc=0
      wait "$pid" || rc=$?
      pid=""
      return "$rc"
    fi
    sleep 0.1
    i=$((i + 1))
  done
  fail "the daemon neither listened nor exited"
}

start || { cat "$tmp/err"; fail "the first start failed"; }
[ -f "$tmp/state/policy-project.cedar" ] || fail "the accepted tier was not recorded"
cmp -s "$tmp/state/policy-project.cedar" "$tmp/policies/project.cedar" || fail "the record is not the tier"
[ "$(stat -c %a "$tmp/state/policy-project.cedar")" = 600 ] || fail "the record is not mode 0600"
echo "ok: the first start records the tier it accepted"

# The control: the same tier starts again.
start || { cat "$tmp/err"; fail "the same tier was refused"; }
echo "ok: the same tier starts"

# Ask-tier requests granted without a human: wider.
cat >>"$tmp/policies/project.cedar" <<'P'
@id("ask-without-asking")
permit (principal, action == Shinken::Action::"UseCapability", resource) when { context.tier == "Ask" };
P
rc=0
start || rc=$?
[ "$rc" = 1 ] || { cat "$tmp/err"; fail "a wider tier: exit $rc, expected 1"; }
grep -q 'is more permissive than the one last accepted' "$tmp/err" || { cat "$tmp/err"; fail "no reason given"; }
grep -q -- '--accept-widening' "$tmp/err" || { cat "$tmp/err"; fail "the refusal does not say how to accept"; }
grep -q '"tier":"Ask"' "$tmp/err" || { cat "$tmp/err"; fail "the refusal shows no example request"; }
[ "$(wc -l <"$tmp/err")" = 1 ] || { cat "$tmp/err"; fail "the refusal is not one line"; }
grep -q ask-without-asking "$tmp/state/policy-project.cedar" && fail "a refused tier was recorded"
echo "ok: a wider tier is refused, with an example request"

start --accept-widening || { cat "$tmp/err"; fail "--accept-widening did not start"; }
grep -q ask-without-asking "$tmp/state/policy-project.cedar" || fail "the accepted widening was not recorded"
echo "ok: --accept-widening starts and records the wider tier"

# Back to the shipped tier: narrower than the record, so it starts.
cp "$SHINKEN_SRCDIR/policies/project.cedar" "$tmp/policies/project.cedar"
start || { cat "$tmp/err"; fail "a narrower tier was refused"; }
echo "ok: a narrower tier starts"
