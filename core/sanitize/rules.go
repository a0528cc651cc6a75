package sanitize

import (
	"encoding/base64"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// A rule recognises one kind of secret in a string.
//
// Its pattern locates the secret together with the context that identifies
// it (the "Bearer " in front of a token, the name in password=…); only the
// capture group holding the secret is replaced, so the context stays
// readable. The pattern is run anchored, at the candidate positions where its
// literal start occurs (starts); what it needs to see on the left (a word
// boundary, a URL scheme) is checked there by before, and a cheap necessary
// condition on what follows the literal by after. Run unanchored, Go's regexp
// cannot skip ahead to a match that starts with \b or a case-insensitive
// word, and steps through the whole string at tens of nanoseconds per byte;
// even anchored, a call costs up to a microsecond, so after spares the regexp
// the "tokens" and "token is" of ordinary text.
//
// left is that left context as a regexp. It is not used at run time: the
// tests run left+pattern unanchored over the whole string as the reference
// the anchored search must agree with.
type rule struct {
	kind    int
	left    string // reference left context: `\b`, `(?:\b|[_-])`…
	pattern string // from the candidate position on
	starts  *literals
	before  func(s string, i int) bool // the left context at candidate i; nil: none
	after   func(s string, j int) bool // what must follow a literal ending at j; nil: anything
	groups  []int                      // capture groups that may hold the secret; the first that took part is used; 0 means the whole match
	check   func(secret string) bool   // optional further test of the secret
	// inside makes find also try the candidates that lie inside a secret
	// this rule already found. It is needed where a secret can swallow the
	// start of the next match: in "Bearer Bearer <token>" the first match
	// takes the second "Bearer" as its token. Elsewhere a candidate inside a
	// secret can only find part of it again (a vendor token or an unquoted
	// value runs to the same delimiter; a PEM body to the same END line), and
	// trying each of them would make "sk-ant-a-sk-ant-b-…" or
	// "password=password=…" cost quadratic time.
	inside bool
	re     *regexp.Regexp // ^(?:pattern), compiled at init
}

// Indexes into kindNames; a kindSet has bit 1<<k for kind k.
const (
	kPrivateKey = iota
	kURLPassword
	kAuthorization
	kBearer
	kBasicAuth
	kAnthropic
	kOpenAI
	kGitHub
	kSlack
	kAWS
	kStripe
	kGoogle
	kJWT
	kAssignment
	kSensitiveKey
	kUnencodable
	kTooDeep
	numKinds
)

// kindNames is indexed by the k… constants; its order is the order of the
// kinds String reports.
var kindNames = [numKinds]string{
	kPrivateKey:    KindPrivateKey,
	kURLPassword:   KindURLPassword,
	kAuthorization: KindAuthorization,
	kBearer:        KindBearer,
	kBasicAuth:     KindBasicAuth,
	kAnthropic:     KindAnthropic,
	kOpenAI:        KindOpenAI,
	kGitHub:        KindGitHub,
	kSlack:         KindSlack,
	kAWS:           KindAWSAccessKeyID,
	kStripe:        KindStripe,
	kGoogle:        KindGoogleAPIKey,
	kJWT:           KindJWT,
	kAssignment:    KindAssignment,
	kSensitiveKey:  KindSensitiveKey,
	kUnencodable:   KindUnencodable,
	kTooDeep:       KindTooDeep,
}

// kindSet is a set of kinds, bit 1<<k for kind k.
type kindSet uint32

// names lists the kinds in ks in kindNames order; nil when ks is empty.
func (ks kindSet) names() []string {
	if ks == 0 {
		return nil
	}
	var out []string
	for k := range numKinds {
		if ks&(1<<k) != 0 {
			out = append(out, kindNames[k])
		}
	}
	return out
}

// ci spells an ASCII word as a case-insensitive regexp ("ab" → "[Aa][Bb]").
// The (?i) flag is not used because RE2 folds case by Unicode rules: (?i)k
// also matches U+212A KELVIN SIGN, which the ASCII prefilter would not
// anticipate.
func ci(word string) string {
	var b strings.Builder
	for i := 0; i < len(word); i++ {
		c := word[i]
		if 'a' <= c && c <= 'z' {
			b.WriteByte('[')
			b.WriteByte(c - 'a' + 'A')
			b.WriteByte(c)
			b.WriteByte(']')
			continue
		}
		b.WriteString(regexp.QuoteMeta(string(c)))
	}
	return b.String()
}

// ciAlt is ci over alternatives: "(?:w1|w2|…)".
func ciAlt(words ...string) string {
	parts := make([]string, len(words))
	for i, w := range words {
		parts[i] = ci(w)
	}
	return "(?:" + strings.Join(parts, "|") + ")"
}

// Fragments shared by the rules.
const (
	// optQuote is an optional quote, possibly backslash-escaped as in JSON
	// text embedded in a string: `"`, `'`, `\"`.
	optQuote = `(?:\\?["'])?`
	// unquotedValue is an unquoted credential: it runs to whitespace, a quote,
	// a backslash (a JSON escape) or one of the separators , ; &.
	unquotedValue = `[^\s"'\\,;&]+`
	// pemLabel is the label of a PEM private-key block: PRIVATE KEY after
	// any algorithm words (RSA, EC, DSA, OPENSSH, ENCRYPTED…), or PGP
	// PRIVATE KEY BLOCK.
	pemLabel = `[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?`
)

// assignKeys are the names whose assigned value is redacted. A name also
// matches as the last word of a longer name joined by _ or -
// (DB_PASSWORD, X-API-Key, aws_secret_access_key, page_token).
var assignKeys = []string{
	"password", "passwd", "pwd",
	"client_secret", "secret_access_key", "secret_key", "secret",
	"access_token", "refresh_token", "token",
	"api_key", "apikey", "api-key",
	"private_key", "private-key",
}

// authSchemes are the Authorization schemes whose credentials are redacted.
var authSchemes = []string{"bearer", "basic", "token", "bot"}

// rules in kind order; rules[i] has trigger bit 1<<i. Each rule's literal
// start must be announced by trigger (FuzzRules checks this).
var rules = []rule{
	{
		// A PEM private key: keep the BEGIN and END lines, redact the body.
		// A block cut short (no END line) is redacted to the end of the string.
		kind:    kPrivateKey,
		pattern: `-----BEGIN ` + pemLabel + `-----((?s:.*?))(?:-----END ` + pemLabel + `-----|\z)`,
		starts:  lits(false, "-----BEGIN "),
		groups:  []int{1},
	},
	{
		// scheme://user:password@host — redact the password. It may contain
		// '@' (sloppy URLs), so it runs to the last '@' of the authority.
		kind:    kURLPassword,
		left:    `[A-Za-z][A-Za-z0-9+.-]*`,
		pattern: `://[^\s:/?#@"'<>\\]*:([^\s/?#"'<>\\]+)@`,
		starts:  lits(false, "://"),
		before:  afterSchemeChar,
		groups:  []int{1},
	},
	{
		// An Authorization (or Proxy-Authorization) header or field: with a
		// known scheme, redact the credentials to the next delimiter; a quoted
		// value with no known scheme is redacted whole. An unquoted value with
		// no known scheme is left alone ("Authorization: required").
		kind: kAuthorization,
		left: `\b`,
		pattern: ci("authorization") + optQuote + `[ \t]*[:=][ \t]*(?:` +
			optQuote + ciAlt(authSchemes...) + `[ \t]+(` + unquotedValue + `)` +
			`|"((?:[^"\\\n]|\\.)+)"|'([^'\n]+)')`,
		starts: lits(true, "authorization"),
		before: atWordStart,
		after:  separatorFollows,
		groups: []int{1, 2, 3},
		inside: true,
	},
	{
		// Bearer <token>, anywhere. The token starts with a character of the
		// RFC 6750 token alphabet and runs to the next delimiter.
		kind:    kBearer,
		left:    `\b`,
		pattern: `Bearer[ \t]+([A-Za-z0-9._~+/-][^\s"'\\,;<>()\[\]{}]*)`,
		starts:  lits(false, "Bearer"),
		before:  atWordStart,
		after:   blankFollows,
		groups:  []int{1},
		inside:  true,
	},
	{
		// Basic <base64>, anywhere, when the base64 decodes to printable
		// "user:password" text; English ("basic understanding") does not.
		kind:    kBasicAuth,
		left:    `\b`,
		pattern: ci("basic") + `[ \t]+([A-Za-z0-9+/]+={0,2})`,
		starts:  lits(true, "basic"),
		before:  atWordStart,
		after:   blankFollows,
		groups:  []int{1},
		check:   decodesToUserPass,
		inside:  true,
	},
	{
		// Anthropic: sk-ant-api03-…, sk-ant-oat01-…, sk-ant-admin01-…
		kind:    kAnthropic,
		left:    `\b`,
		pattern: `sk-ant-[A-Za-z0-9_-]+`,
		starts:  lits(false, "sk-ant-"),
		before:  atWordStart,
		groups:  []int{0},
	},
	{
		// OpenAI: sk-proj-…, sk-svcacct-…, sk-admin-…, and the legacy
		// sk-<48 alphanumerics>. A bare sk- needs 16 alphanumerics first so
		// that "sk-learn" and "task-force-…" pass.
		kind:    kOpenAI,
		left:    `\b`,
		pattern: `sk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]+|[A-Za-z0-9]{16,}[A-Za-z0-9_-]*)`,
		starts:  lits(false, "sk-"),
		before:  atWordStart,
		groups:  []int{0},
	},
	{
		// GitHub: ghp_ gho_ ghs_ ghu_ ghr_ (36 base62 in practice; 8 or more
		// here, to catch truncated tokens but not names like ghs_count), and
		// fine-grained github_pat_….
		kind:    kGitHub,
		left:    `\b`,
		pattern: `(?:gh[pousr]_[A-Za-z0-9]{8,}|github_pat_[A-Za-z0-9_]{8,})`,
		starts:  lits(false, "ghp_", "gho_", "ghs_", "ghu_", "ghr_", "github_pat_"),
		before:  atWordStart,
		groups:  []int{0},
	},
	{
		// Slack: xoxa- xoxb- xoxp- xoxr- xoxs- (and xoxe- refresh, xapp- app
		// tokens).
		kind:    kSlack,
		left:    `\b`,
		pattern: `(?:xox[abeprs]|xapp)-[A-Za-z0-9][A-Za-z0-9-]*`,
		starts:  lits(false, "xox", "xapp-"),
		before:  atWordStart,
		groups:  []int{0},
	},
	{
		// AWS access key id: AKIA or ASIA and exactly 16 upper-case
		// alphanumerics.
		kind:    kAWS,
		left:    `\b`,
		pattern: `(?:AKIA|ASIA)[A-Z0-9]{16}\b`,
		starts:  lits(false, "AKIA", "ASIA"),
		before:  atWordStart,
		groups:  []int{0},
	},
	{
		// Stripe live secret and restricted keys (test and publishable keys
		// are not secrets of a live account).
		kind:    kStripe,
		left:    `\b`,
		pattern: `[rs]k_live_[A-Za-z0-9]+`,
		starts:  lits(false, "sk_live_", "rk_live_"),
		before:  atWordStart,
		groups:  []int{0},
	},
	{
		// Google API key: AIza and 35 more.
		kind:    kGoogle,
		left:    `\b`,
		pattern: `AIza[A-Za-z0-9_-]{35,}`,
		starts:  lits(false, "AIza"),
		before:  atWordStart,
		groups:  []int{0},
	},
	{
		// JWT (and JWE): base64url segments, header and payload JSON objects
		// (eyJ is base64 for `{"`), the signature possibly empty (alg none).
		kind:    kJWT,
		left:    `\b`,
		pattern: `eyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+){0,2}`,
		starts:  lits(false, "eyJ"),
		before:  atWordStart,
		groups:  []int{0},
	},
	{
		// name=value, name: value, "name": "value", name := value, name => value,
		// for the names in assignKeys (any case). A double-quoted value runs
		// to its closing quote (JSON escapes allowed), a single-quoted one to
		// its quote; an unquoted one to whitespace, a quote, , ; & or \.
		kind: kAssignment,
		left: `(?:\b|[_-])`,
		pattern: ciAlt(assignKeys...) + optQuote + `[ \t]*(?::=|=>|[:=])[ \t]*(?:` +
			`"((?:[^"\\\n]|\\.)*)"` +
			`|'([^'\n]*)'` +
			`|` + optQuote + `(` + unquotedValue + `))`,
		starts: lits(true, assignKeys...),
		before: afterNonAlnum,
		after:  separatorFollows,
		groups: []int{1, 2, 3},
	},
}

func init() {
	for i := range rules {
		rules[i].re = regexp.MustCompile(`^(?:` + rules[i].pattern + `)`)
	}
}

// Left contexts checked at a candidate position i.

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func isWord(c byte) bool { return isAlnum(c) || c == '_' }

// atWordStart is \b before a word character at i.
func atWordStart(s string, i int) bool { return i == 0 || !isWord(s[i-1]) }

// afterNonAlnum is (?:\b|[_-]) before a word character at i: the name may be
// the last word of a longer one joined by _ or -.
func afterNonAlnum(s string, i int) bool { return i == 0 || !isAlnum(s[i-1]) }

// afterSchemeChar requires a URL scheme character before "://" at i.
func afterSchemeChar(s string, i int) bool {
	if i == 0 {
		return false
	}
	c := s[i-1]
	return isAlnum(c) || c == '+' || c == '.' || c == '-'
}

// blankFollows requires a space or tab at j.
func blankFollows(s string, j int) bool { return j < len(s) && (s[j] == ' ' || s[j] == '\t') }

// separatorFollows requires, from j, what optQuote `[ \t]*[:=]` needs: an
// optional (escaped) quote, blanks, then ':' or '='.
func separatorFollows(s string, j int) bool {
	if j < len(s) && s[j] == '\\' {
		j++
	}
	if j < len(s) && (s[j] == '"' || s[j] == '\'') {
		j++
	}
	for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
		j++
	}
	return j < len(s) && (s[j] == ':' || s[j] == '=')
}

