// Package outcome decides what the agent receives for one tool call from
// what the plugin's handler did: its result or its error, a panic, a missed
// deadline. It is the one definition of that mapping. The core's pipeline
// (core/pipeline) answers agents with it, and the plugin authors' harness
// (core/plugin/plugintest) shows authors the same answers, so a plugin's
// tests see what the agent would.
//
// The rules (DESIGN.md, decision 2):
//
//   - A result is sanitised, must encode as JSON, must not be nil, and the
//     response frame that carries it must fit in ipc.MaxResponseBytes.
//   - A *plugin.ToolError reaches the agent as HANDLER_ERROR with its
//     message (sanitised), retriable, field and retry_after, whatever code
//     the handler gave it, so that a reserved code cannot impersonate the
//     core. The handler's own code is kept for the audit log.
//   - Any other error, a typed nil *plugin.ToolError and a panic become a
//     generic PLUGIN_ERROR; what went wrong is for the host's audit log.
//   - A call past the handler timeout is PLUGIN_TIMEOUT, and an error that
//     wraps ErrUnavailable is PLUGIN_UNAVAILABLE.
//
// It depends on ipc, core/plugin and core/sanitize only, so that
// plugintest, which plugin authors' modules import, stays cheap.
package outcome

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/sanitize"
	"github.com/carapace-dev/carapace/internal/textutil"
	"github.com/carapace-dev/carapace/ipc"
)

// Limits on what of a handler's error reaches the agent and the audit log.
const (
	maxMessage     = 2000 // bytes of an error message the agent sees
	maxField       = 200  // bytes of an error's field
	maxHandlerCode = 64   // bytes of a ToolError's own code kept for the audit log
)

// Core is the source of an answer the core gives for a handler that
// failed, rather than the handler's own.
const Core = "core"

var (
	// ErrUnavailable is what a handler returns (wrapped) when it cannot
	// take the call at all — its process died, or it is being restarted.
	// The agent gets PLUGIN_UNAVAILABLE, which says to retry later,
	// instead of PLUGIN_ERROR.
	ErrUnavailable = errors.New("plugin unavailable")
	// ErrTimeout is what Call returns for a handler that did not answer
	// within its timeout.
	ErrTimeout = errors.New("handler timeout")
)

// PanicError is a handler's panic, recovered by Call.
type PanicError struct {
	Value any    // what the handler panicked with
	Stack []byte // the handler goroutine's stack at the panic
}

// Error implements the error interface: the value, then the stack.
func (e *PanicError) Error() string {
	return fmt.Sprintf("handler panicked: %v\n%s", e.Value, e.Stack)
}

// Call runs invoke the way the core calls a handler: on a goroutine of its
// own, with a context that ends after timeout. A panic is returned as a
// *PanicError rather than taking the caller down; a call that outlives its
// context, or succeeds only after its deadline, returns ErrTimeout. A
// handler that ignores its context keeps its goroutine until it returns.
func Call(ctx context.Context, timeout time.Duration, invoke func(context.Context) (map[string]any, error)) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type answer struct {
		res map[string]any
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				ch <- answer{err: &PanicError{Value: r, Stack: debug.Stack()}}
			}
		}()
		res, err := invoke(ctx)
		ch <- answer{res, err}
	}()
	select {
	case a := <-ch:
		if a.err == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, ErrTimeout
		}
		return a.res, a.err
	case <-ctx.Done():
		return nil, ErrTimeout
	}
}

// Options describe the call whose outcome Of maps.
type Options struct {
	// Plugin is the handler's plugin: the source of its answers, named
	// in a timeout's message.
	Plugin string
	// Timeout is the handler timeout the call ran under, named in a
	// timeout's message.
	Timeout time.Duration
	// Envelope returns the response frame that would carry result to the
	// agent; its size is what must fit in ipc.MaxResponseBytes. Nil
	// checks the result alone.
	Envelope func(result json.RawMessage) []byte
}

// Outcome is what the agent receives for one handler call, and what only
// the host's audit log and the plugin's author learn of it.
type Outcome struct {
	// Result is the sanitised result as JSON, on success.
	Result json.RawMessage
	// Frame is the response frame Options.Envelope built around Result,
	// on success (nil without an Envelope).
	Frame []byte
	// Error is what the agent sees on failure; nil on success.
	Error *ipc.Error
	// Source is who answers the agent: Options.Plugin for a result and
	// for a failure the handler is answerable for (its ToolError, a nil
	// or an oversized result), Core when the core speaks for a handler
	// that failed.
	Source string
	// HandlerCode is the Code of the handler's *plugin.ToolError
	// (HANDLER_ERROR if it has none), clipped to 64 bytes; "" if
	// the call did not end in one. The agent sees HANDLER_ERROR whatever
	// it is.
	HandlerCode string
	// Detail says why a call failed, for the host's audit log and the
	// plugin's author: the Go error behind a PLUGIN_ERROR, the panic and
	// its stack, why a result was refused. It is not sanitised, and the
	// agent never sees it. "" for a ToolError, whose message says it all.
	Detail string
	// Redacted lists what the sanitiser removed from the result or from
	// the error's message: credentials the handler leaked.
	Redacted []sanitize.Redaction
}

