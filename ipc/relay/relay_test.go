package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/internal/testutil/leaktest"
	"go.uber.org/goleak"
)

func TestRoundTrip(t *testing.T) {
	all := make([]byte, 256*16)
	for i := range all {
		all[i] = byte(i)
	}
	tests := []struct {
		name string
		req  []byte
	}{
		{"one byte", []byte{0}},
		{"every byte value", all},
		{"64 KiB", randomBytes(1, 64<<10)},
		{"8 MiB", randomBytes(2, 8<<20)},
	}
	srv := startUnix(t, echo)
	r := startRelay(t, Options{Socket: srv.path})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := exchange(dial(t, r.addr), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tt.req) {
				t.Fatalf("got %d bytes back, want the %d sent, intact", len(got), len(tt.req))
			}
		})
	}
}

// TestServerSpeaksFirst: bytes flow from the socket to the client before the
// client has sent anything, then both ways on the same connection.
func TestServerSpeaksFirst(t *testing.T) {
	srv := startUnix(t, func(c *net.UnixConn) {
		c.Write([]byte("banner\n"))
		echo(c)
	})
	r := startRelay(t, Options{Socket: srv.path})
	c := dial(t, r.addr)
	banner := make([]byte, 7)
	if _, err := io.ReadFull(c, banner); err != nil || string(banner) != "banner\n" {
		t.Fatalf("banner %q, %v", banner, err)
	}
	got, err := exchange(c, []byte("hello"))
	if err != nil || string(got) != "hello" {
		t.Fatalf("got %q, %v", got, err)
	}
}

// TestKeepAlive: many request/response exchanges on one connection, as
// HTTP/1.1 keep-alive does; nothing waits for EOF.
func TestKeepAlive(t *testing.T) {
	srv := startUnix(t, echo)
	r := startRelay(t, Options{Socket: srv.path})
	c := dial(t, r.addr)
	for i := range 200 {
		if err := pingPong(c, fmt.Appendf(nil, "request %d\n", i)); err != nil {
			t.Fatalf("exchange %d: %v", i, err)
		}
	}
	if n := srv.accepted.Load(); n != 1 {
		t.Fatalf("the socket saw %d connections, want 1", n)
	}
}

func TestHalfClose(t *testing.T) {
	tests := []struct {
		name string
		// server runs on the socket side, client on the TCP side.
		server func(*net.UnixConn) error
		client func(*net.TCPConn) error
	}{
		{
			// The HTTP shape: the client sends everything and
			// half-closes; the server sees EOF and still answers.
			name: "client closes first",
			server: func(c *net.UnixConn) error {
				req, err := io.ReadAll(c)
				if err != nil {
					return err
				}
				if _, err := fmt.Fprintf(c, "got %q", req); err != nil {
					return err
				}
				return c.CloseWrite()
			},
			client: func(c *net.TCPConn) error {
				if _, err := c.Write([]byte("request")); err != nil {
					return err
				}
				if err := c.CloseWrite(); err != nil {
					return err
				}
				got, err := io.ReadAll(c)
				if err != nil {
					return err
				}
				if string(got) != `got "request"` {
					return fmt.Errorf("answer %q", got)
				}
				return nil
			},
		},
		{
			// The other way round: the server finishes first; the
			// client sees EOF and can still send.
			name: "server closes first",
			server: func(c *net.UnixConn) error {
				if _, err := c.Write([]byte("done")); err != nil {
					return err
				}
				if err := c.CloseWrite(); err != nil {
					return err
				}
				got, err := io.ReadAll(c)
				if err != nil {
					return err
				}
				if string(got) != "late" {
					return fmt.Errorf("server read %q", got)
				}
				return nil
			},
			client: func(c *net.TCPConn) error {
				got, err := io.ReadAll(c)
				if err != nil {
					return err
				}
				if string(got) != "done" {
					return fmt.Errorf("client read %q", got)
				}
				if _, err := c.Write([]byte("late")); err != nil {
					return err
				}
				return c.CloseWrite()
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			serr := make(chan error, 1)
			srv := startUnix(t, func(c *net.UnixConn) {
				c.SetDeadline(time.Now().Add(bound))
				serr <- tt.server(c)
			})
			r := startRelay(t, Options{Socket: srv.path})
			if err := tt.client(dial(t, r.addr)); err != nil {
				t.Fatalf("client: %v", err)
			}
			if err := <-serr; err != nil {
				t.Fatalf("server: %v", err)
			}
		})
	}
}

