package events

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/google/uuid"

	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/internal/ratelog"
	"github.com/carapace-dev/carapace/internal/sockfile"
)

// pubHWM bounds zmq4's own send queue, in messages, as a safety net. The
// queue is drained by a goroutine that only copies each message into the
// subscribers' send buffers (which never block), so it stays near empty;
// zmq4 drops silently beyond it.
const pubHWM = 4096

// Bus is the core's event bus. It is safe for concurrent use.
type Bus struct {
	opts Options
	log  *slog.Logger
	path string

	mu      sync.RWMutex
	closed  bool
	byTopic map[string][]*Subscription // subscriptions to given topics
	all     []*Subscription            // subscriptions to every topic
	nextID  uint64

	pub zmq4.Socket
	ln  *subListener // set by the transport during Open
	wg  sync.WaitGroup

	dropLog   ratelog.Limited
	rejectLog ratelog.Limited

	published      atomic.Uint64
	dropped        atomic.Uint64
	remoteDropped  atomic.Uint64
	remoteRejected atomic.Uint64
}

// Open binds the bus's PUB socket on the Unix socket file path (normally
// SocketPath(home)) and returns the Bus.
//
// The directory of path must exist, belong to this user and be closed to
// group and others (the run directory is 0700): between the socket's
// creation and its chmod to 0600, the directory is what keeps others out. A
// stale socket file left by a core that died is removed; a socket a live
// process answers on, or a file that is not a socket, is an error.
func Open(path string, opts Options) (*Bus, error) {
	opts = opts.withDefaults()
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("event bus: socket path %q is not absolute", path)
	}
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("event bus: socket path %s is %d bytes, longer than Unix sockets allow (%d): use a shorter home", path, len(path), maxSocketPath)
	}
	if err := sockfile.CheckPrivateDir(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("event bus: socket directory: %w", err)
	}
	if err := sockfile.RemoveStale(path); err != nil {
		return nil, fmt.Errorf("event bus: %w", err)
	}
	b := &Bus{
		opts:      opts,
		log:       opts.Logger,
		path:      path,
		byTopic:   map[string][]*Subscription{},
		dropLog:   ratelog.New(),
		rejectLog: ratelog.New(),
	}
	ctx := context.WithValue(context.Background(), busKey{}, b)
	pub := zmq4.NewPub(ctx, zmq4.WithLogger(log.New(slogWriter{b.log}, "", 0)))
	if err := pub.SetOption(zmq4.OptionHWM, pubHWM); err != nil {
		_ = pub.Close()
		return nil, fmt.Errorf("event bus: set the PUB high-water mark: %w", err)
	}
	if err := pub.Listen(listenScheme() + "://" + path); err != nil {
		_ = pub.Close()
		return nil, fmt.Errorf("event bus: listen on %s: %w", path, err)
	}
	b.pub = pub
	b.log.Debug("event bus listening", "socket", path)
	return b, nil
}

// Path returns the socket file the bus listens on.
func (b *Bus) Path() string { return b.path }

