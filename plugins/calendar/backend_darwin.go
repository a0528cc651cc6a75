//go:build darwin && cgo

package calendar

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/progrium/darwinkit/objc"
)

// EventKit through the Objective-C runtime (darwinkit v0.5.0 has no
// generated EventKit binding): one EKEventStore for the process. This
// file is type-checked on Linux (make test: cmd/darwincheck) and runs
// only on a Mac; docs/CALENDAR.md says what ran where.

// EventKit's constants (EventKit/EKTypes.h).
const (
	ekEntityEvent    uint = 0
	ekEntityReminder uint = 1

	ekSpanFutureEvents int = 1 // a change to a series' first occurrence: the whole series

	ekAuthNotDetermined = 0
	ekAuthRestricted    = 1
	ekAuthDenied        = 2
	ekAuthFullAccess    = 3 // EKAuthorizationStatusFullAccess (== Authorized before macOS 14)
	ekAuthWriteOnly     = 4

	nsUndefinedDateComponent = math.MaxInt64
)

// ekStore is the EKStore of the Mac's EventKit.
type ekStore struct {
	mu    sync.Mutex // EventKit's store is used from one call at a time
	store objc.Object
	loc   *time.Location
}

// NewEventKitStore opens the Mac's EventKit store. It does not ask for
// access: the app does (its menu), never a tool call.
func NewEventKitStore(cfg Config) (Backend, error) {
	cls := objc.GetClass("EKEventStore")
	if cls.Ptr() == nil {
		return nil, errors.New("EventKit is not available (EKEventStore not found)")
	}
	var store objc.Object
	objc.WithAutoreleasePool(func() {
		store = objc.Call[objc.Object](objc.Call[objc.Object](cls, objc.Sel("alloc")), objc.Sel("init"))
	})
	if store.IsNil() {
		return nil, errors.New("EventKit: could not open the event store")
	}
	loc := cfg.Location
	if loc == nil {
		loc = time.Local
	}
	return NewEventKit(&ekStore{store: store, loc: loc}, cfg, nil), nil
}

func sel(name string) objc.Selector { return objc.Sel(name) }

func nsDate(t time.Time) objc.Object {
	return objc.Call[objc.Object](objc.GetClass("NSDate"), sel("dateWithTimeIntervalSince1970:"), float64(t.UnixNano())/1e9)
}

func goTime(d objc.Object) time.Time {
	if d.IsNil() {
		return time.Time{}
	}
	secs := objc.Call[float64](d, sel("timeIntervalSince1970"))
	whole, frac := math.Modf(secs)
	return time.Unix(int64(whole), int64(frac*1e9))
}

func str(o objc.Object, name string) string {
	if o.IsNil() {
		return ""
	}
	return objc.Call[string](o, sel(name))
}

func objects(arr objc.Object) []objc.Object {
	if arr.IsNil() {
		return nil
	}
	n := objc.Call[uint](arr, sel("count"))
	out := make([]objc.Object, 0, n)
	for i := uint(0); i < n; i++ {
		out = append(out, objc.Call[objc.Object](arr, sel("objectAtIndex:"), i))
	}
	return out
}

func entity(reminders bool) uint {
	if reminders {
		return ekEntityReminder
	}
	return ekEntityEvent
}

// Access implements EKStore.
func (s *ekStore) Access(reminders bool) (bool, string) {
	st := objc.Call[int](objc.GetClass("EKEventStore"), sel("authorizationStatusForEntityType:"), entity(reminders))
	switch st {
	case ekAuthFullAccess:
		return true, "full access"
	case ekAuthNotDetermined:
		return false, "not asked yet"
	case ekAuthRestricted:
		return false, "restricted on this Mac"
	case ekAuthDenied:
		return false, "denied"
	case ekAuthWriteOnly:
		return false, "add-only access"
	}
	return false, fmt.Sprintf("authorization status %d", st)
}

