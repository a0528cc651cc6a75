package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/carapace-dev/carapace/core/loader"
)

// The first-party plugins as make build bundles them, for the tests that
// run their real handler processes: one owner of building them.

type onceResult[T any] struct {
	once sync.Once
	val  T
	err  error
}

var (
	bundlesMu sync.Mutex
	bundles   = map[string]*onceResult[loader.Bundled]{}
	serves    = map[string]*onceResult[string]{}
)

// bundleDir is where the tests' bundled plugins and pinned cores live.
func bundleDir() string { return filepath.Join(filepath.Dir(bins.ipc), "bundle") }

// pluginBundle builds plugins/NAME as scripts/bundle-plugins.sh does —
// handler, manifest.json and skills/ in one folder, bundle/plugins/NAME —
// once per test binary, and returns it with its pin.
func pluginBundle(t testing.TB, name string) loader.Bundled {
	t.Helper()
	bundlesMu.Lock()
	r, ok := bundles[name]
	if !ok {
		r = &onceResult[loader.Bundled]{}
		bundles[name] = r
	}
	bundlesMu.Unlock()
	r.once.Do(func() {
		pdir := filepath.Join(bundleDir(), "plugins", name)
		if r.err = os.MkdirAll(pdir, 0o755); r.err != nil {
			return
		}
		src := filepath.Join("..", "..", "plugins", name)
		cmd := exec.Command("go", "build", "-tags", "sqlite_fts5", "-o", filepath.Join(pdir, "handler"), "./"+filepath.Join(src, "handler"))
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			r.err = fmt.Errorf("build the %s handler: %v\n%s", name, err, out)
			return
		}
		if out, err := exec.Command("cp", "-R", filepath.Join(src, "manifest.json"), filepath.Join(src, "skills"), pdir).CombinedOutput(); err != nil {
			r.err = fmt.Errorf("copy the %s manifest and skills: %v\n%s", name, err, out)
			return
		}
		raw, err := os.ReadFile(filepath.Join(pdir, "handler"))
		if err != nil {
			r.err = err
			return
		}
		sum := sha256.Sum256(raw)
		r.val = loader.Bundled{Name: name, Dir: pdir, SHA256: hex.EncodeToString(sum[:])}
	})
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.val
}

// pinnedServe returns a carapace binary, beside bundle/plugins/, that
// make build would link with the pins of the named bundled plugins.
func pinnedServe(t testing.TB, names ...string) string {
	t.Helper()
	sort.Strings(names)
	key := strings.Join(names, "+")
	var pins []string
	for _, n := range names {
		pins = append(pins, n+"="+pluginBundle(t, n).SHA256)
	}
	bundlesMu.Lock()
	r, ok := serves[key]
	if !ok {
		r = &onceResult[string]{}
		serves[key] = r
	}
	bundlesMu.Unlock()
	r.once.Do(func() {
		r.val = filepath.Join(bundleDir(), "carapace-"+key)
		cmd := exec.Command("go", "build", "-tags", "sqlite_fts5", "-ldflags",
			"-X github.com/carapace-dev/carapace/cmd/wiring.bundledPins="+strings.Join(pins, ","), "-o", r.val, "../../cmd/carapace")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			r.err = fmt.Errorf("build carapace with the pins %s: %v\n%s", strings.Join(pins, ","), err, out)
		}
	})
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.val
}
