package sqlitedb

import (
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
