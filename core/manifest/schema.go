package manifest

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/carapace-dev/carapace/internal/textutil"
)

// metaSchemaJSON is the JSON Schema (Draft 2020-12) of manifest.json itself.
//
//go:embed manifest.schema.json
var metaSchemaJSON []byte

const metaSchemaURL = "mem://carapace/manifest.schema.json"

// errNoRemote refuses every external document a schema refers to.
var errNoRemote = errors.New("schemas may not reference external documents")

// remoteError is the refusal to load one document.
type remoteError struct{ url string }

func (e *remoteError) Error() string { return e.url + ": " + errNoRemote.Error() }
func (e *remoteError) Unwrap() error { return errNoRemote }

// metaSchema is the compiled manifest schema and its decoded document (read
// for the fixes, examples and field lists of the messages).
var metaSchema = sync.OnceValues(func() (*compiledSchema, error) {
	doc, probs, fatal := decodeStrict("manifest.schema.json", metaSchemaJSON)
	if fatal || len(probs) > 0 {
		return nil, fmt.Errorf("manifest.schema.json: %v", (&Error{Problems: probs}).Error())
	}
	s, err := compileSchema(metaSchemaURL, metaSchemaJSON)
	if err != nil {
		return nil, err
	}
	return &compiledSchema{schema: s, doc: doc, url: metaSchemaURL}, nil
})

// compiledSchema is a compiled schema with its source document.
type compiledSchema struct {
	schema *jsonschema.Schema
	doc    any
	url    string
}

// newCompiler returns a Draft 2020-12 compiler that asserts formats and
// never loads anything: a schema can make the core read neither a file nor
// the network.
func newCompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.AssertFormat = true
	c.LoadURL = func(u string) (io.ReadCloser, error) { return nil, &remoteError{url: u} }
	return c
}

// compileSchema compiles one self-contained schema document.
func compileSchema(url string, raw []byte) (*jsonschema.Schema, error) {
	c := newCompiler()
	if err := c.AddResource(url, bytes.NewReader(raw)); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// schemaErrors turns a validation error of the schema library into
// problems: one per failed keyword (not only the first), located by RFC 6901
// pointer into the instance, in words a plugin author or user acts on.
type schemaErrors struct {
	file   string
	base   string // pointer of the instance within the file
	inst   any    // the validated instance
	sch    *compiledSchema
	config bool // the instance is a plugin's config: say "setting", never echo values
}

func (c schemaErrors) problems(err error) []Problem {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []Problem{{File: c.file, Pointer: c.base, Message: err.Error(), Fix: "correct the value"}}
	}
	var ls []*jsonschema.ValidationError
	collectLeaves(ve, &ls)
	var out []Problem
	seen := map[string]bool{}
	for _, l := range ls {
		for _, p := range c.leaf(l) {
			k := p.Pointer + "\x00" + p.Message
			if !seen[k] {
				seen[k] = true
				out = append(out, p)
			}
		}
	}
	return out
}

// collectLeaves gathers the most specific failures. The causes of a failed
// anyOf/oneOf/if/contains are alternatives, not separate faults: the
// combinator itself is reported.
func collectLeaves(ve *jsonschema.ValidationError, out *[]*jsonschema.ValidationError) {
	switch lastToken(ve.KeywordLocation) {
	case "anyOf", "oneOf", "then", "else", "not", "contains", "minContains":
		*out = append(*out, ve)
		return
	}
	if len(ve.Causes) == 0 {
		if ve.Message != "" {
			*out = append(*out, ve)
		}
		return
	}
	for _, c := range ve.Causes {
		collectLeaves(c, out)
	}
}

