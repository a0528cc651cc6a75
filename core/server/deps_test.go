package server_test

import (
	"testing"

	"github.com/carapace-dev/carapace/internal/testutil/deptest"
)

// TestDependencies: the core is given its built-in plugins and container
// engines by cmd/wiring, so it builds without cgo and without the
// sqlite_fts5 tag (the memory plugin's SQLite needs both), for Linux and
// macOS.
func TestDependencies(t *testing.T) {
	const wiring = "chosen by cmd/wiring, not linked by the core"
	for _, target := range [][2]string{{"", ""}, {"darwin", "arm64"}} {
		deptest.Checker{
			GOOS:   target[0],
			GOARCH: target[1],
			CGO:    "0",
			Tags:   []string{},
			Forbidden: map[string]string{
				"github.com/carapace-dev/carapace/plugins/...":         wiring,
				"github.com/carapace-dev/carapace/applecontainer":      wiring,
				"github.com/carapace-dev/carapace/core/runtime/docker": wiring,
				"github.com/mattn/go-sqlite3":                          "the memory plugin's; the core must build without cgo",
			},
			NoCgo: true,
			Want:  []string{"github.com/carapace-dev/carapace/core/agent", "github.com/carapace-dev/carapace/core/loader"},
		}.Check(t)
	}
}
