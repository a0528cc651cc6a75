package pluginproto

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		frame string
		ok    bool
	}{
		{`{"type":"reply","id":3,"result":{"a":1}}`, true},
		{` {"type":"hello","token":"t","version":1,"pid":9} `, true},
		{`{"type":"call","id":1,"method":"x","future_field":true}`, true}, // unknown fields pass: the protocol may grow
		{`not json`, false},
		{``, false},
		{`null`, false},
		{`{}`, false},             // no type
		{`{"type":""}`, false},    // empty type
		{`[{"type":"x"}]`, false}, // not an object
		{`{"type":"x"}{"type":"y"}`, false},
		{`{"type":"x"} trailing`, false},
		{`{"type":"x","id":-1}`, false},
		{`{"type":7}`, false},
	} {
		t.Run(tc.frame, func(t *testing.T) {
			m, err := Decode([]byte(tc.frame))
			if tc.ok != (err == nil) {
				t.Fatalf("Decode = %+v, %v; want ok %v", m, err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
		})
	}
}

func TestDecodeValueUsesNumbers(t *testing.T) {
	var v map[string]any
	if err := DecodeValue(json.RawMessage(`{"n":12345678901234567890,"f":1.5}`), &v); err != nil {
		t.Fatal(err)
	}
	if v["n"] != json.Number("12345678901234567890") || v["f"] != json.Number("1.5") {
		t.Fatalf("decoded %#v", v)
	}
	v = map[string]any{"x": 1}
	if err := DecodeValue(nil, &v); err != nil || v != nil {
		t.Fatalf("empty raw: %v, %v; want null", v, err)
	}
	if err := DecodeValue(json.RawMessage(`{} {}`), &v); !errors.Is(err, ErrMalformed) {
		t.Fatalf("two values: %v", err)
	}
}

func TestJSONType(t *testing.T) {
	for raw, want := range map[string]string{
		`{"a":1}`: "object", ` [1]`: "array", `"s"`: "string", `-1`: "number", `0.5`: "number",
		`true`: "boolean", `false`: "boolean", `null`: "null", ``: "null", `?`: "",
	} {
		if got := JSONType(json.RawMessage(raw)); got != want {
			t.Errorf("JSONType(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestEncodeLimit(t *testing.T) {
	big := json.RawMessage(`"` + strings.Repeat("x", MaxMessage) + `"`)
	if _, err := Encode(&Message{Type: TypeReply, ID: 1, Result: big}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Encode of an oversized message = %v, want ErrTooLarge", err)
	}
	b, err := Encode(&Message{Type: TypeCancel, ID: 4})
	if err != nil || string(b) != `{"type":"cancel","id":4}` {
		t.Fatalf("Encode = %s, %v", b, err)
	}
	m, err := Decode(b)
	if err != nil || m.Type != TypeCancel || m.ID != 4 {
		t.Fatalf("round trip: %+v, %v", m, err)
	}
}
