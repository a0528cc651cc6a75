//go:build !darwin || cgo

package tray

import (
	"fyne.io/systray"

	resicons "github.com/carapace-dev/carapace/Resources/icons"
	"github.com/carapace-dev/carapace/app/menu"
)

// icons returns the regular and the template image for icon: the colour
// mark for trays that show images as they are, and the black-on-
// transparency template the macOS menu bar tints for dark and light bars
// (Resources/icons, drawn by internal/appicon).
func icons(icon menu.Icon) (regular, template []byte) {
	if icon == menu.IconAttention {
		return resicons.TrayAttention, resicons.MenuBarAttentionTemplate
	}
	return resicons.Tray, resicons.MenuBarTemplate
}

// runLoop runs fyne systray's loop until quitLoop.
func runLoop(t *Tray) {
	systray.Run(t.onReady, func() { t.log.Info("tray: the menu bar loop ended") })
}

// quitLoop ends runLoop.
func quitLoop() { systray.Quit() }

func setTooltip(s string) { systray.SetTooltip(s) }

func newBackend(t *Tray) backend { return fyneBackend{t: t} }

// fyneBackend is the reconciler's backend on fyne.io/systray.
type fyneBackend struct{ t *Tray }

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
			b.t.clicked(id)
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
