//go:build linux

package tray

import (
	"fyne.io/systray"
	"github.com/godbus/dbus/v5"
)

// runLoop starts fyne systray's StatusNotifierItem, serves the menu in
// place of fyne's on its connection (dbusmenu_linux.go), and waits for
// Quit. fyne's loop is run as an external one: its start returns once
// fyne has connected and exported its objects, which the menu then
// replaces.
//
// onReady runs only after start: fyne runs its own onReady on a goroutine
// that races with the export, and a title, tooltip or icon set between
// its reading them for the export and its keeping the exported
// properties is lost (fyne.io/systray v1.12.2: the item then shows no
// icon until the next change).
func runLoop(t *Tray) {
	start, _ := systray.RunWithExternalLoop(nil, nil)
	start()
	// fyne systray uses the process's shared session bus connection.
	conn, err := dbus.SessionBus()
	if err != nil {
		t.log.Error("tray: no session bus: the tray icon and its menu cannot be shown", "err", err)
		t.onReady() // trees are still applied, to nothing
		<-t.quit
		return
	}
	if err := t.view.(*dbusMenu).attach(conn); err != nil {
		t.log.Error("tray: the menu cannot be shown", "err", err)
	}
	t.onReady()
	<-t.quit
	t.log.Info("tray: the menu bar loop ended")
	// What fyne's end would do, without its calling of a nil connection
	// when it never connected: leave the bus (the icon goes) and end
	// its goroutines.
	_ = conn.Close()
	systray.Quit()
}

// quitLoop does nothing: Quit closes t.quit, which ends runLoop.
func quitLoop() {}

// newView serves the menu over D-Bus itself.
func newView(t *Tray) view { return newDBusMenu(t.log, t.deliver) }
