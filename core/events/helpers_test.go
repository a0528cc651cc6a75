package events_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/events"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
)

// fields decodes ev's payload, numbers as json.Number.
func fields(t testing.TB, ev *plugin.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := ev.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// probeTopic is the topic the slow-joiner probes use.
const probeTopic = "test.probe"

// privateDir returns a short 0700 directory (socket paths are limited to
// ~100 bytes, and t.TempDir's can be longer).
func privateDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ev")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// openBus opens a bus in a fresh private directory and closes it at cleanup.
func openBus(t testing.TB, opts events.Options) *events.Bus {
	t.Helper()
	b, err := events.Open(filepath.Join(privateDir(t), "events.sock"), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// dial connects a Remote to b; with topics, the probe topic is added so
// that join can work. It is closed at cleanup.
func dial(t testing.TB, b *events.Bus, topics ...string) *events.Remote {
	t.Helper()
	if len(topics) > 0 {
		topics = append(topics, probeTopic)
	}
	r, err := events.Dial(b.Path(), topics...)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// join waits out ZeroMQ's slow joiner: it publishes probes until every
// remote has received one, then publishes a fence and reads each remote up
// to it, so that the next event each one returns is published after join.
func join(t testing.TB, b *events.Bus, remotes ...*events.Remote) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	joined := make([]bool, len(remotes))
	for n := 0; n < len(remotes); {
		if time.Now().After(deadline) {
			t.Fatalf("remote subscribers did not join within 15s (%d of %d did)", n, len(remotes))
		}
		if err := b.Publish(context.Background(), &plugin.Event{Topic: probeTopic, Payload: plugintest.Payload(map[string]any{"probe": true})}); err != nil {
			t.Fatalf("publish probe: %v", err)
		}
		for i, r := range remotes {
			if joined[i] {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
			ev, err := r.Recv(ctx)
			cancel()
			if err == nil && ev.Topic == probeTopic {
				joined[i] = true
				n++
			} else if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Recv while joining: %v", err)
			}
		}
	}
	fence := fmt.Sprintf("fence-%d", time.Now().UnixNano())
	if err := b.Publish(context.Background(), &plugin.Event{Topic: probeTopic, Payload: plugintest.Payload(map[string]any{"fence": fence})}); err != nil {
		t.Fatalf("publish fence: %v", err)
	}
	for _, r := range remotes {
		for {
			ev := recv(t, r)
			if ev.Topic == probeTopic && fields(t, ev)["fence"] == fence {
				break
			}
		}
	}
}

// recv returns r's next event or fails the test after 10 s.
func recv(t testing.TB, r *events.Remote) *plugin.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := r.Recv(ctx)
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	return ev
}

// next returns s's next event or fails the test after 5 s.
func next(t testing.TB, s *events.Subscription) *plugin.Event {
	t.Helper()
	select {
	case ev, ok := <-s.C():
		if !ok {
			t.Fatal("subscription channel closed")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
		return nil
	}
}

// assertEmpty fails if s has an event waiting.
func assertEmpty(t testing.TB, s *events.Subscription) {
	t.Helper()
	select {
	case ev := <-s.C():
		t.Fatalf("unexpected event %s (%v)", ev.Topic, ev.Payload)
	default:
	}
}

// logRecorder is a slog.Handler that keeps the records' messages and
// attributes.
type logRecorder struct {
	mu   sync.Mutex
	recs []logRec
}

type logRec struct {
	msg   string
	attrs map[string]any
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecorder) WithGroup(string) slog.Handler            { return h }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := logRec{msg: r.Message, attrs: map[string]any{}}
	r.Attrs(func(a slog.Attr) bool { rec.attrs[a.Key] = a.Value.Any(); return true })
	h.mu.Lock()
	h.recs = append(h.recs, rec)
	h.mu.Unlock()
	return nil
}

// matching returns the records whose message contains s.
func (h *logRecorder) matching(s string) []logRec {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []logRec
	for _, r := range h.recs {
		if strings.Contains(r.msg, s) {
			out = append(out, r)
		}
	}
	return out
}

// eventually polls cond for up to 10 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ZMTP by hand, for raw subscriber connections.

func greeting(mechanism string, major byte) []byte {
	g := make([]byte, 64)
	g[0], g[9], g[10] = 0xFF, 0x7F, major
	copy(g[12:32], mechanism)
	return g
}

// readyBody encodes a READY command body with the given properties, in order.
func readyBody(props ...string) []byte {
	b := append([]byte{5}, "READY"...)
	for i := 0; i+1 < len(props); i += 2 {
		b = append(b, byte(len(props[i])))
		b = append(b, props[i]...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(props[i+1])))
		b = append(b, props[i+1]...)
	}
	return b
}

// frame encodes one frame.
func frame(flags byte, body []byte) []byte {
	if len(body) > 255 {
		f := []byte{flags | 0x02}
		f = binary.BigEndian.AppendUint64(f, uint64(len(body)))
		return append(f, body...)
	}
	return append([]byte{flags, byte(len(body))}, body...)
}

// handshake is a valid SUB greeting and READY.
func handshake() []byte {
	return append(greeting("NULL", 3), frame(0x04, readyBody("Socket-Type", "SUB"))...)
}

// rawConn connects to the bus's socket without ZeroMQ.
func rawConn(t testing.TB, b *events.Bus) *net.UnixConn {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: b.Path(), Net: "unix"})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// closedByPeer reports whether the bus closes c within 5 s (reading and
// discarding what it sends first).
func closedByPeer(c net.Conn) error {
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errors.New("the connection is still open after 5s")
	}
	return nil // EOF or a reset: closed
}
