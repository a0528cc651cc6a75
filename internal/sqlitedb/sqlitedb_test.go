package sqlitedb

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/mattn/go-sqlite3" // the driver, which the binary links (sqlitedb does not)
)

func TestOpenMigratesAndRefusesNewer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "x.sqlite")
	v1 := []string{"CREATE TABLE a (x INTEGER);"}
	db, err := Open(t.Context(), path, "test", v1)
	if err != nil {
		t.Fatal(err)
	}
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode %q (%v), want wal", mode, err)
	}
	if _, err := db.Exec("INSERT INTO a VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v (%v), want 0600", fi.Mode(), err)
	}

	// One more migration: applied once, the data kept.
	v2 := append(v1, "ALTER TABLE a ADD COLUMN y TEXT NOT NULL DEFAULT 'z';")
	for range 2 {
		db, err = Open(t.Context(), path, "test", v2)
		if err != nil {
			t.Fatal(err)
		}
		var y string
		if err := db.QueryRow("SELECT y FROM a WHERE x = 1").Scan(&y); err != nil || y != "z" {
			t.Fatalf("after migration: %q %v", y, err)
		}
		db.Close()
	}

	// A Carapace that knows only version 1 refuses the file, and says so.
	_, err = Open(t.Context(), path, "test", v1)
	if !errors.Is(err, ErrNewerSchema) || !strings.Contains(err.Error(), "update Carapace") {
		t.Fatalf("older Carapace on a newer file: %v", err)
	}

	// A failing migration leaves the version where it was.
	bad := append(v2, "CREATE TABLE a (x INTEGER);")
	if _, err := Open(t.Context(), path, "test", bad); err == nil || !strings.Contains(err.Error(), "from version 2 to 3") {
		t.Fatalf("bad migration: %v", err)
	}
	if db, err = Open(t.Context(), path, "test", v2); err != nil {
		t.Fatalf("after a failed migration the file is still at version 2: %v", err)
	}
	db.Close()
}

func TestOpenExisting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.sqlite")
	if _, err := OpenExisting(t.Context(), path, "test"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("no database: %v, want fs.ErrNotExist", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("OpenExisting created the database")
	}
	db, err := Open(t.Context(), path, "test", []string{"CREATE TABLE a (x INTEGER);", "INSERT INTO a VALUES (7);"})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = OpenExisting(t.Context(), path, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var x, v int
	if err := db.QueryRow("SELECT x FROM a").Scan(&x); err != nil || x != 7 {
		t.Errorf("x = %d (%v), want 7", x, err)
	}
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != 2 {
		t.Errorf("user_version %d (%v): OpenExisting must not migrate", v, err)
	}
}

// walFull is the size keepWAL grows a WAL to, read from the database.
func walFull(t testing.TB, db *sql.DB) int64 {
	t.Helper()
	var pages, size int64
	if err := db.QueryRow("PRAGMA wal_autocheckpoint").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("PRAGMA page_size").Scan(&size); err != nil {
		t.Fatal(err)
	}
	return 32 + pages*(24+size)
}

func TestOpenKeepsTheWALAtItsSize(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.sqlite")
	schema := []string{"CREATE TABLE a (x INTEGER);"}
	db, err := Open(t.Context(), path, "test", schema)
	if err != nil {
		t.Fatal(err)
	}
	full := walFull(t, db)
	grown := walSize(path)
	if grown < full {
		t.Fatalf("a new database's WAL is %d bytes, want at least %d (grown at open)", grown, full)
	}
	// The growth left the schema, the version and synchronous=FULL as they were.
	var sync, version int
	if err := db.QueryRow("PRAGMA synchronous").Scan(&sync); err != nil || sync != 2 {
		t.Errorf("synchronous = %d (%v) after the growth, want 2 (FULL)", sync, err)
	}
	if err := db.QueryRow("PRAGMA user_version").Scan(&version); err != nil || version != 1 {
		t.Errorf("user_version = %d (%v) after the growth, want 1", version, err)
	}
	for i := range 50 {
		if _, err := db.Exec("INSERT INTO a VALUES (?)", i); err != nil {
			t.Fatal(err)
		}
	}
	if got := walSize(path); got != grown {
		t.Errorf("50 commits changed the WAL's size from %d to %d: they should overwrite it", grown, got)
	}
	db.Close()
	if got := walSize(path); got != grown {
		t.Fatalf("after the last close the WAL is %d bytes, want it kept at %d", got, grown)
	}

	// Reopened: nothing to grow, the data and an intact database.
	db, err = Open(t.Context(), path, "test", schema)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var check string
	if err := db.QueryRow("SELECT count(*) FROM a").Scan(&n); err != nil || n != 50 {
		t.Errorf("%d rows (%v) after reopening, want 50", n, err)
	}
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check %q (%v)", check, err)
	}
	if got := walSize(path); got != grown {
		t.Errorf("reopening changed the WAL's size from %d to %d", grown, got)
	}
	db.Close()

	// OpenExisting, closing last, keeps it too.
	db, err = OpenExisting(t.Context(), path, "test")
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if got := walSize(path); got != grown {
		t.Errorf("after OpenExisting closed last the WAL is %d bytes, want %d", got, grown)
	}

	// The control: a connection without the setting, closing last,
	// deletes the file — which the next Open grows again.
	raw, err := sql.Open("sqlite3", dsn(path))
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.QueryRow("SELECT count(*) FROM a").Scan(&n); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	if _, err := os.Stat(path + "-wal"); !os.IsNotExist(err) {
		t.Fatalf("a plain connection closing last left the WAL (%v): the checks above prove nothing", err)
	}
	db, err = Open(t.Context(), path, "test", schema)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := walSize(path); got < full {
		t.Errorf("Open after the WAL was deleted left it at %d bytes, want at least %d", got, full)
	}
}

// BenchmarkCommit is one small synchronous=FULL commit (an INSERT) into a
// WAL that grows at every commit (young: a plain connection on a new
// database, what every start of a plugin had before keepWAL) and into one
// Open has given its size (kept). The difference is the fsync's: a file
// whose size changes has its metadata written too.
func BenchmarkCommit(b *testing.B) {
	for _, tc := range []struct {
		name string
		open func(path string) (*sql.DB, error)
	}{
		{"young", func(path string) (*sql.DB, error) {
			db, err := sql.Open("sqlite3", dsn(path))
			if err == nil {
				_, err = db.Exec("CREATE TABLE a (x INTEGER)")
			}
			return db, err
		}},
		{"kept", func(path string) (*sql.DB, error) {
			return Open(b.Context(), path, "bench", []string{"CREATE TABLE a (x INTEGER);"})
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			db, err := tc.open(filepath.Join(b.TempDir(), "x.sqlite"))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			if b.N > 900 {
				b.Fatal("a young WAL wraps after 1000 pages: run at most 900 commits (-benchtime 500x)")
			}
			b.ResetTimer()
			for i := range b.N {
				if _, err := db.Exec("INSERT INTO a VALUES (?)", i); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