// leaf words one failed keyword.
func (c schemaErrors) leaf(ve *jsonschema.ValidationError) []Problem {
	ptr := c.base + libPointer(ve.InstanceLocation)
	inst, _ := lookup(c.inst, libPointer(ve.InstanceLocation))
	kw := lastToken(ve.KeywordLocation)
	node := c.schemaNode(ve.AbsoluteKeywordLocation)
	what := "field"
	if c.config {
		what = "setting"
	}
	fix, _ := node["x-fix"].(string)
	msg := strings.ReplaceAll(ve.Message, "'", `"`)
	one := func(msg, defFix string) []Problem {
		if fix == "" {
			fix = defFix
		}
		return []Problem{{File: c.file, Pointer: ptr, Message: msg, Fix: fix}}
	}
	generic := func() []Problem {
		if c.config {
			// The library quotes the value for some keywords; a setting
			// may be a secret, so only the keyword is named.
			return one(fmt.Sprintf("does not satisfy %q of the config_schema", kw), fmt.Sprintf("change the setting to satisfy %q in the plugin's config_schema", kw))
		}
		return one(msg, "correct the value")
	}
	if node == nil && !slices.Contains([]string{"required", "additionalProperties", "type", "anyOf", "oneOf"}, kw) {
		return generic()
	}
	switch kw {
	case "required":
		var out []Problem
		for _, name := range c.missing(ve, node, inst) {
			f := fmt.Sprintf("add %q", name)
			if c.config {
				f = fmt.Sprintf("set %q in the plugin's config", name)
			} else if ex := example(node, name); ex != "" {
				f = fmt.Sprintf("add %q: %s", name, ex)
			}
			out = append(out, Problem{File: c.file, Pointer: ptr + "/" + escapeToken(name), Message: fmt.Sprintf("required %s %q is missing", what, name), Fix: f})
		}
		return out
	case "additionalProperties":
		var out []Problem
		allowed := sortedKeys(node["properties"])
		names := c.extra(ve, node, inst)
		if len(names) > MaxProblems {
			out = append(out, Problem{File: c.file, Pointer: ptr, Message: fmt.Sprintf("holds %d unknown %ss", len(names), what),
				Fix: fmt.Sprintf("remove them; the %ss allowed here are: %s", what, strings.Join(allowed, ", "))})
			names = names[:MaxProblems]
		}
		for _, name := range names {
			f := ""
			switch {
			case !c.config && ptr == c.base && (name == "name" || name == "id"):
				f = "remove it: a plugin's name is the name of its folder, chosen by whoever installs it"
			case nearest(name, allowed) != "":
				f = fmt.Sprintf("did you mean %q? Rename it", nearest(name, allowed))
			case len(allowed) > 0:
				f = fmt.Sprintf("remove it; the %ss allowed here are: %s", what, strings.Join(allowed, ", "))
			default:
				f = "remove it: nothing may be added here"
			}
			out = append(out, Problem{File: c.file, Pointer: ptr + "/" + escapeToken(name), Message: fmt.Sprintf("unknown %s %q", what, name), Fix: f})
		}
		return out
	case "type":
		if want, got, ok := strings.Cut(strings.TrimPrefix(ve.Message, "expected "), ", but got "); ok {
			return one(fmt.Sprintf("must be %s, not %s", withArticle(want), withArticle(got)), "write "+withArticle(want))
		}
	case "enum":
		vals := jsonList(node["enum"])
		m := "is not one of " + vals
		if s, ok := inst.(string); ok && !c.config {
			m = fmt.Sprintf("%s is not one of %s", quoteShort(s), vals)
		}
		return one(m, "use one of "+vals)
	case "pattern":
		p, _ := node["pattern"].(string)
		m := "does not match the pattern " + p
		if s, ok := inst.(string); ok && !c.config {
			m = fmt.Sprintf("%s does not match the pattern %s", quoteShort(s), p)
		}
		return one(m, "change it to match "+p)
	case "format":
		f, _ := node["format"].(string)
		return one(fmt.Sprintf("is not a valid %s", f), "write a valid "+f)
	case "minLength":
		if s, ok := inst.(string); ok && s == "" {
			return one("must not be empty", "fill it in")
		}
		return one(fmt.Sprintf("is shorter than %v characters", node["minLength"]), fmt.Sprintf("make it at least %v characters long", node["minLength"]))
	case "maxLength":
		return one(fmt.Sprintf("is longer than %v characters", node["maxLength"]), fmt.Sprintf("shorten it to at most %v characters", node["maxLength"]))
	case "minItems":
		return one(fmt.Sprintf("must list at least %s", items(node["minItems"])), fmt.Sprintf("list at least %s", items(node["minItems"])))
	case "maxItems":
		return one(fmt.Sprintf("lists more than %s", items(node["maxItems"])), fmt.Sprintf("list at most %s", items(node["maxItems"])))
	case "anyOf", "oneOf":
		var alts []string
		for _, cause := range ve.Causes {
			var ls []*jsonschema.ValidationError
			collectLeaves(cause, &ls)
			for _, l := range ls {
				alts = append(alts, strings.ReplaceAll(l.Message, "'", `"`))
			}
		}
		if len(alts) > 0 && !c.config {
			return one("matches none of the allowed forms: "+strings.Join(alts, "; or "), "correct the value")
		}
	case "uniqueItems":
		return one("lists the same value twice ("+msg+")", "list each value once")
	case "const":
		return one("must be "+jsonText(node["const"]), "set it to "+jsonText(node["const"]))
	case "minimum":
		return one(fmt.Sprintf("is less than the minimum %s", jsonText(node["minimum"])), "use a larger value")
	case "maximum":
		return one(fmt.Sprintf("is greater than the maximum %s", jsonText(node["maximum"])), "use a smaller value")
	case "exclusiveMinimum":
		return one(fmt.Sprintf("must be greater than %s", jsonText(node["exclusiveMinimum"])), "use a larger value")
	case "exclusiveMaximum":
		return one(fmt.Sprintf("must be less than %s", jsonText(node["exclusiveMaximum"])), "use a smaller value")
	}
	return generic()
}

