package tasks

import (
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, if the machine has no zoneinfo

	"github.com/robfig/cron/v3"
)

const (
	ny     = "America/New_York"
	berlin = "Europe/Berlin"
)

// now is the fixed "current time" of these tests.
var now = utc("2026-01-15T12:00:00Z")

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func load(t testing.TB, zone string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func compile(t testing.TB, kind Kind, expr, zone string) *Schedule {
	t.Helper()
	s, err := Compile(Spec{Kind: kind, Expr: expr, Zone: zone, Anchor: utc("2026-01-01T00:00:00Z")}, now)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCompile(t *testing.T) {
	anchor := utc("2026-01-01T00:00:00Z")
	tests := []struct {
		kind        Kind
		expr, zone  string
		noAnchor    bool
		wantErr     string // "" for success; else a piece of the message
		wantNextUTC string // for successes: Next(now) in UTC
	}{
		{kind: KindCron, expr: "0 7 * * *", zone: berlin, wantNextUTC: "2026-01-16T06:00:00Z"},
		{kind: KindCron, expr: "  */15 9-17 * * 1-5  ", zone: berlin, wantNextUTC: "2026-01-15T12:15:00Z"},
		{kind: KindCron, expr: "0 9 * jan-mar mon,fri", wantNextUTC: "2026-01-16T09:00:00Z"},
		{kind: KindCron, expr: "@daily", zone: ny, wantNextUTC: "2026-01-16T05:00:00Z"},
		{kind: KindCron, expr: "@hourly", wantNextUTC: "2026-01-15T13:00:00Z"},
		{kind: KindCron, expr: "@weekly", wantNextUTC: "2026-01-18T00:00:00Z"},
		{kind: KindCron, expr: "@monthly", wantNextUTC: "2026-02-01T00:00:00Z"},
		{kind: KindCron, expr: "@yearly", wantNextUTC: "2027-01-01T00:00:00Z"},
		{kind: KindCron, expr: "0 0 29 2 *", wantNextUTC: "2028-02-29T00:00:00Z"},
		{kind: KindCron, expr: "0 7 * * 8", wantErr: `end of range (8) above maximum (6)`},
		{kind: KindCron, expr: "0 7 * *", wantErr: `expected exactly 5 fields, found 4`},
		{kind: KindCron, expr: "0 0 7 * * *", wantErr: `expected exactly 5 fields, found 6`}, // no seconds field
		{kind: KindCron, expr: "61 * * * *", wantErr: `e.g. "0 7 * * 1-5"`},
		{kind: KindCron, expr: "*/0 * * * *", wantErr: `step of range should be a positive number`},
		{kind: KindCron, expr: "@fortnightly", wantErr: `unrecognized descriptor`},
		{kind: KindCron, expr: "@every 1h", wantErr: `use kind "every"`},
		{kind: KindCron, expr: "TZ=UTC", wantErr: `names a time zone`},
		{kind: KindCron, expr: "CRON_TZ=Europe/Berlin 0 7 * * *", wantErr: `names a time zone`},
		{kind: KindCron, expr: "tz=UTC 0 7 * * *", wantErr: `names a time zone`},
		{kind: KindCron, expr: "0 0 30 2 *", wantErr: `never matches a date`},
		{kind: KindCron, expr: "0 0 31 4,6,9,11 *", wantErr: `never matches a date`},
		{kind: KindCron, expr: "0 7 * * *", zone: "Europe/Berln", wantErr: `unknown time zone "Europe/Berln": use an IANA name such as Europe/Berlin`},
		{kind: KindCron, expr: "0 7 * * *", zone: "Local", wantErr: `unknown time zone "Local"`},
		{kind: KindCron, expr: "0 7 * * *", zone: "../etc/passwd", wantErr: `unknown time zone`},
		{kind: KindCron, expr: "0 " + strings.Repeat("1,", 100) + "2 * * *", wantErr: `at most 200`},
		{kind: KindCron, expr: "   ", wantErr: `empty cron expression`},
		{kind: KindCron, expr: "0 7 * * *", zone: strings.Repeat("Europe/", 10), wantErr: `time zone name is 70 bytes`},
		{kind: KindEvery, expr: "90m", wantNextUTC: "2026-01-15T13:30:00Z"},
		{kind: KindEvery, expr: "1h", zone: ny, wantNextUTC: "2026-01-15T13:00:00Z"},
		{kind: KindEvery, expr: "1s", wantNextUTC: "2026-01-15T12:00:01Z"},
		{kind: KindEvery, expr: "0s", wantErr: `shorter than 1s`},
		{kind: KindEvery, expr: "500ms", wantErr: `every "500ms" is shorter than 1s`},
		{kind: KindEvery, expr: "-1h", wantErr: `shorter than 1s`},
		{kind: KindEvery, expr: "bogus", wantErr: `every "bogus" is not a duration: write one such as "90m"`},
		{kind: KindEvery, expr: "90", wantErr: `not a duration`},
		{kind: KindEvery, expr: "1h", noAnchor: true, wantErr: `has no anchor`},
		{kind: KindAt, expr: "2026-11-24 18:00", zone: ny, wantNextUTC: "2026-11-24T23:00:00Z"},
		{kind: KindAt, expr: "2026-11-24T18:00", zone: ny, wantNextUTC: "2026-11-24T23:00:00Z"},
		{kind: KindAt, expr: "2026-11-24 18:00:30", zone: berlin, wantNextUTC: "2026-11-24T17:00:30Z"},
		{kind: KindAt, expr: "2026-11-24T18:00:30", wantNextUTC: "2026-11-24T18:00:30Z"},
		{kind: KindAt, expr: "2026-11-24T18:00:00+01:00", zone: ny, wantNextUTC: "2026-11-24T17:00:00Z"},
		{kind: KindAt, expr: "2026-11-24T18:00:00Z", zone: berlin, wantNextUTC: "2026-11-24T18:00:00Z"},
		{kind: KindAt, expr: "2026-03-08 02:30", zone: ny, wantNextUTC: "2026-03-08T07:00:00Z"}, // in the gap: its end
		{kind: KindAt, expr: "2026-11-01 01:30", zone: ny, wantNextUTC: "2026-11-01T05:30:00Z"}, // repeated: the first
		{kind: KindAt, expr: "2026-01-15 12:00", wantErr: `is in the past`},                     // == now
		{kind: KindAt, expr: "2026-01-15 06:00", zone: ny, wantErr: `at "2026-01-15 06:00" is in the past: it reads as 2026-01-15T06:00:00-05:00 in America/New_York, and now is 2026-01-15T07:00:00-05:00`},
		{kind: KindAt, expr: "2025-12-31T23:00:00+01:00", wantErr: `in the past`},
		{kind: KindAt, expr: "tomorrow at 9", wantErr: `at "tomorrow at 9" is not a time: write RFC 3339 with an offset`},
		{kind: KindAt, expr: "2026-02-30 10:00", wantErr: `not a time`},
		{kind: KindAt, expr: "2026-11-24 25:00", wantErr: `not a time`},
		{kind: KindAt, expr: "2026-11-24 18:00", zone: "Mars/Olympus", wantErr: `unknown time zone "Mars/Olympus"`},
		{kind: "weekly", expr: "x", wantErr: `unknown kind "weekly": use "cron", "every" or "at"`},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind)+" "+tt.expr+" "+tt.zone, func(t *testing.T) {
			spec := Spec{Kind: tt.kind, Expr: tt.expr, Zone: tt.zone, Anchor: anchor}
			if tt.noAnchor {
				spec.Anchor = time.Time{}
			}
			s, err := Compile(spec, now)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrBadSchedule) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want ErrBadSchedule containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			next, ok := s.Next(now)
			if !ok || !next.Equal(utc(tt.wantNextUTC)) {
				t.Fatalf("Next(now) = %v, %v; want %s", next.UTC(), ok, tt.wantNextUTC)
			}
			if next.Location() != s.Location() {
				t.Errorf("Next is in %v, want the schedule's zone %v", next.Location(), s.Location())
			}
		})
	}
}

