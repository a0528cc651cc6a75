package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/tasks"
)

// The scheduler (core/tasks) fires a task by publishing task.triggered for
// its group, from the core, with the run's id: the spawner starts the
// session like any event's, and tells the scheduler (agent.TaskRuns) which
// session runs it and how it ended.

// openTasks opens the scheduler's database in the home.
func (s *Server) openTasks(ctx context.Context) error {
	t, err := tasks.Open(ctx, tasks.Options{
		Path:        s.opts.Home.TasksDB(),
		Firer:       taskFirer{s},
		Logger:      s.log.With("component", "tasks"),
		Paused:      func() bool { return s.agents != nil && s.agents.Paused() },
		MaxFailures: s.cfg.Tasks.MaxFailures,
		Observe:     s.observeTask,
	})
	if err != nil {
		return fmt.Errorf("scheduled tasks: %w", err)
	}
	s.tasks = t
	return nil
}

// taskFirer publishes a task's occurrence as task.triggered.
type taskFirer struct{ s *Server }

// Fire implements tasks.Firer.
func (f taskFirer) Fire(ctx context.Context, o tasks.Occurrence) error {
	ev, err := plugin.TopicTaskTriggered.Event(o.Task.Group, plugin.TaskTrigger{
		Inbound: plugin.Inbound{Text: o.Task.Prompt}, Task: o.Task.ID, Run: o.Run,
		Scheduled: o.Scheduled.UTC().Truncate(time.Second), LateMS: o.Late.Milliseconds(), CatchUp: o.CatchUp, Manual: o.Manual,
	})
	if err != nil {
		return fmt.Errorf("publish task.triggered: %w", err)
	}
	ev.Source = "core"
	if err := f.s.bus.Publish(ctx, ev); err != nil {
		return fmt.Errorf("publish task.triggered: %w", err)
	}
	return nil
}

// taskTopics are the topics of the scheduler's events.
var taskTopics = map[string]plugin.Topic[plugin.TaskChange]{
	tasks.EventCreated: plugin.TopicTaskCreated, tasks.EventPaused: plugin.TopicTaskChanged, tasks.EventResumed: plugin.TopicTaskChanged,
	tasks.EventFired: plugin.TopicTaskFired, tasks.EventFinished: plugin.TopicTaskFinished, tasks.EventRemoved: plugin.TopicTaskRemoved,
}

// observeTask logs the scheduler's changes and puts them on the watch
// stream.
func (s *Server) observeTask(ev tasks.Event) {
	defer s.publishTask(ev)
	args := []any{"task", ev.Task.ID, "group", ev.Task.Group}
	if ev.Run != nil {
		args = append(args, "run", ev.Run.ID, "scheduled", ev.Run.Scheduled.Format(time.RFC3339))
		if ev.Run.Late > time.Second {
			args = append(args, "late", ev.Run.Late.Round(time.Second))
		}
		if ev.Run.State != "" {
			args = append(args, "state", ev.Run.State)
		}
	}
	s.log.Info("task "+ev.Type, args...)
}

var _ control.TaskBackend = (*Server)(nil)

// taskError maps the scheduler's errors to the control API's.
func taskError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, tasks.ErrNoTask):
		return fmt.Errorf("%w: %v (carapace tasks list)", api.ErrNotFound, err)
	case errors.Is(err, tasks.ErrBadTask), errors.Is(err, tasks.ErrBadSchedule):
		return fmt.Errorf("%w: %v", api.ErrInvalid, err)
	case errors.Is(err, tasks.ErrAlreadyRunning), errors.Is(err, tasks.ErrRemoved):
		return fmt.Errorf("%w: %v", api.ErrConflict, err)
	}
	return err
}

// taskView is the control API's view of st.
func taskView(st tasks.Status) api.Task {
	t := st.Task
	v := api.Task{ID: t.ID, Group: t.Group, Kind: string(t.Spec.Kind), Expr: t.Spec.Expr, Zone: t.Spec.Zone,
		Prompt: t.Prompt, Creator: t.Creator, CreatorSession: t.CreatorSession, CreatorConfirmation: t.CreatorConfirmation,
		Misfire: t.Misfire, Enabled: t.Enabled, PausedReason: t.PausedReason, CreatedAt: t.CreatedAt}
	if v.Zone == "" {
		v.Zone = "UTC"
	}
	if sched, err := tasks.Compile(t.Spec, time.Time{}); err == nil {
		v.Schedule = sched.Describe()
	}
	if !st.Next.IsZero() {
		n := st.Next.UTC()
		v.Next = &n
	}
	if st.Last != nil {
		r := runView(st.Last)
		v.Last = &r
	}
	if rm := t.Removed; !rm.At.IsZero() {
		at := rm.At.UTC()
		v.RemovedAt, v.RemovedBy, v.RemovedSession, v.RemovedConfirmation = &at, rm.By, rm.Session, rm.Confirmation
	}
	return v
}

