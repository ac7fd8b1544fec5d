#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The contract of 'shinken cedar authorize' and 'conformance': answers,
# exit codes (0 allow, 2 deny, 1 bad input, 64 usage), one clear line per bad input,
# batch mode order, and a conformance run that can fail.
. "$SHINKEN_SRCDIR/tests/lib.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ex=$SHINKEN_SRCDIR/policies/examples
schema=$SHINKEN_SRCDIR/policies/schema.cedarschema

# expect STATUS CMD...: runs CMD, keeps stdout and stderr, checks the status.
expect() {
  want=$1; shift
  st=0
  "$@" >"$tmp/out" 2>"$tmp/err" || st=$?
  [ "$st" -eq "$want" ] || fail "exit $st instead of $want: $* (stderr: $(cat "$tmp/err"))"
}

# bad_input WORD CMD...: exit 1, exactly one line on stderr naming WORD, nothing on stdout.
# usage_error WORD CMD...: the same with exit 64 (shinken(1), EXIT STATUS).
bad_input() { complaint 1 "$@"; }
usage_error() { complaint 64 "$@"; }
complaint() {
  code=$1 word=$2; shift 2
  expect "$code" "$@"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "not one line on stderr for: $* :: $(cat "$tmp/err")"
  grep -q -- "$word" "$tmp/err" || fail "stderr does not name '$word': $(cat "$tmp/err")"
  [ ! -s "$tmp/out" ] || fail "output on stdout for bad input: $*"
}

cat >"$tmp/p.cedar" <<'P'
permit (principal == User::"alice", action == Action::"read", resource)
when { resource.public || principal in resource.readers };
forbid (principal, action, resource) when { context.blocked };
permit (principal, action == Action::"read", resource) when { principal.missing };
P
cat >"$tmp/e.json" <<'P'
[ {"uid": {"type": "User", "id": "alice"}, "attrs": {}, "parents": [{"type": "Team", "id": "t"}]},
  {"uid": {"type": "User", "id": "bob"}, "attrs": {}, "parents": []},
  {"uid": {"type": "Doc", "id": "d"}, "attrs": {"public": false, "readers": {"__entity": {"type": "Team", "id": "t"}}}, "parents": []} ]
P
echo '{"blocked": false}' >"$tmp/ctx-open.json"
echo '{"blocked": true}' >"$tmp/ctx-blocked.json"
auth() { "$SHINKEN" cedar authorize --policies "$tmp/p.cedar" --entities "$tmp/e.json" "$@"; }

# Single requests, text answers with their reasons and errors.
expect 0 auth --principal 'User::"alice"' --action 'Action::"read"' --resource 'Doc::"d"' --context "$tmp/ctx-open.json"
[ "$(head -n 1 "$tmp/out")" = ALLOW ] || fail "alice reading d: $(cat "$tmp/out")"
grep -q 'permitted by policy0' "$tmp/out" || fail "no reason given: $(cat "$tmp/out")"
grep -q 'skipped policy2' "$tmp/out" || fail "the erroring policy is not reported: $(cat "$tmp/out")"
expect 2 auth --principal 'User::"alice"' --action 'Action::"read"' --resource 'Doc::"d"' --context "$tmp/ctx-blocked.json"
[ "$(head -n 1 "$tmp/out")" = DENY ] || fail "blocked context: $(cat "$tmp/out")"
grep -q 'forbidden by policy1' "$tmp/out" || fail "no forbid reason: $(cat "$tmp/out")"
expect 2 auth --principal 'User::"bob"' --action 'Action::"read"' --resource 'Doc::"d"' --context "$tmp/ctx-open.json"
grep -q 'deny by default' "$tmp/out" || fail "bob: $(cat "$tmp/out")"

# The official CLI's short options.
expect 0 "$SHINKEN" cedar authorize -p "$tmp/p.cedar" -e "$tmp/e.json" -l 'User::"alice"' -a 'Action::"read"' -r 'Doc::"d"' -c "$tmp/ctx-open.json"
[ "$(head -n 1 "$tmp/out")" = ALLOW ] || fail "short options: $(cat "$tmp/out")"

