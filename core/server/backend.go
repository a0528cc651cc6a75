package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/session"
)

var _ control.Backend = (*Server)(nil)

// Status implements control.Backend.
func (s *Server) Status(context.Context) control.Status {
	st := control.Status{
		Version: s.opts.Version, PID: os.Getpid(), Started: s.started, Home: string(s.opts.Home),
		Sessions: s.sessions.Len(), PendingConfirmations: s.gate.Len(), Tools: s.catalog.Len(),
		Draining: s.pipe.Draining(),
	}
	s.mu.Lock()
	ps := append([]*pluginState(nil), s.plugins...)
	s.mu.Unlock()
	for _, p := range ps {
		st.Plugins = append(st.Plugins, s.pluginStatus(p))
	}
	st.Engines = s.engineStatus()
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
	if req.Runtime != "" && req.Runtime != "none" {
		return s.openContainerSession(ctx, req)
	}
	info, err := s.sessions.Open(req.Group, "none")
	if err != nil {
		return control.Session{}, nil, fmt.Errorf("%w: %w", control.ErrInvalid, err)
	}
	if err := s.prepareAgent(ctx, info.ID, req.Group, info.Runtime, ""); err != nil {
		_ = s.sessions.Close(info.ID)
		return control.Session{}, nil, err
	}
	return s.toControl(info), nil, nil
}

// CloseSession implements control.Backend.
func (s *Server) CloseSession(_ context.Context, id string) error {
	s.stopContainer(id)
	if err := s.sessions.Close(id); err != nil {
		if errors.Is(err, session.ErrNotFound) {
			return fmt.Errorf("%w: %w", control.ErrNotFound, err)
		}
		return err
	}
	s.removeAgent(id)
	return nil
}

// Sessions implements control.Backend.
func (s *Server) Sessions(context.Context) []control.Session {
	var out []control.Session
	for _, i := range s.sessions.List() {
		out = append(out, s.toControl(i))
	}
	return out
}

func (s *Server) toControl(i session.Info) control.Session {
	return control.Session{ID: i.ID, Group: i.Group, Socket: i.Socket, Runtime: i.Runtime, Started: i.Started,
		Skills: filepath.Join(s.agentDir(i.ID), "skills"), ClaudeMD: filepath.Join(s.agentDir(i.ID), claudeFile)}
}
