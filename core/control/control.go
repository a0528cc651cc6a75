// Package control is the core's control API: HTTP over a Unix socket at
// $CARAPACE_HOME/run/control.sock, used by the carapace CLI and the menu-bar
// app to ask a running core for its status, stop it, open and close agent
// sessions and answer confirmations.
//
// Nothing listens on TCP. The socket is 0600 inside the 0700 run directory,
// and Listen's listener also checks every connection's peer uid (SO_PEERCRED
// on Linux, LOCAL_PEERCRED on darwin) and drops connections from any other
// user, so a file-mode mistake alone does not open the API. The shape follows
// tailscale's localapi and safesocket.
//
// This package is the transport: the server, the client and the socket,
// and the watch source (watch.go: the snapshot and the lines of the
// changes, from a feed of the core's changes that the Backend opens). What
// they carry — Status, Session, Confirmation, Decision, Task, WatchEvent
// and the rest, and the errors ErrNotFound, ErrInvalid and ErrConflict — is
// core/api's, which the core's packages use without linking HTTP.
//
// # Endpoints
//
// Bodies are JSON (the types are core/api's); an error is {"error":
// "message"} with status 400 (api.ErrInvalid), 404 (api.ErrNotFound), 409
// (api.ErrConflict) or 500 (anything else, with a generic message; the
// detail is only logged).
//
//	GET    /v1/status                      Status
//	POST   /v1/stop                        begin a graceful shutdown (202)
//	POST   /v1/pause, /v1/resume           stop or resume starting sessions for events → Status
//	POST   /v1/sessions SessionRequest     open a session; see below
//	GET    /v1/sessions                    []Session
//	DELETE /v1/sessions/{id}               close a session (204)
//	GET    /v1/confirmations[?recent=1]    []Confirmation: pending (and recently resolved)
//	GET    /v1/confirmations/{ref}         Confirmation: by id or unique prefix (≥ 6), pending or recent
//	       /v1/confirmations/{ref}?raw=1   the same, pending, with the arguments as they run (Raw)
//	POST   /v1/confirmations/{id}/approve  Decision → Confirmation (409: already decided, or another hash)
//	POST   /v1/confirmations/{id}/deny     Decision → Confirmation (409 likewise)
//	GET    /v1/watch                       JSON lines: a snapshot, then one line per change (watch.go)
//	POST   /v1/plugins/{name}/restart      PluginStatus (reload from disk)
//	POST   /v1/prove ProveRequest          JSON lines of ProveEvent: the proof on this machine (prove.go)
//
// POST /v1/sessions holds its response open: the server writes the Session
// as one JSON line, flushes, and then keeps the stream open for as long as
// the session lives. When the client goes away (it exits, crashes or closes
// the connection) the server closes the session, so a crashed CLI never
// leaks one. When the server shuts down it ends every stream, which the
// client sees as SessionHandle.Done. For a session whose agent the core runs
// in a container, the lines after the Session are the agent's Output, and
// the stream ends after the last one (the session is then closed).
package control

import (
	"context"
	"errors"

	"github.com/carapace-dev/carapace/core/api"
)

// Backend is what the control API needs from the core; core/server
// implements it. Errors that wrap api.ErrNotFound, api.ErrInvalid or
// api.ErrConflict reach the client with their message; any other error is
// logged and the client only learns that something failed.
type Backend interface {
	// Status reports the core's state.
	Status(ctx context.Context) api.Status
	// Stop begins a graceful shutdown and returns at once.
	Stop()
	// Pause stops (paused) or resumes starting sessions for events;
	// running sessions, the CLI's and the app's go on. It returns the
	// status as it now stands.
	Pause(ctx context.Context, paused bool) api.Status
	// OpenSession starts an agent session for req.Group, whose name the
	// server has already checked with home.CheckGroup (and the request
	// with req.Check). For the runtime "none" the client runs the agent and
	// Agent is nil; otherwise the core runs it in a container and Agent
	// carries its output and its end.
	OpenSession(ctx context.Context, req api.SessionRequest) (api.Session, *api.Agent, error)
	// CloseSession ends session id; ErrNotFound if there is no such session.
	CloseSession(ctx context.Context, id string) error
	// Sessions lists the live sessions.
	Sessions(ctx context.Context) []api.Session
	// Confirmations lists the confirmations waiting for the user, oldest
	// first; with recent, also the resolved ones the core remembers.
	Confirmations(ctx context.Context, recent bool) []api.Confirmation
	// Decide applies one decision and returns the confirmation as it now
	// stands. The decision's ArgsHash must be the confirmation's
	// (ErrConflict otherwise), so that the user decides exactly the
	// arguments they were shown; a confirmation already decided (or
	// expired, or withdrawn) refuses it with ErrConflict and a message
	// that says how it ended. ErrNotFound for an unknown id.
	Decide(ctx context.Context, d api.Decision) (api.Confirmation, error)
	// RawConfirmation returns a pending confirmation with its arguments
	// and its preview exactly as they will run, secrets included (its
	// display may be a sanitised copy: api.Confirmation.Hidden), and Raw
	// set. ErrNotFound for an unknown id; ErrConflict once it is decided
	// (they are not kept).
	RawConfirmation(ctx context.Context, id string) (api.Confirmation, error)
	// Changes starts following the core's changes for a watch (watch.go):
	// the server takes the snapshot from the listings above once the feed
	// is open. ErrConflict when the core is stopping.
	Changes() (Changes, error)
	// RestartPlugin stops plugin name (draining its calls) and loads it
	// again from disk: manifest, pin, handler, init. A plugin that is no
	// longer installed is unloaded; a new one is loaded. ErrNotFound if
	// there is no such plugin, running or on disk.
	RestartPlugin(ctx context.Context, name string) (api.PluginStatus, error)
}

// ErrNotRunning means no core answers on the control socket: the client's
// NotRunningError wraps it. The errors of the API itself, which a Backend
// wraps and the client's errors wrap again, are core/api's: ErrNotFound,
// ErrInvalid, ErrConflict.
var ErrNotRunning = errors.New("no core is running")
