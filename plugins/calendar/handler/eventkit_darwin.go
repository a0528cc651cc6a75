//go:build darwin

package main

import "github.com/carapace-dev/carapace/plugins/calendar"

// eventKit: the EventKit backend is not built yet (docs/CALENDAR.md):
// backend = "eventkit" fails Init saying so, on the Mac too.
var eventKit func(calendar.Config) (calendar.Backend, error)
