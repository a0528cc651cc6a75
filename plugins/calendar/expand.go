package calendar

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/emersion/go-ical"
	"github.com/teambition/rrule-go"
)

// occurrence is one instance of a VEVENT: the component that describes it
// (the master, or the override of that instance) and its span. A timed
// instance has start and end instants; an all-day one has dates, kept as
// midnights in UTC (floating days).
type occurrence struct {
	comp       *ical.Component
	start, end time.Time
	allDay     bool
	recurring  bool
}

// maxOccurrences bounds the instances one object may yield in one range: a
// stranger's invitation with FREQ=SECONDLY cannot make the plugin spin.
const maxOccurrences = 5000

// maxWalk bounds the instances of one series walked from its start to
// the end of the range.
const maxWalk = 200000

// expand returns the instances of the VEVENTs of one calendar object (one
// UID: a master and its overrides) that overlap [from, to), sorted by
// start. Floating times and an unknown TZID are read in loc; all-day
// events overlap the range when their days, in loc, do.
func expand(cal *ical.Calendar, loc *time.Location, from, to time.Time) ([]occurrence, error) {
	var master *ical.Component
	var overrides []*ical.Component
	for _, c := range cal.Children {
		if c.Name != ical.CompEvent {
			continue
		}
		if c.Props.Get(ical.PropRecurrenceID) != nil {
			overrides = append(overrides, c)
		} else if master == nil {
			master = c
		}
	}
	var out []occurrence
	overlaps := func(o occurrence) bool {
		s, e := o.start, o.end
		if o.allDay {
			s, e = DateOf(s).In(loc), DateOf(e).In(loc)
		}
		if !e.After(s) { // an instant: in the range when it starts in it
			return !s.Before(from) && s.Before(to)
		}
		return s.Before(to) && e.After(from)
	}
	// The instances the overrides replace, by their RECURRENCE-ID.
	replaced := map[int64]bool{}
	for _, c := range overrides {
		rid, _, err := dateTime(c.Props.Get(ical.PropRecurrenceID), loc)
		if err != nil {
			return nil, fmt.Errorf("RECURRENCE-ID: %w", err)
		}
		replaced[rid.Unix()] = true
		o, err := single(c, loc)
		if err != nil {
			return nil, err
		}
		o.recurring = true
		if o.comp.Props.Get(ical.PropStatus) != nil && strings.EqualFold(o.comp.Props.Get(ical.PropStatus).Value, "CANCELLED") {
			continue // a cancelled instance: gone
		}
		if overlaps(o) {
			out = append(out, o)
		}
	}
	if master != nil {
		first, err := single(master, loc)
		if err != nil {
			return nil, err
		}
		if master.Props.Get(ical.PropRecurrenceRule) == nil && master.Props.Get(ical.PropRecurrenceDates) == nil {
			if overlaps(first) {
				out = append(out, first)
			}
		} else {
			set, err := recurrenceSet(master, first, loc)
			if err != nil {
				return nil, err
			}
			dur := first.end.Sub(first.start)
			// Instances that start before from may still overlap it. An
			// all-day instance's dates are floating: a day either side
			// covers any zone.
			lo, hi := from.Add(-dur), to
			if first.allDay {
				lo, hi = DateOf(from.In(loc)).AddDays(-1).In(time.UTC).Add(-dur), DateOf(to.In(loc)).AddDays(1).In(time.UTC)
			}
			// The iterator walks from DTSTART: a bounded walk, so that a
			// rule of many instances (FREQ=SECONDLY, or MINUTELY since
			// 1990) costs a bounded time, not the whole series.
			next := set.Iterator()
			for walked, kept := 0, 0; ; walked++ {
				t, ok := next()
				if !ok || !t.Before(hi) {
					break
				}
				if walked >= maxWalk || kept >= maxOccurrences {
					return nil, fmt.Errorf("more than %d occurrences before or in the range", min(walked, maxWalk))
				}
				if t.Before(lo) || replaced[t.Unix()] {
					continue
				}
				o := occurrence{comp: master, start: t, end: addSpan(t, first), allDay: first.allDay, recurring: true}
				if overlaps(o) {
					out = append(out, o)
					kept++
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].start.Before(out[j].start) })
	return out, nil
}

// addSpan is the end of an instance starting at t with first's length: a
// timed event's exact duration, an all-day event's number of days (days,
// not hours: a day across a change of daylight saving time is 23 or 25).
func addSpan(t time.Time, first occurrence) time.Time {
	if first.allDay {
		days := int(DateOf(first.end).In(time.UTC).Sub(DateOf(first.start).In(time.UTC)).Hours() / 24)
		return t.AddDate(0, 0, days)
	}
	return t.Add(first.end.Sub(first.start))
}

// single reads one VEVENT's own span: DTSTART, and DTEND or DURATION (by
// default a day for an all-day event, none for a timed one).
func single(c *ical.Component, loc *time.Location) (occurrence, error) {
	start, allDay, err := dateTime(c.Props.Get(ical.PropDateTimeStart), loc)
	if err != nil {
		return occurrence{}, fmt.Errorf("DTSTART: %w", err)
	}
	o := occurrence{comp: c, start: start, allDay: allDay}
	switch {
	case c.Props.Get(ical.PropDateTimeEnd) != nil:
		end, _, err := dateTime(c.Props.Get(ical.PropDateTimeEnd), loc)
		if err != nil {
			return occurrence{}, fmt.Errorf("DTEND: %w", err)
		}
		o.end = end
	case c.Props.Get(ical.PropDuration) != nil:
		d, err := c.Props.Get(ical.PropDuration).Duration()
		if err != nil {
			return occurrence{}, fmt.Errorf("DURATION: %w", err)
		}
		if allDay {
			o.end = start.AddDate(0, 0, int(d.Hours()/24))
		} else {
			o.end = start.Add(d)
		}
	case allDay:
		o.end = start.AddDate(0, 0, 1)
	default:
		o.end = start
	}
	if o.end.Before(o.start) {
		o.end = o.start
	}
	return o, nil
}

// recurrenceSet is the master's RRULE, RDATEs and EXDATEs, from its
// DTSTART in DTSTART's own zone, so that a weekly 09:00 stays at 09:00
// across a change of daylight saving time.
func recurrenceSet(master *ical.Component, first occurrence, loc *time.Location) (*rrule.Set, error) {
	set := &rrule.Set{}
	if p := master.Props.Get(ical.PropRecurrenceRule); p != nil {
		opt, err := rrule.StrToROption(p.Value)
		if err != nil {
			return nil, fmt.Errorf("RRULE %q: %w", p.Value, err)
		}
		opt.Dtstart = first.start
		if !opt.Until.IsZero() && first.allDay {
			// UNTIL of an all-day series is a date: its whole day counts.
			opt.Until = DateOf(opt.Until).In(time.UTC)
		}
		r, err := rrule.NewRRule(*opt)
		if err != nil {
			return nil, fmt.Errorf("RRULE %q: %w", p.Value, err)
		}
		set.RRule(r)
	} else {
		set.RDate(first.start)
	}
	for _, name := range []string{ical.PropRecurrenceDates, ical.PropExceptionDates} {
		for i := range master.Props.Values(name) {
			p := master.Props.Values(name)[i]
			for _, v := range strings.Split(p.Value, ",") {
				one := p
				one.Value = strings.TrimSpace(v)
				if strings.Contains(one.Value, "/") { // a PERIOD: its start
					one.Value = one.Value[:strings.IndexByte(one.Value, '/')]
				}
				t, _, err := dateTime(&one, loc)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				if name == ical.PropExceptionDates {
					set.ExDate(t)
				} else {
					set.RDate(t)
				}
			}
		}
	}
	return set, nil
}

// dateTime reads a DATE or DATE-TIME property. A date is its midnight in
// UTC, with allDay; a time with a TZID is in that zone (loc when the zone
// is unknown), a floating time in loc.
func dateTime(p *ical.Prop, loc *time.Location) (t time.Time, allDay bool, err error) {
	if p == nil {
		return time.Time{}, false, fmt.Errorf("missing")
	}
	v := p.Value
	if strings.EqualFold(p.Params.Get(ical.ParamValue), "DATE") || len(v) == len("20060102") {
		t, err := time.ParseInLocation("20060102", v, time.UTC)
		if err != nil {
			return time.Time{}, false, fmt.Errorf("%q is not a date", v)
		}
		return t, true, nil
	}
	if strings.HasSuffix(v, "Z") {
		t, err := time.ParseInLocation("20060102T150405Z", v, time.UTC)
		if err != nil {
			return time.Time{}, false, fmt.Errorf("%q is not a UTC time", v)
		}
		return t, false, nil
	}
	in := loc
	if tzid := p.Params.Get(ical.PropTimezoneID); tzid != "" {
		if l := zone(tzid); l != nil {
			in = l
		}
	}
	t, err = time.ParseInLocation("20060102T150405", v, in)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("%q is not a time", v)
	}
	return t, false, nil
}

// zone is the IANA zone a TZID names: the name itself, or its last
// segments for the prefixed forms some clients write
// (/freeassociation.sourceforge.net/Europe/Paris). nil if none.
func zone(tzid string) *time.Location {
	tzid = strings.Trim(tzid, `"`)
	parts := strings.Split(tzid, "/")
	for i := range parts {
		name := strings.Join(parts[i:], "/")
		if name == "" || strings.EqualFold(name, "local") {
			continue
		}
		if l, err := time.LoadLocation(name); err == nil {
			return l
		}
	}
	return nil
}
