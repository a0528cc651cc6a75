package calendar

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// EKStore is the part of macOS's EventKit the EventKit backend uses, as
// plain Go values: backend_darwin.go implements it with Objective-C
// runtime calls; tests implement it in memory. EventKit expands recurring
// events itself (Events returns occurrences), and an item's Modified
// (lastModifiedDate) stands for its version.
type EKStore interface {
	// Access says whether the user granted full access to events
	// (reminders false) or reminders, and if not, the state in words.
	// Access is asked for by the app, never here.
	Access(reminders bool) (granted bool, state string)
	Calendars(reminders bool) []EKCalendar
	DefaultCalendar(reminders bool) (EKCalendar, bool)
	Events(from, to time.Time, calendarIDs []string) ([]EKEvent, error)
	Event(id string) (EKEvent, bool)
	// SaveEvent creates (ID "") or changes an event; a recurring one as
	// the whole series from its first occurrence.
	SaveEvent(ev EKEvent) (EKEvent, error)
	RemoveEvent(id string) error
	Reminders(calendarIDs []string) ([]EKReminder, error)
	Reminder(id string) (EKReminder, bool)
	SaveReminder(r EKReminder) (EKReminder, error)
}

// EKCalendar is an EKCalendar: its identifier and title.
type EKCalendar struct{ ID, Title string }

// EKEvent is an EKEvent's fields. An all-day event's Start is the first
// day's midnight and End the last day's end (EventKit's own form), in
// the zone of the store.
type EKEvent struct {
	ID, CalendarID, CalendarTitle string
	Title, Location, Notes        string
	Start, End                    time.Time
	AllDay, Recurring             bool
	Attendees                     []string
	Organizer                     string
	Status                        string
	Modified                      time.Time
}

// EKReminder is an EKReminder's fields. Due is set for a due time,
// DueDate for a due day without a time.
type EKReminder struct {
	ID, CalendarID, CalendarTitle string
	Title, Notes                  string
	Due                           time.Time
	DueDate                       *Date
	Priority                      int // EventKit's 0 (none), 1 (high) to 9 (low)
	Completed                     bool
	CompletedAt                   time.Time
	Alarm                         time.Time // an absolute alarm to add when saving
	Modified                      time.Time
}

// ErrNoAccess: the user has not granted the app access.
var ErrNoAccess = errors.New("no access to the calendars or reminders")

// ErrAttendeesUnsupported: EventKit cannot invite (its attendees are
// read-only to apps).
var ErrAttendeesUnsupported = errors.New("EventKit cannot invite attendees")

// EventKit is the Backend of macOS's EventKit, on an EKStore.
type EventKit struct {
	store                          EKStore
	loc                            *time.Location
	defaultCalendar, remindersList string
	now                            func() time.Time
}

// NewEventKit returns the EventKit backend on store.
func NewEventKit(store EKStore, cfg Config, now func() time.Time) *EventKit {
	if now == nil {
		now = time.Now
	}
	loc := cfg.Location
	if loc == nil {
		loc = time.Local
	}
	return &EventKit{store: store, loc: loc, defaultCalendar: cfg.DefaultCalendar, remindersList: cfg.RemindersList, now: now}
}

func (k *EventKit) access(reminders bool) error {
	if ok, state := k.store.Access(reminders); !ok {
		what := "calendars"
		if reminders {
			what = "reminders"
		}
		return fmt.Errorf("%w: Carapace may not read your %s (%s): allow it from the Carapace menu, or in System Settings → Privacy & Security → %s", ErrNoAccess, what, state, strings.ToUpper(what[:1])+what[1:])
	}
	return nil
}

// version is an item's version: its last modification, to the nanosecond.
func version(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixNano(), 10)
}

// Calendars implements Backend.
func (k *EventKit) Calendars(ctx context.Context) ([]CalendarInfo, error) {
	var out []CalendarInfo
	for _, rem := range []bool{false, true} {
		if err := k.access(rem); err != nil {
			return nil, err
		}
		comp := "VEVENT"
		if rem {
			comp = "VTODO"
		}
		for _, c := range k.store.Calendars(rem) {
			out = append(out, CalendarInfo{Name: c.Title, Components: []string{comp}})
		}
	}
	return out, nil
}

// find returns the calendars named name ("" for every one), or the
// default (def, else EventKit's) when one is wanted.
func (k *EventKit) find(name, def string, reminders, one bool) ([]EKCalendar, error) {
	if name == "" && one {
		name = def
		if name == "" {
			if c, ok := k.store.DefaultCalendar(reminders); ok {
				return []EKCalendar{c}, nil
			}
		}
	}
	cals := k.store.Calendars(reminders)
	if name == "" {
		return cals, nil
	}
	var names []string
	for _, c := range cals {
		if strings.EqualFold(c.Title, name) {
			return []EKCalendar{c}, nil
		}
		names = append(names, fmt.Sprintf("%q", c.Title))
	}
	return nil, fmt.Errorf("%w: %q (there are: %s)", ErrNoCalendar, name, strings.Join(names, ", "))
}

