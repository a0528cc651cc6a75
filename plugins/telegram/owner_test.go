package telegram

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
	"github.com/carapace-dev/carapace/plugins/telegram/fakebot"
	"github.com/carapace-dev/carapace/plugins/telegram/pairing"
)

// strangerUpdates are updates that must cause nothing: each a body for
// fakebot.AddUpdate.
func strangerUpdates(f *fakebot.Server) []struct {
	name string
	body map[string]any
} {
	botUser := map[string]any{"id": fakebot.BotID, "is_bot": true, "first_name": "me"}
	otherBot := map[string]any{"id": 777, "is_bot": true, "first_name": "bot"}
	member := func(status string) map[string]any {
		return map[string]any{"status": status, "user": fakebot.User(stranger)}
	}
	cbMsg := func(chat map[string]any) map[string]any {
		return map[string]any{"message_id": 1, "date": 1767225600, "chat": chat, "text": "card"}
	}
	withSenderChat := f.TextMessage(fakebot.User(owner), fakebot.GroupChat(family), "as the group")
	withSenderChat["sender_chat"] = fakebot.GroupChat(family)
	return []struct {
		name string
		body map[string]any
	}{
		{"a stranger's private message", map[string]any{"message": f.TextMessage(fakebot.User(stranger), fakebot.PrivateChat(stranger), "hello")}},
		{"a stranger's /start", map[string]any{"message": f.TextMessage(fakebot.User(stranger), fakebot.PrivateChat(stranger), "/start")}},
		{"a stranger's /status", map[string]any{"message": f.TextMessage(fakebot.User(stranger), fakebot.PrivateChat(stranger), "/status")}},
		{"a stranger in a bound group", map[string]any{"message": f.TextMessage(fakebot.User(stranger), fakebot.GroupChat(family), "hi all")}},
		{"the owner in an unbound group", map[string]any{"message": f.TextMessage(fakebot.User(owner), fakebot.GroupChat(unbound), "hi")}},
		{"a message sent as a chat", map[string]any{"message": withSenderChat}},
		{"the bot's own message", map[string]any{"message": f.TextMessage(botUser, fakebot.GroupChat(family), "echo")}},
		{"another bot's message", map[string]any{"message": f.TextMessage(otherBot, fakebot.GroupChat(family), "spam")}},
		{"a message without a sender", map[string]any{"message": f.TextMessage(nil, fakebot.GroupChat(family), "anon")}},
		{"a stranger's edit", map[string]any{"edited_message": f.TextMessage(fakebot.User(stranger), fakebot.PrivateChat(stranger), "edited")}},
		{"the owner's edit", map[string]any{"edited_message": f.TextMessage(fakebot.User(owner), fakebot.PrivateChat(owner), "edited")}},
		{"a channel post", map[string]any{"channel_post": f.TextMessage(nil, fakebot.ChannelChat(-100555), "post")}},
		{"an edited channel post", map[string]any{"edited_channel_post": f.TextMessage(nil, fakebot.ChannelChat(-100555), "post")}},
		{"a stranger's callback", map[string]any{"callback_query": map[string]any{"id": "q1", "from": fakebot.User(stranger), "message": cbMsg(fakebot.PrivateChat(stranger)), "chat_instance": "x", "data": "approve"}}},
		{"the owner's callback in a group", map[string]any{"callback_query": map[string]any{"id": "q2", "from": fakebot.User(owner), "message": cbMsg(fakebot.GroupChat(family)), "chat_instance": "x", "data": "approve"}}},
		{"the bot added to a group", map[string]any{"my_chat_member": map[string]any{"chat": fakebot.GroupChat(unbound), "from": fakebot.User(stranger), "date": 1,
			"old_chat_member": member("left"), "new_chat_member": member("member")}}},
		{"someone joins a group", map[string]any{"chat_member": map[string]any{"chat": fakebot.GroupChat(family), "from": fakebot.User(stranger), "date": 1,
			"old_chat_member": member("left"), "new_chat_member": member("member")}}},
		{"a join request", map[string]any{"chat_join_request": map[string]any{"chat": fakebot.GroupChat(family), "from": fakebot.User(stranger), "user_chat_id": stranger, "date": 1}}},
		{"an inline query", map[string]any{"inline_query": map[string]any{"id": "iq", "from": fakebot.User(stranger), "query": "x", "offset": ""}}},
	}
}

