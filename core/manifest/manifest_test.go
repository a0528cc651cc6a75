package manifest

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// expect is one problem a hostile manifest must produce: the pointer
// exactly, the message and the fix by substring.
type expect struct {
	ptr, msg, fix string
}

const tool0 = "/provides/tools/0"
const args0 = tool0 + "/arguments_schema"

// hostile maps each file of testdata/hostile to the problems Parse must
// report, all of them: a file producing any other problem fails the test.
var hostile = map[string][]expect{
	// Encoding and JSON syntax: located by line and column.
	"empty":                {{"", "the file is empty", "JSON object"}},
	"bom":                  {{"", "line 1, column 1: the file starts with a UTF-8 byte-order mark", "without a byte-order mark"}},
	"nul_byte":             {{"", "line 2, column 32: the file contains a NUL byte", "remove the NUL byte"}},
	"invalid_utf8":         {{"", "line 2, column 28: the file is not valid UTF-8", "save the file as UTF-8"}},
	"syntax_missing_comma": {{"", "line 4, column 3: invalid JSON", "missing comma"}},
	"trailing_data":        {{"", "line 40, column 1: unexpected data after the top-level value", "remove everything after"}},
	"top_level_array":      {{"", "must be a JSON object, not an array", `{"description"`}},
	"depth_bomb_arrays":    {{"/" + strings.Repeat("0/", 63) + "0", "line 1, column 65: objects and arrays are nested more than 64 deep", "at most 64 levels"}},
	"depth_bomb_objects":   {{"/x" + strings.Repeat("/a", 63), "nested more than 64 deep", "at most 64 levels"}},
	// Duplicate keys: Go would keep the last, a reviewer reads the first.
	"duplicate_key":        {{tool0 + "/risk_level", `duplicate key "risk_level" (first at line 15, column 9; again at line 16, column 9)`, "keep only one"}},
	"duplicate_key_nested": {{args0 + "/properties/to", `duplicate key "to" (first at line 24, column 13; again at line 25, column 13)`, "keep only one"}},
	// Strings a terminal or a reader would misrender.
	"nul_escape":          {{"/description", `contains a NUL character (\u0000) at character 5`, "remove it"}},
	"control_character":   {{tool0 + "/description", "control character U+001B at character 5", "rewrite the terminal"}},
	"bidi_override":       {{tool0 + "/description", "bidirectional control U+202E", "display differently"}},
	"lone_surrogate":      {{"/description", "contains U+FFFD", "valid \\u escape pair"}},
	"number_out_of_range": {{args0 + "/properties/body/maxLength", "1e999 is out of range", "within"}, {args0 + "/properties/body/maxLength", "must be a whole number", "whole number"}},
	// Required fields, each.
	"missing_description": {{"/description", `required field "description" is missing`, `add "description": "What this plugin does"`}},
	"missing_version":     {{"/version", `required field "version" is missing`, `add "version": "1.0.0"`}},
	"missing_app_compat":  {{"/app_compat", `required field "app_compat" is missing`, `add "app_compat": ">=0.1.0"`}},
	"missing_author":      {{"/author", `required field "author" is missing`, `add "author": {"name":"Your Name"}`}},
	"missing_author_name": {{"/author/name", `required field "name" is missing`, `add "name"`}},
	"missing_provides":    {{"/provides", `required field "provides" is missing`, `add "provides": {"channels":[],"tools":[]}`}},
	"missing_channels":    {{"/provides/channels", `required field "channels" is missing`, `add "channels": []`}},
	"missing_tools":       {{"/provides/tools", `required field "tools" is missing`, `add "tools": []`}},
	"missing_subscribes":  {{"/subscribes", `required field "subscribes" is missing`, `add "subscribes": []`}},
	"missing_tool_fields": {
		{tool0 + "/arguments_schema", `required field "arguments_schema" is missing`, `"additionalProperties":false`},
		{tool0 + "/description", `required field "description" is missing`, `add "description"`},
		{tool0 + "/risk_level", `required field "risk_level" is missing`, `add "risk_level": "low"`},
	},
	"empty_description":      {{"/description", "must not be empty", "what the plugin does"}},
	"tool_description_blank": {{tool0 + "/description", "only white space", "what the tool does"}},
	// Tool names.
	"tool_name_dots":           {{tool0 + "/name", `tool name "memory.store" must be snake_case`, `use "memory_store"`}},
	"tool_name_dash":           {{tool0 + "/name", `tool name "Send-Mail" must be snake_case`, `use "send_mail"`}},
	"tool_name_reserved":       {{tool0 + "/name", `"list_tools" is reserved for a core intrinsic tool`, "choose another name"}},
	"tool_name_cyrillic":       {{tool0 + "/name", "non-ASCII character 'а' (U+0430) at character 7", "plain ASCII"}},
	"tool_name_long":           {{tool0 + "/name", "is 65 bytes long; the limit is 64", "at most 64"}},
	"tool_name_empty":          {{tool0 + "/name", "tool name is empty", "snake_case"}},
	"tool_name_duplicate":      {{"/provides/tools/1/name", `tool "send_mail" is declared twice (first at /provides/tools/0)`, "rename or remove one"}},
	"url_arguments_undeclared": {{tool0 + "/url_arguments/1", `"link" is not a top-level string property of arguments_schema`, `"type": "string"`}},
	"high_risk_if_undeclared":  {{tool0 + "/high_risk_if/1", `"cc" is not a top-level property of arguments_schema`, "arguments_schema.properties"}},
	"url_arguments_not_string": {{tool0 + "/url_arguments/0", `"count" is not a top-level string property`, "arguments_schema.properties"}},
	"risk_level_medium":        {{tool0 + "/risk_level", `"medium" is not one of "low" or "high"`, `"high" (waits for the user's confirmation)`}},
	// additionalProperties: false at every object level of arguments.
	"additional_properties_missing_top":    {{args0 + "/additionalProperties", `"additionalProperties" is missing`, `add "additionalProperties": false`}},
	"additional_properties_true_top":       {{args0 + "/additionalProperties", `must be false, not true`, `set "additionalProperties": false`}},
	"additional_properties_schema_top":     {{args0 + "/additionalProperties", `must be false, not {"type":"string"}`, `set "additionalProperties": false`}},
	"additional_properties_missing_nested": {{args0 + "/properties/headers/additionalProperties", `"additionalProperties" is missing`, `add "additionalProperties": false`}},
	"additional_properties_true_items":     {{args0 + "/properties/attachments/items/additionalProperties", "must be false, not true", `set "additionalProperties": false`}},
	// Unsupported keywords.
	"ref_file": {
		{args0 + "/properties/to/$ref", `"$ref" is not supported`, "write the referenced schema inline"},
		{args0 + "/properties/to/type", `"type" is missing`, `add "type"`},
	},
	"ref_http":           {{args0 + "/properties/to/$ref", `"$ref" is not supported`, "supported keywords: type, description"}},
	"defs_top":           {{args0 + "/$defs", `"$defs" is not supported`, "inline"}},
	"schema_keyword_top": {{args0 + "/$schema", `"$schema" is not supported`, `remove "$schema"`}},
	"allof":              {{args0 + "/properties/to/allOf", `the keyword "allOf" is not supported`, "supported keywords: type"}},
	"pattern_properties": {{args0 + "/patternProperties", `the keyword "patternProperties" is not supported`, "supported keywords: type, properties, required, additionalProperties, description"}},
	"if_then_else": {
		{args0 + "/properties/to/if", `the keyword "if" is not supported`, "remove it"},
		{args0 + "/properties/to/then", `the keyword "then" is not supported`, "remove it"},
	},
	"keyword_typo": {{args0 + "/properties/body/maxlength", `"maxlength" is not supported`, `did you mean "maxLength"?`}},
	// Property schemas.
	"unknown_format":         {{args0 + "/properties/to/format", `unknown format "idn-email": it would not be checked`, "date-time"}},
	"invalid_pattern":        {{args0 + "/properties/to/pattern", "is not a valid regular expression", "RE2"}},
	"long_pattern":           {{args0 + "/properties/to/pattern", "1001 characters long; the limit is 1000", "shorten"}},
	"type_missing":           {{args0 + "/properties/to/type", `"type" is missing`, `"string", "number", "integer", "boolean", "array" or "object"`}},
	"type_list":              {{args0 + "/properties/to/type", "single type name, not an array", `leave it out of "required"`}},
	"type_unknown":           {{args0 + "/properties/to/type", `unknown type "null"`, "use one of"}},
	"type_top_not_object":    {{args0 + "/type", `must be of type "object", not "array"`, `set "type": "object"`}},
	"properties_missing_top": {{args0 + "/properties", `"properties" is missing`, `add "properties"`}},
	"array_without_items":    {{args0 + "/properties/cc/items", `"items" is missing`, `add "items"`}},
	"items_tuple":            {{args0 + "/properties/cc/items", "must be a schema object, not an array", "one schema object"}},
	"required_undeclared":    {{args0 + "/required/1", `"bdoy" is required but not declared`, `did you mean "body"?`}},
	"enum_empty":             {{args0 + "/properties/kind/enum", "lists no values", "list the allowed values"}},
	"enum_too_long":          {{args0 + "/properties/kind/enum", "lists 257 values; the limit is 256", "shorter list"}},
	"enum_wrong_type":        {{args0 + "/properties/kind/enum/1", `1 is not of type "string"`, "match the type"}},
	"default_wrong_type":     {{args0 + "/properties/urgent/default", `the default "yes" is not of type "boolean"`, "remove it"}},
	"default_null":           {{args0 + "/properties/subject/default", "the default is null", `remove "default"`}},
	"default_too_long":       {{args0 + "/properties/subject/default", "does not satisfy its own schema: length must be <= 3", "schema accepts it"}},
	"misapplied_keyword":     {{args0 + "/properties/cc/maxLength", `"maxLength" has no effect on a value of type "array"`, `use "maxItems"`}},
	"min_above_max":          {{args0 + "/properties/body/minLength", "minLength is greater than maxLength", "at most maxLength"}},
	"negative_max_length":    {{args0 + "/properties/body/maxLength", "whole number from 0", "whole number"}},
	"schema_too_deep":        {{args0 + "/properties/deep" + strings.Repeat("/properties/n", 8), "nested more than 8 levels deep", "flatten"}},
	// Versions.
	"app_compat_garbage":     {{"/app_compat", `"banana" is not a version range`, `">=0.1.0"`}},
	"app_compat_unsatisfied": {{"/app_compat", "requires Carapace >=99.0.0; this is 0.1.0", "upgrade Carapace, or use a version of the plugin made for Carapace 0.1.0"}},
	"version_not_semver":     {{"/version", `"1.0" is not a semantic version`, "MAJOR.MINOR.PATCH"}},
	"version_v_prefix":       {{"/version", `"v1.0.0" is not a semantic version`, `no "v" prefix`}},
	// Unknown fields, at every level, with near misses.
	"unknown_key_near_miss": {{"/subscribe", `unknown field "subscribe"`, `did you mean "subscribes"?`}},
	"unknown_key_camel":     {{"/allowedGroups", `unknown field "allowedGroups"`, `did you mean "allowed_groups"?`}},
	"unknown_key_name":      {{"/name", `unknown field "name"`, "name of its folder"}},
	"unknown_key_nested":    {{"/author/email", `unknown field "email"`, "allowed here are: name, url"}},
	"unknown_key_tool":      {{tool0 + "/riskLevel", `unknown field "riskLevel"`, `did you mean "risk_level"?`}},
	// Other fields.
	"allowed_groups_empty":  {{"/allowed_groups", "must list at least 1 item", `leave "allowed_groups" out to allow every group`}},
	"allowed_groups_bad":    {{"/allowed_groups/0", `"../etc" does not match the pattern`, "1 to 64 letters"}},
	"subscribes_bad_topic":  {{"/subscribes/0", `"Message Inbound" does not match the pattern`, `"message.inbound"`}},
	"hooks_unknown":         {{"/provides/hooks/1", `"evil_hook" is not one of "memory_brief"`, `the only hook`}},
	"session_bad":           {{"/session", `"forever" is not one of "fresh", "resume" or "explicit"`, `leave "session" out`}},
	"credentials_bad_key":   {{"/install/credentials/0/key", `"../id_rsa" does not match the pattern`, "not starting with a dot"}},
	"credentials_duplicate": {{"/install/credentials/1/key", `credential "token" is declared twice`, "declare each credential once"}},
	"author_url_javascript": {{"/author/url", `"javascript:alert(1)" does not match the pattern`, "https://"}},
	// config_schema.
	"config_schema_ref":        {{"/config_schema", "refers to a document outside itself (file:///etc/passwd)", "self-contained"}},
	"config_schema_not_object": {{"/config_schema/type", `must be "object", not "string"`, `set "type": "object"`}},
	"config_schema_invalid":    {{"/config_schema/properties/x/type", "is not valid JSON Schema", "JSON Schema 2020-12"}},
}

