package calendar

import (
	"strings"
	"testing"

	coremanifest "github.com/carapace-dev/carapace/core/manifest"
)

// The manifest passes the core's own check, and declares the risk rules
// the plugin relies on: deleting is high-risk, creating or changing an
// event is high-risk exactly when it names attendees (or would notify
// them), and every tool that returns calendar text marks it untrusted
// (calendar_create returns only what the agent gave, and the server's id).
func TestManifestRisk(t *testing.T) {
	m, probs := coremanifest.Check(".", coremanifest.Options{})
	for _, p := range probs {
		if !p.Warning {
			t.Errorf("manifest: %s", p)
		}
	}
	if m == nil {
		t.Fatal("the core refuses the manifest")
	}
	want := map[string]struct {
		risk      string
		highIf    []string
		untrusted bool
	}{
		"calendar_list":     {"low", nil, true},
		"calendar_create":   {"low", []string{"attendees"}, false}, // its result is what the agent gave
		"calendar_update":   {"low", []string{"attendees", "notify_attendees"}, true},
		"calendar_delete":   {"high", nil, false},
		"reminder_list":     {"low", nil, true},
		"reminder_create":   {"low", nil, false},
		"reminder_complete": {"low", nil, true},
	}
	if len(m.Provides.Tools) != len(want) {
		t.Fatalf("%d tools, want %d", len(m.Provides.Tools), len(want))
	}
	for _, tl := range m.Provides.Tools {
		w, ok := want[tl.Name]
		if !ok {
			t.Errorf("unexpected tool %s", tl.Name)
			continue
		}
		if tl.RiskLevel != w.risk || tl.UntrustedOutput != w.untrusted || len(tl.HighRiskIf) != len(w.highIf) {
			t.Errorf("%s: risk %s, high_risk_if %v, untrusted %v; want %s, %v, %v", tl.Name, tl.RiskLevel, tl.HighRiskIf, tl.UntrustedOutput, w.risk, w.highIf, w.untrusted)
		}
		for i := range w.highIf {
			if i < len(tl.HighRiskIf) && tl.HighRiskIf[i] != w.highIf[i] {
				t.Errorf("%s: high_risk_if %v, want %v", tl.Name, tl.HighRiskIf, w.highIf)
			}
		}
	}
	// The rule as the pipeline applies it to calendar_create's calls.
	for _, tl := range m.Provides.Tools {
		if tl.Name != "calendar_create" {
			continue
		}
		if tl.RaisesRisk(map[string]any{"title": "x", "start": "2026-10-27"}) {
			t.Error("an event without attendees is high-risk")
		}
		if !tl.RaisesRisk(map[string]any{"title": "x", "start": "2026-10-27", "attendees": []any{"bob@example.com"}}) {
			t.Error("an invitation is not high-risk")
		}
	}
	if len(m.Network.HostsFromConfig) != 1 || m.Network.HostsFromConfig[0] != "caldav_url" || m.Network.Public {
		t.Errorf("network %+v: want the configured server only", m.Network)
	}
}

// The config: plain http only to the loopback, an IANA zone, the
// CalDAV settings present.
func TestParseConfig(t *testing.T) {
	ok := map[string]any{"caldav_url": "https://caldav.fastmail.com/", "username": "me@example.com", "time_zone": "America/New_York"}
	tests := []struct {
		name string
		cfg  map[string]any
		bad  string // "" when valid; else a part of the error
	}{
		{"https", ok, ""},
		{"http loopback", map[string]any{"caldav_url": "http://127.0.0.1:5232/", "username": "a"}, ""},
		{"http localhost", map[string]any{"caldav_url": "http://localhost:5232/", "username": "a"}, ""},
		{"http remote", map[string]any{"caldav_url": "http://cal.example.com/", "username": "a"}, "password would cross the network in clear"},
		{"http private", map[string]any{"caldav_url": "http://192.168.1.2:5232/", "username": "a"}, "use https"},
		{"ftp", map[string]any{"caldav_url": "ftp://cal.example.com/", "username": "a"}, "only https"},
		{"user in URL", map[string]any{"caldav_url": "https://me:pw@cal.example.com/", "username": "a"}, "must not carry a user"},
		{"no username", map[string]any{"caldav_url": "https://cal.example.com/"}, "needs caldav_url and username"},
		{"bad zone", map[string]any{"caldav_url": "https://cal.example.com/", "username": "a", "time_zone": "Paris"}, "not an IANA zone"},
		{"eventkit", map[string]any{"backend": "eventkit"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig(tt.cfg)
			switch {
			case tt.bad == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.bad != "" && (err == nil || !strings.Contains(err.Error(), tt.bad)):
				t.Fatalf("got %v, want an error saying %q", err, tt.bad)
			}
			if tt.name == "https" && c.Location.String() != "America/New_York" {
				t.Fatalf("zone %v", c.Location)
			}
		})
	}
}
