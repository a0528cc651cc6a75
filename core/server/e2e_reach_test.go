package server_test

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/runtime"
	"github.com/carapace-dev/carapace/internal/testutil"
)

// In a real Docker container: an agent that never reaches the core
// (`carapace run -- sleep 600`) is stopped once [sessions] connect_timeout
// has passed, reported on its stream and in the audit log, and its
// container removed; an agent whose first ipc call went through keeps
// running past the timeout.
func TestContainerAgentThatNeverConnectsIsStopped(t *testing.T) {
	// Long enough for the other container to start and make its call on
	// a loaded machine: that one must reach the core in time.
	const timeout = 10 * time.Second
	c := startCore(t, dockerConfig(t, "[sessions]\nconnect_timeout = \""+timeout.String()+"\"\n"))
	ctx := context.Background()

	silent, err := c.Client.Open(ctx, api.SessionRequest{Group: "main", Runtime: "docker", Command: []string{"--exec", "sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	talker, err := c.Client.Open(ctx, api.SessionRequest{Group: "main", Runtime: "docker", Command: []string{"--exec", "sh", "-c",
		`ipc tool.invoke.echo '{"message":"reached"}' && exec sleep 600`}})
	if err != nil {
		t.Fatal(err)
	}
	defer talker.Close()
	talked := make(chan struct{})
	ended := make(chan api.Output, 1)
	var out testutil.Buffer
	var once sync.Once
	go func() {
		for o := range talker.Output() {
			out.Write([]byte(o.Data))
			if strings.Contains(out.String(), "reached") {
				once.Do(func() { close(talked) })
			}
			if o.Exit != nil || o.Error != "" {
				ended <- o
			}
		}
	}()

	last := lastOutput(t, silent)
	for _, want := range []string{"did not reach the core within 10s", "connect_timeout", "$CARAPACE_IPC_ENDPOINT"} {
		if !strings.Contains(last.Error, want) {
			t.Errorf("the silent session ended with %+v; want an error saying %q", last, want)
		}
	}
	if strings.Contains(last.Error, "apple/containerization") {
		t.Errorf("a Docker session blamed Apple's relay: %s", last.Error)
	}
	var audited bool
	for _, e := range c.Audit(t) {
		if e.Session == silent.Info().ID && e.Outcome == audit.OutcomeError && e.Code == "AGENT_UNREACHED" {
			audited = true
		}
	}
	if !audited {
		t.Errorf("no AGENT_UNREACHED audit entry for session %s", silent.Info().ID)
	}
	waitFor(t, "the silent container to be removed", func() bool {
		out, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+runtime.LabelSession+"="+silent.Info().ID).Output()
		return err == nil && strings.TrimSpace(string(out)) == ""
	})

	select {
	case <-talked:
	case o := <-ended:
		t.Fatalf("the session that called ipc ended: %+v", o)
	case <-time.After(time.Minute):
		t.Fatalf("the session's ipc call never answered; its output:\n%s", out.String())
	}
	// A bounded negative: the silent one is gone, so the timeout has
	// passed for this one too (it started later, by little); a reaper's
	// round later it still runs.
	select {
	case o := <-ended:
		t.Fatalf("the session that reached the core was stopped: %+v; its output:\n%s", o, out.String())
	case <-time.After(timeout):
	}
}
