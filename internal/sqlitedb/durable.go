package sqlitedb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
)

// Durable opens dsn with the SQLite driver registered as driverName
// ("sqlite3": mattn/go-sqlite3, linked by the binary) so that every
// connection it makes, the first and any that replaces it, runs PRAGMA
// fullfsync = ON before its first use. On macOS fsync only hands the data
// to the drive, whose cache a power cut empties; F_FULLFSYNC waits until
// the drive has stored it, so a commit with synchronous=FULL is durable
// only with it. Elsewhere SQLite has no F_FULLFSYNC and the pragma changes
// nothing. (The DSN cannot say it, and a pragma run once on a pool would
// not reach a connection opened later.)
func Durable(driverName, dsn string) (*sql.DB, error) {
	probe, err := sql.Open(driverName, "")
	if err != nil {
		return nil, err
	}
	d := probe.Driver()
	_ = probe.Close() // it never connected
	return sql.OpenDB(fullFsyncConnector{d: d, dsn: dsn}), nil
}

// fullFsyncConnector is Durable's driver.Connector.
type fullFsyncConnector struct {
	d   driver.Driver
	dsn string
}

// Connect implements driver.Connector.
func (c fullFsyncConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.d.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	ex, ok := conn.(driver.ExecerContext)
	if !ok {
		conn.Close()
		return nil, errors.New("the SQLite driver's connection cannot run a statement by itself, so PRAGMA fullfsync cannot be set")
	}
	if _, err := ex.ExecContext(ctx, "PRAGMA fullfsync = ON", nil); err != nil {
		conn.Close()
		return nil, fmt.Errorf("set PRAGMA fullfsync: %w", err)
	}
	return conn, nil
}

// Driver implements driver.Connector.
func (c fullFsyncConnector) Driver() driver.Driver { return c.d }
