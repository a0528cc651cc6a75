package manifest

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tool := func(name, risk string) string {
		return `{"name":"` + name + `","description":"d","risk_level":"` + risk + `","arguments_schema":{"type":"object","additionalProperties":false,"properties":{}}}`
	}
	doc := func(tools ...string) string {
		return `{"description":"d","version":"1.0.0","app_compat":">=0.1.0","author":{"name":"a"},"provides":{"channels":[],"tools":[` + strings.Join(tools, ",") + `]},"subscribes":[]}`
	}
	tests := []struct {
		name, doc, wantErr string
	}{
		{"valid", doc(tool("echo", "low"), tool("echo_confirm", "high")), ""},
		{"dotted name suggests snake_case", doc(tool("reminders.create", "low")), `use "reminders_create"`},
		{"reserved intrinsic", doc(tool("list_tools", "low")), "reserved core tool name"},
		{"duplicate", doc(tool("a", "low"), tool("a", "low")), "declared twice"},
		{"risk level", doc(tool("a", "medium")), `"low" or "high"`},
		{"unknown field", `{"description":"d","name":"spoof"}`, "unknown field"},
		{"pointer in error", doc(tool("ok", "low"), tool("Bad-Name", "low")), "/provides/tools/1/name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("p/manifest.json", []byte(tt.doc))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "p/manifest.json") {
				t.Fatalf("err = %v, want it to name the file and contain %q", err, tt.wantErr)
			}
		})
	}
}
