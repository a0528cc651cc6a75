package tasks

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// BenchmarkOpen10000 is the scheduler's start with 10,000 tasks (a third
// cron in zones, a third every, a third at): Open loads them, compiles
// each schedule and works out its next fire. It reports the heap the
// scheduler holds afterwards.
//
//	go test -run '^$' -bench Open10000 -benchtime 5x ./core/tasks
func BenchmarkOpen10000(b *testing.B) {
	path := filepath.Join(b.TempDir(), "tasks.sqlite")
	clock := newFakeClock(t0)
	s, err := Open(context.Background(), Options{Path: path, Clock: clock})
	if err != nil {
		b.Fatal(err)
	}
	zones := []string{"Europe/Berlin", "America/New_York", "Asia/Tokyo", ""}
	for i := range 10000 {
		nt := NewTask{Group: "main", Prompt: "x"}
		switch i % 3 {
		case 0:
			nt.Spec = Spec{Kind: KindCron, Expr: fmt.Sprintf("%d %d * * *", i%60, i%24), Zone: zones[i%len(zones)]}
		case 1:
			nt.Spec = Spec{Kind: KindEvery, Expr: fmt.Sprintf("%ds", 60+i)}
		default:
			nt.Spec = Spec{Kind: KindAt, Expr: t0.Add(time.Duration(i+1) * time.Hour).Format(time.RFC3339)}
		}
		if _, err := s.Add(context.Background(), nt); err != nil {
			b.Fatal(err)
		}
	}
	_ = s.Close()
	var heap uint64
	b.ResetTimer()
	for range b.N {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s, err := Open(context.Background(), Options{Path: path, Clock: clock})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap = after.HeapAlloc - min(before.HeapAlloc, after.HeapAlloc)
		if n := len(s.entries); n != 10000 {
			b.Fatalf("%d tasks loaded", n)
		}
		_ = s.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
}

// BenchmarkTick10000 is one pass of the scheduler over 10,000 tasks of
// which none is due: the cost of waking.
func BenchmarkTick10000(b *testing.B) {
	path := filepath.Join(b.TempDir(), "tasks.sqlite")
	s, err := Open(context.Background(), Options{Path: path, Clock: newFakeClock(t0)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	for i := range 10000 {
		if _, err := s.Add(context.Background(), NewTask{Group: "main", Prompt: "x", Spec: Spec{Kind: KindEvery, Expr: fmt.Sprintf("%ds", 3600+i)}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		s.Tick(context.Background())
	}
}
