package claudemd

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/internal/testutil"
)

func TestRender(t *testing.T) {
	brief := &plugin.Brief{EntryCount: 2, Entries: []plugin.BriefEntry{
		{Type: "preference", Behavioral: true, Content: "Prefers short answers", AgeDays: 2},
		{Type: "fact", Content: "The dog is called Luna\n# not a heading", AgeDays: 40},
	}}
	for _, tc := range []struct {
		name string
		p    Params
	}{
		{"no-memory.md", Params{Group: "main"}},
		{"unisolated.md", Params{Group: "dev", Unisolated: true}},
		{"brief.md", Params{Group: "family", Memory: MemoryLoaded, Brief: brief}},
		{"unavailable.md", Params{Group: "main", Memory: MemoryUnavailable}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testutil.Golden(t, filepath.Join("testdata", tc.name), Render(tc.p))
		})
	}
}

// The memory section appears exactly when there is memory to speak of.
func TestRenderMemorySection(t *testing.T) {
	if md := string(Render(Params{Group: "g"})); strings.Contains(md, "Memory") || strings.Contains(md, "memory_brief") {
		t.Errorf("memory mentioned with no memory plugin:\n%s", md)
	}
	md := string(Render(Params{Group: "g", Memory: MemoryLoaded, Brief: &plugin.Brief{Entries: []plugin.BriefEntry{{Type: "fact", Content: "x\n## y"}}}}))
	if strings.Count(md, "\n## ") != 2 || !strings.Contains(md, "- [fact] x ## y (0d ago)") {
		t.Errorf("brief not rendered as one section:\n%s", md)
	}
	if md := string(Render(Params{Group: "g", Memory: MemoryUnavailable})); !strings.Contains(md, "ipc tool.invoke.memory_brief") {
		t.Errorf("an unavailable brief does not tell the agent how to load it:\n%s", md)
	}
}

func TestSettings(t *testing.T) {
	var s struct {
		Permissions struct{ Allow, Deny []string }
		Env         map[string]string
	}
	if err := json.Unmarshal(Settings(5*time.Minute), &s); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(s.Permissions.Allow, "Bash(ipc:*)") {
		t.Errorf("ipc is not allowed: %v", s.Permissions.Allow)
	}
	for _, d := range s.Permissions.Deny {
		if d == "Bash" || strings.HasPrefix(d, "Bash(") {
			t.Errorf("a Bash deny %q would beat the ipc allow", d)
		}
	}
	for _, a := range s.Permissions.Allow {
		if a == "Bash" || a == "WebFetch" || a == "WebSearch" || strings.HasPrefix(a, "Bash(") && a != "Bash(ipc:*)" {
			t.Errorf("allowed %q reaches beyond ipc", a)
		}
	}
	if !slices.Contains(s.Permissions.Deny, "WebFetch") || !slices.Contains(s.Permissions.Deny, "WebSearch") {
		t.Errorf("web tools not denied: %v", s.Permissions.Deny)
	}
	if ms, _ := strconv.Atoi(s.Env["BASH_DEFAULT_TIMEOUT_MS"]); ms <= int((5 * time.Minute).Milliseconds()) {
		t.Errorf("Bash timeout %d ms does not outlast a 5 min confirmation", ms)
	}
	if s.Env["DISABLE_AUTOUPDATER"] != "1" || s.Env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] != "1" {
		t.Errorf("env = %v", s.Env)
	}
}
