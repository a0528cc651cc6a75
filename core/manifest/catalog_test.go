package manifest_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/carapace-dev/carapace/core/catalog"
	"github.com/carapace-dev/carapace/core/manifest"
)

// TestCatalogAcceptsValid: every manifest this package accepts, the
// catalogue registers (its argument schemas compile there too).
func TestCatalogAcceptsValid(t *testing.T) {
	files, _ := filepath.Glob("testdata/valid/*.json")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m, err := manifest.Parse(f, data, manifest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		tools, err := catalog.FromManifest("p", m, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(tools) != len(m.Provides.Tools) {
			t.Fatalf("%s: %d tools registered of %d", f, len(tools), len(m.Provides.Tools))
		}
	}
}
