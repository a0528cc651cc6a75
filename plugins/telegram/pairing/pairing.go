// Package pairing is the one-time code with which the Telegram plugin
// learns who its owner is, and the owner it so learned: `carapace
// telegram pair` calls New, which writes File in the plugin's data folder;
// the owner sends /start CODE to the bot in a private chat, and the
// plugin, finding the code's hash in the file and the file not expired
// (Check), makes the sender the owner — it keeps it in its database,
// DBFile, under OwnerKey — and deletes the file. Owner reads who that is,
// and Unpair forgets them (`carapace telegram unpair`). It is its own
// package, without the plugin's dependencies, so that the command line
// need not link the plugin; it opens the database through
// internal/sqlitedb, whose driver the binary links.
package pairing

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/carapace-dev/carapace/internal/atomicfile"
	"github.com/carapace-dev/carapace/internal/sqlitedb"
)

// The plugin's database and the key under which it keeps a paired owner
// (in its table meta: key, value).
const (
	// DBFile is the name of the plugin's database in its data folder.
	DBFile = "telegram.sqlite"
	// OwnerKey is the meta key of the owner a pairing made.
	OwnerKey = "owner_id"
)

// The pairing file and its code.
const (
	// File is the pairing file's name in the data folder.
	File = "pairing.json"
	// TTL is how long a code is valid.
	TTL = 10 * time.Minute
	// CodeLength is the number of characters of a code.
	CodeLength = 10
	// CodeAlphabet has no characters that are easy to confuse (no 0/O,
	// 1/I/L): 31 symbols, so a code holds about 49.5 bits.
	CodeAlphabet = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
)

// Pairing is the content of File.
type Pairing struct {
	// CodeSHA256 is the hex SHA-256 of the code (upper case, as printed):
	// the file never holds the code itself.
	CodeSHA256 string    `json:"code_sha256"`
	CreatedAt  time.Time `json:"created_at"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// New makes a new one-time code, writes its pairing file in dataDir
// (created 0700 if missing) atomically with mode 0600, replacing any
// earlier one, and returns the code to show the user. The code expires
// TTL after now.
func New(dataDir string, now time.Time) (string, error) {
	code, err := newCode()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fmt.Errorf("telegram pairing: create %s: %w", dataDir, err)
	}
	p := Pairing{CodeSHA256: hashCode(code), CreatedAt: now.UTC(), ExpiresAt: now.Add(TTL).UTC()}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return "", err
	}
	if err := atomicfile.Write(filepath.Join(dataDir, File), append(b, '\n'), 0o600); err != nil {
		return "", fmt.Errorf("telegram pairing: %w", err)
	}
	return code, nil
}

// newCode returns CodeLength random characters of CodeAlphabet, drawn
// without modulo bias.
func newCode() (string, error) {
	var out strings.Builder
	buf := make([]byte, 64)
	for out.Len() < CodeLength {
		if _, err := rand.Read(buf); err != nil {
			return "", fmt.Errorf("telegram pairing: random code: %w", err)
		}
		for _, b := range buf {
			// 248 = 8 × 31: the bytes below it map evenly onto the alphabet.
			if b < 248 && out.Len() < CodeLength {
				out.WriteByte(CodeAlphabet[int(b)%len(CodeAlphabet)])
			}
		}
	}
	return out.String(), nil
}

// hashCode is the hex SHA-256 of a code, normalised to upper case without
// spaces or dashes (people may type it so).
func hashCode(code string) string {
	norm := strings.ToUpper(strings.NewReplacer(" ", "", "-", "").Replace(strings.TrimSpace(code)))
	sum := sha256.Sum256([]byte(norm))
	return hex.EncodeToString(sum[:])
}

// errNoPairing: there is no pairing file.
var errNoPairing = errors.New("no pairing code is pending")

// read reads the pairing file in dir: errNoPairing if there is none.
// A file that is not a regular file of ours, mode 0600 at most, is refused.
func read(dir string) (*Pairing, error) {
	path := filepath.Join(dir, File)
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNoPairing
	}
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("telegram pairing: %s must be a regular file readable only by you (mode 0600): run carapace telegram pair again", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p Pairing
	if err := json.Unmarshal(b, &p); err != nil || len(p.CodeSHA256) != 64 {
		return nil, fmt.Errorf("telegram pairing: %s is not a pairing file: run carapace telegram pair again", path)
	}
	return &p, nil
}

// Check reports whether code matches the pending pairing in dir at
// now (not expired). It never says why not: a wrong code gets no answer.
func Check(dir, code string, now time.Time) bool {
	p, err := read(dir)
	if err != nil || !now.Before(p.ExpiresAt) || now.Before(p.CreatedAt.Add(-time.Minute)) {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(hashCode(code)), []byte(strings.ToLower(p.CodeSHA256))) == 1
}

// Pending reports whether dir holds a pairing file (valid or not).
func Pending(dir string) bool {
	_, err := read(dir)
	return err == nil
}

// Owner returns the owner a pairing made, as the plugin keeps it in its
// database in dataDir: 0 when nobody paired (or the plugin never ran).
// An owner_id in config.toml is another matter: it wins over this one.
func Owner(ctx context.Context, dataDir string) (int64, error) {
	db, err := openDB(ctx, dataDir)
	if db == nil || err != nil { // no database: the plugin never ran
		return 0, err
	}
	defer db.Close()
	var v string
	err = db.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = ?", OwnerKey).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("telegram: read the owner from %s: %w", filepath.Join(dataDir, DBFile), err)
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("telegram: the owner in %s is not a user id: %q", filepath.Join(dataDir, DBFile), v)
	}
	return id, nil
}

// openDB opens the plugin's database in dataDir; nil and no error when
// there is none.
func openDB(ctx context.Context, dataDir string) (*sql.DB, error) {
	db, err := sqlitedb.OpenExisting(ctx, filepath.Join(dataDir, DBFile), "telegram")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return db, err
}

// Unpair forgets the owner a pairing made, in the plugin's database in
// dataDir, and returns who it was (0: nobody). A running plugin keeps the
// owner it read until it restarts; from then on it answers nobody until
// someone pairs again.
func Unpair(ctx context.Context, dataDir string) (int64, error) {
	db, err := openDB(ctx, dataDir)
	if db == nil || err != nil { // no database: the plugin never ran
		return 0, err
	}
	defer db.Close()
	var was int64
	err = sqlitedb.Tx(ctx, db, func(tx *sql.Tx) error {
		var v string
		switch err := tx.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = ?", OwnerKey).Scan(&v); {
		case errors.Is(err, sql.ErrNoRows):
			return nil
		case err != nil:
			return err
		}
		was, _ = strconv.ParseInt(v, 10, 64)
		_, err := tx.ExecContext(ctx, "DELETE FROM meta WHERE key = ?", OwnerKey)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("telegram: forget the owner in %s: %w", filepath.Join(dataDir, DBFile), err)
	}
	return was, nil
}
