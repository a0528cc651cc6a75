package api

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/carapace-dev/carapace/internal/textutil"
)

// Confirmation is a tool call that waits, or waited, for the user's
// decision. It is also the payload of the bus topics
// confirmation.requested and confirmation.resolved, which surface plugins
// (Telegram) receive.
type Confirmation struct {
	ID          string `json:"id"`          // 32 hex digits; people may type a unique prefix of 6 or more
	Tool        string `json:"tool"`        // the tool to run
	Group       string `json:"group"`       // the session's group
	Session     string `json:"session"`     // the session that made the call
	Correlation string `json:"correlation"` // links the call to its audit entries
	// ArgsHash is the SHA-256 of the canonical arguments; every decision
	// must send it back unchanged.
	ArgsHash string `json:"args_hash"`
	// Arguments are the call's arguments as the handler will get them,
	// byte for byte when Hidden is empty. When it is not, they are a
	// sanitised copy (a secret the agent put in them is redacted), and no
	// surface may offer Approve on them: GET
	// /v1/confirmations/{id}?raw=1 answers the arguments as they run
	// (Raw), and only a decision made on those (Decision.Raw) can approve.
	// On the watch stream they are left out (ArgumentsOmitted) when too
	// large for one event: GET /v1/confirmations/{id} has them.
	Arguments        json.RawMessage `json:"arguments,omitempty"`
	ArgumentsOmitted bool            `json:"arguments_omitted,omitempty"`
	// Hidden lists what Arguments do not show as it runs: where, what
	// kind of secret it looked like and how many characters. Empty when
	// Arguments are exactly what runs.
	Hidden []Hidden `json:"hidden,omitempty"`
	// Raw says Arguments are the arguments exactly as they run (GET
	// /v1/confirmations/{id}?raw=1), not the sanitised display: Hidden
	// then still says what the display hides.
	Raw bool `json:"raw,omitempty"`
	// Summary says what the call will do, in words, when the core can
	// (its own tools: a scheduled task's schedule and next fires); a
	// surface shows it above the arguments.
	Summary string `json:"summary,omitempty"`
	// Preview, for a tool that declares one (a mail to send), says what
	// the call will do that its arguments do not: the text its plugin
	// rendered of the exact content (for a mail, the From, every address,
	// the subject and the whole body). Every surface shows it whole,
	// above the arguments, with invisible characters escaped: it is
	// untrusted text. A surface that cannot show all of it offers Deny
	// only and says where to read it whole (carapace confirm show). On
	// the watch stream it is left out (PreviewOmitted) when too large for
	// one event: GET /v1/confirmations/{id} has it.
	Preview        string `json:"preview,omitempty"`
	PreviewOmitted bool   `json:"preview_omitted,omitempty"`
	// PreviewDigest binds the approval to the content the preview shows:
	// a decision on a confirmation with a preview must send it back
	// unchanged (Decision.PreviewDigest), and the plugin refuses to run
	// the call if its content no longer has it.
	PreviewDigest string `json:"preview_digest,omitempty"`
	// Why says why the core asks, one reason a line, when not only for
	// the tool's risk: "the URL in url was not given: …", "this session
	// read https://… at 10:42 UTC (web_fetch), so what leaves the machine
	// waits for you". Every surface shows each of them whole, above the
	// arguments.
	Why       []string  `json:"why,omitempty"`
	CreatedAt time.Time `json:"created_at"` // when the call started waiting
	ExpiresAt time.Time `json:"expires_at"` // when it counts as denied
	// Once resolved: the decision ("approved", "denied", "expired",
	// "withdrawn"), where it was made ("cli", "app", "notification",
	// "telegram"; "core" for expiry and withdrawal) and by whom, when, and
	// for a withdrawal why.
	Decision  string     `json:"decision,omitempty"`
	Surface   string     `json:"surface,omitempty"`
	Decider   string     `json:"decider,omitempty"`
	DecidedAt *time.Time `json:"decided_at,omitempty"`
	Reason    string     `json:"reason,omitempty"`
}

// Pending reports whether the confirmation still waits for a decision.
func (c Confirmation) Pending() bool { return c.Decision == "" }

// Exact reports whether c's Arguments are what runs, every byte of them
// at hand, and its Preview too if it has one: nothing hidden, nothing left
// out. A surface offers Approve only on an exact confirmation it shows in
// full, preview included (Raw arguments count: they are what runs).
func (c Confirmation) Exact() bool {
	return !c.ArgumentsOmitted && !c.PreviewOmitted && (len(c.Hidden) == 0 || c.Raw) &&
		(c.PreviewDigest == "") == (c.Preview == "")
}

// PreviewPath is the Path of a Hidden value that is not in the arguments
// but in the confirmation's Preview: the sanitiser hid part of what the
// plugin's preview says (a secret in a mail's body).
const PreviewPath = "(preview)"

