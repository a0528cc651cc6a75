package server

import (
	"context"
	"fmt"
	"os"

	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/manifest"
)

var _ control.Backend = (*Server)(nil)

// Status implements control.Backend.
func (s *Server) Status(context.Context) control.Status {
	st := control.Status{
		Version: s.opts.Version, PID: os.Getpid(), Started: s.started, Home: string(s.opts.Home),
		Sessions: s.sessions.Len(), PendingConfirmations: s.gate.Len(), Tools: s.catalog.Len(),
		Draining: s.pipe.Draining(),
	}
	st.Plugins = s.plugins.Statuses()
	st.Engines = s.agents.Engines()
	return st
}

// Stop implements control.Backend.
func (s *Server) Stop() { s.once.Do(func() { close(s.stop) }) }

// OpenSession implements control.Backend. With the runtime "none" the
// client runs the agent; otherwise the core runs it in a container.
func (s *Server) OpenSession(ctx context.Context, req control.SessionRequest) (control.Session, *control.Agent, error) {
	if s.pipe.Draining() {
		return control.Session{}, nil, fmt.Errorf("the core is shutting down: %w", control.ErrConflict)
	}
	return s.agents.Open(ctx, req)
}

// CloseSession implements control.Backend.
func (s *Server) CloseSession(ctx context.Context, id string) error { return s.agents.Close(ctx, id) }

// Sessions implements control.Backend.
func (s *Server) Sessions(context.Context) []control.Session {
	var out []control.Session
	for _, i := range s.sessions.List() {
		out = append(out, s.agents.View(i))
	}
	return out
}

// RestartPlugin implements control.Backend.
func (s *Server) RestartPlugin(ctx context.Context, name string) (control.PluginStatus, error) {
	if err := manifest.CheckPluginName(name); err != nil {
		return control.PluginStatus{}, fmt.Errorf("%w: %w", control.ErrInvalid, err)
	}
	if s.pipe.Draining() {
		return control.PluginStatus{}, fmt.Errorf("the core is shutting down: %w", control.ErrConflict)
	}
	return s.plugins.Restart(ctx, name)
}
