package appstate_test

import (
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/carapace-dev/carapace/core/control/controltest"
	"github.com/carapace-dev/carapace/internal/appstate"
)

func TestReadWrite(t *testing.T) {
	h := controltest.TempHome(t)
	if _, err := appstate.Read(h); !errors.Is(err, appstate.ErrNotRunning) {
		t.Fatalf("no report: %v", err)
	}
	want := appstate.State{PID: os.Getpid(), Notifications: appstate.Notifications{Why: "denied"}, LoginItem: appstate.LoginItem{Supported: true}}
	if err := appstate.Write(h, want); err != nil {
		t.Fatal(err)
	}
	got, err := appstate.Read(h)
	if err != nil || got.Notifications != want.Notifications || got.LoginItem != want.LoginItem || got.PID != want.PID {
		t.Fatalf("Read = %+v, %v", got, err)
	}
	if fi, _ := os.Stat(appstate.Path(h)); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %04o", fi.Mode().Perm())
	}
	// The report of a process that is gone is no report.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	want.PID = cmd.Process.Pid
	if err := appstate.Write(h, want); err != nil {
		t.Fatal(err)
	}
	if _, err := appstate.Read(h); !errors.Is(err, appstate.ErrNotRunning) {
		t.Fatalf("a dead app's report: %v", err)
	}
	// Remove takes only its own process's report.
	appstate.Remove(h, os.Getpid())
	if _, err := os.Stat(appstate.Path(h)); err != nil {
		t.Fatal("Remove took another process's report")
	}
	appstate.Remove(h, cmd.Process.Pid)
	if _, err := os.Stat(appstate.Path(h)); !os.IsNotExist(err) {
		t.Fatalf("Remove left the report: %v", err)
	}
}
