package telegram

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-telegram/bot/models"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// botCommands is the menu set with setMyCommands.
func botCommands() []models.BotCommand {
	return []models.BotCommand{
		{Command: "status", Description: "Carapace's state and this chat's session"},
		{Command: "stop", Description: "Stop this chat's session and drop its waiting messages"},
		{Command: "new", Description: "Start a new conversation in this chat: the agent forgets this chat's history"},
		{Command: "tasks", Description: "The scheduled tasks and their next runs"},
		{Command: "pause", Description: "Start no new sessions for messages or tasks"},
		{Command: "resume", Description: "Start sessions again"},
		{Command: "help", Description: "What this bot does"},
	}
}

const helpText = `Write here and your Carapace agent answers here; messages sent while it works wait and go next, together.

/status  Carapace's state and this chat's session
/stop    stop this chat's session (and drop the messages waiting)
/new     start a new conversation in this chat: the agent forgets this chat's history
/tasks   the scheduled tasks, their next runs and how the last went
/pause   start no new sessions until /resume
/resume  start sessions again
/help    this text

High-risk actions ask you first, here, with Approve and Deny buttons.`

const noSurface = "This needs the surface capability: set [plugins.telegram] surface = true in config.toml, then carapace plugin restart telegram."

// commandEffect does what one of the owner's commands asks and returns
// its answer for the command's chat. Each is safe to run again after a
// crash (actions.go): /pause and /resume set a state, /stop stops what
// runs in the chat now, /new sets the chat's conversation generation to
// its update's id, and the others only read.
func (h *Handler) commandEffect(a action) string {
	switch a.cmd {
	case "start", "help":
		return helpText
	case "status":
		return h.statusText(a.chat, h.scope(a))
	case "tasks":
		return h.tasksText(h.scope(a))
	case "pause", "resume":
		pause := a.cmd == "pause"
		err := h.svc.SetPaused(h.ctx, pause)
		switch {
		case errors.Is(err, plugin.ErrNotSurface):
			return noSurface
		case err != nil:
			return "Could not " + a.cmd + ": " + textutil.Clip(err.Error(), 200)
		case pause:
			return "Paused: no new sessions start for messages or tasks until /resume. Running sessions go on."
		}
		h.mu.Lock()
		clear(h.pausedTo)
		h.mu.Unlock()
		h.kickAll()
		return "Resumed."
	case "stop":
		return h.stop(a.chat)
	case "new":
		return h.newConversation(a)
	}
	return ""
}

// newConversation starts a new conversation in a's chat: the chat's next
// message starts a session with none of the chat's history in its
// model's context — nor the taint of what an earlier session read
// (docs/SECURITY.md, "Provenance and taint").
func (h *Handler) newConversation(a action) string {
	if err := h.db.newGeneration(h.ctx, a.chat, a.update, h.clock.Now()); err != nil {
		h.log.Error("telegram: record a new conversation", "chat", a.chat, "err", err)
		return "Could not start a new conversation: " + textutil.Clip(err.Error(), 200) + ". Send /new again."
	}
	h.log.Info("telegram: a new conversation in a chat", "chat", a.chat, "generation", a.update)
	h.mu.Lock()
	running := h.chatLocked(a.chat).inflight != 0
	h.mu.Unlock()
	msg := "New conversation: your next message starts afresh; the agent no longer sees this chat's earlier messages, nor what it read for them."
	if running {
		msg += " The session working now finishes in the old conversation (/stop stops it)."
	}
	return msg
}

// scope is the group whose state a command in a's chat may show: ""
// (everything) in the owner's private chat; in a bound group chat, whose
// other members read the bot's answers too, that chat's group alone.
func (h *Handler) scope(a action) string {
	if a.chat == h.ownerID() {
		return ""
	}
	return a.group
}

// groupTasks returns the tasks of group, or all for "".
func groupTasks(ts []plugin.TaskSummary, group string) []plugin.TaskSummary {
	if group == "" {
		return ts
	}
	var out []plugin.TaskSummary
	for _, t := range ts {
		if t.Group == group {
			out = append(out, t)
		}
	}
	return out
}

