#!/bin/sh
# The demo: a coding agent's session asks to use capabilities, and Shinken's
# Cedar engine decides each request against the shipped example policies
# (policies/examples/) and Shinken's schema, naming the rules that decided.
set -eu
shinken=${1:?usage: demo.sh PATH-TO-SHINKEN}
root=$(cd "$(dirname "$0")/.." && pwd)
ex=$root/policies/examples

echo "Shinken decides what an agent may use. Session s-2026-11-30-01, agent 'coder',"
echo "policies: policies/examples/session.cedar (schema: policies/schema.cedarschema)."

ask() { # REQUEST-NAME WHAT
  printf '\n%s\n' "$2"
  status=0
  out=$("$shinken" cedar authorize --schema "$root/policies/schema.cedarschema" \
    --policies "$ex/session.cedar" --entities "$ex/entities.json" \
    --request-json "$ex/requests/$1.json") || status=$?
  # 0 is ALLOW and 2 is DENY; anything else is a broken demo, not an answer.
  [ "$status" -le 2 ] && [ "$status" -ne 1 ] || exit 1
  printf '%s\n' "$out" | sed 's/^/    /'
}

ask egress-pypi "1. net.egress to files.pythonhosted.org:443 (to pip install a dependency)"
ask egress-metadata "2. net.egress to 169.254.169.254:80, a URL it found in a README (external provenance)"
ask install-unapproved "3. install.privileged, scope pkg, not yet approved by a human"
ask install-approved "4. the same, after the human approved it"
ask write-after-expiry "5. fs.scope write to /home/dev/project/src/main.c, after the session expired"
