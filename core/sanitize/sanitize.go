// Package sanitize redacts credentials from what the core sends to the agent
// container. Every result and every error message passes through Value on the
// Response Path (Sanitize → Log → Forward), as defence in depth against a
// plugin handler that leaks a secret it holds — typically by copying a caught
// error, a request dump or a config value into its answer.
//
// # What is redacted
//
// In every string of the value, and in every object key:
//
//   - Authorization headers and fields with the Bearer, Basic, Token or Bot
//     scheme (any case), and a quoted Authorization value whatever its scheme;
//   - Bearer <token> anywhere (any token of one or more characters);
//   - Basic <base64> anywhere, when the base64 decodes to printable text that
//     contains ':' — "basic understanding" does not;
//   - Anthropic sk-ant-…; OpenAI sk-proj-…, sk-svcacct-…, sk-admin-… and
//     sk- followed by 16 or more alphanumerics;
//   - GitHub ghp_ gho_ ghs_ ghu_ ghr_ (8+ characters) and github_pat_…;
//   - Slack xoxa- xoxb- xoxp- xoxr- xoxs- (and xoxe-, xapp-);
//   - AWS access key ids, AKIA or ASIA and 16 upper-case alphanumerics;
//   - Stripe live secret and restricted keys, sk_live_… and rk_live_…;
//   - Google API keys, AIza and 35 more characters;
//   - JWTs: base64url segments whose header and payload start with eyJ;
//   - PEM private keys of every kind (RSA, EC, DSA, OPENSSH, ENCRYPTED,
//     PKCS#8, PGP … BLOCK): the body up to the END line, or to the end of
//     the string when the block is cut short;
//   - the password of scheme://user:password@host;
//   - values assigned to password, passwd, pwd, secret, client_secret,
//     secret_key, secret_access_key, token, access_token, refresh_token,
//     api_key, apikey, api-key, private_key (any case, also as the last word
//     of a longer name such as DB_PASSWORD or X-API-Key) with = : := or =>,
//     quoted or not: password: "hunter2", "api_key": "abc" in JSON text,
//     ?token=abc&x=1. A quoted value runs to its closing quote; an unquoted
//     one stops at whitespace, a quote, a backslash, ',', ';' or '&'.
//
// And in objects: the string value of a key that names a secret —
// password, passwd, secret, client_secret, secret_key, secret_access_key,
// token, access_token, refresh_token, api_key, apikey, x_api_key,
// private_key, authorization, proxy_authorization, cookie, set_cookie, in any
// case and with '-' or '_' — is redacted whole (KindSensitiveKey).
//
// # How a secret is replaced
//
// The secret is replaced by Placeholder. What identifies it without being
// secret stays, so the agent (and the handler author reading the audit log)
// can still tell what was there: the scheme (Bearer [REDACTED]), the name and
// quotes of an assignment (password="[REDACTED]"), the user and host of a URL
// (https://user:[REDACTED]@host), the BEGIN and END lines of a PEM block
// (-----BEGIN RSA PRIVATE KEY-----[REDACTED]-----END RSA PRIVATE KEY-----).
// A token recognised by its own shape (sk-ant-…, ghp_…, AKIA…, a JWT) is
// replaced whole: its prefix is part of it, and the Redaction's Kind already
// says what it was. Secrets that touch or overlap are replaced by one
// Placeholder. An object key that must be redacted and collides with another
// key gets a suffix: "[REDACTED]#2".
//
// Redaction is idempotent: String(String(s)) == String(s). A redacted string
// is scanned again until the rules find nothing new (a Placeholder already
// present is not counted again); should that not settle within a few passes,
// the whole string becomes Placeholder.
//
// # What is not
//
// This is pattern matching: a safety net, not a guarantee. A secret with no
// recognisable shape and no telling name next to it passes: a bare password,
// an AWS secret access key or a hex API key on its own, a token split across
// strings or encoded (URL-escaped, base64, hex), a numeric value under a
// sensitive key, a key name spelled in camelCase (pageToken=…), a DSN with no
// scheme (user:pass@tcp(host)/db), PuTTY .ppk keys. Handlers must still never
// put credentials in what they return; this package only lowers the cost of a
// mistake. The patterns also err the other way at times: "Bearer of bad
// news" loses "of", "pwd: /home/x" loses its directory, and a pagination
// value such as page_token=… is redacted.
//
// # Why it is hand-written
//
// The established secret scanners (gitleaks, trufflehog) scan repositories and
// report findings; they bring large dependency trees and neither rewrites a
// decoded JSON value in place with per-field paths. The small redaction
// packages that exist work on flat strings, are young and single-maintainer,
// and cover fewer of the shapes above. The core needs the walk, the paths,
// an allocation-free clean path and exact control over each pattern, all with
// the standard library — so the rules live here, each with its tests.
//
// # Cost
//
// Most responses are clean. A string is first given to a one-pass byte scan
// that looks for the literal part of every rule (sk-, ghp_, -----BEGIN , a
// key name together with ':' or '='…); only the rules it announces search
// further, and each runs its regexp anchored at the places where its literal
// occurs rather than over the whole string. Time is linear in the length of
// the input, including input built to be slow (a string of nothing but
// "password=" or "sk-ant-a-"). Value walks maps and slices without copying
// them, builds a path only for a redaction, and returns its argument itself,
// with no allocation, when nothing was redacted.
package sanitize

