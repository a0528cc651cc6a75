package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults, and the log rate limit.
const (
	// DefaultSocket is where the host mounts the model API socket in an
	// agent container.
	DefaultSocket = "/run/carapace/llm.sock"
	// DefaultMaxConns applies when Options.MaxConns is zero or less.
	DefaultMaxConns = 64
	// DefaultDialTimeout applies when Options.DialTimeout is zero or less.
	DefaultDialTimeout = 5 * time.Second
	// LogInterval is the least time between two log lines about the same
	// kind of failure (dial, accept, too many connections). The failures in
	// between are counted and reported with the next line.
	LogInterval = 10 * time.Second
)

// Errors returned before the relay starts. The listen-address errors are the
// caller's mistake (the ipc command reports them as usage errors).
var (
	// ErrNotLoopback refuses a listen address or listener that is not
	// 127.0.0.1, ::1 or localhost.
	ErrNotLoopback = errors.New("relay: the listen address must be 127.0.0.1, ::1 or localhost")
	// ErrBadListen refuses a listen address that is not host:port with a
	// numeric port.
	ErrBadListen = errors.New("relay: the listen address must be host:port with a numeric port, host 127.0.0.1, ::1 or localhost")
	// ErrNoSocket means Options.Socket is empty.
	ErrNoSocket = errors.New("relay: no socket path")
)

// Options configure a relay.
type Options struct {
	// Listen is the host:port ListenAndServe listens on. It must be a
	// loopback address (see LoopbackAddr); anything else is refused. Serve
	// ignores it and checks its listener's address instead.
	Listen string
	// Socket is the path of the Unix socket every connection is spliced
	// to, dialled once per accepted connection. Required.
	Socket string
	// MaxConns bounds the connections relayed at once (default 64, also
	// for zero or less). Past it a new connection is closed at once.
	MaxConns int
	// DialTimeout bounds one dial of Socket (default 5s, also for zero or
	// less).
	DialTimeout time.Duration
	// Logger receives failures (rate-limited to one line per LogInterval
	// each) and, at debug level, one line per finished connection with its
	// byte counts. Never payload bytes. Nil discards.
	Logger *slog.Logger
}

// ListenAndServe listens on o.Listen, which must be a loopback address, and
// relays its connections to o.Socket until ctx is cancelled; see Serve.
func ListenAndServe(ctx context.Context, o Options) error {
	if o.Socket == "" {
		return ErrNoSocket
	}
	ln, err := Listen(o.Listen)
	if err != nil {
		return err
	}
	return Serve(ctx, ln, o)
}

// Serve accepts connections on ln and splices each one, byte for byte, to a
// fresh connection to the Unix socket o.Socket, both directions at once,
// half-closes forwarded. ln must be a TCP listener on 127.0.0.1 or ::1;
// otherwise Serve returns an error wrapping ErrNotLoopback.
//
// Serve always closes ln. It returns nil once ctx is cancelled, or an error
// if ln fails for another reason (closed by someone else, say). Before it
// returns it closes every connection still being relayed and waits for their
// goroutines: a streamed reply in flight is cut, not drained.
func Serve(ctx context.Context, ln net.Listener, o Options) error {
	defer ln.Close()
	if o.Socket == "" {
		return ErrNoSocket
	}
	if err := checkListener(ln); err != nil {
		return err
	}
	s := newServer(o)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	err := s.loop(ctx, ln)
	cancel() // closes the live connections, whatever ended the loop
	s.wg.Wait()
	return err
}

// server is one Serve call's state.
type server struct {
	socket   string
	maxConns int64
	dialer   net.Dialer
	log      *slog.Logger

	live atomic.Int64   // connections accepted and not yet closed
	wg   sync.WaitGroup // one per connection goroutine

	dialFailed, acceptFailed, rejected every
}

func newServer(o Options) *server {
	s := &server{socket: o.Socket, maxConns: int64(o.MaxConns), log: o.Logger}
	if s.maxConns <= 0 {
		s.maxConns = DefaultMaxConns
	}
	s.dialer.Timeout = o.DialTimeout
	if s.dialer.Timeout <= 0 {
		s.dialer.Timeout = DefaultDialTimeout
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

func (s *server) loop(ctx context.Context, ln net.Listener) error {
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("relay: %w", err)
			}
			// EMFILE and the like: back off as net/http does rather than
			// spin.
			if ok, n := s.acceptFailed.allow(time.Now()); ok {
				s.log.Warn("relay: accept failed", "err", err, "suppressed", n)
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil
			}
			continue
		}
		backoff = 0
		// Only this goroutine increments live, so the check cannot race
		// with another increment.
		if s.live.Load() >= s.maxConns {
			_ = c.Close()
			if ok, n := s.rejected.allow(time.Now()); ok {
				s.log.Warn("relay: too many connections; closed a new one", "max", s.maxConns, "suppressed", n)
			}
			continue
		}
		s.live.Add(1)
		s.wg.Add(1)
		go s.handle(ctx, c)
	}
}

// handle dials the socket for one accepted connection and relays it.
func (s *server) handle(ctx context.Context, c net.Conn) {
	defer s.wg.Done()
	defer s.live.Add(-1)
	stopC := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stopC()
	u, err := s.dialer.DialContext(ctx, "unix", s.socket)
	if err != nil {
		_ = c.Close()
		if ctx.Err() == nil {
			if ok, n := s.dialFailed.allow(time.Now()); ok {
				s.log.Warn("relay: cannot reach the socket; closed the connection", "socket", s.socket, "err", err, "suppressed", n)
			}
		}
		return
	}
	stopU := context.AfterFunc(ctx, func() { _ = u.Close() })
	defer stopU()
	start := time.Now()
	up, down := join(c, u)
	s.log.Debug("relay: connection done", "client", c.RemoteAddr().String(), "up_bytes", up, "down_bytes", down, "duration", time.Since(start))
}

// join copies a to b and b to a at once, then closes both. It returns the
// byte counts of the two directions.
func join(a, b net.Conn) (ab, ba int64) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		ab = half(b, a)
	}()
	ba = half(a, b)
	<-done
	_ = a.Close()
	_ = b.Close()
	return ab, ba
}

// closeWriter is the half-close both *net.TCPConn and *net.UnixConn have.
type closeWriter interface{ CloseWrite() error }

// half copies src to dst until src ends. A clean end (EOF) is passed on as a
// half-close of dst, so the peer behind dst sees EOF while the other
// direction goes on (an HTTP client that has sent its request can still read
// the reply). A failure on either side closes both connections, which ends
// the other direction as well.
func half(dst, src net.Conn) int64 {
	n, err := io.Copy(dst, src)
	if err == nil {
		if cw, ok := dst.(closeWriter); ok && cw.CloseWrite() == nil {
			return n
		}
	}
	_ = dst.Close()
	_ = src.Close()
	return n
}

// every lets one event through per LogInterval and counts the others.
type every struct {
	mu         sync.Mutex
	next       time.Time
	suppressed int
}

// allow reports whether an event at now may be logged and, if so, how many
// were suppressed since the last one that was.
func (e *every) allow(now time.Time) (bool, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if now.Before(e.next) {
		e.suppressed++
		return false, 0
	}
	n := e.suppressed
	e.next, e.suppressed = now.Add(LogInterval), 0
	return true, n
}
