package events

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/ipc/zmtp"
)

// dialScheme is the subscriber's transport, registered on first use:
// ipc/zmtp's hardened dialling side, with frame bounds that fit events: no
// frame over MaxEventSize, no message over an event and its topic.
var dialScheme = zmtp.Lazy("zipc-events", zmtp.New(zmtp.Options{MaxFrame: MaxEventSize, MaxMessage: MaxEventSize + MaxTopicLen}))

// dialTimeout bounds connecting to the bus's socket.
const dialTimeout = 3 * time.Second

// Remote is a subscriber in another process, connected to a Bus's socket.
// Recv may be called from several goroutines.
type Remote struct {
	path   string
	sub    zmq4.Socket
	topics map[string]bool // exact topics wanted; nil: every topic

	msgs  chan zmq4.Msg
	done  chan struct{} // closed by Close
	dead  chan struct{} // closed when the connection drops
	cause error         // why it dropped; written before dead is closed

	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Dial connects to the bus listening on the Unix socket at path and
// subscribes to the given topics (exact match), or to every topic when none
// is given. Each topic must pass CheckTopic.
//
// Subscriptions take effect a moment after Dial returns (ZeroMQ's slow
// joiner): events published in between are not received.
func Dial(path string, topics ...string) (*Remote, error) {
	r := &Remote{path: path, msgs: make(chan zmq4.Msg), done: make(chan struct{}), dead: make(chan struct{})}
	if len(topics) > 0 {
		r.topics = map[string]bool{}
	}
	for _, t := range topics {
		if err := CheckTopic(t); err != nil {
			return nil, fmt.Errorf("dial event bus: %w", err)
		}
		r.topics[t] = true
	}
	ep, err := zmtp.Endpoint(path)
	if err != nil {
		return nil, fmt.Errorf("dial event bus: %w", err)
	}
	ep = dialScheme() + ep[len(zmtp.Scheme):]

	sub := zmq4.NewSub(context.Background(),
		zmq4.WithDialerMaxRetries(0), zmq4.WithDialerTimeout(dialTimeout),
		zmq4.WithLogger(log.New(io.Discard, "", 0)))
	// ZeroMQ subscriptions are prefixes: subscribing to each topic gets at
	// least those topics, and Recv keeps the exact ones.
	prefixes := topics
	if len(prefixes) == 0 {
		prefixes = []string{""}
	}
	for _, p := range prefixes {
		if err := sub.SetOption(zmq4.OptionSubscribe, p); err != nil {
			_ = sub.Close()
			return nil, fmt.Errorf("dial event bus: subscribe to %q: %w", p, err)
		}
	}
	if err := sub.Dial(ep); err != nil {
		_ = sub.Close()
		return nil, fmt.Errorf("dial event bus %s: %w", path, err)
	}
	r.sub = sub
	r.wg.Add(1)
	go r.read()
	return r, nil
}

// read moves messages from the socket to Recv, until the socket fails.
func (r *Remote) read() {
	defer r.wg.Done()
	for {
		msg, err := r.sub.Recv()
		if err != nil {
			select {
			case <-r.done:
			default:
				r.cause = err
				close(r.dead)
			}
			return
		}
		select {
		case r.msgs <- msg:
		case <-r.done:
			return
		}
	}
}

// Recv returns the next event of a subscribed topic. A message that is not
// a well-formed event (two frames: a valid topic, then a JSON object of at
// most MaxEventSize bytes whose topic is the first frame's) is reported as
// an error wrapping ErrBadEvent; the Remote stays usable. Once the
// connection drops, Recv returns an error wrapping ErrDisconnected; after
// Close, ErrClosed.
func (r *Remote) Recv(ctx context.Context) (*plugin.Event, error) {
	for {
		select {
		case <-r.done:
			return nil, fmt.Errorf("event bus %s: %w", r.path, ErrClosed)
		default:
		}
		var msg zmq4.Msg
		select {
		case msg = <-r.msgs:
		case <-r.dead:
			return nil, fmt.Errorf("event bus %s: %w: %v", r.path, ErrDisconnected, r.cause)
		case <-r.done:
			return nil, fmt.Errorf("event bus %s: %w", r.path, ErrClosed)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if msg.Type == zmq4.CmdMsg {
			continue // PING and the like, which zmq4 hands on as messages
		}
		ev, err := decodeMessage(msg.Frames)
		if err != nil {
			return nil, fmt.Errorf("event bus %s: %w", r.path, err)
		}
		if r.topics != nil && !r.topics[ev.Topic] {
			continue // a longer topic that matched a subscription prefix
		}
		return ev, nil
	}
}

// Close disconnects. It is idempotent.
func (r *Remote) Close() error {
	r.closeOnce.Do(func() {
		close(r.done)
		if err := r.sub.Close(); err != nil {
			r.closeErr = fmt.Errorf("close event bus subscriber %s: %w", r.path, err)
		}
		r.wg.Wait()
		zmtp.Drain(r.sub)
	})
	return r.closeErr
}

// decodeMessage checks one PUB message and decodes its event.
func decodeMessage(frames [][]byte) (*plugin.Event, error) {
	if len(frames) != 2 {
		return nil, fmt.Errorf("%w: %d frames, want 2 (topic, event)", ErrBadEvent, len(frames))
	}
	topic := string(frames[0])
	if err := CheckTopic(topic); err != nil {
		return nil, fmt.Errorf("%w: frame topic: %v", ErrBadEvent, err)
	}
	ev, err := parseEvent(frames[1])
	if err != nil {
		return nil, err
	}
	if ev.Topic != topic {
		return nil, fmt.Errorf("%w: the event's topic %q is not the frame's %q", ErrBadEvent, ev.Topic, topic)
	}
	return ev, nil
}

// parseEvent decodes an encoded event: one JSON object of at most
// MaxEventSize bytes and nothing after it, with an id, a valid topic and a
// valid (or empty) group, and a payload that is a JSON object (kept as
// its bytes).
func parseEvent(data []byte) (*plugin.Event, error) {
	if len(data) > MaxEventSize {
		return nil, fmt.Errorf("%w: %d bytes, over the limit of %d", ErrBadEvent, len(data), MaxEventSize)
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("%w: not a JSON object", ErrBadEvent)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var ev plugin.Event
	if err := dec.Decode(&ev); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadEvent, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the JSON object", ErrBadEvent)
	}
	if ev.ID == "" {
		return nil, fmt.Errorf("%w: no id", ErrBadEvent)
	}
	if err := CheckTopic(ev.Topic); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadEvent, err)
	}
	if err := checkGroup(ev.Group); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadEvent, err)
	}
	if !isObject(ev.Payload) {
		return nil, fmt.Errorf("%w: the payload is not a JSON object", ErrBadEvent)
	}
	return &ev, nil
}

// isObject reports whether payload, valid JSON, is an object.
func isObject(payload []byte) bool {
	t := bytes.TrimLeft(payload, " \t\r\n")
	return len(t) > 0 && t[0] == '{'
}
