package tasks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/carapace-dev/carapace/internal/sqlitedb"
)

// migrations[i] takes the scheduler's database from schema version i to
// i+1 (internal/sqlitedb).
var migrations = []string{
	0: `
-- A task, and its cursor: every slot up to cursor is accounted for in runs.
CREATE TABLE tasks (
    id                   TEXT PRIMARY KEY,
    grp                  TEXT NOT NULL,
    kind                 TEXT NOT NULL CHECK(kind IN ('cron', 'every', 'at')),
    expr                 TEXT NOT NULL,
    zone                 TEXT NOT NULL,
    prompt               TEXT NOT NULL,
    creator              TEXT NOT NULL CHECK(creator IN ('user', 'agent')),
    creator_session      TEXT NOT NULL DEFAULT '',
    creator_confirmation TEXT NOT NULL DEFAULT '',
    misfire              TEXT NOT NULL CHECK(misfire IN ('catch-up-once', 'skip')),
    enabled              INTEGER NOT NULL DEFAULT 1,
    paused_reason        TEXT NOT NULL DEFAULT '',
    fail_streak          INTEGER NOT NULL DEFAULT 0,
    created_at           INTEGER NOT NULL,        -- unix ms; the anchor of an every task
    cursor               INTEGER NOT NULL         -- unix ms
);

-- Every occurrence: claimed before its session starts (unique on task and
-- scheduled time), then how it ended. A run of missed slots beyond the
-- first few is one row: scheduled_at to until_at, count slots.
CREATE TABLE runs (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id      TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    scheduled_at INTEGER NOT NULL,                -- unix ms; a manual run: when it was asked for
    manual       INTEGER NOT NULL DEFAULT 0,
    until_at     INTEGER NOT NULL DEFAULT 0,
    count        INTEGER NOT NULL DEFAULT 1,
    state        TEXT NOT NULL CHECK(state IN ('claimed', 'running', 'ok', 'failed', 'skipped', 'unknown')),
    reason       TEXT NOT NULL DEFAULT '',        -- skipped: missed, overlap, paused; failed: why
    late_ms      INTEGER NOT NULL DEFAULT 0,
    session      TEXT NOT NULL DEFAULT '',
    started_at   INTEGER NOT NULL DEFAULT 0,
    ended_at     INTEGER NOT NULL DEFAULT 0,
    UNIQUE(task_id, scheduled_at, manual)
);
CREATE INDEX runs_task ON runs(task_id, id);
CREATE INDEX runs_open ON runs(state) WHERE state IN ('claimed', 'running');
`,
	1: `
-- An every task's slots count from its anchor: when it was asked for (an
-- agent's task: when the call that the user approved reached the core),
-- so that the fires the approval showed are the fires that happen.
ALTER TABLE tasks ADD COLUMN anchor INTEGER NOT NULL DEFAULT 0; -- unix ms
UPDATE tasks SET anchor = created_at;

-- A removed (cancelled) task is kept, with its runs, and never fires
-- again: who removed it (user or agent; an agent's session, and the
-- confirmation if the user approved the removal) and when.
ALTER TABLE tasks ADD COLUMN removed_at INTEGER NOT NULL DEFAULT 0; -- unix ms; 0: live
ALTER TABLE tasks ADD COLUMN removed_by TEXT NOT NULL DEFAULT '' CHECK(removed_by IN ('', 'user', 'agent'));
ALTER TABLE tasks ADD COLUMN removed_session TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN removed_confirmation TEXT NOT NULL DEFAULT '';
`,
}

// Run states and skip reasons.
const (
	StateClaimed = "claimed" // taken by a scheduler; its session is starting
	StateRunning = "running" // its session runs
	StateOK      = "ok"
	StateFailed  = "failed"
	StateSkipped = "skipped"
	StateUnknown = "unknown" // the core died while it ran; never rerun by itself

	ReasonMissed  = "missed"  // the core was not running (or the machine slept) at its time
	ReasonOverlap = "overlap" // the task's previous run still worked
	ReasonPaused  = "paused"  // sessions for events were paused
)

// Creators of tasks.
const (
	CreatorUser  = "user"
	CreatorAgent = "agent"
)

// Misfire policies: what runs after slots were missed.
const (
	MisfireCatchUpOnce = "catch-up-once" // the latest missed slot runs, late; the rest are skipped
	MisfireSkip        = "skip"          // every missed slot is skipped
)

