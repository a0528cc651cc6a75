package control

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/carapace-dev/carapace/internal/sockfile"
)

// Listen listens on the control socket at path.
//
// It creates the parent directory (0700) if it is missing, refuses when a
// live server already answers on path, removes a stale socket file left by
// a core that died, and makes the new socket 0600. It never removes a file
// that is not a socket.
//
// The returned listener checks the peer uid of every connection it accepts
// and closes (and logs) any connection from a user other than this
// process's effective uid: the socket's mode is the first barrier and the
// peer check the second.
//
// The liveness check and the removal are not atomic: two cores started at
// the same instant could both find the socket stale. The core's pid file is
// what serialises starts.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := sockfile.RemoveStale(path); err != nil {
		if errors.Is(err, sockfile.ErrInUse) {
			return nil, fmt.Errorf("a core is already running (control socket %s answers)", path)
		}
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	// The run directory is 0700, so nobody else can reach the socket in the
	// moment before this chmod.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return newUIDListener(ln, os.Geteuid()), nil
}

// uidListener accepts only connections whose peer runs as uid.
type uidListener struct {
	*net.UnixListener
	uid    int
	logger atomic.Pointer[slog.Logger]
}

func newUIDListener(ln *net.UnixListener, uid int) *uidListener {
	l := &uidListener{UnixListener: ln, uid: uid}
	l.logger.Store(slog.Default())
	return l
}

// setLogger replaces the logger; Server.Serve injects its own.
func (l *uidListener) setLogger(logger *slog.Logger) { l.logger.Store(logger) }

// Accept returns the next connection from the listener's uid, closing the
// others.
func (l *uidListener) Accept() (net.Conn, error) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return nil, err
		}
		uid, err := peerUID(c)
		if err == nil && uid == l.uid {
			return c, nil
		}
		if err != nil {
			l.logger.Load().Warn("control: rejected a connection: cannot read peer credentials", "err", err)
		} else {
			l.logger.Load().Warn("control: rejected a connection from another user", "peer_uid", uid, "uid", l.uid)
		}
		c.Close()
	}
}
