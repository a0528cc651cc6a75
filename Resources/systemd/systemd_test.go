package systemd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestRenderGolden(t *testing.T) {
	out, err := Render("/home/ann/bin/carapace", "/home/ann/.carapace")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "carapace.service.golden")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(golden, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(want) {
		t.Errorf("rendered unit:\n%s\nwant (%s):\n%s", out, golden, want)
	}
}

func TestRenderEscapes(t *testing.T) {
	out, err := Render(`/home/a "b"/100%/carapace`, `/home/a\b`)
	if err != nil {
		t.Fatal(err)
	}
	if want := `ExecStart="/home/a \"b\"/100%%/carapace" --home "/home/a\\b" serve`; !strings.Contains(string(out), want) {
		t.Errorf("ExecStart not escaped:\n%s", out)
	}
	for _, bad := range [][2]string{{"carapace", "/h"}, {"/bin/carapace", "rel/home"}, {"/bin/car\napace", "/h"}} {
		if _, err := Render(bad[0], bad[1]); err == nil {
			t.Errorf("Render(%q, %q) succeeded", bad[0], bad[1])
		}
	}
}

// TestUnitVerifies has systemd itself check the rendered unit
// (systemd-analyze verify --user), with a broken copy as the positive
// control: the same check must refuse it.
func TestUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze is missing (Debian's systemd): .ci/run installs it")
		}
		t.Skip("systemd-analyze is not installed (apt-get install systemd)")
	}
	trueBin, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out, err := Render(trueBin, filepath.Join(dir, "home"))
	if err != nil {
		t.Fatal(err)
	}
	verify := func(unit []byte) ([]byte, error) {
		path := filepath.Join(dir, Unit)
		if err := os.WriteFile(path, unit, 0o644); err != nil {
			t.Fatal(err)
		}
		run := t.TempDir()
		if err := os.Chmod(run, 0o700); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(analyze, "verify", "--user", path)
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+run)
		return cmd.CombinedOutput()
	}
	if msg, err := verify(out); err != nil {
		t.Fatalf("systemd-analyze refuses the unit: %v\n%s\n%s", err, msg, out)
	}
	broken := strings.Replace(string(out), `"`+trueBin+`"`, `"/nonexistent/carapace"`, 1)
	if msg, err := verify([]byte(broken)); err == nil || !strings.Contains(string(msg), "/nonexistent/carapace") {
		t.Fatalf("systemd-analyze accepts a unit whose binary does not exist (the check proves nothing): %v\n%s", err, msg)
	}
}
