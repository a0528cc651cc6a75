// Package manifest reads and validates a plugin's manifest.json: what the
// plugin provides (tools with their argument schemas and risk levels,
// channels, the memory_brief hook), what it subscribes to, which groups may
// use it, the credentials it needs and the schema of its configuration. The
// plugin's identity is its folder's name, never a field of the manifest.
//
// Validation is strict because a manifest is written by a stranger and read
// by the core, the user and a reviewer, who must all see the same thing:
//
//  1. JSON: UTF-8 without a byte-order mark or NUL bytes, no duplicate keys
//     anywhere, no control characters or bidirectional overrides in
//     strings, nesting at most MaxDepth deep, an object at the top, syntax
//     errors located by line and column.
//  2. The manifest schema (manifest.schema.json, JSON Schema 2020-12,
//     embedded): required fields, types, enums, and no unknown field at any
//     level of the manifest (with a "did you mean" for near misses).
//  3. Tool names: snake_case, at most 64 characters, ASCII, unique, not one
//     of ReservedTools.
//  4. Each arguments_schema: type "object" with "properties", and
//     "additionalProperties": false at every object level; only the
//     supported keywords (no $ref, combinators or conditionals); a single
//     type per property; "items" for arrays; "required" naming declared
//     properties; bounded enums and patterns; formats the validator
//     asserts; defaults the property accepts; at most MaxSchemaDepth levels.
//  5. version is a semantic version; app_compat is a version range that the
//     running core satisfies.
//  6. config_schema compiles (without loading anything) and describes an
//     object.
//
// Every problem names the file, an RFC 6901 pointer into it, what is wrong
// and how to fix it, and all of them are reported (up to MaxProblems), not
// only the first. Check adds the plugin-folder stages of `carapace plugin
// validate`.
//
// The JSON reader (decode.go) is written here, on encoding/json's token
// stream, because encoding/json keeps the last of duplicated keys without a
// word and encoding/json/v2, which refuses them, is still behind a
// GOEXPERIMENT in this toolchain. Schemas are santhosh-tekuri/jsonschema/v5;
// versions and ranges are Masterminds/semver/v3.
package manifest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/carapace-dev/carapace/core/version"
)

// Risk levels of a tool.
const (
	RiskLow  = "low"  // runs at once
	RiskHigh = "high" // waits for the user's confirmation
)

// MaxProblems bounds the problems reported for one file: past it a last
// problem says how many more there are.
const MaxProblems = 500

// maxTools is the schema's maxItems of provides.tools.
const maxTools = 256

// HookMemoryBrief is the hook whose provider writes the memory brief at the
// start of each session. At most one plugin may provide it (CheckHooks).
const HookMemoryBrief = "memory_brief"

// Session modes a manifest may ask for.
const (
	SessionFresh    = "fresh"    // a new agent session for each event
	SessionResume   = "resume"   // continue the group's last session
	SessionExplicit = "explicit" // the plugin's handler chooses the session
)

// Manifest is a plugin's manifest.json.
type Manifest struct {
	Description   string          `json:"description"`
	Version       string          `json:"version"`    // semantic version, e.g. "1.0.0"
	AppCompat     string          `json:"app_compat"` // range of Carapace versions, e.g. ">=0.1.0"
	Author        Author          `json:"author"`
	Provides      Provides        `json:"provides"`
	Subscribes    []string        `json:"subscribes"`               // event topics, e.g. "message.inbound"
	AllowedGroups []string        `json:"allowed_groups,omitempty"` // nil: every group
	Session       string          `json:"session,omitempty"`        // "", SessionFresh, SessionResume or SessionExplicit
	Install       *Install        `json:"install,omitempty"`
	Network       *Network        `json:"network,omitempty"`       // the hosts an out-of-process handler may reach; nil: none
	Filesystem    []PathGrant     `json:"filesystem,omitempty"`    // folders the user may grant it in its config
	ConfigSchema  json.RawMessage `json:"config_schema,omitempty"` // JSON Schema of [plugins.NAME.config]

	configSchema *jsonschema.Schema // ConfigSchema compiled by Parse
}

// Author names who wrote the plugin.
type Author struct {
	Name string `json:"name"`
	URL  string `json:"url,omitempty"` // http or https
}

// Provides lists the plugin's channels, tools and hooks.
type Provides struct {
	Channels []string `json:"channels"`
	Tools    []Tool   `json:"tools"`
	Hooks    []string `json:"hooks,omitempty"` // only HookMemoryBrief exists
	// Capabilities are powers beyond tools that the plugin asks for; the
	// user grants each in config.toml. The only one is CapabilitySurface.
	Capabilities []string `json:"capabilities,omitempty"`
}

