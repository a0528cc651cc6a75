package loader

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/manifest"
	"github.com/carapace-dev/carapace/core/plugin"
)

// fakeCore answers Status with when it started, and Paused.
type fakeCore struct {
	Core
	started time.Time
	paused  bool
}

func (c fakeCore) Status(context.Context) api.Status { return api.Status{Started: c.started} }
func (c fakeCore) Paused() bool                      { return c.paused }

// TestPaused: the cheap question is a channel's, answered once the core
// has started, from the core's Paused alone.
func TestPaused(t *testing.T) {
	l := New(Options{Core: fakeCore{paused: true}})
	if _, err := (&services{l: l, st: &pluginState{name: "weather", manifest: &manifest.Manifest{}}}).Paused(t.Context()); !errors.Is(err, plugin.ErrNotChannel) {
		t.Errorf("Paused of a plugin without channels: %v, want ErrNotChannel", err)
	}
	svc := &services{l: l, st: channelState("chat")}
	if _, err := svc.Paused(context.WithValue(t.Context(), inInitKey{}, true)); !errors.Is(err, errCoreStarting) {
		t.Errorf("Paused during Init: %v, want errCoreStarting", err)
	}
	l.CoreReady()
	if paused, err := svc.Paused(t.Context()); err != nil || !paused {
		t.Errorf("Paused = %v, %v; want true", paused, err)
	}
	running := New(Options{Core: fakeCore{}})
	running.CoreReady()
	if paused, err := (&services{l: running, st: channelState("chat")}).Paused(t.Context()); err != nil || paused {
		t.Errorf("Paused of a running core = %v, %v; want false", paused, err)
	}
}

// TestSurfaceServicesWaitForTheCore checks the surface services against
// the core's start: a call from a plugin's Init is refused at once (Load
// waits for that Init), any other waits until CoreReady, and after
// Shutdown every call is refused.
func TestSurfaceServicesWaitForTheCore(t *testing.T) {
	started := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	l := New(Options{Core: fakeCore{started: started}})
	st := &pluginState{name: "phone", surface: true}
	svc := &services{l: l, st: st}

	// Refused at once: had it waited, the ctx's deadline would be its error.
	inInit, cancelInit := context.WithTimeout(context.WithValue(t.Context(), inInitKey{}, true), 10*time.Second)
	_, err := svc.CoreStatus(inInit)
	cancelInit()
	if !errors.Is(err, errCoreStarting) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CoreStatus during Init: %v, want errCoreStarting at once", err)
	}
	if _, err := (&services{l: l, st: &pluginState{name: "chat", state: stateHealthy}}).CoreStatus(t.Context()); !errors.Is(err, plugin.ErrNotSurface) {
		t.Fatalf("CoreStatus without the capability: %v, want ErrNotSurface", err)
	}

	// A goroutine the Init started (another ctx) waits for the core, even
	// before Load has marked the plugin healthy.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	_, err = svc.CoreStatus(ctx)
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
		if want := (plugin.TaskSummary{ID: "t-abc12345", Group: "main", Schedule: "every hour", Enabled: true, Next: started.Add(time.Hour), Last: "skipped: missed"}); err == nil &&
			(len(cs.Tasks) != 1 || cs.Tasks[0] != want) {
			err = fmt.Errorf("tasks %+v, want %+v", cs.Tasks, want)
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

// TestAuditDropped checks what a channel plugin may write to the audit
// log about what it dropped: a channel only, one clipped line, and a flood
// cut to the rate with the rest counted.
func TestAuditDropped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	log, err := audit.Open(path, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = log.Close() })
	l := New(Options{Audit: log})
	other := &services{l: l, st: &pluginState{name: "weather", manifest: &manifest.Manifest{}}}
	if err := other.AuditDropped(t.Context(), "x"); !errors.Is(err, plugin.ErrNotChannel) {
		t.Fatalf("AuditDropped of a plugin without channels: %v, want ErrNotChannel", err)
	}
	tg := &services{l: l, st: &pluginState{name: "telegram", manifest: &manifest.Manifest{Provides: manifest.Provides{Channels: []string{"telegram"}}}}}
	if err := tg.AuditDropped(t.Context(), "update 1001 (message) from user 666\ninjected line"+strings.Repeat("x", 2*plugin.MaxAuditDropped)); err != nil {
		t.Fatal(err)
	}
	for i := range dropBurst + 10 { // the burst, then 10 over it
		if err := tg.AuditDropped(t.Context(), fmt.Sprintf("update %d", 2000+i)); err != nil {
			t.Fatal(err)
		}
	}
	tg.st.dropped.mu.Lock()
	tg.st.dropped.limit.SetLimit(rate.Inf) // the minute has passed
	tg.st.dropped.mu.Unlock()
	if err := tg.AuditDropped(t.Context(), "update 3000"); err != nil {
		t.Fatal(err)
	}
	es, err := audit.Read(path, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != dropBurst+1 {
		t.Fatalf("%d entries written, want %d (the burst, then one with the count)", len(es), dropBurst+1)
	}
	first, last := es[0], es[len(es)-1]
	if first.Source != "telegram" || first.Stage != audit.StageChannel || first.Outcome != audit.OutcomeDropped ||
		strings.Contains(first.Reason, "\n") || len(first.Reason) > plugin.MaxAuditDropped+len("…") || !strings.HasPrefix(first.Reason, "update 1001 (message) from user 666") {
		t.Errorf("first entry %+v", first)
	}
	if want := "update 3000 (and 11 more dropped before it, not logged one by one)"; last.Reason != want {
		t.Errorf("last entry %q, want %q", last.Reason, want)
	}
}

