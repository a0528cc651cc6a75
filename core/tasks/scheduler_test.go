package tasks

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3" // the driver, which the binary links (sqlitedb does not)

	"github.com/carapace-dev/carapace/internal/sqlitedb"
)

// fakeClock is a Clock that moves only when told.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
}

type waiter struct {
	at time.Time
	c  chan time.Time
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{now: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, waiter{c.now.Add(d), ch})
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.c <- c.now
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
}

// recorder is a Firer that records what it is asked to start.
type recorder struct {
	mu   sync.Mutex
	occs []Occurrence
	err  error
}

func (r *recorder) Fire(_ context.Context, o Occurrence) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.occs = append(r.occs, o)
	return r.err
}

func (r *recorder) fired() []Occurrence {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Occurrence(nil), r.occs...)
}

// t0 is a Monday morning, the tests' start.
var t0 = time.Date(2026, 11, 23, 6, 0, 0, 0, time.UTC)

type env struct {
	t     *testing.T
	path  string
	clock *fakeClock
	fire  *recorder
	s     *Scheduler
	evs   []Event
	mu    sync.Mutex
	pause bool
}

func newEnv(t *testing.T) *env {
	e := &env{t: t, path: filepath.Join(t.TempDir(), "tasks.sqlite"), clock: newFakeClock(t0), fire: &recorder{}}
	e.s = e.open()
	return e
}

// open opens another scheduler on the env's database and clock.
func (e *env) open() *Scheduler {
	e.t.Helper()
	s, err := Open(e.t.Context(), Options{Path: e.path, Clock: e.clock, Firer: e.fire,
		Paused:  func() bool { e.mu.Lock(); defer e.mu.Unlock(); return e.pause },
		Observe: func(ev Event) { e.mu.Lock(); e.evs = append(e.evs, ev); e.mu.Unlock() }})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = s.Close() })
	return s
}

func (e *env) add(kind Kind, expr, misfire, group string) *Task {
	e.t.Helper()
	if group == "" {
		group = "main"
	}
	tk, err := e.s.Add(e.t.Context(), NewTask{Group: group, Spec: Spec{Kind: kind, Expr: expr}, Prompt: "summarise my calendar", Misfire: misfire})
	if err != nil {
		e.t.Fatal(err)
	}
	return tk
}

func (e *env) history(id string) []*Run {
	e.t.Helper()
	rs, err := e.s.History(e.t.Context(), id, 1000)
	if err != nil {
		e.t.Fatal(err)
	}
	return rs
}

// states counts a task's runs by state (and reason).
func (e *env) states(id string) map[string]int {
	out := map[string]int{}
	for _, r := range e.history(id) {
		k := r.State
		if r.Reason != "" && r.State == StateSkipped {
			k += "(" + r.Reason + ")"
		}
		out[k] += r.Count
	}
	return out
}

func sameCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestOnTimeRunAndItsEnd(t *testing.T) {
	e := newEnv(t)
	tk := e.add(KindEvery, "1h", "", "")
	if n := len(e.fire.fired()); n != 0 || !e.s.Tick(t.Context()).Equal(t0.Add(time.Hour)) {
		t.Fatalf("before its time: %d fired, next wake wrong", n)
	}
	e.clock.Advance(time.Hour + 3*time.Second)
	e.s.Tick(t.Context())
	occ := e.fire.fired()
	if len(occ) != 1 || occ[0].CatchUp || occ[0].Late != 3*time.Second || !occ[0].Scheduled.Equal(t0.Add(time.Hour)) {
		t.Fatalf("fired %+v", occ)
	}
	if err := e.s.Started(t.Context(), occ[0].Run, "s-1"); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Finished(t.Context(), occ[0].Run, nil); err != nil {
		t.Fatal(err)
	}
	rs := e.history(tk.ID)
	if len(rs) != 1 || rs[0].State != StateOK || rs[0].Session != "s-1" || rs[0].Late != 3*time.Second {
		t.Fatalf("history %+v", rs[0])
	}
	// Ticking again at the same time fires nothing more.
	e.s.Tick(t.Context())
	if n := len(e.fire.fired()); n != 1 {
		t.Fatalf("%d fired after a second tick", n)
	}
}

