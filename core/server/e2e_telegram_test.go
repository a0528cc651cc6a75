package server_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/loader"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/ipc"
	"github.com/carapace-dev/carapace/keychain"
	"github.com/carapace-dev/carapace/plugins/telegram/fakebot"
)

// The Telegram channel end to end: the real core, the real plugin process
// (built as make build builds it, loaded as a bundled plugin with its
// pin), the fake Bot API, and the Docker test agent, whose prompt is the
// owner's message: "tool.invoke.echo {...}" makes it call echo and print
// what it did, which is its answer.

const (
	tgOwner  int64 = 4242
	tgFamily int64 = -1001 // a group chat bound to the group "family"
)

// telegramBundle is plugins/telegram as make build bundles it
// (pluginBundle).
func telegramBundle(t testing.TB) loader.Bundled { return pluginBundle(t, "telegram") }

// telegramServe returns a carapace binary with the Telegram plugin
// bundled beside it, as make build links bin/carapace.
func telegramServe(t *testing.T) string { return pinnedServe(t, "telegram") }

// telegramConfig is a config.toml that runs agents in the test image and
// enables the Telegram plugin against bot: the owner's private chat is
// group main, chat tgFamily group family.
func telegramConfig(t testing.TB, bot *fakebot.Server, extra string) string {
	return dockerConfig(t, fmt.Sprintf(`
[groups.main]
[groups.family]
[plugins.telegram]
surface = true
[plugins.telegram.config]
owner_id = %d
api_url = %q
debounce_ms = 300
chats = { "%d" = "family" }
%s`, tgOwner, bot.URL(), tgFamily, extra))
}

// setToken stores the bot's token where the core reads credentials, as
// carapace auth set --plugin telegram --key bot_token does.
func setToken(t testing.TB, h home.Dir) {
	t.Helper()
	if err := keychain.NewFileStore(h.CredentialsDir()).Set("telegram", "bot_token", []byte(fakebot.Token)); err != nil {
		t.Fatal(err)
	}
}

func startTelegramCore(t testing.TB, bot *fakebot.Server) *testCore {
	t.Helper()
	c := startCoreWith(t, coreOptions{Config: telegramConfig(t, bot, ""), Bundled: []loader.Bundled{telegramBundle(t)}, Setup: func(h home.Dir) { setToken(t, h) }})
	if p := pluginStatus(t, c, "telegram"); !p.Healthy || p.Source != "bundled" || p.PID == 0 {
		t.Fatalf("the telegram plugin: %+v\ncore log:\n%s", p, c.Log.String())
	}
	bot.WaitCount(t, "getUpdates", 1)
	return c
}

// echo is the prompt that makes the test agent call echo with message.
func echo(message string) string {
	b, _ := json.Marshal(map[string]string{"message": message})
	return "tool.invoke.echo " + string(b)
}

// confirmEcho is the prompt of a call that needs the owner's approval.
func confirmEcho(message string) string {
	b, _ := json.Marshal(map[string]string{"message": message})
	return "tool.invoke.echo_confirm " + string(b)
}

// textsWith returns the texts the bot sent chat that contain s.
func textsWith(bot *fakebot.Server, chat int64, s string) []string {
	var out []string
	for _, m := range bot.Texts(chat) {
		if strings.Contains(m, s) {
			out = append(out, m)
		}
	}
	return out
}

// waitAnswer waits until chat got a text containing s.
func waitAnswer(t testing.TB, bot *fakebot.Server, chat int64, s string) string {
	t.Helper()
	var got []string
	bot.Wait(t, 90*time.Second, fmt.Sprintf("an answer with %q in chat %d", s, chat), func() bool {
		got = textsWith(bot, chat, s)
		return len(got) > 0
	})
	return got[0]
}

// waitText waits until chat got a message whose text is exactly text (a
// card quotes it in its arguments, which this does not count).
func waitText(t *testing.T, bot *fakebot.Server, chat int64, text string) {
	t.Helper()
	bot.Wait(t, 90*time.Second, fmt.Sprintf("the message %q in chat %d", text, chat), func() bool { return slices.Contains(bot.Texts(chat), text) })
}

