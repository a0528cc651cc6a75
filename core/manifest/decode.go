package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits of the strict JSON reader.
const (
	// MaxDepth is the deepest nesting of objects and arrays a manifest may
	// have. The reader counts it before descending, so a hostile file of
	// thousands of nested brackets costs neither stack nor time.
	MaxDepth = 64
	// MaxMembers is the most members an object or elements an array may
	// have (the schema allows far fewer where it matters: 256 tools, 256
	// enum values); it keeps hostile files from costing more than reading.
	MaxMembers = 10000
	// maxNumberLen bounds a number literal: the schema library turns
	// numbers into big.Rat, whose cost grows with the literal.
	maxNumberLen = 100
)

// decodeStrict reads a JSON document into a tree of map[string]any, []any,
// string, json.Number, bool and nil, refusing what encoding/json accepts
// silently: a byte-order mark, invalid UTF-8, duplicate object keys (Go keeps
// the last one while a reviewer reads the first), trailing data, and strings
// holding control characters, bidirectional overrides or U+FFFD. It never
// recurses. fatal reports that the document could not be read at all; the
// other problems still leave a usable tree (keeping the first of duplicated
// keys).
func decodeStrict(file string, data []byte) (tree any, probs []Problem, fatal bool) {
	pos := &posTracker{data: data, line: 1, col: 1}
	bad := func(off int, msg, fix string) (any, []Problem, bool) {
		line, col := pos.at(off)
		return nil, []Problem{{File: file, Message: fmt.Sprintf("line %d, column %d: %s", line, col, msg), Fix: fix}}, true
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, []Problem{{File: file, Message: "the file is empty", Fix: "write the manifest as a JSON object"}}, true
	}
	if bytes.HasPrefix(data, []byte("\xEF\xBB\xBF")) {
		return bad(0, "the file starts with a UTF-8 byte-order mark", "save the file as UTF-8 without a byte-order mark (BOM)")
	}
	if i := invalidUTF8(data); i >= 0 {
		return bad(i, "the file is not valid UTF-8", "save the file as UTF-8")
	}
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return bad(i, "the file contains a NUL byte", "remove the NUL byte: a manifest is plain text")
	}

	type frame struct {
		ptr   string
		obj   map[string]any
		arr   []any
		keys  map[string][2]int // key -> line and column of its first occurrence
		key   string            // the pending member's key
		has   bool              // key has been read, its value not yet
		dup   bool              // the pending member repeats a key: drop it
		isObj bool
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []*frame
	var root any
	done := false
	// attach adds a finished value to the enclosing container.
	attach := func(v any) {
		if len(stack) == 0 {
			root, done = v, true
			return
		}
		top := stack[len(stack)-1]
		if top.isObj {
			if !top.dup {
				top.obj[top.key] = v
			}
			top.key, top.has, top.dup = "", false, false
			return
		}
		top.arr = append(top.arr, v)
	}
	// here is the pointer of the value about to be read.
	here := func() string {
		if len(stack) == 0 {
			return ""
		}
		top := stack[len(stack)-1]
		if top.isObj {
			return top.ptr + "/" + escapeToken(top.key)
		}
		return top.ptr + "/" + strconv.Itoa(len(top.arr))
	}
	for !done {
		if len(probs) >= MaxProblems {
			return nil, append(probs, Problem{File: file, Message: fmt.Sprintf("more than %d problems; stopped reading", MaxProblems), Fix: "fix these first"}), true
		}
		start := tokenStart(data, int(dec.InputOffset()))
		tok, err := dec.Token()
		if err != nil {
			return syntaxProblem(file, data, err)
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if top.isObj {
				attach(top.obj)
			} else {
				if top.arr == nil {
					top.arr = []any{}
				}
				attach(top.arr)
			}
			continue
		}
		if top := topFrame(stack); top != nil && top.isObj && !top.has {
			// An object member's key.
			key, _ := tok.(string)
			ptr := top.ptr + "/" + escapeToken(key)
			line, col := pos.at(start)
			if first, seen := top.keys[key]; seen {
				probs = append(probs, Problem{File: file, Pointer: ptr,
					Message: fmt.Sprintf("duplicate key %q (first at line %d, column %d; again at line %d, column %d)", key, first[0], first[1], line, col),
					Fix:     "keep only one of them: JSON readers disagree about which one counts"})
				top.dup = true
			} else {
				top.keys[key] = [2]int{line, col}
			}
			if msg, fix := badString(key); msg != "" {
				probs = append(probs, Problem{File: file, Pointer: ptr, Message: "the key " + msg, Fix: fix})
			}
			top.key, top.has = key, true
			continue
		}
		ptr := here()
		if top := topFrame(stack); top != nil && len(top.obj)+len(top.arr) >= MaxMembers {
			line, col := pos.at(start)
			return nil, append(probs, Problem{File: file, Pointer: top.ptr,
				Message: fmt.Sprintf("line %d, column %d: more than %d members in one object or array", line, col, MaxMembers),
				Fix:     "shorten it"}), true
		}
		switch v := tok.(type) {
		case json.Delim:
			if len(stack) >= MaxDepth {
				line, col := pos.at(start)
				return nil, []Problem{{File: file, Pointer: ptr,
					Message: fmt.Sprintf("line %d, column %d: objects and arrays are nested more than %d deep", line, col, MaxDepth),
					Fix:     fmt.Sprintf("flatten the structure to at most %d levels", MaxDepth)}}, true
			}
			f := &frame{ptr: ptr, isObj: v == '{'}
			if f.isObj {
				f.obj, f.keys = map[string]any{}, map[string][2]int{}
			}
			stack = append(stack, f)
		case string:
			if msg, fix := badString(v); msg != "" {
				probs = append(probs, Problem{File: file, Pointer: ptr, Message: "the string " + msg, Fix: fix})
			}
			attach(v)
		case json.Number:
			if len(v) > maxNumberLen {
				probs = append(probs, Problem{File: file, Pointer: ptr, Message: fmt.Sprintf("the number is %d characters long", len(v)), Fix: fmt.Sprintf("write it in at most %d characters", maxNumberLen)})
			} else if _, err := strconv.ParseFloat(string(v), 64); err != nil {
				probs = append(probs, Problem{File: file, Pointer: ptr, Message: "the number " + string(v) + " is out of range", Fix: "use a number within ±1.7e308"})
			}
			attach(v)
		default: // bool, nil
			attach(v)
		}
	}
	// Anything after the top-level value is an error, not a second document.
	end := int(dec.InputOffset())
	for end < len(data) && (data[end] == ' ' || data[end] == '\t' || data[end] == '\n' || data[end] == '\r') {
		end++
	}
	if end < len(data) {
		return bad(end, "unexpected data after the top-level value", "remove everything after the manifest's closing brace")
	}
	return root, probs, false
}