func (s *ekStore) calendar(c objc.Object) EKCalendar {
	return EKCalendar{ID: str(c, "calendarIdentifier"), Title: str(c, "title")}
}

// Calendars implements EKStore.
func (s *ekStore) Calendars(reminders bool) []EKCalendar {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []EKCalendar
	objc.WithAutoreleasePool(func() {
		for _, c := range objects(objc.Call[objc.Object](s.store, sel("calendarsForEntityType:"), entity(reminders))) {
			out = append(out, s.calendar(c))
		}
	})
	return out
}

// DefaultCalendar implements EKStore.
func (s *ekStore) DefaultCalendar(reminders bool) (c EKCalendar, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := "defaultCalendarForNewEvents"
	if reminders {
		name = "defaultCalendarForNewReminders"
	}
	objc.WithAutoreleasePool(func() {
		if o := objc.Call[objc.Object](s.store, sel(name)); !o.IsNil() {
			c, ok = s.calendar(o), true
		}
	})
	return c, ok
}

// calendarObjects are the EKCalendars of ids.
func (s *ekStore) calendarObjects(ids []string) []objc.Object {
	var out []objc.Object
	for _, id := range ids {
		if c := objc.Call[objc.Object](s.store, sel("calendarWithIdentifier:"), id); !c.IsNil() {
			out = append(out, c)
		}
	}
	return out
}

func (s *ekStore) event(e objc.Object) EKEvent {
	cal := objc.Call[objc.Object](e, sel("calendar"))
	ev := EKEvent{
		ID: str(e, "eventIdentifier"), CalendarID: str(cal, "calendarIdentifier"), CalendarTitle: str(cal, "title"),
		Title: str(e, "title"), Location: str(e, "location"), Notes: str(e, "notes"),
		Start: goTime(objc.Call[objc.Object](e, sel("startDate"))), End: goTime(objc.Call[objc.Object](e, sel("endDate"))),
		AllDay: objc.Call[bool](e, sel("isAllDay")), Recurring: objc.Call[bool](e, sel("hasRecurrenceRules")),
		Modified: goTime(objc.Call[objc.Object](e, sel("lastModifiedDate"))),
	}
	for _, p := range objects(objc.Call[objc.Object](e, sel("attendees"))) {
		ev.Attendees = append(ev.Attendees, participant(p))
	}
	if o := objc.Call[objc.Object](e, sel("organizer")); !o.IsNil() {
		ev.Organizer = participant(o)
	}
	switch objc.Call[int](e, sel("status")) {
	case 1:
		ev.Status = "CONFIRMED"
	case 2:
		ev.Status = "TENTATIVE"
	case 3:
		ev.Status = "CANCELLED"
	}
	return ev
}

// participant is an EKParticipant as "Name <address>".
func participant(p objc.Object) string {
	addr := str(objc.Call[objc.Object](p, sel("URL")), "resourceSpecifier")
	if name := str(p, "name"); name != "" {
		return name + " <" + addr + ">"
	}
	return addr
}

// Events implements EKStore.
func (s *ekStore) Events(from, to time.Time, ids []string) (out []EKEvent, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	objc.WithAutoreleasePool(func() {
		cals := s.calendarObjects(ids)
		if len(cals) == 0 {
			return
		}
		pred := objc.Call[objc.Object](s.store, sel("predicateForEventsWithStartDate:endDate:calendars:"), nsDate(from), nsDate(to), cals)
		for _, e := range objects(objc.Call[objc.Object](s.store, sel("eventsMatchingPredicate:"), pred)) {
			out = append(out, s.event(e))
		}
	})
	return out, nil
}

// Event implements EKStore.
func (s *ekStore) Event(id string) (ev EKEvent, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	objc.WithAutoreleasePool(func() {
		if e := objc.Call[objc.Object](s.store, sel("eventWithIdentifier:"), id); !e.IsNil() {
			ev, ok = s.event(e), true
		}
	})
	return ev, ok
}

