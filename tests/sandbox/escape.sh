#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# escape.sh PROBE CASE WHO: one case of the escape suite, as root or as the
# unprivileged test user (WHO is root or user).
#
# Each case has two phases on fresh fixtures. The control runs the probe
# WITHOUT the sandbox and must achieve the forbidden effect, so the judge is
# shown able to see it (where WHO cannot do it even unconfined, the control
# runs as root). Then the probe runs inside `shinken run` and the effect must
# be absent. The judge looks from outside: the host listener's log, the
# sentinel's hash, the host process's state, the host keyring, the workspace.
# The probe's own report must show it attempted the action (see probe.c).
. "$SHINKEN_SRCDIR/tests/lib.sh"
. "$SHINKEN_SRCDIR/tests/sandbox/scratch.sh"
set +e

PROBE=$1 CASE=$2 WHO=$3
TEST_USER=shinken-test

[ "$(id -u)" = 0 ] || skip "the escape suite runs as root: it creates the test user and host fixtures"

ensure_user() {
  # Tests run in parallel: one of them creates the user.
  (
    flock 9
    id "$TEST_USER" >/dev/null 2>&1 ||
      useradd --system --no-create-home --home-dir /nonexistent --shell /bin/sh "$TEST_USER" ||
      fail "cannot create the user $TEST_USER"
  ) 9>/var/lock/shinken-test-user.lock || exit 1
}

case $WHO in
  root) uid=0; gid=0 ;;
  user) ensure_user; uid=$(id -u "$TEST_USER"); gid=$(id -g "$TEST_USER") ;;
  *) fail "WHO must be root or user, not '$WHO'" ;;
esac

# As root, shinken run refuses to start without --allow-degraded (root's
# files stay root's inside; see docs/sandbox.md). Every root case but
# root-secret, which checks that refusal, passes it; the root caller's must
# then be the only layer degraded (checked after the run).
ALLOW=""
[ "$WHO" = root ] && [ "$CASE" != root-secret ] && ALLOW=--allow-degraded

scratch=$(scratch_dir shk-escape) || fail "mktemp"
chmod 755 "$scratch"

