package ipc

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// The hand-written paths of the client (DecodeResponse's fast path, the
// request's encoding, the correlation check) against encoding/json and
// regexp, which they replace for speed only.

// slowResponse is DecodeResponse as it was: encoding/json alone.
func slowResponse(b []byte) (*Response, error) {
	r := new(Response)
	if err := json.Unmarshal(b, r); err != nil {
		return nil, err
	}
	return checkResponse(r)
}

func responseSeeds(t testing.TB) []string {
	seeds := []string{
		`{"type":"response","correlation":"c","payload":{"result":{"a":1}}}`,
		`{"type":"response","correlation":"c","payload":{"result":null,"error":{"code":"RATE_LIMITED","message":"m","retriable":true,"retry_after":3}}}`,
		`{"type":"pending","correlation":"c","payload":{"result":null,"error":null,"confirmation":{"id":"ab","expires_at":"2026-01-01T00:00:00Z"}}}`,
		`{"Type":"response","payload":{"result":{}}}`,
		`{"type":"response","type":"pending","payload":{"result":{}}}`,
		`{"type":"response","payload":{"result":{},"Result":{"b":2}}}`,
		`{"type":"response","version":1.5,"payload":{"result":{}}}`,
		`{"type":"response","version":null,"payload":{"result":{}}}`,
		`{"type":"response","id":null,"payload":{"result":{}}}`,
		`{"type":"response","timestamp":"nope","payload":{"result":{}}}`,
		`{"type":"response","timestamp":"2026-11-27T17:00:00.5+01:00","payload":{"result":{}}}`,
		`{"type":"response","payload":{"result":"x"}}`,
		`{"type":"response","payload":null}`,
		`{"type":"resp\u006fnse","payload":{"result":{}}}`,
		`{"ty\u0070e":"response","payload":{"result":{}}}`,
		`{"type":"response","extra":1,"payload":{"result":{}}}`,
		`{"type":"response","payload":{"result":{},"error":{"code":"X","message":"m","unknown":1}}}`,
		`{"type":"response","payload":{"result":{},"error":[1]}}`,
		` { "type" : "response" , "payload" : { "result" : { } } } `,
		`[]`, `null`, `{}`, `{"type":"other","payload":{"result":{}}}`,
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "frames", "response-*.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, strings.TrimSpace(string(b)))
	}
	return seeds
}

func agree(t *testing.T, in string) {
	b := []byte(in)
	fast, ferr := DecodeResponse(b)
	slow, serr := slowResponse(b)
	if (ferr == nil) != (serr == nil) {
		t.Fatalf("%s:\nfast %+v, %v\nslow %+v, %v", in, fast, ferr, slow, serr)
	}
	if ferr == nil && !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%s:\nfast %#v\nslow %#v", in, fast, slow)
	}
}

func TestDecodeResponseFastAgrees(t *testing.T) {
	seeds := responseSeeds(t)
	for _, s := range seeds {
		agree(t, s)
	}
	// The core's canonical envelopes take the fast path (else it would
	// measure nothing).
	for _, name := range []string{"response-ok.json", "response-pending.json"} {
		if _, ok := decodeResponseFast(golden(t, name)); !ok {
			t.Errorf("%s does not take the fast path", name)
		}
	}
}

func FuzzDecodeResponse(f *testing.F) {
	for _, s := range responseSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(agree)
}

func TestEncodeRequestAsJSON(t *testing.T) {
	for _, s := range []string{"tool.invoke.echo", `a"b\c`, "tab\there\nnl\x01\x1f", "caf\u00e9 \u2028 <&>", "bad \xff utf8 \xe2\x82", ""} {
		w, err := EncodeRequest(s, "c-1", []byte(`{"k": [1, 2]}`))
		if err != nil {
			t.Fatal(err)
		}
		var got Request
		if err := json.Unmarshal(w, &got); err != nil {
			t.Fatalf("%q: %s is not JSON: %v", s, w, err)
		}
		want, _ := json.Marshal(s)
		var wantS string
		_ = json.Unmarshal(want, &wantS)
		if got.Topic != wantS || got.Correlation != "c-1" || string(got.Arguments) != `{"k": [1, 2]}` {
			t.Fatalf("%q encoded as %s, decoded %+v; encoding/json gives %q", s, w, got, wantS)
		}
	}
}

func FuzzEncodeString(f *testing.F) {
	for _, s := range []string{"", "a", `"\`, "\x00\x7f\x80\xff", "é\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var got, want string
		if err := json.Unmarshal(appendString(nil, s), &got); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		w, _ := json.Marshal(s)
		_ = json.Unmarshal(w, &want)
		if got != want {
			t.Fatalf("%q: got %q, encoding/json %q", s, got, want)
		}
	})
}

func FuzzCorrelation(f *testing.F) {
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*$`)
	for _, s := range []string{"", "a", "-a", "a-", "A.b_c:d-9", "a b", "é", "a\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := correlationChars(s), s != "" && re.MatchString(s); got != want {
			t.Fatalf("%q: %v, the pattern says %v", s, got, want)
		}
	})
}
