// Package confirm is stage 5 of the pipeline: the confirmation gate for
// high-risk tools, fit to be answered from several surfaces at once (the
// CLI, the menu-bar app, a notification, the phone).
//
// A call waits for the user's decision on a Confirmation bound to the
// exact tool and the SHA-256 of its canonical arguments (ArgsHash). Its id
// has 128 random bits, so that it cannot be guessed (people may type a
// unique prefix: api.FindConfirmation).
//
// Every decision names the confirmation and the args_hash the deciding
// surface showed; the gate applies exactly one: the first decision that
// arrives while the confirmation is pending wins, by one compare-and-set
// under the gate's lock. Any later one — another surface's click, a
// retried request — is refused with ErrDecided, which carries the
// decision that won. A decision with another hash is refused with
// ErrMismatch and decides nothing.
//
// It fails closed: no decision before the expiry is Expired; a call whose
// session closes (or whose every waiter gives up) is Withdrawn; the gate
// keeps nothing across a restart of the core. An identical request (same
// session, tool and hash, and no preview: one approval of a mail sends it
// once) while one is pending joins it rather than asking the user twice; past MaxPending pending confirmations in a group, a new
// one is refused at once (ErrTooMany), never queued.
//
// Every change — requested, then exactly one resolution — is told, in
// order, to those who must hear of it: the audit log, the core's log, and
// the surfaces through the event bus (record.go says who and how). Every
// decision, from whichever surface — the control API's (the CLI, the
// menu-bar app, a notification) or a plugin's (Telegram) — goes through
// the one Decide, which records a refused decision too.
//
// What a person approves is what runs. A confirmation carries the
// arguments as they run (Arguments) and as surfaces show them (Display,
// from the Display function): the same bytes, unless the sanitiser hid
// something, in which case Hidden says where and how much. No approval is
// taken on a display that hides something: Decide refuses an approval of
// a confirmation with Hidden values unless the deciding surface showed
// the arguments as they run (Decide.Raw) — ErrHidden. Denying always works.
//
// A call of a tool that declares a preview (core/plugin's Previewer: what
// runs is not all in its arguments, a draft on a mail server) carries the
// text its plugin rendered of the content (Preview) and that content's
// digest (PreviewDigest). An approval must name the digest too, or it is
// refused (ErrMismatch); the plugin gets the digest with the call and
// refuses content that no longer has it.
package confirm

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/carapace-dev/carapace/core/api"
)

// Defaults.
const (
	DefaultTimeout    = 5 * time.Minute // how long a call waits for the user
	DefaultMaxPending = 8               // pending confirmations per group
	// keepResolved is how many resolved confirmations the gate remembers,
	// so that a late decision is told "already decided", not "not found".
	keepResolved = 1024
)

// Decision is how a confirmation ended; empty while it is pending.
type Decision string

// The decisions.
const (
	Approved  Decision = "approved"  // a person approved it
	Denied    Decision = "denied"    // a person denied it
	Expired   Decision = "expired"   // nobody answered before it expired
	Withdrawn Decision = "withdrawn" // its call went away: the session closed, the core stopped
)

// Errors of Request, Wait and Decide.
var (
	ErrNotFound = errors.New("no confirmation with that id")
	ErrMismatch = errors.New("the confirmation's arguments differ from the ones shown")
	// ErrMismatchPreview wraps ErrMismatch: the decision names another
	// preview digest than the confirmation's (or none, for an approval).
	ErrMismatchPreview = fmt.Errorf("%w: the preview's digest is not the one of the preview shown", ErrMismatch)
	ErrTooMany         = errors.New("too many confirmations pending for this group")
	ErrInvalid         = errors.New("invalid decision")
	// ErrHidden refuses an approval made on a display that hid part of
	// the arguments: the person did not see what would run.
	ErrHidden = errors.New("the arguments shown were partly hidden (redacted), so they cannot be approved there")

	// Outcomes of Wait: what the waiting call learns.
	ErrDenied    = errors.New("denied by the user")
	ErrTimeout   = errors.New("no decision before the confirmation expired")
	ErrWithdrawn = errors.New("the confirmation was withdrawn")
)

// ErrDecided refuses a decision on a confirmation that is no longer
// pending. Confirmation says how it ended, where and by whom.
type ErrDecided struct{ Confirmation Confirmation }