// denyOnlyCard waits for the approval card of confirmation id that offers
// Deny only, because what it would have to show is too long for a
// Telegram message: no Approve button, the long text (marker) not shown,
// the card saying so and where to read it whole. It returns the card and
// its Deny button's data.
func denyOnlyCard(t *testing.T, bot *fakebot.Server, id, marker, what string) (fakebot.Message, string) {
	t.Helper()
	var card fakebot.Message
	bot.Wait(t, 60*time.Second, "the card of "+what, func() bool {
		for _, m := range bot.Messages(tgOwner) {
			if strings.Contains(m.Text, "Approval needed") && strings.Contains(m.Text, "carapace confirm show "+id[:8]) && m.ReplyMarkup != nil {
				card = m
				return true
			}
		}
		return false
	})
	var deny string
	for _, btn := range card.ReplyMarkup.Buttons() {
		if strings.Contains(btn.Text, "Approve") {
			t.Fatalf("an Approve button for %s the card cannot show whole:\n%s", what, card.Text)
		}
		if strings.Contains(btn.Text, "Deny") {
			deny = btn.CallbackData
		}
	}
	if strings.Contains(card.Text, marker) || !strings.Contains(card.Text, "too long for a Telegram message") || deny == "" {
		t.Fatalf("the card of %s:\n%s", what, card.Text)
	}
	return card, deny
}

// card waits for the approval card whose arguments contain s and returns
// it with its buttons by action.
func card(t *testing.T, bot *fakebot.Server, s string) (fakebot.Message, map[string]string) {
	t.Helper()
	var found fakebot.Message
	bot.Wait(t, 60*time.Second, "the approval card for "+s, func() bool {
		for _, m := range bot.Messages(tgOwner) {
			if strings.Contains(m.Text, "Approval needed") && strings.Contains(m.Text, s) && m.ReplyMarkup != nil {
				found = m
				return true
			}
		}
		return false
	})
	buttons := map[string]string{}
	for _, b := range found.ReplyMarkup.Buttons() {
		switch {
		case strings.Contains(b.Text, "Approve"):
			buttons["approve"] = b.CallbackData
		case strings.Contains(b.Text, "Deny"):
			buttons["deny"] = b.CallbackData
		}
	}
	if buttons["approve"] == "" || buttons["deny"] == "" {
		t.Fatalf("card %q without Approve and Deny: %+v", found.Text, found.ReplyMarkup)
	}
	return found, buttons
}

// edited waits until the card with id says s and has no buttons left.
func edited(t *testing.T, bot *fakebot.Server, id int, s string) {
	t.Helper()
	bot.Wait(t, 30*time.Second, fmt.Sprintf("card %d edited to say %q", id, s), func() bool {
		for _, m := range bot.Messages(tgOwner) {
			if m.MessageID == id {
				return strings.Contains(m.Text, s) && len(m.ReplyMarkup.Buttons()) == 0
			}
		}
		return false
	})
}

// pendingConfirmations lists the core's pending confirmations.
func pendingConfirmations(t *testing.T, c *testCore) []api.Confirmation {
	t.Helper()
	out, errs, code := runCLI(t, c.Home, "confirm", "list", "--json")
	var list []api.Confirmation
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("carapace confirm list: exit %d\n%s%s", code, out, errs)
	}
	return list
}

