package memory

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// t0 is the time of the first test entry; entries are usually one minute
// apart so that their order is clear.
var t0 = time.Date(2026, 2, 18, 14, 30, 0, 0, time.UTC)

// openTestDB opens a fresh database of group in a temporary folder and
// closes it when the test ends.
func openTestDB(t *testing.T, group string) *DB {
	t.Helper()
	return openTestDBAt(t, filepath.Join(t.TempDir(), group+".sqlite"), group)
}

func openTestDBAt(t *testing.T, path, group string) *DB {
	t.Helper()
	db, err := Open(context.Background(), path, group)
	if err != nil {
		t.Fatalf("Open(%s, %s): %v", path, group, err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

// put stores an entry of type fact (unless n says otherwise) by session
// "sess-test" and fails the test on error.
func put(t *testing.T, db *DB, n NewEntry) Entry {
	t.Helper()
	if n.Type == "" {
		n.Type = TypeFact
	}
	if n.Session == "" {
		n.Session = "sess-test"
	}
	e, err := db.Put(context.Background(), n)
	if err != nil {
		t.Fatalf("Put(%+v): %v", n, err)
	}
	return e
}

// putAt stores content at t0 + minutes.
func putAt(t *testing.T, db *DB, minutes int, content string, tags ...string) Entry {
	t.Helper()
	return put(t, db, NewEntry{Content: content, Tags: tags, Time: t0.Add(time.Duration(minutes) * time.Minute)})
}

func search(t *testing.T, db *DB, q Query) []Hit {
	t.Helper()
	hits, err := db.Search(context.Background(), q)
	if err != nil {
		t.Fatalf("Search(%+v): %v", q, err)
	}
	return hits
}

func ids(hits []Hit) []string {
	out := []string{}
	for _, h := range hits {
		out = append(out, h.ID)
	}
	return out
}

func entryIDs(es []Entry) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.ID)
	}
	return out
}

// insertRaw inserts a row of another group into db's file, as a bug or a
// hand edit might, bypassing Put.
func insertRaw(t *testing.T, db *DB, id, group, content, supersededBy string) {
	t.Helper()
	var sup any
	if supersededBy != "" {
		sup = supersededBy
	}
	_, err := db.w.Exec(`INSERT INTO memory_entries (id, type, content, tags, behavioral, superseded_by, session_id, group_name, created_at)
		VALUES (?, 'fact', ?, '["shared"]', 0, ?, 'sess-x', ?, ?)`,
		id, content, sup, group, t0.Add(time.Hour).Format(timeLayout))
	if err != nil {
		t.Fatalf("insert raw row: %v", err)
	}
}

func TestStoreOpenCreatesPrivateWALFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "main.sqlite")
	db := openTestDBAt(t, path, "main")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("file mode = %v, want 0600", got)
	}
	ctx := context.Background()
	checks := []struct {
		db    string
		query string
		want  string
	}{
		{"w", "PRAGMA journal_mode", "wal"},
		{"w", "PRAGMA synchronous", "2"}, // FULL
		{"w", "PRAGMA fullfsync", "1"},
		{"w", "PRAGMA busy_timeout", "5000"},
		{"w", "PRAGMA foreign_keys", "0"},
		{"w", "PRAGMA user_version", fmt.Sprint(SchemaVersion)},
		{"r", "PRAGMA query_only", "1"},
		{"r", "PRAGMA busy_timeout", "5000"},
		{"r", "PRAGMA journal_mode", "wal"},
	}
	for _, c := range checks {
		pool := db.w
		if c.db == "r" {
			pool = db.r
		}
		var got string
		if err := pool.QueryRowContext(ctx, c.query).Scan(&got); err != nil {
			t.Fatalf("%s: %v", c.query, err)
		}
		if got != c.want {
			t.Errorf("%s (%s) = %q, want %q", c.query, c.db, got, c.want)
		}
	}
	if _, err := db.r.ExecContext(ctx, `DELETE FROM memory_entries`); err == nil {
		t.Error("the read pool could write")
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		fi, err := os.Stat(path + suffix)
		if err != nil {
			t.Fatalf("WAL companion: %v", err)
		}
		if got := fi.Mode().Perm(); got&0o077 != 0 {
			t.Errorf("%s mode = %v, want no group/other access", suffix, got)
		}
	}
}

func TestStoreOpenKeepsEntriesAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "main.sqlite")
	ctx := context.Background()
	db, err := Open(ctx, path, "main")
	if err != nil {
		t.Fatal(err)
	}
	e := put(t, db, NewEntry{Content: "User's dog is named Luna"})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTestDBAt(t, path, "main")
	got, err := db.Get(ctx, e.ID)
	if err != nil {
		t.Fatalf("Get after reopen: %v", err)
	}
	if got.Content != e.Content {
		t.Errorf("content = %q, want %q", got.Content, e.Content)
	}
	if hits := search(t, db, Query{Text: "luna"}); len(hits) != 1 {
		t.Errorf("search after reopen found %d entries, want 1", len(hits))
	}
}

func TestStoreOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.sqlite")
	if err := os.WriteFile(real, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.sqlite")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling.sqlite")
	if err := os.Symlink(filepath.Join(dir, "nowhere"), dangling); err != nil {
		t.Fatal(err)
	}
	walLinked := filepath.Join(dir, "wal.sqlite")
	if err := os.Symlink(real, walLinked+"-wal"); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "folder.sqlite")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage.sqlite")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a database ", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, group, want string
	}{
		{"symlink", link, "main", "symbolic link"},
		{"dangling symlink", dangling, "main", "symbolic link"},
		{"symlinked WAL", walLinked, "main", "symbolic link"},
		{"folder", sub, "main", "not a regular file"},
		{"missing folder", filepath.Join(dir, "no", "such.sqlite"), "main", "no such file"},
		{"bad group", filepath.Join(dir, "x.sqlite"), "../etc", "group"},
		{"empty group", filepath.Join(dir, "y.sqlite"), "", "group"},
		{"not a database", garbage, "main", "not a database"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db, err := Open(context.Background(), tc.path, tc.group)
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
	if b, err := os.ReadFile(real); err != nil || len(b) != 0 {
		t.Errorf("the symlink's target was written to (%d bytes, %v)", len(b), err)
	}
	for _, p := range []string{filepath.Join(dir, "x.sqlite"), filepath.Join(dir, "y.sqlite")} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Open with a bad group created %s", p)
		}
	}
}

