package llmproxy

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrBudget is wrapped by Budget.Allow when a group's token budget for the
// day is spent.
var ErrBudget = errors.New("daily token budget spent")

// Budget is a per-group daily token budget, shared by every session of the
// group: the core makes one and passes it to each session's proxy.
//
// Allow is checked before a request is forwarded and Add is called after
// its reply, so calls already in flight when the budget runs out still
// finish: the budget can be overshot by what those calls use. It is a
// spending brake, not an exact quota.
type Budget interface {
	// Allow returns nil when group may make another call, and an error
	// wrapping ErrBudget when today's usage has reached the limit. Any
	// other error also refuses the call.
	Allow(group string) error
	// Add records tokens used by group.
	Add(group string, tokens int64)
}

// BudgetError is the error DailyBudget.Allow returns. It wraps ErrBudget.
type BudgetError struct {
	Group       string
	Used, Limit int64
	Reset       time.Time     // when the budget is next reset: the next midnight
	RetryAfter  time.Duration // from the check to Reset
}

// Error implements error.
func (e *BudgetError) Error() string {
	return fmt.Sprintf("group %s has used %d of its %d tokens today; the budget resets at %s",
		e.Group, e.Used, e.Limit, e.Reset.Format(time.RFC3339))
}

// Unwrap returns ErrBudget.
func (e *BudgetError) Unwrap() error { return ErrBudget }

// DailyBudget is an in-memory Budget that resets at midnight. It forgets
// usage when the core restarts. It is safe for concurrent use.
type DailyBudget struct {
	limit int64
	now   func() time.Time

	mu   sync.Mutex
	used map[string]dayUse
}

type dayUse struct {
	day    time.Time // midnight starting the day counted
	tokens int64
}

var _ Budget = (*DailyBudget)(nil)

// NewDailyBudget returns a budget of limit tokens per group per day; zero
// or less means unlimited (usage is still counted). Days are those of
// now() in its own location: time.Now (the default when now is nil) gives
// the host's local midnight.
func NewDailyBudget(limit int64, now func() time.Time) *DailyBudget {
	if now == nil {
		now = time.Now
	}
	return &DailyBudget{limit: limit, now: now, used: map[string]dayUse{}}
}

// midnight returns the start of t's day in t's location.
func midnight(t time.Time) time.Time {
	y, m, d := t.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, t.Location())
}

// today returns group's usage today; the caller holds b.mu.
func (b *DailyBudget) today(group string, day time.Time) int64 {
	u, ok := b.used[group]
	if !ok || !u.day.Equal(day) {
		return 0
	}
	return u.tokens
}

// Allow implements Budget.
func (b *DailyBudget) Allow(group string) error {
	if b.limit <= 0 {
		return nil
	}
	now := b.now()
	day := midnight(now)
	b.mu.Lock()
	used := b.today(group, day)
	b.mu.Unlock()
	if used < b.limit {
		return nil
	}
	y, m, d := now.Date()
	reset := time.Date(y, m, d+1, 0, 0, 0, 0, now.Location())
	return &BudgetError{Group: group, Used: used, Limit: b.limit, Reset: reset, RetryAfter: reset.Sub(now)}
}

// Add implements Budget.
func (b *DailyBudget) Add(group string, tokens int64) {
	if tokens <= 0 {
		return
	}
	day := midnight(b.now())
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used[group] = dayUse{day: day, tokens: b.today(group, day) + tokens}
}

// Used returns the tokens group has used today.
func (b *DailyBudget) Used(group string) int64 {
	day := midnight(b.now())
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.today(group, day)
}
