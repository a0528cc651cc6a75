// Package fakebot is a fake Telegram Bot API server for tests: an
// httptest server that answers /bot<token>/<method> the way
// api.telegram.org does, for the methods the Telegram plugin uses (getMe,
// getUpdates, sendMessage, sendChatAction, answerCallbackQuery,
// editMessageText, editMessageReplyMarkup, setMyCommands, deleteWebhook).
//
// A test queues updates (AddUpdate and the helpers PrivateText,
// GroupText, Callback, …), then reads what the bot did: every request is
// recorded with its method and form parameters (Requests, Count, Counts),
// sent messages are kept per chat (Messages), and getUpdates honours
// offset as Telegram does — an update is confirmed, and never served
// again, once a getUpdates asks for a higher offset (Confirmed). Faults are injected per method for the next N calls,
// or for every call until healed (FailAll, Heal): a 429 with retry_after
// (TooManyRequests), "Bad Request: can't parse entities" (CantParseEntities),
// any error (Fail), or a lost answer — the request is applied and the
// connection closed before the answer (LoseAnswer), so that the client
// cannot know whether it was.
//
// Like Telegram, it refuses a wrong token (401), an empty or too long text
// (more than 4096 UTF-16 units), callback_data over 64 bytes, and
// malformed HTML when parse_mode is HTML; it accepts the empty copy_text
// that go-telegram/bot sends with every inline button. It does not filter
// updates by allowed_updates (it records the parameter): a test can so
// show that the bot itself drops what it did not ask for.
package fakebot

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"
)

// The bot the fake serves.
const (
	// Token is the bot's token (the fake refuses any other); the bot's
	// user id is its number.
	Token = "123456789:AAFakeTokenForCarapaceTestsOnly_0123456"
	// BotID is the bot's user id.
	BotID int64 = 123456789
	// BotUsername is the bot's username.
	BotUsername = "carapace_test_bot"
)

// Request is one request the fake received.
type Request struct {
	Method string            // e.g. "sendMessage"
	Params map[string]string // the form (or JSON) parameters, as sent
	Status int               // the HTTP status answered (0 if the answer was lost)
	Done   bool              // the fake has finished with it (answered, or lost the answer)
	At     time.Time         // when it arrived
}

// PreviewDisabled reports whether the request turns Telegram's link
// preview off: link_preview_options with is_disabled true. Without it,
// Telegram fetches the first URL in a message's text at once, before
// anyone clicks it.
func (r Request) PreviewDisabled() bool {
	raw, ok := r.Params["link_preview_options"]
	if !ok {
		return false
	}
	var o struct {
		IsDisabled bool `json:"is_disabled"`
	}
	return json.Unmarshal([]byte(raw), &o) == nil && o.IsDisabled
}

// Message is a message the bot sent (or a sent message as last edited).
type Message struct {
	ChatID      int64
	MessageID   int
	Text        string
	ParseMode   string
	ReplyMarkup *InlineKeyboard // nil when the message has no inline keyboard
}

// InlineKeyboard is a message's inline keyboard, as the bot sent it.
type InlineKeyboard struct {
	Rows [][]Button `json:"inline_keyboard"`
}

// Button is one inline button.
type Button struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data,omitempty"`
}

// Buttons returns every button, row by row.
func (k *InlineKeyboard) Buttons() []Button {
	if k == nil {
		return nil
	}
	var out []Button
	for _, r := range k.Rows {
		out = append(out, r...)
	}
	return out
}

// Fault is an error answer to inject.
type Fault struct {
	Code        int    // HTTP status and error_code, e.g. 429
	Description string // e.g. "Too Many Requests: retry after 3"
	RetryAfter  int    // parameters.retry_after, for a 429
	lose        bool   // apply the request, then close the connection unanswered
}

// TooManyRequests is Telegram's flood-control answer.
func TooManyRequests(retryAfter int) Fault {
	return Fault{Code: http.StatusTooManyRequests, Description: fmt.Sprintf("Too Many Requests: retry after %d", retryAfter), RetryAfter: retryAfter}
}

