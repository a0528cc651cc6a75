package skills

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/carapace-dev/carapace/core/catalog"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// Limits of SampleArguments, so that a hostile or careless schema cannot
// make it build something huge or recurse for ever.
const (
	sampleMaxDepth  = 24   // nested objects, arrays and $refs
	sampleMaxString = 4096 // characters in one generated string
	sampleMaxItems  = 64   // elements in one generated array
)

// ErrNoSample is wrapped by SampleArguments when it cannot build arguments
// that the schema accepts.
var ErrNoSample = errors.New("cannot generate sample arguments from the schema")

// SampleArguments builds the smallest plausible arguments object that the
// argument schema accepts: its required properties only, each one its
// "default" if it has one, else its "const", its first "enum" value, its
// first "examples" value, else a value of its type that honours the
// schema's constraints — minLength and maxLength, minimum, maximum and
// multipleOf, minItems, pattern, and format (date-time and date from now;
// "user@example.com" for email; "https://example.com" for uri; a fixed
// UUID; and so on). Local $refs, allOf, anyOf and oneOf (the first branch)
// are followed.
//
// The result is in the form the core hands a handler — JSON-decoded, numbers
// as json.Number — and has been validated against the schema compiled the
// way the core compiles it (catalog.CompileSchema), so the core would accept
// it. When no such value can be built (a pattern the generator cannot
// satisfy, a contradiction), the error wraps ErrNoSample; supply real
// arguments instead.
//
// The skill assembler uses it for the example call of each tool, and
// plugintest.Conformance to call each declared tool.
func SampleArguments(schema json.RawMessage, now time.Time) (map[string]any, error) {
	var root any
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("%w: schema is not JSON: %w", ErrNoSample, err)
	}
	g := &sampler{root: root, now: now.UTC()}
	v, err := g.value(root, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoSample, err)
	}
	args, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: the schema does not describe an object", ErrNoSample)
	}
	compiled, err := catalog.CompileSchema("sample", schema)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoSample, err)
	}
	if err := compiled.Validate(args); err != nil {
		p := catalog.Explain(err)
		return nil, fmt.Errorf("%w: the generated arguments are rejected: %s", ErrNoSample, p.Message)
	}
	return args, nil
}

// sampler generates one value for a schema.
type sampler struct {
	root any
	now  time.Time
}

// value returns a value valid against schema s (as far as the generator
// can tell; SampleArguments validates the whole at the end).
func (g *sampler) value(s any, depth int) (any, error) {
	if depth > sampleMaxDepth {
		return nil, errors.New("the schema nests too deep")
	}
	switch s := s.(type) {
	case bool:
		if !s {
			return nil, errors.New("a subschema accepts nothing (false)")
		}
		return "example", nil
	case map[string]any:
		return g.object(s, depth)
	default:
		return nil, fmt.Errorf("a subschema is a %T, not an object", s)
	}
}

func (g *sampler) object(s map[string]any, depth int) (any, error) {
	s, err := g.flatten(s, depth)
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"default", "const"} {
		if v, ok := s[k]; ok {
			return v, nil
		}
	}
	for _, k := range []string{"enum", "examples"} {
		if a, ok := s[k].([]any); ok && len(a) > 0 {
			return a[0], nil
		}
	}
	switch typeOf(s) {
	case "object":
		return g.properties(s, depth)
	case "array":
		return g.array(s, depth)
	case "string":
		return g.str(s)
	case "integer":
		return number(s, true)
	case "number":
		return number(s, false)
	case "boolean":
		return false, nil
	case "null":
		return nil, nil
	default:
		return "example", nil
	}
}

