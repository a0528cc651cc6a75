package telegram

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

// Telegram's limits, as its FAQ gives them: about one message a second in
// one chat and about 30 a second in all; the plugin keeps under them.
const (
	perChatGap = time.Second            // between two messages to one chat
	globalGap  = time.Second / 25       // between any two messages: 25 a second
	maxRetries = 5                      // 429 answers honoured for one message
	maxWait    = 5 * time.Minute        // the longest retry_after honoured
	typingGap  = 4 * time.Second        // a typing indicator lasts 5 s
	retryDial  = 500 * time.Millisecond // after a refused connection
)

// errMaybeSent: Telegram did not answer, so the message may or may not
// have been delivered. It is not sent again: a duplicate is worse than a
// message the owner can ask for again.
var errMaybeSent = errors.New("no answer from Telegram: the message may have been sent; it is not sent again, to avoid a duplicate")

// botAPI is what the plugin calls of go-telegram/bot's *bot.Bot.
type botAPI interface {
	SendMessage(ctx context.Context, params *bot.SendMessageParams) (*models.Message, error)
	SendChatAction(ctx context.Context, params *bot.SendChatActionParams) (bool, error)
	AnswerCallbackQuery(ctx context.Context, params *bot.AnswerCallbackQueryParams) (bool, error)
	EditMessageText(ctx context.Context, params *bot.EditMessageTextParams) (*models.Message, error)
	EditMessageReplyMarkup(ctx context.Context, params *bot.EditMessageReplyMarkupParams) (*models.Message, error)
	SetMyCommands(ctx context.Context, params *bot.SetMyCommandsParams) (bool, error)
}

// sender sends messages within Telegram's limits: one chat's messages in
// order and at most one a second, all chats at most 25 a second, 429
// answers honoured, parse errors retried as plain text.
type sender struct {
	bot   botAPI
	clock Clock
	log   *slog.Logger

	mu       sync.Mutex
	nextChat map[int64]time.Time // when chat may get its next message
	booked   []time.Time         // sending times booked, sorted
	chatMu   map[int64]*sync.Mutex
}

func newSender(b botAPI, c Clock, log *slog.Logger) *sender {
	return &sender{bot: b, clock: c, log: log, nextChat: map[int64]time.Time{}, chatMu: map[int64]*sync.Mutex{}}
}

// reserve books the earliest time a message to chat may go.
func (s *sender) reserve(chat int64) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	i := 0
	for i < len(s.booked) && !s.booked[i].After(now.Add(-time.Second)) {
		i++
	}
	s.booked = s.booked[i:]
	t := now
	if n := s.nextChat[chat]; n.After(t) {
		t = n
	}
	for _, b := range s.booked { // sorted: t only moves forward
		if b.After(t.Add(-globalGap)) && b.Before(t.Add(globalGap)) {
			t = b.Add(globalGap)
		}
	}
	j := sort.Search(len(s.booked), func(k int) bool { return s.booked[k].After(t) })
	s.booked = append(s.booked, time.Time{})
	copy(s.booked[j+1:], s.booked[j:])
	s.booked[j] = t
	s.nextChat[chat] = t.Add(perChatGap)
	return t
}

// hold pushes chat's next message back to at least t (after a 429).
func (s *sender) hold(chat int64, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.After(s.nextChat[chat]) {
		s.nextChat[chat] = t
	}
}

// chatLock serialises the messages of one chat, so that two texts never
// interleave their pieces.
func (s *sender) chatLock(chat int64) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.chatMu[chat]
	if m == nil {
		m = &sync.Mutex{}
		s.chatMu[chat] = m
	}
	return m
}

// message is one text to send.
type message struct {
	Text   string             // plain text, or HTML when HTML is set
	HTML   bool               // Text is HTML (escaped by the caller)
	Plain  string             // the plain-text fallback of an HTML text
	Markup models.ReplyMarkup // buttons, on the last piece
}