// CantParseEntities is Telegram's answer to malformed formatting.
func CantParseEntities() Fault {
	return Fault{Code: http.StatusBadRequest, Description: "Bad Request: can't parse entities: Unsupported start tag \"x\" at byte offset 0"}
}

// Server is a fake Bot API. Create it with New.
type Server struct {
	srv *httptest.Server

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced when updates are added
	quit      chan struct{}
	updates   []json.RawMessage // not yet confirmed, in id order
	ids       []int64           // their ids
	nextID    int64
	confirmed int64               // the highest confirmed update id
	served    map[int64]time.Time // update id → when a getUpdates first returned it
	requests  []Request
	faults    map[string][]Fault
	down      map[string]Fault // methods that fail until Heal
	nextMsg   int
	messages  map[int64][]*Message // chat → messages, in order
	answered  []string             // callback query ids answered
	callbacks int
	closeOnce sync.Once
}

// pollCap bounds how long one getUpdates waits for an update, whatever
// timeout it asks for, so that a forgotten poll never holds a test up for
// long.
const pollCap = 5 * time.Second

// New starts a fake Bot API, closed at the end of the test.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{changed: make(chan struct{}), quit: make(chan struct{}), nextID: 1000,
		faults: map[string][]Fault{}, down: map[string]Fault{}, messages: map[int64][]*Message{}, served: map[int64]time.Time{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// URL is the server's address, for the bot's WithServerURL (the Telegram
// plugin's api_url).
func (s *Server) URL() string { return s.srv.URL }

// Close stops the server: pending long polls return at once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.quit)
		s.srv.Close()
	})
}

// AddUpdate queues an update, given as its JSON object without update_id,
// and returns the id it was given (increasing from 1001).
func (s *Server) AddUpdate(body map[string]any) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	id := s.nextID
	u := map[string]any{"update_id": id}
	for k, v := range body {
		u[k] = v
	}
	raw, err := json.Marshal(u)
	if err != nil {
		panic(fmt.Sprintf("fakebot: AddUpdate: %v", err))
	}
	s.updates = append(s.updates, raw)
	s.ids = append(s.ids, id)
	close(s.changed)
	s.changed = make(chan struct{})
	return id
}

// ServedAt returns when a getUpdates first returned update id (false if
// none has yet).
func (s *Server) ServedAt(id int64) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.served[id]
	return t, ok
}

// Confirmed returns the highest update id confirmed by a getUpdates with a
// higher offset (0 if none).
func (s *Server) Confirmed() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.confirmed
}

// User is a Telegram user in an update.
func User(id int64) map[string]any {
	return map[string]any{"id": id, "is_bot": false, "first_name": "User" + strconv.FormatInt(id, 10)}
}

// PrivateChat is the private chat with user id.
func PrivateChat(id int64) map[string]any {
	return map[string]any{"id": id, "type": "private", "first_name": "User" + strconv.FormatInt(id, 10)}
}

// GroupChat is a group chat (id is negative in Telegram).
func GroupChat(id int64) map[string]any {
	return map[string]any{"id": id, "type": "supergroup", "title": "Group " + strconv.FormatInt(id, 10)}
}

// ChannelChat is a channel.
func ChannelChat(id int64) map[string]any {
	return map[string]any{"id": id, "type": "channel", "title": "Channel " + strconv.FormatInt(id, 10)}
}

// TextMessage is a message object: from (nil for none), chat, text.
func (s *Server) TextMessage(from, chat map[string]any, text string) map[string]any {
	s.mu.Lock()
	s.nextMsg++
	id := s.nextMsg
	s.mu.Unlock()
	m := map[string]any{"message_id": id, "date": 1767225600, "chat": chat, "text": text}
	if from != nil {
		m["from"] = from
	}
	return m
}

// PrivateText queues a text message from user in their private chat with
// the bot.
func (s *Server) PrivateText(user int64, text string) int64 {
	return s.AddUpdate(map[string]any{"message": s.TextMessage(User(user), PrivateChat(user), text)})
}

