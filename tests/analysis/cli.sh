#!/bin/sh
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
S="--schema $tmp/schema.cedarschema"

run 0 compare $S "$tmp/base.cedar" "$tmp/same.cedar"
expect "NEW is equivalent to OLD"
run 0 compare $S "$tmp/base.cedar" "$tmp/narrower.cedar"
expect "NEW is less permissive than OLD"
expect "OLD allows, NEW denies"
run 3 compare $S "$tmp/base.cedar" "$tmp/wider.cedar"
expect "NEW is more permissive than OLD"
expect "NEW allows, OLD denies"
expect '"level":1'
run 3 compare $S "$tmp/readonly.cedar" "$tmp/writeonly.cedar"
expect "NEW and OLD are incomparable"
expect "NEW allows, OLD denies"
expect "OLD allows, NEW denies"
# Machine-readable: the example requests as JSON.
run 3 compare $S "$tmp/base.cedar" "$tmp/wider.cedar" --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["relation"]=="more permissive"; assert any(e["wider"] and e["wider"]["request"]["principal"]["type"]=="User" for e in d["envs"])' "$tmp/out" ||
  fail "compare --json is not what it should be"
# Restricted to one action and by an assumption.
run 0 compare $S "$tmp/base.cedar" "$tmp/wider.cedar" --assume 'principal.level != 1'
run 0 compare $S "$tmp/readonly.cedar" "$tmp/base.cedar" --action read

run 0 always-allows $S "$tmp/writeonly.cedar" --action write
run 3 always-allows $S "$tmp/writeonly.cedar"
expect "counterexample"
run 0 never-errors $S "$tmp/writeonly.cedar"
run 3 never-errors $S "$tmp/base.cedar" --policy policy0
expect "does not exist"
run 0 matches-implies $S "$tmp/base.cedar" "$tmp/wider.cedar" --policy policy0 --policy policy0
run 3 equivalent $S "$tmp/base.cedar" "$tmp/wider.cedar"

# Bad input and refusals: exit 1, one sentence naming the problem.
run 1 compare "$tmp/base.cedar" "$tmp/same.cedar"
expect "--schema is required"
run 1 compare $S "$tmp/base.cedar" "$tmp/invalid.cedar"
expect "does not validate"
run 1 compare $S "$tmp/base.cedar" "$tmp/template.cedar"
expect "templates are not encoded"
run 1 frobnicate $S "$tmp/base.cedar"
expect "unknown question"
run 1 never-errors $S "$tmp/base.cedar" --policy nosuch
expect "no policy nosuch"
run 1 always-allows $S "$tmp/base.cedar" --assume 'context.nope'
expect "assumption"
run 1 always-allows $S "$tmp/base.cedar" --action nosuch
expect "no request environment"

# The solver: missing, silent, or lying. Each fails closed with exit 2.
run 2 compare $S --solver /nonexistent/cvc5 "$tmp/base.cedar" "$tmp/wider.cedar"
expect "not installed"
run 2 compare $S --solver "$here/hang-solver.sh" --timeout 200 "$tmp/base.cedar" "$tmp/wider.cedar"
expect "no answer within 200 ms"
run 2 always-denies $S --solver "$here/lying-solver.py" "$tmp/writeonly.cedar" --action read
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
run 1 covers $S "$tmp/grants.cedar" --request "$tmp/req.json" --entities "$tmp/ents.json" --field mfa --path-prefix /home/u
expect "cannot hold a path prefix"
echo "ok: cedar analyze"
