package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/carapace-dev/carapace/cmd/benchreport/measure"
)

// Targets of issue item 12, for the 2-core reference machine.
const (
	targetRatio      = 1.3
	targetPipeP99    = time.Millisecond
	targetThroughput = 15000.0
	targetIPC        = 3 * time.Millisecond
	// Issue 29, item 3.
	targetIPCHello = 1.3
	// Issue 3, item 10.
	targetPluginRatio = 2.0
	targetStartup     = 300 * time.Millisecond
	// Issue 4, item 6.
	targetMemSearch = 2 * time.Millisecond
	targetMemBrief  = 10 * time.Millisecond
	targetMemStore  = time.Millisecond
	// Issue 5, item 7.
	targetColdStart = 500 * time.Millisecond
	targetTeardown  = time.Second
	// Issue 6.
	targetLLMAdded       = time.Millisecond
	targetLLMStreamRatio = 0.9
)

// target is one line of the targets table.
type target struct {
	Name, Goal, Measured string // Measured is notMeasured for a figure the run left out
	Met                  bool
}

// notMeasured is the Measured of a target the run left out.
const notMeasured = "not measured"

// verdict is the last column of a target's line.
func (t target) verdict() string {
	if t.Measured == notMeasured {
		return "—"
	}
	return metWord(t.Met)
}

func (r *results) targets() []target {
	ratio := measure.Median(r.Ratio)
	tail := medianOf(r.Pipe, p99)
	top := sessionCounts[len(sessionCounts)-1]
	tput := medianRate(r.Seq[top])
	ipcMed := median(r.IPC)
	return []target{
		{"(c) pipeline ÷ transport floor, medians", fmt.Sprintf("≤ %.1f", targetRatio), fmt.Sprintf("%.2f", ratio), ratio <= targetRatio},
		{"(b) p99 of a request through the pipeline", "≤ " + ms(targetPipeP99), ms(tail), tail <= targetPipeP99},
		{fmt.Sprintf("(d) throughput, %d sessions", top), fmt.Sprintf("≥ %.0f requests/s", targetThroughput), fmt.Sprintf("%.0f requests/s", tput), tput >= targetThroughput},
		{"(e) one ipc run, exec to exit (median)", "≤ " + ms(targetIPC), ms(ipcMed), ipcMed <= targetIPC},
		r.helloTarget(),
		{"(f) out-of-process echo ÷ in-process echo, medians", fmt.Sprintf("≤ %.1f", targetPluginRatio), fmt.Sprintf("%.2f", measure.Median(r.PlugRatio)), measure.Median(r.PlugRatio) <= targetPluginRatio},
		{fmt.Sprintf("(g) core start to ready, %d out-of-process plugins (median)", startupPlugins), "≤ " + ms(targetStartup), ms(measure.Median(r.Startup)), measure.Median(r.Startup) <= targetStartup},
		r.memTarget("(h) memory_search", func(m measure.Memory) measure.Latency { return m.Search }, targetMemSearch),
		r.memTarget("(i) memory brief", func(m measure.Memory) measure.Latency { return m.Brief }, targetMemBrief),
		r.memTarget("(j) memory_store", func(m measure.Memory) measure.Latency { return m.Store }, targetMemStore),
		r.llmAdded(),
		r.llmStream(),
		r.ctrTarget("(k) container session cold start, Open to the agent's first request at the core (median)", r.coldTotals(), targetColdStart),
		r.ctrTarget("(l) container session teardown, Close to the container gone (median)", r.teardownTotals(), targetTeardown),
	}
}

// ctrTarget is the target line of (k) or (l): the median of the sessions.
func (r *results) ctrTarget(name string, ds []time.Duration, goal time.Duration) target {
	if len(ds) == 0 {
		return target{Name: name, Goal: "≤ " + ms(goal), Measured: notMeasured}
	}
	med := measure.Median(ds)
	return target{Name: name, Goal: "≤ " + ms(goal), Measured: ms(med), Met: med <= goal}
}

func (r *results) coldTotals() []time.Duration {
	return pick(r.Cold, func(c measure.ColdStart) (time.Duration, bool) { return c.Total, true })
}

func (r *results) teardownTotals() []time.Duration {
	return pick(r.Teardowns, func(t measure.Teardown) (time.Duration, bool) { return t.Total, true })
}

// coldParts is one part of (k) over the sessions whose marks were all
// there and in order.
func (r *results) coldParts(f func(measure.ColdStart) time.Duration) []time.Duration {
	return pick(r.Cold, func(c measure.ColdStart) (time.Duration, bool) { return f(c), c.Parts })
}

// teardownParts is one part of (l) over the sessions whose engine events
// were all there and in order.
func (r *results) teardownParts(f func(measure.Teardown) time.Duration) []time.Duration {
	return pick(r.Teardowns, func(t measure.Teardown) (time.Duration, bool) { return f(t), t.Parts })
}

