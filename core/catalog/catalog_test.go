package catalog

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/manifest"
	"github.com/carapace-dev/carapace/core/plugin"
)

const schema = `{"type":"object","additionalProperties":false,"required":["message"],"properties":{
	"message":{"type":"string","maxLength":5},
	"due":{"type":"string","format":"date-time"},
	"items":{"type":"array","items":{"type":"object","additionalProperties":false,"properties":{"n":{"type":"integer"}}}}}}`

func TestExplain(t *testing.T) {
	s, err := CompileSchema("t", json.RawMessage(schema))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, args, field, msg string
	}{
		{"extra property", `{"message":"hi","priority":"high"}`, "priority", `additionalProperties "priority" not allowed`},
		{"missing", `{}`, "message", "missing properties"},
		{"too long", `{"message":"toolong"}`, "message", "length must be <= 5"},
		{"format asserted, value not echoed", `{"message":"hi","due":"tomorrow-ish"}`, "due", "is not a valid date-time"},
		{"nested", `{"message":"hi","items":[{"n":1},{"n":"x"}]}`, "items[1].n", "expected integer"},
		{"nested extra", `{"message":"hi","items":[{"m":1}]}`, "items[0].m", "not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v any
			if err := json.Unmarshal([]byte(tt.args), &v); err != nil {
				t.Fatal(err)
			}
			err := s.Validate(v)
			if err == nil {
				t.Fatal("valid")
			}
			p := Explain(err)
			if p.Field != tt.field || !strings.Contains(p.Message, tt.msg) {
				t.Fatalf("Explain = %+v, want field %q message containing %q", p, tt.field, tt.msg)
			}
			if strings.Contains(p.Message, "tomorrow-ish") {
				t.Fatalf("message echoes the argument value: %q", p.Message)
			}
		})
	}
}

func TestCompileSchemaRefusesExternalRefs(t *testing.T) {
	for _, ref := range []string{"file:///etc/passwd", "http://127.0.0.1:1/x.json", "https://example.com/s.json"} {
		_, err := CompileSchema("t", json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"`+ref+`"}}}`))
		if err == nil || !strings.Contains(err.Error(), "external") {
			t.Errorf("$ref %s: err = %v, want refusal", ref, err)
		}
	}
}

func TestCatalogCollision(t *testing.T) {
	c := New()
	if err := c.Add(&Tool{Name: "a", Plugin: "p1"}); err != nil {
		t.Fatal(err)
	}
	err := c.Add(&Tool{Name: "b", Plugin: "p2"}, &Tool{Name: "a", Plugin: "p2"})
	if err == nil || !strings.Contains(err.Error(), `"p1"`) || !strings.Contains(err.Error(), `"p2"`) {
		t.Fatalf("collision error = %v, want both plugins named", err)
	}
	if c.Lookup("b") != nil {
		t.Fatal("a failed Add registered some tools")
	}
	c.Remove("p1")
	if c.Len() != 0 {
		t.Fatal("Remove left tools")
	}
}

func TestAllowed(t *testing.T) {
	open, restricted := &Tool{}, &Tool{AllowedGroups: []string{"email"}}
	if !open.Allowed("main") || restricted.Allowed("main") || !restricted.Allowed("email") {
		t.Fatal("Allowed")
	}
}

// invokeOnly has Invoke and nothing else of a plugin.Handler: all the
// catalogue asks of what serves a tool.
type invokeOnly struct{ calls []string }

func (h *invokeOnly) Invoke(_ context.Context, req *plugin.Request) (map[string]any, error) {
	h.calls = append(h.calls, req.Tool)
	return map[string]any{}, nil
}

func TestFromManifestServesToolsWithTheInvoker(t *testing.T) {
	m := &manifest.Manifest{AllowedGroups: []string{"main"}, Provides: manifest.Provides{Tools: []manifest.Tool{
		{Name: "a", Description: "A", RiskLevel: manifest.RiskLow, ArgumentsSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: "b", Description: "B", RiskLevel: manifest.RiskHigh, ArgumentsSchema: json.RawMessage(`{"type":"object"}`)},
	}}}
	h := &invokeOnly{}
	tools, err := FromManifest("p", m, h, []string{"email"})
	if err != nil {
		t.Fatal(err)
	}
	c := New()
	if err := c.Add(tools...); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		tool := c.Lookup(name)
		if tool == nil || tool.Plugin != "p" || tool.Allowed("main") || !tool.Allowed("email") {
			t.Fatalf("tool %s = %+v; want plugin p, allowed for email only", name, tool)
		}
		if _, err := tool.Handler.Invoke(context.Background(), &plugin.Request{Tool: name}); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(h.calls, ",") != "a,b" {
		t.Fatalf("the invoker served %v; want a,b", h.calls)
	}
}