if [ "$WHO" = user ]; then programs_for "$uid" "$gid"; else programs_for 0 0; fi
pids=""
cleanup() {
  for p in $pids; do kill "$p" 2>/dev/null; done
  for d in ${cgdeleg:-}; do
    find "$d" -mindepth 1 -depth -type d -exec rmdir {} + 2>/dev/null
    rmdir "$d"
  done
  [ -n "${restore:-}" ] && eval "$restore"
  [ -n "${shm:-}" ] && rm -rf "$shm"
  for ns in ${netns:-}; do
    p=$(ip netns pids "$ns" 2>/dev/null); [ -n "$p" ] && kill -KILL $p 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

ws=$scratch/ws     # the workspace: the sandbox's working directory
out=$scratch/out   # outside every writable root
home=$scratch/home # HOME for the run
fx=$scratch/fx     # the fixtures' logs (some fixtures run as WHO)
IN_NETNS=""

# run_as root|WHO CMD...: runs CMD as root or as WHO, with HOME set, in the
# network namespace $IN_NETNS names when it is set.
run_as() {
  who=$1; shift
  # shellcheck disable=SC2086
  if [ "$who" = root ] || [ "$uid" = 0 ]; then
    $IN_NETNS env HOME="$home" $RUN_ENV "$@"
  else
    $IN_NETNS setpriv --reuid="$uid" --regid="$gid" --clear-groups --inh-caps=-all \
      env HOME="$home" USER="$TEST_USER" LOGNAME="$TEST_USER" $RUN_ENV "$@"
  fi
}

# bg ROOT|WHO CMD...: starts a fixture in the background.
bg() {
  who=$1; shift
  if [ "$who" = root ] || [ "$uid" = 0 ]; then
    env HOME="$home" "$@" &
  else
    setpriv --reuid="$uid" --regid="$gid" --clear-groups --inh-caps=-all env HOME="$home" "$@" &
  fi
  pids="$pids $!"
}

wait_file() {
  i=0
  while [ ! -s "$1" ]; do
    i=$((i + 1))
    [ $i -gt 400 ] && fail "fixture did not start ($1)"
    sleep 0.05
  done
}

own() { chown -R "$uid:$gid" "$@"; }

# snapshot PATH...: names, types, modes, sizes, times and contents.
snapshot() {
  for p in "$@"; do
    if [ -e "$p" ] || [ -L "$p" ]; then
      find "$p" -printf '%p %y %m %s %T@ %n\n' 2>/dev/null | sort
      find "$p" -type f -exec sha256sum {} + 2>/dev/null | sort
    else
      echo "$p absent"
    fi
  done | sha256sum
}

fresh() {
  for p in $pids; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  pids=""
  rm -rf "$ws" "$out" "$home" "$fx"
  mkdir -p "$ws" "$out" "$home" "$fx"
  printf 'sentinel %s\n' "$CASE" >"$out/sentinel"
  own "$ws" "$out" "$home" "$fx"
  HPID="" HALIVE=""
  RUN_DIR=$ws RUN_OPTS="" RUN_ENV="" WRAP="" CONTROL_AS=$WHO CONTROL_PREFIX="" rc=0
}

# run_probe control|sandbox ARGS...: runs the probe; sets rc, output in
# $scratch/probe.out.
run_probe() {
  phase=$1; shift
  if [ "$phase" = sandbox ]; then
    who=$WHO
    # shellcheck disable=SC2086
    set -- "$SHINKEN" run $ALLOW $RUN_OPTS -- "$PROBE" "$@"
  else
    who=$CONTROL_AS
    # shellcheck disable=SC2086
    set -- $CONTROL_PREFIX "$PROBE" "$@"
  fi
  # shellcheck disable=SC2086
  [ -n "$WRAP" ] && set -- $WRAP "$@"
  (cd "$RUN_DIR" && run_as "$who" "$@") >"$scratch/probe.out" 2>"$scratch/probe.err" </dev/null
  rc=$?
  echo "--- $phase as $who (status $rc): $*" >&2
  sed 's/^/    /' "$scratch/probe.out" "$scratch/probe.err" >&2
  # Whether the host process survived is read before the fixtures stop.
  # A SIGKILL is delivered asynchronously: give a dying process a moment
  # (up to a second) before calling it alive.
  if [ -n "$HPID" ]; then
    HALIVE=1 i=0
    while [ $i -lt 20 ]; do
      if ! kill -0 "$HPID" 2>/dev/null || grep -q '^State:.*[ZX]' "/proc/$HPID/status" 2>/dev/null; then
        HALIVE=0
        break
      fi
      i=$((i + 1))
      sleep 0.05
    done
  fi
  settle
}

# settle: stops the fixtures (each logs what is still queued before it
# exits), so that the judge reads complete logs. It runs in the main shell,
# which alone can wait for them, before any effect is judged.
settle() {
  for p in $pids; do kill -TERM "$p" 2>/dev/null; done
  for p in $pids; do wait "$p" 2>/dev/null; done
  pids=""
}

# A case defines setup (fixtures; run before each phase), args (the probe's
# arguments), effect (exit 0 and print what happened when the forbidden
# effect is visible from outside) and may set CONTROL_AS, CONTROL_PREFIX,
# RUN_OPTS, RUN_DIR, WRAP, and INSIDE_ONLY=1 when nothing outside can see
# the effect (the control then must report success, status 10).
INSIDE_ONLY=0
restore=""
no_effect() { return 1; }

listener() { # KIND [WHERE]
  bg root "$PROBE" host-listen "$1" "${2:-0}" "$fx/log" "$fx/ready"
  wait_file "$fx/ready"
  PORT=$(cat "$fx/ready")
}
logged() {
  [ -s "$fx/log" ] && { echo "the host fixture saw: $(head -3 "$fx/log" | tr '\n' ';')"; }
}

holder() {
  bg "$WHO" "$PROBE" host-hold "$fx/info" "$fx/log"
  wait_file "$fx/info"
  read -r HPID SECADDR SECLEN CANARY SECRET <"$fx/info"
}
holder_effect() {
  [ "$HALIVE" = 1 ] || { echo "the host process $HPID was killed"; return 0; }
  logged && return 0
  if [ -f "$ws/stolen" ] && grep -q "$SECRET" "$ws/stolen"; then
    echo "the host process's secret was copied into the workspace"; return 0
  fi
  return 1
}

snap_effect() { # compare against $BEFORE over $SNAP
  [ "$(snapshot $SNAP)" != "$BEFORE" ] && { echo "changed: $SNAP"; find $SNAP -newer "$scratch/stamp" 2>/dev/null | head -5; return 0; }
  return 1
}
snap_take() { BEFORE=$(snapshot $SNAP); touch "$scratch/stamp"; }

# delegate_cgroups: for the test user, what an administrator does to
# delegate cgroup v1 hierarchies (a hybrid host's memory, pids, cpu and
# freezer): a directory in each, made by root and given to the user, which
# SHINKEN_CGROUP_PARENT names. Removed by cleanup.
delegate_cgroups() {
  [ "$WHO" = user ] || return 0
  cgname=/shinken-test-$$
  if [ -z "${cgdeleg:-}" ]; then
    for h in memory pids cpu freezer; do
      m=$(awk -v h="$h" '$3 == "cgroup" && ("," $4 ",") ~ ("," h ",") { print $2; exit }' /proc/self/mounts)
      [ -n "$m" ] || continue
      mkdir "$m$cgname" || fail "cannot create $m$cgname"
      cgdeleg="${cgdeleg:-} $m$cgname"
      chown -R "$uid:$gid" "$m$cgname" || fail "cannot delegate $m$cgname"
    done
  fi
  RUN_ENV="SHINKEN_CGROUP_PARENT=$cgname"
}

case $CASE in
  tcp) setup() { listener tcp; }; args() { echo tcp "$PORT"; }; effect() { logged; } ;;
  proxy-loopback)
    # Shinken's own proxies, asked for the host's loopback. The control
    # shows the listener reachable directly (no proxy runs outside).
    setup() { listener tcp; RUN_OPTS="--net proxy"; }
    args() { if [ "$phase" = control ]; then echo tcp "$PORT"; else echo proxy-loopback "$PORT"; fi; }
    effect() { logged; } ;;
  tcp-proxy)
    # Under --net proxy the command's loopback carries Shinken's bridges
    # (3128, 1080, 53) and no other port of the host's.
    setup() { listener tcp; RUN_OPTS="--net proxy"; }; args() { echo tcp "$PORT"; }; effect() { logged; } ;;
  udp) setup() { listener udp; }; args() { echo udp "$PORT"; }; effect() { logged; } ;;
  dns)
    # 127.0.0.1:53 is one port for the whole host: one dns case at a time.
    exec 8>/var/lock/shinken-test-dns.lock; flock 8
    setup() { listener dns; }; args() { echo dns; }; effect() { logged; } ;;
  packet) setup() { listener udp; CONTROL_AS=root; }; args() { echo packet "$PORT"; }; effect() { logged; } ;;
  netlink)
    # The control changes lo in a network namespace of its own; the judge
    # watches the host's lo.
    mtu0=$(cat /sys/class/net/lo/mtu)
    restore="ip link set lo mtu $mtu0"
    setup() { CONTROL_PREFIX="unshare -rn"; INSIDE_ONLY=1; }
    args() { echo netlink; }
    effect() { [ "$(cat /sys/class/net/lo/mtu)" != "$mtu0" ] && echo "the host's lo MTU changed"; } ;;
  vsock) setup() { INSIDE_ONLY=1; }; args() { echo vsock; }; effect() { no_effect; } ;;
  unix) setup() { listener unix "$out/sock"; }; args() { echo unix "$out/sock"; }; effect() { logged; } ;;
  abstract)
    setup() { listener abstract "shk-escape-$$"; }; args() { echo abstract "shk-escape-$$"; }; effect() { logged; } ;;
  iouring) setup() { listener tcp; }; args() { echo iouring "$PORT"; }; effect() { logged; } ;;
  ptrace) setup() { holder; }; args() { echo ptrace "$HPID" "$CANARY"; }; effect() { holder_effect; } ;;
  vmread)
    setup() { holder; }; args() { echo vmread "$HPID" "$SECADDR" "$SECLEN" "$CANARY" "$ws/stolen"; }
    effect() { holder_effect; } ;;
  kill) setup() { holder; }; args() { echo kill "$HPID"; }; effect() { holder_effect; } ;;
  tiocsti)
    setup() { WRAP="$PROBE host-pty $fx/log --"; }; args() { echo tiocsti; }; effect() { logged; } ;;
  tty-reopen)
    # The caller's terminal reopened through /proc/self/fd/N and the
    # ancestors' /proc/PID/fd/N: its window size, echo and input are judged
    # by the host side of that terminal.
    setup() { WRAP="$PROBE host-pty $fx/log --"; }; args() { echo tty-reopen; }; effect() { logged; } ;;
  egress-cross)
    # Another session B, running as the same user, whose egress sockets lie
    # in this run's writable root: B's proxy logs every request it judges,
    # and must see none from here.
    HOST=shk-cross-$$.test
    setup() {
      mkdir -p "$ws/rt" "$out/b"; own "$ws/rt" "$out/b"
      # shellcheck disable=SC2016 # the inner shell expands its own arguments
      bg "$WHO" sh -c 'cd "$1" && shift && exec "$@"' sh "$out/b" env XDG_RUNTIME_DIR="$ws/rt" \
        SHINKEN_EVENT_LOG="$fx/b-events" "$SHINKEN" run $ALLOW --net proxy -- sleep 60
      i=0
      while ! SOCK=$(ls "$ws"/rt/shinken-egress-*/http.sock 2>/dev/null); do
        i=$((i + 1)); [ $i -gt 400 ] && fail "session B did not start"; sleep 0.05
      done
    }
    args() { echo egress-cross "$SOCK" "$HOST"; }
    effect() { [ -s "$fx/b-events" ] && grep -q "$HOST" "$fx/b-events" && echo "session B's proxy judged a request from here"; } ;;
  write) setup() { SNAP=$out; snap_take; }; args() { echo write "$out/sentinel"; }; effect() { snap_effect; } ;;
  symlink)
    setup() {
      ln -s "$out/sentinel" "$ws/planted-link"; ln -s "$out" "$ws/planted-dir"
      SNAP=$out; snap_take
    }
    args() { echo symlink "$out/sentinel" "$ws/planted-link" "$ws/planted-dir"; }
    effect() { snap_effect; } ;;
  hardlink) setup() { SNAP=$out; snap_take; }; args() { echo hardlink "$out/sentinel"; }; effect() { snap_effect; } ;;
  git)
    setup() {
      git init -q "$ws" && printf '#!/bin/sh\nexit 0\n' >"$ws/.git/hooks/pre-commit" || fail "git init"
      own "$ws"; SNAP="$ws/.git $ws/.git.moved"; snap_take
    }
    args() { echo git; }; effect() { snap_effect; } ;;
  rc|dotfiles|dotfiles-link)
    # HOME is the working directory, so it is a writable root; for
    # dotfiles-link the working directory is the workspace, and a --write
    # through a symlink planted there (by an earlier run) resolves to HOME.
    RC_FILES=".bashrc .profile .bash_profile .bash_login .bash_logout .zshrc .zshenv .zprofile .zlogin .config/fish/config.fish .config/shinken/config.json .ssh/authorized_keys .ssh/rc .ssh/config"
    # What a login, a shell, git, Python, systemd, a desktop session, an
    # editor or an agent reads and runs from the home directory.
    [ "$CASE" = rc ] || RC_FILES=".gitconfig .config/git/config .bash_aliases .local/bin/shk-tool .local/lib/python3.11/site-packages/shk.pth .config/systemd/user/shk.service .config/autostart/shk.desktop .config/environment.d/shk.conf .xprofile .xsessionrc .pam_environment .zlogout .vimrc .inputrc .npmrc .cargo/config.toml .config/nvim/init.lua .mcp.json .claude/settings.json .bashrc"
    setup() {
      RUN_DIR=$home
      if [ "$CASE" = dotfiles-link ]; then
        RUN_DIR=$ws; ln -s "$home" "$ws/h"; RUN_OPTS="--write $ws/h"
      fi
      for f in .bashrc .profile .bash_profile .ssh/authorized_keys; do
        mkdir -p "$home/.ssh"; echo "# $f" >"$home/$f"
      done
      own "$home"; BEFORE=$(rc_state)
    }
    # shinken run masks a missing start-up file with /dev/null, which leaves
    # an empty file on the host (see shinken-run(1)): absent and empty are
    # one state here; content or anything else is a change.
    rc_state() {
      for f in $RC_FILES; do
        p=$home/$f
        if [ -L "$p" ]; then echo "$f symlink $(readlink "$p")"
        elif [ -f "$p" ] && [ ! -s "$p" ] || [ ! -e "$p" ]; then echo "$f absent-or-empty"
        else echo "$f $(stat -c '%F %a' "$p") $(cat "$p" 2>/dev/null | sha256sum)"; fi
      done
    }
    args() {
      list=$RC_FILES
      if [ "$CASE" = dotfiles-link ]; then list=""; for f in $RC_FILES; do list="$list $ws/h/$f"; done; fi
      echo rc $list
    }
    effect() {
      [ "$(rc_state)" = "$BEFORE" ] && return 1
      echo "changed:"; rc_state | grep -vxF "$BEFORE" | head -3
    } ;;
  read)
    SECRET=SHKSECRET-$$-$(date +%s%N)
    CRED_FILES=".ssh/id_ed25519 .aws/credentials .gnupg/private-keys-v1.d/k.key .config/gcloud/credentials.db .kube/config .docker/config.json .netrc .git-credentials"
    # The stores of the tools an agent's user has: forges, registries,
    # clouds, databases, browsers, keyrings, password managers, histories.
    CRED_FILES="$CRED_FILES .config/gh/hosts.yml .config/glab-cli/config.yml .config/git/credentials .npmrc .yarnrc.yml .pypirc .config/pypoetry/auth.toml .pgpass .my.cnf .cargo/credentials.toml .terraform.d/credentials.tfrc.json .vault-token .azure/msal_token_cache.json .config/containers/auth.json .config/helm/repositories.yaml .bash_history .zsh_history .python_history .mozilla/firefox/p.default/cookies.sqlite .config/google-chrome/Default/Cookies .local/share/keyrings/login.keyring .password-store/site.gpg .config/op/config"
    setup() {
      for f in $CRED_FILES; do mkdir -p "$(dirname "$home/$f")"; echo "$SECRET $f" >"$home/$f"; done
      mkdir -p "$ws/private"; echo "$SECRET denied" >"$ws/private/secret"
      own "$home" "$ws"; RUN_OPTS="--deny $ws/private"
    }
    args() { echo read "$ws/stolen"; for f in $CRED_FILES; do echo "$home/$f"; done; echo "$ws/private/secret"; }
    effect() { [ -f "$ws/stolen" ] && grep -q "$SECRET" "$ws/stolen" && { echo "read: $(grep -o "$SECRET [^ ]*" "$ws/stolen" | cut -d' ' -f2 | tr '\n' ' ')"; }; } ;;
  mknod)
    setup() { CONTROL_AS=root; }; args() { echo mknod; }
    effect() { [ -n "$(find "$ws" -type b -o -type c)" ] && echo "device nodes: $(find "$ws" -type b -o -type c)"; } ;;
  mount)
    setup() { CONTROL_AS=root; CONTROL_PREFIX="unshare -m --propagation private"; SNAP=$out; snap_take; }
    args() { echo mount "$out/sentinel"; }
    effect() {
      snap_effect && return 0
      [ -e "$ws/mnt/file" ] || { echo "the tmpfs mount on ./mnt took effect"; return 0; }
      return 1
    } ;;
  chroot)
    setup() { CONTROL_AS=root; }; args() { echo chroot; }
    effect() { [ -e "$ws/jail/marker" ] && echo "chroot took effect"; } ;;
  sysctl)
    # Global settings: one sysctl case at a time, and the values restored.
    exec 8>/var/lock/shinken-test-sysctl.lock; flock 8
    SYSCTLS="/proc/sys/vm/stat_interval /sys/kernel/mm/transparent_hugepage/khugepaged/alloc_sleep_millisecs"
    restore=""; for f in $SYSCTLS; do restore="$restore echo $(cat "$f") >$f;"; done
    V=7; for f in $SYSCTLS; do [ "$(cat "$f")" = 7 ] && V=8; done
    setup() { eval "$restore"; CONTROL_AS=root; }
    args() { echo sysctl $V $SYSCTLS; }
    effect() {
      for f in $SYSCTLS; do [ "$(cat "$f")" = $V ] && { echo "$f was changed"; return 0; }; done
      return 1
    } ;;
  suid)
    # A set-user-ID program owned by someone else than the caller.
    setup() {
      cp "$PROBE" "$out/suid-probe"
      if [ "$WHO" = root ]; then ensure_user; chown "$TEST_USER" "$out/suid-probe"; else chown root "$out/suid-probe"; fi
      chmod 4755 "$out/suid-probe"
      chmod 1777 "$ws" # the program writes its ids here under its own
    }
    args() { echo suid "$out/suid-probe" "$ws/ids"; }
    effect() {
      [ -f "$ws/ids" ] || return 1
      read -r u e <"$ws/ids"
      [ "${u#uid=}" != "${e#euid=}" ] && echo "the set-user-ID program ran with $u $e"
    } ;;
  keys)
    SECRET=SHKKEY-$$-$(date +%s%N)
    setup() { WRAP="$PROBE host-keys $SECRET $fx/log --"; }
    args() { echo keys @S @K @U "$ws/stolen"; }
    effect() {
      logged && return 0
      [ -f "$ws/stolen" ] && grep -q "$SECRET" "$ws/stolen" && echo "the caller's key was read"
    } ;;
  userns) setup() { INSIDE_ONLY=1; }; args() { echo userns; }; effect() { no_effect; } ;;
  bpf) setup() { INSIDE_ONLY=1; CONTROL_AS=root; }; args() { echo bpf; }; effect() { no_effect; } ;;
  perf) setup() { INSIDE_ONLY=1; }; args() { echo perf; }; effect() { no_effect; } ;;
  userfaultfd) setup() { INSIDE_ONLY=1; }; args() { echo userfaultfd; }; effect() { no_effect; } ;;
  forkbomb)
    LIMIT=64
    setup() { RUN_OPTS="--pids $LIMIT"; delegate_cgroups; }
    args() { if [ "$phase" = control ]; then echo forkbomb 100 "$ws/count"; else echo forkbomb 400 "$ws/count"; fi; }
    effect() {
      n=$(cat "$ws/count" 2>/dev/null || echo 0)
      [ "$n" -gt $LIMIT ] && { echo "$n processes at once, over pids.max $LIMIT"; return 0; }
      pgrep -f "forkbomb [0-9]* $ws/count" >/dev/null && { echo "forked processes outlived the run"; return 0; }
      return 1
    } ;;
  memhog)
    LIMIT=64
    setup() { RUN_OPTS="--mem ${LIMIT}M"; delegate_cgroups; }
    args() { if [ "$phase" = control ]; then echo memhog 128 "$ws/mem"; else echo memhog 512 "$ws/mem"; fi; }
    effect() {
      n=$(tr -d ' \n' <"$ws/mem" 2>/dev/null); n=${n:-0}
      [ "$n" -gt $((LIMIT + 8)) ] && echo "$n MiB touched, over memory.max ${LIMIT}M"
    } ;;
  shm)
    # The host's /dev/shm, a classic channel between sandboxes and out.
    setup() {
      [ -n "${shm:-}" ] && rm -rf "$shm"
      shm=$(mktemp -d /dev/shm/shk-escape.XXXXXX) || fail "mktemp in /dev/shm"
      printf 'sentinel\n' >"$shm/sentinel"; own "$shm"; SNAP=$shm; snap_take
    }
    args() { echo write "$shm/sentinel"; }; effect() { snap_effect; } ;;
  handle)
    setup() { CONTROL_AS=root; SNAP=$out; snap_take; }
    args() { echo handle "$out/sentinel"; }; effect() { snap_effect; } ;;
  deny-rename)
    # The denied file sits two directories below the writable root; the
    # probe moves the upper one away and rebuilds the path.
    setup() {
      mkdir -p "$ws/a/b"; echo "denied" >"$ws/a/b/secret"; own "$ws"
      RUN_OPTS="--deny $ws/a/b/secret"; SNAP="$ws/a $ws/a.moved"; snap_take
    }
    args() { echo deny-rename "$ws/a" b/secret; }; effect() { snap_effect; } ;;
  read-restricted)
    SECRET=SHKSECRET-$$-$(date +%s%N)
    setup() {
      echo "$SECRET outside" >"$out/secret"; mkdir -p "$ws/r"; echo visible >"$ws/r/f"
      own "$out" "$ws"; RUN_OPTS="--restrict-reads --read $ws/r --read $(dirname "$PROBE")"
    }
    args() { echo read "$ws/stolen" "$out/secret"; }
    effect() { [ -f "$ws/stolen" ] && grep -q "$SECRET" "$ws/stolen" && echo "read a file outside the --read roots"; } ;;
  path-dir)
    # A $PATH directory inside the workspace stays read-only.
    setup() {
      mkdir -p "$ws/bin"; printf '#!/bin/sh\necho tool\n' >"$ws/bin/tool"; chmod 755 "$ws/bin/tool"
      own "$ws"; RUN_ENV="PATH=$ws/bin:/usr/local/bin:/usr/bin:/bin"; SNAP=$ws/bin; snap_take
    }
    args() { echo write "$ws/bin/tool"; }; effect() { snap_effect; } ;;
  git-nested)
    # A repository below the working directory, not at it.
    setup() {
      git init -q "$ws/proj" && printf '#!/bin/sh\nexit 0\n' >"$ws/proj/.git/hooks/pre-commit" || fail "git init"
      own "$ws"; SNAP="$ws/proj/.git $ws/proj/.git.moved"; snap_take
    }
    args() { echo git proj; }; effect() { snap_effect; } ;;
  egress|egress-proxy)
    # --net proxy lets the command reach Shinken's proxy, and nothing else.
    [ "$CASE" = egress-proxy ] && NET_OPTS="--net proxy"
    # Direct egress to a test host: shinken runs in a network namespace A
    # the test made, joined by a veth pair to B, which holds the test host
    # 10.79.0.2 and its listener. Nothing else is reachable from A.
    command -v ip >/dev/null || skip "no ip(8)"
    # Namespaces of a run that was killed (SIGKILL runs no trap) go once the
    # process that made them is gone.
    for ns in $(ip netns list 2>/dev/null | sed -n 's/^\(shk-sbx-[0-9]*-[ab]\).*/\1/p'); do
      owner=${ns#shk-sbx-}; owner=${owner%%-*}
      kill -0 "$owner" 2>/dev/null || ip netns del "$ns" 2>/dev/null
    done
    A=shk-sbx-$$-a B=shk-sbx-$$-b netns="$A $B"
    ip netns add "$A" 2>/dev/null || skip "cannot create a network namespace"
    ip netns add "$B" || fail "ip netns add"
    ip link add sb0 netns "$A" type veth peer name sb1 netns "$B" || fail "veth"
    ip -n "$A" link set lo up; ip -n "$B" link set lo up
    ip -n "$A" addr add 10.79.0.1/24 dev sb0; ip -n "$B" addr add 10.79.0.2/24 dev sb1
    ip -n "$A" link set sb0 up; ip -n "$B" link set sb1 up
    IN_NETNS="ip netns exec $A"
    setup() {
      RUN_OPTS=${NET_OPTS:-}
      ip netns exec "$B" "$PROBE" host-listen any 0 "$fx/log" "$fx/ready" &
      pids="$pids $!"
      wait_file "$fx/ready"; PORT=$(cat "$fx/ready")
    }
    args() { echo egress 10.79.0.2 "$PORT"; }; effect() { logged; } ;;
  ipc)
    # The host's System V IPC objects, reachable only without a new ipc
    # namespace.
    setup() {
      bg "$WHO" "$PROBE" host-ipc "$fx/info" "$fx/log"
      wait_file "$fx/info"; KEY=$(cat "$fx/info")
    }
    args() { echo ipc "$KEY"; }; effect() { logged; } ;;
  hostname)
    H0=$(cat /proc/sys/kernel/hostname); D0=$(cat /proc/sys/kernel/domainname)
    restore="echo '$H0' >/proc/sys/kernel/hostname; echo '$D0' >/proc/sys/kernel/domainname"
    setup() { if [ "$WHO" = root ]; then CONTROL_PREFIX="unshare -u"; else CONTROL_PREFIX="unshare -ru"; fi; INSIDE_ONLY=1; }
    args() { echo hostname; }
    effect() {
      [ "$(cat /proc/sys/kernel/hostname)" != "$H0" ] || [ "$(cat /proc/sys/kernel/domainname)" != "$D0" ] &&
        echo "the host's name changed to $(cat /proc/sys/kernel/hostname)"
    } ;;
  kernel)
    # Module loading, kexec, reboot, swap, I/O ports: each call has harmless
    # arguments, and the probe only learns whether the permission check let
    # it through.
    setup() { INSIDE_ONLY=1; CONTROL_AS=root; }
    args() { echo kernel; }; effect() { no_effect; } ;;
  git-deep)
    # A repository three levels below the working directory, as in a tree
    # of checkouts (src/HOST/OWNER/REPO).
    setup() {
      git init -q "$ws/src/host/repo" && printf '#!/bin/sh\nexit 0\n' >"$ws/src/host/repo/.git/hooks/pre-commit" ||
        fail "git init"
      own "$ws"; SNAP="$ws/src"; snap_take
    }
    args() { echo git src/host/repo; }; effect() { snap_effect; } ;;
  compat)
    # The filter must hold for the 32-bit and x32 entries too.
    setup() { INSIDE_ONLY=1; }
    args() { echo compat; }; effect() { no_effect; } ;;
  proc)
    setup() { SNAP=$out; snap_take; }
    args() { echo proc "$out/sentinel"; }; effect() { snap_effect; } ;;
  fd-leak)
    # A descriptor open for writing in the caller (fd 7 on the sentinel)
    # must not reach the command.
    setup() { WRAP="$PROBE host-fd $out/sentinel --"; SNAP=$out; snap_take; }
    args() { echo fds 7; }; effect() { snap_effect; } ;;
  kmem) setup() { INSIDE_ONLY=1; CONTROL_AS=root; }; args() { echo kmem; }; effect() { no_effect; } ;;
  grant-via-symlink)
    # A symlink planted in the workspace (by an earlier run) turns an
    # innocent --write ./cache into a grant on ~/.ssh.
    setup() {
      mkdir -p "$home/.ssh"; echo "ssh-ed25519 AAAA owner" >"$home/.ssh/authorized_keys"
      ln -s "$home/.ssh" "$ws/cache"; own "$home" "$ws"
      RUN_OPTS="--write $ws/cache"; SNAP="$home/.ssh"; snap_take
    }
    args() { echo rc cache/authorized_keys cache/rc; }; effect() { snap_effect; } ;;
  git-write-root)
    # A repository that is a --write root of its own, not the working
    # directory.
    setup() {
      git init -q "$out/repo" && printf '#!/bin/sh\nexit 0\n' >"$out/repo/.git/hooks/pre-commit" || fail "git init"
      own "$out"; RUN_OPTS="--write $out/repo"; SNAP="$out/repo"; snap_take
    }
    args() { echo git "$out/repo"; }; effect() { snap_effect; } ;;
  root-secret)
    # A root-only file of the host (mode 0600, like /etc/shadow or an SSH
    # host key), outside every rule: dropping capabilities leaves a root
    # caller the owner of such files.
    SECRET=SHKROOT-$$-$(date +%s%N)
    setup() {
      echo "$SECRET" >"$out/root-secret"; chown root:root "$out/root-secret"; chmod 600 "$out/root-secret"
      CONTROL_AS=root
    }
    args() { echo read "$ws/stolen" "$out/root-secret"; }
    effect() { [ -f "$ws/stolen" ] && grep -q "$SECRET" "$ws/stolen" && echo "read a root-only host file"; } ;;
  inspection-ca)
    # The TLS inspection CA's key, made by a real --net proxy session in the
    # caller's state directory: whoever reads it can mint certificates every
    # sandbox of this user trusts.
    setup() {
      RUN_ENV="XDG_STATE_HOME=$home/.local/state" RUN_OPTS="--net proxy"
      CA=$home/.local/state/shinken/ca/ca.pem
      (cd "$ws" && run_as "$WHO" "$SHINKEN" run $ALLOW --net proxy -- true) >/dev/null 2>&1
      [ -f "$CA" ] || fail "no inspection CA was made at $CA"
      SECRET=$(sed -n 2p "$CA")
    }
    args() { echo read "$ws/stolen" "$CA"; }
    effect() { [ -f "$ws/stolen" ] && grep -qF "$SECRET" "$ws/stolen" && echo "read the inspection CA's key"; } ;;
  unix-symlink)
    # The host's socket through a symlink planted in the workspace.
    setup() { listener unix "$out/sock"; ln -s "$out/sock" "$ws/sock-link"; }
    args() { echo unix "$ws/sock-link"; }; effect() { logged; } ;;
  unix-dgram)
    setup() { listener unix-dgram "$out/dgram"; }; args() { echo unix-dgram "$out/dgram"; }; effect() { logged; } ;;
  git-redirect)
    # Every file git follows to a repository's configuration: commondir, a
    # linked worktree's and a submodule's .git file, the worktree's own
    # commondir, a submodule's config. The judge asks the host's git.
    g() { git -c safe.directory='*' -c user.email=t@t.test -c user.name=t "$@"; }
    setup() {
      if ! { g init -q "$ws" && g -C "$ws" commit -q --allow-empty -m init &&
        g -C "$ws" worktree add -q "$ws/wt" 2>/dev/null && mkdir -p "$ws/.git/modules" &&
        g init -q --separate-git-dir="$ws/.git/modules/lib" "$ws/lib"; }; then
        fail "git fixtures"
      fi
      own "$ws"
    }
    args() { echo git-redirect; }
    effect() {
      hit=""
      for d in "$ws" "$ws/wt" "$ws/lib"; do
        [ "$(g -C "$d" config --get core.fsmonitor 2>/dev/null)" = shk-escaped ] && hit="$hit $d"
      done
      [ -n "$hit" ] && echo "the host's git would run core.fsmonitor = shk-escaped in:$hit"
    } ;;
  git-wide)
    # A writable root with more directories than the search for
    # repositories checks (SHK_SANDBOX_SCAN_MAX, 100,000): shinken run must
    # refuse to start rather than leave a repository in it unprotected. The
    # tree is a tmpfs of the test's own, built once for both phases.
    wide=$scratch/wide
    if ! { mkdir -p "$wide" && mount -t tmpfs -o size=256M,nr_inodes=400000 shk-wide "$wide"; }; then
      fail "tmpfs for the wide tree"
    fi
    restore="umount -l '$wide'"
    (cd "$wide" && seq -f 'w%03g' 0 100 | xargs mkdir && for w in w*; do (cd "$w" && seq -f 'd%04g' 0 999 | xargs mkdir) || exit 1; done) ||
      fail "the wide tree"
    setup() {
      rm -rf "$wide/repo"
      if ! { git init -q "$wide/repo" && printf '#!/bin/sh\nexit 0\n' >"$wide/repo/.git/hooks/pre-commit"; }; then
        fail "git init"
      fi
      chown -R "$uid:$gid" "$wide"; RUN_OPTS="--write $wide"; SNAP="$wide/repo"; snap_take
      REFUSE="too many to search for git repositories"
    }
    args() { echo git "$wide/repo"; }; effect() { snap_effect; } ;;
  git-unlisted)
    # A repository beneath a directory the caller owns but cannot list
    # (mode 0311): the command reaches it by name, or makes the directory
    # readable. shinken run must refuse to start; a root caller lists it
    # anyway, so there the repository is found and protected.
    setup() {
      if ! { git init -q "$ws/x/repo" && printf '#!/bin/sh\nexit 0\n' >"$ws/x/repo/.git/hooks/pre-commit"; }; then
        fail "git init"
      fi
      own "$ws"; chmod 311 "$ws/x"; SNAP="$ws/x/repo"; snap_take
      [ "$WHO" = user ] && REFUSE="cannot be listed"
    }
    args() { echo git "$ws/x/repo"; }; effect() { snap_effect; } ;;
  git-budget)
    # A tree grown to outrun a bounded search: 3,000 directories sorted
    # before a repository, and a repository 300 directories deep.
    deep=$ws/z; i=0; while [ $i -lt 300 ]; do deep=$deep/d; i=$((i + 1)); done
    setup() {
      if ! { mkdir -p "$ws/a" "$deep" && (cd "$ws/a" && seq -f 'd%04g' 0 2999 | xargs mkdir); }; then
        fail "the wide tree"
      fi
      for r in "$ws/b/repo" "$deep/repo"; do
        if ! { git init -q "$r" && printf '#!/bin/sh\nexit 0\n' >"$r/.git/hooks/pre-commit"; }; then
          fail "git init"
        fi
      done
      own "$ws"; SNAP="$ws/b $deep"; snap_take
    }
    args() { echo git "$ws/b/repo" "$deep/repo"; }; effect() { snap_effect; } ;;
  setid)
    # Set-user-ID and set-group-ID bits made in the workspace, which a root
    # caller's files would keep for every local user afterwards.
    setup() { :; }; args() { echo setid; }
    effect() {
      f=$(find "$ws" -perm /6000 2>/dev/null | head -3 | tr '\n' ' ')
      [ -n "$f" ] && echo "set-id bits in the workspace: $f"
    } ;;
  unix-root)
    # A host socket inside the writable root (the working directory at /tmp
    # holds tmux's, ssh-agent's, other sessions'): bound outside, so never
    # reachable.
    setup() { listener unix "$ws/host.sock"; }; args() { echo unix "$ws/host.sock"; }; effect() { logged; } ;;
  env)
    # Secrets and sockets the caller's environment carries to agents.
    SECRET=SHKENV-$$-$(date +%s%N)
    setup() {
      RUN_ENV="GITHUB_TOKEN=$SECRET-gh OPENAI_API_KEY=$SECRET-oa AWS_SECRET_ACCESS_KEY=$SECRET-aws"
      RUN_ENV="$RUN_ENV AWS_SESSION_TOKEN=$SECRET-awst AZURE_CLIENT_SECRET=$SECRET-az NPM_TOKEN=$SECRET-npm"
      RUN_ENV="$RUN_ENV DB_PASSWORD=$SECRET-db GOOGLE_APPLICATION_CREDENTIALS=/x/$SECRET-g"
      RUN_ENV="$RUN_ENV SSH_AUTH_SOCK=/x/$SECRET-ssh GPG_AGENT_INFO=/x/$SECRET-gpg"
      RUN_ENV="$RUN_ENV DBUS_SESSION_BUS_ADDRESS=unix:path=/x/$SECRET-dbus DISPLAY=:$SECRET"
      RUN_ENV="$RUN_ENV WAYLAND_DISPLAY=$SECRET-wl XAUTHORITY=/x/$SECRET-xa KRB5CCNAME=/x/$SECRET-krb"
    }
    args() { echo environ "$ws/env"; }
    effect() {
      [ -f "$ws/env" ] && grep -q "$SECRET" "$ws/env" &&
        echo "passed in: $(grep "$SECRET" "$ws/env" | cut -d= -f1 | tr '\n' ' ')"
    } ;;
  identity)
    # The host's machine id, name and resolver, which the default --net
    # none does not need.
    setup() { :; }
    args() { echo copy "$ws/stolen" /etc/machine-id /proc/sys/kernel/hostname /etc/resolv.conf; }
    effect() {
      [ -f "$ws/stolen" ] || return 1
      grep -qxF "$(cat /etc/machine-id)" "$ws/stolen" && { echo "the host's machine id"; return 0; }
      grep -qxF "$(cat /proc/sys/kernel/hostname)" "$ws/stolen" && { echo "the host's name"; return 0; }
      ns=$(grep '^nameserver' /etc/resolv.conf 2>/dev/null | head -1)
      [ -n "$ns" ] && grep -qxF "$ns" "$ws/stolen" && { echo "the host's resolver: $ns"; return 0; }
      return 1
    } ;;
  tmpfs)
    # The private /tmp is bounded: one run cannot fill the host's memory.
    setup() { RUN_OPTS="--tmpfs-size 8M"; }
    args() { echo fill "/tmp/shk-fill-$$" 32 "$ws/filled"; }
    effect() {
      n=$(cat "$ws/filled" 2>/dev/null || echo 0)
      [ "$n" -gt 8 ] && echo "$n MiB written to /tmp, over --tmpfs-size 8M"
    } ;;
  *) fail "unknown case '$CASE'" ;;
