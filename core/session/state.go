package session

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/provenance"
)

// diagCap is how many of its own audit entries a session keeps in memory
// for get_diagnostics.
const diagCap = 512

// Session is the trusted state of one agent session: who it is, as far as
// the core is concerned, and what the pipeline keeps per session (rate
// limiters, recent audit entries). Nothing in it ever comes from the wire.
type Session struct {
	ID      string
	Group   string
	Started time.Time
	Runtime string
	// Provenance is the URLs the session was given and its taint
	// (core/provenance): the pipeline reads and writes it.
	Provenance *provenance.Store

	mu       sync.Mutex
	limiters map[string]*rate.Limiter
	// Rejections beyond rejectBudget are answered but audited only as a
	// sample (sampleBudget), with a count of those not logged, so that a
	// flood of bad requests cannot rotate the audit log's history away.
	rejectBudget *rate.Limiter
	sampleBudget *rate.Limiter
	suppressed   int
	diag         []audit.Entry // ring of the session's own audit entries
	next         int
}

// New returns the state of a session of group.
func New(id, group, runtime string) *Session {
	return &Session{ID: id, Group: group, Runtime: runtime, Started: time.Now().UTC(), limiters: map[string]*rate.Limiter{},
		Provenance: provenance.New()}
}

// Limiter returns the session's rate limiter for tool, made with limit and
// burst the first time it is asked for.
func (s *Session) Limiter(tool string, limit rate.Limit, burst int) *rate.Limiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.limiters[tool]
	if !ok {
		l = rate.NewLimiter(limit, burst)
		s.limiters[tool] = l
	}
	return l
}

// AuditRejection reports whether a rejected request should be audited in
// full, and how many rejections before it were not. Within limit and burst
// (fixed by the first call) every one is; beyond them one a second is.
func (s *Session) AuditRejection(limit rate.Limit, burst int) (bool, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rejectBudget == nil {
		s.rejectBudget = rate.NewLimiter(limit, burst)
		s.sampleBudget = rate.NewLimiter(1, 1)
	}
	if s.rejectBudget.Allow() || s.sampleBudget.Allow() {
		n := s.suppressed
		s.suppressed = 0
		return true, n
	}
	s.suppressed++
	return false, 0
}

// Record keeps e, an audit entry of this session, for Diagnostics; the
// oldest of the last 512 is dropped.
func (s *Session) Record(e audit.Entry) {
	s.mu.Lock()
	if len(s.diag) < diagCap {
		s.diag = append(s.diag, e)
	} else {
		s.diag[s.next] = e
		s.next = (s.next + 1) % diagCap
	}
	s.mu.Unlock()
}

// Diagnostics returns the session's recent audit entries that match f,
// oldest first. Only this session's entries are ever held here.
func (s *Session) Diagnostics(f audit.Filter) []audit.Entry {
	s.mu.Lock()
	all := make([]audit.Entry, 0, len(s.diag))
	all = append(all, s.diag[s.next:]...)
	all = append(all, s.diag[:s.next]...)
	s.mu.Unlock()
	last := f.Last
	f.Last = 0
	out := all[:0]
	for i := range all {
		if f.Match(&all[i]) {
			out = append(out, all[i])
		}
	}
	if last > 0 && len(out) > last {
		out = out[len(out)-last:]
	}
	return out
}

type ctxKey struct{}

// NewContext returns ctx carrying s; handlers' services read it back so
// that everything they ask is scoped to the calling session.
func NewContext(ctx context.Context, s *Session) context.Context {
	return context.WithValue(ctx, ctxKey{}, s)
}

// FromContext returns the session carried by ctx.
func FromContext(ctx context.Context) (*Session, bool) {
	s, ok := ctx.Value(ctxKey{}).(*Session)
	return s, ok
}
