package api

import "time"

// The watch stream (GET /v1/watch; core/control serves and reads it) is
// JSON lines of WatchEvent: first one "snapshot" with the status, the
// sessions, the pending confirmations, the plugins and the tasks, then one
// line per change, in order:
//
//	confirmation.requested  {"confirmation": Confirmation}
//	confirmation.resolved   {"confirmation": Confirmation} with decision, surface, decider
//	session.opened          {"session": Session}
//	session.closed          {"session": Session}
//	plugin.health           {"plugin": PluginStatus}
//	core.status             {"status": Status}: paused or resumed, draining
//	task.created            {"task": Task}
//	task.changed            {"task": Task}: paused (by the user, or itself after failures) or resumed
//	task.fired              {"task": Task, "task_run": TaskRun}: a run started
//	task.finished           {"task": Task, "task_run": TaskRun}: how it ended
//	task.removed            {"task": Task}
//	end                     {"error": why}: the core ended the stream; read a new snapshot
//
// A change may show in the snapshot too: apply them as states, not as
// deltas. Unknown types are for newer cores: skip them.

// Types of WatchEvent. Those of the changes are also the core's bus topics
// that carry them (WatchTopics).
const (
	WatchSnapshot              = "snapshot"
	WatchConfirmationRequested = "confirmation.requested"
	WatchConfirmationResolved  = "confirmation.resolved"
	WatchSessionOpened         = "session.opened"
	WatchSessionClosed         = "session.closed"
	WatchPluginHealth          = "plugin.health"
	WatchStatus                = "core.status"
	WatchTaskCreated           = "task.created"
	WatchTaskChanged           = "task.changed"
	WatchTaskFired             = "task.fired"
	WatchTaskFinished          = "task.finished"
	WatchTaskRemoved           = "task.removed"
	WatchEnd                   = "end"
)

// WatchTopics are the bus topics a watch follows, one per change type.
var WatchTopics = []string{WatchConfirmationRequested, WatchConfirmationResolved, WatchSessionOpened, WatchSessionClosed, WatchPluginHealth, WatchStatus,
	WatchTaskCreated, WatchTaskChanged, WatchTaskFired, WatchTaskFinished, WatchTaskRemoved}

// WatchEvent is one line of the watch stream.
type WatchEvent struct {
	Type string    `json:"type"`
	Time time.Time `json:"time"`
	// The snapshot; with core.status, the status alone.
	Status        *Status        `json:"status,omitempty"`
	Sessions      []Session      `json:"sessions,omitempty"`
	Confirmations []Confirmation `json:"confirmations,omitempty"`
	Plugins       []PluginStatus `json:"plugins,omitempty"`
	Tasks         []Task         `json:"tasks,omitempty"`
	// The changes.
	Confirmation *Confirmation `json:"confirmation,omitempty"`
	Session      *Session      `json:"session,omitempty"`
	Plugin       *PluginStatus `json:"plugin,omitempty"`
	Task         *Task         `json:"task,omitempty"`
	TaskRun      *TaskRun      `json:"task_run,omitempty"`
	// End: why the core ended the stream.
	Error string `json:"error,omitempty"`
}