// TestStreaming proves the relay holds nothing back: the server writes its
// second chunk only after the client has received the first, so a relay
// that buffered would stall the test (until the bound, then fail).
func TestStreaming(t *testing.T) {
	chunks := []string{"data: one\n\n", "data: two\n\n", "data: three\n\n"}
	events := make(chan string, 2*len(chunks)+1)
	received := make(chan struct{}, len(chunks))
	srv := startUnix(t, func(c *net.UnixConn) {
		for i, chunk := range chunks {
			if i > 0 {
				select {
				case <-received:
				case <-time.After(bound):
					events <- "server gave up waiting"
					return
				}
			}
			time.Sleep(20 * time.Millisecond) // a pause, as a model does between tokens
			events <- "server writes " + chunk
			if _, err := c.Write([]byte(chunk)); err != nil {
				events <- "server: " + err.Error()
				return
			}
		}
		io.Copy(io.Discard, c) // keep the stream open until the client ends it
	})
	r := startRelay(t, Options{Socket: srv.path})
	c := dial(t, r.addr)
	for _, chunk := range chunks {
		got := make([]byte, len(chunk))
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatalf("waiting for %q: %v", chunk, err)
		}
		events <- "client got " + string(got)
		received <- struct{}{}
	}
	c.Close()
	var order []string
	for range 2 * len(chunks) {
		order = append(order, <-events)
	}
	var want []string
	for _, chunk := range chunks {
		want = append(want, "server writes "+chunk, "client got "+chunk)
	}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("events\n%q\nwant\n%q", order, want)
	}
}