func topFrame[F any](stack []*F) *F {
	if len(stack) == 0 {
		return nil
	}
	return stack[len(stack)-1]
}

// syntaxProblem turns the decoder's error into a problem with a line and
// column.
func syntaxProblem(file string, data []byte, err error) (any, []Problem, bool) {
	off := len(data)
	msg := err.Error()
	// encoding/json's validator locates the first syntax error just past
	// the offending byte, more reliably than the token reader does.
	var raw json.RawMessage
	var se *json.SyntaxError
	switch verr := json.Unmarshal(data, &raw); {
	case errors.As(verr, &se):
		off, msg = int(se.Offset), se.Error()
		if off > 0 && off <= len(data) && msg != "unexpected end of JSON input" {
			off--
		}
	case errors.As(err, &se):
		off, msg = int(se.Offset), se.Error()
	case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
		msg = "unexpected end of JSON input"
	}
	line, col := lineCol(data, off)
	return nil, []Problem{{File: file, Message: fmt.Sprintf("line %d, column %d: invalid JSON: %s", line, col, msg),
		Fix: "correct the JSON syntax there (a missing comma, quote or bracket is the usual cause)"}}, true
}

// posTracker turns increasing byte offsets into lines and columns in time
// linear in the file's size.
type posTracker struct {
	data           []byte
	off, line, col int
}

func (t *posTracker) at(off int) (line, col int) {
	off = min(max(off, 0), len(t.data))
	if off < t.off {
		t.off, t.line, t.col = 0, 1, 1
	}
	for t.off < off {
		r, size := utf8.DecodeRune(t.data[t.off:])
		if r == '\n' {
			t.line, t.col = t.line+1, 1
		} else {
			t.col++
		}
		t.off += size
	}
	return t.line, t.col
}

// tokenStart skips the white space and separators before the next token.
func tokenStart(data []byte, off int) int {
	for off < len(data) {
		switch data[off] {
		case ' ', '\t', '\n', '\r', ',', ':':
			off++
		default:
			return off
		}
	}
	return off
}

// lineCol gives the 1-based line and column (in characters) of a byte offset.
func lineCol(data []byte, off int) (line, col int) {
	if off > len(data) {
		off = len(data)
	}
	if off < 0 {
		off = 0
	}
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	lineStart := bytes.LastIndexByte(before, '\n') + 1
	col = utf8.RuneCount(before[lineStart:]) + 1
	return line, col
}

// invalidUTF8 returns the offset of the first byte that is not valid UTF-8,
// or -1.
func invalidUTF8(data []byte) int {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return -1
}

// badString says what is wrong with a decoded string, if anything. Control
// characters can rewrite a terminal that prints the manifest, bidirectional
// overrides make text read differently from what it is, and U+FFFD is what a
// lone surrogate escape (\ud800) silently becomes.
func badString(s string) (msg, fix string) {
	for i, r := range s {
		switch {
		case r == 0:
			return fmt.Sprintf("contains a NUL character (\\u0000) at character %d", utf8.RuneCountInString(s[:i])+1), "remove it"
		case r < 0x20 && r != '\t' && r != '\n' && r != '\r', r == 0x7f, r >= 0x80 && r <= 0x9f:
			return fmt.Sprintf("contains the control character U+%04X at character %d", r, utf8.RuneCountInString(s[:i])+1), "remove it: control characters can rewrite the terminal that shows this text"
		case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			return fmt.Sprintf("contains the bidirectional control U+%04X at character %d", r, utf8.RuneCountInString(s[:i])+1), "remove it: it makes the text display differently from what it is"
		case r == utf8.RuneError:
			return fmt.Sprintf("contains U+FFFD at character %d (usually an invalid \\u escape such as a lone surrogate)", utf8.RuneCountInString(s[:i])+1), "write the character itself, or a valid \\u escape pair"
		}
	}
	return "", ""
}

// escapeToken escapes one RFC 6901 reference token.
func escapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// unescapeToken reverses escapeToken.
func unescapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// splitPointer splits an RFC 6901 pointer into unescaped tokens.
func splitPointer(p string) []string {
	if p == "" {
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, t := range parts {
		parts[i] = unescapeToken(t)
	}
	return parts
}

// lookup returns the value at pointer p in a decoded tree.
func lookup(v any, p string) (any, bool) {
	for _, t := range splitPointer(p) {
		switch c := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = c[t]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			v = c[i]
		default:
			return nil, false
		}
	}
	return v, true
}
