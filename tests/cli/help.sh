#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# help.sh CMD: `shinken CMD --help` prints CMD's usage on stdout and exits 0;
# an option CMD does not have is one sentence on stderr that points to
# --help, with the usage status (64; shinken run: 125, its own errors); and
# `shinken help CMD` opens CMD's manual page when man finds it, and prints
# the usage when it does not.
. "$SHINKEN_SRCDIR/tests/lib.sh"
set +e
CMD=$1
tmp=$(mktemp -d) || fail "mktemp"
trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2086
$SHINKEN $CMD --help >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 0 ] || fail "shinken $CMD --help exited $rc: $(cat "$tmp/err")"
[ -s "$tmp/err" ] && fail "shinken $CMD --help wrote to stderr: $(cat "$tmp/err")"
head -1 "$tmp/out" | grep -q "^usage: shinken $CMD" ||
  fail "shinken $CMD --help does not start with its usage: $(head -1 "$tmp/out")"
# -h is the same.
# shellcheck disable=SC2086
$SHINKEN $CMD -h >"$tmp/out-h" 2>&1
cmp -s "$tmp/out" "$tmp/out-h" || fail "shinken $CMD -h differs from --help"

# Control: an option no command has is an error, not the usage.
case $CMD in run) want=125 ;; *) want=64 ;; esac
# shellcheck disable=SC2086
$SHINKEN $CMD --no-such-option >"$tmp/out" 2>"$tmp/err" </dev/null
rc=$?
[ $rc = $want ] || fail "shinken $CMD --no-such-option exited $rc, not $want: $(cat "$tmp/err")"
[ "$(wc -l <"$tmp/err")" = 1 ] || fail "shinken $CMD --no-such-option: not one line: $(cat "$tmp/err")"
grep -q -- "--no-such-option" "$tmp/err" || fail "the error does not name the option: $(cat "$tmp/err")"

# shinken help CMD: the page, from a MANPATH that has it.
page=shinken-${CMD%% *}
src="$SHINKEN_BUILDDIR/$page.1"
[ -f "$src" ] || fail "no manual page $page.1 in the build (is scdoc installed?)"
mkdir -p "$tmp/man/man1" && cp "$src" "$tmp/man/man1/"
# shellcheck disable=SC2086
MANPATH=$tmp/man MANPAGER=cat MANWIDTH=80 $SHINKEN help $CMD >"$tmp/page" 2>"$tmp/err"
rc=$?
[ $rc = 0 ] || fail "shinken help $CMD exited $rc: $(cat "$tmp/err")"
if ! grep -qi "^NAME" "$tmp/page" || ! grep -qi "$page" "$tmp/page"; then
  fail "shinken help $CMD did not show the page: $(head -5 "$tmp/page")"
fi
for section in SYNOPSIS EXAMPLES "SEE ALSO"; do
  grep -q "^$section" "$tmp/page" || fail "$page(1) has no $section section"
done
# Control: where man finds no page, the usage.
# shellcheck disable=SC2086
MANPATH=$tmp/none $SHINKEN help $CMD >"$tmp/out" 2>"$tmp/err"
head -1 "$tmp/out" | grep -q "^usage: shinken $CMD" ||
  fail "without a page, shinken help $CMD printed: $(head -3 "$tmp/out")"
echo "ok: $CMD"
