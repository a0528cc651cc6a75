package tasks

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/internal/sqlitedb"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// Errors of the scheduler's operations.
var (
	ErrNoTask         = errors.New("no such task")
	ErrBadTask        = errors.New("bad task")
	ErrAlreadyRunning = errors.New("the task's previous run still works")
	// ErrRemoved: the task was removed; it is kept for its history only.
	ErrRemoved = errors.New("the task was removed")
)

// removedError is ErrRemoved for t, saying who removed it and when.
func removedError(t *Task) error {
	if t.Removed.At.IsZero() {
		return fmt.Errorf("%w: %q", ErrNoTask, t.ID)
	}
	return fmt.Errorf("%w: task %s was removed %s; carapace tasks show %s has its prompt, carapace tasks history %s its runs",
		ErrRemoved, t.ID, t.Removed.Describe(), t.ID, t.ID)
}

// Defaults of Options.
const (
	DefaultMaxFailures = 3
	DefaultGrace       = time.Minute
	DefaultCatchUpGap  = 30 * time.Second
	// MaxPrompt bounds a task's prompt, in bytes.
	MaxPrompt = 32 << 10
	// maxSkipRows is how many missed slots get a row each; the rest of a
	// gap share one row (a 1-second task after a night asleep).
	maxSkipRows = 100
	// maxSlots bounds the slots counted in one pass, so that no schedule
	// makes a pass endless; those beyond are counted by the next pass.
	maxSlots = 1_000_000
)

