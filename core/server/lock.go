package server

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/carapace-dev/carapace/core/home"
)

// lockHome takes an exclusive lock on run/core.lock for the life of the
// process, so that two cores never share a home: the second fails before it
// touches sockets the first is using. The kernel drops the lock when the
// process dies, so a crash never leaves a stale lock behind.
func lockHome(h home.Dir) (release func(), err error) {
	f, err := os.OpenFile(h.Path("run", "core.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another core is running in %s (carapace status shows it; carapace stop stops it)", h)
		}
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, nil
}