func TestConcurrent(t *testing.T) {
	const n = 50
	srv := startUnix(t, echo)
	r := startRelay(t, Options{Socket: srv.path})
	conns := make([]*net.TCPConn, n)
	for i := range conns {
		conns[i] = dial(t, r.addr)
	}
	errs := make(chan error, n)
	for i, c := range conns {
		go func() {
			req := randomBytes(uint64(100+i), 256<<10)
			got, err := exchange(c, req)
			if err == nil && !bytes.Equal(got, req) {
				err = fmt.Errorf("got %d bytes, want the %d sent, intact", len(got), len(req))
			}
			if err != nil {
				err = fmt.Errorf("connection %d: %w", i, err)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if got := srv.accepted.Load(); got != n {
		t.Fatalf("the socket saw %d connections, want %d", got, n)
	}
}

func TestMaxConns(t *testing.T) {
	tests := []struct {
		name     string
		maxConns int
		want     int
	}{
		{"two", 2, 2},
		{"default", 0, DefaultMaxConns},
		{"negative means default", -1, DefaultMaxConns},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startUnix(t, echo)
			logs, logger := newLogSink()
			r := startRelay(t, Options{Socket: srv.path, MaxConns: tt.maxConns, Logger: logger})
			conns := make([]*net.TCPConn, tt.want)
			for i := range conns {
				conns[i] = dial(t, r.addr)
				// One exchange: the relay has accepted and counted it.
				if err := pingPong(conns[i], []byte("x")); err != nil {
					t.Fatalf("connection %d: %v", i, err)
				}
			}
			over := dial(t, r.addr)
			over.Write([]byte("x"))
			if _, err := over.Read(make([]byte, 1)); !closedByPeer(err) {
				t.Fatalf("connection past MaxConns: read %v; want it closed at once", err)
			}
			if got := srv.accepted.Load(); got != int64(tt.want) {
				t.Fatalf("the socket saw %d connections, want %d", got, tt.want)
			}
			// The relay logs after it closes, so the line may lag the EOF.
			eventually(t, "the refusal is logged", func() bool { return logs.count("too many connections") == 1 })
			// The ones inside the limit still work, and closing one
			// frees its slot.
			if err := pingPong(conns[0], []byte("y")); err != nil {
				t.Fatal(err)
			}
			conns[0].Close()
			eventually(t, "a freed slot is reused", func() bool {
				c, err := net.DialTimeout("tcp", r.addr, bound)
				if err != nil {
					return false
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(bound))
				return pingPong(c, []byte("z")) == nil
			})
		})
	}
}

func TestDialFailure(t *testing.T) {
	tests := []struct {
		name   string
		socket func(t *testing.T) string
	}{
		{"no such file", func(t *testing.T) string { return filepath.Join(socketDir(t), "llm.sock") }},
		{"not a socket", func(t *testing.T) string {
			p := filepath.Join(socketDir(t), "llm.sock")
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{"nobody listening", func(t *testing.T) string {
			p := filepath.Join(socketDir(t), "llm.sock")
			ln, err := net.Listen("unix", p)
			if err != nil {
				t.Fatal(err)
			}
			ln.(*net.UnixListener).SetUnlinkOnClose(false)
			ln.Close()
			return p
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs, logger := newLogSink()
			r := startRelay(t, Options{Socket: tt.socket(t), Logger: logger})
			for i := range 5 {
				c := dial(t, r.addr)
				c.Write([]byte("SECRET-PAYLOAD"))
				if _, err := c.Read(make([]byte, 1)); !closedByPeer(err) {
					t.Fatalf("attempt %d: read %v; want the connection closed at once", i, err)
				}
			}
			eventually(t, "the dial failure is logged", func() bool { return logs.count("cannot reach the socket") >= 1 })
			if got := logs.count("cannot reach the socket"); got != 1 {
				t.Fatalf("log:\n%s\nwant one line for five failures (rate-limited)", logs)
			}
			if strings.Contains(logs.String(), "SECRET") {
				t.Fatalf("payload in the log:\n%s", logs)
			}
		})
	}
}

// TestNoPayloadInLog logs everything, debug included, and looks for the bytes.
func TestNoPayloadInLog(t *testing.T) {
	srv := startUnix(t, func(c *net.UnixConn) {
		io.Copy(io.Discard, c)
		c.Write([]byte("SECRET-REPLY"))
	})
	logs, logger := newLogSink()
	r := startRelay(t, Options{Socket: srv.path, Logger: logger})
	got, err := exchange(dial(t, r.addr), []byte("SECRET-REQUEST"))
	if err != nil || string(got) != "SECRET-REPLY" {
		t.Fatalf("got %q, %v", got, err)
	}
	eventually(t, "the connection is logged at debug level", func() bool { return logs.count("connection done") == 1 })
	if !strings.Contains(logs.String(), "up_bytes=14") || !strings.Contains(logs.String(), "down_bytes=12") {
		t.Fatalf("log:\n%s\nwant the byte counts", logs)
	}
	if strings.Contains(logs.String(), "SECRET") {
		t.Fatalf("payload in the log:\n%s", logs)
	}
}

func TestLoopbackAddr(t *testing.T) {
	tests := []struct {
		listen string
		want   string
		err    error
	}{
		{"127.0.0.1:8080", "127.0.0.1:8080", nil},
		{"127.0.0.1:0", "127.0.0.1:0", nil},
		{"localhost:8080", "127.0.0.1:8080", nil},
		{"LocalHost:8080", "127.0.0.1:8080", nil},
		{"[::1]:8080", "[::1]:8080", nil},
		{"[0:0:0:0:0:0:0:1]:8080", "[::1]:8080", nil},
		{"127.0.0.1:08080", "127.0.0.1:8080", nil},
		{"0.0.0.0:8080", "", ErrNotLoopback},
		{"192.168.1.20:8080", "", ErrNotLoopback},
		{"10.0.0.1:8080", "", ErrNotLoopback},
		{":8080", "", ErrNotLoopback},
		{"[::]:8080", "", ErrNotLoopback},
		{"127.0.0.2:8080", "", ErrNotLoopback},
		{"example.com:8080", "", ErrNotLoopback},
		{"[::1%lo]:8080", "", ErrNotLoopback},
		{"127.0.0.1", "", ErrBadListen},
		{"0.0.0.0", "", ErrBadListen},
		{"", "", ErrBadListen},
		{"127.0.0.1:", "", ErrBadListen},
		{"127.0.0.1:http", "", ErrBadListen},
		{"127.0.0.1:65536", "", ErrBadListen},
		{"127.0.0.1:-1", "", ErrBadListen},
	}
	for _, tt := range tests {
		t.Run(tt.listen, func(t *testing.T) {
			got, err := LoopbackAddr(tt.listen)
			if got != tt.want || !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("LoopbackAddr(%q) = %q, %v; want %q, %v", tt.listen, got, err, tt.want, tt.err)
			}
			if err != nil && !strings.Contains(err.Error(), "127.0.0.1, ::1 or localhost") {
				t.Fatalf("error %q does not state the rule", err)
			}
		})
	}
}

// TestListenRefused: the refused addresses never reach a socket, through
// ListenAndServe or Listen.
func TestListenRefused(t *testing.T) {
	srv := startUnix(t, echo)
	for _, listen := range []string{"0.0.0.0:0", "192.168.1.20:0", ":8080", "[::]:0"} {
		t.Run(listen, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			if err := ListenAndServe(ctx, Options{Listen: listen, Socket: srv.path}); !errors.Is(err, ErrNotLoopback) {
				t.Fatalf("ListenAndServe: %v; want ErrNotLoopback", err)
			}
			if ln, err := Listen(listen); !errors.Is(err, ErrNotLoopback) {
				if ln != nil {
					ln.Close()
				}
				t.Fatalf("Listen: %v; want ErrNotLoopback", err)
			}
		})
	}
	t.Run("localhost is 127.0.0.1", func(t *testing.T) {
		ln, err := Listen("localhost:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		if a := ln.Addr().(*net.TCPAddr); !a.IP.Equal(net.IPv4(127, 0, 0, 1)) {
			t.Fatalf("listening on %v", a)
		}
	})
}

// fakeListener reports an address without binding one.
type fakeListener struct {
	addr   net.Addr
	closed chan struct{}
	once   sync.Once
}

func (l *fakeListener) Accept() (net.Conn, error) { <-l.closed; return nil, net.ErrClosed }
func (l *fakeListener) Close() error              { l.once.Do(func() { close(l.closed) }); return nil }
func (l *fakeListener) Addr() net.Addr            { return l.addr }

func TestServeRefuses(t *testing.T) {
	tests := []struct {
		name   string
		addr   net.Addr
		socket string
		err    error
	}{
		{"all interfaces", &net.TCPAddr{IP: net.IPv4zero, Port: 8080}, "/run/x.sock", ErrNotLoopback},
		{"LAN address", &net.TCPAddr{IP: net.IPv4(192, 168, 1, 20), Port: 8080}, "/run/x.sock", ErrNotLoopback},
		{"other 127/8", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 8080}, "/run/x.sock", ErrNotLoopback},
		{"unix listener", &net.UnixAddr{Name: "/tmp/x.sock", Net: "unix"}, "/run/x.sock", ErrNotLoopback},
		{"no socket", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, "", ErrNoSocket},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ln := &fakeListener{addr: tt.addr, closed: make(chan struct{})}
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			if err := Serve(ctx, ln, Options{Socket: tt.socket}); !errors.Is(err, tt.err) {
				t.Fatalf("Serve: %v; want %v", err, tt.err)
			}
			select {
			case <-ln.closed:
			default:
				t.Fatal("Serve did not close its listener")
			}
		})
	}
}

