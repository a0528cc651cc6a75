package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/catalog"
	"github.com/carapace-dev/carapace/core/confirm"
	"github.com/carapace-dev/carapace/core/manifest"
	"github.com/carapace-dev/carapace/core/outcome"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/session"
	"github.com/carapace-dev/carapace/ipc"
	"github.com/carapace-dev/carapace/plugins/echo"
)

// memAudit records entries in memory; fail makes Write fail.
type memAudit struct {
	mu      sync.Mutex
	entries []audit.Entry
	fail    bool
}

func (m *memAudit) Write(e *audit.Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail {
		return errors.New("disk full")
	}
	m.entries = append(m.entries, *e)
	return nil
}

func (m *memAudit) stages() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, e := range m.entries {
		out = append(out, e.Stage+":"+e.Outcome)
	}
	return out
}

// funcHandler adapts a function to catalog.Invoker: all the catalogue and
// the pipeline need of a handler.
type funcHandler func(ctx context.Context, req *plugin.Request) (map[string]any, error)

var _ catalog.Invoker = funcHandler(nil)

func (f funcHandler) Invoke(ctx context.Context, r *plugin.Request) (map[string]any, error) {
	return f(ctx, r)
}

func newTestPipeline(t testing.TB, a *memAudit, h catalog.Invoker) *Pipeline {
	t.Helper()
	cat := catalog.New()
	m, err := manifest.Parse("echo/manifest.json", echo.Manifest(), manifest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tools, err := catalog.FromManifest("echo", m, &echo.Handler{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	schema := json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{}}`)
	s, _ := catalog.CompileSchema("t", schema)
	if err := cat.Add(append(tools, &catalog.Tool{Name: "fn", Plugin: "fnplug", RiskLevel: "low", Schema: s, RawSchema: schema, Handler: h})...); err != nil {
		t.Fatal(err)
	}
	return New(Options{Catalog: cat, Audit: a, Gate: confirm.New(confirm.Options{Timeout: time.Millisecond}), HandlerTimeout: 200 * time.Millisecond,
		RateFor: func(string) Rate { return Rate{PerMinute: 1 << 30, Burst: 1 << 20} }})
}

// run sends raw through Reject or Handle and returns the final frame.
func run(t testing.TB, p *Pipeline, s *session.Session, raw []byte) *ipc.Response {
	t.Helper()
	var finals [][]byte
	send := func(f []byte, final bool) {
		if final {
			finals = append(finals, f)
		}
	}
	if req, werr := ipc.DecodeRequest(raw); werr != nil {
		p.Reject(s, "", werr, send)
	} else {
		p.Handle(context.Background(), s, req, send)
	}
	if len(finals) != 1 {
		t.Fatalf("%d final frames for %q, want exactly 1", len(finals), raw)
	}
	if len(finals[0]) > ipc.MaxResponseBytes {
		t.Fatalf("response of %d bytes", len(finals[0]))
	}
	r, err := ipc.DecodeResponse(finals[0])
	if err != nil {
		t.Fatalf("final frame does not decode: %v\n%s", err, finals[0])
	}
	return r
}

func wire(topic, args string) []byte {
	return []byte(`{"topic":"` + topic + `","correlation":"c1","arguments":` + args + `}`)
}

func TestHandlerOutcomes(t *testing.T) {
	tests := []struct {
		name     string
		h        funcHandler
		code     ipc.Code
		message  string
		source   string
		handlerE string // code of the handler-stage audit entry
	}{
		{"ok", func(context.Context, *plugin.Request) (map[string]any, error) { return map[string]any{"a": 1}, nil }, "", "", "fnplug", ""},
		{"tool error", func(context.Context, *plugin.Request) (map[string]any, error) {
			return nil, &plugin.ToolError{Code: "HANDLER_ERROR", Message: "nope", Retriable: true}
		}, ipc.CodeHandlerError, "nope", "fnplug", "HANDLER_ERROR"},
		{"reserved code normalised", func(context.Context, *plugin.Request) (map[string]any, error) {
			return nil, &plugin.ToolError{Code: "UNAUTHORIZED", Message: "upstream 401"}
		}, ipc.CodeHandlerError, "upstream 401", "fnplug", "UNAUTHORIZED"},
		{"wrapped tool error", func(context.Context, *plugin.Request) (map[string]any, error) {
			return nil, errors.Join(errors.New("x"), &plugin.ToolError{Code: "HANDLER_ERROR", Message: "inner"})
		}, ipc.CodeHandlerError, "inner", "fnplug", "HANDLER_ERROR"},
		{"plain error is generic", func(context.Context, *plugin.Request) (map[string]any, error) {
			return nil, errors.New("open /etc/secret: permission denied")
		}, ipc.CodePluginError, "Internal plugin error", "core", "PLUGIN_ERROR"},
		{"panic is generic", func(context.Context, *plugin.Request) (map[string]any, error) { panic("boom") }, ipc.CodePluginError, "Internal plugin error", "core", "PLUGIN_ERROR"},
		{"typed nil tool error is generic", func(context.Context, *plugin.Request) (map[string]any, error) {
			var te *plugin.ToolError
			return nil, te
		}, ipc.CodePluginError, "Internal plugin error", "core", "PLUGIN_ERROR"},
		{"unavailable", func(context.Context, *plugin.Request) (map[string]any, error) {
			return nil, fmt.Errorf("process exited: %w", outcome.ErrUnavailable)
		}, ipc.CodePluginUnavailable, "not running", "core", "PLUGIN_UNAVAILABLE"},
		{"timeout", func(ctx context.Context, _ *plugin.Request) (map[string]any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, ipc.CodePluginTimeout, "did not respond", "core", "PLUGIN_TIMEOUT"},
		{"unencodable result", func(context.Context, *plugin.Request) (map[string]any, error) {
			return map[string]any{"ch": make(chan int)}, nil
		}, ipc.CodePluginError, "Internal plugin error", "core", "PLUGIN_ERROR"},
		{"nil result", func(context.Context, *plugin.Request) (map[string]any, error) { return nil, nil }, ipc.CodeHandlerError, "no result object", "fnplug", "HANDLER_ERROR"},
		{"oversized result", func(context.Context, *plugin.Request) (map[string]any, error) {
			return map[string]any{"x": strings.Repeat("y", ipc.MaxResponseBytes)}, nil
		}, ipc.CodeHandlerError, "maximum size", "fnplug", "HANDLER_ERROR"},
		{"secret sanitised", func(context.Context, *plugin.Request) (map[string]any, error) {
			return map[string]any{"k": "token sk-ant-api03-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"}, nil
		}, "", "", "fnplug", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &memAudit{}
			p := newTestPipeline(t, a, tt.h)
			r := run(t, p, session.New("s1", "main", "none"), wire("tool.invoke.fn", "{}"))
			if r.Source != tt.source {
				t.Errorf("source = %q, want %q", r.Source, tt.source)
			}
			if tt.code == "" {
				if r.Payload.Error != nil {
					t.Fatalf("error %+v", r.Payload.Error)
				}
				if strings.Contains(string(r.Payload.Result), "sk-ant-") {
					t.Fatalf("secret forwarded: %s", r.Payload.Result)
				}
				return
			}
			e := r.Payload.Error
			if e == nil || e.Code != tt.code || !strings.Contains(e.Message, tt.message) {
				t.Fatalf("error %+v, want %s containing %q", e, tt.code, tt.message)
			}
			var handlerCode string
			for _, ae := range a.entries {
				if ae.Stage == audit.StageHandler {
					handlerCode = ae.Code
				}
			}
			if handlerCode != tt.handlerE {
				t.Errorf("handler audit code = %q, want %q (stages %v)", handlerCode, tt.handlerE, a.stages())
			}
		})
	}
}

// TestToolErrorRedactionIsAudited checks that a credential the sanitiser
// removed from a ToolError's message is marked on the response entry, as
// one removed from a result is.
func TestToolErrorRedactionIsAudited(t *testing.T) {
	a := &memAudit{}
	p := newTestPipeline(t, a, funcHandler(func(context.Context, *plugin.Request) (map[string]any, error) {
		return nil, plugin.NewToolError("upstream said: Authorization: Bearer abc.def.ghi", false)
	}))
	r := run(t, p, session.New("s1", "main", "none"), wire("tool.invoke.fn", "{}"))
	if e := r.Payload.Error; e == nil || e.Code != ipc.CodeHandlerError || strings.Contains(e.Message, "abc.def") {
		t.Fatalf("error %+v; want HANDLER_ERROR with the credential redacted", e)
	}
	var resp *audit.Entry
	for i := range a.entries {
		if strings.Contains(a.entries[i].Reason, "abc.def") {
			t.Errorf("the credential reached the audit log: %+v", a.entries[i])
		}
		if a.entries[i].Stage == audit.StageResponse {
			resp = &a.entries[i]
		}
	}
	if resp == nil || len(resp.Redacted) != 1 || resp.Redacted[0] != "error.message" {
		t.Fatalf("response entry %+v; want error.message redacted (stages %v)", resp, a.stages())
	}
}

// TestAuditReasonCutBetweenCharacters checks that a handler's failure,
// cut to fit the audit log, is cut between characters: the reason stays
// valid UTF-8 and ends in "…".
func TestAuditReasonCutBetweenCharacters(t *testing.T) {
	a := &memAudit{}
	p := newTestPipeline(t, a, funcHandler(func(context.Context, *plugin.Request) (map[string]any, error) {
		return nil, errors.New(strings.Repeat("€", 3000)) // 9000 bytes; the reason keeps 8000
	}))
	run(t, p, session.New("s1", "main", "none"), wire("tool.invoke.fn", "{}"))
	var reason string
	for _, e := range a.entries {
		if e.Stage == audit.StageHandler {
			reason = e.Reason
		}
	}
	if want := strings.Repeat("€", 2666) + "…"; reason != want {
		t.Fatalf("handler entry's reason is %d bytes, valid UTF-8 %v, ending %q; want %d bytes ending %q",
			len(reason), utf8.ValidString(reason), reason[max(0, len(reason)-8):], len(want), want[len(want)-8:])
	}
}

func TestAuditFailureRefusesRequest(t *testing.T) {
	ran := false
	a := &memAudit{fail: true}
	p := newTestPipeline(t, a, funcHandler(func(context.Context, *plugin.Request) (map[string]any, error) {
		ran = true
		return map[string]any{}, nil
	}))
	r := run(t, p, session.New("s1", "main", "none"), wire("tool.invoke.fn", "{}"))
	if ran {
		t.Fatal("the handler ran although its request could not be audited")
	}
	if e := r.Payload.Error; e == nil || e.Code != ipc.CodePluginUnavailable {
		t.Fatalf("error %+v, want PLUGIN_UNAVAILABLE", e)
	}
}

func TestDrain(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	p := newTestPipeline(t, &memAudit{}, funcHandler(func(context.Context, *plugin.Request) (map[string]any, error) {
		close(started)
		<-release
		return map[string]any{"done": true}, nil
	}))
	p.opts.HandlerTimeout = 10 * time.Second
	s := session.New("s1", "main", "none")
	inflight := make(chan *ipc.Response)
	go func() { inflight <- run(t, p, s, wire("tool.invoke.fn", "{}")) }()
	<-started
	p.Drain()
	// A new request is refused at once ...
	if e := run(t, p, s, wire("tool.invoke.echo", `{"message":"x"}`)).Payload.Error; e == nil || e.Code != ipc.CodePluginUnavailable {
		t.Fatalf("during drain: %+v, want PLUGIN_UNAVAILABLE", e)
	}
	// ... while the routed one finishes, and Wait waits for it.
	waited := make(chan error)
	go func() { waited <- p.Wait(context.Background()) }()
	select {
	case <-waited:
		t.Fatal("Wait returned with a call in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if r := <-inflight; r.Payload.Error != nil {
		t.Fatalf("in-flight call failed: %+v", r.Payload.Error)
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
}

func TestRateLimitRetryAfter(t *testing.T) {
	p := newTestPipeline(t, &memAudit{}, nil)
	p.opts.RateFor = func(string) Rate { return Rate{PerMinute: 6, Burst: 1} }
	s := session.New("s1", "main", "none")
	if e := run(t, p, s, wire("tool.invoke.echo", `{"message":"x"}`)).Payload.Error; e != nil {
		t.Fatal(e)
	}
	e := run(t, p, s, wire("tool.invoke.echo", `{"message":"x"}`)).Payload.Error
	if e == nil || e.Code != ipc.CodeRateLimited || e.Stage != 4 || e.RetryAfter < 9 || e.RetryAfter > 10 {
		t.Fatalf("second call: %+v, want RATE_LIMITED stage 4 retry_after ~10", e)
	}
	// Another session has its own budget.
	if e := run(t, p, session.New("s2", "main", "none"), wire("tool.invoke.echo", `{"message":"x"}`)).Payload.Error; e != nil {
		t.Fatalf("other session limited: %+v", e)
	}
}

// FuzzPipeline drives arbitrary bytes through envelope construction and
// every stage: whatever arrives, exactly one well-formed response leaves.
func FuzzPipeline(f *testing.F) {
	for _, s := range []string{
		`{"topic":"tool.invoke.echo","correlation":"c1","arguments":{"message":"hi"}}`,
		`{"topic":"tool.invoke.echo_confirm","correlation":"c1","arguments":{"message":"hi"}}`,
		`{"topic":"tool.invoke.get_diagnostics","correlation":"c1","arguments":{"last_n":5,"filter_outcome":"error"}}`,
		`{"topic":"tool.invoke.list_tools","correlation":"c1","arguments":{}}`,
		`{"topic":"tool.invoke.echo","correlation":"c1","arguments":{"message":"hi","group":"x"}}`,
		`{"topic":"x","correlation":"c1","arguments":{}}`,
	} {
		f.Add([]byte(s))
	}
	a := &memAudit{}
	p := newTestPipeline(f, a, funcHandler(func(context.Context, *plugin.Request) (map[string]any, error) { return map[string]any{}, nil }))
	f.Fuzz(func(t *testing.T, raw []byte) {
		s := session.New("s1", "main", "none")
		r := run(t, p, s, raw)
		if r.Group != "main" || r.Version != ipc.ProtocolVersion || r.Type != ipc.TypeResponse {
			t.Fatalf("envelope not built from session state: %+v", r)
		}
		if e := r.Payload.Error; e != nil && !e.Code.Valid() {
			t.Fatalf("invalid code %q", e.Code)
		}
		a.mu.Lock()
		a.entries = a.entries[:0]
		a.mu.Unlock()
	})
}

func TestDrainAnswersPendingConfirmationBeforeWaitReturns(t *testing.T) {
	p := newTestPipeline(t, &memAudit{}, nil)
	p.opts.Gate = confirm.New(confirm.Options{Timeout: time.Hour})
	s := session.New("s1", "main", "none")
	req, werr := ipc.DecodeRequest(wire("tool.invoke.echo_confirm", `{"message":"x"}`))
	if werr != nil {
		t.Fatal(werr)
	}
	var answered atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Handle(context.Background(), s, req, func(f []byte, final bool) {
			if final {
				if r, _ := ipc.DecodeResponse(f); r == nil || r.Payload.Error == nil || r.Payload.Error.Code != ipc.CodePluginUnavailable || r.Payload.Error.Stage != 5 {
					t.Errorf("answer %s, want PLUGIN_UNAVAILABLE stage 5", f)
				}
				answered.Store(true)
			}
		})
	}()
	for p.opts.Gate.Len() == 0 {
		time.Sleep(time.Millisecond)
	}
	p.Drain()
	if err := p.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !answered.Load() {
		t.Fatal("Wait returned before the waiting call was answered")
	}
	<-done
}

// A tool's Check may put one call of a low-risk tool to the user (its
// Verdict's Confirm), with its summary; it can never spare a high-risk
// tool's call the question. The Check sees the instant the handler's
// request carries as Time.
func TestCheckCanAskTheUser(t *testing.T) {
	tests := []struct {
		name    string
		risk    string
		confirm bool
		asked   bool
	}{
		{"low, the check asks", manifest.RiskLow, true, true},
		{"low, the check does not ask", manifest.RiskLow, false, false},
		{"high, the check does not ask", manifest.RiskHigh, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen time.Time
			var called atomic.Int64
			var handled time.Time
			h := funcHandler(func(_ context.Context, r *plugin.Request) (map[string]any, error) {
				called.Add(1)
				handled = r.Time
				return map[string]any{}, nil
			})
			a := &memAudit{}
			p := newTestPipeline(t, a, h)
			tool := p.opts.Catalog.Lookup("fn")
			tool.RiskLevel = tt.risk
			tool.Check = func(_ context.Context, c catalog.Call) (catalog.Verdict, error) {
				seen = c.Received
				return catalog.Verdict{Summary: "Cancel task t-1, made by the user", Confirm: tt.confirm}, nil
			}
			var requested []api.Confirmation
			pending := make(chan api.Confirmation, 4)
			gate := confirm.New(confirm.Options{Timeout: time.Hour, Publish: approver(pending)})
			p.opts.Gate = gate
			decided := make(chan struct{})
			go func() {
				defer close(decided)
				for c := range pending {
					requested = append(requested, c)
					if _, err := gate.Decide(api.Decision{ID: c.ID, Approve: true, ArgsHash: c.ArgsHash, Surface: "cli"}); err != nil {
						t.Error(err)
					}
				}
			}()
			r := run(t, p, session.New("s1", "main", "none"), wire("tool.invoke.fn", `{}`))
			close(pending)
			<-decided
			if r.Payload.Error != nil {
				t.Fatalf("error %+v", r.Payload.Error)
			}
			if asked := len(requested) > 0; asked != tt.asked || called.Load() != 1 {
				t.Fatalf("asked %v, handler called %d times; want asked %v and one call", asked, called.Load(), tt.asked)
			}
			if tt.asked && (len(requested) != 1 || requested[0].Summary != "Cancel task t-1, made by the user") {
				t.Errorf("confirmations %+v; want one with the check's summary", requested)
			}
			if seen.IsZero() || !seen.Equal(handled) {
				t.Errorf("the check saw %v, the handler's request says %v; want the same instant", seen, handled)
			}
		})
	}
}

// approver is a gate's Publisher that hands each new confirmation to a
// test that approves it.
type approver chan api.Confirmation

func (a approver) ConfirmationRequested(c api.Confirmation) { a <- c }
func (approver) ConfirmationResolved(api.Confirmation)      {}

// A low-risk tool's high_risk_if arguments put the calls that give them a
// value to the user, and only those: a calendar event with attendees is an
// invitation mailed to them, one without is not.
func TestHighRiskIfAsksTheUser(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{"title":{"type":"string"},"attendees":{"type":"array","items":{"type":"string"}}}}`)
	s, err := catalog.CompileSchema("t", schema)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		args  string
		asked bool
	}{
		{"no attendees", `{"title":"Dentist"}`, false},
		{"empty attendees", `{"title":"Dentist","attendees":[]}`, false},
		{"attendees", `{"title":"Lunch","attendees":["bob@example.com"]}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var called atomic.Int64
			h := funcHandler(func(context.Context, *plugin.Request) (map[string]any, error) {
				called.Add(1)
				return map[string]any{}, nil
			})
			p := newTestPipeline(t, &memAudit{}, h)
			tool := p.opts.Catalog.Lookup("fn")
			tool.Schema, tool.RawSchema, tool.HighRiskIf = s, schema, []string{"attendees"}
			var requested []api.Confirmation
			pending := make(chan api.Confirmation, 4)
			gate := confirm.New(confirm.Options{Timeout: time.Hour, Publish: approver(pending)})
			p.opts.Gate = gate
			decided := make(chan struct{})
			go func() {
				defer close(decided)
				for c := range pending {
					requested = append(requested, c)
					if _, err := gate.Decide(api.Decision{ID: c.ID, Approve: true, ArgsHash: c.ArgsHash, Surface: "cli"}); err != nil {
						t.Error(err)
					}
				}
			}()
			r := run(t, p, session.New("s1", "main", "none"), wire("tool.invoke.fn", tt.args))
			close(pending)
			<-decided
			if r.Payload.Error != nil {
				t.Fatalf("error %+v", r.Payload.Error)
			}
			if asked := len(requested) > 0; asked != tt.asked || called.Load() != 1 {
				t.Fatalf("asked %v, handler called %d times; want asked %v and one call", asked, called.Load(), tt.asked)
			}
		})
	}
}