import (
	"bytes"
	"cmp"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Placeholder replaces every redacted secret.
const Placeholder = "[REDACTED]"

// Kinds of secret, as recorded in Redaction.Kind and returned by String.
const (
	KindPrivateKey     = "private-key"       // a PEM private-key block
	KindURLPassword    = "url-password"      // the password in scheme://user:password@host
	KindAuthorization  = "authorization"     // credentials in an Authorization header or field
	KindBearer         = "bearer"            // Bearer <token>
	KindBasicAuth      = "basic-auth"        // Basic <base64 of user:password>
	KindAnthropic      = "anthropic-key"     // sk-ant-…
	KindOpenAI         = "openai-key"        // sk-proj-…, sk-svcacct-…, sk-…
	KindGitHub         = "github-token"      // ghp_…, github_pat_…
	KindSlack          = "slack-token"       // xoxb-…
	KindAWSAccessKeyID = "aws-access-key-id" // AKIA…, ASIA…
	KindStripe         = "stripe-key"        // sk_live_…, rk_live_…
	KindGoogleAPIKey   = "google-api-key"    // AIza…
	KindJWT            = "jwt"               // eyJ….eyJ….…
	KindAssignment     = "assignment"        // password=…, "api_key": "…"
	KindSensitiveKey   = "sensitive-key"     // the value of an object key such as "password"
	KindUnencodable    = "unencodable"       // a Go value that JSON cannot encode (Value only)
	KindTooDeep        = "too-deep"          // nesting deeper than MaxDepth (Value only)
)

// MaxDepth is the deepest nesting of objects and arrays Value walks. A deeper
// object or array (in practice only a cyclic one a handler built by mistake)
// is replaced by Placeholder with KindTooDeep instead of exhausting the stack.
const MaxDepth = 1000

// Redaction records one redacted value: where it was and what kind of secret
// it looked like. Never the value.
type Redaction struct {
	// Path locates the value: the path given to Value, then ".key" for an
	// object member and "[i]" for an array element, as in
	// "result.items[2].url". A redacted key appears in its redacted form.
	Path string
	// Kind is one of the Kind constants.
	Kind string
	// Chars is how many characters (runes) of the value the placeholders
	// stand for, so that a person can tell how much is hidden; the same for
	// every kind recorded at one value. 0 when it cannot be told (a value
	// too deep or not encodable).
	Chars int
}

// String sanitises one string; kinds lists the kinds of what was redacted
// (nil when clean), each once, in the order of the Kind constants. A clean
// string is returned as it is, without allocating.
func String(s string) (out string, kinds []string) {
	out, ks := redact(s)
	return out, ks.names()
}

// Value returns a sanitised copy of v, a decoded JSON value (map[string]any,
// []any, string, json.Number, float64, bool, nil), and the redactions made,
// sorted by path and kind. path is the path prefix of v (e.g. "result" or
// "error.message"); nested paths are dotted for object keys and [i] for array
// elements: "result.items[2].url".
//
// When nothing is redacted it returns v itself and a nil slice, without
// allocating. Otherwise only the objects and arrays on the way to a redaction
// are copied; the rest is shared with v, and v is never modified.
//
// Other Go values a handler may have put in its result are handled too:
// integers and float32 are left alone; []string and []map[string]any are
// walked like an []any, keeping their type; a clean map[string]string is
// returned as it is without allocating. Anything else (structs, pointers,
// other maps and slices), and a map[string]string that needs redacting, is
// scanned through its JSON encoding — the form in which it would reach the
// agent — and is returned as it was if that is clean, or in its sanitised
// decoded form (map[string]any…) if not. A value JSON cannot encode is
// replaced by Placeholder (KindUnencodable).
func Value(v any, path string) (any, []Redaction) {
	var w walker
	out, changed := w.value(v, 0)
	if !changed {
		return v, nil
	}
	reds := make([]Redaction, len(w.found))
	for i, f := range w.found {
		reds[i] = Redaction{Path: f.path(path), Kind: kindNames[f.kind], Chars: f.chars}
	}
	slices.SortFunc(reds, func(a, b Redaction) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Kind, b.Kind))
	})
	return out, reds
}

