package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/carapace-dev/carapace/core/events"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
)

func TestRemoteGetsExactlyItsTopics(t *testing.T) {
	published := []string{
		plugin.TopicMessageInbound.Name(), plugin.TopicAgentStarted.Name(), "agent.started_late",
		"message.inbound.extra", plugin.TopicAgentError.Name(), plugin.TopicPluginStopping.Name(),
	}
	tests := []struct {
		name   string
		topics []string
		want   []string
	}{
		{"one topic, despite longer topics sharing its prefix", []string{plugin.TopicAgentStarted.Name()}, []string{plugin.TopicAgentStarted.Name()}},
		{"two topics", []string{plugin.TopicMessageInbound.Name(), plugin.TopicPluginStopping.Name()}, []string{plugin.TopicMessageInbound.Name(), plugin.TopicPluginStopping.Name()}},
		{"no topic: every topic", nil, published},
		{"a topic nobody publishes", []string{plugin.TopicTaskTriggered.Name()}, nil},
	}
	b := openBus(t, events.Options{})
	rs := make([]*events.Remote, len(tests))
	for i, tt := range tests {
		rs[i] = dial(t, b, tt.topics...)
	}
	join(t, b, rs...)

	sent := map[string]*plugin.Event{}
	for i, topic := range published {
		ev := &plugin.Event{Topic: topic, Group: "family-chat", Correlation: "c", Source: "telegram",
			Payload: plugintest.Payload(map[string]any{"i": i, "body": "Hey <there> & \u00e9"})}
		if err := b.Publish(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		sent[ev.ID] = ev
	}
	end := &plugin.Event{Topic: probeTopic, Payload: plugintest.Payload(map[string]any{"end": true})}
	if err := b.Publish(context.Background(), end); err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rs[i]
			for _, want := range tt.want {
				got := recv(t, r)
				pub := sent[got.ID]
				if got.Topic != want || pub == nil {
					t.Fatalf("got %s (%s), want %s", got.Topic, got.ID, want)
				}
				if got.Topic != pub.Topic || got.Group != pub.Group || !got.Time.Equal(pub.Time) || got.Source != pub.Source ||
					got.Correlation != pub.Correlation || fields(t, got)["body"] != fields(t, pub)["body"] {
					t.Fatalf("got %+v, published %+v", got, pub)
				}
				if n, ok := fields(t, got)["i"].(json.Number); !ok || n != fields(t, pub)["i"] {
					t.Fatalf("payload i = %#v", fields(t, got)["i"])
				}
			}
			if got := recv(t, r); got.ID != end.ID {
				t.Fatalf("got an extra %s before the end marker", got.Topic)
			}
		})
	}
}

