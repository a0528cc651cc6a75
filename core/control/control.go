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
// # Endpoints
//
// Bodies are JSON; an error is {"error": "message"} with status 400
// (ErrInvalid), 404 (ErrNotFound), 409 (ErrConflict) or 500 (anything else,
// with a generic message; the detail is only logged).
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
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Backend is what the control API needs from the core; core/server
// implements it. Errors that wrap ErrNotFound, ErrInvalid or ErrConflict
// reach the client with their message; any other error is logged and the
// client only learns that something failed.
type Backend interface {
	// Status reports the core's state.
	Status(ctx context.Context) Status
	// Stop begins a graceful shutdown and returns at once.
	Stop()
	// Pause stops (paused) or resumes starting sessions for events;
	// running sessions, the CLI's and the app's go on. It returns the
	// status as it now stands.
	Pause(ctx context.Context, paused bool) Status
	// OpenSession starts an agent session for req.Group, whose name the
	// server has already checked with home.CheckGroup. For the runtime
	// "none" the client runs the agent and Agent is nil; otherwise the core
	// runs it in a container and Agent carries its output and its end.
	OpenSession(ctx context.Context, req SessionRequest) (Session, *Agent, error)
	// CloseSession ends session id; ErrNotFound if there is no such session.
	CloseSession(ctx context.Context, id string) error
	// Sessions lists the live sessions.
	Sessions(ctx context.Context) []Session
	// Confirmations lists the confirmations waiting for the user, oldest
	// first; with recent, also the resolved ones the core remembers.
	Confirmations(ctx context.Context, recent bool) []Confirmation
	// Decide applies one decision and returns the confirmation as it now
	// stands. The decision's ArgsHash must be the confirmation's
	// (ErrConflict otherwise), so that the user decides exactly the
	// arguments they were shown; a confirmation already decided (or
	// expired, or withdrawn) refuses it with ErrConflict and a message
	// that says how it ended. ErrNotFound for an unknown id.
	Decide(ctx context.Context, d Decision) (Confirmation, error)
	// RawArguments returns a pending confirmation's arguments exactly as
	// they will run, secrets included (its Arguments may be a sanitised
	// copy: Confirmation.Hidden). ErrNotFound for an unknown id;
	// ErrConflict once it is decided (they are not kept).
	RawArguments(ctx context.Context, id string) (json.RawMessage, error)
	// Watch starts a watch: a snapshot, then the changes (watch.go).
	Watch(ctx context.Context) (*Watch, error)
	// RestartPlugin stops plugin name (draining its calls) and loads it
	// again from disk: manifest, pin, handler, init. A plugin that is no
	// longer installed is unloaded; a new one is loaded. ErrNotFound if
	// there is no such plugin, running or on disk.
	RestartPlugin(ctx context.Context, name string) (PluginStatus, error)
}

// Sentinel errors a Backend wraps and a Client's errors wrap again, so that
// both sides can test them with errors.Is.
var (
	// ErrNotFound means the session or confirmation does not exist (404).
	ErrNotFound = errors.New("not found")
	// ErrInvalid means the request is malformed or not allowed (400).
	ErrInvalid = errors.New("invalid request")
	// ErrConflict means the request conflicts with the current state, for
	// example an approval whose hash no longer matches (409).
	ErrConflict = errors.New("conflict")
	// ErrNotRunning means no core answers on the control socket.
	ErrNotRunning = errors.New("no core is running")
)

// Status is the state of a running core.
type Status struct {
	Version              string         `json:"version"`               // the core's version
	PID                  int            `json:"pid"`                   // the core's process id
	Started              time.Time      `json:"started"`               // when the core started
	Home                 string         `json:"home"`                  // the core's $CARAPACE_HOME
	Sessions             int            `json:"sessions"`              // live sessions
	PendingConfirmations int            `json:"pending_confirmations"` // tool calls waiting for the user
	Tools                int            `json:"tools"`                 // tools in the catalogue
	Plugins              []PluginStatus `json:"plugins"`               // every plugin, healthy or not
	Draining             bool           `json:"draining"`              // stopping: no new sessions, in-flight calls finishing
	// Paused says no session starts for events (channels' messages,
	// scheduled tasks) until resumed; sessions opened through the control
	// API still start, and running ones go on.
	Paused bool `json:"paused"`
	// Engines are the container engines the core has checked and found
	// ready, by name; empty until the first container session (or the
	// start-up clean-up) needs one.
	Engines []EngineStatus `json:"engines,omitempty"`
	// ConfigDigest identifies the config.toml the core started with
	// (config.Digest): the core reads it only at start, so a file that no
	// longer has this digest is not yet in effect.
	ConfigDigest string `json:"config_digest,omitempty"`
}

