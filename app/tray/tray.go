// Package tray shows the menu-bar app's menu (an app/menu Tree) in the
// desktop's menu bar with fyne.io/systray v1.12.2: an NSStatusItem on
// macOS, a StatusNotifierItem with a com.canonical.dbusmenu menu on Linux.
//
// fyne systray owns the main loop: Run must be called on the main
// goroutine, and no other AppKit loop may run beside it. It keeps global
// state, so a process has one Tray.
//
// On macOS (and other platforms) fyne systray's menu shows the items. It
// can only be appended to, so the Tray keeps a map from the Tree's stable
// item IDs to systray items and changes them in place (reconcile.go),
// rebuilding the menu only for a change that cannot be made so.
//
// On Linux the Tray serves the com.canonical.dbusmenu menu itself
// (dbusmenu_linux.go), on fyne systray's connection and at its path,
// because fyne's accepts a click from any program on the session bus; its
// own tells the panel's clicks from others' (menu.Click.Vouched).
//
// Either way clicks go out on Clicks as the clicked item's menu.Action,
// looked up by ID in the tree last applied.
//
// fyne systray's Linux menu has a data race that -race reports (its
// refresh against GetLayout); tests run a program that uses this package
// as a subprocess. The reconciler is tested here with a fake backend.
package tray

import (
	"log/slog"
	"sync"

	"github.com/carapace-dev/carapace/app/menu"
)

// Tray is the menu bar's menu. Update, Actions and Quit are safe for
// concurrent use; Run runs on the main goroutine.
type Tray struct {
	log    *slog.Logger
	clicks chan menu.Click

	mu       sync.Mutex
	pending  *menu.Tree // the latest tree not applied yet
	quitting bool
	kick     chan struct{} // a tree is pending
	quit     chan struct{} // closed by Quit

	// Only the goroutine that applies trees touches these.
	view view
	icon menu.Icon
}

// view is how a platform shows the menu's items; it reports clicks with
// Tray.deliver. Its methods are safe for concurrent use with clicks.
type view interface {
	// show makes the menu show items.
	show(items []menu.Item)
}

// New returns a Tray; nothing shows until Run.
func New(log *slog.Logger) *Tray {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := &Tray{log: log, clicks: make(chan menu.Click, 16), kick: make(chan struct{}, 1), quit: make(chan struct{}), icon: -1}
	t.view = newView(t)
	return t
}

// Run shows the menu bar item and runs the desktop's loop on the calling
// goroutine, which must be the main one, until Quit.
func (t *Tray) Run() {
	t.mu.Lock()
	quitting := t.quitting
	t.mu.Unlock()
	if quitting {
		return
	}
	runLoop(t)
}

// onReady starts applying trees once the menu bar is ready.
func (t *Tray) onReady() {
	setTooltip("Carapace")
	setTitle()
	go t.applyLoop()
}

// Update shows tree, as soon as the menu bar is ready; of several trees
// given meanwhile only the last is shown.
func (t *Tray) Update(tree menu.Tree) {
	t.mu.Lock()
	t.pending = &tree
	t.mu.Unlock()
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// Clicks delivers the clicks on items that have an action.
func (t *Tray) Clicks() <-chan menu.Click { return t.clicks }

// Quit ends Run. It may be called before Run (which then returns at once)
// and more than once.
func (t *Tray) Quit() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.quitting {
		return
	}
	t.quitting = true
	close(t.quit)
	quitLoop()
}

// applyLoop applies the pending trees until Quit.
func (t *Tray) applyLoop() {
	for {
		select {
		case <-t.quit:
			return
		case <-t.kick:
		}
		t.mu.Lock()
		tree := t.pending
		t.pending = nil
		t.mu.Unlock()
		if tree != nil {
			t.apply(*tree)
		}
	}
}

func (t *Tray) apply(tree menu.Tree) {
	t.view.show(tree.Items)
	if tree.Icon != t.icon {
		setIcon(tree.Icon)
		t.icon = tree.Icon
	}
	setTooltip(tree.Tooltip)
	setBadge(tree.Badge)
}

// deliver reports c, the click on an enabled item; one with no action
// reports nothing.
func (t *Tray) deliver(c menu.Click) {
	if c.Kind == menu.ActionNone {
		return
	}
	select {
	case t.clicks <- c:
	default:
		t.log.Warn("tray: a click was dropped: the app is not reading clicks", "action", c.Kind.String(), "target", c.Target)
	}
}
