//go:build !linux && !darwin

package control

import (
	"errors"
	"net"
)

// peerUID fails closed where Carapace does not know how to read peer
// credentials: every connection is rejected.
func peerUID(*net.UnixConn) (int, error) {
	return -1, errors.New("peer credentials are not supported on this platform")
}
