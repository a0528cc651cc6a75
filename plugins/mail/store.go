package mail

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strconv"
	"time"

	_ "github.com/mattn/go-sqlite3" // the SQLite driver (cgo)

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/internal/sqlitedb"
)

// DBFile is the name of the plugin's database in its data folder.
const DBFile = "mail.db"

// migrations[i] takes the database from schema version i to i+1.
var migrations = []string{
	0: `
-- Every send: what counts against a group's daily cap, and what keeps one
-- draft (by the digest of what it sends) from going out twice. Never the
-- content.
CREATE TABLE sends (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    grp        TEXT NOT NULL,
    day        TEXT NOT NULL,               -- UTC, YYYY-MM-DD
    account    TEXT NOT NULL,
    digest     TEXT NOT NULL,
    recipients INTEGER NOT NULL,
    state      TEXT NOT NULL CHECK(state IN ('sending', 'sent', 'failed', 'doubt')),
    at         INTEGER NOT NULL             -- unix ms
);
CREATE INDEX sends_day ON sends(grp, day);
CREATE INDEX sends_digest ON sends(digest);

-- Where each account's inbox watch stands: the folder's UIDVALIDITY and
-- the highest UID decided.
CREATE TABLE cursors (
    account     TEXT PRIMARY KEY,
    uidvalidity INTEGER NOT NULL,
    last_uid    INTEGER NOT NULL
);

-- Every new mail the watch decided on, by UIDVALIDITY and UID: published
-- (publishing until the core took it), skipped (no rule matched), or
-- doubt (the plugin stopped while handing it to the core: not sent again).
CREATE TABLE inbound (
    account     TEXT NOT NULL,
    uidvalidity INTEGER NOT NULL,
    uid         INTEGER NOT NULL,
    state       TEXT NOT NULL CHECK(state IN ('publishing', 'published', 'skipped', 'doubt', 'failed')),
    at          INTEGER NOT NULL,
    PRIMARY KEY (account, uidvalidity, uid)
);
`,
}

// store is the plugin's SQLite database.
type store struct {
	db *sql.DB
}

func openStore(ctx context.Context, dir string) (*store, error) {
	db, err := sqlitedb.Open(ctx, filepath.Join(dir, DBFile), "mail", migrations)
	if err != nil {
		return nil, err
	}
	return &store{db: db}, nil
}

func (s *store) close() error { return s.db.Close() }

func day(t time.Time) string { return t.UTC().Format("2006-01-02") }

// beginSend records a send as under way if the group's cap for today
// allows it and this digest was never sent (nor may have been): it
// returns the row's id, or the tool error that refuses the send.
func (s *store) beginSend(ctx context.Context, group, account, digest string, recipients, limit int, now time.Time) (int64, error) {
	var id int64
	err := sqlitedb.Tx(ctx, s.db, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sends WHERE digest = ? AND state IN ('sending', 'sent', 'doubt')", digest).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return toolErr(CodeAlreadySent, "draft_id", "this exact mail was sent already (or may have been, if a send broke off): it is not sent twice; write a new draft to send again")
		}
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sends WHERE grp = ? AND day = ? AND state != 'failed'", group, day(now)).Scan(&n); err != nil {
			return err
		}
		if n >= limit {
			return &plugin.ToolError{Code: CodeCapReached, Field: "draft_id", Retriable: false,
				Message: "this group's daily send cap (" + strconv.Itoa(limit) + " a day, UTC) is used up: the user may raise daily_send_cap in [plugins.mail.config] groups"}
		}
		res, err := tx.ExecContext(ctx, "INSERT INTO sends(grp, day, account, digest, recipients, state, at) VALUES(?, ?, ?, ?, ?, 'sending', ?)",
			group, day(now), account, digest, recipients, now.UnixMilli())
		if err != nil {
			return err
		}
		id, err = res.LastInsertId()
		return err
	})
	return id, err
}

