#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# config.sh CASE: the layers of `shinken run`'s options (shinken-config(5)):
# the administrator's file, the user's, a project's file only while `shinken
# trust` holds its hash, then the command line. Every effect is judged on
# the host: a file the command writes is there or not. Each case runs its
# control, which differs only in the layer under test.
# The commands run inside and the profiles' paths (~, $HOME) are expanded
# later, by the sandboxed shell and by shinken run, on purpose.
# shellcheck disable=SC2016,SC2088
. "$SHINKEN_SRCDIR/tests/lib.sh"
. "$SHINKEN_SRCDIR/tests/sandbox/scratch.sh"
set +e
CASE=$1
scratch=$(scratch_dir shk-config) || fail "mktemp"
trap 'rm -rf "$scratch"' EXIT
ws=$scratch/ws out=$scratch/out
mkdir -p "$ws" "$out" "$scratch/home" "$scratch/config/shinken" "$scratch/state"
export HOME="$scratch/home" XDG_CONFIG_HOME="$scratch/config" XDG_STATE_HOME="$scratch/state"
# Test builds read the administrator's file from here instead of /etc.
export SHINKEN_TEST_ADMIN_CONFIG="$scratch/admin.json"
unset SHINKEN_SOCKET
user_cfg=$XDG_CONFIG_HOME/shinken/config.json
ALLOW=""
[ "$(id -u)" = 0 ] && ALLOW=--allow-degraded
cd "$ws" || fail "cd"

# sr ARGS...: `shinken run ARGS -- sh -c 'echo x > $out/f'`; rc, and
# stderr in $scratch/err; wrote: whether the file appeared on the host.
sr() {
  rm -f "$out/f"
  # shellcheck disable=SC2086
  "$SHINKEN" run $ALLOW "$@" -- sh -c 'echo x > "$1"' sh "$out/f" >"$scratch/stdout" 2>"$scratch/err" </dev/null
  rc=$?
  echo "--- shinken run $* -> $rc" >&2
  sed 's/^/    /' "$scratch/err" >&2
  wrote=no
  [ -f "$out/f" ] && wrote=yes
}
expect() { # WROTE RC WHAT
  if [ "$wrote" != "$1" ] || [ "$rc" != "$2" ]; then
    fail "$3: wrote=$wrote rc=$rc (wanted wrote=$1 rc=$2): $(cat "$scratch/err")"
  fi
}