// flatten resolves s's local $ref and merges its allOf branches and the
// first branch of anyOf and oneOf into one schema.
func (g *sampler) flatten(s map[string]any, depth int) (map[string]any, error) {
	for range sampleMaxDepth {
		ref, hasRef := s["$ref"].(string)
		all, hasAll := s["allOf"].([]any)
		anyOf, hasAny := s["anyOf"].([]any)
		oneOf, hasOne := s["oneOf"].([]any)
		if !hasRef && !hasAll && !hasAny && !hasOne {
			return s, nil
		}
		out := maps.Clone(s)
		delete(out, "$ref")
		delete(out, "allOf")
		delete(out, "anyOf")
		delete(out, "oneOf")
		var parts []any
		if hasRef {
			t, err := g.resolve(ref)
			if err != nil {
				return nil, err
			}
			parts = append(parts, t)
		}
		parts = append(parts, all...)
		if hasAny && len(anyOf) > 0 {
			parts = append(parts, anyOf[0])
		}
		if hasOne && len(oneOf) > 0 {
			parts = append(parts, oneOf[0])
		}
		for _, p := range parts {
			pm, ok := p.(map[string]any)
			if !ok {
				if b, isBool := p.(bool); isBool && b {
					continue
				}
				return nil, errors.New("a subschema accepts nothing")
			}
			merge(out, pm)
		}
		s = out
	}
	return nil, errors.New("$ref, allOf, anyOf and oneOf nest too deep")
}

// merge adds src's keywords to dst: properties and required are united,
// other keywords already in dst win.
func merge(dst, src map[string]any) {
	for k, v := range src {
		switch k {
		case "properties":
			p, _ := dst[k].(map[string]any)
			p = maps.Clone(p)
			if p == nil {
				p = map[string]any{}
			}
			if sp, ok := v.(map[string]any); ok {
				for name, sub := range sp {
					if _, taken := p[name]; !taken {
						p[name] = sub
					}
				}
			}
			dst[k] = p
		case "required":
			r, _ := dst[k].([]any)
			sr, _ := v.([]any)
			dst[k] = append(slices.Clone(r), sr...)
		default:
			if _, ok := dst[k]; !ok {
				dst[k] = v
			}
		}
	}
}

// resolve follows a local reference: "#", "#/$defs/name", "#/definitions/…".
func (g *sampler) resolve(ref string) (any, error) {
	if ref != "#" && !strings.HasPrefix(ref, "#/") {
		return nil, fmt.Errorf("$ref %q is not local to the schema", textutil.Clip(ref, 80))
	}
	cur := g.root
	for _, tok := range strings.Split(strings.TrimPrefix(ref, "#"), "/")[1:] {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[tok]
			if !ok {
				return nil, fmt.Errorf("$ref %q points nowhere", textutil.Clip(ref, 80))
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, fmt.Errorf("$ref %q points nowhere", textutil.Clip(ref, 80))
			}
			cur = c[i]
		default:
			return nil, fmt.Errorf("$ref %q points nowhere", textutil.Clip(ref, 80))
		}
	}
	return cur, nil
}

// typeOf returns the schema's type, the first that is not "null" when it
// lists several, or one inferred from its keywords.
func typeOf(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		first := ""
		for _, e := range t {
			if n, ok := e.(string); ok {
				if n != "null" {
					return n
				}
				first = n
			}
		}
		return first
	}
	has := func(keys ...string) bool {
		for _, k := range keys {
			if _, ok := s[k]; ok {
				return true
			}
		}
		return false
	}
	switch {
	case has("properties", "required", "additionalProperties", "minProperties"):
		return "object"
	case has("items", "prefixItems", "minItems", "maxItems"):
		return "array"
	case has("minLength", "maxLength", "pattern", "format"):
		return "string"
	case has("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
		return "number"
	}
	return ""
}

