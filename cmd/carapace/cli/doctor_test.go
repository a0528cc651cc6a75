package cli_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/cmd/carapace/cli"
	"github.com/carapace-dev/carapace/internal/testutil"
)

// doctorChecks runs carapace doctor --json and returns its checks by name.
func doctorChecks(t *testing.T, run func(args ...string) result) (map[string]cli.Check, int) {
	t.Helper()
	r := run("doctor", "--json")
	var checks []cli.Check
	if err := json.Unmarshal([]byte(r.stdout), &checks); err != nil {
		t.Fatalf("doctor --json: %v\n%+v", err, r)
	}
	out := map[string]cli.Check{}
	for _, c := range checks {
		out[c.Name] = c
	}
	return out, r.code
}

// Each check broken on purpose, its fix command run, the check passing
// again.
func TestDoctor(t *testing.T) {
	fc := newFakeCore(t)
	h := fc.home
	run := func(args ...string) result { return carapace(t, h, args...) }
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.Config(), []byte("[runtime]\nengine = \"docker\"\nimage = \"carapace-agent-doctor-test:none\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sh := func(fix string) {
		t.Helper()
		if out, err := exec.Command("/bin/sh", "-c", fix).CombinedOutput(); err != nil {
			t.Fatalf("the fix %q failed: %v\n%s", fix, err, out)
		}
	}

	checks, code := doctorChecks(t, run)
	if code != 1 {
		t.Fatalf("doctor exited %d with a failing check", code)
	}
	// The fake core runs version "test"; this carapace is 9.9.9.
	if c := checks["core"]; c.Status != "warn" || !strings.Contains(c.Message, "running version test, this carapace is 9.9.9") {
		t.Errorf("core: %+v", c)
	}
	if c := checks["plugins"]; c.Status != "ok" {
		t.Errorf("plugins: %+v", c)
	}
	if c := checks["config"]; c.Status != "ok" {
		t.Errorf("config: %+v", c)
	}

	// The home open to others.
	if err := os.Chmod(string(h), 0o755); err != nil {
		t.Fatal(err)
	}
	checks, _ = doctorChecks(t, run)
	if c := checks["home"]; c.Status != "fail" || !strings.Contains(c.Fix, "chmod 700 "+string(h)) {
		t.Fatalf("home open to others: %+v", c)
	}
	sh(checks["home"].Fix)
	if checks, _ = doctorChecks(t, run); checks["home"].Status != "ok" {
		t.Fatalf("home after its fix: %+v", checks["home"])
	}

	// The model key missing, then stored with the command doctor gives.
	if c := checks["model key"]; c.Status != "fail" || c.Fix != "carapace auth set --llm anthropic" {
		t.Fatalf("model key: %+v", c)
	}
	var out, errb testutil.Buffer
	if r := carapaceWith(t, cli.Config{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader("sk-ant-doctor-test")}, h, "auth", "set", "--llm", "anthropic"); r.code != 0 {
		t.Fatalf("auth set: %+v", r)
	}
	if checks, _ = doctorChecks(t, run); checks["model key"].Status != "ok" {
		t.Fatalf("model key after its fix: %+v", checks["model key"])
	}

	// config.toml broken.
	good, _ := os.ReadFile(h.Config())
	if err := os.WriteFile(h.Config(), []byte("[runtime]\nengin = \"docker\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	checks, _ = doctorChecks(t, run)
	if c := checks["config"]; c.Status != "fail" || !strings.Contains(c.Message, "line 2: unknown key runtime.engin") || c.Fix != "carapace config edit" {
		t.Fatalf("config broken: %+v", c)
	}
	if err := os.WriteFile(h.Config(), good, 0o600); err != nil {
		t.Fatal(err)
	}

	// The engine and the image, against the real Docker.
	if _, err := exec.LookPath("docker"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("docker is missing")
		}
		t.Skip("no docker here for the engine and image checks")
	}
	checks, code = doctorChecks(t, run)
	if c := checks["engine"]; c.Status != "ok" || !strings.HasPrefix(c.Message, "docker ") {
		t.Errorf("engine: %+v", c)
	}
	if c := checks["image"]; c.Status != "fail" || !strings.Contains(c.Message, "carapace-agent-doctor-test:none is missing") {
		t.Errorf("image: %+v", c)
	}
	if code != 1 {
		t.Errorf("doctor exited %d with the image missing", code)
	}
}
