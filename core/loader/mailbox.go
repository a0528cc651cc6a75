package loader

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/carapace-dev/carapace/core/events"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/pluginhost"
)

// Some events a plugin must not miss. A channel's answers —
// channel.started and channel.reply, for the events it published — carry
// the agent's answer, which exists nowhere else, and its chat waits for
// them; a surface's confirmations are approvals it shows, and must also
// stop showing. So these do not reach the plugin through its own bus
// subscription, which loses what comes while the plugin is down: the
// loader files each in a mailbox per plugin, which outlives the plugin's
// process, and delivers the mailbox in order while the plugin is healthy.
// A channel answer goes to the plugin it names (plugin.ChannelReply's
// Plugin) alone; a confirmation to every plugin that subscribes to it with
// the surface capability granted. Either goes only to a plugin granted
// its group (grant.go), as its bus subscription does. An event is taken out once the plugin
// has handled it or refused it (an error of its own, or the event
// timeout); one that came while the plugin was crashed or restarting, or
// whose delivery the plugin's death cut short, goes to the next instance.
// Delivery is thus at least once, and a plugin ignores an event it has
// handled before. A mailbox holds at most mailboxCap events; beyond, the
// oldest is dropped, logged.

// mailTopics are the topics delivered through mailboxes, which no plugin
// gets merely by subscribing: the confirmations carry the arguments of
// every group's calls, and only a plugin granted the surface capability
// is given them (plugin.SurfaceTopic); a channel's answers go only to the
// plugin they answer (answerTo).
var mailTopics = []string{plugin.TopicChannelStarted.Name(), plugin.TopicChannelReply.Name(),
	plugin.TopicConfirmationRequested.Name(), plugin.TopicConfirmationResolved.Name()}

// channelAnswer reports whether topic is a channel's answer.
func channelAnswer(topic string) bool {
	return topic == plugin.TopicChannelStarted.Name() || topic == plugin.TopicChannelReply.Name()
}

// answerTo returns the plugin a channel's answer goes to: its payload's
// "plugin" (plugin.ChannelReply.Plugin). The core encodes a ChannelReply
// with it first, so this reads the payload's first member and stops:
// routing an answer does not decode the agent's text. "" if the payload
// names none.
func answerTo(payload []byte) string {
	dec := json.NewDecoder(bytes.NewReader(payload))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return ""
		}
		if key == "plugin" {
			var name string
			if dec.Decode(&name) != nil {
				return ""
			}
			return name
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return ""
		}
	}
	return ""
}

// mailboxCap bounds a plugin's undelivered events.
const mailboxCap = 256

// mailbox is one plugin's undelivered events.
type mailbox struct {
	mu     sync.Mutex
	topics []string // the mail topics its plugin subscribes to (and may have)
	groups []string // the groups its plugin is granted; none: every group
	evs    []*plugin.Event
	wake   chan struct{} // holds a value when evs may have grown
}

// mailboxOf returns plugin name's mailbox; create makes it if missing.
func (l *Loader) mailboxOf(name string, create bool) *mailbox {
	l.mailMu.Lock()
	defer l.mailMu.Unlock()
	mb := l.mail[name]
	if mb == nil && create {
		if l.mail == nil {
			l.mail = map[string]*mailbox{}
		}
		mb = &mailbox{wake: make(chan struct{}, 1)}
		l.mail[name] = mb
	}
	return mb
}

// dropMailbox forgets the mailbox of a plugin that is no longer
// installed.
func (l *Loader) dropMailbox(name string) {
	l.mailMu.Lock()
	defer l.mailMu.Unlock()
	delete(l.mail, name)
}

