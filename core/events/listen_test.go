package events_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/events"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
	"github.com/carapace-dev/carapace/internal/testutil/leaktest"
	"go.uber.org/goleak"
)

// TestSubscriberConnectionsFiltered drives hostile or broken subscriber
// connections at the bus's socket: each must be closed and counted, and the
// bus must go on serving real subscribers.
func TestSubscriberConnectionsFiltered(t *testing.T) {
	hugeLong := func(flags byte) []byte {
		f := []byte{flags | 0x02}
		return binary.BigEndian.AppendUint64(f, 1<<62)
	}
	tests := []struct {
		name       string
		send       []byte
		wantReason string
	}{
		{"not ZMTP", make([]byte, 64), "zmtp: bad greeting: signature"},
		{"ZMTP 2", greeting("NULL", 2), "zmtp: bad greeting: version is not 3.x"},
		{"PLAIN mechanism", greeting("PLAIN", 3), "zmtp: bad greeting: mechanism is not NULL"},
		{"READY claiming 2^62 bytes", append(greeting("NULL", 3), hugeLong(0x04)...), "frame too large"},
		{"READY over 4 KiB", append(greeting("NULL", 3), frame(0x04, readyBody("Socket-Type", "SUB", "X", string(make([]byte, 5000))))...), "frame too large"},
		{"a message instead of READY", append(greeting("NULL", 3), frame(0, []byte{1})...), "READY is not a single command frame"},
		{"not READY", append(greeting("NULL", 3), frame(0x04, append([]byte{5}, "ERROR"...))...), "zmtp: bad READY: not a READY command"},
		{"DEALER", append(greeting("NULL", 3), frame(0x04, readyBody("Socket-Type", "DEALER"))...), "peer is not a SUB socket"},
		{"unknown socket type", append(greeting("NULL", 3), frame(0x04, readyBody("Socket-Type", "SUBSCRIBER"))...), "zmtp: bad READY: unknown socket type"},
		{"no Socket-Type", append(greeting("NULL", 3), frame(0x04, readyBody("Identity", "x"))...), "zmtp: bad READY: missing Socket-Type"},
		{"Socket-Type twice", append(greeting("NULL", 3), frame(0x04, readyBody("Socket-Type", "SUB", "socket-type", "dealer"))...), "zmtp: bad READY: duplicate property"},
		{"value past the end", append(greeting("NULL", 3), frame(0x04, append(readyBody(), 11, 'S', 'o', 'c', 'k', 'e', 't', '-', 'T', 'y', 'p', 'e', 0, 0, 0, 100, 'S'))...), "zmtp: bad READY: value past end"},
		{"name past the end", append(greeting("NULL", 3), frame(0x04, append(readyBody(), 40, 'S'))...), "zmtp: bad READY: property name past end"},
		{"bad name", append(greeting("NULL", 3), frame(0x04, readyBody("Socket Type", "SUB"))...), "zmtp: bad READY: bad property name"},
		{"frame claiming 2^62 bytes after the handshake", append(handshake(), hugeLong(0)...), "frame too large"},
		{"unknown flags", append(handshake(), 0x80, 1, 1), "unknown frame flags"},
		{"multi-part message", append(handshake(), frame(0x01, []byte{1})...), "a subscriber may send single-frame subscriptions only"},
		{"a command after the handshake", append(handshake(), frame(0x04, append([]byte{4}, "PING"...))...), "a subscriber may send single-frame subscriptions only"},
		{"not a subscription", append(handshake(), frame(0, []byte("abc"))...), "not a subscription message"},
		{"subscription over 1 KiB", append(handshake(), frame(0, append([]byte{1}, make([]byte, 1100)...))...), "frame too large"},
		{"silent", nil, "handshake timeout"},
		{"greeting, then silent", greeting("NULL", 3), "handshake timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &logRecorder{} // a bus each: refusals are logged rate-limited
			b := openBus(t, events.Options{HandshakeTimeout: 300 * time.Millisecond, Logger: slog.New(logs)})
			c := rawConn(t, b)
			if _, err := c.Write(tt.send); err != nil {
				t.Fatal(err)
			}
			if err := closedByPeer(c); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the rejection to be counted", func() bool { return b.Stats().RemoteRejected == 1 })
			eventually(t, "the rejection to be logged", func() bool { return len(logs.matching("refused a subscriber connection")) > 0 })
			recs := logs.matching("refused a subscriber connection")
			if len(recs) != 1 || recs[0].attrs["reason"] != tt.wantReason {
				t.Fatalf("refusals logged: %v, want one with reason %q", recs, tt.wantReason)
			}
			// The bus still serves a real subscriber, which is not
			// counted as rejected.
			r := dial(t, b)
			join(t, b, r)
			if got := b.Stats().RemoteRejected; got != 1 {
				t.Fatalf("RemoteRejected = %d after a real subscriber joined, want 1", got)
			}
			eventually(t, "the rejected connection to be gone", func() bool { return b.Stats().Remotes == 1 })
		})
	}
}

