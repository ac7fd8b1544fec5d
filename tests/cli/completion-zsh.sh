#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# completion-zsh.sh: the zsh completion (completions/_shinken) loads
# through compinit, which binds it to shinken by its #compdef line, and
# completes commands, each command's options (from its --help), --net's
# values, and after 'run ... --' the workload's command. The completion
# system's own adders (compadd, _describe, _normal, _files) are replaced by
# functions that print what they are given, filtered by the prefix as
# compadd would, so each line's candidates can be judged.
. "$SHINKEN_SRCDIR/tests/lib.sh"
command -v zsh >/dev/null || skip "no zsh (scripts/install-deps.sh installs it)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# complete LINE...: the words of a command line, the last being completed.
# compinit -D writes no dump file; HOME and ZDOTDIR point into the test's
# own directory all the same, so nothing of the caller's (or the host's:
# "-d FILE" after -D would dump over FILE) is ever written.
complete_line() {
  HOME=$tmp ZDOTDIR=$tmp zsh -f -c '
    src=$1 prog=$2; shift 2
    fpath=("$src/completions" $fpath)
    autoload -U compinit
    compinit -u -D
    [[ ${_comps[shinken]} == _shinken ]] || { print -u2 "compinit did not bind _shinken to shinken"; exit 3; }
    out() { local w; for w in "$@"; do [[ $w == ${PREFIX}* ]] && print -r -- $w; done; return 0; }
    compadd() { while [[ $1 == -* && $1 != -- ]]; do shift; done; [[ $1 == -- ]] && shift; out "$@"; }
    _describe() { out "${(@)${(P)2}%%:*}"; }
    _normal() { print -r -- "_normal:${words[1]}"; }
    _files() { print -r -- "_files"; }
    words=("$prog" "$@"); CURRENT=$#words; PREFIX=${words[CURRENT]}
    autoload -U _shinken
    _shinken' sh "$SHINKEN_SRCDIR" "$SHINKEN" "$@"
}
has() { # WHAT WORD LINE...: WORD is among the candidates for LINE
  what=$1 word=$2; shift 2
  complete_line "$@" >"$tmp/c" || fail "$what: the completion failed for '$*'"
  grep -qx -- "$word" "$tmp/c" || fail "$what: '$word' not offered for '$*': $(tr '\n' ' ' <"$tmp/c")"
}
hasnt() {
  what=$1 word=$2; shift 2
  complete_line "$@" >"$tmp/c" || fail "$what: the completion failed for '$*'"
  if grep -qx -- "$word" "$tmp/c"; then fail "$what: '$word' offered for '$*'"; fi
}
has "a command" run ru
has "a command" sessions se
hasnt "control: a prefix that does not match" run tr
has "an option of run" --verbose run --ver
has "an option of run" --allow-domain run --allow-d
has "an option of grant" --scope grant s1 net.egress --sc
hasnt "control: grant has no --verbose" --verbose grant --ver
has "--net's values" proxy run --net p
has "a file after --profile" _files run --profile ""
has "a cedar subcommand" authorize cedar au
has "the workload's command after --" _normal:bas run --net proxy -- bas
hasnt "control: before --, no command is completed" _normal:bas run bas
[ -z "$(find "$tmp" -name '.zcompdump*')" ] || fail "compinit wrote a dump file"
echo "ok: zsh completion"
