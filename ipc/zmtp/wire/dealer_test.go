package wire_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/carapace-dev/carapace/internal/testutil/deptest"
	_ "github.com/carapace-dev/carapace/ipc/zmtp" // registers zipc://, the core's hardened transport
	"github.com/carapace-dev/carapace/ipc/zmtp/wire"
)

func sockPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "wire")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "s.sock")
}

func soon() time.Time { return time.Now().Add(30 * time.Second) }

// The Dealer against what the core runs: a zmq4 ROUTER behind the
// hardened zipc:// listener. The request rides in the handshake's write;
// the ROUTER answers one frame, then a three-part message whose last part
// is the payload.
func TestDealerAgainstTheCoresRouter(t *testing.T) {
	path := sockPath(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := zmq4.NewRouter(ctx)
	defer r.Close()
	if err := r.Listen("zipc://" + path); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			m, err := r.Recv()
			if err != nil {
				return
			}
			id, body := m.Frames[0], m.Frames[len(m.Frames)-1]
			_ = r.Send(zmq4.NewMsgFrom(id, append([]byte("pong:"), body...)))
			_ = r.Send(zmq4.NewMsgFrom(id, []byte("x"), []byte("y"), []byte("last")))
		}
	}()
	d, err := wire.Dial(ctx, path, soon(), wire.Limits{}, []byte("ping"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	_ = d.SetReadDeadline(soon())
	for _, want := range []string{"pong:ping", "last"} {
		got, err := d.Recv()
		if err != nil || string(got) != want {
			t.Fatalf("Recv = %q, %v; want %q", got, err, want)
		}
	}
	// A second request on the same connection, by Send.
	if err := d.Send(bytes.Repeat([]byte("z"), 300), soon()); err != nil { // a long frame header
		t.Fatal(err)
	}
	if got, err := d.Recv(); err != nil || len(got) != 305 {
		t.Fatalf("Recv = %d bytes, %v; want 305", len(got), err)
	}
}

// fakeServer accepts one connection on path, reads the client's greeting
// and READY, and writes script.
func fakeServer(t *testing.T, path string, script []byte) {
	t.Helper()
	acceptOne(t, path, func(c net.Conn) {
		_, _ = c.Write(script)
		_, _ = io.Copy(io.Discard, c)
	})
}

// acceptOne listens on path and, in the background, accepts one
// connection, reads the client's greeting and hands the connection to
// serve; it is closed when serve returns, the listener when the test ends.
func acceptOne(t *testing.T, path string, serve func(c net.Conn)) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, wire.GreetingLen)
		if _, err := io.ReadFull(c, buf); err != nil {
			return
		}
		serve(c)
	}()
}

func greeting() []byte { g := wire.Greeting; return g[:] }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func header(flags byte, size uint64) []byte {
	if size > 255 {
		return binary.BigEndian.AppendUint64([]byte{flags | wire.FlagLong}, size)
	}
	return []byte{flags, byte(size)}
}

func frame(flags byte, body string) []byte {
	return cat(header(flags, uint64(len(body))), []byte(body))
}

