package llmproxy

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/carapace-dev/carapace/internal/sockfile"
)

// Bounds of the server Serve runs.
const (
	// maxConns bounds the connections open at once on one session's
	// socket; further ones wait to be accepted. Claude Code opens a few.
	maxConns = 32
	// shutdownGrace is how long Serve waits for calls in flight to end
	// once its context is done; their contexts are cancelled at once, so
	// this only covers relaying the last bytes.
	shutdownGrace = 2 * time.Second
)

// Serve serves h on a Unix socket at socketPath until ctx is done, then
// cancels the calls in flight, removes the socket and returns nil. It
// returns an error if it cannot listen.
//
// The socket is made 0666: the container's user, which is not the host
// user, must be able to connect to the one file mounted into it (DESIGN
// decision 6, like the session's IPC socket of decision 4). What keeps
// other host users out is the socket's directory, which must be private to
// the host user (no group or other permission bits): Serve refuses any
// other. Peer credentials are not checked, since the container's user is
// by design someone else.
//
// A stale socket left at socketPath by a core that died is removed; a file
// that is not a socket, or a socket a server still answers on, is an
// error.
func Serve(ctx context.Context, socketPath string, h http.Handler) error {
	ln, err := listen(socketPath)
	if err != nil {
		return err
	}
	return serve(ctx, ln, h)
}

// Start is Serve that returns once the socket listens: a connection made
// after it returns is accepted. What Serve would return comes on the
// channel, once; an error to listen is Start's own. A session's container
// is started only after this, with no wait for the socket to appear.
func Start(ctx context.Context, socketPath string, h http.Handler) (<-chan error, error) {
	ln, err := listen(socketPath)
	if err != nil {
		return nil, err
	}
	served := make(chan error, 1)
	go func() { served <- serve(ctx, ln, h) }()
	return served, nil
}

// listen makes the socket Serve serves on.
func listen(socketPath string) (*net.UnixListener, error) {
	if err := sockfile.CheckPrivateDir(filepath.Dir(socketPath)); err != nil {
		return nil, fmt.Errorf("llm socket directory: %w", err)
	}
	if err := sockfile.RemoveStale(socketPath); err != nil {
		return nil, fmt.Errorf("llm socket: %w", err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: socketPath, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("llm socket: %w", err)
	}
	// The directory is private, so nobody else can reach the socket in
	// the moment before this chmod.
	if err := os.Chmod(socketPath, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("llm socket: %w", err)
	}
	return ln, nil
}

// serve serves h on ln until ctx is done, then closes ln (which removes
// its socket file).
func serve(ctx context.Context, ln *net.UnixListener, h http.Handler) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       5 * time.Minute,
		MaxHeaderBytes:    256 << 10,
		// Calls in flight end with the session.
		BaseContext: func(net.Listener) context.Context { return ctx },
		ErrorLog:    slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(newLimitListener(ln, maxConns)) }()
	select {
	case err := <-errc:
		return fmt.Errorf("llm socket: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	<-errc
	return nil
}

// limitListener accepts at most n connections at once.
type limitListener struct {
	net.Listener
	sem chan struct{}
}

func newLimitListener(l net.Listener, n int) *limitListener {
	return &limitListener{Listener: l, sem: make(chan struct{}, n)}
}

// Accept waits for a free slot, then for a connection.
func (l *limitListener) Accept() (net.Conn, error) {
	l.sem <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

// limitConn frees its slot when closed.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

// Close closes the connection and frees its slot once.
func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
