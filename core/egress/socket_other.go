//go:build unix && !linux

package egress

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// socketpair makes the point's socket pair. macOS has no SOCK_SEQPACKET
// Unix sockets: SOCK_DGRAM keeps message boundaries too, and a Unix
// datagram is not lost (a full receiver refuses the send, which the SDK
// retries). Its small default receive buffer is raised. There is no
// SOCK_CLOEXEC either: close-on-exec is set under the fork lock.
func socketpair() ([2]int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
	if err != nil {
		return fds, err
	}
	unix.CloseOnExec(fds[0])
	unix.CloseOnExec(fds[1])
	_ = unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_RCVBUF, 64<<10)
	return fds, nil
}
