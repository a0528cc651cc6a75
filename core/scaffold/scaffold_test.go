package scaffold_test

import (
	"errors"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/install"
	"github.com/carapace-dev/carapace/core/manifest"
	"github.com/carapace-dev/carapace/core/scaffold"
	"github.com/carapace-dev/carapace/core/skills"
	"github.com/carapace-dev/carapace/internal/testutil"
)

// goldenCases are the plugins whose generated trees are kept in
// testdata/<name>/ as <file>.golden.
var goldenCases = []struct {
	name string
	opts scaffold.Options
}{
	{"default", scaffold.Options{Name: "weather"}},
	{"high", scaffold.Options{Name: "mail-sender", Tool: "send_email", Risk: "high", Module: "example.org/mailer"}},
}

// tree reads every file under dir, keyed by slash-separated relative path.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		out[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), tc.opts.Name)
			if err := scaffold.Create(dir, tc.opts); err != nil {
				t.Fatal(err)
			}
			got := tree(t, dir)
			var paths []string
			for p := range got {
				paths = append(paths, p)
			}
			slices.Sort(paths)
			want := scaffold.Files(tc.opts.Name)
			slices.Sort(want)
			if !slices.Equal(paths, want) {
				t.Errorf("files = %v, want %v (no SDK: go mod tidy must not run)", paths, want)
			}
			golden := filepath.Join("testdata", tc.name)
			if testutil.Update() {
				if err := os.RemoveAll(golden); err != nil {
					t.Fatal(err)
				}
				for p, content := range got {
					path := filepath.Join(golden, filepath.FromSlash(p)+".golden")
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			for p, content := range got {
				want, err := os.ReadFile(filepath.Join(golden, filepath.FromSlash(p)+".golden"))
				if err != nil {
					t.Errorf("%s: %v (run go test ./core/scaffold -update)", p, err)
					continue
				}
				if content != string(want) {
					t.Errorf("%s differs from its golden file (go test ./core/scaffold -update rewrites them):\n%s", p, content)
				}
				if strings.HasSuffix(p, ".go") {
					if formatted, err := format.Source([]byte(content)); err != nil || string(formatted) != content {
						t.Errorf("%s is not gofmt'ed (%v)", p, err)
					}
				}
			}
		})
	}
}

func TestGoModWithoutSDK(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "weather")
	if err := scaffold.Create(dir, scaffold.Options{Name: "weather"}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
	for _, want := range []string{"module example.com/carapace-plugin-weather\n", "go 1.26\n",
		"require github.com/carapace-dev/carapace v0.0.0-00010101000000-000000000000\n", "// replace github.com/carapace-dev/carapace => /path/to/carapace"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("go.mod lacks %q:\n%s", want, b)
		}
	}
	if strings.Contains(string(b), "\nreplace") {
		t.Errorf("go.mod has a replace directive without an SDK:\n%s", b)
	}
}

func TestCreateRefuses(t *testing.T) {
	sdk := repoRoot(t)
	tests := []struct {
		name string
		opts scaffold.Options
		want []string
	}{
		{"name with underscore", scaffold.Options{Name: "My_Plugin"}, []string{`use "my-plugin"`}},
		{"name with a slash", scaffold.Options{Name: "../x"}, []string{"plugin name"}},
		{"empty name", scaffold.Options{Name: ""}, []string{"plugin name is empty"}},
		{"reserved name", scaffold.Options{Name: "core"}, []string{"reserved"}},
		{"dotted tool", scaffold.Options{Name: "weather", Tool: "weather.now"}, []string{`use "weather_now"`}},
		{"dashed tool", scaffold.Options{Name: "weather", Tool: "weather-now"}, []string{`use "weather_now"`}},
		{"reserved tool", scaffold.Options{Name: "weather", Tool: "list_tools"}, []string{"reserved"}},
		{"risk", scaffold.Options{Name: "weather", Risk: "medium"}, []string{`risk "medium"`}},
		{"module", scaffold.Options{Name: "weather", Module: "a b"}, []string{"module path"}},
		{"module escape", scaffold.Options{Name: "weather", Module: "example.com/../x"}, []string{"module path"}},
		{"sdk not a tree", scaffold.Options{Name: "weather", SDKDir: t.TempDir()}, []string{"not a Carapace source tree"}},
		{"sdk is a sub-folder", scaffold.Options{Name: "weather", SDKDir: filepath.Join(sdk, "core")}, []string{"not a Carapace source tree"}},
		{"default tool too long", scaffold.Options{Name: strings.Repeat("a", 60)}, []string{"--tool"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			err := scaffold.Create(filepath.Join(parent, "p"), tt.opts)
			if !errors.Is(err, scaffold.ErrInvalid) {
				t.Fatalf("Create: %v, want ErrInvalid", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
			if entries, _ := os.ReadDir(parent); len(entries) != 0 {
				t.Error("Create wrote something")
			}
		})
	}
}

func TestCreateTarget(t *testing.T) {
	t.Run("not empty", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := scaffold.Create(dir, scaffold.Options{Name: "weather"}); !errors.Is(err, scaffold.ErrNotEmpty) {
			t.Fatalf("Create: %v, want ErrNotEmpty", err)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "main.go")); string(b) != "mine" {
			t.Error("an existing file was overwritten")
		}
	})
	t.Run("a file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := scaffold.Create(path, scaffold.Options{Name: "weather"}); !errors.Is(err, scaffold.ErrNotEmpty) {
			t.Fatalf("Create: %v, want ErrNotEmpty", err)
		}
	})
	t.Run("empty folder", func(t *testing.T) {
		dir := t.TempDir()
		if err := scaffold.Create(dir, scaffold.Options{Name: "weather"}); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "skills", "weather.md")); err != nil {
			t.Error(err)
		}
	})
}

