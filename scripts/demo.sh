#!/usr/bin/env bash
# make demo: a plugin created, built and installed with the CLI; a core in a
# temporary home running it out of process beside the built-in echo; one
# agent session with the `none` runtime that lists the tools, calls both
# plugins, triggers a validation error and has an echo_confirm call
# approved; then the plugin list and the audit trail.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$PWD/bin
HOME_DIR=$(mktemp -d /tmp/carapace-demo.XXXXXX)
export CARAPACE_HOME=$HOME_DIR
LOG=$HOME_DIR/core.log
bold() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

cleanup() {
  "$BIN/carapace" stop >/dev/null 2>&1 || true
  wait "${CORE_PID:-}" 2>/dev/null || true
  rm -rf "$HOME_DIR"
}
trap cleanup EXIT

bold "a plugin: carapace plugin create, build, install"
WORK=$HOME_DIR/src
mkdir -p "$WORK"
"$BIN/carapace" plugin create notes --dir "$WORK" --sdk "$PWD" | sed 's/^/  /'
"$BIN/carapace" plugin build "$WORK/notes" | tail -n 2 | sed 's/^/  /'
"$BIN/carapace" plugin install "$WORK/notes" | sed 's/^/  /'

bold "starting the core in $HOME_DIR"
"$BIN/carapace" serve >"$LOG" 2>&1 &
CORE_PID=$!
for _ in $(seq 1 100); do
  "$BIN/carapace" status >/dev/null 2>&1 && break
  sleep 0.1
done
"$BIN/carapace" status

# The approver plays the user: it approves the first confirmation it sees.
(
  for _ in $(seq 1 200); do
    id=$("$BIN/carapace" confirm list --json 2>/dev/null | sed -n 's/.*"id": *"\(c-[0-9a-f]*\)".*/\1/p' | head -1)
    if [ -n "$id" ]; then
      echo "[user] approving $id"
      "$BIN/carapace" confirm approve "$id"
      exit 0
    fi
    sleep 0.1
  done
) &
APPROVER=$!

bold "agent session (runtime none)"
"$BIN/carapace" run --group main --runtime none -- bash -c '
  set -u
  export PATH='"$BIN"':$PATH
  echo "[agent] ipc tool.invoke.list_tools"
  ipc tool.invoke.list_tools | head -c 300; echo " …"
  echo "[agent] ipc tool.invoke.echo {\"message\":\"hello from the agent\",\"uppercase\":true}"
  ipc tool.invoke.echo "{\"message\":\"hello from the agent\",\"uppercase\":true}"
  echo "[agent] ipc tool.invoke.notes_example {\"message\":\"from the agent\"}   (the plugin, in its own process)"
  ipc tool.invoke.notes_example "{\"message\":\"from the agent\"}"
  echo "[agent] ipc tool.invoke.echo {\"message\":\"hi\",\"priority\":\"high\"}   (not in the schema)"
  ipc tool.invoke.echo "{\"message\":\"hi\",\"priority\":\"high\"}" || echo "[agent] -> exit $? (validation error above, on stderr)"
  echo "[agent] ipc tool.invoke.echo_confirm {\"message\":\"send it\"}   (high risk: waits for the user)"
  ipc tool.invoke.echo_confirm "{\"message\":\"send it\"}"
'
wait "$APPROVER" || true

bold "plugins"
"$BIN/carapace" plugin list

bold "audit trail ($HOME_DIR/logs/audit.jsonl)"
"$BIN/carapace" audit
