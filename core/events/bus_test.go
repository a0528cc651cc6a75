package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/events"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
)

func TestSubscribeGetsExactlyItsTopics(t *testing.T) {
	published := []string{
		plugin.TopicMessageInbound.Name(), plugin.TopicAgentStarted.Name(), "agent.started_late",
		plugin.TopicTaskTriggered.Name(), "message.inbound.extra", plugin.TopicAgentStarted.Name(), plugin.TopicPluginReady.Name(),
	}
	tests := []struct {
		name   string
		topics []string
		want   []string
	}{
		{"one topic", []string{plugin.TopicAgentStarted.Name()}, []string{plugin.TopicAgentStarted.Name(), plugin.TopicAgentStarted.Name()}},
		{"two topics", []string{plugin.TopicMessageInbound.Name(), plugin.TopicPluginReady.Name()}, []string{plugin.TopicMessageInbound.Name(), plugin.TopicPluginReady.Name()}},
		{"a topic named twice is delivered once", []string{plugin.TopicTaskTriggered.Name(), plugin.TopicTaskTriggered.Name()}, []string{plugin.TopicTaskTriggered.Name()}},
		{"a prefix is no match", []string{"agent.started_lat", "message.inbound.extr"}, nil},
		{"no topic: every topic", nil, published},
		{"a topic nobody publishes", []string{plugin.TopicAgentError.Name()}, nil},
	}
	b := openBus(t, events.Options{})
	subs := make([]*events.Subscription, len(tests))
	for i, tt := range tests {
		s, err := b.Subscribe(tt.topics...)
		if err != nil {
			t.Fatalf("%s: Subscribe: %v", tt.name, err)
		}
		subs[i] = s
	}
	var sent []*plugin.Event
	for i, topic := range published {
		ev := &plugin.Event{Topic: topic, Group: "main", Payload: plugintest.Payload(map[string]any{"n": i})}
		if err := b.Publish(context.Background(), ev); err != nil {
			t.Fatalf("Publish %s: %v", topic, err)
		}
		sent = append(sent, ev)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := subs[i]
			j := 0
			for _, want := range tt.want {
				got := next(t, s)
				for sent[j].Topic != want {
					j++
				}
				if got.Topic != want || got.ID != sent[j].ID {
					t.Fatalf("got %s %s, want %s %s", got.Topic, got.ID, want, sent[j].ID)
				}
				j++
			}
			assertEmpty(t, s)
			if s.Dropped() != 0 {
				t.Fatalf("Dropped = %d", s.Dropped())
			}
		})
	}
}

