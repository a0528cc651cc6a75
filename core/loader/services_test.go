package loader

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/plugin"
)

// fakeCore answers Status with when it started.
type fakeCore struct {
	Core
	started time.Time
}

func (c fakeCore) Status(context.Context) control.Status { return control.Status{Started: c.started} }

// TestSurfaceServicesWaitForTheCore checks the surface services against
// the core's start: a plugin in its Init is refused at once (Load waits
// for that Init), a healthy one waits until CoreReady, and after Shutdown
// every call is refused.
func TestSurfaceServicesWaitForTheCore(t *testing.T) {
	started := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	l := New(Options{Core: fakeCore{started: started}})
	st := &pluginState{name: "phone", surface: true}
	svc := &services{l: l, st: st}

	if _, err := svc.CoreStatus(t.Context()); !errors.Is(err, errCoreStarting) {
		t.Fatalf("CoreStatus during Init: %v, want errCoreStarting", err)
	}
	if _, err := (&services{l: l, st: &pluginState{name: "chat", state: stateHealthy}}).CoreStatus(t.Context()); !errors.Is(err, plugin.ErrNotSurface) {
		t.Fatalf("CoreStatus without the capability: %v, want ErrNotSurface", err)
	}

	st.state = stateHealthy
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	_, err := svc.CoreStatus(ctx)
	cancel()
	if !errors.Is(err, errCoreStarting) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CoreStatus before the core is ready, given up: %v", err)
	}

	got := make(chan error, 1)
	go func() {
		cs, err := svc.CoreStatus(context.Background())
		if err == nil && !cs.Started.Equal(started) {
			err = errors.New("wrong status: " + cs.Started.String())
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("CoreStatus answered before the core was ready: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	l.CoreReady()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("CoreStatus still waiting after CoreReady")
	}

	l.Shutdown()
	if _, err := svc.CoreStatus(t.Context()); !errors.Is(err, errCoreStopping) {
		t.Fatalf("CoreStatus after Shutdown: %v, want errCoreStopping", err)
	}
}
