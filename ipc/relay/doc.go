// Package relay splices local TCP connections to a Unix socket, byte for
// byte. It is how Claude Code, in an agent container without a network,
// reaches the model API (DESIGN.md decision 6): Claude Code is pointed at
// http://127.0.0.1:<port>, `ipc-relay` listens there, and every connection it
// accepts is joined to /run/carapace/llm.sock, a per-session socket mounted
// from the host. On the host, the core's HTTP proxy adds the real credential,
// allows only the model API paths and streams the replies back. The container
// never holds the key.
//
// The relay knows nothing of HTTP and must not: it imports net, never
// net/http, so the ipc binary stays small and has no HTTP stack an agent
// could turn into a client. For each connection it dials the socket, then
// copies both directions at once with io.Copy (on Linux the kernel splices
// the bytes; nothing is buffered beyond one copy's worth), and forwards
// half-closes: when one side stops sending, the other side's write half is
// shut down (CloseWrite) and the opposite direction keeps flowing. That is
// what HTTP/1.1 keep-alive and streamed replies (server-sent events) need.
// Both connections are closed when both directions have ended, when either
// direction fails, or when the Serve context is cancelled.
//
// The listen address must be 127.0.0.1, ::1 or localhost (which means
// 127.0.0.1; the container's /etc/hosts is not consulted); anything else is
// refused with ErrNotLoopback before a socket is opened.
//
// Limits, stated honestly:
//   - Any process in the container can connect: the relay does not
//     authenticate its clients. It does not need to. Whoever connects gets
//     what Claude Code gets, the host proxy's model API, and never sees the
//     credential.
//   - There is no idle timeout. A client that half-closes its side and then
//     never reads or closes holds one of the MaxConns slots until the host
//     side ends the connection or the relay stops. HTTP clients close on EOF.
//   - Past MaxConns a new connection is closed at once, not queued.
//   - A dial failure (core not running, socket not mounted) closes the client
//     connection, which sees EOF or a reset. It is logged at most once per
//     LogInterval, with the number of failures in between.
//
// Payload bytes are never logged; only counts, addresses and errors are.
package relay