func (g *sampler) properties(s map[string]any, depth int) (any, error) {
	props, _ := s["properties"].(map[string]any)
	req, _ := s["required"].([]any)
	out := map[string]any{}
	for _, r := range req {
		name, ok := r.(string)
		if !ok {
			continue
		}
		if _, done := out[name]; done {
			continue
		}
		sub, ok := props[name]
		if !ok {
			sub = true
			if ap, isMap := s["additionalProperties"].(map[string]any); isMap {
				sub = ap
			}
		}
		v, err := g.value(sub, depth+1)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}

func (g *sampler) array(s map[string]any, depth int) (any, error) {
	n, _ := intKeyword(s, "minItems")
	if n > sampleMaxItems {
		return nil, fmt.Errorf("minItems %d is more than the generator builds", n)
	}
	prefix, _ := s["prefixItems"].([]any)
	out := make([]any, 0, n)
	for i := range n {
		var sub any = true
		switch {
		case i < len(prefix):
			sub = prefix[i]
		case s["items"] != nil:
			sub = s["items"]
		}
		v, err := g.value(sub, depth+1)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// formats are the sample values of the string formats the core asserts.
func (g *sampler) format(f string) (string, bool) {
	switch f {
	case "date-time":
		return g.now.Truncate(time.Second).Format(time.RFC3339), true
	case "date":
		return g.now.Format(time.DateOnly), true
	case "time":
		return "09:00:00Z", true
	case "duration":
		return "PT1H", true
	case "email", "idn-email":
		return "user@example.com", true
	case "hostname", "idn-hostname":
		return "example.com", true
	case "ipv4", "ip-address":
		return "192.0.2.1", true
	case "ipv6":
		return "2001:db8::1", true
	case "uri", "iri", "uri-reference", "iri-reference", "uriref":
		return "https://example.com", true
	case "uri-template":
		return "https://example.com/{id}", true
	case "uuid":
		return "123e4567-e89b-42d3-a456-426614174000", true
	case "regex":
		return ".*", true
	case "json-pointer":
		return "/example", true
	case "relative-json-pointer":
		return "0", true
	}
	return "", false
}

func (g *sampler) str(s map[string]any) (any, error) {
	minLen, _ := intKeyword(s, "minLength")
	maxLen, hasMax := intKeyword(s, "maxLength")
	if !hasMax {
		maxLen = math.MaxInt
	}
	if minLen > sampleMaxString {
		return nil, fmt.Errorf("minLength %d is more than the generator builds", minLen)
	}
	if minLen > maxLen {
		return nil, fmt.Errorf("minLength %d is above maxLength %d", minLen, maxLen)
	}
	if f, ok := s["format"].(string); ok {
		if v, known := g.format(f); known {
			return v, nil
		}
	}
	if p, ok := s["pattern"].(string); ok {
		return fromPattern(p, minLen, maxLen)
	}
	v := "example"
	for utf8.RuneCountInString(v) < minLen {
		v += "x"
	}
	if utf8.RuneCountInString(v) > maxLen {
		v = string([]rune(v)[:maxLen])
	}
	return v, nil
}

// intKeyword reads a non-negative integer keyword such as minLength.
func intKeyword(s map[string]any, k string) (int, bool) {
	n, ok := s[k].(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	if err != nil || f < 0 {
		return 0, false
	}
	if f > math.MaxInt32 {
		return math.MaxInt32, true
	}
	return int(f), true
}

func numKeyword(s map[string]any, k string) (float64, bool) {
	n, ok := s[k].(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil && !math.IsInf(f, 0)
}

// number picks 1 if the bounds allow it, else the lowest value they allow
// (or the highest, when only a maximum is given), then rounds up to a
// multipleOf.
func number(s map[string]any, integer bool) (any, error) {
	lo, hasLo := numKeyword(s, "minimum")
	if x, ok := numKeyword(s, "exclusiveMinimum"); ok && (!hasLo || x >= lo) {
		lo, hasLo = x+1, true
		if integer {
			lo = math.Floor(x) + 1
		}
	}
	hi, hasHi := numKeyword(s, "maximum")
	if x, ok := numKeyword(s, "exclusiveMaximum"); ok && (!hasHi || x <= hi) {
		hi, hasHi = x-1, true
		if integer {
			hi = math.Ceil(x) - 1
		}
	}
	v := 1.0
	switch {
	case hasLo && v < lo:
		v = lo
	case hasHi && v > hi:
		v = hi
	}
	if integer {
		v = math.Ceil(v)
	}
	if m, ok := numKeyword(s, "multipleOf"); ok && m > 0 {
		v = math.Ceil(v/m) * m
	}
	if hasHi && v > hi || hasLo && v < lo {
		return nil, fmt.Errorf("no number between %v and %v", lo, hi)
	}
	if integer {
		if math.Abs(v) > 1<<53 {
			return nil, errors.New("integer bounds out of range")
		}
		return json.Number(strconv.FormatInt(int64(v), 10)), nil
	}
	return json.Number(strconv.FormatFloat(v, 'f', -1, 64)), nil
}

// fromPattern builds a string that the regular expression matches, with
// between minLen and maxLen characters: each loop repeated k times, for the
// smallest k that gives a long enough match. JSON Schema patterns are
// ECMA 262; the common subset is RE2's, which is what is parsed here.
func fromPattern(p string, minLen, maxLen int) (string, error) {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return "", fmt.Errorf("pattern cannot be parsed: %w", err)
	}
	check, err := regexp.Compile(p)
	if err != nil {
		return "", fmt.Errorf("pattern cannot be compiled: %w", err)
	}
	re = re.Simplify()
	for k := 0; k <= 64; k++ {
		var b strings.Builder
		if !walkPattern(&b, re, k) {
			return "", errors.New("pattern matches nothing")
		}
		if b.Len() > 4*sampleMaxString {
			break
		}
		s := b.String()
		n := utf8.RuneCountInString(s)
		if n >= minLen && n <= maxLen && check.MatchString(s) {
			return s, nil
		}
		if n > maxLen {
			break
		}
	}
	return "", fmt.Errorf("no string of %d to %d characters found for pattern %q", minLen, maxLen, textutil.Clip(p, 80))
}

func walkPattern(b *strings.Builder, re *syntax.Regexp, k int) bool {
	switch re.Op {
	case syntax.OpNoMatch:
		return false
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			b.WriteRune(r)
		}
	case syntax.OpCharClass:
		r, ok := classRune(re.Rune)
		if !ok {
			return false
		}
		b.WriteRune(r)
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		b.WriteByte('x')
	case syntax.OpCapture:
		return walkPattern(b, re.Sub[0], k)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		lo, hi := 0, -1
		switch re.Op {
		case syntax.OpPlus:
			lo = 1
		case syntax.OpQuest:
			hi = 1
		case syntax.OpRepeat:
			lo, hi = re.Min, re.Max
		}
		n := max(k, lo)
		if hi >= 0 && n > hi {
			n = hi
		}
		for range n {
			if !walkPattern(b, re.Sub[0], k) {
				return false
			}
		}
	case syntax.OpConcat:
		for _, s := range re.Sub {
			if !walkPattern(b, s, k) {
				return false
			}
		}
	case syntax.OpAlternate:
		for _, s := range re.Sub {
			var alt strings.Builder
			if walkPattern(&alt, s, k) {
				b.WriteString(alt.String())
				return true
			}
		}
		return false
	}
	// Empty matches, anchors and word boundaries add nothing.
	return true
}

// classRune picks a character of a class (pairs of inclusive ranges):
// a letter or digit if it has one, else its first printable character.
func classRune(ranges []rune) (rune, bool) {
	var first rune = -1
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], ranges[i+1]
		for _, want := range []rune{'a', 'A', '0'} {
			if lo <= want && want <= hi {
				return want, true
			}
		}
		if first < 0 {
			for r := lo; r <= hi && r-lo < 256; r++ {
				if unicode.IsPrint(r) && r != ' ' {
					first = r
					break
				}
			}
		}
	}
	if first < 0 && len(ranges) >= 2 {
		first = ranges[0]
	}
	return first, first >= 0
}
