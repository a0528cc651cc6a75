package ipc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// Limits of the protocol. Both the ipc binary and the core enforce them,
// independently of each other.
const (
	MaxRequestBytes   = 1 << 20 // a wire message, as sent
	MaxResponseBytes  = 1 << 20 // a response envelope, as sent
	MaxCorrelationLen = 128
	MaxTopicLen       = 160
	MaxDepth          = 64 // nesting of objects and arrays inside arguments
)

// ProtocolVersion is the envelope version the core stamps on every message.
const ProtocolVersion = 1

// ToolTopicPrefix starts every tool invocation topic: tool.invoke.<name>.
const ToolTopicPrefix = "tool.invoke."

// Envelope types.
const (
	TypeRequest  = "request"
	TypeResponse = "response"
	TypePending  = "pending" // interim frame: the request waits for the user
)

// Request is the wire message: exactly topic, correlation and arguments.
type Request struct {
	Topic       string          `json:"topic"`
	Correlation string          `json:"correlation"`
	Arguments   json.RawMessage `json:"arguments"`
}

// Tool returns the tool named by a tool.invoke.<name> topic, or "" when the
// topic is not a tool invocation.
func (r *Request) Tool() string {
	if len(r.Topic) <= len(ToolTopicPrefix) || r.Topic[:len(ToolTopicPrefix)] != ToolTopicPrefix {
		return ""
	}
	return r.Topic[len(ToolTopicPrefix):]
}

// DecodeRequest parses a wire message strictly. It rejects anything but a
// single JSON object holding exactly the three wire fields, each once, with
// the right types; arguments must be an object nested at most MaxDepth deep.
// The error is a stage-1 VALIDATION_FAILED naming the offending field. The
// returned Arguments alias b.
//
// Valid JSON takes a one-pass path over the top-level members; anything
// else takes a token-by-token path that says precisely what is wrong. The
// fuzz target checks that the two agree.
func DecodeRequest(b []byte) (*Request, *Error) {
	if len(b) > MaxRequestBytes {
		return nil, stage1("", "request of %d bytes exceeds the %d-byte limit", len(b), MaxRequestBytes)
	}
	if !json.Valid(b) {
		return decodeSlow(b)
	}
	return decodeFast(b)
}

// decodeFast decodes a request known to be valid JSON.
func decodeFast(b []byte) (*Request, *Error) {
	i := skipWS(b, 0)
	if b[i] != '{' {
		return nil, stage1("", "request must be a JSON object with topic, correlation and arguments")
	}
	var req Request
	var seenTopic, seenCorr, seenArgs bool
	i = skipWS(b, i+1)
	for b[i] != '}' {
		ke := stringEnd(b, i)
		key := unquote(b[i:ke])
		i = skipWS(b, ke)
		i = skipWS(b, i+1) // the colon
		ve := valueEnd(b, i)
		val := b[i:ve]
		switch key {
		case "topic", "correlation":
			if key == "topic" && seenTopic || key == "correlation" && seenCorr {
				return nil, stage1(key, "wire field %q appears twice", key)
			}
			if val[0] != '"' {
				return nil, stage1(key, "wire field %q must be a string", key)
			}
			if key == "topic" {
				req.Topic, seenTopic = unquote(val), true
			} else {
				req.Correlation, seenCorr = unquote(val), true
			}
		case "arguments":
			if seenArgs {
				return nil, stage1(key, "wire field %q appears twice", key)
			}
			if val[0] != '{' {
				return nil, stage1(key, "arguments must be a JSON object")
			}
			req.Arguments, seenArgs = json.RawMessage(val), true
		default:
			return nil, stage1(key, "unknown wire field %q: the wire message carries only topic, correlation and arguments; identity and envelope fields are set by the core", key)
		}
		i = skipWS(b, ve)
		if b[i] == ',' {
			i = skipWS(b, i+1)
		}
	}
	for _, f := range []struct {
		name string
		seen bool
	}{{"topic", seenTopic}, {"correlation", seenCorr}, {"arguments", seenArgs}} {
		if !f.seen {
			return nil, stage1(f.name, "wire field %q is missing", f.name)
		}
	}
	return checkRequest(&req)
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the JSON string starting at b[i].
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// valueEnd returns the index just past the JSON value starting at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		d := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				d++
			case '}', ']':
				if d--; d == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	return j
}