// literals is a set of words a rule's matches start with.
type literals struct {
	byFirst [256][]string // the words by first byte (both cases when fold)
	fold    bool          // ASCII case-insensitive; the words are lower case
}

func lits(fold bool, words ...string) *literals {
	l := &literals{fold: fold}
	for _, w := range words {
		c := w[0]
		l.byFirst[c] = append(l.byFirst[c], w)
		if fold && 'a' <= c && c <= 'z' {
			l.byFirst[c-'a'+'A'] = append(l.byFirst[c-'a'+'A'], w)
		}
	}
	return l
}

// next returns the first i >= from at which one of the words starts and is
// followed by what after accepts (nil accepts anything), or -1.
func (l *literals) next(s string, from int, after func(s string, j int) bool) int {
	for i := from; i < len(s); i++ {
		for _, w := range l.byFirst[s[i]] {
			if (l.fold && hasPrefixFold(s[i:], w) || !l.fold && strings.HasPrefix(s[i:], w)) &&
				(after == nil || after(s, i+len(w))) {
				return i
			}
		}
	}
	return -1
}

// decodesToUserPass reports whether b64 is base64 (padded or not) of
// printable text containing ':', as Basic credentials are.
func decodesToUserPass(b64 string) bool {
	enc := base64.StdEncoding
	if !strings.HasSuffix(b64, "=") {
		enc = base64.RawStdEncoding
	}
	dst, err := enc.DecodeString(b64)
	if err != nil || !utf8.Valid(dst) || !slices.Contains(dst, ':') {
		return false
	}
	for _, c := range dst {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// hasPrefixFold reports whether s begins with lower, ignoring ASCII case;
// lower must be lower case.
func hasPrefixFold(s, lower string) bool {
	if len(s) < len(lower) {
		return false
	}
	for i := 0; i < len(lower); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