// TestParserPanic: robfig's parser slices past the end of a "TZ=" or
// "CRON_TZ=" prefix with no space after it. Compile refuses those inputs
// before parsing; safeParse still turns the panic into an error.
func TestParserPanic(t *testing.T) {
	for _, in := range []string{"TZ=UTC", "CRON_TZ=Europe/Berlin", "TZ="} {
		func() {
			defer func() {
				if r := recover(); r == nil {
					t.Errorf("robfig no longer panics on %q: the recover in safeParse is now belt and braces", in)
				}
			}()
			_, _ = cronParser.Parse(in)
		}()
		if _, err := safeParse(in); err == nil || !strings.Contains(err.Error(), "the cron parser failed") {
			t.Errorf("safeParse(%q) = %v, want the panic as an error", in, err)
		}
	}
}

// fires returns the fire times in [from, to), at most 100 (so that a Next
// that fails to advance fails the test rather than hanging it).
func fires(s *Schedule, from, to time.Time) []time.Time {
	var out []time.Time
	for t, ok := s.Next(from.Add(-time.Nanosecond)); ok && t.Before(to) && len(out) < 100; t, ok = s.Next(t) {
		out = append(out, t.UTC())
	}
	return out
}

// seq is n instants from start, step apart, leaving out skip.
func seq(start string, step time.Duration, n int, skip ...string) []time.Time {
	var out []time.Time
	for t := utc(start); len(out) < n; t = t.Add(step) {
		if !containsTime(skip, t) {
			out = append(out, t)
		}
	}
	return out
}