// Hidden is one value a confirmation's displayed arguments do not show as
// it runs: the core's sanitiser replaced part of it with [REDACTED].
type Hidden struct {
	// Path locates the value: object keys joined with dots, [i] for an
	// array element, "" for arguments that are a single value. A key that
	// was itself redacted appears redacted.
	Path string `json:"path"`
	// Kind says what the hidden text looked like: "private-key",
	// "sensitive-key", "bearer", … (the sanitiser's kinds).
	Kind string `json:"kind"`
	// Chars is how many characters of the value are not shown; 0 when the
	// core cannot tell.
	Chars int `json:"chars"`
}

// Decision is one decision on a confirmation: the body of POST
// /v1/confirmations/{id}/approve and /deny (ID and Approve come from the
// path).
type Decision struct {
	ID      string `json:"-"`
	Approve bool   `json:"-"`
	// ArgsHash is the hash of the arguments the surface showed: the core
	// refuses the decision if it is not the confirmation's.
	ArgsHash string `json:"args_hash"`
	// PreviewDigest is the digest of the preview the surface showed, for
	// a confirmation that has one: the core refuses an approval without
	// it or with another.
	PreviewDigest string `json:"preview_digest,omitempty"`
	// Surface says where the decision was made: a short lower-case word,
	// "cli", "app", "notification", "telegram". Decider says who, as the
	// surface knows them (a user name, a Telegram id).
	Surface string `json:"surface"`
	Decider string `json:"decider,omitempty"`
	// Raw says the surface showed the arguments as they run (a
	// confirmation fetched with raw=1), not the sanitised display: only
	// such a decision can approve a confirmation with Hidden values.
	Raw bool `json:"raw,omitempty"`
}

// Limits of a decision's fields.
var (
	surfaceRE  = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)
	idRE       = regexp.MustCompile(`^[0-9a-f]{32}$`)
	maxDecider = 128
)

// maxQuoted is the most of a client's text an error message quotes.
const maxQuoted = 64

// Check refuses, with an error wrapping ErrInvalid, a decision no core
// could record: an id that is not a full confirmation id, no args_hash, a
// surface that is not a short lower-case word, a long or unprintable
// decider. Whether the decision fits the confirmation is the core's to say.
func (d *Decision) Check() error {
	switch {
	case !idRE.MatchString(d.ID):
		return fmt.Errorf("%w: %q is not a confirmation id (32 hex digits; resolve a prefix with GET /v1/confirmations/{prefix})", ErrInvalid, textutil.Clip(d.ID, maxQuoted))
	case d.ArgsHash == "":
		return fmt.Errorf("%w: a decision needs the args_hash of the arguments shown to the user", ErrInvalid)
	case !surfaceRE.MatchString(d.Surface):
		return fmt.Errorf("%w: surface %q: want a short lower-case word such as cli, app, notification or telegram", ErrInvalid, textutil.Clip(d.Surface, maxQuoted))
	case len(d.Decider) > maxDecider || strings.IndexFunc(d.Decider, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return fmt.Errorf("%w: decider: at most %d printable characters", ErrInvalid, maxDecider)
	}
	return nil
}

// FindConfirmation returns the one confirmation in list whose id is ref or
// starts with ref (at least six hex characters): ErrInvalid for a short or
// malformed ref or when several match, ErrNotFound when none does.
func FindConfirmation(list []Confirmation, ref string) (Confirmation, error) {
	ref = strings.ToLower(strings.TrimSpace(ref))
	if len(ref) < minPrefix || len(ref) > 32 || strings.Trim(ref, "0123456789abcdef") != "" {
		return Confirmation{}, fmt.Errorf("%w: %q: give at least %d hex characters of a confirmation's id", ErrInvalid, textutil.Clip(ref, maxQuoted), minPrefix)
	}
	var found []Confirmation
	for _, c := range list {
		if c.ID == ref {
			return c, nil
		}
		if strings.HasPrefix(c.ID, ref) {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 0:
		return Confirmation{}, fmt.Errorf("%w: no confirmation %s (see carapace confirm list)", ErrNotFound, ref)
	case 1:
		return found[0], nil
	}
	ids := make([]string, len(found))
	for i, c := range found {
		ids[i] = c.ID
	}
	return Confirmation{}, fmt.Errorf("%w: %s is ambiguous: it starts %s; give more characters", ErrInvalid, ref, strings.Join(ids, ", "))
}

// ShortID is the prefix of a confirmation's id that surfaces show and
// people type (carapace confirm show ID): its first 8 characters, made
// printable.
func ShortID(id string) string { return textutil.Printable(id[:min(len(id), 8)]) }

// minPrefix is the shortest id prefix FindConfirmation accepts.
const minPrefix = 6
