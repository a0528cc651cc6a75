// Package api is the vocabulary of the core's control API: the data the
// core, the carapace CLI, the menu-bar app and the Telegram plugin pass one
// another — the core's status, sessions, confirmations and decisions,
// scheduled tasks, the watch stream's lines — with the pure functions on
// them and the errors that say how a request failed.
//
// It has no transport: core/control carries these values over HTTP on the
// control socket (its server, its client, the peer-credential check), and
// the packages that make them — core/agent, core/loader, core/server —
// need only this one. The split is tailscale's, whose local API keeps its
// types in apitype and ipnstate apart from the localapi server and its
// client. A dependency test keeps the package a leaf (the standard
// library's encoding, text and time, nothing of net/http or of the core),
// so that a plugin can decode what the core sends it with these types.
//
// Every type here is on the wire as JSON: testdata/wire holds each one's
// golden shape, and changing a field or a tag changes a golden file.
package api

import "errors"

// Errors of the API. A backend wraps them to say how a request failed; the
// control server answers each with its status (404, 400, 409; anything
// else is a 500 whose detail stays in the core's log) and the client's
// errors wrap them again, so both sides test them with errors.Is.
var (
	// ErrNotFound means the session, confirmation, task or plugin does
	// not exist (404).
	ErrNotFound = errors.New("not found")
	// ErrInvalid means the request is malformed or not allowed (400).
	ErrInvalid = errors.New("invalid request")
	// ErrConflict means the request conflicts with the current state, for
	// example an approval whose hash no longer matches (409).
	ErrConflict = errors.New("conflict")
)
