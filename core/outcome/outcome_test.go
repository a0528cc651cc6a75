package outcome

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/ipc"
)

func TestOf(t *testing.T) {
	opts := Options{Plugin: "notes", Timeout: 30 * time.Second}
	tests := []struct {
		name   string
		res    map[string]any
		err    error
		want   ipc.Error // zero Code: success
		source string
		code   string // AuditCode
		tool   string // HandlerCode
		detail string // a substring of Detail
		redact string // the first Redacted path
		json   string // Result, on success
	}{
		{name: "result", res: map[string]any{"n": json.Number("3"), "s": "x"},
			source: "notes", json: `{"n":3,"s":"x"}`},
		{name: "empty result", res: map[string]any{}, source: "notes", json: `{}`},
		{name: "secret in the result", res: map[string]any{"auth": "Bearer abcdef123"},
			source: "notes", json: `{"auth":"Bearer [REDACTED]"}`, redact: "result.auth"},
		{name: "nil result", res: nil,
			want:   ipc.Error{Code: ipc.CodeHandlerError, Message: "Handler returned no result object"},
			source: "notes", code: "HANDLER_ERROR", detail: "nil map"},
		{name: "unencodable result", res: map[string]any{"ch": make(chan int)},
			want:   ipc.Error{Code: ipc.CodePluginError, Message: "Internal plugin error"},
			source: Core, code: "PLUGIN_ERROR", detail: "result is not serialisable: unencodable at result.ch"},
		{name: "NaN", res: map[string]any{"x": math.NaN()},
			want:   ipc.Error{Code: ipc.CodePluginError, Message: "Internal plugin error"},
			source: Core, code: "PLUGIN_ERROR", detail: "not serialisable"},
		{name: "oversized result", res: map[string]any{"x": strings.Repeat("y", ipc.MaxResponseBytes)},
			want:   ipc.Error{Code: ipc.CodeHandlerError, Message: "Response exceeded maximum size (1048576 bytes)"},
			source: "notes", code: "HANDLER_ERROR", detail: "the limit is 1048576"},
		{name: "tool error", err: &plugin.ToolError{Code: "NOT_FOUND", Message: "no such note", Retriable: true, Field: "id", RetryAfter: 7},
			want:   ipc.Error{Code: ipc.CodeHandlerError, Message: "no such note", Retriable: true, Field: "id", RetryAfter: 7},
			source: "notes", code: "NOT_FOUND", tool: "NOT_FOUND"},
		{name: "reserved code", err: &plugin.ToolError{Code: "UNAUTHORIZED", Message: "upstream 401"},
			want:   ipc.Error{Code: ipc.CodeHandlerError, Message: "upstream 401"},
			source: "notes", code: "UNAUTHORIZED", tool: "UNAUTHORIZED"},
		{name: "empty code", err: &plugin.ToolError{Message: "m"},
			want:   ipc.Error{Code: ipc.CodeHandlerError, Message: "m"},
			source: "notes", code: "HANDLER_ERROR", tool: "HANDLER_ERROR"},
		{name: "long code", err: &plugin.ToolError{Code: strings.Repeat("C", 100), Message: "m"},
			want:   ipc.Error{Code: ipc.CodeHandlerError, Message: "m"},
			source: "notes", code: strings.Repeat("C", 64) + "…", tool: strings.Repeat("C", 64) + "…"},
		{name: "wrapped tool error", err: fmt.Errorf("search: %w", plugin.NewToolError("query too long", false)),
			want:   ipc.Error{Code: ipc.CodeHandlerError, Message: "query too long"},
			source: "notes", code: "HANDLER_ERROR", tool: "HANDLER_ERROR"},
		{name: "secret in a tool error", err: plugin.NewToolError("upstream said: Authorization: Bearer abc.def.ghi", false),
			want:   ipc.Error{Code: ipc.CodeHandlerError, Message: "upstream said: Authorization: Bearer [REDACTED]"},
			source: "notes", code: "HANDLER_ERROR", tool: "HANDLER_ERROR", redact: "error.message"},
		{name: "long tool error", err: &plugin.ToolError{Message: strings.Repeat("m", 3000), Field: strings.Repeat("f", 300)},
			want:   ipc.Error{Code: ipc.CodeHandlerError, Message: strings.Repeat("m", 2000) + "…", Field: strings.Repeat("f", 200) + "…"},
			source: "notes", code: "HANDLER_ERROR", tool: "HANDLER_ERROR"},
		{name: "long tool error cut between characters", err: &plugin.ToolError{Message: strings.Repeat("€", 1000), Field: strings.Repeat("€", 100)},
			want:   ipc.Error{Code: ipc.CodeHandlerError, Message: strings.Repeat("€", 666) + "…", Field: strings.Repeat("€", 66) + "…"},
			source: "notes", code: "HANDLER_ERROR", tool: "HANDLER_ERROR"},
		{name: "typed nil tool error", err: (*plugin.ToolError)(nil),
			want:   ipc.Error{Code: ipc.CodePluginError, Message: "Internal plugin error"},
			source: Core, code: "PLUGIN_ERROR", detail: "typed nil"},
		{name: "plain error", err: errors.New("open /etc/secret: permission denied"),
			want:   ipc.Error{Code: ipc.CodePluginError, Message: "Internal plugin error"},
			source: Core, code: "PLUGIN_ERROR", detail: "open /etc/secret: permission denied"},
		{name: "panic", err: &PanicError{Value: "boom", Stack: []byte("stack")},
			want:   ipc.Error{Code: ipc.CodePluginError, Message: "Internal plugin error"},
			source: Core, code: "PLUGIN_ERROR", detail: "handler panicked: boom\nstack"},
		{name: "unavailable", err: fmt.Errorf("process exited: %w", ErrUnavailable),
			want:   ipc.Error{Code: ipc.CodePluginUnavailable, Stage: 6, Retriable: true, Message: "plugin notes is not running; get_session_info shows plugin health"},
			source: Core, code: "PLUGIN_UNAVAILABLE", detail: "process exited"},
		{name: "timeout", err: ErrTimeout,
			want:   ipc.Error{Code: ipc.CodePluginTimeout, Stage: 6, Retriable: true, Message: "notes did not respond within 30s"},
			source: Core, code: "PLUGIN_TIMEOUT", detail: "deadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Of(tt.res, tt.err, opts)
			if o.Source != tt.source || o.AuditCode() != tt.code || o.HandlerCode != tt.tool {
				t.Errorf("source %q, audit code %q, handler code %q; want %q, %q, %q", o.Source, o.AuditCode(), o.HandlerCode, tt.source, tt.code, tt.tool)
			}
			if !strings.Contains(o.Detail, tt.detail) || tt.detail == "" && o.Detail != "" {
				t.Errorf("Detail = %q; want it to contain %q", o.Detail, tt.detail)
			}
			if (tt.redact == "") != (len(o.Redacted) == 0) || tt.redact != "" && o.Redacted[0].Path != tt.redact {
				t.Errorf("Redacted = %v; want %q", o.Redacted, tt.redact)
			}
			if tt.want.Code == "" {
				if !o.OK() || string(o.Result) != tt.json {
					t.Fatalf("outcome %+v; want success %s", o, tt.json)
				}
				return
			}
			if o.OK() || o.Result != nil || *o.Error != tt.want {
				t.Fatalf("error %+v (result %s)\nwant  %+v", o.Error, o.Result, tt.want)
			}
		})
	}
}

