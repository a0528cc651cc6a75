package zmtp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/carapace-dev/carapace/ipc/zmtp/wire"
)

// wait is the functional bound of every "eventually" in these tests.
const wait = 5 * time.Second

// ---- wire builders for hand-made peers ----

// greetingBytes returns a ZMTP greeting; the default arguments ("NULL", 3, 0)
// give a valid one.
func greetingBytes(mech string, major, server byte) []byte {
	g := localGreeting
	g[10] = major
	clear(g[12:32])
	copy(g[12:32], mech)
	g[32] = server
	return g[:]
}

func validGreeting() []byte { return greetingBytes("NULL", 3, 0) }

// prop encodes one metadata property.
func prop(name, value string) []byte {
	b := []byte{byte(len(name))}
	b = append(b, name...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(value)))
	return append(b, value...)
}

// header encodes a frame header, short or long as the size requires.
func header(flags byte, size uint64) []byte {
	if size > 255 || flags&flagLong != 0 {
		return binary.BigEndian.AppendUint64([]byte{flags | flagLong}, size)
	}
	return []byte{flags, byte(size)}
}

func frame(flags byte, body []byte) []byte {
	return append(header(flags, uint64(len(body))), body...)
}

// command encodes a command frame: name length, name, data.
func command(name string, data []byte) []byte {
	body := append([]byte{byte(len(name))}, name...)
	return frame(flagCommand, append(body, data...))
}

func readyCmd(md ...[]byte) []byte { return command(cmdReady, bytes.Join(md, nil)) }

func dealerReady() []byte {
	return readyCmd(prop("Socket-Type", "DEALER"), prop("Identity", "forged"))
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// ---- sockets ----

func sockPath(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "zt") // short: sun_path holds 104-108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "s")
}

var schemeSeq atomic.Int64

// register registers opts under a fresh scheme (zmq4 cannot unregister) and
// returns an endpoint of that scheme on a fresh socket path.
func register(t testing.TB, opts Options) (ep, path string) {
	t.Helper()
	scheme := fmt.Sprintf("zt%d", schemeSeq.Add(1))
	if err := Register(scheme, opts); err != nil {
		t.Fatal(err)
	}
	path = sockPath(t)
	return scheme + "://" + path, path
}

func quiet() zmq4.Option { return zmq4.WithLogger(log.New(io.Discard, "", 0)) }

// rejects collects OnReject reasons.
type rejects struct{ ch chan string }

func newRejects() *rejects { return &rejects{ch: make(chan string, 4096)} }

func (r *rejects) hook(_, reason string) {
	select {
	case r.ch <- reason:
	default:
	}
}

// expect waits for a reason containing want, skipping others.
func (r *rejects) expect(t testing.TB, want string) {
	t.Helper()
	deadline := time.After(wait)
	var seen []string
	for {
		select {
		case got := <-r.ch:
			if strings.Contains(got, want) {
				return
			}
			seen = append(seen, got)
		case <-deadline:
			t.Fatalf("no OnReject reason containing %q (saw %q)", want, seen)
		}
	}
}

func (r *rejects) drain() []string {
	var out []string
	for {
		select {
		case s := <-r.ch:
			out = append(out, s)
		default:
			return out
		}
	}
}

// echoRouter starts a zmq4 ROUTER listening on ep that sends every message
// back to the connection it came from.
func echoRouter(t testing.TB, ep string) zmq4.Socket {
	t.Helper()
	r := zmq4.NewRouter(context.Background(), quiet())
	if err := r.Listen(ep); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	go func() {
		for {
			msg, err := r.Recv()
			if err != nil {
				return
			}
			if err := r.Send(msg); err != nil {
				return
			}
		}
	}()
	return r
}

func router(t testing.TB, ep string) zmq4.Socket {
	t.Helper()
	r := zmq4.NewRouter(context.Background(), quiet())
	if err := r.Listen(ep); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func dealer(t testing.TB, ep string, opts ...zmq4.Option) zmq4.Socket {
	t.Helper()
	d := zmq4.NewDealer(context.Background(), append([]zmq4.Option{quiet()}, opts...)...)
	t.Cleanup(func() { d.Close() })
	done := make(chan error, 1)
	go func() { done <- d.Dial(ep) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dealer dial %s: %v", ep, err)
		}
	case <-time.After(wait):
		t.Fatalf("dealer dial %s: not done within %v", ep, wait)
	}
	return d
}

// recv receives one message or fails after d.
func recv(s zmq4.Socket, d time.Duration) (zmq4.Msg, error) {
	type res struct {
		m   zmq4.Msg
		err error
	}
	ch := make(chan res, 1)
	go func() {
		m, err := s.Recv()
		ch <- res{m, err}
	}()
	select {
	case r := <-ch:
		return r.m, r.err
	case <-time.After(d):
		return zmq4.Msg{}, errTimeout
	}
}

var errTimeout = errors.New("test: timed out")

// roundTrip proves a legitimate DEALER is served by the echo ROUTER at ep.
func roundTrip(t testing.TB, ep string) {
	t.Helper()
	d := dealer(t, ep)
	if err := d.Send(zmq4.NewMsgString("ping")); err != nil {
		t.Fatal(err)
	}
	m, err := recv(d, wait)
	if err != nil {
		t.Fatalf("legit dealer not served: %v", err)
	}
	if len(m.Frames) != 1 || string(m.Frames[0]) != "ping" {
		t.Fatalf("echo = %q", m.Frames)
	}
	d.Close()
}

// rawConn connects a hand-driven peer to path.
func rawConn(t testing.TB, path string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("unix", path, wait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rawHandshake completes a DEALER handshake by hand: our greeting and READY,
// then the server's greeting and READY are read and checked for shape.
func rawHandshake(t testing.TB, c net.Conn) {
	t.Helper()
	if _, err := c.Write(cat(validGreeting(), dealerReady())); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(wait))
	defer c.SetReadDeadline(time.Time{})
	var g [GreetingLen]byte
	if _, err := io.ReadFull(c, g[:]); err != nil {
		t.Fatalf("server greeting: %v", err)
	}
	if err := CheckGreeting(&g); err != nil {
		t.Fatalf("server greeting: %v", err)
	}
	var h [2]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		t.Fatalf("server READY: %v", err)
	}
	if h[0] != flagCommand {
		t.Fatalf("server READY flags %#x", h[0])
	}
	body := make([]byte, h[1])
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatalf("server READY: %v", err)
	}
	if st, err := ParseReady(body); err != nil || st != "ROUTER" {
		t.Fatalf("server READY: %q, %v", st, err)
	}
}

// waitClosed reads (and discards) until the server closes c.
func waitClosed(t testing.TB, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(wait))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after %v", wait)
	}
}

// The wire's names as the tests of this package have always spelled them
// (the checks moved to package wire).
const (
	flagMore    = wire.FlagMore
	flagLong    = wire.FlagLong
	flagCommand = wire.FlagCommand
	GreetingLen = wire.GreetingLen
	cmdReady    = "READY"
)

var (
	localGreeting = wire.Greeting
	CheckGreeting = wire.CheckGreeting
	ParseReady    = wire.ParseReady
	EncodeReady   = wire.EncodeReady
)
