//go:build cgo

package memory

import (
	"database/sql"

	"github.com/mattn/go-sqlite3"
)

// cgoEnabled reports whether this binary was built with cgo, without which
// mattn/go-sqlite3 is a stub that fails every open.
const cgoEnabled = true

// writerDriver is the database/sql driver of the writer pool: go-sqlite3
// with PRAGMA fullfsync set on every connection it makes (fullFsync), as
// the DSN cannot say it.
const writerDriver = "sqlite3-carapace-memory-writer"

func init() {
	sql.Register(writerDriver, &sqlite3.SQLiteDriver{
		ConnectHook: func(c *sqlite3.SQLiteConn) error {
			if !fullFsync {
				return nil
			}
			_, err := c.Exec("PRAGMA fullfsync = ON", nil)
			return err
		},
	})
}
