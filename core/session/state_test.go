package session

import (
	"testing"

	"github.com/carapace-dev/carapace/core/audit"
)

func TestDiagnosticsRing(t *testing.T) {
	s := New("s1", "main", "none")
	for i := 0; i < diagCap+10; i++ {
		outcome := audit.OutcomeOK
		if i%2 == 0 {
			outcome = audit.OutcomeRejected
		}
		s.Record(audit.Entry{Correlation: string(rune('a' + i%26)), Outcome: outcome})
	}
	if n := len(s.Diagnostics(audit.Filter{})); n != diagCap {
		t.Fatalf("kept %d, want %d", n, diagCap)
	}
	got := s.Diagnostics(audit.Filter{Outcome: "error", Last: 3})
	if len(got) != 3 {
		t.Fatalf("last 3 errors: %d", len(got))
	}
	for _, e := range got {
		if e.Outcome != audit.OutcomeRejected {
			t.Fatalf("filter returned %q", e.Outcome)
		}
	}
}
