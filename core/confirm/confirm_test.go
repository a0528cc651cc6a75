package confirm

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
)

var hashA, hashB = HashArguments([]byte(`{"x":1}`)), HashArguments([]byte(`{"x":2}`))

// recorder hears of a gate's changes as the core does — it is the gate's
// audit log and its publisher — and keeps what it is told.
type recorder struct {
	mu        sync.Mutex
	audited   []audit.Entry
	published []api.Confirmation
	topics    []string
	fail      error // the audit log's error for a new confirmation
}

// options are o with r as the audit log and the publisher.
func (r *recorder) options(o Options) Options {
	o.Audit, o.Publish = r, r
	return o
}

func (r *recorder) Write(e *audit.Entry) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.Outcome == audit.OutcomePending && r.fail != nil {
		return r.fail
	}
	r.audited = append(r.audited, *e)
	return nil
}

func (r *recorder) ConfirmationRequested(c api.Confirmation) { r.publish("requested", c) }
func (r *recorder) ConfirmationResolved(c api.Confirmation)  { r.publish("resolved", c) }

func (r *recorder) publish(topic string, c api.Confirmation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.topics = append(r.topics, topic)
	r.published = append(r.published, c)
}

// log lists what was published: each confirmation's id prefix and
// decision ("requested" while pending).
func (r *recorder) log() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.published {
		d := c.Decision
		if d == "" {
			d = "requested"
		}
		out = append(out, c.ID[:6]+" "+d)
	}
	return out
}

func request(t *testing.T, g *Gate, session, group, hash string) *Ticket {
	t.Helper()
	tk, err := g.Request(Request{Session: session, Group: group, Tool: "send", ArgsHash: hash})
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestDecisions(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
		decide  func(g *Gate, tk *Ticket) error
		want    error
		final   Decision
	}{
		{"approve", time.Minute, func(g *Gate, tk *Ticket) error {
			_, err := g.Decide(api.Decision{ID: tk.ID(), Approve: true, ArgsHash: hashA, Surface: "cli", Decider: "alice"})
			return err
		}, nil, Approved},
		{"deny", time.Minute, func(g *Gate, tk *Ticket) error {
			_, err := g.Decide(api.Decision{ID: tk.ID(), ArgsHash: hashA, Surface: "telegram", Decider: "42"})
			return err
		}, ErrDenied, Denied},
		{"expire", 20 * time.Millisecond, func(*Gate, *Ticket) error { return nil }, ErrTimeout, Expired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			g := New(rec.options(Options{Timeout: tt.timeout}))
			tk := request(t, g, "s", "main", hashA)
			if c := tk.Confirmation(); !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(c.ID) || !c.Expires.Equal(c.Created.Add(tt.timeout)) {
				t.Errorf("confirmation %+v: want a 128-bit hex id and an expiry after the timeout", c)
			}
			if err := tt.decide(g, tk); err != nil {
				t.Fatal(err)
			}
			if err := g.Wait(context.Background(), tk); !errors.Is(err, tt.want) {
				t.Fatalf("Wait = %v, want %v", err, tt.want)
			}
			c, ok := g.Get(tk.ID())
			if !ok || c.Decision != tt.final || g.Len() != 0 {
				t.Fatalf("after the wait: %+v %v, %d pending", c, ok, g.Len())
			}
			if got := rec.log(); len(got) != 2 || got[0] != tk.ID()[:6]+" requested" || got[1] != tk.ID()[:6]+" "+string(tt.final) {
				t.Errorf("observed %q", got)
			}
		})
	}
}

// Only the first decision applies; every later one, whatever it says, is
// refused and names the one that won.
func TestFirstDecisionWins(t *testing.T) {
	for round := range 20 {
		g := New(Options{})
		tk := request(t, g, "s", "main", hashA)
		var wg sync.WaitGroup
		results := make([]error, 8)
		for i := range results {
			wg.Go(func() {
				_, results[i] = g.Decide(api.Decision{ID: tk.ID(), Approve: i%2 == 0, ArgsHash: hashA, Surface: fmt.Sprintf("s%d", i)})
			})
		}
		wg.Wait()
		won := -1
		for i, err := range results {
			var dec *ErrDecided
			switch {
			case err == nil && won >= 0:
				t.Fatalf("round %d: decisions %d and %d both applied", round, won, i)
			case err == nil:
				won = i
			case !errors.As(err, &dec):
				t.Fatalf("round %d: decision %d: %v, want ErrDecided", round, i, err)
			}
		}
		if won < 0 {
			t.Fatalf("round %d: no decision applied", round)
		}
		c, _ := g.Get(tk.ID())
		for i, err := range results {
			var dec *ErrDecided
			if i != won && (!errors.As(err, &dec) || dec.Confirmation.Surface != c.Surface || dec.Confirmation.Decision != c.Decision) {
				t.Errorf("round %d: late decision %d was told %v, want the winner %s/%s", round, i, err, c.Surface, c.Decision)
			}
		}
		if c.Surface != fmt.Sprintf("s%d", won) {
			t.Errorf("round %d: recorded surface %q, the winner was s%d", round, c.Surface, won)
		}
	}
}

