package manifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/carapace-dev/carapace/internal/textutil"
)

// Limits of an arguments_schema.
const (
	MaxSchemaDepth = 8    // nested properties/items below the top level
	MaxEnum        = 256  // values in one enum
	MaxPatternLen  = 1000 // characters in one pattern
	// MaxSchemaObjects bounds the JSON objects in one arguments_schema or
	// config_schema: the schema library's compiler takes time quadratic
	// in the number of sub-schemas.
	MaxSchemaObjects = 1000
)

// countObjects counts the JSON objects in a decoded tree (at most MaxDepth
// deep), stopping past limit.
func countObjects(v any, limit int) int {
	n := 0
	var walk func(v any)
	walk = func(v any) {
		if n > limit {
			return
		}
		switch c := v.(type) {
		case map[string]any:
			n++
			for _, x := range c {
				walk(x)
			}
		case []any:
			for _, x := range c {
				walk(x)
			}
		}
	}
	walk(v)
	return n
}

// tooBig reports a schema holding more than MaxSchemaObjects objects.
func tooBig(file, ptr string, s map[string]any) []Problem {
	if countObjects(s, MaxSchemaObjects) <= MaxSchemaObjects {
		return nil
	}
	return []Problem{{File: file, Pointer: ptr, Message: fmt.Sprintf("the schema holds more than %d objects", MaxSchemaObjects), Fix: "simplify the schema"}}
}

// propertyKeywords are the JSON Schema keywords an argument's schema may use.
// Everything else ($ref, allOf, patternProperties, if/then/else, ...) is
// refused: the core validates arguments with exactly what the skill file
// and the handler's author can read, and nothing is silently ignored.
var propertyKeywords = []string{
	"type", "description", "default", "enum", "format",
	"maxLength", "minLength", "pattern", "maximum", "minimum",
	"items", "maxItems", "minItems", "properties", "required", "additionalProperties",
}

// topKeywords are the keywords of the top level of an arguments_schema.
var topKeywords = []string{"type", "properties", "required", "additionalProperties", "description"}

// schemaTypes are the types an argument can have ("null" is not one: an
// optional argument is one left out of "required").
var schemaTypes = []string{"string", "number", "integer", "boolean", "array", "object"}

// appliesTo names the types each type-specific keyword constrains; on any
// other type JSON Schema ignores it, silently.
var appliesTo = map[string][]string{
	"maxLength": {"string"}, "minLength": {"string"}, "pattern": {"string"}, "format": {"string"},
	"maximum": {"number", "integer"}, "minimum": {"number", "integer"},
	"items": {"array"}, "maxItems": {"array"}, "minItems": {"array"},
	"properties": {"object"}, "required": {"object"}, "additionalProperties": {"object"},
}

// Formats are the values "format" may take: the standard formats that the
// schema library (santhosh-tekuri/jsonschema v5) asserts. Any other format
// (idn-email, or a made-up one) would be a comment that checks nothing, so it
// is refused.
var Formats = []string{
	"date-time", "date", "time", "duration",
	"email", "hostname", "ipv4", "ipv6",
	"uri", "uri-reference", "iri", "iri-reference", "uri-template",
	"uuid", "regex", "json-pointer", "relative-json-pointer",
}

// argChecker applies the arguments_schema rules and collects problems.
type argChecker struct {
	file     string
	probs    []Problem
	defaults []pendingDefault
}

// pendingDefault is a default of the right type, to be validated against
// its property's compiled schema.
type pendingDefault struct {
	ptr   string // of the property's schema
	value any
}

func (a *argChecker) add(ptr, msg, fix string) {
	a.probs = append(a.probs, Problem{File: a.file, Pointer: ptr, Message: msg, Fix: fix})
}

// checkArguments checks a tool's arguments_schema (already known to be an
// object) and, when the rules pass, that it compiles as the catalogue will
// compile it.
func checkArguments(file, ptr string, s map[string]any) []Problem {
	if p := tooBig(file, ptr, s); p != nil {
		return p
	}
	a := &argChecker{file: file}
	a.schema(ptr, s, 0, true)
	if len(a.probs) > 0 {
		return a.probs
	}
	raw, err := json.Marshal(s)
	var compiled *jsonschema.Schema
	if err == nil {
		compiled, err = compileSchema("mem://carapace/arguments_schema.json", raw)
	}
	if err != nil {
		a.add(ptr, "does not compile as a JSON Schema: "+schemaErrText(err), "correct the schema")
		return a.probs
	}
	for _, d := range a.defaults {
		sub := compiled
		toks := splitPointer(strings.TrimPrefix(d.ptr, ptr))
		for i := 0; sub != nil && i < len(toks); i++ {
			switch toks[i] {
			case "properties":
				if i+1 < len(toks) {
					sub = sub.Properties[toks[i+1]]
					i++
				}
			case "items":
				sub = sub.Items2020
			default:
				sub = nil
			}
		}
		if sub == nil {
			continue
		}
		if err := sub.Validate(d.value); err != nil {
			a.add(d.ptr+"/default", "the default does not satisfy its own schema: "+schemaErrText(err), "change the default so that the schema accepts it, or remove it")
		}
	}
	return a.probs
}

