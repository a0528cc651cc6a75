package telegram

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
)

// lastText runs the clock until chat has n messages and returns the last.
func (e *env) lastText(chat int64, n int) string {
	e.t.Helper()
	e.until("an answer", func() bool { return len(e.fake.Texts(chat)) >= n })
	texts := e.fake.Texts(chat)
	return texts[len(texts)-1]
}

func TestCommands(t *testing.T) {
	cases := []struct {
		name   string
		chat   int64
		text   string
		want   string // in the answer; "" for none
		prompt string // the prompt it becomes instead, if any
		check  func(t *testing.T, e *env)
	}{
		{name: "help", chat: owner, text: "/help", want: "/status"},
		{name: "start once paired", chat: owner, text: "/start", want: "/stop"},
		{name: "status", chat: owner, text: "/status", want: "Sessions: 1"},
		{name: "status in a bound group", chat: family, text: "/status@" + "carapace_test_bot", want: "This chat: idle"},
		{name: "pause", chat: owner, text: "/pause", want: "Paused", check: func(t *testing.T, e *env) {
			if st, _ := e.svc.CoreStatus(t.Context()); !st.Paused {
				t.Error("not paused")
			}
		}},
		{name: "stop with nothing running", chat: owner, text: "/stop", want: "Nothing is running"},
		{name: "tasks when there are none", chat: owner, text: "/tasks", want: "No scheduled tasks"},
		{name: "new", chat: owner, text: "/new", want: "New conversation"},
		{name: "new in a bound group", chat: family, text: "/new@carapace_test_bot", want: "New conversation"},
		{name: "an unknown command is text", chat: owner, text: "/weather in Lisbon", prompt: "/weather in Lisbon"},
		{name: "another bot's command", chat: family, text: "/status@other_bot"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.say(tc.chat, tc.text)
			switch {
			case tc.want != "":
				if got := e.lastText(tc.chat, 1); !strings.Contains(got, tc.want) {
					t.Errorf("answer %q, want it to contain %q", got, tc.want)
				}
			case tc.prompt != "":
				if ev := e.flush(1); plugintest.Member(&ev, "text") != tc.prompt {
					t.Errorf("prompt %q", plugintest.Member(&ev, "text"))
				}
			default:
				e.clock.Advance(time.Hour)
				if n := e.fake.Outbound() + len(e.svc.Events()); n != 0 {
					t.Errorf("%d requests or events", n)
				}
			}
			if tc.check != nil {
				tc.check(t, e)
			}
		})
	}
}

func TestStopStopsTheChatsSession(t *testing.T) {
	e := newEnv(t)
	e.say(owner, "long job")
	ev := e.flush(1)
	e.channel(plugin.TopicChannelStarted, ev, "s-long", "")
	e.say(owner, "and then this")
	e.say(family, "family job") // another chat: untouched
	e.say(owner, "/stop")
	if got := e.lastText(owner, 1); !strings.Contains(got, "Stopping") || !strings.Contains(got, "Dropped 1") {
		t.Errorf("answer %q", got)
	}
	if got := e.svc.Stopped(); !slices.Equal(got, []string{"s-long"}) {
		t.Errorf("stopped %v, want [s-long]", got)
	}
	// The core answers with the stopped session's reply; the dropped
	// message does not go; the family's does.
	e.coreEvent(plugin.TopicChannelReply.Name(), "main", plugin.ChannelReply{Session: "s-long", ReplyTo: inboundOf(t, ev).ReplyTo, Error: "stopped by the user"})
	e.until("the family's prompt", func() bool { return len(e.events()) == 2 })
	e.clock.Advance(time.Hour)
	evs := e.events()
	if len(evs) != 2 || replyToOf(t, evs[1]).ChatID != family {
		t.Errorf("events after /stop: %d, the second to %d", len(evs), replyToOf(t, evs[len(evs)-1]).ChatID)
	}
}

