package relay

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// bound is how long a test waits for something that should happen at once.
// It is a failure bound, never a threshold a passing test depends on.
const bound = 10 * time.Second

// socketDir is a short temporary directory: t.TempDir paths can exceed the
// 104–108 bytes a Unix socket path may have.
func socketDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "rl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// unixServer is the stand-in for the core's proxy: it listens on a Unix
// socket and runs handle for each connection in a goroutine of its own.
type unixServer struct {
	path     string
	ln       net.Listener
	accepted atomic.Int64

	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	once  sync.Once
}

func startUnix(t testing.TB, handle func(*net.UnixConn)) *unixServer {
	t.Helper()
	path := filepath.Join(socketDir(t), "llm.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s := &unixServer{path: path, ln: ln, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			s.mu.Lock()
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer func() {
					c.Close()
					s.mu.Lock()
					delete(s.conns, c)
					s.mu.Unlock()
				}()
				handle(c.(*net.UnixConn))
			}()
		}
	}()
	t.Cleanup(s.Close)
	return s
}

// Close stops the server, closes its connections and waits for its handlers.
func (s *unixServer) Close() {
	s.once.Do(func() {
		s.ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
}

// echo copies what it reads back until EOF, then half-closes.
func echo(c *net.UnixConn) {
	if _, err := io.Copy(c, c); err == nil {
		c.CloseWrite()
	}
}

// relayRun is one Serve call in the background.
type relayRun struct {
	addr   string
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

func startRelay(t testing.TB, o Options) *relayRun {
	t.Helper()
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &relayRun{addr: ln.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- Serve(ctx, ln, o) }()
	t.Cleanup(func() {
		if err := r.Stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return r
}

// Stop cancels Serve and waits for it to return; it fails after bound.
func (r *relayRun) Stop() error {
	r.once.Do(func() {
		r.cancel()
		select {
		case r.err = <-r.done:
		case <-time.After(bound):
			r.err = errors.New("Serve did not return after its context was cancelled")
		}
	})
	return r.err
}

func dial(t testing.TB, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, bound)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(bound))
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// exchange writes all of req, half-closes, and reads until EOF, both at once.
func exchange(c *net.TCPConn, req []byte) ([]byte, error) {
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(req)
		if err == nil {
			err = c.CloseWrite()
		}
		werr <- err
	}()
	got, rerr := io.ReadAll(c)
	if err := <-werr; err != nil {
		return got, err
	}
	return got, rerr
}

// pingPong writes msg and reads exactly len(msg) bytes back.
func pingPong(c net.Conn, msg []byte) error {
	if _, err := c.Write(msg); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if !bytes.Equal(got, msg) {
		return errors.New("echo differs")
	}
	return nil
}

// closedByPeer reports whether err is what a client sees when the relay
// closes its connection: EOF or a reset, not a timeout.
func closedByPeer(err error) bool {
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		return false
	}
	return true
}

func randomBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16)})
	r.Read(b)
	return b
}

// logSink is a slog handler that keeps every record's text.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
	h   slog.Handler
}

func newLogSink() (*logSink, *slog.Logger) {
	s := &logSink{}
	s.h = slog.NewTextHandler(lockedWriter{s}, &slog.HandlerOptions{Level: slog.LevelDebug})
	return s, slog.New(s.h)
}

type lockedWriter struct{ s *logSink }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.s.buf.Write(p)
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// count counts the lines containing substr.
func (s *logSink) count(substr string) int {
	n := 0
	for _, line := range strings.Split(s.String(), "\n") {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}

// eventually polls cond until it holds or bound passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", bound, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
