package telegram

import (
	"encoding/json"
	"log/slog"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
	"github.com/carapace-dev/carapace/plugins/telegram/fakebot"
)

// fakeClock is a Clock that moves only when a test advances it. Timers
// fire in their own goroutines, as time.AfterFunc's do.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c    *fakeClock
	when time.Time
	f    func()
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, when: c.now.Add(d), f: f}
	if d <= 0 {
		go f()
		return t
	}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	for i, x := range t.c.timers {
		if x == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			return true
		}
	}
	return false
}

// Advance moves the clock by d and fires the timers that are due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due, rest []*fakeTimer
	for _, t := range c.timers {
		if !t.when.After(c.now) {
			due = append(due, t)
		} else {
			rest = append(rest, t)
		}
	}
	c.timers = rest
	c.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].when.Before(due[j].when) })
	for _, t := range due {
		go t.f()
	}
}

// Pending returns the delays of the pending timers from now.
func (c *fakeClock) Pending() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Duration
	for _, t := range c.timers {
		out = append(out, t.when.Sub(c.now))
	}
	return out
}

// waitTimer waits until a timer due exactly d from now is pending.
func (c *fakeClock) waitTimer(t testing.TB, d time.Duration) {
	t.Helper()
	waitFor(t, "a timer of "+d.String(), func() bool {
		for _, p := range c.Pending() {
			if p == d {
				return true
			}
		}
		return false
	})
}

// waitFor polls cond (synchronisation only: what a test asserts never
// depends on how long this takes).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// The ids of the tests' people and chats.
const (
	owner    int64 = 4242
	stranger int64 = 666
	family   int64 = -100777 // bound to group "family"
	work     int64 = -100888 // bound to group "work"
	unbound  int64 = -100999 // bound to nothing
)

// env is one plugin under test: the handler in the plugintest harness, the
// fake Bot API, the fake clock, and the data folder.
type env struct {
	t     *testing.T
	fake  *fakebot.Server
	clock *fakeClock
	svc   *plugintest.Services
	dir   string
	cfg   map[string]any
	h     *Handler
	hs    *plugintest.Harness
	crash func(point string) // Options.crash of the next start
	died  atomic.Bool        // set by a crash hook
}

type envOpt func(*env)

func withoutConfig(k string) envOpt { return func(e *env) { delete(e.cfg, k) } }
func withNoSurface() envOpt         { return func(e *env) { e.svc.Surface = false } }

func newEnv(t *testing.T, opts ...envOpt) *env {
	t.Helper()
	e := &env{t: t, fake: fakebot.New(t), clock: newFakeClock(), dir: t.TempDir()}
	e.svc = &plugintest.Services{Plugin: Name, Channel: true, Surface: true,
		Credentials: plugintest.NewFakeCredentials(map[string]string{CredentialKey: fakebot.Token}),
		Status:      plugin.CoreStatus{Version: "0.1.0-test", Sessions: 1}}
	e.cfg = map[string]any{"owner_id": json.Number("4242"), "api_url": e.fake.URL(),
		"chats": map[string]any{"-100777": "family", "-100888": "work"}}
	for _, o := range opts {
		o(e)
	}
	e.start()
	return e
}

// start runs a new handler on the env's data folder.
func (e *env) start() {
	e.t.Helper()
	e.h = New(Options{DataDir: e.dir, Clock: e.clock, Logger: testLogger(e.t), PollTimeout: 2 * time.Second, crash: e.crash})
	e.crash = nil // a crash happens once
	e.hs = plugintest.New(e.t, e.h, plugintest.WithConfig(e.cfg), plugintest.WithServices(e.svc))
}

