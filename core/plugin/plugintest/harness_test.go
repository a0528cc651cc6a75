package plugintest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/ipc"
)

// fnHandler is a handler made of functions; nil ones succeed.
type fnHandler struct {
	init     func(ctx context.Context, cfg map[string]any, svc plugin.Services) error
	invoke   func(ctx context.Context, req *plugin.Request) (map[string]any, error)
	shutdown func(ctx context.Context) error

	inits, shutdowns atomic.Int32
}

var _ plugin.Handler = (*fnHandler)(nil)

func (h *fnHandler) Init(ctx context.Context, cfg map[string]any, svc plugin.Services) error {
	h.inits.Add(1)
	if h.init == nil {
		return nil
	}
	return h.init(ctx, cfg, svc)
}

func (h *fnHandler) Invoke(ctx context.Context, req *plugin.Request) (map[string]any, error) {
	if h.invoke == nil {
		return map[string]any{}, nil
	}
	return h.invoke(ctx, req)
}

func (h *fnHandler) Shutdown(ctx context.Context) error {
	h.shutdowns.Add(1)
	if h.shutdown == nil {
		return nil
	}
	return h.shutdown(ctx)
}

func returning(res map[string]any, err error) *fnHandler {
	return &fnHandler{invoke: func(context.Context, *plugin.Request) (map[string]any, error) { return res, err }}
}

func TestInvokeSuccess(t *testing.T) {
	var got *plugin.Request
	var info plugin.SessionInfo
	svc := &Services{}
	h := &fnHandler{invoke: func(ctx context.Context, req *plugin.Request) (map[string]any, error) {
		got = req
		var err error
		if info, err = svc.GetSessionInfo(ctx); err != nil {
			return nil, err
		}
		return map[string]any{"n": req.Arguments["n"], "big": int64(1) << 60, "f": 1.5, "list": []string{"a"}, "t": time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}, nil
	}}
	hs := New(t, h, WithServices(svc))
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	r := hs.Invoke("count", map[string]any{"n": 3, "s": "x"}, WithGroup("family"), WithSession("s-1"), WithCorrelation("c-1"), WithTime(at), WithEnvelopeID("e-1"))
	data := AssertSuccess(t, r)

	if got.Tool != "count" || got.Group != "family" || got.Session != "s-1" || got.Correlation != "c-1" || !got.Time.Equal(at) || got.EnvelopeID != "e-1" {
		t.Errorf("request = %+v; want the options applied", got)
	}
	if got.Arguments["n"] != json.Number("3") {
		t.Errorf("argument n reached the handler as %#v; want json.Number(\"3\"), as the core decodes it", got.Arguments["n"])
	}
	if info.Group != "family" || info.ID != "s-1" || !info.Started.Equal(at) {
		t.Errorf("GetSessionInfo in the handler = %+v; want the request's scope", info)
	}
	want := map[string]any{"n": json.Number("3"), "big": json.Number("1152921504606846976"), "f": json.Number("1.5"),
		"list": []any{"a"}, "t": "2026-01-02T03:04:05Z"}
	if fmt.Sprint(data) != fmt.Sprint(want) {
		t.Errorf("Value = %#v\nwant    %#v", data, want)
	}
	if string(r.JSON) != `{"big":1152921504606846976,"f":1.5,"list":["a"],"n":3,"t":"2026-01-02T03:04:05Z"}` {
		t.Errorf("JSON = %s", r.JSON)
	}
	if !r.OK() || r.Code != "" || len(r.Redacted) != 0 || !strings.HasPrefix(r.String(), "success ") {
		t.Errorf("result = %+v", r)
	}
}

func TestInvokeDefaults(t *testing.T) {
	var got *plugin.Request
	h := &fnHandler{invoke: func(_ context.Context, req *plugin.Request) (map[string]any, error) {
		got = req
		return map[string]any{}, nil
	}}
	before := time.Now().UTC()
	AssertSuccess(t, Invoke(t, h, "t", nil))
	if got.Group != DefaultGroup || got.Session != DefaultSession || got.Correlation != DefaultCorrelation || got.EnvelopeID != DefaultEnvelopeID {
		t.Errorf("request = %+v; want the defaults", got)
	}
	if got.Arguments == nil || len(got.Arguments) != 0 {
		t.Errorf("nil arguments reached the handler as %#v; want {}", got.Arguments)
	}
	if got.Time.Before(before) || got.Time.Location() != time.UTC {
		t.Errorf("request time %v; want now, UTC", got.Time)
	}
	if h.inits.Load() != 0 {
		t.Error("the one-shot Invoke called Init")
	}
}

