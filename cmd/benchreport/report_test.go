package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/cmd/benchreport/measure"
	"github.com/carapace-dev/carapace/internal/testutil"
)

// The tests render the report of a recorded run, testdata/results.json, and
// measure nothing: the measurements run under `make bench` only. The
// recording is a short run of this command (Docker running, after `make
// build`); record again when the results change shape, then rewrite the
// golden files:
//
//	go run ./cmd/benchreport -json cmd/benchreport/testdata/results.json \
//	    -reps 1 -latreps 2 -samples 300 -dur 300ms -ipcruns 5 -stagetime 5ms \
//	    -memrows 300 -memops 5 -llmops 20 -ctrreps 2
//	go test ./cmd/benchreport -update

// recorded returns the recorded run's results.
func recorded(t *testing.T) *results {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r results
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	// The JSON keeps a profile's raw form, not its parsed samples.
	for _, p := range []**measure.CPUProfile{&r.ProfSeq, &r.ProfLoad} {
		prof, err := measure.ParseProfile((*p).Raw)
		if err != nil {
			t.Fatal(err)
		}
		prof.Requests = (*p).Requests
		*p = prof
	}
	return &r
}

// TestReport renders the recorded run: the markdown of docs/PERFORMANCE.md
// and the table `make bench` prints.
func TestReport(t *testing.T) {
	r := recorded(t)
	testutil.Golden(t, filepath.Join("testdata", "PERFORMANCE.md"), []byte(markdown(r)))
	var table bytes.Buffer
	printTable(&table, r)
	testutil.Golden(t, filepath.Join("testdata", "table.txt"), table.Bytes())
}

// TestReportWithoutContainers renders a run with -ctrreps 0: (k) and (l)
// are reported as not measured, not as figures of nothing.
func TestReportWithoutContainers(t *testing.T) {
	r := recorded(t)
	r.Engine, r.Cold, r.Teardowns, r.Bare = "", nil, nil, nil
	md := markdown(r)
	for _, want := range []string{
		"(k) and (l), the container sessions, were not measured in this run (`-ctrreps 0`).",
		"| (k) container session cold start, Open to the agent's first request at the core (median) | ≤ 500.00 ms | not measured | — |",
		"| (l) container session teardown, Close to the container gone (median) | ≤ 1000.00 ms | not measured | — |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, unwanted := range []string{"container engine of (k), (l)", "### Container sessions (k), (l)", "| (k) cold start:", "single measurements, one per session"} {
		if strings.Contains(md, unwanted) {
			t.Errorf("report has %q", unwanted)
		}
	}
	var table bytes.Buffer
	printTable(&table, r)
	if strings.Contains(table.String(), "container sessions (") {
		t.Error("the printed table has a container section")
	}
}