// A subscription scoped to groups gets the events of those groups and
// those of no group, and never another group's: not even in its buffer,
// so a flood of another group's events drops none of its own.
func TestSubscribeInScopesByGroup(t *testing.T) {
	b := openBus(t, events.Options{Buffer: 4})
	side, err := b.SubscribeIn([]string{"side", "lab"}, plugin.TopicMessageInbound.Name(), plugin.TopicPluginReady.Name())
	if err != nil {
		t.Fatal(err)
	}
	every, err := b.SubscribeIn(nil, plugin.TopicMessageInbound.Name())
	if err != nil {
		t.Fatal(err)
	}
	publish := func(topic, group string) {
		t.Helper()
		if err := b.Publish(context.Background(), &plugin.Event{Topic: topic, Group: group}); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 { // more than the buffer
		publish(plugin.TopicMessageInbound.Name(), "main")
	}
	publish(plugin.TopicMessageInbound.Name(), "side")
	publish(plugin.TopicPluginReady.Name(), "")
	publish(plugin.TopicMessageInbound.Name(), "lab")
	for _, want := range []string{"side", "", "lab"} {
		if ev := next(t, side); ev.Group != want {
			t.Fatalf("the scoped subscription got group %q, want %q", ev.Group, want)
		}
	}
	assertEmpty(t, side)
	if side.Dropped() != 0 {
		t.Errorf("the scoped subscription dropped %d events: another group's filled its buffer", side.Dropped())
	}
	// Positive control: unscoped, the same buffer overflows with main's.
	if every.Dropped() == 0 {
		t.Errorf("the unscoped subscription dropped nothing: the flood did not reach it")
	}
	if _, err := b.SubscribeIn([]string{"no/such"}, plugin.TopicMessageInbound.Name()); !errors.Is(err, home.ErrBadGroup) {
		t.Errorf("SubscribeIn with a bad group name: %v, want home.ErrBadGroup", err)
	}
}

func TestPublishStampsAndIsolates(t *testing.T) {
	b := openBus(t, events.Options{})
	s, err := b.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	when := time.Date(2026, 2, 17, 10, 30, 0, 0, time.UTC)
	tests := []struct {
		name     string
		ev       plugin.Event
		wantTime func(time.Time) bool
	}{
		{"time kept when set", plugin.Event{Topic: plugin.TopicTaskTriggered.Name(), Time: when, Payload: plugintest.Payload(map[string]any{"task_id": "t1"})},
			func(got time.Time) bool { return got.Equal(when) }},
		{"time stamped when zero", plugin.Event{Topic: plugin.TopicTaskTriggered.Name()},
			func(got time.Time) bool { return time.Since(got) < time.Minute && got.Location() == time.UTC }},
		{"a caller's id is replaced", plugin.Event{ID: "chosen-by-caller", Topic: plugin.TopicAgentError.Name(), Group: "family-chat", Correlation: "c1", Source: "core"},
			func(got time.Time) bool { return !got.IsZero() }},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := tt.ev
			if err := b.Publish(context.Background(), &ev); err != nil {
				t.Fatal(err)
			}
			if ev.ID == "" || ev.ID == "chosen-by-caller" || seen[ev.ID] {
				t.Fatalf("ID = %q, want a fresh random id", ev.ID)
			}
			seen[ev.ID] = true
			if !tt.wantTime(ev.Time) {
				t.Fatalf("Time = %v", ev.Time)
			}
			got := next(t, s)
			if got == &ev {
				t.Fatal("the subscriber got the publisher's own event")
			}
			if got.ID != ev.ID || !got.Time.Equal(ev.Time) || got.Topic != ev.Topic || got.Group != ev.Group ||
				got.Correlation != ev.Correlation || got.Source != ev.Source {
				t.Fatalf("got %+v, published %+v", got, ev)
			}
			if got.Payload == nil {
				t.Fatal("nil payload: want {}")
			}
		})
	}

	t.Run("payload is a copy in wire form", func(t *testing.T) {
		payload := []byte(`{"n": 7, "nested": {"k": "v"}}`)
		if err := b.Publish(context.Background(), &plugin.Event{Topic: plugin.TopicMessageInbound.Name(), Payload: payload}); err != nil {
			t.Fatal(err)
		}
		copy(payload, `{"n": 8, "nested": {"k": "x"}}`)
		got := next(t, s)
		if string(got.Payload) != `{"n":7,"nested":{"k":"v"}}` {
			t.Fatalf("payload %s: want the publisher's bytes as they were, compact", got.Payload)
		}
		if n, ok := fields(t, got)["n"].(json.Number); !ok || n.String() != "7" {
			t.Fatalf("n = %#v, want json.Number 7", fields(t, got)["n"])
		}
	})
}

