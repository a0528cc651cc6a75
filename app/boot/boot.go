// Package boot finds the home's core or starts one for the menu-bar app.
//
// If a core answers on the home's control socket, the app uses it and
// leaves it running when it quits. If none does, boot starts `carapace
// serve` — the carapace binary beside the app's own executable (in the
// macOS bundle both are in Contents/MacOS/) — with the app's --home, its
// output appended to logs/core.log under the home, and waits until it
// answers. Such a core is the app's: Stop asks it to stop (and kills it if
// it will not), and Exited reports its death so the menu can offer
// Restart.
//
// boot reaches the core only through core/control's client; it never
// links the core.
package boot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// Defaults of Options.
const (
	DefaultReadyTimeout = 60 * time.Second
	DefaultStopTimeout  = 30 * time.Second
)

// DefaultKillGrace is how long Stop waits after SIGTERM before SIGKILL.
const DefaultKillGrace = 5 * time.Second

// Options say which core to find or start.
type Options struct {
	Home home.Dir
	// Executable is the carapace binary to start; "" means the one beside
	// this program's executable (Beside).
	Executable string
	// ReadyTimeout bounds the wait for a started core to answer
	// (DefaultReadyTimeout if 0); one that does not is killed.
	ReadyTimeout time.Duration
	// StopTimeout bounds the wait for a core asked to stop (it finishes
	// in-flight calls first) before Stop sends SIGTERM, and then SIGKILL
	// (DefaultStopTimeout if 0).
	StopTimeout time.Duration
	// KillGrace is how long Stop waits after SIGTERM before SIGKILL
	// (DefaultKillGrace if 0).
	KillGrace time.Duration
	// Client is the client of the home's control socket to use; nil
	// means a new one.
	Client *control.Client
	Logger *slog.Logger // nil: discard
}

// Core is the home's core, found running or started by Ensure.
type Core struct {
	client  *control.Client
	logger  *slog.Logger
	o       Options
	pid     int
	cmd     *exec.Cmd     // nil for a core found running
	exited  chan struct{} // closed when a started core's process has exited
	waitErr error         // the process's end, once exited is closed
	logPath string
	// logOffset is where this start's output begins in the log.
	logOffset int64
}

// Beside returns the path of the program name in the directory of this
// process's executable, symbolic links resolved: the carapace binary
// beside carapace-app.
func Beside(name string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find this program's executable: %w", err)
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	return filepath.Join(filepath.Dir(exe), name), nil
}