func containsTime(list []string, t time.Time) bool {
	for _, s := range list {
		if utc(s).Equal(t) {
			return true
		}
	}
	return false
}

func list(ss ...string) []time.Time {
	out := make([]time.Time, len(ss))
	for i, s := range ss {
		out[i] = utc(s)
	}
	return out
}

func sameTimes(a, b []time.Time) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}

// TestDST pins the fires around the 2026 transitions. New York springs
// forward on Sun 8 Mar at 02:00 EST (07:00 UTC) to 03:00 EDT and falls back
// on Sun 1 Nov at 02:00 EDT (06:00 UTC) to 01:00 EST, so 01:00-01:59
// happens twice. Berlin springs forward on Sun 29 Mar at 02:00 CET (01:00
// UTC) to 03:00 CEST and falls back on Sun 25 Oct at 03:00 CEST (01:00 UTC)
// to 02:00 CET, so 02:00-02:59 happens twice.
func TestDST(t *testing.T) {
	tests := []struct {
		name, zone, expr string
		from, to         string // a window of instants, [from, to)
		want             []time.Time
	}{
		// Daily at a time in the gap: once, at the gap's end.
		{"NY daily 02:30, spring", ny, "30 2 * * *", "2026-03-07T00:00:00Z", "2026-03-10T00:00:00Z",
			list("2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z")},
		{"Berlin daily 02:30, spring", berlin, "30 2 * * *", "2026-03-28T00:00:00Z", "2026-03-31T00:00:00Z",
			list("2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z")},
		// Daily at a time in the repeated hour: once, at its first occurrence.
		{"NY daily 01:30, fall", ny, "30 1 * * *", "2026-10-31T00:00:00Z", "2026-11-03T00:00:00Z",
			list("2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z")},
		{"NY daily 02:30, fall (exists once)", ny, "30 2 * * *", "2026-10-31T00:00:00Z", "2026-11-03T00:00:00Z",
			list("2026-10-31T06:30:00Z", "2026-11-01T07:30:00Z", "2026-11-02T07:30:00Z")},
		{"Berlin daily 02:30, fall", berlin, "30 2 * * *", "2026-10-24T00:00:00Z", "2026-10-27T00:00:00Z",
			list("2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z")},
		// Hourly over the whole local day: 23 fires in spring (02:00 is
		// 03:00, once), 24 in the fall (each wall-clock hour once).
		{"NY hourly, spring day", ny, "0 * * * *", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z",
			seq("2026-03-08T05:00:00Z", time.Hour, 23)},
		{"NY hourly, fall day", ny, "0 * * * *", "2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z",
			seq("2026-11-01T04:00:00Z", time.Hour, 24, "2026-11-01T06:00:00Z")},
		{"Berlin hourly, spring day", berlin, "@hourly", "2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z",
			seq("2026-03-28T23:00:00Z", time.Hour, 23)},
		{"Berlin hourly, fall day", berlin, "0 * * * *", "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z",
			seq("2026-10-24T22:00:00Z", time.Hour, 24, "2026-10-25T01:00:00Z")},
		// Hourly at :30: the gap's 02:30 fires at 03:00, so 24 in spring too.
		{"NY hourly :30, spring day", ny, "30 * * * *", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z",
			append(list("2026-03-08T05:30:00Z", "2026-03-08T06:30:00Z", "2026-03-08T07:00:00Z"),
				seq("2026-03-08T07:30:00Z", time.Hour, 21)...)},
		{"NY hourly :30, fall day", ny, "30 * * * *", "2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z",
			seq("2026-11-01T04:30:00Z", time.Hour, 24, "2026-11-01T06:30:00Z")},
		{"Berlin hourly :30, spring day", berlin, "30 * * * *", "2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z",
			append(list("2026-03-28T23:30:00Z", "2026-03-29T00:30:00Z", "2026-03-29T01:00:00Z"),
				seq("2026-03-29T01:30:00Z", time.Hour, 21)...)},
		{"Berlin hourly :30, fall day", berlin, "30 * * * *", "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z",
			seq("2026-10-24T22:30:00Z", time.Hour, 24, "2026-10-25T01:30:00Z")},
		// Every 30 minutes across the gap: 02:00, 02:30 and 03:00 are one fire.
		{"NY */30, spring gap", ny, "*/30 * * * *", "2026-03-08T06:00:00Z", "2026-03-08T08:01:00Z",
			list("2026-03-08T06:00:00Z", "2026-03-08T06:30:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z", "2026-03-08T08:00:00Z")},
		{"Berlin */30, spring gap", berlin, "*/30 * * * *", "2026-03-29T00:00:00Z", "2026-03-29T02:01:00Z",
			list("2026-03-29T00:00:00Z", "2026-03-29T00:30:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z", "2026-03-29T02:00:00Z")},
		// ... and across the repeated hour: its slots once, in daylight time.
		{"NY */30, fall", ny, "*/30 * * * *", "2026-11-01T04:30:00Z", "2026-11-01T08:01:00Z",
			list("2026-11-01T04:30:00Z", "2026-11-01T05:00:00Z", "2026-11-01T05:30:00Z", "2026-11-01T07:00:00Z", "2026-11-01T07:30:00Z", "2026-11-01T08:00:00Z")},
		{"Berlin */30, fall", berlin, "*/30 * * * *", "2026-10-24T23:30:00Z", "2026-10-25T03:01:00Z",
			list("2026-10-24T23:30:00Z", "2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z", "2026-10-25T02:00:00Z", "2026-10-25T02:30:00Z", "2026-10-25T03:00:00Z")},
		// A cron naming several gap minutes (02:00-02:59 every 10 min): one fire.
		{"Berlin 02:*/10, spring", berlin, "*/10 2 * * *", "2026-03-29T00:00:00Z", "2026-03-30T00:00:00Z",
			list("2026-03-29T01:00:00Z")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := compile(t, KindCron, tt.expr, tt.zone)
			got := fires(s, utc(tt.from), utc(tt.to))
			if !sameTimes(got, tt.want) {
				t.Fatalf("got %d fires %v\nwant %d %v", len(got), got, len(tt.want), tt.want)
			}
		})
	}
}

