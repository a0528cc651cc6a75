// Package catalog is the core's flat tool catalogue: every tool of every
// healthy plugin and of the core's intrinsics, with its compiled argument
// schema, risk level, owning plugin and group restrictions. Stage 2 of the
// pipeline looks topics up here, stage 3 validates against the schemas
// compiled here (once, at registration), stage 4 consults AllowedGroups,
// and stage 6 calls the tool's Invoker: of a plugin's handler, the
// catalogue holds only the one method a call needs.
package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/carapace-dev/carapace/core/manifest"
	"github.com/carapace-dev/carapace/core/plugin"
)

// Invoker runs calls of a catalogued tool. A plugin's plugin.Handler is
// one; the catalogue asks for nothing else of it, since its lifecycle
// (Init, Shutdown) is the core's business, not the catalogue's.
type Invoker interface {
	Invoke(ctx context.Context, req *plugin.Request) (map[string]any, error)
}

// Tool is one catalogued tool.
type Tool struct {
	Name          string
	Plugin        string // the owning plugin's name, or "core" for intrinsics
	Description   string
	RiskLevel     string
	Schema        *jsonschema.Schema
	RawSchema     json.RawMessage
	AllowedGroups []string // empty: every group
	Handler       Invoker  // serves the tool's calls; nil: the tool cannot be called
	// URLArgs, Untrusted and Egress are the manifest's url_arguments,
	// untrusted_output and egress: the pipeline's provenance and taint
	// rules (docs/SECURITY.md, "Provenance and taint").
	URLArgs   []string
	Untrusted bool
	Egress    bool
	// Preview is the manifest's preview: before a call is put to the
	// user — always, whatever its risk — the pipeline asks the Handler,
	// which must then implement plugin.Previewer, for the call's preview.
	Preview bool
	// HighRiskIf is the manifest's high_risk_if: arguments whose value
	// makes a call of this low-risk tool wait for the user
	// (manifest.RaisesRisk).
	HighRiskIf []string
	// Check, if set, is the tool's own check of a call, after its schema
	// and the group's authorisation and before any confirmation (ctx
	// carries the session, core/session). An error refuses the call: one
	// wrapping ErrNotAllowed as unauthorised (stage 4), any other as
	// invalid arguments (stage 3); its text goes to the agent. The Verdict
	// says what the call will do, in words, where the user confirms it,
	// and may put this one call to the user although the tool's risk is
	// low. Only the core's own tools have one.
	Check func(ctx context.Context, call Call) (Verdict, error)
}

// Call is what a Tool's Check sees of one call.
type Call struct {
	Args map[string]any // valid against the tool's schema
	// Received is when the core received the call. The handler's
	// plugin.Request carries the same instant as Time, so that what the
	// Check shows the user (a schedule's next fires) is what the handler
	// does, however long the user takes to answer.
	Received time.Time
}

// Verdict is a Check's answer for a call it lets through.
type Verdict struct {
	// Summary says what the call will do, in words, where the user
	// confirms it ("" for none).
	Summary string
	// Confirm puts this call to the user, as for a high-risk tool, although
	// the tool's risk is low: what the call would do is the user's to
	// decide (cancel_task on a task the user made). A Check can raise a
	// call's risk this way, never lower it.
	Confirm bool
}

// ErrNotAllowed is what a Tool's Check wraps to refuse a call as
// unauthorised rather than invalid.
var ErrNotAllowed = errors.New("not allowed")

// Allowed reports whether group may use the tool.
func (t *Tool) Allowed(group string) bool {
	if len(t.AllowedGroups) == 0 {
		return true
	}
	for _, g := range t.AllowedGroups {
		if g == group {
			return true
		}
	}
	return false
}

// Catalog is safe for concurrent use.
type Catalog struct {
	mu    sync.RWMutex
	tools map[string]*Tool
}

// New returns an empty catalog.
func New() *Catalog { return &Catalog{tools: map[string]*Tool{}} }

// Add registers tools. A name already taken fails with an error naming both
// owners, and nothing is added.
func (c *Catalog) Add(tools ...*Tool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, t := range tools {
		if old, ok := c.tools[t.Name]; ok {
			return fmt.Errorf("tool %q is declared by both %q and %q; tool names must be unique", t.Name, old.Plugin, t.Plugin)
		}
		for _, u := range tools[:i] {
			if u.Name == t.Name {
				return fmt.Errorf("tool %q is declared twice by %q", t.Name, t.Plugin)
			}
		}
	}
	for _, t := range tools {
		c.tools[t.Name] = t
	}
	return nil
}

