package plugindir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/install"
	"github.com/carapace-dev/carapace/core/manifest"
)

// The testdata home holds one plugin folder in each state the inventory
// tells apart; testdata/bundled holds the folders of two bundled plugins
// and testdata/src the source of the linked one. Handler pins in
// testdata/home/pins.json are the real SHA-256 of the handlers, except
// tampered's.
const (
	shippedSHA  = "d1c07027c9b37fd66e716da6e38771cae3be735f21aa6a0574cffb5497696bda" // testdata/bundled/shipped/handler
	telegramSHA = "54065c5a25e6dc3e8805eeda6665a0832af388004824fe49e1f567418716e6b2" // testdata/bundled/telegram/handler
)

const builtinManifest = `{
  "description": "A plugin compiled into the core",
  "version": "1.0.0",
  "app_compat": ">=0.1.0",
  "author": { "name": "Test" },
  "provides": { "channels": [], "tools": [] },
  "subscribes": []
}`

// testOptions takes stock of the testdata home, with two built-ins (one
// that a user folder replaces) and three bundled plugins (one that a user
// folder replaces, one shipped as it should be, one missing from its
// folder and unpinned).
func testOptions(t *testing.T) Options {
	t.Helper()
	td, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	return Options{
		Home:     home.Dir(filepath.Join(td, "home")),
		Version:  "0.9.0",
		Builtins: []Builtin{{Name: "echo", Manifest: []byte(builtinManifest)}, {Name: "memory", Manifest: []byte(builtinManifest)}},
		Bundled: []Bundled{
			{Name: "shipped", Dir: filepath.Join(td, "bundled", "shipped"), SHA256: shippedSHA},
			{Name: "telegram", Dir: filepath.Join(td, "bundled", "telegram"), SHA256: telegramSHA},
			{Name: "missing", Dir: filepath.Join(td, "bundled", "missing")},
		},
	}
}

// want is what the inventory should say of one plugin. Empty strings
// expect no error; others a substring of the error.
type want struct {
	source                 Source
	linked                 bool
	target                 string
	hides                  Source
	problem, manifest, pin string
	unpinned, stale        bool
	verify                 string // VerifyPin
	noDir                  bool
}

func TestScan(t *testing.T) {
	o := testOptions(t)
	inv, err := Scan(o)
	if err != nil {
		t.Fatal(err)
	}
	if inv.PinsErr != nil {
		t.Fatalf("PinsErr = %v", inv.PinsErr)
	}
	cases := map[string]want{
		"good":     {source: SourceUser},
		"linked":   {source: SourceUser, linked: true, target: "../../src/linked"},
		"memory":   {source: SourceBuiltin, noDir: true},
		"echo":     {source: SourceUser, hides: SourceBuiltin},
		"shipped":  {source: SourceUser, hides: SourceBundled},
		"telegram": {source: SourceBundled},
		// Hostile or broken folders.
		"Bad_Name":    {source: SourceUser, problem: "the folder name is the plugin's identity: plugin name \"Bad_Name\"", verify: ""},
		"notafolder":  {source: SourceUser, problem: "is not a folder", unpinned: true},
		"dangling":    {source: SourceUser, linked: true, target: "../../src/nowhere", problem: "is a symbolic link to ../../src/nowhere, which does not exist", verify: "no such file"},
		"tofile":      {source: SourceUser, linked: true, target: "../../src/afile", problem: "is not a folder", unpinned: true},
		"nomanifest":  {source: SourceUser, manifest: "the plugin has no manifest.json"},
		"badmanifest": {source: SourceUser, manifest: "/description"},
		"toonew":      {source: SourceUser, manifest: "app_compat"},
		"unpinned":    {source: SourceUser, unpinned: true},
		"tampered":    {source: SourceUser, verify: "not the pinned"},
		"nohandler":   {source: SourceUser, verify: "no such file"},
		"missing":     {source: SourceBundled, problem: "shipped with Carapace is missing from", pin: "no pin in this build", verify: "no pin in this build"},
		// Pins whose folder is gone.
		"gone":      {source: SourceUser, stale: true, problem: "pinned, but its folder is gone: carapace plugin remove gone"},
		"../escape": {source: SourceUser, stale: true, problem: "is not a plugin name", noDir: true},
	}
	var names []string
	for _, p := range inv.Plugins {
		names = append(names, p.Name)
	}
	if len(names) != len(cases) {
		t.Errorf("listed %v; want the %d plugins of the table (and not .install-123)", names, len(cases))
	}
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			t.Errorf("not sorted by name: %v", names)
		}
	}
	for _, p := range inv.Plugins {
		w, ok := cases[p.Name]
		if !ok {
			t.Errorf("unexpected plugin %q: %+v", p.Name, p)
			continue
		}
		t.Run(p.Name, func(t *testing.T) { check(t, o, p, w) })
	}
}

