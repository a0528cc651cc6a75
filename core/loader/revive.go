package loader

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/internal/clock"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// When a plugin dies. An out-of-process plugin that was healthy and whose
// process died on its own (pluginhost's OnExit), or that the loader found
// hung and killed (callEnded), is started again by the core after a wait,
// through the path `carapace plugin restart` takes (reload): its folder
// and its section of config.toml read again, its handler checked against
// its pin again, started and initialised as at load. Its calls in flight
// when it died fail (PLUGIN_ERROR: they may have had effects); calls made
// while it is down get PLUGIN_UNAVAILABLE, its tools staying catalogued.
//
// Each crash is recorded with its time, by plugin name, across the
// plugin's instances; a start that fails during a revival counts as one.
// The wait before the next try is Backoff, doubled for each crash still
// within Window, at most MaxBackoff (1 s, 2 s, 4 s, 8 s, 16 s, 30 s by
// default). At MaxCrashes crashes within Window the plugin stays down
// until `carapace plugin restart NAME`, which forgets its crashes, as a
// core restart does. Once the core begins to stop (Drain, Shutdown), no
// plugin is started again; a wait under way is cancelled.
//
// A plugin is hung when HungCalls of its calls (tool calls and events) in
// a row ran into their timeout and its process sent no reply to any call
// from the first of them to the last, not even a late one: its process
// group is killed and it goes the way of a crash.

// Clock is the loader's time for reviving plugins: the real one, or a
// fake in tests (internal/clock).
type Clock = clock.Clock

// Timer is a pending Clock.AfterFunc.
type Timer = clock.Timer

// The revival's defaults (Revival's zero values).
const (
	DefaultBackoff     = time.Second
	DefaultMaxBackoff  = 30 * time.Second
	DefaultMaxCrashes  = 5
	DefaultCrashWindow = 10 * time.Minute
	DefaultHungCalls   = 3
)

// Revival says how the core brings a crashed or hung plugin back; its
// zero value is the defaults.
type Revival struct {
	// Backoff is the wait before the first try; each further crash
	// within Window doubles it, up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
	// MaxCrashes crashes within Window leave the plugin down; 1 never
	// starts a plugin again on its own.
	MaxCrashes int
	Window     time.Duration
	// HungCalls calls in a row that ran into their timeout with no reply
	// make a plugin hung; negative never does.
	HungCalls int
}

func (r Revival) withDefaults() Revival {
	if r.Backoff <= 0 {
		r.Backoff = DefaultBackoff
	}
	if r.MaxBackoff <= 0 {
		r.MaxBackoff = DefaultMaxBackoff
	}
	if r.MaxCrashes <= 0 {
		r.MaxCrashes = DefaultMaxCrashes
	}
	if r.Window <= 0 {
		r.Window = DefaultCrashWindow
	}
	if r.HungCalls == 0 {
		r.HungCalls = DefaultHungCalls
	}
	return r
}

// backoff is the wait before the try after the n-th crash within the
// window (n ≥ 1).
func (r Revival) backoff(n int) time.Duration {
	d := r.Backoff
	for i := 1; i < n && d < r.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, r.MaxBackoff)
}

// revival is one plugin's crash record, by name: it outlives the plugin's
// instances, until a manual restart or its removal. Guarded by Loader.mu.
type revival struct {
	crashes  []time.Time // within the window, oldest first
	restarts int         // the core's own starts of it
	timer    Timer       // the next try, while one waits
	next     time.Time   // when
	due      uint64      // the waiting try's number: a timer that fires late for an older one does nothing
}

// hangWatch counts a plugin's calls that ran into their timeout since its
// process last replied to any call.
type hangWatch struct {
	mu      sync.Mutex
	n       int
	replies uint64 // the process's reply count at the last of them
}

