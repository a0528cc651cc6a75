// Package events is the core's event bus: the one place where events
// (seed 000's PUB/SUB channel: message.inbound, task.triggered,
// agent.started, ...) are published and subscribed.
//
// A Bus delivers every event it accepts to two kinds of subscriber:
//
//   - In-process subscribers (Subscribe) get a bounded buffered channel and
//     exact topic matching. Publish never waits for them: an event a
//     subscriber has no room for is dropped for that subscriber, counted
//     (Subscription.Dropped, Stats.Dropped) and logged, rate-limited, as
//     seed 000 asks of dropped events. A subscriber that must not miss an
//     event unknowingly (the control API's watch stream) subscribes with
//     SubscribeCutOff instead: the first event it has no room for ends its
//     subscription (Subscription.Cut), and it starts again from a fresh
//     view of the state. A subscriber granted only some groups (a plugin
//     and its allowed_groups) subscribes with SubscribeIn: the bus hands it
//     the events of those groups and of no group, and no other group's,
//     which never take room in its buffer either.
//
// The bus is the core's one fan-out: the core's own events (agent.*,
// plugin.*, session.*, confirmation.*), plugins' events and, next, the
// scheduler's all go through Publish, and every subscriber — the core's
// session spawner, each plugin's HandleEvent, the watch stream, other
// processes — takes what it asked for from here.
//   - Other processes (plugins later, the menu-bar app, `carapace events`)
//     subscribe over ZeroMQ: the Bus binds a PUB socket on a Unix socket
//     file, by convention SocketPath(home) = $CARAPACE_HOME/run/events.sock,
//     mode 0600 in the 0700 run directory. Dial is the Go client.
//
// # One encoding
//
// An event's payload is a JSON object its publisher encoded once (the
// plugin SDK's Topic.Event). Publish writes the event's frame around those
// bytes — compacted, never decoded — and hands in-process subscribers the
// same bytes, so that every consumer, in process or not, reads what the
// publisher wrote and decodes it once, into the topic's type.
//
// # Wire format
//
// Each event is one two-frame ZeroMQ message:
//
//	frame 0: the topic, e.g. "agent.started" (ASCII, at most MaxTopicLen bytes)
//	frame 1: the event as a JSON object, plugin.Event's encoding
//	         {"id","topic","group","correlation","timestamp","source","payload"},
//	         at most MaxEventSize bytes; the payload is the publisher's
//	         bytes, compacted
//
// ZeroMQ filters on the PUB side by frame 0, and its subscriptions are byte
// prefixes: a subscriber to "agent.started" also gets "agent.started_late",
// and one to "agent." gets every agent.* topic. A subscriber that wants an
// exact topic subscribes to it and compares frame 0 (Remote does this). An
// empty subscription gets everything. Any ZMTP 3.x SUB socket (libzmq's
// included) can subscribe with the endpoint "ipc://" + path.
//
// The usual ZeroMQ slow-joiner applies: a subscription takes effect a moment
// after the connection is made, and events published before then are not
// delivered to it. Delivery is best-effort and in order per publishing
// goroutine; nothing is persisted or replayed.
//
// # The transport, and why it is not ipc/zmtp
//
// The hardened transport of ipc/zmtp protects the core's ROUTER sockets from
// the agent container. Its listener admits DEALER peers only (it refuses
// every other Socket-Type in the peer's READY), so it cannot carry a PUB
// socket's SUB peers, and it has no per-peer send buffer. Plain zmq4 over
// "ipc://" would carry them, but with two problems this package cannot
// accept:
//
//   - zmq4's PUB writes to every subscriber in turn, on one goroutine,
//     without write deadlines. One subscriber that stops reading (say
//     `carapace events | less`, paused) would stall delivery to every other
//     subscriber for as long as it stays paused, while zmq4's send queue
//     grows without bound.
//   - zmq4 trusts its peers (see ipc/zmtp's package documentation): a frame
//     header claiming 2^62 bytes, or a malformed READY, panics in one of its
//     goroutines and kills the core; a peer that connects and stays silent
//     stalls its accept loop for ever.
//
// So the PUB socket listens on a small transport of this package (listen.go)
// instead. Each accepted connection gets:
//
//   - A bounded send buffer (Options.RemoteBuffer) drained by a goroutine of
//     its own, so zmq4's writer never blocks on a subscriber. When a
//     subscriber's buffer is full, whole messages (events) are dropped for
//     that subscriber alone, as a ZeroMQ high-water mark would, counted in
//     Stats.RemoteDropped and logged, rate-limited.
//   - Inbound filtering before zmq4 sees a byte: the peer's greeting must be
//     ZMTP 3.x with the NULL mechanism; its READY must be one command frame
//     of at most 4 KiB whose metadata parses to its exact end and names
//     Socket-Type SUB or XSUB (both checked by ipc/zmtp/wire's CheckGreeting and
//     ParseReady, the same code that guards the ROUTER sockets); zmq4 is
//     shown a READY of the bus's own making instead, with the socket type in
//     canonical spelling and no other property; after that, only single-frame subscription
//     messages (first byte 0 or 1) of at most 1 KiB are accepted. Anything
//     else, commands such as PING included, closes the connection, counted
//     in Stats.RemoteRejected. (The bus greets as ZMTP 3.0, so libzmq peers
//     subscribe with messages rather than ZMTP 3.1's SUBSCRIBE command, and
//     they send PING only when heartbeats are configured.)
//   - A handshake deadline (Options.HandshakeTimeout) and a cap on open
//     connections (Options.MaxRemotes).
//
// Should ipc/zmtp's listener learn to admit SUB peers, the rest of the
// inbound filter here (the frame reader) could go; the send buffer could not (zmtp bounds each write with a deadline, and
// zmq4's PUB would still wait on a slow peer up to that deadline for every
// event).
//
// The Go client, Dial, does use ipc/zmtp: its dialling side validates the
// publisher's greeting and READY and bounds every frame, so a subscriber
// process is protected from whatever listens on the path, and Remote checks
// each message (two frames, a valid topic, a JSON object of at most
// MaxEventSize bytes whose topic is frame 0) before it returns it.
//
// Limits, honestly:
//
//   - Nothing is authenticated. The socket file's mode (0600) and its 0700
//     directory are the boundary: any process of the user can subscribe to
//     every event, and payloads are not encrypted. Do not put credentials in
//     events. Open refuses a directory that group or others can enter.
//   - zmq4 runs each connection's handshake synchronously in its accept
//     loop. A peer that connects and stays silent therefore delays later
//     subscribers by up to HandshakeTimeout (and MaxRemotes such peers, by
//     that many times over) before the deadline closes it.
//   - Remote drops are counted by the Bus, not told to the subscriber: a
//     remote subscriber that must not miss events has to keep up, or ask the
//     core for state after a gap in what it expects.
//   - A subscriber that stops reading keeps its connection, and up to
//     RemoteBuffer plus one event of memory, until it disconnects or the Bus
//     closes.
//   - zmq4's own send queue, in front of the subscribers' buffers, has a
//     high-water mark of 4096 events as a safety net; zmq4 drops beyond it
//     without telling. It is drained by a goroutine that only copies into
//     the buffers, so it is not expected to fill.
//   - zmq4 v0.17.0 never stops a PUB socket's writer goroutine: each closed
//     Bus leaves one behind, idle, holding no file descriptor. The core
//     opens one Bus per run.
package events
