package leaktest

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-zeromq/zmq4"
	"go.uber.org/goleak"
)

// recorder is a testing.TB that records what Check reports.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper()           {}
func (r *recorder) Error(args ...any) { r.errors = append(r.errors, fmt.Sprint(args...)) }

// parked is a goroutine that stays until released, in a function of its own
// so that its stack names it.
func parked(release <-chan struct{}, done chan<- struct{}) {
	<-release
	close(done)
}

func TestCheckReportsALeak(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	release, done := make(chan struct{}), make(chan struct{})
	go parked(release, done)
	if err := find(0, ignore); err == nil || !strings.Contains(err.Error(), "leaktest.parked") {
		t.Errorf("find with a goroutine left running = %v; want it reported with its stack", err)
	}
	close(release)
	<-done
	r := &recorder{TB: t}
	Check(r, ignore)
	if len(r.errors) != 0 {
		t.Errorf("Check after the goroutine ended reported %q", r.errors)
	}
}

// TestCheckWaitsForEndingGoroutines: a goroutine that ends later than one
// goleak.Find waits is not a leak to Check.
func TestCheckWaitsForEndingGoroutines(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	release, done := make(chan struct{}), make(chan struct{})
	go parked(release, done)
	go func() {
		// Two whole goleak.Find that see the goroutine running: longer than
		// Check's first Find, which starts with them.
		for range 2 {
			if goleak.Find(ignore) == nil {
				panic("goleak does not see the parked goroutine")
			}
		}
		close(release)
	}()
	r := &recorder{TB: t}
	Check(r, ignore)
	if len(r.errors) != 0 {
		t.Errorf("Check reported a goroutine that ended while it waited: %q", r.errors)
	}
	<-done
}

// TestKnownZMQ4Writer: a closed zmq4 PUB socket leaves its writer behind,
// which goleak alone reports and Check ignores. Should a zmq4 upgrade stop
// the writer, the first half fails: then Known can lose the entry.
func TestKnownZMQ4Writer(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	pub := zmq4.NewPub(context.Background())
	if err := pub.Listen("ipc://" + filepath.Join(t.TempDir(), "pub.sock")); err != nil {
		t.Fatal(err)
	}
	if err := pub.Close(); err != nil {
		t.Fatal(err)
	}
	err := goleak.Find(ignore)
	if err == nil || !strings.Contains(err.Error(), "zmq4.(*pubMWriter).run") {
		t.Errorf("goleak after a closed PUB socket = %v; want zmq4's writer goroutine", err)
	}
	r := &recorder{TB: t}
	Check(r, ignore)
	if len(r.errors) != 0 {
		t.Errorf("Check after a closed PUB socket reported %q", r.errors)
	}
}
