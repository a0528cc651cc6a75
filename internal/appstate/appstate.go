// Package appstate is what the menu-bar app reports of itself for
// `carapace doctor`: whether it may show notifications and whether it
// starts at login. Only the app can know either (macOS answers those
// questions per app bundle), so the app writes them to a file in the
// home's run folder while it runs, and doctor reads it.
package appstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/internal/atomicfile"
)

// State is the app's report.
type State struct {
	PID           int           `json:"pid"`     // the app's process
	Updated       time.Time     `json:"updated"` // when it was written
	Notifications Notifications `json:"notifications"`
	LoginItem     LoginItem     `json:"login_item"`
	// Calendar is the app's access to the calendars and reminders (macOS
	// EventKit), which the calendar plugin's eventkit backend needs; nil
	// where there is none to ask for.
	Calendar *Calendar `json:"calendar,omitempty"`
}

// Calendar says whether the app may read and write the calendars and
// reminders (app/calaccess).
type Calendar struct {
	Events    string `json:"events"`    // one of the Calendar* levels
	Reminders string `json:"reminders"` // likewise
	Granted   bool   `json:"granted"`   // full access to both
	Problem   string `json:"problem,omitempty"`
}

// Levels of calendar access: macOS EventKit's EKAuthorizationStatus in
// words (app/calaccess reads them).
const (
	CalendarNotDetermined = "not-determined" // never asked: the menu item asks
	CalendarRestricted    = "restricted"     // a profile (MDM, Screen Time) forbids it
	CalendarDenied        = "denied"         // refused: System Settings › Privacy & Security
	CalendarFull          = "full"           // granted
	CalendarWriteOnly     = "write-only"     // events may be added, not read: the plugin needs full access
	CalendarUnknown       = "unknown"        // a status this build does not know
)

// Advice says what to do when the access is not full (the menu's tooltip,
// doctor's fix); "" when both are granted.
func (c Calendar) Advice() string {
	switch {
	case c.Events == CalendarFull && c.Reminders == CalendarFull:
		return ""
	case c.Events == CalendarDenied || c.Reminders == CalendarDenied || c.Events == CalendarWriteOnly || c.Reminders == CalendarWriteOnly:
		return "allow Carapace full access in System Settings › Privacy & Security › Calendars and › Reminders"
	case c.Events == CalendarRestricted || c.Reminders == CalendarRestricted:
		return "a profile on this Mac forbids calendar access (MDM or Screen Time)"
	}
	return "Carapace menu › Allow calendar and reminders access…"
}

// Notifications says whether approvals can be shown as notifications.
type Notifications struct {
	OK  bool   `json:"ok"`
	Why string `json:"why,omitempty"` // when not: why, and what to do
}

// LoginItem says whether the app starts at login.
type LoginItem struct {
	Supported bool   `json:"supported"`
	Enabled   bool   `json:"enabled"`
	Problem   string `json:"problem,omitempty"`
}

// Path is the report's file.
func Path(h home.Dir) string { return h.Path("run", "app.json") }

// Write writes s (mode 0600, atomically).
func Write(h home.Dir, s State) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(h.RunDir(), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(Path(h), append(b, '\n'), 0o600)
}

// Remove removes the report if it is the process pid's.
func Remove(h home.Dir, pid int) {
	if s, err := read(h); err == nil && s.PID == pid {
		os.Remove(Path(h))
	}
}

// ErrNotRunning: no app is running on this home (no report, or the
// report of a process that is gone).
var ErrNotRunning = errors.New("the menu-bar app is not running")

// Read returns the report of the running app.
func Read(h home.Dir) (State, error) {
	s, err := read(h)
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, ErrNotRunning
	}
	if err != nil {
		return State{}, err
	}
	if s.PID <= 0 || syscall.Kill(s.PID, 0) == syscall.ESRCH {
		return State{}, ErrNotRunning
	}
	return s, nil
}

func read(h home.Dir) (State, error) {
	b, err := os.ReadFile(Path(h))
	if err != nil {
		return State{}, err
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return State{}, fmt.Errorf("%s: %w", Path(h), err)
	}
	return s, nil
}
