package audit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// patience bounds every wait for Follow so that a broken Follow fails the
// test instead of hanging it. It is not a performance expectation.
const patience = 20 * time.Second

// follower runs Follow in the background and collects what it emits.
type follower struct {
	ch     chan Entry
	done   chan error
	cancel context.CancelFunc
}

func startFollow(t *testing.T, path string, f Filter) *follower {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	fl := &follower{ch: make(chan Entry, 10000), done: make(chan error, 1), cancel: cancel}
	go func() {
		fl.done <- Follow(ctx, path, f, func(e Entry) error {
			select {
			case fl.ch <- e:
				return nil
			case <-ctx.Done(): // a broken Follow flooding the test must not hang it
				return ctx.Err()
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-fl.done; !errors.Is(err, context.Canceled) {
			t.Errorf("Follow returned %v, want context.Canceled", err)
		}
	})
	return fl
}

// next returns the next emitted entry that is not a ping.
func (fl *follower) next(t *testing.T) Entry {
	t.Helper()
	timeout := time.After(patience)
	for {
		select {
		case e := <-fl.ch:
			if e.Source != "ping" {
				return e
			}
		case err := <-fl.done:
			t.Fatalf("Follow returned early: %v", err)
		case <-timeout:
			t.Fatal("Follow emitted nothing")
		}
	}
}

// expect reads the next len(want) entries and compares their ids.
func (fl *follower) expect(t *testing.T, want ...string) {
	t.Helper()
	var got []string
	for range want {
		got = append(got, fl.next(t).ID)
	}
	if g, w := strings.Join(got, " "), strings.Join(want, " "); g != w {
		t.Fatalf("followed %q, want %q", g, w)
	}
}

// ready writes pings until Follow emits one: from then on it is
// positioned, and whatever the test writes comes after its start.
func (fl *follower) ready(t *testing.T, l *Log) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		mustWrite(t, l, &Entry{Source: "ping", Stage: StageCore, Outcome: OutcomeOK})
		select {
		case e := <-fl.ch:
			if e.Source == "ping" {
				return
			}
			t.Fatalf("Follow emitted %s before any ping", e.ID)
		case err := <-fl.done:
			t.Fatalf("Follow returned early: %v", err)
		case <-time.After(2 * pollInterval):
		}
	}
	t.Fatal("Follow never emitted a ping")
}

func TestFollowNewEntries(t *testing.T) {
	t.Parallel()
	l, path := openLog(t, Options{SyncInterval: -1})
	mustWrite(t, l, ent("s", 0)) // before Follow: never emitted
	fl := startFollow(t, path, Filter{})
	fl.ready(t, l)
	for i := 1; i <= 5; i++ {
		mustWrite(t, l, ent("s", i))
	}
	fl.expect(t, "s-1", "s-2", "s-3", "s-4", "s-5")
}

func TestFollowFilter(t *testing.T) {
	t.Parallel()
	l, path := openLog(t, Options{SyncInterval: -1})
	fl := startFollow(t, path, Filter{Outcome: OutcomeError})
	// Pings do not match the filter; a failed ping does.
	deadline := time.Now().Add(patience)
	for ready := false; !ready; {
		if time.Now().After(deadline) {
			t.Fatal("Follow never emitted a ping")
		}
		mustWrite(t, l, &Entry{Source: "ping", Stage: StageCore, Outcome: OutcomeRejected})
		select {
		case <-fl.ch:
			ready = true
		case <-time.After(2 * pollInterval):
		}
	}
	for i, o := range []string{OutcomeOK, OutcomeRejected, OutcomeRouted, OutcomeError, OutcomeDenied} {
		e := ent("s", i)
		e.Outcome = o
		mustWrite(t, l, e)
	}
	fl.expect(t, "s-1", "s-3")
}

func TestFollowAcrossRotation(t *testing.T) {
	t.Parallel()
	l, path := openLog(t, Options{MaxBytes: 500, MaxFiles: 3, SyncInterval: -1})
	fl := startFollow(t, path, Filter{})
	fl.ready(t, l)
	// One entry at a time, each seen before the next is written: every
	// rotation happens while Follow holds the previous file.
	for i := range 8 {
		mustWrite(t, l, ent("s", i))
		fl.expect(t, fmt.Sprintf("s-%d", i))
	}
	if nums, _ := rotatedNumbers(path); len(nums) != 3 {
		t.Fatalf("rotated files %v: the test did not rotate", nums)
	}
}

func TestFollowLast(t *testing.T) {
	t.Parallel()
	l, path := openLog(t, Options{MaxBytes: 500, MaxFiles: 5, SyncInterval: -1})
	for i := range 10 { // spread over several files
		mustWrite(t, l, ent("s", i))
	}
	fl := startFollow(t, path, Filter{Last: 4})
	fl.expect(t, "s-6", "s-7", "s-8", "s-9")
	mustWrite(t, l, ent("s", 10))
	fl.expect(t, "s-10")
}

// tail starts a tailer synchronously; the test then polls it by hand, so
// what Follow's loop would see at each tick is exact.
func tail(t *testing.T, path string, f Filter) (*tailer, *[]string) {
	t.Helper()
	var got []string
	tl := &tailer{ctx: t.Context(), path: path, filter: f, fn: func(e Entry) error {
		got = append(got, e.ID)
		return nil
	}}
	t.Cleanup(tl.close)
	if err := tl.start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	return tl, &got
}

