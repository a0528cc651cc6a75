package telegram

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strconv"
	"time"

	_ "github.com/mattn/go-sqlite3" // the SQLite driver (cgo)

	"github.com/carapace-dev/carapace/internal/sqlitedb"
	"github.com/carapace-dev/carapace/plugins/telegram/pairing"
)

// DBFile is the name of the plugin's database in its data folder.
const DBFile = pairing.DBFile

// migrations[i] takes the database from schema version i to i+1 (PRAGMA
// user_version), each in one transaction with the version update.
var migrations = []string{
	0: `
-- meta: owner_id (a paired owner: pairing.OwnerKey), last_update_id (the highest update handled),
-- core_started (when the core last seen started).
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

-- Every update handled, the owner's and strangers' alike: its id, what
-- kind it was and what became of it. Never its content.
CREATE TABLE updates (
    update_id   INTEGER PRIMARY KEY,
    kind        TEXT NOT NULL,
    chat_id     INTEGER NOT NULL,
    user_id     INTEGER NOT NULL,
    disposition TEXT NOT NULL,
    handled_at  INTEGER NOT NULL           -- unix ms
);

-- The owner's messages on their way to the agent, one row per prompt (a
-- burst, or what waited while the chat's session ran, merged). The text is
-- kept until the prompt is handed to the core, then cleared.
CREATE TABLE prompts (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    chat_id      INTEGER NOT NULL,
    grp          TEXT NOT NULL,
    text         TEXT NOT NULL,
    parts        INTEGER NOT NULL,
    first_update INTEGER NOT NULL,
    first_at     INTEGER NOT NULL,
    last_at      INTEGER NOT NULL,
    state        TEXT NOT NULL CHECK(state IN ('queued', 'publishing', 'published', 'started',
                     'done', 'failed', 'doubt', 'lost', 'stopped')),
    session      TEXT NOT NULL DEFAULT '',
    updated_at   INTEGER NOT NULL
);
CREATE INDEX prompts_chat ON prompts(chat_id, state, id);

-- Approval cards sent to the owner, and the random tokens of their buttons.
CREATE TABLE cards (
    confirmation TEXT PRIMARY KEY,
    args_hash    TEXT NOT NULL,
    chat_id      INTEGER NOT NULL,
    message_id   INTEGER NOT NULL DEFAULT 0,
    text         TEXT NOT NULL,
    arguments    TEXT NOT NULL,               -- as shown, for the Details button
    state        TEXT NOT NULL,               -- pending, or how it ended
    created_at   INTEGER NOT NULL
);
CREATE TABLE tokens (
    token        TEXT PRIMARY KEY,
    confirmation TEXT NOT NULL REFERENCES cards(confirmation) ON DELETE CASCADE,
    action       TEXT NOT NULL CHECK(action IN ('approve', 'deny', 'details'))
);
`,
	1: `
-- The owner's commands and button presses, recorded with their update
-- before Telegram is told to forget it, and done once their effect has
-- happened: one still pending after a crash runs again (actions.go).
CREATE TABLE actions (
    update_id  INTEGER PRIMARY KEY,
    kind       TEXT NOT NULL CHECK(kind IN ('command', 'callback')),
    chat_id    INTEGER NOT NULL,
    grp        TEXT NOT NULL,
    name       TEXT NOT NULL,             -- the command
    args       TEXT NOT NULL,             -- the command's arguments, or the button's data
    query_id   TEXT NOT NULL DEFAULT '',  -- the button press, to answer
    message_id INTEGER NOT NULL DEFAULT 0, -- the message the button was on
    state      TEXT NOT NULL CHECK(state IN ('pending', 'done')),
    updated_at INTEGER NOT NULL
);
`,
	2: `
-- The last message of a card's Details, which carries Approve and Deny
-- when the card cuts the arguments (approvals.go).
ALTER TABLE cards ADD COLUMN details_message INTEGER NOT NULL DEFAULT 0;
`,
	3: `
-- The digest of the preview a card showed (a tool that declares one: a
-- mail to send), which an approval from the card must carry.
ALTER TABLE cards ADD COLUMN preview_digest TEXT NOT NULL DEFAULT '';
`,
	4: `
-- Each chat's conversation generation: /new moves it on (to the update id
-- of the /new, so that doing the command again after a crash sets the
-- same value), and the chat's messages name the conversation with it
-- (conversationName).
CREATE TABLE conversations (
    chat_id    INTEGER PRIMARY KEY,
    generation INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
`,
}

