package memory

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	_ "github.com/mattn/go-sqlite3" // registers "sqlite3"; needs cgo and -tags sqlite_fts5

	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/internal/sqlitedb"
)

// Entry types (seed 000 §Memory Entry Schema).
const (
	TypePreference  = "preference"
	TypeFact        = "fact"
	TypeInstruction = "instruction"
	TypeContext     = "context"
	TypeCorrection  = "correction"
)

// Types lists the entry types, in the order the manifest's enum gives them.
var Types = []string{TypePreference, TypeFact, TypeInstruction, TypeContext, TypeCorrection}

// Behavioral reports whether entries of type typ influence how the agent
// acts (preference, instruction, correction) rather than inform it.
func Behavioral(typ string) bool {
	return typ == TypePreference || typ == TypeInstruction || typ == TypeCorrection
}

// SchemaVersion is the schema this code reads and writes (PRAGMA
// user_version). Version 1 is seed 000's schema; version 2 adds
// superseded_at, so that the purge counts from the day an entry was
// replaced rather than the day it was written (schema.go).
const SchemaVersion = 2

// Entry is one stored memory.
type Entry struct {
	ID           string    // "mem-" + a random UUID
	Type         string    // one of Types
	Content      string    // as stored (trimmed); the brief puts it on one line
	Tags         []string  // normalised: trimmed, lower-case, unique, in first-seen order
	Behavioral   bool      // derived from Type
	SupersededBy string    // the entry that replaced this one; "" while current
	SupersededAt time.Time // when it was replaced; zero while current
	Session      string    // provenance: the session that wrote it
	Group        string    // provenance: the group that owns it
	Created      time.Time // provenance: when it was written (UTC)
}

// NewEntry is what Put stores. Session, Group and Time come from the
// request the core built, never from the agent's arguments.
type NewEntry struct {
	Type       string
	Content    string   // surrounding white space is trimmed
	Tags       []string // normalised as Entry.Tags says; see Put for what is refused
	Supersedes string   // the id of a current entry of the same group this one replaces, or ""
	Session    string   // required
	Group      string   // the database's group, or "" for it
	Time       time.Time
}

// Query is a search.
type Query struct {
	Text              string   // words; never FTS5 syntax
	Tags              []string // every one must be on the entry (AND)
	Type              string   // "" for any
	IncludeSuperseded bool
	Limit             int // 1–MaxLimit; 0 means DefaultLimit
}

// Search limits.
const (
	DefaultLimit = 20
	MaxLimit     = 100
)

// Hit is one search result.
type Hit struct {
	Entry
	// Relevance is 1 when the query has no words; otherwise 0.5–0.999 for an
	// entry holding every word and 0.05–0.5 for one holding some, placed
	// within its band by bm25 (see relevance).
	Relevance float64
}

// Errors of the store. Handlers turn them into messages for the agent.
var (
	// ErrNotFound: no entry with that id in this group.
	ErrNotFound = errors.New("no memory entry with that id in this group")
	// ErrNewerSchema: the database was written by a newer version.
	ErrNewerSchema = errors.New("the memory database was written by a newer version of Carapace")
)

// SupersededError: the entry to supersede was already replaced.
type SupersededError struct {
	ID, By string
}

func (e *SupersededError) Error() string {
	return fmt.Sprintf("memory entry %s was already superseded by %s", e.ID, e.By)
}

// InvalidError is Put's and Search's refusal of a value the agent gave:
// Field names the tool argument ("type", "content", "tags", "query",
// "limit") and Reason says what is wrong, as a phrase ("is empty"). Values
// that come from the core rather than the agent (session, group, time) are
// refused with plain errors: they are bugs, not something the agent can fix.
type InvalidError struct {
	Field, Reason string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("invalid %s: %s", e.Field, e.Reason)
}

// Connection settings.
const (
	// synchronousMode is PRAGMA synchronous for writes. FULL: a store that
	// was answered survives a power cut, at the cost of an fsync of the
	// WAL per commit. NORMAL would risk losing the last commits, never
	// corrupt the file.
	synchronousMode = "FULL"
	// busyTimeoutMS is how long a connection waits for another's lock
	// (another process with the same file; within one DB writes queue on
	// the single writer connection instead).
	busyTimeoutMS = 5000
	// readers is the size of the read pool. WAL lets them read while the
	// writer writes.
	readers = 4
)