func (e *ErrDecided) Error() string {
	c := e.Confirmation
	msg := fmt.Sprintf("confirmation %s is already decided: %s", c.ID, c.Decision)
	if c.Surface != "" {
		msg += " (" + c.Surface
		if c.Decider != "" {
			msg += ", " + c.Decider
		}
		msg += ")"
	}
	return msg
}

// Request is a call that needs the user.
type Request struct {
	Session     string
	Group       string
	Tool        string
	Correlation string
	ArgsHash    string // HashArguments of the canonical arguments
	Arguments   []byte // the canonical arguments, as they run
	Display     []byte // what people are shown: Display(Arguments)
	Hidden      []Hidden
	Summary     string // what the call will do, in words (catalog.Tool.Check); "" if the tool says nothing
	// Preview and PreviewDigest are the call's preview, for a tool that
	// declares one (plugin.Preview): the text as the plugin rendered it,
	// and the digest the approval binds. Request shows people
	// DisplayPreview of it: the text, unless the sanitiser hides
	// something, which the confirmation's Hidden then lists at
	// PreviewPath.
	Preview       string
	PreviewDigest string
	// Why says why the core asks, when not only for the tool's risk: a
	// URL the session was not given, a session tainted by untrusted
	// content (core/provenance). Every surface shows each line.
	Why []string
}

// Confirmation is one confirmation as it stands: a copy, safe to keep.
type Confirmation struct {
	ID          string
	Session     string
	Group       string
	Tool        string
	Correlation string // the first call's
	ArgsHash    string
	// Arguments are the canonical arguments as they run, kept only while
	// the confirmation is pending (a surface that shows them whole may
	// approve a confirmation with Hidden values); nil once resolved.
	Arguments []byte
	// Display is what surfaces show: Arguments byte for byte when Hidden
	// is empty, else their sanitised copy.
	Display []byte
	// Hidden says what Display does not show as it runs.
	Hidden  []Hidden
	Summary string
	// Preview is what surfaces show of the call's preview (Request's
	// PreviewDisplay) and PreviewRaw the text as the plugin rendered it,
	// both kept while pending only; PreviewDigest is kept always.
	Preview       string
	PreviewRaw    string
	PreviewDigest string
	Why           []string // Request.Why
	Created       time.Time
	Expires       time.Time
	// Set once resolved.
	Decision Decision
	Surface  string // where it was decided: "cli", "app", "notification", "telegram"; "core" for expiry and withdrawal
	Decider  string // who decided, as the surface knows them
	Decided  time.Time
	Reason   string // for a withdrawal: why
}

// Pending reports whether c is still waiting for a decision.
func (c Confirmation) Pending() bool { return c.Decision == "" }

// Options configure a Gate.
type Options struct {
	Timeout    time.Duration // how long a confirmation waits; DefaultTimeout if zero
	MaxPending int           // pending confirmations per group; DefaultMaxPending if zero
	// Audit records each change and each refused decision (the core's
	// audit log); nil records nothing. A new confirmation it cannot
	// record is refused: the gate fails closed.
	Audit Auditor
	// Publish tells the surfaces of each change (the core's event bus);
	// nil tells nobody.
	Publish Publisher
	// Logger logs each change for the person at the terminal; nil
	// discards.
	Logger *slog.Logger
	// Now returns the time; time.Now if nil (tests).
	Now func() time.Time
}

// Gate holds the confirmations. It is safe for concurrent use.
type Gate struct {
	opts Options

	mu       sync.Mutex
	pending  map[string]*entry
	resolved map[string]Confirmation
	order    []string // resolved ids, oldest first
}

// entry is a pending confirmation and its waiters.
type entry struct {
	c       Confirmation
	waiters int
	done    chan struct{} // closed when resolved
	timer   *time.Timer
}

// New returns a Gate.
func New(opts Options) *Gate {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = DefaultMaxPending
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Gate{opts: opts, pending: map[string]*entry{}, resolved: map[string]Confirmation{}}
}

// Timeout is how long a confirmation waits for the user.
func (g *Gate) Timeout() time.Duration { return g.opts.Timeout }

// HashArguments returns the hex SHA-256 of canonical argument JSON.
func HashArguments(canonical []byte) string {
	h := sha256.Sum256(canonical)
	return hex.EncodeToString(h[:])
}

// Ticket is one call's hold on a confirmation, for Wait.
type Ticket struct {
	e *entry
	c Confirmation
	// Joined says the call joined a confirmation an identical call of the
	// same session was already waiting on.
	Joined bool
}