// Task is a scheduled task.
type Task struct {
	ID     string
	Group  string
	Spec   Spec // Spec.Anchor: when it was asked for (NewTask.Anchor)
	Prompt string
	// Creator is CreatorUser or CreatorAgent; an agent's task names its
	// session and the confirmation that approved it.
	Creator             string
	CreatorSession      string
	CreatorConfirmation string
	Misfire             string
	Enabled             bool
	PausedReason        string // why it paused itself ("" if the user paused it or it runs)
	FailStreak          int
	CreatedAt           time.Time
	// Cursor: every slot up to it is accounted for.
	Cursor time.Time
	// Removed is set once the task is removed: it fires no more and is
	// kept, with its runs.
	Removed Removal
}

// Removal says who removed a task, and when.
type Removal struct {
	At           time.Time // zero: the task is live
	By           string    // CreatorUser or CreatorAgent
	Session      string    // the agent's session
	Confirmation string    // the confirmation by which the user let the agent remove it, if any
}

// Describe says who removed the task and when, e.g. "on 2026-11-23 06:00
// UTC by the agent (session s-1, approved by the user: confirmation c-1)".
func (r Removal) Describe() string {
	s := "on " + r.At.UTC().Format("2006-01-02 15:04 MST")
	switch r.By {
	case CreatorUser:
		return s + " by the user"
	case CreatorAgent:
		s += " by the agent (session " + r.Session
		if r.Confirmation != "" {
			s += ", approved by the user: confirmation " + r.Confirmation
		}
		return s + ")"
	}
	return s
}

// Run is one occurrence of a task, or a range of missed ones.
type Run struct {
	ID        int64
	Task      string
	Scheduled time.Time
	Manual    bool      // asked for with `carapace tasks run`
	Until     time.Time // a range of missed slots: the last; zero otherwise
	Count     int       // slots the row stands for
	State     string
	Reason    string
	Late      time.Duration
	Session   string
	Started   time.Time
	Ended     time.Time
}

// store is the scheduler's database.
type store struct {
	db *sql.DB
}

func openStore(ctx context.Context, path string) (*store, error) {
	db, err := sqlitedb.Open(ctx, path, "tasks", migrations)
	if err != nil {
		return nil, err
	}
	return &store{db: db}, nil
}

func (s *store) close() error { return s.db.Close() }

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

const taskCols = `id, grp, kind, expr, zone, prompt, creator, creator_session, creator_confirmation, misfire, enabled, paused_reason, fail_streak, created_at, cursor,
	anchor, removed_at, removed_by, removed_session, removed_confirmation`

type scanner interface{ Scan(dest ...any) error }

func scanTask(r scanner) (*Task, error) {
	var t Task
	var kind string
	var created, cursor, anchor, removed int64
	if err := r.Scan(&t.ID, &t.Group, &kind, &t.Spec.Expr, &t.Spec.Zone, &t.Prompt, &t.Creator, &t.CreatorSession,
		&t.CreatorConfirmation, &t.Misfire, &t.Enabled, &t.PausedReason, &t.FailStreak, &created, &cursor,
		&anchor, &removed, &t.Removed.By, &t.Removed.Session, &t.Removed.Confirmation); err != nil {
		return nil, err
	}
	t.Spec.Kind = Kind(kind)
	t.CreatedAt, t.Cursor, t.Spec.Anchor, t.Removed.At = fromMS(created), fromMS(cursor), fromMS(anchor), fromMS(removed)
	return &t, nil
}

func (s *store) insertTask(ctx context.Context, t *Task) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO tasks(`+taskCols+`) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		t.ID, t.Group, string(t.Spec.Kind), t.Spec.Expr, t.Spec.Zone, t.Prompt, t.Creator, t.CreatorSession, t.CreatorConfirmation,
		t.Misfire, t.Enabled, t.PausedReason, t.FailStreak, ms(t.CreatedAt), ms(t.Cursor),
		ms(t.Spec.Anchor), ms(t.Removed.At), t.Removed.By, t.Removed.Session, t.Removed.Confirmation)
	return err
}

