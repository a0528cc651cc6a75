package telegram

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/plugins/telegram/fakebot"
)

const (
	confID   = "0123456789abcdef0123456789abcdef"
	argsHash = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
)

// requested delivers confirmation.requested for args (raw JSON; "" for
// arguments left out of the event), as the core builds it from a
// api.Confirmation, and returns the card.
func (e *env) requested(args string) fakebot.Message {
	e.t.Helper()
	c := api.Confirmation{ID: confID, Tool: "send_email", Group: "main", Session: "s-1", ArgsHash: argsHash,
		CreatedAt: e.clock.Now(), ExpiresAt: e.clock.Now().Add(5 * time.Minute)}
	if args == "" {
		c.ArgumentsOmitted = true
	} else {
		c.Arguments = json.RawMessage(args)
	}
	before := len(e.fake.Messages(owner))
	e.coreEvent("confirmation.requested", "main", c)
	waitFor(e.t, "the card", func() bool { return len(e.fake.Messages(owner)) > before })
	return e.fake.Messages(owner)[before]
}

// button returns the callback data of the card's button labelled like
// label.
func button(t *testing.T, card fakebot.Message, label string) string {
	t.Helper()
	for _, b := range card.ReplyMarkup.Buttons() {
		if strings.Contains(b.Text, label) {
			if len(b.CallbackData) > 64 {
				t.Fatalf("callback_data of %d bytes", len(b.CallbackData))
			}
			return b.CallbackData
		}
	}
	t.Fatalf("no %q button on the card: %+v", label, card.ReplyMarkup)
	return ""
}

func (e *env) resolved(decision, surface, decider string) {
	e.t.Helper()
	now := e.clock.Now()
	e.coreEvent("confirmation.resolved", "main", api.Confirmation{ID: confID, Tool: "send_email", Group: "main", Session: "s-1",
		ArgsHash: argsHash, Decision: decision, Surface: surface, Decider: decider, DecidedAt: &now})
}

func TestApprovalCard(t *testing.T) {
	e := newEnv(t)
	card := e.requested(`{"to":"bob@example.com","body":"hi <b>bob</b> & \u202eevil"}`)
	if card.ChatID != owner || card.ParseMode != "HTML" {
		t.Fatalf("card to %d in %q", card.ChatID, card.ParseMode)
	}
	for _, want := range []string{"send_email", "main", argsHash[:12], "bob@example.com", "&lt;b&gt;bob&lt;/b&gt; &amp;", `\u202E`} {
		if !strings.Contains(card.Text, want) {
			t.Errorf("the card lacks %q:\n%s", want, card.Text)
		}
	}
	if strings.ContainsRune(card.Text, '\u202e') {
		t.Error("the card shows a raw bidirectional override")
	}
	if strings.Contains(card.Text, argsHash) {
		t.Error("the card shows the whole hash; a prefix is enough")
	}
	for _, b := range card.ReplyMarkup.Buttons() {
		if strings.Contains(b.CallbackData, confID) || strings.Contains(b.CallbackData, "bob") {
			t.Errorf("callback_data %q holds the confirmation or its arguments, not a random token", b.CallbackData)
		}
	}

	approve := button(t, card, "Approve")
	_, qid := e.fake.Callback(owner, fakebot.PrivateChat(owner), card.MessageID, approve)
	waitFor(t, "the answer to the click", func() bool { return len(e.fake.Answered()) == 1 })
	if got := e.fake.Answered(); got[0] != qid {
		t.Errorf("answered %v, want %s", got, qid)
	}
	d := e.svc.Decisions()
	if len(d) != 1 || d[0] != (plugin.Decision{ID: confID, Approve: true, ArgsHash: argsHash, Decider: "4242"}) {
		t.Fatalf("decisions %+v", d)
	}

	e.resolved("approved", "telegram", "4242")
	waitFor(t, "the card edited", func() bool { return e.fake.Messages(owner)[0].ReplyMarkup == nil })
	if got := e.fake.Messages(owner)[0].Text; !strings.Contains(got, "Approved on telegram by 4242") || !strings.Contains(got, "send_email") {
		t.Errorf("edited card:\n%s", got)
	}
	// A late click on the old card: answered, nothing decided.
	e.fake.Callback(owner, fakebot.PrivateChat(owner), card.MessageID, approve)
	waitFor(t, "the late click answered", func() bool { return len(e.fake.Answered()) == 2 })
	if n := len(e.svc.Decisions()); n != 1 {
		t.Errorf("%d decisions after a late click", n)
	}
}

