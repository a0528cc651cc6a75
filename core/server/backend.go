package server

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/carapace-dev/carapace/core/confirm"
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
	return st
}

// Stop implements control.Backend.
func (s *Server) Stop() { s.once.Do(func() { close(s.stop) }) }

// OpenSession implements control.Backend. Sessions opened through the
// control API run their agent outside any container (runtime "none").
func (s *Server) OpenSession(_ context.Context, group string) (control.Session, error) {
	if s.pipe.Draining() {
		return control.Session{}, fmt.Errorf("the core is shutting down: %w", control.ErrConflict)
	}
	info, err := s.sessions.Open(group, "none")
	if err != nil {
		return control.Session{}, fmt.Errorf("%w: %w", control.ErrInvalid, err)
	}
	if err := s.assembleSkills(info.ID); err != nil {
		_ = s.sessions.Close(info.ID)
		return control.Session{}, err
	}
	return s.toControl(info), nil
}

// CloseSession implements control.Backend.
func (s *Server) CloseSession(_ context.Context, id string) error {
	if err := s.sessions.Close(id); err != nil {
		if errors.Is(err, session.ErrNotFound) {
			return fmt.Errorf("%w: %w", control.ErrNotFound, err)
		}
		return err
	}
	s.removeSkills(id)
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
	return control.Session{ID: i.ID, Group: i.Group, Socket: i.Socket, Runtime: i.Runtime, Started: i.Started, Skills: s.skillsDir(i.ID)}
}

// Confirmations implements control.Backend.
func (s *Server) Confirmations(context.Context) []control.Confirmation {
	var out []control.Confirmation
	for _, p := range s.gate.List() {
		out = append(out, control.Confirmation{
			ID: p.ID, Session: p.Session, Group: p.Group, Tool: p.Tool, Correlation: p.Correlation,
			ArgsHash: p.ArgsHash, Arguments: p.Display, Created: p.Created, Expires: p.Expires,
		})
	}
	return out
}

// Decide implements control.Backend.
func (s *Server) Decide(_ context.Context, id string, approve bool, argsHash string) error {
	err := s.gate.Decide(id, approve, argsHash)
	switch {
	case errors.Is(err, confirm.ErrNotFound):
		return fmt.Errorf("%w: %w", control.ErrNotFound, err)
	case errors.Is(err, confirm.ErrMismatch):
		return fmt.Errorf("%w: %w", control.ErrConflict, err)
	}
	if err == nil {
		verb := "denied"
		if approve {
			verb = "approved"
		}
		s.log.Info("confirmation "+verb, "id", id)
	}
	return err
}