// repoRoot is the Carapace source tree this test runs in.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := scaffold.CheckSDK(root); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestGeneratedPluginWorks creates plugins against this source tree and
// builds, vets and tests them with the real toolchain, then validates them
// as carapace plugin validate does: the scaffold must work unchanged.
func TestGeneratedPluginWorks(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("this test needs the go command: %v", err)
	}
	sdk := repoRoot(t)
	tests := []struct {
		name     string
		opts     scaffold.Options
		warnings []string // the manifest problems expected, all warnings
	}{
		{"low", scaffold.Options{Name: "weather"}, nil},
		{"high", scaffold.Options{Name: "mail-sender", Tool: "send_email", Risk: "high"}, []string{"/provides/tools/0/risk_level"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), tt.opts.Name)
			opts := tt.opts
			opts.SDKDir = sdk
			if err := scaffold.Create(dir, opts); err != nil {
				t.Fatal(err)
			}
			gomod, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
			if !strings.Contains(string(gomod), "replace github.com/carapace-dev/carapace => "+sdk) {
				t.Errorf("go.mod has no replace directive for %s:\n%s", sdk, gomod)
			}
			if _, err := os.Stat(filepath.Join(dir, "go.sum")); err != nil {
				t.Errorf("go mod tidy wrote no go.sum: %v", err)
			}
			run := func(env []string, args ...string) string {
				t.Helper()
				cmd := exec.Command(goBin, args...)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), append(env, "GOWORK=off")...)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
				}
				return string(out)
			}
			run([]string{"CGO_ENABLED=0"}, "build", "-trimpath", "-o", "handler", ".")
			run(nil, "vet", "./...")
			if out := run(nil, "test", "-count=1", "-v", "./..."); !strings.Contains(out, "--- PASS: TestConformance") {
				t.Errorf("the generated tests did not run the conformance test:\n%s", out)
			}

			m, problems := manifest.Check(dir, manifest.Options{})
			var got []string
			for _, p := range problems {
				if !p.Warning {
					t.Errorf("manifest error: %s", p)
				}
				got = append(got, p.Pointer)
			}
			if !slices.Equal(got, tt.warnings) {
				t.Errorf("manifest problems at %q, want %q: %v", got, tt.warnings, problems)
			}
			if m == nil {
				t.Fatal("no manifest")
			}
			if ws := skills.Check(m, os.DirFS(filepath.Join(dir, "skills"))); len(ws) != 0 {
				t.Errorf("skill warnings: %v", ws)
			}
			if ps := install.CheckLayout(dir); len(ps) != 0 {
				t.Errorf("layout problems after the build: %v", ps)
			}

			// The handler explains itself when run by hand.
			out, err := exec.Command(filepath.Join(dir, "handler")).CombinedOutput()
			if err == nil || !strings.Contains(string(out), "carapace plugin install") {
				t.Errorf("running the handler by hand: %v\n%s", err, out)
			}
		})
	}
}

// fakeSDK is a folder that passes CheckSDK but holds no SDK, so that go mod
// tidy fails (without the network: GOPROXY=off).
func fakeSDK(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "core", "plugin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module github.com/carapace-dev/carapace\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestTidyFailure(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("this test needs the go command: %v", err)
	}
	t.Setenv("GOPROXY", "off")
	t.Setenv("GOFLAGS", "")
	dir := filepath.Join(t.TempDir(), "weather")
	err := scaffold.Create(dir, scaffold.Options{Name: "weather", SDKDir: fakeSDK(t)})
	te, ok := errors.AsType[*scaffold.TidyError](err)
	if !ok || te.Dir != dir || !strings.Contains(te.Output, "core/plugin") {
		t.Fatalf("Create: %v, want a *TidyError with go's output", err)
	}
	if !strings.Contains(err.Error(), "the plugin is written") {
		t.Errorf("error: %v", err)
	}
	if got := tree(t, dir); len(got) != len(scaffold.Files("weather")) {
		t.Errorf("files left: %d, want all %d", len(got), len(scaffold.Files("weather")))
	}
}
