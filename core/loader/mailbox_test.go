package loader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/events"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
	"github.com/carapace-dev/carapace/core/pluginhost"
)

// scriptedEvents is a plugin's event handler: it reports each event it is
// given on got and answers with what fail says for that event's "n".
type scriptedEvents struct {
	fakeHandler
	got  chan *plugin.Event
	fail map[string]error
	hold map[string]chan struct{} // an event waits for its channel to close
}

func (s *scriptedEvents) HandleEvent(_ context.Context, ev *plugin.Event) error {
	s.got <- ev
	n, _ := plugintest.Member(ev, "n").(string)
	if c := s.hold[n]; c != nil {
		<-c
	}
	return s.fail[n]
}

func newScripted(fail map[string]error) *scriptedEvents {
	return &scriptedEvents{got: make(chan *plugin.Event, 64), fail: fail}
}

// mailLoader returns a Loader filing mail from a real bus.
func mailLoader(t *testing.T) (*Loader, *events.Bus) {
	t.Helper()
	dir, err := os.MkdirTemp("", "mb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	bus, err := events.Open(filepath.Join(dir, "events.sock"), events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bus.Close() })
	l := New(Options{Bus: bus})
	l.startMail()
	t.Cleanup(l.stopMail)
	return l, bus
}

func publish(t *testing.T, bus *events.Bus, topic, source, to, n string) {
	t.Helper()
	if err := bus.Publish(context.Background(), &plugin.Event{Topic: topic, Source: source, Payload: plugintest.Payload(map[string]any{"plugin": to, "n": n})}); err != nil {
		t.Fatal(err)
	}
}

// want reads the events h is given, in order, and fails on any other or
// on one more within a short wait.
func want(t *testing.T, h *scriptedEvents, ns ...string) {
	t.Helper()
	for _, n := range ns {
		select {
		case ev := <-h.got:
			if got := plugintest.Member(ev, "n"); got != n {
				t.Fatalf("got event %q, want %q", got, n)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("event %q never delivered", n)
		}
	}
	select {
	case ev := <-h.got:
		t.Fatalf("unexpected event %v", plugintest.Member(ev, "n"))
	case <-time.After(200 * time.Millisecond):
	}
}

// TestMailboxChannelAnswers checks that a channel's answers reach the
// plugin they name alone, from the core alone; that what comes while the
// plugin is down, or what its death interrupted, goes to its next
// instance in order; and that what it handled or refused is not given
// again.
func TestMailboxChannelAnswers(t *testing.T) {
	l, bus := mailLoader(t)
	topics := []string{plugin.TopicChannelStarted.Name(), plugin.TopicChannelReply.Name()}

	h1 := newScripted(map[string]error{"crash": fmt.Errorf("plugin tg: %w", pluginhost.ErrCrashed), "refused": errors.New("no such chat")})
	st1 := &pluginState{name: "tg"}
	stop1 := make(chan struct{})
	l.deliverMail(st1, h1, topics, stop1)

	publish(t, bus, plugin.TopicChannelStarted.Name(), "core", "tg", "a")
	publish(t, bus, plugin.TopicChannelReply.Name(), "core", "other", "not-ours")
	publish(t, bus, plugin.TopicChannelReply.Name(), "evil", "tg", "forged")
	publish(t, bus, plugin.TopicChannelReply.Name(), "core", "tg", "refused")
	want(t, h1, "a", "refused")

	// The plugin dies while handling "crash": it and what follows wait.
	publish(t, bus, plugin.TopicChannelReply.Name(), "core", "tg", "crash")
	want(t, h1, "crash")
	publish(t, bus, plugin.TopicChannelReply.Name(), "core", "tg", "b")
	publish(t, bus, plugin.TopicChannelStarted.Name(), "core", "tg", "c")
	want(t, h1) // its delivery ended with the crash
	close(stop1)

	h2 := newScripted(nil)
	l.deliverMail(&pluginState{name: "tg"}, h2, topics, make(chan struct{}))
	want(t, h2, "crash", "b", "c")
	publish(t, bus, plugin.TopicChannelReply.Name(), "core", "tg", "d")
	want(t, h2, "d")
}

// TestMailboxStoppedInstance checks that an instance being stopped takes
// nothing more from its mailbox, even when events are waiting as it
// finishes one: they go to the next instance.
func TestMailboxStoppedInstance(t *testing.T) {
	l, bus := mailLoader(t)
	topics := []string{plugin.TopicChannelReply.Name()}
	release := make(chan struct{})
	h1 := newScripted(nil)
	h1.hold = map[string]chan struct{}{"a": release}
	stop1 := make(chan struct{})
	l.deliverMail(&pluginState{name: "tg"}, h1, topics, stop1)
	publish(t, bus, plugin.TopicChannelReply.Name(), "core", "tg", "a")
	<-h1.got // handling "a"
	publish(t, bus, plugin.TopicChannelReply.Name(), "core", "tg", "b")
	waitPending(t, l, "tg", 2)
	close(stop1)
	close(release)
	want(t, h1)
	h2 := newScripted(nil)
	l.deliverMail(&pluginState{name: "tg"}, h2, topics, make(chan struct{}))
	want(t, h2, "b")
}

// TestMailboxConfirmations checks that confirmations reach every plugin
// whose mailbox takes them (a surface) and no other, and that a restart
// without the surface capability purges those it held.
func TestMailboxConfirmations(t *testing.T) {
	l, bus := mailLoader(t)
	surface := []string{api.WatchConfirmationRequested, api.WatchConfirmationResolved}
	hs := newScripted(nil)
	stopS := make(chan struct{})
	l.deliverMail(&pluginState{name: "phone"}, hs, surface, stopS)
	hc := newScripted(nil)
	l.deliverMail(&pluginState{name: "chat"}, hc, []string{plugin.TopicChannelReply.Name()}, make(chan struct{}))

	publish(t, bus, api.WatchConfirmationRequested, "core", "", "1")
	publish(t, bus, api.WatchConfirmationRequested, "some-plugin", "", "forged")
	publish(t, bus, api.WatchConfirmationResolved, "core", "", "2")
	want(t, hs, "1", "2")
	want(t, hc)

	close(stopS)
	publish(t, bus, api.WatchConfirmationRequested, "core", "", "3")
	waitPending(t, l, "phone", 1)
	// Restarted without the capability: it gets no confirmation, and the
	// one it held is gone.
	hs2 := newScripted(nil)
	l.deliverMail(&pluginState{name: "phone"}, hs2, []string{plugin.TopicChannelReply.Name()}, make(chan struct{}))
	publish(t, bus, api.WatchConfirmationRequested, "core", "", "4")
	want(t, hs2)
	if n := len(l.mailboxOf("phone", false).pending()); n != 0 {
		t.Fatalf("%d confirmations kept for a plugin no longer a surface", n)
	}
}

// TestMailboxOverflow checks that a full mailbox drops its oldest event.
func TestMailboxOverflow(t *testing.T) {
	l := New(Options{})
	mb := l.mailboxOf("tg", true)
	mb.topics = []string{plugin.TopicChannelReply.Name()}
	for i := range mailboxCap + 2 {
		mb.put(l, "tg", &plugin.Event{Topic: plugin.TopicChannelReply.Name(), Payload: plugintest.Payload(map[string]any{"n": fmt.Sprint(i)})})
	}
	evs := mb.pending()
	if len(evs) != mailboxCap || plugintest.Member(evs[0], "n") != "2" || plugintest.Member(evs[len(evs)-1], "n") != fmt.Sprint(mailboxCap+1) {
		t.Fatalf("mailbox holds %d events, from %v to %v", len(evs), plugintest.Member(evs[0], "n"), plugintest.Member(evs[len(evs)-1], "n"))
	}
}

// pending returns the events mb holds.
func (mb *mailbox) pending() []*plugin.Event {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return append([]*plugin.Event(nil), mb.evs...)
}

// waitPending waits until plugin name's mailbox holds n events.
func waitPending(t *testing.T, l *Loader, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(l.mailboxOf(name, false).pending()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s's mailbox holds %d events, want %d", name, len(l.mailboxOf(name, false).pending()), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAnswerTo: a channel's answer is routed by its payload's own
// "plugin" member, wherever it is, never by one nested in reply_to; a
// payload that names none, or is not an object, goes nowhere.
func TestAnswerTo(t *testing.T) {
	for _, tt := range []struct{ payload, want string }{
		{`{"plugin":"telegram","session":"s","text":"long answer"}`, "telegram"},
		{`{"reply_to":{"plugin":"forged"},"text":"x","plugin":"telegram"}`, "telegram"},
		{`{"reply_to":{"plugin":"forged"}}`, ""},
		{`{"plugin":7}`, ""},
		{`{}`, ""},
		{`["plugin","telegram"]`, ""},
		{``, ""},
	} {
		if got := answerTo([]byte(tt.payload)); got != tt.want {
			t.Errorf("answerTo(%s) = %q, want %q", tt.payload, got, tt.want)
		}
	}
	rep, err := plugin.TopicChannelReply.Event("main", plugin.ChannelReply{Plugin: "telegram", Text: strings.Repeat("x", 1<<15)})
	if err != nil || answerTo(rep.Payload) != "telegram" {
		t.Errorf("the core's own channel.reply is routed to %q (%v)", answerTo(rep.Payload), err)
	}
}