// crash takes a plugin whose process died on its own, or was killed as
// hung, out of service: its event deliveries end, the crash is logged and
// audited, and crashTry either schedules its revival or leaves it down.
// Its tools stay catalogued, so that calls get PLUGIN_UNAVAILABLE (not
// UNKNOWN_TOOL). Only a healthy plugin crashes: dying during its start or
// Init makes it failed (start records that); during a restart or a
// shutdown it is expected.
func (l *Loader) crash(st *pluginState, problem string) {
	l.mu.Lock()
	if st.state != stateHealthy {
		l.mu.Unlock()
		return
	}
	st.state, st.category, st.problem = stateCrashed, plugin.CategoryInternal, problem
	l.mu.Unlock()
	l.unsubscribePlugin(st)
	l.log.Error("CRITICAL: plugin handler died", "plugin", st.name, "problem", problem)
	_ = l.audit.Write(&audit.Entry{Source: st.name, Stage: audit.StageCore, Outcome: audit.OutcomeCrashed, Code: st.category, Reason: textutil.Clip(problem, 4000)})
	l.crashTry(st)
}

// startedAlive catches a handler that died between its Init's reply and
// start marking it healthy, which OnExit, seeing it not yet healthy, left
// to start: it is a crash like any other.
func (l *Loader) startedAlive(st *pluginState) {
	l.mu.Lock()
	dead := st.state == stateHealthy && st.proc != nil && !st.proc.Alive()
	l.mu.Unlock()
	if dead {
		l.crash(st, "handler process died right after its Init")
	}
}

// crashTry records a crash of st — its process died or hung, or it did
// not start again during a revival (st.problem says how) — and sets it
// restarting, with its next try scheduled, or down. It publishes the
// state.
func (l *Loader) crashTry(st *pluginState) {
	now := l.clock.Now()
	o := l.revival
	l.mu.Lock()
	last := st.problem
	if l.noRevive {
		st.state = stateCrashed
		st.problem = last + "; not started again: the core is stopping"
		l.mu.Unlock()
		l.healthChanged(st)
		return
	}
	if l.revivals == nil {
		l.revivals = map[string]*revival{}
	}
	r := l.revivals[st.name]
	if r == nil {
		r = &revival{}
		l.revivals[st.name] = r
	}
	cut := now.Add(-o.Window)
	r.crashes = append(slices.DeleteFunc(r.crashes, func(t time.Time) bool { return !t.After(cut) }), now)
	n := len(r.crashes)
	r.due++
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	var delay time.Duration
	if n >= o.MaxCrashes {
		r.next = time.Time{}
		st.state = stateDown
		st.problem = fmt.Sprintf("died, hung or failed to start again %s within %s (the last: %s): it stays down; bring it back with `carapace plugin restart %s`",
			times(n), o.Window, last, st.name)
	} else {
		delay = o.backoff(n)
		r.next = now.Add(delay)
		st.state = stateRestarting
		st.problem = fmt.Sprintf("%s; the core starts it again after %s (crash %d within %s; at %d it stays down)", last, delay, n, o.Window, o.MaxCrashes)
		name, due := st.name, r.due
		r.timer = l.clock.AfterFunc(delay, func() { l.revive(name, r, due) })
	}
	state, problem, category := st.state, st.problem, st.category
	l.mu.Unlock()
	l.healthChanged(st)
	if state == stateDown {
		l.log.Error("CRITICAL: plugin down: it crashed too often; `carapace plugin restart "+st.name+"` brings it back", "plugin", st.name, "crashes", n, "window", o.Window)
		_ = l.audit.Write(&audit.Entry{Source: st.name, Stage: audit.StageCore, Outcome: audit.OutcomeError, Code: category, Reason: "plugin down: " + textutil.Clip(problem, 4000)})
		return
	}
	l.log.Warn("plugin restarting after a wait", "plugin", st.name, "in", delay, "crash", n, "window", o.Window)
}

// times says n times in words.
func times(n int) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}

