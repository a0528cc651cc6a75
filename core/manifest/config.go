package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

const configSchemaURL = "mem://carapace/config_schema.json"

// checkConfigSchema compiles config_schema, refusing references to anything
// outside it, and requires it to describe an object. A schema that accepts
// undeclared settings gets a warning: a misspelt setting would be ignored.
func checkConfigSchema(file string, tree map[string]any) (*jsonschema.Schema, []Problem) {
	cs, ok := tree["config_schema"].(map[string]any)
	if !ok {
		return nil, nil
	}
	if p := tooBig(file, "/config_schema", cs); p != nil {
		return nil, p
	}
	var probs []Problem
	add := func(ptr, msg, fix string, warn bool) {
		probs = append(probs, Problem{File: file, Pointer: ptr, Message: msg, Fix: fix, Warning: warn})
	}
	switch t, present := cs["type"]; {
	case !present:
		add("/config_schema/type", `"type" is missing`, `add "type": "object": the config is a table of settings`, false)
	case t != "object":
		add("/config_schema/type", fmt.Sprintf(`must be "object", not %s`, quoteJSON(t)), `set "type": "object": the config is a table of settings`, false)
	}
	if ap, present := cs["additionalProperties"]; !present || ap != false {
		add("/config_schema", "settings not declared in config_schema are accepted (a misspelt setting would be ignored silently)",
			`add "additionalProperties": false`, true)
	}
	raw, err := json.Marshal(cs)
	if err != nil {
		add("/config_schema", "cannot be encoded: "+err.Error(), "correct the schema", false)
		return nil, probs
	}
	s, err := compileSchema(configSchemaURL, raw)
	if err != nil {
		var ve *jsonschema.ValidationError
		var re *remoteError
		switch {
		case errors.As(err, &re):
			add("/config_schema", fmt.Sprintf("refers to a document outside itself (%s)", re.url),
				`remove the reference ("$ref", "$schema" or "$id" naming another document): a config_schema must be self-contained`, false)
		case errors.As(err, &ve):
			// The schema breaks the JSON Schema meta-schema: locate it.
			for _, p := range (schemaErrors{file: file, base: "/config_schema", inst: cs}).problems(ve) {
				p.Message = "is not valid JSON Schema: " + p.Message
				p.Fix = "correct the schema (JSON Schema 2020-12)"
				probs = append(probs, p)
			}
		default:
			add("/config_schema", "does not compile as a JSON Schema: "+schemaErrText(err), "correct the schema (JSON Schema 2020-12)", false)
		}
		return nil, probs
	}
	return s, probs
}

// ValidateConfig checks a plugin's configuration (config.toml's
// [plugins.NAME.config], decoded) against the manifest's config_schema. A
// plugin without a config_schema takes no configuration. file names the
// config file in problems, whose pointers point into config. The error is an
// *Error. Setting values never appear in messages: a user may have put a
// secret in one.
func (m *Manifest) ValidateConfig(file string, config map[string]any) error {
	if m == nil || len(m.ConfigSchema) == 0 {
		if len(config) == 0 {
			return nil
		}
		keys := make([]string, 0, len(config))
		for k := range config {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var probs []Problem
		for _, k := range keys {
			probs = append(probs, Problem{File: file, Pointer: "/" + escapeToken(k),
				Message: fmt.Sprintf("unknown setting %q: the plugin's manifest declares no config_schema, so it takes no configuration", k),
				Fix:     "remove the setting from the plugin's config"})
		}
		return &Error{Problems: probs}
	}
	s := m.configSchema
	if s == nil {
		var err error
		if s, err = compileSchema(configSchemaURL, m.ConfigSchema); err != nil {
			return &Error{Problems: []Problem{{File: file, Message: "the plugin's config_schema does not compile: " + schemaErrText(err), Fix: "correct the plugin's manifest"}}}
		}
	}
	if config == nil {
		config = map[string]any{}
	}
	// Through JSON, so that TOML's int64, float64, time.Time and arrays of
	// tables become the types the validator knows.
	raw, err := json.Marshal(config)
	if err != nil {
		return &Error{Problems: []Problem{{File: file, Message: "the config cannot be represented as JSON (" + scrubJSONErr(err) + ")", Fix: "remove values such as nan or inf"}}}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var inst any
	if err := dec.Decode(&inst); err != nil {
		return &Error{Problems: []Problem{{File: file, Message: "the config cannot be represented as JSON", Fix: "correct the config"}}}
	}
	if err := s.Validate(inst); err != nil {
		var doc any
		if d, probs, fatal := decodeStrict("config_schema", m.ConfigSchema); !fatal && len(probs) == 0 {
			doc = d
		}
		probs := schemaErrors{file: file, inst: inst, sch: &compiledSchema{schema: s, doc: doc, url: configSchemaURL}, config: true}.problems(err)
		sortProblems(probs)
		return &Error{Problems: probs}
	}
	return nil
}

// scrubJSONErr keeps the kind of a marshalling error without the value.
func scrubJSONErr(err error) string {
	var ue *json.UnsupportedValueError
	if errors.As(err, &ue) {
		return "unsupported value"
	}
	var te *json.UnsupportedTypeError
	if errors.As(err, &te) {
		return "unsupported type " + te.Type.String()
	}
	return "unsupported value"
}

// CheckHooks refuses two plugins providing the same hook: at most one plugin
// may provide memory_brief. manifests maps plugin names to their manifests;
// the error (an *Error) names every plugin involved.
func CheckHooks(manifests map[string]*Manifest) error {
	names := make([]string, 0, len(manifests))
	for n := range manifests {
		names = append(names, n)
	}
	sort.Strings(names)
	providers := map[string][]string{}
	var hooks []string
	for _, n := range names {
		m := manifests[n]
		if m == nil {
			continue
		}
		for _, h := range m.Provides.Hooks {
			if len(providers[h]) == 0 {
				hooks = append(hooks, h)
			}
			if len(providers[h]) == 0 || providers[h][len(providers[h])-1] != n {
				providers[h] = append(providers[h], n)
			}
		}
	}
	var probs []Problem
	for _, h := range hooks {
		ps := providers[h]
		if len(ps) < 2 {
			continue
		}
		quoted := make([]string, len(ps))
		for i, p := range ps {
			quoted[i] = fmt.Sprintf("%q", p)
		}
		who := "plugins " + strings.Join(quoted[:len(quoted)-1], ", ") + " and " + quoted[len(quoted)-1] + " both"
		if len(ps) > 2 {
			who = strings.Replace(who, " both", " all", 1)
		}
		for _, p := range ps[1:] {
			probs = append(probs, Problem{File: p + "/manifest.json", Pointer: "/provides/hooks",
				Message: fmt.Sprintf("%s provide the %q hook; at most one plugin may", who, h),
				Fix:     fmt.Sprintf("remove %q from provides.hooks in all but one of them, or uninstall all but one", h)})
		}
	}
	if len(probs) > 0 {
		return &Error{Problems: probs}
	}
	return nil
}
