package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReport runs the whole command with tiny figures and checks the report
// has every section and target.
func TestReport(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ipc and runs every measurement")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "PERFORMANCE.md")
	p := params{Out: out, Reps: 1, LatReps: 2, Samples: 20, Duration: 200 * time.Millisecond, IPCRuns: 3,
		IPCBin: filepath.Join(dir, "ipc"), ProfileDir: filepath.Join(dir, "prof"), StageTime: 5 * time.Millisecond}
	if err := run(p); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, want := range []string{"## Machine", "## Targets", "## Figures", "## Where the time goes", "## Reading the figures", "## What to change",
		"(c) pipeline ÷ transport floor", "(b) p99", "(d) throughput, 16 sessions", "(e) one ipc run", "the binary was missing"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, f := range []string{"pipeline-sequential.pprof", "throughput-16.pprof"} {
		if _, err := os.Stat(filepath.Join(dir, "prof", f)); err != nil {
			t.Error(err)
		}
	}
}