// EngineStatus is a container engine the core uses.
type EngineStatus struct {
	Name    string `json:"name"`    // "apple", "docker", "podman"
	Version string `json:"version"` // the engine's version
	// Bin is the engine's CLI, and BinFrom how the core found it: "PATH",
	// or where an installer puts it when PATH does not have it (a login
	// item's PATH is minimal), e.g. "Homebrew, not on PATH".
	Bin     string `json:"bin,omitempty"`
	BinFrom string `json:"bin_from,omitempty"`
}

// PluginStatus is the health of one plugin.
type PluginStatus struct {
	Name string `json:"name"` // the plugin's name
	// Healthy says the plugin initialised and does all its work; false
	// for a degraded one too, which serves its calls all the same.
	Healthy bool `json:"healthy"`
	// Category says why a plugin that did not initialise or crashed
	// failed: NETWORK_ERROR, AUTH_ERROR, CONFIG_ERROR or INTERNAL_ERROR.
	// Empty when healthy or degraded.
	Category string `json:"category,omitempty"`
	// State is "healthy"; "degraded" (it serves its calls, but reports
	// that it cannot do all its work — a channel that cannot receive
	// messages — with why in Problem, until it reports healthy again);
	// "failed" (did not initialise), "crashed" (its process died; calls
	// get PLUGIN_UNAVAILABLE until a restart), "stopping" or "removed".
	State   string   `json:"state,omitempty"`
	Source  string   `json:"source,omitempty"`  // "builtin" or "user"
	Dir     string   `json:"dir,omitempty"`     // the plugin's folder, for user plugins
	Version string   `json:"version,omitempty"` // the manifest's version
	Tools   []string `json:"tools,omitempty"`   // the tools it provides, when healthy
	PID     int      `json:"pid,omitempty"`     // the handler process, for out-of-process plugins
	Problem string   `json:"problem,omitempty"` // why it failed or is degraded, for the user (never sent to the agent)
}

// Session is a live agent session.
type Session struct {
	ID      string    `json:"id"`      // the core's id for the session
	Group   string    `json:"group"`   // the group whose tools and memory the agent gets
	Socket  string    `json:"socket"`  // the session's IPC socket on the host
	Runtime string    `json:"runtime"` // the container runtime, or "none"
	Started time.Time `json:"started"` // when the session opened
	// Skills is the session's read-only skill tree on the host (Claude
	// Code's .claude/skills layout), for the runtime to mount.
	Skills string `json:"skills,omitempty"`
	// ClaudeMD is the session's read-only CLAUDE.md on the host: the
	// agent's instructions and, when a memory plugin is healthy, the memory
	// brief.
	ClaudeMD string `json:"claude_md,omitempty"`
}

// SessionRequest asks the core for a session.
type SessionRequest struct {
	Group string `json:"group"`
	// Runtime is "" or "none" for an agent the client runs itself (no
	// isolation: plugin development); "container" for the engine of
	// config.toml's [runtime]; or an engine: "docker", "podman", "apple".
	Runtime string `json:"runtime,omitempty"`
	// Command replaces the image's agent command (container runtimes).
	Command []string `json:"command,omitempty"`
	// Prompt is given to the image's agent through a read-only file, never
	// through the environment (container runtimes).
	Prompt string `json:"prompt,omitempty"`
	// Conversation, when set, names a conversation of the group (one per
	// chat, say): the agent continues it, or starts it under that name
	// (container runtimes; see core/agent).
	Conversation string `json:"conversation,omitempty"`
}

// Runtimes are the values of SessionRequest.Runtime.
var Runtimes = []string{"none", "container", "docker", "podman", "apple"}

// check refuses a request no backend could serve.
func (r *SessionRequest) check() error {
	switch {
	case r.Runtime != "" && !slices.Contains(Runtimes, r.Runtime):
		return fmt.Errorf("runtime %q: use one of %s", r.Runtime, strings.Join(Runtimes, ", "))
	case (r.Runtime == "" || r.Runtime == "none") && (len(r.Command) > 0 || r.Prompt != ""):
		return errors.New("a command or a prompt needs a container runtime; with the runtime none the client runs the agent itself")
	case len(r.Command) > 0 && r.Prompt != "":
		return errors.New("give a command or a prompt, not both")
	}
	return nil
}

// Agent is the agent of a session the core runs in a container.
type Agent struct {
	// Output carries the agent's output, then one last Output with Exit or
	// Error; it is closed after that, or when the session is closed first.
	Output <-chan Output
}

// Output is one piece of a container agent's stream.
type Output struct {
	Stream string `json:"stream,omitempty"` // "stdout" or "stderr"
	Data   string `json:"data,omitempty"`
	Exit   *int   `json:"exit,omitempty"`  // the agent's exit status: the last line
	Error  string `json:"error,omitempty"` // why the agent could not run or was stopped: the last line
}