func TestWallInstant(t *testing.T) {
	nyLoc, beLoc := load(t, ny), load(t, berlin)
	tests := []struct {
		loc      *time.Location
		wall     string // the wall clock, written as if UTC
		want     string
		wantKind wallKind
	}{
		{nyLoc, "2026-03-08T01:59:00Z", "2026-03-08T06:59:00Z", wallExists},
		{nyLoc, "2026-03-08T02:00:00Z", "2026-03-08T07:00:00Z", wallGap},
		{nyLoc, "2026-03-08T02:59:59Z", "2026-03-08T07:00:00Z", wallGap},
		{nyLoc, "2026-03-08T03:00:00Z", "2026-03-08T07:00:00Z", wallExists},
		{nyLoc, "2026-11-01T00:59:00Z", "2026-11-01T04:59:00Z", wallExists},
		{nyLoc, "2026-11-01T01:00:00Z", "2026-11-01T05:00:00Z", wallRepeated},
		{nyLoc, "2026-11-01T01:59:00Z", "2026-11-01T05:59:00Z", wallRepeated},
		{nyLoc, "2026-11-01T02:00:00Z", "2026-11-01T07:00:00Z", wallExists},
		{beLoc, "2026-03-29T02:30:00Z", "2026-03-29T01:00:00Z", wallGap},
		{beLoc, "2026-10-25T02:30:00Z", "2026-10-25T00:30:00Z", wallRepeated},
		{beLoc, "2026-10-25T03:00:00Z", "2026-10-25T02:00:00Z", wallExists},
		{time.UTC, "2026-03-08T02:30:00Z", "2026-03-08T02:30:00Z", wallExists},
	}
	for _, tt := range tests {
		got, kind := wallInstant(utc(tt.wall), tt.loc)
		if !got.Equal(utc(tt.want)) || kind != tt.wantKind {
			t.Errorf("%s %s: got %v kind %d, want %s kind %d", tt.loc, tt.wall, got.UTC(), kind, tt.want, tt.wantKind)
		}
	}
}

