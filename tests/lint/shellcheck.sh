#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs shellcheck over every shell script of the tree: scripts/*.sh,
# bench/*/*.sh and tests/**/*.sh. A finding fails the test, except the ones
# counted in shellcheck-baseline.txt (findings in scripts whose fixes are
# still to land); a baseline count that has dropped is reported, so it can
# be lowered.
. "$SHINKEN_SRCDIR/tests/lib.sh"
command -v shellcheck >/dev/null 2>&1 || skip "shellcheck is not installed (scripts/install-deps.sh installs it)"
cd "$SHINKEN_SRCDIR"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

find scripts bench tests -name '*.sh' -path 'scripts/*' -o -name '*.sh' -path 'bench/*' -o \
  -name '*.sh' -path 'tests/*' | LC_ALL=C sort >"$tmp/files"
[ -s "$tmp/files" ] || fail "no shell scripts found"
# -x follows the scripts that tests source (tests/lib.sh), from the top of
# the tree, where their paths resolve.
xargs shellcheck -x -f gcc <"$tmp/files" >"$tmp/findings" 2>&1 || true
# One line per finding: FILE CODE.
sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: [a-z]*: .*\[\(SC[0-9]*\)\]$/\1 \2/p' "$tmp/findings" |
  LC_ALL=C sort | uniq -c | awk '{ print $2, $3, $1 }' >"$tmp/counts"
# A line shellcheck printed that is not a finding is an error of its own.
if grep -v ': [a-z]*: .*\[SC[0-9]*\]$' "$tmp/findings" | grep -q .; then
  cat "$tmp/findings"
  fail "shellcheck did not run cleanly"
fi

status=0
while read -r file code n; do
  allowed=$(awk -v f="$file" -v c="$code" '$1 == f && $2 == c { print $3 }' tests/lint/shellcheck-baseline.txt)
  if [ "${allowed:-0}" -lt "$n" ]; then
    grep "^$file:.*\[$code\]\$" "$tmp/findings"
    echo "$file: $n finding(s) $code, ${allowed:-0} allowed"
    status=1
  fi
done <"$tmp/counts"
grep -v '^#' tests/lint/shellcheck-baseline.txt | while read -r file code allowed; do
  [ -n "$file" ] || continue
  n=$(awk -v f="$file" -v c="$code" '$1 == f && $2 == c { print $3 }' "$tmp/counts")
  [ "${n:-0}" -ge "$allowed" ] || echo "note: $file $code: ${n:-0} finding(s) left of $allowed allowed; lower the baseline"
done
[ "$status" = 0 ] || fail "shellcheck found problems (above)"
echo "shellcheck: $(wc -l <"$tmp/files") scripts, no finding beyond the baseline"
