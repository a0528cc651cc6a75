package applecontainer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/carapace-dev/carapace/core/runtime"
)

// Run runs s with `container run` in the foreground and returns the exit
// status of its process; the CLI copies the container's output to o.
// Limits.Pids is ignored: Apple's engine has no pids limit.
//
// When ctx is cancelled Run issues `container stop -t 5` (again every
// couple of seconds, since the container may still be being created) and
// waits for `container run` to exit; if it has not within 15 s, Run kills
// the CLI and deletes the container by force. It then returns the exit
// status with an error wrapping ctx's cause. A `container run` that dies of
// a signal leaves a container the CLI cannot remove: Run deletes it by force
// and returns -1. Run returns -1 as well when it could not start the
// container at all. A non-zero status after the CLI said its services are
// not running comes with an error wrapping runtime.ErrUnavailable.
func (e *Engine) Run(ctx context.Context, s runtime.Spec, o runtime.IO) (exit int, err error) {
	if err := s.Check(); err != nil {
		return -1, err
	}
	args, err := runArgs(s)
	if err != nil {
		return -1, err
	}
	if s.Limits.Pids > 0 {
		e.log.Debug("Apple's container has no pids limit; ignoring it", "container", s.Name, "pids", s.Limits.Pids)
	}
	bin, _, err := e.binary()
	if err != nil {
		return -1, err
	}
	if err := context.Cause(ctx); err != nil {
		return -1, fmt.Errorf("run container %s: %w", s.Name, err)
	}
	// Not exec.CommandContext: cancelling must stop the container, not
	// kill the CLI, which would leave the container running.
	cmd := exec.Command(bin, args...)
	// The writers never fail: a copy that stopped would leave the CLI
	// blocked on a full pipe, and the container running.
	stdout, stderr := &keepWriting{w: o.Stdout}, &keepWriting{w: o.Stderr}
	// The end of stderr tells a CLI whose services are down.
	tail := &tailBuffer{max: 4096}
	cmd.Stdout, cmd.Stderr = stdout, io.MultiWriter(stderr, tail)
	cmd.WaitDelay = e.waitDelay
	e.log.Debug("exec", "bin", bin, "args", args)
	if err := cmd.Start(); err != nil {
		return -1, fmt.Errorf("run container %s: %w", s.Name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var waitErr error
	cancelled := false
	select {
	case waitErr = <-done:
	case <-ctx.Done():
		cancelled = true
		waitErr = e.stopRunning(ctx, s.Name, cmd, done)
	}

	ps := cmd.ProcessState
	if ps == nil { // Wait failed before the process was reaped
		return -1, fmt.Errorf("run container %s: %w", s.Name, waitErr)
	}
	if !ps.Exited() { // the CLI died of a signal: its container lives on
		e.forceDelete(ctx, s.Name)
		err := fmt.Errorf("run container %s: container run ended by %s", s.Name, ps)
		if cancelled {
			err = fmt.Errorf("%w: %w", err, context.Cause(ctx))
		}
		return -1, err
	}
	exit = ps.ExitCode()
	var ee *exec.ExitError
	switch {
	case errors.Is(waitErr, exec.ErrWaitDelay):
		e.log.Warn("container run exited but left its output open", "container", s.Name)
	case waitErr != nil && !errors.As(waitErr, &ee):
		return exit, fmt.Errorf("run container %s: %w", s.Name, waitErr)
	}
	if err := errors.Join(stdout.err, stderr.err); err != nil {
		return exit, fmt.Errorf("run container %s: copy its output: %w", s.Name, err)
	}
	if cancelled {
		return exit, fmt.Errorf("container %s stopped: %w", s.Name, context.Cause(ctx))
	}
	if ce := (&cliError{args: args[:1], code: exit, stderr: tail.String()}); exit != 0 && servicesDown(ce) {
		return exit, fmt.Errorf("run container %s: %w (run `container system start`): %w", s.Name, ce, runtime.ErrUnavailable)
	}
	return exit, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// stopRunning stops the container of a `container run` whose context was
// cancelled, and returns the CLI's Wait error. The CLI ends when the
// container's process does.
func (e *Engine) stopRunning(ctx context.Context, name string, cmd *exec.Cmd, done <-chan error) error {
	e.log.Debug("context cancelled: stopping the container", "container", name)
	// A context of their own for the stops: ctx is done.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		// The container may still be being created, and then stop finds
		// nothing ("not found"): retry until the CLI exits.
		for {
			if _, err := e.output(sctx, "stop", "-t", strconv.Itoa(stopSeconds), name); err != nil && sctx.Err() == nil {
				e.log.Debug("container stop", "container", name, "err", err)
			}
			select {
			case <-sctx.Done():
				return
			case <-time.After(e.stopRetry):
			}
		}
	})
	deadline := time.NewTimer(e.stopGrace)
	defer deadline.Stop()
	select {
	case err := <-done:
		return err
	case <-deadline.C:
		e.log.Warn("container run did not exit after container stop; killing it", "container", name, "grace", e.stopGrace)
		if err := cmd.Process.Kill(); err != nil {
			e.log.Debug("kill container run", "err", err)
		}
		return <-done
	}
}

// forceDelete deletes the container name by force, best effort: the
// `container run` that would have removed it (--rm) is gone.
func (e *Engine) forceDelete(ctx context.Context, name string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.stopGrace)
	defer cancel()
	if _, err := e.output(dctx, "delete", "-f", name); err != nil && !isNotFound(err) {
		e.log.Warn("cannot delete the container of a killed container run", "container", name, "err", err)
	}
}

// keepWriting writes to w until a write fails, then discards the rest and
// keeps the error. A nil w discards everything.
type keepWriting struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

func (k *keepWriting) Write(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.w != nil && k.err == nil {
		if _, err := k.w.Write(p); err != nil {
			k.err = err
		}
	}
	return len(p), nil
}
