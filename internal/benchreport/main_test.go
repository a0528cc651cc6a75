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
		t.Skip("builds ipc and the agent test image and runs every measurement (Docker must be running)")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "PERFORMANCE.md")
	p := params{Out: out, Reps: 1, LatReps: 2, Samples: 20, Duration: 200 * time.Millisecond, IPCRuns: 3,
		IPCBin: filepath.Join(dir, "ipc"), ProfileDir: filepath.Join(dir, "prof"), StageTime: 5 * time.Millisecond,
		MemoryRows: 300, MemoryOps: 5, LLMOps: 20, LLMReps: 1, CtrReps: 1, CtrPoll: 10 * time.Millisecond}
	if err := run(p); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, want := range []string{"## Machine", "## Targets", "## Figures", "## Where the time goes", "## Reading the figures", "## What to change",
		"(c) pipeline ÷ transport floor", "(b) p99", "(d) throughput, 16 sessions", "(e) one ipc run", "the binary was missing", "(h) memory_search", "(i) memory brief", "(j) memory_store",
		"(m) added latency", "(n) streaming throughput through relay + proxy ÷ direct", "| (m) model API call direct", "| (m) model API call through ipc relay + proxy", "- **(m), (n)**",
		"(k) container session cold start", "(l) container session teardown", "| (k) cold start: Open called", "| (k) part 5:", "| (l) teardown: Close called",
		"| container engine of (k), (l) | Docker", "### Container sessions (k), (l)"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(md, notMeasured) {
		t.Error("a figure was not measured")
	}
	for _, f := range []string{"pipeline-sequential.pprof", "throughput-16.pprof"} {
		if _, err := os.Stat(filepath.Join(dir, "prof", f)); err != nil {
			t.Error(err)
		}
	}
}
