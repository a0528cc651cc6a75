//go:build cgo

package memory

import (
	"database/sql"

	"github.com/mattn/go-sqlite3"
)

// cgoEnabled reports whether this binary was built with cgo, without which
// mattn/go-sqlite3 is a stub that fails every open.
const cgoEnabled = true

// fullFsync sets PRAGMA fullfsync on the writer. On macOS fsync only hands
// the data to the drive, whose cache a power cut empties; F_FULLFSYNC waits
// for the drive to store it. Elsewhere it changes nothing. (Only the cgo
// driver can set it: without cgo the store does not open.)
const fullFsync = true

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
