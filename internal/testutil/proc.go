package testutil

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// Proc is a child process a test started — typically the test binary
// re-executed as a helper that SIGKILLs itself at a chosen point — waited
// for in the background, its output kept.
type Proc struct {
	Cmd  *exec.Cmd
	Done chan struct{} // closed once the process has ended
	out  Buffer
}

// StartProc starts cmd with its stdout and stderr kept. At the test's end
// it kills the process and waits for it, and when the test failed logs
// what it wrote, under what.
func StartProc(t testing.TB, cmd *exec.Cmd, what string) *Proc {
	t.Helper()
	p := &Proc{Cmd: cmd, Done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &p.out, &p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(p.Done) }()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s output:\n%s", what, p.out.String())
		}
	})
	return p
}

// Output is what the process has written so far.
func (p *Proc) Output() string { return p.out.String() }

// Kill kills the process and waits for it to end.
func (p *Proc) Kill() {
	_ = p.Cmd.Process.Kill()
	<-p.Done
}

// Killed waits up to d for the process to end and fails the test unless
// SIGKILL ended it.
func (p *Proc) Killed(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case <-p.Done:
	case <-time.After(d):
		t.Fatal("the helper did not crash")
	}
	if ws, ok := p.Cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the helper ended with %v, not SIGKILL", p.Cmd.ProcessState)
	}
}
