//go:build darwin && cgo

package main

import "github.com/carapace-dev/carapace/plugins/calendar"

// eventKit is the Mac's EventKit (backend = "eventkit"): the calendars and
// reminders of every account the Mac has, without a password, once the
// user allowed Carapace access from the app.
var eventKit = calendar.NewEventKitStore