// TestWireFrames checks the contract external subscribers rely on, with a
// plain ZeroMQ SUB on ipc://: two frames [topic, event JSON], and
// prefix-matching subscriptions.
func TestWireFrames(t *testing.T) {
	b := openBus(t, events.Options{})
	sub := zmq4.NewSub(context.Background())
	defer sub.Close()
	if err := sub.SetOption(zmq4.OptionSubscribe, plugin.TopicAgentStarted.Name()); err != nil {
		t.Fatal(err)
	}
	if err := sub.Dial("ipc://" + b.Path()); err != nil {
		t.Fatal(err)
	}
	msgs := make(chan zmq4.Msg, 100)
	go func() {
		for {
			m, err := sub.Recv()
			if err != nil {
				close(msgs)
				return
			}
			msgs <- m
		}
	}()
	// Slow joiner: probe on the subscribed topic until one arrives.
	var probeIDs = map[string]bool{}
	for joined := false; !joined; {
		ev := &plugin.Event{Topic: plugin.TopicAgentStarted.Name(), Payload: plugintest.Payload(map[string]any{"probe": true})}
		if err := b.Publish(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		probeIDs[ev.ID] = true
		select {
		case <-msgs:
			joined = true
		case <-time.After(30 * time.Millisecond):
		}
	}
	var want []string
	for _, topic := range []string{plugin.TopicAgentError.Name(), "agent.started_late", plugin.TopicAgentStarted.Name(), "agent.startedx.y"} {
		ev := &plugin.Event{Topic: topic, Group: "main"}
		if err := b.Publish(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(topic, plugin.TopicAgentStarted.Name()) {
			want = append(want, ev.ID)
		}
	}
	for i := 0; i < len(want); {
		var m zmq4.Msg
		select {
		case m = <-msgs:
		case <-time.After(10 * time.Second):
			t.Fatalf("received %d of %d", i, len(want))
		}
		if len(m.Frames) != 2 {
			t.Fatalf("%d frames, want 2", len(m.Frames))
		}
		var ev plugin.Event
		if err := json.Unmarshal(m.Frames[1], &ev); err != nil {
			t.Fatalf("frame 1 is not an event: %v", err)
		}
		if ev.Topic != string(m.Frames[0]) {
			t.Fatalf("frame 0 %q, event topic %q", m.Frames[0], ev.Topic)
		}
		if again, _ := json.Marshal(&ev); string(again) != string(m.Frames[1]) {
			t.Fatalf("frame 1 is not plugin.Event's encoding:\n%s\nwant\n%s", m.Frames[1], again)
		}
		if probeIDs[ev.ID] {
			continue
		}
		if ev.ID != want[i] {
			t.Fatalf("got %s %s, want %s", ev.Topic, ev.ID, want[i])
		}
		i++
	}
}

func TestDialRefuses(t *testing.T) {
	dir := privateDir(t)
	tests := []struct {
		name    string
		path    string
		topics  []string
		wantIs  error
		wantMsg string
	}{
		{"no bus listening", filepath.Join(dir, "events.sock"), nil, nil, "dial event bus"},
		{"relative path", "run/events.sock", nil, nil, "bad endpoint"},
		{"bad topic", filepath.Join(dir, "events.sock"), []string{"agent.*"}, events.ErrBadTopic, "agent.*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := events.Dial(tt.path, tt.topics...)
			if err == nil {
				r.Close()
				t.Fatal("Dial succeeded")
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Fatalf("err = %v, want %v", err, tt.wantIs)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("err = %q, want it to mention %q", err, tt.wantMsg)
			}
		})
	}
}

func TestRemoteClose(t *testing.T) {
	b := openBus(t, events.Options{})
	r, err := events.Dial(b.Path())
	if err != nil {
		t.Fatal(err)
	}
	recvErr := make(chan error, 1)
	go func() {
		_, err := r.Recv(context.Background())
		recvErr <- err
	}()
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-recvErr:
		if !errors.Is(err, events.ErrClosed) {
			t.Fatalf("pending Recv = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a pending Recv did not return on Close")
	}
	if _, err := r.Recv(context.Background()); !errors.Is(err, events.ErrClosed) {
		t.Fatalf("Recv after Close = %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	r2 := dial(t, b)
	if _, err := r2.Recv(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Recv with nothing published = %v, want the context's deadline", err)
	}
	eventually(t, "the closed remote to leave", func() bool { return b.Stats().Remotes == 1 })
}

// TestRemoteChecksMessages runs a Remote against a fake publisher (plain
// zmq4 PUB) that sends malformed messages.
func TestRemoteChecksMessages(t *testing.T) {
	path := filepath.Join(privateDir(t), "fake.sock")
	pub := zmq4.NewPub(context.Background())
	defer pub.Close()
	if err := pub.Listen("ipc://" + path); err != nil {
		t.Fatal(err)
	}
	r, err := events.Dial(path, plugin.TopicAgentStarted.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	good := func(id string) [][]byte {
		return [][]byte{[]byte("agent.started"), []byte(`{"id":"` + id + `","topic":"agent.started","group":"main","timestamp":"2026-02-17T10:30:00Z","payload":{"n":1}}`)}
	}
	send := func(frames [][]byte) {
		t.Helper()
		if err := pub.Send(zmq4.NewMsgFrom(frames...)); err != nil {
			t.Fatal(err)
		}
	}
	for joined := false; !joined; { // slow joiner
		send(good("probe"))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		ev, err := r.Recv(ctx)
		cancel()
		joined = err == nil && ev.ID == "probe"
	}
	send(good("fence"))
	for recv(t, r).ID != "fence" {
	}

	tests := []struct {
		name    string
		frames  [][]byte
		wantMsg string
	}{
		{"one frame", [][]byte{[]byte("agent.started")}, "1 frames, want 2"},
		{"three frames", append(good("x"), []byte("{}")), "3 frames, want 2"},
		{"bad frame topic", [][]byte{[]byte("agent.started.*"), good("x")[1]}, "frame topic"},
		{"an array", [][]byte{[]byte("agent.started"), []byte(`[1,2]`)}, "not a JSON object"},
		{"a string", [][]byte{[]byte("agent.started"), []byte(`"agent.started"`)}, "not a JSON object"},
		{"broken JSON", [][]byte{[]byte("agent.started"), []byte(`{"id":"x","topic":`)}, "malformed event"},
		{"data after the object", [][]byte{[]byte("agent.started"), append(good("x")[1], []byte(` {}`)...)}, "data after the JSON object"},
		{"topic differs from the frame's", [][]byte{[]byte("agent.started"), []byte(`{"id":"x","topic":"agent.started_late","payload":{}}`)}, "is not the frame's"},
		{"no id", [][]byte{[]byte("agent.started"), []byte(`{"topic":"agent.started","payload":{}}`)}, "no id"},
		{"bad group", [][]byte{[]byte("agent.started"), []byte(`{"id":"x","topic":"agent.started","group":"../x","payload":{}}`)}, "group"},
		{"bad time", [][]byte{[]byte("agent.started"), []byte(`{"id":"x","topic":"agent.started","timestamp":"yesterday"}`)}, "malformed event"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			send(tt.frames)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := r.Recv(ctx)
			if !errors.Is(err, events.ErrBadEvent) {
				t.Fatalf("err = %v, want ErrBadEvent", err)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("err = %q, want it to mention %q", err, tt.wantMsg)
			}
			// The remote stays usable.
			id := "after-" + string(rune('a'+i))
			send(good(id))
			if ev := recv(t, r); ev.ID != id {
				t.Fatalf("next event %s, want %s", ev.ID, id)
			}
		})
	}

	t.Run("a frame over MaxEventSize disconnects", func(t *testing.T) {
		big := []byte(`{"id":"x","topic":"agent.started","payload":{"b":"` + strings.Repeat("x", events.MaxEventSize) + `"}}`)
		send([][]byte{[]byte("agent.started"), big})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := r.Recv(ctx); !errors.Is(err, events.ErrDisconnected) {
			t.Fatalf("err = %v, want ErrDisconnected", err)
		}
	})
}

// TestSlowRemoteSubscriber: a subscriber that stops reading has events
// dropped (counted, logged); Publish and the other subscribers go on.
func TestSlowRemoteSubscriber(t *testing.T) {
	const total, size = 300, 8 << 10
	logs := &logRecorder{}
	b := openBus(t, events.Options{RemoteBuffer: 64 << 10, Logger: slog.New(logs)})
	healthy := dial(t, b)
	join(t, b, healthy)

	stalled := rawConn(t, b)
	if _, err := stalled.Write(append(handshake(), frame(0, []byte{1})...)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the stalled subscriber to connect", func() bool { return b.Stats().Remotes == 2 })
	time.Sleep(50 * time.Millisecond) // let its subscription land

	body := strings.Repeat("x", size)
	deadline := time.Now().Add(60 * time.Second)
	for i := range total {
		ev := &plugin.Event{Topic: plugin.TopicMessageInbound.Name(), Payload: plugintest.Payload(map[string]any{"i": i, "body": body})}
		start := time.Now()
		if err := b.Publish(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("Publish took %v", d)
		}
		if got := recv(t, healthy); got.ID != ev.ID {
			t.Fatalf("healthy subscriber got %s at %d, want %s", got.ID, i, ev.ID)
		}
		if time.Now().After(deadline) {
			t.Fatal("too slow")
		}
	}
	st := b.Stats()
	if st.RemoteDropped == 0 {
		t.Fatalf("no remote drops after %d KiB to a subscriber that does not read: %+v", total*size>>10, st)
	}
	if len(logs.matching("remote subscriber is not keeping up")) == 0 {
		t.Fatal("the remote drops were not logged")
	}
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close hung on the stalled subscriber")
	}
}
