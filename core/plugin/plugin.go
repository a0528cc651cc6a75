// Package plugin is the public API between the Carapace core and a plugin's
// host-side handler. Built-in plugins implement Handler in process; external
// plugins implement the same interface in their own process and call Serve
// from their main, which connects to the core that started them.
//
// A handler returns a JSON object for success, a *ToolError for an error it
// means the agent to see, and any other error for a failure: the core turns
// the last into a generic PLUGIN_ERROR and keeps the detail in the audit log
// only. Request context (group, session, correlation, time) always comes from
// the core, never from the arguments.
package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// Handler is a plugin's host-side code.
type Handler interface {
	// Init is called once at startup, within the init timeout (10 s), with
	// the plugin's validated config and the core's services. An error
	// leaves the plugin out of the session catalogue; give it a category
	// with InitError so the agent learns why.
	Init(ctx context.Context, config map[string]any, services Services) error
	// Invoke runs one tool call. Arguments have been validated against the
	// tool's schema; the group has been authorised; high-risk calls have been
	// approved by the user. Calls may run concurrently. It must honour ctx
	// (the handler timeout, 30 s).
	Invoke(ctx context.Context, req *Request) (map[string]any, error)
	// Shutdown is called once on a graceful stop, after in-flight calls have
	// drained, within the shutdown timeout (10 s). It is never called on a
	// handler whose Init failed.
	Shutdown(ctx context.Context) error
}

// EventHandler is implemented by a plugin that subscribes to events (the
// manifest's "subscribes"). Events are fire and forget: the error is logged.
type EventHandler interface {
	HandleEvent(ctx context.Context, ev *Event) error
}

// Verifier is implemented by a plugin that can check its own setup
// (credentials, reachability) without changing anything, within 10 s.
type Verifier interface {
	Verify(ctx context.Context) (*VerifyResult, error)
}

// BriefProvider is implemented by the plugin whose manifest declares the
// "memory_brief" hook (at most one per installation). The core calls it
// while setting up a session, with a 5 s timeout.
type BriefProvider interface {
	MemoryBrief(ctx context.Context, group string) (*Brief, error)
}

// Request is one tool invocation as the handler sees it.
type Request struct {
	Tool        string         `json:"tool"`        // the tool name, e.g. "echo"
	Arguments   map[string]any `json:"arguments"`   // schema-validated; numbers are json.Number
	Group       string         `json:"group"`       // from the session, never from the agent
	Session     string         `json:"session"`     // the session id
	Correlation string         `json:"correlation"` // links the call to its audit entries
	EnvelopeID  string         `json:"envelope_id"` // the core's id for this request
	Time        time.Time      `json:"timestamp"`   // when the core received the request
	// PreviewDigest is, for a tool that declares a preview, the digest of
	// the Preview the user approved (Previewer): Invoke must act only on
	// content that still has it (CheckDigest). Empty in the Preview call
	// itself and for every other tool.
	PreviewDigest string `json:"preview_digest,omitempty"`
}

// Event is a message on the core's event bus. Its topics and their
// payloads are the vocabulary of topics.go.
type Event struct {
	ID          string    `json:"id,omitempty"`
	Topic       string    `json:"topic"` // e.g. "message.inbound"
	Group       string    `json:"group"`
	Correlation string    `json:"correlation,omitempty"`
	Time        time.Time `json:"timestamp"`
	Source      string    `json:"source,omitempty"` // set by the core: the publishing plugin
	// Payload is the event's data: a JSON object, encoded once by its
	// publisher (Topic.Event, NewEvent) and handed on as these bytes to
	// every subscriber, in process or not; read it with Decode (or the
	// topic's Topic.Decode). Subscribers share it: treat it as read-only.
	Payload json.RawMessage `json:"payload"`
}

// VerifyResult is what Verify found. carapace doctor --online prints it:
// Message (what is right or wrong) and, when it is not OK, Fix.
type VerifyResult struct {
	OK      bool   `json:"ok"`
	Message string `json:"message"`       // for the user; never a credential
	Fix     string `json:"fix,omitempty"` // when not OK: the command or step that fixes it, e.g. "carapace auth set --plugin NAME --key KEY"
}

// ToolError is an error a handler means the agent to read. Its message
// reaches the agent (after sanitisation), so write it for the agent's eyes:
// never wrap a caught error's text into it.
type ToolError struct {
	Code       string `json:"code"` // the handler's own code, kept in the audit log; the agent always sees HANDLER_ERROR
	Message    string `json:"message"`
	Retriable  bool   `json:"retriable"`
	Field      string `json:"field,omitempty"`       // optional: the argument at fault
	RetryAfter int    `json:"retry_after,omitempty"` // optional: seconds
}

