package memory

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/plugin/plugintest"
)

func TestLimitStores(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  map[string]any
		max  int
	}{
		{"default", nil, 20},
		{"configured", map[string]any{"max_stores_per_session": 3}, 3},
		{"disabled", map[string]any{"max_stores_per_session": 0}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.cfg)
			for i := range tc.max {
				v := plugintest.AssertSuccess(t, f.hs.Invoke("memory_store", map[string]any{"type": "fact", "content": fmt.Sprint("fact ", i)}))
				if got := jsonInt(t, v["stores_left"]); got != tc.max-i-1 {
					t.Errorf("store %d: stores_left %d; want %d", i+1, got, tc.max-i-1)
				}
			}
			r := wantToolError(t, f.hs.Invoke("memory_store", map[string]any{"type": "fact", "content": "one too many"}), CodeStoreLimit, "")
			if tc.max > 0 && !strings.Contains(r.Message, fmt.Sprintf("at most %d memory_store calls per session", tc.max)) {
				t.Errorf("message %q does not name the limit", r.Message)
			}
			if tc.max == 0 && !strings.Contains(r.Message, "disabled") {
				t.Errorf("message %q does not say memory_store is disabled", r.Message)
			}
			if got := f.search(t, map[string]any{"limit": 100}); len(got) != tc.max {
				t.Errorf("%d entries stored; want %d", len(got), tc.max)
			}
			// Another session has its own budget; reads are not limited.
			plugintest.AssertSuccess(t, f.hs.Invoke("memory_search", nil))
			if tc.max > 0 {
				f.store(t, "fact", "next session", plugintest.WithSession("sess-2"))
			}
		})
	}
}

func TestLimitSupersedes(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  map[string]any
		max  int
	}{
		{"default", nil, 5},
		{"configured", map[string]any{"max_supersedes_per_session": 2}, 2},
		{"disabled", map[string]any{"max_supersedes_per_session": 0}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.cfg)
			var targets []string
			for i := range tc.max + 2 {
				targets = append(targets, f.store(t, "preference", fmt.Sprint("old preference ", i), plugintest.WithSession("seeder")))
			}
			// A refused supersede costs nothing.
			wantToolError(t, f.hs.Invoke("memory_store", map[string]any{"type": "fact", "content": "x", "supersedes": "mem-unknown"}),
				map[bool]string{true: CodeNotFound, false: CodeSupersedeLimit}[tc.max > 0], "supersedes")
			for i := range tc.max {
				plugintest.AssertSuccess(t, f.hs.Invoke("memory_store", map[string]any{"type": "preference", "content": fmt.Sprint("new ", i), "supersedes": targets[i]}))
			}
			r := wantToolError(t, f.hs.Invoke("memory_store", map[string]any{"type": "preference", "content": "new", "supersedes": targets[tc.max]}),
				CodeSupersedeLimit, "supersedes")
			if tc.max > 0 && !strings.Contains(r.Message, fmt.Sprintf("at most %d memory_store calls with supersedes per session", tc.max)) {
				t.Errorf("message %q does not name the limit", r.Message)
			}
			// The refused supersede stored nothing and used no store.
			v := plugintest.AssertSuccess(t, f.hs.Invoke("memory_store", map[string]any{"type": "fact", "content": "plain store still works"}))
			if got, want := jsonInt(t, v["stores_left"]), 20-tc.max-1; got != want {
				t.Errorf("stores_left %d; want %d (a supersede is also a store)", got, want)
			}
			if got := f.search(t, map[string]any{"query": "new"}); len(got) != tc.max {
				t.Errorf("%d superseding entries; want %d", len(got), tc.max)
			}
			// Another session has its own budget.
			if tc.max > 0 {
				plugintest.AssertSuccess(t, f.hs.Invoke("memory_store", map[string]any{"type": "preference", "content": "other", "supersedes": targets[tc.max]},
					plugintest.WithSession("sess-2")))
			}
		})
	}
}

func TestLimitSupersedeCountsAsStore(t *testing.T) {
	f := newFixture(t, map[string]any{"max_stores_per_session": 2, "max_supersedes_per_session": 5})
	a := f.store(t, "fact", "a", plugintest.WithSession("seeder"))
	b := f.store(t, "fact", "b", plugintest.WithSession("seeder"))
	plugintest.AssertSuccess(t, f.hs.Invoke("memory_store", map[string]any{"type": "fact", "content": "a2", "supersedes": a}))
	plugintest.AssertSuccess(t, f.hs.Invoke("memory_store", map[string]any{"type": "fact", "content": "plain"}))
	wantToolError(t, f.hs.Invoke("memory_store", map[string]any{"type": "fact", "content": "b2", "supersedes": b}), CodeStoreLimit, "")
	// The refused call did not take a supersede either.
	if got := f.h.limits.left(plugintest.DefaultSession, opSupersede); got != 4 {
		t.Errorf("supersedes left %d; want 4", got)
	}
}

