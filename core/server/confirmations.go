package server

import (
	"context"
	"encoding/json"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/confirm"
	"github.com/carapace-dev/carapace/core/events"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/session"
)

// newGate returns the confirmation gate of config.toml's [confirm]: it
// audits each change in the audit log and publishes it on the bus
// (core/confirm's record.go says who hears of a confirmation).
func (s *Server) newGate() *confirm.Gate {
	return confirm.New(confirm.Options{
		Timeout:    s.cfg.Confirm.Timeout.Duration,
		MaxPending: s.cfg.Confirm.MaxPending,
		Audit:      s.audit,
		Publish:    confirmationBus{s.bus},
		Logger:     s.log,
	})
}

// confirmationBus is the gate's Publisher: the bus, under the plugin
// SDK's confirmation topics.
type confirmationBus struct{ bus *events.Bus }

func (p confirmationBus) ConfirmationRequested(c api.Confirmation) {
	p.bus.PublishCore(plugin.TopicConfirmationRequested.Event(c.Group, c))
}

func (p confirmationBus) ConfirmationResolved(c api.Confirmation) {
	p.bus.PublishCore(plugin.TopicConfirmationResolved.Event(c.Group, c))
}

// Confirmations implements control.Backend.
func (s *Server) Confirmations(_ context.Context, recent bool) []api.Confirmation {
	return s.gate.List(recent)
}

// RawArguments implements control.Backend.
func (s *Server) RawArguments(_ context.Context, id string) (json.RawMessage, error) {
	return s.gate.Raw(id)
}

// Decide implements control.Backend and the loader's Core: the control
// API's decisions and the surface plugins' both end in the gate's one
// Decide.
func (s *Server) Decide(_ context.Context, d api.Decision) (api.Confirmation, error) {
	return s.gate.Decide(d)
}

// observeSession publishes session.opened and session.closed; a session
// that closes withdraws its pending confirmations.
func (s *Server) observeSession(info session.Info, opened bool) {
	topic := plugin.TopicSessionOpened
	if !opened {
		topic = plugin.TopicSessionClosed
		s.gate.WithdrawSession(info.ID, "the session closed")
	}
	s.bus.PublishCore(topic.Event(info.Group, s.agents.View(info)))
}