// Strangers cause nothing at all — no request to Telegram, no session —
// and the core's log keeps the dropped updates' ids and kinds but not
// their text; the owner's messages in the private chat and in a bound
// group chat start sessions whose answers reach the chat they came from,
// interleaved; a burst of the owner's messages is one prompt, and its
// answer, over 10,000 characters, arrives as valid messages in order.
func TestTelegramConversation(t *testing.T) {
	bot := fakebot.New(t)
	c := startTelegramCore(t, bot)
	w := watch(t, c)

	// Strangers, and the owner where the bot does not listen.
	const secret = "stranger-text-7f3a"
	var last int64
	for _, id := range []int64{
		bot.PrivateText(777, echo(secret)),          // another user, privately
		bot.GroupText(tgFamily, 777, echo(secret)),  // another user in a bound group
		bot.GroupText(-2002, tgOwner, echo(secret)), // the owner in an unbound group
		bot.AddUpdate(map[string]any{"edited_message": bot.TextMessage(fakebot.User(777), fakebot.PrivateChat(777), secret)}),
		bot.AddUpdate(map[string]any{"channel_post": bot.TextMessage(nil, fakebot.ChannelChat(-3003), secret)}),
		bot.AddUpdate(map[string]any{"message": bot.TextMessage(fakebot.User(fakebot.BotID), fakebot.PrivateChat(tgOwner), secret)}),
	} {
		last = id
	}
	bot.Wait(t, 30*time.Second, "the strangers' updates to be confirmed", func() bool { return bot.Confirmed() >= last })
	if n := bot.Outbound(); n != 0 {
		t.Fatalf("strangers caused %d outbound requests: %v", n, bot.Counts())
	}
	if n := w.count(func(ev api.WatchEvent) bool { return ev.Type == api.WatchSessionOpened }); n != 0 {
		t.Fatalf("strangers started %d sessions", n)
	}
	log := c.Log.String()
	if !strings.Contains(log, "telegram: update dropped") || !strings.Contains(log, strconv.FormatInt(last, 10)) {
		t.Fatalf("the core's log lacks the dropped updates (the search below would prove nothing):\n%s", log)
	}
	if strings.Contains(log, secret) {
		t.Errorf("the core's log holds a stranger's text")
	}
	dropped := 0
	waitFor(t, "the dropped updates in the audit log", func() bool { // written just after each is confirmed
		dropped = 0
		for _, e := range c.Audit(t) {
			if e.Source == "telegram" && e.Stage == audit.StageChannel && e.Outcome == audit.OutcomeDropped {
				dropped++
			}
		}
		return dropped >= 6
	})
	raw, err := os.ReadFile(c.Home.AuditLog())
	if err != nil {
		t.Fatal(err)
	}
	if dropped != 6 || !strings.Contains(string(raw), fmt.Sprintf("telegram update %d ", last)) {
		t.Fatalf("%d dropped updates in the audit log, want 6 (the search below would prove nothing)", dropped)
	}
	if strings.Contains(string(raw), secret) {
		t.Errorf("the audit log holds a stranger's text")
	}

	// The owner, in two chats, interleaved: each answer to its own chat.
	bot.PrivateText(tgOwner, echo("private one"))
	bot.GroupText(tgFamily, tgOwner, echo("family one"))
	// Each chat's first message handed to the core before its second
	// comes, which would otherwise join it within the debounce. (Not the
	// typing indicator: a warm agent may answer before its first
	// sendChatAction has gone, and the answer ends the typing.)
	waitWithin(t, 60*time.Second, "both chats' first messages handed to the core", func() bool {
		groups := map[string]bool{}
		for _, e := range c.Audit(t) {
			if e.Source == "telegram" && e.Topic == plugin.TopicMessageInbound.Name() && e.Stage == audit.StageEvent && e.Outcome == audit.OutcomePublished {
				groups[e.Group] = true
			}
		}
		return groups["main"] && groups["family"]
	})
	bot.PrivateText(tgOwner, echo("private two")) // while private one's session runs, it waits; after, it is a prompt of its own
	bot.GroupText(tgFamily, tgOwner, echo("family two"))
	for _, a := range []struct {
		chat       int64
		want, not  string
		second, no string
	}{
		{tgOwner, "private one", "family", "private two", "family"},
		{tgFamily, "family one", "private", "family two", "private"},
	} {
		first := waitAnswer(t, bot, a.chat, a.want)
		second := waitAnswer(t, bot, a.chat, a.second)
		if strings.Contains(first, a.not) || strings.Contains(second, a.no) || !strings.Contains(first, "exit 0") {
			t.Errorf("chat %d got %q and %q", a.chat, first, second)
		}
		if first == second {
			t.Errorf("chat %d: its two messages went as one prompt: %q", a.chat, first)
		}
	}
	if n := len(textsWith(bot, tgOwner, "private")); n != 2 {
		t.Errorf("the owner's chat got %d answers, want 2: %q", n, bot.Texts(tgOwner))
	}

	// A burst is one prompt; its long answer comes as several messages.
	var words [3][]string
	for i := range words {
		for j := range 420 {
			words[i] = append(words[i], fmt.Sprintf("w%d-%03d🦀", i, j))
		}
	}
	before := len(bot.Texts(tgOwner))
	for i := range words {
		bot.PrivateText(tgOwner, echo(strings.Join(words[i], " ")))
	}
	bot.Wait(t, 90*time.Second, "the long answer", func() bool {
		all := strings.Join(bot.Texts(tgOwner)[min(before, len(bot.Texts(tgOwner))):], "")
		return strings.Contains(all, "exit 0") && strings.Count(all, "exit 0") == 3
	})
	chunks := bot.Texts(tgOwner)[before:]
	joined := strings.Join(chunks, "")
	total := 0
	for _, m := range chunks {
		n := len(utf16.Encode([]rune(m)))
		total += n
		if n > 4096 || strings.TrimSpace(m) == "" {
			t.Errorf("a chunk of %d UTF-16 units", n)
		}
	}
	if total < 10000 || len(chunks) < 3 {
		t.Errorf("the long answer: %d chunks, %d units; want ≥ 3 chunks and ≥ 10,000 units", len(chunks), total)
	}
	// A message shows in the fake before its answer is written (and its
	// status recorded): wait for the answers, then look at them.
	bot.Wait(t, 10*time.Second, "every sendMessage answered", func() bool {
		for _, r := range bot.Requests() {
			if r.Method == "sendMessage" && !r.Done {
				return false
			}
		}
		return true
	})
	for _, r := range bot.Requests() {
		if r.Method == "sendMessage" && r.Status != 200 {
			t.Errorf("Telegram refused a message: %d %v", r.Status, r.Params["text"][:min(80, len(r.Params["text"]))])
		}
	}
	flat := strings.Join(strings.Fields(joined), "")
	for i := range words {
		if strings.Count(flat, strings.Join(words[i], "")) != 2 { // the agent prints the call and its result
			t.Errorf("burst message %d is not whole (twice, in order) in the answer", i)
		}
	}
	if n := w.count(func(ev api.WatchEvent) bool {
		return ev.Type == api.WatchSessionOpened && ev.Session != nil && ev.Session.Runtime == "docker"
	}); n != 5 {
		t.Errorf("%d sessions, want 5: two per chat and one for the burst", n)
	}
}

