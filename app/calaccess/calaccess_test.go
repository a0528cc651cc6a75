package calaccess

import (
	"strings"
	"testing"
)

// TestLevelAndAdvice: EventKit's statuses in words, and what each asks of
// the user.
func TestLevelAndAdvice(t *testing.T) {
	for ek, want := range map[int]string{0: NotDetermined, 1: Restricted, 2: Denied, 3: Full, 4: WriteOnly, 9: Unknown, -1: Unknown} {
		if got := Level(ek); got != want {
			t.Errorf("Level(%d) = %q, want %q", ek, got, want)
		}
	}
	for _, tc := range []struct {
		s    Status
		want string // a part of the advice; "" for none
	}{
		{Status{Full, Full}, ""},
		{Status{NotDetermined, NotDetermined}, "Allow calendar and reminders access…"},
		{Status{Full, NotDetermined}, "Allow calendar and reminders access…"},
		{Status{Denied, Full}, "System Settings › Privacy & Security"},
		{Status{Full, WriteOnly}, "System Settings › Privacy & Security"},
		{Status{Restricted, Full}, "forbids"},
	} {
		got := Advice(tc.s)
		if tc.s.Granted() != (tc.want == "") || (tc.want == "" && got != "") || (tc.want != "" && !contains(got, tc.want)) {
			t.Errorf("Advice(%+v) = %q, want %q (granted %v)", tc.s, got, tc.want, tc.s.Granted())
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