func TestInvokeFailures(t *testing.T) {
	bigText := strings.Repeat("x", ipc.MaxResponseBytes)
	tests := []struct {
		name    string
		h       *fnHandler
		timeout time.Duration
		want    Result // Detail: a substring
		redact  string // a Redacted path expected
	}{
		{name: "plain error", h: returning(nil, errors.New("db: connection refused to 10.0.0.3")),
			want: Result{Code: ipc.CodePluginError, Message: "Internal plugin error", Detail: "db: connection refused to 10.0.0.3"}},
		{name: "panic", h: &fnHandler{invoke: func(context.Context, *plugin.Request) (map[string]any, error) { panic("boom") }},
			want: Result{Code: ipc.CodePluginError, Message: "Internal plugin error", Detail: "handler panicked: boom"}},
		{name: "tool error", h: returning(nil, &plugin.ToolError{Code: "HANDLER_ERROR", Message: "no such note", Retriable: true, Field: "id", RetryAfter: 7}),
			want: Result{Code: ipc.CodeHandlerError, Message: "no such note", Retriable: true, Field: "id", RetryAfter: 7, HandlerCode: "HANDLER_ERROR"}},
		{name: "wrapped tool error", h: returning(nil, fmt.Errorf("search: %w", plugin.NewToolError("query too long", false))),
			want: Result{Code: ipc.CodeHandlerError, Message: "query too long", HandlerCode: "HANDLER_ERROR"}},
		{name: "reserved code", h: returning(nil, &plugin.ToolError{Code: "RATE_LIMITED", Message: "slow down", Retriable: true}),
			want: Result{Code: ipc.CodeHandlerError, Message: "slow down", Retriable: true, HandlerCode: "RATE_LIMITED"}},
		{name: "custom code", h: returning(nil, &plugin.ToolError{Code: "NOT_FOUND", Message: "gone"}),
			want: Result{Code: ipc.CodeHandlerError, Message: "gone", HandlerCode: "NOT_FOUND"}},
		{name: "empty code", h: returning(nil, &plugin.ToolError{Message: "m"}),
			want: Result{Code: ipc.CodeHandlerError, Message: "m", HandlerCode: "HANDLER_ERROR"}},
		{name: "secret in a tool error", h: returning(nil, plugin.NewToolError("upstream said: Authorization: Bearer abc.def.ghi", false)),
			want:   Result{Code: ipc.CodeHandlerError, Message: "upstream said: Authorization: Bearer [REDACTED]", HandlerCode: "HANDLER_ERROR"},
			redact: "error.message"},
		{name: "long tool error", h: returning(nil, plugin.NewToolError(strings.Repeat("m", 3000), false)),
			want: Result{Code: ipc.CodeHandlerError, Message: strings.Repeat("m", 2000) + "…", HandlerCode: "HANDLER_ERROR"}},
		{name: "typed nil tool error", h: returning(nil, (*plugin.ToolError)(nil)),
			want: Result{Code: ipc.CodePluginError, Message: "Internal plugin error", Detail: "typed nil"}},
		{name: "nil result", h: returning(nil, nil),
			want: Result{Code: ipc.CodeHandlerError, Message: "Handler returned no result object", Detail: "nil map"}},
		{name: "unencodable result", h: returning(map[string]any{"ch": make(chan int)}, nil),
			want: Result{Code: ipc.CodePluginError, Message: "Internal plugin error", Detail: "unencodable at result.ch"}},
		{name: "NaN", h: returning(map[string]any{"x": math.NaN()}, nil),
			want: Result{Code: ipc.CodePluginError, Message: "Internal plugin error", Detail: "not serialisable"}},
		{name: "over 1 MiB", h: returning(map[string]any{"text": bigText}, nil),
			want: Result{Code: ipc.CodeHandlerError, Message: "Response exceeded maximum size (1048576 bytes)", Detail: "the limit is 1048576"}},
		{name: "deadline honoured", timeout: 30 * time.Millisecond,
			h: &fnHandler{invoke: func(ctx context.Context, _ *plugin.Request) (map[string]any, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			}},
			want: Result{Code: ipc.CodePluginTimeout, Message: "test-plugin did not respond within 30ms", Retriable: true, Detail: "deadline"}},
		{name: "success after the deadline", timeout: 30 * time.Millisecond,
			h: &fnHandler{invoke: func(ctx context.Context, _ *plugin.Request) (map[string]any, error) {
				<-ctx.Done()
				return map[string]any{"late": true}, nil
			}},
			want: Result{Code: ipc.CodePluginTimeout, Message: "test-plugin did not respond within 30ms", Retriable: true, Detail: "deadline"}},
		{name: "deadline ignored", timeout: 30 * time.Millisecond,
			h: &fnHandler{invoke: func(context.Context, *plugin.Request) (map[string]any, error) {
				time.Sleep(300 * time.Millisecond)
				return map[string]any{}, nil
			}},
			want: Result{Code: ipc.CodePluginTimeout, Message: "test-plugin did not respond within 30ms", Retriable: true, Detail: "deadline"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := New(t, tt.h, WithTimeout(tt.timeout))
			r := hs.Invoke("tool", nil)
			if r.OK() || r.Value != nil || r.JSON != nil {
				t.Fatalf("result = %s; want an error", r)
			}
			if r.Code != tt.want.Code || r.Message != tt.want.Message || r.Retriable != tt.want.Retriable ||
				r.Field != tt.want.Field || r.RetryAfter != tt.want.RetryAfter || r.HandlerCode != tt.want.HandlerCode {
				t.Errorf("result = %+v\nwant     %+v", r, tt.want)
			}
			if !strings.Contains(r.Detail, tt.want.Detail) {
				t.Errorf("Detail = %q; want it to contain %q", r.Detail, tt.want.Detail)
			}
			if (tt.redact == "") != (len(r.Redacted) == 0) || tt.redact != "" && r.Redacted[0].Path != tt.redact {
				t.Errorf("Redacted = %v; want %q", r.Redacted, tt.redact)
			}
			AssertError(t, r, tt.want.Code)
		})
	}
}