// A message that comes while sessions are paused is held, the owner told,
// and goes once resumed: after the debounce, and without one (where the
// answer to Paused is asked while the update is being recorded).
func TestPausedMessagesWaitForResume(t *testing.T) {
	for _, debounce := range []time.Duration{DefaultDebounce, 0} {
		t.Run(debounce.String(), func(t *testing.T) {
			e := newEnv(t, func(e *env) { e.cfg["debounce_ms"] = json.Number(strconv.FormatInt(debounce.Milliseconds(), 10)) })
			_ = e.svc.SetPaused(t.Context(), true) // under the fake's lock: the plugin reads the status meanwhile
			e.say(owner, "while paused")
			e.clock.Advance(debounce)
			if got := e.lastText(owner, 1); !strings.Contains(got, "paused") {
				t.Errorf("note %q", got)
			}
			if n := len(e.events()); n != 0 {
				t.Fatalf("%d events while paused", n)
			}
			e.say(owner, "/resume")
			e.until("the prompt", func() bool { return len(e.events()) == 1 })
			if ev := e.events()[0]; plugintest.Member(&ev, "text") != "while paused" {
				t.Errorf("prompt %q", plugintest.Member(&ev, "text"))
			}
		})
	}
}

func TestCommandsWithoutTheSurfaceGrant(t *testing.T) {
	e := newEnv(t, withNoSurface())
	e.say(owner, "/pause")
	if got := e.lastText(owner, 1); !strings.Contains(got, "surface = true") {
		t.Errorf("answer %q", got)
	}
}

func TestNoSessionEverStarts(t *testing.T) {
	e := newEnv(t)
	e.say(owner, "into the void") // the core drops it: no channel.started ever comes
	e.flush(1)
	e.say(owner, "next")
	e.clock.waitTimer(t, startTimeout)
	e.clock.Advance(startTimeout)
	if got := e.lastText(owner, 1); !strings.Contains(got, "No agent session started") || !strings.Contains(got, "[groups.main]") {
		t.Errorf("note %q", got)
	}
	e.until("the next prompt", func() bool { return len(e.events()) == 2 })
}

func TestTasksCommandListsTheTasks(t *testing.T) {
	next := time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC)
	e := newEnv(t, func(e *env) {
		e.svc.Status.Tasks = []plugin.TaskSummary{
			{ID: "t-abc12345", Group: "main", Schedule: "every day at 07:00 (Europe/Berlin)", Enabled: true, Next: next, Last: "ok"},
			{ID: "t-def67890", Group: "family", Schedule: "every 2 hours", Enabled: false, Last: "failed: the agent exited with status 1"},
		}
	})
	e.say(owner, "/tasks")
	got := e.lastText(owner, 1)
	for _, want := range []string{"2 scheduled task(s)", "t-abc12345 (main): every day at 07:00 (Europe/Berlin)", "next Wed 25 Nov 06:00 UTC · last: ok",
		"t-def67890 (family): every 2 hours", "paused · last: failed: the agent exited with status 1"} {
		if !strings.Contains(got, want) {
			t.Errorf("/tasks answered %q, want it to contain %q", got, want)
		}
	}
}

// In a bound group chat, whose other members read the bot's answers too,
// /tasks and /status show only that chat's group: not the other groups'
// tasks, not the core's sessions, approvals and plugins. The owner's
// private chat shows everything.
func TestGroupChatCommandsShowOnlyItsGroup(t *testing.T) {
	e := newEnv(t, func(e *env) {
		e.svc.Status = plugin.CoreStatus{Version: "0.1.0-test", Sessions: 3, PendingConfirmations: 2, Unhealthy: []string{"mail"},
			Tasks: []plugin.TaskSummary{
				{ID: "t-main0001", Group: "main", Schedule: "every day at 07:00", Enabled: true},
				{ID: "t-fam00001", Group: "family", Schedule: "every 2 hours", Enabled: true},
				{ID: "t-work0001", Group: "work", Schedule: "every hour", Enabled: true},
			}}
	})
	e.say(family, "/tasks")
	tasks := e.lastText(family, 1)
	e.say(family, "/status")
	status := e.lastText(family, 2)
	for _, c := range []struct {
		name, got string
		want, not []string
	}{
		{"/tasks", tasks, []string{"t-fam00001 (family)", "1 scheduled task(s) of group family"}, []string{"t-main0001", "t-work0001"}},
		{"/status", status, []string{"Carapace 0.1.0-test: running", "Group family: 1 scheduled task(s)", "This chat: idle"},
			[]string{"Sessions:", "approvals", "mail", "t-main0001"}},
	} {
		for _, w := range c.want {
			if !strings.Contains(c.got, w) {
				t.Errorf("%s in the family chat: %q lacks %q", c.name, c.got, w)
			}
		}
		for _, n := range c.not {
			if strings.Contains(c.got, n) {
				t.Errorf("%s in the family chat: %q shows %q", c.name, c.got, n)
			}
		}
	}
	// Positive control: the owner's private chat shows all of it.
	e.say(owner, "/tasks")
	if got := e.lastText(owner, 1); !strings.Contains(got, "t-main0001") || !strings.Contains(got, "t-work0001") || !strings.Contains(got, "t-fam00001") {
		t.Errorf("/tasks in the private chat: %q", got)
	}
	e.say(owner, "/status")
	if got := e.lastText(owner, 2); !strings.Contains(got, "Sessions: 3 · approvals waiting: 2") || !strings.Contains(got, "mail") {
		t.Errorf("/status in the private chat: %q", got)
	}
}

