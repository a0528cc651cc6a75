package plugin

import "golang.org/x/sys/unix"

// sendFlags: never block (sendRequest retries), and no SIGPIPE when the
// core has gone.
const sendFlags = unix.MSG_DONTWAIT | unix.MSG_NOSIGNAL

// streamPair makes the pair whose one end is passed to the core: the only
// socket call a confined handler may make, socketpair(AF_UNIX,
// SOCK_STREAM|SOCK_CLOEXEC, 0).
func streamPair() ([2]int, error) {
	return unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
}