// TestCancel: cancelling the context stops Serve, closes the listener and
// cuts the connections being relayed, on both sides.
func TestCancel(t *testing.T) {
	serverSaw := make(chan error, 1)
	srv := startUnix(t, func(c *net.UnixConn) {
		c.SetDeadline(time.Now().Add(bound))
		buf := make([]byte, 1)
		if _, err := c.Read(buf); err != nil {
			serverSaw <- err
			return
		}
		c.Write(buf)
		_, err := c.Read(buf) // blocks until the relay cuts the connection
		serverSaw <- err
	})
	r := startRelay(t, Options{Socket: srv.path})
	c := dial(t, r.addr)
	if err := pingPong(c, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := r.Stop(); err != nil {
		t.Fatalf("Serve: %v; want nil after cancel", err)
	}
	if _, err := c.Read(make([]byte, 1)); !closedByPeer(err) {
		t.Fatalf("client read %v; want its connection closed", err)
	}
	if err := <-serverSaw; !closedByPeer(err) {
		t.Fatalf("server read %v; want its connection closed", err)
	}
	if c, err := net.DialTimeout("tcp", r.addr, bound); err == nil {
		c.Close()
		t.Fatal("the listener still accepts after cancel")
	}
}

// TestListenerClosedElsewhere: a listener closed by someone else ends Serve
// with an error, and the live connections are closed all the same.
func TestListenerClosedElsewhere(t *testing.T) {
	srv := startUnix(t, echo)
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), ln, Options{Socket: srv.path}) }()
	c := dial(t, ln.Addr().String())
	if err := pingPong(c, []byte("x")); err != nil {
		t.Fatal(err)
	}
	ln.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Serve: %v; want net.ErrClosed", err)
		}
	case <-time.After(bound):
		t.Fatal("Serve did not return")
	}
	if _, err := c.Read(make([]byte, 1)); !closedByPeer(err) {
		t.Fatalf("client read %v; want its connection closed", err)
	}
}

