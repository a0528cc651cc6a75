package sqlitedb

import (
	"bufio"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

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
// Open has given its size (kept), and the same into a kept WAL with
// TxRelaxed (relaxed: no fsync). The difference between the first two is
// the fsync's: a file whose size changes has its metadata written too.
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
		{"relaxed", func(path string) (*sql.DB, error) {
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
				var err error
				if tc.name == "relaxed" {
					err = TxRelaxed(b.Context(), db, func(tx *sql.Tx) error {
						_, err := tx.Exec("INSERT INTO a VALUES (?)", i)
						return err
					})
				} else {
					_, err = db.Exec("INSERT INTO a VALUES (?)", i)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// synchronous reads PRAGMA synchronous through q: 1 NORMAL, 2 FULL.
func synchronous(t *testing.T, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) int {
	t.Helper()
	var v int
	if err := q.QueryRowContext(t.Context(), "PRAGMA synchronous").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestTxRelaxed(t *testing.T) {
	db, err := Open(t.Context(), filepath.Join(t.TempDir(), "x.sqlite"), "test", []string{"CREATE TABLE a (x INTEGER);"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	boom := errors.New("boom")
	for _, tc := range []struct {
		name   string
		ctx    func() context.Context
		fail   error
		wantIn int // synchronous inside the transaction; 0: f never runs
		want   error
	}{
		{"commits", t.Context, nil, 1, nil},
		{"rolls back", t.Context, boom, 1, boom},
		{"a cancelled context", func() context.Context {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			return ctx
		}, nil, 0, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := db.Exec("DELETE FROM a"); err != nil {
				t.Fatal(err)
			}
			in := 0
			err := TxRelaxed(tc.ctx(), db, func(tx *sql.Tx) error {
				in = synchronous(t, tx)
				if _, err := tx.Exec("INSERT INTO a VALUES (1)"); err != nil {
					return err
				}
				return tc.fail
			})
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("TxRelaxed = %v; want %v", err, tc.want)
			}
			if in != tc.wantIn {
				t.Errorf("synchronous inside the transaction = %d; want %d", in, tc.wantIn)
			}
			var n int
			if err := db.QueryRow("SELECT count(*) FROM a").Scan(&n); err != nil || (n == 1) != (err == nil && tc.want == nil) {
				t.Errorf("%d rows after (%v); want the row only when it committed", n, err)
			}
			// The pool's one connection is FULL again: the same query
			// that read NORMAL inside reads FULL now.
			if got := synchronous(t, db); got != 2 {
				t.Errorf("synchronous after = %d; want 2 (FULL)", got)
			}
		})
	}
}

// TestTxRelaxedSurvivesSIGKILL: a relaxed commit is in the database after
// the process that made it is killed; a transaction it had not committed
// is not (the control: the same read tells the two apart).
func TestTxRelaxedSurvivesSIGKILL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.sqlite")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "committed\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the helper said %q (%v); want committed", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("the helper exited by itself; it should have been killed")
	}
	db, err := Open(t.Context(), path, "test", []string{"CREATE TABLE a (x INTEGER);"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var got []int
	rows, err := db.Query("SELECT x FROM a ORDER BY x")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var x int
		if err := rows.Scan(&x); err != nil {
			t.Fatal(err)
		}
		got = append(got, x)
	}
	if !slices.Equal(got, []int{42}) {
		t.Fatalf("after SIGKILL the table holds %v; want [42]: the relaxed commit, not the open transaction's 43", got)
	}
}

// helperEnv names the database TestMain's helper writes to.
const helperEnv = "SQLITEDB_TEST_KILLED_HELPER"

// TestMain runs the helper of TestTxRelaxedSurvivesSIGKILL when asked:
// it commits 42 relaxed, inserts 43 in a transaction it leaves open, says
// "committed" and waits to be killed.
func TestMain(m *testing.M) {
	path := os.Getenv(helperEnv)
	if path == "" {
		os.Exit(m.Run())
	}
	ctx := context.Background()
	db, err := Open(ctx, path, "test", []string{"CREATE TABLE a (x INTEGER);"})
	if err == nil {
		err = TxRelaxed(ctx, db, func(tx *sql.Tx) error {
			_, err := tx.Exec("INSERT INTO a VALUES (42)")
			return err
		})
	}
	var tx *sql.Tx
	if err == nil {
		tx, err = db.BeginTx(ctx, nil)
	}
	if err == nil {
		_, err = tx.Exec("INSERT INTO a VALUES (43)")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	fmt.Println("committed")
	time.Sleep(time.Minute)
	os.Exit(1)
}

// TestFullFsyncOnEveryConnection: the databases Open and OpenExisting
// return run each connection with PRAGMA fullfsync on (F_FULLFSYNC on
// macOS), the one that replaces a connection the pool dropped too. The
// control: the same file opened plainly reads 0.
func TestFullFsyncOnEveryConnection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.sqlite")
	fullfsync := func(db *sql.DB) int {
		t.Helper()
		var v int
		if err := db.QueryRow("PRAGMA fullfsync").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	db, err := Open(t.Context(), path, "test", []string{"CREATE TABLE a (x INTEGER);"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v := fullfsync(db); v != 1 {
		t.Errorf("Open: fullfsync = %d, want 1", v)
	}
	// The pool drops its connection (as TxRelaxed does when it cannot set
	// synchronous back) and makes another: a setting of the first one's
	// own (cache_size) is gone from it.
	if _, err := db.Exec("PRAGMA cache_size = 1234"); err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
	var cache int
	if err := db.QueryRow("PRAGMA cache_size").Scan(&cache); err != nil || cache == 1234 {
		t.Fatalf("cache_size %d (%v): the pool kept its connection, so this proves nothing", cache, err)
	}
	if v := fullfsync(db); v != 1 {
		t.Errorf("a new connection: fullfsync = %d, want 1", v)
	}

	other, err := OpenExisting(t.Context(), path, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if v := fullfsync(other); v != 1 {
		t.Errorf("OpenExisting: fullfsync = %d, want 1", v)
	}

	plain, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if v := fullfsync(plain); v != 0 {
		t.Errorf("control: a plain connection reads fullfsync = %d, want 0 (the check above proves nothing)", v)
	}
}
