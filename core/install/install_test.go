package install_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/install"
)

const validManifest = `{
  "description": "A plugin for the install tests",
  "version": "1.0.0",
  "app_compat": ">=0.1.0",
  "author": { "name": "Test" },
  "provides": {
    "channels": [],
    "tools": [
      {
        "name": "weather_now",
        "description": "Say what the weather is",
        "risk_level": "low",
        "arguments_schema": {
          "type": "object",
          "additionalProperties": false,
          "properties": { "city": { "type": "string", "maxLength": 100 } }
        }
      }
    ]
  },
  "subscribes": []
}`

const handlerScript = "#!/bin/sh\necho handler v1\n"

// source writes a valid plugin folder named name under parent and returns
// its path.
func source(t *testing.T, parent, name string) string {
	t.Helper()
	dir := filepath.Join(parent, name)
	write(t, filepath.Join(dir, "manifest.json"), validManifest, 0o644)
	write(t, filepath.Join(dir, "handler"), handlerScript, 0o755)
	write(t, filepath.Join(dir, "skills", name+".md"), "# "+name+"\n\nUse weather_now: `ipc tool.invoke.weather_now '{}'`.\n", 0o644)
	write(t, filepath.Join(dir, "skills", "notes.txt"), "not a skill\n", 0o644)
	write(t, filepath.Join(dir, "main.go"), "package main\n", 0o644)
	return dir
}

