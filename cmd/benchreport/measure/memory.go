package measure

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/carapace-dev/carapace/core/claudemd"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/plugins/memory"
	"github.com/carapace-dev/carapace/plugins/memory/memorytest"
)

// MemoryEntries is the size of the group the memory figures are taken on
// (issue 4's targets are set for it).
const MemoryEntries = 10_000

// Memory is what MeasureMemory found: the memory plugin's handler, called
// directly (the pipeline's cost is (b)), on a seeded group.
type Memory struct {
	Search Latency // memory_search, a two-word query
	Brief  Latency // the session-start brief, rendered as in CLAUDE.md
	Store  Latency // memory_store of a new fact
}

// MeasureMemory seeds a group with entries entries in a temporary folder,
// then, reps times, times n calls of each operation.
func MeasureMemory(entries, n, reps int) ([]Memory, error) {
	dir, err := os.MkdirTemp("", "cpmem")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	const group = "bench"
	db, err := memory.Open(ctx, filepath.Join(dir, group+".sqlite"), group)
	if err != nil {
		return nil, err
	}
	err = memorytest.Seed(ctx, db, group, entries, 1)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}

	h := memory.New(dir, slog.New(slog.DiscardHandler))
	if err := h.Init(ctx, map[string]any{"max_stores_per_session": json.Number("1000000000")}, nil); err != nil {
		return nil, fmt.Errorf("memory init: %w", err)
	}
	defer h.Shutdown(ctx)
	r := rand.New(rand.NewPCG(2, 3))
	req := func(tool string, args map[string]any) *plugin.Request {
		return &plugin.Request{Tool: tool, Arguments: args, Group: group, Session: "bench"}
	}
	i := 0
	out := make([]Memory, reps)
	for k := range out {
		m := &out[k]
		for _, op := range []struct {
			into *Latency
			run  func() error
		}{
			{&m.Search, func() error {
				_, err := h.Invoke(ctx, req("memory_search", map[string]any{"query": memorytest.Query(r, 2)}))
				return err
			}},
			{&m.Brief, func() error {
				b, err := h.MemoryBrief(ctx, group)
				if err == nil && len(claudemd.Brief(b)) == 0 {
					err = fmt.Errorf("empty brief")
				}
				return err
			}},
			{&m.Store, func() error {
				i++
				_, err := h.Invoke(ctx, req("memory_store", map[string]any{"type": "fact", "content": fmt.Sprintf("%s %d", memorytest.Query(r, 12), i)}))
				return err
			}},
		} {
			if *op.into, err = Sample(n, n/10+1, op.run); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
