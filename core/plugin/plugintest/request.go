package plugintest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
)

// Defaults of NewRequest.
const (
	DefaultGroup       = "test-group"
	DefaultSession     = "test-session"
	DefaultCorrelation = "test-correlation"
	DefaultEnvelopeID  = "test-envelope"
)

// RequestOption changes a request built by NewRequest or Harness.Invoke.
type RequestOption func(*plugin.Request)

// WithGroup sets the request's group (default DefaultGroup).
func WithGroup(g string) RequestOption { return func(r *plugin.Request) { r.Group = g } }

// WithSession sets the request's session id (default DefaultSession).
func WithSession(id string) RequestOption { return func(r *plugin.Request) { r.Session = id } }

// WithCorrelation sets the request's correlation id (default
// DefaultCorrelation).
func WithCorrelation(c string) RequestOption { return func(r *plugin.Request) { r.Correlation = c } }

// WithEnvelopeID sets the core's id of the request (default
// DefaultEnvelopeID).
func WithEnvelopeID(id string) RequestOption { return func(r *plugin.Request) { r.EnvelopeID = id } }

// WithTime sets when the core received the request (default: now, UTC).
func WithTime(t time.Time) RequestOption { return func(r *plugin.Request) { r.Time = t } }

// NewRequest builds the request the core would hand a handler: the tool,
// the arguments in the form the core decodes them (through JSON, numbers as
// json.Number; nil means {}), and the request context with test defaults.
// It panics if args cannot be encoded as JSON, which no agent could send.
func NewRequest(tool string, args map[string]any, opts ...RequestOption) *plugin.Request {
	norm, err := normalize(args)
	if err != nil {
		panic(fmt.Sprintf("plugintest.NewRequest(%q): %v", tool, err))
	}
	r := &plugin.Request{
		Tool: tool, Arguments: norm,
		Group: DefaultGroup, Session: DefaultSession, Correlation: DefaultCorrelation,
		EnvelopeID: DefaultEnvelopeID, Time: time.Now().UTC(),
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Args decodes a JSON object the way the core decodes arguments (numbers as
// json.Number), failing the test if js is not one.
//
//	h.Invoke("add_note", plugintest.Args(t, `{"text": "buy milk", "priority": 2}`))
func Args(t testing.TB, js string) map[string]any {
	t.Helper()
	v, err := decodeObject([]byte(js))
	if err != nil {
		t.Fatalf("plugintest.Args: %v", err)
	}
	return v
}

// normalize passes args through JSON as the core does.
func normalize(args map[string]any) (map[string]any, error) {
	if args == nil {
		return map[string]any{}, nil
	}
	b, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("arguments cannot be encoded as JSON: %w", err)
	}
	return decodeObject(b)
}

func decodeObject(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if v == nil {
		return nil, fmt.Errorf("not a JSON object: null")
	}
	if dec.More() {
		return nil, fmt.Errorf("not a JSON object: text after the object")
	}
	return v, nil
}

type requestKey struct{}

// RequestContext returns a context carrying req, as the ctx the core passes
// to Invoke does: Services reads the request's group and session from it.
// The Harness does this itself; use it to call a handler's internals or
// Services directly.
func RequestContext(parent context.Context, req *plugin.Request) context.Context {
	return context.WithValue(parent, requestKey{}, req)
}

func requestFrom(ctx context.Context) (*plugin.Request, bool) {
	r, ok := ctx.Value(requestKey{}).(*plugin.Request)
	return r, ok && r != nil
}
