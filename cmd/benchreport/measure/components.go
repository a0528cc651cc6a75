package measure

// Sides partitions a profile of the benchmark process — core and load
// generator in one process — by who did the work. Each sample goes to the
// first side whose functions appear in its stack. zmq4's goroutines are
// told apart by their socket type: the client's DEALER reads and writes
// through qreader/mwriter, the core's ROUTER through routerQReader/
// routerMWriter.
var Sides = []Component{
	{"benchmark client (DEALER, checks)", []string{"benchreport/measure.", "zmq4.(*qreader)", "zmq4.(*mwriter)", "zmq4.(*dealerSocket)"}},
	{"core: pipeline (stages, handler, response path, audit, handing the reply to zmq4)", []string{"carapace/core/pipeline."}},
	{"core: session layer (decode, hash, cache, reply)", []string{"carapace/core/session."}},
	{"core: ROUTER + hardened transport (zmq4, ipc/zmtp)", []string{"zmq4.(*routerQReader)", "zmq4.(*routerMWriter)", "zmq4.(*routerSocket)", "carapace/ipc/zmtp."}},
	{"core: audit log background fsync", []string{"carapace/core/audit."}},
	{"Go runtime: garbage collector", []string{"runtime.gcBgMarkWorker", "runtime.bgsweep", "runtime.bgscavenge"}},
	{"Go runtime: scheduler (idle, spinning, netpoll)", []string{"runtime.mcall", "runtime.schedule", "runtime.findRunnable", "runtime.mstart"}},
}

// PipelineCosts are the pieces of the core's work for a request, by the
// functions that do them. They overlap (the pipeline contains the audit
// writes; everything contains allocation), so they do not add up: each is
// the cumulative share of the process's CPU time.
var PipelineCosts = []Component{
	{"session worker for the request (all the core's work per request)", []string{"session.(*Manager).worker", "session.(*Manager).handle"}},
	{"strict wire decode (ipc.DecodeRequest)", []string{"carapace/ipc.DecodeRequest"}},
	{"request hash for the correlation cache (sha256)", []string{"sha256."}},
	{"correlation cache (join, deliver, expire)", []string{"session.(*cache)."}},
	{"pipeline.Handle (stages 1-6 and the response path)", []string{"pipeline.(*Pipeline).Handle"}},
	{"envelope id (uuid)", []string{"google/uuid."}},
	{"argument decode (pipeline.decodeArguments)", []string{"pipeline.decodeArguments"}},
	{"schema validation (jsonschema)", []string{"jsonschema/v5.(*Schema).Validate"}},
	{"rate limiter", []string{"x/time/rate.", "pipeline.(*Session).limiter"}},
	{"handler call (new goroutine, context, timer) incl. echo", []string{"pipeline.(*Pipeline).invoke"}},
	{"sanitiser (sanitize.Value/String)", []string{"carapace/core/sanitize."}},
	{"response encode (result + envelope JSON)", []string{"pipeline.(*Pipeline).frame", "encoding/json.Marshal"}},
	{"audit writes (JSON encode + write(2), 2 per request)", []string{"audit.(*Log).Write"}},
	{"session diagnostics ring (Session.record)", []string{"pipeline.(*Session).record"}},
	{"reply: ROUTER send (zmq4 errgroup goroutine per message)", []string{"session.(*Manager).send", "zmq4.(*routerMWriter)"}},
	{"request: ROUTER receive (zmq4 reader goroutine)", []string{"zmq4.(*routerQReader)"}},
	{"hardened transport filter (ipc/zmtp conn, incl. its I/O)", []string{"carapace/ipc/zmtp.(*conn)"}},
	{"zmq4, all sockets (incl. their I/O)", []string{"go-zeromq/zmq4."}},
	{"encoding/json, anywhere", []string{"encoding/json."}},
	{"syscalls (read, write, futex), anywhere", []string{"syscall.Syscall", "syscall.RawSyscall", "internal/runtime/syscall.", "runtime.futex"}},
	{"heap allocation (mallocgc)", []string{"runtime.mallocgc"}},
	{"goroutine creation (newproc)", []string{"runtime.newproc"}},
	{"goroutine stack growth (newstack, copystack)", []string{"runtime.newstack"}},
	{"timers (context.WithTimeout, write deadlines)", []string{"context.WithDeadline", "SetWriteDeadline", "time.AfterFunc", "runtime.(*timer)"}},
	{"garbage collection (background + assists)", []string{"runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep"}},
}
