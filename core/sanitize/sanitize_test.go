package sanitize

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// fake returns prefix followed by n characters of a token-like alphabet.
// Test tokens are built at run time, not written out, so that secret
// scanners (push protection) do not flag this file.
func fake(prefix string, n int) string {
	const alpha = "aB3dE5gH7jK9mN1pQrS2tU4vW6xY8z0C"
	var b strings.Builder
	b.WriteString(prefix)
	for i := range n {
		b.WriteByte(alpha[i%len(alpha)])
	}
	return b.String()
}

// upper is fake for AWS access key ids: upper-case alphanumerics.
func upper(prefix string, n int) string {
	return prefix + strings.ToUpper(fake("", n))
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

var (
	jwtHeader  = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
	jwtPayload = "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkJvYiJ9"
	jwt        = jwtHeader + "." + jwtPayload + "." + fake("", 43)
)

// pem returns a PEM block with the given label and a fake body.
func pem(label string) string {
	return "-----BEGIN " + label + "-----\n" + fake("MII", 60) + "\n" + fake("", 40) + "\n-----END " + label + "-----"
}

// redactedPEM is what pem(label) becomes.
func redactedPEM(label string) string {
	return "-----BEGIN " + label + "-----" + Placeholder + "-----END " + label + "-----"
}

type stringCase struct {
	name  string
	in    string
	want  string
	kinds []string
}

// positives must be redacted as shown.
var positives = []stringCase{
	// Authorization and Bearer.
	{"bearer/header", "Authorization: Bearer " + fake("", 24), "Authorization: Bearer [REDACTED]", []string{KindAuthorization, KindBearer}},
	{"bearer/bare one char", "got Bearer x from cache", "got Bearer [REDACTED] from cache", []string{KindBearer}},
	{"bearer/bare token alphabet", "Bearer a-b.c_d~e+f/g==", "Bearer [REDACTED]", []string{KindBearer}},
	{"bearer/jwt", "Bearer " + jwt, "Bearer [REDACTED]", []string{KindBearer, KindJWT}},
	{"bearer/header lower case", "authorization: bearer abc123", "authorization: bearer [REDACTED]", []string{KindAuthorization}},
	{"bearer/proxy header", "Proxy-Authorization: bearer abc", "Proxy-Authorization: bearer [REDACTED]", []string{KindAuthorization}},
	{"bearer/json text", `{"headers":{"Authorization":"Bearer abc.def"}}`, `{"headers":{"Authorization":"Bearer [REDACTED]"}}`, []string{KindAuthorization, KindBearer}},
	{"bearer/twice", "Bearer Bearer abc", "Bearer [REDACTED] [REDACTED]", []string{KindBearer}},
	{"bearer/parenthesised", "(Bearer abc123)", "(Bearer [REDACTED])", []string{KindBearer}},
	{"authorization/token scheme", "Authorization: token " + fake("", 40), "Authorization: token [REDACTED]", []string{KindAuthorization}},
	{"authorization/bot scheme", "Authorization: Bot " + fake("", 30), "Authorization: Bot [REDACTED]", []string{KindAuthorization}},
	{"authorization/quoted other scheme", `"Authorization": "Digest username=\"bob\", response=\"abc\""`, `"Authorization": "[REDACTED]"`, []string{KindAuthorization}},
	{"basic/header", "Authorization: Basic " + b64("user:pass"), "Authorization: Basic [REDACTED]", []string{KindAuthorization, KindBasicAuth}},
	{"basic/header without colon", "Authorization: Basic " + b64("foobar"), "Authorization: Basic [REDACTED]", []string{KindAuthorization}},
	{"basic/bare", "upstream rejected Basic " + b64("user:hunter2") + " (401)", "upstream rejected Basic [REDACTED] (401)", []string{KindBasicAuth}},
	{"basic/bare padded", "basic " + b64("admin:pw"), "basic [REDACTED]", []string{KindBasicAuth}},
	{"basic/after false start", "Basic Basic " + b64("user:pass"), "Basic Basic [REDACTED]", []string{KindBasicAuth}},

	// Vendor tokens.
	{"anthropic/api03", "key " + fake("sk-ant-api03-", 93) + "AA rejected", "key [REDACTED] rejected", []string{KindAnthropic}},
	{"anthropic/oat01", fake("sk-ant-oat01-", 80), Placeholder, []string{KindAnthropic}},
	{"anthropic/short", "sk-ant-x", Placeholder, []string{KindAnthropic}},
	{"openai/proj", "OPENAI " + fake("sk-proj-", 120), "OPENAI [REDACTED]", []string{KindOpenAI}},
	{"openai/svcacct", fake("sk-svcacct-", 60), Placeholder, []string{KindOpenAI}},
	{"openai/admin", fake("sk-admin-", 60), Placeholder, []string{KindOpenAI}},
	{"openai/legacy", "'" + fake("sk-", 48) + "'", "'[REDACTED]'", []string{KindOpenAI}},
	{"openai/sixteen", fake("sk-", 16), Placeholder, []string{KindOpenAI}},
	{"github/ghp", "token " + fake("ghp_", 36), "token [REDACTED]", []string{KindGitHub}},
	{"github/gho", fake("gho_", 36), Placeholder, []string{KindGitHub}},
	{"github/ghs", fake("ghs_", 36), Placeholder, []string{KindGitHub}},
	{"github/ghu", fake("ghu_", 36), Placeholder, []string{KindGitHub}},
	{"github/ghr", fake("ghr_", 36), Placeholder, []string{KindGitHub}},
	{"github/eight", fake("ghp_", 8), Placeholder, []string{KindGitHub}},
	{"github/pat", fake("github_pat_", 22) + "_" + fake("", 59), Placeholder, []string{KindGitHub}},
	{"slack/xoxa", fake("xoxa-2-", 20), Placeholder, []string{KindSlack}},
	{"slack/xoxb", "bot " + fake("xoxb-1234-5678-", 24) + ".", "bot [REDACTED].", []string{KindSlack}},
	{"slack/xoxp", fake("xoxp-1-", 20), Placeholder, []string{KindSlack}},
	{"slack/xoxr", fake("xoxr-", 20), Placeholder, []string{KindSlack}},
	{"slack/xoxs", fake("xoxs-", 20), Placeholder, []string{KindSlack}},
	{"aws/akia", "id=" + upper("AKIA", 16) + ",", "id=[REDACTED],", []string{KindAWSAccessKeyID}},
	{"aws/asia", upper("ASIA", 16), Placeholder, []string{KindAWSAccessKeyID}},
	{"aws/doc example", "AKIAIOSFODNN7EXAMPLE", Placeholder, []string{KindAWSAccessKeyID}},
	{"stripe/sk_live", fake("sk_live_", 24), Placeholder, []string{KindStripe}},
	{"stripe/rk_live", "key: " + fake("rk_live_", 24), "key: [REDACTED]", []string{KindStripe}},
	{"google/api key", "?key=" + fake("AIza", 35), "?key=[REDACTED]", []string{KindGoogleAPIKey}},
	{"google/ends in dash", fake("AIza", 34) + "- x", Placeholder + " x", []string{KindGoogleAPIKey}},
	{"jwt/bare", "id_token is " + jwt + ".", "id_token is [REDACTED].", []string{KindJWT}},
	{"jwt/unsigned", jwtHeader + "." + jwtPayload + ".", Placeholder, []string{KindJWT}},

	// PEM private keys: the body goes, the BEGIN and END lines stay.
	{"pem/rsa", "key:\n" + pem("RSA PRIVATE KEY") + "\nend", "key:\n" + redactedPEM("RSA PRIVATE KEY") + "\nend", []string{KindPrivateKey}},
	{"pem/ec", pem("EC PRIVATE KEY"), redactedPEM("EC PRIVATE KEY"), []string{KindPrivateKey}},
	{"pem/dsa", pem("DSA PRIVATE KEY"), redactedPEM("DSA PRIVATE KEY"), []string{KindPrivateKey}},
	{"pem/openssh", pem("OPENSSH PRIVATE KEY"), redactedPEM("OPENSSH PRIVATE KEY"), []string{KindPrivateKey}},
	{"pem/encrypted", pem("ENCRYPTED PRIVATE KEY"), redactedPEM("ENCRYPTED PRIVATE KEY"), []string{KindPrivateKey}},
	{"pem/pkcs8", pem("PRIVATE KEY"), redactedPEM("PRIVATE KEY"), []string{KindPrivateKey}},
	{"pem/pgp", pem("PGP PRIVATE KEY BLOCK"), redactedPEM("PGP PRIVATE KEY BLOCK"), []string{KindPrivateKey}},
	{"pem/two blocks", pem("EC PRIVATE KEY") + " and " + pem("PRIVATE KEY"), redactedPEM("EC PRIVATE KEY") + " and " + redactedPEM("PRIVATE KEY"), []string{KindPrivateKey}},
	{"pem/escaped newlines", `"-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\n"`, `"-----BEGIN RSA PRIVATE KEY-----[REDACTED]-----END RSA PRIVATE KEY-----\n"`, []string{KindPrivateKey}},
	{"pem/truncated", "read -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA", "read -----BEGIN OPENSSH PRIVATE KEY-----[REDACTED]", []string{KindPrivateKey}},

	// Credentials in URLs.
	{"url/https", "GET https://user:pass@example.com/x failed", "GET https://user:[REDACTED]@example.com/x failed", []string{KindURLPassword}},
	{"url/postgres", "postgres://app:s3cr3t@db:5432/app?sslmode=disable", "postgres://app:[REDACTED]@db:5432/app?sslmode=disable", []string{KindURLPassword}},
	{"url/no user", "redis://:hunter2@cache:6379/0", "redis://:[REDACTED]@cache:6379/0", []string{KindURLPassword}},
	{"url/at in password", "https://u:p@ss@host/", "https://u:[REDACTED]@host/", []string{KindURLPassword}},
	{"url/quoted", `dial "amqp://guest:guest@mq:5672/"`, `dial "amqp://guest:[REDACTED]@mq:5672/"`, []string{KindURLPassword}},

	// Assignments.
	{"assign/password", "password=hunter2", "password=[REDACTED]", []string{KindAssignment}},
	{"assign/passwd", "passwd=hunter2", "passwd=[REDACTED]", []string{KindAssignment}},
	{"assign/pwd", "pwd=hunter2", "pwd=[REDACTED]", []string{KindAssignment}},
	{"assign/secret", "secret=abc", "secret=[REDACTED]", []string{KindAssignment}},
	{"assign/client_secret", "client_secret=abc", "client_secret=[REDACTED]", []string{KindAssignment}},
	{"assign/token", "token=abc", "token=[REDACTED]", []string{KindAssignment}},
	{"assign/access_token", "access_token=abc", "access_token=[REDACTED]", []string{KindAssignment}},
	{"assign/refresh_token", "refresh_token=abc", "refresh_token=[REDACTED]", []string{KindAssignment}},
	{"assign/api_key", "api_key=abc", "api_key=[REDACTED]", []string{KindAssignment}},
	{"assign/apikey", "apikey=abc", "apikey=[REDACTED]", []string{KindAssignment}},
	{"assign/api-key", "api-key=abc", "api-key=[REDACTED]", []string{KindAssignment}},
	{"assign/private_key", "private_key=abc", "private_key=[REDACTED]", []string{KindAssignment}},
	{"assign/upper case", "PASSWORD=hunter2", "PASSWORD=[REDACTED]", []string{KindAssignment}},
	{"assign/colon", "Password: hunter2", "Password: [REDACTED]", []string{KindAssignment}},
	{"assign/double quoted", `password: "hunter2"`, `password: "[REDACTED]"`, []string{KindAssignment}},
	{"assign/quoted with spaces", `password = "correct horse battery"`, `password = "[REDACTED]"`, []string{KindAssignment}},
	{"assign/single quoted", `secret='a b'`, `secret='[REDACTED]'`, []string{KindAssignment}},
	{"assign/json text", `{"api_key": "abc", "n": 1}`, `{"api_key": "[REDACTED]", "n": 1}`, []string{KindAssignment}},
	{"assign/json text escaped quote", `{"password":"ab\"cd"}`, `{"password":"[REDACTED]"}`, []string{KindAssignment}},
	{"assign/json in json", `{\"token\":\"abc\"}`, `{\"token\":\"[REDACTED]\"}`, []string{KindAssignment}},
	{"assign/url query", "https://api.example.com/v1?token=abc&x=1", "https://api.example.com/v1?token=[REDACTED]&x=1", []string{KindAssignment}},
	{"assign/stops at comma", "token=abc,next=1", "token=[REDACTED],next=1", []string{KindAssignment}},
	{"assign/stops at semicolon", "token=abc; path=/", "token=[REDACTED]; path=/", []string{KindAssignment}},
	{"assign/unclosed quote", `password="hunter2`, `password="[REDACTED]`, []string{KindAssignment}},
	{"assign/env var", "DB_PASSWORD=hunter2 ./run", "DB_PASSWORD=[REDACTED] ./run", []string{KindAssignment}},
	{"assign/header", "X-API-Key: abc123", "X-API-Key: [REDACTED]", []string{KindAssignment}},
	{"assign/aws secret", "aws_secret_access_key = " + fake("", 40), "aws_secret_access_key = [REDACTED]", []string{KindAssignment}},
	{"assign/go", `token := "abc"`, `token := "[REDACTED]"`, []string{KindAssignment}},
	{"assign/ruby", `:password => 'x'`, `:password => '[REDACTED]'`, []string{KindAssignment}},

	// Several at once; overlapping matches merge.
	{"mixed", "token=" + fake("ghp_", 36) + " and Bearer q and https://a:b@h", "token=[REDACTED] and Bearer [REDACTED] and https://a:[REDACTED]@h", []string{KindURLPassword, KindBearer, KindGitHub, KindAssignment}},
	{"overlap/basic then token", "Authorization: Basic " + fake("sk-ant-api03-", 20), "Authorization: Basic [REDACTED]", []string{KindAuthorization, KindAnthropic}},
}

// negatives must pass unchanged: near misses of every rule, and ordinary text.
var negatives = []string{
	// Bearer, Basic, Authorization.
	"Bearer",
	"Bearer ",
	"the bearer of bad news",
	"Bearer [REDACTED]",
	"Authorization: Bearer",
	"Authorization: required",
	"authorization failed for user bob",
	"a basic understanding of Go",
	"Basic auth is required",
	"Basic " + b64("foobar"), // no ':' in the decoded text
	"Basic Ohio",             // decodes to ':' and binary
	// Vendor-like.
	"sk-ant",
	"sk-ant-",
	"task-force-alpha-bravo-charlie-delta",
	"pip install sk-learn",
	"sk-1234",
	"sk-" + fake("", 15),
	fake("sk_test_", 24),
	fake("pk_live_", 24),
	"ghp_",
	"ghp_short",
	"ghs_count",
	fake("xghp_", 36),
	"github_pat_",
	"xoxb",
	"xoxb-",
	"xoxo-hugs",
	upper("AKIA", 15),
	upper("AKIA", 17),
	strings.ToLower(upper("akia", 16)),
	fake("AIza", 20),
	jwtHeader,
	jwtHeader + "." + jwtPayload,
	"eyJ.eyJ.",
	// PEM blocks that are not private keys.
	"-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----",
	"-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYI\n-----END PUBLIC KEY-----",
	"-----BEGIN RSA PUBLIC KEY-----\nMIIBCgKCAQEA\n-----END RSA PUBLIC KEY-----",
	// URLs without a password.
	"https://example.com:8443/path",
	"https://user@example.com/",
	"git@github.com:org/repo.git",
	"mailto:bob@example.com",
	"https://matrix.to/#/@alice:example.org",
	"https://example.com/?next=a:b@c",
	// Names near the assignment keys.
	"password reset email sent to bob@example.com",
	"passwords: 3",
	"password_hint: dog",
	"passwordless=true",
	"tokens: 42",
	"max_tokens=1024",
	"token_count: 5",
	"mytoken=abc",
	"secretary: Bob",
	"token",
	"password=",
	`password: ""`,
	`password: ''`,
	"the api key is invalid",
	"password=[REDACTED]",
	`"api_key": "[REDACTED]"`,
	// Ordinary text.
	"",
	Placeholder,
	"2026-03-05T10:00:00Z",
	"123e4567-e89b-12d3-a456-426614174000",
	"Meeting at 10:30 with the team",
	"ratio=0.5; mode=fast",
	"Dentist appointment at 12 High Street",
	"café – naïve résumé ✓",
}

func TestStringRedacts(t *testing.T) {
	for _, tc := range positives {
		t.Run(tc.name, func(t *testing.T) {
			got, kinds := String(tc.in)
			if got != tc.want {
				t.Errorf("String(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			if !slices.Equal(kinds, tc.kinds) {
				t.Errorf("String(%q) kinds = %q, want %q", tc.in, kinds, tc.kinds)
			}
			if again, k := String(got); again != got || k != nil {
				t.Errorf("not idempotent: String(%q) = %q, %q", got, again, k)
			}
		})
	}
}

func TestStringLeavesNearMisses(t *testing.T) {
	for _, in := range negatives {
		t.Run(in, func(t *testing.T) {
			got, kinds := String(in)
			if got != in || kinds != nil {
				t.Errorf("String(%q) = %q, %q; want it unchanged", in, got, kinds)
			}
		})
	}
}

// TestRuleTable checks the indexes that tie the tables together: rules[i]
// reports kind i and is announced by trigger bit 1<<i.
func TestRuleTable(t *testing.T) {
	bits := []uint32{tPEM, tURL, tAuthorization, tBearer, tBasic, tAnthropic, tOpenAI,
		tGitHub, tSlack, tAWS, tStripe, tGoogle, tJWT, tAssignment}
	if len(bits) != len(rules) {
		t.Fatalf("%d trigger bits for %d rules", len(bits), len(rules))
	}
	for i, r := range rules {
		if r.kind != i || bits[i] != 1<<i {
			t.Errorf("rules[%d] has kind %d (%s) and trigger bit %#x", i, r.kind, kindNames[r.kind], bits[i])
		}
	}
}

// TestRulesAgreeWithReference runs checkRules over the table (FuzzRules
// explores further).
func TestRulesAgreeWithReference(t *testing.T) {
	var inputs []string
	for _, tc := range positives {
		inputs = append(inputs, tc.in)
	}
	inputs = append(inputs, negatives...)
	for _, s := range inputs {
		checkRules(t, s)
	}
}

// reference holds each rule as one unanchored regexp, left context included:
// the plain statement of what the rule matches.
var reference = func() []*regexp.Regexp {
	res := make([]*regexp.Regexp, len(rules))
	for i, r := range rules {
		res[i] = regexp.MustCompile(r.left + r.pattern)
	}
	return res
}()

// checkRules checks the two shortcuts the engine takes against the reference
// regexps: the prefilter must announce every rule whose reference matches s,
// and the anchored search from candidate positions must find every secret
// the reference finds.
func checkRules(t *testing.T, s string) {
	t.Helper()
	m := trigger(s)
	for i := range rules {
		r := &rules[i]
		locs := reference[i].FindAllStringSubmatchIndex(s, -1)
		if len(locs) > 0 && m&(1<<i) == 0 {
			t.Errorf("trigger(%q) misses rule %d (%s)", s, i, kindNames[r.kind])
		}
		found := r.find(s, nil, matchRegexp)
		for _, loc := range locs {
			g := r.group(loc)
			a, b := loc[2*g], loc[2*g+1]
			if a >= b || r.check != nil && !r.check(s[a:b]) {
				continue
			}
			if !slices.ContainsFunc(found, func(sp span) bool { return sp.start <= a && b <= sp.end }) {
				t.Errorf("rule %d (%s) misses %q in %q; found %v", i, kindNames[r.kind], s[a:b], s, found)
			}
		}
	}
}

// TestPathologicalInputsStayLinear guards against quadratic behaviour: every
// rule tries its pattern at each candidate position, so a string made of
// nothing but candidates must not be rescanned from each of them. It counts
// the runes the regexp engine reads rather than timing the calls, so the
// answer does not depend on how busy the machine is: a quadratic engine reads
// thousands of times the input here, a linear one a small constant multiple,
// and the same multiple at 64 KiB and at 256 KiB. (The timings are in make
// bench: BenchmarkStringPathological.)
func TestPathologicalInputsStayLinear(t *testing.T) {
	var read, budget int
	counting := func(re *regexp.Regexp, s string) []int {
		cr := &countingReader{r: strings.NewReader(s), n: &read, budget: budget}
		return re.FindReaderSubmatchIndex(cr)
	}
	for _, unit := range pathologicalUnits {
		perByte := func(n int) float64 {
			s := strings.Repeat(unit, n/len(unit))
			read, budget = 0, 2*maxReadsPerByte*len(s)
			redactWith(s, counting)
			return float64(read) / float64(len(s))
		}
		small, large := perByte(64<<10), perByte(256<<10)
		if large > maxReadsPerByte || large > 1.5*small+1 {
			t.Errorf("String(%q × n): the regexp engine read %.1f runes per input byte at 64 KiB and %.1f at 256 KiB; linear is a constant at most %d",
				unit, small, large, maxReadsPerByte)
		}
	}
}

// maxReadsPerByte bounds the runes the engine may read per input byte on the
// pathological inputs: each byte is read by a bounded number of attempts (at
// most one per rule that can start near it).
const maxReadsPerByte = 64

// pathologicalUnits are strings made of nothing but rule candidates, repeated
// to build inputs where a naive engine would rescan from every candidate.
var pathologicalUnits = []string{
	"password=", "-x-password=", "password: \"", "token: 'x ", "=token",
	"sk-ant-a-", "sk-", "xoxb-1-", "AIza-", "ghp_aaaaaaaa", "-AKIAAAAAAAAAAAAAAAAA", "eyJa.",
	"-----BEGIN PRIVATE KEY-----", "Bearer ", "Bearer\t", "basic ", "https://a:b@", "a://",
	"authorization: \"x ", "Authorization: Bearer x:",
}

// countingReader is an io.RuneReader that counts the runes read through it
// into *n. Once *n passes budget it reads as the end of the input, so that a
// quadratic engine fails the test quickly instead of running for minutes.
type countingReader struct {
	r      *strings.Reader
	n      *int
	budget int
}

func (c *countingReader) ReadRune() (rune, int, error) {
	*c.n++
	if *c.n > c.budget {
		return 0, 0, io.EOF
	}
	return c.r.ReadRune()
}

func TestStringCleanDoesNotAllocate(t *testing.T) {
	s := "Dentist appointment at 12 High Street, 2026-03-05T10:00:00Z"
	if n := testing.AllocsPerRun(100, func() { _, _ = String(s) }); n != 0 {
		t.Errorf("String on a clean string: %v allocations, want 0", n)
	}
}

func TestValueNested(t *testing.T) {
	ghp := fake("ghp_", 36)
	clean := map[string]any{"a": "b", "n": json.Number("3")}
	in := map[string]any{
		"items": []any{
			map[string]any{"url": "https://u:pw@h/x", "n": json.Number("1")},
			"plain",
			map[string]any{"note": "sent Bearer abc", "ok": true},
		},
		"password": "hunter2",
		"meta":     map[string]any{"ok": true, "empty": "", "token": "", "none": nil, "f": 1.5},
		"clean":    clean,
		ghp:        "a map keyed by a token",
	}
	before := deepCopy(in)

	out, reds := Value(in, "result")

	want := map[string]any{
		"items": []any{
			map[string]any{"url": "https://u:[REDACTED]@h/x", "n": json.Number("1")},
			"plain",
			map[string]any{"note": "sent Bearer [REDACTED]", "ok": true},
		},
		"password":  Placeholder,
		"meta":      map[string]any{"ok": true, "empty": "", "token": "", "none": nil, "f": 1.5},
		"clean":     map[string]any{"a": "b", "n": json.Number("3")},
		Placeholder: "a map keyed by a token",
	}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("Value =\n%#v\nwant\n%#v", out, want)
	}
	wantReds := []Redaction{
		{"result.[REDACTED]", KindGitHub, 40},
		{"result.items[0].url", KindURLPassword, 2},
		{"result.items[2].note", KindBearer, 3},
		{"result.password", KindSensitiveKey, 7},
	}
	if !slices.Equal(reds, wantReds) {
		t.Errorf("redactions =\n%v\nwant\n%v", reds, wantReds)
	}
	if !reflect.DeepEqual(in, before) {
		t.Errorf("Value modified its input:\n%#v\nwas\n%#v", in, before)
	}
	// Untouched subtrees are shared, not copied.
	if got := out.(map[string]any)["clean"]; !sameMap(got, clean) {
		t.Error("a clean nested object was copied")
	}
	// What Value returns is clean.
	if _, again := Value(out, "result"); again != nil {
		t.Errorf("sanitising the output again redacted %v", again)
	}
}

func TestValuePaths(t *testing.T) {
	tests := []struct {
		name string
		v    any
		path string
		want string
	}{
		{"string at root", "Bearer x", "error.message", "error.message"},
		{"array, empty prefix", []any{"ok", "Bearer x"}, "", "[1]"},
		{"object, empty prefix", map[string]any{"a": "Bearer x"}, "", "a"},
		{"array in array", []any{[]any{"ok", []any{"Bearer x"}}}, "result", "result[0][1][0]"},
		{"deep", map[string]any{"a": []any{map[string]any{"b": map[string]any{"c": "Bearer x"}}}}, "result", "result.a[0].b.c"},
		{"string slice", map[string]any{"tags": []string{"x", "Bearer x"}}, "result", "result.tags[1]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, reds := Value(tc.v, tc.path)
			if len(reds) != 1 || reds[0].Path != tc.want {
				t.Errorf("redactions = %v, want one at %q", reds, tc.want)
			}
		})
	}
}

