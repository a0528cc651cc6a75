package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/carapace-dev/carapace/cmd/benchreport/measure"
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

// The figures of the first run of these benchmarks, at commit 4024ebd on
// the reference machine, before the worker pool, the one-pass wire decoder
// and the O(1) cache eviction (commit fde28c1). They are the only figures
// in the prose that do not come from the run.
const (
	beforeCommit = "4024ebd"
	beforePipe   = 43200 * time.Nanosecond // (b) median
	beforeP99    = 243 * time.Microsecond  // (b) p99
	beforeRatio  = 3.09                    // (c)
	beforeTput   = 26319.0                 // (d), 16 sessions, requests/s
	beforeIPC    = 2870 * time.Microsecond // (e) median
	changeCommit = "fde28c1"
)

// analysis is the written reading of the figures: the numbers come from this
// run, the reasoning from the code at the commit the report names.
func analysis(r *results) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	fl, flz, pl, full := median(r.Floor), median(r.FloorZ), median(r.Pipe), median(r.PipeFull)
	filter := max(flz-fl, 0) // the hardened listener's cost; noise can make the difference negative
	gap := pl - fl
	var sum time.Duration // what an echo request does (PerReq 0 pieces count for nothing)
	for _, s := range r.Stages {
		sum += s.PerOp * time.Duration(s.PerReq)
	}
	auditCost := stage(r, "audit").PerOp * 2
	decode := stage(r, "strict wire decode")
	args := stage(r, "argument decode")
	canon := stage(r, "canonical JSON")
	handler := stage(r, "handler call")
	stack := max(r.GoFresh.PerOp-r.GoWarm.PerOp, 0)
	seq, load := r.ProfSeq, r.ProfLoad
	targets := r.targets()
	ratio := measure.Median(r.Ratio)
	newstack := []string{"runtime.newstack"}

	p("## Reading the figures\n\n")

	p("### (c) pipeline ÷ floor: what limits it\n\n")
	budget := time.Duration(float64(fl) * (targetRatio - 1))
	p("A ratio of %.1f over a floor of %s leaves **%s** per request for everything the core adds to a bare echo. ", targetRatio, us(fl), us(budget))
	p("The work the core does for a request costs %s when each piece runs alone on a warm goroutine (the piece-by-piece table); ", us(sum))
	p("the two audit writes alone — one before the handler runs, one for the answer, each a `write(2)` that must succeed — take %s, and the strict wire decode %s. ", us(auditCost), us(decode.PerOp))
	switch {
	case ratio <= targetRatio:
		p("In this run the ratio is %.2f, within the target.\n\n", ratio)
	case sum > budget:
		p("So (c) ≤ %.1f cannot be reached while every request makes two synchronous audit writes — fail-closed by design: a request that cannot be audited is not run — over a floor of %s: ", targetRatio, us(fl))
		p("the two writes alone take %s, %.0f %% of the %s, and the other pieces (decoding, validation, the handler call, encoding, the hash, the id, the limiter, the sanitiser) take %s more. ",
			us(auditCost), 100*float64(auditCost)/float64(max(budget, 1)), us(budget), us(sum-auditCost))
	default:
		p("The pieces alone fit in the %s; what stands between this run's %.2f and the target is the hand-offs between goroutines and the waits around them (below). ", us(budget), ratio)
	}
	if ratio > targetRatio {
		p("The target presumes a floor several times slower than an in-process zmq4 echo over a Unix socket (%s). ", us(fl))
		p("An absolute budget for (b) − (a) would be the meaningful target; it is %s today.\n\n", us(gap))
	}
	p("Where the %s between (a) and (b) goes, from this run's measurements:\n\n", us(gap))
	p("| | per request | evidence |\n| --- | ---: | --- |\n")
	p("| the hardened listener's filter (`ipc/zmtp`) | %s | (a′) − (a) |\n", us(filter))
	p("| the core's pieces of work, each alone | %s | the piece-by-piece table |\n", us(sum))
	if rest := gap - filter - sum; rest > 0 {
		p("| the rest: the hand-offs between goroutines that (a) does not have (receive loop → worker, worker → handler goroutine and back) and their wake-ups across the %d Ps | %s | (b) − (a) minus the rows above |\n\n", r.Machine.GOMAXPROCS, us(rest))
	} else {
		p("| the rest | ≈ 0 | the rows above already add up to more than (b) − (a): pieces timed alone do not overlap with the transport's waits as they do in (b) |\n\n")
	}
	p("Five goroutines of the core take part in one request, two of them started for it: zmq4's reader for the connection (`routerQReader.listen`) queues the message for the session's receive loop (`session.(*Manager).loop`), which hands it to one of the session's long-lived workers ")
	p("(`session.(*Manager).worker`: up to `MaxInFlight`, 32 by default, started as they are needed and kept until the session closes), which decodes it, consults the correlation cache and runs the six stages and the response path; ")
	p("the pipeline calls the handler on a new goroutine (`pipeline.(*Pipeline).invoke`, for its timeout), and zmq4 sends the reply from another ")
	p("(`routerMWriter.write` starts an errgroup goroutine per message, under a fresh `context.WithTimeout` from `Send`).\n\n")
	p("The workers are why the pieces above run on a warm goroutine. The same wire decode, argument decode and schema validation cost %s on a new goroutine per request and %s handed to a long-lived one (the second table): ",
		us(r.GoFresh.PerOp), us(r.GoWarm.PerOp))
	p("a new goroutine starts with a small stack, and JSON decoding and `jsonschema` validation recurse deeply enough that the runtime grows and copies it several times. ")
	p("Until `%s` sessions started a goroutine per message and every request paid that difference — %s in this run's measurement; that is the reason for the worker pool, not a cost the core has now. ", changeCommit, us(stack))
	p("What stack growth is left comes from the goroutines still started per request: `runtime.newstack` takes %s of CPU per request in the profile of (b) (%.0f %%) and %.0f %% under the 16-session load; ",
		perReq(seq, newstack...), share(seq, newstack...), share(load, newstack...))
	p("in (b), %s of it on the sessions' workers, %s on the handler goroutines, %s on zmq4's writer goroutines for the core's ROUTER and %s in the benchmark client.\n\n",
		us(seq.PerRequest(seq.InclusiveAll(newstack, []string{"session.(*Manager).worker"}))),
		us(seq.PerRequest(seq.InclusiveAll(newstack, []string{"pipeline.(*Pipeline).invoke.func"}))),
		us(seq.PerRequest(seq.InclusiveAll(newstack, []string{"zmq4.(*routerMWriter)"}))),
		us(seq.PerRequest(seq.InclusiveAll(newstack, measure.Sides[0].Match))))
	p("Other costs in the profile of (b), as CPU per request (and share of the process's CPU): ")
	for i, c := range []struct {
		name string
		subs []string
	}{
		{"zmq4 with its socket I/O, both sides", []string{"go-zeromq/zmq4."}},
		{"encoding/json anywhere", []string{"encoding/json."}},
		{"the strict wire decode", []string{"carapace/ipc.DecodeRequest"}},
		{"the argument decode", []string{"pipeline.decodeArguments"}},
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
	p(".\n\n")

	lo, hi := slices.Min(each(r.Pipe, p50)), slices.Max(each(r.Pipe, p50))
	p("The correlation cache no longer costs more as a session's history grows. Until `%s`, once a session had finished %d requests, every request shifted the cache's whole order slice to drop the oldest (a 64 KiB memmove); ",
		changeCommit, measure.CorrelationCacheCap)
	p("now `cache.expire` drops the oldest in O(1), advancing a head index, and compacts the slice only when the dead prefix is as long as the live part — one copy of %d entries every %d requests at the cap. ",
		measure.CorrelationCacheCap, measure.CorrelationCacheCap)
	p("(b″), the same session past %d requests, has a median of %s against (b)'s %s: ", measure.CorrelationCacheCap, us(full), us(pl))
	if full-pl <= hi-lo {
		p("a difference of %s, no more than the spread of (b)'s own medians across repetitions (%s – %s), so the cap costs nothing measurable. ", us(full-pl), us(lo), us(hi))
	} else {
		p("%s more, beyond the spread of (b)'s own medians across repetitions (%s – %s). ", us(full-pl), us(lo), us(hi))
	}
	p("The profile of (b) runs one session past the cap for nearly all its requests; the whole cache (join, deliver and expire, under its lock) takes %s of CPU per request there. ", perReq(seq, "session.(*cache)."))
	p("At the default rate limit (60 a minute, 2-minute memory) a session holds about 120 correlations and never reaches the cap; a raised limit or a busy agent does.\n\n")

	p("### (e) one ipc run\n\n")
	ex, help, call, run, oneP, hello := median(r.ExecTrue), median(r.IPCHelp), median(r.IPCCall), median(r.IPC), median(r.IPCOneP), median(r.Hello)
	p("`bin/ipc` from exec to exit takes %s (target %s: %s). Of that, starting any process from this one takes %s (`/bin/true`), ", ms(run), ms(targetIPC), strings.Trim(metWord(targets[3].Met), "*"), ms(ex))
	p("the Go runtime and package initialisation of `ipc` %s more (`ipc --help`: %s), and the call itself %s more — ", ms(help-ex), ms(help), ms(run-help))
	p("although the same client code in a warm process (`ipc.Call`) needs only %s, handshake and close included.\n\n", us(call))
	if hello > 0 {
		p("A Go hello-world built the same way (`CGO_ENABLED=0`, `-trimpath`, `-ldflags '-s -w'`) takes %s from exec to exit, so an ipc run is %.2f of it (target %.1f: %s; by repetition %s). ",
			ms(hello), float64(run)/float64(hello), targetIPCHello, strings.Trim(metWord(targets[4].Met), "*"),
			spread(r.helloRatios(), func(f float64) string { return fmt.Sprintf("%.2f", f) }))
		p("`ipc --help` alone is %.2f of it: what the binary links and initialises before any connection.\n\n", float64(help)/float64(hello))
	}
	rc, rf, rv, ri := r.RunStats.Per()
	hc, hf, hv, hi2 := r.HelpStats.Per()
	p("| per process | CPU (user+sys) | minor page faults | voluntary switches | involuntary switches |\n| --- | ---: | ---: | ---: | ---: |\n")
	p("| `ipc tool.invoke.echo …` | %s | %.0f | %.0f | %.0f |\n", ms(rc), rf, rv, ri)
	p("| `ipc --help` | %s | %.0f | %.0f | %.0f |\n\n", ms(hc), hf, hv, hi2)
	p("The binary speaks ZMTP itself (`ipc/zmtp/wire`): one `write(2)` carries its greeting, READY and the request, it then checks the core's greeting, READY and each frame header as the hardened transport does, and it starts no goroutine. On Linux it works the socket with plain system calls (a non-blocking socket, `ppoll(2)` for its waits) and arms SIGINT/SIGTERM from inside those waits rather than by a timer, so the runtime's network poller is never started; the core sends each frame's header and body in one write, so the client wakes for the core's greeting, its READY and the answer, not for five pieces; ")
	p("the request is encoded, the answer decoded and an error printed by hand, each checked against encoding/json, whose reflective encoder and decoder it does not link, nor fmt (`cmd/ipc` TestNoFmtNorReflectiveJSON); nor zmq4, `golang.org/x/text`, `regexp` or `crypto/rand` (`cmd/ipc` TestDependencies); and it turns off three run-time features it does not use (`cmd/ipc/godebug.go`). ")
	p("What is left of the call in a fresh process is a cold process's — first page faults of the heap and the binary, the exit — and the core's side: its accept, handshake and pipeline, inside the %s of `ipc.Call`, ", us(call))
	p("but woken from idle between runs rather than kept busy as in that loop. With `GOMAXPROCS=1` the run takes %s.\n\n", ms(oneP))

	p("### (b) p99 and (d) throughput\n\n")
	top := sessionCounts[len(sessionCounts)-1]
	p("The tail of (b) is scheduling more than work: its p90 is %s and p99 %s against a median of %s, and the floor's own p99 is %s against its median of %s — wake-ups of goroutines on the other P of a shared %d-core machine widen both. ",
		us(medianOf(r.Pipe, p90)), us(medianOf(r.Pipe, p99)), us(pl), us(medianOf(r.Floor, p99)), us(fl), r.Machine.Cores)
	p("No stage of an echo request waits on anything but the CPU and the audit log's `write(2)`, which returns once the line is in the page cache (the log's fsync runs outside its lock once a second; its rotation, every 10 MiB by default, runs under the lock). ")
	busy := float64(load.Total) / float64(r.P.Duration)
	if busy >= 0.85*float64(r.Machine.Cores) {
		p("Throughput is CPU-bound: under the %d-session load the process keeps %.2f of %d cores busy, ", top, busy, r.Machine.Cores)
	} else {
		p("Under the %d-session load the process keeps %.2f of %d cores busy, ", top, busy, r.Machine.Cores)
	}
	p("and the in-process load generator takes %.0f %% of that, so the core alone would serve more. ", 100*load.Partition(measure.Sides)[0].Fraction)
	p("One sequential session is bound by its round trip rather than by CPU (%.0f requests/s ≈ one request per %s); ",
		medianRate(r.Seq[1]), us(time.Duration(float64(time.Second)/max(medianRate(r.Seq[1]), 1))))
	if piped := medianRate(r.Piped); piped > medianRate(r.Seq[top]) {
		p("%d in flight per session raises the %d-session figure to %.0f requests/s, most likely because the receive loops, workers and writers then find work waiting instead of parking and being woken for every request.\n\n", pipelinedWindow, top, piped)
	} else {
		p("%d in flight per session gives %.0f requests/s at %d sessions, no more than one in flight: the CPUs are already busy.\n\n", pipelinedWindow, piped, top)
	}

	p("## What to change\n\n")
	p("### Done since the first measurement\n\n")
	p("The first run of these benchmarks, at commit `%s` on this machine, led to three changes in `%s`:\n\n", beforeCommit, changeCommit)
	p("1. **Requests run on long-lived goroutines.** Each session hands its messages to up to `MaxInFlight` workers, started as they are needed and kept until the session closes, ")
	p("instead of a new goroutine per message; the in-flight cap and the per-session isolation are as before. The stack growth this avoids is the new-goroutine − long-lived-goroutine difference: %s per request in this run.\n", us(stack))
	p("2. **The wire message is decoded in one pass, the arguments once.** `ipc.DecodeRequest` takes a one-pass path for valid JSON (`decodeFast`) and walks the token API (`decodeSlow`) only for invalid input, to say precisely what is wrong: %s and %.0f allocations now. ",
		us(decode.PerOp), decode.Allocs)
	p("`decodeArguments` only decodes (%s, %.0f allocations); the canonical JSON that stage 5 shows the user and hashes (%s, %.0f allocations) is computed for high-risk tools only.\n",
		us(args.PerOp), args.Allocs, us(canon.PerOp), canon.Allocs)
	p("3. **The correlation cache drops its oldest entry in O(1)**: (b″) %s against (b) %s, as above.\n\n", us(full), us(pl))
	p("| | before (`%s`) | this run |\n| --- | ---: | ---: |\n", beforeCommit)
	p("| (b) median | %s | %s |\n", us(beforePipe), us(pl))
	p("| (b) p99 | %s | %s |\n", us(beforeP99), us(medianOf(r.Pipe, p99)))
	p("| (c) ratio (b) ÷ (a) | %.2f | %.2f |\n", beforeRatio, ratio)
	p("| (d) throughput, %d sessions | %.0f requests/s | %.0f requests/s |\n", top, beforeTput, medianRate(r.Seq[top]))
	p("| (e) one ipc run (mostly process start; one request through the core) | %s | %s |\n\n", ms(beforeIPC), ms(run))

	p("### What remains\n\n")
	p("1. **One write per frame in the hardened transport.** zmq4 writes a frame's header and body with two `write(2)` calls, and `ipc/zmtp` sets a write deadline before each; ")
	p("holding a header back until its body arrives (tracking frame boundaries on the write side, as the filter already does on the read side) would halve the reply's syscalls and deadline updates — part of the %s that (a′) costs over (a).\n", us(filter))
	p("2. **Group-committed audit writes under concurrency.** Audit writes stay synchronous — a request that cannot be audited must not run — but writers queued under the lock could share one `write(2)`, each still returning only once its line is in the file. ")
	p("That helps throughput, not the sequential %s.\n", us(auditCost))
	invokeFn := []string{"pipeline.(*Pipeline).invoke"}
	p("3. **A reusable goroutine for in-process handler calls.** `pipeline.invoke` still starts a goroutine per call, for the handler timeout; one kept per worker (and replaced when a call times out, since the stuck handler keeps it) would save starting it, and its stack growth for handlers deeper than echo. ")
	p("For echo the gain is small: the handler call costs %s alone (goroutine, channel, `context.WithTimeout`) and %s of CPU per request in the profile of (b), echo included, of which the profile attributes %s to starting the goroutine (`runtime.newproc`) and %s to growing its stack.\n",
		us(handler.PerOp), perReq(seq, invokeFn...), us(seq.PerRequest(seq.InclusiveAll([]string{"runtime.newproc"}, invokeFn))),
		us(seq.PerRequest(seq.InclusiveAll(newstack, []string{"pipeline.(*Pipeline).invoke.func"}))))
	p("4. **zmq4 itself** starts a goroutine, an errgroup and a timer per `Send` and reads a frame's header and body with separate reads. Fixing that upstream lowers the floor and (b) alike — good for latency, but it makes the ratio (c) *larger*.\n")
	p("5. **For (e)**: the process start and a cold Go runtime dominate; `GOMAXPROCS=1` for `ipc` (it is single-request; %s against %s in this run) is worth measuring on the target machines. ", ms(oneP), ms(run))
	p("Nothing in a fresh process brings the call near the in-process %s: an agent that makes many calls would need a long-lived client.\n", us(call))
	if ratio > targetRatio {
		p("\nNone of these brings (c) to %.1f, for the reason given under (c): two synchronous audit writes and the core's other pieces of work over a floor of %s.\n", targetRatio, us(fl))
	}
	return b.String()
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
