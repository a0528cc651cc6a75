// Package ipc defines the boundary protocol between the untrusted agent
// container and the Carapace core: the wire message the container sends, the
// response envelope the core answers with, the structured error payload and
// its ten codes, and the size limits both sides enforce independently.
//
// The wire message carries exactly three fields — topic, correlation and
// arguments — because those are the only things the sender owns. Identity
// (group, session, source) is never read from the wire: the core derives it
// from the socket the message arrived on. A wire message with any other field
// is rejected, never merged. See docs/PROTOCOL.md for the frames and
// testdata/frames for golden examples.
package ipc