// Publish validates ev, stamps it and delivers it to every subscriber.
//
// The topic must pass CheckTopic, the group (if set) home.CheckGroup, the
// payload must be a JSON object (a nil payload is sent as {}), and the
// event must encode to at most MaxEventSize bytes; otherwise nothing is
// delivered and the error wraps ErrBadTopic, home.ErrBadGroup, ErrTooLarge
// or ErrBadEvent. On success Publish sets ev.ID to a new random id and, if
// it was zero, ev.Time to now (UTC).
//
// The event is encoded once, here (encode): the payload's bytes as its
// publisher encoded them, compacted, inside the envelope the socket
// carries. Publish never waits for a subscriber. In-process subscribers
// get the event as stamped, its Payload those same bytes — what a remote
// subscriber reads from the frame — one copy shared by all of them: treat
// it as read-only.
func (b *Bus) Publish(ctx context.Context, ev *plugin.Event) error {
	if ev == nil {
		return fmt.Errorf("publish: nil event: %w", ErrBadEvent)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("publish %s: %w", ev.Topic, err)
	}
	if err := CheckTopic(ev.Topic); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	if err := checkGroup(ev.Group); err != nil {
		return fmt.Errorf("publish %s: %w", ev.Topic, err)
	}
	e := *ev
	e.ID = uuid.NewString()
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	e.Time = e.Time.Round(0) // as the wire has it: no monotonic reading
	data, payload, err := encode(&e)
	if err != nil {
		return fmt.Errorf("publish %s: %w", ev.Topic, err)
	}
	if len(data) > MaxEventSize {
		return fmt.Errorf("publish %s: %d bytes encoded, over the limit of %d: %w", ev.Topic, len(data), MaxEventSize, ErrTooLarge)
	}
	e.Payload = payload

	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return fmt.Errorf("publish %s: %w", ev.Topic, ErrClosed)
	}
	ev.ID, ev.Time = e.ID, e.Time
	b.published.Add(1)
	// zmq4's PUB only queues here (its writer goroutine copies into the
	// subscribers' buffers), so this never waits for a subscriber.
	if err := b.pub.Send(zmq4.NewMsgFrom([]byte(e.Topic), data)); err != nil {
		b.log.Warn("event bus: the PUB socket refused an event", "topic", e.Topic, "err", err)
	}
	for _, s := range b.byTopic[e.Topic] {
		b.deliver(s, &e)
	}
	for _, s := range b.all {
		b.deliver(s, &e)
	}
	return nil
}

// encode returns ev's wire form — its fields as encoding/json writes a
// plugin.Event, then its payload's bytes as the publisher encoded them,
// compacted (insignificant white space out, so that a line-based reader
// can carry them: the watch stream) — and the payload's bytes within it.
// The payload is copied, never decoded: an event is encoded once, by its
// publisher.
func encode(ev *plugin.Event) (data, payload []byte, err error) {
	p := ev.Payload
	if len(p) == 0 {
		p = []byte("{}")
	}
	head := *ev
	head.Payload = nil
	h, err := json.Marshal(&head)
	if err != nil {
		return nil, nil, fmt.Errorf("encode: %v: %w", err, ErrBadEvent)
	}
	// Payload is plugin.Event's last field, and a nil one is written null:
	// the payload's bytes go in its place.
	h, ok := bytes.CutSuffix(h, []byte("null}"))
	if !ok {
		return nil, nil, fmt.Errorf("encode: the envelope does not end with its payload: %w", ErrBadEvent)
	}
	buf := bytes.NewBuffer(make([]byte, 0, len(h)+len(p)+1))
	buf.Write(h)
	start := buf.Len()
	if err := json.Compact(buf, p); err != nil {
		return nil, nil, fmt.Errorf("encode the payload: %v: %w", err, ErrBadEvent)
	}
	data = buf.Bytes()
	if data[start] != '{' {
		return nil, nil, fmt.Errorf("the payload is not a JSON object: %w", ErrBadEvent)
	}
	end := len(data)
	data = append(data, '}')
	return data, data[start:end:end], nil
}

// PublishCore publishes one of the core's own events, as made by its
// topic (plugin.Topic.Event, whose results it takes:
// b.PublishCore(plugin.TopicAgentStarted.Event(group, payload))), with
// the source "core". A failure is logged, not returned: the core's events
// tell those who listen, and nothing the core does waits on them. A nil
// Bus publishes nothing.
func (b *Bus) PublishCore(ev *plugin.Event, err error) {
	if b == nil {
		return
	}
	if err == nil {
		ev.Source = "core"
		err = b.Publish(context.Background(), ev)
	}
	if err != nil {
		b.log.Warn("could not publish one of the core's events", "err", err)
	}
}

// InGroups reports whether an event of group reaches a subscriber granted
// groups: every group when groups is empty, and an event of no group
// (plugin.ready) reaches every subscriber. It is the rule of SubscribeIn,
// for those who deliver events apart from the bus (core/loader's
// mailboxes).
func InGroups(groups []string, group string) bool {
	return len(groups) == 0 || group == "" || slices.Contains(groups, group)
}