// walker walks one value for Value. It carries no path down the walk: a
// redaction is recorded with an empty path, and each object and array labels
// the redactions found below it with its key or index on the way back up. A
// path passed down as a chain of stack nodes would be moved to the heap by
// escape analysis (the chain crosses recursive calls), costing allocations
// on every clean value; this way a clean walk allocates nothing.
type walker struct {
	found []found
}

// found is one redaction before its path is rendered.
type found struct {
	kind  int
	chars int       // characters hidden (Redaction.Chars)
	segs  []segment // innermost first
}

// segment is one step of a path: an object key, or an array index when
// index >= 0.
type segment struct {
	key   string
	index int
}

// path renders f's path under the prefix root.
func (f *found) path(root string) string {
	var b strings.Builder
	b.WriteString(root)
	for i := len(f.segs) - 1; i >= 0; i-- {
		sg := f.segs[i]
		if sg.index >= 0 {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(sg.index))
			b.WriteByte(']')
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(sg.key)
	}
	return b.String()
}

// add records a redaction of each kind in ks, at the value being walked,
// which hid chars characters of it.
func (w *walker) add(ks kindSet, chars int) {
	for k := range numKinds {
		if ks&(1<<k) != 0 {
			w.found = append(w.found, found{kind: k, chars: chars})
		}
	}
}

// hidden is how many characters of orig its redacted form out does not
// show: what the new placeholders stand for.
func hidden(orig, out string) int {
	ph := utf8.RuneCountInString(Placeholder)
	added := strings.Count(out, Placeholder) - strings.Count(orig, Placeholder)
	return utf8.RuneCountInString(orig) - utf8.RuneCountInString(out) + added*ph
}

// label adds sg to the paths of the redactions recorded since from.
func (w *walker) label(from int, sg segment) {
	for i := from; i < len(w.found); i++ {
		w.found[i].segs = append(w.found[i].segs, sg)
	}
}

// value returns the sanitised form of v and true, or nil and false when v
// needs no change. depth counts the objects and arrays around v.
func (w *walker) value(v any, depth int) (any, bool) {
	switch x := v.(type) {
	case nil, bool, float64, json.Number, float32,
		int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return nil, false
	case string:
		out, ks := redact(x)
		if ks == 0 {
			return nil, false
		}
		w.add(ks, hidden(x, out))
		return out, true
	case map[string]any:
		if depth >= MaxDepth {
			return w.tooDeep()
		}
		return w.object(x, depth)
	case []any:
		if depth >= MaxDepth {
			return w.tooDeep()
		}
		return w.array(x, depth)
	case []string:
		return w.stringSlice(x)
	case []map[string]any:
		if depth >= MaxDepth {
			return w.tooDeep()
		}
		return w.objectSlice(x, depth)
	case map[string]string:
		if stringMapClean(x) {
			return nil, false
		}
		return w.other(v, depth)
	default:
		return w.other(v, depth)
	}
}

func (w *walker) tooDeep() (any, bool) {
	w.add(1<<kTooDeep, 0)
	return Placeholder, true
}

// object sanitises m. The common case is one pass that copies nothing; the
// first key that needs redacting hands the whole object to objectRenaming.
func (w *walker) object(m map[string]any, depth int) (any, bool) {
	mark := len(w.found)
	var out map[string]any
	for k, e := range m {
		if trigger(k) != 0 {
			if _, ks := redact(k); ks != 0 {
				w.found = w.found[:mark] // objectRenaming records them again
				return w.objectRenaming(m, depth)
			}
		}
		from := len(w.found)
		nv, changed := w.member(k, e, depth+1)
		if !changed {
			continue
		}
		w.label(from, segment{key: k, index: -1})
		if out == nil {
			out = maps.Clone(m)
		}
		out[k] = nv
	}
	if out == nil {
		return nil, false
	}
	return out, true
}

