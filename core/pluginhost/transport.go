package pluginhost

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/go-zeromq/zmq4"

	"github.com/carapace-dev/carapace/core/internal/pluginproto"
	"github.com/carapace-dev/carapace/ipc/zmtp"
)

// scheme is the transport of the plugin sockets, registered on first use:
// ipc/zmtp with the protocol's message cap, one frame per message, a few
// connections, and a hook that cuts off the plugin whose connection broke
// the limits.
var scheme = zmtp.Lazy("zipc-plugin", zmtp.New(zmtp.Options{
	MaxFrame:     pluginproto.MaxMessage,
	MaxMessage:   pluginproto.MaxMessage,
	MaxFrames:    1,
	MaxConns:     maxConns,
	WriteTimeout: sendTimeout,
	// The core makes the handler's connection before starting it, so the
	// handshake waits as long as the hello may.
	HandshakeTimeout: pluginproto.HelloTimeout,
	OnReject:         onReject,
}))

var bySocket sync.Map // socket path → *Process

// postHandshake are the OnReject reasons of a connection that completed its
// handshake and then broke the limits (or stopped reading).
var postHandshake = map[string]bool{
	"frame too large":   true,
	"message too large": true,
	"too many frames":   true,
	"command too large": true,
	"bad frame":         true,
	"write timeout":     true,
}

// onReject runs on transport goroutines and must not block: cutOff only
// takes a mutex and sends a signal, and logging goes to a goroutine bounded
// by a limiter.
func onReject(socket, reason string) {
	v, ok := bySocket.Load(socket)
	if !ok {
		return
	}
	p := v.(*Process)
	if postHandshake[reason] {
		p.cutOff("transport dropped its connection: " + reason)
		return
	}
	if p.rejects.Allow() {
		go p.log.Warn("plugin socket dropped a connection", "reason", reason)
	}
}

// recvLoop receives every message of the socket. Before the hello only a
// hello with the token counts; after it, only the hello'd connection.
func (p *Process) recvLoop() {
	defer p.loops.Done()
	for {
		msg, err := p.router.Recv()
		if err != nil {
			if p.rctx.Err() == nil {
				p.log.Warn("plugin socket receive failed", "err", err)
				p.cutOff("plugin socket receive failed")
			}
			return
		}
		if msg.Type == zmq4.CmdMsg || len(msg.Frames) < 2 {
			continue
		}
		p.handle(msg.Frames[0], msg.Frames[1:])
	}
}

func (p *Process) handle(rid []byte, frames [][]byte) {
	if p.peer == nil {
		p.tryHello(rid, frames)
		return
	}
	if !bytes.Equal(rid, p.peer) {
		p.stranger("message from a connection that did not say hello")
		return
	}
	if len(frames) != 1 {
		p.cutOff("sent a multi-part message")
		return
	}
	m, err := pluginproto.Decode(frames[0])
	if err != nil {
		p.cutOff("sent a frame that is not a protocol message")
		return
	}
	switch m.Type {
	case pluginproto.TypeReply:
		p.deliver(m)
	case pluginproto.TypeCall:
		p.serveCall(m)
	case pluginproto.TypeHello:
		p.cutOff("said hello twice")
	default:
		p.cutOff("sent a message of type " + strconvQuote(m.Type))
	}
}

// tryHello accepts the first hello with the token. Runs on the receive loop
// only, which alone writes p.peer (the writer reads it after helloOK).
func (p *Process) tryHello(rid []byte, frames [][]byte) {
	if p.helloDone {
		return // a failed hello: Start is stopping the process
	}
	if len(frames) != 1 {
		p.stranger("multi-part message before hello")
		return
	}
	m, err := pluginproto.Decode(frames[0])
	if err != nil || m.Type != pluginproto.TypeHello {
		p.stranger("message before hello")
		return
	}
	if subtle.ConstantTimeCompare([]byte(m.Token), []byte(p.token)) != 1 {
		p.stranger("hello with a wrong token")
		return
	}
	p.helloDone = true
	if m.Version != pluginproto.Version {
		p.helloErr <- fmt.Errorf("handler speaks protocol version %d, the core speaks %d", m.Version, pluginproto.Version)
		return
	}
	if pid := p.PID(); m.PID != pid {
		p.log.Debug("plugin hello from another pid than the started one", "pid", pid, "hello_pid", m.PID)
	}
	p.peer = bytes.Clone(rid)
	close(p.helloOK)
}

func (p *Process) stranger(what string) {
	if p.strangers.Allow() {
		p.log.Warn("plugin socket message ignored", "reason", what)
	}
}

// writer sends queued frames to the hello'd connection: zmq4 sockets are
// not safe for concurrent Send.
func (p *Process) writer() {
	defer p.loops.Done()
	select {
	case <-p.helloOK:
	case <-p.quit:
		return
	}
	for {
		select {
		case f := <-p.out:
			p.sendMu.Lock()
			err := p.router.Send(zmq4.NewMsgFrom(p.peer, f))
			p.sendMu.Unlock()
			if err != nil && p.rctx.Err() == nil {
				p.log.Warn("send to plugin failed", "err", err)
			}
		case <-p.quit:
			return
		}
	}
}

// errClosed is sendNow's error once the transport is closed.
var errClosed = errors.New("plugin socket closed")

// sendNow sends a frame to the hello'd connection on the calling
// goroutine. Only calls made after Start returned use it, so the peer is
// known.
func (p *Process) sendNow(frame []byte) error {
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	select {
	case <-p.quit:
		return errClosed
	default:
	}
	return p.router.Send(zmq4.NewMsgFrom(p.peer, frame))
}

// closeTransport stops the socket and its goroutines and removes the socket
// file if it is still ours. Called once.
func (p *Process) closeTransport() {
	p.rcancel()
	if p.router != nil {
		_ = p.router.Close()
	}
	close(p.quit)
	p.loops.Wait()
	if p.router != nil {
		zmtp.Drain(p.router)
	}
	p.services.Wait()
	if fi, err := os.Lstat(p.socket); err == nil && p.sockInfo != nil && os.SameFile(fi, p.sockInfo) {
		_ = os.Remove(p.socket)
	}
	bySocket.CompareAndDelete(p.socket, p)
}

// zmqLogger routes zmq4's log.Logger output to slog at debug level: its
// messages describe peers' misbehaviour, which the transport reports.
func zmqLogger(l *slog.Logger) *log.Logger { return log.New(slogWriter{l}, "", 0) }

type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(b []byte) (int, error) {
	w.l.Debug("zmq4", "msg", strings.TrimSpace(string(b)))
	return len(b), nil
}

// strconvQuote quotes a peer-chosen string for a reason, capped.
func strconvQuote(s string) string {
	if len(s) > 32 {
		s = s[:32] + "..."
	}
	return fmt.Sprintf("%q", s)
}

var errServicesBeforeInit = errors.New("services are not available before init")
