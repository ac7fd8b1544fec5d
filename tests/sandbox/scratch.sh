# SPDX-License-Identifier: Apache-2.0
# Sourced by the sandbox tests. scratch_dir NAME: a fresh directory for one
# test, in a place the sandbox shows read-only like the rest of / (not /tmp,
# /var/tmp or /run, which it replaces with private ones), so that "outside
# the writable roots" means a real, visible host path. Prints its path.
scratch_dir() {
  base=/var/lib/shinken-tests
  if mkdir -p "$base" 2>/dev/null && chmod 755 "$base"; then
    mktemp -d "$base/$1.XXXXXX"
  else
    mktemp -d "/var/tmp/$1.XXXXXX"
  fi
}

# listen_start KIND WHERE: a host listener of the probe program ($PROBE)
# logging to $scratch/log; sets LPID and LPORT. listen_stop: stops it; it
# logs what is still queued before it exits, so the log is complete after.
listen_start() {
  rm -f "$scratch/log" "$scratch/ready"
  "$PROBE" host-listen "$1" "$2" "$scratch/log" "$scratch/ready" &
  LPID=$!
  i=0
  while [ ! -s "$scratch/ready" ]; do
    i=$((i + 1)); [ $i -gt 400 ] && fail "the listener did not start"
    sleep 0.05
  done
  LPORT=$(cat "$scratch/ready")
}
listen_stop() {
  kill -TERM "$LPID" 2>/dev/null
  wait "$LPID" 2>/dev/null
  LPID=""
}

# programs_for UID GID: the build tree may sit where that user cannot reach
# (a clone under /root), or where the sandbox shows a private directory
# instead (a clone under /tmp); then SHINKEN and PROBE become copies in
# $scratch.
programs_for() {
  hidden=""
  for p in "$SHINKEN" "$PROBE"; do
    case "$p" in /tmp/*|/var/tmp/*|/run/*|/dev/shm/*) hidden=1 ;; esac
  done
  if [ -n "$hidden" ] || ! setpriv --reuid="$1" --regid="$2" --clear-groups \
      sh -c 'test -x "$1" && test -x "$2"' sh "$SHINKEN" "$PROBE"; then
    mkdir -p "$scratch/bin" && cp "$SHINKEN" "$PROBE" "$scratch/bin/" || fail "cannot copy the programs"
    # The policies the capability manager loads live in the same tree.
    cp -r "$SHINKEN_SRCDIR/policies" "$scratch/policies" || fail "cannot copy the policies"
    chmod -R a+rX "$scratch/policies"
    chmod 755 "$scratch" "$scratch/bin"
    SHINKEN=$scratch/bin/$(basename "$SHINKEN") PROBE=$scratch/bin/$(basename "$PROBE")
    SHINKEN_POLICY_DIR=$scratch/policies
    export SHINKEN_POLICY_DIR
  fi
}

# As root, `shinken run` refuses to start unless --allow-degraded is given,
# and then warns: the sandbox's uid 0 is the host's root, which owns every
# root-only file that no rule masks (docs/sandbox.md). ROOT_DEGRADED is the
# start of that warning. other_degraded FILE prints the first warning of a
# degraded layer in FILE (shinken run's stderr) other than that one, and
# fails when there is none.
ROOT_DEGRADED="degraded: root-owned files are readable: the caller is root"
other_degraded() {
  grep -F 'degraded: ' "$1" | grep -vF "$ROOT_DEGRADED" | head -1 | grep .
}