// CapabilitySurface: the plugin is a way for the user to reach the core (a
// chat app): it is given the confirmation.* events and may decide them,
// read the core's status, pause and resume it, and stop the sessions its
// own events started. Granted with [plugins.NAME] surface = true.
const CapabilitySurface = "surface"

// HasCapability reports whether the plugin asks for capability.
func (m *Manifest) HasCapability(capability string) bool {
	return m != nil && slices.Contains(m.Provides.Capabilities, capability)
}

// Tool declares one tool.
type Tool struct {
	Name            string          `json:"name"`
	Description     string          `json:"description"`
	RiskLevel       string          `json:"risk_level"`       // RiskLow or RiskHigh
	ArgumentsSchema json.RawMessage `json:"arguments_schema"` // JSON Schema of the arguments
	// URLArguments name the top-level string arguments that hold a URL.
	// The core runs a call at once only when each of them is a URL the
	// session was given (the user's words, an earlier result); any other
	// waits for the user (docs/SECURITY.md, "Provenance and taint").
	URLArguments []string `json:"url_arguments,omitempty"`
	// HighRiskIf name top-level arguments that make a call of a low-risk
	// tool high-risk when the call gives them a value (anything but
	// false, null, "", [] or {}): an event with attendees is an
	// invitation mailed to them. The call then waits for the user as a
	// high-risk tool's would (RaisesRisk).
	HighRiskIf []string `json:"high_risk_if,omitempty"`
	// UntrustedOutput says the tool's results carry content from outside
	// (a web page, a mail): a session that receives one is tainted, and
	// its egress calls wait for the user.
	UntrustedOutput bool `json:"untrusted_output,omitempty"`
	// Egress says a call sends data out of the machine (a message, a
	// request to a URL): in a tainted session it waits for the user.
	Egress bool `json:"egress,omitempty"`
	// Preview says what a call will do is not all in its arguments (a
	// mail_send {draft_id} whose draft lives on a server): before the
	// user is asked, the core asks the handler for the call's preview
	// (plugin.Previewer), shows its text whole above the arguments, and
	// binds the approval to its digest, which the handler gets back with
	// the call (plugin.Request.PreviewDigest) and must check. Such a tool
	// always waits for the user, whatever its risk level
	// (docs/PLUGINS.md, "Previews").
	Preview bool `json:"preview,omitempty"`
}

// Network declares what an out-of-process handler may reach, through its
// egress point in the core (docs/PLUGINS.md#network). A plugin without it
// has no network at all.
type Network struct {
	// Hosts are "host:port" the handler may connect to over TCP; the host
	// is a DNS name or an IP address (IPv6 in brackets).
	Hosts []string `json:"hosts,omitempty"`
	// HostsFromConfig name keys of the plugin's config whose values (a URL
	// or host:port) are hosts it may reach: "api_url", "accounts.*.imap"
	// (* for every element of an array or member of an object).
	HostsFromConfig []string `json:"hosts_from_config,omitempty"`
	// Public: any public address (a plugin whose job is the open web).
	// Loopback, private, link-local, metadata and the other special ranges
	// stay refused, by the address dialled.
	Public bool `json:"public,omitempty"`
}

// PathGrant is a folder the user may grant a plugin by setting a key of its
// config to the folder's path; read-only unless Write.
type PathGrant struct {
	Config      string `json:"config"`      // a top-level key of [plugins.NAME.config]
	Description string `json:"description"` // why the plugin needs it
	Write       bool   `json:"write,omitempty"`
}

// Install is what installing the plugin asks of the user.
type Install struct {
	Credentials []Credential `json:"credentials,omitempty"`
}

// Credential is one secret the plugin reads with ReadCredential, set with
// `carapace auth set --plugin NAME --key KEY`.
type Credential struct {
	Key         string `json:"key"` // a simple file name: ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$
	Description string `json:"description"`
	Required    bool   `json:"required,omitempty"` // the plugin cannot start without it
}

// Credentials returns the credentials the plugin declares (install.credentials).
func (m *Manifest) Credentials() []Credential {
	if m == nil || m.Install == nil {
		return nil
	}
	return slices.Clone(m.Install.Credentials)
}

// HasHook reports whether the plugin provides hook.
func (m *Manifest) HasHook(hook string) bool {
	return m != nil && slices.Contains(m.Provides.Hooks, hook)
}

