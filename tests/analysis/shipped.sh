#!/bin/sh
# Properties of the shipped policies (policies/), proven by the analyzer
# over every request and entity store the schema admits. Each is stated
# about what the policies decide, not how they are written, and each has a
# control: the same question about a set without the admin tier (or a
# permissive one), which must fail with a counterexample, so that a broken
# analysis cannot pass by saying "holds" to everything.
. "$SHINKEN_SRCDIR/tests/lib.sh"
command -v cvc5 >/dev/null 2>&1 || skip "cvc5 is not installed (scripts/install-deps.sh)"

p=$SHINKEN_SRCDIR/policies
schema=$p/schema.cedarschema
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The project tiers the admin tier is proven over: the shipped default and
# the example project policies.
tiers="$p/project.cedar"
[ -f "$p/examples/session.cedar" ] && tiers="$tiers $p/examples/session.cedar"
echo 'permit (principal, action, resource);' >"$tmp/anything.cedar"

analyze() { "$SHINKEN" cedar analyze "$@" --schema "$schema"; }

# holds NAME QUERY FILES... [FLAGS]: exit 0 required.
holds() {
  name=$1
  shift
  analyze "$@" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "$name: does not hold"; }
  echo "ok: $name"
}

# fails NAME QUERY FILES... [FLAGS]: the control; exit 3 with a counterexample.
fails() {
  name=$1
  shift
  set +e
  analyze "$@" >"$tmp/out" 2>&1
  rc=$?
  set -e
  [ "$rc" = 3 ] || { cat "$tmp/out"; fail "$name (control): expected a counterexample (exit 3), got exit $rc"; }
  grep -q '"principal"' "$tmp/out" || { cat "$tmp/out"; fail "$name (control): no counterexample printed"; }
  echo "ok: $name fails without the admin tier, with a counterexample"
}

n=0
for tier in $tiers; do
  n=$((n + 1))
  cat "$p/admin.cedar" "$tier" >"$tmp/set$n.cedar"
  set=$tmp/set$n.cedar
  t=$(basename "$tier")

  a='resource == Shinken::Capability::"install.privileged" && context.trust_tier == "low"'
  holds "$t: no permit reaches install.privileged at trust tier low" always-denies "$set" \
    --action UseCapability --assume "$a"
  fails "$t: install.privileged at trust tier low" always-denies "$tmp/anything.cedar" --action UseCapability --assume "$a"

  # File-system writes under a credential store or onto a shell's start-up
  # file, in every environment (where the context has no request,
  # vacuously).
  w='resource == Shinken::Capability::"fs.scope" &&
     context has request && context.request has access && context.request.access == "write" &&
     context.request has path &&
     (context.request.path like "*/.ssh/*" || context.request.path like "*/.ssh" ||
      context.request.path like "*/.aws/*" || context.request.path like "*/.gnupg/*" ||
      context.request.path like "*/.kube/*" || context.request.path like "*/.docker/*" ||
      context.request.path like "*/.bashrc" || context.request.path like "*/.profile")'
  holds "$t: no request writes under a credential store" always-denies "$set" --assume "$w"
  fails "$t: writes under a credential store" always-denies "$tmp/anything.cedar" --assume "$w"

  # The session's expiry, a Block tier and a human's denial are final.
  holds "$t: nothing is granted past the session's expiry" always-denies "$set" --action UseCapability \
    --assume '!(context.now < principal.expires)'
  holds "$t: a Block tier is never granted" always-denies "$set" --action UseCapability \
    --assume 'context.tier == "Block"'
  holds "$t: what a human denied stays denied" always-denies "$set" --action UseCapability \
    --assume 'context.approval_state == "denied"'
  fails "$t: a human's denial" always-denies "$tier" --action UseCapability \
    --assume 'context.approval_state == "denied" && context.tier == "Auto"'
  holds "$t: raw credentials are never granted" always-denies "$set" --action UseCapability \
    --assume 'resource == Shinken::Capability::"credentials" && context.request has raw && context.request.raw'

  # Adding the admin tier never widens the project tier.
  holds "$t: the admin tier only narrows" compare "$tier" "$set"

  # For requests whose principal and resource exist (the manager's store
  # always holds them), no policy of the set errors.
  holds "$t: no policy errors" never-errors "$set" --assume 'principal has expires && resource has class'
done

holds "the admin tier alone always denies DisableSandbox" always-denies "$p/admin.cedar" --action DisableSandbox
fails "DisableSandbox" always-denies "$tmp/anything.cedar" --action DisableSandbox
holds "so does every tier with it" always-denies "$tmp/set1.cedar" --action DisableSandbox
