package wire

import (
	"strconv"
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
		return "", withDetail(ErrBadEndpoint, strconv.Quote(ep)+" is neither ipc:///path nor an absolute path")
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
		return withDetail(ErrBadEndpoint, strconv.Quote(path)+" is not an absolute path")
	case strings.Contains(path, "://"):
		return withDetail(ErrBadEndpoint, strconv.Quote(path)+` contains "://"`)
	case strings.IndexByte(path, 0) >= 0:
		return withDetail(ErrBadEndpoint, "path contains a NUL byte")
	}
	return nil
}
