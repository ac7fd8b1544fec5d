# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=sh
# Shared helpers for the shell tests. Source it; it sets -eu.
set -eu
: "${SHINKEN:?SHINKEN must name the shinken binary (meson test sets it)}"
: "${SHINKEN_SRCDIR:?}"

# skip REASON: a missing kernel feature or tool. Under SHINKEN_MUST_WORK=1
# (set in CI) a skip is a failure, so nothing is silently not tested.
skip() {
  if [ "${SHINKEN_MUST_WORK:-0}" = 1 ]; then
    echo "FAIL (SHINKEN_MUST_WORK=1, would skip): $*" >&2
    exit 1
  fi
  echo "SKIP: $*" >&2
  exit 77
}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# The shared conformance corpus sits beside the repository when it is there.
shared_dir() {
  for d in "$SHINKEN_SRCDIR/../shared" "$SHINKEN_SRCDIR/../../shared"; do
    [ -d "$d/cedar-conformance" ] && { (cd "$d" && pwd); return 0; }
  done
  return 1
}