// Options are what validation needs to know about the running core.
type Options struct {
	// AppVersion is the running core's version, checked against
	// app_compat after version.Semver ("" and "dev" mean version.Base).
	AppVersion string
}

// Problem is one thing wrong with a plugin, located precisely.
type Problem struct {
	File    string // the file, e.g. "/home/u/.carapace/plugins/mail/manifest.json"
	Pointer string // RFC 6901 JSON pointer into it, e.g. "/provides/tools/0/arguments_schema/properties/to"; "" for the whole file
	Message string // what is wrong
	Fix     string // how to fix it, imperative
	Warning bool   // a warning does not fail validation
}

// String formats the problem as "<file>: <pointer>: <message>. Fix: <fix>",
// prefixed with "warning: " for a warning.
func (p Problem) String() string {
	var b strings.Builder
	if p.Warning {
		b.WriteString("warning: ")
	}
	b.WriteString(p.File)
	if p.Pointer != "" {
		b.WriteString(": ")
		b.WriteString(p.Pointer)
	}
	b.WriteString(": ")
	b.WriteString(strings.TrimSuffix(p.Message, "."))
	if p.Fix != "" {
		b.WriteString(". Fix: ")
		b.WriteString(p.Fix)
	}
	return b.String()
}

// Error is every error (not warning) found in a manifest or a config.
type Error struct {
	Problems []Problem
}

// Error lists the problems, one per line.
func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Parse decodes and validates a manifest; file names it in problems. The
// error is an *Error listing every problem found.
func Parse(file string, data []byte, opts Options) (*Manifest, error) {
	_, m, probs := parse(file, data, opts)
	if errs := errorsOnly(probs); len(errs) > 0 {
		return nil, &Error{Problems: errs}
	}
	return m, nil
}

// parse returns the decoded tree (nil when unreadable), the manifest (nil
// unless there is no error) and every problem, warnings included.
func parse(file string, data []byte, opts Options) (map[string]any, *Manifest, []Problem) {
	v, probs, fatal := decodeStrict(file, data)
	if fatal {
		return nil, nil, probs
	}
	tree, ok := v.(map[string]any)
	if !ok {
		probs = append(probs, Problem{File: file, Message: "the manifest must be a JSON object, not " + withArticle(jsonType(v)), Fix: `write the manifest as {"description": ..., "version": ..., ...}`})
		return nil, nil, probs
	}
	ms, err := metaSchema()
	if err != nil {
		// Only a broken build gets here; the tests compile the schema.
		probs = append(probs, Problem{File: file, Message: "internal error: the manifest schema does not compile: " + err.Error(), Fix: "report this bug"})
		return tree, nil, probs
	}
	if err := ms.schema.Validate(any(tree)); err != nil {
		probs = append(probs, schemaErrors{file: file, inst: tree, sch: ms}.problems(err)...)
	}
	probs = append(probs, checkTools(file, tree)...)
	probs = append(probs, checkVersions(file, tree, opts)...)
	cs, csProbs := checkConfigSchema(file, tree)
	probs = append(probs, csProbs...)
	probs = append(probs, checkCredentials(file, tree)...)
	probs = append(probs, checkNetwork(file, tree)...)
	sortProblems(probs)
	if n := len(probs); n > MaxProblems {
		probs = append(probs[:MaxProblems:MaxProblems], Problem{File: file, Message: fmt.Sprintf("and %d more problems", n-MaxProblems), Fix: "fix the problems above first"})
	}
	if len(errorsOnly(probs)) > 0 {
		return tree, nil, probs
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		// The schema admits only what Manifest holds; this is a bug.
		probs = append(probs, Problem{File: file, Message: "internal error: " + err.Error(), Fix: "report this bug"})
		return tree, nil, probs
	}
	m.configSchema = cs
	return tree, &m, probs
}