func TestHostile(t *testing.T) {
	files, err := filepath.Glob("testdata/hostile/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		if _, ok := hostile[name]; !ok {
			t.Errorf("%s has no expectations", f)
		}
	}
	for name, want := range hostile {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join("testdata", "hostile", name+".json")
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			m, err := Parse(file, data, Options{AppVersion: "0.1.0"})
			if m != nil || err == nil {
				t.Fatalf("Parse accepted it")
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error is %T, want *Error", err)
			}
			assertProblems(t, e.Problems, file, want)
			if !strings.Contains(err.Error(), file+": ") {
				t.Errorf("Error() does not name the file:\n%s", err)
			}
		})
	}
}

// assertProblems checks that got is exactly want (in any order), every
// problem naming file and having a message and a fix.
func assertProblems(t *testing.T, got []Problem, file string, want []expect) {
	t.Helper()
	used := make([]bool, len(got))
	for _, w := range want {
		found := false
		for i, p := range got {
			if !used[i] && p.Pointer == w.ptr && strings.Contains(p.Message, w.msg) && strings.Contains(p.Fix, w.fix) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			t.Errorf("missing problem at %q: message ~ %q, fix ~ %q", w.ptr, w.msg, w.fix)
		}
	}
	for i, p := range got {
		if !used[i] {
			t.Errorf("unexpected problem: %s", p)
		}
		if p.File != file || p.Message == "" || p.Fix == "" {
			t.Errorf("problem lacks file, message or fix: %#v", p)
		}
	}
}

