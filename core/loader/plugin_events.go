package loader

import (
	"context"
	"slices"

	"github.com/carapace-dev/carapace/core/plugin"
)

// Events reach plugins through the bus like every other subscriber: each
// healthy plugin that handles events and subscribes to topics in its
// manifest gets an in-process subscription of its own, scoped to its
// groups (grant.go), drained by one goroutine that calls HandleEvent in
// order, each call under EventTimeout. The bus owns the topic and group
// filters (exact topics; the plugin's groups and no group) and the
// backpressure rule: a plugin that falls a buffer behind loses events,
// counted and logged by the bus, and never slows a publisher or another
// subscriber.

// Channel answers and confirmations come through the plugin's mailbox
// instead (mailbox.go).

// subscribePlugin starts delivering st's subscribed events to it. Called
// once st is healthy; stopPlugin and crashed end the delivery.
func (l *Loader) subscribePlugin(st *pluginState) {
	eh, ok := st.handler.(plugin.EventHandler)
	if !ok || l.bus == nil {
		return
	}
	var topics, mail []string
	for _, t := range st.manifest.Subscribes {
		switch {
		case plugin.SurfaceTopic(t) && !st.surface:
			l.log.Warn("plugin subscribes to confirmations without the surface capability ([plugins."+st.name+"] surface = true); ignored",
				"plugin", st.name, "topic", t)
		case slices.Contains(mailTopics, t):
			mail = append(mail, t)
		default:
			topics = append(topics, t)
		}
	}
	if len(mail) > 0 {
		stop := make(chan struct{})
		l.mu.Lock()
		st.stopMail = stop
		l.mu.Unlock()
		l.deliverMail(st, eh, mail, stop)
	}
	if len(topics) == 0 {
		return
	}
	sub, err := l.bus.SubscribeIn(st.groups, topics...)
	if err != nil {
		l.log.Error("plugin cannot subscribe to its events", "plugin", st.name, "topics", topics, "err", err)
		return
	}
	l.mu.Lock()
	st.events = sub
	l.mu.Unlock()
	go func() {
		for ev := range sub.C() {
			if !st.calls.enter() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), EventTimeout)
			err := eh.HandleEvent(ctx, ev)
			cancel()
			l.callEnded(st, err)
			if err != nil {
				l.log.Warn("plugin failed to handle an event", "plugin", st.name, "topic", ev.Topic, "err", err)
			}
			st.calls.leave()
		}
	}()
}

// unsubscribePlugin ends the delivery of events to st.
func (l *Loader) unsubscribePlugin(st *pluginState) {
	l.mu.Lock()
	sub, stop := st.events, st.stopMail
	st.events, st.stopMail = nil, nil
	l.mu.Unlock()
	if stop != nil {
		close(stop)
	}
	if sub != nil {
		_ = sub.Close()
	}
}
