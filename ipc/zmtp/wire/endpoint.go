package wire

import (
	"fmt"
	"strings"
)

// Path returns the socket path of "ipc:///run/carapace/ipc.sock",
// "zipc:///…" or a bare absolute path. Anything else (tcp://, relative
// paths, Linux abstract sockets "@name") is an error wrapping
// ErrBadEndpoint.
func Path(ep string) (string, error) {
	var path string
	switch {
	case strings.HasPrefix(ep, "ipc://"):
		path = ep[len("ipc://"):]
	case strings.HasPrefix(ep, "zipc://"):
		path = ep[len("zipc://"):]
	case strings.HasPrefix(ep, "/"):
		path = ep
	default:
		return "", fmt.Errorf("%w: %q is neither ipc:///path nor an absolute path", ErrBadEndpoint, ep)
	}
	if err := CheckPath(path); err != nil {
		return "", err
	}
	return path, nil
}

// CheckPath accepts absolute filesystem paths only: the socket file's
// permissions are the identity boundary, and an abstract socket has none.
func CheckPath(path string) error {
	switch {
	case !strings.HasPrefix(path, "/"):
		return fmt.Errorf("%w: %q is not an absolute path", ErrBadEndpoint, path)
	case strings.Contains(path, "://"):
		return fmt.Errorf("%w: %q contains \"://\"", ErrBadEndpoint, path)
	case strings.IndexByte(path, 0) >= 0:
		return fmt.Errorf("%w: path contains a NUL byte", ErrBadEndpoint)
	}
	return nil
}
