//go:build linux || darwin

package control

import "net"

// peerUID returns the uid of the process at the other end of c, as the
// kernel recorded it when the peer connected.
func peerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	uid, cerr := -1, error(nil)
	if err := raw.Control(func(fd uintptr) { uid, cerr = fdPeerUID(int(fd)) }); err != nil {
		return -1, err
	}
	return uid, cerr
}
