package calendar

import (
	"context"
	"errors"
	"time"
)

// Backend is what the tools need of a calendar store. Ids are the
// backend's own, opaque to the agent and stable across calls. Times are
// instants; all-day events and date-only due dates carry dates (Date).
type Backend interface {
	// Calendars lists the collections the account has, events and
	// reminders alike.
	Calendars(ctx context.Context) ([]CalendarInfo, error)
	// ListEvents returns the events of calendar ("" for all) that overlap
	// [from, to), a recurring event once per occurrence in the range.
	ListEvents(ctx context.Context, calendar string, from, to time.Time) ([]Event, error)
	// CreateEvent adds an event to calendar ("" for the default).
	CreateEvent(ctx context.Context, calendar string, ev NewEvent) (Event, error)
	// UpdateEvent changes an event (a recurring one as a whole series).
	// It fails with ErrConflict, changing nothing, when the event changed
	// since version (when given) or while it was being updated.
	UpdateEvent(ctx context.Context, id string, ch EventChange) (Event, error)
	// DeleteEvent removes an event (a recurring one as a whole series),
	// with ErrConflict as UpdateEvent.
	DeleteEvent(ctx context.Context, id, version string) error
	// ListReminders returns the to-dos of list ("" for the default).
	ListReminders(ctx context.Context, list string, includeCompleted bool) ([]Reminder, error)
	// CreateReminder adds a to-do to list ("" for the default); one with a
	// due date also gets an alarm at that time.
	CreateReminder(ctx context.Context, list string, r NewReminder) (Reminder, error)
	// CompleteReminder marks a to-do done.
	CompleteReminder(ctx context.Context, id string) (Reminder, error)
}

// Errors a backend returns, wrapped, for the tools to tell the agent.
var (
	// ErrConflict: the item changed since it was read; nothing was written.
	ErrConflict = errors.New("the item changed meanwhile")
	// ErrNotFound: no such item (or no longer).
	ErrNotFound = errors.New("no such item")
	// ErrNoCalendar: no calendar or list of that name.
	ErrNoCalendar = errors.New("no such calendar")
	// ErrBadID: the id is not one this plugin gave.
	ErrBadID = errors.New("not an id of this plugin")
	// ErrHasAttendees: the change would notify the event's attendees and
	// the call did not say so (notify_attendees).
	ErrHasAttendees = errors.New("the event has attendees")
)

// CalendarInfo is one collection.
type CalendarInfo struct {
	Name       string   // the display name, or the last segment of its path
	Components []string // VEVENT, VTODO
}

// Date is a calendar day, without a zone.
type Date struct {
	Year  int
	Month time.Month
	Day   int
}

// String is the ISO form, 2026-10-25.
func (d Date) String() string {
	return time.Date(d.Year, d.Month, d.Day, 0, 0, 0, 0, time.UTC).Format(time.DateOnly)
}

// In is the day's first instant in loc.
func (d Date) In(loc *time.Location) time.Time {
	return time.Date(d.Year, d.Month, d.Day, 0, 0, 0, 0, loc)
}

// AddDays is the day n days later.
func (d Date) AddDays(n int) Date { return DateOf(d.In(time.UTC).AddDate(0, 0, n)) }

// DateOf is t's day in t's own location.
func DateOf(t time.Time) Date {
	y, m, dd := t.Date()
	return Date{y, m, dd}
}

// Event is one event, or one occurrence of a recurring event.
type Event struct {
	ID       string
	Version  string // the server's ETag (CalDAV): give it back to update or delete
	Calendar string
	Title    string
	Location string
	Notes    string
	// Start and End: a timed event's instants. An all-day event has
	// StartDate and EndDate instead (EndDate exclusive, as in iCalendar).
	Start, End         time.Time
	AllDay             bool
	StartDate, EndDate Date
	Recurring          bool // one occurrence of a series; update and delete act on the series
	Attendees          []string
	Organizer          string
	Status             string // CONFIRMED, TENTATIVE, CANCELLED, or empty
}

// NewEvent is an event to create.
type NewEvent struct {
	Title, Location, Notes string
	Start, End             time.Time // timed
	AllDay                 bool
	StartDate, EndDate     Date // all-day; EndDate exclusive
	Attendees              []string
	Organizer              string // the account's address, when attendees are invited
}

// EventChange is a change to an event: nil fields stay as they are.
type EventChange struct {
	Version                string // if set, the change applies only to this version
	Title, Location, Notes *string
	Start, End             *time.Time // timed
	StartDate, EndDate     *Date      // all-day (EndDate exclusive)
	Attendees              *[]string
	// NotifyAttendees allows a change to an event that has attendees (the
	// server may send them an update).
	NotifyAttendees bool
}

// Reminder is one to-do.
type Reminder struct {
	ID          string
	Version     string
	List        string
	Title       string
	Notes       string
	Due         time.Time // zero: none; a date-only due has DueDate
	DueDate     *Date
	Priority    string // high, medium, low, or empty
	Completed   bool
	CompletedAt time.Time
}

// NewReminder is a to-do to create.
type NewReminder struct {
	Title, Notes string
	Due          time.Time // zero: none
	DueDate      *Date     // a date-only due
	Priority     string    // high, medium, low, or empty
}