func TestValid(t *testing.T) {
	files, _ := filepath.Glob("testdata/valid/*.json")
	if len(files) < 4 {
		t.Fatalf("want at least 4 valid fixtures, have %d", len(files))
	}
	for _, f := range append(files, "../../plugins/echo/manifest.json") {
		t.Run(f, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			m, err := Parse(f, data, Options{AppVersion: "0.1.0"})
			if err != nil {
				t.Fatal(err)
			}
			if m.Description == "" || m.Version == "" || m.Author.Name == "" || m.Provides.Channels == nil || m.Provides.Tools == nil || m.Subscribes == nil {
				t.Errorf("fields not decoded: %+v", m)
			}
		})
	}
}

func TestValidFull(t *testing.T) {
	m := mustParse(t, "testdata/valid/full.json")
	if got := m.AllowedGroups; !slices.Equal(got, []string{"personal", "work_mail"}) {
		t.Errorf("AllowedGroups = %v", got)
	}
	if m.Session != SessionResume {
		t.Errorf("Session = %q", m.Session)
	}
	want := []Credential{{Key: "smtp_password", Description: "SMTP password from your mail provider", Required: true}, {Key: "signature.txt", Description: "Optional signature"}}
	if got := m.Credentials(); !slices.Equal(got, want) {
		t.Errorf("Credentials() = %+v", got)
	}
	if len(m.Provides.Tools) != 2 || m.Provides.Tools[0].RiskLevel != RiskHigh || m.Provides.Tools[1].Name != "search_mail" {
		t.Errorf("tools = %+v", m.Provides.Tools)
	}
	if ts := m.Provides.Tools; !ts[0].Egress || ts[0].UntrustedOutput || !ts[1].UntrustedOutput || ts[1].Egress {
		t.Errorf("egress and untrusted_output not decoded: send_mail %v/%v, search_mail %v/%v", ts[0].Egress, ts[0].UntrustedOutput, ts[1].Egress, ts[1].UntrustedOutput)
	}
	if ts := m.Provides.Tools; !ts[0].Preview || ts[1].Preview {
		t.Errorf("preview not decoded: send_mail %v, search_mail %v", ts[0].Preview, ts[1].Preview)
	}
	if len(m.ConfigSchema) == 0 || m.configSchema == nil {
		t.Error("config_schema not kept and compiled")
	}
	if !slices.Equal(m.Subscribes, []string{"message.inbound", "task.triggered"}) || !slices.Equal(m.Provides.Channels, []string{"mail"}) {
		t.Errorf("subscribes %v, channels %v", m.Subscribes, m.Provides.Channels)
	}
	mem := mustParse(t, "testdata/valid/memory.json")
	if !mem.HasHook(HookMemoryBrief) || m.HasHook(HookMemoryBrief) {
		t.Error("HasHook")
	}
	if mem.Credentials() != nil {
		t.Error("Credentials() of a plugin without install should be nil")
	}
}