func TestStoreOpenPathNeedingEscapes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a b?c#d%41e&mode=ro")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "main.sqlite")
	db := openTestDBAt(t, path, "main")
	put(t, db, NewEntry{Content: "escaped path works"})
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database not at the path given: %v", err)
	}
	if hits := search(t, db, Query{Text: "escaped"}); len(hits) != 1 {
		t.Errorf("found %d, want 1", len(hits))
	}
}

func TestStorePutValidation(t *testing.T) {
	db := openTestDB(t, "main")
	long := func(n int) string { return strings.Repeat("é", n) }
	elevenTags := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"}
	tests := []struct {
		name  string
		n     NewEntry
		field string // "" = accepted
	}{
		{"valid", NewEntry{Type: TypeFact, Content: "ok"}, ""},
		{"every type", NewEntry{Type: TypeCorrection, Content: "ok"}, ""},
		{"unknown type", NewEntry{Type: "opinion", Content: "ok"}, "type"},
		{"type case", NewEntry{Type: "Fact", Content: "ok"}, "type"},
		{"empty type", NewEntry{Type: "", Content: "ok"}, "type"},
		{"empty content", NewEntry{Type: TypeFact, Content: ""}, "content"},
		{"blank content", NewEntry{Type: TypeFact, Content: " \n\t "}, "content"},
		{"NUL in content", NewEntry{Type: TypeFact, Content: "a\x00b"}, "content"},
		{"bad UTF-8", NewEntry{Type: TypeFact, Content: "a\xffb"}, "content"},
		{"2000 runes", NewEntry{Type: TypeFact, Content: long(2000)}, ""},
		{"2001 runes", NewEntry{Type: TypeFact, Content: long(2001)}, "content"},
		{"2000 runes plus space", NewEntry{Type: TypeFact, Content: " " + long(2000) + "\n"}, ""},
		{"10 tags", NewEntry{Type: TypeFact, Content: "ok", Tags: elevenTags[:10]}, ""},
		{"11 tags", NewEntry{Type: TypeFact, Content: "ok", Tags: elevenTags}, "tags"},
		{"11 tags, 10 distinct", NewEntry{Type: TypeFact, Content: "ok", Tags: append(slices.Clone(elevenTags[:10]), "A ")}, ""},
		{"empty tags dropped", NewEntry{Type: TypeFact, Content: "ok", Tags: append(slices.Clone(elevenTags[:10]), "", "  ")}, ""},
		{"50-rune tag", NewEntry{Type: TypeFact, Content: "ok", Tags: []string{long(50)}}, ""},
		{"51-rune tag", NewEntry{Type: TypeFact, Content: "ok", Tags: []string{long(51)}}, "tags"},
		{"50-rune tag padded", NewEntry{Type: TypeFact, Content: "ok", Tags: []string{"  " + long(50) + " "}}, ""},
		{"newline in tag", NewEntry{Type: TypeFact, Content: "ok", Tags: []string{"a\nb"}}, "tags"},
		{"tab in tag", NewEntry{Type: TypeFact, Content: "ok", Tags: []string{"a\tb"}}, "tags"},
		{"escape in tag", NewEntry{Type: TypeFact, Content: "ok", Tags: []string{"\x1b[31mred"}}, "tags"},
		{"C1 control in tag", NewEntry{Type: TypeFact, Content: "ok", Tags: []string{"a\u0085"}}, "tags"},
		{"bidi override in tag", NewEntry{Type: TypeFact, Content: "ok", Tags: []string{"abc\u202edef"}}, "tags"},
		{"bidi isolate in tag", NewEntry{Type: TypeFact, Content: "ok", Tags: []string{"\u2066x"}}, "tags"},
		{"bad UTF-8 tag", NewEntry{Type: TypeFact, Content: "ok", Tags: []string{"\xff"}}, "tags"},
		{"non-ASCII tag", NewEntry{Type: TypeFact, Content: "ok", Tags: []string{"Café-Ünïcode 日本"}}, ""},
	}
	accepted := 0
	for _, tc := range tests {
		if tc.field == "" {
			accepted++
		}
		t.Run(tc.name, func(t *testing.T) {
			tc.n.Session = "sess-1"
			e, err := db.Put(context.Background(), tc.n)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Put: %v", err)
				}
				if _, err := db.Get(context.Background(), e.ID); err != nil {
					t.Errorf("Get after Put: %v", err)
				}
				return
			}
			var inv *InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("Put error = %v, want an *InvalidError", err)
			}
			if inv.Field != tc.field {
				t.Errorf("field = %q, want %q (%v)", inv.Field, tc.field, err)
			}
			if inv.Reason == "" {
				t.Error("no reason")
			}
		})
	}
	n, err := db.CountCurrent(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := accepted; n != want {
		t.Errorf("%d entries stored, want %d (refused puts must store nothing)", n, want)
	}
}

