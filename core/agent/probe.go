package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/runtime"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// Probe is a container run as a session's — the same engine, flags,
// mounts, environment and model API proxy — that runs a probe program
// instead of the agent: the box side of `carapace doctor --prove`
// (core/prove). It is a session of Group like any other: it shows in the
// sessions, the audit log and the group's slots.
type Probe struct {
	Group string
	// Mounts are added to the session's, read-only whatever they say.
	Mounts []runtime.Mount
	// Cmd is the probe's command (the image's entrypoint runs it, as it
	// runs `carapace run -- CMD`).
	Cmd []string
	// Env is added to the session's environment (a test's fault).
	Env []string
	// User, if set, replaces the user the session runs as (a test's
	// fault: "0:0").
	User string
	// Prepare, if set, is called with the group's workspace before the
	// container starts (the proof plants its canary there).
	Prepare func(workspace string) error
}

// ProbeResult is what a probe's container did.
type ProbeResult struct {
	Engine  string // the engine that ran it
	Image   string // the image it ran
	Session string // the session it was
	User    string // the uid:gid the core asked the engine for
	Stdout  string // its output, the first maxProbeOutput bytes
	Stderr  string
	Exit    int    // its exit status; -1 when there is none
	Error   string // why the container ended without one (api.Output.Error)
	// ModelRequests counts the requests the session's model API proxy
	// received from the container.
	ModelRequests int64
}

// maxProbeOutput bounds what RunProbe keeps of each stream.
const maxProbeOutput = 1 << 20

// probeExtras are a probe's additions to a session's container.
type probeExtras struct {
	mounts  []runtime.Mount
	env     []string
	user    string
	prepare func(workspace string) error
	image   string       // filled in by apply
	asked   string       // the user the spec asks for, filled in by apply
	seen    atomic.Int64 // requests that reached the model API proxy
}

// apply adds x to spec.
func (x *probeExtras) apply(spec *runtime.Spec) {
	for _, m := range x.mounts {
		m.ReadOnly = true
		spec.Mounts = append(spec.Mounts, m)
	}
	spec.Env = append(spec.Env, x.env...)
	if x.user != "" {
		spec.User = x.user
	}
	x.image, x.asked = spec.Image, spec.User
}

// counter is the model API proxy's request counter of a probe; nil for a
// session of an agent.
func (x *probeExtras) counter() *atomic.Int64 {
	if x == nil {
		return nil
	}
	return &x.seen
}

// RunProbe runs p in a container of the engine config.toml names, built
// exactly as a session's (containerSpec) with p's additions, waits for it
// to exit (or for ctx to end, which stops it) and closes the session.
func (r *Runner) RunProbe(ctx context.Context, p Probe) (ProbeResult, error) {
	if len(p.Cmd) == 0 {
		return ProbeResult{}, errors.New("a probe needs a command")
	}
	x := &probeExtras{mounts: p.Mounts, env: p.Env, user: p.User, prepare: p.Prepare}
	sess, ag, err := r.openContainerSession(ctx, api.SessionRequest{Group: p.Group, Runtime: "container", Command: p.Cmd}, "", nil, x)
	if err != nil {
		return ProbeResult{}, err
	}
	res := ProbeResult{Engine: sess.Runtime, Session: sess.ID, Image: x.image, User: x.asked, Exit: -1}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
		defer cancel()
		if err := r.Close(cctx, sess.ID); err != nil && !errors.Is(err, api.ErrNotFound) {
			r.log.Warn("could not close a probe's session", "session", sess.ID, "err", err)
		}
	}()
	var stdout, stderr strings.Builder
	keep := func(b *strings.Builder, s string) {
		if room := maxProbeOutput - b.Len(); room > 0 {
			b.WriteString(textutil.Clip(s, room))
		}
	}
	for {
		select {
		case <-ctx.Done():
			res.Stdout, res.Stderr = stdout.String(), stderr.String()
			res.ModelRequests = x.seen.Load()
			return res, fmt.Errorf("the probe's container was stopped: %w", ctx.Err())
		case o, ok := <-ag.Output:
			if !ok {
				res.Stdout, res.Stderr = stdout.String(), stderr.String()
				res.ModelRequests = x.seen.Load()
				return res, nil
			}
			switch {
			case o.Exit != nil:
				res.Exit = *o.Exit
			case o.Error != "":
				res.Error = o.Error
			case o.Done != nil: // Exit follows
			case o.Stream == "stderr":
				keep(&stderr, o.Data)
			default:
				keep(&stdout, o.Data)
			}
		}
	}
}