func write(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// fixture is a home, a folder of sources next to it, and a canary file
// outside the plugins folder that no test may touch.
type fixture struct {
	home   home.Dir
	src    string // a folder for plugin sources
	canary string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	root := t.TempDir()
	f := &fixture{home: home.Dir(filepath.Join(root, "home")), src: filepath.Join(root, "src"), canary: filepath.Join(root, "canary", "precious.txt")}
	write(t, f.canary, "keep me\n", 0o600)
	write(t, f.home.Path("x"), "home file\n", 0o600)
	write(t, f.home.Path("data", "weather", "db"), "data\n", 0o600)
	return f
}

// untouched fails t if anything outside the plugins folder changed.
func (f *fixture) untouched(t *testing.T) {
	t.Helper()
	for path, want := range map[string]string{f.canary: "keep me\n", f.home.Path("x"): "home file\n", f.home.Path("data", "weather", "db"): "data\n"} {
		if b, err := os.ReadFile(path); err != nil || string(b) != want {
			t.Errorf("%s changed: %q, %v", path, b, err)
		}
	}
}

// entries lists the plugins folder.
func (f *fixture) entries(t *testing.T) []string {
	t.Helper()
	es, err := os.ReadDir(f.home.PluginsDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

func TestInstallCopy(t *testing.T) {
	f := newFixture(t)
	src := source(t, f.src, "weather")
	pin, err := install.Install(f.home, src, install.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if pin.Name != "weather" || pin.Source != src || pin.Linked || pin.SHA256 != sha(handlerScript) || pin.Installed.IsZero() {
		t.Errorf("pin = %+v", pin)
	}
	dst := filepath.Join(f.home.PluginsDir(), "weather")
	for path, want := range map[string]os.FileMode{
		dst: fs.ModeDir | 0o700, filepath.Join(dst, "handler"): 0o700, filepath.Join(dst, "manifest.json"): 0o600,
		filepath.Join(dst, "skills"): fs.ModeDir | 0o700, filepath.Join(dst, "skills", "weather.md"): 0o600,
	} {
		if got := mode(t, path); got != want {
			t.Errorf("%s: mode %v, want %v", path, got, want)
		}
	}
	for _, absent := range []string{"main.go", "skills/notes.txt"} {
		if _, err := os.Lstat(filepath.Join(dst, absent)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s was copied", absent)
		}
	}
	if got := f.entries(t); !slices.Equal(got, []string{"weather"}) {
		t.Errorf("plugins folder holds %v, want only weather (no temporary folder left)", got)
	}
	pins, err := install.LoadPins(f.home)
	if err != nil || pins["weather"] != pin {
		t.Errorf("LoadPins = %+v, %v; want %+v", pins, err, pin)
	}
	if got := mode(t, f.home.Pins()); got != 0o600 {
		t.Errorf("pins.json mode %v, want 0600", got)
	}
	raw, _ := os.ReadFile(f.home.Pins())
	var doc struct {
		Plugins map[string]map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || doc.Plugins["weather"]["sha256"] != sha(handlerScript) {
		t.Errorf("pins.json = %s (%v)", raw, err)
	}
	if sum, err := install.HashFile(filepath.Join(dst, "handler")); err != nil || sum != pin.SHA256 {
		t.Errorf("installed handler hashes to %s, %v; pin %s", sum, err, pin.SHA256)
	}
	if _, err := install.VerifyPin(f.home, "weather"); err != nil {
		t.Errorf("VerifyPin: %v", err)
	}

	// The copy is independent of the source.
	write(t, filepath.Join(src, "handler"), "#!/bin/sh\necho changed\n", 0o755)
	if _, err := install.VerifyPin(f.home, "weather"); err != nil {
		t.Errorf("VerifyPin after changing the source: %v", err)
	}
	// Tampering with the installed handler is noticed.
	write(t, filepath.Join(dst, "handler"), "#!/bin/sh\necho evil\n", 0o700)
	if _, err := install.VerifyPin(f.home, "weather"); err == nil || !strings.Contains(err.Error(), "not the pinned") {
		t.Errorf("VerifyPin after tampering: %v", err)
	}
	f.untouched(t)
}

func TestInstallName(t *testing.T) {
	f := newFixture(t)
	src := source(t, f.src, "weather")
	pin, err := install.Install(f.home, src, install.Options{Name: "weather-dev"})
	if err != nil || pin.Name != "weather-dev" {
		t.Fatalf("Install: %+v, %v", pin, err)
	}
	if got := f.entries(t); !slices.Equal(got, []string{"weather-dev"}) {
		t.Errorf("plugins folder holds %v", got)
	}
}

func TestInstallLink(t *testing.T) {
	f := newFixture(t)
	src := source(t, f.src, "weather")
	pin, err := install.Install(f.home, src, install.Options{Link: true})
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(f.home.PluginsDir(), "weather")
	if target, err := os.Readlink(dst); err != nil || target != src {
		t.Fatalf("plugins/weather links to %q (%v), want %s", target, err, src)
	}
	if !pin.Linked || pin.SHA256 != sha(handlerScript) {
		t.Errorf("pin = %+v", pin)
	}
	if _, err := install.VerifyPin(f.home, "weather"); err != nil {
		t.Errorf("VerifyPin: %v", err)
	}

	// A rebuild breaks the pin until Repin.
	v2 := "#!/bin/sh\necho v2\n"
	write(t, filepath.Join(src, "handler"), v2, 0o755)
	if _, err := install.VerifyPin(f.home, "weather"); err == nil {
		t.Error("VerifyPin passed after a rebuild")
	}
	np, err := install.Repin(f.home, "weather")
	if err != nil || np.SHA256 != sha(v2) || !np.Linked {
		t.Fatalf("Repin = %+v, %v", np, err)
	}
	if _, err := install.VerifyPin(f.home, "weather"); err != nil {
		t.Errorf("VerifyPin after Repin: %v", err)
	}

	// A link is pinned through its handler only: a symlinked handler
	// behind the link is refused.
	if err := os.Remove(filepath.Join(src, "handler")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(f.src, "elsewhere"), v2, 0o755)
	if err := os.Symlink(filepath.Join(f.src, "elsewhere"), filepath.Join(src, "handler")); err != nil {
		t.Fatal(err)
	}
	if _, err := install.Repin(f.home, "weather"); !errors.Is(err, install.ErrSymlink) {
		t.Errorf("Repin of a symlinked handler: %v, want ErrSymlink", err)
	}

	// Repin refuses a copied plugin.
	other := source(t, f.src, "other")
	if _, err := install.Install(f.home, other, install.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := install.Repin(f.home, "other"); err == nil || !strings.Contains(err.Error(), "is a copy") {
		t.Errorf("Repin of a copy: %v", err)
	}
	if _, err := install.Repin(f.home, "nope"); !errors.Is(err, install.ErrNotInstalled) {
		t.Errorf("Repin of nothing: %v", err)
	}
	f.untouched(t)
}

func TestInstallReplace(t *testing.T) {
	f := newFixture(t)
	src := source(t, f.src, "weather")
	if _, err := install.Install(f.home, src, install.Options{}); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(f.home.PluginsDir(), "weather")
	v2 := "#!/bin/sh\necho v2\n"
	write(t, filepath.Join(src, "handler"), v2, 0o755)

	_, err := install.Install(f.home, src, install.Options{})
	if !errors.Is(err, install.ErrExists) || !strings.Contains(err.Error(), "--replace") {
		t.Fatalf("second Install: %v, want ErrExists and a hint", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "handler")); string(b) != handlerScript {
		t.Error("a refused install changed the installed plugin")
	}

	pin, err := install.Install(f.home, src, install.Options{Replace: true})
	if err != nil || pin.SHA256 != sha(v2) {
		t.Fatalf("Install --replace: %+v, %v", pin, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "handler")); string(b) != v2 {
		t.Errorf("handler after replace = %q", b)
	}

	// Copy → link → copy: replacing a link removes the link, not the
	// folder it points to.
	if _, err := install.Install(f.home, src, install.Options{Replace: true, Link: true}); err != nil {
		t.Fatal(err)
	}
	if mode(t, dst)&fs.ModeSymlink == 0 {
		t.Fatal("not a link after install --link --replace")
	}
	if _, err := install.Install(f.home, src, install.Options{Replace: true}); err != nil {
		t.Fatal(err)
	}
	if mode(t, dst)&fs.ModeSymlink != 0 {
		t.Error("still a link after install --replace")
	}
	for _, file := range []string{"handler", "manifest.json", "main.go", "skills/weather.md"} {
		if _, err := os.Stat(filepath.Join(src, file)); err != nil {
			t.Errorf("replacing the link damaged the source: %v", err)
		}
	}
	if got := f.entries(t); !slices.Equal(got, []string{"weather"}) {
		t.Errorf("plugins folder holds %v", got)
	}
	f.untouched(t)
}

func TestInstallRefused(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, f *fixture, src string) // changes the valid source
		opts    install.Options
		srcPath func(f *fixture, src string) string // default src
		wantErr error
		want    []string // in the message
	}{
		{name: "handler missing", setup: func(t *testing.T, f *fixture, src string) { os.Remove(filepath.Join(src, "handler")) },
			wantErr: install.ErrNotBuilt, want: []string{"carapace plugin build"}},
		{name: "handler not executable", setup: func(t *testing.T, f *fixture, src string) { os.Chmod(filepath.Join(src, "handler"), 0o644) },
			wantErr: install.ErrNotBuilt, want: []string{"not executable", "carapace plugin build"}},
		{name: "handler is a link", setup: func(t *testing.T, f *fixture, src string) {
			os.Remove(filepath.Join(src, "handler"))
			must(t, os.Symlink("/bin/sh", filepath.Join(src, "handler")))
		}, wantErr: install.ErrNotBuilt, want: []string{"symbolic link"}},
		{name: "linked handler is a link", opts: install.Options{Link: true}, setup: func(t *testing.T, f *fixture, src string) {
			os.Remove(filepath.Join(src, "handler"))
			must(t, os.Symlink("/bin/sh", filepath.Join(src, "handler")))
		}, wantErr: install.ErrNotBuilt},
		{name: "handler is a folder", setup: func(t *testing.T, f *fixture, src string) {
			os.Remove(filepath.Join(src, "handler"))
			must(t, os.Mkdir(filepath.Join(src, "handler"), 0o755))
		}, wantErr: install.ErrNotBuilt},
		{name: "manifest is a link", setup: func(t *testing.T, f *fixture, src string) {
			write(t, filepath.Join(src, "real.json"), validManifest, 0o644)
			os.Remove(filepath.Join(src, "manifest.json"))
			must(t, os.Symlink("real.json", filepath.Join(src, "manifest.json")))
		}, wantErr: install.ErrBadSource, want: []string{"manifest.json"}},
		{name: "skill is a link to a secret", setup: func(t *testing.T, f *fixture, src string) {
			must(t, os.Symlink(f.canary, filepath.Join(src, "skills", "secret.md")))
		}, wantErr: install.ErrBadSource, want: []string{"secret.md"}},
		{name: "skills is a link", setup: func(t *testing.T, f *fixture, src string) {
			must(t, os.Rename(filepath.Join(src, "skills"), filepath.Join(f.src, "real-skills")))
			must(t, os.Symlink(filepath.Join(f.src, "real-skills"), filepath.Join(src, "skills")))
		}, wantErr: install.ErrBadSource, want: []string{"skills"}},
		{name: "invalid manifest", setup: func(t *testing.T, f *fixture, src string) {
			bad := strings.Replace(validManifest, `"weather_now"`, `"weather.now"`, 1)
			bad = strings.Replace(bad, `"additionalProperties": false,`, ``, 1)
			bad = strings.Replace(bad, `"1.0.0"`, `"one"`, 1)
			write(t, filepath.Join(src, "manifest.json"), bad, 0o644)
		}, wantErr: install.ErrBadSource, want: []string{"/provides/tools/0/name", `use "weather_now"`, "/provides/tools/0/arguments_schema", "/version", "3 errors"}},
		{name: "no manifest", setup: func(t *testing.T, f *fixture, src string) { os.Remove(filepath.Join(src, "manifest.json")) },
			wantErr: install.ErrBadSource, want: []string{"no manifest.json"}},
		{name: "source is a file", opts: install.Options{Name: "weather"}, srcPath: func(f *fixture, src string) string { return filepath.Join(src, "main.go") }, wantErr: install.ErrBadSource},
		{name: "source is missing", srcPath: func(f *fixture, src string) string { return filepath.Join(f.src, "nope") }, wantErr: fs.ErrNotExist},
		{name: "source inside the plugins folder", setup: func(t *testing.T, f *fixture, src string) {
			must(t, os.MkdirAll(f.home.PluginsDir(), 0o700))
			must(t, os.Rename(src, filepath.Join(f.home.PluginsDir(), "weather")))
		}, srcPath: func(f *fixture, src string) string { return filepath.Join(f.home.PluginsDir(), "weather") },
			opts: install.Options{Name: "other", Replace: true}, wantErr: install.ErrBadSource},
	}
	for _, name := range []string{"../canary", "..", ".", "a/b", "/etc", "Weather", "core", "x\x00y", "../../home/x"} {
		tests = append(tests, struct {
			name    string
			setup   func(t *testing.T, f *fixture, src string)
			opts    install.Options
			srcPath func(f *fixture, src string) string
			wantErr error
			want    []string
		}{name: fmt.Sprintf("name %q", name), opts: install.Options{Name: name}, wantErr: install.ErrBadName})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			src := source(t, f.src, "weather")
			if tt.setup != nil {
				tt.setup(t, f, src)
			}
			path := src
			if tt.srcPath != nil {
				path = tt.srcPath(f, src)
			}
			before := f.entries(t)
			_, err := install.Install(f.home, path, tt.opts)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Install: %v, want %v", err, tt.wantErr)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if got := f.entries(t); !slices.Equal(got, before) {
				t.Errorf("plugins folder went from %v to %v", before, got)
			}
			if _, err := os.Stat(f.home.Pins()); !errors.Is(err, fs.ErrNotExist) {
				t.Error("pins.json was written")
			}
			f.untouched(t)
		})
	}
}

func TestInvalidErrorListsEveryError(t *testing.T) {
	f := newFixture(t)
	src := source(t, f.src, "weather")
	write(t, filepath.Join(src, "manifest.json"), `{"description": 1, "tools": [}`, 0o644)
	_, err := install.Install(f.home, src, install.Options{})
	ie, ok := errors.AsType[*install.InvalidError](err)
	if !ok || len(ie.Problems) == 0 {
		t.Fatalf("Install: %v, want an *InvalidError", err)
	}
	if lines := strings.Count(err.Error(), "\n"); lines < 1 {
		t.Errorf("want one line per error:\n%v", err)
	}
}

func TestInstallConcurrent(t *testing.T) {
	f := newFixture(t)
	src := source(t, f.src, "weather")
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = install.Install(f.home, src, install.Options{Name: fmt.Sprintf("weather-%d", i)})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	pins, err := install.LoadPins(f.home)
	if err != nil || len(pins) != n {
		t.Errorf("%d pins (%v), want %d: an update was lost", len(pins), err, n)
	}
	if got := f.entries(t); len(got) != n {
		t.Errorf("plugins folder holds %v", got)
	}
}

func TestRemove(t *testing.T) {
	t.Run("copy", func(t *testing.T) {
		f := newFixture(t)
		src := source(t, f.src, "weather")
		for _, name := range []string{"weather", "other"} {
			if _, err := install.Install(f.home, src, install.Options{Name: name}); err != nil {
				t.Fatal(err)
			}
		}
		if err := install.Remove(f.home, "weather"); err != nil {
			t.Fatal(err)
		}
		if got := f.entries(t); !slices.Equal(got, []string{"other"}) {
			t.Errorf("plugins folder holds %v, want [other]", got)
		}
		pins, _ := install.LoadPins(f.home)
		if _, ok := pins["weather"]; ok || len(pins) != 1 {
			t.Errorf("pins after remove: %v", pins)
		}
		if _, err := os.Stat(filepath.Join(src, "handler")); err != nil {
			t.Error("the source was touched")
		}
		f.untouched(t) // data/weather is kept
		if err := install.Remove(f.home, "weather"); !errors.Is(err, install.ErrNotInstalled) {
			t.Errorf("second Remove: %v, want ErrNotInstalled", err)
		}
	})
	t.Run("link", func(t *testing.T) {
		f := newFixture(t)
		src := source(t, f.src, "weather")
		if _, err := install.Install(f.home, src, install.Options{Link: true}); err != nil {
			t.Fatal(err)
		}
		if err := install.Remove(f.home, "weather"); err != nil {
			t.Fatal(err)
		}
		if len(f.entries(t)) != 0 {
			t.Errorf("plugins folder holds %v", f.entries(t))
		}
		for _, file := range []string{"handler", "manifest.json", "main.go", "skills/weather.md"} {
			if _, err := os.Stat(filepath.Join(src, file)); err != nil {
				t.Errorf("removing a link deleted its target's %s", file)
			}
		}
	})
	t.Run("a link planted by hand is removed as a link", func(t *testing.T) {
		f := newFixture(t)
		must(t, os.MkdirAll(f.home.PluginsDir(), 0o700))
		must(t, os.Symlink(filepath.Dir(f.canary), filepath.Join(f.home.PluginsDir(), "evil")))
		if err := install.Remove(f.home, "evil"); err != nil {
			t.Fatal(err)
		}
		f.untouched(t)
	})
	t.Run("links inside a plugin folder are not followed", func(t *testing.T) {
		f := newFixture(t)
		src := source(t, f.src, "weather")
		if _, err := install.Install(f.home, src, install.Options{}); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(f.home.PluginsDir(), "weather")
		must(t, os.Symlink(filepath.Dir(f.canary), filepath.Join(dst, "outside")))
		must(t, os.Symlink(f.canary, filepath.Join(dst, "skills", "c.md")))
		if err := install.Remove(f.home, "weather"); err != nil {
			t.Fatal(err)
		}
		f.untouched(t)
	})
	t.Run("a pin whose folder is gone", func(t *testing.T) {
		f := newFixture(t)
		src := source(t, f.src, "weather")
		if _, err := install.Install(f.home, src, install.Options{}); err != nil {
			t.Fatal(err)
		}
		must(t, os.RemoveAll(filepath.Join(f.home.PluginsDir(), "weather")))
		if err := install.Remove(f.home, "weather"); err != nil {
			t.Fatal(err)
		}
		if pins, _ := install.LoadPins(f.home); len(pins) != 0 {
			t.Errorf("pins = %v", pins)
		}
	})
	t.Run("nothing installed", func(t *testing.T) {
		f := newFixture(t)
		if err := install.Remove(f.home, "weather"); !errors.Is(err, install.ErrNotInstalled) {
			t.Errorf("Remove: %v", err)
		}
	})
}

func TestRemovePathTricks(t *testing.T) {
	f := newFixture(t)
	src := source(t, f.src, "weather")
	if _, err := install.Install(f.home, src, install.Options{}); err != nil {
		t.Fatal(err)
	}
	canaryDir := filepath.Dir(f.canary)
	rel, _ := filepath.Rel(f.home.PluginsDir(), canaryDir)
	for _, name := range []string{
		"..", ".", "", "../x", "../data/weather", "../../canary", rel, "weather/../../x", "weather/skills", "a/b",
		canaryDir, f.canary, "/", "weather/", "./weather", "weather\x00", "Weather", "~", "*", "core",
	} {
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			err := install.Remove(f.home, name)
			if !errors.Is(err, install.ErrBadName) {
				t.Fatalf("Remove(%q) = %v, want ErrBadName", name, err)
			}
			f.untouched(t)
			if got := f.entries(t); !slices.Equal(got, []string{"weather"}) {
				t.Errorf("plugins folder holds %v", got)
			}
			if _, err := install.VerifyPin(f.home, "weather"); err != nil {
				t.Errorf("the installed plugin was damaged: %v", err)
			}
		})
	}
}

