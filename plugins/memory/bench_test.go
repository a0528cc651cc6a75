package memory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/carapace-dev/carapace/core/claudemd"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
	"github.com/carapace-dev/carapace/plugins/memory"
	"github.com/carapace-dev/carapace/plugins/memory/memorytest"
)

// The benchmarks run on one group of benchEntries entries seeded by
// memorytest, the corpus `make bench` (cmd/benchreport) measures too.
const (
	benchEntries = 10000
	benchGroup   = "bench"
)

var (
	benchOnce sync.Once
	benchFile string // the seeded database, copied by each benchmark
	benchErr  error
)

// TestMain removes the benchmarks' seeded database after the run.
func TestMain(m *testing.M) {
	code := m.Run()
	if benchFile != "" {
		_ = os.RemoveAll(filepath.Dir(benchFile))
	}
	os.Exit(code)
}

// benchSeed builds the seeded database once per run of the test binary.
func benchSeed() (string, error) {
	benchOnce.Do(func() {
		dir, err := os.MkdirTemp("", "memory-bench-")
		if err != nil {
			benchErr = err
			return
		}
		benchFile = filepath.Join(dir, benchGroup+".sqlite")
		ctx := context.Background()
		db, err := memory.Open(ctx, benchFile, benchGroup)
		if err != nil {
			benchErr = err
			return
		}
		benchErr = memorytest.Seed(ctx, db, benchGroup, benchEntries, 1)
		if err := db.Close(); benchErr == nil {
			benchErr = err
		}
	})
	return benchFile, benchErr
}

// benchHandler returns an initialised handler over a copy of the seeded
// database, with cfg (numbers as JSON gives them).
func benchHandler(b *testing.B, cfg map[string]any) *memory.Handler {
	b.Helper()
	src, err := benchSeed()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	copyFile(b, src, filepath.Join(dir, benchGroup+".sqlite"))
	h := memory.New(dir, nil)
	if cfg == nil {
		cfg = map[string]any{}
	}
	if err := h.Init(context.Background(), cfg, &plugintest.Services{}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = h.Shutdown(context.Background()) })
	return h
}

func copyFile(b *testing.B, src, dst string) {
	b.Helper()
	in, err := os.Open(src)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkMemorySearch times memory_search with a two- or three-word query
// from the corpus's vocabulary, calling the handler directly.
func BenchmarkMemorySearch(b *testing.B) {
	h := benchHandler(b, nil)
	r := rand.New(rand.NewPCG(5, 6))
	reqs := make([]*plugin.Request, 256)
	for i := range reqs {
		args := map[string]any{"query": memorytest.Query(r, 2+i%2)}
		if i%8 == 0 {
			args["tags"] = []any{memorytest.Tags[r.IntN(len(memorytest.Tags))]}
		}
		reqs[i] = plugintest.NewRequest("memory_search", args, plugintest.WithGroup(benchGroup))
	}
	ctx := context.Background()
	hits, i := 0, 0
	for b.Loop() {
		res, err := h.Invoke(ctx, reqs[i%len(reqs)])
		if err != nil {
			b.Fatal(err)
		}
		hits += res["count"].(int)
		i++
	}
	if hits == 0 {
		b.Fatal("no query found anything")
	}
}

// BenchmarkMemoryBrief times the session-start brief, generated and
// rendered as the core puts it in CLAUDE.md.
func BenchmarkMemoryBrief(b *testing.B) {
	h := benchHandler(b, nil)
	ctx := context.Background()
	for b.Loop() {
		br, err := h.MemoryBrief(ctx, benchGroup)
		if err != nil {
			b.Fatal(err)
		}
		if md := claudemd.Brief(br); br.BriefCount == 0 || md == "" {
			b.Fatal("empty brief")
		}
	}
}

// BenchmarkMemoryStore times memory_store of a new entry into the seeded
// group, with the per-session limit out of the way.
func BenchmarkMemoryStore(b *testing.B) {
	h := benchHandler(b, map[string]any{"max_stores_per_session": json.Number("100000000")})
	r := rand.New(rand.NewPCG(7, 8))
	reqs := make([]*plugin.Request, 512)
	for i := range reqs {
		reqs[i] = plugintest.NewRequest("memory_store", map[string]any{
			"type":    memory.Types[i%len(memory.Types)],
			"content": fmt.Sprintf("%s %d", memorytest.Query(r, 12), i),
			"tags":    []any{memorytest.Tags[r.IntN(len(memorytest.Tags))]},
		}, plugintest.WithGroup(benchGroup))
	}
	ctx := context.Background()
	i := 0
	for b.Loop() {
		if _, err := h.Invoke(ctx, reqs[i%len(reqs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
