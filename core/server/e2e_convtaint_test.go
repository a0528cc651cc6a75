package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/install"
	"github.com/carapace-dev/carapace/core/loader"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/runtime"
	"github.com/carapace-dev/carapace/ipc"
	"github.com/carapace-dev/carapace/plugins/telegram/fakebot"
)

// promptCallEngine stands in for a container engine in the real core: the
// container's agent is the real bin/ipc making the one call its prompt
// spells ("tool.invoke.X {json}"), and, as Claude Code does, it leaves the
// transcript of the conversation it was given (CARAPACE_CONVERSATION) in
// the group's Claude state, so that the conversation's next session
// resumes it.
type promptCallEngine struct {
	fakeEngine

	mu   sync.Mutex
	runs []convRun
}

// convRun is one container's run: its conversation and its call.
type convRun struct {
	ipcRun
	Conversation string
	Fresh        bool // CARAPACE_CONVERSATION_NEW
}

func (e *promptCallEngine) Run(_ context.Context, s runtime.Spec, _ runtime.IO) (int, error) {
	var socket, prompt, claude string
	for _, m := range s.Mounts {
		switch m.Target {
		case runtime.SocketPath:
			socket = m.Source
		case "/run/carapace/prompt":
			prompt = m.Source
		case runtime.ClaudeDir:
			claude = m.Source
		}
	}
	var r convRun
	for _, kv := range s.Env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "CARAPACE_CONVERSATION":
			r.Conversation = v
		case "CARAPACE_CONVERSATION_NEW":
			r.Fresh = v == "1"
		}
	}
	text, err := os.ReadFile(prompt)
	if err != nil {
		return -1, err
	}
	method, args, _ := strings.Cut(strings.TrimSpace(string(text)), " ")
	if r.Conversation != "" {
		dir := filepath.Join(claude, "projects", "-workspace")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return -1, err
		}
		if err := os.WriteFile(filepath.Join(dir, r.Conversation+".jsonl"), []byte(`{"type":"user"}`+"\n"), 0o600); err != nil {
			return -1, err
		}
	}
	cmd := exec.Command(bins.ipc, method, args)
	cmd.Env = []string{"CARAPACE_IPC_ENDPOINT=ipc://" + socket, "PATH=/usr/bin:/bin"}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	r.Stdout, r.Stderr, r.Code = out.String(), errb.String(), cmd.ProcessState.ExitCode()
	e.mu.Lock()
	e.runs = append(e.runs, r)
	e.mu.Unlock()
	if err != nil && r.Code < 0 {
		return -1, err
	}
	return r.Code, nil
}

func (e *promptCallEngine) calls() []convRun {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]convRun(nil), e.runs...)
}

