package ipc

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
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
	// Call's decoder, without encoding/json's, accepts nothing the
	// library rejects, and what it accepts it reads the same; it refuses
	// only what is not in the core's shape.
	strict, err := decodeAnswer(b)
	switch {
	case err == nil && serr != nil:
		t.Fatalf("%s: decodeAnswer accepts %#v; encoding/json: %v", in, strict, serr)
	case err == nil && !reflect.DeepEqual(strict, slow):
		t.Fatalf("%s:\ndecodeAnswer %#v\nslow %#v", in, strict, slow)
	case err != nil && serr == nil && !errors.Is(err, errNotCanonical):
		t.Fatalf("%s: decodeAnswer refuses (%v) what encoding/json reads", in, err)
	}
}

// TestDecodeAnswerTakesTheCoresFrames: every documented frame, errors
// and the pending one included, is what the core's types encode
// (TestResponseGolden), and Call's decoder reads each.
func TestDecodeAnswerTakesTheCoresFrames(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "frames", "response-*.json"))
	if len(files) < 5 {
		t.Fatalf("%d response frames in testdata/frames", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeAnswer(bytes.TrimSpace(b)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	// Control: a frame in another shape is refused, not misread.
	if _, err := decodeAnswer([]byte(`{"Type":"response","payload":{"result":{}}}`)); !errors.Is(err, errNotCanonical) {
		t.Errorf("a key spelled otherwise: %v, want errNotCanonical", err)
	}
}

// FuzzDecodeAnswerReadsWhatTheCoreWrites: any envelope encoding/json
// writes from the core's types (as core/pipeline does) is read by Call's
// decoder as encoding/json reads it.
func FuzzDecodeAnswerReadsWhatTheCoreWrites(f *testing.F) {
	f.Add("response", "c-1", "RATE_LIMITED", "too <many> & more", "", 4, 3, true, `{"a":[1,"\u2028"]}`, int64(1764000000))
	f.Add("pending", "c\u00e9", "", "", "x", 0, 0, false, `{}`, int64(0))
	f.Fuzz(func(t *testing.T, typ, corr, code, msg, field string, stage, retry int, retriable bool, result string, at int64) {
		r := Response{ID: corr + "-id", Version: 1, Type: typ, Topic: "tool.invoke." + field, Source: "core", Correlation: corr,
			Timestamp: time.Unix(at%(1<<34), at%1e9).UTC(), Group: msg}
		if json.Valid([]byte(result)) {
			r.Payload.Result = json.RawMessage(result)
		}
		if code != "" {
			r.Payload.Error = &Error{Code: Code(code), Message: msg, Retriable: retriable, Stage: stage, Field: field, RetryAfter: retry}
		}
		if typ == TypePending {
			r.Payload.Confirmation = &Confirmation{ID: corr, ExpiresAt: r.Timestamp}
		}
		b, err := json.Marshal(&r)
		if err != nil { // the result is valid JSON, the time within years 0 – 9999
			t.Fatalf("json.Marshal(%+v): %v", r, err)
		}
		slow, serr := slowResponse(b)
		got, err := decodeAnswer(b)
		if (err == nil) != (serr == nil) || (err == nil && !reflect.DeepEqual(got, slow)) {
			t.Fatalf("%s:\ndecodeAnswer %#v, %v\nencoding/json %#v, %v", b, got, err, slow, serr)
		}
	})
}

// FuzzUnquote: the string decoder the fast paths share (the core's
// request decoding too) reads every JSON string as encoding/json does.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`""`, `"a"`, `"\"\\\/\b\f\n\r\t"`, `"\u00e9\u2028"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ude00\ud83d"`,
		`"\ud83dx"`, `"\ud83d\u0041"`, `"\uD83D\uDE00"`, "\"\xff\xe2\x82\"", `"\u0000"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok := []byte(s)
		if len(tok) < 2 || tok[0] != '"' || tok[len(tok)-1] != '"' || !json.Valid(tok) {
			// Any string at all, as encoding/json writes it.
			tok, _ = json.Marshal(s)
		}
		var want string
		if err := json.Unmarshal(tok, &want); err != nil {
			t.Fatalf("%s: %v", tok, err)
		}
		if got := unquote(tok); got != want {
			t.Fatalf("%s: unquote %q, encoding/json %q", tok, got, want)
		}
	})
}

// TestErrorAppendJSON: an error line bin/ipc prints is the bytes
// json.Marshal would have written.
func TestErrorAppendJSON(t *testing.T) {
	for _, e := range []*Error{
		{},
		{Code: CodeUnknownTool, Message: `unknown tool "x<y>&z"`, Stage: 2},
		{Code: CodeValidationFailed, Message: "tab\tnl\nbs\b ff\f cr\r \x01 \u2028\u2029 bad\xff", Field: "a\"b", Stage: 1},
		{Code: CodeRateLimited, Message: "m", Retriable: true, Stage: 4, RetryAfter: 30},
		{Code: CodePluginTimeout, Message: "é", Retriable: true, Stage: -1, RetryAfter: -2},
	} {
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.AppendJSON([]byte("x")); string(got) != "x"+string(want) {
			t.Errorf("AppendJSON\n%s\nencoding/json\n%s", got[1:], want)
		}
	}
}

func FuzzErrorAppendJSON(f *testing.F) {
	f.Add("HANDLER_ERROR", "m <b> & \u2028", "f", 3, 0, true)
	f.Fuzz(func(t *testing.T, code, msg, field string, stage, retry int, retriable bool) {
		e := &Error{Code: Code(code), Message: msg, Retriable: retriable, Stage: stage, Field: field, RetryAfter: retry}
		want, _ := json.Marshal(e)
		if got := e.AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("AppendJSON\n%s\nencoding/json\n%s", got, want)
		}
	})
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
	for _, s := range []string{"", "a", `"\`, "\x00\x7f\x80\xff", "é\u2028", "<a href='x'>&amp;</a>", "\b\f\n\r\t\x1f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// Byte for byte: bin/ipc's error lines are compared with what
		// encoding/json wrote before.
		if got, want := AppendJSONString(nil, s), must(json.Marshal(s)); string(got) != string(want) {
			t.Fatalf("%q: got %s, encoding/json %s", s, got, want)
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

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
