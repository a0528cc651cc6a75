package calendar

import (
	"context"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/plugin"
)

// Bad times are refused before any backend call, each with a message
// naming the argument and the forms accepted; a good call (the control)
// goes through.
func TestBadTimes(t *testing.T) {
	st := newMemEK()
	h := NewWithBackend(NewEventKit(st, Config{Location: paris(t)}, nil), Config{Location: paris(t)})
	tests := []struct {
		tool  string
		args  map[string]any
		field string // "" for success
		says  string
	}{
		{"calendar_create", map[string]any{"title": "ok", "start": "2026-10-27T09:00", "end": "2026-10-27T10:00"}, "", ""},
		{"calendar_create", map[string]any{"title": "x", "start": "27/10/2026 9h"}, "start", "is not a date"},
		{"calendar_create", map[string]any{"title": "x", "start": "2026-10-27T09:00"}, "end", "give end or duration"},
		{"calendar_create", map[string]any{"title": "x", "start": "2026-10-27T09:00", "end": "2026-10-27T08:00"}, "end", "before the start"},
		{"calendar_create", map[string]any{"title": "x", "start": "2026-10-27T09:00", "end": "2026-10-27T10:00", "duration": "1h"}, "duration", "not both"},
		{"calendar_create", map[string]any{"title": "x", "start": "2026-10-27T09:00", "duration": "forever"}, "duration", "is not a duration"},
		{"calendar_create", map[string]any{"title": "x", "start": "2026-10-27", "all_day": false}, "start", "give a time"},
		{"calendar_create", map[string]any{"title": "x", "start": "2026-10-27T09:00", "end": "2026-10-28"}, "end", "set all_day"},
		{"calendar_create", map[string]any{"title": "x", "start": "2026-10-27", "end": "2026-10-26"}, "end", "before the first"},
		{"calendar_list", map[string]any{"from": "2026-10-27", "to": "2026-10-26"}, "to", "range is empty"},
		{"calendar_list", map[string]any{"from": "2026-01-01", "to": "2027-06-01"}, "to", "longer than 366 days"},
		{"reminder_create", map[string]any{"title": "x", "due": "tomorrow"}, "due", "is not a date"},
	}
	for _, tt := range tests {
		t.Run(tt.tool+" "+tt.says, func(t *testing.T) {
			before := len(st.events) + len(st.reminders)
			_, err := h.Invoke(context.Background(), &plugin.Request{Tool: tt.tool, Arguments: tt.args})
			if tt.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			te, ok := plugin.AsToolError(err)
			if !ok || te.Code != "BAD_TIME" || te.Field != tt.field || !strings.Contains(te.Message, tt.says) {
				t.Fatalf("got %v, want BAD_TIME on %s saying %q", err, tt.field, tt.says)
			}
			if len(st.events)+len(st.reminders) != before {
				t.Fatal("a refused call wrote something")
			}
		})
	}
}