func (k *EventKit) event(e EKEvent) Event {
	out := Event{ID: e.ID, Version: version(e.Modified), Calendar: e.CalendarTitle, Title: e.Title, Location: e.Location, Notes: e.Notes,
		AllDay: e.AllDay, Recurring: e.Recurring, Attendees: e.Attendees, Organizer: e.Organizer, Status: e.Status}
	if e.AllDay {
		out.StartDate = DateOf(e.Start.In(k.loc))
		// EventKit's all-day end is the last day's end (or the next
		// midnight): the day after the last, exclusive.
		out.EndDate = DateOf(e.End.In(k.loc).Add(-time.Nanosecond)).AddDays(1)
		if !out.EndDate.In(time.UTC).After(out.StartDate.In(time.UTC)) {
			out.EndDate = out.StartDate.AddDays(1)
		}
	} else {
		out.Start, out.End = e.Start, e.End
	}
	return out
}

// ListEvents implements Backend.
func (k *EventKit) ListEvents(ctx context.Context, calendar string, from, to time.Time) ([]Event, error) {
	if err := k.access(false); err != nil {
		return nil, err
	}
	cals, err := k.find(calendar, "", false, false)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(cals))
	for _, c := range cals {
		ids = append(ids, c.ID)
	}
	evs, err := k.store.Events(from, to, ids)
	if err != nil {
		return nil, err
	}
	out := make([]Event, 0, len(evs))
	for _, e := range evs {
		out = append(out, k.event(e))
	}
	sort.SliceStable(out, func(i, j int) bool { return eventStart(out[i], k.loc).Before(eventStart(out[j], k.loc)) })
	return out, nil
}

// allDaySpan is an all-day event's span as EventKit keeps it: from the
// first day's midnight to the last day's end, in the user's zone.
func (k *EventKit) allDaySpan(start, endExcl Date) (time.Time, time.Time) {
	return start.In(k.loc), endExcl.In(k.loc).Add(-time.Second)
}

// CreateEvent implements Backend.
func (k *EventKit) CreateEvent(ctx context.Context, calendar string, ev NewEvent) (Event, error) {
	if len(ev.Attendees) > 0 {
		return Event{}, ErrAttendeesUnsupported
	}
	if err := k.access(false); err != nil {
		return Event{}, err
	}
	cals, err := k.find(calendar, k.defaultCalendar, false, true)
	if err != nil {
		return Event{}, err
	}
	e := EKEvent{CalendarID: cals[0].ID, CalendarTitle: cals[0].Title, Title: ev.Title, Location: ev.Location, Notes: ev.Notes, AllDay: ev.AllDay, Start: ev.Start, End: ev.End}
	if ev.AllDay {
		e.Start, e.End = k.allDaySpan(ev.StartDate, ev.EndDate)
	}
	saved, err := k.store.SaveEvent(e)
	if err != nil {
		return Event{}, err
	}
	return k.event(saved), nil
}

// UpdateEvent implements Backend. EventKit has no conditional save: the
// version is compared just before saving, which narrows the race with
// another device to that instant, and does not close it.
func (k *EventKit) UpdateEvent(ctx context.Context, id string, ch EventChange) (Event, error) {
	if ch.Attendees != nil {
		return Event{}, ErrAttendeesUnsupported
	}
	if err := k.access(false); err != nil {
		return Event{}, err
	}
	e, ok := k.store.Event(id)
	if !ok {
		return Event{}, ErrNotFound
	}
	if ch.Version != "" && ch.Version != version(e.Modified) {
		return Event{}, ErrConflict
	}
	if len(e.Attendees) > 0 && !ch.NotifyAttendees {
		return Event{}, ErrHasAttendees
	}
	if ch.Title != nil {
		e.Title = *ch.Title
	}
	if ch.Location != nil {
		e.Location = *ch.Location
	}
	if ch.Notes != nil {
		e.Notes = *ch.Notes
	}
	cur := k.event(e)
	switch {
	case ch.StartDate != nil || ch.EndDate != nil:
		sd, ed := cur.StartDate, cur.EndDate
		if !cur.AllDay {
			sd, ed = DateOf(cur.Start.In(k.loc)), DateOf(cur.Start.In(k.loc)).AddDays(1)
		}
		days := int(ed.In(time.UTC).Sub(sd.In(time.UTC)).Hours() / 24)
		if ch.StartDate != nil {
			sd, ed = *ch.StartDate, ch.StartDate.AddDays(max(days, 1))
		}
		if ch.EndDate != nil {
			ed = *ch.EndDate
		}
		if !sd.In(time.UTC).Before(ed.In(time.UTC)) {
			return Event{}, fmt.Errorf("%w: the end is not after the start", errBadTimes)
		}
		e.AllDay = true
		e.Start, e.End = k.allDaySpan(sd, ed)
	case ch.Start != nil || ch.End != nil:
		start, end := cur.Start, cur.End
		if cur.AllDay {
			start = cur.StartDate.In(k.loc).Add(9 * time.Hour)
			end = start.Add(time.Hour)
		}
		if ch.Start != nil {
			end = ch.Start.Add(end.Sub(start))
			start = *ch.Start
		}
		if ch.End != nil {
			end = *ch.End
		}
		if end.Before(start) {
			return Event{}, fmt.Errorf("%w: the end is before the start", errBadTimes)
		}
		e.AllDay, e.Start, e.End = false, start, end
	}
	if now, ok := k.store.Event(id); !ok {
		return Event{}, ErrNotFound
	} else if !now.Modified.Equal(e.Modified) {
		return Event{}, ErrConflict // changed while this call ran
	}
	saved, err := k.store.SaveEvent(e)
	if err != nil {
		return Event{}, err
	}
	return k.event(saved), nil
}

