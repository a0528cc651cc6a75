package memory

import (
	"fmt"
	"sync"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
)

// Handler error codes for the per-session limits. They are the handler's
// own (the agent sees HANDLER_ERROR), not the core's reserved RATE_LIMITED:
// these limits bound what one session may write, they are not a rate.
const (
	CodeStoreLimit     = "STORE_LIMIT"
	CodeSupersedeLimit = "SUPERSEDE_LIMIT"
	CodeDeleteLimit    = "DELETE_LIMIT"
)

// Bounds of the limiter's memory of sessions.
const (
	sessionIdle = 24 * time.Hour // a session unseen this long is forgotten
	maxSessions = 10000          // sessions remembered at most; the least recently seen go first
	pruneEvery  = time.Hour      // how often idle sessions are looked for
)

// op is one kind of limited operation.
type op int

const (
	opStore op = iota
	opSupersede
	opDelete
	numOps
)

// opInfo describes an operation for the agent.
var opInfo = [numOps]struct {
	code, what, setting, field string
}{
	opStore:     {CodeStoreLimit, "memory_store calls", "max_stores_per_session", ""},
	opSupersede: {CodeSupersedeLimit, "memory_store calls with supersedes", "max_supersedes_per_session", "supersedes"},
	opDelete:    {CodeDeleteLimit, "memory_delete calls", "max_deletes_per_session", ""},
}

// limiter enforces the per-session limits of seed 000 §Security Model (7):
// they bound the blast radius of a prompt injection that tries to flood,
// rewrite or erase memory. A call reserves its operations before doing the
// work and releases them if the work fails, so concurrent calls cannot
// overshoot a limit and failed calls cost nothing.
type limiter struct {
	max [numOps]int
	now func() time.Time

	mu        sync.Mutex
	sessions  map[string]*usage
	lastPrune time.Time
}

// usage is what one session has used.
type usage struct {
	n    [numOps]int
	seen time.Time
}

func newLimiter(c config, now func() time.Time) *limiter {
	l := &limiter{now: now, sessions: map[string]*usage{}}
	l.max[opStore] = c.MaxStores
	l.max[opSupersede] = c.MaxSupersedes
	l.max[opDelete] = c.MaxDeletes
	return l
}

// reserve takes one of each of ops from session's budget, all or none. It
// returns the function that gives them back (call it if the work fails), or
// the *plugin.ToolError for the first limit reached.
func (l *limiter) reserve(session string, ops ...op) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.prune(now)
	u := l.sessions[session]
	for _, o := range ops {
		used := 0
		if u != nil {
			used = u.n[o]
		}
		if used >= l.max[o] {
			return nil, l.refusal(o)
		}
	}
	if u == nil {
		l.makeRoom()
		u = &usage{}
		l.sessions[session] = u
	}
	u.seen = now
	for _, o := range ops {
		u.n[o]++
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			for _, o := range ops {
				if u.n[o] > 0 {
					u.n[o]--
				}
			}
		})
	}, nil
}

// left returns how many of o session may still do.
func (l *limiter) left(session string, o op) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	used := 0
	if u := l.sessions[session]; u != nil {
		used = u.n[o]
	}
	return max(l.max[o]-used, 0)
}

func (l *limiter) refusal(o op) *plugin.ToolError {
	in := opInfo[o]
	var msg string
	switch {
	case l.max[o] == 0 && o == opDelete:
		msg = "memory_delete is disabled in this installation (max_deletes_per_session is 0). Tell the user which entry should be removed; they can change the setting."
	case l.max[o] == 0 && o == opSupersede:
		msg = "Superseding is disabled in this installation (max_supersedes_per_session is 0). Store the new memory without supersedes; its content can say what it replaces."
	case l.max[o] == 0:
		msg = "memory_store is disabled in this installation (max_stores_per_session is 0). Nothing can be stored this session."
	case o == opStore:
		msg = fmt.Sprintf("Memory limit reached: at most %d %s per session. Store only what matters; the budget resets next session.", l.max[o], in.what)
	case o == opSupersede:
		msg = fmt.Sprintf("Memory limit reached: at most %d %s per session. Store the new memory without supersedes, or leave the update for the next session, when the budget resets.", l.max[o], in.what)
	default:
		msg = fmt.Sprintf("Memory limit reached: at most %d %s per session. Tell the user which entries remain; the budget resets next session.", l.max[o], in.what)
	}
	return &plugin.ToolError{Code: in.code, Message: msg, Field: in.field, Retriable: false}
}

// prune forgets sessions idle for sessionIdle, at most once per pruneEvery.
// Called with l.mu held.
func (l *limiter) prune(now time.Time) {
	if now.Sub(l.lastPrune) < pruneEvery && len(l.sessions) < maxSessions {
		return
	}
	l.lastPrune = now
	for id, u := range l.sessions {
		if now.Sub(u.seen) >= sessionIdle {
			delete(l.sessions, id)
		}
	}
}

// makeRoom forgets the least recently seen session while the map is full,
// so that it stays bounded whatever the number of sessions. Forgetting a
// session resets its budget; with sessions created only by the core, that
// takes 10,000 sessions active within a day. Called with l.mu held.
func (l *limiter) makeRoom() {
	for len(l.sessions) >= maxSessions {
		var oldest string
		var at time.Time
		first := true
		for id, u := range l.sessions {
			if first || u.seen.Before(at) {
				oldest, at, first = id, u.seen, false
			}
		}
		delete(l.sessions, oldest)
	}
}

// size returns the number of sessions remembered (for tests).
func (l *limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sessions)
}