func TestEvery(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		at             time.Duration // since t0
		ok             bool
		wantSuppressed int
	}{
		{0, true, 0},
		{time.Second, false, 0},
		{LogInterval - 1, false, 0},
		{LogInterval, true, 2},
		{LogInterval + 1, false, 0},
		{3 * LogInterval, true, 1},
		{3*LogInterval + time.Second, false, 0},
	}
	var e every
	for i, tt := range tests {
		ok, n := e.allow(t0.Add(tt.at))
		if ok != tt.ok || n != tt.wantSuppressed {
			t.Fatalf("event %d at +%v: allow = %v, %d; want %v, %d", i, tt.at, ok, n, tt.ok, tt.wantSuppressed)
		}
	}
}

// TestNoGoroutineLeak runs every path (relayed, refused, dial failure, cut by
// cancel) and checks that nothing is left running afterwards.
func TestNoGoroutineLeak(t *testing.T) {
	before := goleak.IgnoreCurrent()
	func() {
		srv := startUnix(t, echo)
		r := startRelay(t, Options{Socket: srv.path, MaxConns: 3})
		for i := range 3 {
			if got, err := exchange(dial(t, r.addr), []byte("hello")); err != nil || string(got) != "hello" {
				t.Fatalf("exchange %d: %q, %v", i, got, err)
			}
		}
		var live []*net.TCPConn
		for range 3 {
			// The slot of a finished exchange is free once the relay has
			// seen its end, which on a loaded machine can come after the
			// next dial: retry a refused one for a while.
			deadline := time.Now().Add(10 * time.Second)
			for {
				c := dial(t, r.addr)
				err := pingPong(c, []byte("x"))
				if err == nil {
					live = append(live, c)
					break
				}
				c.Close()
				if time.Now().After(deadline) {
					t.Fatal(err)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		over := dial(t, r.addr)
		if _, err := over.Read(make([]byte, 1)); !closedByPeer(err) {
			t.Fatalf("past MaxConns: %v", err)
		}
		if err := r.Stop(); err != nil {
			t.Fatal(err)
		}
		for _, c := range live {
			c.Close()
		}
		over.Close()

		failing := startRelay(t, Options{Socket: filepath.Join(socketDir(t), "none.sock")})
		c := dial(t, failing.addr)
		if _, err := c.Read(make([]byte, 1)); !closedByPeer(err) {
			t.Fatalf("dial failure: %v", err)
		}
		c.Close()
		if err := failing.Stop(); err != nil {
			t.Fatal(err)
		}
		srv.Close()
	}()
	leaktest.Check(t, before)
}
