#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The contract of 'shinken cedar validate': exit 0 when every policy
# validates, 3 when one does not (each finding names the policy, the place and
# the types), 1 on bad input with one line on stderr; --json; a schema is JSON
# when its name ends in .json.
. "$SHINKEN_SRCDIR/tests/lib.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

expect() {
  want=$1; shift
  st=0
  "$@" >"$tmp/out" 2>"$tmp/err" || st=$?
  [ "$st" -eq "$want" ] || fail "exit $st instead of $want: $* (stdout: $(cat "$tmp/out") stderr: $(cat "$tmp/err"))"
}

bad_input() {
  word=$1; shift
  expect 1 "$@"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "not one line on stderr for: $* :: $(cat "$tmp/err")"
  grep -q -- "$word" "$tmp/err" || fail "stderr does not name '$word': $(cat "$tmp/err")"
}

cat >"$tmp/s.cedarschema" <<'S'
entity Team;
entity User in [Team] { name: String, age?: Long };
entity Doc { owner: User };
action read appliesTo { principal: User, resource: Doc, context: { n: Long } };
S
cat >"$tmp/s.json" <<'S'
{"": {"entityTypes": {"Team": {}, "User": {"memberOfTypes": ["Team"], "shape": {"type": "Record",
  "attributes": {"name": {"type": "String"}, "age": {"type": "Long", "required": false}}}},
  "Doc": {"shape": {"type": "Record", "attributes": {"owner": {"type": "Entity", "name": "User"}}}}},
 "actions": {"read": {"appliesTo": {"principalTypes": ["User"], "resourceTypes": ["Doc"],
  "context": {"type": "Record", "attributes": {"n": {"type": "Long"}}}}}}}}
S
cat >"$tmp/ok.cedar" <<'P'
permit (principal in Team::"t", action == Action::"read", resource)
when { resource.owner == principal && context.n > 0 && (principal has age && principal.age >= 18) };
P
cat >"$tmp/bad.cedar" <<'P'
permit (principal, action, resource);
permit (principal, action == Action::"read", resource)
when { principal.age >= 18 };
forbid (principal == Doc::"d", action, resource);
P

# Valid: exit 0, against the text and the JSON form of the same schema.
expect 0 "$SHINKEN" cedar validate --schema "$tmp/s.cedarschema" --policies "$tmp/ok.cedar"
grep -qx valid "$tmp/out" || fail "no 'valid' line: $(cat "$tmp/out")"
expect 0 "$SHINKEN" cedar validate --schema "$tmp/s.json" --policies "$tmp/ok.cedar"

# Invalid: exit 3; the optional attribute read without `has` is reported for
# policy1 at its line, and the scope that matches no action for policy2.
expect 3 "$SHINKEN" cedar validate --schema "$tmp/s.cedarschema" --policies "$tmp/bad.cedar"
grep -q "bad.cedar:3:[0-9]*: policy1: .*optional attribute .age. of User" "$tmp/out" ||
  fail "optional attribute finding missing: $(cat "$tmp/out")"
grep -q "policy2: .*never apply" "$tmp/out" || fail "action application finding missing: $(cat "$tmp/out")"
! grep -q "policy0" "$tmp/out" || fail "policy0 is valid but was reported: $(cat "$tmp/out")"
expect 3 "$SHINKEN" cedar validate --schema "$tmp/s.json" --policies "$tmp/bad.cedar"

# --json: one object with the verdict and each finding's policy and place.
expect 3 "$SHINKEN" cedar validate --json --schema "$tmp/s.cedarschema" --policies "$tmp/bad.cedar"
grep -q '"valid": false' "$tmp/out" || fail "--json verdict: $(cat "$tmp/out")"
grep -q '"policy": "policy1"' "$tmp/out" || fail "--json policy: $(cat "$tmp/out")"
grep -q '"line": 3' "$tmp/out" || fail "--json line: $(cat "$tmp/out")"
expect 0 "$SHINKEN" cedar validate --json --schema "$tmp/s.cedarschema" --policies "$tmp/ok.cedar"
grep -q '"valid": true' "$tmp/out" || fail "--json verdict: $(cat "$tmp/out")"

# The shipped policies validate against the shipped schema.
for p in "$SHINKEN_SRCDIR"/policies/*.cedar "$SHINKEN_SRCDIR"/policies/examples/*.cedar; do
  expect 0 "$SHINKEN" cedar validate --schema "$SHINKEN_SRCDIR/policies/schema.cedarschema" --policies "$p"
done

# Bad input: exit 1 and one line.
bad_input nope "$SHINKEN" cedar validate --schema "$tmp/nope" --policies "$tmp/ok.cedar"
bad_input nope "$SHINKEN" cedar validate --schema "$tmp/s.cedarschema" --policies "$tmp/nope"
printf 'permit (principal, action, resource) when { ( };\n' >"$tmp/syntax.cedar"
bad_input syntax.cedar "$SHINKEN" cedar validate --schema "$tmp/s.cedarschema" --policies "$tmp/syntax.cedar"
printf 'entity User {' >"$tmp/broken.cedarschema"
bad_input broken.cedarschema "$SHINKEN" cedar validate --schema "$tmp/broken.cedarschema" --policies "$tmp/ok.cedar"
expect 64 "$SHINKEN" cedar validate --schema "$tmp/s.cedarschema"
expect 64 "$SHINKEN" cedar validate --schema "$tmp/s.cedarschema" --policies "$tmp/ok.cedar" --bogus

echo "validate: ok"