func TestForgedCallbacksChangeNothing(t *testing.T) {
	cases := []struct {
		name string
		user int64
		chat map[string]any
	}{
		{"a stranger presses the owner's button", stranger, fakebot.PrivateChat(stranger)},
		{"a stranger in the owner's chat", stranger, fakebot.PrivateChat(owner)},
		{"the owner's id in a group chat", owner, fakebot.GroupChat(family)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			card := e.requested(`{"to":"x"}`)
			before := e.fake.Outbound()
			id, _ := e.fake.Callback(tc.user, tc.chat, card.MessageID, button(t, card, "Approve"))
			e.handled(id)
			e.clock.Advance(time.Hour)
			if n := e.fake.Outbound() - before; n != 0 {
				t.Errorf("%d outbound requests (answerCallbackQuery included)", n)
			}
			if d := e.svc.Decisions(); len(d) != 0 {
				t.Errorf("decided: %+v", d)
			}
			// Positive control: the owner's own click decides.
			id, _ = e.fake.Callback(owner, fakebot.PrivateChat(owner), card.MessageID, button(t, card, "Deny"))
			e.handled(id)
			waitFor(t, "the owner's decision", func() bool { return len(e.svc.Decisions()) == 1 })
			if d := e.svc.Decisions()[0]; d.Approve {
				t.Error("Deny approved")
			}
		})
	}
}

func TestDecidedElsewhere(t *testing.T) {
	e := newEnv(t)
	e.svc.DecideFunc = func(plugin.Decision) error {
		return fmt.Errorf("%w: denied on cli by alice", plugin.ErrAlreadyDecided)
	}
	card := e.requested(`{"to":"x"}`)
	e.fake.Callback(owner, fakebot.PrivateChat(owner), card.MessageID, button(t, card, "Approve"))
	waitFor(t, "the answer", func() bool { return len(e.fake.Answered()) == 1 })
	var text string
	for _, r := range e.fake.Requests() {
		if r.Method == "answerCallbackQuery" {
			text = r.Params["text"]
		}
	}
	if !strings.Contains(text, "Already decided") || !strings.Contains(text, "denied on cli by alice") {
		t.Errorf("answer %q", text)
	}
	e.resolved("denied", "cli", "alice")
	waitFor(t, "the card edited", func() bool { return e.fake.Messages(owner)[0].ReplyMarkup == nil })
	if got := e.fake.Messages(owner)[0].Text; !strings.Contains(got, "Denied on cli by alice") {
		t.Errorf("card: %s", got)
	}
}

func TestCardEndings(t *testing.T) {
	cases := []struct{ decision, want string }{
		{"expired", "Expired"},
		{"withdrawn", "Withdrawn"},
	}
	for _, tc := range cases {
		t.Run(tc.decision, func(t *testing.T) {
			e := newEnv(t)
			e.requested(`{"to":"x"}`)
			e.resolved(tc.decision, "core", "")
			waitFor(t, "the card edited", func() bool { return e.fake.Messages(owner)[0].ReplyMarkup == nil })
			if got := e.fake.Messages(owner)[0].Text; !strings.Contains(got, tc.want) {
				t.Errorf("card: %s", got)
			}
		})
	}
}

func TestLongArgumentsBehindDetails(t *testing.T) {
	e := newEnv(t)
	long := strings.Repeat("word ", 2000)
	card := e.requested(`{"body":"` + long + `"}`)
	if strings.Contains(card.Text, long) || !strings.Contains(card.Text, "Details") {
		t.Fatal("a long argument is not cut on the card")
	}
	e.fake.Callback(owner, fakebot.PrivateChat(owner), card.MessageID, button(t, card, "Details"))
	e.until("the details", func() bool { return len(e.fake.Messages(owner)) >= 4 })
	all := strings.Join(e.fake.Texts(owner)[1:], "")
	if !strings.Contains(all, strings.TrimSpace(long)) {
		t.Error("Details did not send the whole argument")
	}
	if n := len(e.svc.Decisions()); n != 0 {
		t.Errorf("Details decided something: %d", n)
	}
}

func TestOmittedArgumentsCannotBeApprovedOnThePhone(t *testing.T) {
	e := newEnv(t)
	card := e.requested("")
	for _, b := range card.ReplyMarkup.Buttons() {
		if strings.Contains(b.Text, "Approve") {
			t.Fatal("an Approve button for arguments the owner cannot see")
		}
	}
	if !strings.Contains(card.Text, "carapace confirm approve "+confID[:8]) {
		t.Errorf("card: %s", card.Text)
	}
	button(t, card, "Deny")
}

