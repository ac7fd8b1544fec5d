#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The contract of 'shinken cedar analyze': exit codes, example requests,
# refusals by name, and failing closed when the solver is missing, hangs or
# gives answers the engine does not confirm.
. "$SHINKEN_SRCDIR/tests/lib.sh"
command -v cvc5 >/dev/null 2>&1 || skip "cvc5 is not installed (scripts/install-deps.sh)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
here=$SHINKEN_SRCDIR/tests/analysis

cat >"$tmp/schema.cedarschema" <<'S'
entity User = { level: Long };
entity Doc = { path: String };
action read, write appliesTo { principal: [User], resource: [Doc], context: { mfa: Bool } };
S
echo 'permit (principal, action, resource) when { principal.level > 1 };' >"$tmp/base.cedar"
echo 'permit (principal, action, resource) unless { principal.level <= 1 };' >"$tmp/same.cedar"
printf '%s\n%s\n' 'permit (principal, action, resource) when { principal.level > 1 };' \
  'forbid (principal, action, resource) when { resource.path like "*/.ssh/*" };' >"$tmp/narrower.cedar"
echo 'permit (principal, action, resource) when { principal.level > 0 };' >"$tmp/wider.cedar"
echo 'permit (principal, action == Action::"read", resource) when { principal.level > 1 };' >"$tmp/readonly.cedar"
echo 'permit (principal, action == Action::"write", resource);' >"$tmp/writeonly.cedar"
echo 'permit (principal == ?principal, action, resource);' >"$tmp/template.cedar"
echo 'permit (principal, action, resource) when { principal.nope };' >"$tmp/invalid.cedar"

# run WANT ARGS...: the command's exit status must be WANT; output in $tmp/out.
run() {
  want=$1
  shift
  set +e
  "$SHINKEN" cedar analyze "$@" >"$tmp/out" 2>&1
  rc=$?
  set -e
  [ "$rc" = "$want" ] || { cat "$tmp/out"; fail "cedar analyze $*: exit $rc, expected $want"; }
}
expect() { grep -q -- "$1" "$tmp/out" || { cat "$tmp/out"; fail "expected '$1' in the output"; }; }
schema=$tmp/schema.cedarschema

run 0 compare --schema "$schema" "$tmp/base.cedar" "$tmp/same.cedar"
expect "NEW is equivalent to OLD"
run 0 compare --schema "$schema" "$tmp/base.cedar" "$tmp/narrower.cedar"
expect "NEW is less permissive than OLD"
expect "OLD allows, NEW denies"
run 3 compare --schema "$schema" "$tmp/base.cedar" "$tmp/wider.cedar"
expect "NEW is more permissive than OLD"
expect "NEW allows, OLD denies"
expect '"level":1'
run 3 compare --schema "$schema" "$tmp/readonly.cedar" "$tmp/writeonly.cedar"
expect "NEW and OLD are incomparable"
expect "NEW allows, OLD denies"
expect "OLD allows, NEW denies"
# Machine-readable: the example requests as JSON.
run 3 compare --schema "$schema" "$tmp/base.cedar" "$tmp/wider.cedar" --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["relation"]=="more permissive"; assert any(e["wider"] and e["wider"]["request"]["principal"]["type"]=="User" for e in d["envs"])' "$tmp/out" ||
  fail "compare --json is not what it should be"
# Restricted to one action and by an assumption.
run 0 compare --schema "$schema" "$tmp/base.cedar" "$tmp/wider.cedar" --assume 'principal.level != 1'
run 0 compare --schema "$schema" "$tmp/readonly.cedar" "$tmp/base.cedar" --action read

run 0 always-allows --schema "$schema" "$tmp/writeonly.cedar" --action write
run 3 always-allows --schema "$schema" "$tmp/writeonly.cedar"
expect "counterexample"
run 0 never-errors --schema "$schema" "$tmp/writeonly.cedar"
run 3 never-errors --schema "$schema" "$tmp/base.cedar" --policy policy0
expect "does not exist"
run 0 matches-implies --schema "$schema" "$tmp/base.cedar" "$tmp/wider.cedar" --policy policy0 --policy policy0
run 3 equivalent --schema "$schema" "$tmp/base.cedar" "$tmp/wider.cedar"

