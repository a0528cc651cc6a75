package calendar

import (
	"testing"

	"github.com/carapace-dev/carapace/internal/testutil/deptest"
)

// TestDeps: the calendar handler is a plugin in its own process, facing
// the network. Of the core it links the plugin SDK only (and the protocol
// under it), on Linux and on the Mac.
func TestDeps(t *testing.T) {
	const mod = "github.com/carapace-dev/carapace/"
	const why = "a plugin reaches the core through the SDK"
	for _, target := range [][2]string{{"", ""}, {"darwin", "arm64"}} {
		deptest.Checker{
			Package: "./handler",
			GOOS:    target[0], GOARCH: target[1],
			Forbidden: map[string]string{mod + "core/...": why},
			Except:    []string{mod + "core/plugin", mod + "core/internal/pluginproto", mod + "core/api"},
			Want:      []string{mod + "core/plugin", "github.com/emersion/go-webdav/caldav"},
		}.Check(t)
	}
}
