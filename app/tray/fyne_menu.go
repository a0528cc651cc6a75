//go:build !linux && (!darwin || cgo)

package tray

import (
	"runtime"

	"fyne.io/systray"

	"github.com/carapace-dev/carapace/app/menu"
)

// runLoop runs fyne systray's loop until quitLoop.
func runLoop(t *Tray) {
	systray.Run(t.onReady, func() { t.log.Info("tray: the menu bar loop ended") })
}

// quitLoop ends runLoop.
func quitLoop() { systray.Quit() }

// newView shows the items in fyne systray's menu. Only macOS's is drawn
// by the app's own process, where no other program can click it: its
// clicks are vouched for. (fyne's menus elsewhere — Windows, the BSDs'
// D-Bus — are not supported platforms of the app; their clicks are not.)
func newView(t *Tray) view {
	v := &reconcileView{t: t, vouched: runtime.GOOS == "darwin"}
	v.rec.b = fyneBackend{v: v}
	return v
}

// fyneBackend is the reconciler's backend on fyne.io/systray.
type fyneBackend struct{ v *reconcileView }

var _ backend = fyneBackend{}

func (b fyneBackend) add(parent handle, it menu.Item) handle {
	var mi *systray.MenuItem
	switch p, _ := parent.(*systray.MenuItem); {
	case p == nil && it.Checkable:
		mi = systray.AddMenuItemCheckbox(label(it.Title), it.Tooltip, it.Checked)
	case p == nil:
		mi = systray.AddMenuItem(label(it.Title), it.Tooltip)
	case it.Checkable:
		mi = p.AddSubMenuItemCheckbox(label(it.Title), it.Tooltip, it.Checked)
	default:
		mi = p.AddSubMenuItem(label(it.Title), it.Tooltip)
	}
	if !it.Enabled {
		mi.Disable()
	}
	id, clicks := it.ID, mi.ClickedCh
	go func() {
		// Remove closes the channel: the goroutine ends with its item.
		for range clicks {
			b.v.clicked(id)
		}
	}()
	return mi
}

func (b fyneBackend) addSeparator(parent handle) {
	if p, _ := parent.(*systray.MenuItem); p != nil {
		p.AddSeparator()
		return
	}
	systray.AddSeparator()
}

func (b fyneBackend) update(h handle, it menu.Item) {
	mi := h.(*systray.MenuItem)
	mi.SetTitle(label(it.Title))
	mi.SetTooltip(it.Tooltip)
	if it.Enabled {
		mi.Enable()
	} else {
		mi.Disable()
	}
	if it.Checkable {
		if it.Checked {
			mi.Check()
		} else {
			mi.Uncheck()
		}
	}
}

func (b fyneBackend) remove(h handle) { h.(*systray.MenuItem).Remove() }

func (b fyneBackend) reset() { systray.ResetMenu() }