// OK reports whether the call succeeded.
func (o *Outcome) OK() bool { return o.Error == nil }

// AuditCode is the code the audit log records for the handler's part of a
// failed call: the handler's own code for a ToolError, else the code the
// agent sees. "" on success.
func (o *Outcome) AuditCode() string {
	switch {
	case o.HandlerCode != "":
		return o.HandlerCode
	case o.Error != nil:
		return string(o.Error.Code)
	}
	return ""
}

// Of maps what a handler returned — through Call, so that panics and
// timeouts are errors too — to what the agent receives.
func Of(res map[string]any, err error, o Options) Outcome {
	if err != nil {
		return failed(err, o)
	}
	return succeeded(res, o)
}

func failed(err error, o Options) Outcome {
	te, isTool := plugin.AsToolError(err)
	switch {
	case errors.Is(err, ErrUnavailable):
		return Outcome{Source: Core, Detail: err.Error(),
			Error: ipc.Errorf(ipc.CodePluginUnavailable, 6, "plugin %s is not running; get_session_info shows plugin health", o.Plugin)}
	case errors.Is(err, ErrTimeout):
		return Outcome{Source: Core, Detail: "deadline exceeded: the handler did not return before its context's deadline",
			Error: ipc.Errorf(ipc.CodePluginTimeout, 6, "%s did not respond within %s", o.Plugin, o.Timeout)}
	case isTool && te != nil:
		return toolError(te, o)
	case isTool:
		return Outcome{Source: Core, Error: internal(),
			Detail: "the handler returned a nil *plugin.ToolError as its error (a typed nil is not a nil error)"}
	}
	return Outcome{Source: Core, Error: internal(), Detail: err.Error()}
}

// internal is the generic PLUGIN_ERROR: nothing of the cause reaches the
// agent.
func internal() *ipc.Error {
	return &ipc.Error{Code: ipc.CodePluginError, Message: "Internal plugin error"}
}

// toolError is what the agent sees of a ToolError.
func toolError(te *plugin.ToolError, o Options) Outcome {
	msg, kinds := sanitize.String(te.Message)
	out := Outcome{Source: o.Plugin, HandlerCode: textutil.Clip(te.Code, maxHandlerCode),
		Error: &ipc.Error{Code: ipc.CodeHandlerError, Message: textutil.Clip(msg, maxMessage), Retriable: te.Retriable,
			Field: textutil.Clip(te.Field, maxField), RetryAfter: te.RetryAfter}}
	if out.HandlerCode == "" {
		out.HandlerCode = string(ipc.CodeHandlerError)
	}
	for _, k := range kinds {
		out.Redacted = append(out.Redacted, sanitize.Redaction{Path: "error.message", Kind: k})
	}
	return out
}

// succeeded checks the result's shape and size, and sanitises it.
func succeeded(res map[string]any, o Options) Outcome {
	if res == nil {
		return Outcome{Source: o.Plugin, Error: &ipc.Error{Code: ipc.CodeHandlerError, Message: "Handler returned no result object"},
			Detail: "the handler returned a nil map and a nil error; return an empty map for an empty result"}
	}
	clean, red := sanitize.Value(any(res), "result")
	var bad []string
	var leaks []sanitize.Redaction
	for _, r := range red {
		// The sanitiser replaces what JSON cannot encode; that is the
		// handler's failure, not a credential.
		if r.Kind == sanitize.KindUnencodable || r.Kind == sanitize.KindTooDeep {
			bad = append(bad, r.Kind+" at "+r.Path)
		} else {
			leaks = append(leaks, r)
		}
	}
	b, err := json.Marshal(clean)
	if err == nil && len(bad) > 0 {
		err = errors.New(strings.Join(bad, ", "))
	}
	if err != nil {
		return Outcome{Source: Core, Error: internal(), Detail: "result is not serialisable: " + err.Error()}
	}
	frame, n := []byte(nil), len(b)
	if o.Envelope != nil {
		frame = o.Envelope(b)
		n = len(frame)
	}
	if n > ipc.MaxResponseBytes {
		return Outcome{Source: o.Plugin,
			Error:  &ipc.Error{Code: ipc.CodeHandlerError, Message: fmt.Sprintf("Response exceeded maximum size (%d bytes)", ipc.MaxResponseBytes)},
			Detail: fmt.Sprintf("the response envelope would be %d bytes; the limit is %d", n, ipc.MaxResponseBytes)}
	}
	return Outcome{Result: b, Frame: frame, Source: o.Plugin, Redacted: leaks}
}