// TestPluginsCannotPublishCoreTopics: what the watch stream shows people,
// the answers to channels and the lifecycle topics are the core's alone.
func TestPluginsCannotPublishCoreTopics(t *testing.T) {
	l := New(Options{})
	tg := &services{l: l, st: &pluginState{name: "telegram", manifest: &manifest.Manifest{Provides: manifest.Provides{Channels: []string{"telegram"}}}}}
	for _, topic := range []string{"confirmation.requested", "confirmation.resolved", "channel.reply", "session.opened", "core.status",
		"plugin.health", "agent.completed", "task.fired", "task.created"} {
		err := tg.PublishEvent(t.Context(), &plugin.Event{Topic: topic, Group: "main"})
		if !errors.Is(err, plugin.ErrCoreTopic) {
			t.Errorf("a plugin published %s: %v", topic, err)
		}
	}
	for _, topic := range []string{"task.triggered", "message.inbound", "mail.received"} {
		if plugin.CoreTopic(topic) {
			t.Errorf("%s is refused to plugins", topic)
		}
	}
}

func (c fakeCore) Tasks(context.Context) ([]api.Task, error) {
	next := c.started.Add(time.Hour)
	return []api.Task{{ID: "t-abc12345", Group: "main", Schedule: "every hour", Enabled: true, Next: &next,
		Last: &api.TaskRun{State: "skipped", Reason: "missed"}}}, nil
}

// TestReportHealth: a plugin that reports itself degraded shows so — not
// healthy, state "degraded", its problem on one clipped line, its tools
// still listed — and is audited once per change; it is healthy again once
// it says so. A report from a plugin that is not serving changes nothing
// that shows.
func TestReportHealth(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	log, err := audit.Open(path, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = log.Close() })
	l := New(Options{Audit: log})
	st := &pluginState{name: "telegram", state: stateHealthy, tools: []string{"send_telegram"}}
	l.plugins = []*pluginState{st}
	svc := &services{l: l, st: st}
	if ps := l.pluginStatus(st); !ps.Healthy || ps.State != stateHealthy {
		t.Fatalf("before any report: %+v", ps)
	}
	why := "no message can arrive\nsince 12:00" + strings.Repeat("x", 2*plugin.MaxHealthProblem)
	for range 2 { // the same report twice is one change
		if err := svc.ReportHealth(t.Context(), true, why); err != nil {
			t.Fatal(err)
		}
	}
	ps := l.pluginStatus(st)
	if ps.Healthy || ps.State != "degraded" || !strings.HasPrefix(ps.Problem, "no message can arrive since 12:00") ||
		len(ps.Problem) > plugin.MaxHealthProblem+len("…") || ps.Category != "" || len(ps.Tools) != 1 {
		t.Errorf("degraded: %+v", ps)
	}
	if !l.available("telegram") {
		t.Error("a degraded plugin's calls are refused; it still serves them")
	}
	if err := svc.ReportHealth(t.Context(), false, "ignored"); err != nil {
		t.Fatal(err)
	}
	if ps := l.pluginStatus(st); !ps.Healthy || ps.State != stateHealthy || ps.Problem != "" {
		t.Errorf("after the recovery: %+v", ps)
	}
	// Not serving: the report is kept, not shown, not audited.
	crashed := &pluginState{name: "other", state: stateCrashed, problem: "handler process died"}
	if err := (&services{l: l, st: crashed}).ReportHealth(t.Context(), true, "late"); err != nil {
		t.Fatal(err)
	}
	if ps := l.pluginStatus(crashed); ps.State != stateCrashed || ps.Problem != "handler process died" {
		t.Errorf("a crashed plugin's report showed: %+v", ps)
	}
	es, err := audit.Read(path, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		got = append(got, e.Source+" "+e.Outcome+" "+clipTo(e.Reason, 40))
	}
	want := []string{"telegram error plugin degraded: no message can arrive s", "telegram ok plugin no longer degraded"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("audited %q, want %q", got, want)
	}
}

func clipTo(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