// TestRestart: a scheduler that restarts mid-day asks Next(now); it must
// never get a slot at or before now, nor one it already fired.
func TestRestart(t *testing.T) {
	tests := []struct {
		name, zone, expr, after, want string
	}{
		{"just before today's slot", berlin, "0 9 * * *", "2026-06-10T06:59:59.999Z", "2026-06-10T07:00:00Z"},
		{"exactly on the slot", berlin, "0 9 * * *", "2026-06-10T07:00:00Z", "2026-06-11T07:00:00Z"},
		{"just after the slot", berlin, "0 9 * * *", "2026-06-10T07:00:00.001Z", "2026-06-11T07:00:00Z"},
		{"mid-day", berlin, "0 9,18 * * *", "2026-06-10T12:34:56Z", "2026-06-10T16:00:00Z"},
		{"mid-minute of a slot", ny, "* * * * *", "2026-06-10T12:34:56Z", "2026-06-10T12:35:00Z"},
		// In New York's repeated hour: the first 01:30 (05:30 UTC) was the
		// fire; restarting at the second 01:30 must not fire 01:45 again.
		{"first 01:30 EDT", ny, "45 * * * *", "2026-11-01T05:30:00Z", "2026-11-01T05:45:00Z"},
		{"second 01:30 EST", ny, "45 * * * *", "2026-11-01T06:30:00Z", "2026-11-01T07:45:00Z"},
		{"on the gap's end", ny, "*/30 * * * *", "2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z"},
		{"just before the gap", ny, "30 2 * * *", "2026-03-08T06:59:59Z", "2026-03-08T07:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := compile(t, KindCron, tt.expr, tt.zone)
			got, ok := s.Next(utc(tt.after))
			if !ok || !got.Equal(utc(tt.want)) {
				t.Fatalf("Next(%s) = %v, %v; want %s", tt.after, got.UTC(), ok, tt.want)
			}
			again, ok := s.Next(got)
			if !ok || !again.After(got) {
				t.Fatalf("Next(%v) = %v, %v: want the following slot", got.UTC(), again.UTC(), ok)
			}
		})
	}
}

func TestEvery(t *testing.T) {
	anchor := utc("2026-01-01T00:00:00Z")
	tests := []struct {
		expr, after, want string // want "" for none
	}{
		{"90m", "2025-06-01T00:00:00Z", "2026-01-01T01:30:00Z"}, // before the anchor
		{"90m", "2026-01-01T00:00:00Z", "2026-01-01T01:30:00Z"}, // on the anchor: k >= 1
		{"90m", "2026-01-01T01:30:00Z", "2026-01-01T03:00:00Z"}, // on a slot
		{"90m", "2026-01-01T01:40:00Z", "2026-01-01T03:00:00Z"}, // between slots
		{"1s", "2036-01-01T00:00:00.5Z", "2036-01-01T00:00:01Z"},
		{"1s", "2400-01-01T00:00:00Z", ""}, // more than 292 years of seconds from the anchor
		{"1s", "1700-01-01T00:00:00Z", "2026-01-01T00:00:01Z"},
		{"2562047h", "2026-01-01T00:00:00Z", "2318-04-12T23:00:00Z"}, // the largest duration in hours: anchor + 2562047h
		{"2562047h", "2318-04-12T23:00:00Z", ""},                     // k = 2 overflows
		{"8760h", "2030-06-01T00:00:00Z", "2030-12-31T00:00:00Z"},    // 365 days
	}
	for _, tt := range tests {
		s, err := Compile(Spec{Kind: KindEvery, Expr: tt.expr, Anchor: anchor}, now)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := s.Next(utc(tt.after))
		if tt.want == "" {
			if ok {
				t.Errorf("every %s, Next(%s) = %v, want none", tt.expr, tt.after, got)
			}
			continue
		}
		if !ok || !got.Equal(utc(tt.want)) {
			t.Errorf("every %s, Next(%s) = %v, %v; want %s", tt.expr, tt.after, got, ok, tt.want)
		}
	}
}

func TestAtNext(t *testing.T) {
	s := compile(t, KindAt, "2026-11-24 18:00", ny)
	at := utc("2026-11-24T23:00:00Z")
	if got, ok := s.Next(at.Add(-time.Nanosecond)); !ok || !got.Equal(at) {
		t.Errorf("Next before = %v, %v", got, ok)
	}
	if got, ok := s.Next(at); ok {
		t.Errorf("Next on the time = %v, want none", got)
	}
	if got := s.NextN(now, 3); !sameTimes(got, []time.Time{at}) {
		t.Errorf("NextN = %v, want only %v", got, at)
	}
}

