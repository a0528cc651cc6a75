package sanitize

import (
	"encoding/base64"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// A rule recognises one kind of secret in a string. Its regexp locates the
// secret together with the context that identifies it (the "Bearer " in front
// of a token, the name in password=…); only the capture group holding the
// secret itself is replaced, so the context stays readable.
type rule struct {
	kind   int            // index into kindNames
	re     *regexp.Regexp // compiled once at init
	groups []int          // capture groups that may hold the secret; the first that took part is used; 0 means the whole match
	check  func(string) bool
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
// also matches U+212A KELVIN SIGN, which the ASCII prefilter (trigger) would
// not anticipate.
func ci(word string) string {
	var b strings.Builder
	for i := 0; i < len(word); i++ {
		c := word[i]
		switch {
		case 'a' <= c && c <= 'z':
			b.WriteByte('[')
			b.WriteByte(c - 'a' + 'A')
			b.WriteByte(c)
			b.WriteByte(']')
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
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
)

// pemLabel is the label of a PEM private-key block: PRIVATE KEY preceded by
// any algorithm words (RSA, EC, DSA, OPENSSH, ENCRYPTED, SSH2 ENCRYPTED…),
// or PGP PRIVATE KEY BLOCK.
const pemLabel = `[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?`

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

// rules in kind order. Each rule's literal parts must be announced by trigger;
// FuzzTrigger checks that for every rule.
var rules = []rule{
	{
		// A PEM private key: keep the BEGIN and END lines, redact the body.
		// A block cut short (no END line) is redacted to the end of the string.
		kind:   kPrivateKey,
		re:     regexp.MustCompile(`-----BEGIN ` + pemLabel + `-----((?s:.*?))(?:-----END ` + pemLabel + `-----|\z)`),
		groups: []int{1},
	},
	{
		// scheme://user:password@host — redact the password. It may contain
		// '@' (sloppy URLs), so it runs to the last '@' of the authority.
		kind:   kURLPassword,
		re:     regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@"'<>\\]*:([^\s/?#"'<>\\]+)@`),
		groups: []int{1},
	},
	{
		// An Authorization (or Proxy-Authorization) header or field: with a
		// known scheme, redact the credentials to the next delimiter; a quoted
		// value with no known scheme is redacted whole. An unquoted value with
		// no known scheme is left alone ("Authorization: required").
		kind: kAuthorization,
		re: regexp.MustCompile(`\b` + ci("authorization") + optQuote + `[ \t]*[:=][ \t]*(?:` +
			optQuote + ciAlt(authSchemes...) + `[ \t]+(` + unquotedValue + `)` +
			`|"((?:[^"\\\n]|\\.)+)"|'([^'\n]+)')`),
		groups: []int{1, 2, 3},
	},
	{
		// Bearer <token>, anywhere. The token starts with a character of the
		// RFC 6750 token alphabet and runs to the next delimiter.
		kind:   kBearer,
		re:     regexp.MustCompile(`\bBearer[ \t]+([A-Za-z0-9._~+/-][^\s"'\\,;<>()\[\]{}]*)`),
		groups: []int{1},
	},
	{
		// Basic <base64>, anywhere, when the base64 decodes to printable
		// "user:password" text; English ("basic understanding") does not.
		kind:   kBasicAuth,
		re:     regexp.MustCompile(`\b` + ci("basic") + `[ \t]+([A-Za-z0-9+/]+={0,2})`),
		groups: []int{1},
		check:  decodesToUserPass,
	},
	{
		// Anthropic: sk-ant-api03-…, sk-ant-oat01-…, sk-ant-admin01-…
		kind:   kAnthropic,
		re:     regexp.MustCompile(`\bsk-ant-[A-Za-z0-9_-]+`),
		groups: []int{0},
	},
	{
		// OpenAI: sk-proj-…, sk-svcacct-…, sk-admin-…, and the legacy
		// sk-<48 alphanumerics>. A bare sk- needs 16 alphanumerics first so
		// that "sk-learn" and "task-force-…" pass.
		kind:   kOpenAI,
		re:     regexp.MustCompile(`\bsk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]+|[A-Za-z0-9]{16,}[A-Za-z0-9_-]*)`),
		groups: []int{0},
	},
	{
		// GitHub: ghp_ gho_ ghs_ ghu_ ghr_ (36 base62 in practice; 8 or more
		// here, to catch truncated tokens but not names like ghs_count), and
		// fine-grained github_pat_….
		kind:   kGitHub,
		re:     regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{8,}|github_pat_[A-Za-z0-9_]{8,})`),
		groups: []int{0},
	},
	{
		// Slack: xoxa- xoxb- xoxp- xoxr- xoxs- (and xoxe- refresh, xapp- app
		// tokens).
		kind:   kSlack,
		re:     regexp.MustCompile(`\b(?:xox[abeprs]|xapp)-[A-Za-z0-9][A-Za-z0-9-]*`),
		groups: []int{0},
	},
	{
		// AWS access key id: AKIA or ASIA and exactly 16 upper-case
		// alphanumerics.
		kind:   kAWS,
		re:     regexp.MustCompile(`\b(?:AKIA|ASIA)[A-Z0-9]{16}\b`),
		groups: []int{0},
	},
	{
		// Stripe live secret and restricted keys (test and publishable keys
		// are not secrets of a live account).
		kind:   kStripe,
		re:     regexp.MustCompile(`\b[rs]k_live_[A-Za-z0-9]+`),
		groups: []int{0},
	},
	{
		// Google API key: AIza and 35 more.
		kind:   kGoogle,
		re:     regexp.MustCompile(`\bAIza[A-Za-z0-9_-]{35,}`),
		groups: []int{0},
	},
	{
		// JWT (and JWE): base64url segments, header and payload JSON objects
		// (eyJ is base64 for `{"`), the signature possibly empty (alg none).
		kind:   kJWT,
		re:     regexp.MustCompile(`\beyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+){0,2}`),
		groups: []int{0},
	},
	{
		// name=value, name: value, "name": "value", name := value, name => value,
		// for the names in assignKeys (any case). A double-quoted value runs
		// to its closing quote (JSON escapes allowed), a single-quoted one to
		// its quote; an unquoted one to whitespace, a quote, , ; & or \.
		kind: kAssignment,
		re: regexp.MustCompile(`(?:\b|[_-])` + ciAlt(assignKeys...) + optQuote + `[ \t]*(?::=|=>|[:=])[ \t]*(?:` +
			`"((?:[^"\\\n]|\\.)*)"` +
			`|'([^'\n]*)'` +
			`|` + optQuote + `(` + unquotedValue + `))`),
		groups: []int{1, 2, 3},
	},
}

// decodesToUserPass reports whether b64 is base64 (padded or not) of
// printable text containing ':', as Basic credentials are.
func decodesToUserPass(b64 string) bool {
	var buf [192]byte
	enc := base64.StdEncoding
	if !strings.HasSuffix(b64, "=") {
		enc = base64.RawStdEncoding
	}
	var dst []byte
	if n := enc.DecodedLen(len(b64)); n <= len(buf) {
		dst = buf[:n]
	} else {
		dst = make([]byte, n)
	}
	n, err := enc.Decode(dst, []byte(b64))
	if err != nil {
		return false
	}
	dst = dst[:n]
	if !utf8.Valid(dst) || !slices.Contains(dst, ':') {
		return false
	}
	for _, c := range dst {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// Trigger bits are rule indexes: trigger sets bit i when rules[i] might match.
const (
	tPEM = 1 << iota
	tURL
	tAuthorization
	tBearer
	tBasic
	tAnthropic
	tOpenAI
	tGitHub
	tSlack
	tAWS
	tStripe
	tGoogle
	tJWT
	tAssignment
)

// Byte flags trigger collects from every byte.
const (
	fSep = 1 << iota // ':' or '=': an assignment or header could follow
	fAt              // '@': a URL could hold credentials
)

var byteFlags = func() (t [256]uint8) {
	t[':'], t['='], t['@'] = fSep, fSep, fAt
	return t
}()

// bigrams is a bitset of the byte pairs that begin the literal part of some
// rule ("sk", "gh", "--", "to"/"TO"…); trigger looks closer only at those.
// It must list the first two bytes of every case in trigger's switch.
var bigrams = func() (t [1 << 16 / 64]uint64) {
	add := func(first, second string) {
		for i := 0; i < len(first); i++ {
			for j := 0; j < len(second); j++ {
				k := uint(first[i])<<8 | uint(second[j])
				t[k/64] |= 1 << (k % 64)
			}
		}
	}
	add(":", "/")       // ://
	add("-", "-")       // -----BEGIN
	add("aA", "uUpP")   // authorization, api_key apikey api-key
	add("A", "KSI")     // AKIA ASIA AIza
	add("B", "e")       // Bearer
	add("bB", "aA")     // basic
	add("pP", "aAwWrR") // password passwd, pwd, private_key
	add("sS", "eE")     // secret
	add("s", "k")       // sk- sk_live_
	add("tT", "oO")     // token
	add("r", "k")       // rk_live_
	add("g", "hi")      // ghp_… github_pat_
	add("x", "oa")      // xoxb- xapp-
	add("e", "y")       // eyJ
	return t
}()

// trigger is the prefilter: one pass over s that reports, as a bit per rule,
// which rules could match because s holds that rule's literal part (sk-,
// AKIA, -----BEGIN , a key name and a ':' or '='…). Most strings yield 0 and
// are never given to a regexp. It must never miss: if rules[i] matches s, bit
// i is set (FuzzTrigger checks this).
func trigger(s string) uint32 {
	var m uint32
	var flags uint8
	var scheme, auth, assign bool
	for i := 0; i < len(s); i++ {
		c := s[i]
		flags |= byteFlags[c]
		if i+1 == len(s) {
			break
		}
		if k := uint(c)<<8 | uint(s[i+1]); bigrams[k/64]&(1<<(k%64)) == 0 {
			continue
		}
		rest := s[i+1:]
		switch c {
		case ':':
			if strings.HasPrefix(rest, "//") {
				scheme = true
			}
		case '-':
			if strings.HasPrefix(rest, "----BEGIN ") {
				m |= tPEM
			}
		case 'a', 'A':
			if hasPrefixFold(rest, "uthorization") {
				auth = true
			} else if hasPrefixFold(rest, "pi_key") || hasPrefixFold(rest, "pikey") || hasPrefixFold(rest, "pi-key") {
				assign = true
			}
			if c == 'A' {
				if strings.HasPrefix(rest, "KIA") || strings.HasPrefix(rest, "SIA") {
					m |= tAWS
				} else if strings.HasPrefix(rest, "Iza") {
					m |= tGoogle
				}
			}
		case 'b', 'B':
			if c == 'B' && strings.HasPrefix(rest, "earer") {
				m |= tBearer
			}
			if hasPrefixFold(rest, "asic") {
				m |= tBasic
			}
		case 'p', 'P':
			if hasPrefixFold(rest, "assw") || hasPrefixFold(rest, "wd") ||
				hasPrefixFold(rest, "rivate_key") || hasPrefixFold(rest, "rivate-key") {
				assign = true
			}
		case 's', 'S':
			if hasPrefixFold(rest, "ecret") {
				assign = true
			}
			if c == 's' {
				if strings.HasPrefix(rest, "k-") {
					m |= tAnthropic | tOpenAI
				} else if strings.HasPrefix(rest, "k_live_") {
					m |= tStripe
				}
			}
		case 't', 'T':
			if hasPrefixFold(rest, "oken") {
				assign = true
			}
		case 'r':
			if strings.HasPrefix(rest, "k_live_") {
				m |= tStripe
			}
		case 'g':
			if len(rest) >= 3 && rest[0] == 'h' && rest[2] == '_' && strings.IndexByte("pousr", rest[1]) >= 0 ||
				strings.HasPrefix(rest, "ithub_pat_") {
				m |= tGitHub
			}
		case 'x':
			if strings.HasPrefix(rest, "ox") || strings.HasPrefix(rest, "app-") {
				m |= tSlack
			}
		case 'e':
			if strings.HasPrefix(rest, "yJ") {
				m |= tJWT
			}
		}
	}
	if flags&fSep != 0 {
		if auth {
			m |= tAuthorization
		}
		if assign {
			m |= tAssignment
		}
	}
	if scheme && flags&fAt != 0 {
		m |= tURL
	}
	return m
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

// span is a secret found in a string: s[start:end], of the given kinds.
type span struct {
	start, end int
	kinds      kindSet
}

// maxPasses bounds the redaction passes over one string. Each pass removes
// every secret the rules see; a further pass makes sure the result holds
// nothing they see either (a redaction can change what surrounds another
// secret). One pass redacts, the next confirms; more are for contrived input.
const maxPasses = 4

// redact is String without the slice of kind names: the engine under String
// and Value. Clean strings (the common case) cost one trigger pass and no
// allocation.
func redact(s string) (string, kindSet) {
	m := trigger(s)
	if m == 0 {
		return s, 0
	}
	orig := s
	var kinds kindSet
	for range maxPasses {
		out, ks := redactPass(s, m)
		if ks == 0 {
			if s == orig {
				return orig, 0
			}
			return s, kinds
		}
		kinds |= ks
		s = out
		if m = trigger(s); m == 0 {
			return s, kinds
		}
	}
	// Still finding secrets after maxPasses: fail closed.
	return Placeholder, kinds
}

// redactPass runs the rules announced by m over s once and replaces the union
// of the secrets they find. Because spans from different rules are merged
// rather than matched in one alternation, no rule can hide another's secret
// by matching part of it first. It reports the kinds it replaced; 0 when it
// changed nothing.
func redactPass(s string, m uint32) (string, kindSet) {
	var spans []span
	for i := range rules {
		if m&(1<<i) != 0 {
			spans = rules[i].find(s, spans)
		}
	}
	if len(spans) == 0 {
		return s, 0
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	// Merge overlapping and touching spans.
	merged := spans[:1]
	for _, sp := range spans[1:] {
		last := &merged[len(merged)-1]
		if sp.start <= last.end {
			last.end = max(last.end, sp.end)
			last.kinds |= sp.kinds
			continue
		}
		merged = append(merged, sp)
	}
	var b strings.Builder
	b.Grow(len(s))
	var kinds kindSet
	prev := 0
	for _, sp := range merged {
		if s[sp.start:sp.end] == Placeholder {
			continue // already redacted: leave it, do not count it
		}
		b.WriteString(s[prev:sp.start])
		b.WriteString(Placeholder)
		prev = sp.end
		kinds |= sp.kinds
	}
	if kinds == 0 {
		return s, 0
	}
	b.WriteString(s[prev:])
	return b.String(), kinds
}

// find appends the secrets r finds in s to spans.
func (r *rule) find(s string, spans []span) []span {
	if r.check == nil {
		for _, loc := range r.re.FindAllStringSubmatchIndex(s, -1) {
			spans = r.appendSpan(spans, loc, 0)
		}
		return spans
	}
	// With a check, a rejected match must not hide a real one that starts
	// inside it ("Basic Basic dXNlcjpwYXNz"), so search again one byte on.
	// (Searching s[base:] sees a word boundary at base that the full string
	// may not have; that can only add a candidate, which the check still
	// vets.)
	for base := 0; base < len(s); {
		loc := r.re.FindStringSubmatchIndex(s[base:])
		if loc == nil {
			break
		}
		if g := r.group(loc); g >= 0 && r.check(s[base+loc[2*g]:base+loc[2*g+1]]) {
			spans = r.appendSpan(spans, loc, base)
			base += max(loc[1], loc[0]+1)
		} else {
			base += loc[0] + 1
		}
	}
	return spans
}

// group returns the first of r.groups that took part in the match loc, or -1.
func (r *rule) group(loc []int) int {
	for _, g := range r.groups {
		if loc[2*g] >= 0 {
			return g
		}
	}
	return -1
}

// appendSpan appends the secret of match loc (offsets relative to base), if
// it is not empty.
func (r *rule) appendSpan(spans []span, loc []int, base int) []span {
	g := r.group(loc)
	if g < 0 || loc[2*g] >= loc[2*g+1] {
		return spans
	}
	return append(spans, span{start: base + loc[2*g], end: base + loc[2*g+1], kinds: 1 << r.kind})
}
