package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/carapace-dev/carapace/app/menu"
	"github.com/carapace-dev/carapace/app/notify"
	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// summaryWidth is how long a notification's summary of the arguments is.
const summaryWidth = 120

// menuAction does what a click in the menu asks.
func (r *runner) menuAction(ctx context.Context, click menu.Click) {
	a := click.Action
	r.log.Debug("app: menu action", "kind", a.Kind.String(), "target", a.Target, "vouched", click.Vouched, "from", click.From)
	switch a.Kind {
	case menu.ActionApprove, menu.ActionDeny:
		c, ok := r.state.Confirmation(a.Target)
		switch {
		case !ok:
			r.log.Info("app: no pending confirmation to decide; it was decided elsewhere", "confirmation", a.Target)
			return
		case c.ArgsHash != a.ArgsHash:
			r.log.Warn("app: the menu item shows other arguments than the confirmation has; not decided", "confirmation", a.Target)
			return
		case a.Kind == menu.ActionApprove && !click.Vouched:
			r.askAgain(c, click.From)
			return
		}
		r.decide(ctx, c, a.Kind == menu.ActionApprove, SurfaceMenu)
	case menu.ActionStopSession:
		id := a.Target
		r.goBG(func() {
			cctx, cancel := context.WithTimeout(ctx, requestTimeout)
			defer cancel()
			if err := r.client.CloseSession(cctx, id); errors.Is(err, api.ErrNotFound) {
				r.log.Info("app: the session had closed already", "session", id)
			} else if err != nil {
				r.log.Warn("app: stop a session", "session", id, "err", err)
			}
		})
	case menu.ActionPause, menu.ActionResume:
		paused := a.Kind == menu.ActionPause
		gen := r.gen
		r.goBG(func() {
			cctx, cancel := context.WithTimeout(ctx, requestTimeout)
			defer cancel()
			st, err := r.client.Pause(cctx, paused)
			if err != nil {
				r.log.Warn("app: pause or resume", "paused", paused, "err", err)
				return
			}
			// The stream says so too; this shows it at once.
			r.post(func() { r.apply(gen, api.WatchEvent{Type: api.WatchStatus, Status: &st}, nil) })
		})
	case menu.ActionOpenAuditLog:
		path := r.o.Home.AuditLog()
		r.goBG(func() {
			if err := r.o.Open(path); err != nil {
				r.log.Warn("app: open the audit log", "err", err)
			}
		})
	case menu.ActionStartAtLogin:
		if r.o.LoginItem == nil {
			return
		}
		want := !r.state.LoginItem.Enabled
		r.goBG(func() {
			if err := r.o.LoginItem.SetEnabled(want); err != nil {
				r.log.Warn("app: start at login", "enable", want, "err", err)
			}
			// The checkbox shows the real state, never the wish.
			r.post(func() {
				r.state.LoginItem = r.loginState()
				r.render()
			})
		})
	case menu.ActionCalendarAccess:
		if r.o.CalendarAccess == nil {
			return
		}
		// macOS shows its own prompt, once for events and once for
		// reminders, and answers when the user has; the menu then shows
		// the real state.
		r.goBG(func() {
			if _, err := r.o.CalendarAccess.Request(ctx); err != nil {
				r.log.Warn("app: ask for calendar access", "err", err)
			}
			r.post(func() {
				r.state.Calendar = r.calendarState()
				r.render()
			})
		})
	case menu.ActionRunTask, menu.ActionPauseTask, menu.ActionResumeTask:
		id, kind := a.Target, a.Kind
		r.goBG(func() {
			cctx, cancel := context.WithTimeout(ctx, requestTimeout)
			defer cancel()
			var err error
			switch kind {
			case menu.ActionRunTask:
				_, err = r.client.RunTask(cctx, id)
			case menu.ActionPauseTask:
				_, err = r.client.PauseTask(cctx, id)
			default:
				_, err = r.client.ResumeTask(cctx, id)
			}
			if err != nil { // the stream shows the change when there is one
				r.log.Warn("app: "+kind.String(), "task", id, "err", err)
			}
		})
	case menu.ActionRestartCore:
		if r.core != nil {
			return
		}
		r.boot(ctx)
	default:
		r.log.Warn("app: unknown menu action", "kind", a.Kind.String())
	}
}

