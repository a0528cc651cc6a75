package calendar

import (
	"context"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/plugin"
)

// Init's failures carry a category and say what to do; the working
// config (the control) initialises.
func TestInitErrors(t *testing.T) {
	good := map[string]any{"caldav_url": "http://127.0.0.1:5232/", "username": "alice"}
	tests := []struct {
		name     string
		config   map[string]any
		password string
		category string // "" for success
		says     string
	}{
		{"works", good, "pw", "", ""},
		{"no password", good, "", plugin.CategoryAuth, "carapace auth set --plugin calendar --key caldav_password"},
		{"blank password", good, "  ", plugin.CategoryAuth, "carapace auth set --plugin calendar --key caldav_password"},
		{"plain http elsewhere", map[string]any{"caldav_url": "http://cal.example.com/", "username": "alice"}, "pw", plugin.CategoryConfig, "use https"},
		{"eventkit here", map[string]any{"backend": "eventkit"}, "", plugin.CategoryConfig, "macOS only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := New(Options{}).Init(context.Background(), tt.config, creds{caldavserverPassword: tt.password})
			if tt.category == "" {
				if err != nil {
					t.Fatalf("Init: %v", err)
				}
				return
			}
			if err == nil || plugin.CategoryOf(err) != tt.category || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("Init: %v (category %s), want %s saying %q", err, plugin.CategoryOf(err), tt.category, tt.says)
			}
			if tt.password != "" && strings.TrimSpace(tt.password) != "" && strings.Contains(err.Error(), tt.password) {
				t.Fatalf("the password is in the error: %v", err)
			}
		})
	}
}
