package mail

import (
	"testing"

	"github.com/carapace-dev/carapace/internal/testutil/deptest"
)

// TestDeps: the mail handler is a plugin in its own process, facing the
// network and holding the accounts' passwords. Of the core it links the
// plugin SDK only (and the protocol under it; core/api comes with it).
func TestDeps(t *testing.T) {
	const mod = "github.com/carapace-dev/carapace/"
	const why = "a plugin reaches the core through the SDK"
	for _, target := range [][2]string{{"", ""}, {"darwin", "arm64"}} {
		deptest.Checker{
			Package: "./handler",
			GOOS:    target[0], GOARCH: target[1],
			Forbidden: map[string]string{mod + "core/...": why},
			Except:    []string{mod + "core/plugin", mod + "core/internal/pluginproto", mod + "core/api"},
			Want:      []string{mod + "core/plugin", mod + "internal/sqlitedb"},
		}.Check(t)
	}
}
