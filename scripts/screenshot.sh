#!/usr/bin/env bash
# make screenshot: a picture of the menu-bar app on a real Linux desktop
# panel, for the README and docs/APP.md. It runs everything in private:
# an Xvfb display, a D-Bus session (dbus-run-session), xfce4-panel with a
# status tray (it hosts StatusNotifierItems, as GNOME's and KDE's do), a
# core in a temporary home, the app, and one high-risk call waiting for
# approval; then it opens the tray menu and the approval's submenu with
# xdotool and saves the screen to docs/app-menu.png.
#
# Needs (Debian): xvfb xfce4-panel xdotool x11-apps x11-utils x11-xserver-utils
# imagemagick dbus-daemon.
# Not part of make test.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-docs/app-menu.png}
missing=()
for c in Xvfb xfce4-panel xdotool xwd convert dbus-run-session; do
  command -v "$c" >/dev/null || missing+=("$c")
done
if ((${#missing[@]})); then
  echo "screenshot: missing ${missing[*]}: apt-get install xvfb xfce4-panel xdotool x11-apps imagemagick dbus-daemon" >&2
  exit 1
fi
if ! [ -x bin/carapace-app ] || ! [ -x bin/carapace ] || ! [ -x bin/ipc ]; then
  echo "screenshot: run make build first" >&2
  exit 1
fi

WORK=$(mktemp -d /tmp/carapace-shot.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/home" "$WORK/cfg/xfce4/xfconf/xfce-perchannel-xml"
# One panel along the top: an expanding gap, the status tray, a clock.
cat >"$WORK/cfg/xfce4/xfconf/xfce-perchannel-xml/xfce4-panel.xml" <<'XML'
<?xml version="1.0" encoding="UTF-8"?>
<channel name="xfce4-panel" version="1.0">
  <property name="configver" type="int" value="2"/>
  <property name="panels" type="array">
    <value type="int" value="1"/>
    <property name="panel-1" type="empty">
      <property name="position" type="string" value="p=6;x=0;y=0"/>
      <property name="length" type="uint" value="100"/>
      <property name="position-locked" type="bool" value="true"/>
      <property name="icon-size" type="uint" value="22"/>
      <property name="size" type="uint" value="30"/>
      <property name="plugin-ids" type="array">
        <value type="int" value="1"/>
        <value type="int" value="2"/>
        <value type="int" value="3"/>
      </property>
    </property>
  </property>
  <property name="plugins" type="empty">
    <property name="plugin-1" type="string" value="separator">
      <property name="expand" type="bool" value="true"/>
      <property name="style" type="uint" value="0"/>
    </property>
    <property name="plugin-2" type="string" value="systray">
      <property name="square-icons" type="bool" value="true"/>
    </property>
    <property name="plugin-3" type="string" value="clock"/>
  </property>
</channel>
XML

cat >"$WORK/inside.sh" <<'INNER'
#!/usr/bin/env bash
set -euo pipefail
: "${WORK:?}" "${OUT:?}"
BIN=$PWD/bin
Xvfb :93 -screen 0 900x560x24 >"$WORK/xvfb.log" 2>&1 &
XV=$!
export DISPLAY=:93
for _ in $(seq 50); do xdpyinfo >/dev/null 2>&1 && break; sleep 0.1; done
xsetroot -solid '#2f3b4a' 2>/dev/null || true
xfce4-panel >"$WORK/panel.log" 2>&1 &
PANEL=$!
sleep 5
"$BIN/carapace-app" --home "$WORK/home" >"$WORK/app.log" 2>&1 &
APP=$!
export CARAPACE_HOME=$WORK/home
for _ in $(seq 100); do "$BIN/carapace" status >/dev/null 2>&1 && break; sleep 0.1; done
# A session and one high-risk call that waits for the user.
"$BIN/carapace" run --group main --runtime none -- "$BIN/ipc" tool.invoke.echo_confirm \
  '{"message":"Send the quarterly report to alice@example.com"}' >"$WORK/call.log" 2>&1 &
CALL=$!
for _ in $(seq 100); do "$BIN/carapace" confirm list 2>/dev/null | grep -q echo_confirm && break; sleep 0.1; done
sleep 2
# The tray icon sits left of the clock on this 900-pixel screen: open the
# menu, then "Pending approvals", then the approval's submenu.
xdotool mousemove 815 15 click 1
sleep 1.5
xdotool mousemove 600 197
sleep 1.5
xdotool mousemove 520 197 mousemove 200 197
sleep 1.5
xwd -root -silent | convert xwd:- "$OUT"
kill "$CALL" 2>/dev/null || true
kill "$APP" 2>/dev/null || true
wait "$APP" 2>/dev/null || true
"$BIN/carapace" stop >/dev/null 2>&1 || true
kill "$PANEL" "$XV" 2>/dev/null || true
INNER
chmod +x "$WORK/inside.sh"
export WORK OUT # inside.sh reads them
XDG_CONFIG_HOME=$WORK/cfg dbus-run-session -- "$WORK/inside.sh"
echo "wrote $OUT"
