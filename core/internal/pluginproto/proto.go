// Package pluginproto is the wire protocol between the core and an
// out-of-process plugin handler (core/pluginhost on the core's side,
// plugin.Serve on the plugin's).
//
// The core binds a ZeroMQ ROUTER on a per-plugin socket
// ($CARAPACE_HOME/run/plugins/<name>.sock, in a 0700 directory) before it
// starts the handler; the handler connects a DEALER and speaks first with a
// Hello carrying the one-time token the core put in its environment. The
// core ignores every peer until one presents the token, and only that peer
// is ever answered. Each ZeroMQ message is one frame holding one JSON Message.
//
// Both sides make calls: the core calls the Method constants of the first
// block (init ... shutdown); the plugin calls the core's services, those of
// the second. Each side numbers its own calls; a reply carries the id of
// the call it answers. Calls run concurrently; a cancel asks the plugin to
// abandon a call (the core has already answered the agent with
// PLUGIN_TIMEOUT). A service call names, in Scope, the core call it is made
// for: the core scopes the answer to that call's group and session, and
// refuses scopes that are not in flight.
//
// docs/PLUGIN-PROTOCOL.md describes the protocol message by message, with
// its errors, timeouts, versioning and limits. testdata/frames holds a
// golden frame of every message kind each way; the tests encode each from
// the typed values, decode each back, and fail when a type, method or
// error kind declared here has no golden frame or is missing from that
// page. Adding a method: declare it here, add its call and its answer to
// the frames of golden_test.go, run go test -update, and name it in the
// page.
package pluginproto

import (
	"encoding/json"
	"time"
)

// Version is the protocol version; a Hello with another one is refused.
const Version = 1

// Environment variables the core sets for a handler process.
const (
	EnvEndpoint = "CARAPACE_PLUGIN_ENDPOINT"  // zipc:///abs/path/run/plugins/<name>.sock
	EnvToken    = "CARAPACE_PLUGIN_TOKEN"     // 64 hex characters, one per start
	EnvName     = "CARAPACE_PLUGIN_NAME"      // the plugin's name (its directory)
	EnvData     = "CARAPACE_PLUGIN_DATA"      // the plugin's private data directory
	EnvEgressFD = "CARAPACE_PLUGIN_EGRESS_FD" // the egress socket's descriptor number (egress.go), "4"
	// EnvConnFD names the descriptor of the handler's connection to its
	// socket, made by the core before the start ("3"). A confined handler
	// cannot create sockets, so it speaks on this one instead of dialling
	// EnvEndpoint; EnvEndpoint still names the socket, for messages.
	EnvConnFD = "CARAPACE_PLUGIN_CONN_FD"
)

// Message types.
const (
	TypeHello  = "hello"  // plugin → core, first message
	TypeCall   = "call"   // either way
	TypeReply  = "reply"  // either way, answers a call
	TypeCancel = "cancel" // core → plugin: abandon call ID
)

// Methods the core calls on the plugin.
const (
	MethodInit     = "init"     // Params: InitParams; Result: {}
	MethodInvoke   = "invoke"   // Params: plugin.Request; Result: the tool's result object
	MethodEvent    = "event"    // Params: plugin.Event; Result: {}
	MethodVerify   = "verify"   // Params: {}; Result: plugin.VerifyResult
	MethodBrief    = "brief"    // Params: BriefParams; Result: plugin.Brief
	MethodPreview  = "preview"  // Params: plugin.Request; Result: plugin.Preview
	MethodShutdown = "shutdown" // Params: {}; Result: {}; the plugin exits after replying
)

