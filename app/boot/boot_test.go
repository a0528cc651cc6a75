package boot_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/app/boot"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/control/controltest"
	"github.com/carapace-dev/carapace/core/home"
)

// bins are the programs the tests start, built once by TestMain: the real
// carapace, and stubborn, a fake core that will not stop.
var bins struct{ carapace, stubborn string }

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "bootbin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins.carapace, bins.stubborn = filepath.Join(dir, "carapace"), filepath.Join(dir, "stubborn")
	for out, pkg := range map[string]string{bins.carapace: "../../cmd/carapace", bins.stubborn: "./testdata/stubborn"} {
		// The core links the memory plugin: SQLite with FTS5, cgo.
		cmd := exec.Command("go", "build", "-tags", "sqlite_fts5", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if b, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", pkg, err, b)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// ensure starts or finds the core of h with the real carapace, and stops
// it when the test ends.
func ensure(t *testing.T, h home.Dir) *boot.Core {
	t.Helper()
	c, err := boot.Ensure(t.Context(), boot.Options{Home: h, Executable: bins.carapace})
	if err != nil {
		t.Fatalf("ensure: %v", err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

// The app starts a core when none answers and stops it on Quit; a second
// app finds that core, and quitting it leaves the core running.
func TestEnsureStartsAndStops(t *testing.T) {
	h := controltest.TempHome(t)
	first := ensure(t, h)
	if !first.Started() || first.PID() <= 0 || first.Exited() == nil {
		t.Fatalf("first: started %v, pid %d", first.Started(), first.PID())
	}
	st, err := first.Client().Status(t.Context())
	if err != nil || st.PID != first.PID() {
		t.Fatalf("status %+v, %v; want pid %d", st, err, first.PID())
	}
	log, err := os.ReadFile(first.LogPath())
	if err != nil || !strings.Contains(string(log), "starts "+bins.carapace+" serve") || filepath.Dir(first.LogPath()) != h.LogsDir() {
		t.Errorf("core log %s: %v\n%s", first.LogPath(), err, log)
	}

	second := ensure(t, h)
	if second.Started() || second.PID() != first.PID() || second.Exited() != nil {
		t.Fatalf("second: started %v, pid %d; want the first's %d, not started", second.Started(), second.PID(), first.PID())
	}
	if err := second.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Client().Status(t.Context()); err != nil {
		t.Fatalf("a core the app did not start stopped with the app: %v", err)
	}

	if err := first.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-first.Exited()
	if err := first.ExitError(); err != nil {
		t.Errorf("the core exited with %v after a graceful stop", err)
	}
	if _, err := first.Client().Status(t.Context()); !errors.Is(err, control.ErrNotRunning) {
		t.Errorf("status after stop: %v, want not running", err)
	}
}

// A core that dies is reported through Exited, and the next Ensure starts
// a new one.
func TestDeathIsReported(t *testing.T) {
	h := controltest.TempHome(t)
	c := ensure(t, h)
	if err := syscall.Kill(c.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.Exited()
	if err := c.ExitError(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("exit error %v, want killed", err)
	}
	again := ensure(t, h)
	if !again.Started() || again.PID() == c.PID() {
		t.Errorf("after the death: started %v pid %d", again.Started(), again.PID())
	}
}

// Stop escalates for a core that will not stop: asked, then SIGTERM, then
// SIGKILL.
func TestStopKillsACoreThatWillNotStop(t *testing.T) {
	h := controltest.TempHome(t)
	c, err := boot.Ensure(t.Context(), boot.Options{Home: h, Executable: bins.stubborn, StopTimeout: 100 * time.Millisecond, KillGrace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Stop(t.Context())
	if err == nil || !strings.Contains(err.Error(), "was killed") {
		t.Errorf("stop: %v, want killed", err)
	}
	select {
	case <-c.Exited():
	default:
		t.Fatal("Stop returned before the core exited")
	}
}

func TestEnsureFails(t *testing.T) {
	script := func(t *testing.T, body string) string {
		p := filepath.Join(t.TempDir(), "carapace")
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, h home.Dir) boot.Options
		want  []string // in the error
		check func(t *testing.T, h home.Dir)
	}{
		{"no binary", func(t *testing.T, h home.Dir) boot.Options {
			return boot.Options{Executable: filepath.Join(t.TempDir(), "carapace")}
		}, []string{"no core is running", "no carapace binary"}, nil},
		{"the core exits at once", func(t *testing.T, h home.Dir) boot.Options {
			if err := h.Ensure(); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(h.Config(), []byte("[core\nnot toml"), 0o600); err != nil {
				t.Fatal(err)
			}
			return boot.Options{Executable: bins.carapace}
		}, []string{"exited before it answered", "core.log ends", "config.toml"}, nil},
		{"the core never answers", func(t *testing.T, h home.Dir) boot.Options {
			return boot.Options{Executable: script(t, `echo $$ > "$0.pid"; echo starting; exec sleep 600`), ReadyTimeout: 300 * time.Millisecond}
		}, []string{"did not answer within 300ms and was stopped", "starting"}, nil},
		{"something else holds the socket", func(t *testing.T, h home.Dir) boot.Options {
			if err := h.Ensure(); err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("unix", h.ControlSocket())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					c.Close() // answers nothing
				}
			}()
			return boot.Options{Executable: script(t, `touch "$0.ran"`)}
		}, []string{"ask the core at"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := controltest.TempHome(t)
			o := tt.setup(t, h)
			o.Home = h
			c, err := boot.Ensure(t.Context(), o)
			if err == nil {
				_ = c.Stop(context.Background())
				t.Fatalf("Ensure succeeded; want an error with %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if _, err := os.Stat(o.Executable + ".ran"); err == nil {
				t.Error("a core was started although something answered on the socket")
			}
			if b, err := os.ReadFile(o.Executable + ".pid"); err == nil {
				pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				waitGone(t, pid)
			}
		})
	}
}

// waitGone waits until process pid is gone (killed and reaped).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for i := 0; ; i++ {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		if i == 500 {
			t.Fatalf("process %d still exists after Ensure gave up on it", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
