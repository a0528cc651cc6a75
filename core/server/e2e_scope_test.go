package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/install"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
)

// Events are scoped like tools, through the real core, two out-of-process
// channel plugins and real containers. "home" has every group, as
// Telegram does by default; "guest" is granted the group side only
// ([plugins.guest] allowed_groups). Each negative has its positive control
// inside guest's groups.

// scopeConfig runs agents in the test image for the groups main and
// side, and grants guest side only.
func scopeConfig(t testing.TB) string {
	return dockerConfig(t, "[groups.main]\n[groups.side]\n[plugins.guest]\nallowed_groups = [\"side\"]\n")
}

// scopeTopics are what both channel plugins subscribe to: every group's
// messages and tasks, and their own answers.
var scopeTopics = []string{plugin.TopicMessageInbound.Name(), "task.triggered", plugin.TopicChannelStarted.Name(), plugin.TopicChannelReply.Name()}

func startScopeCore(t *testing.T) *testCore {
	t.Helper()
	return startCoreWith(t, coreOptions{Config: scopeConfig(t), Setup: func(h home.Dir) {
		for _, name := range []string{"home", "guest"} {
			m := strings.Replace(kitManifest(name, scopeTopics...), `"channels": []`, `"channels": ["`+name+`"]`, 1)
			if _, err := install.Install(h, kitSource(t, name, m), install.Options{}); err != nil {
				t.Fatal(err)
			}
		}
	}})
}

// publishAs makes channel plugin name publish topic for group through its
// tool, called from session s; text and conversation are left out when "".
func publishAs(t *testing.T, s api.Session, name, topic, group, text, conversation string) map[string]any {
	t.Helper()
	args := map[string]any{"topic": topic, "group": group}
	if text != "" {
		args["text"] = text
	}
	if conversation != "" {
		args["conversation"] = conversation
	}
	b, _ := json.Marshal(args)
	return mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke."+name+"_publish", string(b)))
}

// eventsOf are the events plugin name handled with topic.
func eventsOf(t *testing.T, c *testCore, name, topic string) []plugin.Event {
	t.Helper()
	var out []plugin.Event
	for _, ev := range kitEvents(t, c.Home, name) {
		if ev.Topic == topic {
			out = append(out, ev)
		}
	}
	return out
}

// nextStarted waits for plugin name's channel.started number n (from 1)
// and returns its session.
func nextStarted(t *testing.T, c *testCore, name string, n int) string {
	t.Helper()
	var session string
	waitWithin(t, agentWait, fmt.Sprintf("%s's channel.started #%d", name, n), func() bool {
		evs := eventsOf(t, c, name, plugin.TopicChannelStarted.Name())
		if len(evs) < n {
			return false
		}
		session, _ = plugintest.Member(&evs[n-1], "session").(string)
		return true
	})
	return session
}

// conversationEnv reads, from the engine, the conversation the core gave
// session's container (CARAPACE_CONVERSATION) and whether it starts it
// afresh (CARAPACE_CONVERSATION_NEW), then stops the session.
func conversationEnv(t *testing.T, c *testCore, session string) (id string, fresh bool) {
	t.Helper()
	var env []string
	waitWithin(t, agentWait, "the container of session "+session, func() bool {
		out, err := exec.Command("docker", "inspect", "--format", "{{json .Config.Env}}", "carapace-"+session).Output()
		return err == nil && json.Unmarshal(out, &env) == nil
	})
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "CARAPACE_CONVERSATION":
			id = v
		case "CARAPACE_CONVERSATION_NEW":
			fresh = v == "1"
		}
	}
	if slices.Contains(env, "CARAPACE_WARM=/run/carapace/claim") {
		// A warm container: the claim gives it the conversation, in the
		// folder it waited on (core/agent's warm.go).
		out, err := exec.Command("docker", "exec", "carapace-"+session, "sh", "-c",
			"cat /run/carapace/claim/conversation; echo; test -e /run/carapace/claim/conversation-new && echo new; "+
				"test -e /run/carapace/claim/go && echo go; true").Output()
		if err != nil {
			t.Fatalf("read the claim of session %s: %v", session, err)
		}
		lines := strings.Split(string(out), "\n")
		id, fresh = strings.TrimSpace(lines[0]), slices.Contains(lines[1:], "new")
		// The FIFO woke this entrypoint; an older one waits for the file.
		if !slices.Contains(lines[1:], "go") {
			t.Errorf("session %s's claim folder has no go file, which an older entrypoint waits for: %q", session, out)
		}
	}
	if id == "" {
		t.Fatalf("session %s's container has no conversation: %q", session, env)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The session's own end may close it first: runForEvent closes the
	// session as soon as its container stops, and the control API then
	// answers "not found" (noticed, left alone: core/agent's Close).
	if err := c.Client.CloseSession(ctx, session); err != nil && !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("stop session %s: %v", session, err)
	}
	return id, fresh
}

