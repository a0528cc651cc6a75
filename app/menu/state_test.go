package menu

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
)

var t0 = time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)

func conf(id, tool, args string) api.Confirmation {
	c := api.Confirmation{ID: id, Tool: tool, Group: "main", Session: "s-1", ArgsHash: hash(id),
		CreatedAt: t0, ExpiresAt: t0.Add(5 * time.Minute)}
	if args != "" {
		c.Arguments = json.RawMessage(args)
	}
	return c
}

// hash is a fake args_hash, 64 hex digits, distinct per id.
func hash(id string) string {
	h := []byte("0000000000000000000000000000000000000000000000000000000000000000")
	copy(h, id)
	return string(h)
}

func sess(id, group string) api.Session {
	return api.Session{ID: id, Group: group, Runtime: "docker", Started: t0}
}

func resolved(c api.Confirmation, decision string) api.Confirmation {
	c.Decision, c.Surface = decision, "cli"
	return c
}

func omitted(c api.Confirmation) api.Confirmation {
	c.Arguments, c.ArgumentsOmitted = nil, true
	return c
}

func ev(typ string, f func(*api.WatchEvent)) api.WatchEvent {
	e := api.WatchEvent{Type: typ, Time: t0}
	if f != nil {
		f(&e)
	}
	return e
}

func snapshot(st api.Status, cs []api.Confirmation, ss []api.Session) api.WatchEvent {
	return ev(api.WatchSnapshot, func(e *api.WatchEvent) {
		e.Status, e.Confirmations, e.Sessions, e.Plugins = &st, cs, ss, st.Plugins
	})
}

func requested(c api.Confirmation) api.WatchEvent {
	return ev(api.WatchConfirmationRequested, func(e *api.WatchEvent) { e.Confirmation = &c })
}

func resolvedEv(c api.Confirmation) api.WatchEvent {
	return ev(api.WatchConfirmationResolved, func(e *api.WatchEvent) { e.Confirmation = &c })
}

func opened(s api.Session) api.WatchEvent {
	return ev(api.WatchSessionOpened, func(e *api.WatchEvent) { e.Session = &s })
}

func closed(s api.Session) api.WatchEvent {
	return ev(api.WatchSessionClosed, func(e *api.WatchEvent) { e.Session = &s })
}

func statusEv(st api.Status) api.WatchEvent {
	return ev(api.WatchStatus, func(e *api.WatchEvent) { e.Status = &st })
}

func health(p api.PluginStatus) api.WatchEvent {
	return ev(api.WatchPluginHealth, func(e *api.WatchEvent) { e.Plugin = &p })
}

// step is one transition of a State.
type step func(State) State

func apply(e api.WatchEvent) step { return func(s State) State { return s.Apply(e) } }

// summary is the part of a State the reducer tests compare.
type summary struct {
	Core          Core
	Problem       string
	Confirmations []string // ids
	Omitted       []string // ids whose arguments are not loaded
	Sessions      []string
	Paused        bool
	Draining      bool
	Plugins       []string // name:state
	Pending, Live int      // the status's counts
	Version       string
}

func summarize(s State) summary {
	var m summary
	m.Core, m.Problem, m.Paused, m.Draining, m.Version = s.Core, s.Problem, s.Status.Paused, s.Status.Draining, s.Status.Version
	for _, c := range s.Confirmations {
		m.Confirmations = append(m.Confirmations, c.ID)
		if c.ArgumentsOmitted {
			m.Omitted = append(m.Omitted, c.ID)
		}
	}
	for _, x := range s.Sessions {
		m.Sessions = append(m.Sessions, x.ID)
	}
	for _, p := range s.Status.Plugins {
		m.Plugins = append(m.Plugins, p.Name+":"+p.State)
	}
	m.Pending, m.Live = s.Status.PendingConfirmations, s.Status.Sessions
	return m
}

