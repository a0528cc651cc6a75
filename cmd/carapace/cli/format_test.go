package cli

import (
	"encoding/json"
	"testing"
)

func TestTerminalSafety(t *testing.T) {
	tests := []struct {
		name, in, printable string
	}{
		{"plain", "hello, wörld", "hello, wörld"},
		{"C0", "a\x1b[2Jb\n", `a\u001b[2Jb\u000a`},
		{"C1 CSI", "a\u009b31mb", `a\u009b31mb`},
		{"bidi override", "a\u202eb", `a\u202eb`},
		{"astral format char", "a\U000E0001b", `a\U000e0001b`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := printable(tt.in); got != tt.printable {
				t.Errorf("printable(%q) = %q, want %q", tt.in, got, tt.printable)
			}
			enc, err := json.Marshal(map[string]string{"k": tt.in})
			if err != nil {
				t.Fatal(err)
			}
			safe := escapeJSON(enc)
			for _, r := range string(safe) {
				if r >= 0x80 && !isPrint(r) {
					t.Errorf("escapeJSON left %U in %s", r, safe)
				}
			}
			var back map[string]string
			if err := json.Unmarshal(safe, &back); err != nil || back["k"] != tt.in {
				t.Errorf("escapeJSON changed the value: %q (%v)", back["k"], err)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"abcdef", 0, "abcdef"},
		{"abcdef", 6, "abcdef"},
		{"abcdef", 4, "abc…"},
		{"äöüßéè", 3, "äö…"},
	}
	for _, tt := range tests {
		if got := truncate(tt.in, tt.n); got != tt.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
