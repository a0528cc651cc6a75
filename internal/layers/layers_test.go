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

// within is the rule of a layer that may link only the given folders of
// the module (its own among them), as import paths below mod.
func within(pattern string, allowed ...string) deptest.Checker {
	c := deptest.Checker{Package: mod + pattern}
	for _, a := range allowed {
		c.Within = append(c.Within, mod+a)
	}
	return c
}

// below is the rule of a layer under cmd/: it may link none of the given
// folders of the module, nor cmd/, and must link want (the positive
// control: the listing sees what it should).
func below(pattern, why, want string, forbidden ...string) deptest.Checker {
	c := deptest.Checker{Package: mod + pattern, Forbidden: map[string]string{mod + "cmd/...": why}, Want: []string{mod + want}}
	for _, p := range forbidden {
		c.Forbidden[mod+p] = why
	}
	return c
}

func TestLayers(t *testing.T) {
	internal := within("internal/...", "internal/...", "Resources/...", "core/home")
	internal.NoMain = true // tools are programs: they live under cmd/
	composition := deptest.Checker{
		Package:   mod + "cmd/wiring",
		Forbidden: map[string]string{mod + "cmd/carapace/...": "the composition is the mains' library, not part of one"},
		Want:      []string{mod + "core/server", mod + "plugins", mod + "core/runtime/docker", mod + "applecontainer"},
	}
	layers := []struct {
		name string
		c    deptest.Checker
	}{
		{"Resources: data", within("Resources/...", "Resources/...")},
		// core/home, the home's layout, is a leaf too (its own rule
		// below): internal/appstate keeps the app's state file in the
		// home's run folder.
		{"internal: leaf helpers", internal},
		{"core/home: the home's layout", within("core/home", "core/home")},
		{"ipc: the boundary protocol", within("ipc/...", "ipc/...", "internal/...")},
		{"keychain: the credential store", within("keychain/...", "keychain/...", "internal/...")},
		{"core: the host", below("core/...", "the core is given its engines and built-in plugins by cmd/wiring", "core/server",
			"applecontainer/...", "plugins/...", "app/...")},
		{"core/runtime/docker: the Docker and Podman engine", within("core/runtime/docker/...", "core/runtime/...", "internal/...")},
		{"applecontainer: the Apple engine", within("applecontainer/...", "applecontainer/...", "core/runtime", "internal/...")},
		{"plugins: run inside the core", below("plugins/...", "a plugin runs inside the core and knows neither its assembly nor its containers", "core/plugin",
			"app/...", "applecontainer/...", "core/server", "core/runtime/...")},
		{"app: a client of the core", below("app/...", "the menu-bar app reaches the core through core/control's client", "core/control",
			"plugins/...", "applecontainer/...", "core/server", "core/runtime/...")},
		{"cmd/wiring: the composition", composition},
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