# --json: one object with decision, reasons and errors.
expect 0 auth --principal 'User::"alice"' --action 'Action::"read"' --resource 'Doc::"d"' --context "$tmp/ctx-open.json" --json
python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))
assert a["decision"] == "allow" and a["reasons"] == ["policy0"], a
assert [e["policy"] for e in a["errors"]] == ["policy2"] and a["errors"][0]["message"], a
' "$tmp/out" || fail "--json answer: $(cat "$tmp/out")"

# --request-json gives the same answer as the parts.
echo '{"principal": "User::\"alice\"", "action": {"type": "Action", "id": "read"}, "resource": {"type": "Doc", "id": "d"}, "context": {"blocked": true}}' >"$tmp/req.json"
expect 2 auth --request-json "$tmp/req.json"
grep -q 'forbidden by policy1' "$tmp/out" || fail "--request-json: $(cat "$tmp/out")"

# Batch mode: one answer per line, in order; a bad line answers with an
# error in its place and makes the exit status 1.
{
  echo '{"principal": {"type": "User", "id": "alice"}, "action": {"type": "Action", "id": "read"}, "resource": {"type": "Doc", "id": "d"}, "context": {"blocked": false}}'
  echo '{"principal": {"type": "User", "id": "bob"}, "action": {"type": "Action", "id": "read"}, "resource": {"type": "Doc", "id": "d"}, "context": {"blocked": false}}'
  echo '{"principal": {"type": "User", "id": "alice"}, "action": {"type": "Action", "id": "read"}, "resource": {"type": "Doc", "id": "d"}, "context": {"blocked": true}}'
} >"$tmp/reqs.jsonl"
expect 0 auth --requests "$tmp/reqs.jsonl"
python3 -c '
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
assert [x["decision"] for x in a] == ["allow", "deny", "deny"], a
assert a[2]["reasons"] == ["policy1"], a
' "$tmp/out" || fail "batch answers: $(cat "$tmp/out")"
{ head -n 1 "$tmp/reqs.jsonl"; echo '{"principal": 7}'; tail -n 1 "$tmp/reqs.jsonl"; } >"$tmp/bad.jsonl"
expect 1 auth --requests - <"$tmp/bad.jsonl"
python3 -c '
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
assert len(a) == 3 and a[0]["decision"] == "allow" and "error" in a[1] and a[2]["decision"] == "deny", a
' "$tmp/out" || fail "batch with a bad line: $(cat "$tmp/out")"

# With a schema, a request the schema does not allow is bad input, not DENY.
sauth() { "$SHINKEN" cedar authorize --schema "$schema" --policies "$ex/session.cedar" --entities "$ex/entities.json" "$@"; }
expect 0 sauth --request-json "$ex/requests/egress-pypi.json"
grep -q 'egress-package-registries' "$tmp/out" || fail "the @id of the reason is not shown: $(cat "$tmp/out")"
sed 's/"Shinken::Agent"/"Shinken::Capability"/' "$ex/requests/egress-pypi.json" >"$tmp/wrong-type.json"
expect 1 sauth --request-json "$tmp/wrong-type.json"
{ [ "$(wc -l <"$tmp/err")" -eq 1 ] && [ ! -s "$tmp/out" ]; } || fail "a request outside the schema: $(cat "$tmp/out" "$tmp/err")"

# Bad input: one line naming the problem, exit 1.
bad_input nosuch.cedar "$SHINKEN" cedar authorize --policies "$tmp/nosuch.cedar" --entities "$tmp/e.json" --request-json "$tmp/req.json"
printf 'permit (principal, action, resource)\nwhen { principal. };\n' >"$tmp/broken.cedar"
bad_input 'broken.cedar:2:' "$SHINKEN" cedar authorize --policies "$tmp/broken.cedar" --entities "$tmp/e.json" --request-json "$tmp/req.json"
echo '[{"uid": 3}]' >"$tmp/broken.json"
bad_input broken.json "$SHINKEN" cedar authorize --policies "$tmp/p.cedar" --entities "$tmp/broken.json" --request-json "$tmp/req.json"
usage_error "--frobnicate" auth --request-json "$tmp/req.json" --frobnicate
usage_error "--policies" "$SHINKEN" cedar authorize --policies
usage_error "exactly one" auth
usage_error "--principal" auth --principal 'User::"alice"'
bad_input request auth --principal 'User::"alice' --action 'Action::"read"' --resource 'Doc::"d"' --context "$tmp/req.json"
usage_error "unknown command" "$SHINKEN" cedar frobnicate

