#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The library as an embedder gets it: `meson install` into an empty
# directory, then examples/cedar-embed.c compiled against the installed
# headers only and linked against the installed libshinken.so, both found
# through the installed pkg-config file. The program must then decide its
# requests right (tests/e2e/embed.sh checks its output).
#   installed.sh CC [CFLAG...]      (the build's compiler and sanitizer flags)
. "$SHINKEN_SRCDIR/tests/lib.sh"
[ $# -ge 1 ] || fail "usage: installed.sh CC [CFLAG...]"
command -v pkg-config >/dev/null 2>&1 || skip "pkg-config is not installed"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/root

meson install -C "$SHINKEN_BUILDDIR" --no-rebuild --destdir "$dest" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; fail "meson install failed"; }
pc=$(find "$dest" -name shinken.pc | head -n 1)
[ -n "$pc" ] || fail "no shinken.pc was installed"
# Every public header of the source tree, one per module.
for src in "$SHINKEN_SRCDIR"/include/shinken/*.h; do
  h=${src##*/}
  [ -n "$(find "$dest" -path "*/include/shinken/$h")" ] || fail "include/shinken/$h was not installed"
done

# The installed .pc names the install prefix; the sysroot points it at $dest.
export PKG_CONFIG_SYSROOT_DIR="$dest" PKG_CONFIG_PATH="${pc%/*}"
cflags=$(pkg-config --cflags shinken) || fail "pkg-config --cflags shinken failed"
libs=$(pkg-config --libs shinken) || fail "pkg-config --libs shinken failed"
# pkgconf puts the sysroot before a variable, pkg-config does not.
libdir=$(pkg-config --variable=libdir shinken)
case $libdir in "$dest"/*) ;; *) libdir=$dest$libdir ;; esac
case " $cflags " in
  *" -I$dest/"*) ;;
  *) fail "pkg-config's Cflags do not name the installed headers: $cflags" ;;
esac
# Only the installed tree: a copy of the example outside the source tree,
# no include path into it, and no library path into the build (meson test
# points LD_LIBRARY_PATH there).
unset LD_LIBRARY_PATH
cp "$SHINKEN_SRCDIR/examples/cedar-embed.c" "$tmp/embed.c"
cd "$tmp"
# shellcheck disable=SC2086  # pkg-config's output is a list of flags
"$@" -o "$tmp/embed" "$tmp/embed.c" $cflags $libs -Wl,-rpath,"$libdir" ||
  fail "cedar-embed.c does not build against the installed headers and library"
ldd "$tmp/embed" | grep -q "$libdir/libshinken.so" ||
  { ldd "$tmp/embed"; fail "the example is not linked against the installed libshinken.so"; }
sh "$SHINKEN_SRCDIR/tests/e2e/embed.sh" "$tmp/embed"