func TestInvokePanicKeepsTheStack(t *testing.T) {
	r := Invoke(t, &fnHandler{invoke: func(context.Context, *plugin.Request) (map[string]any, error) {
		var m map[string]int
		//lint:ignore SA5000 the test needs a real runtime panic, not one it raises itself
		m["x"]++
		return nil, nil
	}}, "t", nil)
	AssertError(t, r, ipc.CodePluginError)
	if !strings.Contains(r.Detail, "assignment to entry in nil map") || !strings.Contains(r.Detail, "harness_test.go") {
		t.Errorf("Detail lacks the panic value or its stack:\n%s", r.Detail)
	}
	if !strings.Contains(r.String(), "detail: handler panicked") {
		t.Errorf("String() does not show the detail: %s", r)
	}
}

func TestInvokeSizeLimitIsTheEnvelopes(t *testing.T) {
	// A result a little smaller than the limit passes; the envelope's
	// overhead is a few hundred bytes.
	h := &fnHandler{invoke: func(_ context.Context, req *plugin.Request) (map[string]any, error) {
		n, _ := req.Arguments["n"].(json.Number).Int64()
		return map[string]any{"text": strings.Repeat("x", int(n))}, nil
	}}
	AssertSuccess(t, Invoke(t, h, "t", map[string]any{"n": ipc.MaxResponseBytes - 1000}))
	AssertError(t, Invoke(t, h, "t", map[string]any{"n": ipc.MaxResponseBytes - 100}), ipc.CodeHandlerError)
}

func TestInvokeSanitisesResults(t *testing.T) {
	r := Invoke(t, returning(map[string]any{"auth": "Bearer abcdef123", "ok": "fine"}, nil), "t", nil)
	data := AssertSuccess(t, r)
	if data["auth"] != "Bearer [REDACTED]" || data["ok"] != "fine" {
		t.Errorf("Value = %v; want the credential redacted as the agent would get it", data)
	}
	if len(r.Redacted) != 1 || r.Redacted[0].Path != "result.auth" {
		t.Errorf("Redacted = %v; want result.auth", r.Redacted)
	}
}

