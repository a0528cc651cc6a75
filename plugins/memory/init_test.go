package memory

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coremanifest "github.com/carapace-dev/carapace/core/manifest"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
)

// initErr runs Init on a new handler over dir and returns its error; a
// handler whose Init succeeded is shut down at the end of the test.
func initHandler(t *testing.T, dir string, cfg map[string]any) (*Handler, error) {
	t.Helper()
	h := New(dir, nil)
	err := h.Init(t.Context(), cfg, &plugintest.Services{})
	if err == nil {
		t.Cleanup(func() {
			if err := h.Shutdown(context.Background()); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		})
	}
	return h, err
}

func TestInitDefaults(t *testing.T) {
	dir := t.TempDir()
	h, err := initHandler(t, dir, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	want := config{MaxBriefEntries: 50, MaxBriefChars: 10000, PurgeDays: 90, MaxStores: 20, MaxSupersedes: 5, MaxDeletes: 5}
	if h.cfg != want {
		t.Errorf("config %+v; want %+v", h.cfg, want)
	}
	if h.dir != dir {
		t.Errorf("dir %q; want %q", h.dir, dir)
	}
	// The defaults are those manifest.json declares.
	var m struct {
		ConfigSchema struct {
			Properties map[string]struct {
				Default any `json:"default"`
			} `json:"properties"`
		} `json:"config_schema"`
	}
	if err := json.Unmarshal(Manifest(), &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]any{
		"max_brief_entries": 50.0, "max_brief_chars": 10000.0, "purge_superseded_days": 90.0, "embedding_provider": "none",
		"max_stores_per_session": 20.0, "max_supersedes_per_session": 5.0, "max_deletes_per_session": 5.0,
	} {
		if got := m.ConfigSchema.Properties[k].Default; got != v {
			t.Errorf("manifest default of %s is %v; the handler's is %v", k, got, v)
		}
	}
}

func TestInitConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		cfg     map[string]any
		wantCat string // "" for success
		mention string
	}{
		{"relative storage_path", map[string]any{"storage_path": "relative/secret-folder"}, plugin.CategoryConfig, "absolute"},
		{"dot storage_path", map[string]any{"storage_path": "./memory"}, plugin.CategoryConfig, "absolute"},
		{"storage_path a file", map[string]any{"storage_path": file}, plugin.CategoryConfig, ""},
		{"storage_path not a string", map[string]any{"storage_path": json.Number("1")}, plugin.CategoryConfig, "storage_path"},
		{"openai", map[string]any{"embedding_provider": "openai"}, plugin.CategoryConfig, "not available yet"},
		{"local", map[string]any{"embedding_provider": "local"}, plugin.CategoryConfig, "not available yet"},
		{"unknown provider", map[string]any{"embedding_provider": "cohere"}, plugin.CategoryConfig, "embedding_provider"},
		{"none", map[string]any{"embedding_provider": "none"}, "", ""},
		{"entries 0", map[string]any{"max_brief_entries": json.Number("0")}, plugin.CategoryConfig, "max_brief_entries"},
		{"entries 501", map[string]any{"max_brief_entries": json.Number("501")}, plugin.CategoryConfig, "max_brief_entries"},
		{"chars 199", map[string]any{"max_brief_chars": json.Number("199")}, plugin.CategoryConfig, "max_brief_chars"},
		{"chars 60001", map[string]any{"max_brief_chars": json.Number("60001")}, plugin.CategoryConfig, "max_brief_chars"},
		{"purge 0", map[string]any{"purge_superseded_days": json.Number("0")}, plugin.CategoryConfig, "purge_superseded_days"},
		{"fraction", map[string]any{"max_brief_entries": json.Number("1.5")}, plugin.CategoryConfig, "whole number"},
		{"string number", map[string]any{"max_brief_entries": "50"}, plugin.CategoryConfig, "whole number"},
		{"huge", map[string]any{"max_stores_per_session": json.Number("1e300")}, plugin.CategoryConfig, ""},
		{"negative limit", map[string]any{"max_deletes_per_session": json.Number("-1")}, plugin.CategoryConfig, "max_deletes_per_session"},
		{"unknown setting", map[string]any{"max_brief_entires": json.Number("5")}, plugin.CategoryConfig, "unknown setting"},
		{"go numbers", map[string]any{"max_brief_entries": 7, "max_brief_chars": 700.0, "purge_superseded_days": int64(3)}, "", ""},
		{"whole float json", map[string]any{"max_brief_entries": json.Number("7.0")}, "", ""},
		{"zero limits", map[string]any{"max_stores_per_session": json.Number("0"), "max_supersedes_per_session": json.Number("0"), "max_deletes_per_session": json.Number("0")}, "", ""},
		{"large purge", map[string]any{"purge_superseded_days": json.Number("2000000000")}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := initHandler(t, t.TempDir(), tc.cfg)
			switch {
			case tc.wantCat == "" && err != nil:
				t.Fatalf("Init: %v", err)
			case tc.wantCat == "":
				return
			case err == nil:
				t.Fatalf("Init succeeded; want %s", tc.wantCat)
			}
			if got := plugin.CategoryOf(err); got != tc.wantCat {
				t.Errorf("category %s; want %s (%v)", got, tc.wantCat, err)
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error %q does not mention %q", err, tc.mention)
			}
			if strings.Contains(err.Error(), "secret-folder") {
				t.Errorf("the error quotes the setting's value: %v", err)
			}
		})
	}
}

