package telegram

import (
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
)

func TestOwnerMessageBecomesInboundEvent(t *testing.T) {
	e := newEnv(t)
	e.say(owner, "what is on my calendar?")
	ev := e.flush(1)
	if ev.Topic != plugin.TopicMessageInbound.Name() || ev.Group != "main" {
		t.Fatalf("event %s for group %q, want message.inbound for main", ev.Topic, ev.Group)
	}
	if plugintest.Member(&ev, "text") != "what is on my calendar?" {
		t.Errorf("text = %q", plugintest.Member(&ev, "text"))
	}
	if plugintest.Member(&ev, "conversation") != "telegram:4242" {
		t.Errorf("conversation = %q, want telegram:4242", plugintest.Member(&ev, "conversation"))
	}
	if rt := replyToOf(t, ev); rt.ChatID != owner || rt.Prompt == 0 {
		t.Errorf("reply_to = %+v, want the owner's chat and a prompt id", rt)
	}
	if n := e.fake.Outbound(); n != 0 {
		t.Errorf("%d outbound requests before any session started (want none: no typing before channel.started)", n)
	}
}

func TestDebounce(t *testing.T) {
	cases := []struct {
		name  string
		gaps  []time.Duration // before each message after the first
		want  []string        // the prompts, in order
		check time.Duration   // how long after the last message the first prompt goes
	}{
		{"a burst is one prompt", []time.Duration{0, 0}, []string{"m0\nm1\nm2"}, DefaultDebounce},
		{"messages apart are apart", []time.Duration{2 * time.Second}, []string{"m0", "m1"}, 0},
		{"a long burst is capped", []time.Duration{time.Second, time.Second, time.Second, time.Second}, []string{"m0\nm1\nm2\nm3\nm4"}, 500 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.say(owner, "m0")
			for i, gap := range tc.gaps {
				if gap > 0 {
					e.clock.Advance(gap)
				}
				if tc.name == "messages apart are apart" {
					e.waitEvents(1)
					e.channel(plugin.TopicChannelReply, e.events()[0], "s1", "")
				}
				e.say(owner, "m"+string(rune('1'+i)))
			}
			if tc.check > 0 {
				e.clock.Advance(tc.check - time.Millisecond)
				if n := len(e.events()); n != 0 {
					t.Fatalf("%d prompts before the debounce ended", n)
				}
				e.clock.Advance(time.Millisecond)
			} else {
				e.clock.Advance(DefaultDebounce)
			}
			evs := e.waitEvents(len(tc.want))
			for i, want := range tc.want {
				if plugintest.Member(&evs[i], "text") != want {
					t.Errorf("prompt %d = %q, want %q", i, plugintest.Member(&evs[i], "text"), want)
				}
			}
		})
	}
}

func TestMessagesWaitForTheRunningSession(t *testing.T) {
	e := newEnv(t)
	e.say(owner, "first")
	first := e.flush(1)
	e.channel(plugin.TopicChannelStarted, first, "s-1", "")
	e.fake.WaitCount(t, "sendChatAction", 1) // typing while the session works
	e.say(owner, "second")
	e.say(owner, "third")
	e.clock.Advance(time.Minute) // debounce long past: still no second session
	if n := len(e.events()); n != 1 {
		t.Fatalf("%d prompts while the chat's session runs, want 1", n)
	}
	e.channel(plugin.TopicChannelReply, first, "s-1", "answer one")
	waitFor(t, "the answer", func() bool { return len(e.fake.Texts(owner)) == 1 })
	if got := e.fake.Texts(owner)[0]; got != "answer one" {
		t.Errorf("answer = %q", got)
	}
	next := e.waitEvents(2)[1]
	if plugintest.Member(&next, "text") != "second\nthird" {
		t.Errorf("the waiting messages went as %q, want one prompt \"second\\nthird\"", plugintest.Member(&next, "text"))
	}
	// Typing stopped with the reply: its 4 s timer is gone.
	typing := e.fake.Count("sendChatAction")
	e.clock.Advance(10 * time.Second)
	if n := e.fake.Count("sendChatAction"); n != typing {
		t.Errorf("typing went on after channel.reply: %d → %d", typing, n)
	}
}

