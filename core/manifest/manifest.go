// Package manifest parses a plugin's manifest.json: what the plugin provides
// (tools with their argument schemas and risk levels, channels), what it
// subscribes to and which groups may use it. The plugin's identity is its
// directory name, never a field of the manifest.
package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Risk levels of a tool.
const (
	RiskLow  = "low"  // runs at once
	RiskHigh = "high" // waits for the user's confirmation
)

// Manifest is a plugin's manifest.json.
type Manifest struct {
	Description   string          `json:"description"`
	Version       string          `json:"version"`
	AppCompat     string          `json:"app_compat"`
	Author        Author          `json:"author"`
	Provides      Provides        `json:"provides"`
	Subscribes    []string        `json:"subscribes"`
	AllowedGroups []string        `json:"allowed_groups,omitempty"`
	Session       string          `json:"session,omitempty"`
	Install       json.RawMessage `json:"install,omitempty"`
	ConfigSchema  json.RawMessage `json:"config_schema,omitempty"`
}

// Author names who wrote the plugin.
type Author struct {
	Name string `json:"name"`
	URL  string `json:"url,omitempty"`
}

// Provides lists the plugin's tools and channels.
type Provides struct {
	Channels []string `json:"channels"`
	Tools    []Tool   `json:"tools"`
}

// Tool declares one tool.
type Tool struct {
	Name            string          `json:"name"`
	Description     string          `json:"description"`
	RiskLevel       string          `json:"risk_level"`
	ArgumentsSchema json.RawMessage `json:"arguments_schema"`
}

var toolNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// ReservedTools are the core intrinsics; no plugin may declare them.
var ReservedTools = []string{"list_tools", "get_session_info", "get_diagnostics"}

// Parse decodes and checks a manifest. file names the manifest in errors.
func Parse(file string, data []byte) (*Manifest, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	seen := map[string]bool{}
	for i, t := range m.Provides.Tools {
		ptr := fmt.Sprintf("/provides/tools/%d", i)
		if err := CheckToolName(t.Name); err != nil {
			return nil, fmt.Errorf("%s: %s/name: %w", file, ptr, err)
		}
		for _, r := range ReservedTools {
			if t.Name == r {
				return nil, fmt.Errorf("%s: %s/name: %q is a reserved core tool name; choose another", file, ptr, t.Name)
			}
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("%s: %s/name: tool %q is declared twice", file, ptr, t.Name)
		}
		seen[t.Name] = true
		switch t.RiskLevel {
		case RiskLow, RiskHigh:
		default:
			return nil, fmt.Errorf("%s: %s/risk_level: must be \"low\" or \"high\", not %q", file, ptr, t.RiskLevel)
		}
		if len(t.ArgumentsSchema) == 0 {
			return nil, fmt.Errorf("%s: %s/arguments_schema: missing", file, ptr)
		}
	}
	return &m, nil
}

// CheckToolName enforces snake_case tool names, suggesting the snake_case
// form for a dot- or dash-separated name.
func CheckToolName(name string) error {
	if toolNameRE.MatchString(name) {
		return nil
	}
	s := strings.ToLower(strings.NewReplacer(".", "_", "-", "_", " ", "_").Replace(name))
	if toolNameRE.MatchString(s) {
		return fmt.Errorf("tool name %q must be snake_case: use %q", name, s)
	}
	return fmt.Errorf("tool name %q must match ^[a-z][a-z0-9_]*$", name)
}