func TestPublishRefused(t *testing.T) {
	long := strings.Repeat("a", events.MaxTopicLen-len(".b")+1) + ".b"
	tests := []struct {
		name    string
		ctx     func() context.Context
		ev      *plugin.Event
		wantIs  error
		wantMsg string
	}{
		{"nil event", nil, nil, events.ErrBadEvent, "nil event"},
		{"empty topic", nil, &plugin.Event{}, events.ErrBadTopic, `topic ""`},
		{"one word", nil, &plugin.Event{Topic: "agent"}, events.ErrBadTopic, `topic "agent"`},
		{"upper case", nil, &plugin.Event{Topic: "Agent.started"}, events.ErrBadTopic, "Agent.started"},
		{"empty word", nil, &plugin.Event{Topic: "agent..started"}, events.ErrBadTopic, "agent..started"},
		{"trailing dot", nil, &plugin.Event{Topic: "agent.started."}, events.ErrBadTopic, "agent.started."},
		{"leading digit", nil, &plugin.Event{Topic: "1agent.started"}, events.ErrBadTopic, "1agent"},
		{"a wildcard", nil, &plugin.Event{Topic: "agent.*"}, events.ErrBadTopic, "agent.*"},
		{"a space", nil, &plugin.Event{Topic: "agent.started "}, events.ErrBadTopic, "agent.started "},
		{"too long", nil, &plugin.Event{Topic: long}, events.ErrBadTopic, "over 128"},
		{"group path traversal", nil, &plugin.Event{Topic: plugin.TopicAgentStarted.Name(), Group: "../etc"}, home.ErrBadGroup, `group "../etc"`},
		{"group with a space", nil, &plugin.Event{Topic: plugin.TopicAgentStarted.Name(), Group: "family chat"}, home.ErrBadGroup, "family chat"},
		{"group too long", nil, &plugin.Event{Topic: plugin.TopicAgentStarted.Name(), Group: strings.Repeat("g", 65)}, home.ErrBadGroup, "group"},
		{"payload too large", nil, &plugin.Event{Topic: plugin.TopicMessageInbound.Name(), Payload: plugintest.Payload(map[string]any{"body": strings.Repeat("x", events.MaxEventSize)})},
			events.ErrTooLarge, "over the limit of 65536"},
		{"payload not JSON", nil, &plugin.Event{Topic: plugin.TopicMessageInbound.Name(), Payload: []byte(`{"x":`)},
			events.ErrBadEvent, "encode"},
		{"payload not an object", nil, &plugin.Event{Topic: plugin.TopicMessageInbound.Name(), Payload: []byte(` [1]`)},
			events.ErrBadEvent, "not a JSON object"},
		{"cancelled context", func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, &plugin.Event{Topic: plugin.TopicAgentStarted.Name()}, context.Canceled, "publish agent.started"},
	}
	b := openBus(t, events.Options{})
	all, err := b.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	r := dial(t, b)
	join(t, b, r)
	for len(all.C()) > 0 { // the join probes
		<-all.C()
	}
	before := b.Stats().Published
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx()
			}
			var id string
			if tt.ev != nil {
				id = tt.ev.ID
			}
			err := b.Publish(ctx, tt.ev)
			if !errors.Is(err, tt.wantIs) {
				t.Fatalf("err = %v, want %v", err, tt.wantIs)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("err = %q, want it to mention %q", err, tt.wantMsg)
			}
			if tt.ev != nil && tt.ev.ID != id {
				t.Fatal("a refused event was stamped")
			}
			assertEmpty(t, all)
		})
	}
	if got := b.Stats().Published; got != before {
		t.Fatalf("Published went from %d to %d", before, got)
	}
	// Nothing reached the socket either: the next event there is the marker.
	marker := &plugin.Event{Topic: plugin.TopicAgentCompleted.Name()}
	if err := b.Publish(context.Background(), marker); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, r); got.ID != marker.ID {
		t.Fatalf("remote got %s %s first, want the marker", got.Topic, got.ID)
	}
}

func TestSubscribeRefusesBadTopics(t *testing.T) {
	b := openBus(t, events.Options{})
	for _, topics := range [][]string{{""}, {"agent"}, {plugin.TopicAgentStarted.Name(), "agent.*"}, {"agent."}} {
		if _, err := b.Subscribe(topics...); !errors.Is(err, events.ErrBadTopic) {
			t.Errorf("Subscribe(%q) = %v, want ErrBadTopic", topics, err)
		}
	}
	if st := b.Stats(); st.Subscriptions != 0 {
		t.Fatalf("Subscriptions = %d", st.Subscriptions)
	}
}

func TestSlowSubscriberNeverBlocksPublish(t *testing.T) {
	const buffer, total = 4, 200
	tests := []struct {
		name   string
		topics []string
	}{
		{"subscribed to the topic", []string{plugin.TopicMessageInbound.Name()}},
		{"subscribed to everything", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &logRecorder{}
			b := openBus(t, events.Options{Buffer: buffer, Logger: slog.New(logs)})
			slow, err := b.Subscribe(tt.topics...)
			if err != nil {
				t.Fatal(err)
			}
			fast, err := b.Subscribe(plugin.TopicMessageInbound.Name())
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			drained := make(chan struct{})
			go func() {
				defer close(drained)
				for ev := range fast.C() {
					got = append(got, ev.ID)
				}
			}()

			var ids []string
			done := make(chan error, 1)
			go func() {
				for i := range total {
					ev := &plugin.Event{Topic: plugin.TopicMessageInbound.Name(), Payload: plugintest.Payload(map[string]any{"i": i})}
					if err := b.Publish(context.Background(), ev); err != nil {
						done <- err
						return
					}
					ids = append(ids, ev.ID)
				}
				done <- nil
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("Publish blocked on a subscriber that does not read")
			}

			if d := slow.Dropped(); d != total-buffer {
				t.Fatalf("slow Dropped = %d, want %d", d, total-buffer)
			}
			for i := range buffer { // it kept the first ones
				if ev := next(t, slow); ev.ID != ids[i] {
					t.Fatalf("slow got %s at %d, want %s", ev.ID, i, ids[i])
				}
			}
			if err := fast.Close(); err != nil {
				t.Fatal(err)
			}
			<-drained
			if st := b.Stats(); st.Dropped != slow.Dropped()+fast.Dropped() {
				t.Fatalf("Stats.Dropped = %d, want %d", st.Dropped, slow.Dropped()+fast.Dropped())
			}
			if uint64(len(got))+fast.Dropped() != total {
				t.Fatalf("fast got %d and dropped %d of %d", len(got), fast.Dropped(), total)
			}
			recs := logs.matching("event dropped")
			if len(recs) == 0 {
				t.Fatal("the drops were not logged")
			}
			if len(recs) > 10 {
				t.Fatalf("%d drop reports for %d drops: not rate-limited", len(recs), slow.Dropped())
			}
			if recs[0].attrs["topic"] != plugin.TopicMessageInbound.Name() || recs[0].attrs["dropped_by_subscription"] == nil {
				t.Fatalf("drop report lacks its topic or count: %v", recs[0].attrs)
			}
		})
	}
}