func TestStrangersCauseNoOutboundRequest(t *testing.T) {
	e := newEnv(t)
	base := e.fake.Counts()
	var last int64
	updates := strangerUpdates(e.fake)
	for _, u := range updates {
		last = e.fake.AddUpdate(u.body)
	}
	e.handled(last)
	e.clock.Advance(time.Hour) // any timer a stranger could have started
	if n := e.fake.Outbound(); n != 0 {
		t.Fatalf("strangers caused %d outbound requests: %v", n, e.fake.Counts())
	}
	if n := len(e.svc.Events()); n != 0 {
		t.Fatalf("strangers caused %d events", n)
	}
	for m, n := range e.fake.Counts() {
		if m != "getUpdates" && n != base[m] {
			t.Errorf("%s went from %d to %d", m, base[m], n)
		}
	}
	// Each was recorded, without content.
	var n int
	if err := e.h.db.db.QueryRow("SELECT count(*) FROM updates WHERE disposition LIKE 'drop:%'").Scan(&n); err != nil || n != len(updates) {
		t.Errorf("%d dropped updates recorded (err %v), want %d", n, err, len(updates))
	}
	// And audited by the core, by id, kind, chat and user.
	dropped := e.svc.Dropped()
	if len(dropped) != len(updates) {
		t.Errorf("%d dropped updates audited, want %d: %q", len(dropped), len(updates), dropped)
	}
	for _, d := range dropped {
		for _, content := range []string{"hello", "hi all", "as the group", "spam", "anon"} {
			if strings.Contains(d, content) {
				t.Errorf("the audit of a dropped update holds its content %q: %q", content, d)
			}
		}
	}
	if len(dropped) > 0 && !strings.Contains(dropped[0], "(message) in chat 666 from user 666") {
		t.Errorf("the audit of a stranger's message does not say what it was: %q", dropped[0])
	}

	// Positive control: the same fake counts the owner's requests.
	e.say(owner, "/help")
	e.until("the help text", func() bool { return e.fake.Count("sendMessage") == 1 })
	e.say(owner, "a real question")
	e.flush(1)
	if n := e.fake.Outbound(); n != 1 {
		t.Errorf("the owner's /help made %d outbound requests, want 1", n)
	}
}

func TestEachStrangerUpdateAlone(t *testing.T) {
	e := newEnv(t)
	for _, u := range strangerUpdates(e.fake) {
		t.Run(u.name, func(t *testing.T) {
			before := e.fake.Outbound()
			e.handled(e.fake.AddUpdate(u.body))
			e.clock.Advance(time.Hour)
			if n := e.fake.Outbound() - before; n != 0 {
				t.Errorf("%d outbound requests: %v", n, e.fake.Counts())
			}
		})
	}
	if n := len(e.svc.Events()); n != 0 {
		t.Errorf("%d events", n)
	}
}

func TestAllowedUpdatesAsked(t *testing.T) {
	e := newEnv(t)
	e.fake.WaitCount(t, "getUpdates", 1)
	for _, r := range e.fake.Requests() {
		if r.Method == "getUpdates" {
			var got []string
			if err := json.Unmarshal([]byte(r.Params["allowed_updates"]), &got); err != nil || strings.Join(got, ",") != "message,callback_query" {
				t.Errorf("allowed_updates = %q, want only messages and callbacks", r.Params["allowed_updates"])
			}
			return
		}
	}
}