// schema checks one schema object at ptr; depth counts the levels below the
// arguments' top level.
func (a *argChecker) schema(ptr string, v any, depth int, top bool) {
	s, ok := v.(map[string]any)
	if !ok {
		fix := `write a schema object such as {"type": "string"}`
		if _, isArr := v.([]any); isArr && strings.HasSuffix(ptr, "/items") {
			fix = `give "items" one schema object, such as {"type": "string"}, that every element satisfies`
		}
		a.add(ptr, "must be a schema object, not "+withArticle(jsonType(v)), fix)
		return
	}
	if depth > MaxSchemaDepth {
		a.add(ptr, fmt.Sprintf("the arguments are nested more than %d levels deep", MaxSchemaDepth), "flatten the arguments")
		return
	}
	allowed := propertyKeywords
	if top {
		allowed = topKeywords
	}
	for _, k := range sortedKeys(s) {
		if !slices.Contains(allowed, k) {
			a.unsupported(ptr, k, allowed, top)
		}
	}
	typ, typeOK := a.typeOf(ptr, s, top)
	if typeOK {
		for _, k := range sortedKeys(s) {
			if want, ok := appliesTo[k]; ok && slices.Contains(allowed, k) && !slices.Contains(want, typ) {
				a.add(ptr+"/"+k, fmt.Sprintf("%q has no effect on a value of type %q", k, typ), misapplyFix(k, typ))
			}
		}
	}
	if d, ok := s["description"]; ok {
		if _, ok := d.(string); !ok {
			a.add(ptr+"/description", "must be a string, not "+withArticle(jsonType(d)), "describe it in words")
		}
	}
	switch typ {
	case "object":
		a.object(ptr, s, depth)
	case "array":
		a.array(ptr, s, depth)
	case "string":
		a.str(ptr, s)
	case "number", "integer":
		a.num(ptr, s)
	}
	if e, ok := s["enum"]; ok && !top {
		a.enum(ptr+"/enum", e, typ, typeOK)
	}
	d, hasDefault := s["default"]
	if !hasDefault || top || !typeOK {
		return
	}
	switch {
	case d == nil:
		a.add(ptr+"/default", fmt.Sprintf("the default is null, which is not of type %q", typ), `remove "default": an argument that is left out already has no value`)
	case !typeMatches(typ, d):
		a.add(ptr+"/default", fmt.Sprintf("the default %s is not of type %q", quoteJSON(d), typ), "change the default to a value of type "+typ+", or remove it")
	default:
		// Checked against the whole schema once it compiles.
		a.defaults = append(a.defaults, pendingDefault{ptr: ptr, value: d})
	}
}

// unsupported reports a keyword outside the supported set.
func (a *argChecker) unsupported(ptr, k string, allowed []string, top bool) {
	p := ptr + "/" + escapeToken(k)
	list := strings.Join(allowed, ", ")
	switch k {
	case "$ref", "$dynamicRef", "$recursiveRef", "$defs", "definitions", "$id", "$anchor", "$dynamicAnchor":
		a.add(p, fmt.Sprintf("%q is not supported: an arguments_schema must be self-contained, without references", k),
			fmt.Sprintf("write the referenced schema inline and remove %q; supported keywords: %s", k, list))
		return
	case "$schema":
		a.add(p, `"$schema" is not supported: an arguments_schema is always JSON Schema 2020-12 restricted to the supported keywords`,
			`remove "$schema"`)
		return
	}
	if slices.Contains(propertyKeywords, k) && top {
		a.add(p, fmt.Sprintf("%q is not supported at the top level of an arguments_schema", k),
			fmt.Sprintf("remove it, or move it into the schema of the argument it is about; the top level may use: %s", list))
		return
	}
	fix := fmt.Sprintf("remove it; supported keywords: %s", list)
	if n := nearest(k, allowed); n != "" {
		fix = fmt.Sprintf("did you mean %q? Otherwise remove it; supported keywords: %s", n, list)
	}
	a.add(p, fmt.Sprintf("the keyword %q is not supported in an arguments_schema", k), fix)
}

