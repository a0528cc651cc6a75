package manifest

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestValidateConfig(t *testing.T) {
	full := mustParse(t, "testdata/valid/full.json")
	echo := mustParse(t, "../../plugins/echo/manifest.json")
	mem := mustParse(t, "testdata/valid/memory.json")
	const file = "/home/u/.carapace/config.toml"
	tests := []struct {
		name   string
		m      *Manifest
		config map[string]any
		want   []expect
	}{
		{"good", full, map[string]any{"server": "smtp.example.com", "port": int64(465), "folders": []any{"inbox"}}, nil},
		{"good, defaults left out", full, map[string]any{"server": "smtp.example.com"}, nil},
		{"missing required", full, map[string]any{"port": int64(25)}, []expect{{"/server", `required setting "server" is missing`, `set "server"`}}},
		{"nil config with a required setting", full, nil, []expect{{"/server", `required setting "server" is missing`, `set "server"`}}},
		{"wrong type", full, map[string]any{"server": "smtp.example.com", "port": "465"}, []expect{{"/port", "must be an integer, not a string", "write an integer"}}},
		{"float for integer", full, map[string]any{"server": "smtp.example.com", "port": 465.5}, []expect{{"/port", "must be an integer, not a number", "integer"}}},
		{"above maximum", full, map[string]any{"server": "smtp.example.com", "port": int64(70000)}, []expect{{"/port", "is greater than the maximum 65535", "smaller"}}},
		{"bad format", full, map[string]any{"server": "not a host!"}, []expect{{"/server", "is not a valid hostname", "valid hostname"}}},
		{"nested item", full, map[string]any{"server": "smtp.example.com", "folders": []any{"inbox", int64(3)}}, []expect{{"/folders/1", "must be a string, not a number", "string"}}},
		{"unknown setting", full, map[string]any{"server": "smtp.example.com", "prot": int64(1)}, []expect{{"/prot", `unknown setting "prot"`, `did you mean "port"?`}}},
		{"key needing escapes", full, map[string]any{"server": "smtp.example.com", "a/b~c": true}, []expect{{"/a~1b~0c", `unknown setting "a/b~c"`, "remove it"}}},
		{"TOML date-time becomes a string", full, map[string]any{"server": time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}, []expect{{"/server", "is not a valid hostname", "hostname"}}},
		{"NaN", full, map[string]any{"server": "smtp.example.com", "port": math.NaN()}, []expect{{"", "cannot be represented as JSON", "nan"}}},
		{"no config_schema, no config", echo, nil, nil},
		{"no config_schema, empty config", echo, map[string]any{}, nil},
		{"no config_schema, a setting", echo, map[string]any{"verbose": true, "alpha": 1}, []expect{
			{"/alpha", `unknown setting "alpha": the plugin's manifest declares no config_schema`, "remove the setting"},
			{"/verbose", `unknown setting "verbose"`, "remove the setting"},
		}},
		{"open schema accepts extra settings", mem, map[string]any{"max_brief_entries": int64(5), "other": "x"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.m.ValidateConfig(file, tt.config)
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *Error", err)
			}
			assertProblems(t, e.Problems, file, tt.want)
		})
	}
}

// TestValidateConfigNoEcho: a setting's value (perhaps a secret) never
// appears in the error.
func TestValidateConfigNoEcho(t *testing.T) {
	data := []byte(`{"description":"d","version":"1.0.0","app_compat":">=0.1.0","author":{"name":"a"},"provides":{"channels":[],"tools":[]},"subscribes":[],
	"config_schema":{"type":"object","additionalProperties":false,"properties":{
		"token":{"type":"string","pattern":"^[0-9]+:[A-Za-z]+$","maxLength":20},
		"mail":{"type":"string","format":"email"},
		"mode":{"enum":["a","b"]},
		"pin":{"const":"1234"},
		"n":{"type":"integer","multipleOf":7}}}}`)
	m, err := Parse("m.json", data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const secret = "sk-SECRET-VALUE-4242424242"
	err = m.ValidateConfig("c.toml", map[string]any{"token": secret, "mail": secret, "mode": secret, "pin": secret, "n": int64(424243)})
	if err == nil {
		t.Fatal("accepted")
	}
	if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "424243") {
		t.Errorf("the error echoes a value:\n%s", err)
	}
	var e *Error
	if !errors.As(err, &e) || len(e.Problems) != 6 {
		t.Errorf("want 6 problems (token twice), got:\n%v", err)
	}
}

// TestValidateConfigUncompiled: a Manifest built by hand (not by Parse)
// compiles its config_schema on use.
func TestValidateConfigUncompiled(t *testing.T) {
	m := &Manifest{ConfigSchema: []byte(`{"type":"object","required":["a"],"properties":{"a":{"type":"string"}}}`)}
	if err := m.ValidateConfig("c", map[string]any{"a": "x"}); err != nil {
		t.Fatal(err)
	}
	if err := m.ValidateConfig("c", map[string]any{}); err == nil || !strings.Contains(err.Error(), "c: /a: required setting") {
		t.Fatalf("err = %v", err)
	}
	m = &Manifest{ConfigSchema: []byte(`{"$ref":"file:///etc/passwd"}`)}
	if err := m.ValidateConfig("c", nil); err == nil || !strings.Contains(err.Error(), "does not compile") {
		t.Fatalf("err = %v", err)
	}
}

func TestCheckHooks(t *testing.T) {
	brief := &Manifest{Provides: Provides{Hooks: []string{HookMemoryBrief}}}
	plain := &Manifest{}
	tests := []struct {
		name    string
		ms      map[string]*Manifest
		want    []string // substrings of the error; none: no error
		nProbls int
	}{
		{"none", map[string]*Manifest{"a": plain, "b": plain}, nil, 0},
		{"one", map[string]*Manifest{"memory": brief, "b": plain, "nil": nil}, nil, 0},
		{"two", map[string]*Manifest{"memory": brief, "other-memory": brief, "c": plain}, []string{
			`other-memory/manifest.json: /provides/hooks: plugins "memory" and "other-memory" both provide the "memory_brief" hook; at most one plugin may`,
			`Fix: remove "memory_brief" from provides.hooks`}, 1},
		{"three", map[string]*Manifest{"a": brief, "b": brief, "c": brief}, []string{`plugins "a", "b" and "c" all provide`}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckHooks(tt.ms)
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || len(e.Problems) != tt.nProbls {
				t.Fatalf("err = %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%s\ndoes not contain\n%s", err, w)
				}
			}
		})
	}
}
