package tasks

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Kind is how a task's schedule is written.
type Kind string

// The kinds of schedule.
const (
	KindCron  Kind = "cron"  // a 5-field cron expression or a descriptor (@daily, @hourly, …), in the task's zone
	KindEvery Kind = "every" // a Go duration of at least 1 s ("90m", "1h30m"), from an anchor
	KindAt    Kind = "at"    // one time: RFC 3339 with an offset, or "2006-01-02 15:04[:05]" / "2006-01-02T15:04[:05]" read in the task's zone
)

// ErrBadSchedule wraps every error Compile returns.
var ErrBadSchedule = errors.New("bad schedule")

// Spec is a schedule as stored: kind, expression, IANA zone ("" means UTC),
// and for `every` the anchor its slots count from (the task's creation time).
type Spec struct {
	Kind   Kind
	Expr   string
	Zone   string
	Anchor time.Time
}

// Schedule is a compiled Spec, made by Compile. It is immutable and safe
// for concurrent use.
type Schedule struct {
	spec  Spec
	loc   *time.Location
	cron  *cron.SpecSchedule // KindCron: only its bit masks are used, never its Next
	every time.Duration      // KindEvery
	at    time.Time          // KindAt
	anch  time.Time          // KindEvery: slots are anch + k*every, k >= 1
}

const (
	maxExprLen = 200
	maxZoneLen = 64 // IANA names are about half as long
	// starBit is robfig's mark on a field written "*" or "?" (spec.go).
	starBit = 1 << 63
	// searchDays bounds the search for a cron's next day. The rarest day a
	// cron can name is 29 February, at most 8 years from the last one (2096,
	// 2104), so a cron that matches nothing in 9 years never matches.
	searchDays = 9 * 366
)

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// The local layouts an `at` may use without an offset, read in the task's zone.
var atLayouts = []string{"2006-01-02 15:04", "2006-01-02 15:04:05", "2006-01-02T15:04", "2006-01-02T15:04:05"}

const cronHelp = `write 5 fields (minute hour day-of-month month day-of-week), e.g. "0 7 * * 1-5" for 07:00 on weekdays, or a descriptor such as @daily or @hourly`

func bad(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadSchedule}, args...)...)
}

// Compile checks spec and compiles it; now is the current time (an `at`
// not after now is an error, and so is a cron that never matches a date).
// Every error wraps ErrBadSchedule and says how to fix the schedule.
func Compile(spec Spec, now time.Time) (*Schedule, error) {
	if spec.Kind != KindCron && spec.Kind != KindEvery && spec.Kind != KindAt {
		return nil, bad("unknown kind %q: use %q, %q or %q", spec.Kind, KindCron, KindEvery, KindAt)
	}
	if len(spec.Expr) > maxExprLen {
		return nil, bad("expression is %d bytes: at most %d are allowed", len(spec.Expr), maxExprLen)
	}
	if len(spec.Zone) > maxZoneLen {
		return nil, bad("time zone name is %d bytes: use an IANA name such as Europe/Berlin", len(spec.Zone))
	}
	expr := strings.TrimSpace(spec.Expr)
	if expr == "" {
		return nil, bad("empty %s expression", spec.Kind)
	}
	loc := time.UTC
	if spec.Zone != "" {
		l, err := time.LoadLocation(spec.Zone)
		if err != nil || spec.Zone == "Local" {
			return nil, bad("unknown time zone %q: use an IANA name such as Europe/Berlin (or leave it empty for UTC)", spec.Zone)
		}
		loc = l
	}
	s := &Schedule{spec: spec, loc: loc}
	switch spec.Kind {
	case KindCron:
		c, err := parseCron(expr)
		if err != nil {
			return nil, err
		}
		s.cron = c
		if _, ok := s.Next(now); !ok {
			return nil, bad("cron %q never matches a date (such as 30 February): %s", expr, cronHelp)
		}
	case KindEvery:
		d, err := time.ParseDuration(expr)
		if err != nil {
			return nil, bad("every %q is not a duration: write one such as \"90m\", \"1h30m\" or \"24h\"", expr)
		}
		if d < time.Second {
			return nil, bad("every %q is shorter than 1s: write at least \"1s\", e.g. \"90m\"", expr)
		}
		if spec.Anchor.IsZero() {
			return nil, bad("every %q has no anchor: give the task's creation time", expr)
		}
		s.every, s.anch = d, spec.Anchor.Round(0)
	case KindAt:
		t, err := parseAt(expr, loc)
		if err != nil {
			return nil, err
		}
		if !t.After(now) {
			return nil, bad("at %q is in the past: it reads as %s in %s, and now is %s",
				expr, t.In(loc).Format(time.RFC3339), loc, now.In(loc).Format(time.RFC3339))
		}
		s.at = t
	}
	return s, nil
}