// schemaNode is the schema object holding the failed keyword, when it is in
// the document c.sch describes.
func (c schemaErrors) schemaNode(abs string) map[string]any {
	if c.sch == nil {
		return nil
	}
	u, frag, _ := strings.Cut(abs, "#")
	if u != c.sch.url {
		return nil
	}
	toks := strings.Split(frag, "/")
	if len(toks) > 0 {
		toks = toks[:len(toks)-1]
	}
	v, _ := lookup(c.sch.doc, libPointer(strings.Join(toks, "/")))
	m, _ := v.(map[string]any)
	return m
}

// missing lists the required properties absent from inst.
func (c schemaErrors) missing(ve *jsonschema.ValidationError, node map[string]any, inst any) []string {
	obj, _ := inst.(map[string]any)
	if req, ok := node["required"].([]any); ok && obj != nil {
		var out []string
		for _, r := range req {
			if s, ok := r.(string); ok {
				if _, has := obj[s]; !has {
					out = append(out, s)
				}
			}
		}
		return out
	}
	return quotedNames(strings.TrimPrefix(ve.Message, "missing properties: "))
}

// extra lists the properties of inst that the schema does not declare.
func (c schemaErrors) extra(ve *jsonschema.ValidationError, node map[string]any, inst any) []string {
	obj, _ := inst.(map[string]any)
	if node == nil || obj == nil {
		m := strings.TrimSuffix(strings.TrimPrefix(ve.Message, "additionalProperties "), " not allowed")
		return quotedNames(m)
	}
	props, _ := node["properties"].(map[string]any)
	var pats []*regexp.Regexp
	if pp, ok := node["patternProperties"].(map[string]any); ok {
		for p := range pp {
			if re, err := regexp.Compile(p); err == nil {
				pats = append(pats, re)
			}
		}
	}
	var out []string
	for k := range obj {
		if _, ok := props[k]; ok {
			continue
		}
		if slices.ContainsFunc(pats, func(re *regexp.Regexp) bool { return re.MatchString(k) }) {
			continue
		}
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// libPointer turns the library's locations (tokens also URL-path-escaped)
// into RFC 6901 pointers.
func libPointer(loc string) string {
	if loc == "" || loc == "/" {
		return ""
	}
	toks := strings.Split(strings.TrimPrefix(loc, "/"), "/")
	for i, t := range toks {
		if u, err := url.PathUnescape(t); err == nil {
			toks[i] = u
		}
	}
	return "/" + strings.Join(toks, "/")
}

func lastToken(loc string) string {
	if i := strings.LastIndexByte(loc, '/'); i >= 0 {
		return loc[i+1:]
	}
	return loc
}

// quotedNames parses the library's list of single-quoted names.
func quotedNames(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ", ") {
		out = append(out, strings.Trim(part, "'"))
	}
	return out
}

// example is the compact JSON of the first example of property name.
func example(node map[string]any, name string) string {
	props, _ := node["properties"].(map[string]any)
	p, _ := props[name].(map[string]any)
	ex, _ := p["examples"].([]any)
	if len(ex) == 0 {
		return ""
	}
	return jsonText(ex[0])
}

// jsonText is the compact JSON of v, without HTML escapes.
func jsonText(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// jsonList renders enum values as `"a", "b" or "c"`.
func jsonList(v any) string {
	vals, _ := v.([]any)
	parts := make([]string, len(vals))
	for i, x := range vals {
		parts[i] = jsonText(x)
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
}

func sortedKeys(v any) []string {
	m, _ := v.(map[string]any)
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// items says "1 item" or "N items".
func items(n any) string {
	if fmt.Sprint(n) == "1" {
		return "1 item"
	}
	return fmt.Sprintf("%v items", n)
}

// withArticle turns "string" into "a string", "object" into "an object";
// "string or null" into "a string or null".
func withArticle(t string) string {
	if t == "" {
		return t
	}
	switch t[0] {
	case 'a', 'e', 'i', 'o', 'u':
		return "an " + t
	}
	if t == "null" {
		return t
	}
	return "a " + t
}

// quoteShort quotes a value for a message, cut to a readable length.
func quoteShort(s string) string {
	return fmt.Sprintf("%q", textutil.ClipRunes(s, 60))
}
