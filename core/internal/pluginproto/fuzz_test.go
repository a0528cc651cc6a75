package pluginproto

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzDecode feeds the core's decoder what a misbehaving plugin could send:
// it must never panic, and whatever it accepts must survive a round trip
// through Encode unchanged in meaning.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"type":"hello","token":"t","version":1,"pid":7}`,
		`{"type":"reply","id":3,"result":{"message":"hi","n":1.5e300}}`,
		`{"type":"reply","id":4,"error":{"kind":"tool","code":"HANDLER_ERROR","message":"no","field":"to","retry_after":3}}`,
		`{"type":"call","id":9,"method":"read_credential","scope":2,"params":{"key":"token"}}`,
		`{"type":"x"} {"type":"y"}`, `null`, `[]`, `{"type":""}`, `{"type":"reply","id":-1}`,
		`{"type":"reply","result":` + string(bytes.Repeat([]byte("["), 5000)),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		m, err := Decode(frame)
		if err != nil {
			return
		}
		if m.Type == "" {
			t.Fatalf("accepted a message without a type: %q", frame)
		}
		again, err := Encode(m)
		if err != nil {
			if len(frame) > MaxMessage/2 {
				return // re-encoding can grow escapes past the cap
			}
			t.Fatalf("accepted %q but cannot re-encode it: %v", frame, err)
		}
		m2, err := Decode(again)
		if err != nil {
			t.Fatalf("re-encoded %q does not decode: %v", again, err)
		}
		a, _ := json.Marshal(m)
		b, _ := json.Marshal(m2)
		if !bytes.Equal(a, b) {
			t.Fatalf("round trip changed the message:\n%s\n%s", a, b)
		}
		var v any
		_ = DecodeValue(m.Params, &v)
		_ = DecodeValue(m.Result, &v)
		_ = JSONType(m.Result)
	})
}

// FuzzDecodeEgressRequest feeds the core's egress decoder what a hostile
// plugin could send: it must never panic, and what it accepts must encode
// back to a request that decodes the same.
func FuzzDecodeEgressRequest(f *testing.F) {
	for _, s := range []string{
		`{"v":1,"network":"tcp","host":"api.telegram.org","port":443}`,
		`{"v":1,"network":"udp","host":"","port":0}`, `{"v":1,"x":1}`, `null`, `{"v":1}{"v":1}`,
		`{"v":1,"host":"` + string(bytes.Repeat([]byte("\\u0000"), 200)) + `"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		r, err := DecodeEgressRequest(msg)
		if err != nil {
			return
		}
		if r.V != EgressVersion {
			t.Fatalf("accepted version %d: %q", r.V, msg)
		}
		again, err := EncodeEgressRequest(r)
		if err != nil {
			return // escapes can grow past the cap
		}
		r2, err := DecodeEgressRequest(again)
		if err != nil || *r2 != *r {
			t.Fatalf("round trip: %q -> %+v -> %q -> %+v, %v", msg, r, again, r2, err)
		}
	})
}
