package measure

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/go-zeromq/zmq4"

	// Registers the hardened "zipc" transport, so the floor can be measured
	// over it as well as over plain ipc://.
	_ "github.com/carapace-dev/carapace/ipc/zmtp"
)

// FloorMessageSize is the size of the floor's echo message: about the size
// of the wire message of (b), {"topic":"tool.invoke.echo",…}.
const FloorMessageSize = 120

// quiet is zmq4's logger: the benchmark's peers are well behaved, and the
// library's remarks on closing sockets are noise.
var quiet = log.New(io.Discard, "", 0)

// EchoServer is a ROUTER that sends every message back to its sender: the
// transport floor, with no pipeline behind it.
type EchoServer struct {
	dir    string
	ep     string
	router zmq4.Socket
	cancel context.CancelFunc
	done   chan struct{}
}

// StartEcho binds an echo ROUTER on a fresh Unix socket with the zmq4
// transport scheme: "ipc" (zmq4's own) or "zipc" (the core's hardened
// listener, ipc/zmtp).
func StartEcho(scheme string) (*EchoServer, error) {
	dir, err := os.MkdirTemp("", "cpf") // short: sun_path holds 104-108 bytes
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &EchoServer{dir: dir, ep: scheme + "://" + filepath.Join(dir, "e.sock"), cancel: cancel, done: make(chan struct{})}
	e.router = zmq4.NewRouter(ctx, zmq4.WithLogger(quiet), zmq4.WithTimeout(10*time.Second))
	if err := e.router.Listen(e.ep); err != nil {
		cancel()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("listen %s: %w", e.ep, err)
	}
	go e.loop()
	return e, nil
}

func (e *EchoServer) loop() {
	defer close(e.done)
	for {
		msg, err := e.router.Recv()
		if err != nil {
			return
		}
		if msg.Type == zmq4.CmdMsg {
			continue
		}
		if err := e.router.Send(msg); err != nil {
			return
		}
	}
}

// Endpoint is the socket's path as an "ipc://" endpoint, for a plain zmq4
// DEALER: the listener's filter, if any, works on the wire alone.
func (e *EchoServer) Endpoint() string { return "ipc://" + filepath.Join(e.dir, "e.sock") }

// Close stops the server and removes its socket.
func (e *EchoServer) Close() error {
	e.cancel()
	err := e.router.Close()
	<-e.done
	os.RemoveAll(e.dir)
	return err
}

// Peer is a DEALER connected to one endpoint, used from one goroutine.
type Peer struct {
	d      zmq4.Socket
	cancel context.CancelFunc
}

// Dial connects a DEALER to ep ("ipc:///path" or "zipc:///path").
func Dial(ep string) (*Peer, error) {
	ctx, cancel := context.WithCancel(context.Background())
	d := zmq4.NewDealer(ctx, zmq4.WithLogger(quiet), zmq4.WithTimeout(10*time.Second),
		zmq4.WithDialerTimeout(5*time.Second), zmq4.WithDialerMaxRetries(10))
	if err := d.Dial(ep); err != nil {
		cancel()
		return nil, fmt.Errorf("dial %s: %w", ep, err)
	}
	return &Peer{d: d, cancel: cancel}, nil
}

// Send sends one single-frame message.
func (p *Peer) Send(frame []byte) error { return p.d.Send(zmq4.NewMsg(frame)) }

// Recv returns the last frame of the next data message.
func (p *Peer) Recv() ([]byte, error) {
	for {
		msg, err := p.d.Recv()
		if err != nil {
			return nil, err
		}
		if msg.Type == zmq4.CmdMsg || len(msg.Frames) == 0 {
			continue
		}
		return msg.Frames[len(msg.Frames)-1], nil
	}
}

// Close closes the DEALER.
func (p *Peer) Close() error {
	err := p.d.Close()
	p.cancel()
	return err
}

// Floor is one DEALER talking to one echo server.
type Floor struct {
	stop func() error // stops the echo server
	peer *Peer
	msg  []byte
}

// StartFloor starts an echo server with scheme ("ipc" for the transport
// floor, "zipc" to include the hardened listener) and connects a DEALER.
func StartFloor(scheme string) (*Floor, error) {
	srv, err := StartEcho(scheme)
	if err != nil {
		return nil, err
	}
	return connectFloor(srv.Endpoint(), srv.Close)
}

// connectFloor connects a DEALER to an echo server at ep, which stop stops,
// and makes one round trip, so that the connection is up before anything
// is timed.
func connectFloor(ep string, stop func() error) (*Floor, error) {
	peer, err := Dial(ep)
	if err != nil {
		return nil, errors.Join(err, stop())
	}
	f := &Floor{stop: stop, peer: peer, msg: bytes.Repeat([]byte{'x'}, FloorMessageSize)}
	if err := f.RoundTrip(); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return f, nil
}

// RoundTrip sends the message and waits for its echo.
func (f *Floor) RoundTrip() error {
	if err := f.peer.Send(f.msg); err != nil {
		return err
	}
	got, err := f.peer.Recv()
	if err != nil {
		return err
	}
	if len(got) != len(f.msg) {
		return errors.New("floor: echo differs from the message sent")
	}
	return nil
}

// Close closes the DEALER and the server.
func (f *Floor) Close() error {
	return errors.Join(f.peer.Close(), f.stop())
}
