package audit

import "time"

// Stages an entry can record. The first six are the request pipeline's.
const (
	StageEnvelope  = "envelope"  // 1: construct the envelope (wire decoding)
	StageTopic     = "topic"     // 2: the topic names a catalogued tool
	StagePayload   = "payload"   // 3: arguments match the tool's schema
	StageAuthorize = "authorize" // 4: group authorisation and rate limits
	StageConfirm   = "confirm"   // 5: user confirmation for high-risk tools
	StageRoute     = "route"     // 6: routed to the handler
	StageHandler   = "handler"   // the handler's own outcome, before normalisation
	StageResponse  = "response"  // what the agent was sent
	StageSession   = "session"   // session opened or closed
	StageCore      = "core"      // core lifecycle and plugin health
	StageEvent     = "event"     // an event published on the core's bus
	StageService   = "service"   // a plugin used a core service (credential reads)
	StageChannel   = "channel"   // what a channel plugin received and dropped unhandled (strangers)
	StageBrief     = "brief"     // the memory brief given to a session at its start
	StageEgress    = "egress"    // a plugin's connection through its egress point (host, port, bytes; never content)
	StageTaint     = "taint"     // a session became tainted: the tool and what it read, or the event that started it
	StageLLM       = "llm"       // a model API call through the session's proxy
)

// Outcomes an entry can record.
const (
	OutcomeRouted    = "routed"    // passed stages 1-5 and was handed to the handler
	OutcomeOK        = "ok"        // a result was sent, unchanged
	OutcomeSanitized = "sanitized" // a result was sent with credentials redacted
	OutcomeRejected  = "rejected"  // the pipeline refused the request (stages 1-5)
	OutcomeError     = "error"     // the handler failed, timed out or was unavailable
	OutcomePending   = "pending"   // waiting for the user's confirmation
	OutcomeApproved  = "approved"  // the user approved
	OutcomeDenied    = "denied"    // the user denied
	OutcomeExpired   = "expired"   // nobody answered in time
	OutcomeWithdrawn = "withdrawn" // a confirmation whose call went away: the session closed, the core stopped
	OutcomeOpened    = "opened"    // session opened
	OutcomeClosed    = "closed"    // session closed, or core stopped
	OutcomeStarted   = "started"   // core started, or a plugin initialised
	OutcomePublished = "published" // an event was published
	OutcomeCrashed   = "crashed"   // a plugin's process died
	OutcomeDropped   = "dropped"   // a channel plugin dropped what it received, unanswered
	OutcomeTainted   = "tainted"   // the session received untrusted content: its egress calls wait for the user
)

// Entry is one line of the audit log.
type Entry struct {
	Time         time.Time `json:"timestamp"`
	ID           string    `json:"id,omitempty"` // the core's envelope id for the request
	Session      string    `json:"session,omitempty"`
	Group        string    `json:"group,omitempty"`
	Source       string    `json:"source"` // "core", a plugin name, or "agent"
	Topic        string    `json:"topic,omitempty"`
	Correlation  string    `json:"correlation,omitempty"`
	Stage        string    `json:"stage"`
	Outcome      string    `json:"outcome"`
	Code         string    `json:"code,omitempty"`     // the error code, for failures
	Reason       string    `json:"reason,omitempty"`   // why, sanitised; never arguments or results
	Field        string    `json:"field,omitempty"`    // the failing field, for validation failures
	Redacted     []string  `json:"redacted,omitempty"` // field paths the sanitiser redacted
	Confirmation string    `json:"confirmation,omitempty"`
	// PreviewDigest is, for a call of a tool that declares a preview, the
	// digest of the preview the confirmation showed and binds (never its
	// text, which may hold a whole mail).
	PreviewDigest string  `json:"preview_digest,omitempty"`
	DurationMS    float64 `json:"duration_ms,omitempty"`
}

// Failed reports whether the entry records a failed request.
func (e *Entry) Failed() bool { return e.Outcome == OutcomeRejected || e.Outcome == OutcomeError }
