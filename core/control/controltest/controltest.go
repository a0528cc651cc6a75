// Package controltest provides an in-memory control.Backend and a helper
// that serves a Backend on a real Unix socket, for tests of the control API
// and of its clients (the CLI, the menu-bar app).
package controltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/home"
)

// Backend is an in-memory control.Backend that records what it is asked to
// do. The zero value is not usable; call NewBackend.
type Backend struct {
	// Fail, if set, is called first by every method that can fail, with
	// the method's name ("OpenSession", "CloseSession", "Decide"); a
	// non-nil result is returned as the method's error.
	Fail func(method string) error
	// OnStop, if set, is called in its own goroutine by Stop, for example
	// to shut the server down as a real core would.
	OnStop func()

	home home.Dir

	mu            sync.Mutex
	status        api.Status
	sessions      []api.Session
	confirmations []api.Confirmation // pending
	decided       []api.Confirmation // resolved, most recent last
	watchers      []chan control.Change
	nextID        int
	closed        []string
	decisions     []Decision
	stops         int
	restarts      []string
	tasks         []api.Task
	taskCalls     []string
	raw           map[string]json.RawMessage // the arguments RawConfirmation answers for a confirmation whose Arguments hide something
	checks        map[string]api.PluginCheck // what VerifyPlugin answers, by plugin
	verified      []string                   // the plugins VerifyPlugin was asked about
}

// Decision is one call of Decide that succeeded.
type Decision = api.Decision

// NewBackend returns a Backend for home h whose Status reports version
// "test", this process's pid and the time of the call.
func NewBackend(h home.Dir) *Backend {
	return &Backend{home: h, status: api.Status{
		Version: "test",
		PID:     os.Getpid(),
		Started: time.Now(),
		Home:    string(h),
	}}
}

// SetStatus sets what Status reports; Home, Sessions and
// PendingConfirmations are always filled in from the backend's state.
func (b *Backend) SetStatus(st api.Status) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.status = st
}

// AddConfirmation adds a pending confirmation and tells the watches.
func (b *Backend) AddConfirmation(c api.Confirmation) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.confirmations = append(b.confirmations, c)
	b.emitLocked(api.WatchEvent{Type: api.WatchConfirmationRequested, Time: time.Now().UTC(), Confirmation: &c})
}

// AddConfirmationRaw adds a pending confirmation whose Arguments are a
// display that hides part of raw, the arguments as they run (c.Hidden says
// what), and tells the watches. RawConfirmation answers raw for it.
func (b *Backend) AddConfirmationRaw(c api.Confirmation, raw json.RawMessage) {
	b.mu.Lock()
	if b.raw == nil {
		b.raw = map[string]json.RawMessage{}
	}
	b.raw[c.ID] = raw
	b.mu.Unlock()
	b.AddConfirmation(c)
}

// Closed returns the ids CloseSession closed, in order.
func (b *Backend) Closed() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.closed)
}

// Decisions returns the confirmations answered, in order.
func (b *Backend) Decisions() []Decision {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.decisions)
}

// Stops returns how many times Stop was called.
func (b *Backend) Stops() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stops
}