// Clock is the scheduler's time: the real one, or a fake in tests.
type Clock interface {
	Now() time.Time
	// After is time.After.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Occurrence is a run the scheduler asks to start.
type Occurrence struct {
	Run       int64
	Task      *Task
	Scheduled time.Time
	Late      time.Duration // how long after its time it starts; a catch-up is late by the gap
	CatchUp   bool          // the one run of missed slots
	Manual    bool          // `carapace tasks run`
}

// Firer starts the session of an occurrence: the core publishes
// task.triggered for the task's group, and its session starter does the
// rest, reporting back with Started and Finished. An error means no
// session will start: the run is recorded failed.
type Firer interface {
	Fire(ctx context.Context, o Occurrence) error
}

// Event is a change the scheduler reports (Options.Observe): for the watch
// stream and the logs.
type Event struct {
	Type string // EventCreated, EventFired, EventFinished, EventPaused, EventResumed, EventRemoved
	Task *Task
	Run  *Run // fired and finished
}

// Event types.
const (
	EventCreated  = "created"
	EventFired    = "fired"
	EventFinished = "finished"
	EventPaused   = "paused"
	EventResumed  = "resumed"
	EventRemoved  = "removed"
)

// Options configure a Scheduler.
type Options struct {
	Path   string // the database file
	Clock  Clock  // nil: the real clock
	Firer  Firer
	Logger *slog.Logger
	// Paused reports whether sessions for events are paused (the core's
	// and the app's pause): due slots are then recorded skipped(paused).
	Paused func() bool
	// Observe, if set, is told of every Event; it must not block.
	Observe func(Event)
	// MaxFailures is how many failed runs in a row pause a task.
	MaxFailures int
	// Grace is how late a slot may be and still count as on time.
	Grace time.Duration
	// CatchUpGap is the least time between two catch-up runs of one
	// group, so that a core waking after a long sleep does not start
	// every missed task at once.
	CatchUpGap time.Duration
}

// Scheduler fires tasks. Create it with Open; Run runs it; the other
// methods are its operations (the CLI's, the agent's tools'). It is safe for
// concurrent use.
type Scheduler struct {
	opts  Options
	clock Clock
	log   *slog.Logger
	db    *store
	kick  chan struct{}

	stopping atomic.Bool // the core is stopping: runs cut short are unknown, not failed

	mu      sync.Mutex
	entries map[string]*entry
	catchUp map[string]time.Time // group → its last catch-up's start
}

// entry is a task in memory, with its compiled schedule and next slot.
type entry struct {
	task  *Task
	sched *Schedule
	next  time.Time // the first slot after the cursor; zero if none
}

// Open opens the database at opts.Path, records the runs a dead core left
// claimed or running as unknown (they are never rerun by themselves), and
// loads the tasks.
func Open(ctx context.Context, opts Options) (*Scheduler, error) {
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxFailures <= 0 {
		opts.MaxFailures = DefaultMaxFailures
	}
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	if opts.CatchUpGap <= 0 {
		opts.CatchUpGap = DefaultCatchUpGap
	}
	db, err := openStore(ctx, opts.Path)
	if err != nil {
		return nil, err
	}
	s := &Scheduler{opts: opts, clock: opts.Clock, log: opts.Logger, db: db, kick: make(chan struct{}, 1),
		entries: map[string]*entry{}, catchUp: map[string]time.Time{}}
	n, err := db.markUnknown(ctx, s.clock.Now())
	if err != nil {
		db.close()
		return nil, fmt.Errorf("tasks: record the runs an earlier core left unfinished: %w", err)
	}
	if n > 0 {
		s.log.Warn("tasks: runs in flight when the core stopped are recorded unknown, not run again", "runs", n)
	}
	ts, err := db.tasks(ctx, false)
	if err != nil {
		db.close()
		return nil, fmt.Errorf("tasks: load: %w", err)
	}
	for _, t := range ts {
		sched, err := Compile(t.Spec, time.Time{})
		if err != nil {
			s.log.Error("tasks: a stored task's schedule no longer compiles; it will not fire", "task", t.ID, "err", err)
			continue
		}
		s.entries[t.ID] = s.newEntry(t, sched)
	}
	return s, nil
}

func (s *Scheduler) newEntry(t *Task, sched *Schedule) *entry {
	e := &entry{task: t, sched: sched}
	if n, ok := sched.Next(t.Cursor); ok {
		e.next = n
	}
	return e
}

// Close closes the database. Run must have returned.
func (s *Scheduler) Close() error { return s.db.close() }

// NewTask is what Add takes.
type NewTask struct {
	Group string
	Spec  Spec // Anchor is set from the field below
	// Anchor is when the task was asked for: an every task's slots count
	// from it. The agent's schedule_task gives the time its call reached
	// the core, so that the fires its confirmation showed are the fires
	// that happen however long the user took to approve; zero is now.
	Anchor              time.Time
	Prompt              string
	Creator             string // "" is CreatorUser
	CreatorSession      string
	CreatorConfirmation string
	Misfire             string // "" is MisfireCatchUpOnce
}

// Check validates nt as Add would at time now and returns its compiled
// schedule (for the confirmation's "next three fire times").
func Check(nt NewTask, now time.Time) (*Schedule, error) {
	if err := home.CheckGroup(nt.Group); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadTask, err)
	}
	if strings.TrimSpace(nt.Prompt) == "" {
		return nil, fmt.Errorf("%w: the prompt is empty: say what the agent should do each time", ErrBadTask)
	}
	if len(nt.Prompt) > MaxPrompt {
		return nil, fmt.Errorf("%w: the prompt is %d bytes, over the limit of %d", ErrBadTask, len(nt.Prompt), MaxPrompt)
	}
	switch nt.Misfire {
	case "", MisfireCatchUpOnce, MisfireSkip:
	default:
		return nil, fmt.Errorf("%w: misfire policy %q: use %s or %s", ErrBadTask, nt.Misfire, MisfireCatchUpOnce, MisfireSkip)
	}
	switch nt.Creator {
	case "", CreatorUser, CreatorAgent:
	default:
		return nil, fmt.Errorf("%w: creator %q", ErrBadTask, nt.Creator)
	}
	if nt.Spec.Kind == KindEvery {
		if d, err := time.ParseDuration(strings.TrimSpace(nt.Spec.Expr)); err == nil && d%time.Millisecond != 0 {
			return nil, fmt.Errorf("%w: every %s: give whole milliseconds at most (slots are stored to the millisecond)", ErrBadSchedule, nt.Spec.Expr)
		}
	}
	spec := nt.Spec
	spec.Anchor = anchorOf(nt, now)
	if spec.Anchor.After(now) {
		return nil, fmt.Errorf("%w: asked for at %s, after now (%s)", ErrBadTask, spec.Anchor.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
	}
	return Compile(spec, now)
}

// anchorOf is nt's anchor as stored (to the millisecond): its Anchor, or now.
func anchorOf(nt NewTask, now time.Time) time.Time {
	if nt.Anchor.IsZero() {
		return now.UTC().Truncate(time.Millisecond)
	}
	return nt.Anchor.UTC().Truncate(time.Millisecond)
}