// parseCron parses a 5-field expression or a descriptor. A zone in the
// expression is refused: the zone is the task's own field (and robfig's
// parser panics on "TZ=UTC" with no space after it).
func parseCron(expr string) (*cron.SpecSchedule, error) {
	if strings.Contains(strings.ToUpper(expr), "TZ=") {
		return nil, bad("cron %q names a time zone: remove the TZ=/CRON_TZ= prefix and set the task's zone instead", expr)
	}
	sched, err := safeParse(sundaySeven(expr))
	if err != nil {
		return nil, bad("cron %q: %v: %s", expr, err, cronHelp)
	}
	spec, ok := sched.(*cron.SpecSchedule)
	if !ok { // "@every 1h" parses to a ConstantDelaySchedule
		return nil, bad("cron %q is not a calendar schedule: for a fixed interval use kind %q with a duration such as \"1h\"", expr, KindEvery)
	}
	return spec, nil
}

// sundaySeven rewrites a 5-field expression's day-of-week field so that 7
// means Sunday, as in vixie cron (robfig's parser takes 0-6 only): each
// item of the field's list that names 7 — alone, as a range's bound,
// stepped or not — becomes the list of days it stands for, with 0 for 7
// ("5-7" is "5,6,0", "1-7/2" is "1,3,5,0"). Items without a 7, and
// anything it cannot read, are left for the parser to judge.
func sundaySeven(expr string) string {
	fields := strings.Fields(expr)
	if len(fields) != 5 {
		return expr // a descriptor, or a count the parser refuses
	}
	items := strings.Split(fields[4], ",")
	for i, item := range items {
		items[i] = sevenItem(item)
	}
	fields[4] = strings.Join(items, ",")
	return strings.Join(fields, " ")
}

// weekdayNames are the day names robfig's parser reads, lower case.
var weekdayNames = map[string]int{"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}

// sevenItem is one list item of sundaySeven.
func sevenItem(item string) string {
	rng, stepText, stepped := strings.Cut(item, "/")
	lo, hi, isRange := strings.Cut(rng, "-")
	if !isRange {
		hi = lo
	}
	if lo != "7" && hi != "7" {
		return item
	}
	day := func(s string) (int, bool) {
		if n, ok := weekdayNames[strings.ToLower(s)]; ok {
			return n, true
		}
		n, err := strconv.Atoi(s)
		return n, err == nil && n >= 0 && n <= 7
	}
	from, ok1 := day(lo)
	to, ok2 := day(hi)
	step := 1
	if stepped {
		n, err := strconv.Atoi(stepText)
		if err != nil || n < 1 {
			return item
		}
		step = n
	}
	if !ok1 || !ok2 || from > to {
		return item
	}
	var days []string
	for d := from; d <= to; d += step {
		days = append(days, strconv.Itoa(d%7))
	}
	return strings.Join(days, ",")
}

// safeParse calls robfig's parser, turning a panic into an error.
func safeParse(expr string) (sched cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			sched, err = nil, fmt.Errorf("the cron parser failed: %v", r)
		}
	}()
	return cronParser.Parse(expr)
}

// parseAt reads an `at` expression: RFC 3339 with an offset, or a local
// time read in loc (a time in a spring-forward gap is read as the gap's
// end, a repeated one as its first occurrence, as for cron slots).
func parseAt(expr string, loc *time.Location) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, expr); err == nil {
		return t, nil
	}
	for _, layout := range atLayouts {
		if w, err := time.Parse(layout, expr); err == nil {
			t, _ := wallInstant(w, loc)
			return t, nil
		}
	}
	return time.Time{}, bad("at %q is not a time: write RFC 3339 with an offset (\"2026-11-24T18:00:00-05:00\") or a time read in the task's zone (\"2026-11-24 18:00\", \"2026-11-24 18:00:05\", \"2026-11-24T18:00\")", expr)
}

// wallKind says how a wall-clock time exists in a zone.
type wallKind int

const (
	wallExists   wallKind = iota // once
	wallGap                      // not at all: the clocks sprang over it
	wallRepeated                 // twice: the clocks fell back over it
)

