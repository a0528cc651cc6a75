// Package loginitem starts the menu-bar app when the user logs in: an
// SMAppService main-app login item on macOS 13 and later
// (loginitem_darwin.go), an XDG autostart .desktop file on Linux
// (loginitem_linux.go). The menu's "Start at login" checkbox shows Enabled
// and calls SetEnabled: it reflects the real state, never a remembered
// wish.
package loginitem

import "errors"

// Item is the app's login item.
type Item interface {
	// Enabled reports whether the app starts at login now.
	Enabled() (bool, error)
	// SetEnabled registers (true) or unregisters (false) the app.
	SetEnabled(on bool) error
}

// ErrUnsupported: this platform has no login items this package knows.
var ErrUnsupported = errors.New("start at login is not supported on this platform")