// endSend records how a send ended: sent, failed (nothing left) or doubt.
func (s *store) endSend(ctx context.Context, id int64, state string) error {
	_, err := s.db.ExecContext(ctx, "UPDATE sends SET state = ? WHERE id = ?", state, id)
	return err
}

// sentToday counts a group's sends today (those that did not fail).
func (s *store) sentToday(ctx context.Context, group string, now time.Time) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM sends WHERE grp = ? AND day = ? AND state != 'failed'", group, day(now)).Scan(&n)
	return n, err
}

// recoverPublishing turns every inbound mail still "publishing" (the
// plugin stopped between deciding and the core's answer) into "doubt":
// it may have started a session, so it is never published again; and
// every send still "sending" into "doubt" (it may have gone out).
func (s *store) recoverPublishing(ctx context.Context, now time.Time) error {
	return sqlitedb.Tx(ctx, s.db, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "UPDATE inbound SET state = 'doubt', at = ? WHERE state = 'publishing'", now.UnixMilli()); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE sends SET state = 'doubt' WHERE state = 'sending'")
		return err
	})
}

// cursor returns the account's watch position; ok false if none.
func (s *store) cursor(ctx context.Context, account string) (uidvalidity uint32, last uint32, ok bool, err error) {
	err = s.db.QueryRowContext(ctx, "SELECT uidvalidity, last_uid FROM cursors WHERE account = ?", account).Scan(&uidvalidity, &last)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, false, nil
	}
	return uidvalidity, last, err == nil, err
}

// setCursor sets the account's watch position, in tx.
func setCursor(ctx context.Context, tx *sql.Tx, account string, uidvalidity, last uint32) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO cursors(account, uidvalidity, last_uid) VALUES(?, ?, ?)
		ON CONFLICT(account) DO UPDATE SET uidvalidity = excluded.uidvalidity,
		last_uid = CASE WHEN cursors.uidvalidity = excluded.uidvalidity THEN max(cursors.last_uid, excluded.last_uid) ELSE excluded.last_uid END`,
		account, uidvalidity, last)
	return err
}

// decide records the decision on one new mail, and moves the cursor past
// it, in one transaction: false if the mail was decided before (it is
// then left alone).
func (s *store) decide(ctx context.Context, account string, uidvalidity, uid uint32, state string, now time.Time) (bool, error) {
	fresh := false
	err := sqlitedb.Tx(ctx, s.db, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "INSERT OR IGNORE INTO inbound(account, uidvalidity, uid, state, at) VALUES(?, ?, ?, ?, ?)",
			account, uidvalidity, uid, state, now.UnixMilli())
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		fresh = n == 1
		return setCursor(ctx, tx, account, uidvalidity, uid)
	})
	return fresh, err
}

// setInbound records how publishing a mail ended.
func (s *store) setInbound(ctx context.Context, account string, uidvalidity, uid uint32, state string, now time.Time) error {
	_, err := s.db.ExecContext(ctx, "UPDATE inbound SET state = ?, at = ? WHERE account = ? AND uidvalidity = ? AND uid = ?",
		state, now.UnixMilli(), account, uidvalidity, uid)
	return err
}

// inboundState returns a mail's recorded state, "" if none.
func (s *store) inboundState(ctx context.Context, account string, uidvalidity, uid uint32) (string, error) {
	var st string
	err := s.db.QueryRowContext(ctx, "SELECT state FROM inbound WHERE account = ? AND uidvalidity = ? AND uid = ?", account, uidvalidity, uid).Scan(&st)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return st, err
}

// baseline sets the cursor without deciding anything (the mail already
// in the inbox when the watch first starts, or after UIDVALIDITY changed,
// is not an event).
func (s *store) baseline(ctx context.Context, account string, uidvalidity, last uint32) error {
	return sqlitedb.Tx(ctx, s.db, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO cursors(account, uidvalidity, last_uid) VALUES(?, ?, ?)
			ON CONFLICT(account) DO UPDATE SET uidvalidity = excluded.uidvalidity, last_uid = excluded.last_uid`, account, uidvalidity, last)
		return err
	})
}