func poll(t *testing.T, tl *tailer, got *[]string, want ...string) {
	t.Helper()
	*got = (*got)[:0]
	if err := tl.poll(); err != nil {
		t.Fatalf("poll: %v", err)
	}
	if g, w := strings.Join(*got, " "), strings.Join(want, " "); g != w {
		t.Fatalf("poll emitted %q, want %q", g, w)
	}
}

// Several rotations between two polls: the rotated files missed are read
// before the new current file.
func TestTailBurstOfRotations(t *testing.T) {
	l, path := openLog(t, Options{MaxBytes: 500, MaxFiles: 50, SyncInterval: -1})
	mustWrite(t, l, ent("old", 0))
	tl, got := tail(t, path, Filter{})
	var want []string
	for i := range 40 {
		mustWrite(t, l, ent("s", i))
		want = append(want, fmt.Sprintf("s-%d", i))
	}
	poll(t, tl, got, want...)
	poll(t, tl, got)
	mustWrite(t, l, ent("s", 40))
	poll(t, tl, got, "s-40")
}

// More rotations between two polls than files are kept: the file Follow was
// reading is gone, and it resumes with the files written after it.
func TestTailFileRotatedAway(t *testing.T) {
	l, path := openLog(t, Options{MaxBytes: 500, MaxFiles: 2, SyncInterval: -1})
	for i := range 6 {
		mustWrite(t, l, ent("old", i))
	}
	tl, got := tail(t, path, Filter{})
	time.Sleep(20 * time.Millisecond) // modification times must differ from the old file's
	for i := range 10 {
		mustWrite(t, l, ent("s", i))
	}
	// Kept: .2, .1 and the current file, all written after the old file.
	all, _ := mustRead(t, path, Filter{})
	poll(t, tl, got, ids(all)...)
	if strings.HasPrefix(all[0].ID, "old") {
		t.Fatalf("test setup: old entries still kept: %v", ids(all))
	}
}

// A log removed by hand and recreated: the rotated files are older than the
// one Follow was reading and are not replayed.
func TestTailLogRemoved(t *testing.T) {
	l, path := openLog(t, Options{MaxBytes: 500, MaxFiles: 5, SyncInterval: -1})
	for i := range 6 {
		mustWrite(t, l, ent("old", i))
	}
	tl, got := tail(t, path, Filter{})
	mustWrite(t, l, ent("s", 0))
	poll(t, tl, got, "s-0")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	poll(t, tl, got)
	l.checkPath()
	mustWrite(t, l, ent("s", 1))
	poll(t, tl, got, "s-1")
}

// The log does not exist yet when Follow starts: everything written to it
// once it appears is new, rotated files included.
func TestTailWaitsForLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logs", "audit.jsonl")
	tl, got := tail(t, path, Filter{})
	poll(t, tl, got)
	l, err := Open(path, Options{MaxBytes: 500, SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 5 {
		mustWrite(t, l, ent("s", i))
	}
	poll(t, tl, got, "s-0", "s-1", "s-2", "s-3", "s-4")
}

// A log truncated in place (copytruncate) and found shorter than what was
// read is read again from its start.
func TestTailTruncatedInPlace(t *testing.T) {
	l, path := openLog(t, Options{SyncInterval: -1})
	tl, got := tail(t, path, Filter{})
	mustWrite(t, l, ent("s", 0))
	mustWrite(t, l, ent("s", 1))
	poll(t, tl, got, "s-0", "s-1")
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, l, ent("s", 2))
	poll(t, tl, got, "s-2")
}

// A line still being written is held back, not skipped as malformed; a
// line being written when Follow starts is skipped, not misread.
func TestTailPartialLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l0, l1, l2 := line(t, ent("s", 0)), line(t, ent("s", 1)), line(t, ent("s", 2))
	writeFile(t, path, l0+"\n"+l1[:20], 0o600)
	tl, got := tail(t, path, Filter{})
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	write := func(s string) {
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, tl, got)
	write(l1[20:] + "\n" + l2[:30])
	poll(t, tl, got) // s-1 began before the start; s-2 is incomplete
	write(l2[30:40])
	poll(t, tl, got)
	write(l2[40:] + "\n")
	poll(t, tl, got, "s-2")
	if tl.stats.Malformed != 0 {
		t.Errorf("%d malformed", tl.stats.Malformed)
	}
}

func TestFollowStops(t *testing.T) {
	t.Parallel()
	l, path := openLog(t, Options{SyncInterval: -1})
	errStop := errors.New("stop")
	tests := []struct {
		name string
		fn   func(cancel context.CancelFunc) func(Entry) error
		want error
	}{
		{"fn error", func(context.CancelFunc) func(Entry) error {
			return func(Entry) error { return errStop }
		}, errStop},
		{"context canceled", func(cancel context.CancelFunc) func(Entry) error {
			return func(Entry) error { cancel(); return nil }
		}, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- Follow(ctx, path, Filter{}, tt.fn(cancel)) }()
			timeout := time.After(patience)
			for {
				mustWrite(t, l, ent("s", 0))
				select {
				case err := <-done:
					if !errors.Is(err, tt.want) {
						t.Fatalf("Follow = %v, want %v", err, tt.want)
					}
					return
				case <-timeout:
					t.Fatal("Follow did not return")
				case <-time.After(2 * pollInterval):
				}
			}
		})
	}
}

func TestFollowCanceledBeforeData(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := Follow(ctx, filepath.Join(t.TempDir(), "audit.jsonl"), Filter{}, func(Entry) error { return nil })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Follow = %v, want context.Canceled", err)
	}
}