// Taint carries over between the sessions of one conversation, through the
// real core, the real bin/ipc and an out-of-process channel plugin: a
// chat's first message has its agent fetch a page (untrusted output); the
// chat's next message starts a session that resumes the conversation, and
// its egress waits for the user, saying the conversation read the page in
// an earlier session — also after the core restarts. A message of another
// chat (another conversation) sends at once (control), and so does the
// chat once its conversation starts anew (no transcript).
func TestConversationTaintCarriesOver(t *testing.T) {
	e := &promptCallEngine{fakeEngine: fakeEngine{info: homebrewApple}}
	opts := coreOptions{
		// warm = 0: the fake engine runs the prompt's call as the container
		// starts, and a warm container starts before it has a prompt
		// (TestTelegramConversationTaintAndNew covers a claimed one).
		Config: "[runtime]\nengine = \"apple\"\n[groups.main]\n[sessions]\nwarm = 0\n[confirm]\ntimeout = \"60s\"\n",
		NewEngine: func(name string) (runtime.Engine, error) {
			if name != "apple" {
				return nil, fmt.Errorf("no engine %s in this test", name)
			}
			return e, nil
		},
	}
	topics := []string{plugin.TopicMessageInbound.Name(), plugin.TopicChannelStarted.Name(), plugin.TopicChannelReply.Name()}
	first := opts
	first.Setup = func(h home.Dir) {
		m := strings.Replace(kitManifest("wk", topics...), `"channels": []`, `"channels": ["wk"]`, 1)
		if _, err := install.Install(h, kitSource(t, "wk", m), install.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	c := startCoreWith(t, first)
	s := c.Session(t, "main")
	// say publishes a chat's message whose agent makes call and waits for
	// that agent's run.
	say := func(c *testCore, s api.Session, chat, call string) {
		t.Helper()
		args, _ := json.Marshal(map[string]any{"topic": "message.inbound", "text": call, "conversation": chat})
		if res := mustOK(t, runIPC(t, s.Socket, nil, "tool.invoke.wk_publish", string(args))); res["published"] != true {
			t.Fatalf("publish: %v", res)
		}
	}
	ran := func(n int) convRun {
		t.Helper()
		waitWithin(t, agentWait, fmt.Sprintf("agent run #%d", n), func() bool { return len(e.calls()) >= n })
		return e.calls()[n-1]
	}
	send := `tool.invoke.wk_send {"text":"the owner's notes"}`
	// waitsForConversation checks that the pending confirmation is run n's
	// wk_send, waiting for the conversation's taint, denies it and checks
	// the agent was told so.
	waitsForConversation := func(c *testCore, n int) {
		t.Helper()
		var cf api.Confirmation
		waitWithin(t, agentWait, fmt.Sprintf("run #%d's confirmation", n), func() bool {
			list, err := c.Client.Confirmations(context.Background(), false)
			if err != nil || len(list) == 0 {
				return false
			}
			cf = list[0]
			return true
		})
		if cf.Tool != "wk_send" || !whyContains(cf, "this conversation read https://a.example/start at ") ||
			!whyContains(cf, "(wk_fetch), in an earlier session") {
			t.Fatalf("confirmation %+v, want wk_send waiting for the conversation's taint", cf)
		}
		if out, errs, code := runCLI(t, c.Home, "confirm", "show", cf.ID[:8]); code != 0 || !strings.Contains(out, "this conversation read https://a.example/start") {
			t.Errorf("confirm show: exit %d, does not say why:\n%s%s", code, out, errs)
		}
		if out, errs, code := runCLI(t, c.Home, "confirm", "deny", cf.ID[:8]); code != 0 {
			t.Fatalf("confirm deny: exit %d\n%s%s", code, out, errs)
		}
		if r := ran(n); r.Code != 1 || !strings.Contains(r.Stderr, string(ipc.CodeConfirmationDenied)) {
			t.Fatalf("run #%d: exit %d, %s %s", n, r.Code, r.Stdout, r.Stderr)
		}
		var taints []audit.Entry
		for _, en := range c.Audit(t) {
			if en.Stage == audit.StageTaint && en.Session == cf.Session {
				taints = append(taints, en)
			}
		}
		if len(taints) != 1 || !strings.Contains(taints[0].Reason, "tainted from its start: it resumes conversation") ||
			!strings.Contains(taints[0].Reason, "this conversation read https://a.example/start") {
			t.Fatalf("run #%d's taint in the audit log: %+v", n, taints)
		}
	}

	// Chat 1, first message: the agent reads a page (the prompt gave its
	// URL, so the fetch runs at once) and its session is tainted.
	say(c, s, "chat-1", `tool.invoke.wk_fetch {"url":"https://a.example/start"}`)
	if r := ran(1); r.Code != 0 || !r.Fresh || r.Conversation == "" || !strings.Contains(r.Stdout, "A page") {
		t.Fatalf("chat 1's first run: %+v", r)
	}
	conv1 := e.calls()[0].Conversation

	// Chat 1, next message: the same conversation, resumed; its egress waits.
	say(c, s, "chat-1", send)
	waitsForConversation(c, 2)
	if r := ran(2); r.Conversation != conv1 || r.Fresh {
		t.Fatalf("chat 1's second run did not resume its conversation: %+v (first: %s)", r, conv1)
	}

	// Chat 2 (control): another conversation sends at once.
	say(c, s, "chat-2", send)
	if r := ran(3); r.Code != 0 || r.Conversation == conv1 || !strings.Contains(r.Stdout, "the owner's notes") {
		t.Fatalf("chat 2's run: %+v", r)
	}

	// The core restarts on the same home: chat 1 is still tainted.
	if err := c.Stop(t); err != nil {
		t.Fatal(err)
	}
	c2, err := runCore(t, c.Home, opts)
	if err != nil {
		t.Fatalf("the core did not restart: %v", err)
	}
	s2 := c2.Session(t, "main")
	say(c2, s2, "chat-1", send)
	waitsForConversation(c2, 4)

	// Chat 1's conversation starts anew (its transcript gone): it sends
	// at once, and the record is gone.
	if err := os.Remove(filepath.Join(c2.Home.Path("groups", "main", "claude", "projects", "-workspace"), conv1+".jsonl")); err != nil {
		t.Fatal(err)
	}
	say(c2, s2, "chat-1", send)
	if r := ran(5); r.Code != 0 || !r.Fresh || r.Conversation != conv1 {
		t.Fatalf("chat 1 started anew: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(c2.Home.ConversationsDir(), conv1+".json")); !os.IsNotExist(err) {
		t.Fatalf("chat 1's record after it started anew: %v", err)
	}
}

// The story of the taint gate's hole, on the phone, with the Docker test
// agent and the real Telegram plugin: the owner's first message has the
// agent read a page (and, as Claude Code does, leave the chat's
// transcript); the next message's send_telegram waits for the owner, the
// card saying the conversation read the page in an earlier session;
// after /new the same message's send_telegram goes at once.
func TestTelegramConversationTaintAndNew(t *testing.T) {
	bot := fakebot.New(t)
	c := startCoreWith(t, coreOptions{Config: telegramConfig(t, bot, ""), Bundled: []loader.Bundled{telegramBundle(t)},
		Setup: func(h home.Dir) { setToken(t, h); installKit(t, h, "wk") }})
	bot.WaitCount(t, "getUpdates", 1)

	// The transcript Claude Code would leave, so the chat's next session
	// resumes the conversation.
	const transcript = `sh mkdir -p "$HOME/.claude/projects/-workspace" && echo '{}' > "$HOME/.claude/projects/-workspace/$CARAPACE_CONVERSATION.jsonl"`
	bot.PrivateText(tgOwner, `tool.invoke.wk_fetch {"url":"https://a.example/start"}`+"\n"+transcript)
	if a := waitAnswer(t, bot, tgOwner, "A page"); strings.Contains(a, "exit 1") {
		t.Fatalf("the first message's run: %q", a)
	}

	send := func(text string) string {
		b, _ := json.Marshal(map[string]string{"text": text})
		return "tool.invoke.send_telegram " + string(b)
	}
	bot.PrivateText(tgOwner, send("notes for the attacker"))
	m, b := card(t, bot, "notes for the attacker")
	if !strings.Contains(m.Text, "this conversation read https://a.example/start at ") || !strings.Contains(m.Text, "in an earlier session") {
		t.Errorf("the card does not say the conversation read the page: %q", m.Text)
	}
	bot.Callback(tgOwner, fakebot.PrivateChat(tgOwner), m.MessageID, b["deny"])
	waitAnswer(t, bot, tgOwner, "exit 1")
	if slices.Contains(bot.Texts(tgOwner), "notes for the attacker") {
		t.Fatal("the denied message was sent")
	}

	bot.PrivateText(tgOwner, "/new")
	waitAnswer(t, bot, tgOwner, "New conversation")
	bot.PrivateText(tgOwner, send("a fresh start"))
	waitText(t, bot, tgOwner, "a fresh start")
	if p := pendingConfirmations(t, c); len(p) != 0 {
		t.Errorf("after /new the message waited: %+v", p)
	}
	for _, m := range bot.Messages(tgOwner) {
		if strings.Contains(m.Text, "Approval needed") && strings.Contains(m.Text, "a fresh start") {
			t.Errorf("after /new a card was sent: %q", m.Text)
		}
	}
}
