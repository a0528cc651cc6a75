//go:build unix && !linux

package plugin

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// sendFlags: never block (sendRequest retries). A SIGPIPE when the core
// has gone is ignored by the Go runtime for a descriptor other than 1 and 2.
const sendFlags = unix.MSG_DONTWAIT

// streamPair makes the pair whose one end is passed to the core. There is
// no SOCK_CLOEXEC here: close-on-exec is set under the fork lock.
func streamPair() ([2]int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return fds, err
	}
	unix.CloseOnExec(fds[0])
	unix.CloseOnExec(fds[1])
	return fds, nil
}