func TestInvokeBadArguments(t *testing.T) {
	ft := fake(t, func(ft *fakeT) {
		Invoke(ft, &fnHandler{}, "t", map[string]any{"f": func() {}})
		ft.Errorf("not reached")
	})
	mustFail(t, ft, "arguments cannot be encoded as JSON")
	if strings.Contains(strings.Join(ft.failures(), "\n"), "not reached") {
		t.Error("Invoke with bad arguments did not stop the test")
	}
}

func TestInvokeNotesReservedCodes(t *testing.T) {
	ft := fake(t, func(ft *fakeT) {
		Invoke(ft, returning(nil, &plugin.ToolError{Code: "UNAUTHORIZED", Message: "no"}), "t", nil)
	})
	mustPass(t, ft)
	if logs := strings.Join(ft.messages("log"), "\n"); !strings.Contains(logs, "reserved code UNAUTHORIZED") {
		t.Errorf("no note about the reserved code in the log: %q", logs)
	}
}

func TestInvokeConcurrently(t *testing.T) {
	var calls atomic.Int32
	h := &fnHandler{invoke: func(ctx context.Context, req *plugin.Request) (map[string]any, error) {
		calls.Add(1)
		return map[string]any{"tool": req.Tool}, nil
	}}
	hs := New(t, h)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			r := hs.Invoke(fmt.Sprintf("t%d", i), nil)
			if !r.OK() || r.Value["tool"] != fmt.Sprintf("t%d", i) {
				t.Errorf("call %d: %s", i, r)
			}
		})
	}
	wg.Wait()
	if calls.Load() != 20 {
		t.Errorf("%d calls; want 20", calls.Load())
	}
}

func TestNewLifecycle(t *testing.T) {
	t.Run("init gets config and services, shutdown at cleanup", func(t *testing.T) {
		svc := &Services{}
		var gotCfg map[string]any
		var gotSvc plugin.Services
		h := &fnHandler{init: func(_ context.Context, cfg map[string]any, s plugin.Services) error {
			gotCfg, gotSvc = cfg, s
			return nil
		}}
		ft := fake(t, func(ft *fakeT) {
			hs := New(ft, h, WithConfig(map[string]any{"k": "v"}), WithServices(svc))
			if hs.Services() != svc || hs.Handler() != h {
				ft.Errorf("accessors return the wrong values")
			}
			if h.shutdowns.Load() != 0 {
				ft.Errorf("Shutdown before the end of the test")
			}
		})
		mustPass(t, ft)
		if gotCfg["k"] != "v" || gotSvc != plugin.Services(svc) {
			t.Errorf("Init got %v, %v", gotCfg, gotSvc)
		}
		if h.inits.Load() != 1 || h.shutdowns.Load() != 1 {
			t.Errorf("Init ran %d times, Shutdown %d; want 1 and 1", h.inits.Load(), h.shutdowns.Load())
		}
	})
	t.Run("default config is empty, not nil", func(t *testing.T) {
		var gotCfg map[string]any
		New(t, &fnHandler{init: func(_ context.Context, cfg map[string]any, s plugin.Services) error {
			gotCfg = cfg
			if s == nil {
				return errors.New("nil services")
			}
			return nil
		}})
		if gotCfg == nil {
			t.Error("Init got a nil config")
		}
	})
	t.Run("explicit shutdown runs once", func(t *testing.T) {
		h := &fnHandler{}
		ft := fake(t, func(ft *fakeT) {
			hs := New(ft, h)
			hs.Shutdown()
			hs.Shutdown()
		})
		mustPass(t, ft)
		if h.shutdowns.Load() != 1 {
			t.Errorf("Shutdown ran %d times; want 1", h.shutdowns.Load())
		}
	})
	t.Run("NoInit", func(t *testing.T) {
		h := &fnHandler{}
		mustPass(t, fake(t, func(ft *fakeT) { New(ft, h, NoInit()).Shutdown() }))
		if h.inits.Load() != 0 || h.shutdowns.Load() != 0 {
			t.Errorf("NoInit: Init ran %d times, Shutdown %d; want neither", h.inits.Load(), h.shutdowns.Load())
		}
	})
}