// SaveEvent implements EKStore.
func (s *ekStore) SaveEvent(ev EKEvent) (saved EKEvent, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	objc.WithAutoreleasePool(func() {
		var e objc.Object
		if ev.ID == "" {
			e = objc.Call[objc.Object](objc.GetClass("EKEvent"), sel("eventWithEventStore:"), s.store)
			cals := s.calendarObjects([]string{ev.CalendarID})
			if len(cals) == 0 {
				err = ErrNoCalendar
				return
			}
			objc.Call[objc.Void](e, sel("setCalendar:"), cals[0])
		} else if e = objc.Call[objc.Object](s.store, sel("eventWithIdentifier:"), ev.ID); e.IsNil() {
			err = ErrNotFound
			return
		}
		objc.Call[objc.Void](e, sel("setTitle:"), ev.Title)
		objc.Call[objc.Void](e, sel("setLocation:"), ev.Location)
		objc.Call[objc.Void](e, sel("setNotes:"), ev.Notes)
		objc.Call[objc.Void](e, sel("setAllDay:"), ev.AllDay)
		objc.Call[objc.Void](e, sel("setStartDate:"), nsDate(ev.Start))
		objc.Call[objc.Void](e, sel("setEndDate:"), nsDate(ev.End))
		if !objc.Call[bool](s.store, sel("saveEvent:span:commit:error:"), e, ekSpanFutureEvents, true, nil) {
			err = errors.New("EventKit refused to save the event")
			return
		}
		saved = s.event(e)
	})
	return saved, err
}

// RemoveEvent implements EKStore.
func (s *ekStore) RemoveEvent(id string) (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	objc.WithAutoreleasePool(func() {
		e := objc.Call[objc.Object](s.store, sel("eventWithIdentifier:"), id)
		if e.IsNil() {
			err = ErrNotFound
			return
		}
		if !objc.Call[bool](s.store, sel("removeEvent:span:commit:error:"), e, ekSpanFutureEvents, true, nil) {
			err = errors.New("EventKit refused to delete the event")
		}
	})
	return err
}

func (s *ekStore) reminder(r objc.Object) EKReminder {
	cal := objc.Call[objc.Object](r, sel("calendar"))
	rem := EKReminder{
		ID: str(r, "calendarItemIdentifier"), CalendarID: str(cal, "calendarIdentifier"), CalendarTitle: str(cal, "title"),
		Title: str(r, "title"), Notes: str(r, "notes"), Priority: objc.Call[int](r, sel("priority")),
		Completed: objc.Call[bool](r, sel("isCompleted")), CompletedAt: goTime(objc.Call[objc.Object](r, sel("completionDate"))),
		Modified: goTime(objc.Call[objc.Object](r, sel("lastModifiedDate"))),
	}
	if dc := objc.Call[objc.Object](r, sel("dueDateComponents")); !dc.IsNil() {
		y, m, d := objc.Call[int](dc, sel("year")), objc.Call[int](dc, sel("month")), objc.Call[int](dc, sel("day"))
		h, mi := objc.Call[int](dc, sel("hour")), objc.Call[int](dc, sel("minute"))
		switch {
		case y == nsUndefinedDateComponent || m == nsUndefinedDateComponent || d == nsUndefinedDateComponent:
		case h == nsUndefinedDateComponent:
			day := Date{y, time.Month(m), d}
			rem.DueDate = &day
		default:
			if mi == nsUndefinedDateComponent {
				mi = 0
			}
			rem.Due = time.Date(y, time.Month(m), d, h, mi, 0, 0, s.loc)
		}
	}
	return rem
}

// fetchTimeout bounds EventKit's asynchronous fetch of reminders.
const fetchTimeout = 20 * time.Second

