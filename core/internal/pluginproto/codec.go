package pluginproto

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ErrTooLarge is returned by Encode for a message over MaxMessage: the
// peer's transport would cut the connection off, so it is never sent.
var ErrTooLarge = errors.New("pluginproto: message exceeds the maximum size")

// ErrMalformed is wrapped by Decode and DecodeValue for input that is not
// exactly one JSON value of the expected shape.
var ErrMalformed = errors.New("pluginproto: malformed message")

// Encode returns the frame holding m, or an error wrapping ErrTooLarge if it
// would exceed MaxMessage.
func Encode(m *Message) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("pluginproto: encode %s message: %w", m.Type, err)
	}
	if len(b) > MaxMessage {
		return nil, fmt.Errorf("%w: %s message of %d bytes (limit %d)", ErrTooLarge, m.Type, len(b), MaxMessage)
	}
	return b, nil
}

// Decode parses one frame: exactly one JSON object with a non-empty type,
// and nothing after it. The type is not checked against the known ones;
// what a side accepts is its own business. Params and Result stay raw.
func Decode(frame []byte) (*Message, error) {
	var m Message
	if err := decodeOne(frame, &m, false); err != nil { // null leaves Type empty
		return nil, err
	}
	if m.Type == "" {
		return nil, fmt.Errorf("%w: no type", ErrMalformed)
	}
	return &m, nil
}

// DecodeValue decodes raw (params or a result) into v with numbers as
// json.Number, as an in-process handler sees them. Empty raw is JSON null.
func DecodeValue(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		raw = json.RawMessage("null")
	}
	return decodeOne(raw, v, true)
}

func decodeOne(b []byte, v any, useNumber bool) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if useNumber {
		dec.UseNumber()
	}
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: data after the JSON value", ErrMalformed)
	}
	return nil
}

// JSONType names the JSON type of raw's value ("object", "array", "string",
// "number", "boolean", "null"), or "" if raw does not start like JSON.
func JSONType(raw json.RawMessage) string {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 {
		return "null"
	}
	switch c := b[0]; {
	case c == '{':
		return "object"
	case c == '[':
		return "array"
	case c == '"':
		return "string"
	case c == 't' || c == 'f':
		return "boolean"
	case c == 'n':
		return "null"
	case c == '-' || (c >= '0' && c <= '9'):
		return "number"
	}
	return ""
}
