package zmtp

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/internal/testutil/leaktest"
	"go.uber.org/goleak"
)

func listen(t *testing.T, ctx context.Context, opts Options) (*listener, string) {
	t.Helper()
	path := sockPath(t)
	ln, err := New(opts).Listen(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.(*listener), path
}

// until polls cond for up to wait.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(wait); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

func TestListenerClose(t *testing.T) {
	t.Run("unblocks Accept and closes peers in handshake", func(t *testing.T) {
		before := goleak.IgnoreCurrent()
		l, path := listen(t, context.Background(), Options{HandshakeTimeout: time.Minute})
		var stalled []net.Conn
		for i := 0; i < 5; i++ {
			c := rawConn(t, path)
			var g [GreetingLen]byte
			if _, err := io.ReadFull(c, g[:]); err != nil { // our greeting: it is in pre-validation
				t.Fatal(err)
			}
			stalled = append(stalled, c)
		}
		accepted := make(chan error, 1)
		go func() {
			_, err := l.Accept()
			accepted <- err
		}()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-accepted:
			if !errors.Is(err, net.ErrClosed) {
				t.Fatalf("Accept after Close = %v, want net.ErrClosed", err)
			}
		case <-time.After(wait):
			t.Fatal("Accept still blocked after Close")
		}
		for _, c := range stalled {
			waitClosed(t, c)
			c.Close()
		}
		if n := l.live.Load(); n != 0 {
			t.Fatalf("live = %d after Close", n)
		}
		leaktest.Check(t, before)
	})

	t.Run("releases a validated connection nobody accepted", func(t *testing.T) {
		before := goleak.IgnoreCurrent()
		l, path := listen(t, context.Background(), Options{})
		c := rawConn(t, path)
		if _, err := c.Write(cat(validGreeting(), dealerReady())); err != nil {
			t.Fatal(err)
		}
		until(t, "pre-validation done", func() bool {
			l.mu.Lock()
			defer l.mu.Unlock()
			return len(l.hs) == 0 && l.live.Load() == 1
		})
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, c)
		c.Close()
		if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close = %v", err)
		}
		if n := l.live.Load(); n != 0 {
			t.Fatalf("live = %d after Close", n)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("second Close = %v", err)
		}
		leaktest.Check(t, before)
	})

	t.Run("context cancel closes", func(t *testing.T) {
		before := goleak.IgnoreCurrent()
		ctx, cancel := context.WithCancel(context.Background())
		l, _ := listen(t, ctx, Options{})
		cancel()
		if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after cancel = %v", err)
		}
		l.Close()
		leaktest.Check(t, before)
	})

	t.Run("context already done", func(t *testing.T) {
		before := goleak.IgnoreCurrent()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		l, _ := listen(t, ctx, Options{})
		if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept on a listener whose context was done = %v", err)
		}
		leaktest.Check(t, before)
	})

	t.Run("accepted connections count until closed", func(t *testing.T) {
		l, path := listen(t, context.Background(), Options{MaxConns: 1})
		c := rawConn(t, path)
		if _, err := c.Write(cat(validGreeting(), dealerReady())); err != nil {
			t.Fatal(err)
		}
		sc, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if n := l.live.Load(); n != 1 {
			t.Fatalf("live = %d", n)
		}
		sc.Close()
		sc.Close() // a second Close must not free a second slot
		if n := l.live.Load(); n != 0 {
			t.Fatalf("live = %d after closing the only connection twice", n)
		}
	})
}

// OnAccept reports every accepted connection with the listener's path,
// before a byte is read: also one that never sends a greeting, and one
// dropped for exceeding MaxConns; nothing else.
func TestListenerOnAccept(t *testing.T) {
	type accepted struct{ socket string }
	got := make(chan accepted, 16)
	_, path := listen(t, context.Background(), Options{MaxConns: 1, HandshakeTimeout: time.Minute,
		OnAccept: func(socket string) { got <- accepted{socket} }})
	first := rawConn(t, path) // sends nothing: still in the handshake
	defer first.Close()
	second := rawConn(t, path) // over MaxConns: closed at once
	defer second.Close()
	for i := 0; i < 2; i++ {
		select {
		case a := <-got:
			if a.socket != path {
				t.Errorf("OnAccept(%q), want %q", a.socket, path)
			}
		case <-time.After(wait):
			t.Fatalf("OnAccept called %d times, want 2", i)
		}
	}
	select {
	case a := <-got:
		t.Errorf("extra OnAccept(%q)", a.socket)
	case <-time.After(100 * time.Millisecond):
	}
}
