// Package memory is the built-in memory plugin (seed 000 §Memory
// Architecture): typed memory entries the agent stores, searches and deletes
// through four low-risk tools, and the memory brief the core puts in the
// agent's CLAUDE.md before its first tool call.
//
// Each group's memories live in their own SQLite database,
// <storage folder>/<group>.sqlite (store.go), so one group can never read or
// change another's. Provenance — session, group, time — comes from the
// request the core built, never from the agent's arguments. Memory content
// is untrusted: a prior session may have been prompt-injected. The plugin
// defends at read time (behavioural entries are flagged and the brief is
// rendered by the core, one line per entry) and bounds what one session can
// do with per-session limits on stores, supersedes and deletes (limits.go).
package memory

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// Name is the plugin's name.
const Name = "memory"

//go:embed manifest.json
var manifest []byte

//go:embed skills
var skills embed.FS

// Manifest returns the plugin's manifest.json.
func Manifest() []byte { return manifest }

// Skills returns the plugin's skills directory.
func Skills() fs.FS {
	sub, _ := fs.Sub(skills, "skills")
	return sub
}

// dbSuffix ends the name of every group's database file.
const dbSuffix = ".sqlite"

// Handler is the memory plugin's handler. Create it with New.
type Handler struct {
	dataDir string
	log     *slog.Logger
	now     func() time.Time // the clock for the brief and the limiter; tests replace it

	// Set by Init, read-only afterwards.
	cfg    config
	dir    string // the storage folder: absolute and clean
	limits *limiter

	mu     sync.Mutex
	dbs    map[string]*DB // by group; opened at Init or on first use
	closed bool
}

var (
	_ plugin.Handler       = (*Handler)(nil)
	_ plugin.BriefProvider = (*Handler)(nil)
)

// New returns the handler. dataDir is the plugin's private folder
// ($CARAPACE_HOME/data/memory), where the databases live unless the config
// names another storage_path; logger may be nil.
func New(dataDir string, logger *slog.Logger) *Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{dataDir: dataDir, log: logger, now: time.Now, dbs: map[string]*DB{}}
}

// errClosed is returned by calls after Shutdown.
var errClosed = errors.New("memory plugin is shut down")

// Init implements plugin.Handler: it reads the config, creates the storage
// folder (0700), opens every group's database there — refusing one written
// by a newer version — and purges entries superseded more than
// purge_superseded_days ago.
func (h *Handler) Init(ctx context.Context, raw map[string]any, _ plugin.Services) error {
	if !cgoEnabled {
		// Fail here rather than at the first store of a fresh install.
		return plugin.NewInitError(plugin.CategoryInternal, errors.New("memory: the memory plugin needs a binary built with cgo (CGO_ENABLED=1) and -tags sqlite_fts5, for SQLite; build with make"))
	}
	cfg, err := parseConfig(raw)
	if err != nil {
		return plugin.NewInitError(plugin.CategoryConfig, fmt.Errorf("memory config: %w", err))
	}
	dir := cfg.StoragePath
	if dir == "" {
		dir = h.dataDir
	}
	if dir == "" || !filepath.IsAbs(dir) {
		return plugin.NewInitError(plugin.CategoryConfig, errors.New("memory: the storage folder must be an absolute path"))
	}
	dir = filepath.Clean(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return plugin.NewInitError(plugin.CategoryConfig, fmt.Errorf("memory: create the storage folder %s: %w", dir, err))
	}
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return plugin.NewInitError(plugin.CategoryConfig, fmt.Errorf("memory: storage folder: %w", err))
	case !fi.IsDir():
		return plugin.NewInitError(plugin.CategoryConfig, fmt.Errorf("memory: the storage path %s is not a folder", dir))
	case fi.Mode().Perm()&0o077 != 0:
		h.log.Warn("the memory storage folder is open to other users; memories are private: chmod 700 it", "path", dir)
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	h.cfg, h.dir = cfg, dir
	if err := h.openAll(ctx); err != nil {
		_ = h.closeAll() // the open error says more
		return err
	}
	h.limits = newLimiter(cfg, h.now) // last: Invoke refuses until Init has succeeded
	return nil
}