# Bad input and refusals: exit 1, one sentence naming the problem.
run 1 compare "$tmp/base.cedar" "$tmp/same.cedar"
expect "--schema is required"
run 1 compare --schema "$schema" "$tmp/base.cedar" "$tmp/invalid.cedar"
expect "does not validate"
run 1 compare --schema "$schema" "$tmp/base.cedar" "$tmp/template.cedar"
expect "templates are not encoded"
run 1 frobnicate --schema "$schema" "$tmp/base.cedar"
expect "unknown question"
run 1 never-errors --schema "$schema" "$tmp/base.cedar" --policy nosuch
expect "no policy nosuch"
run 1 always-allows --schema "$schema" "$tmp/base.cedar" --assume 'context.nope'
expect "assumption"
run 1 always-allows --schema "$schema" "$tmp/base.cedar" --action nosuch
expect "no request environment"

# The solver: missing, silent, or lying. Each fails closed with exit 2.
run 2 compare --schema "$schema" --solver /nonexistent/cvc5 "$tmp/base.cedar" "$tmp/wider.cedar"
expect "not installed"
run 2 compare --schema "$schema" --solver "$here/hang-solver.sh" --timeout 200 "$tmp/base.cedar" "$tmp/wider.cedar"
expect "no answer within 200 ms"
run 2 always-denies --schema "$schema" --solver "$here/lying-solver.py" "$tmp/writeonly.cedar" --action read
expect "defect in the analysis"
run 0 solver
expect "cvc5 1."

# The grant-time question from the command line.
cat >"$tmp/req.json" <<'R'
{"principal":{"type":"User","id":"u"},"action":{"type":"Action","id":"write"},
 "resource":{"type":"Doc","id":"d"},"context":{"mfa":true}}
R
echo '[{"uid":{"type":"User","id":"u"},"attrs":{"level":5},"parents":[]},{"uid":{"type":"Doc","id":"d"},"attrs":{"path":"/x"},"parents":[]}]' >"$tmp/ents.json"
cat >"$tmp/grants.cedar" <<'P'
permit (principal, action, resource);
@id("no-ssh") forbid (principal, action, resource) when { resource.path like "*/.ssh/*" };
P
run 1 covers --schema "$schema" "$tmp/grants.cedar" --request "$tmp/req.json" --entities "$tmp/ents.json" --field mfa --path-prefix /home/u
expect "cannot hold a path prefix"

# Several fields at once: every path below a prefix with every port of a
# range; the narrowing names the field of each part it leaves out.
cat >"$tmp/grant.cedarschema" <<'S'
entity U;
action use appliesTo { principal: [U], resource: [U], context: { path: String, ports: { lo: Long, hi: Long } } };
S
cat >"$tmp/grant.cedar" <<'P'
permit (principal, action, resource);
@id("no-ssh") forbid (principal, action, resource) when { context.path like "/home/*/.ssh/*" };
@id("no-smtp") forbid (principal, action, resource) when { context.ports.lo <= 25 && 25 <= context.ports.hi };
P
echo '{"principal":{"type":"U","id":"u"},"action":{"type":"Action","id":"use"},"resource":{"type":"U","id":"u"},"context":{"path":"/srv/a","ports":{"lo":443,"hi":443}}}' >"$tmp/use.json"
gs=$tmp/grant.cedarschema
run 3 covers --schema "$gs" "$tmp/grant.cedar" --request "$tmp/use.json" --field path --path-prefix /home/u
expect "forbidden by no-ssh"
expect "/home/u covers /home/u/"
run 0 covers --schema "$gs" "$tmp/grant.cedar" --request "$tmp/use.json" --field path --path-prefix /srv/a \
  --field ports --ports 26-1000
expect "every element /srv/a, 26-1000 covers is allowed"
run 3 covers --schema "$gs" "$tmp/grant.cedar" --request "$tmp/use.json" --field path --path-prefix /srv/a \
  --field ports --ports 1-1000 --narrow 4
expect "forbidden by no-smtp"
expect "ports: 25-25"
run 3 covers --schema "$gs" "$tmp/grant.cedar" --request "$tmp/use.json" --field path --path-prefix /srv/a \
  --field ports --ports 1-1000 --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert not d["allowed"] and d["witness"]["ports"]=="25" and d["policy"]=="no-smtp"' "$tmp/out" ||
  fail "covers --json is not what it should be"
run 1 covers --schema "$gs" "$tmp/grant.cedar" --request "$tmp/use.json" --ports 1-10
expect "needs a --field of its own"
run 1 covers --schema "$gs" "$tmp/grant.cedar" --request "$tmp/use.json" --field path --path-prefix /a --field ports --path-prefix /b
expect "two covered fields are a path prefix"
echo "ok: cedar analyze"
