// Package menu is the menu-bar app's menu as plain Go, with no GUI: a
// State built from the core's watch stream by a reducer (State.Apply), and
// Render, which turns a State into a Tree of Items for a tray to show. The
// tray (app/tray) only mirrors the Tree and reports clicks as Actions; all
// that the menu says, and which clicks it offers, is decided here and
// tested here.
//
// Everything shown that came from the core or the agent — tool and group
// names, argument values, reasons — is escaped with textutil.Printable
// (control and bidi characters become \u escapes), and argument values are
// wrapped onto several lines rather than cut: what you approve is what you
// could read.
package menu

import "strings"

// Tree is a rendered menu: what a tray shows.
type Tree struct {
	Icon Icon // the menu-bar icon
	// Badge is a short text beside the icon (macOS shows it in the menu
	// bar): the number of pending approvals, "" when none.
	Badge   string
	Tooltip string // the icon's tooltip: the status in a sentence
	Items   []Item // the top-level items, in order
}

// Icon is which menu-bar icon to show.
type Icon int

// The icons.
const (
	IconNormal    Icon = iota // nothing waits for the user
	IconAttention             // something waits: a pending approval, or the core is not running
)

// String names the icon, for logs and tests.
func (i Icon) String() string {
	if i == IconAttention {
		return "attention"
	}
	return "normal"
}

// Item is one menu item. Its ID is stable across renders for the same
// thing (a confirmation's Approve is "confirm/<id>/approve" whatever else
// changes), so a tray can update items in place and a click maps to what
// the user saw.
type Item struct {
	ID        string
	Title     string
	Tooltip   string
	Enabled   bool // clickable; disabled items are information
	Checkable bool // shows a check box (Checked says its state)
	Checked   bool
	Separator bool // a separator line; only ID matters
	// Children make the item a submenu.
	Children []Item
	// Action is what a click asks for; ActionNone for information.
	Action Action
}

// Action is what a click on an item asks the app to do.
type Action struct {
	Kind ActionKind
	// Target is the confirmation's id (approve, deny), the session's id
	// (stop session) or the task's (run, pause, resume task); "" for the
	// others.
	Target string
	// ArgsHash is, for approve and deny, the hash of the arguments the
	// item's submenu showed: the decision carries it, and the core refuses
	// it if it is not the confirmation's.
	ArgsHash string
}

// Click is a click a tray reports: the clicked item's action, and what
// the tray can tell of where the click came from.
type Click struct {
	Action
	// Vouched says the tray can tell the click came from the desktop's
	// own menu and not from another program: always so for macOS's
	// menu, drawn by the app's own process; on Linux only when the
	// session-bus connection that sent it is the panel's (app/tray says
	// which), since any program on the bus can send a menu its clicks.
	// The app approves only on a vouched click.
	Vouched bool
	// From names the sender, for the log: a D-Bus unique name on Linux,
	// "" where there is nothing to name.
	From string
}

// ActionKind says what an Action does.
type ActionKind int

// The actions.
const (
	ActionNone           ActionKind = iota // an information item
	ActionApprove                          // approve confirmation Target
	ActionDeny                             // deny confirmation Target
	ActionStopSession                      // close session Target
	ActionPause                            // stop starting sessions for events
	ActionResume                           // start them again
	ActionOpenAuditLog                     // open the audit log file
	ActionStartAtLogin                     // toggle the login item
	ActionRestartCore                      // start the core again after it died
	ActionQuit                             // quit the app
	ActionRunTask                          // run task Target once now
	ActionPauseTask                        // pause task Target
	ActionResumeTask                       // resume task Target
	ActionCalendarAccess                   // ask macOS for access to calendars and reminders (app/calaccess)
)

var actionNames = [...]string{"none", "approve", "deny", "stop-session", "pause", "resume", "open-audit-log", "start-at-login", "restart-core", "quit",
	"run-task", "pause-task", "resume-task", "calendar-access"}

// String names the action kind, for logs and tests.
func (k ActionKind) String() string {
	if int(k) >= 0 && int(k) < len(actionNames) {
		return actionNames[k]
	}
	return "unknown"
}

// Find returns the item with id anywhere in the tree.
func (t Tree) Find(id string) (Item, bool) { return find(t.Items, id) }

func find(items []Item, id string) (Item, bool) {
	for _, it := range items {
		if it.ID == id {
			return it, true
		}
		if got, ok := find(it.Children, id); ok {
			return got, true
		}
	}
	return Item{}, false
}

// Walk calls f for every item, parents before their children, with the
// item's depth (0 for top-level items).
func (t Tree) Walk(f func(it Item, depth int)) { walk(t.Items, 0, f) }

func walk(items []Item, depth int, f func(Item, int)) {
	for _, it := range items {
		f(it, depth)
		walk(it.Children, depth+1, f)
	}
}

// String draws the tree as indented text, one item a line, for tests and
// debug logs: "[x]" marks a checked item, "(off)" a disabled one, "---" a
// separator, and an action follows "->".
func (t Tree) String() string {
	var b strings.Builder
	b.WriteString("icon " + t.Icon.String())
	if t.Badge != "" {
		b.WriteString(" badge " + t.Badge)
	}
	b.WriteByte('\n')
	t.Walk(func(it Item, depth int) {
		b.WriteString(strings.Repeat("  ", depth))
		switch {
		case it.Separator:
			b.WriteString("---\n")
			return
		case it.Checkable && it.Checked:
			b.WriteString("[x] ")
		case it.Checkable:
			b.WriteString("[ ] ")
		}
		b.WriteString(it.Title)
		if !it.Enabled {
			b.WriteString(" (off)")
		}
		if it.Action.Kind != ActionNone {
			b.WriteString(" -> " + it.Action.Kind.String())
		}
		b.WriteByte('\n')
	})
	return b.String()
}
