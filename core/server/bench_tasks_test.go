package server_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
)

// BenchmarkTaskFireAccuracy is a 1-second task on the real clock, through
// the real core and the Docker test agent: for each of b.N runs that ended
// ok, from its scheduled time to the core's routing of its session's first
// request (the agent's echo call), and the scheduler's own part, from the
// scheduled time to the run's start. Run it with
//
//	go test -run '^$' -bench TaskFireAccuracy -benchtime 60x ./core/server
//
// (make bench does): a minute of a 1-second task. It runs cold ([sessions]
// warm = 0: each run starts a container) and warm (each run claims the
// group's warm container), side by side.
func BenchmarkTaskFireAccuracy(b *testing.B) {
	for _, mode := range []struct{ name, warm string }{{"cold", "0"}, {"warm", "1"}} {
		b.Run(mode.name, func(b *testing.B) { taskFireAccuracy(b, mode.warm) })
	}
}

// taskFireAccuracy is BenchmarkTaskFireAccuracy with [sessions] warm =
// warm.
func taskFireAccuracy(b *testing.B, warm string) {
	c := startCoreWith(b, coreOptions{Config: dockerConfig(b, "[sessions]\nwarm = "+warm+"\n[groups.main]\n")})
	ctx := context.Background()
	task, err := c.Client.AddTask(ctx, api.TaskRequest{Group: "main", Kind: "every", Expr: "1s", Prompt: echo("tick")})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	deadline := time.Now().Add(time.Duration(b.N)*3*time.Second + time.Minute)
	var runs []api.TaskRun
	for {
		all, err := c.Client.TaskHistory(ctx, task.ID, api.MaxTaskHistory)
		if err != nil {
			b.Fatal(err)
		}
		runs = runs[:0]
		for _, r := range all {
			if r.State == "ok" && !r.Manual {
				runs = append(runs, r)
			}
		}
		if len(runs) >= b.N {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d runs ended ok, want %d", len(runs), b.N)
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.StopTimer()
	_, _ = c.Client.PauseTask(ctx, task.ID)

	first := map[string]time.Time{}
	for _, e := range c.Audit(b) {
		if e.Stage == audit.StageRoute && e.Outcome == audit.OutcomeRouted && e.Session != "" {
			if _, ok := first[e.Session]; !ok {
				first[e.Session] = e.Time
			}
		}
	}
	var toRequest, toStart []time.Duration
	for _, r := range runs[:b.N] {
		at, ok := first[r.Session]
		if !ok {
			b.Fatalf("run %d (session %s) routed no request", r.ID, r.Session)
		}
		toRequest = append(toRequest, at.Sub(r.Scheduled))
		toStart = append(toStart, time.Duration(r.LateMS)*time.Millisecond)
	}
	b.ReportMetric(ms(quantile(toRequest, 0.5)), "request-p50-ms")
	b.ReportMetric(ms(slices.Max(toRequest)), "request-max-ms")
	b.ReportMetric(ms(quantile(toStart, 0.5)), "start-p50-ms")
	b.ReportMetric(ms(slices.Max(toStart)), "start-max-ms")
}
