#!/usr/bin/env bash
# Checks that a carapace binary carries the bundled plugins as the core
# finds them (cmd/wiring): for each plugin of this tree with a
# handler (plugins/<name>/handler/main.go), the folder beside carapace —
# plugins/<name>/, or ../Resources/plugins/<name>/ when carapace is in
# Contents/MacOS of Carapace.app — holds
#
#   - the handler, which runs on this machine (on macOS: its signature is
#     accepted; it says it is a Carapace plugin handler and exits),
#   - manifest.json and skills/, the same as in plugins/<name>/,
#
# and carapace has the handler's SHA-256 linked in (the name=sha256 pin
# make links with -X; the core refuses a handler that differs from it).
#
#   scripts/check-bundle.sh CARAPACE
#
# make build's bin/carapace and make app-bundle's
# Carapace.app/Contents/MacOS/carapace both pass; the macOS workflow runs
# it on the app, scripts' tests on make build's layout. Exit status 1 with
# every problem listed, 0 with a line per plugin.
# It runs with macOS's bash 3.2 too: no empty "${array[@]}" under set -u.
set -euo pipefail
if (($# != 1)); then
  echo "usage: scripts/check-bundle.sh CARAPACE" >&2
  exit 2
fi
carapace=$1
[[ $carapace == /* ]] || carapace=$PWD/$carapace
cd "$(dirname "$0")/.."

dir=$(dirname "$carapace")/plugins
if [[ $(basename "$(dirname "$carapace")") == MacOS ]]; then
  dir=$(dirname "$(dirname "$carapace")")/Resources/plugins
fi

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

problems=0
problem() {
  echo "check-bundle: $*" >&2
  problems=$((problems + 1))
}

[[ -f $carapace ]] || problem "$carapace does not exist"
for main in plugins/*/handler/main.go; do
  [[ -e $main && -f $carapace ]] || continue
  name=${main#plugins/}
  name=${name%%/*}
  p=$dir/$name
  if [[ ! -d $p ]]; then
    problem "$name: $p is missing: the core would not find the plugin"
    continue
  fi
  if [[ ! -f $p/handler || ! -x $p/handler ]]; then
    problem "$name: $p/handler is missing or not executable"
    continue
  fi
  before=$problems
  cmp -s "plugins/$name/manifest.json" "$p/manifest.json" || problem "$name: $p/manifest.json is not plugins/$name/manifest.json"
  diff -r "plugins/$name/skills" "$p/skills" >/dev/null 2>&1 || problem "$name: $p/skills is not plugins/$name/skills"
  pin=$name=$(sha256 "$p/handler")
  grep -a -q -F "$pin" "$carapace" || problem "$name: $carapace does not carry the pin $pin of $p/handler: the core would refuse the handler (rebuild carapace after the handlers, and sign nothing after pinning)"
  # The handler runs: out of the core it says what it is and exits 1. A
  # signal (e.g. macOS killing code whose signature it refuses) is not that.
  status=0
  out=$(env -u CARAPACE_PLUGIN_ENDPOINT -u CARAPACE_PLUGIN_TOKEN "$p/handler" </dev/null 2>&1) || status=$?
  if ((status >= 128)) || [[ $out != *"Carapace plugin handler"* ]]; then
    problem "$name: $p/handler did not run (exit $status): $out"
  fi
  ((problems > before)) || echo "ok  $name: $p (pin ${pin#*=})"
done
if ((problems > 0)); then
  echo "check-bundle: $problems problem(s)" >&2
  exit 1
fi
