// Command benchreport measures the spine of Carapace — the transport floor,
// a request through the whole pipeline, throughput over concurrent sessions,
// one run of the ipc binary, plugins, memory, the model API path, and container sessions on
// Docker (-ctrreps 0 leaves those out) — prints a table and writes the report
// (docs/PERFORMANCE.md under `make bench`):
//
//	go run ./cmd/benchreport -out docs/PERFORMANCE.md
//
// It runs after `make build`, whose bin/ipc and bin/linux-<arch>/ipc it
// measures and puts in the agent image. The measurements live in
// cmd/benchreport/measure, which the Go benchmarks of core/server use
// as well (go test -bench). This command's tests measure nothing: they
// render a recorded run (testdata/results.json), so `make test` needs no
// engine and stays quick.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/carapace-dev/carapace/cmd/benchreport/measure"
)

func main() {
	var p params
	flag.StringVar(&p.Out, "out", "", "write the markdown report to this file")
	flag.IntVar(&p.Reps, "reps", 3, "repetitions of the throughput and ipc measurements; the report gives their median")
	flag.IntVar(&p.LatReps, "latreps", 7, "repetitions of the latency measurements (a), (a′), (b), (b″)")
	flag.IntVar(&p.Samples, "samples", 3500, "timed round trips per latency repetition (below 3700: a session remembers 4096 correlations)")
	flag.DurationVar(&p.Duration, "dur", 3*time.Second, "duration of each throughput run")
	flag.IntVar(&p.MemoryRows, "memrows", measure.MemoryEntries, "entries in the group the memory figures are taken on")
	flag.IntVar(&p.MemoryOps, "memops", 500, "timed calls of each memory operation per repetition")
	flag.IntVar(&p.LLMOps, "llmops", 500, "timed small model API calls of (m) per side and repetition (streamed calls of (n): a tenth, at least 5)")
	flag.IntVar(&p.LLMReps, "llmreps", 0, "repetitions of (m) and (n) (0: as -reps)")
	flag.IntVar(&p.IPCRuns, "ipcruns", 200, "ipc executions per repetition")
	flag.StringVar(&p.IPCBin, "ipc", "bin/ipc", "the ipc binary from make build; its folder holds the static linux-<arch>/ipc for the agent image of (k), (l) as well")
	flag.StringVar(&p.JSON, "json", "", "also write the measurements to this file as JSON, raw CPU profiles included (testdata/results.json, which the tests render, is one)")
	flag.DurationVar(&p.StageTime, "stagetime", 200*time.Millisecond, "how long each piece of the core's work is timed alone")
	flag.IntVar(&p.CtrReps, "ctrreps", 15, "timed container sessions of (k) and (l), after 2 untimed; they need Docker (0 leaves them out)")
	flag.DurationVar(&p.CtrPoll, "ctrpoll", 10*time.Millisecond, "how often (l) polls docker ps -a for the closed session's container")
	flag.Parse()
	if p.LLMReps == 0 {
		p.LLMReps = p.Reps
	}
	if err := run(p); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}