// tasksText lists the scheduled tasks of group ("" for all).
func (h *Handler) tasksText(group string) string {
	st, err := h.svc.CoreStatus(h.ctx)
	tasks := groupTasks(st.Tasks, group)
	of := ""
	if group != "" {
		of = " of group " + group
	}
	switch {
	case errors.Is(err, plugin.ErrNotSurface):
		return noSurface
	case err != nil:
		return "Carapace did not answer: " + textutil.Clip(err.Error(), 200)
	case len(tasks) == 0:
		return "No scheduled tasks" + of + ". Ask the agent to schedule one, or on the computer: carapace tasks add --help"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d scheduled task(s)%s:", len(tasks), of)
	for _, t := range tasks {
		next := "paused"
		if t.Enabled {
			next = "no next run"
			if !t.Next.IsZero() {
				next = "next " + t.Next.UTC().Format("Mon 02 Jan 15:04 MST")
			}
		}
		fmt.Fprintf(&b, "\n\n%s (%s): %s\n%s", t.ID, t.Group, t.Schedule, next)
		if t.Last != "" {
			fmt.Fprintf(&b, " · last: %s", textutil.Clip(t.Last, 200))
		}
	}
	return b.String()
}

// statusText describes the core and the chat; for a group ("" for all),
// only what concerns it: not the core's sessions, approvals and plugins.
func (h *Handler) statusText(chat int64, group string) string {
	var b strings.Builder
	st, err := h.svc.CoreStatus(h.ctx)
	switch {
	case errors.Is(err, plugin.ErrNotSurface):
		b.WriteString("Carapace's state needs the surface capability ([plugins.telegram] surface = true).\n")
	case err != nil:
		fmt.Fprintf(&b, "Carapace did not answer: %s\n", textutil.Clip(err.Error(), 200))
	default:
		state := "running"
		if st.Paused {
			state = "paused (/resume)"
		}
		fmt.Fprintf(&b, "Carapace %s: %s\n", st.Version, state)
		if group != "" {
			fmt.Fprintf(&b, "Group %s: %d scheduled task(s)\n", group, len(groupTasks(st.Tasks, group)))
			break
		}
		fmt.Fprintf(&b, "Sessions: %d · approvals waiting: %d\n", st.Sessions, st.PendingConfirmations)
		if len(st.Unhealthy) > 0 {
			fmt.Fprintf(&b, "Plugins not serving: %s\n", strings.Join(st.Unhealthy, ", "))
		}
	}
	h.mu.Lock()
	c := h.chatLocked(chat)
	inflight, session := c.inflight, c.session
	h.mu.Unlock()
	queued, _ := h.db.countQueued(h.ctx, chat)
	switch {
	case session != "":
		fmt.Fprintf(&b, "This chat: the agent is working (session %s)", session)
	case inflight != 0:
		b.WriteString("This chat: waiting for the agent's session to start")
	default:
		b.WriteString("This chat: idle")
	}
	if queued > 0 {
		fmt.Fprintf(&b, "; %d message(s) waiting", queued)
	}
	return b.String()
}

// stop stops the chat's session, if one runs, and drops the messages that
// wait in the chat; it returns the answer for the owner.
func (h *Handler) stop(chat int64) string {
	h.mu.Lock()
	c := h.chatLocked(chat)
	inflight, session := c.inflight, c.session
	h.mu.Unlock()
	dropped := 0
	if ps, err := h.db.prompts(h.ctx, stQueued); err == nil {
		for _, p := range ps {
			if p.Chat == chat && h.db.setPrompt(h.ctx, p.ID, stStopped, "", h.clock.Now()) == nil {
				dropped++
			}
		}
	}
	var msg string
	switch {
	case inflight == 0:
		msg = "Nothing is running in this chat."
	case session != "":
		err := h.svc.StopSession(h.ctx, session)
		if err == nil {
			msg = "Stopping the session."
			break
		}
		h.log.Warn("telegram: StopSession failed; freeing the chat", "session", session, "err", err)
		if errors.Is(err, plugin.ErrNotSurface) {
			msg = "Stopped waiting for the session, but it goes on: stopping it needs [plugins.telegram] surface = true."
		} else {
			msg = "Stopped waiting for the session (" + textutil.Clip(err.Error(), 150) + ")."
		}
		fallthrough
	default:
		if msg == "" {
			msg = "Stopped waiting for the agent's session to start."
		}
		if err := h.db.setPrompt(h.ctx, inflight, stStopped, "", h.clock.Now()); err != nil {
			h.log.Error("telegram: record a stopped prompt", "prompt", inflight, "err", err)
		}
		h.finish(chat, inflight)
	}
	if dropped > 0 {
		msg += fmt.Sprintf(" Dropped %d waiting message(s).", dropped)
	}
	return msg
}
