package plugintest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/outcome"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/sanitize"
	"github.com/carapace-dev/carapace/ipc"
)

// The core's timeouts.
const (
	DefaultTimeout  = 30 * time.Second // one Invoke
	InitTimeout     = 10 * time.Second // Init
	ShutdownTimeout = 10 * time.Second // Shutdown
)

// Option configures New, Invoke and Conformance.
type Option func(*options)

type options struct {
	config   map[string]any
	services *Services
	timeout  time.Duration
	noInit   bool
	samples  map[string]map[string]any

	// initTimeout and shutdownTimeout are InitTimeout and ShutdownTimeout,
	// but for the harness's own tests (lifecycleTimeouts).
	initTimeout, shutdownTimeout time.Duration
}

// WithConfig is the config Init receives (default: an empty map).
// Conformance also checks it against the manifest's config_schema.
func WithConfig(cfg map[string]any) Option { return func(o *options) { o.config = cfg } }

// WithServices is the Services Init receives (default: a Services with no
// credentials, tools or audit entries).
func WithServices(s *Services) Option { return func(o *options) { o.services = s } }

// WithTimeout replaces the handler timeout of DefaultTimeout, e.g. to test a
// handler's behaviour at its deadline quickly.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// NoInit makes New skip Init (and so Shutdown): for handlers that work
// without it, or tests of what happens before it.
func NoInit() Option { return func(o *options) { o.noInit = true } }

// WithSampleArgs gives Conformance real arguments for tool instead of those
// it would generate from the schema. They must match the schema, as the core
// validates arguments before the handler sees them. New ignores it.
func WithSampleArgs(tool string, args map[string]any) Option {
	return func(o *options) {
		if o.samples == nil {
			o.samples = map[string]map[string]any{}
		}
		o.samples[tool] = args
	}
}

// lifecycleTimeouts replaces InitTimeout and ShutdownTimeout: the harness's
// tests make them short to see a hanging Init or Shutdown reported.
func lifecycleTimeouts(init, shutdown time.Duration) Option {
	return func(o *options) { o.initTimeout, o.shutdownTimeout = init, shutdown }
}

func collect(opts []Option) options {
	o := options{timeout: DefaultTimeout, initTimeout: InitTimeout, shutdownTimeout: ShutdownTimeout}
	for _, f := range opts {
		f(&o)
	}
	if o.config == nil {
		o.config = map[string]any{}
	}
	if o.services == nil {
		o.services = &Services{}
	}
	if o.timeout <= 0 {
		o.timeout = DefaultTimeout
	}
	return o
}

// Harness runs one handler the way the core does. Create it with New; its
// methods are safe for concurrent use, as handlers must be.
type Harness struct {
	t        testing.TB
	h        plugin.Handler
	name     string
	services *Services
	timeout  time.Duration
	// The bounds of Init and Shutdown: InitTimeout and ShutdownTimeout.
	initTimeout, shutdownTimeout time.Duration

	mu      sync.Mutex
	started bool // Init succeeded
	stopped bool // Shutdown was called
}

// New returns a harness for h. Unless NoInit is given it calls
// h.Init(ctx, config, services) within InitTimeout — failing the test if
// Init fails, panics or hangs — and registers a cleanup that calls Shutdown
// within ShutdownTimeout, failing the test if that does.
func New(t testing.TB, h plugin.Handler, opts ...Option) *Harness {
	t.Helper()
	o := collect(opts)
	hs := newHarness(t, h, o, o.services.pluginName())
	if o.noInit {
		return hs
	}
	hs.init(t, o.config)
	t.Cleanup(func() { hs.shutdown(t) })
	return hs
}

func newHarness(t testing.TB, h plugin.Handler, o options, name string) *Harness {
	if h == nil {
		t.Fatalf("plugintest: the handler is nil")
	}
	return &Harness{t: t, h: h, name: name, services: o.services, timeout: o.timeout,
		initTimeout: o.initTimeout, shutdownTimeout: o.shutdownTimeout}
}

// Services returns the services the handler was given.
func (hs *Harness) Services() *Services { return hs.services }

