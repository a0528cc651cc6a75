package calendar

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
)

// Bounds of what one call returns.
const (
	maxRangeDays = 366
	maxEvents    = 500
	maxText      = 2000
)

// args reads a call's arguments (already valid against the schema).
type args struct {
	m   map[string]any
	loc *time.Location
}

func (a args) str(k string) string {
	v, _ := a.m[k].(string)
	return strings.TrimSpace(v)
}

func (a args) has(k string) bool {
	_, ok := a.m[k]
	return ok
}

func (a args) boolean(k string) bool {
	v, _ := a.m[k].(bool)
	return v
}

func (a args) strs(k string) []string {
	l, _ := a.m[k].([]any)
	out := make([]string, 0, len(l))
	for _, v := range l {
		if s, ok := v.(string); ok && strings.TrimSpace(s) != "" {
			out = append(out, strings.TrimSpace(s))
		}
	}
	return out
}

func badTime(field, msg string) *plugin.ToolError {
	return &plugin.ToolError{Code: "BAD_TIME", Message: "BAD_TIME: " + field + ": " + msg, Field: field}
}

// when reads a time argument: a date (2026-10-26), a time with an offset
// (RFC 3339: 2026-10-26T09:00:00+01:00, or Z), or a local time in the
// user's zone (2026-10-26T09:00, seconds optional).
func (a args) when(k string) (t time.Time, d *Date, err error) {
	s := a.str(k)
	if dd, err := time.ParseInLocation(time.DateOnly, s, time.UTC); err == nil {
		day := DateOf(dd)
		return time.Time{}, &day, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04"} {
		if t, err := time.ParseInLocation(layout, s, a.loc); err == nil {
			return t, nil, nil
		}
	}
	return time.Time{}, nil, badTime(k, fmt.Sprintf("%q is not a date (2026-10-26) or a time (2026-10-26T09:00, in the user's zone %s, or with an offset: 2026-10-26T09:00:00+01:00)", s, a.loc))
}

func clip(s string) string {
	if len(s) <= maxText {
		return s
	}
	cut := maxText
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "… [cut]"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// eventJSON is an event as the agent reads it: times in the user's zone;
// an all-day event as dates, end_date its last day (inclusive).
func eventJSON(e Event, loc *time.Location) map[string]any {
	m := map[string]any{
		"id": e.ID, "calendar": e.Calendar, "title": clip(e.Title), "all_day": e.AllDay,
	}
	if e.Version != "" {
		m["version"] = e.Version
	}
	if e.AllDay {
		m["start_date"] = e.StartDate.String()
		last := e.EndDate.AddDays(-1)
		if last.In(time.UTC).Before(e.StartDate.In(time.UTC)) {
			last = e.StartDate
		}
		m["end_date"] = last.String()
	} else {
		m["start"] = e.Start.In(loc).Format(time.RFC3339)
		m["end"] = e.End.In(loc).Format(time.RFC3339)
	}
	if e.Recurring {
		m["recurring"] = true
	}
	if e.Location != "" {
		m["location"] = clip(e.Location)
	}
	if e.Notes != "" {
		m["notes"] = clip(e.Notes)
	}
	if len(e.Attendees) > 0 {
		l := make([]any, 0, len(e.Attendees))
		for _, x := range e.Attendees {
			l = append(l, clip(x))
		}
		m["attendees"] = l
	}
	if e.Organizer != "" {
		m["organizer"] = clip(e.Organizer)
	}
	if e.Status != "" {
		m["status"] = e.Status
	}
	return m
}

func (h *Handler) list(ctx context.Context, a args) (map[string]any, error) {
	loc := h.cfg.Location
	from, fromDay, err := a.when("from")
	if err != nil {
		return nil, err
	}
	to, toDay, err := a.when("to")
	if err != nil {
		return nil, err
	}
	if fromDay != nil {
		from = fromDay.In(loc)
	}
	if toDay != nil { // a date: through that day
		to = toDay.AddDays(1).In(loc)
	}
	if !to.After(from) {
		return nil, badTime("to", "the range is empty: to must be after from")
	}
	if to.Sub(from) > maxRangeDays*24*time.Hour {
		return nil, badTime("to", fmt.Sprintf("the range is longer than %d days: ask for less at a time", maxRangeDays))
	}
	evs, err := h.backend.ListEvents(ctx, a.str("calendar"), from, to)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"time_zone": loc.String(), "from": from.In(loc).Format(time.RFC3339), "to": to.In(loc).Format(time.RFC3339)}
	if len(evs) > maxEvents {
		out["note"] = fmt.Sprintf("only the first %d of %d events: ask for a shorter range", maxEvents, len(evs))
		evs = evs[:maxEvents]
	}
	l := make([]any, 0, len(evs))
	for _, e := range evs {
		l = append(l, eventJSON(e, loc))
	}
	out["events"] = l
	out["count"] = len(l)
	return out, nil
}