// Add validates nt and stores it as a new, enabled task; its first slot
// is after now (an every task's slots count from nt.Anchor, but none
// before now is run or recorded: the task did not exist then).
func (s *Scheduler) Add(ctx context.Context, nt NewTask) (*Task, error) {
	now := s.clock.Now().UTC().Truncate(time.Millisecond)
	sched, err := Check(nt, now)
	if err != nil {
		return nil, err
	}
	t := &Task{ID: newID(), Group: nt.Group, Spec: nt.Spec, Prompt: nt.Prompt, Creator: nt.Creator,
		CreatorSession: nt.CreatorSession, CreatorConfirmation: nt.CreatorConfirmation, Misfire: nt.Misfire,
		Enabled: true, CreatedAt: now, Cursor: now}
	t.Spec.Anchor = anchorOf(nt, now)
	if t.Creator == "" {
		t.Creator = CreatorUser
	}
	if t.Misfire == "" {
		t.Misfire = MisfireCatchUpOnce
	}
	if err := s.db.insertTask(ctx, t); err != nil {
		return nil, fmt.Errorf("tasks: store the new task: %w", err)
	}
	s.mu.Lock()
	s.entries[t.ID] = s.newEntry(t, sched)
	s.mu.Unlock()
	s.observe(EventCreated, t, nil)
	s.wake()
	return t, nil
}

// newID returns a task id: "t-" and 8 random lowercase letters and digits.
func newID() string {
	const alphabet = "abcdefghijkmnpqrstuvwxyz23456789"
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "t-" + string(b)
}

// Status is a task with what a person asks of it.
type Status struct {
	Task *Task
	Next time.Time // its next slot; zero if none (paused, or an at task that fired)
	Last *Run      // its newest run, if any
}

// List returns every live task, oldest first, with its next slot and
// newest run.
func (s *Scheduler) List(ctx context.Context) ([]Status, error) { return s.list(ctx, false) }

// ListAll is List with the removed tasks too.
func (s *Scheduler) ListAll(ctx context.Context) ([]Status, error) { return s.list(ctx, true) }

func (s *Scheduler) list(ctx context.Context, removed bool) ([]Status, error) {
	ts, err := s.db.tasks(ctx, removed)
	if err != nil {
		return nil, fmt.Errorf("tasks: list: %w", err)
	}
	out := make([]Status, 0, len(ts))
	for _, t := range ts {
		out = append(out, s.status(ctx, t))
	}
	return out, nil
}

// Get returns task id with its next slot and newest run; a removed task
// too (its Removed says so).
func (s *Scheduler) Get(ctx context.Context, id string) (Status, error) {
	t, err := s.db.task(ctx, s.db.db, id)
	if err != nil {
		return Status{}, err
	}
	return s.status(ctx, t), nil
}

// status is t with its next slot (if it runs) and newest run.
func (s *Scheduler) status(ctx context.Context, t *Task) Status {
	st := Status{Task: t}
	s.mu.Lock()
	if e := s.entries[t.ID]; e != nil && t.Enabled {
		st.Next = e.next
	}
	s.mu.Unlock()
	if rs, err := s.db.runs(ctx, t.ID, 1); err == nil && len(rs) > 0 {
		st.Last = rs[0]
	}
	return st
}

// History returns task id's runs, newest first, at most limit; a removed
// task's too.
func (s *Scheduler) History(ctx context.Context, id string, limit int) ([]*Run, error) {
	if _, err := s.db.task(ctx, s.db.db, id); err != nil {
		return nil, err
	}
	return s.db.runs(ctx, id, limit)
}

// Pause stops task id from firing; its slots until Resume are not run
// (nor recorded: the task is off).
func (s *Scheduler) Pause(ctx context.Context, id string) error {
	return s.setEnabled(ctx, id, false, "")
}

// Resume starts task id again from now: the slots it missed while paused
// are not caught up.
func (s *Scheduler) Resume(ctx context.Context, id string) error {
	return s.setEnabled(ctx, id, true, "")
}

func (s *Scheduler) setEnabled(ctx context.Context, id string, enabled bool, reason string) error {
	var cursor time.Time
	if enabled {
		cursor = s.clock.Now().UTC().Truncate(time.Millisecond)
	}
	if err := s.db.setEnabled(ctx, id, enabled, reason, cursor); err != nil {
		return fmt.Errorf("tasks: %w", err)
	}
	t, err := s.db.task(ctx, s.db.db, id)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if e := s.entries[id]; e != nil {
		s.entries[id] = s.newEntry(t, e.sched)
	}
	s.mu.Unlock()
	if enabled {
		s.observe(EventResumed, t, nil)
		s.wake()
	} else {
		s.observe(EventPaused, t, nil)
	}
	return nil
}