// wallInstant maps a wall-clock time (its fields read from w, whose own zone
// is ignored) in loc to the instant a schedule fires for it: the instant
// itself if it exists once, the first occurrence if it is repeated, and the
// end of the gap (the first valid instant after it) if it does not exist.
// time.Date is not used: it leaves both of these cases unspecified (and in
// Go 1.26 it picks the first 01:30 in New York but the second 02:30 in
// Berlin, and moves a New York 02:30 back to 01:30).
func wallInstant(w time.Time, loc *time.Location) (time.Time, wallKind) {
	y, mo, d := w.Date()
	u := time.Date(y, mo, d, w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), time.UTC)
	// The offsets in force two days either side: zones do not change their
	// offset twice within four days, so these are the only ones it can have.
	var found []time.Time
	for _, probe := range []time.Duration{-48 * time.Hour, 48 * time.Hour} {
		_, off := u.Add(probe).In(loc).Zone()
		t := u.Add(-time.Duration(off) * time.Second)
		if _, got := t.In(loc).Zone(); got == off && (len(found) == 0 || !t.Equal(found[0])) {
			found = append(found, t)
		}
	}
	switch len(found) {
	case 1:
		return found[0].In(loc), wallExists
	case 2:
		if found[1].Before(found[0]) {
			found[0] = found[1]
		}
		return found[0].In(loc), wallRepeated
	}
	// In a gap, reading the wall time with the earlier (smaller) offset lands
	// past the transition; the zone it lands in starts where the gap ends.
	_, off := u.Add(-48 * time.Hour).In(loc).Zone()
	start, _ := u.Add(-time.Duration(off) * time.Second).In(loc).ZoneBounds()
	return start.In(loc), wallGap
}

// Next returns the first fire time strictly after `after`, in the
// schedule's location, or false if there is none: an `at` not after
// `after`, a cron with no match in the next 9 years, or an `every` whose
// next slot is past the year 2262.
func (s *Schedule) Next(after time.Time) (time.Time, bool) {
	switch {
	case s.cron != nil:
		return s.nextCron(after)
	case s.every > 0:
		return s.nextEvery(after)
	case s.at.After(after):
		return s.at.In(s.loc), true
	}
	return time.Time{}, false
}

// NextN returns up to n fire times after `after`, in order.
func (s *Schedule) NextN(after time.Time, n int) []time.Time {
	var out []time.Time
	for len(out) < n {
		t, ok := s.Next(after)
		if !ok {
			break
		}
		out = append(out, t)
		after = t
	}
	return out
}

// nextEvery computes k directly: slots are anchor + k*every, k >= 1.
func (s *Schedule) nextEvery(after time.Time) (time.Time, bool) {
	k := int64(1)
	if d := after.Sub(s.anch); d >= s.every { // Sub saturates; the check below catches it
		k = int64(d/s.every) + 1
	}
	if k > math.MaxInt64/int64(s.every) {
		return time.Time{}, false
	}
	t := s.anch.Add(time.Duration(k) * s.every)
	if !t.After(after) {
		return time.Time{}, false
	}
	return t.In(s.loc), true
}

// nextCron walks the matching wall-clock slots from the wall-clock minute of
// `after`, day by day and within a day only through the matching hours and
// minutes, and returns the first whose instant is after `after`. Earlier
// slots need not be looked at: wallInstant never decreases as the wall clock
// advances, and the slot at `after`'s own wall minute maps to `after` or
// before it (to its first occurrence, if `after` is in a repeated hour).
// Equal instants (a gap's slots and the slot at its end) come out once,
// since only an instant after the previous fire is taken.
func (s *Schedule) nextCron(after time.Time) (time.Time, bool) {
	a := after.In(s.loc)
	y, mo, d := a.Date()
	for i := 0; i < searchDays; i++ {
		day := time.Date(y, mo, d+i, 0, 0, 0, 0, time.UTC)
		if !s.dayMatches(day) {
			continue
		}
		for hours := s.cron.Hour &^ starBit; hours != 0; hours &= hours - 1 {
			h := bits.TrailingZeros64(hours)
			if i == 0 && h < a.Hour() {
				continue
			}
			for mins := s.cron.Minute &^ starBit; mins != 0; mins &= mins - 1 {
				m := bits.TrailingZeros64(mins)
				if i == 0 && h == a.Hour() && m < a.Minute() {
					continue
				}
				if t, _ := wallInstant(day.Add(time.Duration(h)*time.Hour+time.Duration(m)*time.Minute), s.loc); t.After(after) {
					return t, true
				}
			}
		}
	}
	return time.Time{}, false
}