// span reads start and end | duration | all_day into a NewEvent's times.
func (a args) span(ev *NewEvent) error {
	start, startDay, err := a.when("start")
	if err != nil {
		return err
	}
	allDay := startDay != nil
	if a.has("all_day") {
		if a.boolean("all_day") && startDay == nil {
			d := DateOf(start.In(a.loc))
			startDay = &d
		}
		allDay = a.boolean("all_day")
		if !allDay && startDay != nil {
			return badTime("start", "all_day is false but start is a date: give a time (2026-10-26T09:00)")
		}
	}
	if allDay {
		ev.AllDay, ev.StartDate, ev.EndDate = true, *startDay, startDay.AddDays(1)
		switch {
		case a.has("end"):
			end, endDay, err := a.when("end")
			if err != nil {
				return err
			}
			if endDay == nil {
				d := DateOf(end.In(a.loc))
				endDay = &d
			}
			if endDay.In(time.UTC).Before(startDay.In(time.UTC)) {
				return badTime("end", "the last day is before the first")
			}
			ev.EndDate = endDay.AddDays(1) // end is the last day, inclusive
		case a.has("duration"):
			d, err := duration(a.str("duration"))
			if err != nil {
				return err
			}
			days := int((d + 24*time.Hour - 1) / (24 * time.Hour))
			ev.EndDate = startDay.AddDays(max(days, 1))
		}
		return nil
	}
	ev.Start = start
	switch {
	case a.has("end"):
		end, endDay, err := a.when("end")
		if err != nil {
			return err
		}
		if endDay != nil {
			return badTime("end", "start is a time, end a date: give both as times, or set all_day")
		}
		if end.Before(start) {
			return badTime("end", "the end is before the start")
		}
		ev.End = end
	case a.has("duration"):
		d, err := duration(a.str("duration"))
		if err != nil {
			return err
		}
		ev.End = start.Add(d)
	default:
		return badTime("end", "give end or duration (e.g. \"1h\", \"45m\")")
	}
	return nil
}

func duration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 || d > 31*24*time.Hour {
		return 0, badTime("duration", fmt.Sprintf("%q is not a duration such as \"1h\", \"1h30m\" or \"45m\" (at most 31 days)", s))
	}
	return d, nil
}

func (h *Handler) create(ctx context.Context, a args) (map[string]any, error) {
	if a.has("end") && a.has("duration") {
		return nil, badTime("duration", "give end or duration, not both")
	}
	ev := NewEvent{Title: a.str("title"), Location: a.str("location"), Notes: a.str("notes"), Attendees: a.strs("attendees")}
	if err := a.span(&ev); err != nil {
		return nil, err
	}
	if len(ev.Attendees) > 0 && strings.Contains(h.cfg.Username, "@") {
		ev.Organizer = h.cfg.Username
	}
	e, err := h.backend.CreateEvent(ctx, a.str("calendar"), ev)
	if err != nil {
		return nil, err
	}
	return map[string]any{"created": true, "event": eventJSON(e, h.cfg.Location)}, nil
}

