package claudemd

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bmatcuk/doublestar/v4"
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
	if strings.Count(md, "\n## ") != 2 || !strings.Contains(md, "- [fact] `x ## y` (0d ago)") {
		t.Errorf("brief not rendered as one section:\n%s", md)
	}
	if md := string(Render(Params{Group: "g", Memory: MemoryUnavailable})); !strings.Contains(md, "ipc tool.invoke.memory_brief") {
		t.Errorf("an unavailable brief does not tell the agent how to load it:\n%s", md)
	}
}

func TestSettings(t *testing.T) {
	var s struct {
		Permissions       *struct{}
		AutoMemoryEnabled *bool
		Env               map[string]string
	}
	if err := json.Unmarshal(Settings(5*time.Minute), &s); err != nil {
		t.Fatal(err)
	}
	if s.Permissions != nil {
		t.Error("user settings carry permission rules: managed settings hold them, and these would be ignored")
	}
	if ms, _ := strconv.Atoi(s.Env["BASH_DEFAULT_TIMEOUT_MS"]); ms <= int((5 * time.Minute).Milliseconds()) {
		t.Errorf("Bash timeout %d ms does not outlast a 5 min confirmation", ms)
	}
	if s.Env["DISABLE_AUTOUPDATER"] != "1" || s.Env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] != "1" || s.Env["CLAUDE_CODE_DISABLE_AUTO_MEMORY"] != "1" {
		t.Errorf("env = %v", s.Env)
	}
	if s.AutoMemoryEnabled == nil || *s.AutoMemoryEnabled {
		t.Error("auto memory is not turned off")
	}
}

// The agent image's managed settings file is ManagedSettings, byte for byte.
func TestManagedSettingsFile(t *testing.T) {
	testutil.Golden(t, filepath.Join("..", "..", "Resources", "agent", "managed-settings.json"), ManagedSettings())
}

// managed is the part of managed-settings.json the tests read.
type managed struct {
	Permissions struct {
		Allow, Deny                  []string
		DisableBypassPermissionsMode string
	}
	AllowManagedPermissionRulesOnly, AllowManagedHooksOnly, DisableAllHooks, AllowManagedMcpServersOnly bool
	AllowedMcpServers, StrictKnownMarketplaces                                                          []any
	AutoMemoryEnabled                                                                                   *bool
	Hooks                                                                                               map[string]any
	ClaudeMdExcludes                                                                                    []string
}

func TestManagedSettings(t *testing.T) {
	var m managed
	if err := json.Unmarshal(ManagedSettings(), &m); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(m.Permissions.Allow, "Bash(ipc:*)") {
		t.Errorf("ipc is not allowed: %v", m.Permissions.Allow)
	}
	for _, d := range m.Permissions.Deny {
		if d == "Bash" || strings.HasPrefix(d, "Bash(") {
			t.Errorf("a Bash deny %q would beat the ipc allow", d)
		}
	}
	for _, a := range m.Permissions.Allow {
		if a == "Bash" || a == "WebFetch" || a == "WebSearch" || strings.HasPrefix(a, "Bash(") && a != "Bash(ipc:*)" {
			t.Errorf("allowed %q reaches beyond ipc", a)
		}
	}
	if !slices.Contains(m.Permissions.Deny, "WebFetch") || !slices.Contains(m.Permissions.Deny, "WebSearch") {
		t.Errorf("web tools not denied: %v", m.Permissions.Deny)
	}
	if !m.AllowManagedPermissionRulesOnly || !m.AllowManagedHooksOnly || !m.DisableAllHooks || !m.AllowManagedMcpServersOnly ||
		m.AllowedMcpServers == nil || len(m.AllowedMcpServers) != 0 || m.StrictKnownMarketplaces == nil || len(m.StrictKnownMarketplaces) != 0 ||
		m.Permissions.DisableBypassPermissionsMode != "disable" || m.Hooks != nil || m.AutoMemoryEnabled == nil || *m.AutoMemoryEnabled {
		t.Errorf("managed settings do not lock rules, hooks, MCP servers, plugins, bypass mode and auto memory: %+v", m)
	}
}

// claudeMdExcludes names every instruction file a session could leave in
// its workspace or its ~/.claude, and never the core's own CLAUDE.md.
func TestManagedSettingsExcludes(t *testing.T) {
	var m managed
	if err := json.Unmarshal(ManagedSettings(), &m); err != nil {
		t.Fatal(err)
	}
	excluded := func(p string) bool {
		for _, g := range m.ClaudeMdExcludes {
			if ok, err := doublestar.Match(g, p); err != nil {
				t.Fatalf("glob %q: %v", g, err)
			} else if ok {
				return true
			}
		}
		return false
	}
	for _, p := range []string{
		"/workspace/CLAUDE.md", "/workspace/CLAUDE.local.md", "/workspace/.claude/CLAUDE.md",
		"/workspace/.claude/rules/x.md", "/workspace/.claude/rules/deep/y.md", "/workspace/sub/CLAUDE.md",
		"/workspace/a/b/CLAUDE.local.md", "/workspace/a/.claude/rules/z.md", "/CLAUDE.md", "/CLAUDE.local.md",
		"/.claude/rules/x.md", "/home/agent/.claude/rules/x.md", "/home/agent/.claude/rules/a/b.md",
		"/home/agent/.claude/projects/-workspace/memory/MEMORY.md",
	} {
		if !excluded(p) {
			t.Errorf("%s is not excluded", p)
		}
	}
	for _, p := range []string{"/home/agent/.claude/CLAUDE.md", "/workspace/notes.md", "/etc/claude-code/CLAUDE.md"} {
		if excluded(p) {
			t.Errorf("%s is excluded", p)
		}
	}
}