// plantTranscript puts Claude Code's transcript of conversation id in
// group's state, as a session that ran it leaves it.
func plantTranscript(t *testing.T, c *testCore, group, id string) {
	t.Helper()
	dir := c.Home.Path("groups", group, "claude", "projects", "-workspace")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, id+".jsonl"), []byte(`{"type":"user","message":"the owner's secret plans"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A channel plugin cannot start a session outside its groups: the core
// refuses the event, audits the refusal and starts nothing. Inside them it
// does, and gets its answer.
func TestChannelPublishesOnlyForItsGroups(t *testing.T) {
	c := startScopeCore(t)
	w := watch(t, c)
	s := c.Session(t, "side")
	res := publishAs(t, s, "guest", plugin.TopicMessageInbound.Name(), "main", `tool.invoke.echo {"message":"guest in main"}`, "")
	if res["published"] != false || !strings.Contains(fmt.Sprint(res["error"]), "allowed_groups") {
		t.Errorf("guest publishing message.inbound for main: %v, want refused naming allowed_groups", res)
	}
	res = publishAs(t, s, "guest", "task.triggered", "main", `tool.invoke.echo {"message":"guest task in main"}`, "")
	if res["published"] != false {
		t.Errorf("guest publishing task.triggered for main: %v, want refused", res)
	}
	waitFor(t, "the refusal audited", func() bool {
		for _, e := range c.Audit(t) {
			if e.Source == "guest" && e.Group == "main" && e.Stage == audit.StageEvent && e.Outcome == audit.OutcomeRejected {
				return true
			}
		}
		return false
	})

	// Positive control: in side, the same call starts a session and
	// guest gets its answer.
	mustPublished(t, publishAs(t, s, "guest", plugin.TopicMessageInbound.Name(), "side", `tool.invoke.echo {"message":"guest in side"}`, ""))
	waitWithin(t, agentWait, "guest's answer", func() bool {
		for _, ev := range eventsOf(t, c, "guest", plugin.TopicChannelReply.Name()) {
			if text, _ := plugintest.Member(&ev, "text").(string); strings.Contains(text, "guest in side") {
				return true
			}
		}
		return false
	})
	for _, e := range c.Audit(t) {
		if e.Source == "guest" && e.Group == "main" && e.Outcome == audit.OutcomePublished {
			t.Errorf("guest's event for main was published: %+v", e)
		}
	}
	if n := w.count(func(ev api.WatchEvent) bool {
		return ev.Type == api.WatchSessionOpened && ev.Session != nil && ev.Session.Group == "main"
	}); n != 0 {
		t.Errorf("%d sessions opened in main, want none", n)
	}
}

// A plugin receives the events of its groups only: guest, subscribed to
// every message.inbound and task.triggered, does not get home's for main
// (nor home's answers), and does get home's for side.
func TestPluginsReceiveOnlyTheirGroupsEvents(t *testing.T) {
	c := startScopeCore(t)
	s := c.Session(t, "side")
	mustPublished(t, publishAs(t, s, "home", plugin.TopicMessageInbound.Name(), "main", `tool.invoke.echo {"message":"for main only"}`, ""))
	mustPublished(t, publishAs(t, s, "home", "task.triggered", "main", `tool.invoke.echo {"message":"task for main only"}`, ""))
	waitWithin(t, agentWait, "home's answers in main", func() bool { return len(eventsOf(t, c, "home", plugin.TopicChannelReply.Name())) >= 2 })
	// Positive control: in side, guest gets home's message; events reach
	// a plugin in order, so main's would have come before it.
	mustPublished(t, publishAs(t, s, "home", plugin.TopicMessageInbound.Name(), "side", `tool.invoke.echo {"message":"for side"}`, ""))
	waitFor(t, "home's message for side to reach guest", func() bool {
		for _, ev := range eventsOf(t, c, "guest", plugin.TopicMessageInbound.Name()) {
			if ev.Group == "side" && ev.Source == "home" {
				return true
			}
		}
		return false
	})
	for _, ev := range kitEvents(t, c.Home, "guest") {
		if ev.Group == "main" || strings.Contains(string(ev.Payload), "for main only") {
			t.Errorf("guest received an event of main: %+v", ev)
		}
	}
	for _, ev := range eventsOf(t, c, "home", plugin.TopicMessageInbound.Name()) {
		if ev.Group == "main" {
			return // home, granted every group, got main's (a positive control for the check above)
		}
	}
	t.Errorf("home did not receive its own message for main: %+v", kitEvents(t, c.Home, "home"))
}

// Conversations are the publishing plugin's: guest naming home's
// conversation starts one of its own, while home resumes its own, and so
// does guest. Every message claims the group's warm container, which
// learns its conversation, and whether it is new, from the claim's files
// (a cold container's environment says it: TestConversationTaintCarriesOver).
func TestConversationsBelongToTheirPlugin(t *testing.T) {
	c := startScopeCore(t)
	s := c.Session(t, "side")
	hold := `tool.invoke.tk_count {"sleep_ms":60000}` // keeps the container up until the test stops it
	started := map[string]int{}
	converse := func(name string) (string, bool) {
		t.Helper()
		waitWarm(t, c, "side")
		mustPublished(t, publishAs(t, s, name, plugin.TopicMessageInbound.Name(), "side", hold, "chat-7"))
		started[name]++
		return conversationEnv(t, c, nextStarted(t, c, name, started[name]))
	}

	homeID, fresh := converse("home")
	if !fresh {
		t.Fatalf("home's first message resumed conversation %s", homeID)
	}
	plantTranscript(t, c, "side", homeID) // home's conversation now exists, as Claude Code leaves it
	if id, fresh := converse("home"); id != homeID || fresh {
		t.Fatalf("home's second message: conversation %s (fresh %v), want to resume %s", id, fresh, homeID)
	}

	guestID, fresh := converse("guest")
	if guestID == homeID || !fresh {
		t.Errorf("guest naming home's conversation got %s (fresh %v); home's is %s: it must start one of its own", guestID, fresh, homeID)
	}
	// Positive control: guest resumes its own.
	plantTranscript(t, c, "side", guestID)
	if id, fresh := converse("guest"); id != guestID || fresh {
		t.Errorf("guest's second message: conversation %s (fresh %v), want to resume %s", id, fresh, guestID)
	}
}

// agentWait bounds a wait that includes an agent container's run, on a
// machine other tests share.
const agentWait = 90 * time.Second

func mustPublished(t *testing.T, res map[string]any) {
	t.Helper()
	if res["published"] != true {
		t.Fatalf("publish refused: %v", res)
	}
}
