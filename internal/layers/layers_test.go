// Package layers_test pins the module's layers: what each folder may link,
// as dependency tests (internal/testutil/deptest), for Linux and macOS.
// From the bottom up:
//
//	Resources/        data (embedded files); links nothing of the module
//	internal/         leaf helpers; link Resources/ and core/home only
//	ipc/, keychain/   the boundary protocol and the credential store; leaves
//	core/             the host; given its engines and plugins, links none
//	applecontainer/   the Apple engine, beside core/runtime/docker: links
//	                  core/runtime only
//	plugins/          the built-in plugins: run inside the core
//	app/              the menu-bar app: a client of the core
//	cmd/              the mains, their libraries (cmd/carapace/cli, and
//	                  cmd/wiring, the composition: the one place engines
//	                  and built-in plugins meet the core), and the tools
//
// Nothing links upwards: a layer's rule forbids the layers above it, and
// cmd/ is above all. Test harnesses live beside what they exercise (xtest
// packages) and are linked by tests only; cmd/carapace's TestDeps keeps
// them, and the offline test image, out of the shipping binary.
package layers_test

import (
	"testing"

	"github.com/carapace-dev/carapace/internal/testutil/deptest"
)

const mod = "github.com/carapace-dev/carapace/"

// targets are the platforms whose files differ: the host (Linux in CI)
// and macOS.
var targets = [][2]string{{"", ""}, {"darwin", "arm64"}}

// above is the rule of every layer below cmd/: it may link none of these.
func above(why string, more ...string) map[string]string {
	m := map[string]string{mod + "cmd/...": why}
	for _, p := range more {
		m[mod+p] = why
	}
	return m
}

func TestLayers(t *testing.T) {
	layers := []struct {
		name string
		c    deptest.Checker
	}{
		{"Resources: data", deptest.Checker{
			Package: mod + "Resources/...",
			Within:  []string{mod + "Resources/..."},
		}},
		{"internal: leaf helpers", deptest.Checker{
			// core/home, the home's layout, is a leaf too (its own rule
			// below): internal/appstate keeps the app's state file in the
			// home's run folder.
			Package: mod + "internal/...",
			Within:  []string{mod + "internal/...", mod + "Resources/...", mod + "core/home"},
			NoMain:  true, // tools are programs: they live under cmd/
		}},
		{"core/home: the home's layout", deptest.Checker{
			Package: mod + "core/home",
			Within:  []string{mod + "core/home"},
		}},
		{"ipc: the boundary protocol", deptest.Checker{
			Package: mod + "ipc/...",
			Within:  []string{mod + "ipc/...", mod + "internal/..."},
		}},
		{"keychain: the credential store", deptest.Checker{
			Package: mod + "keychain/...",
			Within:  []string{mod + "keychain/...", mod + "internal/..."},
		}},
		{"core: the host", deptest.Checker{
			Package:   mod + "core/...",
			Forbidden: above("the core is given its engines and built-in plugins by cmd/wiring", "applecontainer/...", "plugins/...", "app/..."),
			Want:      []string{mod + "core/server", mod + "core/runtime/docker"},
		}},
		{"core/runtime/docker: the Docker and Podman engine", deptest.Checker{
			Package: mod + "core/runtime/docker/...",
			Within:  []string{mod + "core/runtime/...", mod + "internal/..."},
		}},
		{"applecontainer: the Apple engine", deptest.Checker{
			Package: mod + "applecontainer/...",
			Within:  []string{mod + "applecontainer/...", mod + "core/runtime", mod + "internal/..."},
		}},
		{"plugins: run inside the core", deptest.Checker{
			Package:   mod + "plugins/...",
			Forbidden: above("a plugin runs inside the core and knows neither its assembly nor its containers", "app/...", "applecontainer/...", "core/server", "core/runtime/..."),
			Want:      []string{mod + "core/plugin"},
		}},
		{"app: a client of the core", deptest.Checker{
			Package:   mod + "app/...",
			Forbidden: above("the menu-bar app reaches the core through core/control's client", "plugins/...", "applecontainer/...", "core/server", "core/runtime/..."),
			Want:      []string{mod + "core/control"},
		}},
		{"cmd/wiring: the composition", deptest.Checker{
			Package:   mod + "cmd/wiring",
			Forbidden: map[string]string{mod + "cmd/carapace/...": "the composition is the mains' library, not part of one"},
			Want:      []string{mod + "core/server", mod + "plugins", mod + "core/runtime/docker", mod + "applecontainer"},
		}},
	}
	for _, l := range layers {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			for _, tg := range targets {
				c := l.c
				c.GOOS, c.GOARCH = tg[0], tg[1]
				c.Check(t)
			}
		})
	}
}
