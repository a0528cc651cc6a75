// Package clock is the time of the code that waits — the loader's plugin
// revivals, the Telegram plugin's debounce, rate limits and retries — so
// that tests can run it on a fake clock they advance instead of sleeping.
package clock

import "time"

// Clock tells the time and calls functions later.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop prevents the call if it has not happened; it reports whether
	// it did so.
	Stop() bool
}

// Real is the system clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
