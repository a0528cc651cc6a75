package memory

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestQueryMatchExpr(t *testing.T) {
	tests := []struct{ text, want string }{
		{"", ""},
		{"   ", ""},
		{`"*^():-+{}`, ""},
		{"dog", `"dog"`},
		{"dog cat", `"dog" OR "cat"`},
		{"Dog dog DOG cat", `"Dog" OR "cat"`},
		{`NEAR(dog cat, 2)`, `"NEAR" OR "dog" OR "cat" OR "2"`},
		{`content:luna`, `"content" OR "luna"`},
		{`{content tags}: x`, `"content" OR "tags" OR "x"`},
		{`a"b`, `"a" OR "b"`},
		{`dog* ^cat -bird +fish`, `"dog" OR "cat" OR "bird" OR "fish"`},
		{"memory_fts", `"memory" OR "fts"`},
		{"l'été à Paris", `"l" OR "été" OR "à" OR "Paris"`},
		{"cafe\u0301", "\"cafe\u0301\""},      // a combining mark stays in its word
		{"हिन्दी भाषा", `"हिन्दी" OR "भाषा"`}, // vowel signs and virama are marks
		{"日本語", `"日本語"`},
		{"x²", `"x²"`},
		{"a\x00b\nc\td", `"a" OR "b" OR "c" OR "d"`},
		{"emoji 🐶 dog", `"emoji" OR "dog"`},
	}
	for _, tc := range tests {
		if got := matchExpr(queryTokens(tc.text), " OR "); got != tc.want {
			t.Errorf("matchExpr(%q) = %s, want %s", tc.text, got, tc.want)
		}
	}
}

func TestQueryTokensCap(t *testing.T) {
	var words []string
	for i := range 100 {
		words = append(words, fmt.Sprintf("w%d", i), fmt.Sprintf("W%d", i))
	}
	toks := queryTokens(strings.Join(words, " "))
	if len(toks) != maxQueryTokens {
		t.Fatalf("%d tokens, want %d", len(toks), maxQueryTokens)
	}
	for i, tok := range toks {
		if want := fmt.Sprintf("w%d", i); tok != want {
			t.Errorf("token %d = %q, want %q (first-seen order, duplicates dropped)", i, tok, want)
		}
	}
	if got := strings.Count(matchExpr(queryTokens(strings.Join(words, " ")), " AND "), " AND "); got != maxQueryTokens-1 {
		t.Errorf("%d ANDs, want %d", got, maxQueryTokens-1)
	}
}

func TestQueryNormaliseTags(t *testing.T) {
	tests := []struct {
		in   []string
		want []string
		bad  string // part of the reason when refused
	}{
		{nil, []string{}, ""},
		{[]string{" Coding ", "coding", "CODING", "", "  ", "TypeScript"}, []string{"coding", "typescript"}, ""},
		{[]string{"b", "a", "b"}, []string{"b", "a"}, ""},
		{[]string{"ÉTÉ"}, []string{"été"}, ""},
		{[]string{"ok", "a\nb"}, nil, "tag 2 contains a control character (U+000A)"},
		{[]string{"a\u202eb"}, nil, "bidirectional"},
		{[]string{strings.Repeat("x", 51)}, nil, "51 characters"},
		{[]string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11"}, nil, "at most 10"},
	}
	for _, tc := range tests {
		got, err := normaliseTags(tc.in)
		if tc.bad != "" {
			var inv *InvalidError
			if !errors.As(err, &inv) || inv.Field != "tags" || !strings.Contains(inv.Reason, tc.bad) {
				t.Errorf("normaliseTags(%q) = %v, %v; want InvalidError mentioning %q", tc.in, got, err, tc.bad)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("normaliseTags(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestQuerySearchTags(t *testing.T) {
	got := searchTags([]string{" Work", "work", "", "a\nb", strings.Repeat("x", 60)})
	want := []string{"work", "a\nb", strings.Repeat("x", 60)}
	if !slices.Equal(got, want) {
		t.Errorf("searchTags = %q, want %q", got, want)
	}
}
