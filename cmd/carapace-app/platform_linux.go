package main

import (
	"log/slog"

	"github.com/carapace-dev/carapace/core/home"
)

// newPlatform builds the notifier and the login item (org.freedesktop.Notifications over D-Bus and an XDG autostart file).
//
// TODO(integration): the Linux backends land on their own branches; wire them here:
//
//	n, err := notify.New(log, notify.Options{...})  // on error: log it, no notifier
//	li, err := loginitem.New(loginitem.Options{...})
//
// Until then the app runs without notifications (the menu carries the
// approvals, and its status line says so) and without a login item.
func newPlatform(log *slog.Logger, _ home.Dir) platform {
	log.Warn("carapace-app: this build has no notification or login-item backend yet: approvals are in the menu")
	return platform{}
}
