#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Properties of the shipped policies (policies/), proven by the analyzer
# over every request and entity store the schema admits. Each is stated
# about what the policies decide, not how they are written, and each has a
# control: the same question about a set that lacks what makes it hold (no
# admin tier, or the admin tier as it was before a fix), which must fail
# with a counterexample, so that a broken analysis cannot pass by saying
# "holds" to everything.
. "$SHINKEN_SRCDIR/tests/lib.sh"
command -v cvc5 >/dev/null 2>&1 || skip "cvc5 is not installed (scripts/install-deps.sh)"

p=$SHINKEN_SRCDIR/policies
schema=$p/schema.cedarschema
admin=$p/admin.cedar
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The project tiers the admin tier is proven over: the shipped default and
# the example project policies.
tiers="$p/project.cedar"
[ -f "$p/examples/session.cedar" ] && tiers="$tiers $p/examples/session.cedar"
echo 'permit (principal, action, resource);' >"$tmp/anything.cedar"

# derive NAME SED-EXPRESSION: the admin tier with one fix undone, as a
# control; the edit must change the text, or the control proves nothing.
derive() {
  sed "$2" "$admin" >"$tmp/$1.cedar"
  cmp -s "$admin" "$tmp/$1.cedar" && fail "control $1: the edit did not apply to admin.cedar"
  return 0
}
# admin-session-expired as it was: it read principal.expires unguarded, so
# it errored (and was skipped) for an agent the store does not hold.
derive old-expired 's/) unless { principal has expires \&\& context.now < principal.expires };/) when { !(context.now < principal.expires) };/'
# The file-system forbids as they were: about fs.scope writes only.
derive old-persistence 's/(resource == Shinken::Capability::"persistence" ||/(false ||/'

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
  echo "ok: $name: the control fails, with a counterexample"
}

# The credential stores and shell start-up files, as a condition on a
# request (in every environment; where the context has no request,
# vacuously): those of a home directory by the path below the home (the
# one decision fills home_path from the path), and the system's own.
creds='context has request &&
     ((context.request has home_path &&
       (context.request.home_path like ".ssh/*" || context.request.home_path == ".ssh" ||
        context.request.home_path like ".aws/*" || context.request.home_path like ".gnupg/*" ||
        context.request.home_path like ".kube/*" || context.request.home_path like ".docker/*" ||
        context.request.home_path == ".git-credentials" || context.request.home_path == ".netrc" ||
        context.request.home_path == ".bashrc" || context.request.home_path == ".profile")) ||
      (context.request has path &&
       (context.request.path == "/etc/profile" || context.request.path like "/etc/profile.d/*" ||
        context.request.path like "/etc/skel/*")))'
writes="resource == Shinken::Capability::\"fs.scope\" && context has request &&
     context.request has access && context.request.access == \"write\" && $creds"
persists="resource == Shinken::Capability::\"persistence\" && $creds"
expired='!(principal has expires && context.now < principal.expires)'
operator='context.trust_tier == "high" && context.approval_state == "approved"'

# The admin tier's own policies, on their own.
holds "admin-session-expired never errors, whatever the store holds" never-errors "$admin" \
  --policy admin-session-expired
fails "admin-session-expired never errors" never-errors "$tmp/old-expired.cedar" --policy admin-session-expired
holds "no policy of the admin tier errors" never-errors "$admin"
# Over a project tier that permits everything, the admin tier alone keeps
# credential stores from persisting and refuses an agent the store lacks;
# as it was before the fixes, it did neither.
cat "$admin" "$tmp/anything.cedar" >"$tmp/admin-anything.cedar"
cat "$tmp/old-persistence.cedar" "$tmp/anything.cedar" >"$tmp/old-persistence-anything.cedar"
cat "$tmp/old-expired.cedar" "$tmp/anything.cedar" >"$tmp/old-expired-anything.cedar"
holds "the admin tier alone: no credential store or shell start-up file persists" always-denies \
  "$tmp/admin-anything.cedar" --assume "$persists"
fails "the admin tier before the fix: no credential store persists" always-denies \
  "$tmp/old-persistence-anything.cedar" --assume "$persists"
holds "the admin tier alone: nothing past the expiry, nor to an agent the store lacks" always-denies \
  "$tmp/admin-anything.cedar" --action UseCapability --assume "$expired"
fails "the admin tier before the fix: nothing to an agent the store lacks" always-denies \
  "$tmp/old-expired-anything.cedar" --action UseCapability --assume "$expired"

n=0
for tier in $tiers; do
  n=$((n + 1))
  cat "$admin" "$tier" >"$tmp/set$n.cedar"
  set=$tmp/set$n.cedar
  t=$(basename "$tier")

  a='resource == Shinken::Capability::"install.privileged" && context.trust_tier == "low"'
  holds "$t: no permit reaches install.privileged at trust tier low" always-denies "$set" \
    --action UseCapability --assume "$a"
  fails "$t: install.privileged at trust tier low" always-denies "$tmp/anything.cedar" --action UseCapability --assume "$a"

  holds "$t: no request writes under a credential store or onto a shell's start-up file" always-denies "$set" \
    --assume "$writes"
  fails "$t: writes under a credential store" always-denies "$tmp/anything.cedar" --assume "$writes"
  holds "$t: no request makes a credential store or a shell's start-up file persist" always-denies "$set" \
    --assume "$persists"

  # The session's expiry (an agent the store lacks included), a Block tier
  # and a human's denial are final.
  holds "$t: nothing is granted past the session's expiry, nor to an agent the store lacks" always-denies "$set" \
    --action UseCapability --assume "$expired"
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

  # No policy of the set errors, for any request and store: an erroring
  # forbid is skipped by Cedar (and refused by the one decision).
  holds "$t: no policy errors" never-errors "$set"

  # Turning a layer off: never for an agent's session or without the
  # operator's own flag, with every tier.
  holds "$t: no layer is turned off unless trust is high and a human asked" always-denies "$set" \
    --action DisableSandbox --assume "!($operator)"
done

# DisableSandbox. The admin tier alone denies it unless the session's trust
# is "high" and a human asked for it (the operator's own flag); the shipped
# project tier then grants exactly that.
holds "the admin tier alone denies DisableSandbox unless trust is high and a human asked" always-denies "$admin" \
  --action DisableSandbox --assume "!($operator)"
fails "DisableSandbox unless trust is high and a human asked" always-denies "$tmp/anything.cedar" \
  --action DisableSandbox --assume "!($operator)"
holds "project.cedar: the operator's own flag turns a layer off" always-allows "$tmp/set1.cedar" \
  --action DisableSandbox --assume "$operator"
fails "the operator's own flag turns a layer off (the admin tier alone permits nothing)" always-allows "$admin" \
  --action DisableSandbox --assume "$operator"
