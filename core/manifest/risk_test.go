package manifest

import "testing"

// RaisesRisk: a high_risk_if argument raises the risk when the call gives
// it a value, and not when it is absent or empty.
func TestRaisesRisk(t *testing.T) {
	names := []string{"attendees", "notify"}
	tests := []struct {
		name string
		args map[string]any
		want bool
	}{
		{"absent", map[string]any{"title": "x"}, false},
		{"null", map[string]any{"attendees": nil}, false},
		{"empty array", map[string]any{"attendees": []any{}}, false},
		{"false", map[string]any{"notify": false}, false},
		{"empty string", map[string]any{"attendees": ""}, false},
		{"empty object", map[string]any{"attendees": map[string]any{}}, false},
		{"array", map[string]any{"attendees": []any{"a@b.c"}}, true},
		{"true", map[string]any{"notify": true}, true},
		{"string", map[string]any{"attendees": "a@b.c"}, true},
		{"object", map[string]any{"attendees": map[string]any{"a": 1}}, true},
		{"number", map[string]any{"notify": 0}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (&Tool{HighRiskIf: names}).RaisesRisk(tt.args); got != tt.want {
				t.Fatalf("RaisesRisk(%v) = %v, want %v", tt.args, got, tt.want)
			}
		})
	}
	if (&Tool{}).RaisesRisk(map[string]any{"attendees": []any{"a@b.c"}}) {
		t.Fatal("a tool without high_risk_if raised the risk")
	}
}