// deliver hands ev to s unless its buffer is full. Called with b.mu held
// for reading, so s's channel is open. A full buffer drops the event for s
// alone; for a cut-off subscription it ends the subscription instead
// (Subscription.Cut), and nothing more is delivered to it.
func (b *Bus) deliver(s *Subscription, ev *plugin.Event) {
	if !InGroups(s.groups, ev.Group) || s.cutOff && s.isCut() {
		return
	}
	select {
	case s.ch <- ev:
	default:
		n := s.dropped.Add(1)
		b.dropped.Add(1)
		if s.cutOff {
			s.cutOnce.Do(func() { close(s.cut) })
			b.dropLog.Warn(b.log, "subscriber cut off: it is not keeping up",
				"topic", ev.Topic, "subscription", s.id)
			return
		}
		b.dropLog.Warn(b.log, "event dropped: an in-process subscriber is not keeping up",
			"topic", ev.Topic, "subscription", s.id, "dropped_by_subscription", n)
	}
}

// Subscribe returns an in-process subscription to the given topics (exact
// match), or to every topic when none is given. Each topic must pass
// CheckTopic. An event the subscription has no room for is dropped for it
// alone (counted and logged): for subscribers that may miss some.
func (b *Bus) Subscribe(topics ...string) (*Subscription, error) {
	return b.subscribe(false, nil, topics)
}

// SubscribeIn is Subscribe for a subscriber granted only some groups (a
// plugin's allowed_groups): it gets the events of those groups and those
// of no group, and no other group's, which never take room in its buffer
// either. No groups means every group. Each group must pass
// home.CheckGroup.
func (b *Bus) SubscribeIn(groups []string, topics ...string) (*Subscription, error) {
	for _, g := range groups {
		if err := home.CheckGroup(g); err != nil {
			return nil, fmt.Errorf("subscribe: %w", err)
		}
	}
	return b.subscribe(false, slices.Clone(groups), topics)
}

// SubscribeCutOff is Subscribe for a subscriber that must not miss an
// event without knowing: the first event it has no room for ends it
// instead — Cut is closed and no event is delivered after — and it should
// then close, and start again from a fresh view of the state. The watch
// stream of the control API is one.
func (b *Bus) SubscribeCutOff(topics ...string) (*Subscription, error) {
	return b.subscribe(true, nil, topics)
}

func (b *Bus) subscribe(cutOff bool, groups, topics []string) (*Subscription, error) {
	set := map[string]struct{}{}
	for _, t := range topics {
		if err := CheckTopic(t); err != nil {
			return nil, fmt.Errorf("subscribe: %w", err)
		}
		set[t] = struct{}{}
	}
	uniq := make([]string, 0, len(set))
	for t := range set {
		uniq = append(uniq, t)
	}
	sort.Strings(uniq)

	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, fmt.Errorf("subscribe: %w", ErrClosed)
	}
	b.nextID++
	s := &Subscription{b: b, id: b.nextID, topics: uniq, groups: groups, ch: make(chan *plugin.Event, b.opts.Buffer), cutOff: cutOff, cut: make(chan struct{})}
	if len(uniq) == 0 {
		b.all = append(b.all, s)
	}
	for _, t := range uniq {
		b.byTopic[t] = append(b.byTopic[t], s)
	}
	return s, nil
}

// unsubscribe removes s and closes its channel. Called with b.mu held.
func (b *Bus) unsubscribe(s *Subscription) {
	if s.closed {
		return
	}
	s.closed = true
	close(s.ch)
	if len(s.topics) == 0 {
		b.all = without(b.all, s)
	}
	for _, t := range s.topics {
		if rest := without(b.byTopic[t], s); len(rest) > 0 {
			b.byTopic[t] = rest
		} else {
			delete(b.byTopic, t)
		}
	}
}

