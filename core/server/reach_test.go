package server_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/control"
)

// An agent that never reaches the core is stopped once [sessions]
// connect_timeout has passed, with the reason on its stream, in the log
// and in the audit log; one that connected is left alone. On Apple the
// reason names the relay's flaw.
func TestUnreachedAgentIsStopped(t *testing.T) {
	const timeout = 300 * time.Millisecond
	silent := &fakeEngine{info: homebrewApple}
	c := startFakeCore(t, silent, fmt.Sprintf("[sessions]\nconnect_timeout = %q\n", timeout))
	ctx := context.Background()
	h, err := c.Client.Open(ctx, api.SessionRequest{Group: "main", Runtime: "container", Command: []string{"sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	last := lastOutput(t, h)
	for _, want := range []string{"did not reach the core within 300ms", "connect_timeout", "apple/containerization #867"} {
		if !strings.Contains(last.Error, want) {
			t.Errorf("the session ended with %+v; want an error saying %q", last, want)
		}
	}
	id := h.Info().ID
	var audited bool
	for _, e := range c.Audit(t) {
		if e.Session == id && e.Stage == audit.StageSession && e.Outcome == audit.OutcomeError && e.Code == "AGENT_UNREACHED" &&
			strings.Contains(e.Reason, "did not reach the core") {
			audited = true
		}
	}
	if !audited {
		t.Errorf("no AGENT_UNREACHED audit entry for session %s", id)
	}
	if !strings.Contains(c.Log.String(), "agent never reached the core") {
		t.Errorf("not logged:\n%s", c.Log.String())
	}
}

func TestReachedAgentIsNotStopped(t *testing.T) {
	const timeout = 300 * time.Millisecond
	agent := &fakeEngine{info: homebrewApple, dial: true}
	c := startFakeCore(t, agent, fmt.Sprintf("[sessions]\nconnect_timeout = %q\n", timeout))
	h, err := c.Client.Open(context.Background(), api.SessionRequest{Group: "main", Runtime: "container", Command: []string{"sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	select {
	case o, ok := <-h.Output():
		t.Fatalf("a session whose agent connected ended: %+v (open %v)", o, ok)
	case <-time.After(4 * timeout): // a bounded negative: well past the timeout
	}
	if _, stopped := agent.vanished("carapace-" + h.Info().ID); stopped {
		t.Error("its container was stopped")
	}
}

// A session's sockets stay while its container is stopping: on Apple's
// runtime a connect to a socket that is gone ends the relay for good
// (apple/containerization #867). Both the IPC and the model API socket
// are checked, for a session closed by its client and for one stopped by
// the core.
func TestSocketsOutliveTheirContainer(t *testing.T) {
	tests := []struct {
		name  string
		extra string
		close bool // the client closes the session; else the core stops it
	}{
		{"closed by the client", "", true},
		{"stopped as unreached", "[sessions]\nconnect_timeout = \"200ms\"\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &fakeEngine{info: homebrewApple, watch: 300 * time.Millisecond}
			c := startFakeCore(t, e, tt.extra)
			h, err := c.Client.Open(context.Background(), api.SessionRequest{Group: "main", Runtime: "container", Command: []string{"sleep", "600"}})
			if err != nil {
				t.Fatal(err)
			}
			name := "carapace-" + h.Info().ID
			socks, _ := filepath.Glob(filepath.Join(string(c.Home), "run", "sessions", h.Info().ID+"*.sock"))
			if len(socks) != 2 {
				t.Fatalf("session sockets %q, want the IPC and the model API socket", socks)
			}
			if tt.close {
				if err := h.Close(); err != nil && !errors.Is(err, context.Canceled) {
					t.Fatal(err)
				}
			} else {
				lastOutput(t, h)
				defer h.Close()
			}
			waitFor(t, "the container to stop", func() bool { _, stopped := e.vanished(name); return stopped })
			if gone, _ := e.vanished(name); len(gone) != 0 {
				t.Errorf("sockets removed while the container was stopping: %q", gone)
			}
		})
	}
}

// lastOutput reads h's stream to its end and returns its last item,
// failing the test if the stream has not ended within a minute.
func lastOutput(t *testing.T, h *control.SessionHandle) api.Output {
	t.Helper()
	var last api.Output
	timeout := time.After(time.Minute)
	for {
		select {
		case o, ok := <-h.Output():
			if !ok {
				return last
			}
			last = o
		case <-timeout:
			t.Fatalf("the session's stream did not end; last %+v", last)
		}
	}
}
