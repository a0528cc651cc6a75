package measure

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestParseProfile reads a recorded CPU profile of (b) — testdata/seq.pprof,
// the one in ../testdata/results.json — as `go tool pprof` does: the
// expected figures are what `go tool pprof -top` prints for it.
func TestParseProfile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "seq.pprof"))
	if err != nil {
		t.Fatal(err)
	}
	prof, err := ParseProfile(raw)
	if err != nil {
		t.Fatal(err)
	}
	if prof.Total != 260*time.Millisecond {
		t.Fatalf("total %s, go tool pprof: 260ms", prof.Total)
	}
	if top := prof.Top(1); len(top) != 1 || top[0].Name != "internal/runtime/syscall/linux.Syscall6" || top[0].CPU != 80*time.Millisecond {
		t.Fatalf("top flat function %+v, go tool pprof: Syscall6 80ms", top)
	}
	handle := []string{"pipeline.(*Pipeline).Handle"}
	if s := prof.Inclusive([]Component{{"handle", handle}})[0]; s.CPU != 110*time.Millisecond || s.Fraction != 110.0/260 {
		t.Fatalf("cumulative Handle %+v, go tool pprof: 110ms", s)
	}
	if d := prof.InclusiveAll(handle, []string{"session.(*Manager).worker"}); d != 110*time.Millisecond {
		t.Fatalf("Handle under the session's worker: %s, want all of Handle's 110ms", d)
	}
	if d := prof.InclusiveAll(handle, []string{"no such function"}); d != 0 {
		t.Fatalf("an unmatched set still matched %s", d)
	}
	var sum time.Duration
	for _, s := range prof.Partition(Sides) {
		sum += s.CPU
	}
	if sum != prof.Total {
		t.Fatalf("partition adds up to %s, profile total %s", sum, prof.Total)
	}
	prof.Requests = 2
	if d := prof.PerRequest(prof.Total); d != 130*time.Millisecond {
		t.Fatalf("per request %s", d)
	}
	if _, err := ParseProfile(raw[:len(raw)/2]); err == nil {
		t.Fatal("a truncated profile parsed")
	}
}

func TestSummarize(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i))
	}
	l := Summarize(ds)
	if l.N != 100 || l.Min != 1 || l.Max != 100 || l.Median != 50 || l.P99 != 99 || l.P90 != 90 || l.Mean != 50 {
		t.Fatalf("%+v", l)
	}
	if Median([]time.Duration{3, 1, 2}) != 2 || Median([]float64{4, 1, 3, 2}) != 2 || Median([]float64(nil)) != 0 {
		t.Fatal("median")
	}
}

// SampleAlternating runs its ops in turn, round by round, warm-up rounds
// first, and gives each op its own summary; an error stops it.
func TestSampleAlternating(t *testing.T) {
	var order []string
	op := func(name string) func() error {
		return func() error { order = append(order, name); return nil }
	}
	ls, err := SampleAlternating(3, 1, op("a"), op("b"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order, ""); got != "abababab" {
		t.Fatalf("ran %q, want abababab (one warm-up round, three timed)", got)
	}
	if len(ls) != 2 || ls[0].N != 3 || ls[1].N != 3 {
		t.Fatalf("summaries %+v, want two of 3 runs", ls)
	}
	order = nil
	calls := 0
	failing := func() error {
		if calls++; calls == 3 {
			return errors.New("boom")
		}
		return nil
	}
	if _, err := SampleAlternating(5, 1, op("a"), failing); err == nil || err.Error() != "boom" {
		t.Fatalf("err %v, want boom", err)
	}
	if got := strings.Join(order, ""); got != "aaa" {
		t.Fatalf("ran %q after the error, want aaa", got)
	}
}