// Methods the plugin calls on the core (the Services).
const (
	MethodAuditLog       = "audit_log"       // Params: plugin.AuditFilter; Result: []plugin.AuditEntry
	MethodToolCatalog    = "tool_catalog"    // Params: {}; Result: []plugin.ToolInfo
	MethodSessionInfo    = "session_info"    // Params: {}; Result: plugin.SessionInfo
	MethodReadCredential = "read_credential" // Params: CredentialParams; Result: CredentialResult
	MethodPublishEvent   = "publish_event"   // Params: plugin.Event; Result: {}
	MethodAuditDropped   = "audit_dropped"   // Params: DroppedParams; Result: {}
	MethodReportHealth   = "report_health"   // Params: HealthParams; Result: {}
	MethodPaused         = "paused"          // Params: {}; Result: PausedParams (channel plugins)
	// The surface services (plugin.Services' Decide ... StopSession).
	MethodDecide      = "decide"       // Params: plugin.Decision; Result: {}
	MethodCoreStatus  = "core_status"  // Params: {}; Result: plugin.CoreStatus
	MethodSetPaused   = "set_paused"   // Params: PausedParams; Result: {}
	MethodStopSession = "stop_session" // Params: SessionParams; Result: {}
)

// DroppedParams are the params of MethodAuditDropped.
type DroppedParams struct {
	What string `json:"what"`
}

// HealthParams are the params of MethodReportHealth.
type HealthParams struct {
	Degraded bool   `json:"degraded"`
	Why      string `json:"why,omitempty"`
}

// PausedParams are the params of MethodSetPaused and the result of
// MethodPaused.
type PausedParams struct {
	Paused bool `json:"paused"`
}

// SessionParams are the params of MethodStopSession.
type SessionParams struct {
	Session string `json:"session"`
}

// Error kinds.
const (
	// KindTool: a plugin.ToolError the agent may read (Code, Message, ...).
	KindTool = "tool"
	// KindInternal: any other failure. Message is detail for the audit log
	// only; Category is set for a failed init.
	KindInternal = "internal"
	// KindNoRequest, KindNoCredential, KindNotChannel map to the plugin
	// package's sentinel errors on the plugin's side.
	KindNoRequest    = "no_request"
	KindNoCredential = "no_credential"
	KindNotChannel   = "not_channel"
	KindCoreTopic    = "core_topic" // plugin.ErrCoreTopic
	// KindGroupNotGranted maps to plugin.ErrGroupNotGranted; Message
	// names the group and the groups granted.
	KindGroupNotGranted = "group_not_granted"
	// KindNotSurface and KindDecided map to plugin.ErrNotSurface and
	// plugin.ErrAlreadyDecided; Message says how the confirmation ended.
	KindNotSurface = "not_surface"
	KindDecided    = "decided"
	// KindNotImplemented maps to plugin.ErrNotImplemented: the handler
	// does not implement the optional method called (a core that does not
	// know the kind reads it as internal).
	KindNotImplemented = "not_implemented"
)

// Message is one protocol message.
type Message struct {
	Type   string          `json:"type"`
	ID     uint64          `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Scope  uint64          `json:"scope,omitempty"` // service calls: the core call they serve
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *Error          `json:"error,omitempty"`

	// Hello only.
	Token   string `json:"token,omitempty"`
	Version int    `json:"version,omitempty"`
	PID     int    `json:"pid,omitempty"`
}

// Error is a failed call.
type Error struct {
	Kind       string `json:"kind"`
	Code       string `json:"code,omitempty"`
	Message    string `json:"message"`
	Retriable  bool   `json:"retriable,omitempty"`
	Field      string `json:"field,omitempty"`
	RetryAfter int    `json:"retry_after,omitempty"`
	Category   string `json:"category,omitempty"`
}

// InitParams are the parameters of init.
type InitParams struct {
	Config map[string]any `json:"config"`
}

// BriefParams are the parameters of brief.
type BriefParams struct {
	Group string `json:"group"`
}

// CredentialParams are the parameters of read_credential.
type CredentialParams struct {
	Key string `json:"key"`
}

// CredentialResult is the result of read_credential.
type CredentialResult struct {
	Value string `json:"value"`
}

// Limits.
const (
	// MaxMessage is the largest message either side accepts: a 1 MiB
	// result or argument object plus its envelope. A peer that sends more
	// is cut off by the transport.
	MaxMessage = 1<<20 + 64<<10
	// MaxResult is the largest result the SDK sends; a larger one becomes
	// a ToolError "Response exceeded maximum size".
	MaxResult = 1 << 20
	// HelloTimeout bounds how long the core waits for a started handler
	// to connect and say hello.
	HelloTimeout = 5 * time.Second
)
