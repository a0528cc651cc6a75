package events

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/carapace-dev/carapace/ipc/zmtp"
	"github.com/carapace-dev/carapace/ipc/zmtp/wire"
	"github.com/go-zeromq/zmq4/transport"
)

// listenScheme is the PUB socket's transport, registered on first use:
// Unix sockets whose connections are filtered as the package documentation
// describes. The Bus it serves travels in the context zmq4 hands Listen
// (the PUB socket's, derived from the one Open creates).
var listenScheme = zmtp.Lazy("carapace-events", listenTransport{})

// busKey is the context key of the *Bus a PUB socket listens for.
type busKey struct{}

// ZMTP 3.x wire constants (https://rfc.zeromq.org/spec/23/).
const (
	flagMore    = 0x01
	flagLong    = 0x02
	flagCommand = 0x04
	flagsKnown  = flagMore | flagLong | flagCommand

	// maxReady bounds a subscriber's READY command body.
	maxReady = 4 << 10
	// maxSubscription bounds a subscription message: its 0/1 byte and
	// the topic prefix.
	maxSubscription = 1 << 10
)

type listenTransport struct{}

// Dial refuses: this transport only serves the bus's PUB socket. Clients
// dial with Dial, or any ZeroMQ SUB on "ipc://" + path.
func (listenTransport) Dial(context.Context, transport.Dialer, string) (net.Conn, error) {
	return nil, errors.New("the event bus transport only listens")
}

// Listen binds the Unix socket at addr, makes it 0600 and wraps it.
func (listenTransport) Listen(ctx context.Context, addr string) (net.Listener, error) {
	b, _ := ctx.Value(busKey{}).(*Bus)
	if b == nil {
		return nil, errors.New("the event bus transport serves only events.Open")
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(true)
	// The directory is private (Open checked), so nobody else can reach
	// the socket in the moment before this chmod.
	if err := os.Chmod(addr, 0o600); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("chmod event socket: %w", err)
	}
	l := &subListener{ln: ln, b: b, done: make(chan struct{}), conns: map[*subConn]struct{}{}}
	b.ln = l
	return l, nil
}

// Addr accepts absolute paths only.
func (listenTransport) Addr(ep string) (string, error) {
	if len(ep) == 0 || ep[0] != '/' {
		return "", fmt.Errorf("event socket %q is not an absolute path", ep)
	}
	return ep, nil
}

// subListener accepts subscriber connections, up to MaxRemotes at once.
type subListener struct {
	ln   *net.UnixListener
	b    *Bus
	done chan struct{}

	mu        sync.Mutex
	closed    bool
	conns     map[*subConn]struct{}
	closeOnce sync.Once
	closeErr  error
}

// Accept returns the next connection. It returns an error only once the
// listener is closed: zmq4's accept loop retries errors without pause.
func (l *subListener) Accept() (net.Conn, error) {
	var backoff time.Duration
	for {
		raw, err := l.ln.AcceptUnix()
		if err != nil {
			if l.isClosed() || errors.Is(err, net.ErrClosed) {
				return nil, &net.OpError{Op: "accept", Net: "unix", Addr: l.ln.Addr(), Err: net.ErrClosed}
			}
			// EMFILE and the like: back off rather than spin.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-l.done:
				t.Stop()
			}
			continue
		}
		backoff = 0
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			_ = raw.Close()
			return nil, &net.OpError{Op: "accept", Net: "unix", Addr: l.ln.Addr(), Err: net.ErrClosed}
		}
		if len(l.conns) >= l.b.opts.MaxRemotes {
			l.mu.Unlock()
			_ = raw.Close()
			l.b.rejected("too many subscribers")
			continue
		}
		// Bounds zmq4's synchronous handshake; cleared once the READY passed.
		if err := raw.SetReadDeadline(time.Now().Add(l.b.opts.HandshakeTimeout)); err != nil {
			l.mu.Unlock()
			_ = raw.Close()
			continue
		}
		c := newSubConn(raw, l)
		l.conns[c] = struct{}{}
		l.b.wg.Add(1) // before Close can Wait: Close marks l closed under l.mu first
		l.mu.Unlock()
		go c.writeLoop()
		return c, nil
	}
}