// timeLayout is how times are stored: RFC 3339 in UTC, fixed width, so that
// text order is time order (created_at, superseded_at).
const timeLayout = "2006-01-02T15:04:05.000000000Z"

// DB is one group's memory database. It is safe for concurrent use: writes
// go through one connection in immediate transactions, reads through a pool
// of read-only connections that WAL lets run alongside them. Every
// statement is restricted to the group given to Open, even though the file
// is the group's alone.
type DB struct {
	group string
	path  string
	w     *sql.DB // one connection; BEGIN IMMEDIATE
	r     *sql.DB // query_only connections
}

// Open opens the database of group at path, creating it (0600, in an
// existing folder) if needed, puts it in WAL mode and migrates it to
// SchemaVersion. Commits are durable (synchronous FULL, fullfsync). It refuses
// a path that is a symbolic link or not a regular file, a group name that
// home.CheckGroup rejects, a binary built without cgo or FTS5, and a
// database of a newer schema (an error wrapping ErrNewerSchema; the file is
// left as it is).
//
// The symbolic-link check happens before SQLite opens the file, so a link
// swapped in between is followed: the check guards against mistakes and
// leftovers in the user's own data folder, not against someone who can
// write to it.
func Open(ctx context.Context, path, group string) (*DB, error) {
	if err := home.CheckGroup(group); err != nil {
		return nil, fmt.Errorf("memory: open: %w", err)
	}
	if !cgoEnabled {
		return nil, errors.New("memory: the memory plugin needs a binary built with cgo (CGO_ENABLED=1) and -tags sqlite_fts5, for SQLite")
	}
	abs, err := prepareFile(path)
	if err != nil {
		return nil, err
	}
	// The writer's connections run with PRAGMA fullfsync (sqlitedb.Durable):
	// on macOS fsync alone leaves a commit in the drive's cache.
	w, err := sqlitedb.Durable("sqlite3", dsn(abs, map[string]string{
		"mode":          "rw",
		"_txlock":       "immediate",
		"_busy_timeout": fmt.Sprint(busyTimeoutMS),
		"_synchronous":  synchronousMode,
	}))
	if err != nil {
		return nil, fmt.Errorf("memory: open %s: %w", abs, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	db := &DB{group: group, path: abs, w: w}
	if err := db.setUp(ctx); err != nil {
		w.Close()
		return nil, err
	}
	r, err := sql.Open("sqlite3", dsn(abs, map[string]string{
		"mode":          "rw", // never create; query_only forbids writes
		"_query_only":   "1",
		"_busy_timeout": fmt.Sprint(busyTimeoutMS),
	}))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("memory: open %s: %w", abs, err)
	}
	r.SetMaxOpenConns(readers)
	r.SetMaxIdleConns(readers)
	r.SetConnMaxLifetime(0)
	r.SetConnMaxIdleTime(0)
	if err := r.PingContext(ctx); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("memory: open %s for reading: %w", abs, err)
	}
	db.r = r
	return db, nil
}

// setUp checks the writer connection's SQLite, refuses a newer schema, turns
// on WAL and migrates. Nothing is written to the file before the schema
// version has been checked.
func (db *DB) setUp(ctx context.Context) error {
	var fts5 bool
	if err := db.w.QueryRowContext(ctx, "SELECT sqlite_compileoption_used('ENABLE_FTS5')").Scan(&fts5); err != nil {
		return fmt.Errorf("memory: open %s: %w", db.path, err)
	}
	if !fts5 {
		return errors.New("memory: SQLite was built without FTS5: build with -tags sqlite_fts5")
	}
	var v int
	if err := db.w.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("memory: open %s: read schema version: %w", db.path, err)
	}
	if v > SchemaVersion {
		return newerSchemaError(db.path, v)
	}
	var mode string
	if err := db.w.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
		return fmt.Errorf("memory: open %s: set WAL mode: %w", db.path, err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("memory: open %s: SQLite kept journal mode %q instead of WAL", db.path, mode)
	}
	return migrate(ctx, db.w, db.path)
}