// Error implements the error interface.
func (e *ToolError) Error() string {
	if e == nil {
		return "nil *ToolError" // a handler returned a typed nil: a bug, not a tool error
	}
	return e.Code + ": " + e.Message
}

// NewToolError returns a HANDLER_ERROR with the given message.
func NewToolError(message string, retriable bool) *ToolError {
	return &ToolError{Code: "HANDLER_ERROR", Message: message, Retriable: retriable}
}

// AsToolError reports whether err is (or wraps) a *ToolError.
func AsToolError(err error) (*ToolError, bool) {
	var te *ToolError
	ok := errors.As(err, &te)
	return te, ok
}

// Init failure categories: the closed set the agent may see in
// get_session_info (seed 000 §Initialization Failure Behavior).
const (
	CategoryNetwork  = "NETWORK_ERROR"
	CategoryAuth     = "AUTH_ERROR"
	CategoryConfig   = "CONFIG_ERROR"
	CategoryInternal = "INTERNAL_ERROR"
)

// InitError is an Init failure with its category. The message goes to the
// audit log only; the agent sees the category.
type InitError struct {
	Cat string
	Err error
}

// Error implements the error interface: the cause's text. The category is
// reported apart (Category), so it is not repeated in messages.
func (e *InitError) Error() string {
	if e.Err == nil {
		return e.Cat
	}
	return e.Err.Error()
}

// Unwrap returns the cause.
func (e *InitError) Unwrap() error { return e.Err }

// Category returns the failure category.
func (e *InitError) Category() string { return e.Cat }

// NewInitError wraps err with a category (one of the Category constants;
// anything else counts as INTERNAL_ERROR).
func NewInitError(category string, err error) *InitError {
	return &InitError{Cat: category, Err: err}
}

// CategoryOf returns err's category: the Category() of the first error in
// its chain that has one, if it is one of the four; INTERNAL_ERROR otherwise.
func CategoryOf(err error) string {
	var c interface{ Category() string }
	if errors.As(err, &c) {
		switch v := c.Category(); v {
		case CategoryNetwork, CategoryAuth, CategoryConfig, CategoryInternal:
			return v
		}
	}
	return CategoryInternal
}

