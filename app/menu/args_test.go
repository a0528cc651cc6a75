package menu

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/internal/textutil"
)

func TestLeaves(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want []string // Leaf.String()
		err  bool
	}{
		{"none", ``, nil, false},
		{"flat, in the order sent", `{"to":"alice","cc":null,"n":3,"ok":true}`, []string{`to = "alice"`, `cc = null`, `n = 3`, `ok = true`}, false},
		{"nested", `{"a":{"b":[1,{"c":"d"}]}}`, []string{`a.b[0] = 1`, `a.b[1].c = "d"`}, false},
		{"empty containers", `{"o":{},"l":[]}`, []string{`o = {}`, `l = []`}, false},
		{"numbers exactly as sent", `{"big":12345678901234567890123,"f":1.50e+3}`, []string{`big = 12345678901234567890123`, `f = 1.50e+3`}, false},
		{"duplicate keys both shown", `{"k":"first","k":"second"}`, []string{`k = "first"`, `k = "second"`}, false},
		{"keys that are not plain words are quoted", `{"a b":1,"":2,"x.y":3,"1st":4,"q\"\\":5}`,
			[]string{`["a b"] = 1`, `[""] = 2`, `["x.y"] = 3`, `["1st"] = 4`, `["q\"\\"] = 5`}, false},
		{"a single value", `"hello"`, []string{`"hello"`}, false},
		{"a top-level array", `["a","b"]`, []string{`[0] = "a"`, `[1] = "b"`}, false},
		{"newline and ANSI escaped", `{"m":"line1\nline2\u001b[31mred"}`, []string{`m = "line1\u000aline2\u001b[31mred"`}, false},
		{"RTL override escaped", `{"file":"invoice\u202egpj.exe"}`, []string{`file = "invoice\u202egpj.exe"`}, false},
		{"a real backslash cannot pass for an escape", `{"m":"a\\u000ab"}`, []string{`m = "a\\u000ab"`}, false},
		{"quotes in values", `{"m":"say \"hi\""}`, []string{`m = "say \"hi\""`}, false},
		{"an escaped key", `{"evil\u202ekey":1}`, []string{`["evil\u202ekey"] = 1`}, false},
		{"not JSON", `{"a":`, nil, true},
		{"two values", `{} {}`, nil, true},
		{"nested too deep", strings.Repeat("[", maxDepth+2) + strings.Repeat("]", maxDepth+2), nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ls, err := Leaves(json.RawMessage(tt.raw))
			if (err != nil) != tt.err {
				t.Fatalf("Leaves(%s): err %v, want error %v", tt.raw, err, tt.err)
			}
			var got []string
			for _, l := range ls {
				got = append(got, l.String())
			}
			if tt.want != nil && !slices.Equal(got, tt.want) {
				t.Errorf("Leaves(%s)\n got %q\nwant %q", tt.raw, got, tt.want)
			}
			for _, g := range got {
				for _, r := range g {
					if !textutil.IsPrint(r) {
						t.Errorf("leaf %q has the unprintable %U", g, r)
					}
				}
			}
		})
	}
}

func TestWrap(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		width int
		want  []string
	}{
		{"fits", "abcdef", 6, []string{"abcdef"}},
		{"empty", "", 6, []string{""}},
		{"wraps with the prefix counted", "abcdefghij", 6, []string{"abcdef", "> ghij"}},
		{"several", "abcdefghijklmn", 6, []string{"abcdef", "> ghij", "> klmn"}},
		{"runes, not bytes", "ääääääää", 6, []string{"ääääää", "> ää"}},
		{"a width below the prefix is raised past it", "abcde", 1, []string{"abc", "> d", "> e"}},
		{"at a space in the line's second half", "one two three four", 10, []string{"one two ", "> three ", "> four"}},
		{"not at a space in the first half", "a bcdefghijkl", 6, []string{"a bcde", "> fghi", "> jkl"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Wrap(tt.in, tt.width, "> ")
			if !slices.Equal(got, tt.want) {
				t.Errorf("Wrap(%q, %d) = %q, want %q", tt.in, tt.width, got, tt.want)
			}
			joined := got[0]
			for _, l := range got[1:] {
				joined += strings.TrimPrefix(l, "> ")
			}
			if joined != tt.in {
				t.Errorf("the lines join to %q, not %q", joined, tt.in)
			}
		})
	}
}

func TestSummary(t *testing.T) {
	long := strings.Repeat("x", 10<<10)
	tests := []struct {
		name     string
		c        api.Confirmation
		width    int
		want     string
		complete bool
	}{
		{"leaves on one line", conf("a", "t", `{"to":"alice","body":"hi\nthere"}`), 80, `to = "alice", body = "hi\u000athere"`, true},
		{"exactly the width", conf("a", "t", `{"m":"xxxxxxxxxx"}`), 16, `m = "xxxxxxxxxx"`, true},
		{"cut with an ellipsis", conf("a", "t", `{"m":"`+long+`"}`), 20, `m = "xxxxxxxxxxxxxx…`, false},
		{"one rune over", conf("a", "t", `{"m":"xxxxxxxxxx"}`), 15, `m = "xxxxxxxxx…`, false},
		{"no arguments", conf("a", "t", ""), 80, "no arguments", true},
		{"left out of the event", omitted(conf("a", "t", `{"m":1}`)), 80, "arguments too large for a notification: see the menu", false},
		{"not JSON", conf("a", "t", `{`), 80, "arguments not readable: see the menu", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, complete := Summary(tt.c, tt.width)
			if got != tt.want || complete != tt.complete {
				t.Errorf("Summary = %q, %v; want %q, %v", got, complete, tt.want, tt.complete)
			}
			if n := utf8.RuneCountInString(got); n > tt.width {
				t.Errorf("Summary has %d runes, more than %d", n, tt.width)
			}
		})
	}
}
