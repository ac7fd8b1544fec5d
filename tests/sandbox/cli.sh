#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# cli.sh PROBE CASE: one case of `shinken run`'s grammar, profiles, rule
# nesting, exit statuses and report (see docs/shinken-run.1.scd). Every
# effect is judged on the host: the file is there or not, the listener saw a
# connection or not, the process is gone or not.
. "$SHINKEN_SRCDIR/tests/lib.sh"
. "$SHINKEN_SRCDIR/tests/sandbox/scratch.sh"
set +e

PROBE=$1 CASE=$2
# CASE-user: the same case as an unprivileged user (nobody), as agents
# usually run.
AS=""
case $CASE in
  *-user)
    CASE=${CASE%-user}
    [ "$(id -u)" = 0 ] || skip "needs root to become another user"
    AS="setpriv --reuid=65534 --regid=65534 --clear-groups"
    ;;
esac
# As root, shinken run needs --allow-degraded (root's files stay root's
# inside; see docs/sandbox.md); sr checks that no other layer is degraded.
ALLOW=""
[ -z "$AS" ] && [ "$(id -u)" = 0 ] && ALLOW=--allow-degraded
scratch=$(scratch_dir shk-cli) || fail "mktemp"
bgpid="" LPID=""
cleanup() {
  [ -n "$bgpid" ] && kill "$bgpid" 2>/dev/null
  [ -n "$LPID" ] && kill "$LPID" 2>/dev/null
  rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
ws=$scratch/ws
mkdir -p "$ws" "$scratch/out" "$scratch/home"
if [ -n "$AS" ]; then
  chmod 755 "$scratch"
  chown -R 65534:65534 "$ws" "$scratch/home"
  programs_for 65534 65534
else
  programs_for "$(id -u)" "$(id -g)"
fi
export HOME="$scratch/home"
cd "$ws" || fail "cd"
marker=$scratch/out/ran

# sr ARGS...: `shinken run ARGS`, status in rc, stderr in $scratch/err
# (without the root caller's warning, which $scratch/err.all keeps).
sr() {
  # shellcheck disable=SC2086
  $AS "$SHINKEN" run $ALLOW "$@" >"$scratch/stdout" 2>"$scratch/err.all"
  rc=$?
  echo "--- shinken run $ALLOW $* -> $rc" >&2
  sed 's/^/    /' "$scratch/stdout" "$scratch/err.all" >&2
  grep -vF "$ROOT_DEGRADED" "$scratch/err.all" >"$scratch/err"
  if line=$(other_degraded "$scratch/err.all"); then
    skip "a layer other than the root caller's is degraded here: $line"
  fi
  return 0
}

# refused OPTIONS...: exit 125, exactly one line on stderr, and the command
# (which would create $marker) was not run. The marker lies outside the
# workspace, so --net host and everything else cannot matter: it is written
# only by an unconfined run.
refused() {
  rm -f "$marker"
  sr "$@" -- /bin/sh -c "touch $marker"
  [ $rc = 125 ] || fail "expected status 125 for: $*; got $rc"
  [ "$(wc -l <"$scratch/err")" = 1 ] || fail "expected one line on stderr for: $*"
  [ -e "$marker" ] && fail "the command ran for: $*"
  return 0
}

profile() { # JSON: writes it to $scratch/p.json
  printf '%s\n' "$1" >"$scratch/p.json"
}

json() { # EXPR [ARG...] over the report in $scratch/report.json, python syntax on r (ARGs from sys.argv[2])
  e=$1; shift
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($e)" "$scratch/report.json" "$@"
}

# The nesting layout: /w writable (the workspace), /w/a denied, /w/a/b writable.
nest_layout() {
  mkdir -p "$ws/a/b"
  echo secret-a >"$ws/a/secret"
  rm -f "$ws/top" "$ws/a/new" "$ws/a/b/new" "$ws/got"
  [ -z "$AS" ] || chown -R 65534:65534 "$ws"
}
nest_check() {
  [ -f "$ws/top" ] || fail "/w is not writable"
  [ -e "$ws/a/new" ] && fail "/w/a was writable although denied"
  [ -f "$ws/a/b/new" ] || fail "/w/a/b is not writable inside the denied /w/a"
  grep -q secret-a "$ws/got" 2>/dev/null && fail "/w/a/secret was readable although denied"
  [ "$(cat "$ws/a/secret")" = secret-a ] || fail "/w/a/secret changed"
  return 0
}
# survivors TAG: after a short grace, no process carries TAG in its command
# line (shinken, bwrap, stage 2 and the command all do).
survivors() {
  i=0
  while left=$(pgrep -f "$1") && [ $i -lt 30 ]; do i=$((i + 1)); sleep 0.1; done
  if [ -n "$left" ]; then
    ps -o pid,ppid,stat,args -p "$(echo $left | tr ' ' ,)" >&2
    kill -KILL $left
    fail "the sandbox outlived shinken run, 3 s after SIGKILL: $left"
  fi
  return 0
}
NEST_CMD='echo x >top; echo x >a/new; echo x >a/b/new; cat a/secret >got'

case $CASE in
  bad-option) refused --bogus; refused --write-everything "$ws" ;;
  missing-value)
    for o in --write --deny --read --net --mem --pids --cpu --profile --report; do
      rm -f "$marker"; sr "$o"
      [ $rc = 125 ] || fail "$o without a value: status $rc"
      [ "$(wc -l <"$scratch/err")" = 1 ] || fail "$o without a value: expected one line on stderr"
    done ;;
  missing-path)
    refused --write /nonexistent/shk; refused --read /nonexistent/shk
    refused --write= ;;
  net-value) refused --net wifi; refused --net "" ;;
  mem-value) refused --mem 12Q; refused --mem 0; refused --mem -5; refused --mem 1.5G; refused --mem=M ;;
  pids-value) refused --pids abc; refused --pids 0; refused --pids -1; refused --pids 99999999999999999999 ;;
  cpu-value) refused --cpu x; refused --cpu 0; refused --cpu 0.0001; refused --cpu -1 ;;
  read-only-write) refused --read-only --write "$ws"; refused --write "$ws" --read-only ;;
  no-command)
    sr; [ $rc = 125 ] || fail "no command: status $rc"
    sr --; [ $rc = 125 ] || fail "'--' alone: status $rc"
    sr --write "$ws" --; [ $rc = 125 ] || fail "options and no command: status $rc" ;;
  profile-unknown-key)
    profile '{"wrtie": ["/tmp"]}'; refused --profile "$scratch/p.json"
    profile '{"write": [], "extra": 1}'; refused --profile "$scratch/p.json" ;;
  profile-bad-json)
    profile '{'; refused --profile "$scratch/p.json"
    profile '{"write": ["a",]}'; refused --profile "$scratch/p.json"
    profile '["write"]'; refused --profile "$scratch/p.json"
    refused --profile /nonexistent/profile.json ;;
  profile-bad-type)
    for p in '{"pids": "many"}' '{"pids": 0}' '{"write": "/tmp"}' '{"write": [1]}' '{"net": "wifi"}' \
             '{"read-only": "yes"}' '{"mem": -1}' '{"cpu": true}' '{"env-clean": 1}' '{"deny": [null]}'; do
      profile "$p"; refused --profile "$scratch/p.json"
    done ;;
  exit-status)
    sr -- /bin/sh -c 'exit 0'; [ $rc = 0 ] || fail "exit 0 gave $rc"
    sr -- /bin/sh -c 'exit 3'; [ $rc = 3 ] || fail "exit 3 gave $rc"
    sr -- /bin/sh -c 'exit 124'; [ $rc = 124 ] || fail "exit 124 gave $rc"
    sr -- /bin/sh -c 'kill -TERM $$'; [ $rc = 143 ] || fail "SIGTERM gave $rc, not 143"
    sr -- /bin/sh -c 'kill -SEGV $$'; [ $rc = 139 ] || fail "SIGSEGV gave $rc, not 139"
    sr -- /nonexistent/cmd; [ $rc = 127 ] || fail "a missing command gave $rc, not 127"
    printf 'not a program\n' >"$ws/notexec"; chmod 644 "$ws/notexec"
    sr -- "$ws/notexec"; [ $rc = 126 ] || fail "a non-executable command gave $rc, not 126" ;;
  cwd-writable)
    sr -- /bin/sh -c 'echo inside >made'
    [ $rc = 0 ] && [ "$(cat "$ws/made" 2>/dev/null)" = inside ] || fail "the current directory is not writable"
    echo outside >"$scratch/out/f"
    sr -- /bin/sh -c "echo changed >$scratch/out/f"
    [ "$(cat "$scratch/out/f")" = outside ] || fail "a file outside the current directory changed" ;;
  read-only)
    echo before >"$ws/f"
    sr --read-only -- /bin/sh -c 'cat f; echo changed >f; echo new >g'
    grep -q before "$scratch/stdout" || fail "--read-only: the current directory is not readable"
    [ "$(cat "$ws/f")" = before ] || fail "--read-only: a file changed"
    [ -e "$ws/g" ] && fail "--read-only: a file was created"
    [ $rc = 0 ] && fail "--read-only: the writes did not fail (status 0)" ;;
  write-option)
    mkdir -p "$scratch/other" "$scratch/third"
    sr --write "$scratch/other" --write="$scratch/third" -- /bin/sh -c \
      "echo a >$scratch/other/f; echo b >$scratch/third/f"
    [ "$(cat "$scratch/other/f" 2>/dev/null)" = a ] || fail "--write DIR: not writable"
    [ "$(cat "$scratch/third/f" 2>/dev/null)" = b ] || fail "--write=DIR: not writable"
    rm -f "$scratch/other/f"
    sr -- /bin/sh -c "echo a >$scratch/other/f"
    [ -e "$scratch/other/f" ] && fail "without --write the directory was writable" ;;
  nesting)
    nest_layout; sr --deny "$ws/a" --write "$ws/a/b" -- /bin/sh -c "$NEST_CMD"; nest_check
    nest_layout; sr --write "$ws/a/b" --deny "$ws/a" --write "$ws" -- /bin/sh -c "$NEST_CMD"; nest_check
    # The same path twice: the most restrictive wins.
    nest_layout; sr --write "$ws/a" --deny "$ws/a" --write "$ws/a/b" -- /bin/sh -c "$NEST_CMD"; nest_check ;;
  nesting-profile)
    nest_layout
    profile "{\"write\": [\"$ws\", \"a/b\"], \"deny\": [\"a\"]}"
    sr --profile "$scratch/p.json" -- /bin/sh -c "$NEST_CMD"; nest_check ;;
  profile-override)
    # Lists accumulate; a later option overrides a scalar the profile set.
    mkdir -p "$scratch/other"
    profile "{\"write\": [\"$scratch/other\"], \"env_clean\": true, \"net\": \"host\"}"
    SHK_TEST_VAR=present sr --profile "$scratch/p.json" --net none --report "$scratch/report.json" \
      --write "$ws" -- /bin/sh -c "echo a >$scratch/other/f; echo b >g; echo \"var=\$SHK_TEST_VAR\""
    [ -f "$scratch/other/f" ] && [ -f "$ws/g" ] || fail "the profile's and the option's --write did not both apply"
    grep -q 'var=present' "$scratch/stdout" && fail "the profile's env_clean did not apply"
    [ "$(json 'r["asked"]["net"]')" = none ] || fail "--net none after the profile did not override it" ;;
  env-clean)
    SHK_TEST_VAR=present sr -- /bin/sh -c 'echo "var=$SHK_TEST_VAR"'
    grep -q 'var=present' "$scratch/stdout" || fail "without --env-clean the environment was not passed"
    SHK_TEST_VAR=present PATH="/opt/shk:$PATH" sr --env-clean -- /bin/sh -c 'echo "var=$SHK_TEST_VAR"; echo "path=$PATH"'
    grep -q 'var=present' "$scratch/stdout" && fail "--env-clean passed SHK_TEST_VAR"
    grep -q '^path=/usr/local/bin:/usr/bin:/bin$' "$scratch/stdout" || fail "--env-clean: PATH is not the minimal one"
    # Nor through another process of the sandbox (its init, stage 2).
    SHK_TEST_VAR=present sr --env-clean -- /bin/sh -c 'for f in /proc/[0-9]*/environ; do tr "\0" "\n" <"$f"; done 2>/dev/null'
    grep -q 'SHK_TEST_VAR' "$scratch/stdout" && fail "--env-clean: the caller's environment is readable in /proc/PID/environ" ;;
  report)
    # Each claim of the report checked against what the command sees.
    mkdir -p "$HOME/.ssh"
    sr --deny "$ws/private" --report "$scratch/report.json" -- /bin/sh -c 'cat /proc/self/status'
    [ $rc = 0 ] || fail "status $rc"
    [ "$(json 'r["asked"]["command"]')" = "['/bin/sh', '-c', 'cat /proc/self/status']" ] || fail "asked.command is wrong"
    [ "$(json 'sorted(r["enforced"]["namespaces"])')" = "['cgroup', 'ipc', 'mount', 'net', 'pid', 'user', 'uts']" ] ||
      fail "not every namespace is claimed"
    [ "$(json "[x['access'] for x in r['enforced']['rules'] if x['path']=='$ws/private']")" = "['deny']" ] ||
      fail "the --deny rule is not in the report"
    [ "$(json "[x['origin'] for x in r['enforced']['rules'] if x['path']=='$HOME/.ssh']")" = "['default']" ] ||
      fail "the default rule for ~/.ssh is not in the report"
    [ "$(json 'r["enforced"]["no-new-privs"]')" = True ] || fail "no-new-privs not claimed"
    grep -q '^NoNewPrivs:[[:space:]]*1' "$scratch/stdout" || fail "no-new-privs claimed but not set"
    grep -q '^CapEff:[[:space:]]*0000000000000000' "$scratch/stdout" || fail "capabilities left in CapEff"
    grep -q '^CapBnd:[[:space:]]*0000000000000000' "$scratch/stdout" || fail "capabilities left in CapBnd"
    if [ "$(json 'r["enforced"]["seccomp"]["enforced"]')" = True ]; then
      grep -q '^Seccomp:[[:space:]]*2' "$scratch/stdout" || fail "seccomp claimed but not in force"
    fi
    # What stage 2 reported it applied, against what the command sees.
    [ "$(json 'r["exit"]["started"]')" = True ] || fail "the report says the command did not start"
    [ "$(json 'r["applied"]["seccomp"]')" = True ] || fail "stage 2 did not report its seccomp filter"
    grep -q '^Seccomp:[[:space:]]*2' "$scratch/stdout" || fail "stage 2 reported seccomp, the command runs without"
    [ "$(json 'r["applied"]["capabilities-dropped"]')" = True ] || fail "stage 2 did not report the capabilities dropped"
    [ "$(json 'r["applied"]["no-new-privs"]')" = True ] || fail "stage 2 did not report no-new-privs"
    abi=$("$SHINKEN" doctor --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["landlock"]["abi"])')
    [ "$(json 'r["applied"]["landlock-abi"]')" = "$abi" ] || fail "stage 2 reported Landlock ABI $(json 'r["applied"]["landlock-abi"]'), the kernel has $abi"
    [ "$(json 'r["exit"]["status"]')" = 0 ] || fail "the report's exit status is $(json 'r["exit"]["status"]'), not 0"
    # The exit status is the command's, and a signal's shows as 128+N.
    sr --report "$scratch/report.json" -- /bin/sh -c 'exit 3'
    [ $rc = 3 ] && [ "$(json 'r["exit"]["status"]')" = 3 ] || fail "exit 3: status $rc, report $(json 'r["exit"]')"
    sr --report "$scratch/report.json" -- /bin/sh -c 'kill -TERM $$'
    [ "$(json 'r["exit"]["status"]')" = 143 ] || fail "SIGTERM: report $(json 'r["exit"]')"
    # A sandbox that never completed (bwrap cannot make a mount point in
    # the read-only /usr) is reported as such: nothing applied, not started.
    sr --deny "/usr/shk-absent-$$" --report "$scratch/report.json" -- /bin/sh -c "touch $marker"
    [ $rc = 125 ] || fail "a sandbox bwrap could not build: status $rc, not 125"
    [ -e "$marker" ] && fail "the command ran although the sandbox was not built"
    [ "$(json 'r["exit"]["started"]')" = False ] && [ "$(json 'r["applied"]')" = None ] ||
      fail "the report of a sandbox that never started claims: $(json 'r["exit"]'), applied $(json 'r["applied"]')" ;;
  net-host)
    # The positive control of the network cases: with --net host the host's
    # listener is reachable, without it not.
    listen_start tcp 0
    sr --net host -- "$PROBE" tcp "$LPORT"; listen_stop
    [ -s "$scratch/log" ] || fail "--net host did not reach the host's listener"
    [ -s "$scratch/err" ] || fail "--net host printed no warning"
    listen_start tcp 0
    sr -- "$PROBE" tcp "$LPORT"; listen_stop
    [ -s "$scratch/log" ] && fail "the default reached the host's listener" ;;
  deny-missing)
    sr --deny "$ws/absent" -- /bin/sh -c 'mkdir absent/x || echo x >absent; echo done'
    [ -e "$ws/absent/x" ] && fail "a denied missing path was created"
    [ -s "$ws/absent" ] && fail "a denied missing path was written"
    grep -q 'done' "$scratch/stdout" || fail "the command did not run" ;;
  symlink-protected)
    # A protected default path that is a symlink inside a writable root (an
    # earlier run may have planted it): the run starts, says so in one
    # warning, and nothing reaches the link's target through it. The
    # control, unconfined, writes the target through the link.
    echo real >"$scratch/out/rc"
    ln -s "$scratch/out/rc" "$HOME/.bashrc"
    cd "$HOME" || fail "cd"
    /bin/sh -c 'echo planted >>.bashrc'
    grep -q planted "$scratch/out/rc" || fail "control: the write through the link did not land"
    echo real >"$scratch/out/rc"
    sr -- /bin/sh -c 'echo planted >>.bashrc; cat .bashrc >seen; true'
    [ $rc = 0 ] || fail "expected the run to start (status 0), got $rc"
    [ "$(cat "$scratch/out/rc")" = real ] || fail "the link's target changed: $(cat "$scratch/out/rc")"
    grep -q real "$HOME/seen" 2>/dev/null && fail "the link's target was readable through it"
    [ "$(grep -c 'symlink.*masked' "$scratch/err")" = 1 ] || fail "expected one warning naming the masked symlink"
    [ -L "$HOME/.bashrc" ] || fail "the planted link was removed: the host's files are not the sandbox's to clean" ;;
  dies-with-parent)
    # Killed while the command runs: nothing of the sandbox may remain.
    # shellcheck disable=SC2086
    $AS "$SHINKEN" run $ALLOW -- /bin/sh -c 'touch started; exec sleep 60' "shk-dwp-$$" &
    bgpid=$!
    i=0; while [ ! -e "$ws/started" ]; do i=$((i + 1)); [ $i -gt 400 ] && fail "did not start"; sleep 0.05; done
    kill -KILL "$bgpid"; wait "$bgpid" 2>/dev/null; bgpid=""
    survivors "shk-dwp-$$" ;;
  dies-with-parent-early)
    # Killed at once, at various moments of start-up (20 times: the window
    # is narrow).
    for d in 0 0.01 0.02 0.03 0.04 0 0.01 0.02 0.03 0.04 0 0.01 0.02 0.03 0.04 0.05 0.1 0.15 0.2 0.3; do
      # shellcheck disable=SC2086
      $AS "$SHINKEN" run $ALLOW -- /bin/sh -c 'exec sleep 60' "shk-dwe-$$" &
      bgpid=$!
      sleep $d; kill -KILL "$bgpid"; wait "$bgpid" 2>/dev/null; bgpid=""
    done
    survivors "shk-dwe-$$" ;;
  root-caller)
    # A root caller's sandbox runs as the host's root: without
    # --allow-degraded nothing runs, with it the warning says so. As
    # another user, neither. The mark is made in the workspace, so any run,
    # confined or not, leaves it.
    marker=$ws/ran; rm -f "$marker"
    $AS "$SHINKEN" run -- /bin/sh -c "touch $marker" >"$scratch/stdout" 2>"$scratch/err"
    rc=$?
    sed 's/^/    /' "$scratch/err" >&2
    if [ -z "$AS" ]; then
      [ $rc = 125 ] || fail "as root without --allow-degraded: status $rc, not 125"
      [ "$(wc -l <"$scratch/err")" = 1 ] || fail "as root: the refusal is not one line"
      grep -qF "the caller is root" "$scratch/err" || fail "as root: the refusal does not name root"
      [ -e "$marker" ] && fail "as root: the command ran although shinken run refused"
      sr --report "$scratch/report.json" -- /bin/sh -c "touch $marker"
      [ $rc = 0 ] && [ -e "$marker" ] || fail "as root with --allow-degraded: the command did not run (status $rc)"
      grep -qF "$ROOT_DEGRADED" "$scratch/err.all" || fail "as root with --allow-degraded: no warning"
      [ "$(json 'len(r["degraded"])')" = 1 ] && json 'r["degraded"][0]' | grep -qF "the caller is root" ||
        fail "the report's degraded list is not the root caller's alone: $(json 'r["degraded"]')"
    else
      [ $rc = 0 ] && [ -e "$marker" ] || fail "as a user: the command did not run (status $rc)"
      grep -q 'caller is root' "$scratch/err" && fail "as a user: warned about root"
    fi ;;
  root-masks)
    # A root caller's sandbox hides the host's password hashes. Stage 2
    # mounts these masks itself, holding CAP_SYS_ADMIN only until it drops
    # every capability: what the command reads there is empty, its write is
    # refused and the file unchanged, and it runs with no capability left.
    [ -z "$AS" ] && [ "$(id -u)" = 0 ] || skip "the masks are a root caller's"
    files=""
    for f in /etc/shadow /etc/shadow- /etc/gshadow /etc/gshadow-; do
      [ -s "$f" ] && [ ! -L "$f" ] && files="$files $f"
    done
    [ -n "$files" ] || fail "control: no password hash file on this host, so this test cannot fail"
    before=$(sha256sum /etc/shadow)
    sr -- /bin/sh -c "cat $files >$ws/read; echo x 2>/dev/null >>/etc/shadow; echo \$? >$ws/wrote; grep '^Cap' /proc/self/status >$ws/caps"
    [ $rc = 0 ] || fail "the command did not run (status $rc)"
    [ -f "$ws/read" ] && [ ! -s "$ws/read" ] || fail "the command read $(wc -c <"$ws/read") bytes of$files"
    [ "$(cat "$ws/wrote")" != 0 ] || fail "the command's write to /etc/shadow succeeded"
    [ "$(sha256sum /etc/shadow)" = "$before" ] || fail "/etc/shadow changed"
    [ "$(grep -c ':[[:space:]]*0000000000000000$' "$ws/caps")" = 5 ] ||
      fail "the command kept capabilities: $(tr '\n' ' ' <"$ws/caps")" ;;
  cleanup-on-error)
    # Whatever fails once the session cgroup exists (here the descriptors
    # run out, at socketpair, the stage 2 memory file, pidfd_open or the
    # guard's listener), the run ends with 125 and one line, and leaves no
    # cgroup behind. Judged from outside, by the launcher's pid in the
    # cgroup's name; the control finds a running session's cgroup so.
    [ -z "$AS" ] && [ "$(id -u)" = 0 ] || skip "session cgroups are root's on this host"
    find_cg() {
      find /sys/fs/cgroup -maxdepth 8 -type d \( -name "shinken-$1-*" -o -name "session-$1-*" \) 2>/dev/null
    }
    rm -f "$ws/started"
    "$SHINKEN" run $ALLOW --mem 64M -- /bin/sh -c "touch $ws/started; exec sleep 30" 2>/dev/null &
    bgpid=$!
    i=0; while [ ! -e "$ws/started" ]; do i=$((i + 1)); [ $i -gt 400 ] && fail "control: did not start"; sleep 0.05; done
    [ -n "$(find_cg $bgpid)" ] || skip "no session cgroup on this host (cgroup limits degraded)"
    kill -TERM "$bgpid"; wait "$bgpid" 2>/dev/null; bgpid=""
    failed=0 ran=0 marker=$ws/ran
    for n in 5 6 7 8 9 10 11 12 13 14 16 20 24 32; do
      rm -f "$marker"
      # shellcheck disable=SC2086
      ( ulimit -n $n; exec "$SHINKEN" run $ALLOW --mem 64M -- /bin/sh -c "touch $marker" ) \
        >"$scratch/stdout" 2>"$scratch/err.all" &
      p=$!; wait $p; rc=$?
      grep -vF "$ROOT_DEGRADED" "$scratch/err.all" | grep -v '^shinken: degraded: cgroup' >"$scratch/err"
      echo "--- ulimit -n $n: status $rc: $(cat "$scratch/err")" >&2
      left=$(find_cg $p)
      [ -z "$left" ] || { rmdir $left 2>/dev/null; fail "ulimit -n $n: status $rc left the cgroup $left"; }
      if [ $rc = 125 ]; then
        failed=$((failed + 1))
        [ "$(wc -l <"$scratch/err")" = 1 ] || fail "ulimit -n $n: not one line on stderr"
      elif [ $rc = 0 ]; then
        ran=$((ran + 1))
        [ -e "$marker" ] || fail "ulimit -n $n: status 0 but the command did not run"
      else
        fail "ulimit -n $n: status $rc"
      fi
    done
    [ $failed -gt 0 ] && [ $ran -gt 0 ] || fail "the limits did not cover both a failed and a complete run ($failed failed, $ran ran)" ;;
  unix-thread)
    # connect() from a thread other than the main one (threaded resolvers,
    # Go, Java), to a socket bound inside: the guard admits it.
    sr -- "$PROBE" unix-thread "$ws/thread.sock"
    [ $rc = 0 ] || fail "connect() from a thread failed inside (status $rc)"
    grep -q '^connected from a thread$' "$scratch/stdout" || fail "the probe did not connect from a thread" ;;
  mount-churn)
    # A host whose mounts change while sandboxes start (bubblewrap#650): in
    # a mount namespace of the test's own, a fixture binds and unmounts a
    # directory without pause. The control shows bwrap alone failing to
    # start there; shinken run, whose bwrap sets up in a private copy, must
    # start every time.
    [ "$(id -u)" = 0 ] || skip "needs root: the test churns mounts in a mount namespace of its own"
    mkdir -p "$scratch/churn/a" "$scratch/churn/b"
    cat >"$scratch/churn.sh" <<'EOS'
