#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# completion.sh: the bash completion completes commands, each command's
# options (from its --help), --net's values, and after 'run ... --' the
# workload's command; judged by what COMPREPLY holds for a given line.
. "$SHINKEN_SRCDIR/tests/lib.sh"
command -v bash >/dev/null || skip "no bash"
# complete LINE...: the words of a command line, the last one being
# completed; prints the candidates, one a line.
complete_line() {
  bash -c '
    . "$1"; shift
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
    _shinken
    printf "%s\n" "${COMPREPLY[@]}"' sh "$SHINKEN_SRCDIR/completions/shinken.bash" "$SHINKEN" "$@"
}
has() { # WHAT WORD LINE...: WORD is among the candidates for LINE
  what=$1 word=$2; shift 2
  complete_line "$@" | grep -qx -- "$word" || fail "$what: '$word' not offered for '$*': $(complete_line "$@" | tr '\n' ' ')"
}
hasnt() {
  what=$1 word=$2; shift 2
  complete_line "$@" | grep -qx -- "$word" && fail "$what: '$word' offered for '$*'"
  return 0
}
has "a command" run ru
has "a command" trust tr
hasnt "control: a prefix that does not match" run tr
has "an option of run" --verbose run --ver
has "an option of run" --allow-domain run --allow-d
has "an option of grant" --scope grant s1 net.egress --sc
hasnt "control: grant has no --verbose" --verbose grant --ver
has "--net's values" proxy run --net p
has "a cedar subcommand" authorize cedar au
has "the workload's command after --" bash run --net proxy -- bas
hasnt "control: before --, a command name is not offered" bash run bas
echo "ok: completion"