// askAgain answers an Approve clicked in the menu by a click the tray
// cannot vouch for — another program on the session bus may have sent it
// (app/tray): it approves nothing. The menu then says where to approve
// instead, and the approval's notification is raised again: its Approve
// counts only from the notification server, and only where the
// notification shows every argument (notify.Notification.Approve).
func (r *runner) askAgain(c api.Confirmation, from string) {
	r.log.Warn("app: not approved: the menu's Approve was clicked by a click the tray cannot tell from another program's; approve in the notification or with carapace confirm",
		"confirmation", c.ID, "from", from)
	r.state = r.state.WithReconfirm(c.ID)
	r.render()
	if r.o.Notifier == nil {
		return
	}
	if err := r.o.Notifier.Show(reconfirmation(c)); err != nil {
		r.log.Warn("app: raise the approval's notification again", "confirmation", c.ID, "err", err)
		return
	}
	r.notified[c.ID] = true
}

// notificationAction does what a click on a notification asks.
func (r *runner) notificationAction(ctx context.Context, a notify.Action) {
	c, ok := r.state.Confirmation(a.Key)
	if !ok {
		r.log.Info("app: no pending confirmation for a notification's action; it was decided elsewhere", "confirmation", a.Key)
		return
	}
	r.decide(ctx, c, a.Approve, SurfaceNotification)
}

// decide sends a decision on c with the hash of the arguments shown. The
// first decision wins on every surface: "already decided" is no error
// for the user (the watch stream shows how it ended), only logged.
func (r *runner) decide(ctx context.Context, c api.Confirmation, approve bool, surface string) {
	switch {
	case approve && c.ArgumentsOmitted:
		r.log.Warn("app: not approved: its arguments could not be shown", "confirmation", c.ID)
		return
	case approve && c.PreviewOmitted:
		r.log.Warn("app: not approved: its preview could not be shown", "confirmation", c.ID)
		return
	case approve && !c.Exact():
		// The menu and the notification offer no Approve then; the core
		// would refuse one too.
		r.log.Warn("app: not approved: its display hides values; approve with carapace confirm approve --raw", "confirmation", c.ID, "hidden", len(c.Hidden))
		return
	}
	if r.state.Core != menu.CoreRunning {
		r.log.Warn("app: not decided: the core is not reached", "confirmation", c.ID)
		return
	}
	d := api.Decision{ID: c.ID, Approve: approve, ArgsHash: c.ArgsHash, PreviewDigest: c.PreviewDigest, Surface: surface, Decider: r.o.Decider}
	r.goBG(func() {
		cctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		got, err := r.client.Decide(cctx, d)
		switch {
		case errors.Is(err, api.ErrConflict):
			r.log.Info("app: the confirmation was already decided", "confirmation", d.ID, "surface", surface, "err", err)
		case err != nil:
			r.log.Warn("app: decide", "confirmation", d.ID, "surface", surface, "err", err)
		default:
			r.log.Info("app: decided", "confirmation", got.ID, "decision", got.Decision, "surface", surface)
		}
	})
}

// syncNotifications shows a notification for each pending confirmation
// that has none yet, and withdraws those of confirmations no longer
// pending (decided anywhere, expired, withdrawn, or the core is gone).
func (r *runner) syncNotifications() {
	if r.o.Notifier == nil {
		return
	}
	pending := map[string]bool{}
	for _, c := range r.state.Confirmations {
		pending[c.ID] = true
		if r.notified[c.ID] {
			continue
		}
		r.notified[c.ID] = true
		if err := r.o.Notifier.Show(Notification(c)); err != nil {
			r.log.Warn("app: show a notification; the menu has the approval", "confirmation", c.ID, "err", err)
			r.state.Notifications = r.permission()
		}
	}
	for id := range r.notified {
		if pending[id] {
			continue
		}
		delete(r.notified, id)
		if err := r.o.Notifier.Withdraw(id); err != nil {
			r.log.Warn("app: withdraw a notification", "confirmation", id, "err", err)
		}
	}
}

