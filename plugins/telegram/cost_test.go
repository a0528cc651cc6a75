package telegram

import (
	"database/sql"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
)

// TestServiceCallsPerMessage counts what the owner's message costs in
// calls to the core, from its arrival to its answer in the chat: one
// Paused and one PublishEvent (channel.started and channel.reply are the
// core's calls to the plugin), and no CoreStatus, which gathers the whole
// status, tasks included. The surface grant is learned once, at start:
// an approval card asks the core nothing.
func TestServiceCallsPerMessage(t *testing.T) {
	e := newEnv(t)
	start := e.started()
	e.say(owner, "what is on my calendar?")
	ev := e.flush(1)
	e.channel(plugin.TopicChannelStarted, ev, "s-1", "")
	e.channel(plugin.TopicChannelReply, ev, "s-1", "nothing today")
	waitFor(t, "the answer", func() bool { return len(e.fake.Texts(owner)) == 1 })
	if got, want := e.svc.Calls()[start:], []string{"paused", "publish_event"}; !slices.Equal(got, want) {
		t.Errorf("one message cost the service calls %q, want %q", got, want)
	}
}

// TestSurfaceGrantLearnedOnce: approval cards ask the core nothing; the
// plugin learned its surface grant from the one status it asked for at
// start.
func TestSurfaceGrantLearnedOnce(t *testing.T) {
	e := newEnv(t)
	start := e.started()
	e.requested(`{"to":"bob@example.com"}`)
	c := api.Confirmation{ID: confID, Tool: "send_email", Group: "main", Session: "s-1", ArgsHash: argsHash,
		Arguments: json.RawMessage(`{"to":"bob@example.com"}`), CreatedAt: e.clock.Now(), ExpiresAt: e.clock.Now().Add(5 * time.Minute)}
	e.coreEvent("confirmation.requested", "main", c) // delivered again: at least once
	if got := e.svc.Calls()[start:]; len(got) != 0 {
		t.Errorf("approval cards cost the service calls %q, want none", got)
	}
}

// started waits for the one status the plugin asks for once it has
// started (reconcile), and returns how many service calls it made so far.
func (e *env) started() int {
	e.t.Helper()
	waitFor(e.t, "the start's one status", func() bool { return slices.Contains(e.svc.Calls(), "core_status") })
	return len(e.svc.Calls())
}

// TestChatOfAGroupNotGranted: a chat bound to a group the core does not
// grant the plugin tells the owner which group and the setting that
// grants it; a chat of a granted group goes through.
func TestChatOfAGroupNotGranted(t *testing.T) {
	e := newEnv(t, func(e *env) { e.svc.Groups = []string{"main"} })
	e.say(family, "hello family")
	e.clock.waitTimer(t, DefaultDebounce)
	e.clock.Advance(DefaultDebounce)
	waitFor(t, "the note", func() bool { return len(e.fake.Texts(family)) == 1 })
	if got := e.fake.Texts(family)[0]; !strings.Contains(got, `"family"`) || !strings.Contains(got, "[plugins.telegram] allowed_groups") {
		t.Errorf("note = %q, want the group and the setting that grants it", got)
	}
	e.say(owner, "hello main")
	if ev := e.flush(1); ev.Group != "main" {
		t.Errorf("the owner's message went to %q", ev.Group)
	}
}

// TestServiceCallsPerMessageAtOnce: without a debounce the owner's
// message asks Paused while its update is recorded (askPaused), and still
// costs one Paused and one PublishEvent.
func TestServiceCallsPerMessageAtOnce(t *testing.T) {
	e := newEnv(t, func(e *env) { e.cfg["debounce_ms"] = json.Number("0") })
	start := e.started()
	e.say(owner, "what is on my calendar?")
	ev := e.waitEvents(1)[0]
	e.channel(plugin.TopicChannelStarted, ev, "s-1", "")
	e.channel(plugin.TopicChannelReply, ev, "s-1", "nothing today")
	waitFor(t, "the answer", func() bool { return len(e.fake.Texts(owner)) == 1 })
	if got, want := e.svc.Calls()[start:], []string{"paused", "publish_event"}; !slices.Equal(got, want) {
		t.Errorf("one message cost the service calls %q, want %q", got, want)
	}
}

// TestPausedAskUsedOnlyFresh: an answer to Paused asked ahead
// (askPaused) decides only while fresh; one older than pausedAskFresh (a
// commit retried for long) is asked again.
func TestPausedAskUsedOnlyFresh(t *testing.T) {
	e := newEnv(t, func(e *env) { e.cfg["debounce_ms"] = json.Number("0") })
	e.started()
	queue := func(text string) {
		t.Helper()
		if err := e.h.db.tx(t.Context(), func(tx *sql.Tx) error {
			return appendPrompt(t.Context(), tx, owner, "main", text, 0, e.clock.Now())
		}); err != nil {
			t.Fatal(err)
		}
	}
	answered := func(at time.Time) *pausedAsk { // "paused", answered at once
		a := &pausedAsk{at: at, done: make(chan struct{}), paused: true}
		close(a.done)
		return a
	}

	queue("stale")
	e.h.kickAsked(owner, answered(e.clock.Now().Add(-pausedAskFresh)), nil)
	ev := e.waitEvents(1)[0] // the core, asked again, is not paused
	if got := plugintest.Member(&ev, "text"); got != "stale" {
		t.Fatalf("published %q", got)
	}
	e.channel(plugin.TopicChannelStarted, ev, "s-1", "")
	e.channel(plugin.TopicChannelReply, ev, "s-1", "ok")
	waitFor(t, "the chat freed", func() bool { return len(e.fake.Texts(owner)) == 1 })

	queue("fresh")
	e.h.kickAsked(owner, answered(e.clock.Now()), nil)
	if got := e.lastText(owner, 2); !strings.Contains(got, "paused") {
		t.Errorf("note %q, want that Carapace is paused", got)
	}
	if n := len(e.events()); n != 1 {
		t.Errorf("%d events, want only the first: the fresh answer said paused", n)
	}
}
