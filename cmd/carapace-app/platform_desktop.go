//go:build linux || darwin

package main

import (
	"log/slog"

	"github.com/carapace-dev/carapace/app/calaccess"
	"github.com/carapace-dev/carapace/app/loginitem"
	"github.com/carapace-dev/carapace/app/notify"
	"github.com/carapace-dev/carapace/core/home"
)

// newPlatform builds the notifier and the login item: on Linux
// org.freedesktop.Notifications over D-Bus and an XDG autostart file, on
// macOS UNUserNotificationCenter and SMAppService. A desktop
// without notifications leaves the notifier nil: the menu carries the
// approvals, and its status line says why.
func newPlatform(log *slog.Logger, h home.Dir) platform {
	var p platform
	n, err := notify.New(log, notify.Options{})
	switch {
	case err != nil:
		log.Warn("carapace-app: no native notifications; approvals are in the menu", "err", err)
	default:
		p.notifier = n
	}
	p.loginItem = loginitem.New(loginitem.Options{Home: string(h)})
	p.calendar = calaccess.New()
	return p
}
