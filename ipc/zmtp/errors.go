package zmtp

import (
	"errors"
	"strings"
)

// Errors a filtered connection fails with. Read and Write return them wrapped
// in a *net.OpError (never a timeout), which is what makes zmq4 mark its Conn
// closed and drop it from the socket; errors.Is finds the sentinel. Their
// texts are fixed: none carries a byte the peer sent.
var (
	// ErrBadGreeting: the peer's 64-byte greeting is not ZMTP 3.x with the
	// NULL mechanism.
	ErrBadGreeting = errors.New("zmtp: bad greeting")
	// ErrBadReady: the peer's first command is not a well-formed READY whose
	// metadata parses to its exact end and names a known Socket-Type.
	ErrBadReady = errors.New("zmtp: bad READY")
	// ErrSocketType: the peer's Socket-Type is not one the listener accepts
	// (a listener accepts DEALER only).
	ErrSocketType = errors.New("zmtp: socket type not allowed")
	// ErrHandshakeTimeout: greeting and READY did not arrive, or zmq4 did not
	// finish its own handshake, within Options.HandshakeTimeout.
	ErrHandshakeTimeout = errors.New("zmtp: handshake timeout")
	// ErrFrameTooLarge: a frame header claims a body larger than
	// Options.MaxFrame.
	ErrFrameTooLarge = errors.New("zmtp: frame too large")
	// ErrMessageTooLarge: the frames of one message add up to more than
	// Options.MaxMessage.
	ErrMessageTooLarge = errors.New("zmtp: message too large")
	// ErrTooManyFrames: a message has more than Options.MaxFrames frames.
	ErrTooManyFrames = errors.New("zmtp: too many frames")
	// ErrCommandTooLarge: a command frame after the handshake is larger than
	// 512 bytes.
	ErrCommandTooLarge = errors.New("zmtp: command too large")
	// ErrBadFrame: a frame header has unknown flag bits, or a command frame
	// appears inside a multi-part message or claims to have more parts.
	ErrBadFrame = errors.New("zmtp: bad frame")
	// ErrWriteTimeout: a Write to the peer did not finish within
	// Options.WriteTimeout; the connection is closed.
	ErrWriteTimeout = errors.New("zmtp: write timeout")
	// ErrBadEndpoint: Endpoint or the transport was given something other
	// than an absolute Unix socket path.
	ErrBadEndpoint = errors.New("zmtp: bad endpoint")
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
