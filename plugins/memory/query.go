package memory

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on what Put accepts. maxContentRunes and the tag limits are the
// manifest's (memory_store's arguments_schema), checked again here so that
// the store holds to them whoever calls it.
const (
	maxContentRunes = 2000
	maxTagRunes     = 50
	maxTags         = 10
)

// maxQueryTokens bounds the words of a search: a longer text is cut to its
// first maxQueryTokens distinct words. 32 is plenty for a question and keeps
// the FTS5 expression (one phrase per word) small.
const maxQueryTokens = 32

// queryTokens splits text into the words a search looks for: maximal runs of
// letters, numbers and combining marks (Unicode), each other rune being a
// separator. Duplicates (ignoring case) are dropped and at most
// maxQueryTokens are kept, in first-seen order.
//
// Marks count as word runes, unlike in a plain letter-or-digit split, so
// that a word of a script written with combining vowel signs (Devanagari,
// Thai) or with decomposed accents stays one word, as FTS5's unicode61
// tokenizer sees it.
func queryTokens(text string) []string {
	words := strings.FieldsFunc(text, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r) && !unicode.IsMark(r)
	})
	var toks []string
	seen := make(map[string]bool, len(words))
	for _, w := range words {
		k := strings.ToLower(w)
		if seen[k] {
			continue
		}
		seen[k] = true
		toks = append(toks, w)
		if len(toks) == maxQueryTokens {
			break
		}
	}
	return toks
}

// matchExpr returns the FTS5 MATCH expression for words (from queryTokens):
// each word as an FTS5 string, joined with op (" AND " or " OR ").
//
// User text never reaches FTS5 as syntax: the words hold only letters,
// numbers and marks, and each is quoted (a '"' would be doubled, though none
// can occur), so operators (AND, OR, NOT, NEAR), prefixes (*, ^), column
// filters (content:, {content tags}:) and parentheses in the text are plain
// words or separators. A quoted word that the tokenizer reduces to nothing
// matches nothing and is no error.
func matchExpr(words []string, op string) string {
	var b strings.Builder
	for i, t := range words {
		if i > 0 {
			b.WriteString(op)
		}
		b.WriteByte('"')
		b.WriteString(strings.ReplaceAll(t, `"`, `""`))
		b.WriteByte('"')
	}
	return b.String()
}

// normaliseTags returns tags as Put stores them: each trimmed and
// lower-cased; empty ones dropped; duplicates dropped, first-seen order
// kept. It rejects, with an *InvalidError for field "tags", rather than
// silently changing: a tag that is not valid UTF-8, one with a control
// character (C0/C1, so also newlines and tabs) or a bidirectional embedding,
// override or isolate character, one longer than maxTagRunes runes after
// trimming, and more than maxTags distinct tags.
func normaliseTags(tags []string) ([]string, error) {
	out := make([]string, 0, len(tags))
	for i, t := range tags {
		t, err := normaliseTag(t)
		if err != nil {
			return nil, &InvalidError{Field: "tags", Reason: fmt.Sprintf("tag %d %s", i+1, err.Error())}
		}
		if t == "" || slices.Contains(out, t) {
			continue
		}
		out = append(out, t)
	}
	if len(out) > maxTags {
		return nil, &InvalidError{Field: "tags", Reason: fmt.Sprintf("at most %d distinct tags are allowed, got %d", maxTags, len(out))}
	}
	return out, nil
}

// normaliseTag trims and lower-cases one tag, or says what is wrong with it.
func normaliseTag(t string) (string, error) {
	if !utf8.ValidString(t) {
		return "", fmt.Errorf("is not valid UTF-8")
	}
	for _, r := range t {
		if unicode.IsControl(r) {
			return "", fmt.Errorf("contains a control character (%U)", r)
		}
		if isBidiControl(r) {
			return "", fmt.Errorf("contains a bidirectional formatting character (%U)", r)
		}
	}
	t = strings.ToLower(strings.TrimSpace(t))
	if n := utf8.RuneCountInString(t); n > maxTagRunes {
		return "", fmt.Errorf("is %d characters long; at most %d are allowed", n, maxTagRunes)
	}
	return t, nil
}

// isBidiControl reports whether r is an explicit bidirectional embedding,
// override or isolate character: in a tag they only serve to make text
// display differently from what it is.
func isBidiControl(r rune) bool {
	return (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
}

// searchTags normalises the tags of a search like Put's (trim, lower-case,
// drop empty, dedupe) but rejects nothing: a tag no entry can carry simply
// matches nothing.
func searchTags(tags []string) []string {
	var out []string
	for _, t := range tags {
		t = strings.ToLower(strings.TrimSpace(t))
		if t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}