// check compares p with w.
func check(t *testing.T, o Options, p Plugin, w want) {
	t.Helper()
	if p.Source != w.source || p.Linked != w.linked || p.LinkTarget != w.target || p.Hides != w.hides || p.Stale != w.stale {
		t.Errorf("source %q linked %v target %q hides %q stale %v; want %q %v %q %q %v",
			p.Source, p.Linked, p.LinkTarget, p.Hides, p.Stale, w.source, w.linked, w.target, w.hides, w.stale)
	}
	wantDir := ""
	switch {
	case w.noDir:
	case p.Source == SourceBundled:
		for _, b := range o.Bundled {
			if b.Name == p.Name {
				wantDir = b.Dir
			}
		}
	default:
		wantDir = filepath.Join(o.Home.PluginsDir(), p.Name)
	}
	if p.Dir != wantDir {
		t.Errorf("Dir %q, want %q", p.Dir, wantDir)
	}
	wantErr(t, "Problem", p.Problem, w.problem)
	wantErr(t, "ManifestErr", p.ManifestErr, w.manifest)
	if (p.Manifest != nil) != (p.Problem == nil && p.ManifestErr == nil) {
		t.Errorf("Manifest %v with Problem %v and ManifestErr %v", p.Manifest != nil, p.Problem, p.ManifestErr)
	}
	if w.unpinned {
		if !errors.Is(p.PinErr, ErrUnpinned) || !strings.Contains(p.PinErr.Error(), "carapace plugin remove "+p.Name) {
			t.Errorf("PinErr %v, want ErrUnpinned naming the fix", p.PinErr)
		}
	} else {
		wantErr(t, "PinErr", p.PinErr, w.pin)
	}
	if p.Source != SourceBuiltin && p.PinErr == nil && !p.Stale && p.Pin.SHA256 == "" {
		t.Errorf("pinned without a hash: %+v", p.Pin)
	}
	if w.verify == "" && (w.unpinned || w.problem != "" && !w.stale) {
		return // VerifyPin of a folder that cannot load: the error it gets is asserted elsewhere
	}
	verify := w.verify
	if w.stale {
		verify = w.problem
	}
	wantErr(t, "VerifyPin", p.VerifyPin(), verify)
	if wantFirst := firstNonNil(p.Problem, p.ManifestErr, p.PinErr); !errors.Is(p.Err(), wantFirst) && p.Err() != wantFirst {
		t.Errorf("Err() = %v, want %v", p.Err(), wantFirst)
	}
}

func firstNonNil(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func wantErr(t *testing.T, what string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s = %v, want none", what, err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("%s = %v, want one containing %q", what, err, want)
	}
}

// TestFind: Find judges one plugin exactly as Scan lists it, and finds
// neither a stale pin nor a name that is not a plugin name (a caller's
// name is never joined to a path unchecked).
func TestFind(t *testing.T) {
	o := testOptions(t)
	inv, err := Scan(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range inv.Plugins {
		t.Run(p.Name, func(t *testing.T) {
			got, ok := Find(o, p.Name)
			if p.Stale || manifest.CheckPluginName(p.Name) != nil {
				if ok {
					t.Fatalf("Find found a stale pin, or a name that is not a plugin name: %+v", got)
				}
				return
			}
			if !ok {
				t.Fatal("not found")
			}
			if !reflect.DeepEqual(got.Manifest, p.Manifest) {
				t.Errorf("Find's manifest %+v, Scan's %+v", got.Manifest, p.Manifest)
			}
			got.Manifest, p.Manifest = nil, nil // pointers: compared above
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", p) {
				t.Errorf("Find:\n%+v\nScan:\n%+v", got, p)
			}
		})
	}
	for _, name := range []string{"nosuch", "../home", "..", "", ".install-123", "plugins/good"} {
		if p, ok := Find(o, name); ok {
			t.Errorf("Find(%q) = %+v", name, p)
		}
	}
}

// tempHome returns a home with its plugins folder and a copy of the good
// plugin, pinned, for cases made at run time.
func tempHome(t *testing.T) Options {
	t.Helper()
	h := home.Dir(t.TempDir())
	good := filepath.Join(h.PluginsDir(), "good")
	src := filepath.Join("testdata", "home", "plugins", "good")
	for _, f := range []string{"manifest.json", "handler", "skills/good.md"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(good, f)), 0o755))
		must(t, os.WriteFile(filepath.Join(good, f), b, 0o755))
	}
	sum, err := install.HashFile(filepath.Join(good, "handler"))
	must(t, err)
	must(t, os.WriteFile(h.Pins(), fmt.Appendf(nil, `{"plugins":{"good":{"name":"good","sha256":%q}}}`, sum), 0o600))
	return Options{Home: h, Version: "0.9.0"}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestScanHostile covers what a repository cannot hold: link loops, a FIFO
