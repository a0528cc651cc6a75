package measure

import (
	"strings"
	"testing"
	"time"
)

// spin burns CPU for d in a function the profile test can find by name.
func spin(d time.Duration) int {
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); {
		n++
	}
	return n
}

// The assertions hold whatever else the machine (or this test binary under
// the race detector, beside other packages) is doing: no share of the CPU
// is assumed, only that the profile is read and attributed consistently.
func TestProfileParses(t *testing.T) {
	prof, err := Profile(func() error { spin(300 * time.Millisecond); return nil })
	if err != nil {
		t.Fatalf("profile: %v", err)
	}
	if prof.Total <= 0 {
		t.Fatal("profile has no CPU time")
	}
	s := prof.Inclusive([]Component{{"spin", []string{"measure.spin"}}})[0]
	if s.CPU <= 0 || s.CPU > prof.Total || s.Fraction != float64(s.CPU)/float64(prof.Total) {
		t.Fatalf("spin share %+v of %s", s, prof.Total)
	}
	if d := prof.InclusiveAll([]string{"measure.spin"}, []string{"measure.TestProfileParses"}); d != s.CPU {
		t.Fatalf("spin under the test has %s, spin anywhere %s: every spin sample is under the test", d, s.CPU)
	}
	if d := prof.InclusiveAll([]string{"measure.spin"}, []string{"no such function"}); d != 0 {
		t.Fatalf("an unmatched set still matched %s", d)
	}
	var sum time.Duration
	for _, s := range prof.Partition(Sides) {
		sum += s.CPU
	}
	if sum != prof.Total {
		t.Fatalf("partition adds up to %s, profile total %s", sum, prof.Total)
	}
	top := prof.Top(50, true)
	found := false
	for i, f := range top {
		if i > 0 && f.CPU > top[i-1].CPU {
			t.Fatalf("top not sorted: %+v", top)
		}
		found = found || strings.HasSuffix(f.Name, "measure.spin")
	}
	if !found {
		t.Fatalf("spin is not among the top cumulative functions %+v", top)
	}
}

func TestSummarize(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i))
	}
	l := Summarize(ds)
	if l.N != 100 || l.Min != 1 || l.Max != 100 || l.Median != 50 || l.P99 != 99 || l.P90 != 90 {
		t.Fatalf("%+v", l)
	}
	if MedianDuration([]time.Duration{3, 1, 2}) != 2 || MedianFloat([]float64{4, 1, 3, 2}) != 2 {
		t.Fatal("median")
	}
}

// TestMeasurements runs every measurement briefly against a real core.
func TestMeasurements(t *testing.T) {
	for _, scheme := range []string{"ipc", "zipc"} {
		f, err := StartFloor(scheme)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Sample(20, 5, f.RoundTrip); err != nil {
			t.Fatalf("floor %s: %v", scheme, err)
		}
		f.Close()
	}

	c, err := StartCore("")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.OpenCaller()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Sample(20, 5, s.Call); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	if err := RunRequests([]*Session{s}, 3, 30); err != nil {
		t.Fatalf("run requests: %v", err)
	}
	s.Close()
	tp, err := RunThroughput(c, 2, 2, 100*time.Millisecond)
	if err != nil || tp.Requests == 0 {
		t.Fatalf("throughput %+v: %v", tp, err)
	}
	if c.AuditBytes() == 0 {
		t.Fatal("the core wrote no audit log")
	}
	h, err := c.OpenSession()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := (IPCRunner{Socket: h.Info().Socket}).Call(); err != nil {
		t.Fatalf("ipc.Call: %v", err)
	}
}

func TestStageCosts(t *testing.T) {
	stages, err := StageCosts(5 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stages {
		if s.PerOp <= 0 || s.PerReq < 0 {
			t.Errorf("%s: %+v", s.Name, s)
		}
	}
	fresh, warm, err := GoroutineCosts(5 * time.Millisecond)
	if err != nil || fresh.PerOp <= 0 || warm.PerOp <= 0 {
		t.Fatalf("goroutine costs %+v %+v: %v", fresh, warm, err)
	}
}
