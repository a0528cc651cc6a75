package agent

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/runtime"
)

// scan writes chunks to a doneWriter for token, flushes it and returns
// what came out: the output, with "<done N>" where the Done came.
func scan(t *testing.T, token string, chunks ...string) string {
	t.Helper()
	ch := make(chan api.Output, 1024)
	w := stdoutWriter(runtime.Spec{Env: []string{"HOME=/home/agent", envDone + "=" + token}}, &outputWriter{stream: "stdout", ch: ch, closed: make(chan struct{})})
	for _, c := range chunks {
		if n, err := w.Write([]byte(c)); n != len(c) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", c, n, err)
		}
	}
	w.Flush()
	close(ch)
	var b strings.Builder
	for o := range ch {
		switch {
		case o.Done != nil:
			fmt.Fprintf(&b, "<done %d>", *o.Done)
		case o.Stream != "stdout" || o.Data == "":
			t.Fatalf("unexpected output %+v", o)
		default:
			b.WriteString(o.Data)
		}
	}
	return b.String()
}

func TestDoneLine(t *testing.T) {
	const tok = "0123abcd"
	for _, tc := range []struct{ name, in, want string }{
		{"answer then the line", "the answer\nexit 0\n\ncarapace-agent-done 0123abcd 0\n", "the answer\nexit 0\n<done 0>"},
		{"no newline before", "the answer\ncarapace-agent-done 0123abcd 3\n", "the answer<done 3>"},
		{"nothing printed", "\ncarapace-agent-done 0123abcd 255\n", "<done 255>"},
		{"output after the line passes on", "a\ncarapace-agent-done 0123abcd 1\nlater\n", "a<done 1>later\n"},
		{"only the first line counts", "\ncarapace-agent-done 0123abcd 1\n\ncarapace-agent-done 0123abcd 0\n", "<done 1>\ncarapace-agent-done 0123abcd 0\n"},
		{"another token is output", "\ncarapace-agent-done 99999999 0\n", "\ncarapace-agent-done 99999999 0\n"},
		{"a status above 255 is output", "\ncarapace-agent-done 0123abcd 256\n", "\ncarapace-agent-done 0123abcd 256\n"},
		{"four digits are output", "\ncarapace-agent-done 0123abcd 0001\n", "\ncarapace-agent-done 0123abcd 0001\n"},
		{"no digits is output", "\ncarapace-agent-done 0123abcd \n", "\ncarapace-agent-done 0123abcd \n"},
		{"a sign is output", "\ncarapace-agent-done 0123abcd -1\n", "\ncarapace-agent-done 0123abcd -1\n"},
		{"the stream ends inside the line", "x\ncarapace-agent-done 0123abcd 12", "x\ncarapace-agent-done 0123abcd 12"},
		{"the stream ends inside the mark", "x\ncarapace-agent-do", "x\ncarapace-agent-do"},
		{"a false start then the line", "\ncarapace-agent-done 0123abcd x\ncarapace-agent-done 0123abcd 7\n", "\ncarapace-agent-done 0123abcd x<done 7>"},
		{"no line", "just output\n", "just output\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := scan(t, tok, tc.in); got != tc.want {
				t.Errorf("in one write: got %q, want %q", got, tc.want)
			}
			// However the engine's writes split it, the same comes out.
			for i := 0; i <= len(tc.in); i++ {
				for j := i; j <= len(tc.in); j++ {
					if got := scan(t, tok, tc.in[:i], tc.in[i:j], tc.in[j:]); got != tc.want {
						t.Fatalf("split at %d and %d: got %q, want %q", i, j, got, tc.want)
					}
				}
			}
			bytewise := make([]string, len(tc.in))
			for i := range tc.in {
				bytewise[i] = tc.in[i : i+1]
			}
			if got := scan(t, tok, bytewise...); got != tc.want {
				t.Errorf("a byte a write: got %q, want %q", got, tc.want)
			}
		})
	}
}

// Random streams of look-alikes, cut at random: what comes out is what
// one pass over the whole stream finds.
func TestDoneLineRandom(t *testing.T) {
	const tok = "ab"
	parts := []string{"\n", "carapace-agent-done ", "ab ", "a", "b", " ", "1", "25", "256", "x", "\ncarapace-agent-done ab "}
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		var in strings.Builder
		for range r.IntN(12) {
			in.WriteString(parts[r.IntN(len(parts))])
		}
		s := in.String()
		want := scan(t, tok, s)
		if ref := reference(s, "\ncarapace-agent-done "+tok+" "); want != ref {
			t.Fatalf("%q: got %q, want %q", s, want, ref)
		}
		var chunks []string
		for rest := s; rest != ""; {
			n := 1 + r.IntN(len(rest))
			chunks, rest = append(chunks, rest[:n]), rest[n:]
		}
		if got := scan(t, tok, chunks...); got != want {
			t.Fatalf("%q cut as %q: got %q, want %q", s, chunks, got, want)
		}
	}
}

// reference is the done line's rule over a whole stream, written plainly:
// the first mark followed by 1–3 digits (at most 255) and a newline.
func reference(s, mark string) string {
	for from := 0; ; {
		i := strings.Index(s[from:], mark)
		if i < 0 {
			return s
		}
		i += from
		rest := s[i+len(mark):]
		n := 0
		for n < len(rest) && n < 4 && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		var v int
		if n >= 1 && n <= 3 && n < len(rest) && rest[n] == '\n' {
			fmt.Sscan(rest[:n], &v)
			if v <= 255 {
				return s[:i] + fmt.Sprintf("<done %d>", v) + rest[n+1:]
			}
		}
		from = i + 1
	}
}

// A container that runs a command of its own (carapace run -- CMD, a
// probe) gets no token, and its stdout is passed on untouched.
func TestDoneTokenOnlyForTheImagesAgent(t *testing.T) {
	if got := scan(t, "", "\ncarapace-agent-done  0\n"); got != "\ncarapace-agent-done  0\n" {
		t.Errorf("without a token: %q", got)
	}
	if a, b := newDoneToken(), newDoneToken(); a == b || len(a) != 24 {
		t.Errorf("tokens %q and %q: want two different 24-digit ones", a, b)
	}
}
