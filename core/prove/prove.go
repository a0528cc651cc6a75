// Package prove proves, on the user's own machine, the promises the core
// makes about what a plugin and the agent can reach: `carapace doctor
// --prove` asks the running core (POST /v1/prove), and the core runs the
// real thing and reports each promise from inside as passed or failed.
//
// The plugin side (plugin.go): the core starts a probe plugin through
// core/pluginhost under the confinement every out-of-process plugin gets,
// computed by the same code (pluginpolicy.For, Policy.Impose), in a
// temporary plugin folder under run/, with its data folder and an egress
// point that allows one host: a loopback listener the core opens for the
// run. Its handler is the core's own executable, which this package's
// init turns into the probe handler (handler.go), so that nothing extra
// ships. From inside, it tries to read the credentials, config.toml, the
// audit log and a canary the core planted outside its folders; to write
// outside its data folder; to reach the control socket, signal the core,
// open TCP and UDP sockets and resolve names; to reach an undeclared host
// through its egress point.
//
// The box side (box.go): the core starts a container with the configured
// engine exactly as it starts a session's (core/agent's RunProbe: the
// hardened flags, the mounts, the model API proxy beside it), with the
// static probe program (cmd/carapace-probe, package boxprobe) mounted
// read-only and run instead of the agent. From inside it tries public
// addresses, the host's addresses, UDP and DNS; writes to the root; reads
// its capabilities and user; scans its environment and every mount for
// something shaped like a model key; and asks the model API through the
// relay while a direct connection to the model's host must fail.
//
// Every refusal carries its positive control from the same run — its own
// folder read, its declared host reached, its own loopback listener, the
// relay answered, a canary key found by the same scan — so that a probe
// that cannot work proves nothing, and a check whose control failed does
// not pass. The judging is this package's, from what the probes observed
// and what the core counted on its side (listeners, the proxy).
package prove

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/confine"
	"github.com/carapace-dev/carapace/core/home"
)

// Options configure a Prover.
type Options struct {
	Home   home.Dir
	Logger *slog.Logger
	// Support is what this system confines plugins with (the loader's).
	Support confine.Support
	// Executable is the probe plugin's handler; empty means this
	// executable (os.Executable), whose init serves it.
	Executable string
	// Box runs the box side's container as a session's; nil: the core has
	// no container engine, and the box side fails.
	Box Box
	// Engine is config.toml's runtime.engine, for messages.
	Engine string
	// ModelUpstream is config.toml's [llm] upstream: the model API's URL,
	// whose host the box must not reach directly.
	ModelUpstream string
	// ProbeBinary is the static linux probe for the box; empty means the
	// one beside this executable (ProbePath).
	ProbeBinary string
	// Faults break the proof on purpose: tests only, to see that a broken
	// promise fails its check.
	Faults Faults
}

// Faults each break one promise, so that a test can see the check that
// covers it fail. The core never sets them.
type Faults struct {
	PluginUnconfined bool // the probe plugin starts unconfined
	BoxRoot          bool // the box runs as root (uid 0)
	BoxKeyInEnv      bool // the box's environment holds a key-shaped string
}

// Prover runs proofs, one at a time.
type Prover struct {
	o       Options
	log     *slog.Logger
	running sync.Mutex
}

// New returns a Prover.
func New(o Options) *Prover {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Prover{o: o, log: o.Logger.With("component", "prove")}
}

// errRunning refuses a proof asked for while one runs (api.ErrConflict:
// a 409).
var errRunning = fmt.Errorf("a proof is already running (they share the probe plugin's name and folders): wait for it: %w", api.ErrConflict)

// Run proves the sides req asks for, in order, and reports each check to
// progress as it is done (with a line per stage), then returns them all.
// A side that cannot run (no confinement, no engine, no probe binary) is
// a failed check that says why, not an error: the error is for a proof
// already running or a request ctx ended.
func (p *Prover) Run(ctx context.Context, req api.ProveRequest, progress func(api.ProveEvent)) (api.ProveReport, error) {
	if err := req.Check(); err != nil {
		return api.ProveReport{}, err
	}
	if !p.running.TryLock() {
		return api.ProveReport{}, errRunning
	}
	defer p.running.Unlock()
	if progress == nil {
		progress = func(api.ProveEvent) {}
	}
	var rep api.ProveReport
	r := &run{stage: func(s string) { progress(api.ProveEvent{Stage: s}) }, check: func(c api.ProveCheck) {
		rep.Checks = append(rep.Checks, c)
		progress(api.ProveEvent{Check: &c})
	}}
	if req.Wants(api.ProveSidePlugin) {
		p.provePlugin(ctx, r)
	}
	if req.Wants(api.ProveSideBox) {
		rep.Engine = p.proveBox(ctx, r)
	}
	if err := ctx.Err(); err != nil {
		return api.ProveReport{}, fmt.Errorf("the proof was abandoned: %w", err)
	}
	return rep, nil
}

// run is one proof's reporting: stages and checks as they are done.
type run struct {
	stage func(string)
	check func(api.ProveCheck)
}
