package zmtp

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carapace-dev/carapace/ipc/zmtp/wire"
)

// Fixed limits of the handshake and of post-handshake commands (package
// wire's, where the checks live).
const (
	// MaxReadySize is the largest READY command body accepted from a peer.
	MaxReadySize = wire.MaxReadySize
	// MaxCommandSize is the largest command frame (PING, SUBSCRIBE, ...)
	// accepted from a peer after the handshake.
	MaxCommandSize = wire.MaxCommandSize
)

type side uint8

const (
	sideListen side = iota // the peer connected to us: pre-validated before zmq4 sees it
	sideDial               // we connected to the peer: validated lazily inside Read
)

type phase uint8

const (
	phaseGreeting phase = iota // dial side: the peer's greeting is next on the wire
	phaseReady                 // dial side: the peer's READY is next on the wire
	phaseFrames                // handshake validated: every frame header is checked
)

// Handshake watchdog states.
const (
	stateHandshake   int32 = iota // zmq4 has not yet read past the handshake
	stateEstablished              // zmq4 read a first post-handshake frame header
	stateExpired                  // the watchdog fired first and closed the connection
)

// conn is the filter between a peer's Unix socket and zmq4. zmq4 reads from
// it with io.ReadFull in header-sized and body-sized pieces; every frame
// header passes through nextHeader, which checks it against the limits
// before zmq4 sees it and so before zmq4 allocates the body.
type conn struct {
	raw     net.Conn
	o       *Options
	side    side
	onClose func() // releases the listener's connection slot; nil when dialled

	state     atomic.Int32
	timer     atomic.Pointer[time.Timer]
	closeOnce sync.Once

	rmu     sync.Mutex // read state; zmq4 reads from one goroutine at a time, this makes it certain
	br      *bufio.Reader
	phase   phase
	pending []byte       // handed to Read before anything else is read: replayed handshake, or a header
	body    uint64       // bytes of the current frame body not yet handed to Read
	frames  wire.Counter // checks each header after the handshake
	rerr    error        // sticky: once Read failed it keeps failing
	hdr     [9]byte
	greet   [wire.GreetingLen]byte

	wmu     sync.Mutex
	swallow []byte // listener: the part of zmq4's greeting not yet swallowed (we sent ours already)
	// Frame coalescing (Write): zmq4 writes each frame as two Writes, its
	// header and then its body, which went out as two packets and woke
	// the peer twice. A header is held back and goes out with its body
	// in one writev.
	wgreet   int     // dial side: bytes of zmq4's greeting still to pass through
	wframes  bool    // at a frame boundary of zmq4's output: headers may be held
	held     [9]byte // a frame header held back until its body is written
	nheld    int
	heldSize uint64 // the body size the held header declares
	wbuf     []byte // a held header and a short body, copied together
}

// coalesceCopy is the largest body copied behind its held header into one
// buffer; a larger one goes out with it by writev.
const coalesceCopy = 16 << 10

func newConn(raw net.Conn, o *Options, s side, onClose func()) *conn {
	c := &conn{
		raw:     raw,
		o:       o,
		side:    s,
		onClose: onClose,
		br:      bufio.NewReader(raw),
		frames:  wire.Counter{Limits: wire.Limits{MaxFrame: o.MaxFrame, MaxMessage: o.MaxMessage, MaxFrames: o.MaxFrames}},
	}
	if s == sideListen {
		c.phase = phaseFrames // serverHandshake fills pending with the replay
	} else {
		c.wgreet = wire.GreetingLen // zmq4 writes its greeting first
	}
	// One watchdog covers the whole handshake: our pre-validation on the
	// listener side, the peer's greeting and READY on the dial side, and zmq4's
	// own Open in both cases (zmq4 never closes a connection whose Open failed).
	c.timer.Store(time.AfterFunc(o.HandshakeTimeout, c.expire))
	return c
}

func (c *conn) expire() {
	if c.state.CompareAndSwap(stateHandshake, stateExpired) {
		c.reject(reasonHandshakeTimer)
	}
}

