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