// revive is a waiting try come due: plugin name is started again as a
// restart does, unless the core is stopping, someone restarted it in the
// meantime, or a newer try replaced this one. A start that fails is a
// crash try of its own.
func (l *Loader) revive(name string, r *revival, due uint64) {
	l.restartMu.Lock()
	defer l.restartMu.Unlock()
	l.mu.Lock()
	old := l.find(name)
	ok := !l.noRevive && l.revivals[name] == r && r.due == due && old != nil && old.state == stateRestarting
	if ok {
		r.restarts++
		r.timer, r.next = nil, time.Time{}
	}
	try := r.restarts
	l.mu.Unlock()
	if !ok {
		return
	}
	l.log.Info("starting a crashed plugin again", "plugin", name, "try", try)
	st, err := l.reload(l.life, name)
	switch {
	case err != nil: // nothing was stopped or started
		l.mu.Lock()
		old.problem = "not started again: " + textutil.OneLine(err.Error())
		l.mu.Unlock()
		l.crashTry(old)
	case st.state == stateRemoved:
		l.mu.Lock()
		delete(l.revivals, name)
		l.mu.Unlock()
	case st.state == stateHealthy:
		_ = l.audit.Write(&audit.Entry{Source: name, Stage: audit.StageCore, Outcome: audit.OutcomeOK, Reason: fmt.Sprintf("plugin started again by the core after a crash (restart %d)", try)})
	default:
		// Failed to start (its pin, its config, its Init...): its tools
		// stay catalogued, answering PLUGIN_UNAVAILABLE, while it waits
		// or stays down.
		if st.manifest != nil {
			_ = l.register(st)
		}
		l.crashTry(st)
	}
}

// forgetCrashes drops plugin name's crash record and cancels its waiting
// try: `carapace plugin restart` starts it afresh.
func (l *Loader) forgetCrashes(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.revivals[name]; r != nil {
		if r.timer != nil {
			r.timer.Stop()
		}
		delete(l.revivals, name)
	}
}

// stillWaiting gives a plugin that was waiting to be started again, and
// whose manual restart was refused before anything was stopped (a broken
// config.toml), a new try: forgetCrashes had cancelled its wait.
func (l *Loader) stillWaiting(name string, err error) {
	l.mu.Lock()
	old := l.find(name)
	waiting := old != nil && old.state == stateRestarting
	if waiting {
		old.problem = "not restarted: " + textutil.OneLine(err.Error())
	}
	l.mu.Unlock()
	if waiting {
		l.crashTry(old)
	}
}

// Drain tells the loader that the core has begun to stop: from now on no
// plugin is started again on its own, and the tries that wait are
// cancelled (their plugins are left crashed). Shutdown does it too.
func (l *Loader) Drain() {
	l.mu.Lock()
	l.noRevive = true
	var waiting []*pluginState
	for name, r := range l.revivals {
		if r.timer != nil {
			r.timer.Stop()
			r.timer, r.next = nil, time.Time{}
			r.due++
		}
		if st := l.find(name); st != nil && st.state == stateRestarting {
			st.state = stateCrashed
			st.problem += "; not started again: the core is stopping"
			waiting = append(waiting, st)
		}
	}
	l.mu.Unlock()
	for _, st := range waiting {
		l.healthChanged(st)
	}
}

// find returns plugin name's state; nil if the loader has none. l.mu is
// held.
func (l *Loader) find(name string) *pluginState {
	for _, p := range l.plugins {
		if p.name == name {
			return p
		}
	}
	return nil
}

// callEnded is told how each tool call and event delivery to st ended.
// A call that ran into its timeout counts towards hung unless the process
// replied to any call since the last one that did; at Revival.HungCalls
// the plugin is hung.
func (l *Loader) callEnded(st *pluginState, err error) {
	if l == nil || st.proc == nil || l.revival.HungCalls <= 0 || !errors.Is(err, context.DeadlineExceeded) {
		return
	}
	replies := st.proc.Replies()
	w := &st.hang
	w.mu.Lock()
	if w.n == 0 || replies != w.replies {
		w.n, w.replies = 0, replies
	}
	w.n++
	n := w.n
	w.mu.Unlock()
	if n >= l.revival.HungCalls {
		l.hung(st, n)
	}
}

// hung kills a hung plugin's process group and takes it the way of a
// crash.
func (l *Loader) hung(st *pluginState, n int) {
	l.mu.Lock()
	serving := st.state == stateHealthy
	l.mu.Unlock()
	if !serving {
		return
	}
	l.log.Error("plugin hung: its calls run into their timeout and it answers none; killing its process group", "plugin", st.name, "calls", n, "pid", st.proc.PID())
	st.proc.Kill()
	l.crash(st, fmt.Sprintf("handler hung: %d calls in a row ran into their timeout with no reply to any call; its process was killed", n))
}