// Remove removes task id, as r says who (r.At is set here): it fires no
// more, and is kept, with its runs, for ListAll, Get and History. A run
// in flight goes on and is recorded. A task already removed is refused
// with ErrRemoved.
func (s *Scheduler) Remove(ctx context.Context, id string, r Removal) error {
	if r.By != CreatorUser && r.By != CreatorAgent {
		return fmt.Errorf("%w: removed by %q", ErrBadTask, r.By)
	}
	r.At = s.clock.Now().UTC().Truncate(time.Millisecond)
	if err := s.db.markRemoved(ctx, id, r); err != nil {
		return fmt.Errorf("tasks: remove %s: %w", id, err)
	}
	s.forget(id)
	t, err := s.db.task(ctx, s.db.db, id)
	if err != nil {
		return err
	}
	s.observe(EventRemoved, t, nil)
	return nil
}

// Purge deletes task id and its runs for good, removed or not: `carapace
// tasks rm --purge`, the user's alone.
func (s *Scheduler) Purge(ctx context.Context, id string) error {
	t, err := s.db.task(ctx, s.db.db, id)
	if err != nil {
		return err
	}
	if err := s.db.deleteTask(ctx, id); err != nil {
		return fmt.Errorf("tasks: purge %s: %w", id, err)
	}
	s.forget(id)
	if t.Removed.At.IsZero() {
		s.observe(EventRemoved, t, nil)
	}
	return nil
}

// forget drops task id from the tasks that fire.
func (s *Scheduler) forget(id string) {
	s.mu.Lock()
	delete(s.entries, id)
	s.mu.Unlock()
}