// conversationOf is the conversation a message.inbound names.
func conversationOf(ev plugin.Event) any { return plugintest.Member(&ev, "conversation") }

// /new starts a new conversation in its chat — named after the /new's
// update, so that the core finds no transcript and starts afresh — and
// in that chat alone; it lasts across a restart, and a second /new starts
// yet another.
func TestNewStartsANewConversation(t *testing.T) {
	e := newEnv(t)
	e.say(owner, "one")
	first := e.flush(1)
	if got := conversationOf(first); got != "telegram:4242" {
		t.Fatalf("before /new: conversation %v", got)
	}
	e.channel(plugin.TopicChannelReply, first, "s-1", "done")

	id := e.say(owner, "/new")
	if got := e.lastText(owner, 2); !strings.Contains(got, "New conversation") || strings.Contains(got, "old conversation") {
		t.Errorf("answer %q", got)
	}
	e.say(owner, "two")
	second := e.flush(2)
	want := "telegram:4242:" + itoa(id)
	if got := conversationOf(second); got != want {
		t.Fatalf("after /new: conversation %v, want %s", got, want)
	}
	e.channel(plugin.TopicChannelReply, second, "s-2", "done")
	e.say(family, "family")
	if got := conversationOf(e.flush(3)); got != "telegram:-100777" {
		t.Errorf("another chat's conversation after the owner's /new: %v", got)
	}

	e.restart()
	e.say(owner, "three")
	third := e.flush(4)
	if got := conversationOf(third); got != want {
		t.Errorf("after a restart: conversation %v, want %s", got, want)
	}
	e.channel(plugin.TopicChannelReply, third, "s-3", "done")
	id2 := e.say(owner, "/new")
	e.say(owner, "four")
	if got := conversationOf(e.flush(5)); got != "telegram:4242:"+itoa(id2) || id2 == id {
		t.Errorf("after a second /new: conversation %v", got)
	}
}

// /new while the chat's session works: that session finishes in the old
// conversation, and the owner is told so.
func TestNewWhileASessionRuns(t *testing.T) {
	e := newEnv(t)
	e.say(owner, "long job")
	ev := e.flush(1)
	e.channel(plugin.TopicChannelStarted, ev, "s-long", "")
	e.say(owner, "/new")
	if got := e.lastText(owner, 1); !strings.Contains(got, "finishes in the old conversation") {
		t.Errorf("answer %q", got)
	}
}

// A /new the plugin dies doing is done again at the next start, to the
// same generation: the next message names the conversation of that /new.
func TestNewDoneAgainAfterACrash(t *testing.T) {
	for _, point := range []string{"action:before-effect", "action:after-effect"} {
		t.Run(point, func(t *testing.T) {
			e := newEnv(t, dieAt(point))
			id := e.fake.PrivateText(owner, "/new")
			waitFor(t, "the crash", func() bool { return e.died.Load() })
			e.restart()
			e.handled(id)
			e.until("the answer", func() bool { return len(e.fake.Texts(owner)) > 0 })
			if gen, err := e.h.db.generation(t.Context(), owner); err != nil || gen != id {
				t.Fatalf("generation %d (%v), want the /new's update %d", gen, err, id)
			}
			e.say(owner, "after")
			if got := conversationOf(e.flush(1)); got != "telegram:4242:"+itoa(id) {
				t.Errorf("conversation %v", got)
			}
		})
	}
}
