package server

import (
	"fmt"
	"time"

	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/events"
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

// startSpawner starts sessions for the events the bus holds for it.
func (s *Server) startSpawner() {
	go func() { defer close(s.spawnerDone); s.agents.Spawn(s.spawnSub) }()
}