func TestLoadPins(t *testing.T) {
	f := newFixture(t)
	pins, err := install.LoadPins(f.home)
	if err != nil || len(pins) != 0 || pins == nil {
		t.Errorf("no file: %v, %v; want an empty map", pins, err)
	}
	write(t, f.home.Pins(), `{"plugins": {"a": {"sha256": "00"}}}`, 0o600)
	if pins, err := install.LoadPins(f.home); err != nil || pins["a"].Name != "a" || pins["a"].SHA256 != "00" {
		t.Errorf("LoadPins = %+v, %v", pins, err)
	}
	write(t, f.home.Pins(), `{"plugins": `, 0o600)
	if _, err := install.LoadPins(f.home); err == nil || !strings.Contains(err.Error(), f.home.Pins()) {
		t.Errorf("corrupt file: %v", err)
	}
}

func TestHashFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	write(t, file, "hello\n", 0o600)
	if sum, err := install.HashFile(file); err != nil || sum != sha("hello\n") {
		t.Errorf("HashFile = %s, %v", sum, err)
	}
	must(t, os.Symlink(file, filepath.Join(dir, "link")))
	must(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
	tests := []struct {
		path string
		want error
	}{
		{filepath.Join(dir, "link"), install.ErrSymlink},
		{filepath.Join(dir, "fifo"), install.ErrNotRegular}, // must not block
		{dir, install.ErrNotRegular},
		{filepath.Join(dir, "missing"), fs.ErrNotExist},
	}
	for _, tt := range tests {
		if _, err := install.HashFile(tt.path); !errors.Is(err, tt.want) {
			t.Errorf("HashFile(%s) = %v, want %v", filepath.Base(tt.path), err, tt.want)
		}
	}
}