// WaitClosed fails t unless session id is closed within five seconds.
func (b *Backend) WaitClosed(t testing.TB, id string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(b.Closed(), id) {
		if time.Now().After(deadline) {
			t.Fatalf("session %s was not closed; closed: %v", id, b.Closed())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (b *Backend) fail(method string) error {
	if b.Fail == nil {
		return nil
	}
	return b.Fail(method)
}

// Status implements control.Backend.
func (b *Backend) Status(context.Context) api.Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.status
	st.Home = string(b.home)
	st.Sessions = len(b.sessions)
	st.PendingConfirmations = len(b.confirmations)
	st.Plugins = slices.Clone(st.Plugins)
	return st
}

// Pause implements control.Backend.
func (b *Backend) Pause(_ context.Context, paused bool) api.Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.status.Paused = paused
	st := b.status
	st.PendingConfirmations = len(b.confirmations)
	b.emitLocked(api.WatchEvent{Type: api.WatchStatus, Time: time.Now().UTC(), Status: &st})
	return st
}

// Stop implements control.Backend.
func (b *Backend) Stop() {
	b.mu.Lock()
	b.stops++
	b.status.Draining = true
	b.mu.Unlock()
	if b.OnStop != nil {
		go b.OnStop()
	}
}

// OpenSession implements control.Backend: ids are s1, s2, …; the runtime is
// "none".
func (b *Backend) OpenSession(_ context.Context, req api.SessionRequest) (api.Session, *api.Agent, error) {
	if err := b.fail("OpenSession"); err != nil {
		return api.Session{}, nil, err
	}
	group := req.Group
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nextID++
	id := fmt.Sprintf("s%d", b.nextID)
	s := api.Session{ID: id, Group: group, Socket: b.home.SessionSocket(id), Runtime: "none", Started: time.Now()}
	var agent *api.Agent
	if req.Runtime != "" && req.Runtime != "none" {
		// A container session: the "agent" prints its command (or prompt)
		// on stdout, "to stderr" on stderr, and exits with the status of
		// an "exit N" command, 0 otherwise.
		s.Runtime = req.Runtime
		out := make(chan api.Output, 3)
		what := strings.Join(req.Command, " ")
		if req.Prompt != "" {
			what = "prompt: " + req.Prompt
		}
		exit := 0
		if len(req.Command) == 2 && req.Command[0] == "exit" {
			exit, _ = strconv.Atoi(req.Command[1])
		}
		out <- api.Output{Stream: "stdout", Data: what + "\n"}
		out <- api.Output{Stream: "stderr", Data: "to stderr\n"}
		out <- api.Output{Exit: &exit}
		close(out)
		agent = &api.Agent{Output: out}
	}
	b.sessions = append(b.sessions, s)
	return s, agent, nil
}

// CloseSession implements control.Backend.
func (b *Backend) CloseSession(_ context.Context, id string) error {
	if err := b.fail("CloseSession"); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	i := slices.IndexFunc(b.sessions, func(s api.Session) bool { return s.ID == id })
	if i < 0 {
		return fmt.Errorf("session %s: %w", id, api.ErrNotFound)
	}
	b.sessions = slices.Delete(b.sessions, i, i+1)
	b.closed = append(b.closed, id)
	return nil
}

// Sessions implements control.Backend.
func (b *Backend) Sessions(context.Context) []api.Session {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.sessions)
}

// Confirmations implements control.Backend.
func (b *Backend) Confirmations(_ context.Context, recent bool) []api.Confirmation {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := slices.Clone(b.confirmations)
	if recent {
		out = append(out, b.decided...)
	}
	return out
}

