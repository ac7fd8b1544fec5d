#!/bin/sh
# Random policies, entities and requests decided by Shinken and by the
# official engine (@cedar-policy/cedar-wasm in tests/node), compared.
. "$SHINKEN_SRCDIR/tests/lib.sh"

command -v node >/dev/null 2>&1 || skip "node is not installed"
[ -d "$SHINKEN_SRCDIR/tests/node/node_modules/@cedar-policy/cedar-wasm" ] ||
  skip "tests/node has no node_modules: run 'npm ci' in tests/node"
exec node "$SHINKEN_SRCDIR/tests/node/differential.js" --shinken "$SHINKEN" \
  --seed "${SHINKEN_DIFF_SEED:-20261130}" --worlds 100 --requests 40