// DeleteEvent implements Backend.
func (k *EventKit) DeleteEvent(ctx context.Context, id, ver string) error {
	if err := k.access(false); err != nil {
		return err
	}
	e, ok := k.store.Event(id)
	if !ok {
		return ErrNotFound
	}
	if ver != "" && ver != version(e.Modified) {
		return ErrConflict
	}
	return k.store.RemoveEvent(id)
}

func ekPriority(w string) int {
	switch w {
	case "high":
		return 1
	case "medium":
		return 5
	case "low":
		return 9
	}
	return 0
}

func ekPriorityWord(n int) string {
	switch {
	case n <= 0:
		return ""
	case n <= 4:
		return "high"
	case n == 5:
		return "medium"
	}
	return "low"
}

func (k *EventKit) reminder(r EKReminder) Reminder {
	return Reminder{ID: r.ID, Version: version(r.Modified), List: r.CalendarTitle, Title: r.Title, Notes: r.Notes,
		Due: r.Due, DueDate: r.DueDate, Priority: ekPriorityWord(r.Priority), Completed: r.Completed, CompletedAt: r.CompletedAt}
}

// ListReminders implements Backend.
func (k *EventKit) ListReminders(ctx context.Context, list string, includeCompleted bool) ([]Reminder, error) {
	if err := k.access(true); err != nil {
		return nil, err
	}
	cals, err := k.find(list, k.remindersList, true, true)
	if err != nil {
		return nil, err
	}
	rs, err := k.store.Reminders([]string{cals[0].ID})
	if err != nil {
		return nil, err
	}
	var out []Reminder
	for _, r := range rs {
		if r.Completed && !includeCompleted {
			continue
		}
		out = append(out, k.reminder(r))
	}
	sort.SliceStable(out, func(i, j int) bool { return dueKey(out[i], k.loc).Before(dueKey(out[j], k.loc)) })
	return out, nil
}

// CreateReminder implements Backend: a due reminder also gets an alarm
// (a due day alone: 09:00 that day, in the user's zone).
func (k *EventKit) CreateReminder(ctx context.Context, list string, r NewReminder) (Reminder, error) {
	if err := k.access(true); err != nil {
		return Reminder{}, err
	}
	cals, err := k.find(list, k.remindersList, true, true)
	if err != nil {
		return Reminder{}, err
	}
	ek := EKReminder{CalendarID: cals[0].ID, CalendarTitle: cals[0].Title, Title: r.Title, Notes: r.Notes, Priority: ekPriority(r.Priority), Due: r.Due, DueDate: r.DueDate}
	switch {
	case !r.Due.IsZero():
		ek.Alarm = r.Due
	case r.DueDate != nil:
		ek.Alarm = r.DueDate.In(k.loc).Add(9 * time.Hour)
	}
	saved, err := k.store.SaveReminder(ek)
	if err != nil {
		return Reminder{}, err
	}
	return k.reminder(saved), nil
}

// CompleteReminder implements Backend.
func (k *EventKit) CompleteReminder(ctx context.Context, id string) (Reminder, error) {
	if err := k.access(true); err != nil {
		return Reminder{}, err
	}
	r, ok := k.store.Reminder(id)
	if !ok {
		return Reminder{}, ErrNotFound
	}
	r.Completed, r.CompletedAt, r.Alarm = true, k.now(), time.Time{}
	saved, err := k.store.SaveReminder(r)
	if err != nil {
		return Reminder{}, err
	}
	return k.reminder(saved), nil
}