// serverHandshake is the listener's pre-validation, run in a goroutine of its
// own before the connection is handed to zmq4. It sends zmq4's greeting on
// zmq4's behalf (a zmq4 or libzmq peer sends READY only after it has our
// greeting), reads and checks the peer's greeting and READY, and prepares
// the replay zmq4 will read: the original greeting and a READY re-encoded
// with Socket-Type as its only property.
func (c *conn) serverHandshake() error {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if _, err := c.writeRaw(wire.Greeting[:]); err != nil {
		return c.handshakeFail(err)
	}
	if _, err := io.ReadFull(c.br, c.greet[:]); err != nil {
		return c.handshakeFail(err)
	}
	if err := wire.CheckGreeting(&c.greet); err != nil {
		return c.handshakeFail(err)
	}
	ready, err := c.readReady()
	if err != nil {
		return c.handshakeFail(err)
	}
	replay := make([]byte, 0, wire.GreetingLen+len(ready))
	replay = append(replay, c.greet[:]...)
	c.pending = append(replay, ready...)
	c.phase = phaseFrames
	c.wmu.Lock()
	c.swallow = wire.Greeting[:]
	c.wmu.Unlock()
	return nil
}

// readReady reads the peer's READY command frame (wire.ReadReady: at most
// MaxReadySize bytes, allocated only after the size is checked), validates
// it and returns the re-encoded frame zmq4 will be shown.
func (c *conn) readReady() ([]byte, error) {
	st, err := wire.ReadReady(c.br)
	if err != nil {
		return nil, err
	}
	if c.side == sideListen && st != "DEALER" {
		return nil, ErrSocketType
	}
	return wire.EncodeReady(st), nil
}

// readSize reads the size field that follows a flags byte into c.hdr.
func (c *conn) readSize(flags byte) (uint64, error) {
	if flags&wire.FlagLong == 0 {
		b, err := c.br.ReadByte()
		if err != nil {
			return 0, err
		}
		c.hdr[1] = b
		return uint64(b), nil
	}
	if _, err := io.ReadFull(c.br, c.hdr[1:9]); err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint64(c.hdr[1:9]), nil
}

// Read hands zmq4 the peer's byte stream: on the listener the replayed
// handshake first, on the dialer the peer's greeting and READY as they are
// validated, then frames, each header checked before it is passed on.
func (c *conn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.rerr != nil {
		return 0, c.rerr
	}
	if len(p) == 0 {
		return 0, nil
	}
	for len(c.pending) == 0 && c.body == 0 {
		if err := c.advance(); err != nil {
			c.rerr = err
			return 0, err
		}
	}
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	if uint64(len(p)) > c.body {
		p = p[:c.body]
	}
	n, err := c.br.Read(p)
	c.body -= uint64(n)
	if err != nil {
		c.rerr = c.ioFail(err, true)
		return n, c.rerr
	}
	return n, nil
}

// advance prepares the next piece of the stream in c.pending (or c.body).
func (c *conn) advance() error {
	switch c.phase {
	case phaseGreeting:
		if _, err := io.ReadFull(c.br, c.greet[:]); err != nil {
			return c.handshakeFail(err)
		}
		if err := wire.CheckGreeting(&c.greet); err != nil {
			return c.handshakeFail(err)
		}
		c.pending = c.greet[:]
		c.phase = phaseReady
		return nil
	case phaseReady:
		ready, err := c.readReady()
		if err != nil {
			return c.handshakeFail(err)
		}
		c.pending = ready
		c.phase = phaseFrames
		return nil
	default:
		// zmq4 reads a frame header only once its Open has returned: the
		// handshake is over, stand the watchdog down.
		c.state.CompareAndSwap(stateHandshake, stateEstablished)
		return c.nextHeader()
	}
}

