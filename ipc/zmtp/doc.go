// Package zmtp is a hardened zmq4 transport for Unix sockets: the link
// between the Carapace core and the untrusted agent container.
//
// The core listens with a zmq4 ROUTER on one Unix socket per agent session.
// The peer is the ipc binary inside the container, or whatever else runs
// there. It is hostile. zmq4 v0.17.0 trusts its peer in four ways such a
// peer can exploit:
//
//  1. Allocation from the header. Conn.read allocates the 64-bit length of a
//     frame header (make([]byte, size)) before it reads the body. A header
//     claiming 2^62 bytes panics ("makeslice: len out of range") in zmq4's
//     reader goroutine and kills the whole process. A claim of 1 GiB
//     allocates 1 GiB.
//  2. Synchronous handshake in the accept loop. socket.accept runs Open
//     (greeting and READY, with no deadline) before it accepts the next
//     connection. One peer that connects and stays silent blocks every
//     later connection on that socket, forever.
//  3. Unchecked READY parsing. Property.Write slices the metadata without
//     bounds checks (a name length past the end, a truncated value length),
//     and SocketType.IsCompatible panics on any Socket-Type it does not
//     know: a missing one, or "dealer" in lower case. Both run in the accept
//     goroutine, so the panic kills the process.
//  4. Peer-chosen routing ids. The ROUTER routes by the Identity the peer
//     puts in its READY and writes a reply to every connection with that
//     identity. A peer can pick, share or steal another's.
//
// Register (or the Scheme registered at init) makes "zipc:///path" endpoints
// use this transport instead of zmq4's "ipc://". Its connections, both
// listened for and dialled, are filters in front of zmq4:
//
//   - Handshake validation. The peer's 64-byte greeting must be ZMTP 3.x
//     (signature 0xFF ... 0x7F, major version 3) with the NULL mechanism and
//     an as-server byte of 0 or 1. It must be followed by exactly one command
//     frame of at most 4 KiB: a READY whose metadata (name length, name,
//     32-bit value length, value, repeated) parses to its exact end, has no
//     duplicate names, and names a Socket-Type zmq4 knows. A listener accepts
//     only DEALER, the only peer type of a Carapace ROUTER. On the listener,
//     this happens in a goroutine per connection before Accept returns the
//     connection, so zmq4's accept loop only ever gets connections whose
//     handshake is already complete. The listener sends zmq4's greeting on
//     its behalf (a peer sends READY only after it has the greeting) and
//     later swallows zmq4's identical copy. On the dial side zmq4 writes
//     first and the peer answers only after that, so the peer's greeting and
//     READY are checked as zmq4 reads them. On both sides, a watchdog closes
//     the connection unless the whole handshake, zmq4's own Open included,
//     finishes within Options.HandshakeTimeout.
//   - READY rewriting. zmq4 sees the peer's greeting and a READY re-encoded
//     with Socket-Type, in canonical spelling, as its only property. Identity
//     and every other property are dropped, so the ROUTER gives each
//     connection a random routing id of its own.
//   - Frame filtering. Every frame header is parsed, through a bufio.Reader,
//     before zmq4 sees it. A body over MaxFrame, a message over MaxMessage or
//     over MaxFrames frames, a command over 512 bytes, unknown flag bits, or a
//     command inside a multi-part message fails the read and closes the
//     connection. Nothing proportional to a claimed length is allocated
//     before the check passes, here or in zmq4.
//   - Write deadlines. Each Write to the peer must finish within WriteTimeout.
//     If it does not, the connection is closed: a peer that stops reading
//     cannot block the core's sender forever.
//   - A connection cap. A listener holds at most MaxConns live connections,
//     counting those still in their handshake. Further ones are accepted and
//     closed at once.
//
// Errors go back to zmq4 as non-timeout *net.OpErrors, which is what makes
// zmq4 mark its Conn closed and drop it. The sentinels in errors.go can be
// found with errors.Is. Nothing here logs. Options.OnReject gets a short
// fixed reason that never contains a byte the peer sent.
//
// Limits, honestly:
//
//   - Nothing is authenticated. Whoever can connect to the socket file is a
//     peer, so the file's permissions and what is mounted into the container
//     are the identity boundary. Only the NULL mechanism is spoken, and
//     nothing is encrypted. Abstract socket names ("@name"), which have no
//     permissions, are refused.
//   - MaxConns turns a flood of connections into refused connections, on
//     this one socket only. Idle established connections are never timed
//     out, so a peer can hold all MaxConns slots of its own socket. The
//     handshake watchdog only frees slots held by peers that never finish.
//   - Bounds are per message, not per second. If the core stops calling
//     Recv, zmq4's ROUTER holds up to 10 queued messages plus one per
//     connection reader: about (10 + MaxConns) × MaxMessage (78 MiB with the
//     defaults).
//   - Commands after the handshake, up to 512 bytes (PING and the like),
//     pass through. zmq4's ROUTER and DEALER hand them to Recv as ordinary
//     messages with Type zmq4.CmdMsg, so the core must drop those.
//   - WriteTimeout bounds each Write, not a message. zmq4 writes a frame's
//     header and body separately, and its ROUTER holds one lock across all
//     connections while it writes. A peer that reads slowly can therefore
//     delay every Send of its ROUTER by up to 2 × frames × WriteTimeout per
//     message.
//   - It fixes the connections it carries, not zmq4. Sockets of the same
//     process on "ipc://" or "tcp://" stay exposed to all four flaws, and
//     the greeting swallowed on the listener is zmq4 v0.17.0's NULL
//     greeting: a different zmq4 greeting fails every connection closed
//     (and is caught by the tests) rather than open.
package zmtp