func TestNextN(t *testing.T) {
	s := compile(t, KindCron, "0 7 * * 1-5", berlin)
	got := s.NextN(utc("2026-11-20T12:00:00Z"), 3) // a Friday
	want := list("2026-11-23T06:00:00Z", "2026-11-24T06:00:00Z", "2026-11-25T06:00:00Z")
	if !sameTimes(got, want) {
		t.Errorf("NextN = %v, want %v", got, want)
	}
	if got[0].Format("Mon 2 Jan 15:04 MST") != "Mon 23 Nov 07:00 CET" {
		t.Errorf("NextN is not in the schedule's zone: %v", got[0])
	}
	if got := s.NextN(now, 0); len(got) != 0 {
		t.Errorf("NextN(0) = %v", got)
	}
}

func TestImpossibleCron(t *testing.T) {
	for _, expr := range []string{"0 0 30 2 *", "0 0 31 4,6,9,11 *"} {
		c, err := parseCron(expr)
		if err != nil {
			t.Fatal(err)
		}
		s := &Schedule{spec: Spec{Kind: KindCron, Expr: expr}, loc: time.UTC, cron: c}
		if got, ok := s.Next(now); ok {
			t.Errorf("%s: Next = %v, want none", expr, got)
		}
		if got := s.NextN(now, 3); len(got) != 0 {
			t.Errorf("%s: NextN = %v, want none", expr, got)
		}
	}
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		kind       Kind
		expr, zone string
		want       string
	}{
		{KindCron, "0 7 * * *", berlin, "every day at 07:00 (Europe/Berlin)"},
		{KindCron, "@daily", "", "every day at 00:00 (UTC)"},
		{KindCron, "30 6 1-31 * 0-6", ny, "every day at 06:30 (America/New_York)"},
		{KindCron, "15 * * * *", berlin, "every hour at :15 (Europe/Berlin)"},
		{KindCron, "@hourly", "", "every hour at :00 (UTC)"},
		{KindCron, "30 8 * * 1", berlin, "every Monday at 08:30 (Europe/Berlin)"},
		{KindCron, "0 18 * * fri", ny, "every Friday at 18:00 (America/New_York)"},
		{KindCron, "@weekly", "", "every Sunday at 00:00 (UTC)"},
		{KindCron, "@monthly", "", "every month on day 1 at 00:00 (UTC)"},
		{KindCron, "0 9 15 * *", berlin, "every month on day 15 at 09:00 (Europe/Berlin)"},
		{KindCron, "*/15 * * * *", berlin, "every 15 minutes (Europe/Berlin)"},
		{KindCron, "* * * * *", "", "every minute (UTC)"},
		{KindCron, "*/7 * * * *", "", `cron "*/7 * * * *" (UTC)`},
		{KindCron, "*/15 9-17 * * 1-5", berlin, `cron "*/15 9-17 * * 1-5" (Europe/Berlin)`},
		{KindCron, "0 0 1 * 1", "", `cron "0 0 1 * 1" (UTC)`}, // the 1st or a Monday
		{KindCron, "0 7 * 6 *", "", `cron "0 7 * 6 *" (UTC)`},
		{KindCron, "@yearly", "", `cron "@yearly" (UTC)`},
		{KindEvery, "90m", "", "every 90 minutes"},
		{KindEvery, "1h30m", berlin, "every 90 minutes"},
		{KindEvery, "1h", "", "every hour"},
		{KindEvery, "48h", "", "every 2 days"},
		{KindEvery, "30s", "", "every 30 seconds"},
		{KindEvery, "1500ms", "", "every 1.5s"},
		{KindAt, "2026-11-24 18:00", ny, "once, on Tue 24 Nov 2026 at 18:00 (America/New_York)"},
		{KindAt, "2026-11-24T18:00:00+01:00", ny, "once, on Tue 24 Nov 2026 at 12:00 (America/New_York)"},
		{KindAt, "2026-11-24 18:00:30", "", "once, on Tue 24 Nov 2026 at 18:00:30 (UTC)"},
	}
	for _, tt := range tests {
		if got := compile(t, tt.kind, tt.expr, tt.zone).Describe(); got != tt.want {
			t.Errorf("%s %q (%s): Describe = %q, want %q", tt.kind, tt.expr, tt.zone, got, tt.want)
		}
	}
}

