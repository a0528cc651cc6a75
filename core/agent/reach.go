package agent

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/session"
)

// A container whose agent never reaches the core must not hang until the
// idle timeout. On Apple's runtime this is a known failure: the relay that
// carries the session's socket into the VM ends its accept loop the first
// time it cannot connect to the host socket, and later connects from the
// guest hang instead of being refused (apple/containerization #867, in
// UnixSocketRelay from 0.35.0, container 1.1.0, to 0.40.1, container
// 1.2.2; fix PR #868 closed unmerged, PR #933 open). The core never
// unlinks or re-binds a live session's sockets, so that should not
// happen, but if it does the session is stopped and reported rather than
// left hanging. Docker gets the same bound: an agent that never connects
// is broken there too.

// errUnreached is why a container whose agent never reached the core is
// stopped.
type errUnreached struct {
	after  time.Duration
	engine string
}

func (e errUnreached) Error() string {
	msg := fmt.Sprintf("stopped: the agent did not reach the core within %s of its container's start "+
		"(no connection to its socket, no request; [sessions] connect_timeout)", e.after)
	if e.engine == "apple" {
		return msg + "; on Apple container the likely cause is the socket relay into the VM, which stops for good " +
			"after one failed connect (apple/containerization #867): check `carapace status` and `container system status`, then try again"
	}
	return msg + "; check that the agent's command talks to the core through $CARAPACE_IPC_ENDPOINT"
}

// reapUnreached stops the containers of sessions whose agent has not
// reached the core within [sessions] connect_timeout of the container's
// start (the engine's Run, after the session's files and the memory brief
// are ready), until ctx ends: logged, audited, and the session's stream
// ends with the reason.
func (r *Runner) reapUnreached(ctx context.Context) {
	timeout := r.cfg.Sessions.ConnectTimeout.Duration
	r.everySession(ctx, min(max(timeout/4, 10*time.Millisecond), 5*time.Second), func(now time.Time, info session.Info) {
		if !info.Reached.IsZero() {
			return
		}
		if started, ok := r.containerStarted(info.ID); !ok || now.Sub(started) < timeout {
			return
		}
		cause := errUnreached{after: timeout, engine: info.Runtime}
		if !r.cancelContainer(info.ID, cause) { // no container (runtime none), or already stopping
			return
		}
		r.log.Warn("agent never reached the core; stopping its container", "session", info.ID, "group", info.Group,
			"engine", info.Runtime, "after", timeout, "cause", cause.Error())
		_ = r.audit.Write(&audit.Entry{Source: "core", Session: info.ID, Group: info.Group, Stage: audit.StageSession,
			Outcome: audit.OutcomeError, Code: "AGENT_UNREACHED", Reason: cause.Error()})
	})
}

// markReached wraps the model API proxy of session id: a request that
// arrives through the session's second socket is the agent reaching the
// core too.
func (r *Runner) markReached(id string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.sessions.MarkReached(id)
		h.ServeHTTP(w, req)
	})
}

// containerStarted returns when session id's container started, if it
// has one that has.
func (r *Runner) containerStarted(id string) (time.Time, bool) {
	r.ctrs.mu.Lock()
	run, ok := r.ctrs.live[id]
	r.ctrs.mu.Unlock()
	if !ok {
		return time.Time{}, false
	}
	ns := run.started.Load()
	return time.Unix(0, ns), ns != 0
}