func TestPairing(t *testing.T) {
	e := newEnv(t, withoutConfig("owner_id"), func(e *env) {
		if _, err := pairing.New(e.dir, e.clock.Now()); err != nil { // a first code, replaced below
			t.Fatal(err)
		}
	})
	code, err := pairing.New(e.dir, e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(e.dir, pairing.File))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("pairing file: %v, mode %v", err, fi.Mode())
	}
	raw, _ := os.ReadFile(filepath.Join(e.dir, pairing.File))
	if strings.Contains(string(raw), code) {
		t.Fatal("the pairing file holds the code itself")
	}
	if len(code) < 8 || strings.Trim(code, pairing.CodeAlphabet) != "" {
		t.Fatalf("code %q: want ≥ 8 characters of %s", code, pairing.CodeAlphabet)
	}

	wrong := "ABCDEFGHJK"
	if wrong == code {
		wrong = "KJHGFEDCBA"
	}
	e.handled(e.fake.PrivateText(stranger, "/start "+wrong))
	e.handled(e.fake.PrivateText(stranger, "hello?"))
	e.handled(e.fake.GroupText(family, stranger, "/start "+code)) // the right code, but in a group
	if n := e.fake.Outbound(); n != 0 {
		t.Fatalf("wrong codes got %d outbound requests", n)
	}

	e.handled(e.fake.PrivateText(owner, "/start "+strings.ToLower(code)))
	e.until("the welcome", func() bool { return len(e.fake.Texts(owner)) == 1 })
	if !strings.Contains(e.fake.Texts(owner)[0], "Paired") {
		t.Errorf("welcome = %q", e.fake.Texts(owner)[0])
	}
	if _, err := os.Stat(filepath.Join(e.dir, pairing.File)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the pairing file is still there after use: %v", err)
	}

	// Reused by someone else: nothing. The owner now talks to the agent.
	e.handled(e.fake.PrivateText(stranger, "/start "+code))
	e.say(owner, "hello agent")
	e.flush(1)
	if got := e.fake.Texts(stranger); len(got) != 0 {
		t.Errorf("the reused code got %q", got)
	}

	// The owner survives a restart without owner_id in config.
	e.restart()
	e.say(owner, "still me")
	e.channel(plugin.TopicChannelReply, e.events()[0], "s", "")
	e.until("the second prompt", func() bool { return len(e.events()) == 2 })
}

func TestPairingCodeExpires(t *testing.T) {
	var code string
	e := newEnv(t, withoutConfig("owner_id"), func(e *env) {
		var err error
		if code, err = pairing.New(e.dir, e.clock.Now()); err != nil {
			t.Fatal(err)
		}
	})
	e.clock.Advance(pairing.TTL)
	e.handled(e.fake.PrivateText(owner, "/start "+code))
	e.clock.Advance(time.Hour)
	if n := e.fake.Outbound(); n != 0 {
		t.Fatalf("an expired code got %d outbound requests", n)
	}
	// Positive control: a new code, sent in time, pairs.
	fresh, err := pairing.New(e.dir, e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(pairing.TTL - time.Second)
	e.handled(e.fake.PrivateText(owner, "/start "+fresh))
	e.until("the welcome", func() bool { return len(e.fake.Texts(owner)) == 1 })
}

func TestInitFailures(t *testing.T) {
	cases := []struct {
		name     string
		cfg      func(url string) map[string]any
		token    string
		category string
		mention  string
	}{
		{"no token", func(u string) map[string]any { return map[string]any{"owner_id": 1, "api_url": u} }, "", plugin.CategoryAuth, "carapace auth set --plugin telegram --key bot_token"},
		{"token refused", func(u string) map[string]any { return map[string]any{"owner_id": 1, "api_url": u} }, "1:wrong", plugin.CategoryAuth, "@BotFather"},
		{"no owner, no pairing", func(u string) map[string]any { return map[string]any{"api_url": u} }, fakebot.Token, plugin.CategoryConfig, "carapace telegram pair"},
		{"plain http elsewhere", func(u string) map[string]any { return map[string]any{"owner_id": 1, "api_url": "http://example.com"} }, fakebot.Token, plugin.CategoryConfig, "loopback"},
		{"owner's chat bound twice", func(u string) map[string]any {
			return map[string]any{"owner_id": 5, "api_url": u, "chats": map[string]any{"5": "work"}}
		}, fakebot.Token, plugin.CategoryConfig, "owner_group"},
		{"unreachable API", func(string) map[string]any { return map[string]any{"owner_id": 1, "api_url": "http://127.0.0.1:1"} }, fakebot.Token, plugin.CategoryNetwork, "api_url"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := fakebot.New(t)
			creds := map[string]string{}
			if tc.token != "" {
				creds[CredentialKey] = tc.token
			}
			h := New(Options{DataDir: t.TempDir(), Logger: testLogger(t)})
			err := h.Init(t.Context(), tc.cfg(f.URL()), &plugintest.Services{Credentials: plugintest.NewFakeCredentials(creds)})
			if err == nil {
				_ = h.Shutdown(t.Context())
				t.Fatal("Init succeeded")
			}
			if got := plugin.CategoryOf(err); got != tc.category || !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("Init: %s %v; want %s mentioning %q", got, err, tc.category, tc.mention)
			}
			if tc.token != "" && strings.Contains(err.Error(), tc.token) {
				t.Error("the error shows the token")
			}
		})
	}
}