// TestSundayIsSevenToo: 7 is Sunday in the day-of-week field, as in vixie
// cron, alone, in a list, in a range and as a range's bound with a step;
// each reads the same as the expression written with 0.
func TestSundayIsSevenToo(t *testing.T) {
	tests := []struct{ expr, same string }{
		{"0 7 * * 7", "0 7 * * 0"},
		{"0 7 * * 5-7", "0 7 * * 0,5,6"},
		{"0 7 * * 1,7", "0 7 * * 0,1"},
		{"0 7 * * 0-7", "0 7 * * *"},
		{"0 7 * * 1-7/2", "0 7 * * 0,1,3,5"},
		{"0 7 * * 7-7", "0 7 * * 0"},
		{"0 7 * * sat-7", "0 7 * * 0,6"},
		{"0 7 1 * 7", "0 7 1 * 0"},
		{"0 7 * * sun,7", "0 7 * * 0"},
	}
	for _, tt := range tests {
		got, err := Compile(Spec{Kind: KindCron, Expr: tt.expr}, now)
		if err != nil {
			t.Errorf("%q: %v", tt.expr, err)
			continue
		}
		want := compile(t, KindCron, tt.same, "")
		if g, w := got.NextN(now, 20), want.NextN(now, 20); !sameTimes(g, w) {
			t.Errorf("%q fires %v, want those of %q: %v", tt.expr, g, tt.same, w)
		}
	}
	if got := compile(t, KindCron, "0 7 * * 7", berlin).Describe(); got != "every Sunday at 07:00 (Europe/Berlin)" {
		t.Errorf("Describe = %q", got)
	}
	for _, bad := range []string{"0 7 * * 8", "0 7 * * 6-8", "0 7 * * 7-1", "0 7 * * 1-7/0"} {
		if _, err := Compile(Spec{Kind: KindCron, Expr: bad}, now); err == nil || !errors.Is(err, ErrBadSchedule) {
			t.Errorf("%q: err = %v, want ErrBadSchedule", bad, err)
		}
	}
}

// TestDayOfMonthAndWeek pins the rule docs/TASKS.md states: when both day
// fields are restricted a day matching either fires; when one is "*" (or
// "?") only the other counts; "*/2" is a restriction (vixie cron would treat
// a field starting with "*" as unrestricted).
func TestDayOfMonthAndWeek(t *testing.T) {
	// January 2026: Thursday the 1st; Mondays are the 5th, 12th, 19th, 26th.
	from, to := utc("2026-01-01T00:00:00Z"), utc("2026-02-01T00:00:00Z")
	days := func(s *Schedule) []int {
		var out []int
		for _, f := range fires(s, from, to) {
			out = append(out, f.Day())
		}
		return out
	}
	tests := []struct {
		expr string
		want []int
	}{
		{"0 0 1 * 1", []int{1, 5, 12, 19, 26}},                  // either
		{"0 0 1 * *", []int{1}},                                 // day-of-week "*": the month day only
		{"0 0 * * 1", []int{5, 12, 19, 26}},                     // day-of-month "*": the weekday only
		{"0 0 ? * 1", []int{5, 12, 19, 26}},                     // "?" is "*"
		{"0 0 1-7 * 1", []int{1, 2, 3, 4, 5, 6, 7, 12, 19, 26}}, // the first week or a Monday
		{"0 0 */10 * 1", []int{1, 5, 11, 12, 19, 21, 26, 31}},   // "*/10" restricts: either
		{"0 0 13 * 5", []int{2, 9, 13, 16, 23, 30}},             // the 13th or a Friday
		{"0 0 13 * 7", []int{4, 11, 13, 18, 25}},                // the 13th or a Sunday (7)
	}
	for _, tt := range tests {
		if got := days(compile(t, KindCron, tt.expr, "")); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%q fires on days %v of January 2026, want %v", tt.expr, got, tt.want)
		}
	}
}

// randomCron builds an expression from a small grammar, weighted towards
// the hours around the transitions.
func randomCron(r *rand.Rand) string {
	pick := func(opts ...string) string { return opts[r.Intn(len(opts))] }
	minute := pick("*", "*/5", "*/15", "*/30", "*/7", "0", "30", "45", "59",
		fmt.Sprint(r.Intn(60)), fmt.Sprintf("%d,%d", r.Intn(30), 30+r.Intn(30)), "10-20", "5-55/10")
	hour := pick("*", "*", "1", "2", "3", "1-3", "*/2", "2,14", "0-5/2", fmt.Sprint(r.Intn(24)))
	dom := pick("*", "*", "*", "*", fmt.Sprint(1+r.Intn(31)), "1-7", "*/2", "25-31", "8,29")
	month := pick("*", "*", "*", "3", "10,11", "3-4", "*/3", fmt.Sprint(1+r.Intn(12)))
	dow := pick("*", "*", "*", "*", "0", "1-5", "sun", "6,0", fmt.Sprint(r.Intn(7)))
	return strings.Join([]string{minute, hour, dom, month, dow}, " ")
}

