package telegram

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// Notes to the owner about a prompt's fate.
const (
	noteDoubt = "Carapace restarted while handing your last message to the agent, so it may or may not have reached it. " +
		"It is not sent twice: if no answer comes, send it again."
	noteLost   = "Carapace restarted before the agent answered your last message. Send it again if you still need it."
	notePaused = "Carapace is paused: your message waits here and goes to the agent after /resume."
)

// replyTo is the reply_to of the plugin's message.inbound events, handed
// back unchanged in channel.started and channel.reply.
type replyTo struct {
	ChatID int64 `json:"chat_id"`
	Prompt int64 `json:"prompt"`
}

// chatLocked returns chat id's state, creating it; h.mu is held.
func (h *Handler) chatLocked(id int64) *chatState {
	c := h.chats[id]
	if c == nil {
		c = &chatState{id: id}
		h.chats[id] = c
	}
	return c
}

// kick hands the chat's oldest queued prompt to the core if no session
// works for the chat and the debounce has passed; else it does nothing,
// or sets a timer to try again when the debounce ends. Every change that
// may free a chat or add to its queue calls it.
func (h *Handler) kick(chat int64) { h.kickAsked(chat, nil, nil) }

// kickAsked is kick, with the core's answer to Paused asked for while the
// update that queued the prompt was being recorded (askPaused), or nil.
// The answer is used only if the prompt goes at once, in this call; a
// prompt that waits asks again when it goes. s, if not nil, is the
// durability of that update's relaxed record: the prompt's publishing
// mark finishes it, or, if no prompt goes, it is finished at once,
// uncovered.
func (h *Handler) kickAsked(chat int64, ask *pausedAsk, s *recordSync) {
	if !h.tryPublish(chat, ask, s) {
		if s != nil {
			s.finish(false)
		}
		return
	}
	// The handler runs on one P (GOMAXPROCS=1): the prompt goes before
	// the caller's next step (the poll's next getUpdates).
	runtime.Gosched()
}

// tryPublish does the work of kickAsked; true when a prompt went to
// be published (and publish owns s).
func (h *Handler) tryPublish(chat int64, ask *pausedAsk, s *recordSync) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	c := h.chatLocked(chat)
	if c.inflight != 0 {
		return false
	}
	p, err := h.db.nextQueued(h.ctx, chat)
	if err != nil {
		h.log.Error("telegram: read the chat's queue", "chat", chat, "err", err)
		return false
	}
	if p == nil {
		return false
	}
	now := h.clock.Now()
	due := p.LastAt.Add(h.cfg.Debounce)
	if limit := p.FirstAt.Add(debounceCapFactor * h.cfg.Debounce); limit.Before(due) {
		due = limit
	}
	if c.debounce != nil {
		c.debounce.Stop()
		c.debounce = nil
	}
	if now.Before(due) {
		c.debounce = h.clock.AfterFunc(due.Sub(now), func() { h.kick(chat) })
		return false
	}
	c.inflight = p.ID
	id := p.ID
	return h.goBG(func() { h.publish(chat, id, ask, s) })
}

// pausedAsk is a Paused call to the core made in the background: its
// answer, once done is closed.
type pausedAsk struct {
	at     time.Time // when it was asked
	done   chan struct{}
	paused bool
	err    error
}

// pausedAskFresh is how long an answer of askPaused may be used: a commit
// that took longer (a database that failed and was retried) asks again.
const pausedAskFresh = time.Second

// askPaused asks the core whether sessions for events are paused, in the
// background; nil when the plugin is stopping. The owner's message, when
// it will go to the core at once, asks while its update is being
// recorded, rather than after: the call's round trip to the core and the
// transaction's commit overlap. The answer is as fresh as one asked a
// commit later would be (the owner may pause Carapace at any moment
// either way: the core then drops the event and answers that it is
// paused).
func (h *Handler) askPaused() *pausedAsk {
	a := &pausedAsk{at: h.clock.Now(), done: make(chan struct{})}
	if !h.goBG(func() {
		defer close(a.done)
		a.paused, a.err = h.svc.Paused(h.ctx)
	}) {
		return nil
	}
	// The handler runs on one P (the core starts it with GOMAXPROCS=1),
	// and the commit that follows holds it in a cgo call for its fsync:
	// let the call go out first, or it waits for the commit.
	runtime.Gosched()
	return a
}