// Two schedulers on one database, ticking at once, start a slot once.
func TestClaimsRaceToOneRun(t *testing.T) {
	for range 20 {
		e := newEnv(t)
		tk := e.add(KindEvery, "1h", "", "")
		other := e.open()
		e.clock.Advance(time.Hour)
		var wg sync.WaitGroup
		for _, s := range []*Scheduler{e.s, other} {
			wg.Go(func() { s.Tick(t.Context()) })
		}
		wg.Wait()
		if n := len(e.fire.fired()); n != 1 {
			t.Fatalf("%d runs of one slot from two schedulers", n)
		}
		if got := e.states(tk.ID); !sameCounts(got, map[string]int{StateClaimed: 1}) {
			t.Fatalf("runs %v", got)
		}
	}
}

// A core that dies after claiming a slot leaves it unknown: the next core
// does not run it again, and fires the next slot on time.
func TestCrashAfterClaimIsUnknownNeverRerun(t *testing.T) {
	e := newEnv(t)
	tk := e.add(KindEvery, "1h", "", "")
	e.clock.Advance(time.Hour)
	e.s.Tick(t.Context())
	if n := len(e.fire.fired()); n != 1 {
		t.Fatalf("%d fired", n)
	}
	_ = e.s.Close() // the core dies: no Finished

	e.s = e.open()
	e.s.Tick(t.Context())
	if n := len(e.fire.fired()); n != 1 {
		t.Fatalf("the slot in flight ran again after the restart (%d fires)", n)
	}
	if got := e.states(tk.ID); !sameCounts(got, map[string]int{StateUnknown: 1}) {
		t.Fatalf("runs %v, want the one unknown", got)
	}
	e.clock.Advance(time.Hour)
	e.s.Tick(t.Context())
	occ := e.fire.fired()
	if len(occ) != 2 || !occ[1].Scheduled.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("next slot: %+v", occ)
	}
}

// A restart in the middle of an interval does not fire the next slot
// early.
func TestRestartDoesNotFireEarly(t *testing.T) {
	e := newEnv(t)
	e.add(KindEvery, "24h", "", "")
	e.clock.Advance(12 * time.Hour)
	_ = e.s.Close()
	e.s = e.open()
	if wake := e.s.Tick(t.Context()); !wake.Equal(t0.Add(24 * time.Hour)) {
		t.Fatalf("next wake %v, want %v", wake, t0.Add(24*time.Hour))
	}
	if n := len(e.fire.fired()); n != 0 {
		t.Fatalf("%d fired in the middle of the interval", n)
	}
}

// Missed slots: catch-up-once runs the latest, late, and skips the rest;
// skip runs none.
func TestMissedSlots(t *testing.T) {
	for _, tc := range []struct {
		misfire string
		fires   int
		want    map[string]int
	}{
		{MisfireCatchUpOnce, 1, map[string]int{StateSkipped + "(missed)": 2, StateClaimed: 1}},
		{MisfireSkip, 0, map[string]int{StateSkipped + "(missed)": 3}},
	} {
		t.Run(tc.misfire, func(t *testing.T) {
			e := newEnv(t)
			tk := e.add(KindEvery, "24h", tc.misfire, "")
			e.clock.Advance(3*24*time.Hour + time.Hour) // asleep for three days
			e.s.Tick(t.Context())
			occ := e.fire.fired()
			if len(occ) != tc.fires {
				t.Fatalf("%d fired, want %d", len(occ), tc.fires)
			}
			if tc.fires == 1 && (!occ[0].CatchUp || occ[0].Late != time.Hour || !occ[0].Scheduled.Equal(t0.Add(72*time.Hour))) {
				t.Errorf("catch-up %+v, want the latest slot, late by 1h", occ[0])
			}
			if got := e.states(tk.ID); !sameCounts(got, tc.want) {
				t.Errorf("runs %v, want %v", got, tc.want)
			}
			if rows := len(e.history(tk.ID)); rows != 3 {
				t.Errorf("%d rows, want 3 (one a slot)", rows)
			}
		})
	}
}

