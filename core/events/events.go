package events

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/carapace-dev/carapace/core/home"
)

// Size limits.
const (
	// MaxEventSize is the largest event accepted, as encoded JSON (the
	// second frame on the wire).
	MaxEventSize = 64 << 10
	// MaxTopicLen is the longest topic accepted.
	MaxTopicLen = 128
)

// Sentinel errors, for errors.Is.
var (
	// ErrClosed: the Bus, Subscription or Remote is closed.
	ErrClosed = errors.New("event bus closed")
	// ErrBadTopic: a topic does not match TopicPattern or is too long.
	ErrBadTopic = errors.New("topics are dot-separated lower-case words of [a-z0-9_], at least two, the first starting with a letter")
	// ErrTooLarge: an event encodes to more than MaxEventSize bytes.
	ErrTooLarge = errors.New("event too large")
	// ErrBadEvent: an event is malformed (nil, not encodable, or, on a
	// Remote, a message that is not a well-formed event). On a Remote the
	// error concerns one message only; the Remote stays usable.
	ErrBadEvent = errors.New("malformed event")
	// ErrDisconnected: a Remote's connection to the bus dropped (the core
	// stopped, or sent something the transport refused). It is final.
	ErrDisconnected = errors.New("disconnected from the event bus")
)

// TopicPattern is the syntax of a topic.
const TopicPattern = `^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$`

var topicRE = regexp.MustCompile(TopicPattern)

// CheckTopic reports whether topic is a valid topic: it matches
// TopicPattern and has at most MaxTopicLen bytes. The error wraps ErrBadTopic.
func CheckTopic(topic string) error {
	if len(topic) > MaxTopicLen {
		return fmt.Errorf("topic %.32q... is %d bytes, over %d: %w", topic, len(topic), MaxTopicLen, ErrBadTopic)
	}
	if !topicRE.MatchString(topic) {
		return fmt.Errorf("topic %q: %w", topic, ErrBadTopic)
	}
	return nil
}

// checkGroup validates an event's group, which may be empty.
func checkGroup(g string) error {
	if g == "" {
		return nil
	}
	return home.CheckGroup(g)
}

// SocketPath is where the core's Bus listens: events.sock in the home's run
// directory (0700).
func SocketPath(h home.Dir) string { return h.Path("run", "events.sock") }

// maxSocketPath is the shortest sun_path limit of the supported systems
// (macOS: 104 bytes including the terminating NUL).
const maxSocketPath = 103

// Defaults applied to zero (or negative) Options fields.
const (
	// DefaultBuffer is the default Options.Buffer.
	DefaultBuffer = 64
	// DefaultRemoteBuffer is the default Options.RemoteBuffer.
	DefaultRemoteBuffer = 1 << 20
	// DefaultHandshakeTimeout is the default Options.HandshakeTimeout.
	DefaultHandshakeTimeout = 3 * time.Second
	// DefaultMaxRemotes is the default Options.MaxRemotes.
	DefaultMaxRemotes = 32
)

// Options configure a Bus. Zero fields get the defaults above.
type Options struct {
	// Logger receives dropped-event reports (rate-limited) and refused
	// connections. Nil discards.
	Logger *slog.Logger
	// Buffer is the channel capacity of each in-process Subscription, in
	// events.
	Buffer int
	// RemoteBuffer is how many bytes each remote subscriber may fall
	// behind before events are dropped for it. Its memory is bounded by
	// RemoteBuffer plus one event.
	RemoteBuffer int
	// HandshakeTimeout bounds a remote subscriber's ZMTP handshake.
	HandshakeTimeout time.Duration
	// MaxRemotes is the most remote subscriber connections open at once,
	// counting those in their handshake. Further ones are closed at once.
	MaxRemotes int
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Buffer <= 0 {
		o.Buffer = DefaultBuffer
	}
	if o.RemoteBuffer <= 0 {
		o.RemoteBuffer = DefaultRemoteBuffer
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.MaxRemotes <= 0 {
		o.MaxRemotes = DefaultMaxRemotes
	}
	return o
}
