package server_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/internal/testutil"
)

// TestAuthorPath is a plugin author's whole path with the real binaries:
// plugin create → make test in the new plugin → plugin build → plugin
// install → carapace serve → a call through bin/ipc → the result.
func TestAuthorPath(t *testing.T) {
	for _, tool := range []string{"go", "make"} {
		testutil.Require(t, tool, "the plugin author's path runs it")
	}
	root, err := filepath.Abs("../..") // this repository: the SDK the plugin builds against
	if err != nil {
		t.Fatal(err)
	}
	h := newHome(t)
	work := t.TempDir()
	dir := filepath.Join(work, "weather")

	cli := func(args ...string) string {
		t.Helper()
		out, stderr, code := runCLI(t, h, args...)
		if code != 0 {
			t.Fatalf("carapace %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, stderr)
		}
		return out
	}
	cli("plugin", "create", "weather", "--dir", work, "--sdk", root)

	mk := exec.Command("make", "test")
	mk.Dir = dir
	mk.Env = append(os.Environ(), "GOWORK=off")
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make test in the new plugin: %v\n%s", err, out)
	}

	cli("plugin", "build", dir)
	if fi, err := os.Stat(filepath.Join(dir, "handler")); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("plugin build left no executable handler: %v", err)
	}
	cli("plugin", "validate", dir)
	cli("plugin", "install", dir)

	serve := hostileStart(t, exec.Command(bins.carapace, "--home", string(h), "serve"))
	t.Cleanup(func() {
		_ = serve.cmd.Process.Signal(syscall.SIGTERM)
		serve.wait(t, 30*time.Second)
	})
	waitFor(t, "carapace status to answer", func() bool {
		_, _, code := runCLI(t, h, "status")
		return code == 0
	})

	// The plugin is listed healthy by the running core.
	var list []struct {
		Name, State string
		PID         int
	}
	if err := json.Unmarshal([]byte(cli("plugin", "list", "--json")), &list); err != nil {
		t.Fatalf("plugin list --json: %v", err)
	}
	var found bool
	for _, p := range list {
		if p.Name == "weather" {
			found = p.State == "healthy" && p.PID > 0
		}
	}
	if !found {
		t.Fatalf("weather is not listed healthy with a process: %+v\ncore stderr:\n%s", list, serve.stderr.String())
	}

	out, stderr, code := runCLI(t, h, "run", "--group", "main", "--runtime", "none", "--",
		bins.ipc, "tool.invoke.weather_example", `{"message":"sunny"}`)
	if code != 0 {
		t.Fatalf("ipc call: exit %d\n%s\n%s", code, out, stderr)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil || !strings.Contains(out, "sunny") {
		t.Fatalf("ipc call answered %q (%v)", out, err)
	}
}
