// Package memorytest fills a memory database with realistic entries, for the
// memory plugin's benchmarks and for `make bench`, so that both measure the
// same corpus.
package memorytest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/carapace-dev/carapace/plugins/memory"
)

// words is the corpus's vocabulary: common words of a personal assistant's
// memories, so that queries hit a realistic share of entries.
var words = strings.Fields(`user prefers concise answers morning meetings calendar email reply
draft project carapace typescript python golang review weekly report family dog luna cat
birthday anniversary restaurant vegetarian coffee tea travel flight hotel paris berlin
tokyo budget invoice tax dentist doctor appointment gym running music jazz piano book
novel podcast newsletter slack github issue deploy release friday monday deadline
manager team colleague sister brother mother father school homework garden plants
recipe pasta sushi allergy peanuts car insurance bank password never share always
check before sending summary short long formal casual language english french german`)

// Tags is the tag vocabulary.
var Tags = []string{"work", "family", "health", "travel", "food", "coding", "finance", "home", "music", "style"}

// Query returns a search query of k words from the corpus's vocabulary.
func Query(r *rand.Rand, k int) string {
	q := make([]string, k)
	for i := range q {
		q[i] = words[r.IntN(len(words))]
	}
	return strings.Join(q, " ")
}

// Seed stores n entries in db: 8–24 words each, 0–3 tags, every type, one
// week to one year old, and about one in ten superseded by a later one.
// The same seed gives the same corpus (ids aside).
func Seed(ctx context.Context, db *memory.DB, group string, n int, seed uint64) error {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	start := time.Now().Add(-365 * 24 * time.Hour)
	step := 358 * 24 * time.Hour / time.Duration(max(n, 1))
	var ids []string
	for i := range n {
		var b strings.Builder
		for j := range 8 + r.IntN(17) {
			if j > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[r.IntN(len(words))])
		}
		e := memory.NewEntry{
			Type: memory.Types[r.IntN(len(memory.Types))], Content: b.String(),
			Session: fmt.Sprintf("sess-%d", i/20), Group: group, Time: start.Add(time.Duration(i) * step),
		}
		for range r.IntN(4) {
			e.Tags = append(e.Tags, Tags[r.IntN(len(Tags))])
		}
		if len(ids) > 0 && r.IntN(10) == 0 {
			k := r.IntN(len(ids))
			e.Supersedes = ids[k]
			ids = append(ids[:k], ids[k+1:]...)
		}
		got, err := db.Put(ctx, e)
		if err != nil {
			return fmt.Errorf("seed entry %d: %w", i, err)
		}
		ids = append(ids, got.ID)
	}
	return nil
}