// Services are what the core offers a handler. Methods taking a ctx are
// scoped by the core to the request that ctx belongs to (pass the ctx your
// Invoke received): a handler cannot ask about another group or session,
// and no filter can name one.
type Services interface {
	// GetAuditLog returns audit entries of the current request's group,
	// oldest first. It fails with ErrNoRequest outside a request.
	GetAuditLog(ctx context.Context, f AuditFilter) ([]AuditEntry, error)
	// GetToolCatalog lists the tools the core has catalogued.
	GetToolCatalog(ctx context.Context) ([]ToolInfo, error)
	// GetSessionInfo describes the session of the current request. It fails
	// with ErrNoRequest outside a request.
	GetSessionInfo(ctx context.Context) (SessionInfo, error)
	// ReadCredential returns one of this plugin's own credentials (set with
	// `carapace auth set --plugin NAME --key KEY`). ErrNoCredential if unset.
	ReadCredential(ctx context.Context, key string) (string, error)
	// PublishEvent puts an event on the core's bus. Only channel plugins
	// (provides.channels not empty) may; others get ErrNotChannel. The
	// event's group must be one the plugin is granted (allowed_groups);
	// another gets ErrGroupNotGranted. The core stamps the source, id and
	// time.
	PublishEvent(ctx context.Context, ev *Event) error
	// AuditDropped records in the core's audit log that this channel
	// plugin dropped, unhandled and unanswered, something it received (a
	// stranger's message): what, in one line of ids and kinds — never the
	// content; the core keeps its first MaxAuditDropped bytes. Only channel
	// plugins may (others get ErrNotChannel). The core writes at most 60
	// such entries a minute per plugin (bursts of 30) and counts the rest
	// in the next one it writes, so a flood of strangers cannot flood the
	// log.
	AuditDropped(ctx context.Context, what string) error
	// ReportHealth tells the core whether the plugin still does all its
	// work. A plugin that initialised but then cannot do part of it — a
	// channel that can no longer receive messages — reports degraded,
	// with why in one line for the user (the core keeps its first
	// MaxHealthProblem bytes); it reports degraded false once it works
	// again. Meanwhile the core shows it as state "degraded" (not healthy,
	// the problem given) in `carapace plugin list`, the watch stream, the
	// menu and `carapace doctor`; its tools stay available. Each change is
	// audited. A restart starts healthy.
	ReportHealth(ctx context.Context, degraded bool, why string) error
	// Paused reports whether the core is paused: while it is, it starts
	// no session for events (a message.inbound published meanwhile is
	// answered with a channel.reply saying so). It is the cheap question
	// a channel asks before it hands a message over, so that the message
	// can wait instead: one bit, where CoreStatus gathers the whole
	// status, tasks included, and needs the surface capability. Channel
	// plugins only; others get ErrNotChannel. Like the surface services it
	// answers once the core has started.
	Paused(ctx context.Context) (bool, error)

	// The surface services, for a plugin whose manifest asks for the
	// "surface" capability and to which config.toml grants it
	// ([plugins.NAME] surface = true); others get ErrNotSurface. Such a
	// plugin is a way for the user to reach the core — a chat app — and
	// is also given the confirmation.requested and confirmation.resolved
	// events (see ChannelReply for what a channel gets back).

	// Decide decides a pending confirmation, as the user asked on this
	// surface: d.ArgsHash must be the one shown (the core refuses
	// another), the surface recorded is the plugin's name, and d.Decider
	// says who (e.g. a chat app's user id). A confirmation decided
	// elsewhere first fails with an error wrapping ErrAlreadyDecided; one
	// of a group the plugin is not granted, with ErrGroupNotGranted.
	Decide(ctx context.Context, d Decision) error
	// CoreStatus reports the core's state.
	CoreStatus(ctx context.Context) (CoreStatus, error)
	// SetPaused stops (paused) or resumes starting sessions for events.
	SetPaused(ctx context.Context, paused bool) error
	// StopSession stops a session that one of this plugin's own events
	// started (the session named in its ChannelStarted event); any other
	// fails.
	StopSession(ctx context.Context, session string) error
}

// MaxAuditDropped is the most of AuditDropped's text the core keeps.
const MaxAuditDropped = 500

// MaxHealthProblem is the most of ReportHealth's why the core keeps.
const MaxHealthProblem = 500

// Decision is a surface's decision on a confirmation.
type Decision struct {
	ID       string `json:"id"`        // the confirmation's id
	Approve  bool   `json:"approve"`   // else deny
	ArgsHash string `json:"args_hash"` // the hash of the arguments shown
	// PreviewDigest is the digest of the preview shown, for a
	// confirmation that has one (api.Confirmation.PreviewDigest): the
	// core refuses an approval without it or with another.
	PreviewDigest string `json:"preview_digest,omitempty"`
	Decider       string `json:"decider"` // who decided, as the surface knows them
}

// CoreStatus is the core's state, as a surface shows it.
type CoreStatus struct {
	Version string `json:"version"`
	// Started is when the core started. A plugin that finds it changed
	// since it last looked knows the core restarted: the sessions and the
	// undelivered channel answers of the earlier core are gone.
	Started              time.Time `json:"started"`
	Paused               bool      `json:"paused"`
	Sessions             int       `json:"sessions"`
	PendingConfirmations int       `json:"pending_confirmations"`
	// Unhealthy names the plugins that are not serving.
	Unhealthy []string `json:"unhealthy,omitempty"`
	// Tasks are the scheduled tasks, for a surface to list.
	Tasks []TaskSummary `json:"tasks,omitempty"`
}

// TaskSummary is a scheduled task as a surface lists it.
type TaskSummary struct {
	ID       string    `json:"id"`
	Group    string    `json:"group"`
	Schedule string    `json:"schedule"` // in words
	Enabled  bool      `json:"enabled"`
	Next     time.Time `json:"next,omitzero"` // zero when paused or done
	// Last says how its newest run went ("ok", "failed: why", "skipped:
	// missed"…); "" if it never ran.
	Last string `json:"last,omitempty"`
}

// ErrNotImplemented is what a call of an optional method (Verify,
// MemoryBrief, HandleEvent, Preview) returns when the handler does not
// implement it: from an out-of-process plugin, the core's side of the
// protocol returns it wrapped.
var ErrNotImplemented = errors.New("not implemented by the handler")

