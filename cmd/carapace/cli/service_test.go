package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/cmd/carapace/cli"
	"github.com/carapace-dev/carapace/core/control/controltest"
	"github.com/carapace-dev/carapace/internal/testutil"
)

// carapace service install, status and uninstall, with systemctl answered
// by a fake (there is no user service manager here).
func TestServiceCommands(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the Linux service; the macOS plan is tested in internal/service")
	}
	user := t.TempDir()
	t.Setenv("HOME", user)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(user, "cfg"))
	h := controltest.TempHome(t)
	var ran []string
	active := false
	runner := func(_ context.Context, name string, args ...string) ([]byte, error) {
		cmd := name + " " + strings.Join(args, " ")
		ran = append(ran, cmd)
		switch {
		case strings.Contains(cmd, "restart"):
			active = true
		case strings.Contains(cmd, "disable"):
			active = false
		case strings.Contains(cmd, "is-active") && active:
			return []byte("active\n"), nil
		case strings.Contains(cmd, "is-active"):
			return []byte("inactive\n"), nil
		}
		return nil, nil
	}
	run := func(args ...string) result {
		var out, errb testutil.Buffer
		return carapaceWith(t, cli.Config{Stdout: &out, Stderr: &errb, ServiceRunner: runner}, h, args...)
	}
	unit := filepath.Join(user, "cfg", "systemd", "user", "carapace.service")

	if r := run("service", "status"); r.code != 0 || !strings.Contains(r.stdout, "not installed (carapace service install)") {
		t.Fatalf("status before: %+v", r)
	}
	r := run("service", "install")
	if r.code != 0 || !strings.Contains(r.stdout, "installed "+unit) || !strings.Contains(r.stdout, "journalctl --user -u carapace.service") {
		t.Fatalf("install: %+v", r)
	}
	b, err := os.ReadFile(unit)
	exe, _ := os.Executable()
	exe, _ = filepath.EvalSymlinks(exe)
	if err != nil || !strings.Contains(string(b), `ExecStart="`+exe+`" --home "`+string(h)+`" serve`) {
		t.Fatalf("unit (%v):\n%s", err, b)
	}
	if r := run("service", "status"); r.code != 0 || !strings.Contains(r.stdout, unit+": active") {
		t.Fatalf("status after: %+v", r)
	}
	if r := run("service", "uninstall"); r.code != 0 || !strings.Contains(r.stdout, "removed "+unit) {
		t.Fatalf("uninstall: %+v", r)
	}
	if _, err := os.Stat(unit); err == nil {
		t.Fatal("the unit is still there")
	}
	if !strings.Contains(strings.Join(ran, "\n"), "systemctl --user enable carapace.service") {
		t.Errorf("ran %q", ran)
	}
}
