package menu

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// Leaf is one leaf value of a confirmation's arguments: where it is and
// what it is, both escaped for display.
type Leaf struct {
	// Path locates the value: object keys joined with dots (a key that is
	// not a plain word is quoted in brackets: ["a key"]), array indexes in
	// brackets, "" for arguments that are a single value.
	Path string
	// Value is the value as JSON would write it, escaped: strings in
	// double quotes with \" and \\ (so that an escape in a value cannot
	// pass for one made here), numbers exactly as sent, true, false,
	// null, and {} or [] for an empty object or array.
	Value string
}

// maxDepth bounds the nesting Leaves follows.
const maxDepth = 64

// errTooDeep is Leaves' error for arguments nested deeper than maxDepth.
var errTooDeep = fmt.Errorf("the arguments are nested more than %d levels deep", maxDepth)

// Leaves flattens JSON arguments to every leaf value, in the order the
// core sent them (duplicate keys included: nothing is dropped). Empty raw
// means no arguments: no leaves.
func Leaves(raw json.RawMessage) ([]Leaf, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out []Leaf
	if err := leaves(dec, "", 0, &out); err != nil {
		if errors.Is(err, io.EOF) { // the value ended early
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read the arguments: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("read the arguments: more than one JSON value")
	}
	return out, nil
}

func leaves(dec *json.Decoder, path string, depth int, out *[]Leaf) error {
	if depth > maxDepth {
		return errTooDeep
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch v := tok.(type) {
	case json.Delim:
		n := 0
		switch v {
		case '{':
			for ; dec.More(); n++ {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				key, _ := kt.(string)
				if err := leaves(dec, joinKey(path, key), depth+1, out); err != nil {
					return err
				}
			}
			if n == 0 {
				*out = append(*out, Leaf{Path: path, Value: "{}"})
			}
		case '[':
			for ; dec.More(); n++ {
				if err := leaves(dec, fmt.Sprintf("%s[%d]", path, n), depth+1, out); err != nil {
					return err
				}
			}
			if n == 0 {
				*out = append(*out, Leaf{Path: path, Value: "[]"})
			}
		}
		_, err := dec.Token() // the closing delimiter
		return err
	case string:
		*out = append(*out, Leaf{Path: path, Value: Quote(v)})
	case json.Number:
		*out = append(*out, Leaf{Path: path, Value: textutil.Printable(v.String())})
	case bool:
		*out = append(*out, Leaf{Path: path, Value: fmt.Sprint(v)})
	case nil:
		*out = append(*out, Leaf{Path: path, Value: "null"})
	}
	return nil
}

// plainKey is a key shown after a dot as it is.
var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

func joinKey(path, key string) string {
	switch k := PathKey(key); {
	case k[0] == '[', path == "":
		return path + k
	default:
		return path + "." + k
	}
}

// PathKey is an object key as a Leaf's Path writes it: a plain word as it
// is, any other key quoted in brackets (["a key"]).
func PathKey(key string) string {
	if plainKey.MatchString(key) {
		return key
	}
	return "[" + Quote(key) + "]"
}

// Quote writes s in double quotes, escaped, as the menu and the
// notifications show a string value: \ and " first, so that the \u
// escapes textutil.Printable adds for unprintable runes are the only
// single backslashes.
func Quote(s string) string {
	s = strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
	return `"` + textutil.Printable(s) + `"`
}

// String is the leaf as one line: "path = value", or the value alone.
func (l Leaf) String() string {
	if l.Path == "" {
		return l.Value
	}
	return l.Path + " = " + l.Value
}

// Wrap cuts s into lines of at most width runes; every line after the
// first starts with cont (counted in the width). Nothing is dropped.
func Wrap(s string, width int, cont string) []string {
	if width <= utf8.RuneCountInString(cont) {
		width = utf8.RuneCountInString(cont) + 1
	}
	r := []rune(s)
	if len(r) <= width {
		return []string{s}
	}
	n := cut(r, width)
	lines := []string{string(r[:n])}
	r = r[n:]
	step := width - utf8.RuneCountInString(cont)
	for len(r) > 0 {
		n := cut(r, step)
		lines = append(lines, cont+string(r[:n]))
		r = r[n:]
	}
	return lines
}

// cut returns how many runes of r go on a line of at most limit: all of
// them if they fit, else up to and including the last space in the second
// half of the line (so that words stay whole where they can), else limit.
// The space stays on the line it ends: the lines still join to r exactly.
func cut(r []rune, limit int) int {
	if len(r) <= limit {
		return len(r)
	}
	for i := limit - 1; i >= limit/2; i-- {
		if r[i] == ' ' {
			return i + 1
		}
	}
	return limit
}

// Summary is a confirmation's arguments on one line of at most width runes
// (cut with "…"), for a notification: the leaves joined with ", ",
// escaped. complete says it shows every argument in full, as it runs —
// nothing cut, left out, unreadable or hidden (Hidden) —, the condition for
// offering Approve beside it. The full arguments are in the menu.
func Summary(c api.Confirmation, width int) (s string, complete bool) {
	switch {
	case c.ArgumentsOmitted:
		return "arguments too large for a notification: see the menu", false
	case len(bytes.TrimSpace(c.Arguments)) == 0:
		return "no arguments", true
	}
	ls, err := Leaves(c.Arguments)
	if err != nil {
		return "arguments not readable: see the menu", false
	}
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.String()
	}
	s = strings.Join(parts, ", ")
	if utf8.RuneCountInString(s) > width {
		return textutil.ClipRunes(s, width), false
	}
	return s, c.Exact()
}
