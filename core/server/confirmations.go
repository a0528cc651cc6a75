package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/confirm"
	"github.com/carapace-dev/carapace/core/control"
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

// Watch implements control.Backend: a cut-off subscription to the watch
// topics on the bus, taken before the snapshot so that nothing falls
// between them.
func (s *Server) Watch(ctx context.Context) (*control.Watch, error) {
	sub, err := s.bus.SubscribeCutOff(api.WatchTopics...)
	if err != nil {
		if errors.Is(err, events.ErrClosed) {
			return nil, fmt.Errorf("the core is shutting down: %w", api.ErrConflict)
		}
		return nil, fmt.Errorf("watch: %w", err)
	}
	st := s.Status(ctx)
	snap := api.WatchEvent{Type: api.WatchSnapshot, Time: time.Now().UTC(), Status: &st,
		Sessions: s.Sessions(ctx), Confirmations: s.Confirmations(ctx, false), Plugins: st.Plugins}
	if ts, err := s.Tasks(ctx); err == nil {
		snap.Tasks = ts
	} else {
		s.log.Warn("watch: the tasks could not be listed for the snapshot", "err", err)
	}
	out := make(chan api.WatchEvent)
	done := make(chan struct{})
	var (
		mu    sync.Mutex
		ended string
	)
	end := func(why string) {
		mu.Lock()
		ended = why
		mu.Unlock()
	}
	go func() {
		defer close(out)
		for {
			select {
			case ev, ok := <-sub.C():
				if !ok {
					end("the core is stopping")
					return
				}
				if ev.Source != "core" {
					continue // the watch shows the core's own changes (plugins cannot publish these topics either)
				}
				we, err := watchEvent(ev)
				if err != nil {
					s.log.Warn("watch: an event could not be converted; skipped", "topic", ev.Topic, "err", err)
					continue
				}
				select {
				case out <- we:
				case <-sub.Cut():
					end(cutOff)
					return
				case <-done:
					return
				}
			case <-sub.Cut():
				end(cutOff)
				return
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return &control.Watch{
		Snapshot: snap,
		Events:   out,
		Ended: func() string {
			mu.Lock()
			defer mu.Unlock()
			return ended
		},
		Close: func() { once.Do(func() { close(done); _ = sub.Close() }) },
	}, nil
}

// cutOff is why a watch that fell behind ends.
const cutOff = "the watcher fell behind and was cut off; watch again for a fresh snapshot"

// watchEvent turns a bus event of a watch topic into its line.
func watchEvent(ev *plugin.Event) (api.WatchEvent, error) {
	we := api.WatchEvent{Type: ev.Topic, Time: ev.Time}
	var err error
	switch ev.Topic {
	case api.WatchConfirmationRequested, api.WatchConfirmationResolved:
		we.Confirmation = new(api.Confirmation)
		err = ev.Decode(we.Confirmation)
	case api.WatchSessionOpened, api.WatchSessionClosed:
		we.Session = new(api.Session)
		err = ev.Decode(we.Session)
	case api.WatchPluginHealth:
		we.Plugin = new(api.PluginStatus)
		err = ev.Decode(we.Plugin)
	case api.WatchStatus:
		we.Status = new(api.Status)
		err = ev.Decode(we.Status)
	case api.WatchTaskCreated, api.WatchTaskChanged, api.WatchTaskFired, api.WatchTaskFinished, api.WatchTaskRemoved:
		var p plugin.TaskChange
		err = ev.Decode(&p)
		we.Task, we.TaskRun = &p.Task, p.Run
	}
	return we, err
}
