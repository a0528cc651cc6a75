#!/usr/bin/env bash
# make demo: the whole thing with Docker. A plugin created, built and
# installed with the CLI; the offline agent test image built (FROM scratch,
# no registry); a core in a temporary home that runs agents in containers;
# one session of the scripted test agent that lists the tools, echoes,
# stores and searches a memory, and makes a high-risk call the "user"
# approves with `carapace confirm` while `carapace watch` shows it all; a
# second session that starts with the memory brief in its CLAUDE.md; when
# Debian's radicale is installed, a reminder created and listed through the
# calendar plugin against a local Radicale (and doctor --online logging
# in); then the plugins, the audit trail, and a clean stop.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$PWD/bin
HOME_DIR=$(mktemp -d /tmp/carapace-demo.XXXXXX)
export CARAPACE_HOME=$HOME_DIR
LOG=$HOME_DIR/core.log
IMAGE=carapace-agent-test:dev
bold() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
say() { printf '   %s\n' "$*"; }

cleanup() {
  if [ -n "${APP:-}" ]; then kill "$APP" 2>/dev/null || true; fi
  "$BIN/carapace" stop >/dev/null 2>&1 || true
  wait "${CORE_PID:-}" 2>/dev/null || true
  if [ -n "${RADICALE:-}" ]; then kill "$RADICALE" 2>/dev/null || true; wait "$RADICALE" 2>/dev/null || true; fi
  rm -rf "$HOME_DIR"
}
trap cleanup EXIT

bold "what this needs: a running Docker engine and a static busybox"
if ! docker version >/dev/null 2>&1; then
  echo "make demo runs the agent in Docker, and no Docker engine answers (is dockerd running?)" >&2
  exit 1
