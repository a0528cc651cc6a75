package calendar

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
)

// memEK is an in-memory EKStore: what EventKit keeps, as the EventKit
// backend sees it. Its clock ticks once per save, so that versions change.
type memEK struct {
	granted   bool
	cals      []EKCalendar
	rcals     []EKCalendar
	events    map[string]EKEvent
	reminders map[string]EKReminder
	tick      time.Time
	n         int
	// beforeSave, if set, runs inside SaveEvent's caller's window: another
	// device's change between the backend's check and its save.
	racer func()
}

func newMemEK() *memEK {
	return &memEK{granted: true, cals: []EKCalendar{{"c1", "Home"}, {"c2", "Work"}}, rcals: []EKCalendar{{"r1", "Reminders"}},
		events: map[string]EKEvent{}, reminders: map[string]EKReminder{}, tick: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (m *memEK) Access(bool) (bool, string) {
	if m.granted {
		return true, "full access"
	}
	return false, "denied"
}

func (m *memEK) Calendars(rem bool) []EKCalendar {
	if rem {
		return m.rcals
	}
	return m.cals
}

func (m *memEK) DefaultCalendar(rem bool) (EKCalendar, bool) { return m.Calendars(rem)[0], true }

func (m *memEK) Events(from, to time.Time, ids []string) ([]EKEvent, error) {
	var out []EKEvent
	for _, e := range m.events {
		in := false
		for _, id := range ids {
			in = in || id == e.CalendarID
		}
		if in && e.Start.Before(to) && e.End.After(from) {
			out = append(out, e)
		}
	}
	return out, nil
}

func (m *memEK) Event(id string) (EKEvent, bool) {
	if m.racer != nil {
		r := m.racer
		m.racer = nil
		defer r()
	}
	e, ok := m.events[id]
	return e, ok
}

func (m *memEK) save() time.Time { m.tick = m.tick.Add(time.Second); return m.tick }

func (m *memEK) SaveEvent(e EKEvent) (EKEvent, error) {
	if e.ID == "" {
		m.n++
		e.ID = fmt.Sprintf("ev%d", m.n)
	}
	e.Modified = m.save()
	m.events[e.ID] = e
	return e, nil
}

func (m *memEK) RemoveEvent(id string) error { delete(m.events, id); return nil }

func (m *memEK) Reminders(ids []string) ([]EKReminder, error) {
	var out []EKReminder
	for _, r := range m.reminders {
		out = append(out, r)
	}
	return out, nil
}

func (m *memEK) Reminder(id string) (EKReminder, bool) { r, ok := m.reminders[id]; return r, ok }

func (m *memEK) SaveReminder(r EKReminder) (EKReminder, error) {
	if r.ID == "" {
		m.n++
		r.ID = fmt.Sprintf("rm%d", m.n)
	}
	r.Modified = m.save()
	m.reminders[r.ID] = r
	return r, nil
}

// The tools on the EventKit backend, through the EKStore interface (the
// Objective-C calls themselves run only on a Mac): times in the user's
// zone, all-day days, versions, attendees refused, access refused.
func TestEventKitTools(t *testing.T) {
	st := newMemEK()
	loc := paris(t)
	h := NewWithBackend(NewEventKit(st, Config{Location: loc, DefaultCalendar: "Work"}, nil), Config{Location: loc})
	call := func(tool string, args map[string]any) (map[string]any, error) {
		return h.Invoke(context.Background(), &plugin.Request{Tool: tool, Arguments: args, Group: "main"})
	}
	out, err := call("calendar_create", map[string]any{"title": "Dentist", "start": "2026-10-27T14:30", "duration": "45m"})
	if err != nil {
		t.Fatal(err)
	}
	ev := out["event"].(map[string]any)
	if ev["calendar"] != "Work" || ev["start"] != "2026-10-27T14:30:00+01:00" || ev["end"] != "2026-10-27T15:15:00+01:00" {
		t.Fatalf("created %v", ev)
	}
	if _, err := call("calendar_create", map[string]any{"title": "Holiday", "start": "2026-10-28", "end": "2026-10-29"}); err != nil {
		t.Fatal(err)
	}
	out, err = call("calendar_list", map[string]any{"from": "2026-10-26", "to": "2026-11-01"})
	if err != nil {
		t.Fatal(err)
	}
	evs := events(t, out)
	if len(evs) != 2 || evs[1]["start_date"] != "2026-10-28" || evs[1]["end_date"] != "2026-10-29" || evs[1]["all_day"] != true {
		t.Fatalf("list %v", evs)
	}
	id, v1 := evs[0]["id"].(string), evs[0]["version"].(string)

	// A version that is no longer the event's: CONFLICT, nothing written;
	// another device's change between the check and the save: CONFLICT
	// too; the current version (the control) goes through.
	if _, err := call("calendar_update", map[string]any{"id": id, "notes": "from the phone"}); err != nil {
		t.Fatal(err)
	}
	if _, err := call("calendar_update", map[string]any{"id": id, "version": v1, "title": "lost"}); toolCode(err) != "CONFLICT" {
		t.Fatalf("stale version: %v", err)
	}
	st.racer = func() { e := st.events[id]; e.Notes = "raced"; st.SaveEvent(e) }
	if _, err := call("calendar_update", map[string]any{"id": id, "title": "lost"}); toolCode(err) != "CONFLICT" {
		t.Fatalf("a change while the call ran: %v", err)
	}
	if e := st.events[id]; e.Title != "Dentist" || e.Notes != "raced" {
		t.Fatalf("after the refused updates: %+v", e)
	}
	out, err = call("calendar_update", map[string]any{"id": id, "version": version(st.events[id].Modified), "start": "2026-10-27T16:00"})
	if err != nil {
		t.Fatal(err)
	}
	if e := out["event"].(map[string]any); e["start"] != "2026-10-27T16:00:00+01:00" || e["end"] != "2026-10-27T16:45:00+01:00" {
		t.Fatalf("moved %v", e)
	}

	if _, err := call("calendar_create", map[string]any{"title": "Lunch", "start": "2026-10-29T12:00", "duration": "1h", "attendees": []any{"bob@example.com"}}); toolCode(err) != "ATTENDEES_UNSUPPORTED" {
		t.Fatalf("attendees on EventKit: %v", err)
	}

	// Reminders: a due one carries an alarm at its due time.
	out, err = call("reminder_create", map[string]any{"title": "Call the plumber", "due": "2026-10-27", "priority": "high"})
	if err != nil {
		t.Fatal(err)
	}
	r := out["reminder"].(map[string]any)
	stored := st.reminders[r["id"].(string)]
	if r["due"] != "2026-10-27" || r["priority"] != "high" || !stored.Alarm.Equal(time.Date(2026, 10, 27, 9, 0, 0, 0, loc)) {
		t.Fatalf("reminder %v, alarm %v", r, stored.Alarm)
	}
	if _, err := call("reminder_complete", map[string]any{"id": r["id"]}); err != nil {
		t.Fatal(err)
	}
	out, _ = call("reminder_list", map[string]any{})
	if out["count"] != 0 {
		t.Fatalf("open reminders after completing the only one: %v", out)
	}
	out, _ = call("reminder_list", map[string]any{"include_completed": true})
	if out["count"] != 1 {
		t.Fatalf("all reminders: %v", out)
	}

	// Without access: said, with the way forward.
	st.granted = false
	if _, err := call("calendar_list", map[string]any{"from": "2026-10-26", "to": "2026-11-01"}); toolCode(err) != "NO_ACCESS" || !strings.Contains(err.Error(), "Privacy & Security") {
		t.Fatalf("without access: %v", err)
	}
}