// GroupText queues a text message from user in group chat.
func (s *Server) GroupText(chat, user int64, text string) int64 {
	return s.AddUpdate(map[string]any{"message": s.TextMessage(User(user), GroupChat(chat), text)})
}

// Callback queues a callback query: user pressed the button with data on
// message messageID of chat. It returns the update id and the query's id.
func (s *Server) Callback(user int64, chat map[string]any, messageID int, data string) (int64, string) {
	s.mu.Lock()
	s.callbacks++
	qid := "cbq-" + strconv.Itoa(s.callbacks)
	s.mu.Unlock()
	msg := map[string]any{"message_id": messageID, "date": 1767225600, "chat": chat, "text": "card"}
	id := s.AddUpdate(map[string]any{"callback_query": map[string]any{
		"id": qid, "from": User(user), "message": msg, "chat_instance": "ci-1", "data": data}})
	return id, qid
}

// Answered returns the ids of the callback queries answered so far.
func (s *Server) Answered() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.answered)
}

// Fail makes the next n calls of method fail with f.
func (s *Server) Fail(method string, n int, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.faults[method] = append(s.faults[method], f)
	}
}

// FailAll makes every call of method fail with f until Heal(method),
// after the faults queued by Fail.
func (s *Server) FailAll(method string, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down[method] = f
}

// Heal ends FailAll(method).
func (s *Server) Heal(method string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.down, method)
}

// LoseAnswer makes the next n calls of method succeed on the server (a
// message is sent) but lose the answer: the connection is closed first.
func (s *Server) LoseAnswer(method string, n int) {
	s.Fail(method, n, Fault{lose: true})
}

// Requests returns every request so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Count returns how many requests of method were received.
func (s *Server) Count(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if r.Method == method {
			n++
		}
	}
	return n
}

// Counts returns the number of requests per method.
func (s *Server) Counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[string]int{}
	for _, r := range s.requests {
		m[r.Method]++
	}
	return m
}

// Outbound returns the number of requests other than getUpdates, getMe,
// setMyCommands and deleteWebhook: what the bot did in answer to updates.
func (s *Server) Outbound() int {
	n := 0
	for m, c := range s.Counts() {
		switch m {
		case "getUpdates", "getMe", "setMyCommands", "deleteWebhook":
		default:
			n += c
		}
	}
	return n
}

// Messages returns the messages sent to chat (as last edited), in order.
func (s *Server) Messages(chat int64) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.messages[chat] {
		out = append(out, *m)
	}
	return out
}

// Texts returns the texts of the messages sent to chat, in order.
func (s *Server) Texts(chat int64) []string {
	var out []string
	for _, m := range s.Messages(chat) {
		out = append(out, m.Text)
	}
	return out
}

// Wait waits until cond (called with no lock held) is true, polling every
// millisecond, and fails the test after timeout.
func (s *Server) Wait(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("fakebot: timed out after %v waiting for %s; requests so far: %v", timeout, what, s.Counts())
		}
		time.Sleep(time.Millisecond)
	}
}

// WaitCount waits until at least n requests of method have come and
// been dealt with (so that what they did, such as a sent message, shows).
func (s *Server) WaitCount(t testing.TB, method string, n int) {
	t.Helper()
	s.Wait(t, 10*time.Second, fmt.Sprintf("%d %s", n, method), func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		k := 0
		for _, r := range s.requests {
			if r.Method == method && r.Done {
				k++
			}
		}
		return k >= n
	})
}

