package cli_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/control/controltest"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/install"
)

// pluginManifest is a valid manifest with one low-risk tool.
const pluginManifest = `{
  "description": "Weather for the CLI tests",
  "version": "1.2.0",
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

// writePlugin writes a built plugin folder parent/name by hand: the
// manifest (pluginManifest unless given), a skill file and a handler
// script. It returns the folder.
func writePlugin(t *testing.T, parent, name string, manifest ...string) string {
	t.Helper()
	m := pluginManifest
	if len(manifest) > 0 {
		m = manifest[0]
	}
	dir := filepath.Join(parent, name)
	for path, content := range map[string]string{
		"manifest.json":          m,
		"skills/" + name + ".md": "# " + name + "\n\nCall `ipc tool.invoke.weather_now '{\"city\": \"Oslo\"}'`.\n",
		"handler":                "#!/bin/sh\nexit 0\n",
	} {
		p := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "handler"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// repoRoot is the Carapace source tree the tests run in.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "core", "plugin", "plugin.go")); err != nil {
		t.Fatal(err)
	}
	return root
}

// summaryRE is validate's last line.
var summaryRE = regexp.MustCompile(`^(.+): (\d+) tools?, (\d+) errors?, (\d+) warnings?$`)

// lastLine returns the last line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestPluginWorkflow drives the whole cycle with the real toolchain:
// create, build, validate, install, list, rebuild a linked install, remove.
func TestPluginWorkflow(t *testing.T) {
	h := controltest.TempHome(t)
	parent := t.TempDir()
	t.Setenv("CARAPACE_SDK", repoRoot(t))
	dir := filepath.Join(parent, "weather")

	r := carapace(t, h, "plugin", "create", "weather", "--dir", parent)
	r.want(t, 0, []string{"created plugin weather in " + dir, "  manifest.json\n", "  handler.go\n", "  skills/weather.md\n",
		"  go.sum\n", "Carapace SDK in " + repoRoot(t) + " ($CARAPACE_SDK)", "next steps:\n  cd " + dir + "\n  make test\n  carapace plugin build .\n  carapace plugin install .\n"}, nil)

	// Before the build: valid, with one warning.
	r = carapace(t, h, "plugin", "validate", dir)
	r.want(t, 0, []string{"warning: " + filepath.Join(dir, "handler") + ": not built yet\n  fix: run carapace plugin build " + dir + "\n"}, nil)
	if got, want := lastLine(r.stdout), dir+": 1 tool, 0 errors, 1 warning"; got != want {
		t.Errorf("last line %q, want %q", got, want)
	}

	r = carapace(t, h, "plugin", "build", dir)
	r.want(t, 0, []string{dir + ": 1 tool, 0 errors, 0 warnings\n", "built " + filepath.Join(dir, "handler") + ": "},
		[]string{"CGO_ENABLED=0 go build -trimpath -o handler ."})
	sum, err := install.HashFile(filepath.Join(dir, "handler"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.stdout, "sha256 "+sum) {
		t.Errorf("build does not print the handler's sha256 %s:\n%s", sum, r.stdout)
	}

	r = carapace(t, h, "plugin", "validate", dir)
	r.want(t, 0, nil, nil)
	if r.stdout != dir+": 1 tool, 0 errors, 0 warnings\n" {
		t.Errorf("validate after the build:\n%s", r.stdout)
	}

	r = carapace(t, h, "plugin", "install", dir)
	r.want(t, 0, []string{"installed weather (copied from " + dir + ")", "pinned handler sha256 " + sum,
		"no core is running at " + string(h) + ": weather loads at the next carapace serve"}, nil)
	carapace(t, h, "plugin", "install", dir).want(t, 1, nil, []string{"already installed", "--replace"})

	r = carapace(t, h, "plugin", "list")
	r.want(t, 0, []string{"NAME", "VALID", "PIN", "weather", "0.1.0", "weather_example", "yes", "ok"},
		[]string{"built-in plugins are listed only by a running core"})

	// A linked install follows rebuilds: build re-pins it.
	carapace(t, h, "plugin", "install", "--link", "--replace", dir).want(t, 0, []string{"installed weather (linked to " + dir + ")"}, nil)
	if err := os.WriteFile(filepath.Join(dir, "extra.go"), []byte("package main\n\nvar rebuilt = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = carapace(t, h, "plugin", "build", dir)
	r.want(t, 0, []string{"updated the pin of weather, installed as a link to " + dir}, nil)
	if _, err := install.VerifyPin(h, "weather"); err != nil {
		t.Errorf("the linked plugin's pin does not match after the build: %v", err)
	}

	r = carapace(t, h, "plugin", "remove", "weather")
	r.want(t, 0, []string{"removed weather (the link to " + dir + "; that folder is untouched) and its pin",
		"carapace auth status --plugin weather"}, nil)
	if _, err := os.Stat(filepath.Join(dir, "main.go")); err != nil {
		t.Errorf("remove touched the source: %v", err)
	}
	carapace(t, h, "plugin", "list").want(t, 0, []string{"no user plugins installed"}, nil)
}

func TestPluginCreate(t *testing.T) {
	t.Setenv("CARAPACE_SDK", "")
	h := controltest.TempHome(t)

	t.Run("without an SDK", func(t *testing.T) {
		parent := t.TempDir()
		r := carapace(t, h, "plugin", "create", "mail-sender", "--tool", "send_email", "--risk", "high", "--dir", parent)
		r.want(t, 0, []string{"created plugin mail-sender", "note: no Carapace source tree was given",
			"replace github.com/carapace-dev/carapace => /path/to/carapace"}, nil)
		if strings.Contains(r.stdout, "go.sum") {
			t.Error("go mod tidy ran without an SDK")
		}
		m, err := os.ReadFile(filepath.Join(parent, "mail-sender", "manifest.json"))
		if err != nil || !strings.Contains(string(m), `"name": "send_email"`) || !strings.Contains(string(m), `"risk_level": "high"`) {
			t.Errorf("manifest: %v\n%s", err, m)
		}
		// validate: the high-risk warning and the missing build, no error.
		r = carapace(t, h, "plugin", "validate", filepath.Join(parent, "mail-sender"))
		r.want(t, 0, []string{`warning: ` + filepath.Join(parent, "mail-sender", "manifest.json") + `: /provides/tools/0/risk_level: tool "send_email" is high-risk`}, nil)
		if !strings.HasSuffix(lastLine(r.stdout), ": 1 tool, 0 errors, 2 warnings") {
			t.Errorf("last line %q", lastLine(r.stdout))
		}
		// The folder exists now.
		carapace(t, h, "plugin", "create", "mail-sender", "--dir", parent).want(t, 1, nil, []string{"exists and is not empty"})
	})

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"name", []string{"My_Plugin"}, `plugin name "My_Plugin" must be kebab-case: use "my-plugin"`},
		{"name with a path", []string{"../evil"}, `plugin name "../evil"`},
		{"tool", []string{"weather", "--tool", "weather.now"}, `--tool: tool name "weather.now" must be snake_case: use "weather_now"`},
		{"reserved tool", []string{"weather", "--tool", "list_tools"}, "reserved"},
		{"risk", []string{"weather", "--risk", "medium"}, `--risk "medium": want low or high`},
		{"sdk", []string{"weather", "--sdk", "/nonexistent"}, "--sdk: invalid plugin options: /nonexistent is not a Carapace source tree"},
		{"no name", nil, "accepts 1 arg(s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			r := carapace(t, h, append([]string{"plugin", "create", "--dir", parent}, tt.args...)...)
			r.want(t, 2, nil, []string{tt.want})
			if entries, _ := os.ReadDir(parent); len(entries) != 0 {
				t.Error("create wrote something")
			}
		})
	}
	t.Run("go mod tidy fails", func(t *testing.T) {
		sdk := t.TempDir()
		if err := os.MkdirAll(filepath.Join(sdk, "core", "plugin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sdk, "go.mod"), []byte("module github.com/carapace-dev/carapace\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Setenv("GOPROXY", "off")
		parent := t.TempDir()
		r := carapace(t, h, "plugin", "create", "weather", "--dir", parent, "--sdk", sdk)
		r.want(t, 1, []string{"created plugin weather", "  handler.go\n"},
			[]string{"core/plugin", "carapace: the plugin is written, but go mod tidy failed in " + filepath.Join(parent, "weather")})
	})
	t.Run("bad $CARAPACE_SDK", func(t *testing.T) {
		t.Setenv("CARAPACE_SDK", t.TempDir())
		carapace(t, h, "plugin", "create", "weather", "--dir", t.TempDir()).want(t, 2, nil, []string{"$CARAPACE_SDK: "})
	})
}

func TestPluginValidate(t *testing.T) {
	h := controltest.TempHome(t)
	replace := func(old, new string) string { return strings.Replace(pluginManifest, old, new, 1) }
	tests := []struct {
		name     string
		manifest string
		setup    func(t *testing.T, dir string)
		code     int
		want     []string
		counts   string // "tools errors warnings"
	}{
		{name: "valid", manifest: pluginManifest, code: 0, counts: "1 0 0"},
		{name: "dotted tool name", manifest: replace(`"weather_now"`, `"weather.now"`), code: 1, counts: "1 1 0",
			want: []string{"error: ", "manifest.json: /provides/tools/0/name: ", `fix: use "weather_now"`}},
		{name: "schema not strict", manifest: replace(`"additionalProperties": false,`, ``), code: 1,
			want: []string{"manifest.json: /provides/tools/0/arguments_schema"}},
		{name: "not JSON", manifest: `{"description": "x",,}`, code: 1, want: []string{"error: ", "manifest.json"}},
		{name: "unknown field", manifest: replace(`"subscribes": []`, `"subscribes": [], "name": "spoof"`), code: 1, want: []string{"/name"}},
		{name: "high risk", manifest: replace(`"risk_level": "low"`, `"risk_level": "high"`), code: 0, counts: "1 0 1",
			want: []string{"warning: ", "/provides/tools/0/risk_level"}},
		{name: "not built", manifest: pluginManifest, code: 0, counts: "1 0 1",
			setup: func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "handler")) },
			want:  []string{"handler: not built yet", "fix: run carapace plugin build "}},
		{name: "handler is a link", manifest: pluginManifest, code: 1, counts: "1 1 0",
			setup: func(t *testing.T, dir string) {
				os.Remove(filepath.Join(dir, "handler"))
				if err := os.Symlink("/bin/sh", filepath.Join(dir, "handler")); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"error: ", "handler: is a symbolic link"}},
		{name: "skill is a link", manifest: pluginManifest, code: 1,
			setup: func(t *testing.T, dir string) {
				if err := os.Symlink("/etc/passwd", filepath.Join(dir, "skills", "x.md")); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"skills/x.md: is a symbolic link"}},
		{name: "no skills", manifest: pluginManifest, code: 1,
			setup: func(t *testing.T, dir string) { os.RemoveAll(filepath.Join(dir, "skills")) },
			want:  []string{"error: ", "skills: the plugin has no skills folder"}},
		{name: "skill names an undeclared tool", manifest: pluginManifest, code: 0, counts: "1 0 1",
			setup: func(t *testing.T, dir string) {
				os.WriteFile(filepath.Join(dir, "skills", "more.md"), []byte("# more\n\nipc tool.invoke.weather_later '{}'\n"), 0o644)
			},
			want: []string{"warning: ", "skills/more.md:3: tool.invoke.weather_later: the manifest declares no such tool"}},
		{name: "terminal escapes are neutralised", manifest: replace(`"weather_now"`, "\"weather\\u009b31m\""), code: 1,
			want: []string{`\u009b`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writePlugin(t, t.TempDir(), "weather", tt.manifest)
			if tt.setup != nil {
				tt.setup(t, dir)
			}
			r := carapace(t, h, "plugin", "validate", dir)
			r.want(t, tt.code, tt.want, nil)
			if strings.ContainsRune(r.stdout, '\u009b') {
				t.Error("a C1 control character reached the terminal")
			}
			m := summaryRE.FindStringSubmatch(lastLine(r.stdout))
			if m == nil || m[1] != dir {
				t.Fatalf("last line %q is not the summary", lastLine(r.stdout))
			}
			if tt.counts != "" && strings.Join(m[2:], " ") != tt.counts {
				t.Errorf("tools errors warnings = %s, want %s:\n%s", strings.Join(m[2:], " "), tt.counts, r.stdout)
			}
			errs := strings.Count(r.stdout, "\nerror: ") + boolInt(strings.HasPrefix(r.stdout, "error: "))
			if m[3] != itoa(errs) {
				t.Errorf("summary says %s errors, %d printed:\n%s", m[3], errs, r.stdout)
			}
			if (tt.code == 1) != (errs > 0) {
				t.Errorf("exit %d with %d errors", r.code, errs)
			}
		})
	}
	t.Run("no such folder", func(t *testing.T) {
		r := carapace(t, h, "plugin", "validate", filepath.Join(t.TempDir(), "nope"))
		r.want(t, 1, []string{"error: ", "cannot be read"}, nil)
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// canaries plants files outside the plugins folder that no plugin
// command may touch, and returns a check that they are intact.
func canaries(t *testing.T, h home.Dir) func() {
	t.Helper()
	files := map[string]string{
		h.Path("precious.txt"):          "home\n",
		h.Path("data", "weather", "db"): "data\n",
		filepath.Join(filepath.Dir(string(h)), filepath.Base(string(h))+"-canary", "precious.txt"): "outside\n",
	}
	for p, c := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(filepath.Dir(p)) })
	}
	return func() {
		t.Helper()
		for p, c := range files {
			if b, err := os.ReadFile(p); err != nil || string(b) != c {
				t.Errorf("%s changed: %q, %v", p, b, err)
			}
		}
	}
}

func pluginEntries(t *testing.T, h home.Dir) []string {
	t.Helper()
	es, err := os.ReadDir(h.PluginsDir())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestPluginInstallRemovePathTricks(t *testing.T) {
	h := controltest.TempHome(t)
	intact := canaries(t, h)
	src := writePlugin(t, t.TempDir(), "weather")
	carapace(t, h, "plugin", "install", src).want(t, 0, []string{"installed weather"}, nil)
	pinned, err := install.LoadPins(h)
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Base(string(h)) + "-canary"

	tricks := []string{"../" + outside, "..", ".", "a/b", "/etc", "weather/../../" + outside, "../data/weather", "Weather", "weather/", "core", " weather"}
	for _, name := range tricks {
		t.Run("install --name "+name, func(t *testing.T) {
			carapace(t, h, "plugin", "install", "--replace", "--name", name, src).want(t, 2, nil, []string{"--name: "})
		})
		t.Run("remove "+name, func(t *testing.T) {
			r := carapace(t, h, "plugin", "remove", name)
			r.want(t, 2, nil, []string{"plugin name"})
			if r.stdout != "" {
				t.Errorf("stdout: %s", r.stdout)
			}
		})
	}
	t.Run("install from a folder whose name is not a plugin name", func(t *testing.T) {
		bad := writePlugin(t, t.TempDir(), "Weather_Plugin")
		carapace(t, h, "plugin", "install", bad).want(t, 2, nil, []string{`use "weather-plugin"`, "pass --name NAME"})
	})
	t.Run("remove a plugin that is not installed", func(t *testing.T) {
		carapace(t, h, "plugin", "remove", "nope").want(t, 1, nil, []string{"plugin nope: not installed"})
	})
	intact()
	if got := pluginEntries(t, h); !slices.Equal(got, []string{"weather"}) {
		t.Errorf("plugins folder holds %v", got)
	}
	if pins, _ := install.LoadPins(h); len(pins) != 1 || pins["weather"] != pinned["weather"] {
		t.Errorf("pins changed: %v", pins)
	}

	carapace(t, h, "plugin", "remove", "weather").want(t, 0, []string{"removed weather and its pin",
		"kept its data in " + h.DataDir("weather") + ": delete it with rm -rf " + h.DataDir("weather")}, nil)
	intact()
	if got := pluginEntries(t, h); len(got) != 0 {
		t.Errorf("plugins folder holds %v", got)
	}
}

func TestPluginInstallInvalid(t *testing.T) {
	h := controltest.TempHome(t)
	src := writePlugin(t, t.TempDir(), "weather", strings.Replace(pluginManifest, `"weather_now"`, `"Weather Now"`, 1))
	r := carapace(t, h, "plugin", "install", src)
	r.want(t, 1, []string{"error: ", "/provides/tools/0/name"}, []string{"is not a valid plugin: 1 error (see above)"})
	if got := pluginEntries(t, h); len(got) != 0 {
		t.Errorf("plugins folder holds %v", got)
	}

	notBuilt := writePlugin(t, t.TempDir(), "weather")
	os.Remove(filepath.Join(notBuilt, "handler"))
	carapace(t, h, "plugin", "install", notBuilt).want(t, 1, []string{"warning: "}, []string{"has no handler", "carapace plugin build " + notBuilt})
}

func TestPluginWithCore(t *testing.T) {
	c := newFakeCore(t)
	c.b.SetStatus(api.Status{Plugins: []api.PluginStatus{
		{Name: "echo", Healthy: true, State: "healthy", Source: "builtin", Version: "1.0.0", Tools: []string{"echo", "echo_confirm"}},
		{Name: "weather", State: "failed", Category: "CONFIG_ERROR", Source: "user", Version: "1.2.0",
			Problem: "the handler's SHA-256 does not match its pin\x1b[2J"},
		{Name: "mail", State: api.PluginRestarting, Category: "INTERNAL_ERROR", Source: "user", Restarts: 2, NextTry: time.Now().Add(time.Hour),
			Confinement: &api.Confinement{Mode: api.ConfinementConfined, Mechanism: "landlock ABI 7, seccomp", Read: []string{"/h/plugins/mail (its folder)"},
				Write: []string{"/h/data/mail (its data folder)"}, Hosts: []string{"imap.example.com:993 (config accounts.0.imap)"}},
			Problem: "handler process died: exited with status 3; the core starts it again after 4s (crash 3 within 10m0s; at 5 it stays down)"},
		{Name: "notes", State: api.PluginDown, Category: "INTERNAL_ERROR", Source: "user", Restarts: 4,
			Confinement: &api.Confinement{Mode: api.ConfinementUnconfined},
			Problem:     "died, hung or failed to start again 5 times within 10m0s (the last: handler hung): it stays down; bring it back with `carapace plugin restart notes`"},
	}})

	r := carapace(t, c.home, "plugin", "list")
	r.want(t, 0, []string{"NAME", "STATE", "SOURCE", "VERSION", "TOOLS", "PID", "CONFINED", "echo", "healthy", "builtin", "echo,echo_confirm",
		"weather", "failed", "user", "1.2.0", "weather failed: CONFIG_ERROR: the handler's SHA-256 does not match its pin",
		"mail restarting: INTERNAL_ERROR: handler process died: exited with status 3; the core starts it again after 4s", "(crash 3 within 10m0s; at 5 it stays down) [next try in ", "; started again 2 times by the core]",
		"notes down: INTERNAL_ERROR: died, hung or failed to start again 5 times within 10m0s", "bring it back with `carapace plugin restart notes` [started again 4 times by the core]"}, nil)
	if strings.Contains(r.stdout, "\x1b") {
		t.Error("an escape character reached the terminal")
	}
	if !regexp.MustCompile(`(?m)^mail .* yes$`).MatchString(r.stdout) || !regexp.MustCompile(`(?m)^notes .* NO$`).MatchString(r.stdout) ||
		!regexp.MustCompile(`(?m)^echo .* -$`).MatchString(r.stdout) {
		t.Errorf("the CONFINED column:\n%s", r.stdout)
	}
	carapace(t, c.home, "plugin", "show", "mail").want(t, 0, []string{"plugin:      mail", "confinement: confined by landlock ABI 7, seccomp",
		"reads:\n  /h/plugins/mail (its folder)", "writes:\n  /h/data/mail (its data folder)", "network:\n  imap.example.com:993 (config accounts.0.imap)"}, nil)
	carapace(t, c.home, "plugin", "show", "notes").want(t, 0, []string{"confinement: NONE: [plugins.notes] unconfined = true", "network:\n  none: no TCP, no UDP, no DNS"}, nil)
	carapace(t, c.home, "plugin", "show", "echo").want(t, 0, []string{"confinement: none: it runs inside the core"}, nil)
	carapace(t, c.home, "plugin", "show", "nope").want(t, 1, nil, []string{"the core has no plugin \"nope\""})
	carapace(t, c.home, "plugin", "show", "../x").want(t, 2, nil, []string{"plugin name"})
	r = carapace(t, c.home, "plugin", "list", "--json")
	var list []api.PluginStatus
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 4 || list[1].Category != "CONFIG_ERROR" || list[2].Restarts != 2 || list[2].NextTry.IsZero() {
		t.Errorf("list --json: %v\n%s", err, r.stdout)
	}

	carapace(t, c.home, "plugin", "restart", "weather").want(t, 0, []string{"weather: healthy"}, nil)
	carapace(t, c.home, "plugin", "restart", "nope").want(t, 1, nil, []string{"the running core has no plugin nope"})
	carapace(t, c.home, "plugin", "restart", "../weather").want(t, 2, nil, []string{"plugin name"})
	if got := c.b.Restarts(); !slices.Equal(got, []string{"weather"}) {
		t.Errorf("restarts = %v, want [weather]", got)
	}

	// install loads the plugin in the running core; remove unloads it.
	src := writePlugin(t, t.TempDir(), "weather")
	carapace(t, c.home, "plugin", "install", src).want(t, 0, []string{"installed weather", "weather: healthy"}, nil)
	carapace(t, c.home, "plugin", "remove", "weather").want(t, 0, []string{"removed weather", "unloaded weather from the running core"}, nil)
	if got := c.b.Restarts(); !slices.Equal(got, []string{"weather", "weather", "weather"}) {
		t.Errorf("restarts = %v", got)
	}
	// A plugin the core does not know: install fails to load it, remove
	// has nothing to unload.
	other := writePlugin(t, t.TempDir(), "other")
	carapace(t, c.home, "plugin", "install", other).want(t, 1, []string{"installed other"}, []string{"the running core could not load it"})
	carapace(t, c.home, "plugin", "remove", "other").want(t, 0, []string{"removed other"}, nil)
}

func TestPluginNoCore(t *testing.T) {
	h := controltest.TempHome(t)
	carapace(t, h, "plugin", "restart", "weather").want(t, 1, nil,
		[]string{"carapace: no core is running at " + string(h) + " (start one with `carapace serve`)"})
	carapace(t, h, "plugin", "list").want(t, 0, []string{"no user plugins installed"}, []string{"no core is running"})

	srcs := t.TempDir()
	for _, name := range []string{"good", "tampered", "gone"} {
		carapace(t, h, "plugin", "install", writePlugin(t, srcs, name)).want(t, 0, nil, nil)
	}
	carapace(t, h, "plugin", "install", "--link", writePlugin(t, srcs, "linked")).want(t, 0, nil, nil)
	if err := os.WriteFile(filepath.Join(h.PluginsDir(), "tampered", "handler"), []byte("#!/bin/sh\necho evil\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(h.PluginsDir(), "gone")); err != nil {
		t.Fatal(err)
	}
	// Copied by hand, not installed: no pin.
	writePlugin(t, h.PluginsDir(), "unpinned")
	// A broken one.
	writePlugin(t, h.PluginsDir(), "broken", `{"description": 1}`)
	// Installed as a link to a folder deleted since.
	dangling := writePlugin(t, srcs, "dangling")
	carapace(t, h, "plugin", "install", "--link", dangling).want(t, 0, nil, nil)
	if err := os.RemoveAll(dangling); err != nil {
		t.Fatal(err)
	}
	// Its skills deleted after the install: the agent is not taught its
	// tool, but the core loads it (as the list says, and the core does).
	carapace(t, h, "plugin", "install", writePlugin(t, srcs, "noskills")).want(t, 0, nil, nil)
	if err := os.RemoveAll(filepath.Join(h.PluginsDir(), "noskills", "skills")); err != nil {
		t.Fatal(err)
	}

	r := carapace(t, h, "plugin", "list")
	r.want(t, 0, nil, []string{"built-in plugins are listed only by a running core"})
	rows := map[string]string{}
	for _, line := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			rows[f[0]] = line
		}
	}
	for name, want := range map[string][]string{
		"good":     {"1.2.0", "weather_now", "yes", "ok", "no"},
		"tampered": {"yes", "MISMATCH"},
		"gone":     {"missing", "stale"},
		"linked":   {"yes", "ok", "-> " + filepath.Join(srcs, "linked")},
		"unpinned": {"yes", "none"},
		"broken":   {"no (", "none"},
		"dangling": {"no (1 error)", "-> " + dangling},
		"noskills": {"yes", "ok"},
	} {
		for _, w := range want {
			if !strings.Contains(rows[name], w) {
				t.Errorf("row %q lacks %q:\n%s", name, w, r.stdout)
			}
		}
	}
	for _, w := range []string{"tampered: plugin tampered: the handler's SHA-256 is", "unpinned: not pinned", "broken: error: ",
		"dangling: error: " + filepath.Join(h.PluginsDir(), "dangling") + " is a symbolic link to " + dangling + ", which does not exist",
		"carapace plugin remove unpinned, then carapace plugin install its source folder"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("stdout lacks %q:\n%s", w, r.stdout)
		}
	}

	r = carapace(t, h, "__complete", "plugin", "remove", "")
	for _, name := range []string{"good\n", "linked\n", "unpinned\n"} {
		if !strings.Contains(r.stdout, name) {
			t.Errorf("completion lacks %q:\n%s", name, r.stdout)
		}
	}

	r = carapace(t, h, "plugin", "list", "--json")
	var list []struct {
		Name       string `json:"name"`
		Valid      bool   `json:"valid"`
		Pinned     bool   `json:"pinned"`
		PinMatches bool   `json:"pin_matches"`
		Linked     bool   `json:"linked"`
		Missing    bool   `json:"missing"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("list --json: %v\n%s", err, r.stdout)
	}
	var got []string
	for _, p := range list {
		got = append(got, p.Name)
		if p.Name == "good" && !(p.Valid && p.Pinned && p.PinMatches && !p.Linked) ||
			p.Name == "tampered" && p.PinMatches || p.Name == "linked" && !p.Linked || p.Name == "gone" && !p.Missing {
			t.Errorf("%+v", p)
		}
	}
	if want := []string{"broken", "dangling", "gone", "good", "linked", "noskills", "tampered", "unpinned"}; !slices.Equal(got, want) {
		t.Errorf("plugins %v, want %v", got, want)
	}
}
