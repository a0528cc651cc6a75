package zmtp

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"

	"github.com/carapace-dev/carapace/ipc/zmtp/wire"
)

// Scheme is the zmq4 transport name this package registers at init with
// default Options: endpoints look like "zipc:///run/carapace/ipc.sock". The
// core and the ipc binary both use it.
const Scheme = "zipc"

// Defaults applied to zero (or negative) Options fields.
const (
	// DefaultMaxFrame is the default Options.MaxFrame: ipc.MaxRequestBytes
	// (1 MiB) plus 64 KiB of headroom.
	DefaultMaxFrame = wire.DefaultMaxFrame
	// DefaultMaxMessage is the default Options.MaxMessage.
	DefaultMaxMessage = wire.DefaultMaxMessage
	// DefaultMaxFrames is the default Options.MaxFrames.
	DefaultMaxFrames = wire.DefaultMaxFrames
	// DefaultHandshakeTimeout is the default Options.HandshakeTimeout.
	DefaultHandshakeTimeout = 3 * time.Second
	// DefaultWriteTimeout is the default Options.WriteTimeout.
	DefaultWriteTimeout = 10 * time.Second
	// DefaultMaxConns is the default Options.MaxConns.
	DefaultMaxConns = 64
)

// Options bound what a peer can make this side allocate or wait for. Zero
// fields get the defaults above.
type Options struct {
	// MaxFrame is the largest frame body accepted from the peer, in bytes.
	MaxFrame int
	// MaxMessage is the largest message accepted from the peer: the sum of
	// the frame bodies of one multi-part message, in bytes.
	MaxMessage int
	// MaxFrames is the most frames one message may have.
	MaxFrames int
	// HandshakeTimeout bounds the whole handshake: the peer's greeting and
	// READY must arrive, and zmq4 must finish its own handshake, within it.
	HandshakeTimeout time.Duration
	// WriteTimeout bounds each Write to the peer. A Write that misses it
	// closes the connection.
	WriteTimeout time.Duration
	// MaxConns is the most live connections per listener, counting those
	// still in their handshake. Connections beyond it are accepted and
	// closed at once.
	MaxConns int
	// OnReject, if set, is called when this side drops a connection, with
	// the socket's path (the listener's own path, or the path dialled) and a
	// short fixed reason ("frame too large", "handshake timeout", ...) that
	// never contains a byte the peer sent. It may be called from any
	// goroutine, including zmq4's reader and the listener's own, so it must
	// not block, and must not close the zmq4 socket (or the listener)
	// synchronously: Close waits for those goroutines.
	OnReject func(socket, reason string)
	// OnAccept, if set, is called with the listener's path for every
	// connection it accepts, before anything is read from it (and also for
	// one closed at once for exceeding MaxConns): a peer reached the
	// socket. A relay that connects on a peer's behalf (Apple's container
	// runtime) is the peer here. The same rules as OnReject apply: it runs
	// on the accept loop, so it must not block.
	OnAccept func(socket string)
	// DialConn, if set, replaces the dial of the Unix socket: it returns
	// the raw connection to the socket at addr, which the transport then
	// filters as any other. A process that may not create sockets speaks
	// on a connection it inherited this way.
	DialConn func(ctx context.Context, addr string) (net.Conn, error)
}

func (o Options) withDefaults() Options {
	if o.MaxFrame <= 0 {
		o.MaxFrame = DefaultMaxFrame
	}
	if o.MaxMessage <= 0 {
		o.MaxMessage = DefaultMaxMessage
	}
	if o.MaxFrames <= 0 {
		o.MaxFrames = DefaultMaxFrames
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	return o
}

// unixTransport is the hardened transport.Transport.
type unixTransport struct {
	o Options
}

// New returns a zmq4 transport over Unix sockets whose connections, on both
// the Listen and the Dial side, are filtered as the package documentation
// describes. Zero fields of opts get their defaults.
func New(opts Options) transport.Transport {
	return &unixTransport{o: opts.withDefaults()}
}

// Register registers New(opts) with zmq4 under scheme, so that endpoints
// "<scheme>:///path" use it. zmq4 has no way to unregister a transport, and
// registering a scheme twice is an error.
func Register(scheme string, opts Options) error {
	return zmq4.RegisterTransport(scheme, New(opts))
}

// Lazy returns a function that registers t with zmq4 under scheme on its
// first call and returns scheme on every call: how a package gives its
// sockets a transport of their own ("zipc-session://…"). Registering on
// first use keeps programs and tests that never open such a socket free
// of it. zmq4 refuses a second registration of a scheme and cannot undo
// one, so each scheme has one Lazy, held in a package variable; the
// function panics if the registration fails, which only a second
// registration of the scheme in the binary can cause.
func Lazy(scheme string, t transport.Transport) func() string {
	register := sync.OnceFunc(func() {
		if err := zmq4.RegisterTransport(scheme, t); err != nil {
			panic(fmt.Sprintf("register the %s transport: %v", scheme, err))
		}
	})
	return func() string {
		register()
		return scheme
	}
}

func init() {
	if err := Register(Scheme, Options{}); err != nil {
		panic(err) // only a second registration of "zipc" in the binary can fail
	}
}

// Endpoint converts "ipc:///run/carapace/ipc.sock" — or the bare absolute path
// "/run/carapace/ipc.sock" — to the endpoint of the hardened transport,
// "zipc:///run/carapace/ipc.sock". A "zipc://" endpoint is returned as is.
// Anything else (tcp://, relative paths, Linux abstract sockets "@name") is
// an error wrapping ErrBadEndpoint (wire.Path's rules).
func Endpoint(ep string) (string, error) {
	path, err := wire.Path(ep)
	if err != nil {
		return "", err
	}
	return Scheme + "://" + path, nil
}

// checkPath accepts absolute filesystem paths only (wire.CheckPath).
func checkPath(path string) error { return wire.CheckPath(path) }

// Dial connects to the Unix socket at addr. The peer's greeting and READY
// are validated as zmq4 reads them (zmq4 writes first on the dial side, and
// the peer answers only then), under the HandshakeTimeout watchdog.
func (t *unixTransport) Dial(ctx context.Context, dialer transport.Dialer, addr string) (net.Conn, error) {
	if err := checkPath(addr); err != nil {
		return nil, err
	}
	var raw net.Conn
	var err error
	switch {
	case t.o.DialConn != nil:
		raw, err = t.o.DialConn(ctx, addr)
	default:
		if dialer == nil {
			dialer = &net.Dialer{Timeout: t.o.HandshakeTimeout}
		}
		raw, err = dialer.DialContext(ctx, "unix", addr)
	}
	if err != nil {
		return nil, err
	}
	return newConn(raw, &t.o, sideDial, nil), nil
}

// Listen listens on the Unix socket at addr. The listener is closed when ctx
// is done (zmq4 passes its socket's context) or by Close.
func (t *unixTransport) Listen(ctx context.Context, addr string) (net.Listener, error) {
	if err := checkPath(addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", addr)
	if err != nil {
		return nil, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	return newListener(ctx, ln, &t.o), nil
}

// Addr validates the path part of an endpoint and returns it unchanged.
func (t *unixTransport) Addr(ep string) (string, error) {
	if err := checkPath(ep); err != nil {
		return "", err
	}
	return ep, nil
}

var _ transport.Transport = (*unixTransport)(nil)
