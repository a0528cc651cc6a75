package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/carapace-dev/carapace/cmd/benchreport/measure"
	"github.com/carapace-dev/carapace/core/home"
)

// params are the command's flags.
type params struct {
	Out        string
	Reps       int // of the throughput and ipc measurements
	LatReps    int // of the latency measurements
	Samples    int
	Duration   time.Duration
	IPCRuns    int
	IPCBin     string
	JSON       string        // where to write the results as JSON, if anywhere
	StageTime  time.Duration // how long each piece of StageCosts runs
	MemoryOps  int           // timed calls of each memory operation per repetition
	MemoryRows int           // entries in the memory group
	CtrReps    int           // timed container sessions of (k) and (l); 0 leaves them out
	LLMOps     int           // timed small model API calls of (m) per side and repetition
	LLMReps    int           // repetitions of (m) and (n)
	CtrPoll    time.Duration // how often (l) asks the engine whether the container is there
}

// sessionCounts are the concurrency levels of the throughput runs.
var sessionCounts = []int{1, 4, 16}

// pipelinedWindow is the requests in flight per session of the extra
// pipelined run at the highest session count.
const pipelinedWindow = 4

// startupPlugins is how many out-of-process plugins (g) starts the core with.
const startupPlugins = 10

// containerWarmup is how many untimed rounds of (k) and (l) come first.
const containerWarmup = 2

// teardownSettle is how long (l) lets the agent run, once its container
// runs, before it closes the session.
const teardownSettle = 200 * time.Millisecond

// results is everything one run measured.
type results struct {
	P       params
	Machine measure.Machine
	Start   measure.Load
	End     measure.Load
	Elapsed time.Duration

	Floor     []measure.Latency // (a) per repetition
	FloorZ    []measure.Latency // (a) over the hardened listener
	Pipe      []measure.Latency // (b), on a fresh session
	PipeFull  []measure.Latency // (b) once the session's correlation cache is at its cap
	Ratio     []float64         // (c) b/a medians, per repetition
	Seq       map[int][]measure.Throughput
	Piped     []measure.Throughput // window pipelinedWindow, 16 sessions
	IPC       []measure.Latency    // (e)
	ExecTrue  []measure.Latency    // (e) decomposed: /bin/true
	IPCHelp   []measure.Latency    // ipc --help
	IPCCall   []measure.Latency    // ipc.Call in process
	IPCOneP   []measure.Latency    // (e) with GOMAXPROCS=1
	Hello     []measure.Latency    // (e′) a Go hello-world built as bin/ipc is
	RunStats  measure.ProcStats    // resource usage of the (e) runs
	HelpStats measure.ProcStats    // and of the ipc --help runs

	AuditBytesPerReq float64 // audit log growth per echo request

	FloorX    []measure.Latency // (f′) the transport floor across two processes
	PlugIn    []measure.Latency // (f) echo through the in-process handler
	PlugOut   []measure.Latency // (f) the same handler out of process
	PlugRatio []float64         // (f) out ÷ in medians, per repetition
	Startup   []time.Duration   // (g) start to ready with startupPlugins out-of-process plugins
	Memory    []measure.Memory  // (h), (i), (j): the memory plugin on a group of measure.MemoryEntries
	LLM       []measure.LLM     // (m), (n): the model API path through the ipc-relay and the proxy, and direct

	Engine    string              // the container engine of (k) and (l); empty when they were left out
	Cold      []measure.ColdStart // (k), one per timed session
	Teardowns []measure.Teardown  // (l), one per timed session
	Bare      []measure.BareRun   // (k)'s floor: a plain docker run of the same image

	ProfSeq  *measure.CPUProfile // (b), one session, sequential
	ProfLoad *measure.CPUProfile // (d), 16 sessions
	Stages   []measure.StageCost
	GoFresh  measure.StageCost // decode + validate on a new goroutine (before the worker pool)
	GoWarm   measure.StageCost // the same on a long-lived one (a session's worker)
}

