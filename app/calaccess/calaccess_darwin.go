//go:build darwin && cgo

package calaccess

// #cgo LDFLAGS: -framework EventKit
import "C"

import (
	"context"
	"fmt"

	"github.com/progrium/darwinkit/objc"
)

// EventKit through the Objective-C runtime (darwinkit v0.5.0 has no
// generated EventKit binding). Type-checked on Linux (go run
// ./cmd/darwincheck); it runs only on a Mac, inside Carapace.app, whose
// Info.plist carries NSCalendarsFullAccessUsageDescription and
// NSRemindersFullAccessUsageDescription (without them macOS refuses
// without asking). Nothing here has run yet: docs/CALENDAR.md says what
// ran where.

const (
	ekEntityEvent    uint = 0
	ekEntityReminder uint = 1
)

// New returns the app's EventKit access.
func New() Access { return eventKit{} }

type eventKit struct{}

func status(entity uint) string {
	return Level(objc.Call[int](objc.GetClass("EKEventStore"), objc.Sel("authorizationStatusForEntityType:"), entity))
}

// Status implements Access.
func (eventKit) Status() (Status, error) {
	if objc.GetClass("EKEventStore").Ptr() == nil {
		return Status{}, fmt.Errorf("%w: EventKit is not available", ErrUnsupported)
	}
	var s Status
	objc.WithAutoreleasePool(func() {
		s = Status{Events: status(ekEntityEvent), Reminders: status(ekEntityReminder)}
	})
	return s, nil
}

// Request implements Access: requestFullAccessToEventsWithCompletion: and
// requestFullAccessToRemindersWithCompletion: (macOS 14), or
// requestAccessToEntityType:completion: before. Each completion runs on
// an arbitrary queue; it only sends on a channel.
func (e eventKit) Request(ctx context.Context) (Status, error) {
	cls := objc.GetClass("EKEventStore")
	if cls.Ptr() == nil {
		return Status{}, fmt.Errorf("%w: EventKit is not available", ErrUnsupported)
	}
	var store objc.Object
	objc.WithAutoreleasePool(func() {
		store = objc.Call[objc.Object](objc.Call[objc.Object](cls, objc.Sel("alloc")), objc.Sel("init"))
	})
	if store.IsNil() {
		return Status{}, fmt.Errorf("EventKit: could not open the event store")
	}
	defer store.Release()
	for _, req := range []struct {
		entity uint
		modern string
	}{
		{ekEntityEvent, "requestFullAccessToEventsWithCompletion:"},
		{ekEntityReminder, "requestFullAccessToRemindersWithCompletion:"},
	} {
		if status(req.entity) != NotDetermined {
			continue // asked before: macOS would not ask again
		}
		done := make(chan struct{}, 1)
		objc.WithAutoreleasePool(func() {
			// Autoreleased with the pool; EventKit copies a completion
			// handler it keeps.
			block := objc.CreateMallocBlock(func(granted bool, err objc.Object) {
				select {
				case done <- struct{}{}:
				default:
				}
			})
			if objc.Call[bool](store, objc.Sel("respondsToSelector:"), objc.Sel(req.modern)) {
				objc.Call[objc.Void](store, objc.Sel(req.modern), block)
			} else {
				objc.Call[objc.Void](store, objc.Sel("requestAccessToEntityType:completion:"), req.entity, block)
			}
		})
		select {
		case <-done:
		case <-ctx.Done():
			return e.Status()
		}
	}
	return e.Status()
}
