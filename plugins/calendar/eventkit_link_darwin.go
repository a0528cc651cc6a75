//go:build darwin && cgo

package calendar

// The EventKit framework linked into the handler: without it the
// Objective-C runtime has no EKEventStore class to find.

// #cgo LDFLAGS: -framework EventKit
import "C"
