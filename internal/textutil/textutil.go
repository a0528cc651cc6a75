// Package textutil holds the small text helpers the core uses for log
// lines, audit reasons and messages: folding text onto one line and
// clipping it to a size.
package textutil

import (
	"strings"
	"unicode/utf8"
)

// OneLine folds s onto one line: runs of white space, line breaks included,
// become one space, and the ends are trimmed.
func OneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Clip returns s cut to at most n bytes, on a rune boundary, with "…"
// after a cut.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