// Close closes the database.
func (db *DB) Close() error {
	var errs []error
	if db.r != nil {
		errs = append(errs, db.r.Close())
	}
	errs = append(errs, db.w.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("memory: close %s: %w", db.path, err)
	}
	return nil
}

// Put stores a new entry and returns it, with its new ID and Created (n.Time
// in UTC, or now if zero) and with Behavioral derived from Type.
//
// It refuses with an *InvalidError a Type that is not one of Types; Content
// that is empty after trimming, holds a NUL byte, is not valid UTF-8 or is
// longer than 2000 characters (runes); and tags as normaliseTags describes
// (more than 10, longer than 50 characters, control or bidirectional
// formatting characters). Empty tags and duplicates are dropped silently.
//
// With n.Supersedes set, it replaces that entry in the same transaction:
// the entry must exist in this group (ErrNotFound otherwise, also for
// another group's id) and be current (*SupersededError otherwise); it gets
// SupersededBy = the new id and SupersededAt = the new entry's Created.
func (db *DB) Put(ctx context.Context, n NewEntry) (Entry, error) {
	e, err := db.newEntry(n)
	if err != nil {
		return Entry{}, fmt.Errorf("memory: put: %w", err)
	}
	tags, err := json.Marshal(e.Tags)
	if err != nil {
		return Entry{}, fmt.Errorf("memory: put: %w", err)
	}
	created := e.Created.Format(timeLayout)
	err = db.write(ctx, func(tx *sql.Tx) error {
		if n.Supersedes != "" {
			var by sql.NullString
			err := tx.QueryRowContext(ctx,
				`SELECT superseded_by FROM memory_entries WHERE id = ? AND group_name = ?`,
				n.Supersedes, db.group).Scan(&by)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				return fmt.Errorf("supersedes: %w", ErrNotFound)
			case err != nil:
				return err
			case by.Valid:
				return &SupersededError{ID: n.Supersedes, By: by.String}
			}
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO memory_entries (id, type, content, tags, behavioral, session_id, group_name, created_at)
			 VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			e.ID, e.Type, e.Content, string(tags), e.Behavioral, e.Session, e.Group, created); err != nil {
			return err
		}
		if n.Supersedes == "" {
			return nil
		}
		res, err := tx.ExecContext(ctx,
			`UPDATE memory_entries SET superseded_by = ?, superseded_at = ?
			 WHERE id = ? AND group_name = ? AND superseded_by IS NULL`,
			e.ID, created, n.Supersedes, db.group)
		if err != nil {
			return err
		}
		k, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if k != 1 { // cannot happen: the immediate transaction holds the lock since the check
			return fmt.Errorf("supersede: %d entries changed instead of 1", k)
		}
		return nil
	})
	if err != nil {
		return Entry{}, fmt.Errorf("memory: put: %w", err)
	}
	return e, nil
}

// newEntry validates n and returns the entry Put stores.
func (db *DB) newEntry(n NewEntry) (Entry, error) {
	if !slices.Contains(Types, n.Type) {
		return Entry{}, &InvalidError{Field: "type", Reason: "must be one of " + strings.Join(Types, ", ")}
	}
	content := strings.TrimSpace(n.Content)
	switch {
	case !utf8.ValidString(content):
		return Entry{}, &InvalidError{Field: "content", Reason: "is not valid UTF-8"}
	case content == "":
		return Entry{}, &InvalidError{Field: "content", Reason: "is empty"}
	case strings.IndexByte(content, 0) >= 0:
		return Entry{}, &InvalidError{Field: "content", Reason: "contains a NUL character"}
	}
	if k := utf8.RuneCountInString(content); k > maxContentRunes {
		return Entry{}, &InvalidError{Field: "content", Reason: fmt.Sprintf("is %d characters long; at most %d are allowed", k, maxContentRunes)}
	}
	tags, err := normaliseTags(n.Tags)
	if err != nil {
		return Entry{}, err
	}
	if n.Session == "" {
		return Entry{}, errors.New("no session: every entry records the session that wrote it")
	}
	if n.Group != "" && n.Group != db.group {
		return Entry{}, fmt.Errorf("an entry of group %q cannot go into the database of group %q", n.Group, db.group)
	}
	t := n.Time
	if t.IsZero() {
		t = time.Now()
	}
	t = t.UTC()
	if y := t.Year(); y < 1 || y > 9999 {
		return Entry{}, fmt.Errorf("time %v is outside the years 1–9999", t)
	}
	return Entry{
		ID:         "mem-" + uuid.NewString(),
		Type:       n.Type,
		Content:    content,
		Tags:       tags,
		Behavioral: Behavioral(n.Type),
		Session:    n.Session,
		Group:      db.group,
		Created:    t,
	}, nil
}

