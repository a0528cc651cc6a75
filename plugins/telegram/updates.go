package telegram

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/carapace-dev/carapace/plugins/telegram/pairing"
	"github.com/go-telegram/bot/models"
)

// updateInfo is what the plugin records about any update: never content.
type updateInfo struct {
	ID       int64
	Kind     string // the update's field: message, callback_query, edited_message, …
	Chat     int64
	ChatType string
	User     int64
}

// describe returns an update's kind, chat and sender.
func describe(u *models.Update) updateInfo {
	in := updateInfo{ID: u.ID}
	msg := func(kind string, m *models.Message) {
		in.Kind = kind
		if m != nil {
			in.Chat, in.ChatType = m.Chat.ID, string(m.Chat.Type)
			if m.From != nil {
				in.User = m.From.ID
			}
		}
	}
	switch {
	case u.Message != nil:
		msg("message", u.Message)
	case u.EditedMessage != nil:
		msg("edited_message", u.EditedMessage)
	case u.ChannelPost != nil:
		msg("channel_post", u.ChannelPost)
	case u.EditedChannelPost != nil:
		msg("edited_channel_post", u.EditedChannelPost)
	case u.BusinessMessage != nil:
		msg("business_message", u.BusinessMessage)
	case u.EditedBusinessMessage != nil:
		msg("edited_business_message", u.EditedBusinessMessage)
	case u.CallbackQuery != nil:
		in.Kind, in.User = "callback_query", u.CallbackQuery.From.ID
		if c, ok := callbackChat(u.CallbackQuery); ok {
			in.Chat, in.ChatType = c.ID, string(c.Type)
		}
	case u.MyChatMember != nil:
		in.Kind, in.Chat, in.ChatType, in.User = "my_chat_member", u.MyChatMember.Chat.ID, string(u.MyChatMember.Chat.Type), u.MyChatMember.From.ID
	case u.ChatMember != nil:
		in.Kind, in.Chat, in.ChatType, in.User = "chat_member", u.ChatMember.Chat.ID, string(u.ChatMember.Chat.Type), u.ChatMember.From.ID
	case u.ChatJoinRequest != nil:
		in.Kind, in.Chat, in.User = "chat_join_request", u.ChatJoinRequest.Chat.ID, u.ChatJoinRequest.From.ID
	case u.InlineQuery != nil:
		in.Kind = "inline_query"
		if u.InlineQuery.From != nil {
			in.User = u.InlineQuery.From.ID
		}
	case u.MessageReaction != nil:
		in.Kind, in.Chat = "message_reaction", u.MessageReaction.Chat.ID
		if u.MessageReaction.User != nil {
			in.User = u.MessageReaction.User.ID
		}
	case u.PollAnswer != nil:
		in.Kind = "poll_answer"
	case u.Poll != nil:
		in.Kind = "poll"
	default:
		in.Kind = "other"
	}
	return in
}

// callbackChat is the chat of the message a callback's button was on.
func callbackChat(q *models.CallbackQuery) (models.Chat, bool) {
	switch {
	case q.Message.Message != nil:
		return q.Message.Message.Chat, true
	case q.Message.InaccessibleMessage != nil:
		return q.Message.InaccessibleMessage.Chat, true
	}
	return models.Chat{}, false
}

// callbackMessageIDOf is the id of the message u's button was on, 0 for
// an update that is not a button press.
func callbackMessageIDOf(u *models.Update) int {
	if u.CallbackQuery == nil {
		return 0
	}
	return callbackMessageID(u.CallbackQuery)
}

// callbackMessageID is the id of the message a callback's button was on.
func callbackMessageID(q *models.CallbackQuery) int {
	switch {
	case q.Message.Message != nil:
		return q.Message.Message.ID
	case q.Message.InaccessibleMessage != nil:
		return q.Message.InaccessibleMessage.MessageID
	}
	return 0
}

// action is what one update asks of the plugin.
type action struct {
	kind   string // drop, pair, text, command, callback, ignore
	reason string // for drop and ignore: why (logged)
	chat   int64
	group  string
	text   string
	cmd    string
	args   string
	update int64 // for a command being done: the update that asked for it
}