// nextHeader reads one frame header and checks it against the limits
// (wire.Counter) before anything proportional to its claimed size exists
// anywhere.
func (c *conn) nextHeader() error {
	flags, err := c.br.ReadByte()
	if err != nil {
		return c.ioFail(err, false)
	}
	c.hdr[0] = flags
	if flags&^wire.FlagsKnown != 0 {
		return c.protoFail(fmt.Errorf("%w: unknown flags", ErrBadFrame))
	}
	size, err := c.readSize(flags)
	if err != nil {
		return c.ioFail(err, true)
	}
	if err := c.frames.Check(flags, size); err != nil {
		return c.protoFail(err)
	}
	hl := 2
	if flags&wire.FlagLong != 0 {
		hl = 9
	}
	c.pending = c.hdr[:hl]
	c.body = size
	return nil
}

// protoFail drops the connection for a protocol violation.
func (c *conn) protoFail(err error) error {
	c.reject(reasonOf(err))
	return c.opErr("read", err)
}

// handshakeFail drops the connection during the handshake, with a reason
// that never quotes the peer.
func (c *conn) handshakeFail(err error) error {
	switch {
	case errors.Is(err, ErrBadGreeting), errors.Is(err, ErrBadReady), errors.Is(err, ErrSocketType):
		return c.protoFail(err)
	case c.state.Load() == stateExpired:
		return c.opErr("read", ErrHandshakeTimeout)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		c.reject(reasonPeerClosed)
		return c.opErr("read", io.ErrUnexpectedEOF)
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.reject(reasonWriteTimeout)
		return c.opErr("write", ErrWriteTimeout)
	default:
		c.reject(reasonHandshakeIO)
		return err
	}
}

// ioFail maps an error of the underlying connection after the handshake.
// EOF between frames is a clean close and is passed on as io.EOF; EOF inside
// a frame becomes a non-timeout *net.OpError so that zmq4 (which only treats
// io.EOF and non-timeout net.Errors as fatal) drops its Conn either way.
func (c *conn) ioFail(err error, midFrame bool) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		if !midFrame {
			return io.EOF
		}
		c.Close()
		return c.opErr("read", io.ErrUnexpectedEOF)
	}
	return err
}

// Write sends p to the peer under a deadline of Options.WriteTimeout. On the
// listener it first swallows zmq4's greeting, which serverHandshake already
// sent on zmq4's behalf; the swallowed bytes must match it exactly.
//
// After the greeting, zmq4 writes every frame as its header and then its
// body, always both. A Write that is exactly a header of a non-empty
// frame is held (and reported written) and goes out with the next Write,
// its body, in one writev: one packet, one wake-up of the peer, where
// there were two. The bytes on the wire are the same, in the same order.
// Any other pattern turns the holding off for the connection.
func (c *conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var n int
	if len(c.swallow) > 0 {
		k := min(len(p), len(c.swallow))
		if !bytes.Equal(p[:k], c.swallow[:k]) {
			c.reject(reasonGreetingWrite)
			return 0, c.opErr("write", ErrBadGreeting)
		}
		c.swallow = c.swallow[k:]
		n, p = k, p[k:]
		c.wframes = len(c.swallow) == 0 && len(p) == 0
		if len(p) == 0 {
			return n, nil
		}
	}
	if c.wgreet > 0 {
		k := min(len(p), c.wgreet)
		c.wgreet -= k
		c.wframes = c.wgreet == 0 && k == len(p)
		return c.flush(n, nil, p)
	}
	if c.nheld > 0 { // p is the held header's body
		hdr := c.held[:c.nheld]
		c.nheld = 0
		if uint64(len(p)) != c.heldSize {
			c.wframes = false // not the pattern expected: write as given from now on
		}
		return c.flush(n, hdr, p)
	}
	size, ok := frameHeader(p)
	switch {
	case !c.wframes:
	case ok && size > 0:
		// Held until its body comes, which zmq4 writes next. An empty
		// frame's header is not held: nothing need follow it.
		c.nheld = copy(c.held[:], p)
		c.heldSize = size
		return n + len(p), nil
	case ok || len(p) == 0: // an empty frame's header, or its empty body: still at a boundary
	default:
		c.wframes = false
	}
	return c.flush(n, nil, p)
}

