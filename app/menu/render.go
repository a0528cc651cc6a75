package menu

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// Layout limits of the rendered menu.
const (
	// Width is the most runes one item's title has; longer text (an
	// argument value, a problem) continues on further items.
	Width = 64
	// MaxArgumentLines bounds the argument lines one confirmation's
	// submenu shows: 4096 lines of Width runes hold 256 KiB of escaped
	// text, a 10 KiB value made only of escaped control characters several
	// times over. A confirmation with more cannot be approved from the
	// menu (it could not all be read there); it can still be denied.
	MaxArgumentLines = 4096
	// MaxPreviewLines bounds the lines of a confirmation's preview (what
	// a mail to send says) its submenu shows, wrapped to Width: past it,
	// the menu shows the start, says where to read the whole, and offers
	// Deny only.
	MaxPreviewLines = 4096
	// DigestPrefix is how much of the arguments' hash the menu shows.
	DigestPrefix = 12
	// maxProblem is the most bytes of a problem the status lines show.
	maxProblem = 4 * Width
	// cont starts a continued line.
	cont = "  ↳ "
)

// Render returns the menu for s. now is the time to show ages and
// expiries against; Render has no clock of its own.
func Render(s State, now time.Time) Tree {
	t := Tree{Icon: IconNormal, Tooltip: "Carapace: " + coreWord(s)}
	if n := len(s.Confirmations); n > 0 {
		t.Icon, t.Badge = IconAttention, strconv.Itoa(n)
		t.Tooltip += fmt.Sprintf(" — %d waiting for you", n)
	}
	if s.Core == CoreNotRunning {
		t.Icon = IconAttention
	}
	if down := downPlugins(s); len(down) > 0 {
		// The core gave up on them: only a restart brings them back.
		t.Icon = IconAttention
		t.Tooltip += " — down: " + strings.Join(down, ", ")
	}
	t.Items = append(t.Items, statusItems(s)...)
	t.Items = append(t.Items, Item{ID: "sep/status", Separator: true})
	t.Items = append(t.Items, approvals(s, now), sessions(s, now), taskItems(s, now))
	t.Items = append(t.Items, Item{ID: "sep/lists", Separator: true})

	running := s.Core == CoreRunning && !s.Status.Draining
	pause := Item{ID: "pause", Title: "Pause (no new sessions from events)", Enabled: running, Action: Action{Kind: ActionPause},
		Tooltip: "Messages and scheduled tasks start no sessions until you resume; running sessions go on"}
	if s.Status.Paused {
		pause.Title, pause.Action.Kind = "Resume (sessions for events start again)", ActionResume
		pause.Tooltip = "Paused: messages and scheduled tasks start no sessions"
	}
	login := Item{ID: "login", Title: "Start at login", Checkable: true, Checked: s.LoginItem.Enabled,
		Enabled: s.LoginItem.Supported, Action: Action{Kind: ActionStartAtLogin}, Tooltip: textutil.Printable(s.LoginItem.Problem)}
	quit := Item{ID: "quit", Title: "Quit Carapace", Enabled: true, Action: Action{Kind: ActionQuit},
		Tooltip: "Quit the app; the core keeps running"}
	if s.StartedCore {
		quit.Tooltip = "Quit the app and stop the core it started"
	}
	t.Items = append(t.Items,
		pause,
		Item{ID: "audit", Title: "Open audit log", Enabled: true, Action: Action{Kind: ActionOpenAuditLog}},
		login,
	)
	if s.Calendar.Supported {
		// Asked from here, never inside a tool call: the calendar
		// plugin's eventkit backend says NO_ACCESS until it is allowed.
		cal := Item{ID: "calendar-access", Title: "Allow calendar and reminders access…", Enabled: true, Action: Action{Kind: ActionCalendarAccess},
			Tooltip: textutil.Printable(strings.TrimSpace(s.Calendar.Detail + "; " + s.Calendar.Advice))}
		if s.Calendar.Granted {
			cal = Item{ID: "calendar-access", Title: "Calendar and reminders access allowed", Checkable: true, Checked: true,
				Tooltip: "Change it in System Settings › Privacy & Security › Calendars and › Reminders"}
		}
		t.Items = append(t.Items, cal)
	}
	t.Items = append(t.Items,
		Item{ID: "sep/quit", Separator: true},
		quit,
	)
	return t
}

