package main

import (
	"testing"

	"github.com/carapace-dev/carapace/internal/testutil/deptest"
)

// targets are those the app is built for. On macOS fyne systray is cgo
// (systray_darwin.go): the app is only built with cgo there, so darwin is
// listed with CGO_ENABLED=1 (go list selects the files without running
// cgo or needing a C toolchain). Linux is listed both ways: its systray is
// pure Go.
var targets = []struct{ goos, goarch, cgo string }{
	{"linux", "amd64", "1"},
	{"linux", "amd64", "0"},
	{"linux", "arm64", "0"},
	{"darwin", "arm64", "1"},
	{"darwin", "amd64", "1"},
}

const mod = "github.com/carapace-dev/carapace/"

// TestDeps keeps the menu-bar app a client of the core, and its logic
// free of the desktop library.
func TestDeps(t *testing.T) {
	t.Run("the app is a client of the core", testClient)
	t.Run("the app's logic has no GUI", testNoGUI)
	t.Run("the menu model has no transport", testModel)
}

// testClient: the app reaches the core through core/control's client and
// starts `carapace serve` as a separate program, so of the core it links
// only the control API — its transport (core/control), its vocabulary
// (core/api) — and the home's layout (core/home, to find the socket and
// the logs): never the core's server side, the plugins, the event bus or
// SQLite.
func testClient(t *testing.T) {
	const why = "the menu-bar app reaches the core only through core/control's client"
	for _, tg := range targets {
		deptest.Checker{
			GOOS: tg.goos, GOARCH: tg.goarch, CGO: tg.cgo,
			Forbidden: map[string]string{
				mod + "core/...":                                    why + ": of the core it links core/control, core/api and core/home",
				mod + "plugins/...":                                 why + " (plugins run in the core)",
				"github.com/mattn/go-sqlite3":                       why + " (the core's memory plugin has the database)",
				"github.com/go-zeromq/zmq4":                         why + " (the bus is the core's)",
				"github.com/carapace-dev/carapace/cmd/carapace/cli": "the app shares helpers with the CLI through small packages, not the CLI itself",
			},
			Except: []string{mod + "core/control", mod + "core/api", mod + "core/home"},
			Want:   []string{mod + "core/control", mod + "core/api", mod + "app", "fyne.io/systray"},
		}.Check(t)
	}
}

// testNoGUI keeps the desktop library in app/tray: the menu model, the
// glue and the core's boot are tested in process under the race
// detector, which fyne systray's global state does not survive.
func testNoGUI(t *testing.T) {
	const why = "only app/tray may link the menu-bar library: the rest is tested in process with -race"
	for _, pkg := range []string{mod + "app", mod + "app/menu", mod + "app/boot"} {
		forbidden := map[string]string{"fyne.io/systray/...": why}
		if pkg != mod+"app" {
			// The glue links app/notify, whose Linux backend talks D-Bus
			// (race-safe); the model and the boot need no desktop at all.
			forbidden["github.com/godbus/dbus/..."] = "the menu model and the core's boot need no desktop"
		}
		for _, tg := range targets {
			deptest.Checker{
				Package: pkg,
				GOOS:    tg.goos, GOARCH: tg.goarch, CGO: tg.cgo,
				Forbidden: forbidden,
				Want:      []string{mod + "core/api"},
			}.Check(t)
		}
	}
}

// testModel keeps the menu model (app/menu) to the control API's
// vocabulary: it renders core/api's values, and the glue (app) fetches
// them through core/control's client.
func testModel(t *testing.T) {
	const why = "the menu model renders core/api's values; app fetches them"
	for _, tg := range targets {
		deptest.Checker{
			Package: mod + "app/menu",
			GOOS:    tg.goos, GOARCH: tg.goarch, CGO: tg.cgo,
			Forbidden: map[string]string{"net/http": why, mod + "core/control": why},
			Want:      []string{mod + "core/api"},
		}.Check(t)
	}
}
