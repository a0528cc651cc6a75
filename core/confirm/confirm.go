// Package confirm is stage 5 of the pipeline: the confirmation gate for
// high-risk tools. A call waits for the user's decision, bound to the exact
// tool and a hash of its canonical arguments, and fails closed: no decision
// within the timeout is a refusal, and so is a core that starts draining.
package confirm

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// DefaultTimeout is how long a call waits for the user.
const DefaultTimeout = 5 * time.Minute

// Errors a decision can fail with.
var (
	ErrNotFound = errors.New("no pending confirmation with that id")
	ErrMismatch = errors.New("the confirmation's arguments differ from the ones approved")
)

// Outcomes of a wait.
var (
	ErrDenied   = errors.New("denied by the user")
	ErrTimeout  = errors.New("no decision before the confirmation expired")
	ErrTooMany  = errors.New("too many confirmations pending for this session")
	ErrCanceled = errors.New("the wait was cancelled")
)

// Pending is one call waiting for the user.
type Pending struct {
	ID          string
	Session     string
	Group       string
	Tool        string
	Correlation string
	ArgsHash    string // hex SHA-256 of the canonical arguments
	Display     []byte // sanitised canonical arguments, for the user to read
	Created     time.Time
	Expires     time.Time

	decision chan bool
}

// Gate holds the pending confirmations. It is safe for concurrent use.
type Gate struct {
	Timeout    time.Duration // default DefaultTimeout
	MaxPending int           // per session; default 8
	// Notify, if set, is called (without locks held) when a confirmation is
	// created, so that surfaces such as notifications can show it.
	Notify func(Pending)

	mu      sync.Mutex
	pending map[string]*Pending
}

// HashArguments returns the hex SHA-256 of canonical argument JSON.
func HashArguments(canonical []byte) string {
	h := sha256.Sum256(canonical)
	return hex.EncodeToString(h[:])
}

// Open registers a pending confirmation for a call. The caller then waits
// with Wait. p's ID, Created and Expires are set here.
func (g *Gate) Open(p Pending) (*Pending, error) {
	timeout, maxp := g.Timeout, g.MaxPending
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if maxp <= 0 {
		maxp = 8
	}
	p.ID = newID()
	p.Created = time.Now().UTC()
	p.Expires = p.Created.Add(timeout)
	p.decision = make(chan bool, 1)
	g.mu.Lock()
	if g.pending == nil {
		g.pending = map[string]*Pending{}
	}
	n := 0
	for _, q := range g.pending {
		if q.Session == p.Session {
			n++
		}
	}
	if n >= maxp {
		g.mu.Unlock()
		return nil, ErrTooMany
	}
	pp := &p
	g.pending[p.ID] = pp
	g.mu.Unlock()
	if g.Notify != nil {
		g.Notify(*pp)
	}
	return pp, nil
}

// Wait blocks until p is decided, expires, or ctx ends. It returns nil for
// an approval, ErrDenied, ErrTimeout or ErrCanceled. The confirmation is
// removed in every case.
func (g *Gate) Wait(ctx context.Context, p *Pending) error {
	defer g.remove(p.ID)
	t := time.NewTimer(time.Until(p.Expires))
	defer t.Stop()
	select {
	case ok := <-p.decision:
		if ok {
			return nil
		}
		return ErrDenied
	case <-t.C:
		return ErrTimeout
	case <-ctx.Done():
		return ErrCanceled
	}
}

// Decide approves or denies a pending confirmation. An approval must carry
// the arguments hash the user was shown; a different one is refused with
// ErrMismatch and decides nothing.
func (g *Gate) Decide(id string, approve bool, argsHash string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	p, ok := g.pending[id]
	if !ok {
		return fmt.Errorf("confirmation %q: %w", id, ErrNotFound)
	}
	if approve && argsHash != p.ArgsHash {
		return fmt.Errorf("confirmation %q: %w", id, ErrMismatch)
	}
	delete(g.pending, id)
	p.decision <- approve
	return nil
}

// List returns the pending confirmations, oldest first.
func (g *Gate) List() []Pending {
	g.mu.Lock()
	out := make([]Pending, 0, len(g.pending))
	for _, p := range g.pending {
		out = append(out, *p)
	}
	g.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

// Len returns the number of pending confirmations.
func (g *Gate) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.pending)
}

func (g *Gate) remove(id string) {
	g.mu.Lock()
	delete(g.pending, id)
	g.mu.Unlock()
}

// newID returns a short id a person can type: "c-" and 8 hex digits.
func newID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "c-" + hex.EncodeToString(b[:])
}
