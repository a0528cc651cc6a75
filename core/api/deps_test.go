package api_test

import (
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/internal/testutil/deptest"
)

const mod = "github.com/carapace-dev/carapace/"

// targets are the systems the core and its clients are built for.
var targets = [][2]string{{"", ""}, {"darwin", "arm64"}}

// TestLeaf keeps the vocabulary apart from its transport and from the
// core: no net/http, nothing that reaches it, and nothing of the core, so
// that the core's packages, its clients and a plugin can all import it.
func TestLeaf(t *testing.T) {
	const transport = "the API's types are apart from its transport (core/control carries them over HTTP)"
	for _, tg := range targets {
		deptest.Checker{
			GOOS: tg[0], GOARCH: tg[1],
			Forbidden: map[string]string{
				"net/http":              transport,
				"net":                   transport,
				mod + "core/control":    transport,
				mod + "core/plugin/...": "the plugin SDK may build on the API's types; they must not build on it",
			},
			AllowedImports: []string{"encoding/json", "errors", "fmt", "regexp", "slices", "strings", "time", "unicode",
				mod + "internal/textutil"},
		}.Check(t)
	}
}

// TestOnlyServerLinksTransport: in core/, only core/server (which serves
// the control API for the core) and core/control itself link the control
// API's transport; core/agent, core/loader and the rest speak its
// vocabulary, core/api.
func TestOnlyServerLinksTransport(t *testing.T) {
	pkgs, err := deptest.Packages(mod + "core/...")
	if err != nil {
		t.Fatal(err)
	}
	const why = "the domain speaks core/api; only core/server, which serves the control API, links its transport"
	checked := map[string]bool{}
	for _, pkg := range pkgs {
		if pkg == mod+"core/server" || pkg == mod+"core/control" || strings.HasPrefix(pkg, mod+"core/control/") {
			continue
		}
		checked[pkg] = true
		for _, tg := range targets {
			deptest.Checker{
				Package: pkg, GOOS: tg[0], GOARCH: tg[1],
				Forbidden: map[string]string{mod + "core/control/...": why},
			}.Check(t)
		}
	}
	// A guard that the listing saw the packages the rule is for.
	for _, want := range []string{mod + "core/agent", mod + "core/loader", mod + "core/api"} {
		if !checked[want] {
			t.Errorf("%s was not checked: go list %s listed %q", want, mod+"core/...", pkgs)
		}
	}
}
