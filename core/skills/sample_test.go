package skills

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/catalog"
)

func TestSampleArguments(t *testing.T) {
	obj := func(required string, props string) string {
		return `{"type":"object","additionalProperties":false,"required":[` + required + `],"properties":{` + props + `}}`
	}
	tests := []struct {
		name, schema string
		want         string // compact JSON, keys sorted; "" when an error is expected
		wantErr      string
	}{
		{"no arguments", `{"type":"object","additionalProperties":false,"properties":{}}`, `{}`, ""},
		{"optional only", obj(``, `"a":{"type":"string"}`), `{}`, ""},
		{"string", obj(`"s"`, `"s":{"type":"string"}`), `{"s":"example"}`, ""},
		{"minLength", obj(`"s"`, `"s":{"type":"string","minLength":10}`), `{"s":"examplexxx"}`, ""},
		{"maxLength", obj(`"s"`, `"s":{"type":"string","maxLength":3}`), `{"s":"exa"}`, ""},
		{"default wins", obj(`"s","n"`, `"s":{"type":"string","default":"dflt","enum":["a","dflt"]},"n":{"type":"integer","default":7}`), `{"n":7,"s":"dflt"}`, ""},
		{"const", obj(`"s"`, `"s":{"const":"fixed"}`), `{"s":"fixed"}`, ""},
		{"enum", obj(`"s"`, `"s":{"type":"string","enum":["first","second"]}`), `{"s":"first"}`, ""},
		{"examples", obj(`"s"`, `"s":{"type":"string","examples":["from examples"]}`), `{"s":"from examples"}`, ""},
		{"date-time", obj(`"s"`, `"s":{"type":"string","format":"date-time"}`), `{"s":"2026-03-05T14:30:00Z"}`, ""},
		{"date", obj(`"s"`, `"s":{"type":"string","format":"date"}`), `{"s":"2026-03-05"}`, ""},
		{"time", obj(`"s"`, `"s":{"type":"string","format":"time"}`), `{"s":"09:00:00Z"}`, ""},
		{"email", obj(`"s"`, `"s":{"type":"string","format":"email"}`), `{"s":"user@example.com"}`, ""},
		{"uri", obj(`"s"`, `"s":{"type":"string","format":"uri"}`), `{"s":"https://example.com"}`, ""},
		{"uuid", obj(`"s"`, `"s":{"type":"string","format":"uuid"}`), `{"s":"123e4567-e89b-42d3-a456-426614174000"}`, ""},
		{"hostname ipv4 ipv6", obj(`"h","a","b"`, `"h":{"type":"string","format":"hostname"},"a":{"type":"string","format":"ipv4"},"b":{"type":"string","format":"ipv6"}`),
			`{"a":"192.0.2.1","b":"2001:db8::1","h":"example.com"}`, ""},
		{"duration", obj(`"s"`, `"s":{"type":"string","format":"duration"}`), `{"s":"PT1H"}`, ""},
		{"unknown format", obj(`"s"`, `"s":{"type":"string","format":"colour"}`), `{"s":"example"}`, ""},
		{"pattern", obj(`"s"`, `"s":{"type":"string","pattern":"^[A-Z]{3}-[0-9]{4}$"}`), `{"s":"AAA-0000"}`, ""},
		{"pattern and minLength", obj(`"s"`, `"s":{"type":"string","pattern":"^[a-z]+$","minLength":4}`), `{"s":"aaaa"}`, ""},
		{"unanchored pattern", obj(`"s"`, `"s":{"type":"string","pattern":"(foo|bar)\\d?"}`), `{"s":"foo"}`, ""},
		{"class without letters", obj(`"s"`, `"s":{"type":"string","pattern":"^[!-/]+$"}`), `{"s":"!"}`, ""},
		{"integer", obj(`"n"`, `"n":{"type":"integer"}`), `{"n":1}`, ""},
		{"integer minimum", obj(`"n"`, `"n":{"type":"integer","minimum":5}`), `{"n":5}`, ""},
		{"integer exclusive and multiple", obj(`"n"`, `"n":{"type":"integer","exclusiveMinimum":1,"maximum":10,"multipleOf":3}`), `{"n":3}`, ""},
		{"negative maximum", obj(`"n"`, `"n":{"type":"number","maximum":-2.5}`), `{"n":-2.5}`, ""},
		{"exclusive maximum", obj(`"n"`, `"n":{"type":"integer","exclusiveMaximum":0}`), `{"n":-1}`, ""},
		{"number minimum", obj(`"n"`, `"n":{"type":"number","minimum":0.5}`), `{"n":1}`, ""},
		{"boolean and null", obj(`"b","z"`, `"b":{"type":"boolean"},"z":{"type":"null"}`), `{"b":false,"z":null}`, ""},
		{"nullable", obj(`"s"`, `"s":{"type":["null","string"]}`), `{"s":"example"}`, ""},
		{"nested object", obj(`"o"`, `"o":{"type":"object","additionalProperties":false,"required":["x"],"properties":{"x":{"type":"integer","minimum":2},"y":{"type":"string"}}}`),
			`{"o":{"x":2}}`, ""},
		{"array", obj(`"a"`, `"a":{"type":"array","items":{"type":"string","format":"email"},"minItems":2}`), `{"a":["user@example.com","user@example.com"]}`, ""},
		{"empty array", obj(`"a"`, `"a":{"type":"array","items":{"type":"string"}}`), `{"a":[]}`, ""},
		{"ref", `{"type":"object","required":["d"],"properties":{"d":{"$ref":"#/$defs/day"}},"$defs":{"day":{"type":"string","format":"date"}}}`,
			`{"d":"2026-03-05"}`, ""},
		{"allOf", `{"type":"object","required":["a"],"allOf":[{"required":["b"],"properties":{"b":{"type":"integer"}}}],"properties":{"a":{"type":"boolean"}}}`,
			`{"a":false,"b":1}`, ""},
		{"anyOf", obj(`"s"`, `"s":{"anyOf":[{"type":"integer","minimum":3},{"type":"string"}]}`), `{"s":3}`, ""},
		{"inferred type", obj(`"s","n"`, `"s":{"minLength":2},"n":{"minimum":4}`), `{"n":4,"s":"example"}`, ""},
		{"untyped", obj(`"s"`, `"s":{}`), `{"s":"example"}`, ""},

		{"not JSON", `{`, "", "schema is not JSON"},
		{"not an object", `{"type":"string"}`, "", "does not describe an object"},
		{"contradiction", obj(`"s"`, `"s":{"type":"string","minLength":5,"maxLength":2}`), "", "minLength 5 is above maxLength 2"},
		{"impossible range", obj(`"n"`, `"n":{"type":"integer","minimum":3,"maximum":2}`), "", "no number between"},
		{"huge minLength", obj(`"s"`, `"s":{"type":"string","minLength":100000000}`), "", "more than the generator builds"},
		{"huge minItems", obj(`"a"`, `"a":{"type":"array","minItems":100000000}`), "", "more than the generator builds"},
		{"pattern too short", obj(`"s"`, `"s":{"type":"string","pattern":"^ab$","minLength":3}`), "", "no string of 3"},
		{"unparsable pattern", obj(`"s"`, `"s":{"type":"string","pattern":"(?<=x)y"}`), "", "pattern cannot be parsed"},
		{"false schema", obj(`"s"`, `"s":false`), "", "accepts nothing"},
		{"remote ref", obj(`"s"`, `"s":{"$ref":"https://example.com/s.json"}`), "", "not local"},
		{"dangling ref", obj(`"s"`, `"s":{"$ref":"#/$defs/none"}`), "", "points nowhere"},
		{"long ref cut between characters", obj(`"s"`, `"s":{"$ref":"`+strings.Repeat("€", 40)+`"}`), "", `"` + strings.Repeat("€", 26) + `…" is not local`},
		{"self ref", `{"type":"object","required":["s"],"properties":{"s":{"$ref":"#"}}}`, "", "too deep"},
		{"validation catches the rest", obj(`"a"`, `"a":{"type":"array","minItems":2,"uniqueItems":true,"items":{"type":"string"}}`), "", "rejected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, err := SampleArguments(json.RawMessage(tt.schema), fixedNow)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrNoSample) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("SampleArguments = %v, %v; want an ErrNoSample containing %q", args, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("SampleArguments: %v", err)
			}
			if got := compactJSON(args); got != tt.want {
				t.Errorf("SampleArguments = %s; want %s", got, tt.want)
			}
			// The core would accept it, as it decodes it (numbers as json.Number).
			s, err := catalog.CompileSchema("test", json.RawMessage(tt.schema))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Validate(args); err != nil {
				t.Errorf("the sample does not validate: %v", err)
			}
			assertDecodedForm(t, args)
		})
	}
}

// assertDecodedForm checks that v holds only what a JSON decoder with
// UseNumber produces.
func assertDecodedForm(t *testing.T, v any) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			assertDecodedForm(t, e)
		}
	case []any:
		for _, e := range x {
			assertDecodedForm(t, e)
		}
	case string, bool, json.Number, nil:
	default:
		t.Errorf("sample holds a %T; the core would hand the handler json.Number, string, bool, nil, []any or map[string]any", v)
	}
}