// A paired owner is what the command line sees (pairing.Owner) while the
// plugin runs; once unpaired (pairing.Unpair) the plugin, restarted,
// answers nobody — it does not even start without a pairing code — and
// the messages the former owner left queued never reach the agent, also
// not once another account pairs.
func TestUnpairAndPairAnother(t *testing.T) {
	e := newEnv(t, withoutConfig("owner_id"), func(e *env) {
		if _, err := pairing.New(e.dir, e.clock.Now()); err != nil {
			t.Fatal(err)
		}
	})
	code, err := pairing.New(e.dir, e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	e.handled(e.fake.PrivateText(owner, "/start "+code))
	waitFor(t, "the pairing", func() bool { return e.h.ownerID() == owner })
	if got, err := pairing.Owner(t.Context(), e.dir); err != nil || got != owner {
		t.Fatalf("pairing.Owner while the plugin runs: %d (%v), want %d", got, err, owner)
	}
	e.say(owner, "left behind") // queued: its debounce has not passed
	e.hs.Shutdown()
	if was, err := pairing.Unpair(t.Context(), e.dir); err != nil || was != owner {
		t.Fatalf("Unpair: %d (%v), want %d", was, err, owner)
	}
	if got, _ := pairing.Owner(t.Context(), e.dir); got != 0 {
		t.Fatalf("owner %d after Unpair", got)
	}
	h := New(Options{DataDir: e.dir, Clock: e.clock, Logger: testLogger(t)})
	if err := h.Init(t.Context(), e.cfg, e.svc); plugin.CategoryOf(err) != plugin.CategoryConfig || !strings.Contains(fmt.Sprint(err), "carapace telegram pair") {
		t.Fatalf("Init without an owner or a code: %v", err)
	}

	// Another account pairs.
	const next int64 = 5151
	code, err = pairing.New(e.dir, e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	e.start()
	e.handled(e.fake.PrivateText(owner, "still the owner?")) // the former owner: a stranger now
	e.handled(e.fake.PrivateText(next, "/start "+code))
	waitFor(t, "the new pairing", func() bool { return e.h.ownerID() == next })
	e.handled(e.fake.PrivateText(next, "I am new"))
	e.until("the new owner's prompt", func() bool { return len(e.events()) > 0 })
	e.clock.Advance(time.Hour)
	var state string
	waitFor(t, "the former owner's prompt settled", func() bool {
		err := e.h.db.db.QueryRow("SELECT state FROM prompts WHERE chat_id = ?", owner).Scan(&state)
		return err == nil && state != stQueued && state != stPublishing
	})
	if state != stStopped {
		t.Errorf("the former owner's queued prompt is %s, want stopped", state)
	}
	for _, ev := range e.events() {
		if plugintest.Member(&ev, "text") != "I am new" {
			t.Errorf("a prompt %q reached the agent", plugintest.Member(&ev, "text"))
		}
	}
}
