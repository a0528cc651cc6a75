package llmproxy

import (
	"errors"
	"testing"
	"time"
)

func TestDailyBudget(t *testing.T) {
	zone := time.FixedZone("UTC+2", 2*3600)
	clk := &clock{now: time.Date(2026, 12, 31, 23, 0, 0, 0, zone)}
	b := NewDailyBudget(100, clk.Now)

	if err := b.Allow("a"); err != nil {
		t.Fatalf("fresh budget: %v", err)
	}
	b.Add("a", 60)
	b.Add("a", -5) // ignored
	if err := b.Allow("a"); err != nil {
		t.Fatalf("60 of 100: %v", err)
	}
	b.Add("a", 40)
	err := b.Allow("a")
	var be *BudgetError
	if !errors.Is(err, ErrBudget) || !errors.As(err, &be) {
		t.Fatalf("100 of 100: %v, want a BudgetError", err)
	}
	if want := time.Date(2027, 1, 1, 0, 0, 0, 0, zone); !be.Reset.Equal(want) || be.RetryAfter != time.Hour || be.Used != 100 || be.Limit != 100 || be.Group != "a" {
		t.Errorf("%+v, want reset at %v in 1h", be, want)
	}
	if err := b.Allow("b"); err != nil {
		t.Errorf("another group: %v", err)
	}

	clk.add(59*time.Minute + 59*time.Second) // 23:59:59
	if b.Allow("a") == nil {
		t.Error("reset before midnight")
	}
	clk.add(time.Second) // midnight
	if err := b.Allow("a"); err != nil || b.Used("a") != 0 {
		t.Errorf("after midnight: %v, used %d", err, b.Used("a"))
	}
	b.Add("a", 1)
	if b.Used("a") != 1 {
		t.Errorf("used %d after a new day's add, want 1", b.Used("a"))
	}

	unlimited := NewDailyBudget(0, clk.Now)
	unlimited.Add("a", 1<<40)
	if err := unlimited.Allow("a"); err != nil || unlimited.Used("a") != 1<<40 {
		t.Errorf("unlimited: %v, used %d", err, unlimited.Used("a"))
	}
}