// typeOf checks "type" and returns it when it is one of schemaTypes.
func (a *argChecker) typeOf(ptr string, s map[string]any, top bool) (string, bool) {
	all := jsonList(toAny(schemaTypes))
	t, present := s["type"]
	switch {
	case !present && top:
		a.add(ptr+"/type", `"type" is missing`, `add "type": "object"`)
		return "", false
	case !present:
		a.add(ptr+"/type", `"type" is missing`, `add "type": one of `+all)
		return "", false
	}
	ts, ok := t.(string)
	switch {
	case !ok:
		fix := `write one type, such as "string"`
		if _, isArr := t.([]any); isArr {
			fix = `choose one type; to make an argument optional, leave it out of "required" instead of allowing null`
		}
		a.add(ptr+"/type", `"type" must be a single type name, not `+withArticle(jsonType(t)), fix)
		return "", false
	case !slices.Contains(schemaTypes, ts):
		a.add(ptr+"/type", fmt.Sprintf("unknown type %s", quoteShort(ts)), "use one of "+all)
		return "", false
	case top && ts != "object":
		a.add(ptr+"/type", fmt.Sprintf(`an arguments_schema must be of type "object", not %q`, ts), `set "type": "object" and describe each argument under "properties"`)
		return "", false
	}
	return ts, true
}

func (a *argChecker) object(ptr string, s map[string]any, depth int) {
	props, present := s["properties"]
	pm, isMap := props.(map[string]any)
	switch {
	case !present:
		a.add(ptr+"/properties", `"properties" is missing`, `add "properties": {...} declaring each field (write {} when there are none)`)
	case !isMap:
		a.add(ptr+"/properties", "must be an object mapping each field's name to its schema, not "+withArticle(jsonType(props)), `write "properties": {"name": {"type": "string"}}`)
	}
	ap, present := s["additionalProperties"]
	switch {
	case !present:
		a.add(ptr+"/additionalProperties", `"additionalProperties" is missing`, `add "additionalProperties": false, so that the agent cannot send fields the handler does not expect`)
	case ap != false:
		a.add(ptr+"/additionalProperties", fmt.Sprintf(`"additionalProperties" must be false, not %s`, quoteJSON(ap)), `set "additionalProperties": false and declare every field under "properties"`)
	}
	if req, present := s["required"]; present {
		list, ok := req.([]any)
		if !ok {
			a.add(ptr+"/required", "must be an array of field names, not "+withArticle(jsonType(req)), `write "required": ["name", ...]`)
		}
		seen := map[string]bool{}
		for i, r := range list {
			rp := fmt.Sprintf("%s/required/%d", ptr, i)
			name, ok := r.(string)
			switch {
			case !ok:
				a.add(rp, "must be a field name (a string), not "+withArticle(jsonType(r)), "write the name in quotes")
			case seen[name]:
				a.add(rp, fmt.Sprintf("%q is listed twice", name), "list it once")
			case isMap && !hasKey(pm, name):
				fix := fmt.Sprintf(`declare %q under "properties", or remove it from "required"`, name)
				if n := nearest(name, sortedKeys(pm)); n != "" {
					fix = fmt.Sprintf("did you mean %q? Otherwise declare %q under \"properties\" or remove it from \"required\"", n, name)
				}
				a.add(rp, fmt.Sprintf(`%q is required but not declared under "properties"`, name), fix)
			}
			seen[name] = true
		}
	}
	for _, name := range sortedKeys(pm) {
		pp := ptr + "/properties/" + escapeToken(name)
		if name == "" {
			a.add(pp, "a field name is empty", "name the field")
			continue
		}
		a.schema(pp, pm[name], depth+1, false)
	}
}

func (a *argChecker) array(ptr string, s map[string]any, depth int) {
	items, present := s["items"]
	if !present {
		a.add(ptr+"/items", `"items" is missing`, `add "items": {"type": "string"} (or whatever schema every element must satisfy)`)
	} else {
		a.schema(ptr+"/items", items, depth+1, false)
	}
	a.bounds(ptr, s, "minItems", "maxItems", true)
}

func (a *argChecker) str(ptr string, s map[string]any) {
	a.bounds(ptr, s, "minLength", "maxLength", true)
	if p, ok := s["pattern"]; ok {
		ps, isStr := p.(string)
		switch {
		case !isStr:
			a.add(ptr+"/pattern", "must be a regular expression (a string), not "+withArticle(jsonType(p)), "write the pattern as a string")
		case len([]rune(ps)) > MaxPatternLen:
			a.add(ptr+"/pattern", fmt.Sprintf("is %d characters long; the limit is %d", len([]rune(ps)), MaxPatternLen), "shorten the pattern")
		default:
			if _, err := regexp.Compile(ps); err != nil {
				a.add(ptr+"/pattern", "is not a valid regular expression: "+err.Error(), "correct it (the syntax is Go's RE2: no look-around or back-references)")
			}
		}
	}
	if f, ok := s["format"]; ok {
		fs, isStr := f.(string)
		switch {
		case !isStr:
			a.add(ptr+"/format", "must be a format name (a string), not "+withArticle(jsonType(f)), "use one of "+strings.Join(Formats, ", "))
		case !slices.Contains(Formats, fs):
			a.add(ptr+"/format", fmt.Sprintf("unknown format %s: it would not be checked", quoteShort(fs)), "use one of "+strings.Join(Formats, ", ")+`, or a "pattern"`)
		}
	}
}