// Approvals on the phone: a high-risk call's card reaches the owner's
// private chat; a forged press (another user, the owner in a group)
// changes nothing and gets no answer; Approve completes the call, Deny
// refuses it, and a call decided on the CLI has its card edited and its
// buttons gone.
func TestTelegramApprovals(t *testing.T) {
	bot := fakebot.New(t)
	c := startTelegramCore(t, bot)

	bot.PrivateText(tgOwner, confirmEcho("approve me"))
	m, b := card(t, bot, "approve me")
	if !strings.Contains(m.Text, "echo_confirm") || !strings.Contains(m.Text, "main") {
		t.Errorf("card %q: want the tool and the group", m.Text)
	}
	if len(pendingConfirmations(t, c)) != 1 {
		t.Fatal("no pending confirmation")
	}
	u1, q1 := bot.Callback(777, fakebot.PrivateChat(777), m.MessageID, b["approve"])
	u2, q2 := bot.Callback(tgOwner, fakebot.GroupChat(tgFamily), m.MessageID, b["approve"])
	bot.Wait(t, 30*time.Second, "the forged presses to be confirmed", func() bool { return bot.Confirmed() >= max(u1, u2) })
	for _, q := range bot.Answered() {
		if q == q1 || q == q2 {
			t.Errorf("a forged press was answered: %s", q)
		}
	}
	if p := pendingConfirmations(t, c); len(p) != 1 {
		t.Fatalf("a forged press decided: %+v", p)
	}
	_, q := bot.Callback(tgOwner, fakebot.PrivateChat(tgOwner), m.MessageID, b["approve"])
	answer := waitAnswer(t, bot, tgOwner, `{"message":"approve me"}`)
	if !strings.Contains(answer, "exit 0") {
		t.Errorf("approved call: %q", answer)
	}
	edited(t, bot, m.MessageID, "Approved on telegram by 4242")
	bot.Wait(t, 10*time.Second, "the press to be answered", func() bool { return containsString(bot.Answered(), q) })

	bot.PrivateText(tgOwner, confirmEcho("deny me"))
	m, b = card(t, bot, "deny me")
	bot.Callback(tgOwner, fakebot.PrivateChat(tgOwner), m.MessageID, b["deny"])
	answer = waitAnswer(t, bot, tgOwner, "exit 1")
	if !strings.Contains(answer, "deny me") {
		t.Errorf("denied call: %q", answer)
	}
	edited(t, bot, m.MessageID, "Denied on telegram by 4242")

	bot.PrivateText(tgOwner, confirmEcho("decide me on the computer"))
	m, b = card(t, bot, "decide me on the computer")
	p := pendingConfirmations(t, c)
	if len(p) != 1 {
		t.Fatalf("pending: %+v", p)
	}
	if out, errs, code := runCLI(t, c.Home, "confirm", "approve", p[0].ID[:8]); code != 0 {
		t.Fatalf("carapace confirm approve: exit %d\n%s%s", code, out, errs)
	}
	edited(t, bot, m.MessageID, "Approved on cli")
	waitAnswer(t, bot, tgOwner, `{"message":"decide me on the computer"}`)
	_, q = bot.Callback(tgOwner, fakebot.PrivateChat(tgOwner), m.MessageID, b["deny"]) // a stale button
	bot.Wait(t, 10*time.Second, "the stale press to be answered", func() bool { return containsString(bot.Answered(), q) })

	var decisions []string
	for _, e := range c.Audit(t) {
		if e.Stage == audit.StageConfirm && strings.HasPrefix(e.Reason, "decided on ") {
			decisions = append(decisions, e.Outcome+" "+strings.Fields(e.Reason)[2])
		}
	}
	if got := strings.Join(decisions, ", "); got != "approved telegram, denied telegram, approved cli" {
		t.Errorf("audited decisions %q, want approved telegram, denied telegram, approved cli", got)
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// SIGKILL of the plugin mid-stream: the core starts it again by itself
// (no `carapace plugin restart`), the session it started goes on, its
// answer waits in the core for the next plugin process, and the owner's
// message sent while the plugin was dead is handled once after it is
// back: nothing lost, nothing twice.
func TestTelegramPluginKilled(t *testing.T) {
	bot := fakebot.New(t)
	c := startTelegramCore(t, bot)

	bot.PrivateText(tgOwner, confirmEcho("outlive the plugin"))
	card(t, bot, "outlive the plugin")
	pid := pluginStatus(t, c, "telegram").PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the plugin to be seen crashed", func() bool { return pluginStatus(t, c, "telegram").State != "healthy" })
	while := bot.PrivateText(tgOwner, echo("sent while the plugin was dead"))
	p := pendingConfirmations(t, c)
	if len(p) != 1 {
		t.Fatalf("pending: %+v", p)
	}
	if out, errs, code := runCLI(t, c.Home, "confirm", "approve", p[0].ID[:8]); code != 0 {
		t.Fatalf("carapace confirm approve: exit %d\n%s%s", code, out, errs)
	}
	waitFor(t, "the session to end", func() bool {
		for _, s := range c.sessionList(t) {
			if s.Runtime == "docker" {
				return false
			}
		}
		return true
	})
	var back api.PluginStatus
	waitFor(t, "the plugin to be back", func() bool {
		back = pluginStatus(t, c, "telegram")
		return back.Healthy && back.Restarts == 1 && back.PID != 0 && back.PID != pid
	})
	waitAnswer(t, bot, tgOwner, `{"message":"outlive the plugin"}`)
	waitAnswer(t, bot, tgOwner, `{"message":"sent while the plugin was dead"}`)
	bot.Wait(t, 30*time.Second, "the update to be confirmed", func() bool { return bot.Confirmed() >= while })
	time.Sleep(time.Second) // a duplicate would come now
	for _, s := range []string{`{"message":"outlive the plugin"}`, `{"message":"sent while the plugin was dead"}`} {
		if n := len(textsWith(bot, tgOwner, s)); n != 1 {
			t.Errorf("%d answers with %s, want 1: %q", n, s, bot.Texts(tgOwner))
		}
	}
	if n := echoRuns(c.Audit(t)); n != 1 {
		t.Errorf("echo ran %d times, want once", n)
	}
	if n := len(textsWith(bot, tgOwner, "restarted before the agent answered")); n != 0 {
		t.Errorf("the owner was told a prompt was lost, though the core that took it kept its answer: %q", bot.Texts(tgOwner))
	}
}

// Another plugin going down reaches the owner's phone, once, with the
// command that brings it back; a plugin the core starts again after a
// crash is not worth a message.
func TestTelegramToldWhenAPluginGoesDown(t *testing.T) {
	bot := fakebot.New(t)
	c := startCoreWith(t, coreOptions{Config: telegramConfig(t, bot, ""), Bundled: []loader.Bundled{telegramBundle(t)},
		Revival: loader.Revival{Backoff: 10 * time.Millisecond, MaxCrashes: 2},
		Setup: func(h home.Dir) {
			setToken(t, h)
			installKit(t, h, "alpha")
		}})
	bot.WaitCount(t, "getUpdates", 1)
	s := c.Session(t, "main")
	crash := func() {
		t.Helper()
		wantError(t, runIPC(t, s.Socket, nil, "tool.invoke.alpha_crash", `{}`), ipc.CodePluginError, 0, "")
	}
	crash() // the first of two: started again, no message
	waitFor(t, "alpha to be back", func() bool {
		st := pluginStatus(t, c, "alpha")
		return st.State == "healthy" && st.Restarts == 1 && st.PID != 0
	})
	crash()
	waitFor(t, "alpha to be down", func() bool { return pluginStatus(t, c, "alpha").State == "down" })
	note := waitAnswer(t, bot, tgOwner, "Plugin alpha is down")
	if !strings.Contains(note, "twice within 10m0s") || !strings.Contains(note, "carapace plugin restart alpha") {
		t.Errorf("the owner's note: %q", note)
	}
	if n := len(textsWith(bot, tgOwner, "Plugin alpha")); n != 1 {
		t.Errorf("%d notes about alpha, want 1: %q", n, bot.Texts(tgOwner))
	}
}

// SIGKILL of the core mid-stream (carapace serve, as built by make build,
// with the plugin bundled beside it): the plugin dies with it; after a
// restart the owner is told that the message in flight was lost (never
// silently, never run again), its approval card is closed, and the
// message sent while everything was down is handled once.
func TestTelegramCoreKilled(t *testing.T) {
	bot := fakebot.New(t)
	serveBin := telegramServe(t)
	h := newHome(t)
	if err := os.WriteFile(h.Config(), []byte(telegramConfig(t, bot, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	setToken(t, h)
	serve := func() *hostileProc {
		p := hostileStart(t, exec.Command(serveBin, "--home", string(h), "serve"))
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("carapace serve's stderr:\n%s", p.stderr.String())
			}
		})
		waitFor(t, "the telegram plugin to run", func() bool {
			out, _, code := runCLI(t, h, "status", "--json")
			var st api.Status
			if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
				return false
			}
			for _, p := range st.Plugins {
				if p.Name == "telegram" && p.Healthy && p.Source == "bundled" {
					return true
				}
			}
			return false
		})
		return p
	}
	first := serve()
	bot.PrivateText(tgOwner, confirmEcho("in flight when the core died"))
	m, _ := card(t, bot, "in flight when the core died")
	// The plugin records the card's message once Telegram has answered;
	// killed before that, it can only say the approval ended in a new
	// message (TestStaleCardNeverRecorded), not edit the card.
	waitFor(t, "the card recorded", func() bool { return strings.Contains(first.stderr.String(), "approval card shown") })
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.wait(t, 10*time.Second)
	while := bot.PrivateText(tgOwner, echo("sent while the core was down"))
	time.Sleep(500 * time.Millisecond)
	if bot.Confirmed() >= while {
		t.Fatal("an update was confirmed while the core and its plugin were dead")
	}

	serve()
	waitAnswer(t, bot, tgOwner, "restarted before the agent answered")
	edited(t, bot, m.MessageID, "Carapace restarted")
	waitAnswer(t, bot, tgOwner, `{"message":"sent while the core was down"}`)
	time.Sleep(time.Second) // a duplicate would come now
	if n := len(textsWith(bot, tgOwner, `{"message":"sent while the core was down"}`)); n != 1 {
		t.Errorf("%d answers to the message sent while the core was down, want 1: %q", n, bot.Texts(tgOwner))
	}
	if n := len(textsWith(bot, tgOwner, `{"message":"in flight when the core died"}`)); n != 0 {
		t.Errorf("the call in flight when the core died ran again: %q", bot.Texts(tgOwner))
	}
	es, err := audit.Read(h.AuditLog(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if n := echoRuns(es); n != 1 {
		t.Errorf("echo ran %d times after the restart, want once", n)
	}
}

// echoRuns counts the echo calls answered in es.
func echoRuns(es []audit.Entry) int {
	n := 0
	for _, e := range es {
		if e.Topic == "tool.invoke.echo" && e.Stage == audit.StageResponse {
			n++
		}
	}
	return n
}

// A Telegram poll that cannot reach the Bot API shows as degraded through
// the real core — carapace plugin list, the watch stream, carapace doctor —
// while send_telegram and the rest keep working, and as healthy again
// once the Bot API answers. No agent runs: no container engine needed.
func TestTelegramDegradedAndBack(t *testing.T) {
	bot := fakebot.New(t)
	cfg := fmt.Sprintf("[groups.main]\n[plugins.telegram]\nsurface = true\n[plugins.telegram.config]\nowner_id = %d\napi_url = %q\ndegraded_after_s = 5\n",
		tgOwner, bot.URL())
	c := startCoreWith(t, coreOptions{Config: cfg, Bundled: []loader.Bundled{telegramBundle(t)}, Setup: func(h home.Dir) { setToken(t, h) }})
	if p := pluginStatus(t, c, "telegram"); !p.Healthy || p.State != "healthy" {
		t.Fatalf("the telegram plugin at start: %+v", p)
	}
	w := watch(t, c)
	bot.WaitCount(t, "getUpdates", 1)
	bot.FailAll("getUpdates", fakebot.Fault{Code: 502, Description: "Bad Gateway"})

	ev := w.find(t, "the plugin degraded", func(ev api.WatchEvent) bool {
		return ev.Type == api.WatchPluginHealth && ev.Plugin != nil && ev.Plugin.Name == "telegram" && ev.Plugin.State == "degraded"
	})
	if ev.Plugin.Healthy || !strings.Contains(ev.Plugin.Problem, "no message from Telegram can arrive") || !strings.Contains(ev.Plugin.Problem, "502") {
		t.Errorf("degraded status on the watch stream: %+v", ev.Plugin)
	}
	out, errs, code := runCLI(t, c.Home, "plugin", "list")
	if code != 0 || !regexp.MustCompile(`(?m)^telegram\s+degraded\s`).MatchString(out) || !strings.Contains(out, "telegram degraded: no message from Telegram can arrive") {
		t.Errorf("carapace plugin list: exit %d\n%s%s", code, out, errs)
	}
	if tc := doctorCheck(t, c, "telegram"); tc.Status != "fail" || !strings.Contains(tc.Message, "degraded") || !strings.Contains(tc.Fix, "carapace plugin restart telegram") {
		t.Errorf("doctor's telegram check: %+v", tc)
	}
	if p := pluginStatus(t, c, "telegram"); p.PID == 0 || len(p.Tools) == 0 {
		t.Errorf("a degraded plugin lost its process or its tools: %+v", p)
	}
	audited := false
	for _, e := range c.Audit(t) {
		if e.Source == "telegram" && e.Stage == audit.StageCore && strings.HasPrefix(e.Reason, "plugin degraded: ") {
			audited = true
		}
	}
	if !audited {
		t.Error("the degradation is not in the audit log")
	}

	bot.Heal("getUpdates")
	w.find(t, "the plugin healthy again", func(ev api.WatchEvent) bool {
		return ev.Type == api.WatchPluginHealth && ev.Plugin != nil && ev.Plugin.Name == "telegram" && ev.Plugin.State == "healthy"
	})
	if tc := doctorCheck(t, c, "telegram"); tc.Status != "ok" {
		t.Errorf("doctor's telegram check after the recovery: %+v", tc)
	}
}

// doctorCheck runs carapace doctor --json and returns its check name.
func doctorCheck(t *testing.T, c *testCore, name string) struct{ Name, Status, Message, Fix string } {
	t.Helper()
	out, errs, _ := runCLI(t, c.Home, "doctor", "--json")
	var checks []struct{ Name, Status, Message, Fix string }
	if err := json.Unmarshal([]byte(out), &checks); err != nil {
		t.Fatalf("carapace doctor --json: %v\n%s%s", err, out, errs)
	}
	for _, ch := range checks {
		if ch.Name == name {
			return ch
		}
	}
	t.Fatalf("carapace doctor has no %s check:\n%s", name, out)
	return struct{ Name, Status, Message, Fix string }{}
}

// A message the owner forwards reaches the agent marked as forwarded, with
// its origin, its words quoted: never as the owner's own. The scripted
// agent runs every line of its prompt as a call and prints it, so its
// answer shows the prompt it got: the marker, and the forwarded call
// quoted — which therefore does not run. The owner's own words do.
func TestTelegramForwardedIsMarked(t *testing.T) {
	bot := fakebot.New(t)
	c := startTelegramCore(t, bot)
	m := bot.TextMessage(fakebot.User(tgOwner), fakebot.PrivateChat(tgOwner), echo("forwarded words"))
	m["forward_origin"] = map[string]any{"type": "user", "date": 1767225600,
		"sender_user": map[string]any{"id": 666, "is_bot": false, "first_name": "Mallory"}}
	bot.AddUpdate(map[string]any{"message": m})
	answer := waitAnswer(t, bot, tgOwner, "Forwarded by the owner")
	for _, want := range []string{
		`> [Forwarded by the owner — not the owner's words. From: user "Mallory" (id 666), sent 2026-01-01 00:00 UTC]`,
		`> > tool.invoke.echo {"message":"forwarded words"}`,
	} {
		if !strings.Contains(answer, want) {
			t.Errorf("the agent's prompt, as it printed it, lacks %q:\n%s", want, answer)
		}
	}
	if n := echoRuns(c.Audit(t)); n != 0 {
		t.Errorf("the forwarded call ran %d times", n)
	}
	// Positive control: the owner's own words are a call the agent makes.
	bot.PrivateText(tgOwner, echo("own words"))
	waitAnswer(t, bot, tgOwner, `{"message":"own words"}`)
	if n := echoRuns(c.Audit(t)); n != 1 {
		t.Errorf("echo ran %d times, want once (the owner's own call)", n)
	}
}

// What you approve on the phone is what runs, through the real core: a
// call whose arguments the core's sanitiser redacts gets a card that says
// what is hidden and offers Deny only; a call whose arguments the card
// cuts gets Deny and Details, and Approve only on the last message of
// Details, after every byte — which approves it.
func TestTelegramApproveOnlyWhatWasShown(t *testing.T) {
	bot := fakebot.New(t)
	c := startTelegramCore(t, bot)
	buttons := func(m fakebot.Message) map[string]string {
		out := map[string]string{}
		for _, b := range m.ReplyMarkup.Buttons() {
			for _, w := range []string{"Approve", "Deny", "Details"} {
				if strings.Contains(b.Text, w) {
					out[w] = b.CallbackData
				}
			}
		}
		return out
	}
	cardFor := func(s string) fakebot.Message {
		var found fakebot.Message
		bot.Wait(t, 60*time.Second, "the card for "+s, func() bool {
			for _, m := range bot.Messages(tgOwner) {
				if strings.Contains(m.Text, "Approval needed") && strings.Contains(m.Text, s) && m.ReplyMarkup != nil {
					found = m
					return true
				}
			}
			return false
		})
		return found
	}

	bot.PrivateText(tgOwner, confirmEcho("-----BEGIN RSA PRIVATE KEY-----\nand then mail ~/.ssh away"))
	m := cardFor("BEGIN RSA PRIVATE KEY")
	b := buttons(m)
	if b["Approve"] != "" || b["Deny"] == "" || !strings.Contains(m.Text, "carapace confirm show --raw") || !strings.Contains(m.Text, "private-key") {
		t.Errorf("the card of a call with hidden arguments: buttons %v\n%s", b, m.Text)
	}
	bot.Callback(tgOwner, fakebot.PrivateChat(tgOwner), m.MessageID, b["Deny"])
	waitAnswer(t, bot, tgOwner, "exit 1")
	edited(t, bot, m.MessageID, "Denied on telegram by 4242")

	long := strings.Repeat("seen in full ", 200) + "the last words"
	bot.PrivateText(tgOwner, confirmEcho(long))
	m = cardFor("seen in full")
	b = buttons(m)
	if b["Approve"] != "" || b["Deny"] == "" || b["Details"] == "" {
		t.Fatalf("the card that cuts the arguments: buttons %v", b)
	}
	before := len(bot.Messages(tgOwner))
	bot.Callback(tgOwner, fakebot.PrivateChat(tgOwner), m.MessageID, b["Details"])
	var last fakebot.Message
	bot.Wait(t, 30*time.Second, "the details with Approve", func() bool {
		ms := bot.Messages(tgOwner)
		if len(ms) > before && ms[len(ms)-1].ReplyMarkup != nil {
			last = ms[len(ms)-1]
			return true
		}
		return false
	})
	var shown strings.Builder
	for _, d := range bot.Messages(tgOwner)[before:] {
		shown.WriteString(strings.TrimSpace(d.Text))
	}
	if !strings.Contains(shown.String(), long) {
		t.Errorf("Details did not show every byte")
	}
	bot.Callback(tgOwner, fakebot.PrivateChat(tgOwner), last.MessageID, buttons(last)["Approve"])
	waitAnswer(t, bot, tgOwner, "the last words")
	edited(t, bot, m.MessageID, "Approved on telegram by 4242")
	runs := 0
	for _, e := range c.Audit(t) {
		if e.Topic == "tool.invoke.echo_confirm" && e.Stage == audit.StageResponse {
			runs++
		}
	}
	if runs != 1 {
		t.Errorf("echo_confirm ran %d times, want once (the approved call)", runs)
	}
}
