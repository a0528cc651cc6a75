package zmtp

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
)

// memConn is an in-memory net.Conn: reads come from a fixed byte stream (the
// peer), writes are discarded.
type memConn struct {
	mu     sync.Mutex
	r      *bytes.Reader
	closed bool
}

func newMemConn(b []byte) *memConn { return &memConn{r: bytes.NewReader(b)} }

func (m *memConn) Read(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, net.ErrClosed
	}
	return m.r.Read(p)
}

func (m *memConn) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, net.ErrClosed
	}
	return len(p), nil
}

func (m *memConn) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

type memAddr struct{}

func (memAddr) Network() string { return "mem" }
func (memAddr) String() string  { return "mem" }

func (m *memConn) LocalAddr() net.Addr              { return memAddr{} }
func (m *memConn) RemoteAddr() net.Addr             { return memAddr{} }
func (m *memConn) SetDeadline(time.Time) error      { return nil }
func (m *memConn) SetReadDeadline(time.Time) error  { return nil }
func (m *memConn) SetWriteDeadline(time.Time) error { return nil }

var fuzzOpts = Options{MaxFrame: 4096, MaxMessage: 8192, MaxFrames: 4, HandshakeTimeout: time.Hour}

// FuzzFilter feeds arbitrary bytes as the peer's stream into the listener
// side of the filter. It checks, first, that what the filter lets through —
// read exactly the way zmq4 reads it — never holds a frame header beyond the
// limits, and second, that zmq4 itself (Open, then RecvMsg until the stream
// fails) neither panics nor allocates more than the limits allow.
func FuzzFilter(f *testing.F) {
	hs := cat(validGreeting(), dealerReady())
	for _, seed := range [][]byte{
		nil,
		hs,
		cat(hs, frame(0, []byte("hello"))),
		cat(hs, frame(flagMore, nil), frame(flagMore, []byte("a")), frame(0, []byte("b"))),
		cat(hs, frame(flagMore, nil), frame(flagMore, nil), frame(flagMore, nil), frame(flagMore, nil), frame(0, nil)),
		cat(hs, header(0, 1<<62)),
		cat(hs, header(0, 1<<31)),
		cat(hs, header(0, 4097)),
		cat(hs, command("PING", []byte("\x00\x00x")), frame(0, []byte("x"))),
		cat(hs, command("PING", bytes.Repeat([]byte{1}, 600))),
		cat(hs, frame(flagMore, bytes.Repeat([]byte{1}, 4096)), frame(flagMore, bytes.Repeat([]byte{1}, 4096)), frame(0, []byte{1})),
		cat(validGreeting(), readyCmd(prop("Socket-Type", "DEALER"), []byte{3, 'a', 'b'})),
		cat(validGreeting(), readyCmd(prop("Socket-Type", "DEALER"), []byte{1, 'a', 0, 0})),
		cat(validGreeting(), header(flagCommand, 1<<62)),
		cat(greetingBytes("PLAIN", 3, 0), dealerReady()),
		bytes.Repeat([]byte{0xFF}, 200),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		checkFilterOutput(t, stream)
		checkZMQ4OnFilter(t, stream)
	})
}

func checkFilterOutput(t *testing.T, stream []byte) {
	o := fuzzOpts.withDefaults()
	var reason string
	o.OnReject = func(_, r string) { reason = r }
	c := newConn(newMemConn(stream), &o, sideListen, nil)
	defer c.Close()
	if err := c.serverHandshake(); err != nil {
		if reason == "" {
			t.Fatalf("handshake failed (%v) without a reject reason", err)
		}
		return
	}
	// The replay: the peer's greeting, then a READY with Socket-Type only.
	var g [GreetingLen]byte
	if _, err := io.ReadFull(c, g[:]); err != nil || !bytes.Equal(g[:], stream[:GreetingLen]) {
		t.Fatalf("replayed greeting %x, %v", g, err)
	}
	want := EncodeReady("DEALER")
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("replayed READY %q, %v", got, err)
	}
	// Frames, read as zmq4's Conn.read reads them.
	var frames int
	var total uint64
	for {
		var h [9]byte
		if _, err := io.ReadFull(c, h[:2]); err != nil {
			return
		}
		size := uint64(h[1])
		if h[0]&flagLong != 0 {
			if _, err := io.ReadFull(c, h[2:]); err != nil {
				return
			}
			size = binary.BigEndian.Uint64(h[1:])
		}
		if h[0]&flagCommand != 0 {
			if size > MaxCommandSize {
				t.Fatalf("command of %d bytes let through", size)
			}
		} else {
			frames++
			total += size
			if size > uint64(o.MaxFrame) || frames > o.MaxFrames || total > uint64(o.MaxMessage) {
				t.Fatalf("let through: frame %d bytes, %d frames, %d bytes in message", size, frames, total)
			}
			if h[0]&flagMore == 0 {
				frames, total = 0, 0
			}
		}
		if _, err := io.CopyN(io.Discard, c, int64(size)); err != nil {
			return
		}
	}
}

func checkZMQ4OnFilter(t *testing.T, stream []byte) {
	o := fuzzOpts.withDefaults()
	c := newConn(newMemConn(stream), &o, sideListen, nil)
	defer c.Close()
	if c.serverHandshake() != nil {
		return
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	zc, err := zmq4.Open(c, null.Security(), zmq4.Router, zmq4.SocketIdentity("fuzz"), true, nil)
	if err != nil {
		t.Fatalf("zmq4 refused a pre-validated handshake: %v", err)
	}
	for {
		if _, err := zc.RecvMsg(); err != nil {
			break
		}
	}
	runtime.ReadMemStats(&after)
	// zmq4 allocates each frame body at its claimed size: with the filter in
	// front that is bounded by what the stream really holds, per frame at
	// most MaxFrame. 8 MiB is far above that and far below one forged claim.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20+16*uint64(len(stream)) {
		t.Fatalf("zmq4 allocated %d bytes on a %d-byte stream", grew, len(stream))
	}
}
