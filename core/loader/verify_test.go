package loader

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/plugin"
)

// plainHandler has no check of its own.
type plainHandler struct{}

func (plainHandler) Init(context.Context, map[string]any, plugin.Services) error { return nil }
func (plainHandler) Invoke(context.Context, *plugin.Request) (map[string]any, error) {
	return nil, nil
}
func (plainHandler) Shutdown(context.Context) error { return nil }

// checkingHandler answers Verify with res and err, or waits for ctx when
// block is set.
type checkingHandler struct {
	plainHandler
	res   *plugin.VerifyResult
	err   error
	block bool
}

func (h checkingHandler) Verify(ctx context.Context) (*plugin.VerifyResult, error) {
	if h.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return h.res, h.err
}

// TestVerify: the loader runs a serving plugin's own check and gives the
// user its words and fix, made one printable bounded line; a plugin
// without a check (in process, or out of process answering "not
// implemented") is not checked; one that is not serving, or unknown, is
// refused; a check that hangs is cut at the timeout.
func TestVerify(t *testing.T) {
	defer func(d time.Duration) { verifyTimeout = d }(verifyTimeout)
	verifyTimeout = 200 * time.Millisecond
	l := New(Options{})
	add := func(name, state string, h plugin.Handler) {
		l.plugins = append(l.plugins, &pluginState{name: name, state: state, handler: h})
	}
	add("good", stateHealthy, checkingHandler{res: &plugin.VerifyResult{OK: true, Message: "logged in;\n3 calendars"}})
	add("bad", stateHealthy, checkingHandler{res: &plugin.VerifyResult{OK: false, Message: "refused\x1b[31m", Fix: "carapace auth set --plugin bad --key k"}})
	add("long", stateHealthy, checkingHandler{res: &plugin.VerifyResult{OK: false, Message: strings.Repeat("x", 5000)}})
	add("plain", stateHealthy, plainHandler{})
	add("remote-plain", stateHealthy, checkingHandler{err: fmt.Errorf("plugin remote-plain: verify: %w", plugin.ErrNotImplemented)})
	add("broken", stateHealthy, checkingHandler{err: errors.New("plugin broken: verify: handler panicked: boom")})
	add("nil", stateHealthy, checkingHandler{})
	add("hung", stateHealthy, checkingHandler{block: true})
	add("failed", stateFailed, checkingHandler{res: &plugin.VerifyResult{OK: true}})

	for _, tc := range []struct {
		name    string
		want    api.PluginCheck
		message string // a part of the message, when want's is empty
		err     error
	}{
		{name: "good", want: api.PluginCheck{Name: "good", Checked: true, OK: true, Message: "logged in; 3 calendars"}},
		{name: "bad", want: api.PluginCheck{Name: "bad", Checked: true, Message: `refused\u001b[31m`, Fix: "carapace auth set --plugin bad --key k"}},
		{name: "plain", want: api.PluginCheck{Name: "plain"}},
		{name: "remote-plain", want: api.PluginCheck{Name: "remote-plain"}},
		{name: "broken", want: api.PluginCheck{Name: "broken", Checked: true}, message: "the plugin's check failed: plugin broken: verify: handler panicked: boom"},
		{name: "nil", want: api.PluginCheck{Name: "nil", Checked: true}, message: "answered nothing"},
		{name: "hung", want: api.PluginCheck{Name: "hung", Checked: true}, message: "did not answer within 200ms"},
		{name: "failed", err: api.ErrConflict},
		{name: "nope", err: api.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := l.Verify(t.Context(), tc.name)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("Verify: %+v, %v; want %v", got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.message != "" {
				if !strings.Contains(got.Message, tc.message) {
					t.Fatalf("message %q, want %q in it", got.Message, tc.message)
				}
				got.Message = ""
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	got, err := l.Verify(t.Context(), "long")
	if err != nil || len(got.Message) > api.MaxPluginCheckText+len("…") || !strings.HasSuffix(got.Message, "…") {
		t.Fatalf("a long message: %d bytes, %v", len(got.Message), err)
	}
}
