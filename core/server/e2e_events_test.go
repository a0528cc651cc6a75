package server_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/install"
	"github.com/carapace-dev/carapace/core/plugin"
)

// kitEvents reads the events an oopkit plugin called name has handled.
func kitEvents(t *testing.T, h home.Dir, name string) []plugin.Event {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(h.PluginsDir(), name, "events.jsonl"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var evs []plugin.Event
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if l == "" {
			continue
		}
		var ev plugin.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("events.jsonl: %v: %q", err, l)
		}
		evs = append(evs, ev)
	}
	return evs
}

// The core's own events reach an out-of-process plugin subscribed to them:
// agent.started and agent.completed for a container session, with the
// session's id, through the real core; topics it did not subscribe to do
// not.
func TestCoreEventsReachPlugins(t *testing.T) {
	c := startCoreWith(t, coreOptions{Config: dockerConfig(t, ""), Setup: func(h home.Dir) {
		src := kitSource(t, "listener", kitManifest("listener", "agent.started", "agent.completed"))
		if _, err := install.Install(h, src, install.Options{}); err != nil {
			t.Fatal(err)
		}
	}})
	_, _, exit, info := runAgent(t, c, control.SessionRequest{Group: "main", Runtime: "docker", Prompt: "tool.invoke.echo {\"message\":\"hi\"}"})
	if exit != 0 {
		t.Fatalf("exit %d", exit)
	}
	var got []string
	waitFor(t, "agent.completed to reach the plugin", func() bool {
		got = got[:0]
		done := false
		for _, ev := range kitEvents(t, c.Home, "listener") {
			if ev.Payload["session"] == info.ID {
				got = append(got, ev.Topic)
				done = done || ev.Topic == "agent.completed"
			}
		}
		return done
	})
	if strings.Join(got, " ") != "agent.started agent.completed" {
		t.Errorf("the plugin got %q for the session, want agent.started then agent.completed", got)
	}
	for _, ev := range kitEvents(t, c.Home, "listener") {
		if ev.Topic != "agent.started" && ev.Topic != "agent.completed" {
			t.Errorf("the plugin got %s, which it did not subscribe to", ev.Topic)
		}
		if ev.Source != "core" || ev.Group != "main" || ev.ID == "" {
			t.Errorf("event %+v: want source core, group main and an id", ev)
		}
	}
}
