//go:build !unix

package plugin

import (
	"context"
	"fmt"
	"net"
	"runtime"
)

// egressDial: there is no egress point but on Unix systems.
func egressDial(context.Context, int, []byte) (net.Conn, error) {
	return nil, fmt.Errorf("%w (no egress point on %s)", ErrNoEgress, runtime.GOOS)
}
