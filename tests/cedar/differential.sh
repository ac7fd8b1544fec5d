#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Random policies, entities and requests decided by Shinken and by the
# official engine (@cedar-policy/cedar-wasm in tests/node), compared.
. "$SHINKEN_SRCDIR/tests/lib.sh"

command -v node >/dev/null 2>&1 || skip "node is not installed"
[ -d "$SHINKEN_SRCDIR/tests/node/node_modules/@cedar-policy/cedar-wasm" ] ||
  skip "tests/node has no node_modules: run 'npm ci' in tests/node"
# --no-opt: Node 20's optimizing compiler aborts the process (a fatal error
# in its deoptimizer) after some thousands of calls into cedar-wasm, at the
# same point for the same seed; without it the run is stable and the time
# goes to the two engines anyway.
exec node --no-opt "$SHINKEN_SRCDIR/tests/node/differential.js" --shinken "$SHINKEN" \
  --seed "${SHINKEN_DIFF_SEED:-20261130}" --worlds 100 --requests 40
