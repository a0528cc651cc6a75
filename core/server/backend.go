package server

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/manifest"
	"github.com/carapace-dev/carapace/core/plugin"
)

var (
	_ control.Backend       = (*Server)(nil)
	_ control.ProveBackend  = (*Server)(nil)
	_ control.VerifyBackend = (*Server)(nil)
)

// Status implements control.Backend.
func (s *Server) Status(context.Context) api.Status {
	st := api.Status{
		Version: s.opts.Version, PID: os.Getpid(), Started: s.started, Home: string(s.opts.Home),
		Sessions: s.sessions.Len(), PendingConfirmations: s.gate.Len(), Tools: s.catalog.Len(),
		Draining: s.pipe.Draining(), Paused: s.agents.Paused(), ConfigDigest: s.cfg.Digest,
	}
	st.Plugins = s.plugins.Statuses()
	st.Engines = s.agents.Engines()
	st.Warm = s.agents.WarmContainers()
	return st
}

// Pause implements control.Backend: audited, and told to the watchers
// (core.status).
func (s *Server) Pause(ctx context.Context, paused bool) api.Status {
	if s.agents.Paused() != paused {
		s.agents.SetPaused(paused)
		reason := "resumed: sessions start for events again"
		if paused {
			reason = "paused: no session starts for events until resumed"
		}
		_ = s.audit.Write(&audit.Entry{Source: "core", Stage: audit.StageCore, Outcome: audit.OutcomeOK, Reason: reason})
		s.log.Info("core "+strings.SplitN(reason, ":", 2)[0], "paused", paused)
		st := s.Status(ctx)
		s.bus.PublishCore(plugin.TopicCoreStatus.Event("", st))
		return st
	}
	return s.Status(ctx)
}

// Paused reports whether sessions for events are paused (the loader's
// Core, for plugins' Services.Paused).
func (s *Server) Paused() bool { return s.agents.Paused() }

// Stop implements control.Backend.
func (s *Server) Stop() { s.once.Do(func() { close(s.stop) }) }

// OpenSession implements control.Backend. With the runtime "none" the
// client runs the agent; otherwise the core runs it in a container.
func (s *Server) OpenSession(ctx context.Context, req api.SessionRequest) (api.Session, *api.Agent, error) {
	if s.pipe.Draining() {
		return api.Session{}, nil, fmt.Errorf("the core is shutting down: %w", api.ErrConflict)
	}
	return s.agents.Open(ctx, req)
}

// CloseSession implements control.Backend.
func (s *Server) CloseSession(ctx context.Context, id string) error { return s.agents.Close(ctx, id) }

// Sessions implements control.Backend.
func (s *Server) Sessions(context.Context) []api.Session {
	var out []api.Session
	for _, i := range s.sessions.List() {
		out = append(out, s.agents.View(i))
	}
	return out
}

// RestartPlugin implements control.Backend.
func (s *Server) RestartPlugin(ctx context.Context, name string) (api.PluginStatus, error) {
	if err := manifest.CheckPluginName(name); err != nil {
		return api.PluginStatus{}, fmt.Errorf("%w: %w", api.ErrInvalid, err)
	}
	if s.pipe.Draining() {
		return api.PluginStatus{}, fmt.Errorf("the core is shutting down: %w", api.ErrConflict)
	}
	return s.plugins.Restart(ctx, name)
}

// VerifyPlugin implements control.VerifyBackend: plugin name's own check
// of its setup (core/loader's Verify), refused while the core stops.
func (s *Server) VerifyPlugin(ctx context.Context, name string) (api.PluginCheck, error) {
	if err := manifest.CheckPluginName(name); err != nil {
		return api.PluginCheck{}, fmt.Errorf("%w: %w", api.ErrInvalid, err)
	}
	if s.pipe.Draining() {
		return api.PluginCheck{}, fmt.Errorf("the core is shutting down: %w", api.ErrConflict)
	}
	return s.plugins.Verify(ctx, name)
}

// Confirmations implements control.Backend.
func (s *Server) Confirmations(_ context.Context, recent bool) []api.Confirmation {
	return s.gate.List(recent)
}

// RawConfirmation implements control.Backend.
func (s *Server) RawConfirmation(_ context.Context, id string) (api.Confirmation, error) {
	return s.gate.Raw(id)
}

// Decide implements control.Backend and the loader's Core: the control
// API's decisions and the surface plugins' both end in the gate's one
// Decide (core/confirm).
func (s *Server) Decide(_ context.Context, d api.Decision) (api.Confirmation, error) {
	return s.gate.Decide(d)
}

// SessionOrigin names the plugin whose event started session id (the
// surface services let a plugin stop only those).
func (s *Server) SessionOrigin(id string) string {
	if s.agents == nil {
		return ""
	}
	return s.agents.SessionOrigin(id)
}

// Prove implements control.ProveBackend: the proof on this machine
// (core/prove), refused while the core stops.
func (s *Server) Prove(ctx context.Context, req api.ProveRequest, progress func(api.ProveEvent)) (api.ProveReport, error) {
	if s.pipe.Draining() {
		return api.ProveReport{}, fmt.Errorf("the core is shutting down: %w", api.ErrConflict)
	}
	rep, err := s.prover.Run(ctx, req, progress)
	if err != nil {
		return rep, err
	}
	// The proof is in the trail: when it ran and how it came out (each
	// check's detail goes to whoever asked).
	e := &audit.Entry{Source: "core", Stage: audit.StageCore, Outcome: audit.OutcomeOK,
		Reason: fmt.Sprintf("doctor --prove: %d of %d promises held", len(rep.Checks)-rep.Failed(), len(rep.Checks))}
	if n := rep.Failed(); n > 0 {
		var failed []string
		for _, c := range rep.Checks {
			if !c.Passed {
				failed = append(failed, c.Name)
			}
		}
		e.Outcome, e.Reason = audit.OutcomeError, e.Reason+"; failed: "+strings.Join(failed, ", ")
	}
	if err := s.audit.Write(e); err != nil {
		s.log.Error("audit the proof", "err", err)
	}
	return rep, nil
}