// goesAtOnce reports whether an owner's message to chat would be handed
// to the core as soon as it is recorded: no debounce, and no prompt of
// the chat in flight.
func (h *Handler) goesAtOnce(chat int64) bool {
	if h.cfg.Debounce > 0 {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.chats[chat]
	return !h.closed && (c == nil || c.inflight == 0)
}

// kickAll kicks every chat with queued prompts.
func (h *Handler) kickAll() {
	ps, err := h.db.prompts(h.ctx, stQueued)
	if err != nil {
		h.log.Error("telegram: read the queues", "err", err)
		return
	}
	seen := map[int64]bool{}
	for _, p := range ps {
		if !seen[p.Chat] {
			seen[p.Chat] = true
			h.kick(p.Chat)
		}
	}
}

// publish hands prompt id of chat to the core as message.inbound. The
// prompt is marked publishing first and published after: a crash between
// the two leaves it publishing, which recoverState turns into doubt (told
// to the owner, never sent again) rather than a blind duplicate. s, if not
// nil, is finished once the mark's full commit has made the relaxed
// record before it durable, or uncovered on every other way out.
func (h *Handler) publish(chat, id int64, ask *pausedAsk, s *recordSync) {
	synced := func(covered bool) {
		if s != nil {
			s.finish(covered)
			s = nil
		}
	}
	defer synced(false)
	var paused bool
	var err error
	if ask != nil && h.clock.Now().Sub(ask.at) < pausedAskFresh {
		<-ask.done
		paused, err = ask.paused, ask.err
	} else {
		paused, err = h.svc.Paused(h.ctx)
	}
	if err == nil && paused {
		h.mu.Lock()
		if c := h.chatLocked(chat); c.inflight == id {
			c.inflight = 0
		}
		told := h.pausedTo[id]
		h.pausedTo[id] = true
		h.mu.Unlock()
		if !told {
			h.notify(chat, notePaused)
		}
		return
	}
	h.crash("publish:before-mark")
	var p *prompt
	err = h.db.tx(h.ctx, func(tx *sql.Tx) error {
		var err error
		p, err = h.db.promptByIDTx(h.ctx, tx, id)
		if err != nil || p == nil || p.State != stQueued {
			return err
		}
		return setPromptTx(h.ctx, tx, id, stPublishing, "", h.clock.Now())
	})
	if err != nil || p == nil || p.State != stQueued {
		if err != nil {
			h.log.Error("telegram: could not mark a prompt as being handed over", "prompt", id, "err", err)
		}
		h.finish(chat, id)
		return
	}
	synced(true)
	h.crash("publish:before")
	perr := h.publishPrompt(p)
	h.crash("publish:after")
	if perr != nil {
		h.log.Error("telegram: could not hand a prompt to the core", "prompt", id, "chat", chat, "group", p.Group, "err", perr)
		if err := h.db.setPrompt(h.ctx, id, stFailed, "", h.clock.Now()); err != nil {
			h.log.Error("telegram: record a prompt's failure", "prompt", id, "err", err)
		}
		note := "I could not hand your message to the agent (" + textutil.Clip(perr.Error(), 200) + "). If no answer comes, send it again."
		if errors.Is(perr, plugin.ErrGroupNotGranted) {
			note = fmt.Sprintf("Carapace does not let the Telegram plugin talk to the group %q: add it to [plugins.telegram] allowed_groups in config.toml, "+
				"then run carapace plugin restart telegram, and send your message again.", p.Group)
		}
		if h.ctx.Err() == nil {
			h.notify(chat, note)
		}
		h.finish(chat, id)
		return
	}
	if err := h.db.setPromptRelaxed(h.ctx, id, stPublished, "", h.clock.Now()); err != nil {
		h.log.Error("telegram: record a prompt as handed over", "prompt", id, "err", err)
	}
	h.log.Info("telegram: prompt handed to the core", "prompt", id, "chat", chat, "group", p.Group, "parts", p.Parts)
	h.mu.Lock()
	if c := h.chatLocked(chat); c.inflight == id && !h.closed {
		c.startT = h.clock.AfterFunc(startTimeout, func() { h.startTimedOut(chat, id) })
	}
	h.mu.Unlock()
}

// publishPrompt hands p to the core as message.inbound; its reply_to
// names the chat and the prompt, so that the answers find them, and its
// conversation is the chat's current one (a /new starts another).
func (h *Handler) publishPrompt(p *prompt) error {
	rt, err := json.Marshal(replyTo{ChatID: p.Chat, Prompt: p.ID})
	if err != nil {
		return err
	}
	gen, err := h.db.generation(h.ctx, p.Chat)
	if err != nil {
		return fmt.Errorf("read the chat's conversation: %w", err)
	}
	ev, err := plugin.TopicMessageInbound.Event(p.Group, plugin.Inbound{Text: p.Text, ReplyTo: rt, Conversation: conversationName(p.Chat, gen)})
	if err != nil {
		return err
	}
	return h.svc.PublishEvent(h.ctx, ev)
}

// startTimedOut frees a chat whose prompt never got a session: the core
// drops events of groups not configured for message.inbound, and events
// that come while it is paused, without a word.
func (h *Handler) startTimedOut(chat, id int64) {
	h.mu.Lock()
	c := h.chatLocked(chat)
	stuck := c.inflight == id && c.session == ""
	group := h.cfg.OwnerGroup
	if g, ok := h.cfg.Chats[chat]; ok {
		group = g
	}
	h.mu.Unlock()
	if !stuck {
		return
	}
	if err := h.db.setPrompt(h.ctx, id, stFailed, "", h.clock.Now()); err != nil {
		h.log.Error("telegram: record a prompt's failure", "prompt", id, "err", err)
	}
	h.log.Warn("telegram: no session started for a prompt; freeing the chat", "prompt", id, "chat", chat, "group", group)
	h.notify(chat, fmt.Sprintf("No agent session started for your message within %v. Is Carapace paused, or is the group %q not configured for "+
		"message.inbound ([groups.%s] in config.toml)? Send it again once that is fixed.", startTimeout, group, group))
	h.finish(chat, id)
}

// finish frees the chat if prompt id is the one in flight, stopping its
// typing indicator, and kicks the chat's queue.
func (h *Handler) finish(chat, id int64) {
	h.mu.Lock()
	c := h.chatLocked(chat)
	if c.inflight == id {
		c.inflight = 0
		if c.session != "" {
			delete(h.sessions, c.session)
		}
		c.session = ""
		if c.typing != nil {
			c.typing()
			c.typing = nil
		}
		if c.startT != nil {
			c.startT.Stop()
			c.startT = nil
		}
	}
	h.mu.Unlock()
	h.kick(chat)
}

// startTypingLocked starts the chat's typing indicator; h.mu is held.
func (h *Handler) startTypingLocked(c *chatState) {
	if c.typing != nil || h.closed {
		return
	}
	ctx, cancel := context.WithCancel(h.ctx)
	c.typing = cancel
	chat := c.id
	h.goBG(func() { h.send.typing(ctx, chat) })
}

// channelEvent decodes a channel.started or channel.reply and finds its
// prompt: the chat to answer comes from the plugin's own record of the
// prompt, never from anything the agent wrote.
func (h *Handler) channelEvent(ctx context.Context, ev *plugin.Event) (plugin.ChannelReply, *prompt, error) {
	var r plugin.ChannelReply
	if err := ev.Decode(&r); err != nil {
		return r, nil, fmt.Errorf("telegram: %w", err)
	}
	var to replyTo
	if err := json.Unmarshal(r.ReplyTo, &to); err != nil || to.Prompt == 0 {
		return r, nil, fmt.Errorf("telegram: %s without the plugin's reply_to (event %s)", ev.Topic, r.Event)
	}
	p, err := h.db.promptByID(ctx, to.Prompt)
	if err != nil {
		return r, nil, fmt.Errorf("telegram: %s: read prompt %d: %w", ev.Topic, to.Prompt, err)
	}
	if p == nil || p.Chat != to.ChatID {
		return r, nil, fmt.Errorf("telegram: %s for an unknown prompt %d (chat %d): ignored", ev.Topic, to.Prompt, to.ChatID)
	}
	return r, p, nil
}

// onStarted records the session that works on a chat's prompt and starts
// the typing indicator.
func (h *Handler) onStarted(ctx context.Context, ev *plugin.Event) error {
	r, p, err := h.channelEvent(ctx, ev)
	if err != nil {
		return err
	}
	if p.State == stDone {
		h.log.Info("telegram: channel.started for a prompt already answered: ignored (the core delivers answers at least once)", "prompt", p.ID)
		return nil
	}
	if p.State == stQueued || p.State == stPublishing || p.State == stPublished {
		if err := h.db.setPromptRelaxed(ctx, p.ID, stStarted, r.Session, h.clock.Now()); err != nil {
			return fmt.Errorf("telegram: record the session of prompt %d: %w", p.ID, err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.chatLocked(p.Chat)
	if c.inflight == 0 { // a prompt in doubt after a restart did reach the core: the chat is busy again
		c.inflight = p.ID
	}
	if c.inflight != p.ID {
		h.log.Warn("telegram: a session started for a prompt that is not the chat's current one", "prompt", p.ID, "session", r.Session)
		return nil
	}
	c.session = r.Session
	h.sessions[r.Session] = p.Chat
	if c.startT != nil {
		c.startT.Stop()
		c.startT = nil
	}
	h.startTypingLocked(c)
	return nil
}

// onReply sends the agent's answer to the prompt's chat and frees the
// chat for its next prompt.
func (h *Handler) onReply(ctx context.Context, ev *plugin.Event) error {
	r, p, err := h.channelEvent(ctx, ev)
	if err != nil {
		return err
	}
	if p.State == stDone {
		h.log.Info("telegram: channel.reply for a prompt already answered: ignored (the core delivers answers at least once)", "prompt", p.ID)
		return nil
	}
	if err := h.db.setPromptRelaxed(ctx, p.ID, stDone, r.Session, h.clock.Now()); err != nil {
		h.log.Error("telegram: record prompt as answered", "prompt", p.ID, "err", err)
	}
	text := r.Text
	if strings.TrimSpace(text) == "" {
		switch {
		case r.Error != "":
			text = "The agent could not answer: " + textutil.Clip(r.Error, 300)
		case r.Exit != nil && *r.Exit != 0:
			text = fmt.Sprintf("The agent stopped without an answer (exit status %d).", *r.Exit)
		}
	}
	// The answer's send starts first: freeing the chat reads its queue,
	// which need not hold the answer up.
	if strings.TrimSpace(text) != "" {
		chat := p.Chat
		h.goBG(func() {
			if _, err := h.send.send(h.ctx, chat, message{Text: text}); err != nil && h.ctx.Err() == nil {
				h.log.Error("telegram: could not deliver the agent's answer", "chat", chat, "session", r.Session, "err", err)
			}
		})
	}
	h.log.Info("telegram: session ended", "prompt", p.ID, "chat", p.Chat, "session", r.Session, "answer_bytes", len(r.Text), "error", r.Error != "")
	h.finish(p.Chat, p.ID)
	return nil
}

// recoverState rebuilds the chats from the database at start: prompts in
// flight keep their chat busy, prompts caught being handed over are in
// doubt.
func (h *Handler) recoverState(ctx context.Context) error {
	doubt, err := h.db.prompts(ctx, stPublishing)
	if err != nil {
		return err
	}
	for _, p := range doubt {
		if err := h.db.setPrompt(ctx, p.ID, stDoubt, "", h.clock.Now()); err != nil {
			return err
		}
		h.log.Warn("telegram: a prompt may or may not have reached the core before a restart; not sending it again", "prompt", p.ID, "chat", p.Chat)
		h.notify(p.Chat, noteDoubt)
	}
	inflight, err := h.db.prompts(ctx, stPublished, stStarted)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range inflight {
		c := h.chatLocked(p.Chat)
		c.inflight, c.session = p.ID, p.Session
		if p.Session != "" {
			h.sessions[p.Session] = p.Chat
			h.startTypingLocked(c)
		} else {
			chat, id := p.Chat, p.ID
			c.startT = h.clock.AfterFunc(startTimeout, func() { h.startTimedOut(chat, id) })
		}
	}
	return nil
}

// reconcile runs once after start. It asks the core when it started and
// keeps the answer (meta "core_started"). Prompts still in flight wait for
// their answers if the core is the one that took them: it keeps a
// channel's answers while the plugin is down and delivers them once it is
// back. If the core has restarted since, they died with the earlier core
// and are released, the owner told, and the approval cards still pending
// are closed. (A database from before
// core_started was kept releases them when the core has no session at
// all.) Then every chat's queue is kicked.
func (h *Handler) reconcile() {
	defer h.crash("reconciled")
	defer h.kickAll()
	h.mu.Lock()
	var busy []*chatState
	for _, c := range h.chats {
		if c.inflight != 0 {
			cc := *c
			busy = append(busy, &cc)
		}
	}
	h.mu.Unlock()
	st, err := h.svc.CoreStatus(h.ctx)
	h.learnSurface(err)
	if errors.Is(err, plugin.ErrNotSurface) {
		if len(busy) > 0 {
			h.log.Info("telegram: prompts in flight from before the restart wait for their answers (without the surface capability the plugin cannot ask the core whether it restarted)")
		}
		return
	}
	if err != nil {
		h.log.Warn("telegram: cannot ask the core whether it restarted: prompts in flight wait for their answers", "err", err)
		return
	}
	started := ""
	if !st.Started.IsZero() {
		started = st.Started.UTC().Format(time.RFC3339Nano)
	}
	prev, err := h.db.meta(h.ctx, metaCoreStarted)
	if err != nil {
		h.log.Error("telegram: read when the core last started", "err", err)
		return
	}
	if started != "" && started != prev {
		if err := h.db.tx(h.ctx, func(tx *sql.Tx) error { return setMeta(h.ctx, tx, metaCoreStarted, started) }); err != nil {
			h.log.Error("telegram: record when the core started", "err", err)
		}
	}
	var lost bool
	switch {
	case started != "" && prev != "":
		lost = started != prev
		if lost {
			h.closeStaleCards(h.ctx)
		}
	default:
		lost = st.Sessions == 0
	}
	if !lost {
		if len(busy) > 0 {
			h.log.Info("telegram: prompts in flight wait for their answers: the core that took them still runs", "prompts", len(busy))
		}
		return
	}
	for _, c := range busy {
		if err := h.db.setPrompt(h.ctx, c.inflight, stLost, "", h.clock.Now()); err != nil {
			h.log.Error("telegram: record a lost prompt", "prompt", c.inflight, "err", err)
		}
		h.log.Warn("telegram: the core restarted while a prompt was in flight: it was lost", "prompt", c.inflight, "chat", c.id)
		h.notify(c.id, noteLost)
		h.finish(c.id, c.inflight)
	}
}