// Notification is the notification for a pending confirmation: the tool
// in the title; the group, the digest prefix and a one-line summary of the
// arguments in the body; all of it escaped. It offers Approve only when
// the summary shows every argument in full (menu.Summary); else Deny, and
// the body says where to review the whole of it. Why the core asks (a URL
// not given, a tainted session) is in the body, each reason whole.
func Notification(c api.Confirmation) notify.Notification {
	digest := c.ArgsHash
	if len(digest) > menu.DigestPrefix {
		digest = digest[:menu.DigestPrefix]
	}
	var b strings.Builder
	b.WriteString("Group " + textutil.Printable(orDash(c.Group)) + " · digest " + textutil.Printable(digest) + "\n")
	if first, _, _ := strings.Cut(c.Summary, "\n"); first != "" {
		b.WriteString(textutil.Printable(textutil.Clip(first, 200)) + "\n")
	}
	for _, w := range c.Why { // why the core asks, each reason whole
		b.WriteString("Why: " + textutil.Printable(w) + "\n")
	}
	previewWhole := true
	if c.Preview != "" || c.PreviewOmitted || c.PreviewDigest != "" {
		var pv string
		pv, previewWhole = notificationPreview(c)
		b.WriteString(pv)
	}
	args, complete := menu.Summary(c, summaryWidth)
	b.WriteString(args)
	switch {
	case !previewWhole:
		b.WriteString("\n" + previewInMenu + api.ShortID(c.ID))
		complete = false
	case len(c.Hidden) > 0 && !c.Raw:
		fmt.Fprintf(&b, "\n%d %s hidden here ([REDACTED]): read what runs with carapace confirm show --raw %s, and approve it there",
			len(c.Hidden), plural(len(c.Hidden), "value", "values"), api.ShortID(c.ID))
	case !complete:
		b.WriteString("\n" + reviewInMenu + api.ShortID(c.ID))
	}
	return notify.Notification{
		Key:     c.ID,
		Title:   "Approve " + textutil.Printable(textutil.Clip(c.Tool, 64)) + "?",
		Body:    b.String(),
		Approve: complete,
	}
}

// notificationPreview is what a notification shows of c's preview (what a
// mail to send says): the whole of it, each line printable, when it is
// short enough for a notification's body (maxNotificationPreview
// characters, maxNotificationLines lines); else its first line, and
// whole is false: the notification then offers Deny only.
func notificationPreview(c api.Confirmation) (text string, whole bool) {
	if c.PreviewOmitted || c.Preview == "" {
		return "", false
	}
	ls := strings.Split(strings.TrimSuffix(c.Preview, "\n"), "\n")
	if len(ls) > maxNotificationLines || utf8.RuneCountInString(c.Preview) > maxNotificationPreview {
		return textutil.Printable(textutil.ClipRunes(ls[0], 80)) + " …\n", false
	}
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(textutil.Printable(l) + "\n")
	}
	return b.String(), true
}

// How much of a preview a notification shows whole.
const (
	maxNotificationPreview = 400
	maxNotificationLines   = 10
)

// previewInMenu ends the body of a notification whose preview is too
// long for it, followed by the confirmation's short id.
const previewInMenu = "What it will do is too long for a notification: read it whole in the Carapace menu to approve, or with carapace confirm show "

// reviewInMenu ends the body of a notification that cannot show all the
// arguments, followed by the confirmation's short id.
const reviewInMenu = "Not all of it is shown here: review it in the Carapace menu to approve, or with carapace confirm show "

// reconfirmation is the notification raised again for c after an
// Approve in the menu that the tray could not vouch for.
func reconfirmation(c api.Confirmation) notify.Notification {
	n := Notification(c)
	n.Body = "Confirm here: a click in the Carapace menu is not proof enough on this desktop.\n" + n.Body
	return n
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
