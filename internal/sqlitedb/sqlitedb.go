// Package sqlitedb opens the SQLite databases Carapace keeps its state in
// (the Telegram plugin's, the scheduler's): WAL, synchronous=FULL with
// F_FULLFSYNC where there is one (Durable), foreign keys on, write
// transactions that take the lock at once, one connection, a schema
// brought forward by numbered migrations (PRAGMA user_version), and a WAL
// file kept at its full size, so that a commit's fsync does not also have
// to record a larger file (keepWAL). The memory plugin, which needs a
// pool of readers, opens its own, its writer through Durable.
//
// It does not link the SQLite driver (mattn/go-sqlite3, cgo): the binary
// does, with a blank import — cmd/wiring for the core, whose own
// packages build without cgo; the Telegram plugin for itself.
package sqlitedb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrNewerSchema: the database was written by a newer Carapace.
var ErrNewerSchema = errors.New("the database's schema is newer than this Carapace knows")

// Open opens (creating, 0600 in a 0700 folder) the database at path and
// migrates it: migrations[i] takes it from schema version i to i+1, each in
// one transaction with the version's update. what names the database in
// errors ("telegram", "tasks").
func Open(ctx context.Context, path, what string, migrations []string) (*sql.DB, error) {
	if err := usable(path, what); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("%s: create the folder of %s: %w", what, path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s: open %s: %w", what, path, err)
	}
	f.Close()
	db, err := Durable("sqlite3", dsn(path))
	if err != nil {
		return nil, fmt.Errorf("%s: open %s: %w", what, path, err)
	}
	db.SetMaxOpenConns(1)
	if err := migrate(ctx, db, migrations); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: open %s: %w", what, path, err)
	}
	if err := keepWAL(ctx, db, path); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: open %s: %w", what, path, err)
	}
	return db, nil
}

// fcntlPersistWAL is SQLITE_FCNTL_PERSIST_WAL, a file control opcode of
// SQLite's stable interface: with 1, closing the last connection leaves
// the WAL file where it is, at its size, instead of deleting it.
const fcntlPersistWAL = 10

// keepWAL makes the database's commits overwrite a WAL file that already
// has its full size, rather than extend one. Every commit here waits for
// an fsync of the WAL (synchronous=FULL), and an fsync that must also
// record a larger file costs about twice one that does not (`go test
// -bench Commit ./internal/sqlitedb`). In use a WAL grows to SQLite's
// checkpoint threshold (wal_autocheckpoint pages) and is then reused from
// its start, so only a young WAL pays; but SQLite deletes the file when
// the last connection closes, so every start of a plugin began young
// again. keepWAL asks SQLite to keep the file (persistWAL), and when the
// file is smaller than the threshold — a new database, or one a program
// without the setting closed last — grows it at once: empty schema
// writes, one page each, with synchronous=NORMAL (safe in WAL mode: at
// worst the last of them are lost, never the database) until the WAL has
// its size. That is once per database, about 1000 small commits (tens of
// milliseconds), and the 4 MiB on disk the WAL takes in use anyway.
func keepWAL(ctx context.Context, db *sql.DB, path string) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := persistWAL(conn); err != nil {
		return err
	}
	var pages, pageSize, version int64
	for _, q := range []struct {
		pragma string
		v      *int64
	}{{"wal_autocheckpoint", &pages}, {"page_size", &pageSize}, {"user_version", &version}} {
		if err := conn.QueryRowContext(ctx, "PRAGMA "+q.pragma).Scan(q.v); err != nil {
			return fmt.Errorf("read PRAGMA %s: %w", q.pragma, err)
		}
	}
	// The WAL's header, then a frame per page: its header and the page.
	full := 32 + pages*(24+pageSize)
	if walSize(path) >= full {
		return nil
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous = NORMAL"); err != nil {
		return fmt.Errorf("grow the WAL: %w", err)
	}
	// A hundred writes a call (the driver runs them one by one, each its
	// own transaction): a call each cost more than the write under -race.
	batch := strings.Repeat("PRAGMA user_version = "+strconv.FormatInt(version, 10)+";\n", 100)
	var werr error
	for i := int64(0); i < pages/100+2 && walSize(path) < full && werr == nil; i++ {
		_, werr = conn.ExecContext(ctx, batch)
	}
	// Back to FULL whatever happened: this is the connection the pool keeps.
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous = FULL"); err != nil {
		return fmt.Errorf("grow the WAL: set synchronous back to FULL: %w", err)
	}
	if werr != nil {
		return fmt.Errorf("grow the WAL: %w", werr)
	}
	return nil
}