// startMail files the events of mailTopics published on the bus into
// the mailboxes, until stopMail.
func (l *Loader) startMail() {
	if l.bus == nil {
		return
	}
	sub, err := l.bus.Subscribe(mailTopics...)
	if err != nil {
		l.log.Error("cannot subscribe to channel answers and confirmations: plugins will not get them", "err", err)
		return
	}
	l.mailMu.Lock()
	l.mailSub = sub
	l.mailMu.Unlock()
	go func() {
		for ev := range sub.C() {
			if ev.Source != "core" {
				continue // only the core answers channels and asks for confirmations
			}
			if channelAnswer(ev.Topic) {
				name := answerTo(ev.Payload)
				if mb := l.mailboxOf(name, false); mb != nil {
					mb.put(l, name, ev)
				}
				continue
			}
			l.mailMu.Lock()
			names := slices.Collect(maps.Keys(l.mail))
			l.mailMu.Unlock()
			for _, name := range names {
				l.mailboxOf(name, false).put(l, name, ev)
			}
		}
	}()
}

// stopMail ends the filing of events into mailboxes.
func (l *Loader) stopMail() {
	l.mailMu.Lock()
	sub := l.mailSub
	l.mailSub = nil
	l.mailMu.Unlock()
	if sub != nil {
		_ = sub.Close()
	}
}

// put files ev, if its plugin subscribes to its topic and is granted its
// group.
func (mb *mailbox) put(l *Loader, name string, ev *plugin.Event) {
	mb.mu.Lock()
	if !mb.wants(ev) {
		mb.mu.Unlock()
		return
	}
	if len(mb.evs) >= mailboxCap {
		old := mb.evs[0]
		mb.evs = slices.Delete(mb.evs, 0, 1)
		l.log.Warn("a plugin's undelivered events overflowed: the oldest is dropped", "plugin", name, "topic", old.Topic, "event", old.ID)
	}
	mb.evs = append(mb.evs, ev)
	mb.mu.Unlock()
	select {
	case mb.wake <- struct{}{}:
	default:
	}
}

// wants reports whether ev is for mb's plugin: a topic it subscribes to,
// of a group it is granted. mb.mu is held.
func (mb *mailbox) wants(ev *plugin.Event) bool {
	return slices.Contains(mb.topics, ev.Topic) && events.InGroups(mb.groups, ev.Group)
}

// next returns the oldest event, waiting for one until stop is closed;
// once stop is closed it returns none, so an instance that is stopping
// never takes an event its successor is delivering.
func (mb *mailbox) next(stop <-chan struct{}) (*plugin.Event, bool) {
	for {
		select {
		case <-stop:
			return nil, false
		default:
		}
		mb.mu.Lock()
		if len(mb.evs) > 0 {
			ev := mb.evs[0]
			mb.mu.Unlock()
			return ev, true
		}
		mb.mu.Unlock()
		select {
		case <-mb.wake:
		case <-stop:
			return nil, false
		}
	}
}

// done takes ev out, if it is still the oldest.
func (mb *mailbox) done(ev *plugin.Event) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if len(mb.evs) > 0 && mb.evs[0] == ev {
		mb.evs = slices.Delete(mb.evs, 0, 1)
	}
}

// deliverMail delivers st's mailbox to it, in order, until stop is
// closed; topics are the mail topics it subscribes to and may have.
func (l *Loader) deliverMail(st *pluginState, eh plugin.EventHandler, topics []string, stop <-chan struct{}) {
	mb := l.mailboxOf(st.name, true)
	mb.mu.Lock()
	mb.topics, mb.groups = topics, st.groups // a restart may have changed them (surface granted or not, allowed_groups)
	mb.evs = slices.DeleteFunc(mb.evs, func(ev *plugin.Event) bool { return !mb.wants(ev) })
	mb.mu.Unlock()
	go func() {
		for {
			ev, ok := mb.next(stop)
			if !ok || !st.calls.enter() {
				return // stopping: what is left waits for the next instance
			}
			ctx, cancel := context.WithTimeout(context.Background(), EventTimeout)
			err := eh.HandleEvent(ctx, ev)
			cancel()
			st.calls.leave()
			l.callEnded(st, err)
			if errors.Is(err, pluginhost.ErrCrashed) || errors.Is(err, pluginhost.ErrUnavailable) {
				return // the process died: the next instance gets it
			}
			mb.done(ev)
			if err != nil {
				l.log.Warn("plugin failed to handle an event", "plugin", st.name, "topic", ev.Topic, "event", ev.ID, "err", err)
			}
		}
	}()
}
