package zmtp

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// listener accepts Unix connections, pre-validates each one's handshake in a
// goroutine of its own and hands zmq4 only the connections that passed.
// zmq4's accept loop runs Open synchronously, so it must never be given a
// connection whose peer can still stall it.
type listener struct {
	ln net.Listener
	o  *Options

	ready chan *conn    // pre-validated connections, unbuffered
	done  chan struct{} // closed by Close
	live  atomic.Int64  // open connections: in handshake, queued, or owned by zmq4

	mu     sync.Mutex
	closed bool
	hs     map[*conn]struct{} // connections still in pre-validation

	wg        sync.WaitGroup // the accept loop and the handshake goroutines
	closeOnce sync.Once
	closeErr  error
	stopCtx   func() bool // guarded by mu: set after the AfterFunc may already run
}

func newListener(ctx context.Context, ln net.Listener, o *Options) *listener {
	l := &listener{
		ln:    ln,
		o:     o,
		ready: make(chan *conn),
		done:  make(chan struct{}),
		hs:    make(map[*conn]struct{}),
	}
	l.wg.Add(1)
	go l.loop()
	// Registered last: if ctx is already done, Close runs at once in a
	// goroutine of its own, and must find the loop counted in wg.
	stop := context.AfterFunc(ctx, func() { _ = l.Close() })
	l.mu.Lock()
	l.stopCtx = stop
	l.mu.Unlock()
	return l
}

func (l *listener) loop() {
	defer l.wg.Done()
	var backoff time.Duration
	for {
		raw, err := l.ln.Accept()
		if err != nil {
			if l.isClosed() || errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and the like: back off like net/http does rather
			// than spin, and never surface it (zmq4's accept loop spins
			// on Accept errors).
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-l.done:
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		if l.o.OnAccept != nil {
			l.o.OnAccept(raw.LocalAddr().String())
		}
		// Only this goroutine increments live, so the check cannot race
		// with another increment.
		if l.live.Load() >= int64(l.o.MaxConns) {
			_ = raw.Close()
			if l.o.OnReject != nil {
				l.o.OnReject(raw.LocalAddr().String(), reasonTooManyConns)
			}
			continue
		}
		l.live.Add(1)
		c := newConn(raw, l.o, sideListen, func() { l.live.Add(-1) })
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			_ = c.Close()
			return
		}
		l.hs[c] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go l.handshake(c)
	}
}

func (l *listener) handshake(c *conn) {
	defer l.wg.Done()
	err := c.serverHandshake()
	l.mu.Lock()
	delete(l.hs, c)
	l.mu.Unlock()
	if err != nil {
		return // serverHandshake closed c and reported why
	}
	select {
	case l.ready <- c:
	case <-l.done:
		_ = c.Close()
	}
}

func (l *listener) isClosed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// Accept returns the next pre-validated connection. After Close it returns
// an error wrapping net.ErrClosed; it never returns any other error, because
// zmq4's accept loop retries errors without pause.
func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.done:
		return nil, &net.OpError{Op: "accept", Net: "unix", Addr: l.ln.Addr(), Err: net.ErrClosed}
	}
}

// Close stops accepting, closes the connections still in pre-validation and
// waits for the listener's goroutines to exit. Connections already returned
// by Accept belong to their caller (zmq4 closes them with its socket).
func (l *listener) Close() error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		if l.stopCtx != nil {
			l.stopCtx()
		}
		l.closed = true
		close(l.done)
		pending := make([]*conn, 0, len(l.hs))
		for c := range l.hs {
			pending = append(pending, c)
		}
		l.mu.Unlock()
		l.closeErr = l.ln.Close()
		for _, c := range pending {
			_ = c.Close()
		}
		l.wg.Wait()
	})
	return l.closeErr
}

// Addr returns the listener's Unix socket address.
func (l *listener) Addr() net.Addr { return l.ln.Addr() }

var _ net.Listener = (*listener)(nil)
