// Package intrinsics implements the tools the agent has whatever plugins
// are installed: list_tools, get_session_info and get_diagnostics (the
// core's other tools, the task tools, are core/tasks'). They are
// catalogued like plugin tools, under the plugin name "core", with schemas
// that forbid extra fields, and reach the agent through the same
// six-stage pipeline with no exemption. Everything they return is scoped
// to the calling session, which they learn from the request context the
// core sets, never from arguments: list_tools lists the tools of the
// session's group only, get_diagnostics the session's own audit entries,
// without a handler's internal detail.
package intrinsics

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/catalog"
	"github.com/carapace-dev/carapace/core/manifest"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/session"
)

// Plugin is the name intrinsics are catalogued under.
const Plugin = "core"

// Failure is a plugin that did not initialise, with its error category
// (NETWORK_ERROR, AUTH_ERROR, CONFIG_ERROR or INTERNAL_ERROR). The raw error
// never reaches the agent.
type Failure struct {
	Name     string `json:"name"`
	Category string `json:"category"`
}

// Handler serves the intrinsic tools.
type Handler struct {
	Catalog *catalog.Catalog
	// Health reports which plugins are healthy and which failed.
	Health func() (healthy []string, failed []Failure)
}

var _ catalog.Invoker = (*Handler)(nil)

var schemas = map[string]struct{ desc, schema string }{
	"list_tools": {"List the tools this session may call, with their descriptions, risk levels and argument schemas.",
		`{"type":"object","additionalProperties":false,"properties":{}}`},
	"get_session_info": {"Describe this session: its group, when it started, and which plugins are healthy or failed (with a failure category).",
		`{"type":"object","additionalProperties":false,"properties":{}}`},
	"get_diagnostics": {"Trace one earlier request of this session by its correlation id, or list this session's recent requests (optionally only failures).",
		`{"type":"object","additionalProperties":false,"properties":{
			"correlation":{"type":"string","minLength":1,"maxLength":128},
			"last_n":{"type":"integer","minimum":1,"maximum":100},
			"filter_outcome":{"type":"string","enum":["error","rejected","ok","sanitized","routed","pending","approved","denied","expired"]}}}`},
}

// Tools returns the catalogue entries of the intrinsics, served by h.
func (h *Handler) Tools() ([]*catalog.Tool, error) {
	var out []*catalog.Tool
	for _, name := range []string{"list_tools", "get_session_info", "get_diagnostics"} {
		d := schemas[name]
		s, err := catalog.CompileSchema("core/"+name, json.RawMessage(d.schema))
		if err != nil {
			return nil, fmt.Errorf("intrinsic %s: %w", name, err)
		}
		out = append(out, &catalog.Tool{Name: name, Plugin: Plugin, Description: d.desc, RiskLevel: manifest.RiskLow, Schema: s, RawSchema: json.RawMessage(d.schema), Handler: h})
	}
	return out, nil
}

// Invoke implements catalog.Invoker.
func (h *Handler) Invoke(ctx context.Context, req *plugin.Request) (map[string]any, error) {
	s, ok := session.FromContext(ctx)
	if !ok {
		return nil, fmt.Errorf("intrinsic %s called without a session", req.Tool)
	}
	switch req.Tool {
	case "list_tools":
		return h.listTools(s), nil
	case "get_session_info":
		return h.sessionInfo(s), nil
	case "get_diagnostics":
		return diagnostics(s, req), nil
	}
	return nil, plugin.NewToolError("unknown intrinsic "+req.Tool, false)
}

func (h *Handler) listTools(s *session.Session) map[string]any {
	var tools []map[string]any
	for _, t := range h.Catalog.List() {
		if !t.Allowed(s.Group) {
			continue
		}
		tool := map[string]any{
			"name": t.Name, "plugin": t.Plugin, "description": t.Description,
			"risk_level": t.RiskLevel, "arguments_schema": t.RawSchema,
			"topic": "tool.invoke." + t.Name,
		}
		if len(t.HighRiskIf) > 0 { // a call that gives one of these waits for the user
			tool["high_risk_if"] = t.HighRiskIf
		}
		tools = append(tools, tool)
	}
	return map[string]any{"tools": tools}
}

func (h *Handler) sessionInfo(s *session.Session) map[string]any {
	healthy, failed := []string{}, []Failure{}
	if h.Health != nil {
		healthy, failed = h.Health()
	}
	return map[string]any{
		"group": s.Group, "session": s.ID, "session_start": s.Started, "runtime": s.Runtime,
		"plugins": map[string]any{"healthy": healthy, "failed": failed},
	}
}

// diagEntry is what the agent sees of an audit entry: no session or group
// (they are its own), and no handler-internal detail.
type diagEntry struct {
	Timestamp    string  `json:"timestamp"`
	Topic        string  `json:"topic,omitempty"`
	Correlation  string  `json:"correlation,omitempty"`
	Stage        string  `json:"stage"`
	Outcome      string  `json:"outcome"`
	Source       string  `json:"source,omitempty"`
	Code         string  `json:"code,omitempty"`
	Reason       string  `json:"reason,omitempty"`
	Field        string  `json:"field,omitempty"`
	Confirmation string  `json:"confirmation,omitempty"`
	DurationMS   float64 `json:"duration_ms,omitempty"`
}

func diagnostics(s *session.Session, req *plugin.Request) map[string]any {
	f := audit.Filter{}
	mode := "recent"
	if c, ok := req.Arguments["correlation"].(string); ok {
		f.Correlation, mode = c, "trace"
	} else {
		f.Last = 10
		if n, ok := req.Arguments["last_n"].(json.Number); ok {
			if v, err := n.Int64(); err == nil {
				f.Last = int(v)
			}
		}
		if o, ok := req.Arguments["filter_outcome"].(string); ok {
			f.Outcome = o
		}
		f.Last++ // room for this very request's own entry, dropped below
	}
	var entries []diagEntry
	handlerCode := ""
	for _, e := range s.Diagnostics(f) {
		if e.ID == req.EnvelopeID {
			continue
		}
		d := diagEntry{Timestamp: e.Time.Format("2006-01-02T15:04:05.000Z07:00"), Topic: e.Topic, Correlation: e.Correlation, Stage: e.Stage,
			Outcome: e.Outcome, Source: e.Source, Code: e.Code, Reason: e.Reason, Field: e.Field, Confirmation: e.Confirmation, DurationMS: e.DurationMS}
		if e.Stage == audit.StageHandler {
			handlerCode = e.Code
			d.Reason = "" // the handler's internal detail stays in the host's audit log
		}
		entries = append(entries, d)
	}
	if mode == "recent" && len(entries) > f.Last-1 {
		entries = entries[len(entries)-(f.Last-1):]
	}
	out := map[string]any{"mode": mode, "entries": entries}
	if mode == "trace" {
		out["correlation"] = f.Correlation
		if handlerCode != "" {
			out["handler_code"] = handlerCode
		}
	}
	return out
}
