package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/outcome"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
	"github.com/carapace-dev/carapace/core/sanitize"
	"github.com/carapace-dev/carapace/core/session"
	"github.com/carapace-dev/carapace/internal/textutil"
	"github.com/carapace-dev/carapace/ipc"
)

// pluginHandler gives a funcHandler the lifecycle plugintest asks of a
// whole plugin.Handler; it has nothing to set up.
type pluginHandler struct{ funcHandler }

var _ plugin.Handler = pluginHandler{}

func (pluginHandler) Init(context.Context, map[string]any, plugin.Services) error { return nil }
func (pluginHandler) Shutdown(context.Context) error                              { return nil }

// seen is what one path made of a handler's outcome, in the terms both
// paths can express.
type seen struct {
	Code       ipc.Code
	Message    string
	Retriable  bool
	Field      string
	RetryAfter int
	JSON       string   // the result as sent, on success
	AuditCode  string   // what the handler-stage audit entry records
	Redacted   []string // paths the sanitiser removed
	Why        string   // what the audit log keeps of a failure (Detail, else the message), by why
}

// TestPipelineAndPlugintestAgree feeds the same handler outcomes through
// the pipeline, as the agent meets them, and through plugintest, as a
// plugin's author tests them, and checks that both say the same: the
// harness must not promise authors an answer the agent never gets.
func TestPipelineAndPlugintestAgree(t *testing.T) {
	const timeout = 200 * time.Millisecond // newTestPipeline's handler timeout
	returning := func(res map[string]any, err error) funcHandler {
		return func(context.Context, *plugin.Request) (map[string]any, error) { return res, err }
	}
	handlers := []struct {
		name string
		h    funcHandler
	}{
		{"result", returning(map[string]any{"n": 3, "big": int64(1) << 60, "f": 1.5, "list": []string{"a"}, "t": time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}, nil)},
		{"empty result", returning(map[string]any{}, nil)},
		{"secret in the result", returning(map[string]any{"auth": "Bearer abcdef123", "k": "token sk-ant-api03-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"}, nil)},
		{"nil result", returning(nil, nil)},
		{"unencodable result", returning(map[string]any{"ch": make(chan int)}, nil)},
		{"NaN", returning(map[string]any{"x": math.NaN()}, nil)},
		{"oversized result", returning(map[string]any{"x": strings.Repeat("y", ipc.MaxResponseBytes)}, nil)},
		{"tool error", returning(nil, &plugin.ToolError{Code: "NOT_FOUND", Message: "no such note", Retriable: true, Field: "id", RetryAfter: 7})},
		{"reserved code", returning(nil, &plugin.ToolError{Code: "UNAUTHORIZED", Message: "upstream 401"})},
		{"empty code", returning(nil, &plugin.ToolError{Message: "m"})},
		{"long code", returning(nil, &plugin.ToolError{Code: strings.Repeat("C", 100), Message: "m"})},
		{"wrapped tool error", returning(nil, fmt.Errorf("search: %w", plugin.NewToolError("query too long", false)))},
		{"secret in a tool error", returning(nil, plugin.NewToolError("upstream said: Authorization: Bearer abc.def.ghi", false))},
		{"long tool error", returning(nil, &plugin.ToolError{Message: strings.Repeat("m", 3000), Field: strings.Repeat("f", 300)})},
		{"typed nil tool error", returning(nil, (*plugin.ToolError)(nil))},
		{"plain error", returning(nil, errors.New("open /etc/secret: permission denied"))},
		{"panic", func(context.Context, *plugin.Request) (map[string]any, error) { panic("boom") }},
		{"unavailable", returning(nil, fmt.Errorf("process exited: %w", outcome.ErrUnavailable))},
		{"deadline honoured", func(ctx context.Context, _ *plugin.Request) (map[string]any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}},
		{"success after the deadline", func(ctx context.Context, _ *plugin.Request) (map[string]any, error) {
			<-ctx.Done()
			return map[string]any{"late": true}, nil
		}},
	}
	for _, tt := range handlers {
		t.Run(tt.name, func(t *testing.T) {
			a := &memAudit{}
			r := run(t, newTestPipeline(t, a, tt.h), session.New("s1", "main", "none"), wire("tool.invoke.fn", "{}"))
			core := seen{JSON: string(r.Payload.Result)}
			if e := r.Payload.Error; e != nil {
				core = seen{Code: e.Code, Message: e.Message, Retriable: e.Retriable, Field: e.Field, RetryAfter: e.RetryAfter}
			}
			for _, e := range a.entries {
				switch e.Stage {
				case audit.StageHandler:
					core.AuditCode, core.Why = e.Code, why(e.Reason)
				case audit.StageResponse:
					core.Redacted = e.Redacted
				}
			}

			hs := plugintest.New(t, pluginHandler{tt.h}, plugintest.NoInit(), plugintest.WithTimeout(timeout),
				plugintest.WithServices(&plugintest.Services{Plugin: "fnplug"}))
			res := hs.Invoke("fn", nil, plugintest.WithGroup("main"), plugintest.WithSession("s1"), plugintest.WithCorrelation("c1"))
			harness := seen{Code: res.Code, Message: res.Message, Retriable: res.Retriable, Field: res.Field,
				RetryAfter: res.RetryAfter, JSON: string(res.JSON), AuditCode: res.HandlerCode}
			if harness.AuditCode == "" && !res.OK() {
				harness.AuditCode = string(res.Code)
			}
			for _, red := range res.Redacted {
				// The audit log marks an error's message once, whatever
				// the sanitiser found in it.
				if res.OK() || !slices.Contains(harness.Redacted, red.Path) {
					harness.Redacted = append(harness.Redacted, red.Path)
				}
			}
			if res.Detail != "" {
				detail, _ := sanitize.String(res.Detail)
				harness.Why = why(detail)
			} else if !res.OK() {
				harness.Why = why(textutil.Clip(res.Message, 500)) // a ToolError's message says it all
			}

			if fmt.Sprintf("%+v", core) != fmt.Sprintf("%+v", harness) {
				t.Errorf("the pipeline and plugintest disagree:\npipeline   %+v\nplugintest %+v", clipSeen(core), clipSeen(harness))
			}
		})
	}
}

// why is the first line of a reason, its numbers masked: a frame's size
// varies by a byte or two with its timestamp, whichever path built it.
func why(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return digits.ReplaceAllString(first, "N")
}

var digits = regexp.MustCompile(`[0-9]+`)

// clipSeen shortens long fields for the failure message.
func clipSeen(s seen) seen {
	s.JSON, s.Message, s.Field = textutil.Clip(s.JSON, 200), textutil.Clip(s.Message, 200), textutil.Clip(s.Field, 200)
	return s
}
