package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/events"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/session"
)

// openBus opens the event bus at $CARAPACE_HOME/run/events.sock and takes
// the spawner's subscription at once, so that no event published while the
// plugins start is lost; startSpawner starts the spawner once the agent
// runner exists. The returned function closes the bus and waits for the
// spawner to end.
func (s *Server) openBus() (func(), error) {
	bus, err := events.Open(events.SocketPath(s.opts.Home), events.Options{Logger: s.log.With("component", "events")})
	if err != nil {
		return nil, fmt.Errorf("event bus: %w", err)
	}
	sub, err := bus.Subscribe(config.SpawnTopics...)
	if err != nil {
		bus.Close()
		return nil, fmt.Errorf("event bus: %w", err)
	}
	s.bus, s.spawnSub = bus, sub
	s.spawnerDone = make(chan struct{})
	return func() {
		_ = bus.Close() // closes sub: the spawner ends
		select {
		case <-s.spawnerDone:
		case <-time.After(5 * time.Second):
		}
	}, nil
}

// confirmationBus is the confirmation gate's Publisher: the bus, under
// the plugin SDK's confirmation topics.
type confirmationBus struct{ bus *events.Bus }

func (p confirmationBus) ConfirmationRequested(c api.Confirmation) {
	p.bus.PublishCore(plugin.TopicConfirmationRequested.Event(c.Group, c))
}

func (p confirmationBus) ConfirmationResolved(c api.Confirmation) {
	p.bus.PublishCore(plugin.TopicConfirmationResolved.Event(c.Group, c))
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

// startSpawner starts sessions for the events the bus holds for it.
func (s *Server) startSpawner() {
	go func() { defer close(s.spawnerDone); s.agents.Spawn(s.spawnSub) }()
}

// Changes implements control.Backend: for a watch, a cut-off subscription
// to the watch topics on the bus (control's watch source takes its
// snapshot once this is open).
func (s *Server) Changes() (control.Changes, error) {
	sub, err := s.bus.SubscribeCutOff(api.WatchTopics...)
	if err != nil {
		if errors.Is(err, events.ErrClosed) {
			return nil, fmt.Errorf("the core is shutting down: %w", api.ErrConflict)
		}
		return nil, fmt.Errorf("watch: %w", err)
	}
	return busChanges{sub}, nil
}

// busChanges are a watch's changes: the core's own events of its
// subscription, their payloads the bytes the bus carries.
type busChanges struct{ sub *events.Subscription }

// Next implements control.Changes.
func (f busChanges) Next(ctx context.Context) (control.Change, error) {
	for {
		select {
		case ev, ok := <-f.sub.C():
			if !ok {
				return control.Change{}, control.ErrStopping
			}
			if ev.Source != "core" {
				continue // the watch shows the core's own changes (plugins cannot publish these topics either)
			}
			return control.Change{Type: ev.Topic, Time: ev.Time, Payload: ev.Payload}, nil
		case <-f.sub.Cut():
			return control.Change{}, control.ErrCutOff
		case <-ctx.Done():
			return control.Change{}, ctx.Err()
		}
	}
}

// Close implements control.Changes.
func (f busChanges) Close() { _ = f.sub.Close() }
