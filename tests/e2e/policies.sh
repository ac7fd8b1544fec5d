#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Every shipped policy validates against the shipped schema, and a permit
# in the session tier would be refused (checked in the manager test).
. "$SHINKEN_SRCDIR/tests/lib.sh"
cd "$SHINKEN_SRCDIR/policies"
for f in admin.cedar project.cedar; do
  "$SHINKEN" cedar validate --schema schema.cedarschema --policies "$f" || fail "$f does not validate"
done
# The check can fail: a policy naming an attribute the schema lacks is refused.
bad=$(mktemp)
trap 'rm -f "$bad"' EXIT
printf 'forbid(principal, action == Shinken::Action::"UseCapability", resource) when { context.request.nope == 1 };\n' >"$bad"
if "$SHINKEN" cedar validate --schema schema.cedarschema --policies "$bad" >/dev/null 2>&1; then
  fail "an invalid policy validated"
fi
echo "shipped policies validate"
