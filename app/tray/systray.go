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
// (Resources/icons, drawn by cmd/appicon).
func icons(icon menu.Icon) (regular, template []byte) {
	if icon == menu.IconAttention {
		return resicons.TrayAttention, resicons.MenuBarAttentionTemplate
	}
	return resicons.Tray, resicons.MenuBarTemplate
}

func setTooltip(s string) { systray.SetTooltip(s) }