// Remove drops every tool of plugin.
func (c *Catalog) Remove(pluginName string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for n, t := range c.tools {
		if t.Plugin == pluginName {
			delete(c.tools, n)
		}
	}
}

// Lookup returns the tool called name, or nil.
func (c *Catalog) Lookup(name string) *Tool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.tools[name]
}

// List returns every tool, sorted by name.
func (c *Catalog) List() []*Tool {
	c.mu.RLock()
	out := make([]*Tool, 0, len(c.tools))
	for _, t := range c.tools {
		out = append(out, t)
	}
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Len returns the number of tools.
func (c *Catalog) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.tools)
}

// FromManifest builds the catalogue entries of one plugin, served by h,
// compiling every argument schema. allowedGroups overrides the manifest's
// list when non-nil.
func FromManifest(pluginName string, m *manifest.Manifest, h Invoker, allowedGroups []string) ([]*Tool, error) {
	groups := m.AllowedGroups
	if allowedGroups != nil {
		groups = allowedGroups
	}
	tools := make([]*Tool, 0, len(m.Provides.Tools))
	for _, mt := range m.Provides.Tools {
		s, err := CompileSchema(pluginName+"/"+mt.Name, mt.ArgumentsSchema)
		if err != nil {
			return nil, fmt.Errorf("plugin %s: tool %s: %w", pluginName, mt.Name, err)
		}
		tools = append(tools, &Tool{
			Name: mt.Name, Plugin: pluginName, Description: mt.Description, RiskLevel: mt.RiskLevel,
			Schema: s, RawSchema: mt.ArgumentsSchema, AllowedGroups: groups, Handler: h,
			URLArgs: mt.URLArguments, Untrusted: mt.UntrustedOutput, Egress: mt.Egress, Preview: mt.Preview, HighRiskIf: mt.HighRiskIf,
		})
	}
	return tools, nil
}

var errNoRemote = errors.New("schemas may not reference external documents")

// CompileSchema compiles an argument schema (JSON Schema 2020-12) with format
// assertions on. External references are refused: a schema can never make
// the core read a file or reach the network.
func CompileSchema(name string, raw json.RawMessage) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.AssertFormat = true
	c.LoadURL = func(string) (io.ReadCloser, error) { return nil, errNoRemote }
	url := "mem://carapace/" + name + ".json"
	if err := c.AddResource(url, bytes.NewReader(raw)); err != nil {
		return nil, fmt.Errorf("arguments_schema: %w", err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("arguments_schema: %w", err)
	}
	return s, nil
}

// Problem is the first reason a value failed a schema, and the argument at fault.
type Problem struct {
	Field   string // dotted path of the argument, e.g. "items[2].due"; "" for the object itself
	Message string
}

// Explain reduces a validation error to its most specific cause.
func Explain(err error) Problem {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return Problem{Message: err.Error()}
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	field := pointerToPath(ve.InstanceLocation)
	msg := ve.Message
	// The property at fault for these keywords is named in the message,
	// not in the instance location (which is the enclosing object).
	for _, k := range []string{"additionalProperties ", "missing properties: "} {
		if strings.HasPrefix(msg, k) {
			if name, ok := firstQuoted(msg); ok {
				if field != "" {
					field += "."
				}
				field += name
			}
		}
	}
	if strings.HasSuffix(ve.KeywordLocation, "/format") {
		// The library quotes the value; arguments never go to the log.
		if i := strings.LastIndex(msg, " is not valid "); i >= 0 {
			msg = "is not a valid " + strings.Trim(msg[i+len(" is not valid "):], "'")
		}
	}
	msg = strings.ReplaceAll(msg, "'", "\"")
	if field != "" && !strings.HasPrefix(ve.KeywordLocation, "/additionalProperties") && !strings.HasPrefix(msg, "additionalProperties") && !strings.HasPrefix(msg, "missing properties") {
		msg = field + ": " + msg
	}
	return Problem{Field: field, Message: msg}
}

func firstQuoted(s string) (string, bool) {
	i := strings.IndexByte(s, '\'')
	if i < 0 {
		return "", false
	}
	j := strings.IndexByte(s[i+1:], '\'')
	if j < 0 {
		return "", false
	}
	return s[i+1 : i+1+j], true
}

// pointerToPath turns "/items/2/due" into "items[2].due".
func pointerToPath(ptr string) string {
	if ptr == "" || ptr == "/" {
		return ""
	}
	var b strings.Builder
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		if _, err := strconv.Atoi(tok); err == nil {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}
