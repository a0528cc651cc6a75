package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/session"
)

// groupSlots bounds the agent containers each group runs at once
// ([sessions] max_per_group); requests past it wait, in order of arrival,
// in a bounded queue ([sessions] queue), and those past the queue are
// refused and logged.
type groupSlots struct {
	max, queue int
	// freed, if set, is told (on its own goroutine) when a slot of group
	// is given back and nobody was waiting for it: warm.go starts a warm
	// container in it.
	freed func(group string)

	mu     sync.Mutex
	groups map[string]*slots
}

type slots struct {
	running int
	waiting []chan struct{} // FIFO; a waiter's channel is closed when it gets a slot
}

// errQueueFull is returned when a group's queue is full.
var errQueueFull = errors.New("session queue full")

// acquire takes one of group's slots, waiting in the queue if they are all
// taken. The returned release gives it back (once).
func (g *groupSlots) acquire(ctx context.Context, group string) (release func(), err error) {
	g.mu.Lock()
	sl := g.groups[group]
	if sl == nil {
		sl = &slots{}
		g.groups[group] = sl
	}
	if sl.running < g.max && len(sl.waiting) == 0 {
		sl.running++
		g.mu.Unlock()
		return g.releaser(group), nil
	}
	if len(sl.waiting) >= g.queue {
		running, waiting := sl.running, len(sl.waiting)
		g.mu.Unlock()
		return nil, fmt.Errorf("%w: group %s has %d agent sessions running and %d waiting, the most [sessions] allows; try again when one ends: %w",
			api.ErrConflict, group, running, waiting, errQueueFull)
	}
	ready := make(chan struct{})
	sl.waiting = append(sl.waiting, ready)
	g.mu.Unlock()
	select {
	case <-ready:
		return g.releaser(group), nil
	case <-ctx.Done():
		g.mu.Lock()
		defer g.mu.Unlock()
		for i, w := range sl.waiting {
			if w == ready {
				sl.waiting = append(sl.waiting[:i], sl.waiting[i+1:]...)
				return nil, fmt.Errorf("waiting for a session slot of group %s: %w", group, ctx.Err())
			}
		}
		// The slot was handed over as ctx ended: give it back.
		g.releaseLocked(group)
		return nil, fmt.Errorf("waiting for a session slot of group %s: %w", group, ctx.Err())
	}
}

// tryAcquire takes one of group's slots if one is free and nobody waits
// for one: a warm container never makes a session wait.
func (g *groupSlots) tryAcquire(group string) (release func(), ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	sl := g.groups[group]
	if sl == nil {
		sl = &slots{}
		g.groups[group] = sl
	}
	if sl.running >= g.max || len(sl.waiting) > 0 {
		if sl.running == 0 && len(sl.waiting) == 0 {
			delete(g.groups, group)
		}
		return nil, false
	}
	sl.running++
	return g.releaser(group), true
}

// full reports whether every slot of group is taken.
func (g *groupSlots) full(group string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	sl := g.groups[group]
	return sl != nil && sl.running >= g.max
}

func (g *groupSlots) releaser(group string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.releaseLocked(group)
		})
	}
}

// releaseLocked frees a slot of group, handing it to the first waiter.
func (g *groupSlots) releaseLocked(group string) {
	sl := g.groups[group]
	if len(sl.waiting) > 0 {
		next := sl.waiting[0]
		sl.waiting = sl.waiting[1:]
		close(next) // the slot passes on: running stays the same
		return
	}
	sl.running--
	if sl.running == 0 {
		delete(g.groups, group)
	}
	if g.freed != nil {
		go g.freed(group)
	}
}

// errIdle is why an idle session's container is stopped.
type errIdle struct{ after time.Duration }

func (e errIdle) Error() string {
	return fmt.Sprintf("stopped: no request for %s ([sessions] idle_timeout)", e.after)
}

// reapIdle stops the containers of sessions that have made no request for
// the idle timeout, until ctx ends. The time counts from the session's last
// request or its container's start, whichever is later: a session is not
// idle while its files are prepared and the engine starts its container.
func (r *Runner) reapIdle(ctx context.Context) {
	timeout := r.cfg.Sessions.IdleTimeout.Duration
	r.everySession(ctx, min(max(timeout/4, 10*time.Millisecond), 30*time.Second), func(now time.Time, info session.Info) {
		started, ok := r.containerStarted(info.ID)
		if !ok { // no container, or not started yet
			return
		}
		if idle := now.Sub(latest(info.Active, started)); idle >= timeout && r.cancelContainer(info.ID, errIdle{timeout}) {
			r.log.Info("agent session idle; stopping its container", "session", info.ID, "group", info.Group, "idle", idle.Round(time.Second))
			_ = r.audit.Write(&audit.Entry{Source: "core", Session: info.ID, Group: info.Group, Stage: audit.StageSession,
				Outcome: audit.OutcomeExpired, Reason: errIdle{timeout}.Error()})
		}
	})
}

// everySession calls check with each open session every interval, until
// ctx ends: the reapers' loop.
func (r *Runner) everySession(ctx context.Context, interval time.Duration, check func(now time.Time, info session.Info)) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			for _, info := range r.sessions.List() {
				check(now, info)
			}
		}
	}
}

// latest returns the later of a and b.
func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