// apiError is Telegram's error answer.
type apiError struct {
	OK          bool   `json:"ok"`
	ErrorCode   int    `json:"error_code"`
	Description string `json:"description"`
	Parameters  *struct {
		RetryAfter int `json:"retry_after,omitempty"`
	} `json:"parameters,omitempty"`
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	token, method, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || method == "" {
		writeJSON(w, http.StatusNotFound, apiError{ErrorCode: 404, Description: "Not Found"})
		return
	}
	params, err := readParams(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{ErrorCode: 400, Description: "Bad Request: " + err.Error()})
		return
	}
	s.mu.Lock()
	idx := len(s.requests)
	s.requests = append(s.requests, Request{Method: method, Params: params, At: time.Now()})
	var fault *Fault
	if q := s.faults[method]; len(q) > 0 && token == Token {
		f := q[0]
		s.faults[method] = q[1:]
		fault = &f
	} else if f, ok := s.down[method]; ok && token == Token {
		fault = &f
	}
	s.mu.Unlock()
	status := s.answer(w, r, token, method, params, fault)
	s.mu.Lock()
	s.requests[idx].Status = status
	s.requests[idx].Done = true
	s.mu.Unlock()
}

// answer handles one request and returns the status it answered with (0
// when the answer was lost on purpose).
func (s *Server) answer(w http.ResponseWriter, r *http.Request, token, method string, p map[string]string, fault *Fault) int {
	if token != Token {
		return writeJSON(w, http.StatusUnauthorized, apiError{ErrorCode: 401, Description: "Unauthorized"})
	}
	if fault != nil && !fault.lose {
		e := apiError{ErrorCode: fault.Code, Description: fault.Description}
		if fault.RetryAfter > 0 {
			e.Parameters = &struct {
				RetryAfter int `json:"retry_after,omitempty"`
			}{fault.RetryAfter}
		}
		return writeJSON(w, fault.Code, e)
	}
	var result any
	var err error
	switch method {
	case "getMe":
		result = map[string]any{"id": BotID, "is_bot": true, "first_name": "Carapace test", "username": BotUsername}
	case "getUpdates":
		return s.getUpdates(w, r, p)
	case "sendMessage":
		result, err = s.sendMessage(p)
	case "editMessageText":
		result, err = s.editMessage(p, true)
	case "editMessageReplyMarkup":
		result, err = s.editMessage(p, false)
	case "answerCallbackQuery":
		if p["callback_query_id"] == "" {
			err = tgError("Bad Request: query is too old and response timeout expired or query ID is invalid")
		} else {
			s.mu.Lock()
			s.answered = append(s.answered, p["callback_query_id"])
			s.mu.Unlock()
			result = true
		}
	case "sendChatAction":
		if _, e := strconv.ParseInt(p["chat_id"], 10, 64); e != nil || p["action"] == "" {
			err = tgError("Bad Request: chat_id and action are required")
		} else {
			result = true
		}
	case "setMyCommands":
		var cmds []map[string]any
		if e := json.Unmarshal([]byte(p["commands"]), &cmds); e != nil {
			err = tgError("Bad Request: can't parse commands JSON object")
		} else {
			result = true
		}
	case "deleteWebhook":
		result = true
	default:
		return writeJSON(w, http.StatusNotFound, apiError{ErrorCode: 404, Description: "Not Found: method not found"})
	}
	if err != nil {
		return writeJSON(w, http.StatusBadRequest, apiError{ErrorCode: 400, Description: err.Error()})
	}
	if fault != nil && fault.lose {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, herr := hj.Hijack(); herr == nil {
				conn.Close()
				return 0
			}
		}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"ok": true, "result": result})
}

func (s *Server) getUpdates(w http.ResponseWriter, r *http.Request, p map[string]string) int {
	offset, _ := strconv.ParseInt(p["offset"], 10, 64)
	limit, _ := strconv.Atoi(p["limit"])
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	timeout, _ := strconv.Atoi(p["timeout"])
	wait := min(time.Duration(timeout)*time.Second, pollCap)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		s.mu.Lock()
		// Telegram: "An update is considered confirmed as soon as
		// getUpdates is called with an offset higher than its update_id."
		if offset > 0 {
			i := 0
			for i < len(s.ids) && s.ids[i] < offset {
				s.confirmed = max(s.confirmed, s.ids[i])
				i++
			}
			s.ids, s.updates = s.ids[i:], s.updates[i:]
		}
		n := min(limit, len(s.updates))
		batch := slices.Clone(s.updates[:n])
		if n > 0 {
			now := time.Now()
			for _, id := range s.ids[:n] {
				if _, ok := s.served[id]; !ok {
					s.served[id] = now
				}
			}
		}
		changed := s.changed
		s.mu.Unlock()
		if n > 0 || wait <= 0 {
			return writeJSON(w, http.StatusOK, map[string]any{"ok": true, "result": batch})
		}
		select {
		case <-changed:
		case <-timer.C:
			return writeJSON(w, http.StatusOK, map[string]any{"ok": true, "result": []any{}})
		case <-r.Context().Done():
			return 0
		case <-s.quit:
			return 0
		}
	}
}

