package provenance

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/carapace-dev/carapace/internal/atomicfile"
)

// Conversations keeps the taint of named conversations, across sessions
// and across restarts of the core: a session that resumes a conversation
// has the earlier sessions' transcript in its model's context, untrusted
// text included, so the conversation's first taint taints it from its
// start.
//
// A record is one file per conversation, <dir>/<id>.json, written
// atomically (internal/atomicfile) the moment the conversation is first
// tainted. dir is the core's own (core/home's ConversationsDir): never a
// folder mounted into an agent's container or a plugin's sandbox, so that
// neither can remove a record. It is safe for concurrent use.
type Conversations struct {
	dir string
	mu  sync.Mutex
}

// ConversationTaint is a conversation's record: its first taint and the
// session that received it.
type ConversationTaint struct {
	Taint
	Session string `json:"session"`
}

// MaxRecord bounds a record's file: a larger one is not read (and counts
// as unreadable).
const MaxRecord = 16 << 10

// conversationRE is what a conversation id may be: the core derives it
// (a UUID), and it becomes a file name.
var conversationRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// ErrBadConversation is returned for an id that is not a conversation
// id (a lowercase UUID).
var ErrBadConversation = errors.New("a conversation id is a lowercase UUID")

// NewConversations returns the records kept in dir, which it creates
// (mode 0700) if it is missing.
func NewConversations(dir string) (*Conversations, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("conversation taint records: %w", err)
	}
	return &Conversations{dir: dir}, nil
}

func (c *Conversations) path(id string) (string, error) {
	if !conversationRE.MatchString(id) {
		return "", fmt.Errorf("conversation %q: %w", id, ErrBadConversation)
	}
	return filepath.Join(c.dir, id+".json"), nil
}

// Record records t, received by session, as conversation id's taint,
// unless the conversation has one already (the first taint is kept). It
// returns true when it wrote the record; the record is on disk when it
// returns.
func (c *Conversations) Record(id, session string, t Taint) (written bool, err error) {
	p, err := c.path(id)
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok, err := c.read(p); ok || err != nil && !errors.Is(err, errUnreadable) {
		return false, err
	}
	t.Earlier = false
	t.Time = t.Time.UTC()
	b, err := json.Marshal(ConversationTaint{Taint: t, Session: session})
	if err != nil {
		return false, fmt.Errorf("conversation %s: %w", id, err)
	}
	if err := atomicfile.Write(p, b, 0o600); err != nil {
		return false, fmt.Errorf("record conversation %s's taint: %w", id, err)
	}
	return true, nil
}

// errUnreadable marks a record that exists but cannot be read.
var errUnreadable = errors.New("unreadable conversation taint record")

// Lookup returns conversation id's taint, if it has one, with Earlier
// set. A record that exists but cannot be read is an error (the caller
// treats the conversation as tainted: fail closed).
func (c *Conversations) Lookup(id string) (ConversationTaint, bool, error) {
	p, err := c.path(id)
	if err != nil {
		return ConversationTaint{}, false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.read(p)
}

func (c *Conversations) read(p string) (ConversationTaint, bool, error) {
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return ConversationTaint{}, false, nil
	}
	if err != nil {
		return ConversationTaint{}, false, fmt.Errorf("%w %s: %w", errUnreadable, p, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxRecord+1))
	if err != nil || len(b) > MaxRecord {
		return ConversationTaint{}, false, fmt.Errorf("%w %s: unreadable or larger than %d bytes", errUnreadable, p, MaxRecord)
	}
	var ct ConversationTaint
	if err := json.Unmarshal(b, &ct); err != nil || ct.Source == "" || ct.Time.IsZero() {
		return ConversationTaint{}, false, fmt.Errorf("%w %s: not a taint record", errUnreadable, p)
	}
	ct.Earlier = true
	return ct, true, nil
}

// Clear removes conversation id's record, if any: the conversation starts
// anew, with nothing in its model's context.
func (c *Conversations) Clear(id string) error {
	p, err := c.path(id)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("clear conversation %s's taint: %w", id, err)
	}
	return nil
}

// Unreadable is the taint of a conversation whose record cannot be read:
// it is treated as tainted, by something unknown.
func Unreadable(now time.Time) Taint {
	return Taint{Source: "something this conversation's taint record no longer says (the record is unreadable)", Time: now.UTC(), Earlier: true}
}
