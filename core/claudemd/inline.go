package claudemd

import (
	"strings"
	"unicode/utf8"

	"github.com/carapace-dev/carapace/core/plugin"
)

// Inline renders s, text the core did not write (a memory, and later
// anything a plugin or a channel contributes), for one line of a file
// Claude Code reads as instructions. It is the only way such text enters
// those files.
//
// The text is put on one line (plugin.OneLine: line breaks, control and
// invisible characters become spaces), cut at limit runes with "…" when
// limit > 0, and wrapped in a Markdown code span. Claude Code documents
// that imports ("@path") are not evaluated inside code spans, and in
// CommonMark nothing inside one is a link, an HTML tag, an autolink or
// emphasis either. The span's fence is one backtick longer than the
// longest run of backticks in the text, so no backtick in the text can
// close it; a space pads the text when it begins or ends with a backtick,
// which CommonMark (and marked, the parser Claude Code uses) strips again.
//
// Empty text (after OneLine) is rendered as "(empty)", outside any span.
func Inline(s string, limit int) string {
	s = plugin.OneLine(s)
	if limit > 0 && utf8.RuneCountInString(s) > limit {
		s = string([]rune(s)[:limit]) + "…"
	}
	if s == "" {
		return "(empty)"
	}
	run, longest := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	pad := ""
	if s[0] == '`' || s[len(s)-1] == '`' {
		pad = " "
	}
	return fence + pad + s + pad + fence
}
