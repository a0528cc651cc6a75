package loader

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/manifest"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
)

// channelState is a channel plugin called name, granted groups.
func channelState(name string, groups ...string) *pluginState {
	return &pluginState{name: name, groups: groups, state: stateHealthy,
		manifest: &manifest.Manifest{Provides: manifest.Provides{Channels: []string{name}}}}
}

// TestPublishEventScopedToGroups: a channel plugin publishes for its
// groups only; a refusal says which groups it has and is audited; one
// granted every group publishes for any.
func TestPublishEventScopedToGroups(t *testing.T) {
	l, bus := mailLoader(t)
	path := auditTo(t, l)
	sub, err := bus.Subscribe(plugin.TopicMessageInbound.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	tests := []struct {
		name, group string
		groups      []string
		refused     bool
	}{
		{"its group", "side", []string{"side", "lab"}, false},
		{"another group", "main", []string{"side", "lab"}, true},
		{"no group", "", []string{"side"}, true},
		{"every group granted", "main", nil, false},
		{"every group granted, no group", "", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := &services{l: l, st: channelState("chat", tt.groups...)}
			err := svc.PublishEvent(t.Context(), &plugin.Event{Topic: plugin.TopicMessageInbound.Name(), Group: tt.group, Payload: plugintest.Payload(map[string]any{"text": tt.name})})
			if !tt.refused {
				if err != nil {
					t.Fatalf("PublishEvent: %v", err)
				}
				if ev := <-sub.C(); ev.Group != tt.group || plugintest.Member(ev, "text") != tt.name {
					t.Fatalf("published %+v", ev)
				}
				return
			}
			if !errors.Is(err, plugin.ErrGroupNotGranted) || !strings.Contains(err.Error(), "granted "+strings.Join(tt.groups, ", ")) {
				t.Fatalf("PublishEvent for %q: %v, want ErrGroupNotGranted naming %v", tt.group, err, tt.groups)
			}
		})
	}
	select {
	case ev := <-sub.C():
		t.Fatalf("a refused event reached the bus: %+v", ev)
	default:
	}
	if got := rejected(t, path, audit.StageEvent); got != "main," {
		t.Errorf("refusals audited for groups %q, want main and no group", got)
	}
}

// auditTo gives l an audit log and returns its path.
func auditTo(t *testing.T, l *Loader) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	log, err := audit.Open(path, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = log.Close() })
	l.audit = log
	return path
}

// rejected lists the groups of the audit log's rejections at stage.
func rejected(t *testing.T, path, stage string) string {
	t.Helper()
	es, err := audit.Read(path, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var groups []string
	for _, e := range es {
		if e.Outcome == audit.OutcomeRejected && e.Stage == stage {
			groups = append(groups, e.Group)
		}
	}
	return strings.Join(groups, ",")
}

// TestMailboxScopedToGroups: a surface's confirmations and a channel's
// answers are filed only for a plugin granted their group; a restart with
// another grant purges what it held of the groups it lost.
func TestMailboxScopedToGroups(t *testing.T) {
	l, bus := mailLoader(t)
	topics := []string{api.WatchConfirmationRequested, plugin.TopicChannelReply.Name()}
	put := func(topic, group, n string) {
		t.Helper()
		if err := bus.Publish(context.Background(), &plugin.Event{Topic: topic, Group: group, Source: "core", Payload: plugintest.Payload(map[string]any{"plugin": "phone", "n": n})}); err != nil {
			t.Fatal(err)
		}
	}
	h := newScripted(nil)
	stop := make(chan struct{})
	l.deliverMail(&pluginState{name: "phone", groups: []string{"side"}}, h, topics, stop)
	put(api.WatchConfirmationRequested, "main", "main's call")
	put(plugin.TopicChannelReply.Name(), "main", "main's answer")
	put(api.WatchConfirmationRequested, "side", "side's call")
	put(plugin.TopicChannelReply.Name(), "side", "side's answer")
	want(t, h, "side's call", "side's answer") // want fails on any other

	// Down, it keeps side's; restarted granted main only, it drops them.
	close(stop)
	put(api.WatchConfirmationRequested, "main", "main's second")
	put(api.WatchConfirmationRequested, "side", "side's second")
	waitPending(t, l, "phone", 1) // filed in order: main's was refused before
	h2 := newScripted(nil)
	l.deliverMail(&pluginState{name: "phone", groups: []string{"main"}}, h2, topics, make(chan struct{}))
	put(api.WatchConfirmationRequested, "main", "main's third")
	want(t, h2, "main's third")
}

// TestCoreStatusListsItsGroupsTasks: the tasks a surface sees are its
// groups'.
func TestCoreStatusListsItsGroupsTasks(t *testing.T) {
	l := New(Options{Core: fakeCore{}})
	l.CoreReady()
	for _, tt := range []struct {
		groups []string
		want   int
	}{{[]string{"side"}, 0}, {[]string{"main"}, 1}, {nil, 1}} {
		st := channelState("phone", tt.groups...)
		st.surface = true
		cs, err := (&services{l: l, st: st}).CoreStatus(t.Context())
		if err != nil || len(cs.Tasks) != tt.want {
			t.Errorf("granted %v: %d tasks (err %v), want %d", tt.groups, len(cs.Tasks), err, tt.want)
		}
	}
}

// decideCore is a core with one pending confirmation per group, which
// records the decisions it is asked for.
type decideCore struct {
	fakeCore
	decided *[]string
}

func (c decideCore) Confirmations(context.Context, bool) []api.Confirmation {
	return []api.Confirmation{{ID: "conf-main", Group: "main"}, {ID: "conf-side", Group: "side"}}
}

func (c decideCore) Decide(_ context.Context, d api.Decision) (api.Confirmation, error) {
	*c.decided = append(*c.decided, d.ID)
	return api.Confirmation{ID: d.ID}, nil
}

// TestDecideOnlyItsGroups: a surface decides only the confirmations of
// its groups; another group's reaches the core not at all.
func TestDecideOnlyItsGroups(t *testing.T) {
	var decided []string
	l := New(Options{Core: decideCore{decided: &decided}})
	path := auditTo(t, l)
	l.CoreReady()
	st := channelState("phone", "side")
	st.surface = true
	svc := &services{l: l, st: st}
	if err := svc.Decide(t.Context(), plugin.Decision{ID: "conf-main", Approve: true, ArgsHash: "h"}); !errors.Is(err, plugin.ErrGroupNotGranted) {
		t.Errorf("deciding main's confirmation: %v, want ErrGroupNotGranted", err)
	}
	if err := svc.Decide(t.Context(), plugin.Decision{ID: "conf-side", Approve: true, ArgsHash: "h"}); err != nil {
		t.Errorf("deciding side's confirmation: %v", err)
	}
	if strings.Join(decided, ",") != "conf-side" {
		t.Errorf("the core was asked to decide %q, want conf-side alone", decided)
	}
	if got := rejected(t, path, audit.StageConfirm); got != "main" {
		t.Errorf("refused decisions audited for groups %q, want main", got)
	}
}