// restart shuts the handler down and starts a new one on the same data.
func (e *env) restart() {
	e.t.Helper()
	e.hs.Shutdown()
	e.start()
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// handled waits until the plugin has handled update id (the next poll
// confirmed it), so that what it did is visible.
func (e *env) handled(id int64) {
	e.t.Helper()
	waitFor(e.t, "update handled", func() bool { return e.fake.Confirmed() >= id })
}

// say sends text as the owner in chat (the private chat for owner) and
// waits until it is handled.
func (e *env) say(chat int64, text string) int64 {
	e.t.Helper()
	var id int64
	if chat == owner {
		id = e.fake.PrivateText(owner, text)
	} else {
		id = e.fake.GroupText(chat, owner, text)
	}
	e.handled(id)
	return id
}

// events returns the message.inbound events published.
func (e *env) events() []plugin.Event {
	var out []plugin.Event
	for _, ev := range e.svc.Events() {
		if ev.Topic == plugin.TopicMessageInbound.Name() {
			out = append(out, ev)
		}
	}
	return out
}

// waitEvents waits for n message.inbound events.
func (e *env) waitEvents(n int) []plugin.Event {
	e.t.Helper()
	waitFor(e.t, "message.inbound events", func() bool { return len(e.events()) >= n })
	return e.events()
}

// flush advances past the debounce and waits for the nth event.
func (e *env) flush(n int) plugin.Event {
	e.t.Helper()
	e.clock.waitTimer(e.t, DefaultDebounce)
	e.clock.Advance(DefaultDebounce)
	return e.waitEvents(n)[n-1]
}

// inboundOf decodes a message.inbound the plugin published.
func inboundOf(t *testing.T, ev plugin.Event) plugin.Inbound {
	t.Helper()
	in, err := plugin.TopicMessageInbound.Decode(&ev)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// replyTo decodes an event's reply_to.
func replyToOf(t *testing.T, ev plugin.Event) replyTo {
	t.Helper()
	var r replyTo
	if err := json.Unmarshal(inboundOf(t, ev).ReplyTo, &r); err != nil {
		t.Fatalf("reply_to: %v", err)
	}
	return r
}

// channel delivers channel.started or channel.reply for ev, as the core
// would.
func (e *env) channel(topic plugin.Topic[plugin.ChannelReply], ev plugin.Event, session, text string) {
	e.t.Helper()
	r := plugin.ChannelReply{Plugin: Name, Session: session, Event: ev.ID, ReplyTo: inboundOf(e.t, ev).ReplyTo, Text: text}
	if topic == plugin.TopicChannelReply {
		zero := 0
		r.Exit = &zero
	}
	e.coreEvent(topic.Name(), ev.Group, r)
}

// coreEvent delivers an event from the core with payload v.
func (e *env) coreEvent(topic, group string, v any) {
	e.t.Helper()
	if err := e.hs.HandleEvent(&plugin.Event{Topic: topic, Group: group, Source: "core", Payload: plugintest.Payload(v)}); err != nil {
		e.t.Fatalf("HandleEvent(%s): %v", topic, err)
	}
}

// mustJSON encodes v.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// until runs the fake clock from timer to timer until cond holds: for
// tests whose point is what happens, not when.
func (e *env) until(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		if p := e.clock.Pending(); len(p) > 0 {
			next := p[0]
			for _, d := range p {
				next = min(next, d)
			}
			e.clock.Advance(max(next, 0))
		}
		time.Sleep(time.Millisecond)
	}
}

// invoke calls send_telegram with args, running the fake clock while the
// call waits (for its rate-limit slot).
func (e *env) invoke(args string, opts ...plugintest.RequestOption) plugintest.Result {
	e.t.Helper()
	done := make(chan plugintest.Result, 1)
	go func() { done <- e.hs.Invoke("send_telegram", plugintest.Args(e.t, args), opts...) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case r := <-done:
			return r
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			e.t.Fatal("send_telegram did not return")
		}
		if p := e.clock.Pending(); len(p) > 0 {
			next := p[0]
			for _, d := range p {
				next = min(next, d)
			}
			e.clock.Advance(max(next, 0))
		}
	}
}
