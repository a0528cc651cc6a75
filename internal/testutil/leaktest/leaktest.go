// Package leaktest is the project's one goroutine-leak check: a thin layer
// on go.uber.org/goleak that knows the goroutines third-party code never
// stops, and gives goroutines that are ending the time a loaded machine
// needs.
//
// A test records the goroutines running at its start and checks, at the
// point where everything it started should be gone, that nothing else
// runs:
//
//	ignore := goleak.IgnoreCurrent()
//	... start servers, connect, close ...
//	leaktest.Check(t, ignore)
//
// goleak tells goroutines apart by identity, not by count: a leaked
// goroutine is reported, with its stack, even when another that ran before
// the test has ended meanwhile. Like goleak.VerifyNone, Check sees every
// goroutine of the process, so it is for tests that do not run in parallel
// with others (t.Parallel) — other tests' goroutines would be reported.
package leaktest

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Timeout bounds how long Check waits for goroutines to end. Ending ones
// end in microseconds; this is the bound for a loaded machine running the
// race detector on two cores, and a leak costs the whole of it.
const Timeout = 10 * time.Second

// Known returns the options that ignore goroutines third-party code leaves
// behind for ever, which no test of this project can end:
//
//   - zmq4 v0.17.0 never stops a PUB socket's writer goroutine: the
//     socket's Close does not close its writer, whose run method waits on
//     a condition variable for ever. Each closed PUB socket, so each closed
//     events.Bus, leaves one behind, idle (see core/events' package
//     documentation).
//
// Check applies them always; they are exported for a test that calls
// goleak itself.
func Known() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/go-zeromq/zmq4.(*pubMWriter).run"),
	}
}

// Check fails t unless, within Timeout, every goroutine has ended except
// those that opts (typically goleak.IgnoreCurrent(), taken at the start of
// the test) and Known ignore. The failure lists the stacks of those still
// running.
func Check(t testing.TB, opts ...goleak.Option) {
	t.Helper()
	if err := find(Timeout, opts...); err != nil {
		t.Error(err)
	}
}

// find is goleak.Find until timeout: each Find waits about half a second
// for goroutines to end, and find asks again until one finds none or the
// timeout has passed.
func find(timeout time.Duration, opts ...goleak.Option) error {
	opts = append(Known(), opts...)
	deadline := time.Now().Add(timeout)
	for {
		err := goleak.Find(opts...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}