func TestTypingRepeatsWhileTheSessionWorks(t *testing.T) {
	e := newEnv(t)
	e.say(owner, "hi")
	ev := e.flush(1)
	e.channel(plugin.TopicChannelStarted, ev, "s-1", "")
	for i := 1; i <= 3; i++ {
		e.fake.WaitCount(t, "sendChatAction", i)
		e.clock.waitTimer(t, typingGap)
		e.clock.Advance(typingGap)
	}
	e.fake.WaitCount(t, "sendChatAction", 4)
	for _, r := range e.fake.Requests() {
		if r.Method == "sendChatAction" && (r.Params["chat_id"] != "4242" || r.Params["action"] != "typing") {
			t.Errorf("sendChatAction %v", r.Params)
		}
	}
}

func TestInterleavedChatsKeepTheirOwnQueuesAndReplies(t *testing.T) {
	e := newEnv(t)
	e.say(owner, "private one")
	e.say(family, "family one")
	e.clock.Advance(DefaultDebounce)
	evs := e.waitEvents(2)
	byChat := map[int64]plugin.Event{}
	for _, ev := range evs {
		byChat[replyToOf(t, ev).ChatID] = ev
	}
	p, f := byChat[owner], byChat[family]
	if p.Group != "main" || f.Group != "family" || plugintest.Member(&f, "conversation") != "telegram:-100777" {
		t.Fatalf("events: private → %q, family → %q %v", p.Group, f.Group, plugintest.Member(&f, "conversation"))
	}
	e.channel(plugin.TopicChannelStarted, p, "s-p", "")
	e.channel(plugin.TopicChannelStarted, f, "s-f", "")
	e.say(family, "family two") // waits for s-f only
	e.channel(plugin.TopicChannelReply, f, "s-f", "for the family")
	e.channel(plugin.TopicChannelReply, p, "s-p", "for the owner")
	e.until("both answers", func() bool { return len(e.fake.Texts(owner)) == 1 && len(e.fake.Texts(family)) == 1 })
	if got := e.fake.Texts(owner)[0]; got != "for the owner" {
		t.Errorf("owner's chat got %q", got)
	}
	if got := e.fake.Texts(family)[0]; got != "for the family" {
		t.Errorf("family chat got %q", got)
	}
	e.clock.Advance(DefaultDebounce)
	third := e.waitEvents(3)[2]
	if plugintest.Member(&third, "text") != "family two" || replyToOf(t, third).ChatID != family {
		t.Errorf("third prompt %q to %d", plugintest.Member(&third, "text"), replyToOf(t, third).ChatID)
	}
}

func TestLongAnswerArrivesInValidPieces(t *testing.T) {
	e := newEnv(t)
	e.say(owner, "write a lot")
	ev := e.flush(1)
	var b strings.Builder
	for b.Len() < 10000 {
		b.WriteString("Paragraph with an emoji 🦀 and ünïcödé. ")
		if b.Len()%700 < 40 {
			b.WriteString("\n\n")
		}
	}
	answer := []rune(b.String())[:10000]
	e.channel(plugin.TopicChannelReply, ev, "s-1", string(answer))
	for i := 1; i < 4; i++ {
		e.fake.WaitCount(t, "sendMessage", i)
		if i < 3 {
			e.clock.waitTimer(t, perChatGap)
			e.clock.Advance(perChatGap)
		}
	}
	pieces := e.fake.Texts(owner)
	if len(pieces) != 3 {
		t.Fatalf("%d pieces, want 3", len(pieces))
	}
	if strings.Join(pieces, "") != string(answer) {
		t.Error("the pieces do not add up to the answer")
	}
	for i, p := range pieces {
		if n := len(utf16.Encode([]rune(p))); n > MaxMessage {
			t.Errorf("piece %d has %d UTF-16 units", i, n)
		}
	}
}

func TestFailedSessionTellsTheOwner(t *testing.T) {
	e := newEnv(t)
	e.say(owner, "hi")
	ev := e.flush(1)
	e.coreEvent(plugin.TopicChannelReply.Name(), "main", plugin.ChannelReply{Session: "", Event: ev.ID,
		ReplyTo: inboundOf(t, ev).ReplyTo, Error: "no agent session could start: the group's queue is full"})
	waitFor(t, "the note", func() bool { return len(e.fake.Texts(owner)) == 1 })
	if got := e.fake.Texts(owner)[0]; !strings.Contains(got, "could not answer") || !strings.Contains(got, "queue is full") {
		t.Errorf("note = %q", got)
	}
}