// Ensure returns the home's core: the one that answers on its control
// socket, or else one it starts and waits for. An error means neither:
// the binary is missing, the core exited before it answered (the error
// ends with its last lines of output), it did not answer within
// ReadyTimeout, or something other than "not running" came back from the
// socket.
func Ensure(ctx context.Context, o Options) (*Core, error) {
	if o.Home == "" {
		return nil, errors.New("boot: no home")
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = DefaultStopTimeout
	}
	if o.KillGrace <= 0 {
		o.KillGrace = DefaultKillGrace
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Client == nil {
		o.Client = control.NewClient(o.Home.ControlSocket())
	}
	c := &Core{client: o.Client, logger: o.Logger, o: o, logPath: o.Home.Path("logs", "core.log")}
	found, err := c.find(ctx)
	if err != nil || found {
		return c, err
	}
	if err := c.start(); err != nil {
		return nil, err
	}
	if err := c.waitReady(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Client returns the client of the core's control socket.
func (c *Core) Client() *control.Client { return c.client }

// Started reports whether Ensure started this core (and Stop stops it).
func (c *Core) Started() bool { return c.cmd != nil }

// PID is the core's process id.
func (c *Core) PID() int { return c.pid }

// LogPath is the file a started core's output goes to.
func (c *Core) LogPath() string { return c.logPath }

// Exited is closed when a started core's process has exited; ExitError
// then says how. For a core found running it is nil (never closed): its
// death shows as the end of the watch stream and "not running" answers.
func (c *Core) Exited() <-chan struct{} {
	if c.cmd == nil {
		return nil
	}
	return c.exited
}

// ExitError says how a started core's process ended, once Exited is
// closed: nil for exit status 0.
func (c *Core) ExitError() error {
	select {
	case <-c.exited:
		return c.waitErr
	default:
		return nil
	}
}

// find looks for a core that answers. A core that does not answer but
// still holds the home's lock is starting or stopping (a core stopped a
// moment ago shuts its plugins down after its socket has closed): find
// waits, up to ReadyTimeout, until it answers or lets go of the lock.
func (c *Core) find(ctx context.Context) (bool, error) {
	deadline := time.NewTimer(c.o.ReadyTimeout)
	defer deadline.Stop()
	for delay := 20 * time.Millisecond; ; delay = min(2*delay, 500*time.Millisecond) {
		st, err := c.status(ctx)
		switch {
		case err == nil:
			c.pid = st.PID
			c.logger.Info("boot: found a running core", "home", c.o.Home, "pid", st.PID, "version", st.Version)
			return true, nil
		case !errors.Is(err, control.ErrNotRunning):
			return false, fmt.Errorf("ask the core at %s: %w", c.o.Home, err)
		case !c.locked():
			return false, nil
		}
		c.logger.Info("boot: a core holds the home's lock but does not answer; waiting", "home", c.o.Home)
		select {
		case <-deadline.C:
			return false, fmt.Errorf("a core holds the lock of %s but did not answer within %s (is it stuck stopping? carapace status)", c.o.Home, c.o.ReadyTimeout)
		case <-ctx.Done():
			return false, fmt.Errorf("wait for the core: %w", ctx.Err())
		case <-time.After(delay):
		}
	}
}

// locked reports whether a core process holds the home's lock,
// run/core.lock, which the core takes with flock for its whole life
// (core/server/lock.go). The probe takes the lock and lets go at once.
func (c *Core) locked() bool {
	f, err := os.OpenFile(c.o.Home.Path("run", "core.lock"), os.O_RDWR, 0)
	if err != nil {
		return false // no lock file: no core ever ran here
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// status asks the core for its status, bounded.
func (c *Core) status(ctx context.Context) (api.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return c.client.Status(ctx)
}

// start starts carapace serve, its output appended to the log file.
func (c *Core) start() error {
	bin := c.o.Executable
	if bin == "" {
		var err error
		if bin, err = Beside("carapace"); err != nil {
			return err
		}
	}
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() {
		return fmt.Errorf("no core is running at %s, and there is no carapace binary to start one at %s", c.o.Home, bin)
	}
	if err := c.o.Home.Ensure(); err != nil {
		return fmt.Errorf("prepare the home %s: %w", c.o.Home, err)
	}
	if err := os.MkdirAll(filepath.Dir(c.logPath), 0o700); err != nil {
		return fmt.Errorf("create the log folder: %w", err)
	}
	logf, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open the core's log: %w", err)
	}
	offset, _ := logf.Seek(0, io.SeekEnd)
	fmt.Fprintf(logf, "--- carapace-app (pid %d) starts %s serve at %s\n", os.Getpid(), bin, time.Now().UTC().Format(time.RFC3339))
	cmd := exec.Command(bin, "--home", string(c.o.Home), "serve")
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: a Ctrl-C meant for the app does not reach
	// the core behind the app's back (the app stops it in order), and
	// Stop can kill the core's plugin processes with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s serve: %w", bin, err)
	}
	c.cmd, c.pid, c.exited = cmd, cmd.Process.Pid, make(chan struct{})
	c.logger.Info("boot: started a core", "bin", bin, "home", c.o.Home, "pid", c.pid, "log", c.logPath)
	go func() {
		c.waitErr = cmd.Wait()
		logf.Close()
		c.logger.Info("boot: the core exited", "pid", c.pid, "err", c.waitErr)
		close(c.exited)
	}()
	c.logOffset = offset
	return nil
}

// waitReady waits until the started core answers, it exits, ReadyTimeout
// passes or ctx is done; in the last two cases it kills the core.
func (c *Core) waitReady(ctx context.Context) error {
	deadline := time.NewTimer(c.o.ReadyTimeout)
	defer deadline.Stop()
	for delay := 20 * time.Millisecond; ; delay = min(2*delay, 500*time.Millisecond) {
		st, err := c.status(ctx)
		if err == nil {
			if st.PID != c.pid {
				// Another app or a person started a core at the same time
				// and won: use theirs; ours exits by itself ("another core
				// answers"), and is not ours to stop.
				c.logger.Info("boot: another core answered first; using it", "pid", st.PID)
				c.pid, c.cmd = st.PID, nil
			}
			return nil
		}
		if !errors.Is(err, control.ErrNotRunning) {
			c.logger.Debug("boot: the core does not answer yet", "err", err)
		}
		select {
		case <-c.exited:
			// It may have lost a race with another core that now answers.
			if st, err := c.status(ctx); err == nil {
				c.pid, c.cmd = st.PID, nil
				return nil
			}
			return fmt.Errorf("carapace serve exited before it answered (%v); %s ends:\n%s", c.waitErr, c.logPath, c.logTail())
		case <-deadline.C:
			c.kill()
			return fmt.Errorf("carapace serve did not answer within %s and was stopped; %s ends:\n%s", c.o.ReadyTimeout, c.logPath, c.logTail())
		case <-ctx.Done():
			c.kill()
			return fmt.Errorf("wait for the core: %w", ctx.Err())
		case <-time.After(delay):
		}
	}
}

// Stop stops a core Ensure started: it asks the core to stop, waits up to
// StopTimeout (the core lets in-flight calls finish), then sends SIGTERM,
// and after a grace period SIGKILL to the core's process group. A core
// found running is left alone: Stop returns nil at once. Stop returns
// once the process has exited, or when ctx is done.
func (c *Core) Stop(ctx context.Context) error {
	if c.cmd == nil {
		return nil
	}
	select {
	case <-c.exited:
		return nil
	default:
	}
	if err := c.client.Stop(ctx); err != nil && !errors.Is(err, control.ErrNotRunning) {
		c.logger.Warn("boot: asking the core to stop failed; terminating it", "err", err)
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
	}
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-c.exited:
			return true
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	if wait(c.o.StopTimeout) {
		return nil
	}
	if ctx.Err() == nil {
		c.logger.Warn("boot: the core did not stop in time; sending SIGTERM", "pid", c.pid, "waited", c.o.StopTimeout)
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		if wait(c.o.KillGrace) {
			return nil
		}
	}
	c.kill()
	select {
	case <-c.exited:
		return fmt.Errorf("the core (pid %d) did not stop when asked and was killed", c.pid)
	case <-ctx.Done():
		return fmt.Errorf("stop the core (pid %d): %w", c.pid, ctx.Err())
	}
}

// kill kills the started core's process group.
func (c *Core) kill() {
	if c.cmd == nil {
		return
	}
	_ = syscall.Kill(-c.pid, syscall.SIGKILL)
	_ = c.cmd.Process.Kill()
}

// maxTail is how much of the log logTail shows.
const maxTail = 2 << 10

// logTail returns the last lines this start wrote to the log, escaped.
func (c *Core) logTail() string {
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	if int64(len(b)) > c.logOffset {
		b = b[c.logOffset:]
	}
	if len(b) > maxTail {
		b = b[len(b)-maxTail:]
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	for i, l := range lines {
		lines[i] = "  " + textutil.Printable(l)
	}
	return strings.Join(lines, "\n")
}