// Reminders implements EKStore.
func (s *ekStore) Reminders(ids []string) (out []EKReminder, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	done := make(chan []EKReminder, 1)
	objc.WithAutoreleasePool(func() {
		cals := s.calendarObjects(ids)
		if len(cals) == 0 {
			done <- nil
			return
		}
		pred := objc.Call[objc.Object](s.store, sel("predicateForRemindersInCalendars:"), cals)
		block := objc.CreateMallocBlock(func(arr objc.Object) {
			var rs []EKReminder
			for _, r := range objects(arr) {
				rs = append(rs, s.reminder(r))
			}
			done <- rs
		})
		objc.Call[objc.Void](s.store, sel("fetchRemindersMatchingPredicate:completion:"), pred, block)
	})
	select {
	case out = <-done:
		return out, nil
	case <-time.After(fetchTimeout):
		return nil, errors.New("EventKit did not answer the reminders fetch within 20 s")
	}
}

// Reminder implements EKStore.
func (s *ekStore) Reminder(id string) (rem EKReminder, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	objc.WithAutoreleasePool(func() {
		r := objc.Call[objc.Object](s.store, sel("calendarItemWithIdentifier:"), id)
		if !r.IsNil() && r.IsKindOfClass(objc.GetClass("EKReminder")) {
			rem, ok = s.reminder(r), true
		}
	})
	return rem, ok
}

// SaveReminder implements EKStore.
func (s *ekStore) SaveReminder(rem EKReminder) (saved EKReminder, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	objc.WithAutoreleasePool(func() {
		var r objc.Object
		if rem.ID == "" {
			r = objc.Call[objc.Object](objc.GetClass("EKReminder"), sel("reminderWithEventStore:"), s.store)
			cals := s.calendarObjects([]string{rem.CalendarID})
			if len(cals) == 0 {
				err = ErrNoCalendar
				return
			}
			objc.Call[objc.Void](r, sel("setCalendar:"), cals[0])
		} else if r = objc.Call[objc.Object](s.store, sel("calendarItemWithIdentifier:"), rem.ID); r.IsNil() {
			err = ErrNotFound
			return
		}
		objc.Call[objc.Void](r, sel("setTitle:"), rem.Title)
		objc.Call[objc.Void](r, sel("setNotes:"), rem.Notes)
		objc.Call[objc.Void](r, sel("setPriority:"), rem.Priority)
		if rem.ID == "" && (!rem.Due.IsZero() || rem.DueDate != nil) {
			dc := objc.Call[objc.Object](objc.Call[objc.Object](objc.GetClass("NSDateComponents"), sel("alloc")), sel("init"))
			if rem.DueDate != nil {
				objc.Call[objc.Void](dc, sel("setYear:"), rem.DueDate.Year)
				objc.Call[objc.Void](dc, sel("setMonth:"), int(rem.DueDate.Month))
				objc.Call[objc.Void](dc, sel("setDay:"), rem.DueDate.Day)
			} else {
				t := rem.Due.In(s.loc)
				objc.Call[objc.Void](dc, sel("setYear:"), t.Year())
				objc.Call[objc.Void](dc, sel("setMonth:"), int(t.Month()))
				objc.Call[objc.Void](dc, sel("setDay:"), t.Day())
				objc.Call[objc.Void](dc, sel("setHour:"), t.Hour())
				objc.Call[objc.Void](dc, sel("setMinute:"), t.Minute())
			}
			objc.Call[objc.Void](r, sel("setDueDateComponents:"), dc)
			dc.Release()
		}
		if !rem.Alarm.IsZero() {
			alarm := objc.Call[objc.Object](objc.GetClass("EKAlarm"), sel("alarmWithAbsoluteDate:"), nsDate(rem.Alarm))
			objc.Call[objc.Void](r, sel("addAlarm:"), alarm)
		}
		objc.Call[objc.Void](r, sel("setCompleted:"), rem.Completed)
		if !objc.Call[bool](s.store, sel("saveReminder:commit:error:"), r, true, nil) {
			err = errors.New("EventKit refused to save the reminder")
			return
		}
		saved = s.reminder(r)
	})
	return saved, err
}