// without returns subs without s, in a new slice: Publish may still hold
// the old one.
func without(subs []*Subscription, s *Subscription) []*Subscription {
	out := make([]*Subscription, 0, len(subs))
	for _, x := range subs {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

// subscriptions returns the open subscriptions. Called with b.mu held.
func (b *Bus) subscriptions() map[*Subscription]struct{} {
	set := make(map[*Subscription]struct{}, len(b.all))
	for _, s := range b.all {
		set[s] = struct{}{}
	}
	for _, subs := range b.byTopic {
		for _, s := range subs {
			set[s] = struct{}{}
		}
	}
	return set
}

// Stats are the bus's counters since Open.
type Stats struct {
	Published      uint64 // events accepted by Publish
	Dropped        uint64 // in-process deliveries dropped: a subscription's buffer was full
	Subscriptions  int    // open in-process subscriptions
	Remotes        int    // open remote subscriber connections
	RemoteDropped  uint64 // events dropped for a remote subscriber that fell RemoteBuffer behind
	RemoteRejected uint64 // remote connections closed for a protocol violation, a handshake timeout or MaxRemotes
}

// Stats returns the bus's counters.
func (b *Bus) Stats() Stats {
	st := Stats{
		Published:      b.published.Load(),
		Dropped:        b.dropped.Load(),
		RemoteDropped:  b.remoteDropped.Load(),
		RemoteRejected: b.remoteRejected.Load(),
	}
	b.mu.RLock()
	st.Subscriptions = len(b.subscriptions())
	b.mu.RUnlock()
	if b.ln != nil {
		st.Remotes = b.ln.count()
	}
	return st
}

// Close closes every subscription (their channels are closed), disconnects
// the remote subscribers and removes the socket file. Publish and Subscribe
// fail with ErrClosed afterwards. Close is idempotent.
func (b *Bus) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	for s := range b.subscriptions() {
		s.closed = true
		close(s.ch)
	}
	b.all, b.byTopic = nil, map[string][]*Subscription{}
	b.mu.Unlock()

	// zmq4 closes its connections (ours: subConn.Close) and then the
	// listener, which unlinks the socket file.
	err := b.pub.Close()
	if b.ln != nil {
		if lerr := b.ln.Close(); lerr != nil && !errors.Is(lerr, net.ErrClosed) && err == nil {
			err = lerr
		}
	}
	b.wg.Wait() // the subscriber connections' writers
	if err != nil {
		return fmt.Errorf("close event bus %s: %w", b.path, err)
	}
	return nil
}

// Subscription is an in-process subscriber. Its channel is closed when the
// subscription or the bus is closed.
type Subscription struct {
	b       *Bus
	id      uint64
	topics  []string
	groups  []string // SubscribeIn: the groups it is granted; none: every group
	ch      chan *plugin.Event
	dropped atomic.Uint64
	closed  bool // guarded by b.mu

	cutOff  bool          // SubscribeCutOff: a full buffer ends the subscription
	cut     chan struct{} // closed when it was cut off
	cutOnce sync.Once
}

// Cut is closed when a SubscribeCutOff subscription fell a buffer behind
// and was cut off; it is never closed for a Subscribe subscription.
func (s *Subscription) Cut() <-chan struct{} { return s.cut }

func (s *Subscription) isCut() bool {
	select {
	case <-s.cut:
		return true
	default:
		return false
	}
}

// C returns the channel events arrive on. The events are shared with other
// subscribers: treat them as read-only.
func (s *Subscription) C() <-chan *plugin.Event { return s.ch }

// Topics returns the topics subscribed to, sorted; none means every topic.
func (s *Subscription) Topics() []string { return append([]string(nil), s.topics...) }

// Dropped returns how many events were dropped for this subscription
// because its channel was full.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Close ends the subscription and closes its channel. Events still buffered
// in the channel can be read. Close is idempotent and always returns nil.
func (s *Subscription) Close() error {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.b.unsubscribe(s)
	return nil
}

// slogWriter routes zmq4's log.Logger output to slog at debug level: what
// it reports about peers, the transport already counts and logs.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.l.Debug("zmq4", "msg", strings.TrimSpace(string(p)))
	return len(p), nil
}