case $CASE in
  user)
    # The user's file is loaded by default.
    sr; expect no 2 "control: without a configuration, $out is read-only"
    printf '{"write": ["%s"]}\n' "$out" >"$user_cfg"
    sr; expect yes 0 "the user's configuration's write rule"
    ;;
  user-bad)
    # A broken user file stops the run with one sentence naming it.
    printf '{"write": ' >"$user_cfg"
    sr; expect no 125 "a user configuration that is not JSON"
    grep -qF "$user_cfg" "$scratch/err" || fail "the error does not name the file"
    ;;
  home)
    # ~ and $HOME in a file's paths are the caller's home.
    mkdir -p "$HOME/proj"
    out=$HOME/proj
    sr; expect no 2 "control: the home is read-only"
    echo '{"write": ["~/proj"]}' >"$user_cfg"
    sr; expect yes 0 "~/proj in the user's file"
    echo '{"write": ["$HOME/proj"]}' >"$user_cfg"
    sr; expect yes 0 "\$HOME/proj in the user's file"
    ;;
  profile-on-top)
    # A profile on the command line layers on top of the user's file: the
    # user's write rule, then the profile's deny of the same place.
    printf '{"write": ["%s"]}\n' "$out" >"$user_cfg"
    printf '{"deny": ["%s"]}\n' "$out" >"$scratch/profile.json"
    sr; expect yes 0 "control: the user's write rule alone"
    sr --profile "$scratch/profile.json"; [ "$wrote" = no ] || fail "the profile did not layer on top"
    ;;
  admin-limit)
    # The administrator's net "none" cannot be widened by the user's file
    # or the command line; without the administrator's file it can.
    sr --net host --write "$out"; expect yes 0 "control: --net host without the administrator's file"
    echo '{"net": "none"}' >"$SHINKEN_TEST_ADMIN_CONFIG"
    sr --net host --write "$out"; expect no 125 "--net host past the administrator's none"
    grep -q "goes beyond $SHINKEN_TEST_ADMIN_CONFIG" "$scratch/err" || fail "the error does not name the layer"
    printf '{"net": "host", "write": ["%s"]}\n' "$out" >"$user_cfg"
    sr; expect no 125 "the user's net host past the administrator's none"
    grep -qF "$user_cfg" "$scratch/err" || fail "the error does not name the user's file"
    ;;
  admin-deny)
    # The administrator's deny holds under a user's write rule.
    printf '{"write": ["%s"]}\n' "$out" >"$user_cfg"
    sr; expect yes 0 "control: the user's write rule alone"
    printf '{"deny": ["%s"]}\n' "$out" >"$SHINKEN_TEST_ADMIN_CONFIG"
    sr; [ "$wrote" = no ] || fail "the user's write rule beat the administrator's deny"
    ;;
  project)
    # A project's file is not loaded until trusted, and not after an edit.
    printf '{"write": ["%s"]}\n' "$out" >"$ws/.shinken.json"
    sr; expect no 2 "an untrusted project file"
    grep -q "not loaded" "$scratch/err" || fail "no warning that the project's file was not loaded"
    "$SHINKEN" trust >"$scratch/trust.out" 2>&1 || fail "shinken trust: $(cat "$scratch/trust.out")"
    grep -q "^trusted $ws/.shinken.json (sha256 [0-9a-f]\{64\})" "$scratch/trust.out" ||
      fail "shinken trust said: $(cat "$scratch/trust.out")"
    sr; expect yes 0 "the trusted project file"
    printf '{"write": ["%s"], "env-clean": true}\n' "$out" >"$ws/.shinken.json"
    sr; expect no 2 "an edited project file"
    grep -q "not loaded" "$scratch/err" || fail "no warning for the edited project file"
    ;;
  project-writes-itself)
    # The workload can write the project's file (it is in the writable
    # root), but what it writes is not trusted: the next run ignores it.
    echo '{}' >"$ws/.shinken.json"
    "$SHINKEN" trust >/dev/null 2>&1 || fail "shinken trust"
    # shellcheck disable=SC2086
    "$SHINKEN" run $ALLOW -- sh -c 'printf "{\"write\": [\"%s\"]}\n" "$1" > .shinken.json' sh "$out" \
      </dev/null 2>"$scratch/err" || fail "the workload could not write its own directory: $(cat "$scratch/err")"
    grep -q '"write"' "$ws/.shinken.json" || fail "control: the workload did not change the project's file"
    sr; expect no 2 "a project file the workload rewrote"
    ;;
  trust-store)
    # The trust store is read-only inside, even under a writable root; a
    # sibling of its directory is writable (the control).
    echo '{}' >"$ws/.shinken.json"
    "$SHINKEN" trust >/dev/null 2>&1 || fail "shinken trust"
    store=$XDG_STATE_HOME/shinken/trusted.json
    before=$(sha256sum "$store")
    # shellcheck disable=SC2086
    "$SHINKEN" run $ALLOW --write "$XDG_STATE_HOME" -- sh -c 'echo "{}" > "$1"; echo x > "$2"' sh \
      "$store" "$XDG_STATE_HOME/sibling" </dev/null 2>"$scratch/err"
    [ -f "$XDG_STATE_HOME/sibling" ] || fail "control: the writable root was not writable: $(cat "$scratch/err")"
    [ "$(sha256sum "$store")" = "$before" ] || fail "the workload changed the trust store"
    ;;
  trust-bad)
    # A file that is not a valid profile is refused at trust time, and
    # nothing is recorded.
    echo '{"no-such-key": 1}' >"$ws/.shinken.json"
    "$SHINKEN" trust >"$scratch/trust.out" 2>&1; rc=$?
    [ $rc = 1 ] || fail "shinken trust of a bad profile exited $rc: $(cat "$scratch/trust.out")"
    [ "$(wc -l <"$scratch/trust.out")" = 1 ] || fail "not one sentence: $(cat "$scratch/trust.out")"
    [ -e "$XDG_STATE_HOME/shinken/trusted.json" ] && fail "the bad file was recorded"
    "$SHINKEN" trust "$ws/missing.json" >"$scratch/trust.out" 2>&1; rc=$?
    [ $rc = 1 ] || fail "shinken trust of a missing file exited $rc"
    ;;
  *) fail "unknown case $CASE" ;;
esac
echo "ok: $CASE"
