package agent

import (
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/carapace-dev/carapace/core/catalog"
	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/manifest"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/skills"
)

type printPlugins []skills.Plugin

func (p printPlugins) Healthy() []skills.Plugin                    { return p }
func (printPlugins) BriefProvider() (string, plugin.BriefProvider) { return "", nil }

type printCatalog []*catalog.Tool

func (c printCatalog) List() []*catalog.Tool { return c }

// A warm container's fingerprint changes with everything it was built
// from — the version, the config, the engine, the group, a plugin's
// manifest or skill files, the intrinsics — and with nothing else.
func TestWarmPrint(t *testing.T) {
	base := func() (Options, *config.Config) {
		return Options{Version: "1.0.0",
				Plugins: printPlugins{{Name: "mail", Manifest: &manifest.Manifest{Version: "1.0.0"},
					Skills: fstest.MapFS{"mail/SKILL.md": {Data: []byte("send mail")}}}},
				Catalog: printCatalog{{Plugin: "core", Name: "list_tools"}}},
			&config.Config{Digest: "abc"}
	}
	print := func(edit func(*Options, *config.Config), engine, group string) string {
		o, c := base()
		if edit != nil {
			edit(&o, c)
		}
		return (&Runner{opts: o, cfg: c}).warmPrint(engine, group)
	}
	want := print(nil, "docker", "main")
	if again := print(nil, "docker", "main"); again != want {
		t.Fatalf("the same inputs printed %s and %s", want, again)
	}
	for _, tc := range []struct {
		name          string
		edit          func(*Options, *config.Config)
		engine, group string
	}{
		{"version", func(o *Options, _ *config.Config) { o.Version = "1.0.1" }, "docker", "main"},
		{"config", func(_ *Options, c *config.Config) { c.Digest = "abd" }, "docker", "main"},
		{"engine", nil, "podman", "main"},
		{"group", nil, "docker", "other"},
		{"manifest", func(o *Options, _ *config.Config) {
			o.Plugins.(printPlugins)[0].Manifest = &manifest.Manifest{Version: "1.0.1"}
		}, "docker", "main"},
		{"skill file", func(o *Options, _ *config.Config) {
			o.Plugins.(printPlugins)[0].Skills = fstest.MapFS{"mail/SKILL.md": {Data: []byte("send mail!")}}
		}, "docker", "main"},
		{"plugin gone", func(o *Options, _ *config.Config) { o.Plugins = printPlugins{} }, "docker", "main"},
		{"intrinsic", func(o *Options, _ *config.Config) {
			o.Catalog = printCatalog{{Plugin: "core", Name: "list_tools"}, {Plugin: "core", Name: "cancel_task"}}
		}, "docker", "main"},
	} {
		if got := print(tc.edit, tc.engine, tc.group); got == want {
			t.Errorf("%s changed, the print did not: %s", tc.name, got)
		}
	}
}

// The manifests' digests are cached by manifest: a reload (a new
// manifest) changes the print on the same runner, and going back to the
// first manifest gives the first print again.
func TestWarmPrintOfAReloadedPlugin(t *testing.T) {
	first := &manifest.Manifest{Version: "1.0.0"}
	ps := printPlugins{{Name: "mail", Manifest: first}}
	r := &Runner{opts: Options{Version: "1.0.0", Plugins: ps, Catalog: printCatalog{}}, cfg: &config.Config{Digest: "abc"}}
	want := r.warmPrint("docker", "main")
	if again := r.warmPrint("docker", "main"); again != want {
		t.Fatalf("the same plugins printed %s, then %s", want, again)
	}
	ps[0].Manifest = &manifest.Manifest{Version: "1.0.1"}
	if got := r.warmPrint("docker", "main"); got == want {
		t.Fatalf("a reloaded plugin's new manifest kept the print %s", got)
	}
	ps[0].Manifest = first
	if got := r.warmPrint("docker", "main"); got != want {
		t.Fatalf("back to the first manifest: %s; want %s", got, want)
	}
}

// BenchmarkWarmPrint is a claim's fingerprint with the manifests and
// skill files of four of the bundled plugins.
func BenchmarkWarmPrint(b *testing.B) {
	var ps printPlugins
	for _, n := range []string{"echo", "memory", "telegram", "mail"} {
		dir := filepath.Join("..", "..", "plugins", n)
		data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
		if err != nil {
			b.Fatal(err)
		}
		m, err := manifest.Parse(n, data, manifest.Options{})
		if err != nil {
			b.Fatal(err)
		}
		ps = append(ps, skills.Plugin{Name: n, Manifest: m, Skills: os.DirFS(filepath.Join(dir, "skills"))})
	}
	r := &Runner{opts: Options{Version: "1", Plugins: ps, Catalog: printCatalog{}}, cfg: &config.Config{Digest: "x"}}
	for b.Loop() {
		r.warmPrint("docker", "main")
	}
}