// TestSilentPeerDelaysOthersOnlyBriefly: a peer that connects and says
// nothing holds zmq4's accept loop for at most HandshakeTimeout.
// TestReadyIsCanonicalised: a subscriber whose READY spells its socket type
// in lower case and carries an Identity is served, and zmq4 is shown only a
// canonical Socket-Type (it panics on spellings it does not know): the raw
// peer subscribes and receives a published event.
func TestReadyIsCanonicalised(t *testing.T) {
	b := openBus(t, events.Options{HandshakeTimeout: 2 * time.Second})
	c := rawConn(t, b)
	hello := append(greeting("NULL", 3), frame(0x04, readyBody("Identity", "me", "Socket-Type", "sub"))...)
	hello = append(hello, frame(0, []byte{1})...) // subscribe to everything
	if _, err := c.Write(hello); err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 4096)
	deadline := time.Now().Add(15 * time.Second)
	for !bytes.Contains(got, []byte("test.canonical_ready")) {
		if time.Now().After(deadline) {
			t.Fatalf("the raw subscriber received no event in 15s; bytes so far %q; stats %+v", got, b.Stats())
		}
		// The subscription may land after a publish: keep publishing.
		if err := b.Publish(context.Background(), &plugin.Event{Topic: "test.canonical_ready", Payload: plugintest.Payload(map[string]any{})}); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		var ne net.Error
		if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			t.Fatalf("read: %v (stats %+v)", err, b.Stats())
		}
	}
	if st := b.Stats(); st.RemoteRejected != 0 {
		t.Errorf("stats %+v: the subscriber was counted as rejected", st)
	}
}

func TestSilentPeerDelaysOthersOnlyBriefly(t *testing.T) {
	b := openBus(t, events.Options{HandshakeTimeout: 300 * time.Millisecond})
	silent := rawConn(t, b)
	_ = silent
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	r := dial(t, b)
	join(t, b, r)
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("a real subscriber took %v to join behind a silent peer", d)
	}
	if err := closedByPeer(silent); err != nil {
		t.Fatal(err)
	}
}

func TestMaxRemotes(t *testing.T) {
	b := openBus(t, events.Options{MaxRemotes: 2})
	r1, r2 := dial(t, b), dial(t, b)
	join(t, b, r1, r2)
	extra := rawConn(t, b)
	if err := closedByPeer(extra); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.Remotes != 2 || st.RemoteRejected != 1 {
		t.Fatalf("Remotes = %d, RemoteRejected = %d; want 2 and 1", st.Remotes, st.RemoteRejected)
	}
	// The two still get events.
	ev := &plugin.Event{Topic: plugin.TopicAgentStarted.Name()}
	if err := b.Publish(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*events.Remote{r1, r2} {
		if got := recv(t, r); got.ID != ev.ID {
			t.Fatalf("got %s, want %s", got.ID, ev.ID)
		}
	}
}

// TestNoGoroutinesLeftAfterClose: the bus's and the remotes' goroutines
// end with them, all but the one zmq4 leaves behind for ever (see the
// package documentation; leaktest.Known ignores it).
func TestNoGoroutinesLeftAfterClose(t *testing.T) {
	before := goleak.IgnoreCurrent()
	b, err := events.Open(privateDir(t)+"/events.sock", events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var rs []*events.Remote
	for range 3 {
		r, err := events.Dial(b.Path())
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	join(t, b, rs...)
	stalled := rawConn(t, b)
	if _, err := stalled.Write(append(handshake(), frame(0, []byte{1})...)); err != nil {
		t.Fatal(err)
	}
	s, _ := b.Subscribe()
	for range 50 {
		if err := b.Publish(context.Background(), &plugin.Event{Topic: plugin.TopicAgentStarted.Name()}); err != nil {
			t.Fatal(err)
		}
	}
	if goleak.Find(append(leaktest.Known(), before)...) == nil {
		t.Fatal("the leak check does not see the bus's goroutines")
	}
	if err := rs[0].Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs[1:] {
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for range s.C() {
	}
	leaktest.Check(t, before)
}