// RunNow runs task id once now, paused or not, without shifting its
// schedule; refused while its previous run still works.
func (s *Scheduler) RunNow(ctx context.Context, id string) (*Run, error) {
	now := s.clock.Now().UTC().Truncate(time.Millisecond)
	var r *Run
	var t *Task
	err := sqlitedb.Tx(ctx, s.db.db, func(tx *sql.Tx) error {
		var err error
		if t, err = s.db.task(ctx, tx, id); err != nil {
			return err
		}
		if !t.Removed.At.IsZero() {
			return removedError(t)
		}
		busy, err := openRun(ctx, tx, id)
		if err != nil {
			return err
		}
		if busy {
			return fmt.Errorf("%w: task %s is running; wait for it to end", ErrAlreadyRunning, id)
		}
		r = &Run{Task: id, Scheduled: now, Manual: true, State: StateClaimed, Started: now}
		ok, err := insertRun(ctx, tx, r)
		if err == nil && !ok {
			err = fmt.Errorf("%w: task %s was asked to run twice in the same millisecond", ErrAlreadyRunning, id)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	s.fire(ctx, Occurrence{Run: r.ID, Task: t, Scheduled: now, Manual: true}, r)
	return r, nil
}

// Started records the session of run id.
func (s *Scheduler) Started(ctx context.Context, runID int64, session string) error {
	_, err := s.db.db.ExecContext(ctx, `UPDATE runs SET state = 'running', session = ? WHERE id = ? AND state = 'claimed'`, session, runID)
	return err
}

// Stopping tells the scheduler the core is stopping: a run that ends in
// error from now on was cut short by the stop, and is recorded unknown
// (it may or may not have done its work), not failed, and does not count
// towards pausing its task.
func (s *Scheduler) Stopping() { s.stopping.Store(true) }

// Finished records how run id ended (err nil: ok), counts its task's
// failures in a row, and pauses the task after MaxFailures of them.
func (s *Scheduler) Finished(ctx context.Context, runID int64, runErr error) error {
	now := s.clock.Now()
	state, reason := StateOK, ""
	switch {
	case runErr != nil && s.stopping.Load():
		state, reason = StateUnknown, textutil.Clip(textutil.OneLine("the core stopped while it ran: "+runErr.Error()), 500)
	case runErr != nil:
		state, reason = StateFailed, textutil.Clip(textutil.OneLine(runErr.Error()), 500)
	}
	var t *Task
	var r *Run
	var paused bool
	err := sqlitedb.Tx(ctx, s.db.db, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE runs SET state = ?, reason = ?, ended_at = ? WHERE id = ? AND state IN ('claimed', 'running')`,
			state, reason, ms(now), runID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("run %d is not in flight", runID)
		}
		var taskID string
		if err := tx.QueryRowContext(ctx, `SELECT task_id FROM runs WHERE id = ?`, runID).Scan(&taskID); err != nil {
			return err
		}
		switch state {
		case StateOK:
			_, err = tx.ExecContext(ctx, `UPDATE tasks SET fail_streak = 0 WHERE id = ?`, taskID)
		case StateFailed:
			_, err = tx.ExecContext(ctx, `UPDATE tasks SET fail_streak = fail_streak + 1 WHERE id = ?`, taskID)
		}
		if err != nil {
			return err
		}
		if t, err = s.db.task(ctx, tx, taskID); err != nil {
			return err
		}
		if state == StateFailed && t.Enabled && t.FailStreak >= s.opts.MaxFailures {
			t.Enabled, t.PausedReason = false, fmt.Sprintf("paused after %d failed runs in a row; `carapace tasks resume %s` starts it again", t.FailStreak, t.ID)
			if _, err := tx.ExecContext(ctx, `UPDATE tasks SET enabled = 0, paused_reason = ? WHERE id = ?`, t.PausedReason, t.ID); err != nil {
				return err
			}
			paused = true
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("tasks: record how run %d ended: %w", runID, err)
	}
	if r, err = s.db.run(ctx, runID); err == nil {
		s.observe(EventFinished, t, r)
	}
	if paused {
		s.mu.Lock()
		if e := s.entries[t.ID]; e != nil {
			e.task = t
		}
		s.mu.Unlock()
		s.log.Warn("tasks: "+t.PausedReason, "task", t.ID, "group", t.Group)
		s.observe(EventPaused, t, nil)
	}
	return nil
}

// Run fires the tasks until ctx ends.
func (s *Scheduler) Run(ctx context.Context) {
	for {
		wake := s.Tick(ctx)
		var after <-chan time.Time
		if !wake.IsZero() {
			after = s.clock.After(max(wake.Sub(s.clock.Now()), 0))
		}
		select {
		case <-ctx.Done():
			return
		case <-after:
		case <-s.kick:
		}
	}
}

// wake makes Run look again (a task was added or resumed).
func (s *Scheduler) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Tick accounts for every slot due at the clock's now, fires what must
// run, and returns when it has next work (zero: none).
func (s *Scheduler) Tick(ctx context.Context) time.Time {
	now := s.clock.Now()
	s.mu.Lock()
	var due []*entry
	for _, e := range s.entries {
		if e.task.Enabled && !e.next.IsZero() && !e.next.After(now) {
			due = append(due, e)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(due, func(a, b *entry) int { return a.next.Compare(b.next) })
	var wake time.Time
	deferred := map[*entry]bool{}
	for _, e := range due {
		if later := s.due(ctx, e, now); !later.IsZero() {
			deferred[e] = true
			if wake.IsZero() || later.Before(wake) {
				wake = later
			}
		}
	}
	s.mu.Lock()
	for _, e := range s.entries {
		if e.task.Enabled && !e.next.IsZero() && !deferred[e] && (wake.IsZero() || e.next.Before(wake)) {
			wake = e.next
		}
	}
	s.mu.Unlock()
	return wake
}

// due accounts for e's slots up to now: at most one runs (on time, or the
// catch-up of missed ones), the others are recorded skipped. It returns a
// time to look again when a catch-up waits for its group's pace.
func (s *Scheduler) due(ctx context.Context, e *entry, now time.Time) time.Time {
	s.mu.Lock()
	t, sched, first := e.task, e.sched, e.next
	s.mu.Unlock()

	var firsts []time.Time // the first maxSkipRows slots
	count := 0
	last := first
	for at, ok := first, true; ok && !at.After(now) && count < maxSlots; at, ok = sched.Next(at) {
		if len(firsts) < maxSkipRows {
			firsts = append(firsts, at)
		}
		last = at
		count++
	}

	paused := s.opts.Paused != nil && s.opts.Paused()
	late := now.Sub(last)
	run, catchUp := false, false
	switch {
	case paused:
	case late <= s.opts.Grace:
		run = true
	case t.Misfire == MisfireCatchUpOnce:
		run, catchUp = true, true
	}
	if catchUp {
		s.mu.Lock()
		prev := s.catchUp[t.Group]
		if !prev.IsZero() && now.Sub(prev) < s.opts.CatchUpGap {
			s.mu.Unlock()
			return prev.Add(s.opts.CatchUpGap) // paced: the slots wait, unaccounted, till then
		}
		s.catchUp[t.Group] = now
		s.mu.Unlock()
	}

	var fired *Run
	skipReason := ReasonMissed
	if paused {
		skipReason = ReasonPaused
	}
	err := sqlitedb.Tx(ctx, s.db.db, func(tx *sql.Tx) error {
		fired = nil
		moved, err := advance(ctx, tx, t.ID, t.Cursor, last)
		if err != nil || !moved {
			return err // another scheduler accounted for them first
		}
		var skipped []*Run
		if run {
			busy, err := openRun(ctx, tx, t.ID)
			if err != nil {
				return err
			}
			if busy {
				skipped = append(skipped, &Run{Task: t.ID, Scheduled: last, State: StateSkipped, Reason: ReasonOverlap, Late: late, Ended: now})
			} else {
				fired = &Run{Task: t.ID, Scheduled: last, State: StateClaimed, Late: late, Started: now}
			}
		}
		// The slots not run: one row each, but beyond maxSkipRows of them
		// the remainder share one row.
		skipN := count
		if run {
			skipN--
		}
		for i := 0; i < skipN && i < maxSkipRows; i++ {
			r := &Run{Task: t.ID, Scheduled: firsts[i], State: StateSkipped, Reason: skipReason, Late: now.Sub(firsts[i]), Ended: now}
			if i == maxSkipRows-1 && skipN > maxSkipRows {
				r.Count, r.Until = skipN-i, last
				if run {
					r.Until, _ = prevSlot(sched, firsts[i], last)
				}
			}
			skipped = append(skipped, r)
		}
		for _, r := range skipped {
			if _, err := insertRun(ctx, tx, r); err != nil {
				return err
			}
		}
		if fired != nil {
			ok, err := insertRun(ctx, tx, fired)
			if err == nil && !ok {
				fired = nil // claimed already: it is someone else's
			}
			return err
		}
		return nil
	})
	if err != nil {
		s.log.Error("tasks: could not account for a task's slots; will try again", "task", t.ID, "err", err)
		return now.Add(time.Second)
	}
	// Reload the cursor: ours, or the one another scheduler wrote.
	if fresh, err := s.db.task(ctx, s.db.db, t.ID); err == nil {
		s.mu.Lock()
		if cur := s.entries[t.ID]; cur == e {
			s.entries[t.ID] = s.newEntry(fresh, sched)
		}
		s.mu.Unlock()
	}
	if fired != nil {
		if catchUp {
			s.log.Info("tasks: catching up missed slots with one run", "task", t.ID, "group", t.Group, "slots", count, "late", late.Round(time.Second))
		}
		s.fire(ctx, Occurrence{Run: fired.ID, Task: t, Scheduled: last, Late: late, CatchUp: catchUp}, fired)
	}
	return time.Time{}
}

// prevSlot returns the slot before last, counting from at (a slot before
// it); false if there is none.
func prevSlot(sched *Schedule, at, last time.Time) (time.Time, bool) {
	prev, found := time.Time{}, false
	for x, ok := at, true; ok && x.Before(last); x, ok = sched.Next(x) {
		prev, found = x, true
	}
	return prev, found
}

// fire hands the claimed occurrence to the Firer; if no session will
// start, the run is recorded failed.
func (s *Scheduler) fire(ctx context.Context, o Occurrence, r *Run) {
	s.observe(EventFired, o.Task, r)
	if s.opts.Firer == nil {
		_ = s.Finished(ctx, o.Run, errors.New("no session starter"))
		return
	}
	if err := s.opts.Firer.Fire(ctx, o); err != nil {
		s.log.Warn("tasks: the task's session did not start", "task", o.Task.ID, "run", o.Run, "err", err)
		if ferr := s.Finished(ctx, o.Run, fmt.Errorf("the session did not start: %w", err)); ferr != nil {
			s.log.Error("tasks: record a run that did not start", "run", o.Run, "err", ferr)
		}
	}
}

func (s *Scheduler) observe(typ string, t *Task, r *Run) {
	if s.opts.Observe != nil {
		s.opts.Observe(Event{Type: typ, Task: t, Run: r})
	}
}
