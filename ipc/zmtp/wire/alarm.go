package wire

import (
	"sync"
	"sync/atomic"
	"time"
)

// An Alarm runs a function once, when a call has lasted long enough, from
// inside the call's waits. ipc uses one to catch SIGINT and SIGTERM only
// once a call has waited 25 ms.
//
// On Linux a Dealer rings it from the goroutine that waits (a wait for the
// socket ends at the alarm's time, rings it and goes on waiting), so that
// no runtime timer is armed: the first timer starts the runtime's network
// poller, which was most of what an ipc run cost beyond a hello-world's.
// Elsewhere a timer rings it. Either way its function must be safe to run
// from any goroutine.
type Alarm struct {
	at   time.Time
	fn   func()
	once sync.Once
	rung atomic.Bool
}

// NewAlarm returns an alarm that runs fn once, at or after at, while a
// Dealer given it (DialAlarm) waits, or when Ring is called.
func NewAlarm(at time.Time, fn func()) *Alarm { return &Alarm{at: at, fn: fn} }

// Ring runs the function now unless it has run.
func (a *Alarm) Ring() {
	a.once.Do(func() {
		a.rung.Store(true)
		a.fn()
	})
}

// pending returns the alarm's time and true unless it is nil or has rung.
func (a *Alarm) pending() (time.Time, bool) {
	if a == nil || a.rung.Load() {
		return time.Time{}, false
	}
	return a.at, true
}

// Sleep pauses for d, ringing the alarm on the way if its time comes
// first. A nil Alarm only sleeps.
func (a *Alarm) Sleep(d time.Duration) {
	if at, ok := a.pending(); ok {
		if until := time.Until(at); until < d {
			time.Sleep(until)
			a.Ring()
			d -= max(until, 0)
		}
	}
	time.Sleep(d)
}
