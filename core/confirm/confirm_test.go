package confirm

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestGate(t *testing.T) {
	hash := HashArguments([]byte(`{"message":"a"}`))
	tests := []struct {
		name    string
		decide  func(g *Gate, p *Pending) error
		timeout time.Duration
		want    error
	}{
		{"approve", func(g *Gate, p *Pending) error { return g.Decide(p.ID, true, hash) }, time.Minute, nil},
		{"deny", func(g *Gate, p *Pending) error { return g.Decide(p.ID, false, "") }, time.Minute, ErrDenied},
		{"timeout", func(*Gate, *Pending) error { return nil }, 20 * time.Millisecond, ErrTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &Gate{Timeout: tt.timeout}
			p, err := g.Open(Pending{Session: "s", Tool: "echo_confirm", ArgsHash: hash})
			if err != nil {
				t.Fatal(err)
			}
			if g.Len() != 1 {
				t.Fatalf("pending = %d, want 1", g.Len())
			}
			if err := tt.decide(g, p); err != nil {
				t.Fatal(err)
			}
			if err := g.Wait(context.Background(), p); !errors.Is(err, tt.want) {
				t.Fatalf("Wait = %v, want %v", err, tt.want)
			}
			if g.Len() != 0 {
				t.Fatalf("pending after wait = %d, want 0", g.Len())
			}
		})
	}
}

func TestApprovalBoundToArguments(t *testing.T) {
	g := &Gate{}
	a, _ := g.Open(Pending{Session: "s", Tool: "t", ArgsHash: HashArguments([]byte(`{"x":1}`))})
	b, _ := g.Open(Pending{Session: "s", Tool: "t", ArgsHash: HashArguments([]byte(`{"x":2}`))})
	// Approving a with b's hash must fail and leave a pending.
	if err := g.Decide(a.ID, true, b.ArgsHash); !errors.Is(err, ErrMismatch) {
		t.Fatalf("Decide with other hash = %v, want ErrMismatch", err)
	}
	if g.Len() != 2 {
		t.Fatalf("pending = %d, want 2", g.Len())
	}
	if err := g.Decide(a.ID, true, a.ArgsHash); err != nil {
		t.Fatal(err)
	}
	if err := g.Wait(context.Background(), a); err != nil {
		t.Fatalf("a: %v", err)
	}
	// b is still undecided: cancelling its wait fails closed.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Wait(ctx, b); !errors.Is(err, ErrCanceled) {
		t.Fatalf("b: %v, want ErrCanceled", err)
	}
	if err := g.Decide(a.ID, true, a.ArgsHash); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second decision = %v, want ErrNotFound", err)
	}
}

func TestMaxPending(t *testing.T) {
	g := &Gate{MaxPending: 2}
	for i := 0; i < 2; i++ {
		if _, err := g.Open(Pending{Session: "s"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.Open(Pending{Session: "s"}); !errors.Is(err, ErrTooMany) {
		t.Fatalf("third = %v, want ErrTooMany", err)
	}
	if _, err := g.Open(Pending{Session: "other"}); err != nil {
		t.Fatalf("other session: %v", err)
	}
}