func TestRefusedDecisions(t *testing.T) {
	rec := &recorder{}
	g := New(rec.options(Options{Timeout: time.Minute}))
	tk := request(t, g, "s", "main", hashA)

	// A wrong hash decides nothing, approve or deny.
	for _, approve := range []bool{true, false} {
		if _, err := g.Decide(api.Decision{ID: tk.ID(), Approve: approve, ArgsHash: hashB}); !errors.Is(err, ErrMismatch) {
			t.Errorf("wrong hash (approve %v): %v, want ErrMismatch", approve, err)
		}
	}
	if _, err := g.Decide(api.Decision{ID: tk.ID(), Approve: true}); !errors.Is(err, ErrInvalid) {
		t.Errorf("no hash: %v, want ErrInvalid", err)
	}
	if _, err := g.Decide(api.Decision{ID: "0123456789abcdef0123456789abcdef", ArgsHash: hashA}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown id: %v, want ErrNotFound", err)
	}
	if g.Len() != 1 {
		t.Fatalf("%d pending after refused decisions, want 1", g.Len())
	}

	// After a withdrawal.
	if got := g.WithdrawSession("s", "the session closed"); len(got) != 1 || got[0].Decision != Withdrawn {
		t.Fatalf("withdrawn %+v", got)
	}
	if err := g.Wait(context.Background(), tk); !errors.Is(err, ErrWithdrawn) {
		t.Errorf("Wait after withdrawal = %v", err)
	}
	var dec *ErrDecided
	if _, err := g.Decide(api.Decision{ID: tk.ID(), Approve: true, ArgsHash: hashA}); !errors.As(err, &dec) || dec.Confirmation.Decision != Withdrawn {
		t.Errorf("approval after withdrawal: %v, want already decided (withdrawn)", err)
	}

	// After expiry, even before the gate's timer has run: a clock past it.
	now := time.Now()
	g2 := New(Options{Timeout: time.Hour, Now: func() time.Time { return now }})
	tk2 := request(t, g2, "s", "main", hashA)
	now = now.Add(time.Hour)
	if _, err := g2.Decide(api.Decision{ID: tk2.ID(), Approve: true, ArgsHash: hashA}); !errors.As(err, &dec) || dec.Confirmation.Decision != Expired {
		t.Errorf("approval after expiry: %v, want already decided (expired)", err)
	}
	if err := g2.Wait(context.Background(), tk2); !errors.Is(err, ErrTimeout) {
		t.Errorf("Wait after expiry = %v", err)
	}
}

// An identical request joins the pending one: one confirmation, both calls
// get its decision. A different session, tool or hash is another.
func TestIdenticalRequestsJoin(t *testing.T) {
	rec := &recorder{}
	g := New(rec.options(Options{}))
	a := request(t, g, "s", "main", hashA)
	b := request(t, g, "s", "main", hashA)
	if !b.Joined || a.Joined || a.ID() != b.ID() {
		t.Fatalf("second identical request: joined %v, ids %s %s", b.Joined, a.ID(), b.ID())
	}
	for _, other := range []*Ticket{request(t, g, "s", "main", hashB), request(t, g, "s2", "main", hashA)} {
		if other.Joined || other.ID() == a.ID() {
			t.Errorf("a different request joined %s", a.ID())
		}
	}
	if _, err := g.Decide(api.Decision{ID: a.ID(), Approve: true, ArgsHash: hashA}); err != nil {
		t.Fatal(err)
	}
	for _, tk := range []*Ticket{a, b} {
		if err := g.Wait(context.Background(), tk); err != nil {
			t.Errorf("joined call: %v", err)
		}
	}
	// One call of two giving up does not withdraw it; the last does.
	c := request(t, g, "s3", "main", hashA)
	d := request(t, g, "s3", "main", hashA)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Wait(ctx, c); !errors.Is(err, ErrWithdrawn) {
		t.Errorf("the call that gave up: %v", err)
	}
	if cf, _ := g.Get(c.ID()); !cf.Pending() {
		t.Fatalf("withdrawn while another call still waits: %+v", cf)
	}
	if err := g.Wait(ctx, d); !errors.Is(err, ErrWithdrawn) {
		t.Errorf("the last call that gave up: %v", err)
	}
	if cf, _ := g.Get(c.ID()); cf.Decision != Withdrawn {
		t.Errorf("not withdrawn when nobody waits: %+v", cf)
	}
}

// Past MaxPending in a group, a request is refused at once; other groups
// are not affected; a resolution makes room.
func TestPendingCapPerGroup(t *testing.T) {
	g := New(Options{MaxPending: 2})
	first := request(t, g, "s1", "main", hashA)
	request(t, g, "s2", "main", hashA)
	if _, err := g.Request(Request{Session: "s3", Group: "main", Tool: "send", ArgsHash: hashA}); !errors.Is(err, ErrTooMany) {
		t.Fatalf("third in the group: %v, want ErrTooMany", err)
	}
	request(t, g, "s4", "other", hashA)
	if _, err := g.Decide(api.Decision{ID: first.ID(), ArgsHash: hashA}); err != nil {
		t.Fatal(err)
	}
	request(t, g, "s3", "main", hashA)
}

// A confirmation that cannot be audited is not created, nor told to the
// surfaces.
func TestAuditFailureRefuses(t *testing.T) {
	rec := &recorder{fail: errors.New("audit log unwritable")}
	g := New(rec.options(Options{}))
	if _, err := g.Request(Request{Session: "s", Group: "main", Tool: "send", ArgsHash: hashA}); err == nil || g.Len() != 0 {
		t.Fatalf("Request = %v with %d pending; want a refusal and nothing pending", err, g.Len())
	}
	if got := rec.log(); len(got) != 0 {
		t.Errorf("published %q for a confirmation that was refused", got)
	}
}

func TestWithdrawAll(t *testing.T) {
	g := New(Options{})
	tks := []*Ticket{request(t, g, "a", "main", hashA), request(t, g, "b", "other", hashA)}
	g.WithdrawAll("the core is stopping")
	for _, tk := range tks {
		if err := g.Wait(context.Background(), tk); !errors.Is(err, ErrWithdrawn) {
			t.Errorf("Wait = %v", err)
		}
	}
	if g.Len() != 0 || len(g.Recent()) != 2 {
		t.Errorf("%d pending, %d recent", g.Len(), len(g.Recent()))
	}
}
