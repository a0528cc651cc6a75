package memory

import (
	"context"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/carapace-dev/carapace/core/plugin"
)

// MemoryBrief implements plugin.BriefProvider: the brief the core renders
// into the agent's CLAUDE.md when a session of group starts.
func (h *Handler) MemoryBrief(ctx context.Context, group string) (*plugin.Brief, error) {
	b, _, err := h.brief(ctx, group, h.now())
	return b, err
}

// brief builds group's brief at now, for the hook and for memory_brief
// alike: current entries only, behavioural ones first, then by recency (the
// store's order), cut at max_brief_entries or max_brief_chars of content,
// whichever comes first. Content is put on one line with plugin.OneLine, as
// the core renders it. It also returns the entries behind the brief's, for
// their provenance. A group without a database gets an empty brief and no
// file.
func (h *Handler) brief(ctx context.Context, group string, now time.Time) (*plugin.Brief, []Entry, error) {
	now = now.UTC()
	b := &plugin.Brief{Entries: []plugin.BriefEntry{}, GeneratedAt: now}
	db, err := h.db(ctx, group, false)
	if err != nil || db == nil {
		return b, nil, err
	}
	es, err := db.BriefEntries(ctx, h.cfg.MaxBriefEntries)
	if err != nil {
		return nil, nil, h.storeError(err, "", "")
	}
	total, err := db.CountCurrent(ctx)
	if err != nil {
		return nil, nil, h.storeError(err, "", "")
	}
	// Behavioural entries first whatever the store's order; stable, so the
	// store's recency order holds within each kind.
	slices.SortStableFunc(es, func(a, b Entry) int {
		ab, bb := isBehavioral(a), isBehavioral(b)
		switch {
		case ab == bb:
			return 0
		case ab:
			return -1
		}
		return 1
	})
	kept := make([]Entry, 0, len(es))
	chars := 0
	for _, e := range es {
		if len(kept) >= h.cfg.MaxBriefEntries {
			break
		}
		content := plugin.OneLine(e.Content)
		n := utf8.RuneCountInString(content)
		if chars+n > h.cfg.MaxBriefChars {
			break
		}
		chars += n
		b.Entries = append(b.Entries, plugin.BriefEntry{
			ID:         e.ID,
			Type:       e.Type,
			Content:    content,
			Behavioral: isBehavioral(e),
			Tags:       slices.Clone(e.Tags),
			AgeDays:    ageDays(e.Created, now),
		})
		kept = append(kept, e)
	}
	b.EntryCount = max(total, len(b.Entries))
	b.BriefCount = len(b.Entries)
	return b, kept, nil
}

// isBehavioral reports whether e is shown as behaviour: flagged so, or of a
// behavioural type (the cautious side if the two ever disagree).
func isBehavioral(e Entry) bool { return e.Behavioral || Behavioral(e.Type) }

// ageDays is the number of whole days from created to now, never negative.
func ageDays(created, now time.Time) int {
	d := now.Sub(created)
	if d <= 0 {
		return 0
	}
	return int(d / (24 * time.Hour))
}