// Decide implements control.Backend: the first decision wins; a decision
// with a hash other than the confirmation's, or on one already decided,
// fails with api.ErrConflict and changes nothing.
func (b *Backend) Decide(_ context.Context, d api.Decision) (api.Confirmation, error) {
	if err := b.fail("Decide"); err != nil {
		return api.Confirmation{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if i := slices.IndexFunc(b.decided, func(c api.Confirmation) bool { return c.ID == d.ID }); i >= 0 {
		c := b.decided[i]
		return c, fmt.Errorf("confirmation %s is already decided: %s (%s): %w", d.ID, c.Decision, c.Surface, api.ErrConflict)
	}
	i := slices.IndexFunc(b.confirmations, func(c api.Confirmation) bool { return c.ID == d.ID })
	if i < 0 {
		return api.Confirmation{}, fmt.Errorf("confirmation %s: %w", d.ID, api.ErrNotFound)
	}
	c := b.confirmations[i]
	if d.ArgsHash != c.ArgsHash {
		return c, fmt.Errorf("confirmation %s: the arguments changed since they were shown: %w", d.ID, api.ErrConflict)
	}
	if d.Approve && len(c.Hidden) > 0 && !d.Raw {
		return c, fmt.Errorf("confirmation %s: the arguments shown were partly hidden, so they cannot be approved there: %w", d.ID, api.ErrConflict)
	}
	now := time.Now().UTC()
	c.Decision, c.Surface, c.Decider, c.DecidedAt = "denied", d.Surface, d.Decider, &now
	if d.Approve {
		c.Decision = "approved"
	}
	b.confirmations = slices.Delete(b.confirmations, i, i+1)
	b.decided = append(b.decided, c)
	b.decisions = append(b.decisions, d)
	b.emitLocked(api.WatchEvent{Type: api.WatchConfirmationResolved, Time: now, Confirmation: &c})
	return c, nil
}

// RawConfirmation implements control.Backend: a pending confirmation with
// its arguments as they run (AddConfirmationRaw's, else its Arguments)
// and Raw set.
func (b *Backend) RawConfirmation(_ context.Context, id string) (api.Confirmation, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := slices.IndexFunc(b.confirmations, func(c api.Confirmation) bool { return c.ID == id })
	if i < 0 {
		return api.Confirmation{}, fmt.Errorf("confirmation %s is not pending: %w", id, api.ErrConflict)
	}
	c := b.confirmations[i]
	if raw, ok := b.raw[id]; ok {
		c.Arguments = raw
	}
	c.ArgumentsOmitted, c.Raw = false, true
	return c, nil
}

// Changes implements control.Backend: a feed of what Emit sends from now
// on.
func (b *Backend) Changes() (control.Changes, error) {
	if err := b.fail("Watch"); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	f := &feed{b: b, ch: make(chan control.Change, 64)}
	b.watchers = append(b.watchers, f.ch)
	return f, nil
}

// feed is one watch's changes.
type feed struct {
	b  *Backend
	ch chan control.Change
}

// Next implements control.Changes.
func (f *feed) Next(ctx context.Context) (control.Change, error) {
	select {
	case c, ok := <-f.ch:
		if !ok {
			return control.Change{}, control.ErrStopping
		}
		return c, nil
	case <-ctx.Done():
		return control.Change{}, ctx.Err()
	}
}

// Close implements control.Changes.
func (f *feed) Close() {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	if i := slices.Index(f.b.watchers, f.ch); i >= 0 {
		f.b.watchers = slices.Delete(f.b.watchers, i, i+1)
		close(f.ch)
	}
}

// Emit sends ev to every watch (dropped for a watch with no room), as the
// core would: its member encoded as the change's payload.
func (b *Backend) Emit(ev api.WatchEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.emitLocked(ev)
}

func (b *Backend) emitLocked(ev api.WatchEvent) {
	c := control.Change{Type: ev.Type, Time: ev.Time, Payload: payloadOf(ev)}
	for _, ch := range b.watchers {
		select {
		case ch <- c:
		default:
		}
	}
}

// payloadOf encodes the member of ev that its change carries (for a task
// change, the plugin SDK's TaskChange: {"task", "task_run"}).
func payloadOf(ev api.WatchEvent) json.RawMessage {
	var v any = struct {
		Task *api.Task    `json:"task,omitempty"`
		Run  *api.TaskRun `json:"task_run,omitempty"`
	}{ev.Task, ev.TaskRun}
	switch {
	case ev.Confirmation != nil:
		v = ev.Confirmation
	case ev.Session != nil:
		v = ev.Session
	case ev.Plugin != nil:
		v = ev.Plugin
	case ev.Status != nil:
		v = ev.Status
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // the API's types always encode
	}
	return b
}

// TempHome returns a new home in a short temporary directory (Unix socket
// paths are limited to about 104 bytes), removed when the test ends.
func TempHome(t testing.TB) home.Dir {
	t.Helper()
	dir, err := os.MkdirTemp("", "ct")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return home.Dir(dir)
}

// Start serves b on the control socket at socket until the test ends, and
// returns the server. The server logs to the test's output.
func Start(t testing.TB, b control.Backend, socket string) *control.Server {
	t.Helper()
	ln, err := control.Listen(socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := control.NewServer(b, slog.New(slog.NewTextHandler(t.Output(), nil)))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("shut down the control server: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return srv
}

var _ control.Backend = (*Backend)(nil)

// RestartPlugin implements control.Backend: it reports the plugin of that
// name from the status as restarted and healthy, or api.ErrNotFound.
func (b *Backend) RestartPlugin(_ context.Context, name string) (api.PluginStatus, error) {
	if err := b.fail("RestartPlugin"); err != nil {
		return api.PluginStatus{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, p := range b.status.Plugins {
		if p.Name == name {
			p.Healthy, p.State, p.Category = true, "healthy", ""
			b.status.Plugins[i] = p
			b.restarts = append(b.restarts, name)
			return p, nil
		}
	}
	return api.PluginStatus{}, fmt.Errorf("plugin %s: %w", name, api.ErrNotFound)
}

// SetCheck sets what VerifyPlugin answers for plugin pc.Name; a plugin of
// the status without one answers Checked false (no check of its own).
func (b *Backend) SetCheck(pc api.PluginCheck) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.checks == nil {
		b.checks = map[string]api.PluginCheck{}
	}
	b.checks[pc.Name] = pc
}

// Verified returns the plugins VerifyPlugin was asked about, in order.
func (b *Backend) Verified() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.verified)
}

var _ control.VerifyBackend = (*Backend)(nil)

// VerifyPlugin implements control.VerifyBackend: the check SetCheck set,
// or Checked false for a plugin of the status without one; api.ErrNotFound
// for a plugin the status does not list, api.ErrConflict for one that is
// not healthy.
func (b *Backend) VerifyPlugin(_ context.Context, name string) (api.PluginCheck, error) {
	if err := b.fail("VerifyPlugin"); err != nil {
		return api.PluginCheck{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.verified = append(b.verified, name)
	for _, p := range b.status.Plugins {
		if p.Name != name {
			continue
		}
		if !p.Healthy && p.State != "degraded" {
			return api.PluginCheck{}, fmt.Errorf("plugin %s is %s: %w", name, p.State, api.ErrConflict)
		}
		if pc, ok := b.checks[name]; ok {
			return pc, nil
		}
		return api.PluginCheck{Name: name}, nil
	}
	return api.PluginCheck{}, fmt.Errorf("plugin %s: %w", name, api.ErrNotFound)
}

// Restarts returns the names of the plugins restarted so far.
func (b *Backend) Restarts() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.restarts)
}

var _ control.TaskBackend = (*Backend)(nil)

// AddTaskView stores t as the core's, for Tasks and the task actions.
func (b *Backend) AddTaskView(t api.Task) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tasks = append(b.tasks, t)
}

// TaskCalls returns the task actions asked for, in order: "run ID",
// "pause ID", "resume ID", "rm ID".
func (b *Backend) TaskCalls() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.taskCalls...)
}

