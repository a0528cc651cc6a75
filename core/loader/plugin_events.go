package loader

import (
	"context"
	"strings"

	"github.com/carapace-dev/carapace/core/plugin"
)

// Events reach plugins through the bus like every other subscriber: each
// healthy plugin that handles events and subscribes to topics in its
// manifest gets an in-process subscription of its own, drained by one
// goroutine that calls HandleEvent in order, each call under EventTimeout.
// The bus owns the topic filter (exact topics) and the backpressure rule: a
// plugin that falls a buffer behind loses events, counted and logged by the
// bus, and never slows a publisher or another subscriber.

// Topics no plugin gets merely by subscribing. confirmation.* carries the
// arguments of every group's calls: only a plugin granted the surface
// capability is given it. channel.* answers one channel's events: each
// event goes only to the plugin it names (plugin.ChannelReply's Plugin).
const (
	confirmationTopics = "confirmation."
	channelTopics      = "channel."
)

// wants reports whether st may be given ev.
func (l *Loader) wants(st *pluginState, ev *plugin.Event) bool {
	if strings.HasPrefix(ev.Topic, channelTopics) {
		to, _ := ev.Payload["plugin"].(string)
		return to == st.name
	}
	return true
}

// subscribePlugin starts delivering st's subscribed events to it. Called
// once st is healthy; stopPlugin and crashed end the delivery.
func (l *Loader) subscribePlugin(st *pluginState) {
	eh, ok := st.handler.(plugin.EventHandler)
	if !ok || l.bus == nil {
		return
	}
	var topics []string
	for _, t := range st.manifest.Subscribes {
		if strings.HasPrefix(t, confirmationTopics) && !st.surface {
			l.log.Warn("plugin subscribes to confirmations without the surface capability ([plugins."+st.name+"] surface = true); ignored",
				"plugin", st.name, "topic", t)
			continue
		}
		topics = append(topics, t)
	}
	if len(topics) == 0 {
		return
	}
	sub, err := l.bus.Subscribe(topics...)
	if err != nil {
		l.log.Error("plugin cannot subscribe to its events", "plugin", st.name, "topics", topics, "err", err)
		return
	}
	l.mu.Lock()
	st.events = sub
	l.mu.Unlock()
	go func() {
		for ev := range sub.C() {
			if !l.wants(st, ev) || !st.calls.enter() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), EventTimeout)
			if err := eh.HandleEvent(ctx, ev); err != nil {
				l.log.Warn("plugin failed to handle an event", "plugin", st.name, "topic", ev.Topic, "err", err)
			}
			cancel()
			st.calls.leave()
		}
	}()
}

// unsubscribePlugin ends the delivery of events to st.
func (l *Loader) unsubscribePlugin(st *pluginState) {
	l.mu.Lock()
	sub := st.events
	st.events = nil
	l.mu.Unlock()
	if sub != nil {
		_ = sub.Close()
	}
}