func TestLimitDeletes(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  map[string]any
		max  int
	}{
		{"default", nil, 5},
		{"configured", map[string]any{"max_deletes_per_session": 1}, 1},
		{"disabled", map[string]any{"max_deletes_per_session": 0}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.cfg)
			var all []string
			for i := range tc.max + 2 {
				all = append(all, f.store(t, "fact", fmt.Sprint("fact ", i), plugintest.WithSession("seeder")))
			}
			if tc.max > 0 {
				// A delete of nothing costs nothing.
				wantToolError(t, f.hs.Invoke("memory_delete", map[string]any{"id": "mem-unknown"}), CodeNotFound, "id")
			}
			for i := range tc.max {
				plugintest.AssertSuccess(t, f.hs.Invoke("memory_delete", map[string]any{"id": all[i]}))
			}
			r := wantToolError(t, f.hs.Invoke("memory_delete", map[string]any{"id": all[tc.max]}), CodeDeleteLimit, "")
			if tc.max > 0 && !strings.Contains(r.Message, fmt.Sprintf("at most %d memory_delete calls per session", tc.max)) {
				t.Errorf("message %q does not name the limit", r.Message)
			}
			if got := f.search(t, nil); len(got) != 2 {
				t.Errorf("%d entries left; want 2", len(got))
			}
			if tc.max > 0 {
				plugintest.AssertSuccess(t, f.hs.Invoke("memory_delete", map[string]any{"id": all[tc.max]}, plugintest.WithSession("sess-2")))
			}
		})
	}
}

func TestLimitConcurrentStoresCannotOvershoot(t *testing.T) {
	f := newFixture(t, nil)
	const n = 40
	results := make([]plugintest.Result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			results[i] = f.hs.Invoke("memory_store", map[string]any{"type": "fact", "content": fmt.Sprint("concurrent ", i)})
		})
	}
	wg.Wait()
	ok, limited := 0, 0
	for _, r := range results {
		switch {
		case r.OK():
			ok++
		case r.HandlerCode == CodeStoreLimit:
			limited++
		default:
			t.Errorf("unexpected result: %s", r)
		}
	}
	if ok != 20 || limited != 20 {
		t.Errorf("%d stored, %d refused; want 20 and 20", ok, limited)
	}
	if got := f.search(t, map[string]any{"limit": 100}); len(got) != 20 {
		t.Errorf("%d entries stored; want 20", len(got))
	}
}

func TestLimitConcurrentSupersedesAndDeletes(t *testing.T) {
	f := newFixture(t, map[string]any{"max_stores_per_session": 100})
	var targets []string
	for i := range 20 {
		targets = append(targets, f.store(t, "fact", fmt.Sprint("target ", i), plugintest.WithSession("seeder")))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	count := map[string]int{}
	for i := range 10 {
		wg.Go(func() {
			r := f.hs.Invoke("memory_store", map[string]any{"type": "fact", "content": "new", "supersedes": targets[i]})
			mu.Lock()
			count["supersede "+r.HandlerCode]++
			mu.Unlock()
		})
		wg.Go(func() {
			r := f.hs.Invoke("memory_delete", map[string]any{"id": targets[10+i]})
			mu.Lock()
			count["delete "+r.HandlerCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	want := map[string]int{"supersede ": 5, "supersede " + CodeSupersedeLimit: 5, "delete ": 5, "delete " + CodeDeleteLimit: 5}
	if fmt.Sprint(count) != fmt.Sprint(want) {
		t.Errorf("outcomes %v; want %v", count, want)
	}
}

func TestLimiterForgetsIdleSessions(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newLimiter(config{MaxStores: 2, MaxSupersedes: 1, MaxDeletes: 1}, func() time.Time { return now })
	for i := range 100 {
		if _, err := l.reserve(fmt.Sprint("s", i), opStore); err != nil {
			t.Fatal(err)
		}
	}
	if l.size() != 100 {
		t.Fatalf("size %d; want 100", l.size())
	}
	now = now.Add(12 * time.Hour)
	if _, err := l.reserve("s0", opStore); err != nil { // s0 stays active
		t.Fatal(err)
	}
	now = now.Add(13 * time.Hour)
	if _, err := l.reserve("fresh", opStore); err != nil {
		t.Fatal(err)
	}
	if got := l.size(); got != 2 {
		t.Errorf("size %d after a day; want 2 (s0 and fresh)", got)
	}
	if _, err := l.reserve("s0", opStore); err == nil {
		t.Errorf("s0's budget was forgotten while it was active")
	}
}

func TestLimiterBounded(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newLimiter(config{MaxStores: 1}, func() time.Time { return now })
	for i := range maxSessions + 500 {
		now = now.Add(time.Millisecond)
		if _, err := l.reserve(fmt.Sprint("s", i), opStore); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.size(); got > maxSessions {
		t.Errorf("size %d; want at most %d", got, maxSessions)
	}
	// The most recent session is still remembered.
	if _, err := l.reserve(fmt.Sprint("s", maxSessions+499), opStore); err == nil {
		t.Errorf("the most recent session's budget was forgotten")
	}
}

func TestLimiterRelease(t *testing.T) {
	l := newLimiter(config{MaxStores: 1, MaxSupersedes: 1}, time.Now)
	release, err := l.reserve("s", opStore, opSupersede)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.reserve("s", opStore); err == nil {
		t.Fatal("second store allowed")
	}
	release()
	release() // twice is once
	if l.left("s", opStore) != 1 || l.left("s", opSupersede) != 1 {
		t.Errorf("release did not give back both: %d %d", l.left("s", opStore), l.left("s", opSupersede))
	}
	if _, err := l.reserve("s", opStore, opSupersede); err != nil {
		t.Errorf("after release: %v", err)
	}
}

func TestLimitCodesNotReserved(t *testing.T) {
	l := newLimiter(config{}, time.Now)
	for o := range numOps {
		_, err := l.reserve("s", o)
		te := asToolError(t, err)
		if te.Code == "RATE_LIMITED" || te.Code == "" || te.Retriable {
			t.Errorf("op %d: %+v", o, te)
		}
	}
}