// A 1-second task after a day asleep: one catch-up, every other slot
// accounted for, in a bounded number of rows.
func TestLongGapIsCountedInFewRows(t *testing.T) {
	e := newEnv(t)
	tk := e.add(KindEvery, "1s", "", "")
	e.clock.Advance(24 * time.Hour)
	e.s.Tick(t.Context())
	if n := len(e.fire.fired()); n != 1 {
		t.Fatalf("%d fired", n)
	}
	rows := e.history(tk.ID)
	if len(rows) != maxSkipRows+1 {
		t.Fatalf("%d rows, want %d", len(rows), maxSkipRows+1)
	}
	if got := e.states(tk.ID); !sameCounts(got, map[string]int{StateSkipped + "(missed)": 86399, StateClaimed: 1}) {
		t.Fatalf("runs %v", got)
	}
	var rng *Run
	for _, r := range rows {
		if r.Count > 1 {
			rng = r
		}
	}
	if rng == nil || !rng.Until.Equal(t0.Add(86399*time.Second)) || !rng.Scheduled.Equal(t0.Add(maxSkipRows*time.Second)) {
		t.Fatalf("range row %+v", rng)
	}
}

// Twenty tasks of one group missed overnight start one catch-up per
// CatchUpGap; another group is not held back by them.
func TestCatchUpsArePacedPerGroup(t *testing.T) {
	e := newEnv(t)
	for range 20 {
		e.add(KindEvery, "24h", "", "main")
	}
	e.add(KindEvery, "24h", "", "family")
	e.clock.Advance(2*24*time.Hour + time.Minute*5)
	wake := e.s.Tick(t.Context())
	byGroup := func() map[string]int {
		out := map[string]int{}
		for _, o := range e.fire.fired() {
			out[o.Task.Group]++
		}
		return out
	}
	if got := byGroup(); got["main"] != 1 || got["family"] != 1 {
		t.Fatalf("first pass fired %v, want one of each group", got)
	}
	if want := e.clock.Now().Add(DefaultCatchUpGap); !wake.Equal(want) {
		t.Fatalf("next wake %v, want %v (the pace)", wake, want)
	}
	for i := 2; i <= 20; i++ {
		e.clock.Advance(DefaultCatchUpGap)
		e.s.Tick(t.Context())
		if got := byGroup()["main"]; got != i {
			t.Fatalf("after %d gaps %d catch-ups of main, want %d", i-1, got, i)
		}
	}
}

// A slot whose previous run still works is skipped(overlap).
func TestOverlapIsSkipped(t *testing.T) {
	e := newEnv(t)
	tk := e.add(KindEvery, "1m", "", "")
	e.clock.Advance(time.Minute)
	e.s.Tick(t.Context())
	e.clock.Advance(time.Minute)
	e.s.Tick(t.Context())
	if n := len(e.fire.fired()); n != 1 {
		t.Fatalf("%d fired while the first ran", n)
	}
	if got := e.states(tk.ID); !sameCounts(got, map[string]int{StateClaimed: 1, StateSkipped + "(overlap)": 1}) {
		t.Fatalf("runs %v", got)
	}
	_ = e.s.Finished(t.Context(), e.fire.fired()[0].Run, nil)
	e.clock.Advance(time.Minute)
	e.s.Tick(t.Context())
	if n := len(e.fire.fired()); n != 2 {
		t.Fatalf("%d fired after the first ended", n)
	}
}

// While sessions for events are paused, due slots are skipped(paused).
func TestPausedCoreSkipsSlots(t *testing.T) {
	e := newEnv(t)
	tk := e.add(KindEvery, "1h", "", "")
	e.pause = true
	e.clock.Advance(time.Hour)
	e.s.Tick(t.Context())
	e.pause = false
	e.clock.Advance(time.Hour)
	e.s.Tick(t.Context())
	if got := e.states(tk.ID); !sameCounts(got, map[string]int{StateSkipped + "(paused)": 1, StateClaimed: 1}) {
		t.Fatalf("runs %v", got)
	}
}

// A task paused by the user does not fire; resumed, it starts from then.
func TestPauseAndResumeATask(t *testing.T) {
	e := newEnv(t)
	tk := e.add(KindEvery, "1h", "", "")
	if err := e.s.Pause(t.Context(), tk.ID); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(3*time.Hour + 30*time.Minute)
	e.s.Tick(t.Context())
	if err := e.s.Resume(t.Context(), tk.ID); err != nil {
		t.Fatal(err)
	}
	e.s.Tick(t.Context())
	if n := len(e.fire.fired()); n != 0 {
		t.Fatalf("%d fired for slots passed while paused", n)
	}
	e.clock.Advance(30 * time.Minute)
	e.s.Tick(t.Context())
	if occ := e.fire.fired(); len(occ) != 1 || !occ[0].Scheduled.Equal(t0.Add(4*time.Hour)) {
		t.Fatalf("after resume: %+v", occ)
	}
	if err := e.s.Pause(t.Context(), "t-nothere"); !errors.Is(err, ErrNoTask) {
		t.Fatalf("pause of an unknown task: %v", err)
	}
}

