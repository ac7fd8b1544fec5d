#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# doctor.sh PROBE CASE: each claim of `shinken doctor --json` checked by an
# independent probe of the host (see docs/shinken-doctor.1.scd).
. "$SHINKEN_SRCDIR/tests/lib.sh"
. "$SHINKEN_SRCDIR/tests/sandbox/scratch.sh"
set +e

PROBE=$1 CASE=$2
scratch=$(scratch_dir shk-doctor) || fail "mktemp"
LPID=""
trap '[ -n "$LPID" ] && kill "$LPID" 2>/dev/null; rm -rf "$scratch"' EXIT
cd "$scratch" || fail "cd"
programs_for "$(id -u)" "$(id -g)"

"$SHINKEN" doctor --json >doctor.json 2>doctor.err
drc=$?
cat doctor.json doctor.err >&2
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' doctor.json || fail "doctor --json printed no JSON (status $drc)"

# j EXPR: a python expression over the report, d.
j() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($1)" doctor.json; }
claim() { echo "claim: $*" >&2; }
# As root, shinken run needs --allow-degraded to start at all (root's files
# stay root's inside); the case root checks that claim.
ALLOW=""
[ "$(id -u)" = 0 ] && ALLOW=--allow-degraded

case $CASE in
  exit)
    # 0 exactly when the default `shinken run` can start; the same claim as
    # can_run, checked by starting it.
    can=$(j 'd["can_run"]')
    "$SHINKEN" run -- /bin/true 2>run.err
    rrc=$?
    claim "can_run=$can, doctor status $drc; shinken run -- /bin/true: $rrc"
    if [ "$can" = True ]; then
      [ $drc = 0 ] || fail "can_run is true but doctor exited $drc"
      [ $rrc = 0 ] || fail "can_run is true but shinken run -- /bin/true exited $rrc: $(cat run.err)"
    else
      [ $drc = 3 ] || fail "can_run is false but doctor exited $drc"
      [ $rrc = 125 ] || fail "can_run is false but shinken run -- /bin/true exited $rrc"
    fi
    "$SHINKEN" doctor --bogus >/dev/null 2>&1
    [ $? = 64 ] || fail "a usage error did not exit 64" ;;
  root)
    # The root caller's claim, both ways, against a root-only file: as
    # root, the filesystem class names it missing and the file is readable
    # inside (with --allow-degraded, after a refusal without it); as nobody,
    # neither.
    fs() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); c=[c for c in d['classes'] if c['class']=='filesystem'][0]; print(c['level'], d['can_run'], c['missing'] or '')" "$1"; }
    [ "$(id -u)" = 0 ] || skip "needs root to check both callers"
    echo "root-only $$" >root-secret; chmod 600 root-secret
    claim "as root, filesystem: $(fs doctor.json)"
    case $(fs doctor.json) in
      "partial False "*"the caller is root"*) ;;
      *) fail "as root, the filesystem class does not say root's files are readable" ;;
    esac
    "$SHINKEN" run -- cat "$scratch/root-secret" >inside.out 2>run.err
    [ $? = 125 ] && [ ! -s inside.out ] || fail "as root without --allow-degraded, shinken run did not refuse"
    "$SHINKEN" run --allow-degraded -- cat "$scratch/root-secret" >inside.out 2>run.err
    grep -q "root-only $$" inside.out || fail "the claim is wrong: a root-only file is not readable inside as root"
    chmod 755 "$scratch"; programs_for 65534 65534
    setpriv --reuid=65534 --regid=65534 --clear-groups "$SHINKEN" doctor --json >user.json 2>/dev/null
    claim "as nobody, filesystem: $(fs user.json)"
    fs user.json | grep -q "caller is root" && fail "as nobody, the doctor claims the caller is root"
    setpriv --reuid=65534 --regid=65534 --clear-groups "$SHINKEN" run -- cat "$scratch/root-secret" >inside.out 2>run.err
    grep -q "root-only $$" inside.out && fail "as nobody, a root-only file was readable inside" ;;
  bwrap)
    path=$(j 'd["bwrap"]["path"]')
    real=$(command -v bwrap || { [ -x /usr/bin/bwrap ] && echo /usr/bin/bwrap; })
    claim "bwrap at $path, version $(j 'd["bwrap"]["version"]'), setuid $(j 'd["bwrap"]["setuid"]')"
    if [ -z "$real" ]; then
      [ "$path" = None ] || fail "claims bwrap at $path but there is none"
    else
      [ -x "$path" ] || fail "claims bwrap at '$path', which is not an executable"
      v=$("$path" --version | awk '{print $2}')
      [ "$(j 'd["bwrap"]["version"]')" = "$v" ] || fail "claims version $(j 'd["bwrap"]["version"]'), bwrap says $v"
      if [ -u "$path" ]; then s=True; else s=False; fi
      [ "$(j 'd["bwrap"]["setuid"]')" = $s ] || fail "setuid claim is wrong (the file says $s)"
    fi ;;
  userns)
    # As an unprivileged user (nobody), as an agent usually runs.
    if setpriv --reuid=65534 --regid=65534 --clear-groups unshare -U /bin/true 2>/dev/null; then a=True; else a=False; fi
    claim "userns available=$(j 'd["userns"]["available"]'); unshare -U as nobody: $a"
    [ "$(j 'd["userns"]["available"]')" = $a ] || fail "user namespace claim is wrong (unshare -U as nobody: $a)" ;;
  landlock)
    abi=$("$PROBE" landlock-abi)
    claim "landlock abi=$(j 'd["landlock"]["abi"]'); the kernel says $abi"
    [ "$(j 'd["landlock"]["abi"]')" = "$abi" ] || fail "Landlock ABI claim is wrong (the kernel says $abi)" ;;
  seccomp)
    if [ "$("$PROBE" seccomp-avail)" = 1 ]; then a=True; else a=False; fi
    claim "seccomp available=$(j 'd["seccomp"]["available"]'); a filter installs: $a"
    [ "$(j 'd["seccomp"]["available"]')" = $a ] || fail "seccomp claim is wrong (a filter installs: $a)" ;;
  cgroup)
    v2=$(j 'd["cgroup"]["v2"]["mounted"]'); mnt=$(j 'd["cgroup"]["v2"]["mount"]'); parent=$(j 'd["cgroup"]["v2"]["parent"]')
    ctl=$(j '" ".join(d["cgroup"]["controllers"])')
    claim "cgroup v2=$v2 mount=$mnt parent=$parent controllers=[$ctl]"
    if grep -q ' cgroup2 ' /proc/self/mounts; then real=True; else real=False; fi
    [ "$v2" = "$real" ] || fail "cgroup v2 claim is wrong (/proc/self/mounts says $real)"
    if [ "$v2" = True ]; then
      awk -v m="$mnt" '$2 == m && $3 == "cgroup2" { f = 1 } END { exit !f }' /proc/self/mounts ||
        fail "claims cgroup2 at $mnt, which is not a cgroup2 mount"
    fi
    mech=$(j 'd["cgroup"]["mechanism"]')
    claim "resource limits through: $mech"
    if [ -n "$ctl" ] && [ "$mech" = "cgroup v1" ]; then
      # Each claimed controller: a writable directory in a v1 hierarchy
      # mounted with that controller, holding its limit file.
      for c in $ctl; do
        dir=$(j "d['cgroup']['v1'].get('$c', '')")
        [ -d "$dir" ] && [ -w "$dir" ] || fail "claims $c through cgroup v1 at '$dir', not a writable directory"
        [ "$(stat -f -c %T "$dir")" = cgroupfs ] || fail "$dir is not on a cgroup v1 mount"
        awk -v d="$dir" -v c="$c" '$3 == "cgroup" && index(d "/", $2 "/") == 1 && ("," $4 ",") ~ ("," c ",") { f = 1 }
          END { exit !f }' /proc/self/mounts || fail "$dir is not in a hierarchy mounted with $c"
        case $c in memory) f=memory.limit_in_bytes ;; pids) f=pids.max ;; cpu) f=cpu.cfs_quota_us ;; esac
        # A hierarchy's root cgroup has no limit files; its children do.
        awk -v d="$dir" '$2 == d && $3 == "cgroup" { f = 1 } END { exit !f }' /proc/self/mounts ||
          [ -f "$dir/$f" ] || fail "claims $c, but $dir has no $f"
      done
    elif [ -n "$ctl" ]; then
      [ "$mech" = "cgroup v2" ] || fail "controllers claimed with mechanism '$mech'"
      [ -d "$parent" ] || fail "controllers claimed without a parent directory"
      for c in $ctl; do
        grep -qw "$c" "$parent/cgroup.controllers" || fail "claims $c, not in $parent/cgroup.controllers"
        [ -w "$parent/cgroup.subtree_control" ] || fail "claims $c delegated, but $parent is not writable"
      done
    fi
    # The refusal follows the claim: --mem needs the memory controller.
    # As root, which needs --allow-degraded anyway, the warning says it.
    "$SHINKEN" run $ALLOW --mem 64M -- /bin/true 2>run.err
    rrc=$?
    case " $ctl " in
      *" memory "*) [ $rrc = 0 ] || fail "memory claimed but --mem 64M exited $rrc: $(cat run.err)"
         grep -q 'cgroup limits unavailable' run.err && fail "memory claimed but --mem 64M is degraded" ;;
      *) if [ -n "$ALLOW" ]; then
           [ $rrc = 0 ] || fail "--allow-degraded --mem 64M did not run"
           grep -q 'degraded: cgroup limits unavailable' run.err || fail "memory not claimed but --mem 64M is not degraded"
         else
           [ $rrc = 125 ] || fail "memory not claimed but --mem 64M did not refuse (status $rrc)"
           "$SHINKEN" run --allow-degraded --mem 64M -- /bin/true 2>run.err
           [ $? = 0 ] || fail "--allow-degraded --mem 64M did not run"
           grep -q degraded run.err || fail "--allow-degraded printed no warning"
         fi ;;
    esac ;;
  solver)
    # The analysis gate's solver: doctor's claim against cvc5 asked
    # directly, and, as the control, a PATH without cvc5 must make doctor
    # say it is missing (the gate then refuses every pattern grant).
    have=$(j 'd["analysis"]["available"]')
    ver=$(j 'd["analysis"]["version"]')
    real=$(cvc5 --version 2>/dev/null | head -n 1)
    claim "analysis: available=$have version=$ver; cvc5 --version: $real"
    if [ -n "$real" ]; then
      [ "$have" = True ] || fail "cvc5 answers but doctor says it is missing"
      [ "$ver" = "$real" ] || fail "doctor reports version '$ver', cvc5 says '$real'"
    else
      [ "$have" = False ] || fail "doctor claims a solver that does not answer"
    fi
    mkdir nopath
    PATH=$scratch/nopath "$SHINKEN" doctor --json >nosolver.json 2>/dev/null
    [ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["analysis"]["available"])' nosolver.json)" = False ] ||
      fail "with no cvc5 on PATH doctor still claims the solver"
    PATH=$scratch/nopath "$SHINKEN" doctor >nosolver.txt 2>&1
    grep -q "cvc5 not found" nosolver.txt || fail "the text report does not say cvc5 is missing" ;;
  classes)
    # Six classes, each with a level consistent with the detections.
    [ "$(j 'sorted(c["class"] for c in d["classes"])')" = \
      "['filesystem', 'network', 'privileges', 'processes', 'resources', 'syscalls']" ] ||
      fail "not exactly the six classes"
    lvl() { j "[c['level'] for c in d['classes'] if c['class']=='$1'][0]"; }
    for c in filesystem network processes syscalls privileges resources; do
      l=$(lvl $c); claim "$c: $l"
      case $l in full|partial|none) ;; *) fail "$c has level '$l'" ;; esac
    done
    if [ "$(j 'd["seccomp"]["available"]')" = False ]; then
      [ "$(lvl syscalls)" = full ] && fail "syscalls full without seccomp"
    fi
    if [ "$(j 'd["landlock"]["abi"]')" = 0 ]; then
      [ "$(lvl filesystem)" = full ] && fail "filesystem full without Landlock"
    fi
    n=$(j 'len(set(d["cgroup"]["controllers"]) & {"memory","pids","cpu"})')
    if [ "$n" != 3 ]; then
      [ "$(lvl resources)" = full ] && fail "resources full without memory, pids and cpu delegated"
    fi
    if [ "$(j 'd["userns"]["available"]')" = False ]; then
      [ "$(lvl processes)" = full ] && fail "processes full without user namespaces"
    fi
    "$SHINKEN" doctor >text.out 2>&1
    for c in filesystem network processes syscalls privileges resources; do
      grep -q "$c" text.out || fail "the text report does not mention $c"
    done ;;
  mechanisms)
    # Each mechanism a class claims, seen from inside `shinken run`.
    mech() { j "[c['mechanism'] or '' for c in d['classes'] if c['class']=='$1'][0]"; }
    inside() { # EXPECTED-STATUS WHAT ARGS...: runs shinken run ARGS
      want=$1 what=$2; shift 2
      "$SHINKEN" run $ALLOW "$@" >inside.out 2>inside.err
      st=$?
      sed 's/^/    /' inside.out inside.err >&2
      [ $st = "$want" ] || fail "claims $what, but inside: status $st"
    }
    case $(mech filesystem) in
      *Landlock*)
        # Only Landlock answers EACCES here (a read-only mount says EROFS).
        claim "filesystem: Landlock"; inside 0 "Landlock on files" -- "$PROBE" landlock-fs
        grep -q 'Permission denied' inside.out || fail "claims Landlock, but /proc/self/comm was not refused by it" ;;
    esac
    case $(mech network) in
      *"lo only"*)
        claim "network: lo only"; inside 0 "a network namespace" -- cat /proc/net/dev
        n=$(tail -n +3 inside.out | grep -vc '^ *lo:')
        [ "$n" = 0 ] || fail "claims lo only, but the command sees $n other interfaces" ;;
    esac
    case $(mech processes) in
      *"signal"*) claim "processes: signal scoping"; inside 0 "signal scoping" -- "$PROBE" sigscope ;;
    esac
    case $(mech processes) in
      *"abstract-socket"*)
        # With the host's network, only the scoping stands between the
        # command and the host's abstract sockets.
        claim "processes: abstract-socket scoping"
        listen_start abstract "shk-doctor-$$"
        "$PROBE" abstract "shk-doctor-$$" >/dev/null; listen_stop
        [ -s "$scratch/log" ] || fail "the control did not reach the listener"
        listen_start abstract "shk-doctor-$$"
        "$SHINKEN" run $ALLOW --net host -- "$PROBE" abstract "shk-doctor-$$" >&2 2>&1; listen_stop
        [ -s "$scratch/log" ] && fail "claims abstract-socket scoping, but --net host reached the host's abstract socket" ;;
    esac
    case $(mech syscalls) in
      *seccomp*)
        claim "syscalls: seccomp"; inside 0 "seccomp" -- grep '^Seccomp:' /proc/self/status
        grep -q '2$' inside.out || fail "claims a seccomp filter, but the command has none" ;;
    esac
    case $(mech privileges) in
      *"capabilities and the bounding set dropped"*)
        claim "privileges: no capabilities"; inside 0 "no capabilities" -- grep '^Cap' /proc/self/status
        [ "$(grep -c '[[:space:]]0000000000000000$' inside.out)" = 5 ] || fail "claims every capability dropped, but: $(tr '\n' ' ' <inside.out)" ;;
    esac ;;
  *) fail "unknown case '$CASE'" ;;
esac
echo "ok: doctor $CASE"
exit 0
