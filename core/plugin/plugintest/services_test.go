package plugintest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
)

func TestServicesNeedARequest(t *testing.T) {
	s := &Services{}
	ctx := context.Background()
	if _, err := s.GetSessionInfo(ctx); !errors.Is(err, plugin.ErrNoRequest) {
		t.Errorf("GetSessionInfo outside a request = %v; want ErrNoRequest", err)
	}
	if _, err := s.GetAuditLog(ctx, plugin.AuditFilter{}); !errors.Is(err, plugin.ErrNoRequest) {
		t.Errorf("GetAuditLog outside a request = %v; want ErrNoRequest", err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.SessionStart = start
	info, err := s.GetSessionInfo(RequestContext(ctx, NewRequest("t", nil, WithGroup("g"), WithSession("s"))))
	if err != nil || info != (plugin.SessionInfo{ID: "s", Group: "g", Started: start}) {
		t.Errorf("GetSessionInfo = %+v, %v", info, err)
	}
}

func TestGetAuditLog(t *testing.T) {
	at := func(min int) time.Time { return time.Date(2026, 1, 1, 10, min, 0, 0, time.UTC) }
	s := &Services{Audit: []plugin.AuditEntry{
		{Time: at(5), Group: "a", Correlation: "c2", Topic: "tool.invoke.y", Outcome: "error"},
		{Time: at(1), Group: "a", Correlation: "c1", Topic: "tool.invoke.x", Outcome: "ok"},
		{Time: at(2), Group: "b", Correlation: "c1", Topic: "tool.invoke.x", Outcome: "ok"},
		{Time: at(3), Group: "a", Correlation: "c1", Topic: "tool.invoke.x", Outcome: "rejected"},
		{Time: at(4), Group: "a", Correlation: "c3", Topic: "tool.invoke.x", Outcome: "sanitized"},
	}}
	tests := []struct {
		name string
		f    plugin.AuditFilter
		want string // minutes of the entries returned
	}{
		{"the group's, oldest first", plugin.AuditFilter{}, "1 3 4 5"},
		{"correlation", plugin.AuditFilter{Correlation: "c1"}, "1 3"},
		{"topic", plugin.AuditFilter{Topic: "tool.invoke.y"}, "5"},
		{"outcome error matches every failure", plugin.AuditFilter{Outcome: "error"}, "3 5"},
		{"exact outcome", plugin.AuditFilter{Outcome: "rejected"}, "3"},
		{"since is inclusive", plugin.AuditFilter{Since: at(3)}, "3 4 5"},
		{"until is exclusive", plugin.AuditFilter{Until: at(3)}, "1"},
		{"last n", plugin.AuditFilter{LastN: 2}, "4 5"},
		{"last n beyond", plugin.AuditFilter{LastN: 5000}, "1 3 4 5"},
		{"combined", plugin.AuditFilter{Correlation: "c1", Outcome: "error", LastN: 1}, "3"},
	}
	ctx := RequestContext(context.Background(), NewRequest("t", nil, WithGroup("a")))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.GetAuditLog(ctx, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			var mins []string
			for _, e := range got {
				mins = append(mins, e.Time.Format("4"))
				if e.Group != "a" {
					t.Errorf("an entry of group %q leaked into group a", e.Group)
				}
			}
			if strings.Join(mins, " ") != tt.want {
				t.Errorf("entries at %v; want %s", mins, tt.want)
			}
		})
	}
}