// classify decides what an update is, before anything is done with it.
// Everything that is not the owner's message in a mapped chat, the
// owner's callback in the owner's private chat, or a pairing /start with
// the right code is dropped: it causes no outbound request at all.
func (h *Handler) classify(u *models.Update, owner int64) action {
	drop := func(reason string) action { return action{kind: "drop", reason: reason} }
	switch {
	case u.Message != nil:
		m := u.Message
		switch {
		case m.From == nil || m.SenderChat != nil:
			return drop("not sent by a user")
		case m.From.IsBot || m.From.ID == h.botID:
			return drop("sent by a bot")
		}
		private := m.Chat.Type == models.ChatTypePrivate && m.Chat.ID == m.From.ID
		if owner == 0 {
			if code, ok := strings.CutPrefix(m.Text, "/start "); ok && private && pairing.Check(h.opts.DataDir, code, h.clock.Now()) {
				return action{kind: "pair", chat: m.Chat.ID}
			}
			return drop("no owner yet, and not a valid pairing code")
		}
		if m.From.ID != owner {
			return drop("not the owner")
		}
		group, ok := h.cfg.groupOf(owner, m.Chat.ID)
		if !ok || (m.Chat.ID == owner && !private) {
			return drop("the owner, in a chat not bound to a group")
		}
		if m.Text == "" {
			return action{kind: "ignore", reason: "not a text message", chat: m.Chat.ID, group: group}
		}
		forwarded := m.ForwardOrigin != nil || m.IsAutomaticForward
		if cmd, args, ok := h.command(m.Text); ok && !forwarded { // a forwarded command is someone else's
			return action{kind: "command", chat: m.Chat.ID, group: group, cmd: cmd, args: args}
		}
		if !forwarded && strings.HasPrefix(m.Text, "/") && h.otherBotCommand(m.Text) {
			return drop("a command for another bot")
		}
		return action{kind: "text", chat: m.Chat.ID, group: group, text: frameText(m, owner, h.botID)}
	case u.CallbackQuery != nil:
		q := u.CallbackQuery
		if owner == 0 || q.From.ID != owner {
			return drop("a button pressed by someone who is not the owner")
		}
		c, ok := callbackChat(q)
		if !ok || c.ID != owner || c.Type != models.ChatTypePrivate {
			return drop("the owner's button outside the owner's private chat")
		}
		return action{kind: "callback", chat: c.ID}
	}
	return drop("an update of a kind the plugin does not handle")
}

// command parses "/name@bot args" for the plugin's commands; another
// bot's command, or an unknown one, is not a command (unknown ones are
// text for the agent).
func (h *Handler) command(text string) (name, args string, ok bool) {
	if !strings.HasPrefix(text, "/") {
		return "", "", false
	}
	head, args, _ := strings.Cut(text, " ")
	name, target, hasTarget := strings.Cut(strings.TrimPrefix(head, "/"), "@")
	if hasTarget && !strings.EqualFold(target, h.botUN) {
		return "", "", false
	}
	switch name = strings.ToLower(name); name {
	case "start", "help", "status", "stop", "new", "pause", "resume", "tasks":
		return name, strings.TrimSpace(args), true
	}
	return "", "", false
}

// otherBotCommand reports whether text is a command addressed to another
// bot (/cmd@otherbot), which is none of the agent's business.
func (h *Handler) otherBotCommand(text string) bool {
	head, _, _ := strings.Cut(text, " ")
	_, target, ok := strings.Cut(head, "@")
	return ok && !strings.EqualFold(target, h.botUN)
}

// onUpdate handles one update: it decides what the update is, records it
// (and, for the owner's text, the prompt; for a command or a button
// press, the action) in one transaction, and only then acts — a command
// or a press at once (actions.go). The poll calls it for one update at a time, in order, and
// asks Telegram for the next batch (confirming this one) only once it has
// returned; false means the plugin stops and the update was not recorded.
func (h *Handler) onUpdate(ctx context.Context, u *models.Update) bool {
	info := describe(u)
	a := h.classify(u, h.ownerID())
	disposition := a.kind
	if a.reason != "" {
		disposition += ": " + a.reason
	}
	var act ownerAction
	if a.kind == "command" || a.kind == "callback" {
		var query, data string
		if q := u.CallbackQuery; q != nil {
			query, data = q.ID, q.Data
		}
		act = actionOf(info.ID, a, query, callbackMessageIDOf(u), data)
	}
	var ask *pausedAsk
	if a.kind == "text" && h.goesAtOnce(a.chat) {
		ask = h.askPaused()
	}
	// A prompt that goes to the core at once is recorded with a relaxed
	// commit: the full commit of its publishing mark follows at once and
	// makes the record durable too, and the next getUpdates, which tells
	// Telegram to forget the update, waits for it (syncRecorded). One
	// fsync, not two, on the way to the agent.
	relaxed := ask != nil
	fresh, ok := h.record(ctx, info, disposition, relaxed, func(tx *sql.Tx) error {
		switch a.kind {
		case "text":
			return appendPrompt(ctx, tx, a.chat, a.group, a.text, info.ID, h.clock.Now())
		case "pair":
			return setMeta(ctx, tx, pairing.OwnerKey, formatID(info.User))
		case "command", "callback":
			return insertAction(ctx, tx, act, h.clock.Now())
		}
		return nil
	})
	if !ok {
		return false
	}
	if !fresh {
		h.log.Info("telegram: update already handled; skipped", "update_id", info.ID, "type", info.Kind)
		return true
	}
	switch a.kind {
	case "drop":
		h.dropped(info, a.reason)
	case "ignore":
		h.log.Info("telegram: owner's update ignored", "update_id", info.ID, "type", info.Kind, "chat", info.Chat, "reason", a.reason)
		h.notify(a.chat, "Only text messages reach the agent so far.")
	case "pair":
		h.paired(info)
	case "text":
		h.log.Info("telegram: owner's message queued", "update_id", info.ID, "chat", a.chat, "group", a.group)
		var s *recordSync
		if relaxed {
			s = &recordSync{update: info.ID, done: make(chan struct{})}
			h.unsynced = s
		}
		h.kickAsked(a.chat, ask, s)
	case "command":
		h.log.Info("telegram: owner's command", "update_id", info.ID, "chat", a.chat, "command", a.cmd)
		h.act(act)
	case "callback":
		h.act(act)
	}
	return true
}