// Handler returns the handler under test.
func (hs *Harness) Handler() plugin.Handler { return hs.h }

func (hs *Harness) init(t testing.TB, config map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hs.initTimeout)
	defer cancel()
	panicked, err := guard(ctx, func(ctx context.Context) error { return hs.h.Init(ctx, config, hs.services) })
	switch {
	case panicked != "":
		t.Fatalf("Init panicked (the core leaves the plugin out with INTERNAL_ERROR): %s", panicked)
	case errors.Is(err, errDeadline):
		t.Fatalf("Init did not return within %s (the core leaves the plugin out with INTERNAL_ERROR)", hs.initTimeout)
	case err != nil:
		t.Fatalf("Init failed (the agent would see %s): %v", plugin.CategoryOf(err), err)
	}
	hs.mu.Lock()
	hs.started = true
	hs.mu.Unlock()
}

// Shutdown calls the handler's Shutdown now, failing the test if it fails,
// panics or takes longer than ShutdownTimeout; the cleanup registered by New
// then does nothing. It does nothing if Init was not called, or Shutdown
// already was.
func (hs *Harness) Shutdown() {
	hs.t.Helper()
	hs.shutdown(hs.t)
}

func (hs *Harness) shutdown(t testing.TB) {
	t.Helper()
	hs.mu.Lock()
	if !hs.started || hs.stopped {
		hs.mu.Unlock()
		return
	}
	hs.stopped = true
	hs.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), hs.shutdownTimeout)
	defer cancel()
	panicked, err := guard(ctx, hs.h.Shutdown)
	switch {
	case panicked != "":
		t.Errorf("Shutdown panicked: %s", panicked)
	case errors.Is(err, errDeadline):
		t.Errorf("Shutdown did not return within %s", hs.shutdownTimeout)
	case err != nil:
		t.Errorf("Shutdown failed: %v", err)
	}
}

// HandleEvent delivers ev to the handler's HandleEvent, as the core does for
// the topics in the manifest's "subscribes", and returns its error. It fails
// the test if the handler is not a plugin.EventHandler or panics.
func (hs *Harness) HandleEvent(ev *plugin.Event) error {
	hs.t.Helper()
	eh, ok := hs.h.(plugin.EventHandler)
	if !ok {
		hs.t.Fatalf("the handler (%T) does not implement plugin.EventHandler", hs.h)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hs.timeout)
	defer cancel()
	panicked, err := guard(ctx, func(ctx context.Context) error { return eh.HandleEvent(ctx, ev) })
	if panicked != "" {
		hs.t.Fatalf("HandleEvent panicked: %s", panicked)
	}
	return err
}

var errDeadline = errors.New("deadline exceeded")

// guard runs f, turning a panic into its text (with the stack) and a call
// that outlives ctx into errDeadline.
func guard(ctx context.Context, f func(context.Context) error) (panicked string, err error) {
	type outcome struct {
		err      error
		panicked string
	}
	ch := make(chan outcome, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				ch <- outcome{panicked: fmt.Sprintf("%v\n%s", r, debug.Stack())}
			}
		}()
		ch <- outcome{err: f(ctx)}
	}()
	select {
	case o := <-ch:
		return o.panicked, o.err
	case <-ctx.Done():
		return "", errDeadline
	}
}

// Result is the answer to one tool call as the agent would receive it, plus
// what only the plugin's author should see.
type Result struct {
	// Value is the result object on success: sanitised, then passed through
	// JSON as the agent receives it, numbers as json.Number. Nil on error.
	Value map[string]any
	// JSON is the result as sent on the wire, on success.
	JSON json.RawMessage

	// Code is "" on success, else the error code the agent sees.
	Code ipc.Code
	// Message, Retriable, Field and RetryAfter are the error as the agent
	// sees it (the message sanitised, as the core does).
	Message    string
	Retriable  bool
	Field      string
	RetryAfter int

	// HandlerCode is the Code of the handler's *plugin.ToolError, "" if the
	// error was not one. The agent sees HANDLER_ERROR whatever it is.
	HandlerCode string
	// Redacted lists what the core's sanitiser removed from the result or
	// the error message: credentials the handler leaked, which the safety
	// net caught this time. AssertNoCredentialLeak fails on any.
	Redacted []sanitize.Redaction
	// Detail is for the author only, as the host's audit log would have it:
	// the Go error behind a PLUGIN_ERROR, the panic value and stack, why a
	// result was refused. The agent never sees it.
	Detail string
}

