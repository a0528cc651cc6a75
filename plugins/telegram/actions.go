package telegram

import (
	"context"
	"database/sql"
	"time"
)

// A command or a button press is done before it is forgotten, or done
// again after a crash, and nothing it does happens twice.
//
// The update's transaction records the owner's command or button press
// as a pending action, before the next getUpdates tells Telegram to
// forget the update. The poll then does it at once, before the next
// update (so a /stop takes effect before the message that follows it):
// its effect — pause, resume, stop, or the decision of an Approve or Deny
// press — then the action is marked done, then its answer goes to the
// chat. An action still pending after a crash is done again when the
// plugin starts, before the first getUpdates, in order. Every effect is
// safe to repeat: /pause and /resume set a state, /stop stops what runs
// in the chat now, /new sets the chat's conversation generation to the
// update's id (the same value again), the reading commands read, and the
// core takes one decision per confirmation (a second press is answered
// "already decided"). The answer is sent at most once, like every message: if the
// plugin dies after the effect is recorded and before the answer leaves,
// the answer is lost, never the effect, and the owner may ask again.

// ownerAction is a command or a button press of the owner's, as recorded.
type ownerAction struct {
	Update  int64  // the update that asked for it
	Kind    string // "command" or "callback"
	Chat    int64
	Group   string
	Name    string // the command
	Args    string // the command's arguments, or the button's data
	Query   string // the button press, to answer
	Message int    // the message the button was on
}

// actionOf is the action update id asks for, classified as a: a command,
// or a button press (with its query, message and data).
func actionOf(id int64, a action, query string, message int, data string) ownerAction {
	if a.kind == "callback" {
		return ownerAction{Update: id, Kind: "callback", Chat: a.chat, Group: a.group, Args: data, Query: query, Message: message}
	}
	return ownerAction{Update: id, Kind: "command", Chat: a.chat, Group: a.group, Name: a.cmd, Args: a.args}
}

// insertAction records a as pending, in the update's transaction.
func insertAction(ctx context.Context, tx *sql.Tx, a ownerAction, now time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO actions(update_id, kind, chat_id, grp, name, args, query_id, message_id, state, updated_at)
		VALUES(?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?)`, a.Update, a.Kind, a.Chat, a.Group, a.Name, a.Args, a.Query, a.Message, ms(now))
	return err
}

// pendingActions returns the actions not yet done, oldest first.
func (s *store) pendingActions(ctx context.Context) ([]ownerAction, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT update_id, kind, chat_id, grp, name, args, query_id, message_id
		FROM actions WHERE state = 'pending' ORDER BY update_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ownerAction
	for rows.Next() {
		var a ownerAction
		if err := rows.Scan(&a.Update, &a.Kind, &a.Chat, &a.Group, &a.Name, &a.Args, &a.Query, &a.Message); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// actionDone marks the action of update id done.
func (s *store) actionDone(ctx context.Context, id int64, now time.Time) error {
	_, err := s.db.ExecContext(ctx, "UPDATE actions SET state = 'done', updated_at = ? WHERE update_id = ?", ms(now), id)
	return err
}

// act does a: its effect now, then records it done, then sends its answer
// in the background.
func (h *Handler) act(a ownerAction) {
	h.crash("action:before-effect")
	reply := h.effect(a)
	h.crash("action:after-effect")
	if err := h.retry(h.ctx, func() error { return h.db.actionDone(h.ctx, a.Update, h.clock.Now()) }); err != nil {
		return // stopping: it is done again at the next start
	}
	h.crash("action:done")
	h.goBG(reply)
}

// effect does a's effect and returns how to answer it.
func (h *Handler) effect(a ownerAction) (reply func()) {
	if a.Kind == "callback" {
		return h.pressEffect(a)
	}
	cmd := action{kind: "command", chat: a.Chat, group: a.Group, cmd: a.Name, args: a.Args, update: a.Update}
	text := h.commandEffect(cmd)
	return func() {
		if _, err := h.send.send(h.ctx, a.Chat, message{Text: text}); err != nil && h.ctx.Err() == nil {
			h.log.Warn("telegram: could not answer a command", "command", a.Name, "err", err)
		}
	}
}

// replayActions does again, in order, the actions a crash left pending.
func (h *Handler) replayActions() {
	as, err := h.db.pendingActions(h.ctx)
	if err != nil {
		h.log.Error("telegram: read the actions left pending", "err", err)
		return
	}
	for _, a := range as {
		if h.ctx.Err() != nil {
			return
		}
		h.log.Info("telegram: an action left pending by a restart is done now", "update_id", a.Update, "kind", a.Kind, "command", a.Name)
		h.act(a)
	}
}
