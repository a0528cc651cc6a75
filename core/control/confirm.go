package control

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/carapace-dev/carapace/internal/textutil"
)

// Confirmation is a tool call that waits, or waited, for the user's
// decision.
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
	Summary   string    `json:"summary,omitempty"`
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

// Exact reports whether c's Arguments are what runs, every byte of them
// at hand: nothing hidden, nothing left out. A surface offers Approve only
// on an exact confirmation it shows in full (Raw arguments count: they are
// what runs).
func (c Confirmation) Exact() bool {
	return !c.ArgumentsOmitted && (len(c.Hidden) == 0 || c.Raw)
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

// check refuses a decision no backend could record.
func (d *Decision) check() error {
	switch {
	case !idRE.MatchString(d.ID):
		return fmt.Errorf("%w: %q is not a confirmation id (32 hex digits; resolve a prefix with GET /v1/confirmations/{prefix})", ErrInvalid, clipName(d.ID))
	case d.ArgsHash == "":
		return fmt.Errorf("%w: a decision needs the args_hash of the arguments shown to the user", ErrInvalid)
	case !surfaceRE.MatchString(d.Surface):
		return fmt.Errorf("%w: surface %q: want a short lower-case word such as cli, app, notification or telegram", ErrInvalid, clipName(d.Surface))
	case len(d.Decider) > maxDecider || strings.IndexFunc(d.Decider, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return fmt.Errorf("%w: decider: at most %d printable characters", ErrInvalid, maxDecider)
	}
	return nil
}

func (s *Server) handleConfirmations(w http.ResponseWriter, r *http.Request) {
	list := s.b.Confirmations(r.Context(), r.URL.Query().Get("recent") == "1")
	if list == nil {
		list = []Confirmation{}
	}
	writeJSON(w, http.StatusOK, list)
}

// handleConfirmation answers one confirmation, by id or unique prefix;
// with raw=1, with its arguments as they run (a pending one only).
func (s *Server) handleConfirmation(w http.ResponseWriter, r *http.Request) {
	c, err := FindConfirmation(s.b.Confirmations(r.Context(), true), r.PathValue("ref"))
	if err == nil && r.URL.Query().Get("raw") == "1" {
		var raw json.RawMessage
		if raw, err = s.b.RawArguments(r.Context(), c.ID); err == nil {
			c.Arguments, c.ArgumentsOmitted, c.Raw = raw, false, true
			s.logger.Info("control: confirmation's arguments shown as they run", "confirmation", c.ID, "hidden", len(c.Hidden))
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Server) handleApprove(w http.ResponseWriter, r *http.Request) { s.decide(w, r, true) }
func (s *Server) handleDeny(w http.ResponseWriter, r *http.Request)    { s.decide(w, r, false) }

func (s *Server) decide(w http.ResponseWriter, r *http.Request, approve bool) {
	var d Decision
	if err := decodeBody(w, r, &d); err != nil {
		s.writeError(w, r, err)
		return
	}
	d.ID, d.Approve = r.PathValue("id"), approve
	if err := d.check(); err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := s.b.Decide(r.Context(), d)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.logger.Info("control: confirmation decided", "confirmation", c.ID, "decision", c.Decision, "surface", c.Surface)
	writeJSON(w, http.StatusOK, c)
}

// Confirmations lists the pending confirmations; with recent, also the
// resolved ones the core remembers.
func (c *Client) Confirmations(ctx context.Context, recent bool) ([]Confirmation, error) {
	var list []Confirmation
	path := "/v1/confirmations"
	if recent {
		path += "?recent=1"
	}
	err := c.do(ctx, http.MethodGet, path, nil, &list)
	return list, err
}

// Confirmation returns one confirmation, pending or recent, by id or by a
// unique prefix of at least six characters.
func (c *Client) Confirmation(ctx context.Context, ref string) (Confirmation, error) {
	var cf Confirmation
	err := c.do(ctx, http.MethodGet, "/v1/confirmations/"+url.PathEscape(ref), nil, &cf)
	return cf, err
}

// ConfirmationRaw returns one pending confirmation, like Confirmation,
// with its arguments exactly as they run (Raw), secrets included: for a
// person to read before approving one whose display hides something.
func (c *Client) ConfirmationRaw(ctx context.Context, ref string) (Confirmation, error) {
	var cf Confirmation
	err := c.do(ctx, http.MethodGet, "/v1/confirmations/"+url.PathEscape(ref)+"?raw=1", nil, &cf)
	return cf, err
}

// Decide sends one decision and returns the confirmation as it now stands.
// An error wrapping ErrConflict says it was already decided (its message
// says how) or that the hash is not the confirmation's.
func (c *Client) Decide(ctx context.Context, d Decision) (Confirmation, error) {
	verb := "deny"
	if d.Approve {
		verb = "approve"
	}
	var cf Confirmation
	err := c.do(ctx, http.MethodPost, "/v1/confirmations/"+url.PathEscape(d.ID)+"/"+verb, d, &cf)
	return cf, err
}

// FindConfirmation returns the one confirmation in list whose id is ref or
// starts with ref (at least six hex characters): ErrInvalid for a short or
// malformed ref or when several match, ErrNotFound when none does.
func FindConfirmation(list []Confirmation, ref string) (Confirmation, error) {
	ref = strings.ToLower(strings.TrimSpace(ref))
	if len(ref) < minPrefix || len(ref) > 32 || strings.Trim(ref, "0123456789abcdef") != "" {
		return Confirmation{}, fmt.Errorf("%w: %q: give at least %d hex characters of a confirmation's id", ErrInvalid, clipName(ref), minPrefix)
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
