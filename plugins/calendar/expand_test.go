package calendar

import (
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-ical"
)

func decode(t *testing.T, events ...string) *ical.Calendar {
	t.Helper()
	src := "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//t//EN\r\n"
	for _, e := range events {
		src += "BEGIN:VEVENT\r\nUID:u@t\r\nDTSTAMP:20260101T000000Z\r\n" + strings.ReplaceAll(strings.TrimSpace(e), "\n", "\r\n") + "\r\nEND:VEVENT\r\n"
	}
	src += "END:VCALENDAR\r\n"
	cal, err := ical.NewDecoder(strings.NewReader(src)).Decode()
	if err != nil {
		t.Fatal(err)
	}
	return cal
}

// Cases the Radicale tests do not cover: all-day series and their
// EXDATEs as dates, a cancelled occurrence, floating times, RDATE, and a
// rule that would yield too many instances.
func TestExpand(t *testing.T) {
	loc := paris(t)
	day := func(s string) time.Time { d, _ := time.ParseInLocation(time.DateOnly, s, loc); return d }
	tests := []struct {
		name     string
		events   []string
		from, to time.Time
		want     []string // starts: dates for all-day, else RFC 3339 in loc
		err      string
	}{
		{"all-day weekly, an EXDATE as a date", []string{`DTSTART;VALUE=DATE:20261026
DTEND;VALUE=DATE:20261027
RRULE:FREQ=WEEKLY;COUNT=4
EXDATE;VALUE=DATE:20261102`}, day("2026-10-01"), day("2026-12-01"), []string{"2026-10-26", "2026-11-09", "2026-11-16"}, ""},
		{"all-day, two days long, overlapping the range's start", []string{`DTSTART;VALUE=DATE:20261025
DTEND;VALUE=DATE:20261027`}, day("2026-10-26"), day("2026-10-27"), []string{"2026-10-25"}, ""},
		{"all-day, ended the day before the range", []string{`DTSTART;VALUE=DATE:20261025
DTEND;VALUE=DATE:20261026`}, day("2026-10-26"), day("2026-10-27"), nil, ""},
		{"a cancelled occurrence", []string{`DTSTART;TZID=Europe/Paris:20261026T090000
DURATION:PT30M
RRULE:FREQ=DAILY;COUNT=3`, `RECURRENCE-ID;TZID=Europe/Paris:20261027T090000
DTSTART;TZID=Europe/Paris:20261027T090000
DURATION:PT30M
STATUS:CANCELLED`}, day("2026-10-26"), day("2026-10-30"), []string{"2026-10-26T09:00:00+01:00", "2026-10-28T09:00:00+01:00"}, ""},
		{"floating time, in the user's zone", []string{`DTSTART:20260701T090000
DTEND:20260701T100000`}, day("2026-07-01"), day("2026-07-02"), []string{"2026-07-01T09:00:00+02:00"}, ""},
		{"RDATE adds, prefixed TZID read", []string{`DTSTART;TZID=/freeassociation.sourceforge.net/Europe/Paris:20261026T090000
DTEND;TZID=/freeassociation.sourceforge.net/Europe/Paris:20261026T093000
RDATE;TZID=Europe/Paris:20261029T150000`}, day("2026-10-26"), day("2026-10-30"), []string{"2026-10-26T09:00:00+01:00", "2026-10-29T15:00:00+01:00"}, ""},
		{"too many instances", []string{`DTSTART:20261026T000000Z
RRULE:FREQ=SECONDLY`}, day("2026-10-26"), day("2026-10-27"), nil, "more than"},
		{"minutely since 1990: the walk to the range is bounded", []string{`DTSTART:19900101T000000Z
RRULE:FREQ=MINUTELY`}, day("2026-10-26"), day("2026-10-27"), nil, "more than 200000"},
		{"daily since 1990 (the control: a long walk within the bound)", []string{`DTSTART;TZID=Europe/Paris:19900101T070000
DURATION:PT15M
RRULE:FREQ=DAILY`}, day("2026-10-26"), day("2026-10-27"), []string{"2026-10-26T07:00:00+01:00"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			occ, err := expand(decode(t, tt.events...), loc, tt.from, tt.to)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range occ {
				if o.allDay {
					got = append(got, DateOf(o.start).String())
				} else {
					got = append(got, o.start.In(loc).Format(time.RFC3339))
				}
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}