func TestCheckLayout(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, src string)
		want  []string // the problems, as "error|warning <file>: <message>"
	}{
		{"complete", func(*testing.T, string) {}, nil},
		{"not built", func(t *testing.T, src string) { must(t, os.Remove(filepath.Join(src, "handler"))) },
			[]string{"warning handler: not built yet"}},
		{"not executable", func(t *testing.T, src string) { must(t, os.Chmod(filepath.Join(src, "handler"), 0o600)) },
			[]string{"error handler: is not executable"}},
		{"handler link", func(t *testing.T, src string) {
			must(t, os.Remove(filepath.Join(src, "handler")))
			must(t, os.Symlink("/bin/sh", filepath.Join(src, "handler")))
		}, []string{"error handler: is a symbolic link, not the executable itself"}},
		{"manifest link", func(t *testing.T, src string) {
			must(t, os.Rename(filepath.Join(src, "manifest.json"), filepath.Join(src, "m.json")))
			must(t, os.Symlink("m.json", filepath.Join(src, "manifest.json")))
		}, []string{"error manifest.json: is a symbolic link, not a regular file, and installation follows no link"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := source(t, t.TempDir(), "weather")
			tt.setup(t, src)
			var got []string
			for _, p := range install.CheckLayout(src) {
				sev := "error"
				if p.Warning {
					sev = "warning"
				}
				rel, _ := filepath.Rel(src, p.File)
				got = append(got, sev+" "+rel+": "+p.Message)
				if p.Fix == "" {
					t.Errorf("%s: no fix", p.Message)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("CheckLayout = %q, want %q", got, tt.want)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestStaleTemporaryFolders(t *testing.T) {
	f := newFixture(t)
	src := source(t, f.src, "weather")
	// What an interrupted install and remove leave behind, one holding a
	// link out of the plugins folder.
	stale := filepath.Join(f.home.PluginsDir(), ".install-weather-123")
	must(t, os.MkdirAll(filepath.Join(stale, "new", "skills"), 0o700))
	must(t, os.Symlink(filepath.Dir(f.canary), filepath.Join(stale, "new", "out")))
	must(t, os.MkdirAll(filepath.Join(f.home.PluginsDir(), ".remove-other-9", "other"), 0o700))
	must(t, os.MkdirAll(filepath.Join(f.home.PluginsDir(), ".editor-state"), 0o700))
	if _, err := install.Install(f.home, src, install.Options{}); err != nil {
		t.Fatal(err)
	}
	if got := f.entries(t); !slices.Equal(got, []string{".editor-state", "weather"}) {
		t.Errorf("plugins folder holds %v, want the stale folders gone and the rest kept", got)
	}
	f.untouched(t)
}