// TestEmbeddingProviderOnlyNone checks that the manifest's config_schema
// and Init agree on embedding_provider: "none" is the one value, so the
// core refuses any other when it validates config.toml, before the plugin
// starts, and Init refuses it too.
func TestEmbeddingProviderOnlyNone(t *testing.T) {
	m, err := coremanifest.Parse("memory/manifest.json", Manifest(), coremanifest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []any{"none", "local", "openai", "cohere", json.Number("1")} {
		cfg := map[string]any{"embedding_provider": v}
		schemaErr := m.ValidateConfig("config.toml", cfg)
		_, initErr := initHandler(t, t.TempDir(), cfg)
		if want := v == "none"; (schemaErr == nil) != want || (initErr == nil) != want {
			t.Errorf("embedding_provider %v: config_schema says %v, Init %v; want both to accept only \"none\"", v, schemaErr, initErr)
		}
	}
}

func TestInitStoragePath(t *testing.T) {
	data := t.TempDir()
	custom := filepath.Join(t.TempDir(), "nested", "memories")
	f := newFixtureIn(t, data, map[string]any{"storage_path": custom + "/"})
	fi, err := os.Stat(custom)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("storage folder mode %v; want 0700", fi.Mode().Perm())
	}
	f.store(t, "fact", "stored in the custom folder", plugintest.WithGroup("main"))
	if _, err := os.Stat(filepath.Join(custom, "main.sqlite")); err != nil {
		t.Errorf("no database in storage_path: %v", err)
	}
	if ents, _ := os.ReadDir(data); len(ents) != 0 {
		t.Errorf("the data folder was used: %v", ents)
	}
}

func TestInitPurge(t *testing.T) {
	dir := t.TempDir()
	now := time.Now().UTC()
	var oldSup, oldCur, recentSup, recentCur, plainOld string
	seedGroup(t, dir, "main", func(db *DB) {
		a := seedPut(t, db, NewEntry{Type: "preference", Content: "Prefers tabs", Session: "s1", Group: "main", Time: now.AddDate(0, 0, -200)})
		b := seedPut(t, db, NewEntry{Type: "preference", Content: "Prefers spaces", Supersedes: a.ID, Session: "s2", Group: "main", Time: now.AddDate(0, 0, -100)})
		c := seedPut(t, db, NewEntry{Type: "fact", Content: "Lives in Porto", Session: "s3", Group: "main", Time: now.AddDate(0, 0, -50)})
		d := seedPut(t, db, NewEntry{Type: "fact", Content: "Lives in Lisbon", Supersedes: c.ID, Session: "s4", Group: "main", Time: now.Add(-time.Hour)})
		e := seedPut(t, db, NewEntry{Type: "fact", Content: "Has a dog", Session: "s5", Group: "main", Time: now.AddDate(-3, 0, 0)})
		oldSup, oldCur, recentSup, recentCur, plainOld = a.ID, b.ID, c.ID, d.ID, e.ID
	})
	seedGroup(t, dir, "other", func(db *DB) {
		seedPut(t, db, NewEntry{Type: "fact", Content: "x", Session: "s", Group: "other", Time: now.AddDate(0, 0, -10)})
	})

	f := newFixtureIn(t, dir, map[string]any{"purge_superseded_days": 1})
	db, err := f.h.db(t.Context(), "main", false)
	if err != nil || db == nil {
		t.Fatalf("db: %v", err)
	}
	if _, err := db.Get(t.Context(), oldSup); !errors.Is(err, ErrNotFound) {
		t.Errorf("the entry superseded 100 days ago is still there: %v", err)
	}
	for _, id := range []string{oldCur, recentSup, recentCur, plainOld} {
		if _, err := db.Get(t.Context(), id); err != nil {
			t.Errorf("entry %s was purged: %v", id, err)
		}
	}
	log := f.log.String()
	for _, want := range []string{
		`msg="purged superseded memories" group=main count=1`,
		`msg="purged superseded memories" group=other count=0`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s:\n%s", want, log)
		}
	}
	if strings.Contains(log, "Prefers") || strings.Contains(log, "Lives") {
		t.Errorf("the log holds memory content:\n%s", log)
	}
	// Both groups were opened at Init.
	f.h.mu.Lock()
	n := len(f.h.dbs)
	f.h.mu.Unlock()
	if n != 2 {
		t.Errorf("%d databases open after Init; want 2", n)
	}
}