// checkTools applies the tool rules: names, uniqueness, descriptions,
// arguments_schema.
func checkTools(file string, tree map[string]any) []Problem {
	var probs []Problem
	add := func(ptr, msg, fix string) {
		probs = append(probs, Problem{File: file, Pointer: ptr, Message: msg, Fix: fix})
	}
	tools, _ := lookupArray(tree, "/provides/tools")
	if len(tools) > maxTools {
		tools = tools[:maxTools] // the schema reports the rest
	}
	first := map[string]int{}
	for i, t := range tools {
		tool, ok := t.(map[string]any)
		if !ok {
			continue
		}
		ptr := "/provides/tools/" + strconv.Itoa(i)
		if name, ok := tool["name"].(string); ok {
			if msg, fix := toolNameIssue(name); msg != "" {
				add(ptr+"/name", msg, fix)
			} else if slices.Contains(ReservedTools, name) {
				add(ptr+"/name", fmt.Sprintf("tool name %q is reserved for a core intrinsic tool", name),
					fmt.Sprintf("choose another name, prefixed with your plugin's domain (for example \"myplugin_%s\")", name))
			}
			if j, dup := first[name]; dup {
				add(ptr+"/name", fmt.Sprintf("tool %q is declared twice (first at /provides/tools/%d)", name, j), "rename or remove one of them: tool names are unique")
			} else {
				first[name] = i
			}
		}
		if d, ok := tool["description"].(string); ok && d != "" && strings.TrimSpace(d) == "" {
			add(ptr+"/description", "is only white space", "say what the tool does (the agent reads it)")
		}
		if as, ok := tool["arguments_schema"].(map[string]any); ok {
			probs = append(probs, checkArguments(file, ptr+"/arguments_schema", as)...)
		}
		probs = append(probs, checkArgumentNames(file, ptr, "url_arguments", tool)...)
		probs = append(probs, checkArgumentNames(file, ptr, "high_risk_if", tool)...)
	}
	return probs
}

// checkVersions checks version and app_compat.
func checkVersions(file string, tree map[string]any, opts Options) []Problem {
	var probs []Problem
	if v, ok := tree["version"].(string); ok && len(v) <= 128 {
		if _, err := semver.StrictNewVersion(v); err != nil {
			probs = append(probs, Problem{File: file, Pointer: "/version", Message: fmt.Sprintf("%s is not a semantic version", quoteShort(v)),
				Fix: `write MAJOR.MINOR.PATCH, such as "1.0.0" (no "v" prefix; a pre-release such as "1.0.0-beta.1" is allowed)`})
		}
	}
	ac, ok := tree["app_compat"].(string)
	if !ok || ac == "" || len(ac) > 256 {
		return probs // the schema reports it
	}
	c, err := semver.NewConstraint(ac)
	if err != nil {
		return append(probs, Problem{File: file, Pointer: "/app_compat", Message: fmt.Sprintf("%s is not a version range", quoteShort(ac)),
			Fix: `write a range such as ">=0.1.0" or ">=0.1.0, <1.0.0"`})
	}
	app := version.Semver(opts.AppVersion)
	v, err := semver.NewVersion(app)
	if err == nil && !c.Check(v) {
		probs = append(probs, Problem{File: file, Pointer: "/app_compat", Message: fmt.Sprintf("requires Carapace %s; this is %s", ac, app),
			Fix: "upgrade Carapace, or use a version of the plugin made for Carapace " + app})
	}
	return probs
}

// checkCredentials refuses a credential key declared twice.
func checkCredentials(file string, tree map[string]any) []Problem {
	var probs []Problem
	creds, _ := lookupArray(tree, "/install/credentials")
	first := map[string]int{}
	for i, c := range creds {
		co, _ := c.(map[string]any)
		key, ok := co["key"].(string)
		if !ok {
			continue
		}
		if j, dup := first[key]; dup {
			probs = append(probs, Problem{File: file, Pointer: fmt.Sprintf("/install/credentials/%d/key", i),
				Message: fmt.Sprintf("credential %q is declared twice (first at /install/credentials/%d)", key, j), Fix: "declare each credential once"})
		} else {
			first[key] = i
		}
	}
	return probs
}

// checkNetwork checks each declared host: a port from 1 to 65535, and an
// address that parses where the host is one.
func checkNetwork(file string, tree map[string]any) []Problem {
	var probs []Problem
	hosts, _ := lookupArray(tree, "/network/hosts")
	for i, h := range hosts {
		hs, ok := h.(string)
		if !ok {
			continue
		}
		if _, _, err := SplitHost(hs); err != nil {
			probs = append(probs, Problem{File: file, Pointer: fmt.Sprintf("/network/hosts/%d", i),
				Message: err.Error(), Fix: `write host:port with a port from 1 to 65535, such as "api.example.com:443"`})
		}
	}
	return probs
}

