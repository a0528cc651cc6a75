package api

import "time"

// Task is a scheduled task (core/tasks) as the control API shows it.
type Task struct {
	ID       string `json:"id"`
	Group    string `json:"group"`
	Kind     string `json:"kind"` // cron, every, at
	Expr     string `json:"expr"`
	Zone     string `json:"zone"`
	Schedule string `json:"schedule"` // the schedule in words
	Prompt   string `json:"prompt"`
	Creator  string `json:"creator"` // user, or agent
	// CreatorSession and CreatorConfirmation name the session and the
	// approval of a task the agent created.
	CreatorSession      string `json:"creator_session,omitempty"`
	CreatorConfirmation string `json:"creator_confirmation,omitempty"`
	Misfire             string `json:"misfire"` // catch-up-once, skip
	Enabled             bool   `json:"enabled"`
	// PausedReason says why the task paused itself (failed runs).
	PausedReason string     `json:"paused_reason,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	Next         *time.Time `json:"next,omitempty"` // its next fire; none when paused or done
	// NextFires are its next three fires (on creation).
	NextFires []time.Time `json:"next_fires,omitempty"`
	Last      *TaskRun    `json:"last,omitempty"` // its newest run
	// RemovedAt is when the task was removed (cancelled): it fires no
	// more, and is kept, with its runs, for tasks history. RemovedBy is
	// user or agent; an agent's removal names its session and, when the
	// user confirmed it, the confirmation.
	RemovedAt           *time.Time `json:"removed_at,omitempty"`
	RemovedBy           string     `json:"removed_by,omitempty"`
	RemovedSession      string     `json:"removed_session,omitempty"`
	RemovedConfirmation string     `json:"removed_confirmation,omitempty"`
}

// TaskRun is one occurrence of a task, or a range of missed ones.
type TaskRun struct {
	ID        int64      `json:"id"`
	Task      string     `json:"task"`
	Scheduled time.Time  `json:"scheduled"`
	Manual    bool       `json:"manual,omitempty"` // `carapace tasks run`
	Until     *time.Time `json:"until,omitempty"`  // a range of missed slots: the last
	Count     int        `json:"count"`            // slots the row stands for
	State     string     `json:"state"`            // claimed, running, ok, failed, skipped, unknown
	Reason    string     `json:"reason,omitempty"` // skipped: missed, overlap, paused; failed: why
	LateMS    int64      `json:"late_ms"`
	Session   string     `json:"session,omitempty"`
	Started   *time.Time `json:"started,omitempty"`
	Ended     *time.Time `json:"ended,omitempty"`
}

// TaskRequest creates a task.
type TaskRequest struct {
	Group   string `json:"group"`
	Kind    string `json:"kind"` // cron, every, at
	Expr    string `json:"expr"`
	Zone    string `json:"zone,omitempty"`    // an IANA zone; default UTC
	Misfire string `json:"misfire,omitempty"` // default catch-up-once
	Prompt  string `json:"prompt"`
}

// MaxTaskHistory bounds one history answer (GET
// /v1/tasks/{id}/history?limit=N).
const MaxTaskHistory = 1000
