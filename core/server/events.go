package server

import (
	"context"
	"fmt"
	"time"

	"github.com/carapace-dev/carapace/core/events"
	"github.com/carapace-dev/carapace/core/plugin"
)

// coreEvent publishes one of the core's own events (plugin and agent
// lifecycle) on the bus.
func (s *Server) coreEvent(topic, group string, payload map[string]any) {
	if s.bus == nil {
		return
	}
	ev := &plugin.Event{Topic: topic, Group: group, Source: "core", Payload: payload}
	if err := s.bus.Publish(context.Background(), ev); err != nil {
		s.log.Warn("could not publish an event", "topic", topic, "err", err)
	}
}

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
	sub, err := bus.Subscribe(events.TopicMessageInbound, events.TopicTaskTriggered)
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

// startSpawner starts sessions for the events the bus holds for it.
func (s *Server) startSpawner() {
	go func() { defer close(s.spawnerDone); s.agents.Spawn(s.spawnSub) }()
}
