package telegram

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
	"github.com/carapace-dev/carapace/internal/textutil"
	"github.com/carapace-dev/carapace/plugins/telegram/fakebot"
	"github.com/carapace-dev/carapace/plugins/telegram/pairing"
)

// leakURL is what a hostile agent puts in a text so that Telegram's
// servers fetch it for a link preview.
const leakURL = "https://attacker.example/?d=secret"

// textless are the methods that carry no text a client could render:
// every other request must turn the link preview off.
var textless = map[string]bool{"getUpdates": true, "getMe": true, "deleteWebhook": true, "setMyCommands": true,
	"sendChatAction": true, "answerCallbackQuery": true, "editMessageReplyMarkup": true}

// previewLeaks returns the requests that carry text without turning
// Telegram's link preview off, or that ask Telegram to open a URL.
func previewLeaks(reqs []fakebot.Request) []string {
	var bad []string
	for _, r := range reqs {
		switch {
		case r.Params["url"] != "":
			bad = append(bad, r.Method+" with a url")
		case textless[r.Method]:
		case !r.PreviewDisabled():
			bad = append(bad, r.Method+": "+textutil.Clip(r.Params["text"], 60))
		}
	}
	return bad
}

// Every text the plugin sends or edits — command replies, notes, the
// agent's answers, send_telegram, an approval card, its Details and its
// edit, the pairing welcome — turns Telegram's link preview off, so a URL
// the agent writes is never fetched by Telegram on its own.
func TestNoLinkPreviews(t *testing.T) {
	e := newEnv(t)
	for _, cmd := range []string{"/help", "/status", "/tasks", "/stop"} {
		e.say(owner, cmd)
	}
	e.until("the command replies", func() bool { return len(e.fake.Texts(owner)) >= 4 })
	photo := e.fake.AddUpdate(map[string]any{"message": map[string]any{"message_id": 90, "date": 1767225600,
		"chat": fakebot.PrivateChat(owner), "from": fakebot.User(owner), "photo": []any{}}})
	e.handled(photo)
	e.until("the note", func() bool { return len(e.fake.Texts(owner)) >= 5 })

	e.say(owner, "look at "+leakURL)
	ev := e.flush(1)
	e.channel(plugin.TopicChannelStarted, ev, "s-1", "")
	e.channel(plugin.TopicChannelReply, ev, "s-1", "the answer "+leakURL)
	e.until("the answer", func() bool { return strings.Contains(strings.Join(e.fake.Texts(owner), "\n"), "the answer") })
	plugintest.AssertSuccess(t, e.invoke(`{"text":"a note `+leakURL+`"}`, plugintest.WithGroup("main")))

	e.clock.Advance(time.Minute) // the chat's next slot is free: the card goes at once
	card := e.requested(`{"url":"` + leakURL + `","body":"` + strings.Repeat("word ", 400) + `"}`)
	n := len(e.fake.Messages(owner))
	e.fake.Callback(owner, fakebot.PrivateChat(owner), card.MessageID, button(t, card, "Details"))
	e.until("the details", func() bool { return len(e.fake.Messages(owner)) > n })
	e.resolved("approved", "cli", "")
	waitFor(t, "the card edited", func() bool { return e.fake.Count("editMessageText") > 0 })

	// The pairing welcome, from a plugin that has no owner yet.
	p := newEnv(t, withoutConfig("owner_id"), func(e *env) {
		if _, err := pairing.New(e.dir, e.clock.Now()); err != nil {
			t.Fatal(err)
		}
	})
	code, err := pairing.New(p.dir, p.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	p.handled(p.fake.PrivateText(owner, "/start "+code))
	p.until("the welcome", func() bool { return len(p.fake.Texts(owner)) > 0 })
	e.clock.Advance(time.Minute)

	// Positive controls: the run sent every kind of text, and the check
	// finds a text without the option.
	reqs := append(e.fake.Requests(), p.fake.Requests()...)
	for m, want := range map[string]int{"sendMessage": 10, "editMessageText": 1} {
		got := 0
		for _, r := range reqs {
			if r.Method == m {
				got++
			}
		}
		if got < want {
			t.Fatalf("%d %s requests recorded, want at least %d: the check below would prove little", got, m, want)
		}
	}
	if bad := previewLeaks([]fakebot.Request{{Method: "sendMessage", Params: map[string]string{"text": leakURL}}}); len(bad) != 1 {
		t.Fatalf("the check misses a text without link_preview_options: %v", bad)
	}
	if bad := previewLeaks(reqs); len(bad) > 0 {
		t.Errorf("requests with a link preview (Telegram fetches the URL at once):\n%s", strings.Join(bad, "\n"))
	}
}

// The guard in front of the Bot API refuses, before it leaves, a text
// without the preview turned off, a button or parameter that opens an
// address, and any method nobody has checked — whatever code builds it.
func TestEgressGuard(t *testing.T) {
	fake := fakebot.New(t)
	b, err := bot.New(fakebot.Token, bot.WithServerURL(fake.URL()), bot.WithSkipGetMe(),
		bot.WithHTTPClient(time.Second, &egressGuard{client: &http.Client{Timeout: 5 * time.Second}}))
	if err != nil {
		t.Fatal(err)
	}
	urlButton := &models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{{{Text: "open", URL: leakURL}}}}
	webApp := &models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{{{Text: "open", WebApp: &models.WebAppInfo{URL: leakURL}}}}}
	callback := &models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{{{Text: "ok", CallbackData: "t"}}}}
	cases := []struct {
		name  string
		call  func() error
		allow bool
	}{
		{"a text without link_preview_options", func() error {
			_, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: owner, Text: leakURL})
			return err
		}, false},
		{"a text with the preview on", func() error {
			on := false
			_, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: owner, Text: leakURL, LinkPreviewOptions: &models.LinkPreviewOptions{IsDisabled: &on}})
			return err
		}, false},
		{"an edit without link_preview_options", func() error {
			_, err := b.EditMessageText(t.Context(), &bot.EditMessageTextParams{ChatID: owner, MessageID: 1, Text: leakURL})
			return err
		}, false},
		{"a url button", func() error {
			p := textParams(owner, message{Text: "x", Markup: urlButton})
			_, err := b.SendMessage(t.Context(), p)
			return err
		}, false},
		{"a web_app button", func() error {
			_, err := b.SendMessage(t.Context(), textParams(owner, message{Text: "x", Markup: webApp}))
			return err
		}, false},
		{"a callback answer that opens a url", func() error {
			_, err := b.AnswerCallbackQuery(t.Context(), &bot.AnswerCallbackQueryParams{CallbackQueryID: "q", URL: leakURL})
			return err
		}, false},
		{"a method nobody checked", func() error {
			_, err := b.SendPhoto(t.Context(), &bot.SendPhotoParams{ChatID: owner, Photo: &models.InputFileString{Data: leakURL}})
			return err
		}, false},
		// Positive controls: what the plugin sends passes.
		{"a text built by textParams, with callback buttons", func() error {
			_, err := b.SendMessage(t.Context(), textParams(owner, message{Text: "see " + leakURL, Markup: callback}))
			return err
		}, true},
		{"a callback answer", func() error {
			_, err := b.AnswerCallbackQuery(t.Context(), &bot.AnswerCallbackQueryParams{CallbackQueryID: "q", Text: "Approved."})
			return err
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(fake.Requests())
			err := tc.call()
			sent := len(fake.Requests()) - before
			switch {
			case tc.allow && (err != nil || sent != 1):
				t.Errorf("refused (%v), %d requests reached the Bot API", err, sent)
			case !tc.allow && (!errors.Is(err, errEgress) || sent != 0):
				t.Errorf("err %v, %d requests reached the Bot API; want errEgress and none", err, sent)
			}
		})
	}
}