func TestCardFallsBackToPlainText(t *testing.T) {
	e := newEnv(t)
	e.fake.Fail("sendMessage", 1, fakebot.CantParseEntities())
	card := e.requested(`{"to":"x"}`)
	if card.ParseMode != "" || !strings.Contains(card.Text, "Approval needed") || strings.Contains(card.Text, "<b>") {
		t.Fatalf("fallback card in %q:\n%s", card.ParseMode, card.Text)
	}
	if n := e.fake.Count("sendMessage"); n != 2 {
		t.Errorf("%d sendMessage, want the refused HTML one and the plain one", n)
	}
	button(t, card, "Approve")
}

func TestNoCardsWithoutTheSurfaceGrant(t *testing.T) {
	e := newEnv(t, withNoSurface())
	e.coreEvent("confirmation.requested", "main", api.Confirmation{ID: confID, Tool: "t", Group: "main", ArgsHash: argsHash, Arguments: json.RawMessage(`{}`)})
	e.clock.Advance(time.Minute)
	if n := e.fake.Outbound(); n != 0 {
		t.Errorf("%d outbound requests without the surface capability", n)
	}
}

// TestConfirmationPayloadSurvivesTheBus: the plugin reads the core's
// api.Confirmation from the event's payload — the bytes the core encoded
// once — with every field the core sent, times, raw arguments (byte for
// byte: 1.50 stays 1.50) and hidden values included.
func TestConfirmationPayloadSurvivesTheBus(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	later := now.Add(90 * time.Second).In(time.FixedZone("CET", 3600))
	in := api.Confirmation{ID: confID, Tool: "t", Group: "g", Session: "s", Correlation: "c", ArgsHash: argsHash,
		Arguments: json.RawMessage(`{"a":1.50,"b":[true,null],"n":9007199254740993}`), ArgumentsOmitted: true,
		Hidden: []api.Hidden{{Path: "b[0]", Kind: "bearer", Chars: 40}}, Summary: "every day", CreatedAt: now, ExpiresAt: later,
		Decision: "denied", Surface: "cli", Decider: "d", DecidedAt: &later, Reason: "r"}
	ev, err := plugin.TopicConfirmationResolved.Event("g", in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := plugin.TopicConfirmationResolved.Decode(ev)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mustJSON(out), mustJSON(in); !bytes.Equal(got, want) {
		t.Errorf("decoded %s\nwant    %s", got, want)
	}
	if string(out.Arguments) != string(in.Arguments) {
		t.Errorf("arguments %s, want %s byte for byte", out.Arguments, in.Arguments)
	}
}

// TestCardsCloseWhenTheCoreRestarted checks that a card still pending
// when the core restarted (its confirmation died with the core) is closed
// on the phone once the plugin sees the new core, and that its buttons
// decide nothing; a restart of the plugin alone leaves it open.
func TestCardsCloseWhenTheCoreRestarted(t *testing.T) {
	t1 := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	seen := make(chan struct{}, 4)
	hook := func(p string) {
		if p == "reconciled" {
			seen <- struct{}{}
		}
	}
	e := newEnv(t, func(e *env) { e.svc.Status.Started, e.crash = t1, hook })
	<-seen
	card := e.requested(`{"to":"bob@example.com"}`)
	approve := button(t, card, "Approve")

	e.crash = hook
	e.restart() // the same core
	<-seen
	if e.fake.Messages(owner)[0].ReplyMarkup == nil {
		t.Fatal("a plugin restart closed a card whose confirmation still waits")
	}

	e.svc.Status.Started = t1.Add(time.Hour)
	e.crash = hook
	e.restart()
	<-seen
	waitFor(t, "the card edited", func() bool { return e.fake.Messages(owner)[0].ReplyMarkup == nil })
	if got := e.fake.Messages(owner)[0].Text; !strings.Contains(got, outcomeRestarted) || !strings.Contains(got, "send_email") {
		t.Errorf("edited card:\n%s", got)
	}
	e.fake.Callback(owner, fakebot.PrivateChat(owner), card.MessageID, approve)
	waitFor(t, "the click answered", func() bool { return len(e.fake.Answered()) == 1 })
	if n := len(e.svc.Decisions()); n != 0 {
		t.Errorf("%d decisions from a closed card", n)
	}
}

// A card whose message was never recorded (the plugin died, or Telegram's
// answer was lost, after it was sent) cannot be edited when the core
// restarted: the owner gets a message saying that approval ended.
func TestStaleCardNeverRecorded(t *testing.T) {
	t1 := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	seen := make(chan struct{}, 4)
	hook := func(p string) {
		if p == "reconciled" {
			seen <- struct{}{}
		}
	}
	e := newEnv(t, func(e *env) { e.svc.Status.Started, e.crash = t1, hook })
	<-seen
	e.fake.LoseAnswer("sendMessage", 1)
	c := api.Confirmation{ID: confID, Tool: "send_email", Group: "main", Session: "s-1", ArgsHash: argsHash,
		CreatedAt: e.clock.Now(), ExpiresAt: e.clock.Now().Add(5 * time.Minute), Arguments: json.RawMessage(`{"to":"bob@example.com"}`)}
	e.coreEvent("confirmation.requested", "main", c)
	waitFor(t, "the card sent", func() bool { return len(e.fake.Messages(owner)) == 1 })

	e.svc.Status.Started = t1.Add(time.Hour)
	e.crash = hook
	e.restart()
	<-seen
	waitFor(t, "the note", func() bool { return len(e.fake.Texts(owner)) == 2 })
	if got := e.fake.Texts(owner)[1]; got != "Approval "+confID[:8]+": "+outcomeRestarted {
		t.Errorf("note %q", got)
	}
}

// requestedPreview delivers confirmation.requested of a tool with a
// preview, and returns the card.
func (e *env) requestedPreview(preview string) fakebot.Message {
	e.t.Helper()
	c := api.Confirmation{ID: confID, Tool: "mail_send", Group: "main", Session: "s-1", ArgsHash: argsHash,
		Arguments: json.RawMessage(`{"draft_id":"d-1"}`), Preview: preview, PreviewDigest: "sha256:feed",
		CreatedAt: e.clock.Now(), ExpiresAt: e.clock.Now().Add(5 * time.Minute)}
	before := len(e.fake.Messages(owner))
	e.coreEvent("confirmation.requested", "main", c)
	waitFor(e.t, "the card", func() bool { return len(e.fake.Messages(owner)) > before })
	return e.fake.Messages(owner)[before]
}

// Through the fake Bot API: a card shows a short preview whole, and its
// Approve sends the preview's digest with the decision; a preview longer
// than a Telegram message is not shown, the card says where to read it,
// and offers Deny only.
func TestPreviewCard(t *testing.T) {
	t.Run("short", func(t *testing.T) {
		e := newEnv(t)
		card := e.requestedPreview("From: me@example.org\nTo: anna@example.org\nSubject: Lunch <b>\n\nTomorrow at 12?\n")
		for _, want := range []string{"What it will do:", "To: anna@example.org", "Subject: Lunch &lt;b&gt;", "Tomorrow at 12?"} {
			if !strings.Contains(card.Text, want) {
				t.Errorf("the card lacks %q:\n%s", want, card.Text)
			}
		}
		e.fake.Callback(owner, fakebot.PrivateChat(owner), card.MessageID, button(t, card, "Approve"))
		waitFor(t, "the answer to the click", func() bool { return len(e.fake.Answered()) == 1 })
		d := e.svc.Decisions()
		if len(d) != 1 || d[0] != (plugin.Decision{ID: confID, Approve: true, ArgsHash: argsHash, PreviewDigest: "sha256:feed", Decider: "4242"}) {
			t.Fatalf("decisions %+v; want an approval with the preview's digest", d)
		}
	})
	t.Run("longer than a message", func(t *testing.T) {
		e := newEnv(t)
		long := strings.Repeat("All work and no play makes Jack a dull boy.\n", 100)
		card := e.requestedPreview(long)
		for _, b := range card.ReplyMarkup.Buttons() {
			if strings.Contains(b.Text, "Approve") {
				t.Fatal("an Approve button for a preview the card cannot show whole")
			}
		}
		if strings.Contains(card.Text, "All work and no play") || !strings.Contains(card.Text, "carapace confirm show "+confID[:8]) {
			t.Errorf("card:\n%s", card.Text)
		}
		e.fake.Callback(owner, fakebot.PrivateChat(owner), card.MessageID, button(t, card, "Deny"))
		waitFor(t, "the answer to the click", func() bool { return len(e.fake.Answered()) == 1 })
		if d := e.svc.Decisions(); len(d) != 1 || d[0].Approve || d[0].PreviewDigest != "sha256:feed" {
			t.Fatalf("decisions %+v; want a denial", d)
		}
	})
}
