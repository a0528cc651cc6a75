// Package textutil holds the small text helpers the core uses for log
// lines, audit reasons and messages — folding text onto one line and
// clipping it to a size — and the escaping that the command line and the
// menu-bar app share to show text that came from the agent safely.
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
