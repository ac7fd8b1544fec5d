#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# What libshinken.so offers an embedder: exactly the public API. Every
# symbol it exports is a shk_* name (none of the internal shk__* ones, and
# nothing else), every function the public headers declare is exported,
# and the library carries its soname.
#   exports.sh PATH-TO-libshinken.so
. "$SHINKEN_SRCDIR/tests/lib.sh"
lib=${1:?usage: exports.sh PATH-TO-libshinken.so}
command -v nm >/dev/null 2>&1 || skip "nm (binutils) is not installed"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

nm -D --defined-only "$lib" | awk '{ print $NF }' | LC_ALL=C sort -u >"$tmp/exported"
[ -s "$tmp/exported" ] || fail "$lib exports nothing"
internal=$(grep -c '^shk__' "$tmp/exported" || true)
[ "$internal" -eq 0 ] || { grep '^shk__' "$tmp/exported" | head -20; fail "$lib exports $internal internal shk__ symbols"; }
# The version node the linker script names is not a symbol of the API.
if grep -v '^shk_' "$tmp/exported" | grep -q .; then
  grep -v '^shk_' "$tmp/exported"
  fail "$lib exports names outside the API (above)"
fi

# Every function a public header declares: a name followed by "(" at the
# start of a declaration line, or after its return type.
sed -n 's/^[a-z_ *]*[ *]\(shk_[a-z0-9_]*\)(.*/\1/p; s/^\(shk_[a-z0-9_]*\)(.*/\1/p' \
  "$SHINKEN_SRCDIR"/include/shinken/*.h | LC_ALL=C sort -u >"$tmp/declared"
[ "$(wc -l <"$tmp/declared")" -gt 50 ] || fail "too few declarations found in the public headers: $(wc -l <"$tmp/declared")"
missing=$(LC_ALL=C comm -23 "$tmp/declared" "$tmp/exported")
[ -z "$missing" ] || fail "declared in include/shinken/ but not exported: $(printf "%s " "$missing" | tr "\n" " ")"
grep -qx shk_version "$tmp/exported" || fail "shk_version is not exported"

soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
case $soname in
  libshinken.so.[0-9]*) ;;
  *) fail "$lib has no versioned soname (got '$soname')" ;;
esac
echo "ok: $(wc -l <"$tmp/exported") public symbols, no internal one; soname $soname"
