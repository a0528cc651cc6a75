//go:build !darwin

package tray

import (
	"strings"

	"fyne.io/systray"

	"github.com/carapace-dev/carapace/app/menu"
)

// setIcon shows icon's colour image: a StatusNotifierItem has no template
// images.
func setIcon(icon menu.Icon) {
	regular, _ := icons(icon)
	systray.SetIcon(regular)
}

// setTitle names the StatusNotifierItem (its Title property, which panels
// show in lists of tray items).
func setTitle() { systray.SetTitle("Carapace") }

// setBadge does nothing: a StatusNotifierItem's title is its name, not a
// badge; the attention icon and the tooltip say what waits.
func setBadge(string) {}

// label is title as a dbusmenu label: an underscore there marks the
// access key (and is not shown), so a literal one is doubled. Tool names
// are snake_case: without this, echo_confirm shows as "echoconfirm".
func label(title string) string { return strings.ReplaceAll(title, "_", "__") }