// OK reports whether the call succeeded.
func (r Result) OK() bool { return r.Code == "" }

// String summarises the result for test messages: the JSON on success, the
// error (with its Detail) otherwise.
func (r Result) String() string {
	if r.OK() {
		return "success " + string(r.JSON)
	}
	s := string(r.Code) + ": " + r.Message
	if r.HandlerCode != "" && r.HandlerCode != string(ipc.CodeHandlerError) {
		s += " (handler code " + r.HandlerCode + ")"
	}
	if r.Detail != "" {
		s += "\ndetail: " + r.Detail
	}
	return s
}

// Invoke calls tool with args (nil means {}) the way the core does — see
// the package documentation — and returns what the agent would get. A
// handler that fails never fails the test by itself: check the Result with
// AssertSuccess or AssertError. Args that cannot be encoded as JSON fail the
// test.
func (hs *Harness) Invoke(tool string, args map[string]any, opts ...RequestOption) Result {
	hs.t.Helper()
	return hs.invoke(hs.t, tool, args, opts...)
}

func (hs *Harness) invoke(t testing.TB, tool string, args map[string]any, opts ...RequestOption) Result {
	t.Helper()
	norm, err := normalize(args)
	if err != nil {
		t.Fatalf("Invoke(%q): %v", tool, err)
	}
	req := NewRequest(tool, norm, opts...)
	r := hs.run(req)
	if r.HandlerCode != "" && ipc.Code(r.HandlerCode).Reserved() {
		t.Logf("note: %s returned a ToolError with the reserved code %s; the agent sees HANDLER_ERROR", tool, r.HandlerCode)
	}
	return r
}

// Invoke calls tool on h once, without Init, the way the core would (see
// Harness.Invoke). For handlers that need no Init, or quick checks.
func Invoke(t testing.TB, h plugin.Handler, tool string, args map[string]any, opts ...RequestOption) Result {
	t.Helper()
	return New(t, h, NoInit()).invoke(t, tool, args, opts...)
}

// run is the core's stage 6 and response path for one request: the
// handler called under its timeout, and what it did mapped to what the
// agent sees, both by core/outcome, as the pipeline does.
func (hs *Harness) run(req *plugin.Request) Result {
	res, err := outcome.Call(RequestContext(context.Background(), req), hs.timeout, func(ctx context.Context) (map[string]any, error) {
		return hs.h.Invoke(ctx, req)
	})
	o := outcome.Of(res, err, outcome.Options{Plugin: hs.name, Timeout: hs.timeout,
		Envelope: func(result json.RawMessage) []byte { return envelope(hs.name, req, result) }})
	if !o.OK() {
		return Result{Code: o.Error.Code, Message: o.Error.Message, Retriable: o.Error.Retriable, Field: o.Error.Field,
			RetryAfter: o.Error.RetryAfter, HandlerCode: o.HandlerCode, Redacted: o.Redacted, Detail: o.Detail}
	}
	dec := json.NewDecoder(bytes.NewReader(o.Result))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		return Result{Code: ipc.CodePluginError, Message: "Internal plugin error", Detail: "result is not serialisable: " + err.Error()}
	}
	return Result{Value: v, JSON: o.Result, Redacted: o.Redacted}
}

// envelope is the response frame the core would send, but for its id.
func envelope(source string, req *plugin.Request, result json.RawMessage) []byte {
	r := ipc.Response{
		ID: "00000000-0000-0000-0000-000000000000", Version: ipc.ProtocolVersion, Type: ipc.TypeResponse,
		Topic: ipc.ToolTopicPrefix + req.Tool, Source: source, Correlation: req.Correlation,
		Timestamp: time.Now().UTC(), Group: req.Group, Payload: ipc.Payload{Result: result},
	}
	b, err := json.Marshal(&r)
	if err != nil {
		return result
	}
	return b
}