// Tasks implements control.TaskBackend.
func (b *Backend) Tasks(context.Context) ([]api.Task, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]api.Task(nil), b.tasks...), nil
}

// AddTask implements control.TaskBackend: the fake creates no tasks.
func (b *Backend) AddTask(context.Context, api.TaskRequest) (api.Task, error) {
	return api.Task{}, fmt.Errorf("%w: the fake core creates no tasks (AddTaskView)", api.ErrInvalid)
}

// taskCall records a task action on task id.
func (b *Backend) taskCall(verb, id string) (api.Task, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.taskCalls = append(b.taskCalls, verb+" "+id)
	for _, t := range b.tasks {
		if t.ID == id {
			return t, nil
		}
	}
	return api.Task{}, fmt.Errorf("%w: no task %q", api.ErrNotFound, id)
}

// PauseTask implements control.TaskBackend: recorded.
func (b *Backend) PauseTask(_ context.Context, id string) (api.Task, error) {
	return b.taskCall("pause", id)
}

// ResumeTask implements control.TaskBackend: recorded.
func (b *Backend) ResumeTask(_ context.Context, id string) (api.Task, error) {
	return b.taskCall("resume", id)
}

// RunTask implements control.TaskBackend: recorded.
func (b *Backend) RunTask(_ context.Context, id string) (api.TaskRun, error) {
	_, err := b.taskCall("run", id)
	return api.TaskRun{Task: id, State: "claimed", Manual: true}, err
}

// RemoveTask implements control.TaskBackend: recorded.
func (b *Backend) RemoveTask(_ context.Context, id string) error {
	_, err := b.taskCall("rm", id)
	return err
}

// TaskHistory implements control.TaskBackend: none.
func (b *Backend) TaskHistory(context.Context, string, int) ([]api.TaskRun, error) {
	return nil, nil
}

// AllTasks implements control.TaskBackend: as Tasks.
func (b *Backend) AllTasks(ctx context.Context) ([]api.Task, error) { return b.Tasks(ctx) }

// Task implements control.TaskBackend.
func (b *Backend) Task(_ context.Context, id string) (api.Task, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range b.tasks {
		if t.ID == id {
			return t, nil
		}
	}
	return api.Task{}, fmt.Errorf("%w: no task %q", api.ErrNotFound, id)
}

// PurgeTask implements control.TaskBackend: recorded as "purge ID".
func (b *Backend) PurgeTask(_ context.Context, id string) error {
	_, err := b.taskCall("purge", id)
	return err
}
