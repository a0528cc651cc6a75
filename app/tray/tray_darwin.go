//go:build darwin && cgo

package tray

import (
	"fyne.io/systray"

	"github.com/carapace-dev/carapace/app/menu"
)

// setIcon shows icon as a template image, which the menu bar tints for
// dark and light bars.
func setIcon(icon menu.Icon) {
	regular, template := icons(icon)
	systray.SetTemplateIcon(template, regular)
}

// setTitle leaves the menu bar item without a title: the icon alone.
func setTitle() {}

// setBadge shows the number of pending approvals beside the icon.
func setBadge(badge string) { systray.SetTitle(badge) }

// label is title as an NSMenuItem shows it: as it is (macOS menus have no
// access-key markers).
func label(title string) string { return title }
