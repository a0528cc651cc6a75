package desktoptest_test

import (
	"testing"

	"github.com/carapace-dev/carapace/internal/testutil/deptest"
)

// TestDeps: the host links no tray library. Every test binary that uses
// it runs under -race, and fyne.io/systray has global state and a data
// race (its refresh against GetLayout) that -race reports: tray programs
// run as subprocesses (Build, StartProcess), never inside a test.
func TestDeps(t *testing.T) {
	deptest.Checker{
		GOOS: "linux",
		Forbidden: map[string]string{
			"fyne.io/systray/...": "run tray programs as subprocesses: fyne.io/systray races under -race",
		},
		Want: []string{"github.com/godbus/dbus/v5"},
	}.Check(t)
}