// record records update info with its disposition, and what also does in
// the same transaction, retrying until it commits or ctx ends. fresh is
// false for an update recorded before (a redelivery, to be skipped); ok
// is false when the plugin stops first. A relaxed record does not wait
// for the disk: the caller must make it durable (recordSync) before the
// poll confirms the update.
func (h *Handler) record(ctx context.Context, info updateInfo, disposition string, relaxed bool, also func(*sql.Tx) error) (fresh, ok bool) {
	h.crash("update:before-commit")
	tx := h.db.tx
	if relaxed {
		tx = h.db.txRelaxed
	}
	err := h.retry(ctx, func() error {
		return tx(ctx, func(tx *sql.Tx) error {
			var err error
			if fresh, err = recordUpdate(ctx, tx, info, disposition, h.clock.Now()); err != nil || !fresh || also == nil {
				return err
			}
			return also(tx)
		})
	})
	if err != nil { // only when stopping: the update stays unconfirmed
		return false, false
	}
	h.crash("update:after-commit")
	return fresh, true
}

// recordSync is the durability of an update recorded with a relaxed
// commit (a prompt that goes to the core at once). The prompt's
// publishing mark, a full commit, makes it durable on its way; finish
// says whether one did. Until then the poll does not confirm the update
// to Telegram (syncRecorded), so a power loss that takes the record back
// leaves Telegram to serve the update again.
type recordSync struct {
	update  int64
	done    chan struct{}
	covered bool // a full commit after the record succeeded; set before done closes
}

// finish ends s: covered when a full commit after the record succeeded.
func (s *recordSync) finish(covered bool) {
	s.covered = covered
	close(s.done)
}

// markWait bounds how long the poll waits for a prompt's publishing mark
// to make its update's record durable (syncRecorded): the mark waits for
// the core's answer to Paused, and the poll does not wait on the core.
const markWait = time.Second

// syncRecorded waits until the last update recorded relaxed is durable,
// committing in full itself when the prompt's publishing mark did not (the
// core was paused, or the mark failed) or has not within markWait; false
// when ctx ends first, and the update stays unconfirmed. The poll calls it
// before each getUpdates.
func (h *Handler) syncRecorded(ctx context.Context) bool {
	s := h.unsynced
	if s == nil {
		return true
	}
	late := make(chan struct{})
	t := h.clock.AfterFunc(markWait, func() { close(late) })
	covered := false
	select {
	case <-s.done:
		covered = s.covered
	case <-late:
	case <-ctx.Done():
		t.Stop()
		return false
	}
	t.Stop()
	if !covered && h.retry(ctx, func() error { return h.db.syncUpdate(ctx, s.update) }) != nil {
		return false
	}
	h.unsynced = nil
	return true
}

// dropped logs and audits an update dropped unanswered: by id, kind, chat
// and user, never its content.
func (h *Handler) dropped(info updateInfo, reason string) {
	h.log.Info("telegram: update dropped", "update_id", info.ID, "type", info.Kind, "chat", info.Chat, "user", info.User, "reason", reason)
	what := fmt.Sprintf("telegram update %d (%s) in chat %d from user %d: %s", info.ID, info.Kind, info.Chat, info.User, reason)
	if err := h.svc.AuditDropped(h.ctx, what); err != nil {
		h.log.Warn("telegram: the core did not audit a dropped update", "update_id", info.ID, "err", err)
	}
}

// retry runs f until it succeeds or ctx ends, backing off: a database
// that fails (a full disk) holds the update rather than losing it.
func (h *Handler) retry(ctx context.Context, f func() error) error {
	wait := 100 * time.Millisecond
	for {
		err := f()
		if err == nil {
			return nil
		}
		h.log.Error("telegram: could not record an update; retrying (it stays unconfirmed with Telegram meanwhile)", "err", err)
		if sleep(ctx, h.clock, wait) != nil {
			return ctx.Err()
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// paired makes the sender of a right /start code the owner.
func (h *Handler) paired(info updateInfo) {
	if err := os.Remove(filepath.Join(h.opts.DataDir, pairing.File)); err != nil && !os.IsNotExist(err) {
		h.log.Warn("telegram: could not delete the used pairing file", "err", err)
	}
	h.mu.Lock()
	h.owner = info.User
	h.mu.Unlock()
	h.log.Info("telegram: paired: the owner is now this Telegram user", "user", info.User, "update_id", info.ID)
	h.notify(info.Chat, "Paired: you are this Carapace's owner. Write here to talk to your agent; /help lists the commands.")
}

func formatID(id int64) string { return strconv.FormatInt(id, 10) }