// pick collects one duration of each element of xs for which f reports it.
func pick[T any](xs []T, f func(T) (time.Duration, bool)) []time.Duration {
	var out []time.Duration
	for _, x := range xs {
		if d, ok := f(x); ok {
			out = append(out, d)
		}
	}
	return out
}

// sampleRow is one line of the container table: single measurements, one
// per session, summarised.
type sampleRow struct {
	Name string
	L    measure.Latency
}

func newSampleRow(name string, ds []time.Duration) sampleRow {
	return sampleRow{Name: name, L: measure.Summarize(slices.Clone(ds))}
}

// containerRows are the lines of (k) and (l): the figures, their parts
// (over the sessions whose engine events were all there and in order), and
// the engine's floor.
func (r *results) containerRows() []sampleRow {
	cold, down := r.coldParts, r.teardownParts
	return []sampleRow{
		newSampleRow("(k) cold start: Open called → the agent's first request at the core (its audit `route` entry)", r.coldTotals()),
		newSampleRow("(k) part 1: the control request, a slot of the group, the session socket (→ core log \"session opened\")", cold(func(c measure.ColdStart) time.Duration { return c.Session })),
		newSampleRow("(k) part 2: skills, memory brief, CLAUDE.md, settings, group folders (→ \"agent container starting\", `docker run` is executed)", cold(func(c measure.ColdStart) time.Duration { return c.Files })),
		newSampleRow("(k) part 3: the docker CLI's start and the container's creation (→ engine event `create`)", cold(func(c measure.ColdStart) time.Duration { return c.Create })),
		newSampleRow("(k) part 4: attach and start (→ engine event `start`)", cold(func(c measure.ColdStart) time.Duration { return c.Start })),
		newSampleRow("(k) part 5: init, the agent's shell, ipc's start, connection and request (→ first request routed)", cold(func(c measure.ColdStart) time.Duration { return c.Agent })),
		newSampleRow("(k) aside: Open called → Open returned (the client has the session; the container is not started yet)", pick(r.Cold, func(c measure.ColdStart) (time.Duration, bool) { return c.Returned, true })),
		newSampleRow("(k) floor: bare `docker run --rm IMAGE --exec true`, exec → engine event `start`", pick(r.Bare, func(b measure.BareRun) (time.Duration, bool) { return b.Start, b.Parts })),
		newSampleRow("(k) floor: the same, exec → exit (container removed)", pick(r.Bare, func(b measure.BareRun) (time.Duration, bool) { return b.Total, true })),
		newSampleRow("(l) teardown: Close called → `docker ps -a` no longer lists the container", r.teardownTotals()),
		newSampleRow("(l) part: Close called → engine event `kill` (the close request, the core cancels the run, `docker stop` sends SIGTERM)", down(func(t measure.Teardown) time.Duration { return t.Kill })),
		newSampleRow("(l) part: `kill` → `die` (init passes SIGTERM on, the agent exits)", down(func(t measure.Teardown) time.Duration { return t.Die })),
		newSampleRow("(l) part: `die` → `destroy` (--rm removes the container)", down(func(t measure.Teardown) time.Duration { return t.Destroy })),
		newSampleRow("(l) aside: Close called → Close returned (the core answers once its `docker run` has exited)", pick(r.Teardowns, func(t measure.Teardown) (time.Duration, bool) { return t.Closed, true })),
		newSampleRow("(l) variant: the agent exits by itself (after (k)'s call): `die` → `destroy`", pick(r.Cold, func(c measure.ColdStart) (time.Duration, bool) { return c.ExitGone, c.ExitParts })),
		newSampleRow("(l) resolution: mean time between two `docker ps -a` answers while polling", pick(r.Teardowns, func(t measure.Teardown) (time.Duration, bool) { return t.PollGap, t.Polls > 1 })),
	}
}

func (r *results) memTarget(name string, f func(measure.Memory) measure.Latency, goal time.Duration) target {
	med := median(each(r.Memory, f))
	return target{fmt.Sprintf("%s, %d entries (median)", name, r.P.MemoryRows), "≤ " + ms(goal), ms(med), med <= goal}
}

// llmAddedLatency is (m): the relayed median less the direct one.
func (r *results) llmAddedLatency() time.Duration {
	med := func(f func(measure.LLM) measure.Latency) time.Duration {
		return median(each(r.LLM, f))
	}
	return med(func(l measure.LLM) measure.Latency { return l.Relayed }) - med(func(l measure.LLM) measure.Latency { return l.Direct })
}

// llmStreamRatios are (n) per repetition.
func (r *results) llmStreamRatios() []float64 { return each(r.LLM, measure.LLM.StreamRatio) }

