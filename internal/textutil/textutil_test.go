package textutil

import "testing"

func TestOneLine(t *testing.T) {
	for in, want := range map[string]string{"": "", " a \n\t b ": "a b", "x\r\ny": "x y"} {
		if got := OneLine(in); got != want {
			t.Errorf("OneLine(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcd", 3, "abc…"},
		{"aé", 2, "a…"}, // é is two bytes: never cut inside it
		{"éé", 3, "é…"},
	} {
		if got := Clip(tc.in, tc.n); got != tc.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func TestClipRunes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"abcdef", 0, "abcdef"}, // no limit
		{"abcdef", -1, "abcdef"},
		{"abcdef", 6, "abcdef"},
		{"abcdef", 4, "abc…"},
		{"abcdef", 1, "…"},
		{"äöüßéè", 3, "äö…"}, // characters, not bytes
		{"äöü", 3, "äöü"},
	} {
		if got := ClipRunes(tc.in, tc.n); got != tc.want {
			t.Errorf("ClipRunes(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func TestPrintable(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "hello, wörld", "hello, wörld"},
		{"backslash kept", `a\b`, `a\b`},
		{"C0", "a\x1b[2Jb\n", `a\u001b[2Jb\u000a`},
		{"C1 CSI", "a\u009b31mb", `a\u009b31mb`},
		{"bidi override", "a\u202eb", `a\u202eb`},
		{"bidi isolate", "a\u2066b\u2069", `a\u2066b\u2069`},
		{"zero width joiner", "a\u200db", `a\u200db`},
		{"astral format char", "a\U000E0001b", `a\U000e0001b`},
		{"invalid UTF-8 shows as U+FFFD", "a\xffb", "a\ufffdb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Printable(tt.in); got != tt.want {
				t.Errorf("Printable(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
