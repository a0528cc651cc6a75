package memory

import (
	"context"
	"database/sql"
	"fmt"
)

// migrations[i] takes a database from schema version i to i+1 (PRAGMA
// user_version). They only go forward; each runs in one transaction together
// with the user_version update, so a database is always at one version or
// the next. Version 3 is one more element (and SchemaVersion + 1).
var migrations = []string{
	0: schemaV1,
	1: schemaV2,
}

// schemaV1 is seed 000's schema (§Storage Backend), unchanged. The seed's
// PRAGMA lines are not part of it: journal_mode cannot change inside a
// transaction (Open sets WAL before migrating) and user_version is set by
// migrate.
//
// Beware: memory_fts finds its rows by memory_entries' rowid, which is not
// an INTEGER PRIMARY KEY, and VACUUM may renumber such rowids. Never VACUUM
// a memory database without rebuilding memory_fts afterwards
// (INSERT INTO memory_fts(memory_fts) VALUES('rebuild')).
const schemaV1 = `
CREATE TABLE memory_entries (
    id          TEXT PRIMARY KEY,
    type        TEXT NOT NULL CHECK(type IN (
                    'preference', 'fact', 'instruction',
                    'context', 'correction'
                )),
    content     TEXT NOT NULL,
    tags        TEXT NOT NULL DEFAULT '[]',     -- JSON array
    behavioral  INTEGER NOT NULL DEFAULT 0,     -- derived from type
    -- superseded_by is the DB column; the API argument is "supersedes"
    -- (the entry names its replacement vs the DB tracks what replaced it)
    superseded_by TEXT REFERENCES memory_entries(id),

    -- Provenance (set by handler, not by agent)
    session_id  TEXT NOT NULL,
    group_name  TEXT NOT NULL,
    created_at  TEXT NOT NULL                   -- ISO 8601
);

-- Full-text search index (SQLite FTS5)
CREATE VIRTUAL TABLE memory_fts USING fts5(
    content,
    tags,
    content=memory_entries,
    content_rowid=rowid
);

-- Keep FTS index in sync
CREATE TRIGGER memory_fts_insert AFTER INSERT ON memory_entries
BEGIN
    INSERT INTO memory_fts(rowid, content, tags)
    VALUES (new.rowid, new.content, new.tags);
END;

CREATE TRIGGER memory_fts_delete AFTER DELETE ON memory_entries
BEGIN
    INSERT INTO memory_fts(memory_fts, rowid, content, tags)
    VALUES ('delete', old.rowid, old.content, old.tags);
END;

CREATE TRIGGER memory_fts_update AFTER UPDATE ON memory_entries
BEGIN
    INSERT INTO memory_fts(memory_fts, rowid, content, tags)
    VALUES ('delete', old.rowid, old.content, old.tags);
    INSERT INTO memory_fts(rowid, content, tags)
    VALUES (new.rowid, new.content, new.tags);
END;

-- Efficient lookups
CREATE INDEX idx_memory_type ON memory_entries(type);
CREATE INDEX idx_memory_behavioral ON memory_entries(behavioral);
CREATE INDEX idx_memory_superseded ON memory_entries(superseded_by);
CREATE INDEX idx_memory_created ON memory_entries(created_at);
`

// schemaV2 adds superseded_at, the created_at of the entry that replaced an
// entry, so that the purge counts from the day an entry was replaced.
//
// It first rewrites created_at values that are not in the fixed-width form
// Put writes (timeLayout) but that SQLite can read as a time, such as
// JavaScript's "2026-02-18T14:30:00.000Z", to that form (to the
// millisecond), so that text order is time order for every row. Then it
// backfills superseded_at of superseded entries with their replacement's
// created_at, or with their own created_at when the replacement is gone
// (the purge of version 1 counted from created_at).
//
// Two partial indexes of current entries serve the brief (behavioural
// first, then newest first) and the recent-first search without sorting the
// table: at 10,000 entries they take the brief from about 6 ms to 0.15 ms
// and the recent search from about 6.5 ms to 0.06 ms, and cost nothing
// measurable on Put.
const schemaV2 = `
ALTER TABLE memory_entries ADD COLUMN superseded_at TEXT;

UPDATE memory_entries
SET created_at = strftime('%Y-%m-%dT%H:%M:%f', created_at) || '000000Z'
WHERE created_at NOT GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]Z'
  AND strftime('%Y-%m-%dT%H:%M:%f', created_at) IS NOT NULL;

UPDATE memory_entries AS e
SET superseded_at = coalesce(
    (SELECT s.created_at FROM memory_entries AS s
     WHERE s.id = e.superseded_by AND s.group_name = e.group_name),
    e.created_at)
WHERE e.superseded_by IS NOT NULL;

CREATE INDEX idx_memory_brief ON memory_entries(group_name, behavioral, created_at)
WHERE superseded_by IS NULL;

CREATE INDEX idx_memory_recent ON memory_entries(group_name, created_at)
WHERE superseded_by IS NULL;
`

// migrate brings the database of w up to SchemaVersion, one step per
// transaction. Each step reads user_version again inside its (immediate)
// transaction, so two processes opening the same new file at once do not
// both run a step.
func migrate(ctx context.Context, w *sql.DB, path string) error {
	for {
		done, err := migrateStep(ctx, w, path)
		if err != nil || done {
			return err
		}
	}
}

// migrateStep runs the next migration, or reports that there is none.
func migrateStep(ctx context.Context, w *sql.DB, path string) (done bool, err error) {
	tx, err := w.BeginTx(ctx, nil) // BEGIN IMMEDIATE (_txlock)
	if err != nil {
		return false, fmt.Errorf("memory: migrate %s: %w", path, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return false, fmt.Errorf("memory: migrate %s: read schema version: %w", path, err)
	}
	switch {
	case v == SchemaVersion:
		return true, nil
	case v > SchemaVersion:
		return false, newerSchemaError(path, v)
	case v < 0:
		return false, fmt.Errorf("memory: %s has schema version %d, which no Carapace writes; is it a memory database?", path, v)
	}
	if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
		return false, fmt.Errorf("memory: migrate %s from schema version %d to %d: %w", path, v, v+1, err)
	}
	// PRAGMA takes no parameters; v+1 is an int of ours.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", v+1)); err != nil {
		return false, fmt.Errorf("memory: migrate %s: set schema version %d: %w", path, v+1, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("memory: migrate %s from schema version %d to %d: commit: %w", path, v, v+1, err)
	}
	return false, nil
}

// newerSchemaError is Open's error for a database of a newer Carapace.
func newerSchemaError(path string, v int) error {
	return fmt.Errorf("memory: %s has schema version %d but this Carapace reads versions up to %d; "+
		"upgrade Carapace to use it, and do not edit or delete the file (it holds the memories): %w",
		path, v, SchemaVersion, ErrNewerSchema)
}
