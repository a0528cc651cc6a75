package plugin

import "testing"

func TestOneLine(t *testing.T) {
	for in, want := range map[string]string{
		"":                  "",
		"  a  b  ":          "a b",
		"a\nb\r\nc":         "a b c",
		"a\u2028b\u2029c":   "a b c",
		"a\u0085b":          "a b",
		"a\u200bb":          "a b",
		"a\tb\x00c":         "a b c",
		"\xffa":             "\uFFFDa",
		"naïve café — ok ✓": "naïve café — ok ✓",
	} {
		if got := OneLine(in); got != want {
			t.Errorf("OneLine(%q) = %q, want %q", in, got, want)
		}
	}
}
