package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/carapace-dev/carapace/internal/benchreport/measure"
)

// share returns the cumulative share of prof's CPU time in the functions
// matching subs.
func share(prof *measure.CPUProfile, subs ...string) float64 {
	return 100 * prof.Inclusive([]measure.Component{{Name: "", Match: subs}})[0].Fraction
}

// perReq returns the cumulative CPU time per request of the functions
// matching subs, formatted.
func perReq(prof *measure.CPUProfile, subs ...string) string {
	return us(prof.PerRequest(prof.Inclusive([]measure.Component{{Name: "", Match: subs}})[0].CPU))
}

func stage(r *results, prefix string) measure.StageCost {
	for _, s := range r.Stages {
		if strings.HasPrefix(s.Name, prefix) {
			return s
		}
	}
	return measure.StageCost{}
}

// analysis is the written reading of the figures: the numbers come from this
// run, the reasoning from the code at the commit the report names.
func analysis(r *results) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	med := func(ls []measure.Latency) time.Duration {
		return medianOf(ls, func(l measure.Latency) time.Duration { return l.Median })
	}
	fl, flz, pl, full := med(r.Floor), med(r.FloorZ), med(r.Pipe), med(r.PipeFull)
	filter := max(flz-fl, 0) // the hardened listener's cost; noise can make the difference negative
	gap := pl - fl
	var sum time.Duration
	for _, s := range r.Stages {
		sum += s.PerOp * time.Duration(s.PerReq)
	}
	auditCost := stage(r, "audit").PerOp * 2
	decode := stage(r, "strict wire decode").PerOp
	args := stage(r, "argument decode").PerOp
	stack := max(r.GoFresh.PerOp-r.GoWarm.PerOp, 0)
	seq, load := r.ProfSeq, r.ProfLoad
	targets := r.targets()

	p("## Reading the figures\n\n")

	p("### (c) pipeline ÷ floor: what limits it\n\n")
	budget := time.Duration(float64(fl) * (targetRatio - 1))
	p("A ratio of %.1f over a floor of %s leaves **%s** per request for everything the core adds to a bare echo. ", targetRatio, us(fl), us(budget))
	p("The work the core does for a request costs %s when each piece runs alone on a warm goroutine (the piece-by-piece table); ", us(sum))
	p("the two audit writes alone — one before the handler runs, one for the answer, each a `write(2)` that must succeed — take %s, and the strict wire decode %s. ", us(auditCost), us(decode))
	p("Tuning can shrink the gap a good deal (see *What to change*) but not to %s: the target presumes a floor several times slower than an in-process zmq4 echo over a Unix socket (%s). ", us(budget), us(fl))
	p("An absolute budget for (b) − (a) would be the meaningful target; it is %s today.\n\n", us(gap))
	p("Where the %s between (a) and (b) goes, from this run's measurements:\n\n", us(gap))
	p("| | per request | evidence |\n| --- | ---: | --- |\n")
	p("| the hardened listener's filter (`ipc/zmtp`) | %s | (a′) − (a) |\n", us(filter))
	p("| the core's pieces of work, each alone | %s | the piece-by-piece table |\n", us(sum))
	p("| running them on a **new goroutine per request** (stack growth) | %s | new goroutine − long-lived goroutine, same work; in the profile of (b) `runtime.newstack` takes %s of CPU per request (%.0f %%) |\n",
		us(stack), perReq(seq, "runtime.newstack"), share(seq, "runtime.newstack"))
	if rest := gap - filter - sum - stack; rest > 0 {
		p("| the rest: hand-offs between goroutines and their wake-ups across the two Ps | %s | (b) − (a) minus the rows above |\n\n", us(rest))
	} else {
		p("| the rest | ≈ 0 | the rows above already add up to more than (b) − (a): pieces timed alone do not overlap with the transport's waits as they do in (b) |\n\n")
	}
	p("For one request the core runs four goroutines: the session's receive loop hands the message to a new goroutine (`session.(*Manager).loop`), ")
	p("the pipeline calls the handler on another (`pipeline.(*Pipeline).invoke`, for its timeout), and zmq4 sends the reply from yet another ")
	p("(`routerMWriter.write` starts an errgroup goroutine per message, under a fresh `context.WithTimeout`). ")
	p("New goroutines start with a small stack. The request's goroutine recurses deeply in JSON decoding and `jsonschema` validation, so the runtime grows and copies its stack several times per request, and zmq4's writer goroutine grows its own in the write path: ")
	p("`runtime.newstack` is %.0f %% of the process's CPU in (b) and %.0f %% under the 16-session load, reached mostly from `jsonschema.(*Schema).validate` and `encoding/json`, then from `internal/poll` under zmq4's writer (`go tool pprof -peek runtime.newstack` on the kept profiles).\n\n",
		share(seq, "runtime.newstack"), share(load, "runtime.newstack"))
	p("Other costs in the profile of (b), as CPU per request (and share of the process's CPU): ")
	for i, c := range []struct {
		name string
		subs []string
	}{
		{"zmq4 with its socket I/O, both sides", []string{"go-zeromq/zmq4."}},
		{"encoding/json anywhere", []string{"encoding/json."}},
		{"the strict wire decode", []string{"carapace/ipc.DecodeRequest"}},
		{"schema validation", []string{"jsonschema/v5.(*Schema).Validate"}},
		{"the audit writes", []string{"audit.(*Log).Write"}},
		{"the correlation cache", []string{"session.(*cache)."}},
		{"timers (a `context.WithTimeout` per handler call and per zmq4 send, a deadline per write in `ipc/zmtp`)", []string{"context.WithDeadline", "SetWriteDeadline", "time.AfterFunc", "runtime.(*timer)"}},
		{"garbage collection", []string{"runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep"}},
		{"the sanitiser (the echo result is one short string)", []string{"carapace/core/sanitize."}},
		{"uuid", []string{"google/uuid."}},
	} {
		if i > 0 {
			p("; ")
		}
		p("%s %s (%.0f %%)", c.name, perReq(seq, c.subs...), share(seq, c.subs...))
	}
	p(". The 16-session profile shows the same order.\n\n")
	p("The correlation cache adds a cost that grows with the session's history: once a session has finished %d requests, every request shifts the cache's whole order slice to drop the oldest (`cache.expire`: `append(order[:0], order[i:]...)`), ",
		measure.CorrelationCacheCap)
	p("a 64 KiB memmove, %s per request in the replica above (which leaves out the lock and runs with warm caches)", us(r.Shift.PerOp))
	if full > pl {
		p("; end to end (b″) − (b) = %s. ", us(full-pl))
	} else {
		p("; end to end, (b″) and (b) differ by less than this run's noise (%s). ", us(full-pl))
	}
	p("The profile of (b) runs one session past the cap for nearly all its requests, and there the cache takes %s of CPU per request. ", perReq(seq, "session.(*cache)."))
	p("At the default rate limit (60 a minute, 2-minute memory) a session holds about 120 correlations and never reaches the cap; a raised limit or a busy agent does.\n\n")

	p("### (e) one ipc run\n\n")
	ex, help, call, run, oneP := med(r.ExecTrue), med(r.IPCHelp), med(r.IPCCall), med(r.IPC), med(r.IPCOneP)
	p("`bin/ipc` from exec to exit takes %s (target %s: %s). Of that, starting any process from this one takes %s (`/bin/true`), ", ms(run), ms(targetIPC), strings.Trim(metWord(targets[3].Met), "*"), ms(ex))
	p("the Go runtime and package initialisation of `ipc` %s more (`ipc --help`: %s), and the call itself %s more — ", ms(help-ex), ms(help), ms(run-help))
	p("although the same client code in a warm process (`ipc.Call`) needs only %s, handshake and close included.\n\n", us(call))
	rc, rf, rv, ri := r.RunStats.Per()
	hc, hf, hv, hi := r.HelpStats.Per()
	p("| per process | CPU (user+sys) | minor page faults | voluntary switches | involuntary switches |\n| --- | ---: | ---: | ---: | ---: |\n")
	p("| `ipc tool.invoke.echo …` | %s | %.0f | %.0f | %.0f |\n", ms(rc), rf, rv, ri)
	p("| `ipc --help` | %s | %.0f | %.0f | %.0f |\n\n", ms(hc), hf, hv, hi)
	p("So the call's extra time in a fresh process is a cold process's: page faults as the heap and zmq4's goroutine stacks are first touched, ")
	p("new OS threads for the goroutines that block in syscalls, and their wake-ups — not the core (its side is inside the %s of `ipc.Call`). ", us(call))
	p("With `GOMAXPROCS=1` the run takes %s. The package initialisers add a little too: `GODEBUG=inittrace=1 bin/ipc --help` shows `golang.org/x/text` (pulled in by zmq4's `protocol.go` for `cases.Title`) ", ms(oneP))
	p("and the `ipc` package's correlation regexp among the larger ones. ")
	p("The target sits within a millisecond of the process-start floor of this VM, so it is met or missed by the machine's load as much as by the code.\n\n")

	p("### (b) p99 and (d) throughput\n\n")
	top := sessionCounts[len(sessionCounts)-1]
	p("The tail of (b) is mostly scheduling: p90 is already %s against a median of %s, and the floor's own p99 is %s — wake-ups of goroutines on the other P of a shared 2-core VM widen both. ",
		us(medianOf(r.Pipe, func(l measure.Latency) time.Duration { return l.P90 })), us(pl), us(medianOf(r.Floor, func(l measure.Latency) time.Duration { return l.P99 })))
	p("No stage of an echo request waits on anything but the CPU and the audit log's `write(2)`, which returns once the line is in the page cache (the log's fsync runs outside its lock once a second; its rotation, every 10 MiB by default, runs under the lock). ")
	p("Throughput is CPU-bound: under the %d-session load the process keeps %.2f cores busy, and the in-process load generator takes %.0f %% of it, so the core alone would serve more. ",
		top, float64(load.Total)/float64(r.P.Duration), 100*load.Partition(measure.Sides)[0].Fraction)
	p("One sequential session is bound by its round trip rather than by CPU (%.0f requests/s ≈ one request per %s); ",
		medianRate(r.Seq[1]), us(time.Duration(float64(time.Second)/max(medianRate(r.Seq[1]), 1))))
	p("%d in flight per session raises the %d-session figure to %.0f requests/s, most likely because the receive loops and writers then find work waiting instead of parking and being woken for every request.\n\n", pipelinedWindow, top, medianRate(r.Piped))

	p("## What to change\n\n")
	p("Not changed here (this work adds benchmarks only); roughly in order of gain per request on (b), from the measurements above:\n\n")
	p("1. **Run requests on long-lived goroutines.** A per-session pool of workers (grown up to `MaxInFlight`, parked when idle) instead of `go m.handle(...)` per message, ")
	p("and a reusable goroutine for in-process handler calls instead of one per call in `pipeline.invoke`, keep their grown stacks: about %s per request (new goroutine − long-lived goroutine; the profile of (b) puts `runtime.newstack` at %s of CPU per request), ",
		us(stack), perReq(seq, "runtime.newstack"))
	p("the largest single item. The in-flight cap and the per-session isolation stay as they are.\n")
	p("2. **Decode the wire message in one pass, and the arguments once.** `ipc.DecodeRequest` walks the token API (%.0f allocations, %s); `decodeArguments` decodes the arguments again and re-marshals them to canonical JSON (%s), ",
		stage(r, "strict wire decode").Allocs, us(decode), us(args))
	p("which only stage 5 (confirmation of high-risk tools) uses. A single decode with the duplicate/unknown-field checks kept, and canonical JSON only for high-risk tools, would save a few µs and most allocations.\n")
	p("3. **Make the correlation cache O(1) at its cap**: a ring (or a head index compacted rarely) instead of shifting the order slice on every request — ")
	if full > pl {
		p("(b″) − (b) = %s per request once a session passes %d requests.\n", us(full-pl), measure.CorrelationCacheCap)
	} else {
		p("%s of CPU per request in the profile of (b) once a session passes %d requests.\n", perReq(seq, "session.(*cache)."), measure.CorrelationCacheCap)
	}
	p("4. **One write per frame in the hardened transport.** zmq4 writes a frame's header and body with two `write(2)` calls, and `ipc/zmtp` sets a write deadline before each; ")
	p("holding a header back until its body arrives (tracking frame boundaries on the write side, as the filter already does on the read side) would halve the reply's syscalls and deadline updates — part of the %s that (a′) costs over (a).\n", us(filter))
	p("5. **Audit writes stay synchronous** — a request that cannot be audited must not run — but under concurrency they could be group-committed (writers queued under the lock share one `write(2)`, each still returning only once its line is in the file). ")
	p("That helps throughput, not the sequential %s.\n", us(auditCost))
	p("6. **zmq4 itself** starts a goroutine, an errgroup and a timer per `Send` and reads a frame's header and body with separate reads. Fixing that upstream lowers the floor and (b) alike — good for latency, but it makes the ratio (c) *larger*.\n")
	p("7. **For (e)**: the process start and a cold Go runtime dominate; `GOMAXPROCS=1` for `ipc` (it is single-request) is worth measuring on the target machines, and dropping zmq4's `x/text` dependency would trim initialisation. ")
	p("Neither brings the call near the in-process %s: an agent that makes many calls would need a long-lived client.\n", us(call))
	return b.String()
}