func (a *argChecker) num(ptr string, s map[string]any) {
	a.bounds(ptr, s, "minimum", "maximum", false)
}

// bounds checks a min/max pair: numbers (whole and not negative when count
// is set), min not above max.
func (a *argChecker) bounds(ptr string, s map[string]any, minK, maxK string, count bool) {
	vals := map[string]*big.Rat{}
	for _, k := range []string{minK, maxK} {
		v, ok := s[k]
		if !ok {
			continue
		}
		n, isNum := v.(json.Number)
		r, okRat := new(big.Rat).SetString(string(n))
		switch {
		case !isNum || !okRat:
			a.add(ptr+"/"+k, "must be a number, not "+withArticle(jsonType(v)), "write a number without quotes")
		case count && (!r.IsInt() || r.Sign() < 0 || r.Cmp(big.NewRat(math.MaxInt32, 1)) > 0):
			a.add(ptr+"/"+k, fmt.Sprintf("must be a whole number from 0 to %d, not %s", math.MaxInt32, n), "write a whole number")
		default:
			vals[k] = r
		}
	}
	if lo, hi := vals[minK], vals[maxK]; lo != nil && hi != nil && lo.Cmp(hi) > 0 {
		a.add(ptr+"/"+minK, fmt.Sprintf("%s is greater than %s: no value can satisfy both", minK, maxK), fmt.Sprintf("make %s at most %s", minK, maxK))
	}
}

func (a *argChecker) enum(ptr string, e any, typ string, typeOK bool) {
	list, ok := e.([]any)
	switch {
	case !ok:
		a.add(ptr, "must be an array of the allowed values, not "+withArticle(jsonType(e)), `write "enum": ["a", "b"]`)
		return
	case len(list) == 0:
		a.add(ptr, "lists no values: no argument could satisfy it", "list the allowed values, or remove \"enum\"")
		return
	case len(list) > MaxEnum:
		a.add(ptr, fmt.Sprintf("lists %d values; the limit is %d", len(list), MaxEnum), `use a "pattern" or a shorter list`)
		return
	}
	seen := map[string]bool{}
	for i, v := range list {
		vp := fmt.Sprintf("%s/%d", ptr, i)
		if typeOK && !typeMatches(typ, v) {
			a.add(vp, fmt.Sprintf("%s is not of type %q", quoteJSON(v), typ), "make every value match the type, or change the type")
		}
		k := jsonText(v)
		if seen[k] {
			a.add(vp, fmt.Sprintf("%s is listed twice", quoteJSON(v)), "list each value once")
		}
		seen[k] = true
	}
}

// misapplyFix suggests the keyword meant for the type.
func misapplyFix(k, typ string) string {
	swap := map[string]string{"maxLength": "maxItems", "minLength": "minItems", "maxItems": "maxLength", "minItems": "minLength"}
	if alt, ok := swap[k]; ok && slices.Contains(appliesTo[alt], typ) {
		return fmt.Sprintf("use %q for a value of type %q", alt, typ)
	}
	return fmt.Sprintf("remove %q, or change the type to %s", k, strings.Join(appliesTo[k], " or "))
}

// typeMatches reports whether a decoded JSON value has the schema type typ.
func typeMatches(typ string, v any) bool {
	switch typ {
	case "string":
		_, ok := v.(string)
		return ok
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		r, ok := new(big.Rat).SetString(string(n))
		return ok && r.IsInt()
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	}
	return false
}

// jsonType names the JSON type of a decoded value.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number, float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// quoteJSON renders a value for a message, cut to a readable length.
func quoteJSON(v any) string {
	if s, ok := v.(string); ok {
		return quoteShort(s)
	}
	return textutil.ClipRunes(jsonText(v), 60)
}

// schemaErrText is the library's error without its URL noise.
func schemaErrText(err error) string {
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		for len(ve.Causes) > 0 {
			ve = ve.Causes[0]
		}
		return strings.ReplaceAll(ve.Message, "'", `"`)
	}
	msg := err.Error()
	msg = strings.ReplaceAll(msg, "jsonschema ", "")
	return strings.ReplaceAll(msg, "'", `"`)
}

func hasKey(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