// wallOf is t's wall clock in loc, written as if UTC.
func wallOf(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
}

// oracleInstant maps a wall clock to its fire instant by brute force over
// the instants a quarter hour apart (the offsets of both zones, and the
// instants of their transitions, are whole quarter hours): the first that
// reads as w, else (a gap) the first on a quarter hour that reads later.
func oracleInstant(w time.Time, loc *time.Location) time.Time {
	for k := -14 * 4; k <= 14*4; k++ {
		if t := w.Add(time.Duration(k) * 15 * time.Minute); wallOf(t, loc).Equal(w) {
			return t
		}
	}
	for k := -14 * 4; k <= 14*4; k++ {
		if t := w.Truncate(15 * time.Minute).Add(time.Duration(k) * 15 * time.Minute); wallOf(t, loc).After(w) {
			return t
		}
	}
	return time.Time{}
}

// oracleNext is Next done another way: robfig's own Next, run in UTC where
// no clock jumps, lists the matching wall clocks from two hours before
// after's; each is mapped by oracleInstant; the first after `after` wins.
func oracleNext(c cron.SpecSchedule, after time.Time, loc *time.Location) (time.Time, bool) {
	c.Location = time.UTC
	w := wallOf(after, loc).Add(-2 * time.Hour)
	for i := 0; i < 1000; i++ {
		if w = c.Next(w); w.IsZero() {
			return time.Time{}, false
		}
		if t := oracleInstant(w, loc); t.After(after) {
			return t, true
		}
	}
	return time.Time{}, false
}

// TestNextProperties checks Next on random crons and random starts in 2026
// (half of them within two days of a transition) in both zones: it is after
// `after`, strictly increasing, its wall clock matches the cron or it is the
// end of a gap, and it agrees with oracleNext.
func TestNextProperties(t *testing.T) {
	r := rand.New(rand.NewSource(20260308))
	transitions := list("2026-03-08T07:00:00Z", "2026-11-01T06:00:00Z", "2026-03-29T01:00:00Z", "2026-10-25T01:00:00Z")
	for _, zone := range []string{ny, berlin} {
		loc := load(t, zone)
		for i := 0; i < 300; i++ {
			expr := randomCron(r)
			s, err := Compile(Spec{Kind: KindCron, Expr: expr, Zone: zone}, utc("2026-01-01T00:00:00Z"))
			if err != nil {
				if errors.Is(err, ErrBadSchedule) && strings.Contains(err.Error(), "never matches") {
					continue
				}
				t.Fatalf("%q: %v", expr, err)
			}
			after := utc("2026-01-01T00:00:00Z").Add(time.Duration(r.Int63n(int64(365 * 24 * time.Hour))))
			if r.Intn(2) == 0 {
				after = transitions[r.Intn(len(transitions))].Add(time.Duration(r.Int63n(int64(96*time.Hour))) - 48*time.Hour)
			}
			for j := 0; j < 8; j++ {
				got, ok := s.Next(after)
				want, wantOK := oracleNext(*s.cron, after, loc)
				if ok != wantOK || !got.Equal(want) {
					t.Fatalf("%s %q: Next(%v) = %v, %v; oracle %v, %v", zone, expr, after.UTC(), got.UTC(), ok, want.UTC(), wantOK)
				}
				if !ok {
					break
				}
				if !got.After(after) {
					t.Fatalf("%s %q: Next(%v) = %v, not after it", zone, expr, after.UTC(), got.UTC())
				}
				w := wallOf(got, loc)
				c := *s.cron
				c.Location = time.UTC
				matches := c.Next(w.Add(-time.Second)).Equal(w)
				start, _ := got.ZoneBounds()
				_, offBefore := start.Add(-time.Second).In(loc).Zone()
				_, offAfter := got.Zone()
				gapEnd := got.Equal(start) && offAfter > offBefore
				if !matches && !gapEnd {
					t.Fatalf("%s %q: Next(%v) = %v, which neither matches nor ends a gap", zone, expr, after.UTC(), got)
				}
				after = got
			}
		}
	}
}
