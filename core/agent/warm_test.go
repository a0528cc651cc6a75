package agent

import (
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
