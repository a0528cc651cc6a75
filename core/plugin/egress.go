package plugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/carapace-dev/carapace/core/internal/pluginproto"
)

// ErrNoEgress is wrapped by Dial when the handler was started without an
// egress point: the core gives one only to a plugin that declares hosts.
var ErrNoEgress = errors.New("this plugin has no egress point: declare its hosts in the manifest (network)")

// EgressError is the core's refusal of a connection: Code is one of
// HOST_NOT_DECLARED, ADDRESS_REFUSED, RESOLVE_FAILED, DIAL_FAILED,
// TOO_MANY and BAD_REQUEST, and Message says why, for a person. A handler
// may show both (errors.As).
type EgressError struct {
	Code    string
	Message string
}

func (e *EgressError) Error() string { return "egress: " + e.Code + ": " + e.Message }

// Dial opens a TCP connection through the plugin's egress point in the
// core: a confined handler cannot make sockets of its own. network must
// be "tcp"; address is "host:port", the host a name or an IP literal as
// declared in the manifest (the core resolves names: a handler has no
// DNS). The core checks the host, dials it, and relays the bytes; TLS, if
// any, is the handler's (wrap the conn, or use HTTPClient).
//
// ctx bounds the whole dial, the core's resolving and connecting included
// (10 s at most on its side); it does not bound the connection once
// returned. A refusal is an *EgressError; without an egress point (a
// handler not started by the core, or a plugin that declares no hosts)
// the error wraps ErrNoEgress. The connection's RemoteAddr is the TCP
// address the core connected to, and AcceptedAsFakeIP of it says whether
// the core let that address through as a fake-IP DNS answer.
func Dial(ctx context.Context, network, address string) (net.Conn, error) {
	v, ok := os.LookupEnv(pluginproto.EnvEgressFD)
	if !ok || v == "" {
		return nil, fmt.Errorf("plugin: dial %s: %w", address, ErrNoEgress)
	}
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 0 {
		return nil, fmt.Errorf("plugin: dial %s: %s=%.20q is not a descriptor number", address, pluginproto.EnvEgressFD, v)
	}
	if network != pluginproto.EgressNetworkTCP {
		return nil, &EgressError{Code: pluginproto.EgressBadRequest, Message: fmt.Sprintf("network %q: only tcp (a plugin has no UDP, and so no DNS of its own)", network)}
	}
	host, ps, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("plugin: dial %s: %w", address, err)
	}
	port, err := strconv.ParseUint(ps, 10, 16)
	if err != nil || port == 0 {
		return nil, fmt.Errorf("plugin: dial %s: the port must be a number from 1 to 65535", address)
	}
	req, err := pluginproto.EncodeEgressRequest(&pluginproto.EgressRequest{V: pluginproto.EgressVersion,
		Network: pluginproto.EgressNetworkTCP, Host: host, Port: uint16(port)})
	if err != nil {
		return nil, fmt.Errorf("plugin: dial %s: %w", address, err)
	}
	c, err := egressDial(ctx, fd, req)
	if err != nil {
		return nil, fmt.Errorf("plugin: dial %s: %w", address, err)
	}
	return c, nil
}

// egressConn is a connection through the egress point: the Unix stream
// the core relays, which says where it leads.
type egressConn struct {
	*net.UnixConn
	remote net.Addr
	fakeIP bool
}

// FakeIP reports whether the core accepted the address as a fake-IP DNS
// answer.
func (c *egressConn) FakeIP() bool { return c.fakeIP }

// AcceptedAsFakeIP reports whether c is a connection of Dial whose
// address the core accepted as a fake-IP DNS answer: a special address
// (198.18.0.0/15 or a prefix of fc00::/7) that a name resolved to, in a
// range the user configured ([network] fake_ip in config.toml). A handler
// that checks the address it reached again (as the web plugin does)
// accepts such an address on the core's word instead of refusing it: the
// core owns that decision. Any other connection is false. c may be a
// connection that wraps one of Dial's and has a method FakeIP() bool
// passing its answer on.
func AcceptedAsFakeIP(c net.Conn) bool {
	f, ok := c.(interface{ FakeIP() bool })
	return ok && f.FakeIP()
}

// RemoteAddr is the TCP address the core connected to.
func (c *egressConn) RemoteAddr() net.Addr { return c.remote }

// readReply reads the core's reply line on c one byte at a time, so that
// nothing behind it (the first bytes the host sent) is taken from the
// connection, and makes the result of Dial of it. ctx's end interrupts
// the read.
func readReply(ctx context.Context, c *net.UnixConn) (net.Conn, error) {
	stop := context.AfterFunc(ctx, func() { _ = c.SetReadDeadline(time.Unix(1, 0)) })
	line := make([]byte, 0, 128)
	var b [1]byte
	var err error
	for len(line) < pluginproto.MaxEgressReply {
		var n int
		if n, err = c.Read(b[:]); n == 1 {
			line = append(line, b[0])
			if b[0] == '\n' {
				break
			}
		}
		if err != nil {
			break
		}
	}
	if !stop() {
		return nil, ctx.Err()
	}
	switch {
	case err != nil && len(line) == 0:
		return nil, fmt.Errorf("the egress point closed the connection without an answer (a request it could not read: a handler built with a newer SDK than the core?): %w", err)
	case err != nil:
		return nil, fmt.Errorf("reading the egress point's answer: %w", err)
	case line[len(line)-1] != '\n':
		return nil, fmt.Errorf("the egress point's answer is longer than %d bytes", pluginproto.MaxEgressReply)
	}
	r, err := pluginproto.DecodeEgressReply(line)
	if err != nil {
		return nil, err
	}
	if !r.OK {
		return nil, &EgressError{Code: r.Code, Message: r.Error}
	}
	ap, err := netip.ParseAddrPort(r.Addr)
	if err != nil {
		return nil, fmt.Errorf("the egress point's answer: address %q: %w", r.Addr, err)
	}
	return &egressConn{UnixConn: c, remote: net.TCPAddrFromAddrPort(ap), fakeIP: r.FakeIP}, nil
}

// HTTPClient returns an HTTP client whose connections go through Dial:
// no proxy, HTTP/2 when the server offers it (TLS is the client's, over
// the relayed connection), 10 s for a TLS handshake, idle connections
// kept 90 s, and 2 minutes for a whole request, body included (set
// Timeout to 0 and give each request a ctx for longer downloads or long
// polls). Each call makes a client with its own connection pool: keep it.
func HTTPClient() *http.Client {
	return &http.Client{
		Timeout: 2 * time.Minute,
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           Dial,
			ForceAttemptHTTP2:     true,
			TLSHandshakeTimeout:   10 * time.Second,
			IdleConnTimeout:       90 * time.Second,
			ExpectContinueTimeout: time.Second,
			MaxIdleConns:          16,
			MaxIdleConnsPerHost:   4,
		},
	}
}