func TestValueCleanIsIdentity(t *testing.T) {
	m := map[string]any{
		"id":       "evt_01HQ3",
		"title":    "Dentist appointment",
		"start":    "2026-03-05T10:00:00Z",
		"tags":     []any{"health", "personal"},
		"location": map[string]any{"street": "12 High Street", "city": "Leeds"},
		"count":    json.Number("2"),
		"ok":       true,
		"password": "", // empty: nothing to hide
	}
	out, reds := Value(m, "result")
	if reds != nil {
		t.Fatalf("redactions = %v, want nil", reds)
	}
	if !sameMap(out, m) {
		t.Error("a clean object was copied; want the same map")
	}

	a := []any{"one", json.Number("2"), nil}
	outA, _ := Value(a, "result")
	if reflect.ValueOf(outA).Pointer() != reflect.ValueOf(a).Pointer() {
		t.Error("a clean array was copied; want the same slice")
	}

	if n := testing.AllocsPerRun(100, func() { _, _ = Value(m, "result") }); n != 0 {
		t.Errorf("Value on a clean object: %v allocations, want 0", n)
	}
}

func TestValueSensitiveKeys(t *testing.T) {
	tests := []struct {
		key      string
		value    any
		redacted bool
	}{
		{"password", "hunter2", true},
		{"Password", "hunter2", true},
		{"passwd", "x", true},
		{"secret", "x", true},
		{"client_secret", "x", true},
		{"client-secret", "x", true},
		{"token", "x", true},
		{"TOKEN", "x", true},
		{"access_token", "x", true},
		{"refresh_token", "x", true},
		{"api_key", "x", true},
		{"API-KEY", "x", true},
		{"apikey", "x", true},
		{"x-api-key", "x", true},
		{"private_key", "x", true},
		{"authorization", "Basic Zm9v", true},
		{"Proxy-Authorization", "x", true},
		{"Cookie", "session=abc", true},
		{"Set-Cookie", "session=abc; HttpOnly", true},
		{"secret_access_key", "x", true},
		// Not redacted.
		{"password", "", false},
		{"password", Placeholder, false},
		{"token", json.Number("5"), false},
		{"token", nil, false},
		{"tokens", "abc", false},
		{"pwd", "/home/bob", false},
		{"page_token", "abc", false},
		{"author", "Bob", false},
		{"secretary", "Alice", false},
	}
	for _, tc := range tests {
		t.Run(tc.key+"="+strings.ReplaceAll(stringOf(tc.value), "/", "_"), func(t *testing.T) {
			in := map[string]any{tc.key: tc.value}
			out, reds := Value(in, "result")
			got := out.(map[string]any)[tc.key]
			if !tc.redacted {
				if reds != nil || !reflect.DeepEqual(got, tc.value) {
					t.Errorf("redacted %q: %v, %v", tc.key, got, reds)
				}
				return
			}
			want := []Redaction{{"result." + tc.key, KindSensitiveKey, len([]rune(tc.value.(string)))}}
			if got != Placeholder || !slices.Equal(reds, want) {
				t.Errorf("got %v, %v; want %q, %v", got, reds, Placeholder, want)
			}
		})
	}
}

