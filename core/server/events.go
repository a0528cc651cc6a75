package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/control"
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

// spawn starts agent sessions for the events that name a configured group
// ([groups.NAME] in config.toml) with one of its topics; the payload's
// "text" is the prompt. Events of other groups, and those with no text,
// are logged and dropped. It runs until the subscription closes.
func (s *Server) spawn(sub *events.Subscription) {
	for ev := range sub.C() {
		g, ok := s.cfg.Groups[ev.Group]
		if !ok || !slices.Contains(g.Topics, ev.Topic) {
			s.log.Info("event dropped: its group is not configured to start agent sessions ([groups.NAME] in config.toml)",
				"topic", ev.Topic, "group", ev.Group, "source", ev.Source, "event", ev.ID)
			continue
		}
		text, _ := ev.Payload["text"].(string)
		if strings.TrimSpace(text) == "" {
			s.log.Warn("event dropped: no text for the agent", "topic", ev.Topic, "group", ev.Group, "source", ev.Source, "event", ev.ID)
			continue
		}
		go s.runForEvent(ev, text)
	}
}

// runForEvent runs one agent session for ev and logs how it went. The
// session waits in its group's queue when the group is busy; past the
// queue the event is dropped (logged by openContainerSession).
func (s *Server) runForEvent(ev *plugin.Event, text string) {
	ctx := context.Background()
	sess, agent, err := s.openContainerSession(ctx, control.SessionRequest{Group: ev.Group, Runtime: "container", Prompt: text})
	if err != nil {
		s.log.Warn("event dropped: no agent session could start", "topic", ev.Topic, "group", ev.Group, "event", ev.ID, "err", err)
		_ = s.audit.Write(&audit.Entry{Source: "core", Group: ev.Group, Topic: ev.Topic, ID: ev.ID, Stage: audit.StageEvent,
			Outcome: audit.OutcomeRejected, Reason: "no agent session could start: " + clip(oneLine(err.Error()), 500)})
		return
	}
	s.log.Info("agent session started for an event", "session", sess.ID, "group", ev.Group, "topic", ev.Topic, "event", ev.ID)
	var bytes int
	for o := range agent.Output {
		bytes += len(o.Data)
		switch {
		case o.Exit != nil:
			s.log.Info("agent session for an event ended", "session", sess.ID, "exit", *o.Exit, "output_bytes", bytes)
		case o.Error != "":
			s.log.Warn("agent session for an event failed", "session", sess.ID, "err", o.Error)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, stopTimeout)
	defer cancel()
	_ = s.CloseSession(cctx, sess.ID)
}

// agentEvent publishes agent.started, or agent.completed / agent.error
// with the exit status or the error.
func (s *Server) agentEvent(topic, session, group string, detail map[string]any) {
	p := map[string]any{"session": session}
	for k, v := range detail {
		p[k] = v
	}
	s.coreEvent(topic, group, p)
}

// openBus opens the event bus at $CARAPACE_HOME/run/events.sock and
// starts the spawner. The returned function closes both.
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
	s.bus = bus
	done := make(chan struct{})
	go func() { defer close(done); s.spawn(sub) }()
	return func() {
		_ = bus.Close() // closes sub: the spawner ends
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
	}, nil
}
