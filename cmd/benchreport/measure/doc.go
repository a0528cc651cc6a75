// Package measure holds the measurements of the spine's performance, once,
// for both of their users: the benchreport command behind `make bench`,
// which repeats them, profiles them and writes docs/PERFORMANCE.md, and the
// Go benchmarks of core/server.
//
//   - StartFloor, StartCrossFloor: the transport floor, a zmq4
//     DEALER↔ROUTER echo in process or across two processes.
//   - StartCore, Core.OpenCaller, Caller.Call: a real core (server.Run) in a
//     temporary home and real wire messages to its echo plugin.
//   - StartCoreWith, InstallEchoPlugins: the same with out-of-process echo
//     plugins installed.
//   - RunThroughput, RunRequests: concurrent sessions, by duration or count.
//   - IPCRunner: the ipc binary, exec to exit, and its parts.
//   - MeasureMemory, MeasureLLM: the memory plugin's handler, and the model
//     API path through the ipc-relay and the proxy.
//   - StageCosts, GoroutineCosts: pieces of the core's work per request,
//     timed alone, and what a new goroutine per request would add to them.
//   - Profile, CPUProfile: a CPU profile reduced to shares by component.
//   - StartContainers, Containers.ColdStart, Containers.Teardown: agent
//     sessions the core runs in Docker with the offline test image, from
//     Open to the agent's first request and from Close to the container's
//     removal, split by the core's log lines and the engine's events.
//   - DescribeMachine, SnapshotLoad: where the figures were taken, and how
//     busy the machine was.
//
// Everything here runs in the calling process and shares its CPUs: the
// figures describe the core and its load generator together, which the
// report says wherever it matters. The package's tests check what it
// computes from recorded data (a CPU profile, samples); they measure
// nothing, so that `make test` stays quick and needs no engine.
package measure