func TestApply(t *testing.T) {
	a, b, c := conf("aaaa", "send_email", `{"to":"x"}`), conf("bbbb", "echo_confirm", `{"message":"y"}`), conf("cccc", "rm", `{}`)
	s1, s2 := sess("s-1", "main"), sess("s-2", "work")
	st := api.Status{Version: "1.2.3", Plugins: []api.PluginStatus{{Name: "echo", Healthy: true, State: "healthy"}}}
	tests := []struct {
		name  string
		steps []step
		want  summary
	}{
		{"nothing yet", nil, summary{Core: CoreStarting}},
		{"snapshot", []step{apply(snapshot(st, []api.Confirmation{a, b}, []api.Session{s1}))},
			summary{Core: CoreRunning, Confirmations: []string{"aaaa", "bbbb"}, Sessions: []string{"s-1"}, Plugins: []string{"echo:healthy"}, Pending: 2, Live: 1, Version: "1.2.3"}},
		{"a snapshot's resolved confirmations are not pending", []step{apply(snapshot(st, []api.Confirmation{a, resolved(b, "approved")}, nil))},
			summary{Core: CoreRunning, Confirmations: []string{"aaaa"}, Plugins: []string{"echo:healthy"}, Pending: 1, Version: "1.2.3"}},
		{"requested appends in order", []step{apply(snapshot(st, nil, nil)), apply(requested(a)), apply(requested(b)), apply(requested(c))},
			summary{Core: CoreRunning, Confirmations: []string{"aaaa", "bbbb", "cccc"}, Plugins: []string{"echo:healthy"}, Pending: 3, Version: "1.2.3"}},
		{"a change seen in the snapshot and after it counts once", []step{apply(snapshot(st, []api.Confirmation{a}, []api.Session{s1})), apply(requested(a)), apply(opened(s1))},
			summary{Core: CoreRunning, Confirmations: []string{"aaaa"}, Sessions: []string{"s-1"}, Plugins: []string{"echo:healthy"}, Pending: 1, Live: 1, Version: "1.2.3"}},
		{"resolved removes", []step{apply(snapshot(st, []api.Confirmation{a, b}, nil)), apply(resolvedEv(resolved(a, "denied")))},
			summary{Core: CoreRunning, Confirmations: []string{"bbbb"}, Plugins: []string{"echo:healthy"}, Pending: 1, Version: "1.2.3"}},
		{"a resolved one never seen changes nothing", []step{apply(snapshot(st, []api.Confirmation{a}, nil)), apply(resolvedEv(resolved(c, "expired")))},
			summary{Core: CoreRunning, Confirmations: []string{"aaaa"}, Plugins: []string{"echo:healthy"}, Pending: 1, Version: "1.2.3"}},
		{"requested after resolved does not resurrect", []step{apply(snapshot(st, nil, nil)), apply(requested(resolved(a, "approved")))},
			summary{Core: CoreRunning, Plugins: []string{"echo:healthy"}, Version: "1.2.3"}},
		{"arguments left out stay marked", []step{apply(snapshot(st, nil, nil)), apply(requested(omitted(a)))},
			summary{Core: CoreRunning, Confirmations: []string{"aaaa"}, Omitted: []string{"aaaa"}, Plugins: []string{"echo:healthy"}, Pending: 1, Version: "1.2.3"}},
		{"fetched arguments fill in", []step{apply(snapshot(st, nil, nil)), apply(requested(omitted(a))), func(s State) State { return s.WithArguments(a) }},
			summary{Core: CoreRunning, Confirmations: []string{"aaaa"}, Plugins: []string{"echo:healthy"}, Pending: 1, Version: "1.2.3"}},
		{"fetched arguments of another hash are refused", []step{apply(snapshot(st, nil, nil)), apply(requested(omitted(a))), func(s State) State {
			x := a
			x.ArgsHash = hash("zzzz")
			return s.WithArguments(x)
		}}, summary{Core: CoreRunning, Confirmations: []string{"aaaa"}, Omitted: []string{"aaaa"}, Plugins: []string{"echo:healthy"}, Pending: 1, Version: "1.2.3"}},
		{"loaded arguments survive a repeat without them", []step{apply(snapshot(st, nil, nil)), apply(requested(omitted(a))), func(s State) State { return s.WithArguments(a) }, apply(requested(omitted(a)))},
			summary{Core: CoreRunning, Confirmations: []string{"aaaa"}, Plugins: []string{"echo:healthy"}, Pending: 1, Version: "1.2.3"}},
		{"sessions open and close", []step{apply(snapshot(st, nil, nil)), apply(opened(s1)), apply(opened(s2)), apply(closed(s1))},
			summary{Core: CoreRunning, Sessions: []string{"s-2"}, Plugins: []string{"echo:healthy"}, Live: 1, Version: "1.2.3"}},
		{"paused", []step{apply(snapshot(st, nil, nil)), apply(statusEv(api.Status{Version: "1.2.3", Paused: true, Plugins: st.Plugins}))},
			summary{Core: CoreRunning, Paused: true, Plugins: []string{"echo:healthy"}, Version: "1.2.3"}},
		{"draining", []step{apply(snapshot(st, nil, nil)), apply(statusEv(api.Status{Version: "1.2.3", Draining: true}))},
			summary{Core: CoreRunning, Draining: true, Version: "1.2.3"}},
		{"plugin health replaces by name and appends new ones", []step{apply(snapshot(st, nil, nil)),
			apply(health(api.PluginStatus{Name: "echo", State: "crashed"})), apply(health(api.PluginStatus{Name: "memory", Healthy: true, State: "healthy"}))},
			summary{Core: CoreRunning, Plugins: []string{"echo:crashed", "memory:healthy"}, Version: "1.2.3"}},
		{"end keeps what was shown and says why", []step{apply(snapshot(st, []api.Confirmation{a}, []api.Session{s1})), apply(ev(api.WatchEnd, func(e *api.WatchEvent) { e.Error = "cut off" }))},
			summary{Core: CoreConnecting, Problem: "the core ended the watch: cut off", Confirmations: []string{"aaaa"}, Sessions: []string{"s-1"}, Plugins: []string{"echo:healthy"}, Pending: 1, Live: 1, Version: "1.2.3"}},
		{"end without a reason", []step{apply(snapshot(st, nil, nil)), apply(ev(api.WatchEnd, nil))},
			summary{Core: CoreConnecting, Problem: "the core ended the watch: no reason given", Plugins: []string{"echo:healthy"}, Version: "1.2.3"}},
		{"a fresh snapshot after an end replaces everything", []step{apply(snapshot(st, []api.Confirmation{a}, []api.Session{s1})), apply(ev(api.WatchEnd, nil)),
			apply(snapshot(st, []api.Confirmation{b}, nil))},
			summary{Core: CoreRunning, Confirmations: []string{"bbbb"}, Plugins: []string{"echo:healthy"}, Pending: 1, Version: "1.2.3"}},
		{"the core died: nothing approvable remains", []step{apply(snapshot(st, []api.Confirmation{a}, []api.Session{s1})), apply(statusEv(api.Status{Version: "1.2.3", Paused: true})),
			func(s State) State { return s.NotRunning("the core exited: signal: killed") }},
			summary{Core: CoreNotRunning, Problem: "the core exited: signal: killed", Version: "1.2.3"}},
		{"unknown types and empty events change nothing", []step{apply(snapshot(st, []api.Confirmation{a}, nil)), apply(ev("task.fired", nil)),
			apply(ev(api.WatchConfirmationRequested, nil)), apply(ev(api.WatchSessionOpened, nil)), apply(ev(api.WatchStatus, nil))},
			summary{Core: CoreRunning, Confirmations: []string{"aaaa"}, Plugins: []string{"echo:healthy"}, Pending: 1, Version: "1.2.3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s State
			for _, f := range tt.steps {
				s = f(s)
			}
			if got := summarize(s); !equalSummary(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func equalSummary(a, b summary) bool {
	return a.Core == b.Core && a.Problem == b.Problem && slices.Equal(a.Confirmations, b.Confirmations) && slices.Equal(a.Omitted, b.Omitted) &&
		slices.Equal(a.Sessions, b.Sessions) && a.Paused == b.Paused && a.Draining == b.Draining && slices.Equal(a.Plugins, b.Plugins) &&
		a.Pending == b.Pending && a.Live == b.Live && a.Version == b.Version
}

// Apply returns a new State: the one it was called on, which another
// goroutine may hold, is never changed.
func TestApplyDoesNotChangeItsReceiver(t *testing.T) {
	a, b := conf("aaaa", "t", `{"k":1}`), conf("bbbb", "t", `{"k":2}`)
	base := State{}.Apply(snapshot(api.Status{Plugins: []api.PluginStatus{{Name: "p", State: "healthy"}}},
		[]api.Confirmation{omitted(a), b}, []api.Session{sess("s-1", "main"), sess("s-2", "main")}))
	before := summarize(base)
	for _, e := range []api.WatchEvent{
		requested(conf("cccc", "t", "")), resolvedEv(resolved(b, "approved")), resolvedEv(resolved(a, "approved")),
		closed(sess("s-1", "main")), opened(sess("s-1", "other")), health(api.PluginStatus{Name: "p", State: "crashed"}),
	} {
		_ = base.Apply(e)
	}
	_ = base.WithArguments(a)
	if got := summarize(base); !equalSummary(got, before) {
		t.Errorf("the receiver changed:\n got %+v\nwant %+v", got, before)
	}
	if base.Sessions[0].Group != "main" {
		t.Errorf("a session of the receiver changed: %+v", base.Sessions[0])
	}
}

// A preview left out of the watch event is filled in from the control
// API's confirmation — only for the same hash and digest — and survives a
// repeat of the event without it.
func TestWithArgumentsFillsThePreview(t *testing.T) {
	full := conf("aaaa", "mail_send", `{"draft_id":"d1"}`)
	full.Preview, full.PreviewDigest = "To: anna@example.org\n\nhi\n", "sha256:1"
	left := full
	left.Preview, left.PreviewOmitted = "", true
	other := full
	other.PreviewDigest = "sha256:2"
	tests := []struct {
		name  string
		fetch api.Confirmation
		want  string
	}{
		{"same digest", full, full.Preview},
		{"another digest", other, ""},
		{"still left out", left, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := State{}.Apply(snapshot(api.Status{}, nil, nil)).Apply(requested(left)).WithArguments(tt.fetch)
			c, _ := s.Confirmation("aaaa")
			if c.Preview != tt.want || c.PreviewOmitted != (tt.want == "") {
				t.Fatalf("preview %q, omitted %v; want %q", c.Preview, c.PreviewOmitted, tt.want)
			}
			if tt.want == "" {
				return
			}
			c, _ = s.Apply(requested(left)).Confirmation("aaaa")
			if c.Preview != tt.want || c.PreviewOmitted {
				t.Errorf("after a repeat without it: preview %q, omitted %v", c.Preview, c.PreviewOmitted)
			}
		})
	}
}
