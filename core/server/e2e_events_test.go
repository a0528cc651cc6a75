package server_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/install"
	"github.com/carapace-dev/carapace/core/loader"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
)

// kitEvents reads the events an oopkit plugin called name has handled.
func kitEvents(t *testing.T, h home.Dir, name string) []plugin.Event {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(h.DataDir(name), "events.jsonl"))
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
	_, _, exit, info := runAgent(t, c, api.SessionRequest{Group: "main", Runtime: "docker", Prompt: "tool.invoke.echo {\"message\":\"hi\"}"})
	if exit != 0 {
		t.Fatalf("exit %d", exit)
	}
	var got []string
	waitFor(t, "agent.completed to reach the plugin", func() bool {
		got = got[:0]
		done := false
		for _, ev := range kitEvents(t, c.Home, "listener") {
			if plugintest.Member(&ev, "session") == info.ID {
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

// Paused, the core starts no session for an event (dropped, audited) and
// tells the watchers; resumed, it does again. carapace pause and resume
// are the real CLI.
func TestPauseStopsSessionsForEvents(t *testing.T) {
	kit := &channelKit{}
	c := startCoreWith(t, coreOptions{Config: dockerConfig(t, "[groups.main]\n"), Builtins: func(bs []loader.Builtin) []loader.Builtin {
		return append(bs, loader.Builtin{Name: "chan", Manifest: []byte(channelKitManifest), New: func(loader.Env) plugin.Handler { return kit }})
	}})
	w := watch(t, c)
	if out, errs, code := runCLI(t, c.Home, "pause"); code != 0 {
		t.Fatalf("carapace pause: exit %d\n%s%s", code, out, errs)
	}
	w.find(t, "core.status paused", func(ev api.WatchEvent) bool {
		return ev.Type == api.WatchStatus && ev.Status != nil && ev.Status.Paused
	})
	s := c.Session(t, "main")
	mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.chan_inbound", `{"group":"main","text":"tool.invoke.echo {\"message\":\"while paused\"}"}`))
	waitFor(t, "the paused event to be audited", func() bool {
		for _, e := range c.Audit(t) {
			if e.Stage == audit.StageEvent && e.Outcome == audit.OutcomeRejected && strings.Contains(e.Reason, "paused") {
				return true
			}
		}
		return false
	})
	if n := w.count(func(ev api.WatchEvent) bool {
		return ev.Type == api.WatchSessionOpened && ev.Session.Runtime != "none"
	}); n != 0 {
		t.Fatalf("a container session started while paused")
	}
	if out, errs, code := runCLI(t, c.Home, "resume"); code != 0 {
		t.Fatalf("carapace resume: exit %d\n%s%s", code, out, errs)
	}
	mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.chan_inbound", `{"group":"main","text":"tool.invoke.echo {\"message\":\"resumed\"}"}`))
	w.find(t, "a container session for the event", func(ev api.WatchEvent) bool {
		return ev.Type == api.WatchSessionOpened && ev.Session != nil && ev.Session.Runtime == "docker"
	})
}
