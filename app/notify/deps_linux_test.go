package notify

import (
	"testing"

	"github.com/carapace-dev/carapace/internal/testutil/deptest"
)

// TestDeps: the Linux backend speaks D-Bus through godbus itself, never
// through a notification library that takes any process's word for a
// click, and without the tray's library.
func TestDeps(t *testing.T) {
	deptest.Checker{
		GOOS: "linux",
		Forbidden: map[string]string{
			"github.com/esiqveland/notify": "it delivers an ActionInvoked forged by any connection on the bus (SURFACES.md §3)",
			"github.com/gen2brain/beeep":   "no actions and no check of who clicked (SURFACES.md §3)",
			"fyne.io/systray/...":          "the tray's library has global state and a data race that -race reports: it must stay out of notify's tests",
		},
		Want: []string{"github.com/godbus/dbus/v5"},
	}.Check(t)
}