// coreWord says how the core is, in a word or two.
func coreWord(s State) string {
	switch s.Core {
	case CoreStarting:
		return "starting…"
	case CoreConnecting:
		return "reconnecting…"
	case CoreNotRunning:
		return "not running"
	}
	switch {
	case s.Status.Draining:
		return "stopping"
	case s.Status.Paused:
		return "paused"
	}
	return "running"
}

// statusItems are the status line, its details, and Restart when the core
// is not running.
func statusItems(s State) []Item {
	problem := textutil.Printable(textutil.OneLine(s.Problem))
	items := []Item{{ID: "status", Title: "Carapace: " + coreWord(s), Tooltip: problem}}
	info := func(id, title string) { items = append(items, lines(id, title)...) }
	if problem != "" {
		// The whole problem is the status line's tooltip; a few lines of it
		// here (it may end with the core's log).
		info("status/problem", textutil.Clip(problem, maxProblem))
	}
	if s.Core == CoreRunning || s.Core == CoreConnecting {
		info("status/version", "Version: "+orDash(s.Status.Version))
		info("status/runtime", "Runtime: "+engines(s.Status.Engines))
		if p := plugins(s.Status.Plugins); p != "" {
			info("status/plugins", p)
		}
	}
	if s.Notifications.OK {
		info("status/notifications", "Notifications: on")
	} else {
		info("status/notifications", "Notifications: off — "+textutil.Printable(orText(s.Notifications.Why, "approve in this menu")))
	}
	if s.Core == CoreNotRunning {
		items = append(items, Item{ID: "restart", Title: "Restart core", Enabled: true, Action: Action{Kind: ActionRestartCore},
			Tooltip: "Start carapace serve for this home again"})
	}
	return items
}

func engines(es []api.EngineStatus) string {
	if len(es) == 0 {
		return "no container engine checked yet"
	}
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = strings.TrimSpace(textutil.Printable(e.Name) + " " + textutil.Printable(e.Version))
	}
	return strings.Join(parts, ", ")
}

func plugins(ps []api.PluginStatus) string {
	if len(ps) == 0 {
		return ""
	}
	var bad []string
	for _, p := range ps {
		switch {
		case p.Healthy:
		case p.State == api.PluginDown:
			name := textutil.Printable(p.Name)
			bad = append(bad, name+" (down: carapace plugin restart "+name+")")
		default:
			bad = append(bad, textutil.Printable(p.Name)+" ("+textutil.Printable(orText(p.State, "unhealthy"))+")")
		}
	}
	if len(bad) == 0 {
		return fmt.Sprintf("Plugins: %d healthy", len(ps))
	}
	return fmt.Sprintf("Plugins: %d healthy, not: %s", len(ps)-len(bad), strings.Join(bad, ", "))
}

// downPlugins names the plugins the core stopped starting again after
// repeated crashes, while it runs.
func downPlugins(s State) []string {
	if s.Core != CoreRunning {
		return nil
	}
	var out []string
	for _, p := range s.Status.Plugins {
		if p.State == api.PluginDown {
			out = append(out, textutil.Printable(p.Name))
		}
	}
	return out
}

// approvals is "Pending approvals (n)" with a submenu per confirmation.
func approvals(s State, now time.Time) Item {
	it := Item{ID: "approvals", Title: fmt.Sprintf("Pending approvals (%d)", len(s.Confirmations)), Enabled: true}
	if len(s.Confirmations) == 0 {
		it.Children = []Item{{ID: "approvals/none", Title: "Nothing waits for you"}}
		return it
	}
	for _, c := range s.Confirmations {
		it.Children = append(it.Children, confirmation(c, s.Core == CoreRunning, slices.Contains(s.Reconfirm, c.ID), now))
	}
	return it
}

