// Package calaccess asks macOS, from the menu-bar app, for access to the
// calendars and reminders (EventKit), and reads whether it is granted.
// The calendar plugin's EventKit backend never asks inside a tool call:
// it reports NO_ACCESS, and the app's menu item "Allow calendar and
// reminders access…" asks (calaccess_darwin.go); carapace doctor reads
// the state from the app's report (internal/appstate).
//
// Elsewhere New returns nil: there is nothing to ask.
package calaccess

import (
	"context"
	"errors"

	"github.com/carapace-dev/carapace/internal/appstate"
)

// Levels of access: internal/appstate's words, which the app reports
// and doctor reads.
const (
	NotDetermined = appstate.CalendarNotDetermined
	Restricted    = appstate.CalendarRestricted
	Denied        = appstate.CalendarDenied
	Full          = appstate.CalendarFull
	WriteOnly     = appstate.CalendarWriteOnly
	Unknown       = appstate.CalendarUnknown
)

// Status is the access to events and to reminders: EventKit asks and
// grants them apart.
type Status struct {
	Events    string `json:"events"`
	Reminders string `json:"reminders"`
}

// Granted reports whether both are fully granted.
func (s Status) Granted() bool { return s.Events == Full && s.Reminders == Full }

// Access reads and requests the app's access to calendars and reminders.
type Access interface {
	// Status reads the current access, without asking.
	Status() (Status, error)
	// Request asks for full access to events, then to reminders (macOS
	// shows its prompt for each that was never asked; one answered
	// before is not asked again: only System Settings changes it), and
	// returns the access after. It may wait for the user as long as ctx
	// lets it.
	Request(ctx context.Context) (Status, error)
}

// ErrUnsupported: the platform or the build has no EventKit.
var ErrUnsupported = errors.New("calendar access is asked for only on macOS")

// Level maps an EKAuthorizationStatus to its word.
func Level(ekStatus int) string {
	switch ekStatus {
	case 0:
		return NotDetermined
	case 1:
		return Restricted
	case 2:
		return Denied
	case 3:
		return Full // EKAuthorizationStatusFullAccess (Authorized before macOS 14)
	case 4:
		return WriteOnly
	}
	return Unknown
}

// Advice says what to do about s, for the menu's tooltip; "" when both
// are granted (internal/appstate's words).
func Advice(s Status) string {
	return appstate.Calendar{Events: s.Events, Reminders: s.Reminders}.Advice()
}
