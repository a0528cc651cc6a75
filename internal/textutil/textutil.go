// Package textutil holds the small text helpers the core, the plugins, the
// command line and the menu-bar app share: folding text onto one line,
// clipping it to a size in bytes (Clip: log lines, audit reasons, messages)
// or to a width in characters (ClipRunes: table columns, menu titles), and
// the escaping that shows text that came from the agent safely (Printable).
package textutil

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// OneLine folds s onto one line: runs of white space, line breaks included,
// become one space, and the ends are trimmed.
func OneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Clip returns s cut to at most n bytes, between two characters, with "…"
// after a cut: the size a log line, an audit reason, a message or a field
// may take. The cut never splits a character, so the result is valid
// UTF-8 when s is.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// ClipRunes returns s cut to at most n characters, the last of them "…"
// when it was cut: the width a table column, a menu title or a one-line
// description may take. n < 1 means no limit (a column without a width).
func ClipRunes(s string, n int) string {
	if n < 1 || utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// Printable makes a string from the core, the agent or the audit log safe
// to show on a terminal or in a menu: runes that are not printable —
// control characters (C0, and C1 ones that some terminals obey as escape
// sequences), bidi overrides and other invisible format characters —
// become \u escapes (\U for those beyond the BMP). Everything else, the
// backslash included, is kept as is.
func Printable(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case IsPrint(r):
			b.WriteRune(r)
		case r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// IsPrint reports whether r is safe to show as is: a printable rune
// (unicode.IsPrint) or the ASCII space.
func IsPrint(r rune) bool { return r == ' ' || unicode.IsPrint(r) }