// objectRenaming sanitises m, some of whose keys must be redacted. Keys are
// visited in sorted order so that the suffixes given to colliding redacted
// keys ("[REDACTED]#2") do not depend on map iteration order.
func (w *walker) objectRenaming(m map[string]any, depth int) (any, bool) {
	keys := slices.Sorted(maps.Keys(m))
	name := make(map[string]string, len(m)) // original key → output key
	taken := make(map[string]bool, len(m))
	type renamed struct {
		key, red string
		kinds    kindSet
	}
	var ren []renamed
	for _, k := range keys {
		if red, ks := redact(k); ks != 0 {
			ren = append(ren, renamed{k, red, ks})
		} else {
			name[k] = k
			taken[k] = true
		}
	}
	for _, r := range ren {
		nk := r.red
		for i := 2; taken[nk]; i++ {
			nk = r.red + "#" + strconv.Itoa(i)
		}
		taken[nk] = true
		name[r.key] = nk
		from := len(w.found)
		w.add(r.kinds, hidden(r.key, r.red))
		w.label(from, segment{key: nk, index: -1})
	}
	out := make(map[string]any, len(m))
	for _, k := range keys {
		from := len(w.found)
		nv, changed := w.member(k, m[k], depth+1)
		if changed {
			w.label(from, segment{key: name[k], index: -1})
		} else {
			nv = m[k]
		}
		out[name[k]] = nv
	}
	return out, true
}

// member sanitises the value e of object key k.
func (w *walker) member(k string, e any, depth int) (any, bool) {
	if s, ok := e.(string); ok && s != "" && s != Placeholder && sensitiveKey(k) {
		w.add(1<<kSensitiveKey, utf8.RuneCountInString(s))
		return Placeholder, true
	}
	return w.value(e, depth)
}

func (w *walker) array(a []any, depth int) (any, bool) {
	var out []any
	for i, e := range a {
		from := len(w.found)
		nv, changed := w.value(e, depth+1)
		if !changed {
			continue
		}
		w.label(from, segment{index: i})
		if out == nil {
			out = slices.Clone(a)
		}
		out[i] = nv
	}
	if out == nil {
		return nil, false
	}
	return out, true
}

func (w *walker) stringSlice(a []string) (any, bool) {
	var out []string
	for i, s := range a {
		red, ks := redact(s)
		if ks == 0 {
			continue
		}
		from := len(w.found)
		w.add(ks, hidden(s, red))
		w.label(from, segment{index: i})
		if out == nil {
			out = slices.Clone(a)
		}
		out[i] = red
	}
	if out == nil {
		return nil, false
	}
	return out, true
}

func (w *walker) objectSlice(a []map[string]any, depth int) (any, bool) {
	var out []map[string]any
	for i, m := range a {
		from := len(w.found)
		nv, changed := w.object(m, depth+1)
		if !changed {
			continue
		}
		w.label(from, segment{index: i})
		if out == nil {
			out = slices.Clone(a)
		}
		out[i] = nv.(map[string]any)
	}
	if out == nil {
		return nil, false
	}
	return out, true
}

// stringMapClean reports whether m needs no redaction, without allocating
// when it does not.
func stringMapClean(m map[string]string) bool {
	for k, s := range m {
		if s != "" && s != Placeholder && sensitiveKey(k) {
			return false
		}
		if _, ks := redact(k); ks != 0 {
			return false
		}
		if _, ks := redact(s); ks != 0 {
			return false
		}
	}
	return true
}

// other sanitises a Go value of a type JSON decoding does not produce, through
// its JSON encoding.
func (w *walker) other(v any, depth int) (any, bool) {
	b, err := json.Marshal(v)
	var decoded any
	if err == nil {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		err = d.Decode(&decoded)
	}
	if err != nil {
		w.add(1<<kUnencodable, 0)
		return Placeholder, true
	}
	return w.value(decoded, depth)
}

// sensitiveKeys are the object keys whose string values are redacted whole,
// compared ignoring ASCII case and treating '-' as '_'.
var sensitiveKeys = []string{
	"password", "passwd", "secret", "client_secret", "secret_key", "secret_access_key",
	"token", "access_token", "refresh_token",
	"api_key", "apikey", "x_api_key", "private_key",
	"authorization", "proxy_authorization", "cookie", "set_cookie",
}

// sensitiveKey reports whether k names a secret. It does not allocate.
func sensitiveKey(k string) bool {
	for _, s := range sensitiveKeys {
		if len(k) == len(s) && keyEqual(k, s) {
			return true
		}
	}
	return false
}

// keyEqual compares k with the lower-case, '_'-separated name s.
func keyEqual(k, s string) bool {
	for i := 0; i < len(s); i++ {
		c := k[i]
		switch {
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		case c == '-':
			c = '_'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}