func mustParse(t *testing.T, file string) *Manifest {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Parse(file, data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestEveryProblem: independent faults are all reported, sorted by pointer.
func TestEveryProblem(t *testing.T) {
	doc := `{"description":"d","version":"x","app_compat":">=0.1.0","author":{"name":"a"},"provides":{"channels":[],"tools":[
		{"name":"a.b","description":"d","risk_level":"low","arguments_schema":{"type":"object","properties":{}}},
		{"name":"ok","description":"d","risk_level":"low","arguments_schema":{"type":"object","properties":{},"additionalProperties":false}},
		{"name":"C","description":"d","risk_level":"low","arguments_schema":{"type":"object","properties":{},"additionalProperties":false}},
		{"name":"d","description":"d","risk_level":"low","arguments_schema":{"type":"object","properties":{},"additionalProperties":false}},
		{"name":"e","description":"d","risk_level":"low","arguments_schema":{"type":"object","properties":{},"additionalProperties":false}},
		{"name":"f","description":"d","risk_level":"low","arguments_schema":{"type":"object","properties":{},"additionalProperties":false}},
		{"name":"g","description":"d","risk_level":"low","arguments_schema":{"type":"object","properties":{},"additionalProperties":false}},
		{"name":"h","description":"d","risk_level":"low","arguments_schema":{"type":"object","properties":{},"additionalProperties":false}},
		{"name":"i","description":"d","risk_level":"low","arguments_schema":{"type":"object","properties":{},"additionalProperties":false}},
		{"name":"j","description":"d","risk_level":"low","arguments_schema":{"type":"object","properties":{},"additionalProperties":false}},
		{"name":"ok","description":"d","risk_level":"nope","arguments_schema":{"type":"object","properties":{},"additionalProperties":false}}
	]},"subscribes":[],"extra":1}`
	_, err := Parse("p/manifest.json", []byte(doc), Options{})
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v", err)
	}
	var ptrs []string
	for _, p := range e.Problems {
		ptrs = append(ptrs, p.Pointer)
	}
	want := []string{"/extra", "/provides/tools/0/arguments_schema/additionalProperties", "/provides/tools/0/name",
		"/provides/tools/2/name", "/provides/tools/10/name", "/provides/tools/10/risk_level", "/version"}
	if !slices.Equal(ptrs, want) {
		t.Errorf("pointers =\n%q\nwant\n%q", ptrs, want)
	}
	if lines := strings.Split(err.Error(), "\n"); len(lines) != len(want) {
		t.Errorf("Error() has %d lines, want %d", len(lines), len(want))
	}
}

func TestAppCompat(t *testing.T) {
	doc := func(r string) []byte {
		return []byte(`{"description":"d","version":"1.0.0","app_compat":"` + r + `","author":{"name":"a"},"provides":{"channels":[],"tools":[]},"subscribes":[]}`)
	}
	for _, tc := range []struct {
		rng, app string
		ok       bool
	}{
		{">=0.1.0", "", true},
		{">=0.2.0", "", false},             // "" is version.Base, 0.1.0
		{">=0.2.0", "dev", false},          // not semver: Base
		{">=0.2.0", "0.2.0-dev+abc", true}, // pre-release dropped
		{">=0.2.0", "v0.3.1", true},
		{"^1.2", "1.9.0", true},
		{"^1.2", "2.0.0", false},
		{">=0.1.0, <0.2.0", "0.1.5", true},
		{"~0.1", "0.2.0", false},
		{"*", "7.0.0", true},
	} {
		_, err := Parse("m.json", doc(tc.rng), Options{AppVersion: tc.app})
		if (err == nil) != tc.ok {
			t.Errorf("app_compat %q on %q: err = %v, want ok=%v", tc.rng, tc.app, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "requires Carapace "+tc.rng+"; this is ") {
			t.Errorf("app_compat %q on %q: message %v", tc.rng, tc.app, err)
		}
	}
}

func TestCheckToolName(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"echo", ""},
		{"memory_store", ""},
		{"a1_b2", ""},
		{"memory.store", `must be snake_case: use "memory_store"`},
		{"github.create-issue", `use "github_create_issue"`},
		{"Create Reminder", `use "create_reminder"`},
		{"1tool", "must match ^[a-z][a-z0-9_]*$"},
		{"_x", "must match"},
		{"", "empty"},
		{strings.Repeat("a", 64), ""},
		{strings.Repeat("a", 65), "65 bytes long; the limit is 64"},
		{"ech\u043e", "non-ASCII character 'о' (U+043E) at character 4"},
		{"e\u200bcho", "U+200B"},
	} {
		err := CheckToolName(tc.name)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("CheckToolName(%q) = %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestCheckPluginName(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"mail", ""},
		{"email-gmail", ""},
		{"a1-b2-3c", ""},
		{"My_Plugin", `must be kebab-case: use "my-plugin"`},
		{"myPlugin", `use "my-plugin"`},
		{"my.plugin", `use "my-plugin"`},
		{"my--plugin", `use "my-plugin"`},
		{"-plugin", `use "plugin"`},
		{"9lives", "must match"},
		{"", "empty"},
		{strings.Repeat("a", 65), "the limit is 64"},
		{"core", "reserved"},
		{"carapace", "reserved"},
		{"installer", "reserved"},
		{"test-input", "reserved"},
		{"hello", "reserved"},
		{"Core", `"Core" must match`}, // the kebab form is reserved: no suggestion
		{"m\u0430il", "non-ASCII character 'а' (U+0430)"},
		{"../etc", "must"},
	} {
		err := CheckPluginName(tc.name)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("CheckPluginName(%q) = %v, want %q", tc.name, err, tc.want)
		}
	}
	for _, r := range ReservedPlugins {
		if pluginNameRE.MatchString(r) == false {
			t.Errorf("reserved %q is not itself a valid name", r)
		}
	}
}