// openAll opens the database of every group in the storage folder and
// purges it. Called by Init with h.mu held.
func (h *Handler) openAll(ctx context.Context) error {
	ents, err := os.ReadDir(h.dir)
	if err != nil {
		return plugin.NewInitError(plugin.CategoryConfig, fmt.Errorf("memory: read the storage folder: %w", err))
	}
	cutoff := h.now().AddDate(0, 0, -h.cfg.PurgeDays)
	for _, e := range ents {
		group, ok := strings.CutSuffix(e.Name(), dbSuffix)
		if !ok || home.CheckGroup(group) != nil {
			continue // -wal, -shm, and files that are no group's
		}
		if !e.Type().IsRegular() {
			h.log.Warn("ignoring a memory database that is not a regular file", "file", e.Name())
			continue
		}
		path := filepath.Join(h.dir, e.Name())
		db, err := Open(ctx, path, group)
		switch {
		case errors.Is(err, ErrNewerSchema):
			return plugin.NewInitError(plugin.CategoryConfig,
				fmt.Errorf("memory: %s was written by a newer version of Carapace; upgrade Carapace, or move the file away: %w", path, err))
		case err != nil:
			return plugin.NewInitError(plugin.CategoryInternal, fmt.Errorf("memory: open %s: %w", path, err))
		}
		h.dbs[group] = db
		n, err := db.PurgeSuperseded(ctx, cutoff)
		if err != nil {
			return plugin.NewInitError(plugin.CategoryInternal, fmt.Errorf("memory: purge superseded entries of group %s: %w", group, err))
		}
		h.log.Info("purged superseded memories", "group", group, "count", n)
	}
	return nil
}

// Shutdown implements plugin.Handler: it closes every database.
func (h *Handler) Shutdown(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	return h.closeAll()
}

// closeAll closes and forgets every open database. Called with h.mu held.
func (h *Handler) closeAll() error {
	var errs []error
	for g, db := range h.dbs {
		if err := db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close the memory database of group %s: %w", g, err))
		}
		delete(h.dbs, g)
	}
	return errors.Join(errs...)
}

// db returns group's database. With create false, a group that has no
// database file yet gets (nil, nil) and no file is created: reads of an
// empty group find nothing. The group is checked before it becomes a path.
func (h *Handler) db(ctx context.Context, group string, create bool) (*DB, error) {
	if err := home.CheckGroup(group); err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, errClosed
	}
	if h.dir == "" {
		return nil, errors.New("memory: Init was not called")
	}
	if db := h.dbs[group]; db != nil {
		return db, nil
	}
	path := filepath.Join(h.dir, group+dbSuffix)
	if filepath.Dir(path) != h.dir {
		return nil, fmt.Errorf("memory: the database of group %q would be outside the storage folder", group)
	}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if !create {
			return nil, nil
		}
	case err != nil:
		return nil, fmt.Errorf("memory: %w", err)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("memory: %s is not a regular file", path)
	}
	db, err := Open(ctx, path, group)
	if err != nil {
		return nil, fmt.Errorf("memory: open the database of group %s: %w", group, err)
	}
	h.dbs[group] = db
	return db, nil
}

// Invoke implements plugin.Handler.
func (h *Handler) Invoke(ctx context.Context, req *plugin.Request) (map[string]any, error) {
	if req == nil {
		return nil, errors.New("memory: nil request")
	}
	if h.limits == nil {
		return nil, errors.New("memory: Invoke before Init")
	}
	switch req.Tool {
	case "memory_store":
		return h.store(ctx, req)
	case "memory_search":
		return h.search(ctx, req)
	case "memory_brief":
		return h.briefTool(ctx, req)
	case "memory_delete":
		return h.delete(ctx, req)
	}
	return nil, plugin.NewToolError(fmt.Sprintf("The memory plugin does not provide a tool named %q; its tools are memory_store, memory_search, memory_brief and memory_delete.", textutil.ClipRunes(req.Tool, 80)), false)
}

// reqTime is when the core received req: the provenance time. A request
// without one (never from the core) gets the handler's clock.
func (h *Handler) reqTime(req *plugin.Request) time.Time {
	if req.Time.IsZero() {
		return h.now().UTC()
	}
	return req.Time.UTC()
}