// metaCoreStarted keeps when the core the plugin last saw started
// (RFC 3339), to tell a restarted core from the same one.
const metaCoreStarted = "core_started"

// Prompt states. A prompt is queued until it is handed to the core
// (publishing, then published), started once the core says its session
// runs, and ends done (answered), failed (the core refused it), doubt
// (the plugin died while handing it over: it may or may not have reached
// the core, and is not sent again), lost (the core restarted before it
// answered) or stopped (the owner gave up on it with /stop).
const (
	stQueued     = "queued"
	stPublishing = "publishing"
	stPublished  = "published"
	stStarted    = "started"
	stDone       = "done"
	stFailed     = "failed"
	stDoubt      = "doubt"
	stLost       = "lost"
	stStopped    = "stopped"
)

// store is the plugin's SQLite database: WAL, synchronous=FULL (but see
// setPromptRelaxed), one connection (every write is serialised anyway, and the
// plugin is small).
type store struct {
	db *sql.DB
}

// openStore opens (creating) the database in dir and migrates it.
func openStore(ctx context.Context, dir string) (*store, error) {
	db, err := sqlitedb.Open(ctx, filepath.Join(dir, DBFile), "telegram", migrations)
	if err != nil {
		return nil, err
	}
	return &store{db: db}, nil
}

func (s *store) close() error { return s.db.Close() }

// tx runs f in a transaction, committed if f returns nil.
func (s *store) tx(ctx context.Context, f func(*sql.Tx) error) error {
	return sqlitedb.Tx(ctx, s.db, f)
}

// txRelaxed is tx whose commit does not wait for the disk
// (sqlitedb.TxRelaxed): it survives the death of the plugin, and the next
// full commit makes it durable.
func (s *store) txRelaxed(ctx context.Context, f func(*sql.Tx) error) error {
	return sqlitedb.TxRelaxed(ctx, s.db, f)
}

// keyDurable is the meta row a full commit writes to make the relaxed
// commits before it durable (syncUpdate): the last update id so synced.
const keyDurable = "durable_update"