// confirmation is one confirmation's submenu: what it is, every argument,
// then Approve and Deny. reconfirm says an Approve clicked here did not
// count (State.Reconfirm).
func confirmation(c api.Confirmation, live, reconfirm bool, now time.Time) Item {
	id := "confirm/" + c.ID
	digest := digestPrefix(c.ArgsHash)
	it := Item{ID: id, Title: textutil.Printable(textutil.ClipRunes(c.Tool, 32)) + " · " + textutil.Printable(textutil.ClipRunes(c.Group, 24)) + " · " + digest,
		Enabled: true}
	info := func(sub, title string) { it.Children = append(it.Children, lines(id+"/"+sub, title)...) }
	info("tool", "Tool: "+textutil.Printable(c.Tool))
	info("group", "Group: "+orDash(c.Group))
	info("session", "Session: "+orDash(c.Session))
	it.Children = append(it.Children, Item{ID: id + "/digest", Title: "Digest: " + digest,
		Tooltip: "SHA-256 of the arguments: " + textutil.Printable(c.ArgsHash)})
	if left := c.ExpiresAt.Sub(now); left > 0 {
		info("expires", "Expires in "+left.Round(time.Second).String()+" (then denied)")
	} else {
		info("expires", "Expired: denied unless decided now")
	}
	for i, l := range strings.Split(c.Summary, "\n") {
		if l = textutil.Printable(l); l != "" {
			info("summary/"+strconv.Itoa(i), l)
		}
	}
	for i, w := range c.Why { // why the core asks: each reason whole, wrapped
		if w = textutil.Printable(w); w != "" {
			info("why/"+strconv.Itoa(i), "Why: "+w)
		}
	}
	previewShown := true
	if c.Preview != "" || c.PreviewOmitted || c.PreviewDigest != "" {
		var pl []string
		pl, previewShown = previewLines(c)
		it.Children = append(it.Children, Item{ID: id + "/sep/preview", Separator: true}, Item{ID: id + "/preview", Title: "What it will do (whole):"})
		for i, l := range pl {
			it.Children = append(it.Children, Item{ID: id + "/preview/" + strconv.Itoa(i), Title: l})
		}
	}
	it.Children = append(it.Children, Item{ID: id + "/sep/args", Separator: true}, Item{ID: id + "/args", Title: "Arguments:"})
	argLines, readable := argumentLines(c)
	for i, l := range argLines {
		it.Children = append(it.Children, Item{ID: id + "/arg/" + strconv.Itoa(i), Title: l})
	}
	hidden := len(c.Hidden) > 0 && !c.Raw
	if hidden {
		it.Children = append(it.Children, hiddenItems(id, c)...)
	}
	it.Children = append(it.Children, Item{ID: id + "/sep/decide", Separator: true})
	if reconfirm {
		info("reconfirm", "Approve here did not count: this desktop's panel cannot prove a click in this menu is yours. "+
			"Approve in the notification, or with: carapace confirm approve "+api.ShortID(c.ID))
	}
	approve := Item{ID: id + "/approve", Title: "Approve", Enabled: live && readable && !hidden && previewShown,
		Action: Action{Kind: ActionApprove, Target: c.ID, ArgsHash: c.ArgsHash}}
	switch {
	case !previewShown:
		approve.Tooltip = "What it will do cannot all be shown here: read it whole with carapace confirm show " + api.ShortID(c.ID) + ", and decide there"
	case hidden:
		approve.Tooltip = "Values are hidden above: approve with carapace confirm approve --raw " + api.ShortID(c.ID) + " after reading them"
	case !readable:
		approve.Tooltip = "The arguments cannot all be shown here: decide with carapace confirm"
	}
	it.Children = append(it.Children, approve,
		Item{ID: id + "/deny", Title: "Deny", Enabled: live,
			Action: Action{Kind: ActionDeny, Target: c.ID, ArgsHash: c.ArgsHash}},
	)
	return it
}