func (l *subListener) isClosed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// Close stops accepting and closes every connection.
func (l *subListener) Close() error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closed = true
		close(l.done)
		conns := make([]*subConn, 0, len(l.conns))
		for c := range l.conns {
			conns = append(conns, c)
		}
		l.mu.Unlock()
		l.closeErr = l.ln.Close()
		for _, c := range conns {
			c.shut()
		}
	})
	return l.closeErr
}

// Addr returns the socket's address.
func (l *subListener) Addr() net.Addr { return l.ln.Addr() }

func (l *subListener) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

func (l *subListener) remove(c *subConn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// rejected counts and logs (rate-limited) a refused subscriber connection.
func (b *Bus) rejected(reason string) {
	b.remoteRejected.Add(1)
	b.rejectLog.Warn(b.log, "event socket refused a subscriber connection", "socket", b.path, "reason", reason)
}

// protoError is a subscriber's protocol violation: a short fixed reason
// that never contains a byte the peer sent.
type protoError string

func (e protoError) Error() string { return string(e) }

type phase uint8

const (
	phaseGreeting  phase = iota // the peer's greeting is next
	phaseReady                  // its READY command is next
	phaseSubscribe              // handshake done: subscription messages only
)

// subConn is one subscriber's connection, between the Unix socket and
// zmq4. Reads are filtered: zmq4 only ever sees a valid greeting, a valid
// READY of a SUB or XSUB, and subscription messages, each checked whole
// before it is handed on. Writes never block: they go to a bounded buffer
// that a goroutine of its own writes out, and whole messages are dropped
// while the buffer is full.
type subConn struct {
	net.Conn // the raw connection: addresses; Read, Write and Close are overridden
	raw      *net.UnixConn
	l        *subListener

	// Read side: zmq4 reads from one goroutine at a time; rmu makes sure.
	rmu     sync.Mutex
	br      *bufio.Reader
	phase   phase
	pending []byte // validated bytes not yet handed to zmq4
	rerr    error  // sticky

	// Write side.
	wmu      sync.Mutex
	wcond    *sync.Cond
	buf      []byte // waiting to be written
	spare    []byte // the writer's last buffer, for reuse
	inflight int    // bytes the writer is writing now
	closed   bool
	out      outStream

	closeOnce sync.Once
}

func newSubConn(raw *net.UnixConn, l *subListener) *subConn {
	c := &subConn{Conn: raw, raw: raw, l: l, br: bufio.NewReaderSize(raw, 4096), out: outStream{greeting: wire.GreetingLen}}
	c.wcond = sync.NewCond(&c.wmu)
	return c
}

// Read hands zmq4 the peer's validated byte stream.
func (c *subConn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.rerr != nil {
		return 0, c.rerr
	}
	if len(p) == 0 {
		return 0, nil
	}
	for len(c.pending) == 0 {
		if err := c.next(); err != nil {
			c.rerr = c.readFailed(err)
			return 0, c.rerr
		}
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

// next reads and validates the next unit of the peer's stream into pending.
func (c *subConn) next() error {
	switch c.phase {
	case phaseGreeting:
		var g [wire.GreetingLen]byte
		if _, err := io.ReadFull(c.br, g[:]); err != nil {
			return err
		}
		if err := wire.CheckGreeting(&g); err != nil {
			return protoError(err.Error())
		}
		c.pending, c.phase = g[:], phaseReady
	case phaseReady:
		_, flags, body, err := c.readFrame(maxReady)
		if err != nil {
			return err
		}
		if flags&^flagLong != flagCommand {
			return protoError("READY is not a single command frame")
		}
		ready, err := checkReady(body)
		if err != nil {
			return err
		}
		if err := c.raw.SetReadDeadline(time.Time{}); err != nil {
			return err
		}
		c.pending, c.phase = ready, phaseSubscribe
	default:
		frame, flags, body, err := c.readFrame(maxSubscription)
		if err != nil {
			return err
		}
		if flags&^flagLong != 0 {
			return protoError("a subscriber may send single-frame subscriptions only")
		}
		if len(body) == 0 || body[0] > 1 {
			return protoError("not a subscription message")
		}
		c.pending = frame
	}
	return nil
}

// readFrame reads one frame of at most max body bytes, allocating only
// after the size is checked. It returns the whole frame (header and body).
func (c *subConn) readFrame(max int) (frame []byte, flags byte, body []byte, err error) {
	flags, err = c.br.ReadByte()
	if err != nil {
		return nil, 0, nil, err
	}
	if flags&^flagsKnown != 0 {
		return nil, 0, nil, protoError("unknown frame flags")
	}
	var hdr [9]byte
	hdr[0] = flags
	n := 2
	if flags&flagLong != 0 {
		n = 9
	}
	if _, err := io.ReadFull(c.br, hdr[1:n]); err != nil {
		return nil, 0, nil, err
	}
	size := uint64(hdr[1])
	if n == 9 {
		size = binary.BigEndian.Uint64(hdr[1:9])
	}
	if size > uint64(max) {
		return nil, 0, nil, protoError("frame too large")
	}
	frame = make([]byte, n+int(size))
	copy(frame, hdr[:n])
	if _, err := io.ReadFull(c.br, frame[n:]); err != nil {
		return nil, 0, nil, err
	}
	return frame, flags, frame[n:], nil
}

// readFailed closes the connection after a failed read, counts the
// failures that are the peer's fault, and returns what zmq4 is told: io.EOF
// for an orderly end, otherwise a non-timeout *net.OpError, which makes
// zmq4 drop the connection.
func (c *subConn) readFailed(err error) error {
	c.shut()
	var pe protoError
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF) && c.phase == phaseSubscribe:
		return io.EOF
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		// Left during the handshake: a liveness probe (another core's
		// Open) does this. Not worth a warning.
		err = errors.New("peer left")
	case errors.As(err, &pe):
		c.l.b.rejected(pe.Error())
	case errors.As(err, &ne) && ne.Timeout():
		c.l.b.rejected("handshake timeout")
		err = errors.New("handshake timeout") // zmq4 must not take it for a retryable timeout
	}
	return &net.OpError{Op: "read", Net: "unix", Addr: c.raw.LocalAddr(), Err: err}
}

// Write queues p for the writer and never blocks. Frames of a message that
// began while the buffer was full are dropped, whole.
func (c *subConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed {
		return 0, &net.OpError{Op: "write", Net: "unix", Addr: c.raw.LocalAddr(), Err: net.ErrClosed}
	}
	full := len(c.buf)+c.inflight >= c.l.b.opts.RemoteBuffer
	var dropped int
	c.buf, dropped = c.out.feed(c.buf, p, full)
	if dropped > 0 {
		c.l.b.remoteDropped.Add(uint64(dropped))
		c.l.b.dropLog.Warn(c.l.b.log, "event dropped: a remote subscriber is not keeping up",
			"socket", c.l.b.path, "buffered_bytes", len(c.buf)+c.inflight)
	}
	c.wcond.Signal()
	return len(p), nil
}

// writeLoop writes the buffer out until the connection is closed or a
// write fails.
func (c *subConn) writeLoop() {
	defer c.l.b.wg.Done()
	for {
		c.wmu.Lock()
		for len(c.buf) == 0 && !c.closed {
			c.wcond.Wait()
		}
		if c.closed {
			c.wmu.Unlock()
			return
		}
		out := c.buf
		c.buf, c.spare = c.spare[:0], nil
		c.inflight = len(out)
		c.wmu.Unlock()

		_, err := c.raw.Write(out)

		c.wmu.Lock()
		c.inflight = 0
		if cap(out) <= 64<<10 { // do not pin a large buffer for an idle subscriber
			c.spare = out[:0]
		}
		c.wmu.Unlock()
		if err != nil {
			c.shut() // zmq4's reader sees the closed socket and drops the connection
			return
		}
	}
}

// Close is zmq4's: it closes the connection.
func (c *subConn) Close() error {
	c.shut()
	return nil
}

// shut closes the connection once: the writer exits, zmq4's reader fails,
// and the listener forgets it.
func (c *subConn) shut() {
	c.closeOnce.Do(func() {
		c.wmu.Lock()
		c.closed = true
		c.buf = nil
		c.wcond.Broadcast()
		c.wmu.Unlock()
		_ = c.raw.Close()
		c.l.remove(c)
	})
}

// outStream tracks zmq4's outgoing byte stream (greeting, then frames) so
// that whole messages can be dropped. zmq4 writes a frame's header and body
// in separate calls; nothing here depends on how the stream is split.
type outStream struct {
	greeting int // greeting bytes still to pass
	hdr      [9]byte
	hn       int    // header bytes collected
	body     uint64 // body bytes of the current frame still to come
	more     bool   // the current message has further frames
	dropping bool   // the current message is being dropped
}

// feed appends p to buf, minus the frames of dropped messages. full says
// whether the buffer is at its bound; it is consulted when a message
// starts. It returns the new buffer and how many messages it began to drop.
func (s *outStream) feed(buf, p []byte, full bool) ([]byte, int) {
	dropped := 0
	for len(p) > 0 {
		switch {
		case s.greeting > 0:
			n := min(s.greeting, len(p))
			buf = append(buf, p[:n]...)
			s.greeting -= n
			p = p[n:]
		case s.body > 0:
			n := int(min(s.body, uint64(len(p))))
			if !s.dropping {
				buf = append(buf, p[:n]...)
			}
			s.body -= uint64(n)
			p = p[n:]
		default: // a frame header
			flags := s.hdr[0]
			if s.hn == 0 {
				flags = p[0]
				if !s.more { // a new message: commands (READY) are never dropped
					s.dropping = full && flags&flagCommand == 0
					if s.dropping {
						dropped++
					}
				}
			}
			need := 2
			if flags&flagLong != 0 {
				need = 9
			}
			n := min(need-s.hn, len(p))
			copy(s.hdr[s.hn:], p[:n])
			s.hn += n
			p = p[n:]
			if s.hn < need {
				continue
			}
			if need == 9 {
				s.body = binary.BigEndian.Uint64(s.hdr[1:9])
			} else {
				s.body = uint64(s.hdr[1])
			}
			s.more = flags&flagMore != 0 && flags&flagCommand == 0
			if !s.dropping {
				buf = append(buf, s.hdr[:need]...)
			}
			s.hn = 0
			s.hdr = [9]byte{}
		}
	}
	return buf, dropped
}

// checkReady validates the body of a subscriber's READY command with the
// IPC transport's parser (every length within what remains, names of ZMTP
// name-chars, no name twice, a socket type zmq4 knows) and requires a SUB or
// XSUB. It returns the READY frame zmq4 is shown instead of the peer's: the
// socket type in canonical spelling (zmq4 panics on types it does not know)
// and no other property, so no peer-chosen Identity reaches it.
func checkReady(body []byte) ([]byte, error) {
	st, err := wire.ParseReady(body)
	if err != nil {
		return nil, protoError(err.Error())
	}
	if st != "SUB" && st != "XSUB" {
		return nil, protoError("peer is not a SUB socket")
	}
	return wire.EncodeReady(st), nil
}

var (
	_ transport.Transport = listenTransport{}
	_ net.Listener        = (*subListener)(nil)
	_ net.Conn            = (*subConn)(nil)
)
