// Package wire is ZMTP 3.x as Carapace speaks it on its Unix sockets,
// without zmq4: the checks of a peer's greeting, READY and frame headers
// (CheckGreeting, ParseReady, Counter), the endpoint rules (Path), and
// Dealer, a synchronous one-connection DEALER for a client that sends a
// request and waits for its answer.
//
// It exists apart from ipc/zmtp, the hardened zmq4 transport that uses the
// same checks, so that the ipc binary — started once per tool call inside
// the agent's container — links neither zmq4 nor what zmq4 brings (its
// package initialisers, golang.org/x/text): a Dealer is a socket, a
// bufio.Reader and no goroutine.
package wire
