package desktoptest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Build builds the main package pkg (a directory or import path, as for
// go build, relative to the test's package directory) into a temporary
// directory and returns the binary's path. It runs the go command with
// the test's environment (GOFLAGS and its build tags included) but never
// with -race, whatever the test binary was built with: a program built
// here may link what must stay out of -race (fyne.io/systray).
func Build(t testing.TB, pkg string, flags ...string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("desktop: building %s needs the go command: %v", pkg, err)
	}
	bin := filepath.Join(t.TempDir(), filepath.Base(strings.TrimSuffix(pkg, "/")))
	cmd := exec.Command(goTool, append(append([]string{"build", "-o", bin}, flags...), pkg)...)
	goflags := slices.DeleteFunc(strings.Fields(os.Getenv("GOFLAGS")), func(f string) bool { return f == "-race" || f == "-race=true" })
	cmd.Env = append(os.Environ(), "GOFLAGS="+strings.Join(goflags, " "))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("desktop: go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// Process is a program running on a test's bus.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when it has exited
	err  error         // its exit, once done is closed

	mu      sync.Mutex
	out     []byte // stdout and stderr, interleaved as written
	changes notifier
}

// StartProcess starts cmd on the bus at addr: its environment (cmd.Env,
// or the test's when nil) gets DBUS_SESSION_BUS_ADDRESS=addr in place of
// any other; stdout and stderr are collected for WaitOutput. It fails the
// test if cmd does not start; the process is killed when the test ends, and
// its output logged if the test failed.
func StartProcess(t testing.TB, addr string, cmd *exec.Cmd) *Process {
	t.Helper()
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "DBUS_SESSION_BUS_ADDRESS=") })
	cmd.Env = append(env, "DBUS_SESSION_BUS_ADDRESS="+addr)
	p := &Process{cmd: cmd, done: make(chan struct{})}
	cmd.Stdout = (*processOutput)(p)
	cmd.Stderr = (*processOutput)(p)
	if err := cmd.Start(); err != nil {
		t.Fatalf("desktop: start %s: %v", cmd.Path, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
		p.mu.Lock()
		p.changes.changed()
		p.mu.Unlock()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("%s said:\n%s", filepath.Base(cmd.Path), p.Output())
		}
	})
	return p
}

// processOutput collects a Process's output.
type processOutput Process

// Write implements io.Writer.
func (o *processOutput) Write(b []byte) (int, error) {
	p := (*Process)(o)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out = append(p.out, b...)
	p.changes.changed()
	return len(b), nil
}

// PID returns the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Output returns everything the process wrote so far, stdout and stderr.
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return string(p.out)
}

// WaitOutput waits until cond holds for the process's output so far and
// returns that output. It fails the test, showing the output, when the
// process exits first or after Timeout.
func (p *Process) WaitOutput(t testing.TB, what string, cond func(output string) bool) string {
	t.Helper()
	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	for {
		p.mu.Lock()
		out, changed := string(p.out), p.changes.wait()
		p.mu.Unlock()
		if cond(out) {
			return out
		}
		select {
		case <-p.done:
			if out := p.Output(); cond(out) {
				return out
			}
			t.Fatalf("desktop: %s exited (%v) before it wrote %s; it wrote:\n%s", filepath.Base(p.cmd.Path), p.err, what, p.Output())
		case <-changed:
		case <-timer.C:
			t.Fatalf("desktop: %s did not write %s within %s; it wrote:\n%s", filepath.Base(p.cmd.Path), what, Timeout, out)
		}
	}
}

// WaitLine waits until the process has written a line equal to line, n
// times in all (n < 1 counts as 1).
func (p *Process) WaitLine(t testing.TB, line string, n int) {
	t.Helper()
	p.WaitOutput(t, fmt.Sprintf("the line %q (%d times)", line, max(n, 1)), func(out string) bool {
		count := 0
		for l := range strings.Lines(out) {
			if strings.TrimRight(l, "\r\n") == line {
				count++
			}
		}
		return count >= max(n, 1)
	})
}

// Wait waits until the process exits and returns how (nil for status 0);
// it fails the test if the process still runs after Timeout.
func (p *Process) Wait(t testing.TB) error {
	t.Helper()
	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	select {
	case <-p.done:
		return p.err
	case <-timer.C:
		t.Fatalf("desktop: %s still runs after %s; it wrote:\n%s", filepath.Base(p.cmd.Path), Timeout, p.Output())
		return nil
	}
}
