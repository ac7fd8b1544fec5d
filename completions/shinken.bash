# bash completion for shinken(1). The commands come from 'shinken --help'
# and each command's options from 'shinken CMD --help', so the completion
# cannot drift from the program it completes.

_shinken_commands() {
  "$1" --help 2>/dev/null | awk '/^commands:/ { f = 1; next } f && /^  [a-z]/ { print $1 }'
}

_shinken() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
  local prog=${COMP_WORDS[0]} cmd=${COMP_WORDS[1]} i
  COMPREPLY=()
  if [ "$COMP_CWORD" -eq 1 ]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_shinken_commands "$prog") --help --version" -- "$cur")
    return
  fi
  # After 'shinken run ... --': the command line of the workload.
  for ((i = 2; i < COMP_CWORD; i++)); do
    if [ "${COMP_WORDS[i]}" = -- ]; then
      if [ "$i" -eq $((COMP_CWORD - 1)) ]; then
        mapfile -t COMPREPLY < <(compgen -c -- "$cur")
      else
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
      fi
      return
    fi
  done
  case $prev in
    --net) mapfile -t COMPREPLY < <(compgen -W "none proxy host" -- "$cur"); return ;;
    --write|--read|--deny|--profile|--report|--proxy-config|--config|--db|--key-file|--checkpoint|\
    --policies|--schema|--entities|--request-json|--requests|--root|--state-dir)
      mapfile -t COMPREPLY < <(compgen -f -- "$cur"); return ;;
  esac
  if [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$("$prog" "$cmd" --help 2>/dev/null |
      grep -o -- '--[a-z][a-z-]*' | sort -u)" -- "$cur")
    return
  fi
  case $cmd in
    help) [ "$COMP_CWORD" -eq 2 ] && mapfile -t COMPREPLY < <(compgen -W "$(_shinken_commands "$prog")" -- "$cur") ;;
    cedar) [ "$COMP_CWORD" -eq 2 ] && mapfile -t COMPREPLY < <(compgen -W "authorize validate format
      translate-policy translate-schema conformance analyze" -- "$cur") ;;
    audit) [ "$COMP_CWORD" -eq 2 ] && mapfile -t COMPREPLY < <(compgen -W "verify prove key tail show export" -- "$cur") ;;
    trust) mapfile -t COMPREPLY < <(compgen -f -- "$cur") ;;
    persist) [ "$COMP_CWORD" -eq 2 ] && mapfile -t COMPREPLY < <(compgen -W "list show rm" -- "$cur") ;;
    secret) [ "$COMP_CWORD" -eq 2 ] && mapfile -t COMPREPLY < <(compgen -W "add list rm" -- "$cur") ;;
  esac
}
complete -F _shinken shinken