// Confirmation returns the confirmation as it was when the ticket was
// taken.
func (t *Ticket) Confirmation() Confirmation { return t.c }

// ID returns the confirmation's id.
func (t *Ticket) ID() string { return t.e.c.ID }

// Request registers a call that needs the user and returns its ticket. An
// identical pending request (same session, tool and hash, no preview) is
// joined. It
// fails with ErrTooMany when the group already has MaxPending pending, and
// with the audit log's error when the new confirmation cannot be recorded.
func (g *Gate) Request(r Request) (*Ticket, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, e := range g.pending {
		// A call with a preview (a mail to send) never joins: one approval
		// runs one call, so that one Approve cannot send a mail twice.
		if e.c.Session == r.Session && e.c.Tool == r.Tool && e.c.ArgsHash == r.ArgsHash && r.PreviewDigest == "" && e.c.PreviewDigest == "" {
			e.waiters++
			return &Ticket{e: e, Joined: true, c: e.c}, nil
		}
		if e.c.Group == r.Group {
			n++
		}
	}
	if n >= g.opts.MaxPending {
		return nil, fmt.Errorf("group %s has %d confirmations pending: %w", r.Group, n, ErrTooMany)
	}
	now := g.opts.Now().UTC()
	previewDisplay, previewHidden := DisplayPreview(r.Preview)
	hidden := append(slices.Clip(r.Hidden), previewHidden...)
	e := &entry{
		c: Confirmation{
			ID: newID(), Session: r.Session, Group: r.Group, Tool: r.Tool, Correlation: r.Correlation,
			ArgsHash: r.ArgsHash, Arguments: r.Arguments, Display: r.Display, Hidden: hidden, Summary: r.Summary, Why: r.Why,
			Preview: previewDisplay, PreviewRaw: r.Preview, PreviewDigest: r.PreviewDigest,
			Created: now, Expires: now.Add(g.opts.Timeout),
		},
		waiters: 1,
		done:    make(chan struct{}),
	}
	if err := g.record(e.c); err != nil {
		return nil, err
	}
	g.pending[e.c.ID] = e
	e.timer = time.AfterFunc(g.opts.Timeout, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.resolve(e, Expired, "core", "", "")
	})
	return &Ticket{e: e, c: e.c}, nil
}

// Wait blocks until the confirmation is resolved or ctx ends. It returns
// nil for an approval, ErrDenied, ErrTimeout or ErrWithdrawn. When ctx
// ends, the call leaves; a confirmation nobody waits on any more is
// withdrawn.
func (g *Gate) Wait(ctx context.Context, t *Ticket) error {
	select {
	case <-t.e.done:
	case <-ctx.Done():
		g.mu.Lock()
		t.e.waiters--
		if t.e.waiters > 0 && t.e.c.Decision == "" {
			g.mu.Unlock()
			return ErrWithdrawn // for this call; the others still wait
		}
		g.resolve(t.e, Withdrawn, "core", "", "the call went away: "+context.Cause(ctx).Error())
		g.mu.Unlock()
	}
	g.mu.Lock()
	d := t.e.c.Decision
	g.mu.Unlock()
	switch d {
	case Approved:
		return nil
	case Denied:
		return ErrDenied
	case Expired:
		return ErrTimeout
	default:
		return ErrWithdrawn
	}
}