fi
if [ ! -x /bin/busybox ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing Debian's busybox-static (the test image is FROM scratch + a static busybox)"
    apt-get install -y -qq busybox-static >/dev/null
  else
    echo "the test image needs a static busybox at /bin/busybox: apt-get install busybox-static" >&2
    exit 1
  fi
fi
say "Docker $(docker version --format '{{.Server.Version}}'), /bin/busybox present"

bold "the agent test image: FROM scratch, static busybox, bin/ipc, a scripted agent (no registry)"
go run ./cmd/build-image -tag "$IMAGE" | sed 's/^/   /'

bold "a plugin: carapace plugin create, build, install"
WORK=$HOME_DIR/src
mkdir -p "$WORK"
"$BIN/carapace" plugin create notes --dir "$WORK" --sdk "$PWD" | sed 's/^/   /'
"$BIN/carapace" plugin build "$WORK/notes" | tail -n 2 | sed 's/^/   /'
"$BIN/carapace" plugin install "$WORK/notes" | sed 's/^/   /'

bold "starting the core in $HOME_DIR (agents run in Docker: [runtime] engine = \"docker\")"
printf '[runtime]\nengine = "docker"\nimage = "%s"\nmemory_mb = 256\n' "$IMAGE" >"$HOME_DIR/config.toml"

# A local Radicale for the calendar plugin, when it is installed: its own
# users and storage in the demo's home, on the loopback (plain http is
# allowed there only), a calendar and a to-do list made with MKCALENDAR.
CALENDAR=
if command -v radicale >/dev/null && command -v curl >/dev/null; then
  bold "a local Radicale (CalDAV) for the calendar plugin"
  RAD=$HOME_DIR/radicale
  mkdir -p "$RAD/storage"
  printf 'demo:demo calendar password\n' >"$RAD/users"
  for _ in 1 2 3 4 5; do
    RPORT=$((20000 + RANDOM % 30000))
    printf '[server]\nhosts = 127.0.0.1:%s\n[auth]\ntype = htpasswd\nhtpasswd_filename = %s\nhtpasswd_encryption = plain\ndelay = 0\n[rights]\ntype = owner_only\n[storage]\nfilesystem_folder = %s\n[web]\ntype = none\n[logging]\nmask_passwords = True\n' \
      "$RPORT" "$RAD/users" "$RAD/storage" >"$RAD/config"
    HOME=$RAD radicale --config "$RAD/config" >"$RAD/log" 2>&1 &
    RADICALE=$!
    for _ in $(seq 1 100); do
      curl -s -o /dev/null "http://127.0.0.1:$RPORT/" && break
      kill -0 "$RADICALE" 2>/dev/null || break
      sleep 0.1
    done
    if curl -s -o /dev/null "http://127.0.0.1:$RPORT/"; then break; fi
    wait "$RADICALE" 2>/dev/null || true
    RADICALE=
  done
  if [ -n "$RADICALE" ]; then
    for c in personal:VEVENT tasks:VTODO; do
      curl -s -o /dev/null -w "   MKCALENDAR /demo/${c%%:*}/ HTTP %{http_code}\n" -u 'demo:demo calendar password' -X MKCALENDAR \
        -H 'Content-Type: application/xml' "http://127.0.0.1:$RPORT/demo/${c%%:*}/" --data-binary \
        "<?xml version=\"1.0\"?><C:mkcalendar xmlns:D=\"DAV:\" xmlns:C=\"urn:ietf:params:xml:ns:caldav\"><D:set><D:prop><D:displayname>${c%%:*}</D:displayname><C:supported-calendar-component-set><C:comp name=\"${c##*:}\"/></C:supported-calendar-component-set></D:prop></D:set></C:mkcalendar>"
    done
    # The machine's IANA zone (the plugin's default when it can tell).
    ZONE=${TZ:-$(readlink /etc/localtime 2>/dev/null | sed -n 's|.*zoneinfo/||p')}
    ZONE=${ZONE:-UTC}
    say "the password into the credential store, as a user would: carapace auth set --plugin calendar --key caldav_password"
    printf 'demo calendar password' | "$BIN/carapace" auth set --plugin calendar --key caldav_password | sed 's/^/   /'
    printf '[plugins.calendar]\n[plugins.calendar.config]\ncaldav_url = "http://127.0.0.1:%s/"\nusername = "demo"\ndefault_calendar = "personal"\nreminders_list = "tasks"\ntime_zone = "%s"\n' "$RPORT" "$ZONE" >>"$HOME_DIR/config.toml"
    CALENDAR=1
    say "Radicale $(radicale --version 2>/dev/null) on 127.0.0.1:$RPORT; [plugins.calendar] enabled in config.toml"
  else
    say "radicale did not start (its log: $RAD/log): the calendar part is left out"
  fi
else
  bold "no radicale here (apt-get install radicale): the calendar part of the demo is left out"
fi
"$BIN/carapace" serve >"$LOG" 2>&1 &
CORE_PID=$!
for _ in $(seq 1 100); do
  "$BIN/carapace" status >/dev/null 2>&1 && break
  sleep 0.1
done
"$BIN/carapace" status | sed 's/^/   /'

# The menu-bar app, when this terminal has a desktop session bus: it finds
# this core (and leaves it running when it quits) and shows the approval
# in its menu and, if the desktop has a notification service, as a
# notification with Approve and Deny.
APP=
if [ -n "${DBUS_SESSION_BUS_ADDRESS:-}" ] && [ -x "$BIN/carapace-app" ]; then
  bold "the menu-bar app (a session bus is present): look for Carapace in the tray"
  "$BIN/carapace-app" --home "$HOME_DIR" >"$HOME_DIR/app.out" 2>&1 &
  APP=$!
fi

# The watch stream, as the menu-bar app and the phone will see it: every
# session, confirmation and decision as it happens, nothing polled.
"$BIN/carapace" watch 2>/dev/null > >(sed -u 's/^/   [watch] /') &
WATCHER=$!

# The approver plays the user: it approves the first confirmation it sees,
# by a prefix of its id.
(
  for _ in $(seq 1 300); do
    id=$("$BIN/carapace" confirm list --json 2>/dev/null | sed -n 's/.*"id": *"\([0-9a-f]\{32\}\)".*/\1/p' | head -1)
    if [ -n "$id" ]; then
      echo "   [user] approving with: carapace confirm approve --yes ${id:0:8}"
      "$BIN/carapace" confirm approve --yes "${id:0:8}" | sed 's/^/   [user] /'
      exit 0
    fi
    sleep 0.1
  done
) &
APPROVER=$!

bold "an agent session in a container: the scripted agent makes the calls of its prompt"
say "each line of the prompt is one ipc call; the container has no network, a read-only root,"
say "no capabilities, uid 1000, and only its session's socket, workspace, skills, CLAUDE.md"
say "and settings.json mounted"
"$BIN/carapace" run --group main --runtime docker --prompt '
tool.invoke.list_tools {}
tool.invoke.echo {"message":"hello from inside the container","uppercase":true}
tool.invoke.notes_example {"message":"from the container"}
tool.invoke.memory_store {"type":"preference","content":"Prefers short answers, no summaries","tags":["style"]}
tool.invoke.memory_search {"query":"short answers"}
tool.invoke.echo_confirm {"message":"send it"}
' 2>&1 | sed -u -e 's/^/   /' -e 's/^\(   {"tools":.\{200\}\).*/\1 …/'
wait "$APPROVER" || true
sleep 0.5 # the last watch lines
kill "$WATCHER" 2>/dev/null || true
wait "$WATCHER" 2>/dev/null || true

bold "a second session starts with the memory brief in its CLAUDE.md (mounted read-only)"
# shellcheck disable=SC2016 # the agent's shell expands it, inside the container
"$BIN/carapace" run --group main --runtime docker -- --exec sh -c \
  'sed -n "/^## Memory Context/,\$p" ~/.claude/CLAUDE.md; { echo x >> ~/.claude/CLAUDE.md; } 2>/dev/null || echo "(and the agent cannot change it: read-only)"' 2>&1 | sed -u 's/^/   /'

if [ -n "$CALENDAR" ]; then
  bold "the calendar plugin: doctor --online logs in, then an agent creates a reminder and lists it"
  "$BIN/carapace" doctor --online 2>/dev/null | sed -n '/^[a-z]* *plugin calendar/{p;n;/fix:/p}' | sed 's/^/   /' || true
  due=$(date -d tomorrow +%Y-%m-%dT09:30)
  "$BIN/carapace" run --group main --runtime docker --prompt "
tool.invoke.reminder_create {\"title\":\"Water the plants\",\"due\":\"$due\",\"priority\":\"high\"}
tool.invoke.reminder_list {}
" 2>&1 | sed -u 's/^/   /'
  say "on the server, read apart from the plugin: $(grep -l 'SUMMARY:Water the plants' "$RAD"/storage/collection-root/demo/tasks/*.ics 2>/dev/null | wc -l) to-do in /demo/tasks/, with $(cat "$RAD"/storage/collection-root/demo/tasks/*.ics 2>/dev/null | grep -c 'BEGIN:VALARM') alarm (VALARM)"
fi

bold "what the agent can reach from inside: nothing but its socket"
"$BIN/carapace" run --group main --runtime docker -- --exec sh -c \
  'id; grep -E "^(CapEff|NoNewPrivs)" /proc/self/status; ls /sys/class/net; nc -w 2 1.1.1.1 443 </dev/null 2>&1 | head -1; nslookup example.com 2>&1 | tail -1; touch /etc/x 2>&1 | head -1' 2>&1 | sed -u 's/^/   /'

bold "plugins"
"$BIN/carapace" plugin list | sed 's/^/   /'

bold "audit trail ($HOME_DIR/logs/audit.jsonl)"
"$BIN/carapace" audit

if [ -n "$APP" ]; then
  kill "$APP" 2>/dev/null || true
  wait "$APP" 2>/dev/null || true
  APP=
  say "the menu-bar app quit; the core it found keeps running until carapace stop"
fi

bold "stopping the core (its containers go with it)"
"$BIN/carapace" stop
wait "$CORE_PID" 2>/dev/null || true
CORE_PID=
left=$(docker ps -a --filter label=carapace.version --format '{{.Names}}' | wc -l)
say "containers left by this core: $left"
