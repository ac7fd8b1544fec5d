#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The mutant corpus: compare's answers on pairs with known relations, the
# random cross-check of every answer that holds (Shinken's engine), and
# every counterexample decided by the official engine (cedar-wasm).
. "$SHINKEN_SRCDIR/tests/lib.sh"
command -v cvc5 >/dev/null 2>&1 || skip "cvc5 is not installed (scripts/install-deps.sh)"
command -v node >/dev/null 2>&1 || skip "node is not installed"
[ -d "$SHINKEN_SRCDIR/tests/node/node_modules/@cedar-policy/cedar-wasm" ] ||
  skip "tests/node has no node_modules: run 'npm ci' in tests/node"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$SHINKEN_BUILDDIR/tests/analysis/test-analysis-mutants" --sets "${SHINKEN_MUTANT_SETS:-40}" \
  --out "$tmp/examples.jsonl" || fail "compare gave a wrong answer (above)"
node --no-opt --harmony-json-parse-with-source "$SHINKEN_SRCDIR/tests/analysis/wasm-check.js" "$tmp/examples.jsonl" ||
  fail "cedar-wasm disagrees with a counterexample (above)"
