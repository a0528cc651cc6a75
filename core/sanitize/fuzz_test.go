package sanitize

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// plant is a secret of one shape planted in fuzzed text: text is what is
// inserted, needle the random part that must not survive.
type plant struct{ text, needle string }

// planters build, from random characters, secrets that every rule must catch
// whatever surrounds them (they are inserted between spaces).
var planters = []func(r *rand.Rand) plant{
	func(r *rand.Rand) plant { n := randChars(r, alnum+"_-", 40); return plant{"sk-ant-api03-" + n, n} },
	func(r *rand.Rand) plant { n := randChars(r, alnum+"_-", 40); return plant{"sk-proj-" + n, n} },
	func(r *rand.Rand) plant { n := randChars(r, alnum, 36); return plant{"ghp_" + n, n} },
	func(r *rand.Rand) plant { n := randChars(r, alnum, 30); return plant{"xoxb-1-" + n, n} },
	func(r *rand.Rand) plant { n := randChars(r, upperAlnum, 16); return plant{"AKIA" + n, "AKIA" + n} },
	func(r *rand.Rand) plant { n := randChars(r, alnum, 30); return plant{"sk_live_" + n, n} },
	func(r *rand.Rand) plant { n := randChars(r, alnum+"_-", 35); return plant{"AIza" + n, n} },
	func(r *rand.Rand) plant {
		n := randChars(r, alnum+"_-", 30)
		return plant{"eyJhbGciOiJIUzI1NiJ9.eyJ" + n + ".c2ln", n}
	},
	func(r *rand.Rand) plant {
		n := randChars(r, alnum+"+/", 64)
		return plant{"-----BEGIN EC PRIVATE KEY-----\n" + n + "\n-----END EC PRIVATE KEY-----", n}
	},
	func(r *rand.Rand) plant {
		n := randChars(r, alnum, 24)
		return plant{"https://bob:" + n + "@example.com/", n}
	},
	func(r *rand.Rand) plant { n := randChars(r, alnum, 24); return plant{"password=" + n, n} },
	func(r *rand.Rand) plant { n := randChars(r, alnum+"-._~+/", 24); return plant{"Bearer " + n, n} },
}

const (
	alnum      = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	upperAlnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
)

func randChars(r *rand.Rand, alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

func addSeeds(f *testing.F) {
	for _, tc := range positives {
		f.Add(tc.in, uint64(len(tc.in)))
	}
	for i, s := range negatives {
		f.Add(s, uint64(i))
	}
}

// FuzzString checks that String never panics, is idempotent, reports kinds
// exactly when it changes its input, and never lets through a secret planted
// in the fuzzed text.
func FuzzString(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, s string, seed uint64) {
		out, kinds := String(s)
		if (kinds == nil) != (out == s) {
			t.Fatalf("String(%q) = %q with kinds %q", s, out, kinds)
		}
		if again, k := String(out); again != out || k != nil {
			t.Fatalf("not idempotent: String(%q) = %q; String of that = %q, %q", s, out, again, k)
		}

		r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		p := planters[r.IntN(len(planters))](r)
		if strings.Contains(s, p.needle) {
			return
		}
		cut := int(seed % uint64(len(s)+1))
		in := s[:cut] + " " + p.text + " " + s[cut:]
		out, kinds = String(in)
		if strings.Contains(out, p.needle) {
			t.Fatalf("planted secret survived:\n in %q\nout %q", in, out)
		}
		if kinds == nil {
			t.Fatalf("String(%q) redacted but reported no kinds", in)
		}
		if again, k := String(out); again != out || k != nil {
			t.Fatalf("not idempotent: String(%q) = %q; String of that = %q, %q", in, out, again, k)
		}
	})
}

// FuzzRules checks the engine's shortcuts (prefilter, anchored search)
// against the reference form of each rule; see checkRules.
func FuzzRules(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, s string, _ uint64) {
		checkRules(t, s)
	})
}

// FuzzValue checks Value on a small object built from fuzzed strings: it
// never panics, never returns the planted secret and never changes its input.
func FuzzValue(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, s string, seed uint64) {
		r := rand.New(rand.NewPCG(seed, seed))
		p := planters[r.IntN(len(planters))](r)
		if strings.Contains(s, p.needle) {
			return
		}
		in := map[string]any{"list": []any{s, " " + p.text + " ", map[string]any{"password": s, s: s}}}
		if s != "list" {
			in[s] = s
		}
		before := deepCopy(in)
		out, reds := Value(in, "result")
		if reds == nil {
			t.Fatal("no redactions")
		}
		if strings.Contains(stringOf(out), p.needle) {
			t.Fatalf("planted secret survived: %v", out)
		}
		if !equalJSON(in, before) {
			t.Fatal("Value modified its input")
		}
		if _, again := Value(out, "result"); again != nil {
			t.Fatalf("sanitising the output again redacted %v", again)
		}
	})
}

func equalJSON(a, b any) bool { return stringOf(a) == stringOf(b) }