func TestValueRedactsKeys(t *testing.T) {
	ghp, ant := fake("ghp_", 36), fake("sk-ant-api03-", 40)
	in := map[string]any{
		ghp:                 json.Number("1"),
		ant:                 json.Number("2"),
		Placeholder:         json.Number("3"), // a clean key that is already the placeholder
		"note " + ghp:       "Bearer abc",
		"fine":              "ok",
		"password=" + "abc": true,
	}
	out, reds := Value(in, "r")
	want := map[string]any{
		Placeholder:           json.Number("3"),
		"[REDACTED]#2":        json.Number("1"), // keys are numbered in sorted order: ghp_… < sk-ant-…
		"[REDACTED]#3":        json.Number("2"),
		"note [REDACTED]":     "Bearer [REDACTED]",
		"fine":                "ok",
		"password=[REDACTED]": true,
	}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("Value =\n%#v\nwant\n%#v", out, want)
	}
	wantReds := []Redaction{
		{"r.[REDACTED]#2", KindGitHub, 40},
		{"r.[REDACTED]#3", KindAnthropic, 53},
		{"r.note [REDACTED]", KindBearer, 3},
		{"r.note [REDACTED]", KindGitHub, 40},
		{"r.password=[REDACTED]", KindAssignment, 3},
	}
	if !slices.Equal(reds, wantReds) {
		t.Errorf("redactions =\n%v\nwant\n%v", reds, wantReds)
	}
	for _, r := range reds {
		if strings.Contains(r.Path, ghp) || strings.Contains(r.Path, ant) {
			t.Errorf("a path holds the secret: %q", r.Path)
		}
	}
}

