#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# status.sh: one exit status table for every command (shinken(1), EXIT
# STATUS): each row runs a command that must end with the table's status for
# its kind of failure, with one sentence on stderr, and with --json the
# error as one JSON object on stdout carrying the same status. Each kind
# has its control, the same command made valid, which does not exit so.
. "$SHINKEN_SRCDIR/tests/lib.sh"
set +e
tmp=$(mktemp -d) || fail "mktemp"
trap 'rm -rf "$tmp"' EXIT
# No manager answers here.
export SHINKEN_SOCKET="$tmp/none.sock"
unset XDG_RUNTIME_DIR
echo '{}' >"$tmp/ok.json"

# expect STATUS ARGS...: shinken ARGS exits STATUS with one line on stderr.
expect() {
  want=$1; shift
  "$SHINKEN" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  rc=$?
  [ "$rc" = "$want" ] || fail "shinken $* exited $rc, not $want: $(cat "$tmp/err")"
  [ "$(wc -l <"$tmp/err")" = 1 ] || fail "shinken $*: not one line on stderr: $(cat "$tmp/err")"
  grep -q '^shinken: ' "$tmp/err" || fail "shinken $*: the error does not start with 'shinken: '"
}

# 1, bad input: a file that is not there, a scope that is not JSON.
expect 1 trust "$tmp/missing.json"
expect 1 grant s1 net.egress --scope 'not json'
expect 1 cedar validate --schema "$tmp/missing.cedarschema" --policies "$tmp/missing.cedar"
# 4, unavailable: no manager.
expect 4 sessions
expect 4 grants
expect 4 revoke h-1
expect 4 approvals
expect 4 approvals -f
expect 4 approve c-1
expect 4 deny c-1
expect 4 cancel c-1
# 64, usage: a missing argument, an unknown option.
expect 64 grant
expect 64 revoke
expect 64 trust --bogus
expect 64 approve
expect 64 approve c-1 --once --session
expect 64 deny c-1 c-2
expect 64 cancel c-1 --reason why
expect 64 approvals s1 s2
# 125: shinken run's own error, before anything runs.
expect 125 run --net nowhere -- true
# --json: the error is also JSON on stdout, with the same status.
"$SHINKEN" sessions --json >"$tmp/out" 2>/dev/null
rc=$?
python3 -c 'import json, sys; o = json.load(open(sys.argv[1])); sys.exit(0 if o["ok"] is False and o["status"] == int(sys.argv[2]) and o["error"] else 1)' \
  "$tmp/out" "$rc" || fail "sessions --json: the error on stdout is not the JSON object: $(cat "$tmp/out")"
# Controls: the same commands, valid, do not fail so.
XDG_STATE_HOME=$tmp/state "$SHINKEN" trust "$tmp/ok.json" >/dev/null 2>&1 || fail "control: trust of a valid file failed"
"$SHINKEN" help grant >/dev/null 2>&1 || fail "control: help grant failed"
echo "ok: exit statuses"