// A cut-off subscription that falls its buffer behind is ended, not fed
// with gaps: it keeps the events before the first it had no room for,
// gets none after, and Cut says so; Publish never waits, and an ordinary
// subscription beside it is untouched.
func TestCutOffSubscription(t *testing.T) {
	const buffer = 4
	b := openBus(t, events.Options{Buffer: buffer})
	cut, err := b.SubscribeCutOff(plugin.TopicMessageInbound.Name())
	if err != nil {
		t.Fatal(err)
	}
	keeps, err := b.Subscribe(plugin.TopicMessageInbound.Name())
	if err != nil {
		t.Fatal(err)
	}
	publish := func(i int) string {
		ev := &plugin.Event{Topic: plugin.TopicMessageInbound.Name(), Payload: plugintest.Payload(map[string]any{"i": i})}
		if err := b.Publish(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		return ev.ID
	}
	var ids []string
	for i := range buffer {
		ids = append(ids, publish(i))
	}
	select {
	case <-cut.Cut():
		t.Fatal("cut off with room left in its buffer")
	default:
	}
	publish(buffer) // no room: the subscription is cut off
	<-cut.Cut()
	for i := range buffer {
		if ev := next(t, cut); ev.ID != ids[i] {
			t.Fatalf("event %d: %s, want %s", i, ev.ID, ids[i])
		}
	}
	publish(buffer + 1) // room again, but it stays cut off
	select {
	case ev := <-cut.C():
		t.Fatalf("an event after the cut: %v", ev)
	default:
	}
	if keeps.Dropped() != 2 { // its buffer of 4 kept the first four of six
		t.Errorf("the ordinary subscription dropped %d, want 2", keeps.Dropped())
	}
	select {
	case <-keeps.Cut():
		t.Error("an ordinary subscription was cut off")
	default:
	}
}

func TestCloseEndsSubscriptionsAndRemovesSocket(t *testing.T) {
	b, err := events.Open(filepath.Join(privateDir(t), "events.sock"), events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var subs []*events.Subscription
	for _, topics := range [][]string{nil, {plugin.TopicAgentStarted.Name()}, {plugin.TopicAgentStarted.Name(), plugin.TopicAgentError.Name()}} {
		s, err := b.Subscribe(topics...)
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, s)
	}
	if err := b.Publish(context.Background(), &plugin.Event{Topic: plugin.TopicAgentStarted.Name()}); err != nil {
		t.Fatal(err)
	}
	r, err := events.Dial(b.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for i, s := range subs {
		// The buffered event is still there, then the channel is closed.
		if ev, ok := <-s.C(); !ok || ev.Topic != plugin.TopicAgentStarted.Name() {
			t.Fatalf("sub %d: want the buffered event before the close", i)
		}
		select {
		case _, ok := <-s.C():
			if ok {
				t.Fatalf("sub %d: an event after Close", i)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("sub %d: channel not closed", i)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Subscription.Close after Bus.Close: %v", err)
		}
	}
	if _, err := os.Lstat(b.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("socket file after Close: %v", err)
	}
	if err := b.Publish(context.Background(), &plugin.Event{Topic: plugin.TopicAgentStarted.Name()}); !errors.Is(err, events.ErrClosed) {
		t.Fatalf("Publish after Close = %v", err)
	}
	if _, err := b.Subscribe(); !errors.Is(err, events.ErrClosed) {
		t.Fatalf("Subscribe after Close = %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := r.Recv(ctx); !errors.Is(err, events.ErrDisconnected) {
		t.Fatalf("remote Recv after Bus.Close = %v, want ErrDisconnected", err)
	}
}

func TestSubscriptionClose(t *testing.T) {
	b := openBus(t, events.Options{})
	a, _ := b.Subscribe(plugin.TopicAgentStarted.Name())
	c, _ := b.Subscribe(plugin.TopicAgentStarted.Name())
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, ok := <-a.C(); ok {
		t.Fatal("closed subscription delivered")
	}
	if err := b.Publish(context.Background(), &plugin.Event{Topic: plugin.TopicAgentStarted.Name()}); err != nil {
		t.Fatal(err)
	}
	if next(t, c).Topic != plugin.TopicAgentStarted.Name() {
		t.Fatal("the other subscription lost its event")
	}
	if n := b.Stats().Subscriptions; n != 1 {
		t.Fatalf("Subscriptions = %d, want 1", n)
	}
}

func TestSocketFileMode(t *testing.T) {
	b := openBus(t, events.Options{})
	fi, err := os.Lstat(b.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want a 0600 socket", fi.Mode())
	}
	if want := filepath.Join("/h", "run", "events.sock"); events.SocketPath("/h") != want {
		t.Fatalf("SocketPath = %s, want %s", events.SocketPath("/h"), want)
	}
}

func TestOpenRefuses(t *testing.T) {
	tests := []struct {
		name    string
		path    func(t *testing.T) string
		wantMsg string
	}{
		{"relative path", func(*testing.T) string { return "run/events.sock" }, "not absolute"},
		{"missing directory", func(t *testing.T) string { return filepath.Join(privateDir(t), "nope", "events.sock") }, "no such file"},
		{"directory open to others", func(t *testing.T) string {
			d := privateDir(t)
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(d, "events.sock")
		}, "must be private"},
		{"path too long", func(t *testing.T) string { return "/" + strings.Repeat("d", 120) + "/events.sock" }, "longer than Unix sockets allow"},
		{"a regular file in the way", func(t *testing.T) string {
			p := filepath.Join(privateDir(t), "events.sock")
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}, "not a socket"},
		{"a live bus on the path", func(t *testing.T) string { return openBus(t, events.Options{}).Path() }, "already listens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := events.Open(tt.path(t), events.Options{})
			if err == nil {
				b.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("err = %q, want it to mention %q", err, tt.wantMsg)
			}
		})
	}

	t.Run("a stale socket is replaced", func(t *testing.T) {
		p := filepath.Join(privateDir(t), "events.sock")
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		ln.SetUnlinkOnClose(false)
		ln.Close() // as if the core had crashed
		b, err := events.Open(p, events.Options{})
		if err != nil {
			t.Fatalf("Open over a stale socket: %v", err)
		}
		b.Close()
	})
}

func TestConcurrentPublishersAndSubscribers(t *testing.T) {
	const publishers, perPublisher, remotes = 8, 150, 2
	topics := []string{plugin.TopicMessageInbound.Name(), plugin.TopicAgentStarted.Name(), plugin.TopicTaskTriggered.Name()}
	b := openBus(t, events.Options{Buffer: publishers * perPublisher, RemoteBuffer: 16 << 20})
	rs := make([]*events.Remote, remotes)
	for i := range rs {
		rs[i] = dial(t, b)
	}
	join(t, b, rs...)

	type sub struct {
		s     *events.Subscription
		wants map[string]bool // nil: every topic
	}
	var subs []sub
	for i := range 6 {
		var ts []string
		if i%3 != 0 {
			ts = topics[i%3 : i%3+1]
		}
		s, err := b.Subscribe(ts...)
		if err != nil {
			t.Fatal(err)
		}
		var wants map[string]bool
		if ts != nil {
			wants = map[string]bool{ts[0]: true}
		}
		subs = append(subs, sub{s, wants})
	}
	expected := func(wants map[string]bool) int {
		n := 0
		for p := range publishers {
			for i := range perPublisher {
				if wants == nil || wants[topics[(p+i)%len(topics)]] {
					n++
				}
			}
		}
		return n
	}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	// Churn: subscriptions opened and closed while events fly.
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				s, err := b.Subscribe(topics[0])
				if err != nil {
					t.Error(err)
					return
				}
				_ = s.Close()
			}
		})
	}
	// Readers: in-process and remote, each checking per-publisher order.
	type result struct {
		name string
		n    int
		err  error
	}
	results := make(chan result, len(subs)+remotes)
	checkOrder := func(last map[string]float64, ev *plugin.Event) error {
		var f struct{ P, Seq json.Number }
		if err := ev.Decode(&f); err != nil {
			return err
		}
		p := f.P
		seq, err := f.Seq.Float64()
		if err != nil {
			return err
		}
		if prev, ok := last[p.String()]; ok && seq <= prev {
			return fmt.Errorf("publisher %s: seq %v after %v", p, seq, prev)
		}
		last[p.String()] = seq
		return nil
	}
	for i, s := range subs {
		go func() {
			last := map[string]float64{}
			n := 0
			for ev := range s.s.C() {
				if s.wants != nil && !s.wants[ev.Topic] {
					results <- result{fmt.Sprint("sub ", i), n, fmt.Errorf("topic %s not subscribed", ev.Topic)}
					return
				}
				if err := checkOrder(last, ev); err != nil {
					results <- result{fmt.Sprint("sub ", i), n, err}
					return
				}
				if n++; uint64(n)+s.s.Dropped() == uint64(expected(s.wants)) {
					break
				}
			}
			results <- result{fmt.Sprint("sub ", i), n, nil}
		}()
	}
	for i, r := range rs {
		go func() {
			last := map[string]float64{}
			total := expected(nil)
			for n := 0; n < total; n++ {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				ev, err := r.Recv(ctx)
				cancel()
				if err == nil {
					err = checkOrder(last, ev)
				}
				if err != nil {
					results <- result{fmt.Sprint("remote ", i), n, err}
					return
				}
			}
			results <- result{fmt.Sprint("remote ", i), total, nil}
		}()
	}

	before := b.Stats().Published
	var pwg sync.WaitGroup
	for p := range publishers {
		pwg.Go(func() {
			for i := range perPublisher {
				ev := &plugin.Event{Topic: topics[(p+i)%len(topics)], Group: "main", Payload: plugintest.Payload(map[string]any{"p": p, "seq": i})}
				if err := b.Publish(context.Background(), ev); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	pwg.Wait()
	close(stop)
	wg.Wait()

	for range len(subs) + remotes {
		select {
		case r := <-results:
			if r.err != nil {
				t.Errorf("%s after %d events: %v", r.name, r.n, r.err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("readers did not finish")
		}
	}
	st := b.Stats()
	if st.Published != before+publishers*perPublisher {
		t.Fatalf("Published = %d, want %d", st.Published, before+publishers*perPublisher)
	}
	if st.Dropped != 0 || st.RemoteDropped != 0 {
		t.Fatalf("drops with buffers large enough: %+v", st)
	}
	if st.Subscriptions != len(subs) {
		t.Fatalf("Subscriptions = %d, want %d (churned ones left behind?)", st.Subscriptions, len(subs))
	}
}

// TestOneEncoding: an event is encoded once, by its publisher. The bus
// hands every subscriber — in process and over the socket — the payload's
// bytes as they were published, compacted but never decoded and encoded
// again: members stay in their order, 2.50 stays 2.50, a number past
// float64's precision stays whole, and < & > stay unescaped (encoding/json
// would write \u003c). White space, new lines included, goes.
func TestOneEncoding(t *testing.T) {
	b := openBus(t, events.Options{})
	topic := plugin.TopicMessageInbound.Name()
	local, err := b.Subscribe(topic)
	if err != nil {
		t.Fatal(err)
	}
	r := dial(t, b, topic)
	join(t, b, r)
	for _, tt := range []struct{ published, want string }{
		{`{"z":1,"a":2.50,"n":9007199254740993,"s":"<&>"}`, `{"z":1,"a":2.50,"n":9007199254740993,"s":"<&>"}`},
		{"{ \"text\" :\n\t\"two\\nlines\" , \"reply_to\": {\"chat_id\" : 42} }\n", `{"text":"two\nlines","reply_to":{"chat_id":42}}`},
	} {
		if err := b.Publish(context.Background(), &plugin.Event{Topic: topic, Group: "main", Payload: json.RawMessage(tt.published)}); err != nil {
			t.Fatal(err)
		}
		if got := next(t, local); string(got.Payload) != tt.want {
			t.Errorf("in process: payload %s, want %s", got.Payload, tt.want)
		}
		if got := recv(t, r); string(got.Payload) != tt.want {
			t.Errorf("over the socket: payload %s, want %s", got.Payload, tt.want)
		}
	}
}
