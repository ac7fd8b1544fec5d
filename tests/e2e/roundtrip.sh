#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Round trips of every policy and schema file in the official corpus (read
# from ../shared; never committed here).
. "$SHINKEN_SRCDIR/tests/lib.sh"
shared=$(shared_dir) || skip "../shared/cedar-conformance is not here: corpus round trips not run"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar xzf "$shared/cedar-conformance/corpus-tests.tar.gz" -C "$tmp" || fail "cannot extract the corpus"
"$1" "$tmp/corpus-tests" || fail "round trips over the corpus"
"$1" "$shared/cedar-conformance/sample-data/sandbox_a" || fail "round trips over sandbox_a"
"$1" "$shared/cedar-conformance/sample-data/sandbox_b" || fail "round trips over sandbox_b"
