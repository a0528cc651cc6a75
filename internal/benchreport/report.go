package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/carapace-dev/carapace/internal/benchreport/measure"
)

// Targets of issue item 12, for the 2-core reference machine.
const (
	targetRatio      = 1.3
	targetPipeP99    = time.Millisecond
	targetThroughput = 15000.0
	targetIPC        = 3 * time.Millisecond
	// Issue 3, item 10.
	targetPluginRatio = 2.0
	targetStartup     = 300 * time.Millisecond
)

// target is one line of the targets table.
type target struct {
	Name, Goal, Measured string
	Met                  bool
}

func (r *results) targets() []target {
	ratio := measure.MedianFloat(r.Ratio)
	p99 := medianOf(r.Pipe, func(l measure.Latency) time.Duration { return l.P99 })
	top := sessionCounts[len(sessionCounts)-1]
	tput := medianRate(r.Seq[top])
	ipcMed := medianOf(r.IPC, func(l measure.Latency) time.Duration { return l.Median })
	return []target{
		{"(c) pipeline ÷ transport floor, medians", fmt.Sprintf("≤ %.1f", targetRatio), fmt.Sprintf("%.2f", ratio), ratio <= targetRatio},
		{"(b) p99 of a request through the pipeline", "≤ " + ms(targetPipeP99), ms(p99), p99 <= targetPipeP99},
		{fmt.Sprintf("(d) throughput, %d sessions", top), fmt.Sprintf("≥ %.0f requests/s", targetThroughput), fmt.Sprintf("%.0f requests/s", tput), tput >= targetThroughput},
		{"(e) one ipc run, exec to exit (median)", "≤ " + ms(targetIPC), ms(ipcMed), ipcMed <= targetIPC},
		{"(f) out-of-process echo ÷ in-process echo, medians", fmt.Sprintf("≤ %.1f", targetPluginRatio), fmt.Sprintf("%.2f", measure.MedianFloat(r.PlugRatio)), measure.MedianFloat(r.PlugRatio) <= targetPluginRatio},
		{fmt.Sprintf("(g) core start to ready, %d out-of-process plugins (median)", startupPlugins), "≤ " + ms(targetStartup), ms(measure.MedianDuration(r.Startup)), measure.MedianDuration(r.Startup) <= targetStartup},
	}
}

