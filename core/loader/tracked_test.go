package loader

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/carapace-dev/carapace/core/outcome"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/pluginhost"
)

type fakeHandler func() (map[string]any, error)

func (f fakeHandler) Init(context.Context, map[string]any, plugin.Services) error { return nil }
func (f fakeHandler) Shutdown(context.Context) error                              { return nil }
func (f fakeHandler) Invoke(context.Context, *plugin.Request) (map[string]any, error) {
	return f()
}

// TestTrackedMapsHandlerFailures checks how the catalogue's wrapper turns
// an out-of-process handler's failures into what the pipeline reports.
func TestTrackedMapsHandlerFailures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		check func(error) bool
	}{
		{"non-object result is the handler's error", &pluginhost.ResultError{JSONType: "array"}, func(err error) bool {
			te, ok := plugin.AsToolError(err)
			return ok && te.Code == "HANDLER_ERROR" && te.Message == "Handler returned a JSON array, not an object"
		}},
		{"dead process is unavailable", fmt.Errorf("plugin x: %w", pluginhost.ErrUnavailable), func(err error) bool {
			return errors.Is(err, outcome.ErrUnavailable)
		}},
		{"crash mid-call stays a plugin error", fmt.Errorf("plugin x: %w", pluginhost.ErrCrashed), func(err error) bool {
			_, isTool := plugin.AsToolError(err)
			return !isTool && !errors.Is(err, outcome.ErrUnavailable) && errors.Is(err, pluginhost.ErrCrashed)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &pluginState{name: "x", handler: fakeHandler(func() (map[string]any, error) { return nil, tc.err })}
			_, err := (&tracked{st: st}).Invoke(context.Background(), &plugin.Request{Tool: "t"})
			if !tc.check(err) {
				t.Fatalf("Invoke error %v (%T)", err, err)
			}
		})
	}
	t.Run("stopping refuses new calls", func(t *testing.T) {
		called := false
		st := &pluginState{name: "x", handler: fakeHandler(func() (map[string]any, error) { called = true; return map[string]any{}, nil })}
		st.calls.closeAndWait(context.Background())
		_, err := (&tracked{st: st}).Invoke(context.Background(), &plugin.Request{Tool: "t"})
		if !errors.Is(err, outcome.ErrUnavailable) || called {
			t.Fatalf("Invoke on a stopping plugin: %v, handler called %v", err, called)
		}
	})
}