// hiddenItems say what the arguments shown do not show as it runs — each
// value the core's sanitiser hid, where, what it looked like and how
// much — and where to read and approve it: the menu offers Deny only.
func hiddenItems(id string, c api.Confirmation) []Item {
	var items []Item
	info := func(sub, title string) { items = append(items, lines(id+"/hidden/"+sub, title)...) }
	info("head", "Hidden, shown above as [REDACTED] — maybe not a secret:")
	for i, h := range c.Hidden {
		where := "the value"
		if h.Path != "" {
			where = textutil.Printable(h.Path)
		}
		chars := "characters not counted"
		if h.Chars > 0 {
			chars = strconv.Itoa(h.Chars) + " characters"
		}
		info(strconv.Itoa(i), "• "+where+" · "+textutil.Printable(orText(h.Kind, "secret"))+" · "+chars)
	}
	info("show", "Read what runs: carapace confirm show --raw "+api.ShortID(c.ID))
	info("approve", "and approve it there: carapace confirm approve --raw "+api.ShortID(c.ID))
	return items
}

// previewLines are the lines of c's preview in its submenu, each made
// printable (it is untrusted text) and wrapped to Width, and whether they
// show all of it (else no Approve).
func previewLines(c api.Confirmation) ([]string, bool) {
	if c.PreviewOmitted || c.Preview == "" {
		return []string{"(not loaded yet: see carapace confirm show " + api.ShortID(c.ID) + ")"}, false
	}
	var out []string
	ls := strings.Split(strings.TrimSuffix(c.Preview, "\n"), "\n")
	for i, l := range ls {
		more := Wrap(textutil.Printable(l), Width, cont)
		if len(out)+len(more) > MaxPreviewLines {
			return append(out, fmt.Sprintf("… %d more lines not shown: read it whole with carapace confirm show %s", len(ls)-i, api.ShortID(c.ID))), false
		}
		out = append(out, more...)
	}
	return out, true
}

// argumentLines are the argument lines of c's submenu, each leaf wrapped
// to Width, and whether they show every argument (else no Approve).
func argumentLines(c api.Confirmation) ([]string, bool) {
	if c.ArgumentsOmitted {
		return []string{"(not loaded yet: too large for the watch stream)"}, false
	}
	ls, err := Leaves(c.Arguments)
	if err != nil {
		return Wrap("(cannot be shown: "+textutil.Printable(err.Error())+")", Width, cont), false
	}
	if len(ls) == 0 {
		return []string{"(none)"}, true
	}
	var out []string
	for i, l := range ls {
		more := Wrap(l.String(), Width, cont)
		if len(out)+len(more) > MaxArgumentLines {
			return append(out, fmt.Sprintf("… %d more arguments not shown: see carapace confirm list --json", len(ls)-i)), false
		}
		out = append(out, more...)
	}
	return out, true
}

// sessions is "Sessions (n)" with a submenu per session, and a line for
// the warm containers (started ahead, not sessions) when there are some.
func sessions(s State, now time.Time) Item {
	it := sessionItems(s, now)
	it.Children = append(it.Children, warmLine(s)...)
	return it
}

// sessionItems is "Sessions (n)" with a submenu per session.
func sessionItems(s State, now time.Time) Item {
	it := Item{ID: "sessions", Title: fmt.Sprintf("Sessions (%d)", len(s.Sessions)), Enabled: true}
	if len(s.Sessions) == 0 {
		it.Children = []Item{{ID: "sessions/none", Title: "No live sessions"}}
		return it
	}
	for _, ss := range s.Sessions {
		id := "session/" + ss.ID
		age := now.Sub(ss.Started)
		if age < 0 {
			age = 0
		}
		sub := Item{ID: id, Enabled: true,
			Title: orDash(ss.Group) + " · " + orDash(ss.Runtime) + " · " + age.Round(time.Second).String()}
		sub.Children = append(sub.Children, lines(id+"/id", "Session: "+orDash(ss.ID))...)
		sub.Children = append(sub.Children, Item{ID: id + "/stop", Title: "Stop", Enabled: s.Core == CoreRunning,
			Action: Action{Kind: ActionStopSession, Target: ss.ID}, Tooltip: "Close this session: its agent is stopped"})
		it.Children = append(it.Children, sub)
	}
	return it
}