func (s *Server) sendMessage(p map[string]string) (any, error) {
	chat, err := strconv.ParseInt(p["chat_id"], 10, 64)
	if err != nil {
		return nil, tgError("Bad Request: chat not found")
	}
	kb, err := checkMessage(p)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextMsg++
	m := &Message{ChatID: chat, MessageID: s.nextMsg, Text: p["text"], ParseMode: p["parse_mode"], ReplyMarkup: kb}
	s.messages[chat] = append(s.messages[chat], m)
	return messageJSON(m), nil
}

func (s *Server) editMessage(p map[string]string, text bool) (any, error) {
	chat, err := strconv.ParseInt(p["chat_id"], 10, 64)
	if err != nil {
		return nil, tgError("Bad Request: chat not found")
	}
	id, _ := strconv.Atoi(p["message_id"])
	var kb *InlineKeyboard
	if text {
		kb, err = checkMessage(p)
	} else {
		kb, err = parseKeyboard(p["reply_markup"])
	}
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.messages[chat] {
		if m.MessageID != id {
			continue
		}
		if text {
			m.Text, m.ParseMode = p["text"], p["parse_mode"]
		}
		m.ReplyMarkup = kb
		return messageJSON(m), nil
	}
	return nil, tgError("Bad Request: message to edit not found")
}

// checkMessage checks text, parse_mode and reply_markup as Telegram does.
func checkMessage(p map[string]string) (*InlineKeyboard, error) {
	text := p["text"]
	switch n := len(utf16.Encode([]rune(text))); {
	case strings.TrimSpace(text) == "":
		return nil, tgError("Bad Request: message text is empty")
	case n > 4096:
		return nil, tgError("Bad Request: message is too long")
	}
	switch p["parse_mode"] {
	case "":
	case "HTML":
		if err := checkHTML(text); err != nil {
			return nil, tgErrorf("Bad Request: can't parse entities: %v", err)
		}
	default:
		return nil, tgErrorf("Bad Request: unsupported parse_mode %q", p["parse_mode"])
	}
	return parseKeyboard(p["reply_markup"])
}

// parseKeyboard decodes an inline keyboard; "" or one with no rows is none.
func parseKeyboard(raw string) (*InlineKeyboard, error) {
	if raw == "" {
		return nil, nil
	}
	var kb struct {
		Rows [][]struct {
			Text         string          `json:"text"`
			CallbackData string          `json:"callback_data"`
			CopyText     json.RawMessage `json:"copy_text"` // go-telegram/bot always sends {"text":""}
		} `json:"inline_keyboard"`
	}
	if err := json.Unmarshal([]byte(raw), &kb); err != nil {
		return nil, tgError("Bad Request: can't parse reply keyboard markup JSON object")
	}
	out := &InlineKeyboard{}
	for _, row := range kb.Rows {
		var r []Button
		for _, b := range row {
			switch {
			case b.Text == "":
				return nil, tgError("Bad Request: text buttons are unallowed in the inline keyboard")
			case len(b.CallbackData) > 64:
				return nil, tgError("Bad Request: BUTTON_DATA_INVALID")
			}
			r = append(r, Button{Text: b.Text, CallbackData: b.CallbackData})
		}
		if len(r) > 0 {
			out.Rows = append(out.Rows, r)
		}
	}
	if len(out.Rows) == 0 {
		return nil, nil
	}
	return out, nil
}

