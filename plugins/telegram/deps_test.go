package telegram

import (
	"testing"

	"github.com/carapace-dev/carapace/internal/testutil/deptest"
)

// TestDeps: the Telegram handler is a plugin in its own process, facing
// the network. Of the core it links the plugin SDK (core/plugin and the
// protocol under it) and the control API's vocabulary (core/api), whose
// Confirmation the core sends it: nothing of the core's server side, and
// not the control API's transport.
func TestDeps(t *testing.T) {
	const mod = "github.com/carapace-dev/carapace/"
	const why = "a plugin reaches the core through the SDK; of the core's own packages it may share only the API's types"
	for _, target := range [][2]string{{"", ""}, {"darwin", "arm64"}} {
		deptest.Checker{
			Package: "./handler",
			GOOS:    target[0], GOARCH: target[1],
			Forbidden: map[string]string{mod + "core/...": why},
			Except:    []string{mod + "core/plugin", mod + "core/internal/pluginproto", mod + "core/api"},
			Want:      []string{mod + "core/plugin", mod + "core/api"},
		}.Check(t)
	}
}
