package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/control/controltest"
)

func TestConfigCommands(t *testing.T) {
	h := controltest.TempHome(t)
	if r := carapace(t, h, "config", "path"); r.code != 0 || strings.TrimSpace(r.stdout) != h.Config() {
		t.Fatalf("config path: %+v", r)
	}
	if err := os.WriteFile(h.Config(), []byte("[runtime]\nengine = \"docker\"\n[groups.main]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := carapace(t, h, "config", "validate"); r.code != 0 || !strings.Contains(r.stdout, ": ok") {
		t.Fatalf("validate a good file: %+v", r)
	}
	if r := carapace(t, h, "config", "get", "runtime.engine"); r.code != 0 || strings.TrimSpace(r.stdout) != `"docker"` {
		t.Fatalf("get runtime.engine: %+v", r)
	}
	if r := carapace(t, h, "config", "get", "sessions.max_per_group"); r.code != 0 || strings.TrimSpace(r.stdout) != "3" {
		t.Fatalf("get a default: %+v", r)
	}
	if r := carapace(t, h, "config", "get", "runtime.engin"); r.code == 0 || !strings.Contains(r.stderr, "did you mean runtime.engine?") {
		t.Fatalf("get a typo: %+v", r)
	}
	if r := carapace(t, h, "config", "show"); r.code != 0 || !strings.Contains(r.stdout, "max_failures = 3") || !strings.Contains(r.stdout, `engine = "docker"`) {
		t.Fatalf("show: %+v", r)
	}
	if r := carapace(t, h, "config", "keys"); r.code != 0 || !strings.Contains(r.stdout, "groups.*.topics\n") {
		t.Fatalf("keys: %+v", r)
	}

	bad := filepath.Join(t.TempDir(), "new.toml")
	if err := os.WriteFile(bad, []byte("[runtime]\nengin = \"docker\"\n[sessions]\nmax_per_grop = 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := carapace(t, h, "config", "validate", bad)
	if r.code != 1 || !strings.Contains(r.stderr, "new.toml: line 2: unknown key runtime.engin (did you mean runtime.engine?)") ||
		!strings.Contains(r.stderr, "new.toml: line 4: unknown key sessions.max_per_grop (did you mean sessions.max_per_group?)") {
		t.Fatalf("validate a bad file: %+v", r)
	}
	if r := carapace(t, h, "config", "validate", filepath.Join(t.TempDir(), "missing.toml")); r.code == 0 {
		t.Fatalf("validate a missing file: %+v", r)
	}
	// The home's config broken: show says which line.
	if err := os.WriteFile(h.Config(), []byte("[runtime]\nengin = \"docker\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := carapace(t, h, "config", "show"); r.code == 0 || !strings.Contains(r.stderr, "line 2: unknown key runtime.engin") {
		t.Fatalf("show a broken config: %+v", r)
	}
}

// TestConfigValidateEveryProblem: validate reports every problem of a file
// that has problems of each kind (an unknown key, a value of the wrong
// type, a value the core refuses), each with its line, and exits 1; an
// edit with several problems lists them all and changes nothing.
func TestConfigValidateEveryProblem(t *testing.T) {
	h := controltest.TempHome(t)
	bad := filepath.Join(t.TempDir(), "new.toml")
	body := "[runtime]\nengine = \"vmware\"\nengin = \"docker\"\n[sessions]\nmax_per_group = \"two\"\nidle_timeout = \"soon\"\n[llm]\nport = 70000\n"
	if err := os.WriteFile(bad, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"new.toml: line 2: runtime.engine \"vmware\": use one of",
		"new.toml: line 3: unknown key runtime.engin (did you mean runtime.engine?)",
		"new.toml: line 5: sessions.max_per_group must be an integer (it is a string)",
		"new.toml: line 6: sessions.idle_timeout: duration \"soon\"",
		"new.toml: line 8: llm.port must be at most 65535",
	}
	r := carapace(t, h, "config", "validate", bad)
	if r.code != 1 {
		t.Fatalf("validate a file with problems: exit %d, want 1: %+v", r.code, r)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("validate does not report %q:\n%s", w, r.stderr)
		}
	}
	if n := strings.Count(r.stderr, "new.toml: line "); n != len(want) {
		t.Errorf("%d problems reported, want %d:\n%s", n, len(want), r.stderr)
	}

	// The same file as an edit: every problem, and config.toml unchanged.
	orig := "[runtime]\nengine = \"docker\"\n"
	if err := os.WriteFile(h.Config(), []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "ed")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ncp '"+bad+"' \"$1\"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VISUAL", "")
	t.Setenv("EDITOR", script)
	r = carapace(t, h, "config", "edit")
	if r.code == 0 || !strings.Contains(r.stderr, "config.toml is unchanged") {
		t.Fatalf("a bad edit: %+v", r)
	}
	for _, w := range want {
		if w = strings.TrimPrefix(w, "new.toml: "); !strings.Contains(r.stderr, w) {
			t.Errorf("edit does not report %q:\n%s", w, r.stderr)
		}
	}
	if after := mustRead(t, h.Config()); after != orig {
		t.Fatalf("a bad edit changed config.toml:\n%s", after)
	}
}

func TestConfigSet(t *testing.T) {
	h := controltest.TempHome(t)
	if err := os.WriteFile(h.Config(), []byte("# mine\n[runtime]\nengine = \"docker\" # keep\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := carapace(t, h, "config", "set", "sessions.max_per_group", "2")
	if r.code != 0 || !strings.Contains(r.stdout, "sessions.max_per_group = 2 in "+h.Config()) || strings.Contains(r.stdout, "restart") {
		t.Fatalf("set with no core running: %+v", r)
	}
	b, _ := os.ReadFile(h.Config())
	if string(b) != "# mine\n[runtime]\nengine = \"docker\" # keep\n\n[sessions]\nmax_per_group = 2\n" {
		t.Fatalf("config.toml:\n%s", b)
	}
	if fi, _ := os.Stat(h.Config()); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	if r := carapace(t, h, "config", "get", "sessions.max_per_group"); strings.TrimSpace(r.stdout) != "2" {
		t.Fatalf("get after set: %+v", r)
	}
	for _, bad := range [][]string{{"runtime.engin", "docker"}, {"runtime.engine", "vmware"}, {"sessions.max_per_group", "-1"}} {
		r := carapace(t, h, append([]string{"config", "set"}, bad...)...)
		if r.code == 0 || r.stderr == "" {
			t.Errorf("set %v: %+v", bad, r)
		}
		if after, _ := os.ReadFile(h.Config()); string(after) != string(b) {
			t.Fatalf("a refused set changed the file:\n%s", after)
		}
	}
	if r := carapace(t, h, "config", "set", "runtime.engin", "docker"); !strings.Contains(r.stderr, "did you mean runtime.engine?") {
		t.Errorf("the typo's suggestion: %+v", r)
	}
	// With a core running, it says a restart is needed, and doctor warns
	// until the core runs the file as it is; set back to what the core
	// started with, nothing waits.
	fc := newFakeCore(t)
	started := []byte("[tasks]\nmax_failures = 3\n")
	if err := os.WriteFile(fc.home.Config(), started, 0o600); err != nil {
		t.Fatal(err)
	}
	fc.b.SetStatus(api.Status{Version: "test", ConfigDigest: config.Digest(started)})
	if checks, _ := doctorChecks(t, func(args ...string) result { return carapace(t, fc.home, args...) }); checks["config in use"].Status != "" {
		t.Fatalf("doctor with the file the core started with: %+v", checks["config in use"])
	}
	if r := carapace(t, fc.home, "config", "set", "tasks.max_failures", "5"); r.code != 0 || !strings.Contains(r.stdout, "restart it for this to take effect: carapace stop && carapace serve") {
		t.Fatalf("set with a core running: %+v", r)
	}
	if checks, _ := doctorChecks(t, func(args ...string) result { return carapace(t, fc.home, args...) }); checks["config in use"].Status != "warn" {
		t.Fatalf("doctor with the file changed: %+v", checks["config in use"])
	}
	if r := carapace(t, fc.home, "config", "set", "tasks.max_failures", "3"); r.code != 0 || !strings.Contains(r.stdout, "already uses config.toml as it is now") {
		t.Fatalf("set back with a core running: %+v", r)
	}
}

func TestConfigEdit(t *testing.T) {
	h := controltest.TempHome(t)
	orig := "# mine\n[runtime]\nengine = \"docker\"\n"
	if err := os.WriteFile(h.Config(), []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	// An "editor" that appends a line to the file it is given.
	editor := func(line string) string {
		script := filepath.Join(t.TempDir(), "ed")
		body := "#!/bin/sh\nprintf '%s\\n' '" + line + "' >> \"$1\"\n"
		if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
			t.Fatal(err)
		}
		return script
	}
	t.Setenv("VISUAL", "")
	t.Setenv("EDITOR", editor("[sessions]\nmax_per_group = 2"))
	r := carapace(t, h, "config", "edit")
	if r.code != 0 || !strings.Contains(r.stdout, "saved "+h.Config()) {
		t.Fatalf("edit: %+v", r)
	}
	b, _ := os.ReadFile(h.Config())
	if string(b) != orig+"[sessions]\nmax_per_group = 2\n" {
		t.Fatalf("config.toml after the edit:\n%s", b)
	}

	t.Setenv("EDITOR", editor("[runtime]\nengin = 1"))
	r = carapace(t, h, "config", "edit")
	if r.code == 0 || !strings.Contains(r.stderr, "config.toml is unchanged") || !strings.Contains(r.stderr, "would not load") {
		t.Fatalf("a bad edit: %+v", r)
	}
	if after, _ := os.ReadFile(h.Config()); string(after) != string(b) {
		t.Fatalf("a bad edit changed config.toml:\n%s", after)
	}
	_, kept, ok := strings.Cut(r.stderr, "your edit is kept in ")
	kept, _, _ = strings.Cut(kept, " ")
	if !ok || !strings.Contains(mustRead(t, kept), "engin = 1") {
		t.Errorf("the bad edit is not kept (%q)", kept)
	}

	t.Setenv("EDITOR", "false")
	if r := carapace(t, h, "config", "edit"); r.code == 0 || !strings.Contains(r.stderr, "the editor (false) failed") {
		t.Fatalf("a failing editor: %+v", r)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