// TestOfMeasuresTheEnvelope checks that the size limit applies to the
// response frame, not the bare result, and that the frame is handed back.
func TestOfMeasuresTheEnvelope(t *testing.T) {
	const overhead = 300
	var seen json.RawMessage
	opts := Options{Plugin: "p", Envelope: func(r json.RawMessage) []byte {
		seen = r
		return append(make([]byte, overhead), r...)
	}}
	text := func(n int) map[string]any { return map[string]any{"t": strings.Repeat("x", n)} }
	// {"t":"…"} is 8 bytes around the text.
	fits := Of(text(ipc.MaxResponseBytes-overhead-8), nil, opts)
	if !fits.OK() || len(fits.Frame) != ipc.MaxResponseBytes || string(seen) != string(fits.Result) {
		t.Fatalf("a frame of exactly the limit: %+v (frame %d bytes)", fits.Error, len(fits.Frame))
	}
	over := Of(text(ipc.MaxResponseBytes-overhead-7), nil, opts)
	if over.OK() || over.Error.Code != ipc.CodeHandlerError || over.Frame != nil {
		t.Fatalf("a frame one byte over the limit: %+v", over.Error)
	}
}

func TestCall(t *testing.T) {
	type key struct{}
	parent := context.WithValue(context.Background(), key{}, "v")
	t.Run("result", func(t *testing.T) {
		res, err := Call(parent, time.Minute, func(ctx context.Context) (map[string]any, error) {
			if ctx.Value(key{}) != "v" {
				return nil, errors.New("the parent context was lost")
			}
			if _, ok := ctx.Deadline(); !ok {
				return nil, errors.New("no deadline")
			}
			return map[string]any{"ok": true}, nil
		})
		if err != nil || res["ok"] != true {
			t.Fatalf("Call = %v, %v", res, err)
		}
	})
	t.Run("error passes through", func(t *testing.T) {
		want := plugin.NewToolError("x", false)
		if _, err := Call(parent, time.Minute, func(context.Context) (map[string]any, error) { return nil, want }); err != want {
			t.Fatalf("Call error %v; want the handler's", err)
		}
	})
	t.Run("panic", func(t *testing.T) {
		_, err := Call(parent, time.Minute, func(context.Context) (map[string]any, error) {
			var m map[string]int
			//lint:ignore SA5000 the test needs a real runtime panic, not one it raises itself
			m["x"]++
			return nil, nil
		})
		pe, ok := errors.AsType[*PanicError](err)
		if !ok || !strings.Contains(fmt.Sprint(pe.Value), "nil map") || !strings.Contains(string(pe.Stack), "outcome_test.go") {
			t.Fatalf("Call error %v; want a *PanicError with the value and the handler's stack", err)
		}
	})
	t.Run("deadline honoured", func(t *testing.T) {
		_, err := Call(parent, time.Millisecond, func(ctx context.Context) (map[string]any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("Call error %v; want ErrTimeout", err)
		}
	})
	t.Run("success after the deadline", func(t *testing.T) {
		_, err := Call(parent, time.Millisecond, func(ctx context.Context) (map[string]any, error) {
			<-ctx.Done()
			return map[string]any{"late": true}, nil
		})
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("Call error %v; want ErrTimeout", err)
		}
	})
	t.Run("deadline ignored", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		_, err := Call(parent, time.Millisecond, func(context.Context) (map[string]any, error) {
			<-release
			return map[string]any{}, nil
		})
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("Call error %v; want ErrTimeout", err)
		}
	})
}
