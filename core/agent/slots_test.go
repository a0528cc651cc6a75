package agent

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestGroupSlots(t *testing.T) {
	g := &groupSlots{max: 2, queue: 1, groups: map[string]*slots{}}
	ctx := context.Background()
	r1, err1 := g.acquire(ctx, "a")
	r2, err2 := g.acquire(ctx, "a")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	// Another group has its own slots.
	rb, err := g.acquire(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	rb()

	// The third of group a waits; the fourth finds the queue full.
	got := make(chan func(), 1)
	go func() {
		r, err := g.acquire(ctx, "a")
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	waitQueued(t, g, "a", 1)
	if _, err := g.acquire(ctx, "a"); !errors.Is(err, errQueueFull) {
		t.Fatalf("past the queue: %v, want errQueueFull", err)
	}
	select {
	case <-got:
		t.Fatal("a waiter got a slot while none was free")
	case <-time.After(20 * time.Millisecond):
	}
	r1()
	r1() // releasing twice frees one slot
	r3 := <-got
	waitQueued(t, g, "a", 0)
	r2()
	r3()
	if _, ok := g.groups["a"]; ok {
		t.Error("a group with no session and no waiter is still tracked")
	}

	// A waiter whose context ends leaves the queue.
	g2 := &groupSlots{max: 1, queue: 1, groups: map[string]*slots{}}
	hold, _ := g2.acquire(ctx, "a")
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := g2.acquire(cctx, "a"); done <- err }()
	waitQueued(t, g2, "a", 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	waitQueued(t, g2, "a", 0)
	hold()
	if _, ok := g2.groups["a"]; ok {
		t.Error("a group with no session and no waiter is still tracked")
	}
}

// Slots are never over-handed under concurrency.
func TestGroupSlotsConcurrent(t *testing.T) {
	g := &groupSlots{max: 3, queue: 100, groups: map[string]*slots{}}
	var mu sync.Mutex
	running, peak := 0, 0
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			release, err := g.acquire(context.Background(), "g")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			running++
			peak = max(peak, running)
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			running--
			mu.Unlock()
			release()
		})
	}
	wg.Wait()
	if peak > 3 || peak == 0 {
		t.Errorf("peak %d concurrent holders, want 1–3", peak)
	}
}

func waitQueued(t *testing.T, g *groupSlots, group string, n int) {
	t.Helper()
	for range 500 {
		g.mu.Lock()
		q := 0
		if sl := g.groups[group]; sl != nil {
			q = len(sl.waiting)
		}
		g.mu.Unlock()
		if q == n {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("queue of %s never reached %d", group, n)
}

// A warm container takes a slot only when one is free and nobody waits
// for one; a freed slot nobody waits for is announced (warm.go fills it),
// one handed to a waiter is not.
func TestGroupSlotsTryAcquire(t *testing.T) {
	freed := make(chan string, 4)
	g := &groupSlots{max: 1, queue: 1, groups: map[string]*slots{}, freed: func(group string) { freed <- group }}
	ctx := context.Background()
	warm, ok := g.tryAcquire("a")
	if !ok {
		t.Fatal("no slot for a warm container in an idle group")
	}
	if _, ok := g.tryAcquire("a"); ok {
		t.Fatal("a second slot past max_per_group")
	}
	if rb, ok := g.tryAcquire("b"); !ok {
		t.Fatal("another group has no slot")
	} else {
		rb()
		if got := <-freed; got != "b" {
			t.Fatalf("freed %q, want b", got)
		}
	}
	got := make(chan func(), 1)
	go func() {
		r, err := g.acquire(ctx, "a")
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	waitQueued(t, g, "a", 1)
	warm() // handed to the waiter: nothing to fill
	session := <-got
	if _, ok := g.tryAcquire("a"); ok {
		t.Fatal("a warm container took the slot a session holds")
	}
	session()
	if got := <-freed; got != "a" {
		t.Fatalf("freed %q, want a", got)
	}
	select {
	case g := <-freed:
		t.Fatalf("a slot handed to a waiter was announced as free (%s)", g)
	default:
	}
	if _, ok := g.groups["a"]; ok {
		t.Error("a group with no slot taken is still tracked")
	}
}