// send sends m to chat, split into pieces, and returns the ids of the
// messages sent. It stops at the first piece that fails; an error wrapping
// errMaybeSent says that piece's fate is unknown.
func (s *sender) send(ctx context.Context, chat int64, m message) ([]int, error) {
	mu := s.chatLock(chat)
	mu.Lock()
	defer mu.Unlock()
	var pieces []string
	if m.HTML {
		pieces = []string{m.Text} // callers keep formatted texts under the limit
	} else {
		for _, p := range Split(m.Text, MaxMessage) {
			if strings.TrimSpace(p) != "" { // Telegram refuses blank messages
				pieces = append(pieces, p)
			}
		}
	}
	var ids []int
	for i, p := range pieces {
		one := message{Text: p, HTML: m.HTML, Plain: m.Plain}
		if i == len(pieces)-1 {
			one.Markup = m.Markup
		}
		id, err := s.one(ctx, chat, one)
		if err != nil {
			return ids, fmt.Errorf("telegram: send piece %d of %d to chat %d: %w", i+1, len(pieces), chat, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// noPreview is the link_preview_options of every text the plugin sends
// or edits: Telegram would otherwise fetch the text's first URL at once
// (egress.go).
func noPreview() *models.LinkPreviewOptions {
	off := true
	return &models.LinkPreviewOptions{IsDisabled: &off}
}

// textParams builds a sendMessage: the one place a new message's
// parameters are made.
func textParams(chat int64, m message) *bot.SendMessageParams {
	p := &bot.SendMessageParams{ChatID: chat, Text: m.Text, ReplyMarkup: m.Markup, LinkPreviewOptions: noPreview()}
	if m.HTML {
		p.ParseMode = models.ParseModeHTML
	}
	return p
}

// editParams builds an editMessageText that replaces message id's text
// and removes its buttons: the one place an edit's parameters are made.
func editParams(chat int64, id int, text string, html bool) *bot.EditMessageTextParams {
	p := &bot.EditMessageTextParams{ChatID: chat, MessageID: id, Text: text, LinkPreviewOptions: noPreview(),
		ReplyMarkup: &models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{}}}
	if html {
		p.ParseMode = models.ParseModeHTML
	}
	return p
}

// edit replaces message id's text in chat (HTML, or plain when Telegram
// cannot parse it) and removes its buttons.
func (s *sender) edit(ctx context.Context, chat int64, id int, htmlText, plain string) error {
	_, err := s.bot.EditMessageText(ctx, editParams(chat, id, htmlText, true))
	if err != nil && strings.Contains(err.Error(), "can't parse entities") {
		_, err = s.bot.EditMessageText(ctx, editParams(chat, id, plain, false))
	}
	return err
}

// sendPieces sends pieces, each as one message, in order, with markup on
// the last; it returns the ids of the messages sent and stops at the
// first that fails.
func (s *sender) sendPieces(ctx context.Context, chat int64, pieces []string, markup models.ReplyMarkup) ([]int, error) {
	mu := s.chatLock(chat)
	mu.Lock()
	defer mu.Unlock()
	var ids []int
	pieces = slices.DeleteFunc(slices.Clone(pieces), func(p string) bool { return strings.TrimSpace(p) == "" }) // Telegram refuses blank messages
	for i, p := range pieces {
		one := message{Text: p}
		if i == len(pieces)-1 {
			one.Markup = markup
		}
		id, err := s.one(ctx, chat, one)
		if err != nil {
			return ids, fmt.Errorf("telegram: send piece %d of %d to chat %d: %w", i+1, len(pieces), chat, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// clearButtons removes the buttons of message id in chat.
func (s *sender) clearButtons(ctx context.Context, chat int64, id int) {
	_, err := s.bot.EditMessageReplyMarkup(ctx, &bot.EditMessageReplyMarkupParams{ChatID: chat, MessageID: id,
		ReplyMarkup: &models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{}}})
	if err != nil {
		s.log.Warn("telegram: could not remove a message's buttons", "chat", chat, "message", id, "err", err)
	}
}

// one sends one piece, waiting for its slot, honouring 429s and falling
// back to plain text when Telegram cannot parse the formatting.
func (s *sender) one(ctx context.Context, chat int64, m message) (int, error) {
	params := textParams(chat, m)
	dialRetries, refused := 0, false
	for attempt := 0; ; attempt++ {
		if !refused { // a message Telegram refused did not use the chat's slot
			if err := sleep(ctx, s.clock, s.reserve(chat).Sub(s.clock.Now())); err != nil {
				return 0, err
			}
		}
		refused = false
		msg, err := s.bot.SendMessage(ctx, params)
		if err == nil {
			return msg.ID, nil
		}
		var tooMany *bot.TooManyRequestsError
		switch {
		case errors.As(err, &tooMany) && attempt < maxRetries:
			wait := min(time.Duration(max(tooMany.RetryAfter, 1))*time.Second, maxWait)
			s.log.Warn("telegram: flood control: waiting as told", "chat", chat, "retry_after_s", tooMany.RetryAfter)
			s.hold(chat, s.clock.Now().Add(wait))
			continue
		case params.ParseMode != "" && errors.Is(err, bot.ErrorBadRequest) && strings.Contains(err.Error(), "can't parse entities"):
			s.log.Warn("telegram: formatting refused; sending as plain text", "chat", chat, "err", err)
			params.ParseMode, params.Text, refused = "", m.Plain, true
			continue
		case notSent(err) && dialRetries < 3:
			dialRetries++
			if err := sleep(ctx, s.clock, retryDial); err != nil {
				return 0, err
			}
			continue
		case transportError(err):
			level := slog.LevelError
			if ctx.Err() != nil {
				level = slog.LevelInfo // stopping, or the caller gave up
			}
			s.log.Log(ctx, level, "telegram: no answer to a sendMessage: it may have been delivered; not sending it again", "chat", chat, "err", err)
			return 0, fmt.Errorf("%w (%v)", errMaybeSent, err)
		}
		return 0, err
	}
}

// transportError reports whether err came from the HTTP exchange rather
// than from an answer of the Bot API.
func transportError(err error) bool {
	var ue *url.Error
	return errors.As(err, &ue) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		serverErrorRE.MatchString(err.Error())
}

// serverErrorRE matches go-telegram/bot's error for a 5xx answer, after
// which the message may have been delivered.
var serverErrorRE = regexp.MustCompile(`error response from telegram for method \w+, 5\d\d `)

// notSent reports whether err says the request never left: the
// connection was refused.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// typing sends "typing" to chat now and every typingGap until ctx ends.
func (s *sender) typing(ctx context.Context, chat int64) {
	for {
		if _, err := s.bot.SendChatAction(ctx, &bot.SendChatActionParams{ChatID: chat, Action: models.ChatActionTyping}); err != nil && ctx.Err() == nil {
			s.log.Debug("telegram: typing indicator failed", "chat", chat, "err", err)
		}
		if sleep(ctx, s.clock, typingGap) != nil {
			return
		}
	}
}