// Get returns the entry with id, or an error wrapping ErrNotFound.
func (db *DB) Get(ctx context.Context, id string) (Entry, error) {
	rows, err := db.r.QueryContext(ctx,
		`SELECT `+entryColumns+` FROM memory_entries AS e WHERE e.id = ? AND e.group_name = ?`,
		id, db.group)
	if err != nil {
		return Entry{}, fmt.Errorf("memory: get: %w", err)
	}
	es, err := scanEntries(rows)
	if err != nil {
		return Entry{}, fmt.Errorf("memory: get: %w", err)
	}
	if len(es) == 0 {
		return Entry{}, fmt.Errorf("memory: get: %w", ErrNotFound)
	}
	return es[0], nil
}

// Search runs q. Without words, entries come newest first. With words (see
// matchExpr), in content and tags, content weighing twice as much:
//
//  1. entries holding every word, best bm25 rank first;
//  2. if those are fewer than the limit, entries holding some of the words,
//     most recently stored first.
//
// Ranking every entry that holds any word costs bm25 over all of them —
// on 10,000 entries two common words match a third of the group and take
// several milliseconds — while entries holding every word are few, ranked
// in well under one, and are what a search for several words means first.
// Partial matches fill the rest by recency, which FTS5 reads in its own
// order without ranking them all.
//
// The filters — group, type, tags, superseded — apply before the limit.
// Tags are normalised as Put's are, but none is refused: more distinct tags
// than an entry can carry simply find nothing. It refuses with an
// *InvalidError a Type that is not one of Types and a Limit outside
// 0–MaxLimit.
func (db *DB) Search(ctx context.Context, q Query) ([]Hit, error) {
	limit := q.Limit
	switch {
	case limit == 0:
		limit = DefaultLimit
	case limit < 0 || limit > MaxLimit:
		return nil, fmt.Errorf("memory: search: %w", &InvalidError{Field: "limit", Reason: fmt.Sprintf("must be from 1 to %d", MaxLimit)})
	}
	if q.Type != "" && !slices.Contains(Types, q.Type) {
		return nil, fmt.Errorf("memory: search: %w", &InvalidError{Field: "type", Reason: "must be one of " + strings.Join(Types, ", ")})
	}
	tags := searchTags(q.Tags)
	if len(tags) > maxTags {
		return nil, nil // no entry carries that many tags
	}
	words := queryTokens(q.Text)
	if len(words) == 0 {
		hits, err := db.search(ctx, q, tags, "", false, limit)
		if err != nil {
			return nil, fmt.Errorf("memory: search: %w", err)
		}
		return hits, nil
	}
	hits, err := db.search(ctx, q, tags, matchExpr(words, " AND "), true, limit)
	if err != nil {
		return nil, fmt.Errorf("memory: search: %w", err)
	}
	if len(hits) == limit || len(words) == 1 {
		return hits, nil
	}
	// Entries holding some of the words: the ones above come back too, so
	// ask for as many more.
	more, err := db.search(ctx, q, tags, matchExpr(words, " OR "), false, limit+len(hits))
	if err != nil {
		return nil, fmt.Errorf("memory: search: %w", err)
	}
	seen := make(map[string]bool, len(hits))
	for _, h := range hits {
		seen[h.ID] = true
	}
	for _, h := range more {
		if len(hits) == limit {
			break
		}
		if !seen[h.ID] {
			hits = append(hits, h)
		}
	}
	return hits, nil
}