// MaxFailures failed runs in a row pause the task, and say why.
func TestFailuresPauseTheTask(t *testing.T) {
	e := newEnv(t)
	tk := e.add(KindEvery, "1h", "", "")
	for i := range DefaultMaxFailures {
		e.clock.Advance(time.Hour)
		e.s.Tick(t.Context())
		occ := e.fire.fired()
		if len(occ) != i+1 {
			t.Fatalf("run %d did not fire", i+1)
		}
		if err := e.s.Finished(t.Context(), occ[i].Run, errors.New("model API unreachable")); err != nil {
			t.Fatal(err)
		}
	}
	st, err := e.s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st[0].Task.Enabled || st[0].Task.PausedReason == "" || !st[0].Next.IsZero() {
		t.Fatalf("after %d failures: %+v", DefaultMaxFailures, st[0])
	}
	e.clock.Advance(time.Hour)
	e.s.Tick(t.Context())
	if n := len(e.fire.fired()); n != DefaultMaxFailures {
		t.Fatalf("a paused task fired")
	}
	paused := false
	for _, ev := range e.evs {
		paused = paused || ev.Type == EventPaused && ev.Task.ID == tk.ID
	}
	if !paused {
		t.Error("no paused event")
	}
}

// A session that does not start is a failed run.
func TestFireErrorIsAFailedRun(t *testing.T) {
	e := newEnv(t)
	tk := e.add(KindEvery, "1h", "", "")
	e.fire.err = errors.New("group main is not configured")
	e.clock.Advance(time.Hour)
	e.s.Tick(t.Context())
	rs := e.history(tk.ID)
	if len(rs) != 1 || rs[0].State != StateFailed || rs[0].Reason == "" {
		t.Fatalf("runs %+v", rs)
	}
}