mount --make-rshared / || exit 3
"$PROBE" host-churn "$1/a" "$1/b" &
churn=$!
tries=0 control=0
while [ $tries -lt 3000 ] && [ $control = 0 ]; do
  tries=$((tries + 1))
  $AS bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all -- /bin/true 2>>"$1/control.err" || control=$tries
done
failed=0
i=0
while [ $i -lt 400 ]; do
  i=$((i + 1))
  # shellcheck disable=SC2086
  $AS "$SHINKEN" run $ALLOW -- /bin/true 2>>"$1/run.err" || failed=$((failed + 1))
done
kill $churn
echo "$control $tries $failed"
EOS
    res=$(PROBE=$PROBE AS=$AS ALLOW=$ALLOW SHINKEN=$SHINKEN unshare -m --propagation private sh "$scratch/churn.sh" "$scratch/churn")
    echo "control failure at try, tries, shinken run failures: $res" >&2
    read -r control tries failed <<EOS
$res
EOS
    [ -n "$failed" ] || fail "the churn script did not finish: $res"
    [ "$control" = 0 ] && skip "bwrap alone started $tries times without failing here: the race cannot be shown"
    echo "control ok: bwrap alone failed at try $control: $(head -1 "$scratch/churn/control.err")" >&2
    [ "$failed" = 0 ] || fail "shinken run failed to start $failed times of 400: $(sort "$scratch/churn/run.err" | uniq -c | head -3)" ;;
  refused-writes)
    # The write observer: writes under a protected tree (~/.ssh, the
    # repository's .git/hooks) and outside the writable roots are refused by
    # the kernel, and shinken run names exactly those trees with exact
    # counts; failures that are no refusal (a name that exists for mkdir, a
    # missing one for rm) and permitted writes give no line. The control
    # runs the same workload unconfined on a copy and sees every write land.
    command -v git >/dev/null || skip "needs git for a repository's .git/hooks"
    cat >"$scratch/writes.sh" <<'EOS'
