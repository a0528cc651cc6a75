package ipc

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func golden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "frames", name))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimRight(b, "\n")
}

func TestDecodeRequestGolden(t *testing.T) {
	req, err := DecodeRequest(golden(t, "request.json"))
	if err != nil {
		t.Fatalf("request.json: %v", err)
	}
	if req.Tool() != "echo" || req.Correlation != "9f1c2a7e4b3d4c1f8e2a6b5d7c9e0f11" || string(req.Arguments) != `{"message":"hello","uppercase":true}` {
		t.Fatalf("decoded %+v", req)
	}
}

func TestDecodeRequestRejects(t *testing.T) {
	tests := []struct {
		name, frame, field, msg string
	}{
		{"extra identity field", "request-extra-field.json", "group", "unknown wire field"},
		{"duplicate field", "request-duplicate-field.json", "topic", "appears twice"},
		{"arguments not object", "request-arguments-not-object.json", "arguments", "must be a JSON object"},
		{"bad correlation", "request-bad-correlation.json", "correlation", "correlation must be"},
		{"missing correlation", "request-missing-correlation.json", "correlation", "missing"},
		{"trailing data", "request-trailing-data.json", "", "after the request object"},
		{"truncated", "request-truncated.json", "arguments", "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeRequest(golden(t, tt.frame))
			if err == nil {
				t.Fatal("accepted")
			}
			if err.Code != CodeValidationFailed || err.Stage != 1 || err.Field != tt.field || !strings.Contains(err.Message, tt.msg) {
				t.Fatalf("got %+v; want stage 1 VALIDATION_FAILED field %q containing %q", err, tt.field, tt.msg)
			}
		})
	}
}

func TestDecodeRequestInline(t *testing.T) {
	deep := `{"topic":"tool.invoke.echo","correlation":"c","arguments":{"a":` + strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1) + `}}`
	big := `{"topic":"tool.invoke.echo","correlation":"c","arguments":{"a":"` + strings.Repeat("x", MaxRequestBytes) + `"}}`
	tests := []struct {
		name, in, field string
	}{
		{"not an object", `[]`, ""},
		{"empty", ``, ""},
		{"topic not string", `{"topic":1,"correlation":"c","arguments":{}}`, "topic"},
		{"source spoof", `{"topic":"t","correlation":"c","arguments":{},"source":"core"}`, "source"},
		{"version", `{"topic":"t","correlation":"c","arguments":{},"version":2}`, "version"},
		{"id", `{"id":"x","topic":"t","correlation":"c","arguments":{}}`, "id"},
		{"too deep", deep, "arguments"},
		{"too big", big, ""},
		{"empty topic", `{"topic":"","correlation":"c","arguments":{}}`, "topic"},
		{"null arguments", `{"topic":"t","correlation":"c","arguments":null}`, "arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeRequest([]byte(tt.in))
			if err == nil || err.Code != CodeValidationFailed || err.Field != tt.field {
				t.Fatalf("got %+v, want VALIDATION_FAILED field %q", err, tt.field)
			}
		})
	}
}

func TestResponseGolden(t *testing.T) {
	for _, name := range []string{"response-ok.json", "response-validation-failed.json", "response-rate-limited.json", "response-handler-error.json", "response-pending.json"} {
		t.Run(name, func(t *testing.T) {
			b := golden(t, name)
			r, err := DecodeResponse(b)
			if err != nil {
				t.Fatal(err)
			}
			// Re-encoding gives the golden bytes back: the documented frame
			// is exactly what the core's types produce.
			out, _ := json.Marshal(r)
			if !bytes.Equal(out, b) {
				t.Fatalf("re-encoded\n%s\nwant\n%s", out, b)
			}
			if e := r.Payload.Error; e != nil && !e.Code.Valid() {
				t.Fatalf("code %q is not a protocol code", e.Code)
			}
		})
	}
}

func TestCodes(t *testing.T) {
	if len(Codes) != 10 {
		t.Fatalf("%d codes, want 10", len(Codes))
	}
	for _, c := range Codes {
		if c.Reserved() == (c == CodeHandlerError) {
			t.Errorf("%s: Reserved() = %v", c, c.Reserved())
		}
	}
	if Code("FOO").Valid() || Code("FOO").Reserved() {
		t.Error("unknown code treated as valid")
	}
}

func TestEncodeRequest(t *testing.T) {
	if _, err := EncodeRequest("tool.invoke.echo", "c", []byte(`not json`)); err == nil || err.Field != "arguments" {
		t.Fatalf("invalid JSON accepted: %v", err)
	}
	if _, err := EncodeRequest("tool.invoke.echo", "c", []byte(`[1]`)); err == nil {
		t.Fatal("array accepted")
	}
	big := []byte(`{"a":"` + strings.Repeat("x", MaxRequestBytes) + `"}`)
	if _, err := EncodeRequest("tool.invoke.echo", "c", big); err == nil || !strings.Contains(err.Message, "limit") {
		t.Fatalf("oversized accepted: %v", err)
	}
	w, err := EncodeRequest("tool.invoke.echo", "c", nil)
	if err != nil || string(w) != `{"topic":"tool.invoke.echo","correlation":"c","arguments":{}}` {
		t.Fatalf("empty arguments: %s %v", w, err)
	}
	if _, derr := DecodeRequest(w); derr != nil {
		t.Fatalf("round trip: %v", derr)
	}
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"topic":"t","correlation":"c","arguments":{},"topic":"u"}`))
	f.Add([]byte(`{"\u0074opic":"tool.invoke.echo","correlation":"c","arguments":{"a":"}\"{"}}`))
	f.Add([]byte(` { "topic" : "t" , "correlation" : "c" , "arguments" : { } } `))
	for _, name := range []string{"request.json", "request-extra-field.json", "request-duplicate-field.json", "request-truncated.json"} {
		b, _ := os.ReadFile(filepath.Join("testdata", "frames", name))
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := DecodeRequest(b)
		// The one-pass path for valid JSON and the token path agree on
		// every valid input: same verdict, same field, same request.
		if json.Valid(b) && len(b) <= MaxRequestBytes {
			sreq, serr := decodeSlow(b)
			switch {
			case (err == nil) != (serr == nil):
				t.Fatalf("fast %v, slow %v", err, serr)
			case err != nil && err.Field != serr.Field:
				t.Fatalf("fast field %q, slow field %q", err.Field, serr.Field)
			case err == nil && (req.Topic != sreq.Topic || req.Correlation != sreq.Correlation || !bytes.Equal(req.Arguments, sreq.Arguments)):
				t.Fatalf("fast %+v, slow %+v", req, sreq)
			}
		}
		if (req == nil) == (err == nil) {
			t.Fatalf("req %v err %v", req, err)
		}
		if err != nil {
			if err.Code != CodeValidationFailed || err.Stage != 1 {
				t.Fatalf("unexpected error %+v", err)
			}
			return
		}
		// Whatever is accepted has exactly the three fields and re-encodes
		// to something accepted again.
		w, eerr := EncodeRequest(req.Topic, req.Correlation, req.Arguments)
		if eerr != nil {
			t.Fatalf("accepted request does not re-encode: %v", eerr)
		}
		if _, err := DecodeRequest(w); err != nil {
			t.Fatalf("re-encoded request rejected: %v", err)
		}
	})
}