// persistWAL sets SQLITE_FCNTL_PERSIST_WAL on conn (the pool holds one
// connection, which keeps it): when it is the last to close, the WAL file
// stays, at its size.
func persistWAL(conn *sql.Conn) error {
	err := conn.Raw(func(dc any) error {
		fc, ok := dc.(interface {
			SetFileControlInt(db string, op, arg int) error
		})
		if !ok {
			return fmt.Errorf("the SQLite driver's connection (%T) has no SetFileControlInt", dc)
		}
		return fc.SetFileControlInt("main", fcntlPersistWAL, 1)
	})
	if err != nil {
		return fmt.Errorf("keep the WAL file: %w", err)
	}
	return nil
}

// walSize is the size of the WAL file of the database at path, 0 if there
// is none.
func walSize(path string) int64 {
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		return 0
	}
	return fi.Size()
}

// OpenExisting opens the database at path as Open does, but neither
// creates nor migrates it: for a program that reads or edits a database
// another one keeps (the command line, the Telegram plugin's). Closing
// last, it leaves the WAL file at its size (persistWAL), but it does not
// grow one. It fails with an error wrapping fs.ErrNotExist when there is
// none.
func OpenExisting(ctx context.Context, path, what string) (*sql.DB, error) {
	if err := usable(path, what); err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	db, err := Durable("sqlite3", dsn(path))
	if err != nil {
		return nil, fmt.Errorf("%s: open %s: %w", what, path, err)
	}
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err == nil {
		err = persistWAL(conn)
		conn.Close()
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: open %s: %w", what, path, err)
	}
	return db, nil
}

// usable says why this binary cannot open a SQLite database, if it cannot.
func usable(path, what string) error {
	if !slices.Contains(sql.Drivers(), "sqlite3") {
		return fmt.Errorf("%s: this binary does not link the SQLite driver, so it cannot open %s (a build problem: import github.com/mattn/go-sqlite3 in its main package)", what, path)
	}
	if !cgoEnabled {
		return fmt.Errorf("%s: this binary was built without cgo, so it cannot open its SQLite database %s: build it with CGO_ENABLED=1 (make build does)", what, path)
	}
	return nil
}

// dsn is the driver's name of the database at path, with its settings:
// WAL, synchronous=FULL, a busy timeout (another process may hold the
// lock a moment), foreign keys, and write transactions that take the lock
// at once.
func dsn(path string) string {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL")
	q.Set("_busy_timeout", "5000")
	q.Set("_foreign_keys", "on")
	q.Set("_txlock", "immediate")
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

func migrate(ctx context.Context, db *sql.DB, migrations []string) error {
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("read the schema version: %w (is it a SQLite database? move the file away to start afresh)", err)
	}
	if v > len(migrations) {
		return fmt.Errorf("%w: version %d, this Carapace knows up to %d: update Carapace, and keep the file (it holds your data)", ErrNewerSchema, v, len(migrations))
	}
	for ; v < len(migrations); v++ {
		err := Tx(ctx, db, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, "PRAGMA user_version = "+strconv.Itoa(v+1))
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate the schema from version %d to %d: %w", v, v+1, err)
		}
	}
	return nil
}

// Tx runs f in a transaction, committed if f returns nil and rolled back
// otherwise.
func Tx(ctx context.Context, db *sql.DB, f func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	return commit(tx, f)
}

// commit runs f in tx, and commits tx if f returns nil or rolls it back.
func commit(tx *sql.Tx, f func(*sql.Tx) error) error {
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// TxRelaxed is Tx with synchronous=NORMAL for this one transaction: its
// commit does not wait for an fsync. It survives the death of any
// process — it is in the WAL, in the operating system's cache — but not
// a power loss or a crash of the system, until the next commit with
// synchronous=FULL (any Tx) or a checkpoint writes it to the disk. SQLite
// keeps the database consistent either way: a power loss at worst takes
// the last relaxed commits back, never part of one. For a state a crash
// of a process must find, where a power loss, which also ends every
// process that state is about, may go back to the one before.
func TxRelaxed(ctx context.Context, db *sql.DB, f func(*sql.Tx) error) (err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous = NORMAL"); err != nil {
		return fmt.Errorf("relax synchronous: %w", err)
	}
	defer func() {
		// The pool keeps the connection: it must go back FULL, or go.
		if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA synchronous = FULL"); rerr != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			if err == nil {
				err = fmt.Errorf("set synchronous back to FULL: %w", rerr)
			}
		}
	}()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	return commit(tx, f)
}
