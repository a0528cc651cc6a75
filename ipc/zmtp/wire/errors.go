package wire

import "errors"

// Errors of a peer that breaks the protocol or a limit, and of a bad
// endpoint. ipc/zmtp returns the same values (wrapped in *net.OpError), so
// errors.Is finds them whichever package failed. Their texts are fixed:
// none carries a byte the peer sent.
var (
	// ErrBadGreeting: the peer's 64-byte greeting is not ZMTP 3.x with the
	// NULL mechanism.
	ErrBadGreeting = errors.New("zmtp: bad greeting")
	// ErrBadReady: the peer's first command is not a well-formed READY whose
	// metadata parses to its exact end and names a known Socket-Type.
	ErrBadReady = errors.New("zmtp: bad READY")
	// ErrSocketType: the peer's Socket-Type is not one this side accepts (a
	// listener accepts DEALER only, a Dealer ROUTER only).
	ErrSocketType = errors.New("zmtp: socket type not allowed")
	// ErrFrameTooLarge: a frame header claims a body larger than
	// Limits.MaxFrame.
	ErrFrameTooLarge = errors.New("zmtp: frame too large")
	// ErrMessageTooLarge: the frames of one message add up to more than
	// Limits.MaxMessage.
	ErrMessageTooLarge = errors.New("zmtp: message too large")
	// ErrTooManyFrames: a message has more than Limits.MaxFrames frames.
	ErrTooManyFrames = errors.New("zmtp: too many frames")
	// ErrCommandTooLarge: a command frame after the handshake is larger than
	// MaxCommandSize.
	ErrCommandTooLarge = errors.New("zmtp: command too large")
	// ErrBadFrame: a frame header has unknown flag bits, or a command frame
	// appears inside a multi-part message or claims to have more parts.
	ErrBadFrame = errors.New("zmtp: bad frame")
	// ErrBadEndpoint: something other than an absolute Unix socket path was
	// given as an endpoint.
	ErrBadEndpoint = errors.New("zmtp: bad endpoint")
)

// wrapped is an error with context: its text is fixed when it is made, and
// errors.Is and errors.As see the error it wraps. It does what fmt.Errorf
// with %w did here, without fmt, which bin/ipc no longer links
// (docs/CONTAINERS.md#ipc-against-a-hello-world).
type wrapped struct {
	msg string
	err error
}

func (e *wrapped) Error() string { return e.msg }
func (e *wrapped) Unwrap() error { return e.err }

// withDetail is err followed by what went wrong: "err: detail".
func withDetail(err error, detail string) error {
	return &wrapped{msg: err.Error() + ": " + detail, err: err}
}

// withContext is what was being done followed by err: "context: err".
func withContext(context string, err error) error {
	return &wrapped{msg: context + ": " + err.Error(), err: err}
}