// RunNow runs once at once, does not shift the schedule, and is refused
// while a run works.
func TestRunNow(t *testing.T) {
	e := newEnv(t)
	tk := e.add(KindEvery, "1h", "", "")
	e.clock.Advance(10 * time.Minute)
	r, err := e.s.RunNow(t.Context(), tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if occ := e.fire.fired(); len(occ) != 1 || !occ[0].Manual {
		t.Fatalf("run now: %+v", occ)
	}
	if _, err := e.s.RunNow(t.Context(), tk.ID); !errors.Is(err, ErrAlreadyRunning) {
		t.Fatalf("a second run now while the first works: %v", err)
	}
	_ = e.s.Finished(t.Context(), r.ID, nil)
	e.clock.Advance(50 * time.Minute)
	e.s.Tick(t.Context())
	if occ := e.fire.fired(); len(occ) != 2 || occ[1].Manual || !occ[1].Scheduled.Equal(t0.Add(time.Hour)) {
		t.Fatalf("the schedule after a run now: %+v", occ)
	}
}

// An at task fires once.
func TestAtFiresOnce(t *testing.T) {
	e := newEnv(t)
	tk := e.add(KindAt, t0.Add(2*time.Hour).Format(time.RFC3339), "", "")
	for range 3 {
		e.clock.Advance(2 * time.Hour)
		e.s.Tick(t.Context())
	}
	if n := len(e.fire.fired()); n != 1 {
		t.Fatalf("an at task fired %d times", n)
	}
	if wake := e.s.Tick(t.Context()); !wake.IsZero() {
		t.Fatalf("wake %v after the only slot", wake)
	}
	if _, err := e.s.Add(t.Context(), NewTask{Group: "main", Spec: Spec{Kind: KindAt, Expr: t0.Format(time.RFC3339)}, Prompt: "x"}); !errors.Is(err, ErrBadSchedule) {
		t.Fatalf("an at in the past: %v", err)
	}
	_ = tk
}

// Run wakes for the next slot on its own.
func TestRunLoop(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { e.s.Run(ctx); close(done) }()
	e.add(KindEvery, "1h", "", "")
	deadline := time.Now().Add(10 * time.Second)
	for len(e.fire.fired()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Run did not fire the slot")
		}
		e.clock.Advance(time.Minute)
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if occ := e.fire.fired(); len(occ) != 1 || !occ[0].Scheduled.Equal(t0.Add(time.Hour)) {
		t.Fatalf("fired %+v", occ)
	}
}

func TestAddRefusesBadTasks(t *testing.T) {
	e := newEnv(t)
	for _, nt := range []NewTask{
		{Group: "Main!", Spec: Spec{Kind: KindEvery, Expr: "1h"}, Prompt: "x"},
		{Group: "main", Spec: Spec{Kind: KindEvery, Expr: "1h"}, Prompt: "  "},
		{Group: "main", Spec: Spec{Kind: KindEvery, Expr: "1h"}, Prompt: "x", Misfire: "sometimes"},
		{Group: "main", Spec: Spec{Kind: KindEvery, Expr: "1.0005s"}, Prompt: "x"},
		{Group: "main", Spec: Spec{Kind: KindEvery, Expr: "500ms"}, Prompt: "x"},
	} {
		if _, err := e.s.Add(t.Context(), nt); err == nil {
			t.Errorf("Add(%+v) succeeded", nt)
		}
	}
	if st, _ := e.s.List(t.Context()); len(st) != 0 {
		t.Fatalf("%d tasks stored after refusals", len(st))
	}
}

// A daily task at 02:30 in New York, with the scheduler ticking every few
// minutes through both transition days: it fires once each day, at the
// end of the gap in spring and at the first 01:30 in autumn, and a
// restart inside the repeated hour does not fire it again.
func TestDailyTaskAcrossDST(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		expr    string
		day     time.Time // local midnight of the transition day
		want    time.Time // the one fire of the day
		restart time.Time // a restart inside the day, after the fire
	}{
		{"spring forward", "30 2 * * *", time.Date(2026, 3, 8, 0, 0, 0, 0, ny), time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC), time.Date(2026, 3, 8, 7, 20, 0, 0, time.UTC)},
		{"fall back", "30 1 * * *", time.Date(2026, 11, 1, 0, 0, 0, 0, ny), time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC), time.Date(2026, 11, 1, 6, 10, 0, 0, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &env{t: t, path: filepath.Join(t.TempDir(), "tasks.sqlite"), clock: newFakeClock(tc.day.Add(-time.Hour)), fire: &recorder{}}
			e.s = e.open()
			if _, err := e.s.Add(t.Context(), NewTask{Group: "main", Spec: Spec{Kind: KindCron, Expr: tc.expr, Zone: "America/New_York"}, Prompt: "x"}); err != nil {
				t.Fatal(err)
			}
			end := time.Date(tc.day.Year(), tc.day.Month(), tc.day.Day()+1, 1, 0, 0, 0, ny) // before the next day's slot
			for e.clock.Now().Before(end) {
				e.clock.Advance(5 * time.Minute)
				if !e.clock.Now().Before(tc.restart) && e.clock.Now().Before(tc.restart.Add(5*time.Minute)) {
					_ = e.s.Close()
					e.s = e.open()
				}
				e.s.Tick(t.Context())
				for _, o := range e.fire.fired() {
					_ = e.s.Finished(t.Context(), o.Run, nil)
				}
			}
			occ := e.fire.fired()
			if len(occ) != 1 || !occ[0].Scheduled.Equal(tc.want) || occ[0].CatchUp {
				t.Fatalf("fired %+v, want once at %v", occ, tc.want)
			}
		})
	}
}

