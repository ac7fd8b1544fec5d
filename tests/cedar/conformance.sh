#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs the whole official conformance corpus (cedar-integration-tests: the
# generated corpus and the hand-written tests) through 'shinken cedar
# conformance' and fails on any mismatch, or when fewer requests ran than
# the test files hold.
. "$SHINKEN_SRCDIR/tests/lib.sh"

shared=$(shared_dir) || skip "the conformance corpus (../shared/cedar-conformance beside the source tree) is not present"
conf=$shared/cedar-conformance
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

tar xzf "$conf/corpus-tests.tar.gz" -C "$tmp" || fail "cannot extract $conf/corpus-tests.tar.gz"
find "$tmp/corpus-tests" -name '*.json' ! -name '*.entities.json' | sort >"$tmp/corpus.list"
(cd "$conf" && ls tests/*/*.json) | sed "s|^|$conf/|" >"$tmp/hand.list"

# Requests the files hold, counted independently of the runner: each
# request has exactly one "description" key.
expected() { xargs cat <"$1" | grep -o '"description"' | wc -l; }

status=0
run() { # NAME ROOT LIST
  want=$(expected "$3")
  [ "$want" -gt 0 ] || fail "$1: no requests found in the test files"
  "$SHINKEN" cedar conformance --root "$2" --files-from "$3" >"$tmp/$1.out" 2>&1 || status=1
  summary='^(validation:|[0-9]+ passed)'
  grep -Ev "$summary" "$tmp/$1.out" | head -60
  n=$(grep -c '^FAIL' "$tmp/$1.out" || true)
  [ "$n" -eq 0 ] || echo "$1: $n failing lines (the first shown above)"
  grep -E "$summary" "$tmp/$1.out" | sed "s/^/$1: /"
  last=$(tail -n 1 "$tmp/$1.out")
  case $last in
    "$want passed, 0 failed") ;;
    *) echo "$1: expected '$want passed, 0 failed'"; status=1 ;;
  esac
}
run corpus "$tmp" "$tmp/corpus.list"
run handwritten "$conf" "$tmp/hand.list"
exit $status
