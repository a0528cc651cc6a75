// Command benchreport measures the spine of Carapace — the transport floor,
// a request through the whole pipeline, throughput over concurrent sessions
// and one run of the ipc binary — prints a table and writes the report
// (docs/PERFORMANCE.md under `make bench`):
//
//	go run ./internal/benchreport -out docs/PERFORMANCE.md
//
// The measurements live in internal/benchreport/measure, which the Go
// benchmarks of core/server use as well.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	var p params
	flag.StringVar(&p.Out, "out", "", "write the markdown report to this file")
	flag.IntVar(&p.Reps, "reps", 3, "repetitions of the throughput and ipc measurements; the report gives their median")
	flag.IntVar(&p.LatReps, "latreps", 7, "repetitions of the latency measurements (a), (a′), (b), (b″)")
	flag.IntVar(&p.Samples, "samples", 3500, "timed round trips per latency repetition (below 3700: a session remembers 4096 correlations)")
	flag.DurationVar(&p.Duration, "dur", 3*time.Second, "duration of each throughput run")
	flag.IntVar(&p.IPCRuns, "ipcruns", 200, "ipc executions per repetition")
	flag.StringVar(&p.IPCBin, "ipc", "bin/ipc", "the ipc binary (built into a temporary directory if missing)")
	flag.StringVar(&p.ProfileDir, "profiles", "", "also keep the raw CPU profiles (for go tool pprof) in this directory")
	flag.DurationVar(&p.StageTime, "stagetime", 200*time.Millisecond, "how long each piece of the core's work is timed alone")
	flag.Parse()
	if err := run(p); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}
