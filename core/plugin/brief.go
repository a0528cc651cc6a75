package plugin

import (
	"strings"
	"time"
	"unicode"
)

// Brief is the memory brief: what a memory plugin wants the agent to know
// before its first tool call. The plugin returns entries, not text; the core
// renders them (core/claudemd.Brief) into the agent's CLAUDE.md, so that no
// entry, and no plugin, can change the structure of the file around them.
type Brief struct {
	Entries     []BriefEntry `json:"entries"`
	EntryCount  int          `json:"entry_count"` // current entries stored for the group
	BriefCount  int          `json:"brief_count"` // len(Entries): the entries included
	GeneratedAt time.Time    `json:"generated_at"`
}

// BriefEntry is one memory in the brief.
type BriefEntry struct {
	ID         string   `json:"id"`
	Type       string   `json:"type"`       // preference, fact, instruction, context, correction
	Content    string   `json:"content"`    // rendered on one line whatever it holds
	Behavioral bool     `json:"behavioral"` // shown under the warning block
	Tags       []string `json:"tags,omitempty"`
	AgeDays    int      `json:"age_days"` // days since the entry was written
}

// OneLine returns s on a single line: every line break, control character
// and invisible formatting character (zero-width, bidirectional overrides)
// becomes a space, invalid UTF-8 is replaced, runs of spaces collapse and
// the ends are trimmed.
func OneLine(s string) string {
	var w strings.Builder
	w.Grow(len(s))
	space := false
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if unicode.IsSpace(r) || unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
			space = w.Len() > 0
			continue
		}
		if space {
			w.WriteByte(' ')
			space = false
		}
		w.WriteRune(r)
	}
	return w.String()
}