// decide applies a decision from a surface and returns the confirmation as
// it now stands. It fails with ErrNotFound for an unknown id, ErrDecided
// when the confirmation is no longer pending (expired included), and,
// deciding nothing, with ErrMismatch when the hash is not the
// confirmation's and ErrHidden for an approval of a confirmation with
// Hidden values from a surface that did not show them (Raw).
func (g *Gate) decide(d api.Decision) (Confirmation, error) {
	if d.ArgsHash == "" {
		return Confirmation{}, fmt.Errorf("%w: a decision needs the args_hash of the arguments shown", ErrInvalid)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.pending[d.ID]
	if !ok {
		if c, ok := g.resolved[d.ID]; ok {
			return c, &ErrDecided{Confirmation: c}
		}
		return Confirmation{}, fmt.Errorf("confirmation %q: %w", d.ID, ErrNotFound)
	}
	if !g.opts.Now().Before(e.c.Expires) { // its timer has not run yet
		g.resolve(e, Expired, "core", "", "")
		return e.c, &ErrDecided{Confirmation: e.c}
	}
	if d.ArgsHash != e.c.ArgsHash {
		return e.c, fmt.Errorf("confirmation %s: %w", e.c.ID, ErrMismatch)
	}
	// The preview's digest binds what the person read: an approval must
	// name it; a denial may leave it out (a surface that only denies).
	if (d.Approve || d.PreviewDigest != "") && d.PreviewDigest != e.c.PreviewDigest {
		return e.c, fmt.Errorf("confirmation %s: %w", e.c.ID, ErrMismatchPreview)
	}
	if d.Approve && len(e.c.Hidden) > 0 && !d.Raw {
		return e.c, fmt.Errorf("confirmation %s: %w", e.c.ID, ErrHidden)
	}
	dec := Denied
	if d.Approve {
		dec = Approved
	}
	g.resolve(e, dec, d.Surface, d.Decider, "")
	return e.c, nil
}

// WithdrawSession withdraws the pending confirmations of a session that
// closed, and returns them.
func (g *Gate) WithdrawSession(session, reason string) []Confirmation {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Confirmation
	for _, e := range g.sorted() {
		if e.c.Session == session {
			g.resolve(e, Withdrawn, "core", "", reason)
			out = append(out, e.c)
		}
	}
	return out
}

// WithdrawAll withdraws every pending confirmation: the core is stopping.
func (g *Gate) WithdrawAll(reason string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, e := range g.sorted() {
		g.resolve(e, Withdrawn, "core", "", reason)
	}
}

// resolve records e's decision once, wakes its waiters and tells those
// who hear of it (record). Called with g.mu held.
func (g *Gate) resolve(e *entry, d Decision, surface, decider, reason string) {
	if e.c.Decision != "" {
		return
	}
	e.c.Decision, e.c.Surface, e.c.Decider, e.c.Reason = d, surface, decider, reason
	e.c.Decided = g.opts.Now().UTC()
	e.c.Arguments = nil // needed only to decide; the gate remembers many resolved ones
	e.c.Preview, e.c.PreviewRaw = "", ""
	e.timer.Stop()
	close(e.done)
	delete(g.pending, e.c.ID)
	g.resolved[e.c.ID] = e.c
	g.order = append(g.order, e.c.ID)
	if len(g.order) > keepResolved {
		delete(g.resolved, g.order[0])
		g.order = g.order[1:]
	}
	_ = g.record(e.c) // a resolution stands even if it cannot be recorded
}

// Pending returns the pending confirmations, oldest first.
func (g *Gate) Pending() []Confirmation {
	g.mu.Lock()
	defer g.mu.Unlock()
	es := g.sorted()
	out := make([]Confirmation, len(es))
	for i, e := range es {
		out[i] = e.c
	}
	return out
}

// Recent returns the pending confirmations and the resolved ones the gate
// still remembers, oldest first.
func (g *Gate) Recent() []Confirmation {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Confirmation, 0, len(g.pending)+len(g.resolved))
	for _, e := range g.pending {
		out = append(out, e.c)
	}
	for _, c := range g.resolved {
		out = append(out, c)
	}
	sortByCreated(out)
	return out
}

// Get returns the confirmation with the full id, pending or remembered.
func (g *Gate) Get(id string) (Confirmation, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e, ok := g.pending[id]; ok {
		return e.c, true
	}
	c, ok := g.resolved[id]
	return c, ok
}

// Len returns the number of pending confirmations.
func (g *Gate) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.pending)
}

// sorted returns the pending entries, oldest first. Called with g.mu held.
func (g *Gate) sorted() []*entry {
	es := make([]*entry, 0, len(g.pending))
	for _, e := range g.pending {
		es = append(es, e)
	}
	sort.Slice(es, func(i, j int) bool { return less(es[i].c, es[j].c) })
	return es
}

func sortByCreated(cs []Confirmation) {
	sort.Slice(cs, func(i, j int) bool { return less(cs[i], cs[j]) })
}

func less(a, b Confirmation) bool {
	if !a.Created.Equal(b.Created) {
		return a.Created.Before(b.Created)
	}
	return a.ID < b.ID
}

// newID returns 128 random bits as 32 hex digits.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b[:])
}

type approvalKey struct{}

// NewContext returns ctx carrying the id of the confirmation that approved
// the call being handled (the core's own tools record it: a task the agent
// scheduled names the approval it was created under).
func NewContext(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, approvalKey{}, id)
}

// ApprovalFrom returns the id NewContext put in ctx, or "".
func ApprovalFrom(ctx context.Context) string {
	id, _ := ctx.Value(approvalKey{}).(string)
	return id
}