func metWord(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

// latencyRow is one line of the latency table: medians over repetitions of
// each statistic.
type latencyRow struct {
	Name string
	Reps []measure.Latency
	Fmt  func(time.Duration) string
}

func (l latencyRow) stat(f func(measure.Latency) time.Duration) string {
	return l.Fmt(medianOf(l.Reps, f))
}

func (l latencyRow) spread() string {
	lo, hi := time.Duration(1<<62), time.Duration(0)
	for _, x := range l.Reps {
		lo, hi = min(lo, x.Median), max(hi, x.Median)
	}
	return l.Fmt(lo) + " – " + l.Fmt(hi)
}

func (r *results) latencyRows() []latencyRow {
	return []latencyRow{
		{"(a) transport floor: zmq4 DEALER↔ROUTER echo, ipc://, 120 B", r.Floor, us},
		{"(a′) same, ROUTER on the hardened listener (zipc)", r.FloorZ, us},
		{"(b) echo request through the whole pipeline", r.Pipe, us},
		{"(b″) same, session past 4096 requests (correlation cache at its cap)", r.PipeFull, us},
		{"(f) echo request to the in-process (built-in) handler", r.PlugIn, us},
		{"(f) echo request to the same handler out of process", r.PlugOut, us},
		{"(f′) transport floor across two processes: (a) with the echo server in a child process", r.FloorX, us},
		{"(e) bin/ipc, exec to exit", r.IPC, ms},
		{"(e) part: exec of /bin/true (starting any process)", r.ExecTrue, ms},
		{"(e) part: bin/ipc --help (process + Go runtime start, no connection)", r.IPCHelp, ms},
		{"(e) part: ipc.Call in process (dial, handshake, request, close)", r.IPCCall, us},
		{"(e) variant: bin/ipc with GOMAXPROCS=1", r.IPCOneP, ms},
	}
}

func medianOf(ls []measure.Latency, f func(measure.Latency) time.Duration) time.Duration {
	ds := make([]time.Duration, len(ls))
	for i, l := range ls {
		ds[i] = f(l)
	}
	return measure.MedianDuration(ds)
}

func medianRate(ts []measure.Throughput) float64 {
	fs := make([]float64, len(ts))
	for i, t := range ts {
		fs[i] = t.PerSec
	}
	return measure.MedianFloat(fs)
}

func rateSpread(ts []measure.Throughput) string {
	if len(ts) == 0 {
		return ""
	}
	lo, hi := ts[0].PerSec, ts[0].PerSec
	for _, t := range ts {
		lo, hi = min(lo, t.PerSec), max(hi, t.PerSec)
	}
	return fmt.Sprintf("%.0f – %.0f", lo, hi)
}

func us(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond)) }
func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// printTable writes the figures and targets for a terminal.
func printTable(w io.Writer, r *results) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nmeasurement\tmedian\tp99\tmedians across reps\n")
	for _, l := range r.latencyRows() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", l.Name, l.stat(func(x measure.Latency) time.Duration { return x.Median }),
			l.stat(func(x measure.Latency) time.Duration { return x.P99 }), l.spread())
	}
	fmt.Fprintf(tw, "(c) ratio b/a of the medians\t%.2f\t\t%s\n", measure.MedianFloat(r.Ratio), ratioSpread(r.Ratio))
	fmt.Fprintf(tw, "(f) ratio out-of-process/in-process echo\t%.2f\t\t%s\n", measure.MedianFloat(r.PlugRatio), ratioSpread(r.PlugRatio))
	fmt.Fprintf(tw, "(g) start to ready, %d out-of-process plugins\t%s\t\t%s\n", startupPlugins, ms(measure.MedianDuration(r.Startup)), durSpread(r.Startup))
	for _, n := range sessionCounts {
		fmt.Fprintf(tw, "(d) throughput, %d session%s, 1 in flight each\t%.0f/s\t\t%s\n", n, plural(n), medianRate(r.Seq[n]), rateSpread(r.Seq[n]))
	}
	fmt.Fprintf(tw, "(d) throughput, %d sessions, %d in flight each\t%.0f/s\t\t%s\n", sessionCounts[len(sessionCounts)-1], pipelinedWindow, medianRate(r.Piped), rateSpread(r.Piped))
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "target\tgoal\tmeasured\t\n")
	for _, t := range r.targets() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Goal, t.Measured, strings.Trim(metWord(t.Met), "*"))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nmachine: %s, %d cores, %s, commit %s; other processes used %s during the run (load average %s → %s)\n",
		r.Machine.CPU, r.Machine.Cores, r.Machine.GoVersion, r.Machine.Commit, othersText(r), r.Start.LoadAvg, r.End.LoadAvg)
}

func ratioSpread(fs []float64) string {
	if len(fs) == 0 {
		return ""
	}
	lo, hi := fs[0], fs[0]
	for _, f := range fs {
		lo, hi = min(lo, f), max(hi, f)
	}
	return fmt.Sprintf("%.2f – %.2f", lo, hi)
}

func othersText(r *results) string {
	o := measure.Others(r.Start, r.End)
	if o < 0 {
		return "an unknown share of the CPUs"
	}
	return fmt.Sprintf("%.2f of %d cores (this benchmark %.2f)", o, r.Machine.Cores, measure.Self(r.Start, r.End))
}

func durSpread(ds []time.Duration) string {
	if len(ds) == 0 {
		return ""
	}
	lo, hi := ds[0], ds[0]
	for _, d := range ds {
		lo, hi = min(lo, d), max(hi, d)
	}
	return ms(lo) + " – " + ms(hi)
}
