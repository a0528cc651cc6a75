// Package plugin is the public API between the Carapace core and a plugin's
// host-side handler. Built-in plugins implement Handler in process; external
// plugins implement the same interface in their own process.
//
// A handler returns a JSON object for success, a *ToolError for an error it
// means the agent to see, and any other error for a failure: the core turns
// the last into a generic PLUGIN_ERROR and keeps the detail in the audit log
// only. Request context (group, session, correlation, time) always comes from
// the core, never from the arguments.
package plugin

import (
	"context"
	"errors"
	"time"
)

// Handler is a plugin's host-side code.
type Handler interface {
	// Init is called once at startup, within the init timeout (10 s), with
	// the plugin's validated config and the core's services.
	Init(ctx context.Context, config map[string]any, services Services) error
	// Invoke runs one tool call. Arguments have been validated against the
	// tool's schema; the group has been authorised; high-risk calls have been
	// approved by the user. It must honour ctx (the handler timeout, 30 s).
	Invoke(ctx context.Context, req *Request) (map[string]any, error)
	// Shutdown is called once on a graceful stop, after in-flight calls have
	// drained, within the shutdown timeout (10 s). It is never called on a
	// handler whose Init failed.
	Shutdown(ctx context.Context) error
}

// Request is one tool invocation as the handler sees it.
type Request struct {
	Tool        string         // the tool name, e.g. "echo"
	Arguments   map[string]any // schema-validated; numbers are json.Number
	Group       string         // from the session, never from the agent
	Session     string         // the session id
	Correlation string         // links the call to its audit entries
	EnvelopeID  string         // the core's id for this request
	Time        time.Time      // when the core received the request
}

// ToolError is an error a handler means the agent to read. Its message
// reaches the agent (after sanitisation), so write it for the agent's eyes:
// never wrap a caught error's text into it.
type ToolError struct {
	Code       string // normally "HANDLER_ERROR"; reserved pipeline codes are normalised to it
	Message    string
	Retriable  bool
	Field      string // optional: the argument at fault
	RetryAfter int    // optional: seconds
}

// Error implements the error interface.
func (e *ToolError) Error() string { return e.Code + ": " + e.Message }

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

// Services are what the core offers a handler. Every method is scoped by the
// core to the request carried in ctx: a handler cannot ask about another
// group or session.
type Services interface {
	// ToolCatalog lists the tools the core has catalogued.
	ToolCatalog() []ToolInfo
	// SessionInfo describes the session of the request in ctx.
	SessionInfo(ctx context.Context) (SessionInfo, bool)
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