// checkHTML accepts the subset of HTML Telegram parses: the tags it knows,
// properly nested, and & only as an entity.
func checkHTML(s string) error {
	allowed := map[string]bool{"b": true, "strong": true, "i": true, "em": true, "u": true, "ins": true, "s": true,
		"strike": true, "del": true, "code": true, "pre": true, "a": true, "tg-spoiler": true, "blockquote": true}
	var stack []string
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '<':
			end := strings.IndexByte(s[i:], '>')
			if end < 0 {
				return fmt.Errorf("unclosed start tag at byte offset %d", i)
			}
			tag := s[i+1 : i+end]
			closing := strings.HasPrefix(tag, "/")
			name := strings.TrimPrefix(tag, "/")
			if sp := strings.IndexAny(name, " \t\n"); sp >= 0 {
				name = name[:sp]
			}
			if !allowed[name] {
				return fmt.Errorf("unsupported start tag %q at byte offset %d", name, i)
			}
			if closing {
				if len(stack) == 0 || stack[len(stack)-1] != name {
					return fmt.Errorf("unmatched end tag %q at byte offset %d", name, i)
				}
				stack = stack[:len(stack)-1]
			} else {
				stack = append(stack, name)
			}
			i += end
		case '>':
			return fmt.Errorf("unexpected '>' at byte offset %d", i)
		case '&':
			end := strings.IndexByte(s[i:], ';')
			if end < 0 || end > 10 {
				return fmt.Errorf("unescaped '&' at byte offset %d", i)
			}
			switch ent := s[i+1 : i+end]; {
			case ent == "lt", ent == "gt", ent == "amp", ent == "quot":
			case strings.HasPrefix(ent, "#"):
			default:
				return fmt.Errorf("unsupported entity %q at byte offset %d", ent, i)
			}
			i += end
		}
	}
	if len(stack) > 0 {
		return fmt.Errorf("unclosed tag %q", stack[len(stack)-1])
	}
	return nil
}

func messageJSON(m *Message) map[string]any {
	out := map[string]any{"message_id": m.MessageID, "date": 1767225600, "text": m.Text,
		"chat": map[string]any{"id": m.ChatID, "type": "private"},
		"from": map[string]any{"id": BotID, "is_bot": true, "first_name": "Carapace test", "username": BotUsername}}
	if m.ReplyMarkup != nil {
		out["reply_markup"] = m.ReplyMarkup
	}
	return out
}

// readParams reads a request's parameters: multipart or urlencoded form,
// JSON body, or the query string.
func readParams(r *http.Request) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range r.URL.Query() {
		out[k] = v[0]
	}
	if r.Body == nil {
		return out, nil
	}
	ct, ctParams, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "multipart/form-data":
		mr := multipart.NewReader(r.Body, ctParams["boundary"])
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			if err != nil {
				return nil, fmt.Errorf("multipart: %w", err)
			}
			b, err := io.ReadAll(io.LimitReader(part, 1<<20))
			if err != nil {
				return nil, err
			}
			out[part.FormName()] = string(b)
		}
	case "application/x-www-form-urlencoded":
		b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			return nil, err
		}
		v, err := url.ParseQuery(string(b))
		if err != nil {
			return nil, err
		}
		for k, vv := range v {
			out[k] = vv[0]
		}
	case "application/json":
		var m map[string]any
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&m); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		for k, v := range m {
			if s, ok := v.(string); ok {
				out[k] = s
			} else {
				b, _ := json.Marshal(v)
				out[k] = string(b)
			}
		}
	}
	return out, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) int {
	if e, ok := v.(apiError); ok {
		e.OK = false
		v = e
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
	return status
}

// tgError is an error answer's description, worded as Telegram words it
// (capitalised, unlike Go errors).
type tgError string

func (e tgError) Error() string { return string(e) }

func tgErrorf(format string, args ...any) error { return tgError(fmt.Sprintf(format, args...)) }
