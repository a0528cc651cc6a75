package egress

import "golang.org/x/sys/unix"

// socketpair makes the point's socket pair: SOCK_SEQPACKET, so that each
// request is one message and a closed end reads as the end.
func socketpair() ([2]int, error) {
	return unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
}