// SplitHost splits a declared "host:port" and checks it: a port from 1 to
// 65535, a host that is a DNS name or an IP address (IPv6 in brackets).
// The host is returned lower-cased, without brackets.
func SplitHost(hostport string) (host string, port uint16, err error) {
	h, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", 0, fmt.Errorf("%s is not host:port", quoteShort(hostport))
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return "", 0, fmt.Errorf("%s: the port must be a number from 1 to 65535", quoteShort(hostport))
	}
	if strings.HasPrefix(hostport, "[") {
		if a, err := netip.ParseAddr(h); err != nil || !a.Is6() {
			return "", 0, fmt.Errorf("%s: %s in brackets is not an IPv6 address", quoteShort(hostport), quoteShort(h))
		}
	} else if strings.Contains(h, ":") || h == "" || len(h) > 253 || strings.ContainsAny(h, "/@?#% ") {
		return "", 0, fmt.Errorf("%s: %s is not a host name or address", quoteShort(hostport), quoteShort(h))
	}
	return strings.ToLower(h), uint16(n), nil
}

func lookupArray(tree any, ptr string) ([]any, bool) {
	v, ok := lookup(tree, ptr)
	if !ok {
		return nil, false
	}
	a, ok := v.([]any)
	return a, ok
}

func errorsOnly(probs []Problem) []Problem {
	var out []Problem
	for _, p := range probs {
		if !p.Warning {
			out = append(out, p)
		}
	}
	return out
}

// sortProblems orders problems by file, then pointer (array indexes
// numerically), keeping the order of problems at the same place.
func sortProblems(probs []Problem) {
	slices.SortStableFunc(probs, func(a, b Problem) int {
		if c := strings.Compare(a.File, b.File); c != 0 {
			return c
		}
		return comparePointers(a.Pointer, b.Pointer)
	})
}

func comparePointers(a, b string) int {
	ta, tb := strings.Split(a, "/"), strings.Split(b, "/")
	for i := 0; i < len(ta) && i < len(tb); i++ {
		x, y := ta[i], tb[i]
		if x == y {
			continue
		}
		if isIndex(x) && isIndex(y) {
			if c := cmp.Compare(len(x), len(y)); c != 0 {
				return c
			}
		}
		return strings.Compare(x, y)
	}
	return cmp.Compare(len(ta), len(tb))
}

func isIndex(s string) bool {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// RaisesRisk reports whether a call with args gives one of the tool's
// high_risk_if arguments a value: anything but absent, null, false, "",
// an empty array or an empty object.
func (t *Tool) RaisesRisk(args map[string]any) bool {
	return RaisesRisk(t.HighRiskIf, args)
}

// RaisesRisk reports whether args gives one of names a value (see
// Tool.RaisesRisk).
func RaisesRisk(names []string, args map[string]any) bool {
	for _, n := range names {
		switch v := args[n].(type) {
		case nil:
		case bool:
			if v {
				return true
			}
		case string:
			if v != "" {
				return true
			}
		case []any:
			if len(v) > 0 {
				return true
			}
		case map[string]any:
			if len(v) > 0 {
				return true
			}
		default: // a number, or anything else: given
			return true
		}
	}
	return false
}

// checkArgumentNames checks that each name in a tool's key (url_arguments,
// high_risk_if) is a top-level property of its arguments_schema, and for
// url_arguments one whose type is string: the core reads those arguments
// by name, and one it could not find would silently leave a URL unchecked
// or a risk unraised.
func checkArgumentNames(file, ptr, key string, tool map[string]any) []Problem {
	names, _ := tool[key].([]any)
	if len(names) == 0 {
		return nil
	}
	props := map[string]any{}
	if as, ok := tool["arguments_schema"].(map[string]any); ok {
		props, _ = as["properties"].(map[string]any)
	}
	wantString := key == "url_arguments"
	var probs []Problem
	for i, n := range names {
		name, ok := n.(string)
		if !ok {
			continue // the schema reports it
		}
		p, found := props[name].(map[string]any)
		typ, _ := p["type"].(string)
		switch {
		case wantString && typ != "string":
			probs = append(probs, Problem{File: file, Pointer: ptr + "/" + key + "/" + strconv.Itoa(i),
				Message: fmt.Sprintf("%s is not a top-level string property of arguments_schema", quoteShort(name)),
				Fix:     "name a property declared in arguments_schema.properties with \"type\": \"string\""})
		case !found:
			probs = append(probs, Problem{File: file, Pointer: ptr + "/" + key + "/" + strconv.Itoa(i),
				Message: fmt.Sprintf("%s is not a top-level property of arguments_schema", quoteShort(name)),
				Fix:     "name a property declared in arguments_schema.properties"})
		}
	}
	return probs
}