// Errors of Services.
var (
	// ErrNoRequest: the call needs a request context and ctx has none.
	ErrNoRequest = errors.New("no request in context: pass the ctx that Invoke received")
	// ErrNoCredential: the plugin has no credential of that key.
	ErrNoCredential = errors.New("credential not set")
	// ErrNotChannel: only channel plugins may publish events.
	ErrNotChannel = errors.New("only channel plugins (provides.channels) may publish events")
	// ErrCoreTopic: the topic is one of the core's own (what the watch
	// stream shows people, the answers to channels, the agents' and
	// plugins' lifecycle): no plugin may publish it.
	ErrCoreTopic = errors.New("the topic is the core's own (confirmation.*, channel.*, session.*, core.*, plugin.*, agent.*, task.* but task.triggered): a plugin may not publish it")
	// ErrGroupNotGranted: the event names a group the plugin is not
	// granted, or the confirmation to decide is of one. A plugin publishes
	// and receives events, and decides confirmations, only of its groups,
	// as its tools serve only them: config.toml's [plugins.NAME]
	// allowed_groups, else its manifest's; a plugin granted some groups
	// must name one of them. The error says which group and which are
	// granted.
	ErrGroupNotGranted = errors.New("the plugin is not granted the group (config.toml [plugins.NAME] allowed_groups, else the manifest's allowed_groups, lists its groups)")
	// ErrNotSurface: the surface services need the "surface" capability,
	// asked for in the manifest and granted in config.toml.
	ErrNotSurface = errors.New(`only a plugin granted the surface capability ([plugins.NAME] surface = true) may do this`)
	// ErrAlreadyDecided: another decision on the confirmation came first.
	ErrAlreadyDecided = errors.New("the confirmation is already decided")
)

// AuditFilter narrows GetAuditLog. There is deliberately no group or
// session field: the core fixes the group from the request.
type AuditFilter struct {
	Correlation string    `json:"correlation,omitempty"` // exact match
	Topic       string    `json:"topic,omitempty"`       // exact match
	Outcome     string    `json:"outcome,omitempty"`     // exact; "error" matches every failure
	LastN       int       `json:"last_n,omitempty"`      // keep only the last n (at most 1000)
	Since       time.Time `json:"since,omitzero"`        // entries at or after
	Until       time.Time `json:"until,omitzero"`        // entries before
}

// AuditEntry is one audit log entry as a plugin sees it.
type AuditEntry struct {
	Time        time.Time `json:"timestamp"`
	Session     string    `json:"session,omitempty"`
	Group       string    `json:"group,omitempty"`
	Source      string    `json:"source"`
	Topic       string    `json:"topic,omitempty"`
	Correlation string    `json:"correlation,omitempty"`
	Stage       string    `json:"stage"`
	Outcome     string    `json:"outcome"`
	Code        string    `json:"code,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	Field       string    `json:"field,omitempty"`
	DurationMS  float64   `json:"duration_ms,omitempty"`
}

// ToolInfo describes one catalogued tool.
type ToolInfo struct {
	Name        string `json:"name"`
	Plugin      string `json:"plugin"`
	Description string `json:"description"`
	RiskLevel   string `json:"risk_level"`
}

// SessionInfo describes a live agent session.
type SessionInfo struct {
	ID      string    `json:"session"`
	Group   string    `json:"group"`
	Started time.Time `json:"session_start"`
}

// coreTopics are the prefixes of the topics only the core publishes: what
// the watch stream shows people (confirmations, sessions, plugin health,
// the core's status, tasks), the answers to channels and the agents'
// lifecycle. A plugin that could publish them could show a forged approval
// in the menu. task.triggered is open: a channel may start a session with
// it, like message.inbound. The first is SurfaceTopic's.
var coreTopics = []string{"confirmation.", "channel.", "session.", "core.", "plugin.", "agent.", "task."}

// SurfaceTopic reports whether topic is one that only a plugin granted the
// surface capability receives: confirmation.* (TopicConfirmationRequested,
// TopicConfirmationResolved), which carries the arguments of every group's
// calls.
func SurfaceTopic(topic string) bool { return strings.HasPrefix(topic, coreTopics[0]) }

// CoreTopic reports whether topic is one of the core's own, which no
// plugin may publish (PublishEvent answers ErrCoreTopic).
func CoreTopic(topic string) bool {
	if topic == TopicTaskTriggered.Name() {
		return false
	}
	for _, p := range coreTopics {
		if strings.HasPrefix(topic, p) {
			return true
		}
	}
	return false
}
