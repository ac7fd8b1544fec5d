#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs every Debian package the build and the tests need, and the npm
# packages the tests use. It is idempotent and prints nothing when everything
# is already present. Run on Debian 12: as root, or as a user, who is told
# which packages to install (or who installs them through sudo, when sudo
# needs no password).
set -eu

PKGS="meson ninja-build gcc clang libclang-rt-14-dev pkg-config make
bubblewrap libseccomp-dev libevent-dev libssl-dev libjansson-dev
libsqlite3-dev libcmocka-dev scdoc zlib1g-dev libc6-dev python3 curl wget git
iproute2 procps util-linux passwd ca-certificates time openssl shellcheck binutils
cvc5 zsh chromium openjdk-17-jre-headless dpkg-dev apt"

missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
# openjdk-17-jre-headless: the TLS inspection test runs a Java client
# dpkg-dev and apt: the sudo test builds a package and a file: repository
# (dpkg-deb, dpkg-scanpackages) and installs from it with apt-get
# against the session's PKCS#12 trust store (Java reads no PEM bundle).
# chromium: the Permission Panel's browser tests drive it headless through
# playwright-core (tests/node). Node and npm run the official Cedar engine
# in the tests. The machine may already carry a newer Node than Debian's;
# only install Debian's when none is there.
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"

if [ -n "$missing" ]; then
  as_root=""
  if [ "$(id -u)" != 0 ]; then
    # apt-get would fail with a lock error that does not say what is
    # missing: say it, and how to install it.
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
      as_root="sudo -n env DEBIAN_FRONTEND=noninteractive"
    else
      echo "install-deps: missing packages:$missing" >&2
      echo "install-deps: install them as root: apt-get install --no-install-recommends$missing" >&2
      exit 1
    fi
  fi
  echo "install-deps: installing$missing"
  export DEBIAN_FRONTEND=noninteractive
  $as_root apt-get update -qq >/dev/null
  # shellcheck disable=SC2086
  $as_root apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

root=$(cd "$(dirname "$0")/.." && pwd)
if [ -f "$root/tests/node/package.json" ]; then
  if [ ! -d "$root/tests/node/node_modules" ] ||
     [ -n "$(find "$root/tests/node/package-lock.json" -newer "$root/tests/node/node_modules")" ]; then
    echo "install-deps: installing npm packages for the tests"
    (cd "$root/tests/node" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    touch "$root/tests/node/node_modules"
  fi
fi