// A run cut short by the core's stop is unknown, not failed, and does not
// count towards pausing the task.
func TestRunCutByAStopIsUnknown(t *testing.T) {
	e := newEnv(t)
	tk := e.add(KindEvery, "1h", "", "")
	e.clock.Advance(time.Hour)
	e.s.Tick(t.Context())
	e.s.Stopping()
	if err := e.s.Finished(t.Context(), e.fire.fired()[0].Run, errors.New("the agent exited with status 143")); err != nil {
		t.Fatal(err)
	}
	st, err := e.s.Get(t.Context(), tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Last.State != StateUnknown || st.Task.FailStreak != 0 {
		t.Fatalf("run %+v, fail streak %d", st.Last, st.Task.FailStreak)
	}
}

// A removed task fires no more — here, nor in a scheduler opened after it
// — and is kept with its runs: ListAll, Get and History have it, List does
// not; running, pausing, resuming or removing it again are refused as
// removed; a run in flight when it was removed still ends. Purge deletes
// it and its runs.
func TestRemoveKeepsTheTask(t *testing.T) {
	e := newEnv(t)
	tk := e.add(KindEvery, "1h", "", "")
	e.clock.Advance(time.Hour)
	e.s.Tick(t.Context())
	occ := e.fire.fired()
	if len(occ) != 1 {
		t.Fatalf("fired %+v", occ)
	}
	by := Removal{By: CreatorAgent, Session: "s-1", Confirmation: "c-1"}
	if err := e.s.Remove(t.Context(), tk.ID, by); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Finished(t.Context(), occ[0].Run, nil); err != nil {
		t.Fatalf("the run in flight at the removal cannot end: %v", err)
	}
	later := e.open() // another scheduler on the same database
	for i := 0; i < 5; i++ {
		e.clock.Advance(time.Hour)
		e.s.Tick(t.Context())
		later.Tick(t.Context())
	}
	if n := len(e.fire.fired()); n != 1 {
		t.Fatalf("a removed task fired %d times more", n-1)
	}
	st, err := e.s.Get(t.Context(), tk.ID)
	want := Removal{At: t0.Add(time.Hour), By: CreatorAgent, Session: "s-1", Confirmation: "c-1"}
	if err != nil || st.Task.Removed != want || st.Task.Enabled || !st.Next.IsZero() {
		t.Fatalf("Get: %+v, %v; want removed %+v", st.Task, err, want)
	}
	if rs := e.history(tk.ID); len(rs) != 1 || rs[0].State != StateOK {
		t.Fatalf("the removed task's runs: %+v", rs)
	}
	if live, _ := e.s.List(t.Context()); len(live) != 0 {
		t.Errorf("List has the removed task: %+v", live)
	}
	if all, _ := later.ListAll(t.Context()); len(all) != 1 || all[0].Task.ID != tk.ID {
		t.Errorf("ListAll: %+v", all)
	}
	for name, op := range map[string]func() error{
		"run":    func() error { _, err := e.s.RunNow(t.Context(), tk.ID); return err },
		"pause":  func() error { return e.s.Pause(t.Context(), tk.ID) },
		"resume": func() error { return e.s.Resume(t.Context(), tk.ID) },
		"remove": func() error { return e.s.Remove(t.Context(), tk.ID, Removal{By: CreatorUser}) },
	} {
		if err := op(); !errors.Is(err, ErrRemoved) || !strings.Contains(err.Error(), "by the agent (session s-1") {
			t.Errorf("%s of a removed task: %v", name, err)
		}
	}
	if err := e.s.Remove(t.Context(), "t-nothere", Removal{By: CreatorUser}); !errors.Is(err, ErrNoTask) {
		t.Errorf("remove of an unknown task: %v", err)
	}
	if err := e.s.Remove(t.Context(), tk.ID, Removal{}); !errors.Is(err, ErrBadTask) {
		t.Errorf("remove by nobody: %v", err)
	}

	if err := e.s.Purge(t.Context(), tk.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.History(t.Context(), tk.ID, 10); !errors.Is(err, ErrNoTask) {
		t.Errorf("history of a purged task: %v", err)
	}
	var runs int
	if err := e.s.db.db.QueryRow(`SELECT count(*) FROM runs`).Scan(&runs); err != nil || runs != 0 {
		t.Errorf("%d runs left after the purge (%v)", runs, err)
	}
}

// A database written before tasks had an anchor and removals migrates:
// its every task keeps counting from its creation, and it is live.
func TestMigrateAnchorAndRemoval(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.sqlite")
	db, err := sqlitedb.Open(t.Context(), path, "tasks", migrations[:1])
	if err != nil {
		t.Fatal(err)
	}
	created := t0.Add(-90 * time.Minute)
	if _, err := db.Exec(`INSERT INTO tasks(id, grp, kind, expr, zone, prompt, creator, misfire, created_at, cursor)
		VALUES('t-old', 'main', 'every', '1h', '', 'x', 'user', 'skip', ?, ?)`, created.UnixMilli(), t0.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	db.Close()
	e := &env{t: t, path: path, clock: newFakeClock(t0), fire: &recorder{}}
	e.s = e.open()
	st, err := e.s.Get(t.Context(), "t-old")
	if err != nil || !st.Task.Spec.Anchor.Equal(created) || !st.Task.Removed.At.IsZero() || !st.Next.Equal(created.Add(2*time.Hour)) {
		t.Fatalf("the migrated task: %+v next %v, %v", st.Task, st.Next, err)
	}
}