h=$1 w=$2 o=$3
echo key >"$h/.ssh/authorized_keys"; echo host >>"$h/.ssh/config"; mkdir "$h/.ssh/keys"
echo hook >"$w/.git/hooks/pre-commit"; ln -s /bin/true "$w/.git/hooks/post-checkout"
touch "$o/new"; mkdir "$o/dir"; rm "$o/sentinel"
mkdir -p "$o"; rm -f "$o/missing"
echo ok >"$w/ok"; mkdir "$w/sub"; rm "$w/ok"; echo t >/tmp/t
exit 0
EOS
    layout() { # ROOT: home/.ssh, a repository, and a directory outside
      rm -rf "$1"; mkdir -p "$1/home/.ssh" "$1/ws" "$1/out"
      git init -q "$1/ws" || fail "git init"
      echo sentinel >"$1/out/sentinel"
      [ -z "$AS" ] || chown -R 65534:65534 "$1"
    }
    state() { # ROOT: every name, type and content the workload could change
      (cd "$1" && find home out ws/.git/hooks -printf '%p %y %s\n' 2>/dev/null | sort
       cat home/.ssh/* out/* ws/.git/hooks/pre-commit 2>/dev/null) | sha256sum
    }
    ctl=$scratch/ctl
    layout "$ctl"; before=$(state "$ctl")
    $AS env HOME="$ctl/home" sh "$scratch/writes.sh" "$ctl/home" "$ctl/ws" "$ctl/out"
    [ "$(state "$ctl")" = "$before" ] && fail "control: the unconfined workload changed nothing"
    if ! { [ -f "$ctl/home/.ssh/authorized_keys" ] && [ -d "$ctl/home/.ssh/keys" ] &&
      [ -f "$ctl/ws/.git/hooks/pre-commit" ] && [ -L "$ctl/ws/.git/hooks/post-checkout" ] &&
      [ -f "$ctl/out/new" ] && [ -d "$ctl/out/dir" ] && [ ! -e "$ctl/out/sentinel" ]; }; then
      fail "control: a write of the workload did not land unconfined"
    fi
    box=$scratch/box
    export HOME="$box/home"
    fresh_box() { layout "$box"; cd "$box/ws" || fail "cd"; before=$(state "$box"); }
    fresh_box
    sr --report "$box/report.json" -- sh "$scratch/writes.sh" "$box/home" "$box/ws" "$box/out"
    [ $rc = 0 ] || fail "the workload failed (status $rc)"
    cp "$box/report.json" "$scratch/report.json" || fail "no report"
    [ "$(json 'r["applied"]["write-observer"]')" = True ] || fail "the report does not show the observer"
    [ "$(json 'sorted((t["tree"][len(sys.argv[2]):], t["why"], t["count"]) for t in r["refused-writes"]["trees"])' "$box")" = \
      "[('/home/.ssh', 'protected', 3), ('/out', 'outside the writable roots', 3), ('/ws/.git/hooks', 'protected', 2)]" ] ||
      fail "the report's refused writes: $(json 'r["refused-writes"]')"
    [ "$(state "$box")" = "$before" ] || fail "a refused write changed the host"
    [ -d "$box/ws/sub" ] || fail "the permitted write did not land"
    grep 'write' "$scratch/err" | grep '^shinken: refused' | sort >"$scratch/got"
    sort >"$scratch/want" <<EOS
shinken: refused 2 writes under $box/ws/.git/hooks (protected)
shinken: refused 3 writes under $box/home/.ssh (protected)
shinken: refused 3 writes under $box/out (outside the writable roots)
EOS
    diff -u "$scratch/want" "$scratch/got" >&2 || fail "the summary does not name exactly the refused writes"
    # --verbose says each one as it happens, and the summary still follows.
    fresh_box
    sr --verbose -- sh "$scratch/writes.sh" "$box/home" "$box/ws" "$box/out"
    # (A live line may land after a partial line of the workload's own
    # stderr, which shares the terminal: counted wherever it starts.)
    n=$(grep -o 'shinken: refused a write under ' "$scratch/err" | wc -l)
    [ "$n" = 8 ] || fail "--verbose said $n refused writes live, not 8"
    grep -q "^shinken: refused 3 writes under $box/out (outside the writable roots)\$" "$scratch/err" ||
      fail "--verbose: no summary"
    # --no-observe: the same writes refused, and nothing said.
    fresh_box
    sr --no-observe -- sh "$scratch/writes.sh" "$box/home" "$box/ws" "$box/out"
    [ "$(state "$box")" = "$before" ] || fail "--no-observe: a refused write changed the host"
    grep -q 'refused.*write' "$scratch/err" && fail "--no-observe: refused writes were counted"
    # Only permitted writes: no line at all.
    sr -- sh -c 'echo a >f; mkdir d; mv f d/g; rm -r d; echo t >/tmp/t'
    [ $rc = 0 ] || fail "the permitted writes failed (status $rc)"
    grep -q 'refused' "$scratch/err" && fail "a permitted write was reported refused"
    ;;
  *) fail "unknown case '$CASE'" ;;
esac
echo "ok: $CASE"
exit 0