// for a manifest, a control character in a name, a plugins folder that
// is a file, and pins.json unreadable.
func TestScanHostile(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, h home.Dir)
		check func(t *testing.T, inv Inventory, err error)
	}{
		{"no plugins folder", func(t *testing.T, h home.Dir) { must(t, os.RemoveAll(h.PluginsDir())); must(t, os.Remove(h.Pins())) },
			func(t *testing.T, inv Inventory, err error) {
				if err != nil || len(inv.Plugins) != 0 || inv.PinsErr != nil {
					t.Fatalf("%+v, %v; want nothing, no error", inv, err)
				}
			}},
		{"plugins folder is a file", func(t *testing.T, h home.Dir) {
			must(t, os.RemoveAll(h.PluginsDir()))
			must(t, os.WriteFile(h.PluginsDir(), nil, 0o600))
		}, func(t *testing.T, inv Inventory, err error) {
			if err == nil || !strings.Contains(err.Error(), "read the plugins folder") {
				t.Fatalf("err = %v", err)
			}
		}},
		{"link loop", func(t *testing.T, h home.Dir) { must(t, os.Symlink("loop", filepath.Join(h.PluginsDir(), "loop"))) },
			func(t *testing.T, inv Inventory, err error) {
				p := named(t, inv, err, "loop")
				if !p.Linked || p.Problem == nil || !errors.Is(p.Problem, syscall.ELOOP) {
					t.Fatalf("%+v; want a linked plugin with an ELOOP problem", p)
				}
			}},
		{"manifest is a FIFO", func(t *testing.T, h home.Dir) {
			m := filepath.Join(h.PluginsDir(), "good", "manifest.json")
			must(t, os.Remove(m))
			must(t, syscall.Mkfifo(m, 0o600))
		}, func(t *testing.T, inv Inventory, err error) {
			p := named(t, inv, err, "good")
			if p.ManifestErr == nil || !strings.Contains(p.ManifestErr.Error(), "not a regular file") {
				t.Fatalf("ManifestErr = %v", p.ManifestErr)
			}
		}},
		{"control character in a name", func(t *testing.T, h home.Dir) {
			must(t, os.Rename(filepath.Join(h.PluginsDir(), "good"), filepath.Join(h.PluginsDir(), "go\nod")))
		}, func(t *testing.T, inv Inventory, err error) {
			p := named(t, inv, err, "go\nod")
			if p.Problem == nil || p.Manifest != nil {
				t.Fatalf("%+v; want a problem and no manifest", p)
			}
		}},
		{"pins.json is a link", func(t *testing.T, h home.Dir) {
			must(t, os.Rename(h.Pins(), h.Pins()+".real"))
			must(t, os.Symlink(h.Pins()+".real", h.Pins()))
		}, func(t *testing.T, inv Inventory, err error) {
			p := named(t, inv, err, "good")
			if inv.PinsErr == nil || p.PinErr == nil || !strings.Contains(p.PinErr.Error(), "no user plugin starts") || p.Pin.SHA256 != "" {
				t.Fatalf("PinsErr %v, PinErr %v, pin %+v", inv.PinsErr, p.PinErr, p.Pin)
			}
		}},
		{"pins.json is garbage", func(t *testing.T, h home.Dir) { must(t, os.WriteFile(h.Pins(), []byte("{"), 0o600)) },
			func(t *testing.T, inv Inventory, err error) {
				if p := named(t, inv, err, "good"); inv.PinsErr == nil || p.PinErr == nil {
					t.Fatalf("PinsErr %v, PinErr %v", inv.PinsErr, p.PinErr)
				}
			}},
		{"positive control", func(*testing.T, home.Dir) {}, func(t *testing.T, inv Inventory, err error) {
			if p := named(t, inv, err, "good"); p.Err() != nil || p.VerifyPin() != nil {
				t.Fatalf("the untouched copy: Err %v, VerifyPin %v", p.Err(), p.VerifyPin())
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tempHome(t)
			tc.setup(t, o.Home)
			done := make(chan struct{})
			var inv Inventory
			var err error
			go func() {
				defer close(done)
				inv, err = Scan(o)
			}()
			select {
			case <-done:
			case <-time.After(20 * time.Second): // a hang guard, not a speed check
				t.Fatal("Scan blocked")
			}
			tc.check(t, inv, err)
		})
	}
}

// named returns plugin name of inv, which Scan must have listed.
func named(t *testing.T, inv Inventory, err error, name string) Plugin {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range inv.Plugins {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("Scan = %+v; no plugin %q", inv, name)
	return Plugin{}
}