esac

# --- control: without the sandbox the effect is visible -----------------------
phase=control
fresh; setup
# shellcheck disable=SC2046
run_probe control $(args)
grep -q '^attempted ' "$scratch/probe.out" || fail "control: the probe attempted nothing (broken probe)"
if [ "$INSIDE_ONLY" = 1 ]; then
  [ $rc = 10 ] || fail "control: the probe could not do it even without the sandbox (status $rc), so this test cannot fail"
  echo "control ok: the probe succeeded without the sandbox" >&2
else
  what=$(effect) || fail "control: no effect visible without the sandbox, so this test cannot fail"
  echo "control ok: $what" >&2
fi

# --- the sandbox: the effect must not happen ---------------------------------
phase=sandbox
fresh; setup
# shellcheck disable=SC2046
run_probe sandbox $(args)
if [ "$CASE" = root-secret ] && [ "$WHO" = root ]; then
  # The sandbox cannot keep root's files from a root caller, so without
  # --allow-degraded nothing may run: one line naming root, no copy.
  [ $rc = 125 ] || fail "as root without --allow-degraded, shinken run did not refuse (status $rc)"
  [ "$(wc -l <"$scratch/probe.err")" = 1 ] || fail "the refusal is not exactly one line"
  grep -qF "the caller is root" "$scratch/probe.err" || fail "the refusal does not name root: $(cat "$scratch/probe.err")"
  if what=$(effect); then fail "ESCAPE ($CASE as $WHO) although shinken run refused: $what"; fi
  grep -q '^attempted ' "$scratch/probe.out" && fail "the probe ran although shinken run refused"
  echo "refused: $CASE as $WHO"
  exit 0