func TestRepliesGoOnlyWhereThePromptCameFrom(t *testing.T) {
	cases := []struct {
		name   string
		source string
		chat   int64 // reply_to.chat_id
	}{
		{"an event from another plugin", "evil-plugin", owner},
		{"reply_to naming another chat than the prompt's", "core", family},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.say(owner, "hi")
			ev := e.flush(1)
			rt := replyToOf(t, ev)
			r := plugin.ChannelReply{Session: "s-1", ReplyTo: mustJSON(map[string]any{"chat_id": tc.chat, "prompt": rt.Prompt}), Text: "phish"}
			_ = e.hs.HandleEvent(&plugin.Event{Topic: plugin.TopicChannelReply.Name(), Source: tc.source, Payload: plugintest.Payload(r)})
			// Positive control: the genuine reply is delivered, and only it.
			e.channel(plugin.TopicChannelReply, ev, "s-1", "genuine")
			waitFor(t, "the genuine answer", func() bool { return e.fake.Count("sendMessage") >= 1 })
			if got := e.fake.Texts(owner); len(got) != 1 || got[0] != "genuine" {
				t.Errorf("owner's chat got %q", got)
			}
			if got := e.fake.Texts(tc.chat); tc.chat != owner && len(got) != 0 {
				t.Errorf("chat %d got %q", tc.chat, got)
			}
		})
	}
}

// The core delivers channel answers at least once (its mailbox hands one
// whose delivery a crash cut short to the next process): a second
// channel.reply or a late channel.started for an answered prompt sends
// nothing and does not make the chat busy again.
func TestDuplicateAnswersIgnored(t *testing.T) {
	e := newEnv(t)
	e.say(owner, "first")
	first := e.flush(1)
	e.channel(plugin.TopicChannelStarted, first, "s-1", "")
	e.channel(plugin.TopicChannelReply, first, "s-1", "answer one")
	waitFor(t, "the answer", func() bool { return len(e.fake.Texts(owner)) == 1 })
	e.channel(plugin.TopicChannelReply, first, "s-1", "answer one")
	e.channel(plugin.TopicChannelStarted, first, "s-1", "")
	e.say(owner, "second") // the chat is free: it goes at once after the debounce
	e.clock.Advance(DefaultDebounce)
	if next := e.waitEvents(2)[1]; plugintest.Member(&next, "text") != "second" {
		t.Errorf("next prompt %q, want \"second\"", plugintest.Member(&next, "text"))
	}
	if got := e.fake.Texts(owner); len(got) != 1 {
		t.Errorf("the owner got %q, want the answer once", got)
	}
}

// TestRestartKeepsOrReleasesPromptsInFlight checks what a restarted plugin
// does with a prompt whose session was running: if the core that took it
// still runs, it waits for the answer (the core keeps it while the plugin
// is down); if the core restarted since, the prompt is released and the
// owner told. The number of live sessions does not decide it.
func TestRestartKeepsOrReleasesPromptsInFlight(t *testing.T) {
	t1 := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		started  time.Time // when the core started, as the restarted plugin sees it
		sessions int
		lost     bool
	}{
		{"same core, no session left", t1, 0, false},
		{"core restarted, a new session runs", t1.Add(time.Minute), 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := make(chan struct{})
			e := newEnv(t, func(e *env) {
				e.svc.Status.Started = t1
				e.crash = func(p string) {
					if p == "reconciled" {
						close(seen)
					}
				}
			})
			<-seen // the plugin has seen the core
			e.say(owner, "first")
			first := e.flush(1)
			e.channel(plugin.TopicChannelStarted, first, "s-1", "")
			e.fake.WaitCount(t, "sendChatAction", 1)

			e.svc.Status.Started, e.svc.Status.Sessions = tc.started, tc.sessions
			reconciled := make(chan struct{})
			e.crash = func(p string) {
				if p == "reconciled" {
					close(reconciled)
				}
			}
			e.restart()
			<-reconciled // before the answer comes, the plugin has decided
			if tc.lost {
				waitFor(t, "the owner told", func() bool { return len(e.fake.Texts(owner)) == 1 })
				if got := e.fake.Texts(owner)[0]; got != noteLost {
					t.Fatalf("the owner got %q, want %q", got, noteLost)
				}
				return
			}
			e.channel(plugin.TopicChannelReply, first, "s-1", "answer one")
			waitFor(t, "the answer", func() bool { return len(e.fake.Texts(owner)) >= 1 })
			if got := e.fake.Texts(owner); len(got) != 1 || got[0] != "answer one" {
				t.Fatalf("the owner got %q, want only the answer", got)
			}
		})
	}
}