func TestInitDefaultPurgeKeepsRecent(t *testing.T) {
	dir := t.TempDir()
	now := time.Now().UTC()
	var a string
	seedGroup(t, dir, "main", func(db *DB) {
		e := seedPut(t, db, NewEntry{Type: "fact", Content: "old", Session: "s", Group: "main", Time: now.AddDate(0, 0, -200)})
		seedPut(t, db, NewEntry{Type: "fact", Content: "new", Supersedes: e.ID, Session: "s", Group: "main", Time: now.AddDate(0, 0, -30)})
		a = e.ID
	})
	f := newFixtureIn(t, dir, nil)
	res := f.search(t, map[string]any{"include_superseded": true}, plugintest.WithGroup("main"))
	if len(res) != 2 || !strings.Contains(strings.Join(resultIDs(res), " "), a) {
		t.Errorf("an entry superseded 30 days ago was purged with the default of 90 days: %v", resultIDs(res))
	}
}

// setUserVersion writes v into the user_version field of a closed SQLite
// database's header (offset 60, big-endian).
func patchUserVersion(t *testing.T, path string, v uint32) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	if _, err := f.WriteAt(b[:], 60); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestInitRefusesNewerSchema(t *testing.T) {
	dir := t.TempDir()
	seedGroup(t, dir, "main", func(db *DB) {
		seedPut(t, db, NewEntry{Type: "fact", Content: "x", Session: "s", Group: "main", Time: time.Now()})
	})
	seedGroup(t, dir, "fine", func(*DB) {})
	patchUserVersion(t, filepath.Join(dir, "main.sqlite"), 99)
	h, err := initHandler(t, dir, map[string]any{})
	if err == nil {
		t.Fatal("Init succeeded over a database of schema version 99")
	}
	if got := plugin.CategoryOf(err); got != plugin.CategoryConfig {
		t.Errorf("category %s; want CONFIG_ERROR (%v)", got, err)
	}
	if !errors.Is(err, ErrNewerSchema) || !strings.Contains(err.Error(), "main.sqlite") {
		t.Errorf("error %q does not name the file or wrap ErrNewerSchema", err)
	}
	h.mu.Lock()
	n := len(h.dbs)
	h.mu.Unlock()
	if n != 0 {
		t.Errorf("%d databases left open after a failed Init", n)
	}
}

func TestInitIgnoresOtherFiles(t *testing.T) {
	dir := t.TempDir()
	garbage := []byte("this is not a SQLite database, and opening it would fail")
	for _, name := range []string{"bad.name.sqlite", ".sqlite", "spaced name.sqlite", "main.sqlite-wal", "main.sqlite-journal", "notes.txt",
		strings.Repeat("g", 65) + ".sqlite"} {
		if err := os.WriteFile(filepath.Join(dir, name), garbage, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "folder.sqlite"), 0o700); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "elsewhere.sqlite")
	if err := os.WriteFile(outside, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "linked.sqlite")); err != nil {
		t.Fatal(err)
	}
	seedGroup(t, dir, "good", func(db *DB) {
		seedPut(t, db, NewEntry{Type: "fact", Content: "kept", Session: "s", Group: "good", Time: time.Now()})
	})
	f := newFixtureIn(t, dir, nil)
	f.h.mu.Lock()
	var open []string
	for g := range f.h.dbs {
		open = append(open, g)
	}
	f.h.mu.Unlock()
	if len(open) != 1 || open[0] != "good" {
		t.Errorf("open databases %v; want [good]", open)
	}
	if got := f.search(t, nil, plugintest.WithGroup("good")); len(got) != 1 {
		t.Errorf("group good: %v", got)
	}
	// A symlinked database is not followed out of the storage folder.
	plugintest.AssertError(t, f.hs.Invoke("memory_search", nil, plugintest.WithGroup("linked")), "PLUGIN_ERROR")
	if b, _ := os.ReadFile(outside); string(b) != string(garbage) {
		t.Errorf("the file behind the symlink changed")
	}
}

func TestHandlerReadsCreateNoFile(t *testing.T) {
	f := newFixture(t, nil)
	g := plugintest.WithGroup("ghost")
	plugintest.AssertSuccess(t, f.hs.Invoke("memory_search", map[string]any{"query": "anything"}, g))
	plugintest.AssertSuccess(t, f.hs.Invoke("memory_search", nil, g))
	plugintest.AssertSuccess(t, f.hs.Invoke("memory_brief", map[string]any{"include_provenance": true}, g))
	plugintest.AssertError(t, f.hs.Invoke("memory_delete", map[string]any{"id": "mem-x"}, g), "HANDLER_ERROR")
	if _, err := f.h.MemoryBrief(t.Context(), "ghost"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(f.dir, "ghost.sqlite")
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a read created %s: %v", path, err)
	}
	f.store(t, "fact", "now it exists", g)
	if _, err := os.Stat(path); err != nil {
		t.Errorf("a store did not create the database: %v", err)
	}
}

func TestHandlerNilLogger(t *testing.T) {
	h := New(t.TempDir(), nil)
	hs := plugintest.New(t, h)
	plugintest.AssertSuccess(t, hs.Invoke("memory_store", map[string]any{"type": "fact", "content": "x"}))
}
