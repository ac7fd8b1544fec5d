# SPDX-License-Identifier: Apache-2.0
# Network namespaces for the egress tests. Source it after tests/lib.sh.
#
# Two namespaces joined by one veth pair, nothing else: the proxy namespace
# (P) holds the proxy, the test driver, its resolver and a canary listener on
# every loopback address; the host namespace (H) holds the test hosts'
# upstream servers. P has no default route, so even a broken proxy can reach
# nothing but P's own loopback and the addresses this file puts in H: no
# packet of any case, allowed or blocked, can leave the machine.
#
# H's addresses: 10.77.0.2 and 10.77.0.3 (the test hosts; the tests opt only
# 10.77.0.2 in), one address in each other non-public IPv4 class a host can
# carry, and fd77::2 (unique local). Each is a /32 (/128) route in P.

EG_ID="shk-eg-$$-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')"
EG_P="$EG_ID-p"
EG_H="$EG_ID-h"
EG_CLASS_ADDRS="100.64.77.2 169.254.77.2 172.16.77.2 192.168.77.2 192.0.0.77
198.18.77.2 192.0.2.77 198.51.100.77 203.0.113.77 240.0.77.2"

eg_cleanup() {
  set +e
  # Killing the namespaces' processes first lets the namespaces go at once.
  for ns in "$EG_P" "$EG_H"; do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [ -n "$pids" ] && kill $pids 2>/dev/null || true
  done
  sleep 0.2
  for ns in "$EG_P" "$EG_H"; do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "/etc/netns/$EG_P"
  [ -n "${EG_TMP:-}" ] && rm -rf "$EG_TMP"
}

eg_setup() {
  [ "$(id -u)" = 0 ] || skip "network namespaces need root"
  command -v ip >/dev/null || skip "no ip(8)"
  command -v node >/dev/null || skip "no node"
  EG_TMP=$(mktemp -d)
  # Namespaces left by a test that was killed (SIGKILL runs no trap) are
  # removed once the process that made them is gone.
  for ns in $(ip netns list 2>/dev/null | sed -n 's/^\(shk-eg-[0-9]*-[0-9a-f]*-[ph]\).*/\1/p'); do
    owner=${ns#shk-eg-}; owner=${owner%%-*}
    kill -0 "$owner" 2>/dev/null || ip netns del "$ns" 2>/dev/null || true
  done
  trap 'eg_cleanup' EXIT
  trap 'exit 1' INT TERM HUP
  ip netns add "$EG_P" 2>/dev/null || skip "cannot create a network namespace"
  ip netns add "$EG_H"
  # The pair is created directly inside the two namespaces, so it never has
  # a name in the caller's namespace and parallel tests cannot collide.
  ip link add eg0 netns "$EG_P" type veth peer name eg1 netns "$EG_H"
  pe() { ip netns exec "$EG_P" "$@"; }
  he() { ip netns exec "$EG_H" "$@"; }
  pe ip link set lo up
  he ip link set lo up
  pe ip addr add 10.77.0.1/24 dev eg0
  pe ip addr add fd77::1/64 dev eg0 nodad
  he ip addr add 10.77.0.2/24 dev eg1
  he ip addr add 10.77.0.3/24 dev eg1
  he ip addr add fd77::2/64 dev eg1 nodad
  pe ip link set eg0 up
  he ip link set eg1 up
  for a in $EG_CLASS_ADDRS; do
    he ip addr add "$a/32" dev eg1
    pe ip route add "$a/32" dev eg0 src 10.77.0.1
  done
  he ip route add 10.77.0.0/16 dev eg1 2>/dev/null || true
}

# eg_upstream: the test hosts' servers in H; waits until they listen.
eg_upstream() {
  ip netns exec "$EG_H" node "$SHINKEN_SRCDIR/tests/egress/upstream.mjs" \
    "$EG_TMP/upstream.log" "$EG_TMP/www" >"$EG_TMP/upstream.out" 2>&1 &
  i=0
  while ! grep -q '^ready' "$EG_TMP/upstream.out" 2>/dev/null; do
    i=$((i + 1)); [ $i -lt 100 ] || { cat "$EG_TMP/upstream.out"; fail "upstream did not start"; }
    sleep 0.1
  done
}