func TestValueOtherGoTypes(t *testing.T) {
	type event struct {
		Title string `json:"title"`
		URL   string `json:"url"`
	}
	t.Run("string slice", func(t *testing.T) {
		in := map[string]any{"tags": []string{"a", "Bearer x"}}
		out, reds := Value(in, "result")
		if got := out.(map[string]any)["tags"]; !reflect.DeepEqual(got, []string{"a", "Bearer [REDACTED]"}) {
			t.Errorf("tags = %#v", got)
		}
		if len(reds) != 1 || reds[0] != (Redaction{"result.tags[1]", KindBearer, 1}) {
			t.Errorf("redactions = %v", reds)
		}
	})
	t.Run("struct with a secret", func(t *testing.T) {
		in := map[string]any{"event": event{"x", "https://u:pw@h"}}
		out, reds := Value(in, "result")
		want := map[string]any{"title": "x", "url": "https://u:[REDACTED]@h"}
		if got := out.(map[string]any)["event"]; !reflect.DeepEqual(got, want) {
			t.Errorf("event = %#v, want %#v", got, want)
		}
		if len(reds) != 1 || reds[0] != (Redaction{"result.event.url", KindURLPassword, 2}) {
			t.Errorf("redactions = %v", reds)
		}
	})
	t.Run("clean struct kept as is", func(t *testing.T) {
		ev := event{"x", "https://h"}
		in := map[string]any{"event": ev, "n": 3, "m": map[string]string{"a": "b"}}
		out, reds := Value(in, "result")
		if reds != nil || !sameMap(out, in) {
			t.Errorf("got %v, %v; want the input back", out, reds)
		}
	})
	t.Run("map of strings with a sensitive key", func(t *testing.T) {
		in := map[string]any{"headers": map[string]string{"Authorization": "Bearer x", "Accept": "*/*"}}
		out, reds := Value(in, "result")
		want := map[string]any{"Authorization": Placeholder, "Accept": "*/*"}
		if got := out.(map[string]any)["headers"]; !reflect.DeepEqual(got, want) {
			t.Errorf("headers = %#v, want %#v", got, want)
		}
		if len(reds) != 1 || reds[0] != (Redaction{"result.headers.Authorization", KindSensitiveKey, 8}) {
			t.Errorf("redactions = %v", reds)
		}
	})
	t.Run("slice of objects", func(t *testing.T) {
		clean := map[string]any{"url": "https://h"}
		in := map[string]any{"items": []map[string]any{clean, {"url": "https://u:pw@h"}}}
		out, reds := Value(in, "result")
		got := out.(map[string]any)["items"].([]map[string]any)
		if !sameMap(got[0], clean) || got[1]["url"] != "https://u:[REDACTED]@h" {
			t.Errorf("items = %#v", got)
		}
		if len(reds) != 1 || reds[0] != (Redaction{"result.items[1].url", KindURLPassword, 2}) {
			t.Errorf("redactions = %v", reds)
		}
	})
	t.Run("clean typed maps and slices do not allocate", func(t *testing.T) {
		in := map[string]any{
			"headers": map[string]string{"Accept": "*/*", "User-Agent": "carapace"},
			"items":   []map[string]any{{"title": "a"}, {"title": "b"}},
			"tags":    []string{"x", "y"},
		}
		if n := testing.AllocsPerRun(100, func() { Value(in, "result") }); n != 0 {
			t.Errorf("%v allocations, want 0", n)
		}
	})
	t.Run("unencodable", func(t *testing.T) {
		out, reds := Value(map[string]any{"c": make(chan int)}, "result")
		if got := out.(map[string]any)["c"]; got != Placeholder {
			t.Errorf("c = %#v", got)
		}
		if len(reds) != 1 || reds[0] != (Redaction{"result.c", KindUnencodable, 0}) {
			t.Errorf("redactions = %v", reds)
		}
	})
}

func TestValueTooDeep(t *testing.T) {
	// A cyclic object, as a buggy handler might build.
	cyc := map[string]any{}
	cyc["self"] = cyc
	out, reds := Value(cyc, "result")
	if len(reds) != 1 || reds[0].Kind != KindTooDeep {
		t.Fatalf("redactions = %v", reds)
	}
	if want := "result" + strings.Repeat(".self", MaxDepth); reds[0].Path != want {
		t.Errorf("path has %d segments, want %d", strings.Count(reds[0].Path, "."), MaxDepth)
	}
	if out.(map[string]any)["self"] == nil {
		t.Error("lost the object")
	}
}

func sameMap(a, b any) bool {
	return reflect.ValueOf(a).Kind() == reflect.Map && reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer()
}

func stringOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// deepCopy copies a decoded JSON value.
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = deepCopy(e)
		}
		return a
	default:
		return v
	}
}
