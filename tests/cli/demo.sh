#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# demo.sh WHO: `make demo`'s script (scripts/demo.sh) as root or as an
# unprivileged user (WHO=user) shows the refusals it claims: reading the
# key it planted in the run's ~/.ssh and appending to its ~/.bashrc are
# refused, and judged outside the key is there and the file unchanged. The
# control is the write into the workspace, which the same judge says is
# DONE (and the file is there outside).
. "$SHINKEN_SRCDIR/tests/lib.sh"
who=${1:-root}
tmp=$(mktemp -d /var/tmp/shk-demo-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
chmod 0755 "$tmp"
shinken=$SHINKEN policies=$SHINKEN_SRCDIR/policies src=$SHINKEN_SRCDIR
as=""
if [ "$who" = user ]; then
  [ "$(id -u)" = 0 ] || skip "needs root to become another user"
  as="setpriv --reuid=65534 --regid=65534 --clear-groups"
  # The user may not reach the build tree: a copy of what the demo needs.
  if ! $as test -x "$SHINKEN" -a -r "$SHINKEN_SRCDIR/scripts/demo.sh" -a -r "$policies/schema.cedarschema"; then
    mkdir -p "$tmp/src/scripts"
    cp "$SHINKEN" "$tmp/shinken"
    cp "$SHINKEN_SRCDIR/scripts/demo.sh" "$tmp/src/scripts/"
    cp -r "$policies" "$tmp/src/policies"
    chmod -R a+rX "$tmp"
    shinken=$tmp/shinken policies=$tmp/src/policies src=$tmp/src
  fi
  mkdir "$tmp/home"
  chown 65534:65534 "$tmp/home"
fi
# shellcheck disable=SC2086
$as env -i PATH=/usr/bin:/bin HOME="$tmp/home" SHINKEN_POLICY_DIR="$policies" \
  sh "$src/scripts/demo.sh" "$shinken" >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; fail "the demo failed"; }
cat "$tmp/out" >&2
line() { grep -q "^    $1 *: $2\$" "$tmp/out" || fail "the demo does not say '$1: $2'"; }
line "read ~/.ssh/id_ed25519" refused
line "append to ~/.bashrc" refused
line "write /etc/passwd" refused
line "write a file in the workspace" DONE
grep -q "(outside: the key it could not read is there)" "$tmp/out" || fail "the planted key was not judged outside"
grep -q "(outside: ~/.bashrc is as it was)" "$tmp/out" || fail "the .bashrc was not judged unchanged outside"
grep -q "(outside: result.txt is in the workspace)" "$tmp/out" || fail "control: the workspace write was not seen outside"
{ grep -q "DENY" "$tmp/out" && grep -q "ALLOW" "$tmp/out"; } || fail "the Cedar part did not decide"
echo "ok: demo as $who"