func TestProblemString(t *testing.T) {
	for _, tc := range []struct {
		p    Problem
		want string
	}{
		{Problem{File: "f.json", Pointer: "/a/0", Message: "is wrong", Fix: "fix it"}, "f.json: /a/0: is wrong. Fix: fix it"},
		{Problem{File: "f.json", Message: "line 1, column 2: bad", Fix: "fix it"}, "f.json: line 1, column 2: bad. Fix: fix it"},
		{Problem{File: "f.json", Pointer: "/x", Message: "slow.", Fix: "wait", Warning: true}, "warning: f.json: /x: slow. Fix: wait"},
		{Problem{File: "f.json", Message: "odd"}, "f.json: odd"},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
	e := &Error{Problems: []Problem{{File: "a", Message: "x", Fix: "y"}, {File: "b", Message: "z", Fix: "w"}}}
	if got := e.Error(); got != "a: x. Fix: y\nb: z. Fix: w" {
		t.Errorf("Error() = %q", got)
	}
}

// TestFormatsAsserted: every format allowed is one the validator checks.
func TestFormatsAsserted(t *testing.T) {
	for _, f := range Formats {
		if jsonschema.Formats[f] == nil {
			t.Errorf("format %q is not asserted by the schema library", f)
		}
	}
}

// TestFormatsEnforced: a value breaking the declared format is refused by
// the compiled arguments schema, as the catalogue compiles it.
func TestFormatsEnforced(t *testing.T) {
	m := mustParse(t, "testdata/valid/full.json")
	s, err := compileSchema("mem://t.json", m.Provides.Tools[0].ArgumentsSchema)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(map[string]any{"to": "not an email", "body": "x"}); err == nil {
		t.Error("format email not enforced")
	}
	if err := s.Validate(map[string]any{"to": "a@example.com", "body": "x", "bcc": "b@example.com"}); err == nil {
		t.Error("additionalProperties not enforced")
	}
	if err := s.Validate(map[string]any{"to": "a@example.com", "body": "x"}); err != nil {
		t.Error(err)
	}
}

func TestMetaSchema(t *testing.T) {
	ms, err := metaSchema()
	if err != nil {
		t.Fatal(err)
	}
	// Every object level of the manifest refuses unknown fields.
	var walk func(ptr string, v any)
	walk = func(ptr string, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		if m["type"] == "object" && m["properties"] != nil && m["additionalProperties"] != false {
			t.Errorf("%s: an object without additionalProperties: false", ptr)
		}
		for k, c := range m {
			walk(ptr+"/"+k, c)
		}
	}
	walk("", ms.doc)
}

func TestLimitsOfDecoder(t *testing.T) {
	// Many duplicate keys stop at MaxProblems instead of growing without bound.
	var b strings.Builder
	b.WriteString(`{"a":1`)
	for range 3 * MaxProblems {
		b.WriteString(`,"a":1`)
	}
	b.WriteString("}")
	_, err := Parse("m.json", []byte(b.String()), Options{})
	var e *Error
	if !errors.As(err, &e) || len(e.Problems) != MaxProblems+1 || !strings.Contains(e.Problems[MaxProblems].Message, "stopped reading") {
		t.Fatalf("got %d problems", len(e.Problems))
	}
	// A long number literal.
	_, err = Parse("m.json", []byte(`{"x":`+strings.Repeat("1", 200)+`}`), Options{})
	if err == nil || !strings.Contains(err.Error(), "200 characters long") {
		t.Errorf("err = %v", err)
	}
}

// TestReencode: what Parse accepts survives encoding and parsing again.
func TestReencode(t *testing.T) {
	files, _ := filepath.Glob("testdata/valid/*.json")
	for _, f := range files {
		m := mustParse(t, f)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := Parse(f, b, Options{})
		if err != nil {
			t.Fatalf("%s re-encoded: %v\n%s", f, err, b)
		}
		b2, _ := json.Marshal(m2)
		if string(b) != string(b2) {
			t.Errorf("%s: not stable:\n%s\n%s", f, b, b2)
		}
	}
}

// TestLargeHostile: large manifests built to be slow are refused quickly,
// with a bounded number of problems.
func TestLargeHostile(t *testing.T) {
	head := `{"description":"d","version":"1.0.0","app_compat":">=0.1.0","author":{"name":"a"},"subscribes":[],`
	// fill repeats item n times (N numbering them), or up to MaxSize when
	// n is 0.
	fill := func(prefix, item, suffix string, n int) []byte {
		var b strings.Builder
		b.WriteString(prefix)
		for i := 0; (n == 0 && b.Len() < MaxSize-len(suffix)-len(item)-20) || i < n; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(strings.ReplaceAll(item, "N", strconv.Itoa(i)))
		}
		b.WriteString(suffix)
		return []byte(b.String())
	}
	tool := `{"name":"tN","description":"d","risk_level":"low","arguments_schema":{"type":"object","properties":{"x":{"type":"string","default":"a"}},"additionalProperties":false}}`
	argsHead := head + `"provides":{"channels":[],"tools":[{"name":"t","description":"d","risk_level":"low","arguments_schema":{"type":"object","additionalProperties":false,"properties":{`
	unknownHead := head + `"provides":{"channels":[],"tools":[]},`
	for _, tc := range []struct {
		name, ptr, msg string
		doc            []byte
	}{
		{"a MiB of unknown keys", "", "more than 10000 members", fill(unknownHead, `"kN":1`, "}", 0)},
		{"many unknown keys", "", "holds 9990 unknown fields", fill(unknownHead, `"kN":1`, "}", 9990)},
		{"a MiB of tools", "/provides/tools", "lists more than 256 items", fill(head+`"provides":{"channels":[],"tools":[`, tool, "]}}", 0)},
		{"many properties", args0, "more than 1000 objects", fill(argsHead, `"pN":{"type":"string","default":"a","pattern":"^a+$"}`, "}}}]}}", 9000)},
		{"big config_schema", "/config_schema", "more than 1000 objects", fill(head+`"provides":{"channels":[],"tools":[]},"config_schema":{"type":"object","properties":{`, `"pN":{"type":"string"}`, "}}}", 9000)},
		{"big enum", args0 + "/properties/e/enum", "lists 9000 values; the limit is 256", fill(argsHead+`"e":{"type":"string","enum":[`, `"vN"`, "]}}}}]}}", 9000)},
		{"bad strings", "/x/0", "control character", fill(`{"x":[`, `"\u001b"`, "]}", 9000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := Parse("m.json", tc.doc, Options{})
			// Generous for -race on a loaded machine; the quadratic
			// cases this guards against took minutes.
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("took %v", d)
			}
			var e *Error
			if !errors.As(err, &e) || len(e.Problems) > MaxProblems+1 {
				t.Fatalf("err = %v", err)
			}
			if !slices.ContainsFunc(e.Problems, func(p Problem) bool { return p.Pointer == tc.ptr && strings.Contains(p.Message, tc.msg) }) {
				t.Errorf("no problem at %q containing %q in\n%.2000s", tc.ptr, tc.msg, err)
			}
		})
	}
}