// unquote decodes a valid JSON string token as encoding/json does: its
// escapes, a surrogate pair as one character, a lone surrogate and
// invalid UTF-8 as U+FFFD (FuzzUnquote checks it against encoding/json,
// which bin/ipc does not link for this).
func unquote(tok []byte) string {
	body := tok[1 : len(tok)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body)
	}
	out := make([]byte, 0, len(body)+2*utf8.UTFMax)
	for i := 0; i < len(body); {
		c := body[i]
		switch {
		case c == '\\':
			i++
			switch e := body[i]; e {
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := hex4(body[i+1:])
				i += 5
				if utf16.IsSurrogate(r) {
					// A pair is one character; a lone half is U+FFFD,
					// and an escape after it is read on its own.
					pair := utf8.RuneError
					if i+6 <= len(body) && body[i] == '\\' && body[i+1] == 'u' {
						pair = utf16.DecodeRune(r, hex4(body[i+2:]))
					}
					if r = pair; r != utf8.RuneError {
						i += 6
					}
				}
				out = utf8.AppendRune(out, r)
				continue
			default: // '"', '\\', '/'
				out = append(out, e)
			}
			i++
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRune(body[i:])
			out = utf8.AppendRune(out, r) // RuneError for an invalid byte
			i += size
		}
	}
	return string(out)
}

// hex4 is the value of the four hex digits a valid JSON \u escape has.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= 'a':
			c -= 'a' - 10
		case c >= 'A':
			c -= 'A' - 10
		default:
			c -= '0'
		}
		r = r<<4 | rune(c)
	}
	return r
}

// decodeSlow walks the request token by token, to say exactly what is
// wrong with input that is not valid JSON.
func decodeSlow(b []byte) (*Request, *Error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return nil, stage1("", "request is not valid JSON: %s", jsonReason(err))
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, stage1("", "request must be a JSON object with topic, correlation and arguments")
	}
	var req Request
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, stage1("", "request is not valid JSON: %s", jsonReason(err))
		}
		key, _ := tok.(string)
		if seen[key] {
			return nil, stage1(key, "wire field %q appears twice", key)
		}
		seen[key] = true
		switch key {
		case "topic", "correlation":
			var s string
			if err := dec.Decode(&s); err != nil {
				return nil, stage1(key, "wire field %q must be a string", key)
			}
			if key == "topic" {
				req.Topic = s
			} else {
				req.Correlation = s
			}
		case "arguments":
			if err := dec.Decode(&req.Arguments); err != nil {
				return nil, stage1(key, "arguments are not valid JSON: %s", jsonReason(err))
			}
			if len(req.Arguments) == 0 || req.Arguments[0] != '{' {
				return nil, stage1(key, "arguments must be a JSON object")
			}
		default:
			return nil, stage1(key, "unknown wire field %q: the wire message carries only topic, correlation and arguments; identity and envelope fields are set by the core", key)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, stage1("", "request is not valid JSON: %s", jsonReason(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, stage1("", "unexpected data after the request object")
	}
	for _, f := range []string{"topic", "correlation", "arguments"} {
		if !seen[f] {
			return nil, stage1(f, "wire field %q is missing", f)
		}
	}
	return checkRequest(&req)
}

// checkRequest applies the rules that hold whatever the decoding path.
func checkRequest(req *Request) (*Request, *Error) {
	if err := CheckCorrelation(req.Correlation); err != nil {
		return nil, err
	}
	if len(req.Topic) == 0 || len(req.Topic) > MaxTopicLen {
		return nil, stage1("topic", "topic must be 1 to %d bytes", MaxTopicLen)
	}
	if d := depth(req.Arguments); d > MaxDepth {
		return nil, stage1("arguments", "arguments nest %d levels deep; the limit is %d", d, MaxDepth)
	}
	return req, nil
}

// CheckCorrelation validates a correlation id: 1 to MaxCorrelationLen
// characters from [A-Za-z0-9._:-], starting with a letter or digit.
func CheckCorrelation(c string) *Error {
	if len(c) == 0 || len(c) > MaxCorrelationLen || !correlationChars(c) {
		return stage1("correlation", "correlation must be 1 to %d characters of [A-Za-z0-9._:-]", MaxCorrelationLen)
	}
	return nil
}

// correlationChars reports whether c matches ^[A-Za-z0-9][A-Za-z0-9._:-]*$.
func correlationChars(c string) bool {
	if c == "" {
		return false
	}
	for i := 0; i < len(c); i++ {
		switch b := c[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		case i > 0 && (b == '.' || b == '_' || b == ':' || b == '-'):
		default:
			return false
		}
	}
	return true
}

func stage1(field, format string, args ...any) *Error {
	e := Errorf(CodeValidationFailed, 1, format, args...)
	e.Field = field
	return e
}

// jsonReason shortens encoding/json errors to what a caller can act on.
func jsonReason(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s at byte %d", se.Error(), se.Offset)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of input"
	}
	return err.Error()
}