// syncUpdate makes every commit before it durable, with a full commit of
// its own: the record of update id, committed relaxed, before Telegram
// is told to forget the update.
func (s *store) syncUpdate(ctx context.Context, id int64) error {
	return s.tx(ctx, func(tx *sql.Tx) error { return setMeta(ctx, tx, keyDurable, formatID(id)) })
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// meta returns a meta value, "" if unset.
func (s *store) meta(ctx context.Context, key string) (string, error) {
	var v string
	err := s.db.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = ?", key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

// metaInt returns a meta value as an integer, 0 if unset.
func (s *store) metaInt(ctx context.Context, key string) (int64, error) {
	v, err := s.meta(ctx, key)
	if err != nil || v == "" {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

func setMeta(ctx context.Context, tx *sql.Tx, key, value string) error {
	_, err := tx.ExecContext(ctx, "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", key, value)
	return err
}

// recordUpdate records update id as handled, in tx: false if it already
// was (a redelivery, to be skipped). It advances last_update_id.
func recordUpdate(ctx context.Context, tx *sql.Tx, u updateInfo, disposition string, now time.Time) (bool, error) {
	res, err := tx.ExecContext(ctx, "INSERT OR IGNORE INTO updates(update_id, kind, chat_id, user_id, disposition, handled_at) VALUES(?, ?, ?, ?, ?, ?)",
		u.ID, u.Kind, u.Chat, u.User, disposition, ms(now))
	if err != nil {
		return false, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES('last_update_id', ?)
		ON CONFLICT(key) DO UPDATE SET value = CAST(max(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER)) AS TEXT)`, strconv.FormatInt(u.ID, 10))
	return true, err
}

// prompt is one row of prompts.
type prompt struct {
	ID          int64
	Chat        int64
	Group       string
	Text        string
	Parts       int
	FirstUpdate int64
	FirstAt     time.Time
	LastAt      time.Time
	State       string
	Session     string
}

// maxPrompt bounds one merged prompt (bytes): a longer burst is split
// into several prompts, which go one after the other. An event is at most
// 64 KiB.
const maxPrompt = 32 << 10

// appendPrompt adds text to the chat's last queued prompt, or starts a new
// one, in tx.
func appendPrompt(ctx context.Context, tx *sql.Tx, chat int64, group, text string, update int64, now time.Time) error {
	var id int64
	var n int
	err := tx.QueryRowContext(ctx, "SELECT id, length(CAST(text AS BLOB)) FROM prompts WHERE chat_id = ? AND state = ? AND grp = ? ORDER BY id DESC LIMIT 1",
		chat, stQueued, group).Scan(&id, &n)
	if err == nil && n+1+len(text) <= maxPrompt {
		_, err = tx.ExecContext(ctx, "UPDATE prompts SET text = text || char(10) || ?, parts = parts + 1, last_at = ?, updated_at = ? WHERE id = ?",
			text, ms(now), ms(now), id)
		return err
	}
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO prompts(chat_id, grp, text, parts, first_update, first_at, last_at, state, updated_at)
		VALUES(?, ?, ?, 1, ?, ?, ?, ?, ?)`, chat, group, text, update, ms(now), ms(now), stQueued, ms(now))
	return err
}

const promptCols = "id, chat_id, grp, text, parts, first_update, first_at, last_at, state, session"

func scanPrompt(row interface{ Scan(...any) error }) (prompt, error) {
	var p prompt
	var first, last int64
	err := row.Scan(&p.ID, &p.Chat, &p.Group, &p.Text, &p.Parts, &p.FirstUpdate, &first, &last, &p.State, &p.Session)
	p.FirstAt, p.LastAt = time.UnixMilli(first), time.UnixMilli(last)
	return p, err
}

// nextQueued returns the chat's oldest queued prompt, or nil.
func (s *store) nextQueued(ctx context.Context, chat int64) (*prompt, error) {
	p, err := scanPrompt(s.db.QueryRowContext(ctx, "SELECT "+promptCols+" FROM prompts WHERE chat_id = ? AND state = ? ORDER BY id LIMIT 1", chat, stQueued))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// prompts returns the prompts in the given states, oldest first.
func (s *store) prompts(ctx context.Context, states ...string) ([]prompt, error) {
	q := "SELECT " + promptCols + " FROM prompts WHERE state IN (?" + repeat(",?", len(states)-1) + ") ORDER BY id"
	args := make([]any, len(states))
	for i, st := range states {
		args[i] = st
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []prompt
	for rows.Next() {
		p, err := scanPrompt(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// promptByID returns one prompt, or nil.
func (s *store) promptByID(ctx context.Context, id int64) (*prompt, error) {
	return s.promptByIDTx(ctx, s.db, id)
}

// promptByIDTx is promptByID in a transaction.
func (s *store) promptByIDTx(ctx context.Context, q querier, id int64) (*prompt, error) {
	p, err := scanPrompt(q.QueryRowContext(ctx, "SELECT "+promptCols+" FROM prompts WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// setPrompt moves a prompt to state (and records its session, if given).
// The text is cleared once the prompt is handed over or ends: it is kept
// only as long as it may still have to be sent.
func (s *store) setPrompt(ctx context.Context, id int64, state, session string, now time.Time) error {
	return setPromptTx(ctx, s.db, id, state, session, now)
}

// setPromptRelaxed is setPrompt in a transaction whose commit does not
// wait for the disk (sqlitedb.TxRelaxed). It is for the states a prompt
// takes once it is with the core — published, started, done — and
// nothing else: a crash of the plugin or of the core finds them, and a
// power loss (which ends the core's sessions too) may take them back as
// far as "publishing", which is committed in full before the prompt goes
// to the core. The owner is then told the prompt may not have reached the
// agent, or that it was lost; it is never sent to the agent again.
func (s *store) setPromptRelaxed(ctx context.Context, id int64, state, session string, now time.Time) error {
	return sqlitedb.TxRelaxed(ctx, s.db, func(tx *sql.Tx) error { return setPromptTx(ctx, tx, id, state, session, now) })
}

// setPromptTx is setPrompt in a transaction.
func setPromptTx(ctx context.Context, q querier, id int64, state, session string, now time.Time) error {
	keep := state == stQueued || state == stPublishing
	_, err := q.ExecContext(ctx, `UPDATE prompts SET state = ?, session = CASE WHEN ? = '' THEN session ELSE ? END,
		text = CASE WHEN ? THEN text ELSE '' END, updated_at = ? WHERE id = ?`, state, session, session, keep, ms(now), id)
	return err
}

// stopQueued stops every queued prompt, clearing its text, and closes
// every pending action (for an owner who is no longer one); it returns
// how many there were.
func (s *store) stopQueued(ctx context.Context, now time.Time) (int64, error) {
	var n int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE prompts SET state = ?, text = '', updated_at = ? WHERE state = ?", stStopped, ms(now), stQueued)
		if err != nil {
			return err
		}
		p, _ := res.RowsAffected()
		if res, err = tx.ExecContext(ctx, "UPDATE actions SET state = 'done', updated_at = ? WHERE state = 'pending'", ms(now)); err != nil {
			return err
		}
		a, _ := res.RowsAffected()
		n = p + a
		return nil
	})
	return n, err
}

// countQueued returns how many prompts wait in the chat.
func (s *store) countQueued(ctx context.Context, chat int64) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM prompts WHERE chat_id = ? AND state = ?", chat, stQueued).Scan(&n)
	return n, err
}

// prune forgets what is no longer needed: updates older than 30 days
// (but the newest), prompts, cards and actions that ended over 7 days
// ago.
func (s *store) prune(ctx context.Context, now time.Time) error {
	month, week := ms(now.Add(-30*24*time.Hour)), ms(now.Add(-7*24*time.Hour))
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "DELETE FROM updates WHERE handled_at < ? AND update_id < (SELECT max(update_id) FROM updates)", month); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM prompts WHERE state IN ('done','failed','doubt','lost','stopped') AND updated_at < ?", week); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM actions WHERE state = 'done' AND updated_at < ?", week); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "DELETE FROM cards WHERE state != 'pending' AND created_at < ?", week)
		return err
	})
}

// generation returns the chat's conversation generation, 0 before any
// /new.
func (s *store) generation(ctx context.Context, chat int64) (int64, error) {
	var g int64
	err := s.db.QueryRowContext(ctx, "SELECT generation FROM conversations WHERE chat_id = ?", chat).Scan(&g)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return g, err
}

// newGeneration moves the chat's conversation generation on to gen (the
// update id of the /new that asks for it), never back: setting it again
// to the same gen, as a /new done again after a crash does, changes
// nothing.
func (s *store) newGeneration(ctx context.Context, chat, gen int64, now time.Time) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO conversations(chat_id, generation, updated_at) VALUES(?, ?, ?)
		ON CONFLICT(chat_id) DO UPDATE SET generation = max(generation, excluded.generation), updated_at = excluded.updated_at`, chat, gen, ms(now))
	return err
}

// conversationName is the conversation a chat's messages continue, in
// generation gen: "telegram:CHAT" before any /new (the name every chat
// had before /new existed, so that their conversations go on),
// "telegram:CHAT:GEN" after.
func conversationName(chat, gen int64) string {
	if gen == 0 {
		return "telegram:" + strconv.FormatInt(chat, 10)
	}
	return "telegram:" + strconv.FormatInt(chat, 10) + ":" + strconv.FormatInt(gen, 10)
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}