func (h *Handler) update(ctx context.Context, a args) (map[string]any, error) {
	ch := EventChange{Version: a.str("version"), NotifyAttendees: a.boolean("notify_attendees")}
	for k, p := range map[string]**string{"title": &ch.Title, "location": &ch.Location, "notes": &ch.Notes} {
		if a.has(k) {
			v := a.str(k)
			*p = &v
		}
	}
	if a.has("attendees") {
		l := a.strs("attendees")
		ch.Attendees = &l
		ch.NotifyAttendees = true // naming attendees is asking to notify them (and high risk)
	}
	for _, k := range []string{"start", "end"} {
		if !a.has(k) {
			continue
		}
		t, d, err := a.when(k)
		if err != nil {
			return nil, err
		}
		switch {
		case d != nil && k == "start":
			ch.StartDate = d
		case d != nil:
			excl := d.AddDays(1) // the last day, inclusive
			ch.EndDate = &excl
		case k == "start":
			ch.Start = &t
		default:
			ch.End = &t
		}
	}
	if (ch.StartDate != nil || ch.EndDate != nil) && (ch.Start != nil || ch.End != nil) {
		return nil, badTime("end", "start and end are both dates (all day) or both times")
	}
	e, err := h.backend.UpdateEvent(ctx, a.str("id"), ch)
	if err != nil {
		return nil, err
	}
	return map[string]any{"updated": true, "event": eventJSON(e, h.cfg.Location)}, nil
}

func (h *Handler) delete(ctx context.Context, a args) (map[string]any, error) {
	if err := h.backend.DeleteEvent(ctx, a.str("id"), a.str("version")); err != nil {
		return nil, err
	}
	return map[string]any{"deleted": true, "id": a.str("id")}, nil
}

func reminderJSON(r Reminder, loc *time.Location) map[string]any {
	m := map[string]any{"id": r.ID, "list": r.List, "title": clip(r.Title), "completed": r.Completed}
	if r.Notes != "" {
		m["notes"] = clip(r.Notes)
	}
	switch {
	case !r.Due.IsZero():
		m["due"] = r.Due.In(loc).Format(time.RFC3339)
	case r.DueDate != nil:
		m["due"] = r.DueDate.String()
	}
	if r.Priority != "" {
		m["priority"] = r.Priority
	}
	if !r.CompletedAt.IsZero() {
		m["completed_at"] = r.CompletedAt.In(loc).Format(time.RFC3339)
	}
	return m
}

func (h *Handler) reminderList(ctx context.Context, a args) (map[string]any, error) {
	rs, err := h.backend.ListReminders(ctx, a.str("list"), a.boolean("include_completed"))
	if err != nil {
		return nil, err
	}
	out := map[string]any{"time_zone": h.cfg.Location.String()}
	if len(rs) > maxEvents {
		out["note"] = fmt.Sprintf("only the first %d of %d reminders", maxEvents, len(rs))
		rs = rs[:maxEvents]
	}
	l := make([]any, 0, len(rs))
	for _, r := range rs {
		l = append(l, reminderJSON(r, h.cfg.Location))
	}
	out["reminders"] = l
	out["count"] = len(l)
	return out, nil
}

func (h *Handler) reminderCreate(ctx context.Context, a args) (map[string]any, error) {
	r := NewReminder{Title: a.str("title"), Notes: a.str("notes"), Priority: a.str("priority")}
	if r.Priority == "none" {
		r.Priority = ""
	}
	if a.has("due") {
		t, d, err := a.when("due")
		if err != nil {
			return nil, err
		}
		r.Due, r.DueDate = t, d
	}
	rem, err := h.backend.CreateReminder(ctx, a.str("list"), r)
	if err != nil {
		return nil, err
	}
	return map[string]any{"created": true, "reminder": reminderJSON(rem, h.cfg.Location)}, nil
}

func (h *Handler) reminderComplete(ctx context.Context, a args) (map[string]any, error) {
	rem, err := h.backend.CompleteReminder(ctx, a.str("id"))
	if err != nil {
		return nil, err
	}
	return map[string]any{"completed": true, "reminder": reminderJSON(rem, h.cfg.Location)}, nil
}