// depth returns the maximum nesting of objects and arrays in valid JSON.
func depth(b []byte) int {
	d, maxd, inStr, esc := 0, 0, false, false
	for _, c := range b {
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			d++
			if d > maxd {
				maxd = d
			}
		case c == '}' || c == ']':
			d--
		}
	}
	return maxd
}

// Response is the envelope the core sends back to the container, for results
// and errors alike, and for the interim "pending" frame of a request that
// waits for the user's confirmation.
type Response struct {
	ID          string    `json:"id"`
	Version     int       `json:"version"`
	Type        string    `json:"type"`
	Topic       string    `json:"topic"`
	Source      string    `json:"source"`
	Correlation string    `json:"correlation"`
	Timestamp   time.Time `json:"timestamp"`
	Group       string    `json:"group"`
	Payload     Payload   `json:"payload"`
}

// Payload holds either a result (a JSON object) or an error; for a pending
// frame it holds the confirmation the request waits for instead.
type Payload struct {
	Result       json.RawMessage `json:"result"`
	Error        *Error          `json:"error"`
	Confirmation *Confirmation   `json:"confirmation,omitempty"`
}

// Confirmation describes, in a pending frame, the confirmation a request is
// waiting for: its id (shown to the user) and when it expires.
type Confirmation struct {
	ID        string    `json:"id"`
	ExpiresAt time.Time `json:"expires_at"`
}

// DecodeResponse parses a response envelope, enforcing MaxResponseBytes.
//
// The envelope the core writes (every field once, spelled as tagged, no
// null outside the payload) takes a one-pass path that builds no
// reflection caches: the ipc binary decodes one answer per process, and
// encoding/json's first Unmarshal of these types cost more than the rest
// of its call. Anything else takes encoding/json's own path, and the
// tests check that the two agree.
func DecodeResponse(b []byte) (*Response, error) {
	r, err := decodeAnswer(b)
	if !errors.Is(err, errNotCanonical) {
		return r, err
	}
	r = new(Response)
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("response is not a valid envelope: %w", err)
	}
	return checkResponse(r)
}

// errNotCanonical is what decodeAnswer leaves to encoding/json: not JSON
// in the shape the core writes.
var errNotCanonical = errors.New("response is not an envelope as the core writes it (each field once, spelled as tagged)")

// decodeAnswer is DecodeResponse without encoding/json's decoder, for
// Call: the core writes every envelope in the canonical shape, and
// anything else is an error (errNotCanonical) rather than decoded by
// reflection. bin/ipc then links no reflective JSON codec at all, which
// was about a twentieth of its start (docs/CONTAINERS.md). Every check
// DecodeResponse makes on what it accepts is made here too.
func decodeAnswer(b []byte) (*Response, error) {
	if len(b) > MaxResponseBytes {
		return nil, errors.New("response of " + strconv.Itoa(len(b)) + " bytes exceeds the " + strconv.Itoa(MaxResponseBytes) + "-byte limit")
	}
	if !json.Valid(b) {
		return nil, errNotCanonical // DecodeResponse has encoding/json say where
	}
	r, ok := decodeResponseFast(b)
	if !ok {
		return nil, errNotCanonical
	}
	return checkResponse(r)
}

func checkResponse(r *Response) (*Response, error) {
	switch r.Type {
	case TypeResponse:
		if r.Payload.Error == nil && (len(r.Payload.Result) == 0 || r.Payload.Result[0] != '{') {
			return nil, errors.New("response has neither a result object nor an error")
		}
	case TypePending:
		if r.Payload.Confirmation == nil {
			return nil, errors.New("pending frame without a confirmation")
		}
	default:
		return nil, errors.New("unknown envelope type " + strconv.Quote(r.Type))
	}
	return r, nil
}