// warmLine says which groups have warm containers waiting for their next
// session, and how many: "Warm, waiting: main (1), side (2)".
func warmLine(s State) []Item {
	if len(s.Status.Warm) == 0 {
		return nil
	}
	var groups []string
	count := map[string]int{}
	for _, w := range s.Status.Warm {
		if count[w.Group] == 0 {
			groups = append(groups, w.Group)
		}
		count[w.Group]++
	}
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = fmt.Sprintf("%s (%d)", textutil.Printable(textutil.ClipRunes(g, 24)), count[g])
	}
	return []Item{{ID: "sessions/warm", Title: "Warm, waiting: " + strings.Join(parts, ", "),
		Tooltip: "Containers started ahead of their group's next session ([sessions] warm); not sessions"}}
}

// taskItems is "Tasks (n)" with a submenu per task: when it next fires,
// how its last run went, Run now and Pause or Resume.
func taskItems(s State, now time.Time) Item {
	it := Item{ID: "tasks", Title: fmt.Sprintf("Tasks (%d)", len(s.Tasks)), Enabled: true}
	if len(s.Tasks) == 0 {
		it.Children = []Item{{ID: "tasks/none", Title: "No scheduled tasks (carapace tasks add)"}}
		return it
	}
	live := s.Core == CoreRunning && !s.Status.Draining
	for _, t := range s.Tasks {
		id := "task/" + t.ID
		next := "paused"
		switch {
		case !t.Enabled && t.PausedReason != "":
			next = "paused itself"
		case !t.Enabled:
		case t.Next != nil:
			next = "next in " + until(t.Next.Sub(now))
		default:
			next = "done"
		}
		sub := Item{ID: id, Enabled: true, Title: textutil.Printable(textutil.ClipRunes(t.Schedule, 48)) + " · " + textutil.Printable(textutil.ClipRunes(t.Group, 24)) + " · " + next}
		info := func(k, text string) { sub.Children = append(sub.Children, lines(id+"/"+k, text)...) }
		info("id", "Task: "+t.ID)
		info("prompt", "Prompt: "+textutil.Printable(textutil.ClipRunes(textutil.OneLine(t.Prompt), 120)))
		switch {
		case t.PausedReason != "":
			info("paused", "Paused: "+textutil.Printable(t.PausedReason))
		case t.Next != nil && t.Enabled:
			info("next", "Next: "+t.Next.Local().Format("Mon 2 Jan 15:04"))
		}
		if r := t.Last; r != nil {
			last := r.State
			if r.Reason != "" {
				last += " (" + textutil.Printable(textutil.OneLine(r.Reason)) + ")"
			}
			info("last", "Last: "+last+", "+r.Scheduled.Local().Format("Mon 2 Jan 15:04"))
		}
		sub.Children = append(sub.Children, Item{ID: id + "/run", Title: "Run now", Enabled: live,
			Action: Action{Kind: ActionRunTask, Target: t.ID}, Tooltip: "Run it once now; its schedule does not move"})
		if t.Enabled {
			sub.Children = append(sub.Children, Item{ID: id + "/pause", Title: "Pause", Enabled: live, Action: Action{Kind: ActionPauseTask, Target: t.ID}})
		} else {
			sub.Children = append(sub.Children, Item{ID: id + "/resume", Title: "Resume", Enabled: live, Action: Action{Kind: ActionResumeTask, Target: t.ID},
				Tooltip: "Start it again from now; what it missed is not caught up"})
		}
		it.Children = append(it.Children, sub)
	}
	return it
}

// until says a time ahead in a few characters: "45s", "12m", "3h", "2d".
func until(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d.Seconds()), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// lines is disabled information, wrapped to Width: one item, or id/0,
// id/1… when it takes several.
func lines(id, text string) []Item {
	ws := Wrap(text, Width, cont)
	if len(ws) == 1 {
		return []Item{{ID: id, Title: ws[0]}}
	}
	items := make([]Item, len(ws))
	for i, w := range ws {
		items[i] = Item{ID: id + "/" + strconv.Itoa(i), Title: w}
	}
	return items
}

func digestPrefix(h string) string {
	if len(h) > DigestPrefix {
		h = h[:DigestPrefix]
	}
	return textutil.Printable(h)
}

func orDash(s string) string { return textutil.Printable(orText(s, "-")) }

func orText(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}
