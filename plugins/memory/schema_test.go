package memory

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSchemaVersionMatchesMigrations(t *testing.T) {
	if len(migrations) != SchemaVersion {
		t.Errorf("%d migrations, SchemaVersion %d", len(migrations), SchemaVersion)
	}
}

// rawDB opens path with plain go-sqlite3, no migration, for building test
// databases by hand.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	return db
}

func execAll(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// TestSchemaMigrateV1 builds a version 1 database with the seed's schema,
// as the v1 step creates it, and opens it: it must reach version 2, get
// superseded_at backfilled and created_at in the fixed-width form, and keep
// its search index.
func TestSchemaMigrateV1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "main.sqlite")
	raw := rawDB(t, path)
	execAll(t, raw, "PRAGMA journal_mode=WAL", schemaV1, "PRAGMA user_version=1")
	rows := []struct {
		id, typ, content, tags, supBy, created string
	}{
		{"mem-a", "preference", "likes green tea", `["drinks"]`, "mem-b", "2026-01-01T10:00:00.000000000Z"},
		{"mem-b", "preference", "likes black tea", `["drinks"]`, "mem-c", "2026-01-05T10:00:00.000000000Z"},
		{"mem-c", "preference", "likes oolong tea", `["drinks"]`, "", "2026-01-09T10:00:00.000000000Z"},
		// Written by JavaScript's toISOString, superseded by an entry since deleted.
		{"mem-js", "fact", "dog named luna", `["pets","family"]`, "mem-gone", "2025-12-24T08:15:30.250Z"},
		// A time with an offset, current.
		{"mem-tz", "context", "working on carapace", `[]`, "", "2026-01-02T12:00:00+02:00"},
		{"mem-other", "fact", "other group tea", `[]`, "mem-a", "2026-01-03T10:00:00.000000000Z"},
	}
	for _, r := range rows {
		var sup any
		if r.supBy != "" {
			sup = r.supBy
		}
		group := "main"
		if r.id == "mem-other" {
			group = "other"
		}
		if _, err := raw.Exec(`INSERT INTO memory_entries (id, type, content, tags, behavioral, superseded_by, session_id, group_name, created_at)
			VALUES (?, ?, ?, ?, ?, ?, 'sess-v1', ?, ?)`, r.id, r.typ, r.content, r.tags, Behavioral(r.typ), sup, group, r.created); err != nil {
			t.Fatal(err)
		}
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}

	db := openTestDBAt(t, path, "main")
	var v int
	if err := db.w.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != SchemaVersion {
		t.Fatalf("user_version = %d, %v; want %d", v, err, SchemaVersion)
	}
	wantCreated := map[string]string{
		"mem-a":  "2026-01-01T10:00:00.000000000Z",
		"mem-js": "2025-12-24T08:15:30.250000000Z",
		"mem-tz": "2026-01-02T10:00:00.000000000Z",
	}
	wantSupAt := map[string]string{
		"mem-a":     "2026-01-05T10:00:00.000000000Z", // B's created_at
		"mem-b":     "2026-01-09T10:00:00.000000000Z", // C's
		"mem-c":     "",
		"mem-js":    "2025-12-24T08:15:30.250000000Z", // own: the replacement is gone
		"mem-tz":    "",
		"mem-other": "2026-01-03T10:00:00.000000000Z", // mem-a is main's, not other's
	}
	for id, want := range wantSupAt {
		var supAt sql.NullString
		var created string
		if err := db.w.QueryRow(`SELECT superseded_at, created_at FROM memory_entries WHERE id = ?`, id).Scan(&supAt, &created); err != nil {
			t.Fatal(err)
		}
		if supAt.String != want {
			t.Errorf("%s: superseded_at = %q, want %q", id, supAt.String, want)
		}
		if w, ok := wantCreated[id]; ok && created != w {
			t.Errorf("%s: created_at = %q, want %q", id, created, w)
		}
	}

	got := ids(search(t, db, Query{Text: "tea"}))
	if !slices.Equal(got, []string{"mem-c"}) {
		t.Errorf("search tea = %v, want mem-c", got)
	}
	got = ids(search(t, db, Query{Text: "tea", IncludeSuperseded: true}))
	if !sameSet(got, []string{"mem-a", "mem-b", "mem-c"}) {
		t.Errorf("search tea with superseded = %v", got)
	}
	if got := ids(search(t, db, Query{Text: "luna", Tags: []string{"pets"}, IncludeSuperseded: true})); !slices.Equal(got, []string{"mem-js"}) {
		t.Errorf("search luna = %v", got)
	}
	if got := ids(search(t, db, Query{})); !slices.Equal(got, []string{"mem-c", "mem-tz"}) {
		t.Errorf("recent = %v, want mem-c, mem-tz", got)
	}
	e, err := db.Get(ctx, "mem-js")
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2025, 12, 24, 8, 15, 30, 250e6, time.UTC); !e.Created.Equal(want) {
		t.Errorf("Created = %v, want %v", e.Created, want)
	}
	// New writes and the purge work on the migrated data.
	d := put(t, db, NewEntry{Content: "likes matcha tea", Supersedes: "mem-c", Time: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)})
	if got := ids(search(t, db, Query{Text: "tea"})); !slices.Equal(got, []string{d.ID}) {
		t.Errorf("search tea after supersede = %v", got)
	}
	n, err := db.PurgeSuperseded(ctx, time.Date(2026, 1, 6, 0, 0, 0, 0, time.UTC))
	if err != nil || n != 2 { // mem-a (Jan 5) and mem-js (Dec 24)
		t.Errorf("purge = %d, %v; want 2", n, err)
	}
	checkIntegrity(t, db)
}

