// Package sockfile holds the checks the core makes before it listens on a
// Unix socket of its own (the control socket, the event bus, each
// session's model API socket): that the folder is private to the user, and
// that a socket file left at the path by a core that died is removed while
// a live one, or a file that is not a socket, is left alone.
package sockfile

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"
	"time"
)

// Errors of RemoveStale.
var (
	// ErrNotSocket: a file that is not a socket is in the way.
	ErrNotSocket = errors.New("exists and is not a socket; remove it if nothing uses it")
	// ErrInUse: a server answers on the socket.
	ErrInUse = errors.New("a live process already listens on it: it is in use")
)

// RemoveStale removes the socket at path unless a server answers on it. A
// missing file is no error. A file that is not a socket wraps ErrNotSocket
// and a live socket ErrInUse; both are left in place. A socket that
// neither answers nor refuses (a timeout, a permission error) is not proof
// that it is stale and is left too. The check and the removal are not
// atomic: the core's pid file is what serialises starts.
func RemoveStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s %w", path, ErrNotSocket)
	}
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err == nil {
		_ = c.Close()
		return fmt.Errorf("%s: %w", path, ErrInUse)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: cannot tell whether it is in use: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	return nil
}

// CheckPrivateDir requires dir to be a folder of this user that group and
// others cannot enter: what keeps other users from a socket inside it,
// whatever the socket's own mode.
func CheckPrivateDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s has mode %04o: it must be private to the user (0700)", dir, perm)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s belongs to uid %d, not to this user (%d)", dir, st.Uid, os.Geteuid())
	}
	return nil
}