# Conformance: a passing file passes, and a wrong expectation is reported.
mkdir "$tmp/conf"
cp "$tmp/p.cedar" "$tmp/e.json" "$tmp/conf/"
printf 'entity Team;\nentity User in [Team];\nentity Doc { public: Bool, readers: Team };\naction read appliesTo { principal: User, resource: Doc, context: { blocked: Bool } };\n' >"$tmp/conf/s.cedarschema"
for d in allow deny; do
  cat >"$tmp/conf/$d.json" <<J
{ "policies": "p.cedar", "entities": "e.json", "schema": "s.cedarschema", "shouldValidate": false,
  "requests": [ { "description": "alice reads d", "principal": {"type": "User", "id": "alice"},
    "action": {"type": "Action", "id": "read"}, "resource": {"type": "Doc", "id": "d"},
    "context": {"blocked": false}, "validateRequest": true,
    "decision": "$d", "reason": ["policy0"], "errors": ["policy2"] } ] }
J
done
expect 0 "$SHINKEN" cedar conformance --root "$tmp/conf" "$tmp/conf/allow.json"
[ "$(tail -n 1 "$tmp/out")" = "1 passed, 0 failed" ] || fail "conformance pass: $(cat "$tmp/out")"
expect 3 "$SHINKEN" cedar conformance --root "$tmp/conf" "$tmp/conf/deny.json" "$tmp/conf/allow.json"
[ "$(tail -n 1 "$tmp/out")" = "1 passed, 1 failed" ] || fail "conformance failure not counted: $(cat "$tmp/out")"
grep -q '^FAIL .*deny.json: alice reads d: expected deny' "$tmp/out" || fail "failure not described: $(cat "$tmp/out")"
# Template links: the linked policy decides, under its link id; a link to
# a missing template, or with a slot the template lacks, is bad input.
printf 'permit (principal == ?principal, action, resource in ?resource);\n' >"$tmp/t.cedar"
printf '[{"uid":{"type":"Doc","id":"d1"},"attrs":{},"parents":[{"type":"Folder","id":"docs"}]}]' >"$tmp/te.json"
printf '[{"template_id":"policy0","link_id":"alice-docs","args":{"?principal":"User::\\"alice\\"","?resource":"Folder::\\"docs\\""}}]' >"$tmp/links.json"
tauth() {
  "$SHINKEN" cedar authorize --policies "$tmp/t.cedar" --entities "$tmp/te.json" --template-linked "$tmp/links.json" \
    --action 'Action::"read"' --resource 'Doc::"d1"' "$@"
}
expect 0 tauth --principal 'User::"alice"' --json
grep -q '"alice-docs"' "$tmp/out" || fail "link id not the reason: $(cat "$tmp/out")"
expect 2 tauth --principal 'User::"bob"'
expect 2 "$SHINKEN" cedar authorize --policies "$tmp/t.cedar" --entities "$tmp/te.json" --principal 'User::"alice"' --action 'Action::"read"' --resource 'Doc::"d1"'
printf '[{"template_id":"nope","link_id":"x","args":{}}]' >"$tmp/l2.json"
bad_input "no template" "$SHINKEN" cedar authorize --policies "$tmp/t.cedar" --entities "$tmp/te.json" --template-linked "$tmp/l2.json" --principal 'User::"a"' --action 'Action::"r"' --resource 'Doc::"d1"'
printf '[{"template_id":"policy0","link_id":"y","args":{"?principal":"User::\\"a\\"","?other":"X::\\"1\\""}}]' >"$tmp/l3.json"
bad_input "?principal" "$SHINKEN" cedar authorize --policies "$tmp/t.cedar" --entities "$tmp/te.json" --template-linked "$tmp/l3.json" --principal 'User::"a"' --action 'Action::"r"' --resource 'Doc::"d1"'
echo "cedar CLI: all checks passed"