// TestSchemaFreshMatchesMigrated: a new database has the same schema as
// one migrated from version 1.
func TestSchemaFreshMatchesMigrated(t *testing.T) {
	dir := t.TempDir()
	fresh := openTestDBAt(t, filepath.Join(dir, "fresh.sqlite"), "main")
	path := filepath.Join(dir, "old.sqlite")
	raw := rawDB(t, path)
	execAll(t, raw, schemaV1, "PRAGMA user_version=1")
	raw.Close()
	migrated := openTestDBAt(t, path, "main")
	schema := func(db *DB) string {
		rows, err := db.r.Query(`SELECT type, name, coalesce(sql, '') FROM sqlite_schema ORDER BY type, name`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var b strings.Builder
		for rows.Next() {
			var typ, name, s string
			if err := rows.Scan(&typ, &name, &s); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s %s %s\n", typ, name, s)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	a, b := schema(fresh), schema(migrated)
	if a != b {
		t.Errorf("fresh schema:\n%s\nmigrated schema:\n%s", a, b)
	}
	for _, want := range []string{"superseded_at TEXT", "idx_memory_brief", "idx_memory_recent", "memory_fts_update", "idx_memory_created"} {
		if !strings.Contains(a, want) {
			t.Errorf("schema lacks %q", want)
		}
	}
}

// TestSchemaNewerRefused: a database of a newer schema is refused with
// ErrNewerSchema, and not one byte of it changes, whether it is in WAL or
// rollback-journal mode (switching it to WAL would change its header).
func TestSchemaNewerRefused(t *testing.T) {
	for _, mode := range []string{"WAL", "DELETE"} {
		t.Run(mode, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "main.sqlite")
			raw := rawDB(t, path)
			execAll(t, raw, "PRAGMA journal_mode="+mode, schemaV1, schemaV2,
				`INSERT INTO memory_entries (id, type, content, session_id, group_name, created_at)
				 VALUES ('mem-1', 'fact', 'from the future', 's', 'main', '2030-01-01T00:00:00.000000000Z')`,
				"PRAGMA user_version=99")
			if err := raw.Close(); err != nil {
				t.Fatal(err)
			}
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			db, err := Open(context.Background(), path, "main")
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, ErrNewerSchema) {
				t.Errorf("error %v does not wrap ErrNewerSchema", err)
			}
			for _, want := range []string{path, "99", fmt.Sprint(SchemaVersion), "upgrade Carapace", "do not edit"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before, after) {
				t.Error("the newer database was changed")
			}
		})
	}
}

// TestSchemaMigrationRollsBack: a step that fails leaves the database at
// its version, with nothing of the step applied.
func TestSchemaMigrationRollsBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "main.sqlite")
	raw := rawDB(t, path)
	// Version 1, but with an index named like version 2's: the step fails
	// at its last statement, after the others ran.
	execAll(t, raw, schemaV1, "CREATE INDEX idx_memory_brief ON memory_entries(type)",
		`INSERT INTO memory_entries (id, type, content, session_id, group_name, created_at, superseded_by)
		 VALUES ('mem-1', 'fact', 'x', 's', 'main', '2025-01-01T00:00:00Z', 'mem-2')`,
		"PRAGMA user_version=1")
	raw.Close()
	db, err := Open(context.Background(), path, "main")
	if err == nil {
		db.Close()
		t.Fatal("Open succeeded")
	}
	if !strings.Contains(err.Error(), "from schema version 1 to 2") {
		t.Errorf("error %q does not name the step", err)
	}
	raw = rawDB(t, path)
	defer raw.Close()
	var v int
	var created string
	if err := raw.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != 1 {
		t.Errorf("user_version = %d, %v; want 1", v, err)
	}
	if err := raw.QueryRow("SELECT created_at FROM memory_entries").Scan(&created); err != nil || created != "2025-01-01T00:00:00Z" {
		t.Errorf("created_at = %q, %v: part of the failed step stayed", created, err)
	}
	var cols int
	if err := raw.QueryRow("SELECT count(*) FROM pragma_table_info('memory_entries') WHERE name = 'superseded_at'").Scan(&cols); err != nil || cols != 0 {
		t.Errorf("superseded_at columns = %d, %v: part of the failed step stayed", cols, err)
	}
}

// TestSchemaIndexesUsed checks the query plans of the brief and of the
// recent-first search: no full sort of the table.
func TestSchemaIndexesUsed(t *testing.T) {
	db := openTestDB(t, "main")
	plans := []struct {
		name, query, want string
		args              []any
	}{
		{"brief", `SELECT ` + entryColumns + ` FROM memory_entries AS e
WHERE e.group_name = ? AND e.superseded_by IS NULL
ORDER BY e.behavioral DESC, e.created_at DESC, e.rowid DESC LIMIT ?`, "idx_memory_brief", []any{"main", 50}},
		{"recent", `SELECT ` + entryColumns + ` FROM memory_entries AS e
WHERE e.group_name = ? AND e.superseded_by IS NULL
ORDER BY e.created_at DESC, e.rowid DESC LIMIT ?`, "idx_memory_recent", []any{"main", 20}},
		{"recent with superseded", `SELECT ` + entryColumns + ` FROM memory_entries AS e
WHERE e.group_name = ?
ORDER BY e.created_at DESC, e.rowid DESC LIMIT ?`, "idx_memory_created", []any{"main", 20}},
	}
	for _, p := range plans {
		rows, err := db.r.Query("EXPLAIN QUERY PLAN "+p.query, p.args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		all := strings.Join(plan, "; ")
		if !strings.Contains(all, p.want) || strings.Contains(all, "TEMP B-TREE") {
			t.Errorf("%s: plan %q, want %s and no sort", p.name, all, p.want)
		}
	}
}