func TestNetwork(t *testing.T) {
	doc := func(network string) []byte {
		return []byte(`{"description":"d","version":"1.0.0","app_compat":">=0.1.0","author":{"name":"a"},"provides":{"channels":[],"tools":[]},"subscribes":[],"network":` + network + `}`)
	}
	for _, tc := range []struct {
		network string
		want    string // "" = valid; else part of the error
	}{
		{`{"hosts":["api.telegram.org:443"]}`, ""},
		{`{"hosts":["127.0.0.1:8080","[2001:db8::1]:443"],"public":true}`, ""},
		{`{"hosts_from_config":["api_url","accounts.*.imap"]}`, ""},
		{`{"hosts":["api.telegram.org"]}`, "host:port"},
		{`{"hosts":["api.telegram.org:0"]}`, "from 1 to 65535"},
		{`{"hosts":["api.telegram.org:70000"]}`, "from 1 to 65535"},
		{`{"hosts":["[example.com]:443"]}`, "host:port"},
		{`{"hosts":["user@evil.example:443"]}`, "host:port"},
		{`{"hosts_from_config":["../api_url"]}`, "hosts_from_config"},
		{`{"anything":true}`, "anything"},
	} {
		m, err := Parse("m.json", doc(tc.network), Options{})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.network, err)
		case tc.want == "" && m.Network == nil:
			t.Errorf("%s: Network not decoded", tc.network)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err = %v, want it to mention %q", tc.network, err, tc.want)
		}
	}
	h, p, err := SplitHost("API.Telegram.org:443")
	if err != nil || h != "api.telegram.org" || p != 443 {
		t.Errorf("SplitHost = %q %d %v", h, p, err)
	}
}
