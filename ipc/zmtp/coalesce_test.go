package zmtp

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/carapace-dev/carapace/ipc/zmtp/wire"
)

// recConn is a memConn that records every write to the peer.
type recConn struct {
	*memConn
	writes [][]byte
}

func (r *recConn) Write(p []byte) (int, error) {
	if len(p) > 0 {
		r.writes = append(r.writes, bytes.Clone(p))
	}
	return r.memConn.Write(p)
}

// Write as zmq4 calls it (header, then body, for every frame) puts each
// frame on the wire in one write — READY and messages, short and long
// headers — and sends exactly the bytes it was given, in order; an empty
// frame's header is not held back. On the listener zmq4's greeting is
// still swallowed first, and on the dial side passed through alone.
func TestWriteCoalescesFrames(t *testing.T) {
	long := bytes.Repeat([]byte("L"), 300)
	frames := [][2][]byte{ // header, body: as zmq4 writes them
		{wire.EncodeReady("ROUTER")[:2], wire.EncodeReady("ROUTER")[2:]},
		{{0, 5}, []byte("hello")},
		{{wire.FlagMore, 0}, nil}, // an empty frame
		{{0, 2}, []byte{0, 3}},    // a body that looks like a header
		{append([]byte{wire.FlagLong}, 0, 0, 0, 0, 0, 0, 1, 44), long},
	}
	want := [][]byte{
		wire.EncodeReady("ROUTER"),
		append([]byte{0, 5}, "hello"...),
		{wire.FlagMore, 0},
		{0, 2, 0, 3},
		append(append([]byte{wire.FlagLong}, 0, 0, 0, 0, 0, 0, 1, 44), long...),
	}
	for _, tc := range []struct {
		name string
		side side
		pre  [][]byte // what goes on the wire before the frames
	}{
		{"listener", sideListen, [][]byte{wire.Greeting[:]}}, // serverHandshake's own greeting
		{"dialer", sideDial, [][]byte{wire.Greeting[:]}},     // zmq4's, passed through
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := fuzzOpts.withDefaults()
			rec := &recConn{memConn: newMemConn(cat(validGreeting(), readyCmd(prop("Socket-Type", "DEALER"))))}
			c := newConn(rec, &o, tc.side, nil)
			defer c.Close()
			if tc.side == sideListen {
				if err := c.serverHandshake(); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := c.Write(wire.Greeting[:]); err != nil { // zmq4's greeting
				t.Fatal(err)
			}
			for _, f := range frames {
				for _, part := range f {
					if n, err := c.Write(part); n != len(part) || err != nil {
						t.Fatalf("Write(%d bytes) = %d, %v", len(part), n, err)
					}
				}
			}
			if got, wantAll := rec.writes, append(tc.pre, want...); !equalChunks(got, wantAll) {
				t.Fatalf("writes on the wire:\n%q\nwant\n%q", got, wantAll)
			}
			// A body too large to copy goes out right behind its header
			// (by writev on a real socket).
			rec.writes = nil
			big := bytes.Repeat([]byte("B"), coalesceCopy+1)
			hdr := append([]byte{wire.FlagLong}, 0, 0, 0, 0, 0, 0, 0, 0)
			binary.BigEndian.PutUint64(hdr[1:], uint64(len(big)))
			for _, part := range [][]byte{hdr, big} {
				if n, err := c.Write(part); n != len(part) || err != nil {
					t.Fatalf("Write(%d bytes) = %d, %v", len(part), n, err)
				}
			}
			if got := bytes.Join(rec.writes, nil); !bytes.Equal(got, cat(hdr, big)) {
				t.Fatalf("a large frame went out as %d bytes, want its %d", len(got), len(hdr)+len(big))
			}
		})
	}
}

// A write that is not a frame header where one is due turns holding off:
// every later write goes out as given.
func TestWriteCoalescingStopsOnAnotherPattern(t *testing.T) {
	o := fuzzOpts.withDefaults()
	rec := &recConn{memConn: newMemConn(nil)}
	c := newConn(rec, &o, sideDial, nil)
	defer c.Close()
	for _, p := range [][]byte{wire.Greeting[:], []byte("not a header"), {0, 5}, []byte("hello")} {
		if _, err := c.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	want := [][]byte{wire.Greeting[:], []byte("not a header"), {0, 5}, []byte("hello")}
	if !equalChunks(rec.writes, want) {
		t.Fatalf("writes on the wire:\n%q\nwant\n%q", rec.writes, want)
	}
}

func equalChunks(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
