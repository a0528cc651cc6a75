package wire

import (
	"bufio"
	"encoding/binary"
	"io"
)

// Fixed limits of the handshake and of post-handshake commands.
const (
	// MaxReadySize is the largest READY command body accepted from a peer.
	MaxReadySize = 4 << 10
	// MaxCommandSize is the largest command frame (PING, SUBSCRIBE, ...)
	// accepted from a peer after the handshake.
	MaxCommandSize = 512
)

// Default limits, for zero Limits fields.
const (
	// DefaultMaxFrame is ipc.MaxRequestBytes (1 MiB) plus 64 KiB of
	// headroom.
	DefaultMaxFrame   = 1<<20 + 64<<10
	DefaultMaxMessage = DefaultMaxFrame
	DefaultMaxFrames  = 4
)

// Limits bound the messages accepted from a peer.
type Limits struct {
	MaxFrame   int // the largest frame body, in bytes
	MaxMessage int // the largest message: the sum of its frame bodies
	MaxFrames  int // the most frames of one message
}

// WithDefaults fills zero (or negative) fields with the defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxFrame <= 0 {
		l.MaxFrame = DefaultMaxFrame
	}
	if l.MaxMessage <= 0 {
		l.MaxMessage = DefaultMaxMessage
	}
	if l.MaxFrames <= 0 {
		l.MaxFrames = DefaultMaxFrames
	}
	return l
}

// Counter checks a peer's frame headers after the handshake against its
// Limits, message by message: nothing proportional to a claimed size may
// be allocated before Check has passed it.
type Counter struct {
	Limits Limits
	inMsg  bool   // the last frame had the MORE flag
	frames int    // frames so far in the current message
	total  uint64 // body bytes so far in the current message
}

// Check checks one frame header (its flags byte and claimed body size).
func (c *Counter) Check(flags byte, size uint64) error {
	if flags&^FlagsKnown != 0 {
		return withDetail(ErrBadFrame, "unknown flags")
	}
	isCmd, more := flags&FlagCommand != 0, flags&FlagMore != 0
	if isCmd {
		if c.inMsg || more {
			return withDetail(ErrBadFrame, "command inside a message")
		}
		if size > MaxCommandSize {
			return ErrCommandTooLarge
		}
		return nil
	}
	if size > uint64(c.Limits.MaxFrame) {
		return ErrFrameTooLarge
	}
	c.frames++
	if c.frames > c.Limits.MaxFrames {
		return ErrTooManyFrames
	}
	c.total += size // both terms are at most MaxMessage + MaxFrame: no overflow
	if c.total > uint64(c.Limits.MaxMessage) {
		return ErrMessageTooLarge
	}
	c.inMsg = more
	if !more {
		c.frames, c.total = 0, 0
	}
	return nil
}

// ReadSize reads the size field that follows a frame's flags byte: one
// byte, or eight with FlagLong.
func ReadSize(br *bufio.Reader, flags byte) (uint64, error) {
	if flags&FlagLong == 0 {
		b, err := br.ReadByte()
		return uint64(b), err
	}
	var b [8]byte
	if _, err := io.ReadFull(br, b[:]); err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint64(b[:]), nil
}

// ReadReady reads a peer's first command frame, which must be a READY of
// at most MaxReadySize bytes (allocated only after the size is checked),
// and returns its Socket-Type in canonical spelling.
func ReadReady(br *bufio.Reader) (string, error) {
	flags, err := br.ReadByte()
	if err != nil {
		return "", err
	}
	if flags&^FlagLong != FlagCommand {
		return "", withDetail(ErrBadReady, "not a single command frame")
	}
	size, err := ReadSize(br, flags)
	if err != nil {
		return "", err
	}
	if size > MaxReadySize {
		return "", withDetail(ErrBadReady, "too large")
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(br, body); err != nil {
		return "", err
	}
	return ParseReady(body)
}

// AppendFrame appends a one-part message frame holding body to b.
func AppendFrame(b, body []byte) []byte {
	if len(body) < 256 {
		b = append(b, 0, byte(len(body)))
	} else {
		b = append(b, FlagLong)
		b = binary.BigEndian.AppendUint64(b, uint64(len(body)))
	}
	return append(b, body...)
}