func runView(r *tasks.Run) api.TaskRun {
	v := api.TaskRun{ID: r.ID, Task: r.Task, Scheduled: r.Scheduled.UTC(), Manual: r.Manual, Count: r.Count,
		State: r.State, Reason: r.Reason, LateMS: r.Late.Milliseconds(), Session: r.Session}
	for _, p := range []struct {
		t   time.Time
		dst **time.Time
	}{{r.Until, &v.Until}, {r.Started, &v.Started}, {r.Ended, &v.Ended}} {
		if !p.t.IsZero() {
			t := p.t.UTC()
			*p.dst = &t
		}
	}
	return v
}

// Tasks implements control.TaskBackend.
func (s *Server) Tasks(ctx context.Context) ([]api.Task, error) {
	return taskViews(s.tasks.List(ctx))
}

// AllTasks implements control.TaskBackend.
func (s *Server) AllTasks(ctx context.Context) ([]api.Task, error) {
	return taskViews(s.tasks.ListAll(ctx))
}

func taskViews(sts []tasks.Status, err error) ([]api.Task, error) {
	if err != nil {
		return nil, err
	}
	out := make([]api.Task, 0, len(sts))
	for _, st := range sts {
		out = append(out, taskView(st))
	}
	return out, nil
}

// Task implements control.TaskBackend.
func (s *Server) Task(ctx context.Context, id string) (api.Task, error) { return s.task(ctx, id) }

// task returns task id's view.
func (s *Server) task(ctx context.Context, id string) (api.Task, error) {
	st, err := s.tasks.Get(ctx, id)
	if err != nil {
		return api.Task{}, taskError(err)
	}
	return taskView(st), nil
}

// AddTask implements control.TaskBackend: a task the user creates.
func (s *Server) AddTask(ctx context.Context, req api.TaskRequest) (api.Task, error) {
	t, err := s.tasks.Add(ctx, tasks.NewTask{Group: req.Group, Spec: tasks.Spec{Kind: tasks.Kind(req.Kind), Expr: req.Expr, Zone: req.Zone},
		Prompt: req.Prompt, Creator: tasks.CreatorUser, Misfire: req.Misfire})
	if err != nil {
		return api.Task{}, taskError(err)
	}
	if _, ok := s.cfg.Groups[t.Group]; !ok {
		s.log.Warn("task created for a group that does not start sessions: its runs will fail until [groups."+t.Group+"] is in config.toml", "task", t.ID)
	}
	v, err := s.task(ctx, t.ID)
	if err != nil {
		return api.Task{}, err
	}
	if sched, err := tasks.Compile(t.Spec, time.Time{}); err == nil {
		for _, n := range sched.NextN(t.Cursor, 3) {
			v.NextFires = append(v.NextFires, n.UTC())
		}
	}
	return v, nil
}

// PauseTask implements control.TaskBackend.
func (s *Server) PauseTask(ctx context.Context, id string) (api.Task, error) {
	if err := s.tasks.Pause(ctx, id); err != nil {
		return api.Task{}, taskError(err)
	}
	return s.task(ctx, id)
}

// ResumeTask implements control.TaskBackend.
func (s *Server) ResumeTask(ctx context.Context, id string) (api.Task, error) {
	if err := s.tasks.Resume(ctx, id); err != nil {
		return api.Task{}, taskError(err)
	}
	return s.task(ctx, id)
}

// RunTask implements control.TaskBackend.
func (s *Server) RunTask(ctx context.Context, id string) (api.TaskRun, error) {
	r, err := s.tasks.RunNow(ctx, id)
	if err != nil {
		return api.TaskRun{}, taskError(err)
	}
	return runView(r), nil
}

// RemoveTask implements control.TaskBackend: the user removes a task.
func (s *Server) RemoveTask(ctx context.Context, id string) error {
	return taskError(s.tasks.Remove(ctx, id, tasks.Removal{By: tasks.CreatorUser}))
}

// PurgeTask implements control.TaskBackend.
func (s *Server) PurgeTask(ctx context.Context, id string) error {
	return taskError(s.tasks.Purge(ctx, id))
}

// TaskHistory implements control.TaskBackend.
func (s *Server) TaskHistory(ctx context.Context, id string, limit int) ([]api.TaskRun, error) {
	rs, err := s.tasks.History(ctx, id, limit)
	if err != nil {
		return nil, taskError(err)
	}
	out := make([]api.TaskRun, 0, len(rs))
	for _, r := range rs {
		out = append(out, runView(r))
	}
	return out, nil
}

// publishTask puts a scheduler event on the bus for the watch stream.
func (s *Server) publishTask(ev tasks.Event) {
	topic, ok := taskTopics[ev.Type]
	if !ok || s.bus == nil {
		return
	}
	var view api.Task
	if ev.Type == tasks.EventRemoved {
		view = taskView(tasks.Status{Task: ev.Task}) // purged, it is no longer in the store
	} else if st, err := s.tasks.Get(context.Background(), ev.Task.ID); err == nil {
		view = taskView(st)
	} else {
		s.log.Warn("watch: a task event could not be described", "task", ev.Task.ID, "err", err)
		return
	}
	change := plugin.TaskChange{Task: view}
	if ev.Run != nil {
		r := runView(ev.Run)
		change.Run = &r
	}
	s.bus.PublishCore(topic.Event(ev.Task.Group, change))
}
