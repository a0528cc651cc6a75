package cli_test

import (
	"testing"

	"github.com/carapace-dev/carapace/internal/testutil/deptest"
)

// TestDeps keeps the command line a client: it reaches the core through
// the control API, so it must not link the core's packages (cmd/carapace's
// main links core/server for `carapace serve`, and nothing else does). The
// command line runs on macOS and Linux, and links different files on each.
func TestDeps(t *testing.T) {
	const mod = "github.com/carapace-dev/carapace/"
	const why = "the command line reaches the core through the control API"
	for _, target := range [][2]string{{"", ""}, {"darwin", "arm64"}, {"linux", "amd64"}} {
		deptest.Checker{
			GOOS:   target[0],
			GOARCH: target[1],
			Forbidden: map[string]string{
				mod + "core/server":   why,
				mod + "core/pipeline": why,
				mod + "core/session":  why,
			},
			Want: []string{mod + "core/control"},
		}.Check(t)
	}
}