func (r *results) llmAdded() target {
	name := "(m) added latency of a model API call through ipc-relay + proxy over direct (medians)"
	if len(r.LLM) == 0 {
		return target{Name: name, Goal: "≤ " + ms(targetLLMAdded), Measured: notMeasured}
	}
	d := r.llmAddedLatency()
	return target{name, "≤ " + ms(targetLLMAdded), ms(d), d <= targetLLMAdded}
}

func (r *results) llmStream() target {
	name := "(n) streaming throughput through relay + proxy ÷ direct"
	if len(r.LLM) == 0 {
		return target{Name: name, Goal: fmt.Sprintf("≥ %.2f", targetLLMStreamRatio), Measured: notMeasured}
	}
	ratio := measure.Median(r.llmStreamRatios())
	return target{name, fmt.Sprintf("≥ %.2f", targetLLMStreamRatio), fmt.Sprintf("%.2f", ratio), ratio >= targetLLMStreamRatio}
}

// llmRates is (n)'s two throughputs, from the medians over repetitions.
func (r *results) llmRates() string {
	if len(r.LLM) == 0 {
		return ""
	}
	n := r.LLM[0].StreamBytes
	d := median(each(r.LLM, func(l measure.LLM) measure.Latency { return l.StreamDirect }))
	x := median(each(r.LLM, func(l measure.LLM) measure.Latency { return l.StreamRelayed }))
	return fmt.Sprintf("%.0f / %.0f MB/s", measure.MBPerSec(n, d), measure.MBPerSec(n, x))
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

func (l latencyRow) spread() string { return spread(each(l.Reps, p50), l.Fmt) }

func (r *results) latencyRows() []latencyRow {
	return []latencyRow{
		{"(a) transport floor: zmq4 DEALER↔ROUTER echo, ipc://, 120 B", r.Floor, us},
		{"(a′) same, ROUTER on the hardened listener (zipc)", r.FloorZ, us},
		{"(b) echo request through the whole pipeline", r.Pipe, us},
		{"(b″) same, session past 4096 requests (correlation cache at its cap)", r.PipeFull, us},
		{"(f) echo request to the in-process (built-in) handler", r.PlugIn, us},
		{"(f) echo request to the same handler out of process", r.PlugOut, us},
		{"(f′) transport floor across two processes: (a) with the echo server in a child process", r.FloorX, us},
		{fmt.Sprintf("(h) memory_search, two words, %d entries (handler)", r.P.MemoryRows), each(r.Memory, func(m measure.Memory) measure.Latency { return m.Search }), us},
		{fmt.Sprintf("(i) memory brief, generated and rendered, %d entries (handler)", r.P.MemoryRows), each(r.Memory, func(m measure.Memory) measure.Latency { return m.Brief }), us},
		{"(j) memory_store (handler, synchronous=FULL)", each(r.Memory, func(m measure.Memory) measure.Latency { return m.Store }), us},
		{"(m) model API call direct (TLS to the fake upstream, small JSON reply)", each(r.LLM, func(l measure.LLM) measure.Latency { return l.Direct }), us},
		{"(m) model API call through ipc-relay + proxy (TCP → relay → Unix socket → proxy → TLS)", each(r.LLM, func(l measure.LLM) measure.Latency { return l.Relayed }), us},
		{"(n) streamed reply direct, request to last byte", each(r.LLM, func(l measure.LLM) measure.Latency { return l.StreamDirect }), ms},
		{"(n) streamed reply through ipc-relay + proxy, request to last byte", each(r.LLM, func(l measure.LLM) measure.Latency { return l.StreamRelayed }), ms},
		{"(e) bin/ipc, exec to exit", r.IPC, ms},
		{"(e) part: exec of /bin/true (starting any process)", r.ExecTrue, ms},
		{"(e) part: bin/ipc --help (process + Go runtime start, no connection)", r.IPCHelp, ms},
		{"(e) part: ipc.Call in process (dial, handshake, request, close)", r.IPCCall, us},
		{"(e) variant: bin/ipc with GOMAXPROCS=1", r.IPCOneP, ms},
		{"(e′) a Go hello-world built as bin/ipc is, exec to exit", r.Hello, ms},
	}
}

// each returns f of every element of xs.
func each[T, U any](xs []T, f func(T) U) []U {
	out := make([]U, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// The statistics of one repetition, for medianOf and latencyRow.stat.
func p50(l measure.Latency) time.Duration  { return l.Median }
func p90(l measure.Latency) time.Duration  { return l.P90 }
func p99(l measure.Latency) time.Duration  { return l.P99 }
func mean(l measure.Latency) time.Duration { return l.Mean }

// medianOf is the median over repetitions of one statistic.
func medianOf(ls []measure.Latency, stat func(measure.Latency) time.Duration) time.Duration {
	return measure.Median(each(ls, stat))
}

// median is the median over repetitions of the repetitions' medians.
func median(ls []measure.Latency) time.Duration { return medianOf(ls, p50) }

// helloTarget is (e′): an ipc run over a Go hello-world's, medians; a
// recording without the hello-world reports it as not measured.
func (r *results) helloTarget() target {
	const name = "(e′) one ipc run ÷ a Go hello-world built the same way, medians"
	want := fmt.Sprintf("≤ %.1f", targetIPCHello)
	h := median(r.Hello)
	if h == 0 {
		return target{name, want, notMeasured, false}
	}
	ratio := float64(median(r.IPC)) / float64(h)
	return target{name, want, fmt.Sprintf("%.2f", ratio), ratio <= targetIPCHello}
}

// helloRatios is (e′) per repetition: each one's ipc median over its
// hello-world median.
func (r *results) helloRatios() []float64 {
	var rs []float64
	for i := range min(len(r.IPC), len(r.Hello)) {
		if r.Hello[i].Median > 0 {
			rs = append(rs, float64(r.IPC[i].Median)/float64(r.Hello[i].Median))
		}
	}
	return rs
}

func perSec(t measure.Throughput) float64 { return t.PerSec }

func medianRate(ts []measure.Throughput) float64 { return measure.Median(each(ts, perSec)) }

func rateSpread(ts []measure.Throughput) string {
	return spread(each(ts, perSec), func(f float64) string { return fmt.Sprintf("%.0f", f) })
}

// spread is the lowest and highest of xs, formatted with f, or "" for none.
func spread[T cmp.Ordered](xs []T, f func(T) string) string {
	if len(xs) == 0 {
		return ""
	}
	return f(slices.Min(xs)) + " – " + f(slices.Max(xs))
}

func us(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond)) }
func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// printTable writes the figures and targets for a terminal.
func printTable(w io.Writer, r *results) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nmeasurement\tmedian\tp99\tmedians across reps\n")
	for _, l := range r.latencyRows() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", l.Name, l.stat(p50), l.stat(p99), l.spread())
	}
	fmt.Fprintf(tw, "(c) ratio b/a of the medians\t%.2f\t\t%s\n", measure.Median(r.Ratio), ratioSpread(r.Ratio))
	fmt.Fprintf(tw, "(f) ratio out-of-process/in-process echo\t%.2f\t\t%s\n", measure.Median(r.PlugRatio), ratioSpread(r.PlugRatio))
	fmt.Fprintf(tw, "(g) start to ready, %d out-of-process plugins\t%s\t\t%s\n", startupPlugins, ms(measure.Median(r.Startup)), durSpread(r.Startup))
	if len(r.LLM) > 0 {
		fmt.Fprintf(tw, "(n) stream throughput direct / through relay + proxy\t%s\t\t\n", r.llmRates())
		fmt.Fprintf(tw, "(n) ratio relayed/direct throughput\t%.2f\t\t%s\n", measure.Median(r.llmStreamRatios()), ratioSpread(r.llmStreamRatios()))
	}
	for _, n := range sessionCounts {
		fmt.Fprintf(tw, "(d) throughput, %d session%s, 1 in flight each\t%.0f/s\t\t%s\n", n, plural(n), medianRate(r.Seq[n]), rateSpread(r.Seq[n]))
	}
	fmt.Fprintf(tw, "(d) throughput, %d sessions, %d in flight each\t%.0f/s\t\t%s\n", sessionCounts[len(sessionCounts)-1], pipelinedWindow, medianRate(r.Piped), rateSpread(r.Piped))
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(r.Cold) > 0 {
		fmt.Fprintf(tw, "container sessions (%s)\tmedian\tp90\tmax\tn\n", r.Engine)
		for _, l := range r.containerRows() {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", l.Name, ms(l.L.Median), ms(l.L.P90), ms(l.L.Max), l.L.N)
		}
		tw.Flush()
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	}
	fmt.Fprintf(tw, "target\tgoal\tmeasured\t\n")
	for _, t := range r.targets() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Goal, t.Measured, strings.Trim(t.verdict(), "*"))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nmachine: %s, %d cores, %s, commit %s; other processes used %s during the run (load average %s → %s)\n",
		r.Machine.CPU, r.Machine.Cores, r.Machine.GoVersion, r.Machine.Commit, othersText(r), r.Start.LoadAvg, r.End.LoadAvg)
}

func ratioSpread(fs []float64) string {
	return spread(fs, func(f float64) string { return fmt.Sprintf("%.2f", f) })
}

func othersText(r *results) string {
	o := measure.Others(r.Start, r.End)
	if o < 0 {
		return "an unknown share of the CPUs"
	}
	return fmt.Sprintf("%.2f of %d cores (this benchmark %.2f)", o, r.Machine.Cores, measure.Self(r.Start, r.End))
}

func durSpread(ds []time.Duration) string { return spread(ds, ms) }