// dayMatches is robfig's rule (spec.go): the month must match; when both
// day-of-month and day-of-week are restricted, either may match; when one
// is "*", only the other counts.
func (s *Schedule) dayMatches(day time.Time) bool {
	if s.cron.Month&(1<<uint(day.Month())) == 0 {
		return false
	}
	dom := s.cron.Dom&(1<<uint(day.Day())) != 0
	dow := s.cron.Dow&(1<<uint(day.Weekday())) != 0
	if s.cron.Dom&starBit != 0 || s.cron.Dow&starBit != 0 {
		return dom && dow
	}
	return dom || dow
}

// Location returns the schedule's zone (UTC when the Spec's zone is "").
func (s *Schedule) Location() *time.Location { return s.loc }

// Describe says the schedule in words for a person approving it, e.g.
// "every day at 07:00 (Europe/Berlin)", "every 90 minutes", "once, on Tue
// 24 Nov 2026 at 18:00 (America/New_York)"; a cron it cannot put simply is
// quoted: `cron "*/15 9-17 * * 1-5" (Europe/Berlin)`. Never empty.
func (s *Schedule) Describe() string {
	switch {
	case s.cron != nil:
		return s.describeCron() + " (" + s.loc.String() + ")"
	case s.every > 0:
		return "every " + sayDuration(s.every)
	}
	at, layout := s.at.In(s.loc), "Mon 2 Jan 2006 at 15:04"
	if at.Second() != 0 || at.Nanosecond() != 0 {
		layout += ":05"
	}
	return "once, on " + at.Format(layout) + " (" + s.loc.String() + ")"
}

func sayDuration(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "day"}, {time.Hour, "hour"}, {time.Minute, "minute"}, {time.Second, "second"}} {
		switch {
		case d == u.d:
			return u.name
		case d%u.d == 0:
			return fmt.Sprintf("%d %ss", d/u.d, u.name)
		}
	}
	return d.String()
}

// describeCron puts the common forms in words, from the parsed masks (so
// "@daily" and "0 0 * * *" read the same), and quotes the rest.
func (s *Schedule) describeCron() string {
	c := s.cron
	full := func(mask uint64, lo, hi int) bool { return mask&^starBit == (1<<(hi+1)-1)&^(1<<lo-1) }
	single := func(mask uint64) (int, bool) {
		return bits.TrailingZeros64(mask), bits.OnesCount64(mask&^starBit) == 1
	}
	if !full(c.Month, 1, 12) {
		return fmt.Sprintf("cron %q", strings.TrimSpace(s.spec.Expr))
	}
	everyDay := full(c.Dom, 1, 31) && full(c.Dow, 0, 6)
	if c.Dom&starBit == 0 && c.Dow&starBit == 0 { // either may match
		everyDay = full(c.Dom, 1, 31) || full(c.Dow, 0, 6)
	}
	weekday, oneWeekday := single(c.Dow)
	weekly := oneWeekday && c.Dom&starBit != 0
	dom, oneDom := single(c.Dom)
	monthly := oneDom && c.Dow&starBit != 0
	m, oneMin := single(c.Minute)
	h, oneHour := single(c.Hour)
	switch {
	case everyDay && oneMin && oneHour:
		return fmt.Sprintf("every day at %02d:%02d", h, m)
	case everyDay && oneMin && full(c.Hour, 0, 23):
		return fmt.Sprintf("every hour at :%02d", m)
	case weekly && oneMin && oneHour:
		return fmt.Sprintf("every %s at %02d:%02d", time.Weekday(weekday), h, m)
	case monthly && oneMin && oneHour:
		return fmt.Sprintf("every month on day %d at %02d:%02d", dom, h, m)
	case everyDay && full(c.Hour, 0, 23):
		for n := 1; n <= 30; n++ {
			if 60%n == 0 && c.Minute&^starBit == everyNth(n) {
				return "every " + sayDuration(time.Duration(n)*time.Minute)
			}
		}
	}
	return fmt.Sprintf("cron %q", strings.TrimSpace(s.spec.Expr))
}

// everyNth is the minute mask of "*/n".
func everyNth(n int) uint64 {
	var mask uint64
	for m := 0; m < 60; m += n {
		mask |= 1 << m
	}
	return mask
}