// search runs one query of Search: with match "", every entry newest first;
// otherwise the entries match selects, best rank first when ranked, most
// recently stored (highest rowid) first when not.
func (db *DB) search(ctx context.Context, q Query, tags []string, match string, ranked bool, limit int) ([]Hit, error) {
	var b strings.Builder
	var args []any
	b.WriteString(`SELECT ` + entryColumns)
	if match != "" {
		b.WriteString(`, bm25(memory_fts, 1.0, 0.5) AS score
FROM memory_fts JOIN memory_entries AS e ON e.rowid = memory_fts.rowid
WHERE memory_fts MATCH ? AND e.group_name = ?`)
		args = append(args, match, db.group)
	} else {
		b.WriteString(`
FROM memory_entries AS e
WHERE e.group_name = ?`)
		args = append(args, db.group)
	}
	if !q.IncludeSuperseded {
		b.WriteString(` AND e.superseded_by IS NULL`)
	}
	if q.Type != "" {
		b.WriteString(` AND e.type = ?`)
		args = append(args, q.Type)
	}
	for _, t := range tags {
		b.WriteString(` AND EXISTS (SELECT 1 FROM json_each(e.tags) AS t WHERE t.value = ?)`)
		args = append(args, t)
	}
	switch {
	case match == "":
		b.WriteString(` ORDER BY e.created_at DESC, e.rowid DESC`)
	case ranked:
		b.WriteString(` ORDER BY score, e.created_at DESC, e.rowid DESC`)
	default:
		b.WriteString(` ORDER BY memory_fts.rowid DESC`)
	}
	b.WriteString(` LIMIT ?`)
	args = append(args, limit)

	rows, err := db.r.QueryContext(ctx, b.String(), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var hits []Hit
	for rows.Next() {
		var h Hit
		var rank float64
		var extra []any
		if match != "" {
			extra = append(extra, &rank)
		}
		if err := scanEntry(rows, &h.Entry, extra...); err != nil {
			return nil, err
		}
		switch {
		case match == "":
			h.Relevance = 1
		case ranked:
			h.Relevance = min(math.Round((0.5+0.5*relevance(rank))*1000)/1000, 0.999)
		default:
			h.Relevance = math.Round((0.05+0.45*relevance(rank))*1000) / 1000
		}
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return hits, nil
}

// relevance maps a bm25 rank (≤ 0, lower is better) into [0, 1): s/(1+s)
// with s = -rank, rounded to three decimals. bm25 gives a word found in
// more than half the entries almost no weight, so in a small group a
// perfect hit can score 0 here: Search adds a band for how many of the
// words an entry holds.
func relevance(rank float64) float64 {
	s := -rank
	if s <= 0 || math.IsNaN(s) {
		return 0
	}
	if math.IsInf(s, 1) {
		return 0.999
	}
	return min(math.Round(s/(1+s)*1000)/1000, 0.999)
}

// BriefEntries returns up to limit current entries for the brief:
// behavioural ones first, then newest first. A limit of 0 returns none.
func (db *DB) BriefEntries(ctx context.Context, limit int) ([]Entry, error) {
	if limit < 0 {
		return nil, fmt.Errorf("memory: brief: %w", &InvalidError{Field: "limit", Reason: "is negative"})
	}
	rows, err := db.r.QueryContext(ctx, `SELECT `+entryColumns+`
FROM memory_entries AS e
WHERE e.group_name = ? AND e.superseded_by IS NULL
ORDER BY e.behavioral DESC, e.created_at DESC, e.rowid DESC
LIMIT ?`, db.group, limit)
	if err != nil {
		return nil, fmt.Errorf("memory: brief: %w", err)
	}
	es, err := scanEntries(rows)
	if err != nil {
		return nil, fmt.Errorf("memory: brief: %w", err)
	}
	return es, nil
}

// CountCurrent returns the number of current entries (not superseded).
func (db *DB) CountCurrent(ctx context.Context) (int, error) {
	var n int
	err := db.r.QueryRowContext(ctx,
		`SELECT count(*) FROM memory_entries WHERE group_name = ? AND superseded_by IS NULL`,
		db.group).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("memory: count: %w", err)
	}
	return n, nil
}

// Delete removes the entry with id for good, or returns an error wrapping
// ErrNotFound. Supersession chains are kept whole: the entries the deleted
// one had superseded are re-pointed to the entry that superseded it, if
// any (A→B→C, delete B: A→C); if the deleted entry was current, they become
// current again, and restored lists their ids, sorted. All in one
// transaction.
func (db *DB) Delete(ctx context.Context, id string) (restored []string, err error) {
	err = db.write(ctx, func(tx *sql.Tx) error {
		var by sql.NullString
		err := tx.QueryRowContext(ctx,
			`SELECT superseded_by FROM memory_entries WHERE id = ? AND group_name = ?`,
			id, db.group).Scan(&by)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return ErrNotFound
		case err != nil:
			return err
		}
		if by.Valid {
			_, err = tx.ExecContext(ctx,
				`UPDATE memory_entries SET superseded_by = ? WHERE superseded_by = ? AND group_name = ?`,
				by.String, id, db.group)
		} else {
			restored, err = restore(ctx, tx, id, db.group)
		}
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM memory_entries WHERE id = ? AND group_name = ?`, id, db.group)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("memory: delete: %w", err)
	}
	return restored, nil
}

// restore makes the entries that id superseded current again and returns
// their ids, sorted.
func restore(ctx context.Context, tx *sql.Tx, id, group string) ([]string, error) {
	rows, err := tx.QueryContext(ctx,
		`UPDATE memory_entries SET superseded_by = NULL, superseded_at = NULL
		 WHERE superseded_by = ? AND group_name = ? RETURNING id`, id, group)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		ids = append(ids, s)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.Sort(ids)
	return ids, nil
}

// PurgeSuperseded deletes the entries superseded before cutoff and returns
// how many. Their words leave the search index with them.
func (db *DB) PurgeSuperseded(ctx context.Context, cutoff time.Time) (int64, error) {
	var n int64
	err := db.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx,
			`DELETE FROM memory_entries
			 WHERE group_name = ? AND superseded_by IS NOT NULL AND superseded_at < ?`,
			db.group, cutoff.UTC().Format(timeLayout))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("memory: purge: %w", err)
	}
	return n, nil
}

// write runs f in an immediate transaction of the writer connection and
// commits if f returns nil.
func (db *DB) write(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := db.w.BeginTx(ctx, nil) // BEGIN IMMEDIATE (_txlock)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		tx.Rollback() //nolint:errcheck // the error of f says more
		return err
	}
	return tx.Commit()
}

// entryColumns are the columns scanEntry reads, of memory_entries AS e.
const entryColumns = `e.id, e.type, e.content, e.tags, e.behavioral, e.superseded_by,
e.superseded_at, e.session_id, e.group_name, e.created_at`

// scanEntry scans a row of entryColumns, followed by extra, into e.
func scanEntry(rows *sql.Rows, e *Entry, extra ...any) error {
	var tags, created string
	var supBy, supAt sql.NullString
	dest := append([]any{&e.ID, &e.Type, &e.Content, &tags, &e.Behavioral, &supBy,
		&supAt, &e.Session, &e.Group, &created}, extra...)
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(tags), &e.Tags); err != nil {
		return fmt.Errorf("entry %s: tags: %w", e.ID, err)
	}
	var err error
	if e.Created, err = parseTime(created); err != nil {
		return fmt.Errorf("entry %s: created_at: %w", e.ID, err)
	}
	e.SupersededBy = supBy.String
	if supAt.Valid {
		if e.SupersededAt, err = parseTime(supAt.String); err != nil {
			return fmt.Errorf("entry %s: superseded_at: %w", e.ID, err)
		}
	}
	return nil
}

// parseTime reads a stored time: timeLayout, or any RFC 3339 time (rows
// written by other code), in UTC.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, err
	}
	return t.UTC(), nil
}

// scanEntries reads rows of entryColumns and closes them.
func scanEntries(rows *sql.Rows) ([]Entry, error) {
	defer rows.Close()
	var es []Entry
	for rows.Next() {
		var e Entry
		if err := scanEntry(rows, &e); err != nil {
			return nil, err
		}
		es = append(es, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return es, nil
}
