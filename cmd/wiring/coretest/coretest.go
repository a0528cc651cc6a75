// Package coretest runs a Carapace core in process for tests: server.Run,
// the code `carapace serve` runs, on a fresh home with a short path (socket
// paths are limited to about 104 bytes), stopped when the test ends.
package coretest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/cmd/wiring"
	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/server"
	"github.com/carapace-dev/carapace/internal/testutil"
)

// Core is a core running in process.
type Core struct {
	Home   home.Dir
	Client *control.Client
	Log    *testutil.Buffer // everything the core logged (JSON lines)

	cancel   context.CancelFunc
	stopped  chan struct{} // closed when Run has returned
	err      error         // Run's error, once stopped is closed
	reported atomic.Bool   // Stop has returned err once
}

// Options vary Start.
type Options struct {
	Config string         // written as config.toml when not empty
	Setup  func(home.Dir) // runs on the home before the core starts
	// Server holds the server options to pass on (Builtins, InitTimeout,
	// BriefTimeout…); Home, Logger, Version and Ready are set by Start.
	// Nil Builtins and NewEngine get the real ones
	// (cmd/wiring); an empty Builtins means none.
	Server server.Options
}

// NewHome makes a fresh home with a short path, removed when the test ends.
func NewHome(t testing.TB) home.Dir {
	t.Helper()
	dir, err := os.MkdirTemp("", "cp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	h := home.Dir(dir)
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	return h
}

// Start starts a core on h. It returns Run's error if the core stops before
// it is ready, and fails the test if it is not ready within 30 s. The core
// logs at debug level to Core.Log, and to stderr as well under go test -v.
func Start(t testing.TB, h home.Dir, o Options) (*Core, error) {
	t.Helper()
	if o.Config != "" {
		if err := os.WriteFile(h.Config(), []byte(o.Config), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if o.Setup != nil {
		o.Setup(h)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Core{Home: h, Client: control.NewClient(h.ControlSocket()), Log: &testutil.Buffer{}, cancel: cancel, stopped: make(chan struct{})}
	var w io.Writer = c.Log
	if testing.Verbose() {
		w = io.MultiWriter(c.Log, os.Stderr)
	}
	ready := make(chan struct{})
	so := o.Server
	so.Home, so.Version = h, "test"
	so.Logger = slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	so.Ready = func(*server.Server) { close(ready) }
	real := wiring.Options(h, so.Logger, so.Version)
	if so.Builtins == nil {
		so.Builtins = real.Builtins
	}
	if so.NewEngine == nil {
		so.NewEngine = real.NewEngine
	}
	go func() { c.err = server.Run(ctx, so); close(c.stopped) }()
	select {
	case <-ready:
	case <-c.stopped:
		cancel()
		return nil, c.err
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("core did not start within 30s")
	}
	t.Cleanup(func() { _ = c.Stop(t) })
	return c, nil
}

// MustStart starts a core on a fresh home and fails the test if it does
// not start.
func MustStart(t testing.TB, o Options) *Core {
	t.Helper()
	c, err := Start(t, NewHome(t), o)
	if err != nil {
		t.Fatalf("core did not start: %v", err)
	}
	return c
}

// Stop cancels the core (what SIGTERM does), waits for Run to return and
// returns its error. It may be called more than once; later calls return
// nil.
func (c *Core) Stop(t testing.TB) error {
	t.Helper()
	c.cancel()
	select {
	case <-c.stopped:
	case <-time.After(60 * time.Second):
		t.Fatal("core did not stop within 60s")
	}
	if c.reported.Swap(true) {
		return nil
	}
	return c.err
}

// Cancel does what SIGTERM does to `carapace serve`: it cancels the core's
// context and returns at once. Stopped tells when the core has stopped.
func (c *Core) Cancel() { c.cancel() }

// Stopped is closed when Run has returned; Stop then returns its error.
func (c *Core) Stopped() <-chan struct{} { return c.stopped }

// Session opens a session of group, closed when the test ends.
func (c *Core) Session(t testing.TB, group string) api.Session {
	t.Helper()
	// The session lives as long as the stream that opened it: the context
	// must outlive the test, not just the call.
	h, err := c.Client.OpenSession(context.Background(), group)
	if err != nil {
		t.Fatalf("open session: %v", err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h.Info()
}

// Audit returns every audit entry written so far.
func (c *Core) Audit(t testing.TB) []audit.Entry {
	t.Helper()
	es, err := audit.Read(c.Home.AuditLog(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return es
}