func run(p params) error {
	if p.Reps < 1 || p.LatReps < 1 || p.Samples < 10 || p.IPCRuns < 1 || p.MemoryOps < 1 || p.MemoryRows < 1 || p.LLMOps < 1 || p.LLMReps < 1 || p.Duration <= 0 || p.StageTime <= 0 ||
		p.CtrReps < 0 || p.CtrPoll <= 0 {
		return errors.New("reps, samples, ipcruns, memops, memrows, llmops, llmreps, dur, stagetime and ctrpoll must be positive (samples at least 10), ctrreps not negative")
	}
	if p.Samples+p.Samples/10+1 >= measure.CorrelationCacheCap {
		// (b) is taken on a session whose correlation cache is not yet full;
		// (b) with a full cache is measured separately.
		return fmt.Errorf("samples must be below %d", (measure.CorrelationCacheCap-1)*10/11)
	}
	r := &results{P: p, Machine: measure.DescribeMachine(), Start: measure.SnapshotLoad(), Seq: map[int][]measure.Throughput{}}
	log := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "  "+format+"\n", args...) }

	ipcBin := p.IPCBin
	if _, err := os.Stat(ipcBin); err != nil {
		return fmt.Errorf("%w (make bench builds it first; so does make build)", err)
	}

	core, err := measure.StartCore("")
	if err != nil {
		return err
	}
	defer core.Close()

	// (a), (a') and (b), interleaved so that each ratio compares figures
	// taken moments apart.
	for i := range p.LatReps {
		fl, err := floor("ipc", p.Samples)
		if err != nil {
			return fmt.Errorf("transport floor: %w", err)
		}
		flz, err := floor("zipc", p.Samples)
		if err != nil {
			return fmt.Errorf("hardened floor: %w", err)
		}
		pl, full, perReq, err := pipeline(core, p.Samples)
		if err != nil {
			return fmt.Errorf("pipeline: %w", err)
		}
		r.Floor, r.FloorZ, r.Pipe, r.PipeFull = append(r.Floor, fl), append(r.FloorZ, flz), append(r.Pipe, pl), append(r.PipeFull, full)
		r.Ratio = append(r.Ratio, float64(pl.Median)/float64(fl.Median))
		r.AuditBytesPerReq = perReq
		log("rep %d/%d: floor %s, hardened floor %s, pipeline %s (p99 %s), with a full correlation cache %s", i+1, p.LatReps,
			us(fl.Median), us(flz.Median), us(pl.Median), us(pl.P99), us(full.Median))
	}

	// (f) and (g): plugins out of process.
	if err := plugins(r, p, log); err != nil {
		return err
	}

	// (h), (i), (j): the memory plugin.
	log("memory: seeding a group of %d entries", p.MemoryRows)
	if r.Memory, err = measure.MeasureMemory(p.MemoryRows, p.MemoryOps, p.Reps); err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	for i, m := range r.Memory {
		log("rep %d/%d: memory_search %s, brief %s, memory_store %s", i+1, p.Reps, us(m.Search.Median), us(m.Brief.Median), us(m.Store.Median))
	}

	// (m), (n): the model API path.
	if r.LLM, err = measure.MeasureLLM(p.LLMOps, p.LLMReps); err != nil {
		return fmt.Errorf("model API path: %w", err)
	}
	for i, l := range r.LLM {
		log("rep %d/%d: model API call direct %s, through relay + proxy %s; %d KiB stream direct %.0f MB/s, through relay + proxy %.0f MB/s (×%.2f)", i+1, p.LLMReps,
			us(l.Direct.Median), us(l.Relayed.Median), l.StreamBytes>>10, measure.MBPerSec(l.StreamBytes, l.StreamDirect.Median), measure.MBPerSec(l.StreamBytes, l.StreamRelayed.Median), l.StreamRatio())
	}

	// (k), (l): container sessions.
	if err := containers(r, p, log); err != nil {
		return err
	}

	// (d)
	for i := range p.Reps {
		for _, n := range sessionCounts {
			t, err := measure.RunThroughput(core, n, 1, p.Duration)
			if err != nil {
				return fmt.Errorf("throughput, %d sessions: %w", n, err)
			}
			r.Seq[n] = append(r.Seq[n], t)
			log("rep %d/%d: %2d sessions, sequential: %.0f requests/s", i+1, p.Reps, n, t.PerSec)
		}
		n := sessionCounts[len(sessionCounts)-1]
		t, err := measure.RunThroughput(core, n, pipelinedWindow, p.Duration)
		if err != nil {
			return fmt.Errorf("throughput, %d sessions pipelined: %w", n, err)
		}
		r.Piped = append(r.Piped, t)
		log("rep %d/%d: %2d sessions, %d in flight each: %.0f requests/s", i+1, p.Reps, n, pipelinedWindow, t.PerSec)
	}

	// (e), and its parts: starting a process, starting ipc without a
	// connection, and ipc's client code without a process; (e′) the same
	// run against a Go hello-world built the same way.
	helloDir, err := os.MkdirTemp("", "benchreport-hello")
	if err != nil {
		return err
	}
	defer os.RemoveAll(helloDir)
	hello, err := measure.BuildHello(helloDir)
	if err != nil {
		return err
	}
	for i := range p.Reps {
		h, err := core.OpenSession()
		if err != nil {
			return err
		}
		run := measure.IPCRunner{Bin: ipcBin, Socket: h.Info().Socket, Stats: &r.RunStats}
		help := measure.IPCRunner{Bin: ipcBin, Stats: &r.HelpStats}
		oneP := measure.IPCRunner{Bin: ipcBin, Socket: h.Info().Socket, Env: []string{"GOMAXPROCS=1"}}
		var ls [6]measure.Latency
		for _, m := range []struct {
			at int
			op func() error
		}{{0, measure.ExecTrue}, {1, help.Help}, {2, run.Call}, {4, oneP.Run}} {
			if ls[m.at], err = measure.Sample(p.IPCRuns, 5, m.op); err != nil {
				h.Close()
				return fmt.Errorf("ipc exec: %w", err)
			}
		}
		// (e) and (e′) run by run in turn, not each in a block: the
		// ratio of the two is the target, and the machine's drifts and
		// what ran just before an exec move it more than a block's
		// difference in time would show.
		pair, err := measure.SampleAlternating(p.IPCRuns, 5, run.Run, measure.ExecHello(hello))
		h.Close()
		if err != nil {
			return fmt.Errorf("ipc exec: %w", err)
		}
		ls[3], ls[5] = pair[0], pair[1]
		r.ExecTrue, r.IPCHelp, r.IPCCall = append(r.ExecTrue, ls[0]), append(r.IPCHelp, ls[1]), append(r.IPCCall, ls[2])
		r.IPC, r.IPCOneP, r.Hello = append(r.IPC, ls[3]), append(r.IPCOneP, ls[4]), append(r.Hello, ls[5])
		log("rep %d/%d: ipc exec to exit %s (p99 %s); /bin/true %s, a Go hello-world %s, ipc --help %s, ipc.Call in process %s, ipc with GOMAXPROCS=1 %s", i+1, p.Reps,
			ms(ls[3].Median), ms(ls[3].P99), ms(ls[0].Median), ms(ls[5].Median), ms(ls[1].Median), ms(ls[2].Median), ms(ls[4].Median))
	}

	// Where the time goes.
	if r.ProfSeq, err = profileSequential(core, p.Duration); err != nil {
		return fmt.Errorf("profile (b): %w", err)
	}
	var loaded measure.Throughput
	if r.ProfLoad, err = measure.Profile(func() error {
		loaded, err = measure.RunThroughput(core, sessionCounts[len(sessionCounts)-1], 1, p.Duration)
		return err
	}); err != nil {
		return fmt.Errorf("profile (d): %w", err)
	}
	r.ProfLoad.Requests = loaded.All
	log("profiles taken")
	if r.Stages, err = measure.StageCosts(p.StageTime); err != nil {
		return fmt.Errorf("stage costs: %w", err)
	}
	if r.GoFresh, r.GoWarm, err = measure.GoroutineCosts(p.StageTime); err != nil {
		return fmt.Errorf("goroutine costs: %w", err)
	}
	log("stage costs measured")

	r.End = measure.SnapshotLoad()
	r.Elapsed = r.End.At.Sub(r.Start.At)
	if p.JSON != "" {
		b, err := json.MarshalIndent(r, "", "\t")
		if err != nil {
			return err
		}
		if err := os.WriteFile(p.JSON, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	printTable(os.Stdout, r)
	if p.Out != "" {
		if err := os.WriteFile(p.Out, []byte(markdown(r)), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(os.Stdout, "\nwrote %s\n", p.Out)
	}
	return nil
}

// floor measures n sequential round trips of the echo DEALER↔ROUTER.
func floor(scheme string, n int) (measure.Latency, error) {
	f, err := measure.StartFloor(scheme)
	if err != nil {
		return measure.Latency{}, err
	}
	defer f.Close()
	return measure.Sample(n, n/10, f.RoundTrip)
}

// pipeline measures n sequential echo requests on a fresh session, the
// audit log's growth per request, and then n more once the session's
// correlation cache holds its maximum of finished requests.
func pipeline(c *measure.Core, n int) (fresh, full measure.Latency, auditPerReq float64, err error) {
	s, err := c.OpenCaller()
	if err != nil {
		return fresh, full, 0, err
	}
	defer s.Close()
	warm := n / 10
	before := c.AuditBytes()
	if fresh, err = measure.Sample(n, warm, s.Call); err != nil {
		return fresh, full, 0, err
	}
	if after := c.AuditBytes(); after > before { // no rotation in between
		auditPerReq = float64(after-before) / float64(n+warm)
	}
	fill := measure.CorrelationCacheCap - (n + warm + 1) + warm
	full, err = measure.Sample(n, fill, s.Call)
	return fresh, full, auditPerReq, err
}

// profileSequential profiles (b): one session, sequential calls, for d.
func profileSequential(c *measure.Core, d time.Duration) (*measure.CPUProfile, error) {
	s, err := c.OpenCaller()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var n int64
	prof, err := measure.Profile(func() error {
		for end := time.Now().Add(d); time.Now().Before(end); n++ {
			if err := s.Call(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	prof.Requests = n
	return prof, nil
}

// plugins measures (f), an echo request to the built-in handler in process
// and to the same handler out of process, interleaved in one core, and (g),
// the core's start to ready with startupPlugins out-of-process plugins.
func plugins(r *results, p params, log func(string, ...any)) error {
	dir, err := os.MkdirTemp("", "cpbin")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "oopecho")
	if err := measure.BuildEchoPlugin(bin); err != nil {
		return err
	}
	core, _, err := measure.StartCoreWith("", func(h home.Dir) error { return measure.InstallEchoPlugins(h, bin, "oop") }, nil)
	if err != nil {
		return err
	}
	defer core.Close()
	for i := range p.LatReps {
		var ls [2]measure.Latency
		for j, topic := range []string{measure.EchoTopic, measure.OOPEchoTopic} {
			s, err := core.OpenCallerTopic(topic)
			if err != nil {
				return fmt.Errorf("(f) %s: %w", topic, err)
			}
			ls[j], err = measure.Sample(p.Samples, p.Samples/10, s.Call)
			s.Close()
			if err != nil {
				return fmt.Errorf("(f) %s: %w", topic, err)
			}
		}
		fx, err := measure.StartCrossFloor(bin)
		if err != nil {
			return fmt.Errorf("(f′): %w", err)
		}
		x, err := measure.Sample(p.Samples, p.Samples/10, fx.RoundTrip)
		fx.Close()
		if err != nil {
			return fmt.Errorf("(f′): %w", err)
		}
		r.PlugIn, r.PlugOut, r.FloorX = append(r.PlugIn, ls[0]), append(r.PlugOut, ls[1]), append(r.FloorX, x)
		r.PlugRatio = append(r.PlugRatio, float64(ls[1].Median)/float64(ls[0].Median))
		log("rep %d/%d: echo in process %s, out of process %s (×%.2f); transport floor across processes %s", i+1, p.LatReps,
			us(ls[0].Median), us(ls[1].Median), r.PlugRatio[len(r.PlugRatio)-1], us(x.Median))
	}
	names := make([]string, startupPlugins)
	for i := range names {
		names[i] = fmt.Sprintf("oop%d", i+1)
	}
	for i := range p.Reps {
		c, took, err := measure.StartCoreWith("", func(h home.Dir) error { return measure.InstallEchoPlugins(h, bin, names...) }, nil)
		if err != nil {
			return fmt.Errorf("(g): %w", err)
		}
		healthy, err := c.Healthy()
		c.Close()
		if err != nil {
			return err
		}
		if healthy < startupPlugins {
			return fmt.Errorf("(g): only %d of %d plugins came up healthy", healthy, startupPlugins)
		}
		r.Startup = append(r.Startup, took)
		log("rep %d/%d: start to ready with %d out-of-process plugins: %s", i+1, p.Reps, startupPlugins, ms(took))
	}
	return nil
}

// containers measures (k), a container session's cold start, and (l), its
// teardown, on Docker with the offline test image: containerWarmup untimed
// rounds, then p.CtrReps timed ones, each a cold start, a teardown and a
// bare docker run of the same image.
func containers(r *results, p params, log func(string, ...any)) (err error) {
	if p.CtrReps == 0 {
		log("container sessions: left out (-ctrreps 0)")
		return nil
	}
	log("container sessions: building the agent test image")
	c, err := measure.StartContainers(filepath.Dir(p.IPCBin))
	if err != nil {
		return fmt.Errorf("(k), (l): %w (they need a running Docker engine and busybox-static; -ctrreps 0 leaves them out)", err)
	}
	defer func() {
		if cerr := c.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("(k), (l): clean up: %w", cerr))
		}
	}()
	r.Engine = c.Engine
	for i := range containerWarmup + p.CtrReps {
		cs, err := c.ColdStart()
		if err != nil {
			return fmt.Errorf("(k): %w", err)
		}
		td, err := c.Teardown(p.CtrPoll, teardownSettle)
		if err != nil {
			return fmt.Errorf("(l): %w", err)
		}
		bare, err := c.Bare()
		if err != nil {
			return fmt.Errorf("(k) floor: %w", err)
		}
		if i < containerWarmup {
			continue
		}
		r.Cold, r.Teardowns, r.Bare = append(r.Cold, cs), append(r.Teardowns, td), append(r.Bare, bare)
		log("session %d/%d: cold start %s (docker run started after %s, container started after %s more), teardown %s (Close returned after %s); bare docker run %s",
			i+1-containerWarmup, p.CtrReps, ms(cs.Total), ms(cs.Session+cs.Files), ms(cs.Create+cs.Start), ms(td.Total), ms(td.Closed), ms(bare.Total))
	}
	return nil
}
