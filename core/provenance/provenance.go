// Package provenance keeps, for one agent session, which URLs the session
// was given and whether it has read untrusted content (docs/SECURITY.md,
// "Provenance and taint").
//
// A URL is given when it appears in what the user wrote (the prompt, the
// message or task that started the session) or in an earlier result of
// the session of a tool whose output is untrusted (search results, the
// links of a fetched page). The pipeline runs a call whose URL arguments
// are all given as declared; any other waits for the user.
//
// Matching is exact after normalisation (Normalize), never by prefix: a
// given https://example.com/a does not make https://example.com/a?k=SECRET
// given, since a query or a longer path is exactly where a constructed URL
// carries data out.
//
// The store is bounded (MaxURLs, MaxBytes, MaxURLLen). Past a bound it
// keeps nothing more, and a URL it did not keep is not given: the bound
// fails closed, into a confirmation, never open.
//
// Taint is one-way: once the session has received untrusted output (or was
// started by an untrusted event) it stays tainted until it ends. A session
// of a named conversation hands its taint on to the conversation
// (Conversations, conversation.go): the next session that resumes it has
// the same text in its model's context, so it starts tainted.
package provenance

import (
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Bounds of one session's store.
const (
	MaxURLs   = 4096    // URLs kept per session
	MaxBytes  = 1 << 20 // bytes of URLs kept per session
	MaxURLLen = 8192    // a longer URL is never kept (so never given)
	// MaxScan is how many bytes of one text or result are scanned for
	// URLs; the rest is not (its URLs are not given).
	MaxScan = 4 << 20
)

// Normalize returns the form in which URLs are compared: an absolute
// http or https URL with its scheme and host lowercased, the default port
// (80, 443) dropped, the fragment dropped, and an empty path written "/".
// Path and query are kept as they are, byte for byte. ok is false for
// anything else (another scheme, no host, unparsable), which is then never
// given.
func Normalize(raw string) (string, bool) {
	raw = strings.TrimSpace(raw)
	if raw == "" || len(raw) > MaxURLLen {
		return "", false
	}
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" || u.Host == "" {
		return "", false
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", false
	}
	port := u.Port()
	if scheme == "http" && port == "80" || scheme == "https" && port == "443" {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	var b strings.Builder
	b.WriteString(scheme + "://")
	if u.User != nil {
		b.WriteString(u.User.String() + "@")
	}
	b.WriteString(host + path)
	if u.RawQuery != "" || u.ForceQuery {
		b.WriteString("?" + u.RawQuery)
	}
	return b.String(), true
}

// urlRE finds candidate URLs in free text.
var urlRE = regexp.MustCompile(`(?i)\bhttps?://[^\s<>"'\x60\\{}|^]+`)

// Extract returns the http(s) URLs in text, normalised, in order, each
// once. Trailing punctuation that ends a sentence (.,;:!?) and a closing
// bracket with no opening one in the URL (a Markdown link's ")") are not
// part of the URL. Only the first MaxScan bytes of text are read.
func Extract(text string) []string {
	if len(text) > MaxScan {
		text = text[:MaxScan]
	}
	var out []string
	seen := map[string]bool{}
	for _, m := range urlRE.FindAllString(text, -1) {
		if len(m) > 2*MaxURLLen {
			continue // too long to be kept, whatever trimming leaves: not given
		}
		m = trimURL(m)
		if n, ok := Normalize(m); ok && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// trimURL drops what ends a sentence or closes a bracket opened before
// the URL. It counts the brackets once, so that a hostile run of them
// costs linear time.
func trimURL(s string) string {
	open := [2]int{strings.Count(s, "("), strings.Count(s, "[")}
	closed := [2]int{strings.Count(s, ")"), strings.Count(s, "]")}
	for s != "" {
		last, k := s[len(s)-1], -1
		switch last {
		case ')':
			k = 0
		case ']':
			k = 1
		}
		switch {
		case strings.IndexByte(".,;:!?", last) >= 0:
		case k >= 0 && open[k] < closed[k]:
			closed[k]--
		default:
			return s
		}
		s = s[:len(s)-1]
	}
	return s
}

// Taint says why a session is tainted: which tool's output (or which
// event) brought untrusted content, from where, and when.
type Taint struct {
	Tool   string    `json:"tool,omitempty"` // the tool whose result was untrusted; "" for an event
	Source string    `json:"source"`         // what was read: a URL, "event message.inbound from mail"
	Time   time.Time `json:"time"`           // when the session received it
	// Earlier is set when an earlier session of the session's
	// conversation received it (Conversations): the session resumed a
	// tainted conversation.
	Earlier bool `json:"-"`
}

// Reason is the taint in words, for a confirmation: "this session read
// https://… at 10:42 UTC (web_fetch)", or, for a taint the session's
// conversation carried over, "this conversation read https://… at 10:42
// UTC (web_fetch), in an earlier session".
func (t Taint) Reason() string {
	who := "this session"
	if t.Earlier {
		who = "this conversation"
	}
	s := who + " read " + t.Source + " at " + t.Time.UTC().Format("15:04 UTC")
	if t.Tool != "" {
		s += " (" + t.Tool + ")"
	}
	if t.Earlier {
		s += ", in an earlier session"
	}
	return s + ", so what leaves the machine waits for you"
}

// Store is one session's provenance. The zero value is not usable: use
// New. It is safe for concurrent use.
type Store struct {
	mu      sync.Mutex
	given   map[string]struct{}
	bytes   int
	dropped int // URLs not kept for a bound
	taint   *Taint
	onTaint func(Taint) // OnTaint's
}

// New returns an empty store.
func New() *Store { return &Store{given: map[string]struct{}{}} }

// Give records the URLs in text as given and returns how many it did not
// keep for a bound.
func (s *Store) Give(text string) (dropped int) {
	return s.GiveURLs(Extract(text))
}

// GiveValue records the URLs in every string of v (a decoded JSON value:
// a tool's result), keys included, and returns how many it did not keep.
func (s *Store) GiveValue(v any) (dropped int) {
	var urls []string
	budget := MaxScan
	var walk func(any)
	walk = func(v any) {
		if budget <= 0 {
			return
		}
		switch x := v.(type) {
		case string:
			budget -= len(x)
			urls = append(urls, Extract(x)...)
		case map[string]any:
			for k, e := range x {
				walk(k)
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return s.GiveURLs(urls)
}

// GiveURLs records normalised URLs as given, within the bounds, and
// returns how many it did not keep.
func (s *Store) GiveURLs(urls []string) (dropped int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range urls {
		if _, ok := s.given[u]; ok {
			continue
		}
		if len(s.given) >= MaxURLs || s.bytes+len(u) > MaxBytes || len(u) > MaxURLLen {
			dropped++
			continue
		}
		s.given[u] = struct{}{}
		s.bytes += len(u)
	}
	s.dropped += dropped
	return dropped
}

// Given reports whether raw, normalised, is a URL the session was given.
// Anything Normalize refuses is not.
func (s *Store) Given(raw string) bool {
	n, ok := Normalize(raw)
	if !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok = s.given[n]
	return ok
}

// Len returns how many URLs are kept, how many bytes they take, and how
// many were not kept for a bound.
func (s *Store) Len() (urls, bytes, dropped int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.given), s.bytes, s.dropped
}

// Taint marks the session tainted by t, unless it already is. It returns
// true the first time: the caller audits that once.
func (s *Store) Taint(t Taint) (first bool) {
	s.mu.Lock()
	if s.taint != nil {
		s.mu.Unlock()
		return false
	}
	s.taint = &t
	hook := s.onTaint
	s.mu.Unlock()
	if hook != nil {
		hook(t)
	}
	return true
}

// OnTaint sets f to be called with the session's first taint, when Taint
// records it, before Taint returns (so before the caller answers the
// call that brought it); if the session is tainted already, f is called
// with that taint at once. The session's conversation records its taint
// with it (Conversations).
func (s *Store) OnTaint(f func(Taint)) {
	s.mu.Lock()
	s.onTaint = f
	t := s.taint
	s.mu.Unlock()
	if t != nil && f != nil {
		f(*t)
	}
}

// Tainted returns the first taint of the session, if any.
func (s *Store) Tainted() (Taint, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taint == nil {
		return Taint{}, false
	}
	return *s.taint, true
}
