//go:build !linux && !darwin

package main

import (
	"log/slog"

	"github.com/carapace-dev/carapace/core/home"
)

// newPlatform: no notifications or login item on this platform; the menu
// carries the approvals.
func newPlatform(log *slog.Logger, _ home.Dir) platform {
	log.Info("carapace-app: no notifications or login item on this platform: approvals are in the menu")
	return platform{}
}
