package relay

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// LoopbackAddr checks a listen address against the loopback rule and returns
// the address to listen on: host:port where host is 127.0.0.1, ::1 or
// localhost (case-insensitive; it becomes 127.0.0.1 without a name lookup)
// and port is a number from 0 to 65535 (0 lets the system pick). A host that
// is not loopback ("0.0.0.0", a LAN address, an empty host as in ":8080", any
// other name, even another 127/8 address) is refused with an error wrapping
// ErrNotLoopback; an address that is not host:port with a numeric port, with
// one wrapping ErrBadListen.
func LoopbackAddr(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("%w, not %q", ErrBadListen, listen)
	}
	switch ip := net.ParseIP(host); {
	case strings.EqualFold(host, "localhost"), ip != nil && ip.Equal(net.IPv4(127, 0, 0, 1)):
		host = "127.0.0.1"
	case ip != nil && ip.Equal(net.IPv6loopback):
		host = "::1"
	default:
		return "", fmt.Errorf("%w, not %q", ErrNotLoopback, listen)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", fmt.Errorf("%w, not %q", ErrBadListen, listen)
	}
	return net.JoinHostPort(host, strconv.FormatUint(n, 10)), nil
}

// Listen opens a TCP listener on listen after checking it with LoopbackAddr.
// Use it instead of ListenAndServe to learn the chosen port (listen with port
// 0, then read the listener's Addr) before calling Serve.
func Listen(listen string) (net.Listener, error) {
	addr, err := LoopbackAddr(listen)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	return ln, nil
}

// checkListener refuses a listener that is not bound to a loopback TCP
// address: Serve keeps the rule even for listeners it did not open.
func checkListener(ln net.Listener) error {
	a, ok := ln.Addr().(*net.TCPAddr)
	if !ok || !(a.IP.Equal(net.IPv4(127, 0, 0, 1)) || a.IP.Equal(net.IPv6loopback)) {
		return fmt.Errorf("%w, not a listener on %s", ErrNotLoopback, ln.Addr())
	}
	return nil
}