// tasks returns the live tasks, and the removed ones too if removed.
func (s *store) tasks(ctx context.Context, removed bool) ([]*Task, error) {
	where := ` WHERE removed_at = 0`
	if removed {
		where = ""
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+taskCols+` FROM tasks`+where+` ORDER BY created_at, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

func (s *store) task(ctx context.Context, q querier, id string) (*Task, error) {
	t, err := scanTask(q.QueryRowContext(ctx, `SELECT `+taskCols+` FROM tasks WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: %q", ErrNoTask, id)
	}
	return t, err
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *store) setEnabled(ctx context.Context, id string, enabled bool, reason string, cursor time.Time) error {
	q := `UPDATE tasks SET enabled = ?, paused_reason = ?, fail_streak = CASE WHEN ? THEN 0 ELSE fail_streak END`
	args := []any{enabled, reason, enabled}
	if !cursor.IsZero() {
		q += `, cursor = max(cursor, ?)`
		args = append(args, ms(cursor))
	}
	res, err := s.db.ExecContext(ctx, q+` WHERE id = ? AND removed_at = 0`, append(args, id)...)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return s.gone(ctx, id)
	}
	return nil
}

// gone explains why live task id was not found: it was removed, or there
// is no such task.
func (s *store) gone(ctx context.Context, id string) error {
	t, err := s.task(ctx, s.db, id)
	if err != nil {
		return err
	}
	return removedError(t)
}

// markRemoved records task id removed by r, if it is live.
func (s *store) markRemoved(ctx context.Context, id string, r Removal) error {
	res, err := s.db.ExecContext(ctx, `UPDATE tasks SET removed_at = ?, removed_by = ?, removed_session = ?, removed_confirmation = ?, enabled = 0
		WHERE id = ? AND removed_at = 0`, ms(r.At), r.By, r.Session, r.Confirmation, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return s.gone(ctx, id)
	}
	return nil
}

// deleteTask deletes task id and its runs.
func (s *store) deleteTask(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM tasks WHERE id = ?`, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: %q", ErrNoTask, id)
	}
	return nil
}

const runCols = `id, task_id, scheduled_at, manual, until_at, count, state, reason, late_ms, session, started_at, ended_at`

func scanRun(r scanner) (*Run, error) {
	var x Run
	var sched, until, late, started, ended int64
	if err := r.Scan(&x.ID, &x.Task, &sched, &x.Manual, &until, &x.Count, &x.State, &x.Reason, &late, &x.Session, &started, &ended); err != nil {
		return nil, err
	}
	x.Scheduled, x.Until, x.Late = fromMS(sched), fromMS(until), time.Duration(late)*time.Millisecond
	x.Started, x.Ended = fromMS(started), fromMS(ended)
	return &x, nil
}

// runs returns task id's runs, newest first, at most limit.
func (s *store) runs(ctx context.Context, id string, limit int) ([]*Run, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+runCols+` FROM runs WHERE task_id = ? ORDER BY id DESC LIMIT ?`, id, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (s *store) run(ctx context.Context, id int64) (*Run, error) {
	return scanRun(s.db.QueryRowContext(ctx, `SELECT `+runCols+` FROM runs WHERE id = ?`, id))
}

// open reports whether task id has a run claimed or running.
func openRun(ctx context.Context, tx *sql.Tx, id string) (bool, error) {
	var n int
	err := tx.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE task_id = ? AND state IN ('claimed', 'running')`, id).Scan(&n)
	return n > 0, err
}

// insertRun adds r in tx; false if the slot was already claimed.
func insertRun(ctx context.Context, tx *sql.Tx, r *Run) (bool, error) {
	res, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO runs(task_id, scheduled_at, manual, until_at, count, state, reason, late_ms, started_at, ended_at)
		VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.Task, ms(r.Scheduled), r.Manual, ms(r.Until), max(r.Count, 1), r.State, r.Reason, r.Late.Milliseconds(), ms(r.Started), ms(r.Ended))
	if err != nil {
		return false, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	r.ID, err = res.LastInsertId()
	return true, err
}

// advance moves task id's cursor forward to c, in tx; false if another
// scheduler had already moved it to c or beyond, or the task was removed.
func advance(ctx context.Context, tx *sql.Tx, id string, from, to time.Time) (bool, error) {
	res, err := tx.ExecContext(ctx, `UPDATE tasks SET cursor = ? WHERE id = ? AND cursor = ? AND removed_at = 0`, ms(to), id, ms(from))
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// markUnknown records every run left claimed or running by a core that
// died as unknown, and returns how many.
func (s *store) markUnknown(ctx context.Context, now time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE runs SET state = 'unknown', ended_at = ? WHERE state IN ('claimed', 'running')`, ms(now))
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