// decodeResponseFast decodes valid JSON in the envelope's canonical shape;
// ok is false for anything else (a key in another case or twice, a null
// where a string is expected, a number that is not a small integer),
// which encoding/json then decodes with its own rules.
func decodeResponseFast(b []byte) (r *Response, ok bool) {
	r = new(Response)
	ok = fields(b, skipWS(b, 0), func(key string, val []byte) (int, bool) {
		switch key {
		case "id", "type", "topic", "source", "correlation", "group":
			if val[0] != '"' {
				return 0, false
			}
			v := unquote(val)
			switch key {
			case "id":
				r.ID = v
				return 1, true
			case "type":
				r.Type = v
				return 2, true
			case "topic":
				r.Topic = v
				return 4, true
			case "source":
				r.Source = v
				return 8, true
			case "correlation":
				r.Correlation = v
				return 16, true
			default:
				r.Group = v
				return 32, true
			}
		case "version":
			n, err := strconv.Atoi(string(val))
			r.Version = n
			return 64, err == nil
		case "timestamp":
			return 128, val[0] == '"' && r.Timestamp.UnmarshalJSON(val) == nil
		case "payload":
			return 256, val[0] == '{' && decodePayloadFast(val, &r.Payload)
		}
		return 0, false
	})
	return r, ok
}

// decodePayloadFast decodes the payload object.
func decodePayloadFast(b []byte, p *Payload) bool {
	return fields(b, 0, func(key string, val []byte) (int, bool) {
		switch key {
		case "result":
			// As encoding/json does: a RawMessage keeps a null too.
			p.Result = append(json.RawMessage(nil), val...)
			return 1, true
		case "error":
			if string(val) != "null" {
				p.Error = decodeErrorFast(val)
				return 2, p.Error != nil
			}
			return 2, true
		case "confirmation":
			if string(val) != "null" {
				p.Confirmation = decodeConfirmationFast(val)
				return 4, p.Confirmation != nil
			}
			return 4, true
		}
		return 0, false
	})
}

// decodeErrorFast decodes an error payload object in the shape the core
// writes (each field once, spelled as tagged, no null), or returns nil.
func decodeErrorFast(b []byte) *Error {
	e := new(Error)
	ok := fields(b, 0, func(key string, val []byte) (int, bool) {
		var err error
		switch key {
		case "code", "message", "field":
			if val[0] != '"' {
				return 0, false
			}
			switch v := unquote(val); key {
			case "code":
				e.Code = Code(v)
				return 1, true
			case "message":
				e.Message = v
				return 2, true
			default:
				e.Field = v
				return 4, true
			}
		case "retriable":
			e.Retriable = string(val) == "true"
			return 8, e.Retriable || string(val) == "false"
		case "stage":
			e.Stage, err = strconv.Atoi(string(val))
			return 16, err == nil
		case "retry_after":
			e.RetryAfter, err = strconv.Atoi(string(val))
			return 32, err == nil
		}
		return 0, false
	})
	if !ok {
		return nil
	}
	return e
}

// decodeConfirmationFast decodes a confirmation object in the shape the
// core writes, or returns nil.
func decodeConfirmationFast(b []byte) *Confirmation {
	c := new(Confirmation)
	ok := fields(b, 0, func(key string, val []byte) (int, bool) {
		switch key {
		case "id":
			if val[0] != '"' {
				return 0, false
			}
			c.ID = unquote(val)
			return 1, true
		case "expires_at":
			return 2, val[0] == '"' && c.ExpiresAt.UnmarshalJSON(val) == nil
		}
		return 0, false
	})
	if !ok {
		return nil
	}
	return c
}

// fields is members for an object of known fields: f reads a member and
// returns its field's bit and whether it could. It reports whether every
// member was read and none met twice; a key f does not know, a value it
// cannot read or a field met again ends it with false.
func fields(b []byte, i int, f func(key string, val []byte) (bit int, ok bool)) bool {
	seen := 0
	return members(b, i, func(key string, val []byte) bool {
		bit, ok := f(key, val)
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	})
}

// members calls f with each member of the valid JSON object at b[i], in
// order, until f returns false; it reports whether every call returned
// true (false too when b[i] is not an object).
func members(b []byte, i int, f func(key string, val []byte) bool) bool {
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipWS(b, i+1)
	for b[i] != '}' {
		ke := stringEnd(b, i)
		key := b[i:ke]
		if bytes.IndexByte(key, '\\') >= 0 {
			return false // an escaped key: encoding/json's rules
		}
		i = skipWS(b, ke)
		i = skipWS(b, i+1) // the colon
		ve := valueEnd(b, i)
		if !f(string(key[1:len(key)-1]), b[i:ve]) {
			return false
		}
		i = skipWS(b, ve)
		if b[i] == ',' {
			i = skipWS(b, i+1)
		}
	}
	return true
}