func TestDealerRefusesAHostilePeer(t *testing.T) {
	router := wire.EncodeReady("ROUTER")
	badGreeting := greeting()
	badGreeting[10] = 2
	tests := []struct {
		name    string
		script  []byte
		dialErr error // the handshake fails with it
		recvErr error // else Recv fails with it
	}{
		{"a ZMTP 2 greeting", badGreeting, wire.ErrBadGreeting, nil},
		{"a DEALER where a ROUTER should be", cat(greeting(), wire.EncodeReady("DEALER")), wire.ErrSocketType, nil},
		{"a READY of 2^62 bytes", cat(greeting(), header(wire.FlagCommand, 1<<62)), wire.ErrBadReady, nil},
		{"a frame claiming 2^62 bytes", cat(greeting(), router, header(0, 1<<62)), nil, wire.ErrFrameTooLarge},
		{"a frame just over the limit", cat(greeting(), router, header(0, wire.DefaultMaxFrame+1)), nil, wire.ErrFrameTooLarge},
		{"five parts", cat(greeting(), router, frame(wire.FlagMore, "a"), frame(wire.FlagMore, "b"), frame(wire.FlagMore, "c"), frame(wire.FlagMore, "d"), frame(0, "e")), nil, wire.ErrTooManyFrames},
		{"a command inside a message", cat(greeting(), router, frame(wire.FlagMore, "a"), frame(wire.FlagCommand, "\x04PING")), nil, wire.ErrBadFrame},
		{"a large command", cat(greeting(), router, frame(wire.FlagCommand, string(bytes.Repeat([]byte("p"), 600)))), nil, wire.ErrCommandTooLarge},
		{"unknown flags", cat(greeting(), router, frame(0x80, "a")), nil, wire.ErrBadFrame},
		{"closed mid-frame", cat(greeting(), router, header(0, 10), []byte("abc")), nil, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := sockPath(t)
			script := tt.script
			if tt.name == "closed mid-frame" {
				// The server closes after the script: no io.Copy wait.
				ln, err := net.Listen("unix", path)
				if err != nil {
					t.Fatal(err)
				}
				defer ln.Close()
				go func() {
					c, err := ln.Accept()
					if err == nil {
						// Read the whole hello (greeting, READY, "req"), answer, close.
						hello := make([]byte, wire.GreetingLen+len(wire.EncodeReady("DEALER"))+2+3)
						_, _ = io.ReadFull(c, hello)
						_, _ = c.Write(script)
						c.Close()
					}
				}()
			} else {
				fakeServer(t, path, script)
			}
			d, err := wire.Dial(context.Background(), path, soon(), wire.Limits{}, []byte("req"))
			if tt.dialErr != nil {
				if !errors.Is(err, tt.dialErr) {
					t.Fatalf("Dial: %v, want %v", err, tt.dialErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			_ = d.SetReadDeadline(soon())
			if _, err := d.Recv(); !errors.Is(err, tt.recvErr) {
				t.Fatalf("Recv: %v, want %v", err, tt.recvErr)
			}
		})
	}
}

// Commands between messages (a PING) are skipped; the control: the same
// stream without the command gives the same answer.
func TestDealerSkipsCommands(t *testing.T) {
	router := wire.EncodeReady("ROUTER")
	for _, script := range [][]byte{
		cat(greeting(), router, frame(wire.FlagCommand, "\x04PING"), frame(0, "answer")),
		cat(greeting(), router, frame(0, "answer")),
	} {
		path := sockPath(t)
		fakeServer(t, path, script)
		d, err := wire.Dial(context.Background(), path, soon(), wire.Limits{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = d.SetReadDeadline(soon())
		if got, err := d.Recv(); err != nil || string(got) != "answer" {
			t.Fatalf("Recv = %q, %v", got, err)
		}
		d.Close()
	}
}

// A peer that accepts and says nothing: the handshake ends at its
// deadline with an error (bounded only by the test's own timeout).
func TestDealerSilentPeer(t *testing.T) {
	path := sockPath(t)
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			_, _ = io.Copy(io.Discard, c)
		}
	}()
	if _, err := wire.Dial(context.Background(), path, time.Now().Add(200*time.Millisecond), wire.Limits{}, nil); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Dial to a silent peer: %v, want a deadline error", err)
	}
}

func TestPath(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"ipc:///run/carapace/ipc.sock", "/run/carapace/ipc.sock"},
		{"zipc:///a/b", "/a/b"},
		{"/a/b", "/a/b"},
		{"tcp://127.0.0.1:1", ""},
		{"ipc://relative", ""},
		{"ipc://@abstract", ""},
		{"ipc:///a\x00b", ""},
		{"ipc:///a/ipc://b", ""},
	} {
		got, err := wire.Path(tt.in)
		if got != tt.want || (err != nil) != (tt.want == "") || (err != nil && !errors.Is(err, wire.ErrBadEndpoint)) {
			t.Errorf("Path(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// TestImports keeps the package free of zmq4 (the point of it) and small.
// On Linux it does not import net either: the Dealer works its socket by
// system calls, and a call that registered with the runtime's network
// poller would pay for its start again in every ipc run. Nor fmt, which
// bin/ipc does not link (cmd/ipc TestNoFmtNorReflectiveJSON).
func TestImports(t *testing.T) {
	base := []string{
		"io", "bufio", "encoding/binary", "errors",
		"strconv", "time", "context", "strings", "sync", "sync/atomic",
	}
	for goos, extra := range map[string][]string{
		"linux":  {"os", "syscall", "unsafe"}, // conn_linux.go
		"darwin": {"net"},                     // conn_other.go
	} {
		deptest.Checker{
			Package:        "github.com/carapace-dev/carapace/ipc/zmtp/wire",
			GOOS:           goos,
			CGO:            "0",
			AllowedImports: append(append([]string(nil), base...), extra...),
		}.Check(t)
	}
}
