package control_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/carapace-dev/carapace/core/api"
)

// TestVerifyPlugin: POST /v1/plugins/NAME/verify carries the backend's
// answer, its refusals as their errors, and a malformed name never
// reaches the backend.
func TestVerifyPlugin(t *testing.T) {
	f := newFixture(t)
	f.b.SetStatus(api.Status{Version: "test", Plugins: []api.PluginStatus{
		{Name: "calendar", Healthy: true, State: "healthy"},
		{Name: "echo", Healthy: true, State: "healthy"},
		{Name: "mail", State: "failed"},
	}})
	want := api.PluginCheck{Name: "calendar", Checked: true, Message: "the CalDAV server refused the username and password",
		Fix: "carapace auth set --plugin calendar --key caldav_password"}
	f.b.SetCheck(want)
	if got, err := f.c.VerifyPlugin(t.Context(), "calendar"); err != nil || got != want {
		t.Fatalf("calendar: %+v, %v; want %+v", got, err, want)
	}
	if got, err := f.c.VerifyPlugin(t.Context(), "echo"); err != nil || got != (api.PluginCheck{Name: "echo"}) {
		t.Fatalf("echo, without a check: %+v, %v", got, err)
	}
	for name, wantErr := range map[string]error{"mail": api.ErrConflict, "nope": api.ErrNotFound, "Bad_Name": api.ErrInvalid} {
		if got, err := f.c.VerifyPlugin(t.Context(), name); !errors.Is(err, wantErr) {
			t.Errorf("%s: %+v, %v; want %v", name, got, err, wantErr)
		}
	}
	if got := f.b.Verified(); len(got) != 4 || slices.Contains(got, "Bad_Name") || !slices.Contains(got, "mail") || !slices.Contains(got, "nope") {
		t.Errorf("the backend was asked about %v, want calendar, echo, mail, nope (not the malformed name)", got)
	}
}
