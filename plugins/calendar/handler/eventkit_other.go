//go:build !darwin || !cgo

package main

import "github.com/carapace-dev/carapace/plugins/calendar"

// eventKit: there is no EventKit off macOS (or without cgo);
// backend = "eventkit" fails Init saying so.
var eventKit func(calendar.Config) (calendar.Backend, error)