func TestStorePutProvenanceErrors(t *testing.T) {
	db := openTestDB(t, "main")
	tests := []struct {
		name string
		n    NewEntry
		want string
	}{
		{"no session", NewEntry{Type: TypeFact, Content: "x"}, "session"},
		{"other group", NewEntry{Type: TypeFact, Content: "x", Session: "s", Group: "other"}, "group"},
		{"year 10000", NewEntry{Type: TypeFact, Content: "x", Session: "s", Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, "years"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := db.Put(context.Background(), tc.n)
			if err == nil {
				t.Fatal("Put succeeded")
			}
			var inv *InvalidError
			if errors.As(err, &inv) {
				t.Errorf("error is an *InvalidError (%v): the agent cannot fix it", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func TestStorePutGetRoundTrip(t *testing.T) {
	db := openTestDB(t, "main")
	ctx := context.Background()
	paris := time.FixedZone("CET", 3600)
	when := time.Date(2026, 3, 1, 10, 0, 0, 123456789, paris)
	e, err := db.Put(ctx, NewEntry{
		Type: TypePreference, Content: "  Prefers concise answers\nalways  ",
		Tags:    []string{" Style ", "style", "", "WRITING", "écrit"},
		Session: "sess-abc", Group: "main", Time: when,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(e.ID, "mem-") || len(e.ID) != len("mem-")+36 {
		t.Errorf("id = %q, want mem-<uuid>", e.ID)
	}
	want := Entry{
		ID: e.ID, Type: TypePreference, Content: "Prefers concise answers\nalways",
		Tags: []string{"style", "writing", "écrit"}, Behavioral: true,
		Session: "sess-abc", Group: "main", Created: when.UTC(),
	}
	if !equalEntry(e, want) {
		t.Errorf("Put returned\n%+v, want\n%+v", e, want)
	}
	got, err := db.Get(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !equalEntry(got, want) {
		t.Errorf("Get returned\n%+v, want\n%+v", got, want)
	}
	if got.Created.Location() != time.UTC {
		t.Errorf("Created location = %v, want UTC", got.Created.Location())
	}
	var tags, created string
	if err := db.r.QueryRow(`SELECT tags, created_at FROM memory_entries WHERE id = ?`, e.ID).Scan(&tags, &created); err != nil {
		t.Fatal(err)
	}
	if tags != `["style","writing","écrit"]` {
		t.Errorf("tags column = %s", tags)
	}
	if created != "2026-03-01T09:00:00.123456789Z" {
		t.Errorf("created_at column = %s", created)
	}

	for _, typ := range Types {
		e := put(t, db, NewEntry{Type: typ, Content: "typed " + typ})
		if e.Behavioral != Behavioral(typ) {
			t.Errorf("type %s: behavioral = %v", typ, e.Behavioral)
		}
	}

	before := time.Now().UTC()
	e = put(t, db, NewEntry{Content: "no time given", Group: ""})
	if e.Created.Before(before.Add(-time.Second)) || e.Created.After(time.Now().Add(time.Second)) {
		t.Errorf("Created = %v for a zero Time, want about now", e.Created)
	}
	if e.Group != "main" {
		t.Errorf("Group = %q, want the database's", e.Group)
	}

	if _, err := db.Get(ctx, "mem-00000000-0000-0000-0000-000000000000"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(unknown) = %v, want ErrNotFound", err)
	}
}

func equalEntry(a, b Entry) bool {
	return a.ID == b.ID && a.Type == b.Type && a.Content == b.Content && slices.Equal(a.Tags, b.Tags) &&
		a.Behavioral == b.Behavioral && a.SupersededBy == b.SupersededBy && a.SupersededAt.Equal(b.SupersededAt) &&
		a.Session == b.Session && a.Group == b.Group && a.Created.Equal(b.Created)
}

func TestStoreSupersedeChain(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t, "main")
	a := putAt(t, db, 0, "favourite colour is blue")
	b := put(t, db, NewEntry{Content: "favourite colour is green", Supersedes: a.ID, Time: t0.Add(time.Minute)})
	c := put(t, db, NewEntry{Content: "favourite colour is red", Supersedes: b.ID, Time: t0.Add(2 * time.Minute)})

	gotA, err := db.Get(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if gotA.SupersededBy != b.ID || !gotA.SupersededAt.Equal(b.Created) {
		t.Errorf("A: superseded by %q at %v, want %q at %v", gotA.SupersededBy, gotA.SupersededAt, b.ID, b.Created)
	}
	gotB, _ := db.Get(ctx, b.ID)
	if gotB.SupersededBy != c.ID || !gotB.SupersededAt.Equal(c.Created) {
		t.Errorf("B: superseded by %q at %v, want %q at %v", gotB.SupersededBy, gotB.SupersededAt, c.ID, c.Created)
	}
	gotC, _ := db.Get(ctx, c.ID)
	if gotC.SupersededBy != "" || !gotC.SupersededAt.IsZero() {
		t.Errorf("C is not current: %+v", gotC)
	}

	if got := ids(search(t, db, Query{Text: "favourite colour"})); !slices.Equal(got, []string{c.ID}) {
		t.Errorf("default search = %v, want only C", got)
	}
	if got := ids(search(t, db, Query{})); !slices.Equal(got, []string{c.ID}) {
		t.Errorf("recent = %v, want only C", got)
	}
	got := ids(search(t, db, Query{Text: "favourite", IncludeSuperseded: true}))
	if !sameSet(got, []string{a.ID, b.ID, c.ID}) {
		t.Errorf("include_superseded = %v, want A, B, C", got)
	}
	if got := ids(search(t, db, Query{IncludeSuperseded: true})); !slices.Equal(got, []string{c.ID, b.ID, a.ID}) {
		t.Errorf("recent with superseded = %v, want C, B, A", got)
	}
	if n, _ := db.CountCurrent(ctx); n != 1 {
		t.Errorf("CountCurrent = %d, want 1", n)
	}

	_, err = db.Put(ctx, NewEntry{Type: TypeFact, Content: "purple", Session: "s", Supersedes: a.ID})
	var se *SupersededError
	if !errors.As(err, &se) || se.ID != a.ID || se.By != b.ID {
		t.Errorf("superseding A again: %v, want SupersededError{A, B}", err)
	}
	_, err = db.Put(ctx, NewEntry{Type: TypeFact, Content: "purple", Session: "s", Supersedes: "mem-nope"})
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("superseding an unknown id: %v, want ErrNotFound", err)
	}
	if n, _ := db.CountCurrent(ctx); n != 1 {
		t.Errorf("a refused supersede stored something: CountCurrent = %d", n)
	}

	// Another group's database, in another file.
	other := openTestDB(t, "other")
	o := put(t, other, NewEntry{Content: "other group's colour"})
	if _, err := db.Put(ctx, NewEntry{Type: TypeFact, Content: "x", Session: "s", Supersedes: o.ID}); !errors.Is(err, ErrNotFound) {
		t.Errorf("superseding another group's id: %v, want ErrNotFound", err)
	}
	if _, err := other.Put(ctx, NewEntry{Type: TypeFact, Content: "x", Session: "s", Supersedes: c.ID}); !errors.Is(err, ErrNotFound) {
		t.Errorf("superseding main's id from other: %v, want ErrNotFound", err)
	}
	if gotO, _ := other.Get(ctx, o.ID); gotO.SupersededBy != "" {
		t.Error("the other group's entry was superseded")
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestStoreOtherGroupRowsInvisible puts rows of another group into the
// file with raw SQL: no method may see, change or delete them.
func TestStoreOtherGroupRowsInvisible(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t, "main")
	mine := putAt(t, db, 0, "secret recipe pasta", "shared")
	insertRaw(t, db, "mem-foreign", "intruder", "secret recipe sushi", "")
	insertRaw(t, db, "mem-foreign-old", "intruder", "secret recipe old", "mem-foreign")
	// A foreign row claiming to have been superseded by one of ours.
	insertRaw(t, db, "mem-foreign-pointer", "intruder", "secret pointer", mine.ID)
	if _, err := db.w.Exec(`UPDATE memory_entries SET superseded_at = ? WHERE group_name = 'intruder' AND superseded_by IS NOT NULL`,
		t0.Format(timeLayout)); err != nil {
		t.Fatal(err)
	}

	if _, err := db.Get(ctx, "mem-foreign"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(foreign) = %v, want ErrNotFound", err)
	}
	for _, q := range []Query{
		{Text: "secret recipe"}, {}, {Tags: []string{"shared"}},
		{IncludeSuperseded: true}, {Text: "secret", IncludeSuperseded: true}, {Type: TypeFact},
	} {
		if got := ids(search(t, db, q)); !slices.Equal(got, []string{mine.ID}) {
			t.Errorf("Search(%+v) = %v, want only our entry", q, got)
		}
	}
	for _, q := range []Query{{Text: "sushi"}, {Text: "old pointer", IncludeSuperseded: true}} {
		if got := ids(search(t, db, q)); len(got) != 0 {
			t.Errorf("Search(%+v) = %v, want nothing", q, got)
		}
	}
	if es, err := db.BriefEntries(ctx, 50); err != nil || !slices.Equal(entryIDs(es), []string{mine.ID}) {
		t.Errorf("BriefEntries = %v, %v; want only our entry", entryIDs(es), err)
	}
	if n, err := db.CountCurrent(ctx); err != nil || n != 1 {
		t.Errorf("CountCurrent = %d, %v; want 1", n, err)
	}
	if _, err := db.Put(ctx, NewEntry{Type: TypeFact, Content: "x", Session: "s", Supersedes: "mem-foreign"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("superseding a foreign row: %v, want ErrNotFound", err)
	}
	if _, err := db.Delete(ctx, "mem-foreign"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Delete(foreign) = %v, want ErrNotFound", err)
	}
	// Deleting our entry must not restore or re-point the foreign row.
	restored, err := db.Delete(ctx, mine.ID)
	if err != nil || len(restored) != 0 {
		t.Errorf("Delete(mine) = %v, %v; want nothing restored", restored, err)
	}
	if n, err := db.PurgeSuperseded(ctx, t0.Add(1000*time.Hour)); err != nil || n != 0 {
		t.Errorf("PurgeSuperseded = %d, %v; want 0 (foreign rows untouched)", n, err)
	}
	var n int
	if err := db.w.QueryRow(`SELECT count(*) FROM memory_entries WHERE group_name = 'intruder' AND superseded_by IS NOT NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("%d foreign rows still superseded, want 2", n)
	}
}

func TestStoreSearchHostileText(t *testing.T) {
	db := openTestDB(t, "main")
	e := map[string]Entry{}
	for i, c := range []struct{ key, content string }{
		{"dog", "my dog is named luna"},
		{"cat", "the cat sleeps all day"},
		{"near", "we live near the river"},
		{"content", "content strategy meeting"},
		{"and", "salt and pepper"},
		{"not", "do not disturb"},
		{"quote", `she said "hello" to me`},
		{"other", "unrelated words only"},
	} {
		e[c.key] = putAt(t, db, i, c.content, "tagged")
	}
	tests := []struct {
		hostile, words string
		want           []string // keys of e, any order
	}{
		{`NEAR(dog cat)`, "near dog cat", []string{"dog", "cat", "near"}},
		{`NEAR(dog cat, 2)`, "near dog cat 2", []string{"dog", "cat", "near"}},
		{`content:luna`, "content luna", []string{"dog", "content"}},
		{`tags:river`, "tags river", []string{"near"}},
		{`{content tags}: luna`, "content tags luna", []string{"dog", "content"}},
		{`- content : luna`, "content luna", []string{"dog", "content"}},
		{`dog AND cat`, "dog and cat", []string{"dog", "cat", "and"}},
		{`dog NOT cat`, "dog not cat", []string{"dog", "cat", "not"}},
		{`dog OR`, "dog or", []string{"dog"}},
		{`AND`, "and", []string{"and"}},
		{`NOT`, "not", []string{"not"}},
		{`OR`, "or", nil},
		{`"dog`, "dog", []string{"dog"}},
		{`dog"`, "dog", []string{"dog"}},
		{`luna" OR "pepper`, "luna or pepper", []string{"dog", "and"}},
		{`"hello"`, "hello", []string{"quote"}},
		{`dog*`, "dog", []string{"dog"}},
		{`do*`, "do", []string{"not"}},
		{`^dog`, "dog", []string{"dog"}},
		{`+dog -cat`, "dog cat", []string{"dog", "cat"}},
		{`(dog OR cat`, "dog or cat", []string{"dog", "cat"}},
		{`dog)) OR ((cat`, "dog or cat", []string{"dog", "cat"}},
		{`dog' ; DROP TABLE memory_entries; --`, "dog drop table memory entries", []string{"dog"}},
		{`dog\x00cat`, "dog x00cat", []string{"dog"}},
		{"dog\x00cat", "dog cat", []string{"dog", "cat"}},
		{`rowid:1`, "rowid 1", nil},
		{`memory_fts:dog`, "memory fts dog", []string{"dog"}},
		{`*`, "", allKeys},
		{`"`, "", allKeys},
		{`"" ''`, "", allKeys},
		{`():^*-+{}`, "", allKeys},
		{`   `, "", allKeys},
		{`DOG Luna`, "dog luna", []string{"dog"}},
	}
	for _, tc := range tests {
		t.Run(tc.hostile, func(t *testing.T) {
			for _, include := range []bool{false, true} {
				hostile := search(t, db, Query{Text: tc.hostile, IncludeSuperseded: include})
				plain := search(t, db, Query{Text: tc.words, IncludeSuperseded: include})
				if !slices.Equal(ids(hostile), ids(plain)) {
					t.Errorf("%q found %v, but %q found %v", tc.hostile, ids(hostile), tc.words, ids(plain))
				}
				for i := range min(len(hostile), len(plain)) {
					if hostile[i].Relevance != plain[i].Relevance {
						t.Errorf("relevance %v != %v", hostile[i].Relevance, plain[i].Relevance)
					}
				}
				want := []string{}
				for _, k := range tc.want {
					want = append(want, e[k].ID)
				}
				if !sameSet(ids(hostile), want) {
					t.Errorf("%q found %v, want %v", tc.hostile, ids(hostile), tc.want)
				}
			}
		})
	}
}

// allKeys are the keys of TestStoreSearchHostileText's entries: a text
// without words lists them all.
var allKeys = []string{"dog", "cat", "near", "content", "and", "not", "quote", "other"}

func TestStoreSearchManyWords(t *testing.T) {
	db := openTestDB(t, "main")
	first := putAt(t, db, 0, "alpha")
	putAt(t, db, 1, "omega")
	var words []string
	words = append(words, "alpha")
	for i := range 200 {
		words = append(words, fmt.Sprintf("w%d", i))
	}
	words = append(words, "omega") // beyond the 32-word cap
	got := ids(search(t, db, Query{Text: strings.Join(words, " ")}))
	if !slices.Equal(got, []string{first.ID}) {
		t.Errorf("found %v, want only the entry of the first word", got)
	}
	var hostile strings.Builder
	for i := range 40 {
		fmt.Fprintf(&hostile, "(\"NEAR%d* ", i)
	}
	long := hostile.String() + "alpha"
	if got := ids(search(t, db, Query{Text: long})); len(got) != 0 {
		t.Errorf("found %v: the word past the cap counted", got)
	}
}

// TestStoreSearchFiltersBeforeLimit: more than limit recent entries that
// the filters exclude, and one old entry they keep, which must be found.
func TestStoreSearchFiltersBeforeLimit(t *testing.T) {
	db := openTestDB(t, "main")
	old := put(t, db, NewEntry{Type: TypeInstruction, Content: "always check the calendar before meetings",
		Tags: []string{"work", "calendar"}, Time: t0})
	oldSup := putAt(t, db, 1, "calendar lives in the old app", "work", "calendar")
	put(t, db, NewEntry{Content: "calendar lives in the new app", Tags: []string{"work"}, Supersedes: oldSup.ID, Time: t0.Add(2 * time.Minute)})
	for i := range 30 {
		put(t, db, NewEntry{Type: TypeFact, Content: fmt.Sprintf("calendar calendar meeting note %d", i),
			Tags: []string{"work"}, Time: t0.Add(time.Duration(100+i) * time.Minute)})
	}
	tests := []struct {
		name string
		q    Query
		want []string
	}{
		{"tags AND", Query{Tags: []string{"work", "calendar"}, Limit: 5}, []string{old.ID}},
		{"tags AND, case and space", Query{Tags: []string{" WORK", "Calendar "}, Limit: 5}, []string{old.ID}},
		{"tags with text", Query{Text: "calendar", Tags: []string{"calendar"}, Limit: 5}, []string{old.ID}},
		{"tags with text and superseded", Query{Text: "calendar", Tags: []string{"calendar"}, IncludeSuperseded: true, Limit: 5}, []string{old.ID, oldSup.ID}},
		{"type", Query{Type: TypeInstruction, Limit: 1}, []string{old.ID}},
		{"type with text", Query{Text: "calendar", Type: TypeInstruction, Limit: 1}, []string{old.ID}},
		{"superseded only via include", Query{Text: "old", Limit: 1}, nil},
		{"include superseded", Query{Text: "old", IncludeSuperseded: true, Limit: 1}, []string{oldSup.ID}},
		{"unknown tag", Query{Tags: []string{"work", "nope"}, Limit: 5}, []string{}},
		{"too many tags for any entry", Query{Tags: []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "work"}}, []string{}},
		{"empty tags ignored", Query{Tags: []string{"", " "}, Type: TypeInstruction}, []string{old.ID}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ids(search(t, db, tc.q))
			want := tc.want
			if want == nil {
				want = []string{}
			}
			if !sameSet(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
	if hits := search(t, db, Query{Tags: []string{"work"}}); len(hits) != DefaultLimit {
		t.Errorf("limit 0 gave %d hits, want DefaultLimit %d", len(hits), DefaultLimit)
	}
}

func TestStoreSearchRecentOrder(t *testing.T) {
	db := openTestDB(t, "main")
	a := putAt(t, db, 0, "first")
	b := putAt(t, db, 5, "second")
	c := putAt(t, db, 5, "third, same time as second")
	d := putAt(t, db, 3, "fourth, older than second")
	hits := search(t, db, Query{Text: "  (( ))  "})
	if got, want := ids(hits), []string{c.ID, b.ID, d.ID, a.ID}; !slices.Equal(got, want) {
		t.Errorf("recent order = %v, want %v", got, want)
	}
	for _, h := range hits {
		if h.Relevance != 1 {
			t.Errorf("relevance without text = %v, want 1", h.Relevance)
		}
	}
	if got := ids(search(t, db, Query{Limit: 2})); !slices.Equal(got, []string{c.ID, b.ID}) {
		t.Errorf("limit 2 = %v", got)
	}
}

func TestStoreSearchRelevance(t *testing.T) {
	db := openTestDB(t, "main")
	inContent := putAt(t, db, 0, "espresso every morning")
	inTags := putAt(t, db, 1, "a hot drink at breakfast", "espresso")
	both := putAt(t, db, 2, "espresso espresso espresso", "espresso")
	for i := range 10 { // so that "espresso" is rare enough for bm25's idf to count
		putAt(t, db, 3+i, fmt.Sprintf("unrelated words %d", i))
	}
	hits := search(t, db, Query{Text: "espresso"})
	if got, want := ids(hits), []string{both.ID, inContent.ID, inTags.ID}; !slices.Equal(got, want) {
		t.Fatalf("rank order = %v, want %v (content outweighs tags)", got, want)
	}
	for i, h := range hits {
		if h.Relevance <= 0 || h.Relevance >= 1 {
			t.Errorf("relevance %v outside (0,1)", h.Relevance)
		}
		if h.Relevance != float64(int(h.Relevance*1000+0.5))/1000 {
			t.Errorf("relevance %v not rounded to 3 decimals", h.Relevance)
		}
		if i > 0 && h.Relevance > hits[i-1].Relevance {
			t.Errorf("relevance not decreasing: %v after %v", h.Relevance, hits[i-1].Relevance)
		}
	}
}

func TestRelevance(t *testing.T) {
	tests := []struct{ rank, want float64 }{
		{0, 0}, {-1, 0.5}, {-3, 0.75}, {-0.0004, 0}, {-1e9, 0.999}, {0.5, 0},
	}
	for _, tc := range tests {
		if got := relevance(tc.rank); got != tc.want {
			t.Errorf("relevance(%v) = %v, want %v", tc.rank, got, tc.want)
		}
	}
}

func TestStoreSearchInvalid(t *testing.T) {
	db := openTestDB(t, "main")
	tests := []struct {
		q     Query
		field string
	}{
		{Query{Limit: MaxLimit + 1}, "limit"},
		{Query{Limit: -1}, "limit"},
		{Query{Type: "opinion"}, "type"},
	}
	for _, tc := range tests {
		_, err := db.Search(context.Background(), tc.q)
		var inv *InvalidError
		if !errors.As(err, &inv) || inv.Field != tc.field {
			t.Errorf("Search(%+v) = %v, want InvalidError on %s", tc.q, err, tc.field)
		}
	}
	for i := range MaxLimit + 5 {
		putAt(t, db, i, "entry")
	}
	if hits := search(t, db, Query{Limit: MaxLimit}); len(hits) != MaxLimit {
		t.Errorf("limit %d gave %d", MaxLimit, len(hits))
	}
}

func TestStoreBriefEntries(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t, "main")
	f1 := put(t, db, NewEntry{Type: TypeFact, Content: "fact old", Time: t0})
	p1 := put(t, db, NewEntry{Type: TypePreference, Content: "pref old", Time: t0.Add(time.Minute)})
	f2 := put(t, db, NewEntry{Type: TypeContext, Content: "context new", Time: t0.Add(5 * time.Minute)})
	i1 := put(t, db, NewEntry{Type: TypeInstruction, Content: "instr new", Time: t0.Add(4 * time.Minute)})
	c1 := put(t, db, NewEntry{Type: TypeCorrection, Content: "corr replaced", Time: t0.Add(2 * time.Minute)})
	c2 := put(t, db, NewEntry{Type: TypeCorrection, Content: "corr", Supersedes: c1.ID, Time: t0.Add(3 * time.Minute)})

	es, err := db.BriefEntries(ctx, 50)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := entryIDs(es), []string{i1.ID, c2.ID, p1.ID, f2.ID, f1.ID}; !slices.Equal(got, want) {
		t.Errorf("brief order = %v, want %v", got, want)
	}
	es, err = db.BriefEntries(ctx, 2)
	if err != nil || !slices.Equal(entryIDs(es), []string{i1.ID, c2.ID}) {
		t.Errorf("brief limit 2 = %v, %v", entryIDs(es), err)
	}
	if es, err := db.BriefEntries(ctx, 0); err != nil || len(es) != 0 {
		t.Errorf("brief limit 0 = %v, %v; want none", entryIDs(es), err)
	}
	var inv *InvalidError
	if _, err := db.BriefEntries(ctx, -1); !errors.As(err, &inv) {
		t.Errorf("brief limit -1: %v, want InvalidError", err)
	}
	if n, err := db.CountCurrent(ctx); err != nil || n != 5 {
		t.Errorf("CountCurrent = %d, %v; want 5", n, err)
	}
}

func TestStoreDelete(t *testing.T) {
	ctx := context.Background()

	t.Run("plain", func(t *testing.T) {
		db := openTestDB(t, "main")
		a := putAt(t, db, 0, "unique zebra words")
		restored, err := db.Delete(ctx, a.ID)
		if err != nil || len(restored) != 0 {
			t.Fatalf("Delete = %v, %v", restored, err)
		}
		if _, err := db.Get(ctx, a.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get after Delete = %v", err)
		}
		if hits := search(t, db, Query{Text: "zebra", IncludeSuperseded: true}); len(hits) != 0 {
			t.Errorf("deleted entry still found")
		}
		if _, err := db.Delete(ctx, a.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("second Delete = %v, want ErrNotFound", err)
		}
	})

	t.Run("head of chain restores its predecessor", func(t *testing.T) {
		db := openTestDB(t, "main")
		a := putAt(t, db, 0, "colour blue")
		b := put(t, db, NewEntry{Content: "colour green", Supersedes: a.ID, Time: t0.Add(time.Minute)})
		restored, err := db.Delete(ctx, b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(restored, []string{a.ID}) {
			t.Errorf("restored = %v, want [A]", restored)
		}
		gotA, _ := db.Get(ctx, a.ID)
		if gotA.SupersededBy != "" || !gotA.SupersededAt.IsZero() {
			t.Errorf("A not current again: %+v", gotA)
		}
		if got := ids(search(t, db, Query{Text: "colour"})); !slices.Equal(got, []string{a.ID}) {
			t.Errorf("search after delete = %v, want A", got)
		}
		// A is current: it can be superseded again.
		put(t, db, NewEntry{Content: "colour red", Supersedes: a.ID})
	})

	t.Run("middle of chain re-points", func(t *testing.T) {
		db := openTestDB(t, "main")
		a := putAt(t, db, 0, "colour blue")
		b := put(t, db, NewEntry{Content: "colour green", Supersedes: a.ID, Time: t0.Add(time.Minute)})
		c := put(t, db, NewEntry{Content: "colour red", Supersedes: b.ID, Time: t0.Add(2 * time.Minute)})
		restored, err := db.Delete(ctx, b.ID)
		if err != nil || len(restored) != 0 {
			t.Fatalf("Delete(B) = %v, %v; want nothing restored", restored, err)
		}
		gotA, _ := db.Get(ctx, a.ID)
		if gotA.SupersededBy != c.ID || !gotA.SupersededAt.Equal(b.Created) {
			t.Errorf("A superseded by %q at %v, want C at B's time", gotA.SupersededBy, gotA.SupersededAt)
		}
		if got := ids(search(t, db, Query{Text: "colour"})); !slices.Equal(got, []string{c.ID}) {
			t.Errorf("search = %v, want C", got)
		}
		var se *SupersededError
		if _, err := db.Put(ctx, NewEntry{Type: TypeFact, Content: "x", Session: "s", Supersedes: a.ID}); !errors.As(err, &se) || se.By != c.ID {
			t.Errorf("superseding A: %v, want SupersededError by C", err)
		}
	})

	t.Run("tail of chain", func(t *testing.T) {
		db := openTestDB(t, "main")
		a := putAt(t, db, 0, "colour blue")
		b := put(t, db, NewEntry{Content: "colour green", Supersedes: a.ID, Time: t0.Add(time.Minute)})
		if restored, err := db.Delete(ctx, a.ID); err != nil || len(restored) != 0 {
			t.Fatalf("Delete(A) = %v, %v", restored, err)
		}
		gotB, _ := db.Get(ctx, b.ID)
		if gotB.SupersededBy != "" {
			t.Errorf("B changed: %+v", gotB)
		}
	})

	t.Run("several restored, sorted", func(t *testing.T) {
		db := openTestDB(t, "main")
		x := putAt(t, db, 0, "x")
		y := putAt(t, db, 1, "y")
		z := putAt(t, db, 2, "z")
		// Only raw SQL makes one entry supersede several.
		if _, err := db.w.Exec(`UPDATE memory_entries SET superseded_by = ?, superseded_at = ? WHERE id IN (?, ?)`,
			z.ID, z.Created.Format(timeLayout), x.ID, y.ID); err != nil {
			t.Fatal(err)
		}
		restored, err := db.Delete(ctx, z.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{x.ID, y.ID}
		slices.Sort(want)
		if !slices.Equal(restored, want) {
			t.Errorf("restored = %v, want %v", restored, want)
		}
	})
}

func TestStorePurgeSuperseded(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t, "main")
	a := put(t, db, NewEntry{Content: "giraffe original", Time: t0})
	b := put(t, db, NewEntry{Content: "hippo second", Supersedes: a.ID, Time: t0.Add(10 * 24 * time.Hour)})
	c := put(t, db, NewEntry{Content: "okapi third", Supersedes: b.ID, Time: t0.Add(20 * 24 * time.Hour)})
	old := put(t, db, NewEntry{Content: "ancient current entry", Time: t0.Add(-1000 * 24 * time.Hour)})

	// A was superseded at B's time (day 10), B at C's (day 20). Purging by
	// superseded_at, not created_at: a cutoff of day 10 exactly keeps A.
	n, err := db.PurgeSuperseded(ctx, b.Created)
	if err != nil || n != 0 {
		t.Fatalf("purge at day 10 = %d, %v; want 0", n, err)
	}
	n, err = db.PurgeSuperseded(ctx, t0.Add(15*24*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("purge at day 15 = %d, %v; want 1", n, err)
	}
	if _, err := db.Get(ctx, a.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("A survived the purge: %v", err)
	}
	if hits := search(t, db, Query{Text: "giraffe", IncludeSuperseded: true}); len(hits) != 0 {
		t.Errorf("a purged entry's words still match: %v", ids(hits))
	}
	if got := ids(search(t, db, Query{Text: "hippo", IncludeSuperseded: true})); !slices.Equal(got, []string{b.ID}) {
		t.Errorf("B = %v", got)
	}
	n, err = db.PurgeSuperseded(ctx, time.Now())
	if err != nil || n != 1 {
		t.Fatalf("purge now = %d, %v; want 1", n, err)
	}
	for _, e := range []Entry{c, old} {
		if _, err := db.Get(ctx, e.ID); err != nil {
			t.Errorf("current entry %q purged: %v", e.Content, err)
		}
	}
	checkIntegrity(t, db)
}

// checkIntegrity runs FTS5's and SQLite's integrity checks.
func checkIntegrity(t *testing.T, db *DB) {
	t.Helper()
	if _, err := db.w.Exec(`INSERT INTO memory_fts(memory_fts) VALUES('integrity-check')`); err != nil {
		t.Errorf("FTS integrity-check: %v", err)
	}
	var res string
	if err := db.w.QueryRow(`PRAGMA integrity_check`).Scan(&res); err != nil || res != "ok" {
		t.Errorf("PRAGMA integrity_check = %q, %v", res, err)
	}
}

func TestStoreFTSIntegrity(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t, "main")
	var current []Entry
	for i := range 60 {
		e := NewEntry{Type: Types[i%len(Types)], Content: fmt.Sprintf("entry %d about topic%d and more", i, i%7),
			Tags: []string{fmt.Sprintf("t%d", i%3)}, Time: t0.Add(time.Duration(i) * time.Hour)}
		if i%4 == 3 && len(current) > 0 {
			e.Supersedes = current[len(current)-1].ID
			current = current[:len(current)-1]
		}
		current = append(current, put(t, db, e))
		if i%9 == 8 {
			if _, err := db.Delete(ctx, current[0].ID); err != nil {
				t.Fatal(err)
			}
			current = current[1:]
		}
	}
	checkIntegrity(t, db)
	if _, err := db.PurgeSuperseded(ctx, t0.Add(30*time.Hour)); err != nil {
		t.Fatal(err)
	}
	checkIntegrity(t, db)
	// The index agrees with the table: every current entry is found by its
	// own words, and counts match.
	for _, e := range current {
		hits := search(t, db, Query{Text: strings.Fields(e.Content)[1], IncludeSuperseded: true})
		if !slices.Contains(ids(hits), e.ID) {
			t.Errorf("%s not found by its number", e.ID)
		}
	}
	var inIndex, inTable int
	if err := db.w.QueryRow(`SELECT count(*) FROM memory_fts WHERE memory_fts MATCH '"entry"'`).Scan(&inIndex); err != nil {
		t.Fatal(err)
	}
	if err := db.w.QueryRow(`SELECT count(*) FROM memory_entries`).Scan(&inTable); err != nil {
		t.Fatal(err)
	}
	if inIndex != inTable {
		t.Errorf("index has %d rows, table %d", inIndex, inTable)
	}
}

// TestStoreConcurrent: goroutines storing, searching, reading and deleting
// at once, under -race, without SQLITE_BUSY.
func TestStoreConcurrent(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t, "main")
	const workers, ops = 8, 50
	errs := make(chan error, workers*ops)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var mine []string
			for i := range ops {
				var err error
				switch i % 5 {
				case 0, 1:
					n := NewEntry{Type: TypeFact, Content: fmt.Sprintf("worker %d op %d shared words", w, i),
						Tags: []string{fmt.Sprintf("w%d", w)}, Session: "s"}
					if len(mine) > 0 && i%10 == 1 {
						n.Supersedes = mine[len(mine)-1]
						mine = mine[:len(mine)-1]
					}
					var e Entry
					if e, err = db.Put(ctx, n); err == nil {
						mine = append(mine, e.ID)
					}
				case 2:
					_, err = db.Search(ctx, Query{Text: "shared words", Tags: []string{fmt.Sprintf("w%d", w)}})
				case 3:
					if len(mine) > 0 {
						_, err = db.Delete(ctx, mine[0])
						mine = mine[1:]
					} else {
						_, err = db.BriefEntries(ctx, 50)
					}
				case 4:
					if _, err = db.Search(ctx, Query{}); err == nil {
						_, err = db.CountCurrent(ctx)
					}
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d op %d: %w", w, i, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checkIntegrity(t, db)
}

// TestStoreTwoHandlesOneFile: two DBs on one file (two processes, say)
// write at once; busy_timeout and immediate transactions serialise them.
func TestStoreTwoHandlesOneFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "main.sqlite")
	dbs := []*DB{openTestDBAt(t, path, "main"), openTestDBAt(t, path, "main")}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for k, db := range dbs {
		wg.Go(func() {
			for i := range 25 {
				e, err := db.Put(ctx, NewEntry{Type: TypeFact, Content: fmt.Sprintf("handle %d entry %d", k, i), Session: "s"})
				if err == nil && i%2 == 0 {
					_, err = db.Put(ctx, NewEntry{Type: TypeFact, Content: "replacement", Session: "s", Supersedes: e.ID})
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n, err := dbs[0].CountCurrent(ctx); err != nil || n != 50 {
		t.Errorf("CountCurrent = %d, %v; want 50", n, err)
	}
}

func TestStoreContextCancelled(t *testing.T) {
	db := openTestDB(t, "main")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := db.Put(ctx, NewEntry{Type: TypeFact, Content: "x", Session: "s"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with a cancelled context = %v", err)
	}
	if _, err := db.Search(ctx, Query{Text: "x"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Search with a cancelled context = %v", err)
	}
	if n, err := db.CountCurrent(context.Background()); err != nil || n != 0 {
		t.Errorf("CountCurrent = %d, %v", n, err)
	}
}

// Entries holding every word come first, best ranked first; entries holding
// only some fill the rest, most recently stored first; filters and the
// limit apply to both.
func TestSearchAllWordsFirstThenRecentPartial(t *testing.T) {
	db := openTestDB(t, "main")
	both1 := putAt(t, db, 1, "the dog luna likes the beach")
	dogOld := putAt(t, db, 2, "a dog")
	both2 := putAt(t, db, 3, "luna luna the dog dog")
	lunaNew := putAt(t, db, 4, "luna the cat")
	dogNew := putAt(t, db, 5, "dog food", "shopping")
	putAt(t, db, 6, "nothing relevant here")

	got := search(t, db, Query{Text: "dog luna"})
	want := []string{both2.ID, both1.ID, dogNew.ID, lunaNew.ID, dogOld.ID}
	if !slices.Equal(ids(got), want) {
		t.Errorf("dog luna = %v, want %v", ids(got), want)
	}
	for i, h := range got {
		if all := i < 2; h.Relevance >= 1 || h.Relevance < 0.05 || all != (h.Relevance >= 0.5) {
			t.Errorf("hit %d relevance %v: want 0.5–0.999 for every word, 0.05–0.5 for some", i, h.Relevance)
		}
	}
	if got[0].Relevance < got[1].Relevance {
		t.Errorf("entries holding every word are not best first: %v, %v", got[0].Relevance, got[1].Relevance)
	}
	if got := search(t, db, Query{Text: "dog luna", Limit: 3}); !slices.Equal(ids(got), want[:3]) {
		t.Errorf("limit 3 = %v, want %v", ids(got), want[:3])
	}
	if got := search(t, db, Query{Text: "dog luna", Limit: 1}); !slices.Equal(ids(got), want[:1]) {
		t.Errorf("limit 1 = %v, want %v", ids(got), want[:1])
	}
	if got := search(t, db, Query{Text: "dog luna", Tags: []string{"shopping"}}); !slices.Equal(ids(got), []string{dogNew.ID}) {
		t.Errorf("with a tag = %v, want [%s]", ids(got), dogNew.ID)
	}
	// Superseding hides an entry from both parts.
	put(t, db, NewEntry{Content: "no longer about the pet", Supersedes: dogNew.ID, Time: t0.Add(7 * time.Minute)})
	if got := search(t, db, Query{Text: "dog luna"}); slices.Contains(ids(got), dogNew.ID) {
		t.Errorf("a superseded entry is found: %v", ids(got))
	}
	// No entry holds every word: partial matches, newest first.
	if got := search(t, db, Query{Text: "cat beach"}); !slices.Equal(ids(got), []string{lunaNew.ID, both1.ID}) {
		t.Errorf("cat beach = %v, want [%s %s]", ids(got), lunaNew.ID, both1.ID)
	}
}