fi
if [ -n "${REFUSE:-}" ]; then
  # shinken run must refuse to start, saying why, and nothing may run.
  [ $rc = 125 ] || fail "shinken run did not refuse to start (status $rc)"
  grep -qF "$REFUSE" "$scratch/probe.err" || fail "the refusal does not say '$REFUSE': $(cat "$scratch/probe.err")"
  if what=$(effect); then fail "ESCAPE ($CASE as $WHO) although shinken run refused: $what"; fi
  grep -q '^attempted ' "$scratch/probe.out" && fail "the probe ran although shinken run refused"
  echo "refused: $CASE as $WHO"
  exit 0
fi
if [ -n "$ALLOW" ]; then
  # Under a WRAP's terminal, shinken run's stderr arrives on stdout.
  cat "$scratch/probe.out" "$scratch/probe.err" >"$scratch/probe.all"
  grep -qF "$ROOT_DEGRADED" "$scratch/probe.all" || fail "as root, shinken run did not warn that root's files are readable"
  if line=$(other_degraded "$scratch/probe.all"); then
    skip "a layer other than the root caller's is degraded here: $line"
  fi
fi
if [ $rc = 125 ]; then
  line=$(head -1 "$scratch/probe.err")
  case $line in
    *degraded*|*unavailable*|*not\ available*|*not\ supported*) skip "shinken run refuses to start here: $line" ;;
  esac
  fail "shinken run did not start: $line"
fi
if what=$(effect); then
  fail "ESCAPE ($CASE as $WHO): $what"
fi
# A hog killed at the limit reports nothing; its progress file shows the attempt.
grep -q '^attempted ' "$scratch/probe.out" || { [ "$CASE" = memhog ] && [ $rc = 137 ] && [ -s "$ws/mem" ]; } ||
  fail "the probe attempted nothing inside the sandbox (status $rc)"
case $rc in
  0) ;;
  10) fail "ESCAPE ($CASE as $WHO), reported by the probe: $(grep SUCCEEDED "$scratch/probe.out" | tr '\n' ';')" ;;
  137) [ "$CASE" = memhog ] || fail "the probe was killed (status 137)" ;;
  *) fail "unexpected status $rc" ;;
esac
echo "blocked: $CASE as $WHO"
exit 0