func TestNewReportsBrokenLifecycles(t *testing.T) {
	short := lifecycleTimeouts(50*time.Millisecond, 50*time.Millisecond)
	block := func(ctx context.Context) error { time.Sleep(time.Second); return nil }
	tests := []struct {
		name string
		h    *fnHandler
		want []string
	}{
		{"init fails", &fnHandler{init: func(context.Context, map[string]any, plugin.Services) error {
			return plugin.NewInitError(plugin.CategoryAuth, errors.New("token rejected"))
		}}, []string{"fatal: Init failed (the agent would see AUTH_ERROR): token rejected"}},
		{"init panics", &fnHandler{init: func(context.Context, map[string]any, plugin.Services) error { panic("no config") }},
			[]string{"fatal: Init panicked", "no config"}},
		{"init hangs", &fnHandler{init: func(ctx context.Context, _ map[string]any, _ plugin.Services) error { return block(ctx) }},
			[]string{"fatal: Init did not return within 50ms"}},
		{"shutdown fails", &fnHandler{shutdown: func(context.Context) error { return errors.New("flush failed") }},
			[]string{"error: Shutdown failed: flush failed"}},
		{"shutdown panics", &fnHandler{shutdown: func(context.Context) error { panic("closed twice") }},
			[]string{"error: Shutdown panicked: closed twice"}},
		{"shutdown hangs", &fnHandler{shutdown: block}, []string{"error: Shutdown did not return within 50ms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reached := false
			ft := fake(t, func(ft *fakeT) {
				New(ft, tt.h, short)
				reached = true
			})
			mustFail(t, ft, tt.want...)
			if strings.HasPrefix(tt.name, "init") {
				if reached {
					t.Error("a failed Init did not stop the test")
				}
				if tt.h.shutdowns.Load() != 0 {
					t.Error("Shutdown was called after a failed Init")
				}
			}
		})
	}
	t.Run("nil handler", func(t *testing.T) {
		mustFail(t, fake(t, func(ft *fakeT) { New(ft, nil) }), "the handler is nil")
	})
}

type eventHandler struct {
	fnHandler
	got []*plugin.Event
}

func (h *eventHandler) HandleEvent(_ context.Context, ev *plugin.Event) error {
	h.got = append(h.got, ev)
	if ev.Topic == "bad" {
		return errors.New("bad topic")
	}
	if ev.Topic == "panic" {
		panic("event panic")
	}
	return nil
}

func TestHandleEvent(t *testing.T) {
	h := &eventHandler{}
	hs := New(t, h)
	if err := hs.HandleEvent(&plugin.Event{Topic: "message.inbound"}); err != nil || len(h.got) != 1 {
		t.Errorf("HandleEvent = %v, %d events delivered", err, len(h.got))
	}
	if err := hs.HandleEvent(&plugin.Event{Topic: "bad"}); err == nil {
		t.Error("HandleEvent dropped the handler's error")
	}
	mustFail(t, fake(t, func(ft *fakeT) { New(ft, h).HandleEvent(&plugin.Event{Topic: "panic"}) }), "HandleEvent panicked: event panic")
	mustFail(t, fake(t, func(ft *fakeT) { New(ft, &fnHandler{}).HandleEvent(&plugin.Event{}) }), "does not implement plugin.EventHandler")
}

func TestNewRequestAndArgs(t *testing.T) {
	r := NewRequest("t", map[string]any{"n": 1.5, "list": []int{1}})
	if r.Arguments["n"] != json.Number("1.5") || fmt.Sprint(r.Arguments["list"]) != "[1]" {
		t.Errorf("arguments = %#v", r.Arguments)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("NewRequest accepted arguments JSON cannot encode")
			}
		}()
		NewRequest("t", map[string]any{"c": make(chan int)})
	}()

	if a := Args(t, `{"n": 12345678901234567890, "s": "x"}`); a["n"] != json.Number("12345678901234567890") || a["s"] != "x" {
		t.Errorf("Args = %#v", a)
	}
	for _, bad := range []string{``, `[]`, `null`, `{"a":1} {}`, `{"a":`, `"s"`} {
		mustFail(t, fake(t, func(ft *fakeT) { Args(ft, bad) }), "plugintest.Args: not a JSON object")
	}
}