func TestCredentials(t *testing.T) {
	c := NewFakeCredentials(map[string]string{"b": "2", "a": "1"})
	s := &Services{Credentials: c}
	ctx := context.Background()
	if v, err := s.ReadCredential(ctx, "a"); v != "1" || err != nil {
		t.Errorf("ReadCredential(a) = %q, %v", v, err)
	}
	if _, err := s.ReadCredential(ctx, "zz"); !errors.Is(err, plugin.ErrNoCredential) {
		t.Errorf("ReadCredential(zz) = %v; want ErrNoCredential", err)
	}
	if !c.Has("b") || c.Has("zz") {
		t.Error("Has is wrong")
	}
	c.Set("c", "3")
	c.Delete("b")
	if got := strings.Join(c.Keys(), ","); got != "a,c" {
		t.Errorf("Keys = %s; want a,c", got)
	}
	if v, ok := c.Get("c"); v != "3" || !ok {
		t.Errorf("Get(c) = %q, %v", v, ok)
	}
	if got := strings.Join(c.Reads(), ","); got != "a,zz,c" {
		t.Errorf("Reads = %s; want a,zz,c (Has and Keys are not reads)", got)
	}

	var none *FakeCredentials
	if _, ok := none.Get("a"); ok || none.Has("a") || none.Keys() != nil || none.Reads() != nil {
		t.Error("a nil store is not empty")
	}
	if _, err := (&Services{}).ReadCredential(ctx, "a"); !errors.Is(err, plugin.ErrNoCredential) {
		t.Errorf("ReadCredential without a store = %v; want ErrNoCredential", err)
	}
	var zero FakeCredentials
	zero.Set("k", "v")
	if v, _ := zero.Get("k"); v != "v" {
		t.Error("the zero FakeCredentials cannot Set")
	}
}

func TestPublishEvent(t *testing.T) {
	ctx := context.Background()
	if err := (&Services{}).PublishEvent(ctx, &plugin.Event{Topic: "x"}); !errors.Is(err, plugin.ErrNotChannel) {
		t.Errorf("PublishEvent from a non-channel plugin = %v; want ErrNotChannel", err)
	}
	s := &Services{Channel: true, Plugin: "telegram"}
	payload := []byte(`{"text":"hi"}`)
	ev := &plugin.Event{Topic: "message.inbound", Group: "g", Source: "forged", ID: "forged", Payload: payload}
	if err := s.PublishEvent(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if err := s.PublishEvent(ctx, &plugin.Event{Topic: "second"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PublishEvent(ctx, nil); err == nil {
		t.Error("PublishEvent(nil) succeeded")
	}
	copy(payload, `{"text":"ho"}`)
	evs := s.Events()
	if len(evs) != 2 {
		t.Fatalf("%d events; want 2", len(evs))
	}
	e := evs[0]
	if e.Source != "telegram" || e.ID != "test-event-1" || e.Time.IsZero() || e.Topic != "message.inbound" || e.Group != "g" {
		t.Errorf("event = %+v; want the source, id and time stamped", e)
	}
	if string(e.Payload) != `{"text":"hi"}` {
		t.Error("the recorded event shares its payload with the handler's bytes")
	}
	if evs[1].ID != "test-event-2" || (&Services{Channel: true}).pluginName() != DefaultPlugin {
		t.Error("ids or the default plugin name are wrong")
	}
}

func TestGetToolCatalog(t *testing.T) {
	s := &Services{Tools: []plugin.ToolInfo{{Name: "echo", Plugin: "echo"}}}
	got, err := s.GetToolCatalog(context.Background())
	if err != nil || len(got) != 1 || got[0].Name != "echo" {
		t.Errorf("GetToolCatalog = %v, %v", got, err)
	}
	got[0].Name = "changed"
	if s.Tools[0].Name != "echo" {
		t.Error("GetToolCatalog returned the Services' own slice")
	}
}

// TestPayloadAndMember: a payload built by hand is what NewEvent encodes,
// and Member reads it back, numbers as json.Number.
func TestPayloadAndMember(t *testing.T) {
	ev := &plugin.Event{Topic: "x.y", Payload: Payload(map[string]any{"n": 7, "s": "hi"})}
	if string(ev.Payload) != `{"n":7,"s":"hi"}` || Member(ev, "n") != json.Number("7") || Member(ev, "s") != "hi" || Member(ev, "none") != nil {
		t.Fatalf("payload %s: n %#v, s %#v", ev.Payload, Member(ev, "n"), Member(ev, "s"))
	}
	if Member(&plugin.Event{Payload: json.RawMessage(`[1]`)}, "n") != nil {
		t.Error("Member of a payload that is not an object")
	}
	defer func() {
		if recover() == nil {
			t.Error("Payload of a non-object did not panic")
		}
	}()
	Payload([]int{1})
}
