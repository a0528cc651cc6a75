package plugintest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/sanitize"
	"github.com/carapace-dev/carapace/ipc"
)

// AssertSuccess fails the test now (like t.Fatal) unless r is a success,
// reporting the error with its Detail; it returns the result object.
func AssertSuccess(t testing.TB, r Result) map[string]any {
	t.Helper()
	if !r.OK() {
		t.Fatalf("the tool call failed; want success:\n%s", r)
	}
	return r.Value
}

// AssertError fails the test now (like t.Fatal) unless r is an error with
// the given code ("" accepts any error); it returns r for further checks of
// its Message, Field or Retriable.
//
// Remember that the agent sees every *plugin.ToolError as HANDLER_ERROR: to
// check the code your handler chose, look at r.HandlerCode.
func AssertError(t testing.TB, r Result, code ipc.Code) Result {
	t.Helper()
	switch {
	case r.OK():
		t.Fatalf("the tool call succeeded with %s; want an error %s", r.JSON, orAny(code))
	case code != "" && r.Code != code:
		t.Fatalf("the tool call failed with %s; want %s", r, code)
	}
	return r
}

func orAny(c ipc.Code) string {
	if c == "" {
		return "(any code)"
	}
	return string(c)
}

// AssertNoCredentialLeak fails the test (like t.Error) if v holds anything
// the core's sanitiser would redact — Bearer and Basic credentials, sk-…,
// ghp_…, xox…-, AWS and Google keys, JWTs, private keys, passwords in URLs,
// password=… and the values of keys such as "api_key" (see core/sanitize) —
// or any of secrets, verbatim, in a string or an object key. It reports every
// leak by its path ("value.items[2].note") and never prints the secret.
//
// v is usually a Result: then what the agent would see is checked — the
// result object or the error's message and field — and the redactions the
// core made to it (Result.Redacted) count as leaks, since the handler did put
// a credential in its answer. v may also be any value that encodes as JSON.
// It reports whether v was clean.
func AssertNoCredentialLeak(t testing.TB, v any, secrets ...string) bool {
	t.Helper()
	var ss []secret
	for i, s := range secrets {
		ss = append(ss, secret{label: "secret #" + strconv.Itoa(i+1), value: s})
	}
	return reportLeaks(t, v, ss)
}

// AssertNoLeakOf is AssertNoCredentialLeak with every value stored in creds
// as a secret, each reported by its credential key.
func AssertNoLeakOf(t testing.TB, v any, creds *FakeCredentials) bool {
	t.Helper()
	return reportLeaks(t, v, creds.secrets())
}

// secret is a value that must not appear, with how to name it in messages.
type secret struct {
	label, value string
}

func reportLeaks(t testing.TB, v any, ss []secret) bool {
	t.Helper()
	problems := leaks(v, ss)
	for _, p := range problems {
		t.Errorf("credential leak: %s", scrub(p, ss))
	}
	return len(problems) == 0
}

// scrub removes any secret from a message, as a last guard: messages name
// paths, and a path is made of keys that could themselves be secrets. (Keys
// that look like credentials are already in their redacted form.)
func scrub(msg string, ss []secret) string {
	for _, s := range ss {
		if s.value != "" {
			msg = strings.ReplaceAll(msg, s.value, "["+s.label+"]")
		}
	}
	return msg
}

// leaks lists every leak in v.
func leaks(v any, ss []secret) []string {
	ss = slices.DeleteFunc(slices.Clone(ss), func(s secret) bool { return s.value == "" })
	var out []string
	switch r := v.(type) {
	case *Result:
		if r == nil {
			return nil
		}
		return leaks(*r, ss)
	case Result:
		for _, red := range r.Redacted {
			out = append(out, fmt.Sprintf("%s: the core's sanitiser had to redact a %s", red.Path, red.Kind))
		}
		if r.OK() {
			out = append(out, secretsIn(r.Value, "result", ss)...)
		} else {
			out = append(out, secretsIn(r.Message, "error.message", ss)...)
			out = append(out, secretsIn(r.Field, "error.field", ss)...)
		}
		return out
	}
	decoded, err := asJSON(v)
	if err != nil {
		return []string{fmt.Sprintf("value: cannot be checked: %v", err)}
	}
	_, reds := sanitize.Value(decoded, "value")
	for i := 0; i < len(reds); {
		// Redactions are sorted by path: one message per path.
		j, kinds := i, []string{}
		for ; j < len(reds) && reds[j].Path == reds[i].Path; j++ {
			kinds = append(kinds, reds[j].Kind)
		}
		out = append(out, fmt.Sprintf("%s: looks like a credential (%s); the core would redact it", reds[i].Path, strings.Join(kinds, ", ")))
		i = j
	}
	return append(out, secretsIn(decoded, "value", ss)...)
}

// asJSON converts v to its decoded-JSON form: strings and byte slices as
// strings, json.RawMessage decoded, anything else through encoding/json.
func asJSON(v any) (any, error) {
	var b []byte
	switch x := v.(type) {
	case string:
		return x, nil
	case json.RawMessage:
		b = x
	case []byte:
		return string(x), nil
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return nil, fmt.Errorf("not encodable as JSON: %w", err)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	return out, nil
}

// secretsIn walks a decoded JSON value for verbatim secrets in strings
// and keys.
func secretsIn(v any, path string, ss []secret) []string {
	if len(ss) == 0 {
		return nil
	}
	var out []string
	var walk func(v any, path string)
	walk = func(v any, path string) {
		switch x := v.(type) {
		case string:
			for _, s := range ss {
				if strings.Contains(x, s.value) {
					out = append(out, fmt.Sprintf("%s: contains %s", path, s.label))
				}
			}
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				seg, _ := sanitize.String(k)
				for _, s := range ss {
					if strings.Contains(k, s.value) {
						out = append(out, fmt.Sprintf("%s: an object key contains %s", path, s.label))
						seg = "[key with " + s.label + "]"
					}
				}
				walk(x[k], path+"."+seg)
			}
		case []any:
			for i, e := range x {
				walk(e, path+"["+strconv.Itoa(i)+"]")
			}
		}
	}
	walk(v, path)
	return out
}
