package zmtp

import (
	"errors"
	"strings"

	"github.com/carapace-dev/carapace/ipc/zmtp/wire"
)

// Errors a filtered connection fails with. Read and Write return them wrapped
// in a *net.OpError (never a timeout), which is what makes zmq4 mark its Conn
// closed and drop it from the socket; errors.Is finds the sentinel. Their
// texts are fixed: none carries a byte the peer sent. Those of the wire
// are package wire's own values, so errors.Is finds them whichever package
// failed.
var (
	// ErrBadGreeting: the peer's 64-byte greeting is not ZMTP 3.x with the
	// NULL mechanism.
	ErrBadGreeting = wire.ErrBadGreeting
	// ErrBadReady: the peer's first command is not a well-formed READY whose
	// metadata parses to its exact end and names a known Socket-Type.
	ErrBadReady = wire.ErrBadReady
	// ErrSocketType: the peer's Socket-Type is not one the listener accepts
	// (a listener accepts DEALER only).
	ErrSocketType = wire.ErrSocketType
	// ErrHandshakeTimeout: greeting and READY did not arrive, or zmq4 did not
	// finish its own handshake, within Options.HandshakeTimeout.
	ErrHandshakeTimeout = errors.New("zmtp: handshake timeout")
	// ErrFrameTooLarge: a frame header claims a body larger than
	// Options.MaxFrame.
	ErrFrameTooLarge = wire.ErrFrameTooLarge
	// ErrMessageTooLarge: the frames of one message add up to more than
	// Options.MaxMessage.
	ErrMessageTooLarge = wire.ErrMessageTooLarge
	// ErrTooManyFrames: a message has more than Options.MaxFrames frames.
	ErrTooManyFrames = wire.ErrTooManyFrames
	// ErrCommandTooLarge: a command frame after the handshake is larger than
	// 512 bytes.
	ErrCommandTooLarge = wire.ErrCommandTooLarge
	// ErrBadFrame: a frame header has unknown flag bits, or a command frame
	// appears inside a multi-part message or claims to have more parts.
	ErrBadFrame = wire.ErrBadFrame
	// ErrWriteTimeout: a Write to the peer did not finish within
	// Options.WriteTimeout; the connection is closed.
	ErrWriteTimeout = errors.New("zmtp: write timeout")
	// ErrBadEndpoint: Endpoint or the transport was given something other
	// than an absolute Unix socket path.
	ErrBadEndpoint = wire.ErrBadEndpoint
)

// Rejection reasons that are not an error returned to zmq4.
const (
	reasonTooManyConns   = "too many connections"
	reasonPeerClosed     = "handshake incomplete: peer closed"
	reasonHandshakeIO    = "handshake incomplete: i/o error"
	reasonGreetingWrite  = "local greeting mismatch"
	reasonHandshakeTimer = "handshake timeout"
	reasonWriteTimeout   = "write timeout"
)

// reasonOf turns one of the sentinel-based errors above into the short
// reason handed to Options.OnReject.
func reasonOf(err error) string {
	return strings.TrimPrefix(err.Error(), "zmtp: ")
}