// frameHeader reports whether p is exactly one ZMTP frame header, and the
// body size it declares.
func frameHeader(p []byte) (uint64, bool) {
	switch {
	case len(p) == 2 && p[0]&^wire.FlagsKnown == 0 && p[0]&wire.FlagLong == 0:
		return uint64(p[1]), true
	case len(p) == 9 && p[0]&^wire.FlagsKnown == 0 && p[0]&wire.FlagLong != 0:
		return binary.BigEndian.Uint64(p[1:]), true
	}
	return 0, false
}

// flush writes hdr (a held header, or nil) and p in one write and
// returns what Write returns for p, n bytes of it already accounted for.
func (c *conn) flush(n int, hdr, p []byte) (int, error) {
	var m int
	var err error
	switch {
	case len(hdr) == 0:
		m, err = c.writeRaw(p)
	case len(p) <= coalesceCopy:
		c.wbuf = append(append(c.wbuf[:0], hdr...), p...)
		m, err = c.writeRaw(c.wbuf)
		m = max(m-len(hdr), 0)
	default: // writev on a Unix socket; in two writes on another net.Conn
		var w int64
		w, err = c.writeRawv(net.Buffers{hdr, p})
		m = max(int(w)-len(hdr), 0)
	}
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// A partial frame may be on the wire: the stream is unusable.
			c.reject(reasonWriteTimeout)
			return n + m, c.opErr("write", ErrWriteTimeout)
		}
		c.Close()
	}
	return n + m, err
}

func (c *conn) writeRawv(b net.Buffers) (int64, error) {
	if err := c.raw.SetWriteDeadline(time.Now().Add(c.o.WriteTimeout)); err != nil {
		return 0, err
	}
	return b.WriteTo(c.raw)
}

func (c *conn) writeRaw(p []byte) (int, error) {
	if err := c.raw.SetWriteDeadline(time.Now().Add(c.o.WriteTimeout)); err != nil {
		return 0, err
	}
	return c.raw.Write(p)
}

// Close closes the connection. Only the first call does anything; later
// calls return nil so that zmq4, which may close a Conn twice, sees no error.
func (c *conn) Close() error {
	var err error
	c.closeOnce.Do(func() { err = c.shutdown() })
	return err
}

// reject closes the connection and, if this call is the one that closed it,
// reports reason to Options.OnReject.
func (c *conn) reject(reason string) {
	won := false
	c.closeOnce.Do(func() {
		won = true
		_ = c.shutdown()
	})
	if won && c.o.OnReject != nil {
		c.o.OnReject(c.socket(), reason)
	}
}

// socket names the Unix socket this connection belongs to.
func (c *conn) socket() string {
	a := c.raw.LocalAddr()
	if c.side == sideDial {
		a = c.raw.RemoteAddr()
	}
	if a == nil {
		return ""
	}
	return a.String()
}

func (c *conn) shutdown() error {
	if t := c.timer.Load(); t != nil {
		t.Stop()
	}
	err := c.raw.Close()
	if c.onClose != nil {
		c.onClose()
	}
	return err
}

func (c *conn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "unix", Source: c.raw.LocalAddr(), Addr: c.raw.RemoteAddr(), Err: err}
}

// LocalAddr returns the local address of the underlying connection.
func (c *conn) LocalAddr() net.Addr { return c.raw.LocalAddr() }

// RemoteAddr returns the remote address of the underlying connection.
func (c *conn) RemoteAddr() net.Addr { return c.raw.RemoteAddr() }

// SetDeadline sets the underlying connection's deadlines. Write replaces the
// write deadline with its own on every call.
func (c *conn) SetDeadline(t time.Time) error { return c.raw.SetDeadline(t) }

// SetReadDeadline sets the underlying connection's read deadline.
func (c *conn) SetReadDeadline(t time.Time) error { return c.raw.SetReadDeadline(t) }

// SetWriteDeadline sets the underlying connection's write deadline; Write
// replaces it with its own on every call.
func (c *conn) SetWriteDeadline(t time.Time) error { return c.raw.SetWriteDeadline(t) }

var _ net.Conn = (*conn)(nil)
