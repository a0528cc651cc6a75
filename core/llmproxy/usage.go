package llmproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// usage is what a reply says about the tokens its call used. The counts
// are cumulative in the API's events, so each field keeps the largest
// value seen.
type usage struct {
	Model      string
	Input      int64 // usage.input_tokens
	CacheWrite int64 // usage.cache_creation_input_tokens
	CacheRead  int64 // usage.cache_read_input_tokens
	Output     int64 // usage.output_tokens
	Known      bool  // a usage object was seen
	// ErrorType is the error.type of an SSE error event (an overload in
	// the middle of a stream, say); empty when there was none.
	ErrorType string
}

// in returns every input token: fresh, written to the cache, read from it.
func (u *usage) in() int64 { return u.Input + u.CacheWrite + u.CacheRead }

// total returns the tokens counted against the budget.
func (u *usage) total() int64 { return u.in() + u.Output }

// apiUsage is the API's usage object.
type apiUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
}

func (u *usage) merge(a *apiUsage) {
	if a == nil {
		return
	}
	u.Known = true
	u.Input = max(u.Input, a.InputTokens)
	u.CacheWrite = max(u.CacheWrite, a.CacheCreationInputTokens)
	u.CacheRead = max(u.CacheRead, a.CacheReadInputTokens)
	u.Output = max(u.Output, a.OutputTokens)
}

func (u *usage) setModel(m string) {
	if m != "" {
		u.Model = cleanModel(m)
	}
}

// cleanModel returns m if it looks like a model id, and a placeholder
// otherwise: the audit log must not carry whatever text the agent (or a
// broken reply) put in the field.
func cleanModel(m string) string {
	if len(m) > 100 {
		return "(invalid)"
	}
	for i := 0; i < len(m); i++ {
		c := m[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._:@/-", c) >= 0) {
			return "(invalid)"
		}
	}
	return m
}

// cleanErrorType returns an API error type (overloaded_error) if t looks
// like one, and "" otherwise.
func cleanErrorType(t string) string {
	if len(t) == 0 || len(t) > 40 {
		return ""
	}
	for i := 0; i < len(t); i++ {
		if c := t[i]; !('a' <= c && c <= 'z' || c == '_') {
			return ""
		}
	}
	return t
}

// maxEventLine bounds the SSE line the scanner keeps to parse. The lines
// it wants (message_start, message_delta, error) are a few hundred bytes;
// a longer line is skipped, not buffered.
const maxEventLine = 64 << 10

// sseScanner reads usage from a text/event-stream as it is relayed,
// without holding the stream: it sees each chunk once, keeps at most one
// partial line, and copies only the lines of the events it parses
// (message_start, message_delta, error), not the content deltas that are
// the bulk of a stream.
type sseScanner struct {
	u     *usage
	line  []byte
	skip  bool   // drop the rest of the current line
	event string // the current event's type, from its "event:" line
}

// Write implements io.Writer; it never fails.
func (s *sseScanner) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.add(p)
			break
		}
		s.add(p[:i])
		if !s.skip {
			s.handle(bytes.TrimSuffix(s.line, []byte{'\r'}))
		}
		s.line, s.skip = s.line[:0], false
		p = p[i+1:]
	}
	return n, nil
}

// add appends part of the current line.
func (s *sseScanner) add(b []byte) {
	if s.skip || len(b) == 0 {
		return
	}
	if len(s.line) == 0 && b[0] == 'd' && s.event != "" && !interesting(s.event) {
		// A data line of an event whose type is known and of no interest.
		s.skip = true
		return
	}
	if len(s.line)+len(b) > maxEventLine {
		s.skip, s.line = true, s.line[:0]
		return
	}
	s.line = append(s.line, b...)
}

func interesting(event string) bool {
	return event == "message_start" || event == "message_delta" || event == "error"
}

// sseData is the part of an event's data the scanner reads.
type sseData struct {
	Type    string `json:"type"`
	Message *struct {
		Model string    `json:"model"`
		Usage *apiUsage `json:"usage"`
	} `json:"message"`
	Usage *apiUsage `json:"usage"`
	Error *struct {
		Type string `json:"type"`
	} `json:"error"`
}

// handle processes one line, without its end of line.
func (s *sseScanner) handle(line []byte) {
	if len(line) == 0 {
		s.event = "" // the end of an event
		return
	}
	field, value, _ := bytes.Cut(line, []byte{':'})
	value = bytes.TrimPrefix(value, []byte{' '})
	switch string(field) {
	case "event":
		switch string(value) { // constants, so that a known type allocates nothing
		case "message_start":
			s.event = "message_start"
		case "message_delta":
			s.event = "message_delta"
		case "error":
			s.event = "error"
		default:
			s.event = "other"
		}
	case "data":
		if s.event != "" && !interesting(s.event) {
			return
		}
		var d sseData
		if json.Unmarshal(value, &d) != nil {
			return
		}
		switch d.Type {
		case "message_start":
			if d.Message != nil {
				s.u.setModel(d.Message.Model)
				s.u.merge(d.Message.Usage)
			}
		case "message_delta":
			s.u.merge(d.Usage)
		case "error":
			s.u.ErrorType = "unknown_error"
			if d.Error != nil {
				if t := cleanErrorType(d.Error.Type); t != "" {
					s.u.ErrorType = t
				}
			}
		}
	}
}

// maxJSONReply bounds the non-streamed reply kept to read its usage. A
// Messages reply is at most a few MiB; past the bound the reply is still
// relayed whole, but its usage is unknown.
const maxJSONReply = 16 << 20

// jsonTail keeps a non-streamed reply, up to limit bytes, to read its
// usage or its error type when it ends.
type jsonTail struct {
	limit int
	buf   bytes.Buffer
	over  bool
}

// Write implements io.Writer; it never fails.
func (j *jsonTail) Write(p []byte) (int, error) {
	if !j.over {
		if j.buf.Len()+len(p) > j.limit {
			j.over = true
			j.buf = bytes.Buffer{}
		} else {
			j.buf.Write(p)
		}
	}
	return len(p), nil
}

// parse reads model and usage from the reply into u.
func (j *jsonTail) parse(u *usage) error {
	if j.over {
		return fmt.Errorf("the reply is larger than %d bytes", j.limit)
	}
	var m struct {
		Model string    `json:"model"`
		Usage *apiUsage `json:"usage"`
	}
	if err := json.Unmarshal(j.buf.Bytes(), &m); err != nil {
		return fmt.Errorf("parse the reply: %w", err)
	}
	u.setModel(m.Model)
	u.merge(m.Usage)
	return nil
}

// errorType returns the error.type of an error reply in the API's shape,
// or "".
func (j *jsonTail) errorType() string {
	var m struct {
		Error *struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	if j.over || json.Unmarshal(j.buf.Bytes(), &m) != nil || m.Error == nil {
		return ""
	}
	return cleanErrorType(m.Error.Type)
}

// requestModel returns the model a request body names, for the audit of a
// call whose reply does not say.
func requestModel(body []byte) string {
	var m struct {
		Model string `json:"model"`
	}
	if json.Unmarshal(body, &m) != nil || m.Model == "" {
		return ""
	}
	return cleanModel(m.Model)
}
