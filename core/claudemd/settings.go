package claudemd

import (
	"encoding/json"
	"strconv"
	"time"
)

// Permission rules of every session: ipc and the file tools without asking,
// the web tools denied. No blanket Bash deny: in Claude Code a deny beats
// any allow, so denying "Bash" would also deny ipc. Other commands are
// neither allowed nor denied, which in a non-interactive session means
// refused.
var (
	AllowRules = []string{"Bash(ipc:*)", "Read", "Edit", "Write", "Glob", "Grep", "LS", "TodoWrite"}
	DenyRules  = []string{"WebFetch", "WebSearch"}
)

// Paths inside the container (see core/runtime) that the managed settings
// name: the agent's working directory and its Claude Code state.
const (
	workspaceDir = "/workspace"
	claudeDir    = "/home/agent/.claude"
)

// ShadowedWorkspace are the places in the workspace (relative to it, the
// agent's working directory) where Claude Code looks for project
// instructions, settings or MCP servers; folders end with "/".
var ShadowedWorkspace = []string{".claude/", "CLAUDE.md", "CLAUDE.local.md", ".mcp.json"}

// ShadowedClaude are the places under ~/.claude (relative to it) where
// Claude Code looks for user rules, subagents, commands, output styles and
// auto memory; folders end with "/". ~/.claude/CLAUDE.md, settings.json and
// skills/ are the core's own read-only mounts.
var ShadowedClaude = []string{"rules/", "agents/", "commands/", "output-styles/", "projects/-workspace/memory/"}

// ManagedSettings returns the agent image's managed settings file, installed
// read-only at /etc/claude-code/managed-settings.json
// (Resources/agent/managed-settings.json is this output; a test keeps them
// equal).
func ManagedSettings() []byte {
	s := map[string]any{
		"permissions": map[string]any{
			"allow":                        AllowRules,
			"deny":                         DenyRules,
			"disableBypassPermissionsMode": "disable",
		},
		"allowManagedPermissionRulesOnly": true,
		"allowManagedHooksOnly":           true,
		"disableAllHooks":                 true,
		"allowManagedMcpServersOnly":      true,
		"allowedMcpServers":               []any{},
		"strictKnownMarketplaces":         []any{},
		"autoMemoryEnabled":               false,
		"claudeMdExcludes": []string{
			"/CLAUDE.md",
			"/CLAUDE.local.md",
			"/.claude/**",
			workspaceDir + "/**/CLAUDE.md",
			workspaceDir + "/**/CLAUDE.local.md",
			workspaceDir + "/**/.claude/**",
			claudeDir + "/rules/**",
			claudeDir + "/projects/**",
		},
	}
	return marshal(s)
}

// Settings returns the session's Claude Code user settings (mounted
// read-only at ~/.claude/settings.json): the environment. Its permission
// rules would be ignored (ManagedSettings holds them); what it holds
// depends on config.toml.
//
// A high-risk tool call holds `ipc` until the user answers, up to
// confirmTimeout; Claude Code's Bash timeout (2 minutes by default) is
// raised past it, so that the wait is not cut short. The environment also
// turns off Claude Code's telemetry, error reporting, auto-updater and
// auto memory: there is no network for the first three to wait on, and
// auto memory is instructions a session would write for the next.
func Settings(confirmTimeout time.Duration) []byte {
	bash := confirmTimeout + time.Minute
	s := map[string]any{
		"autoMemoryEnabled": false,
		"env": map[string]string{
			"BASH_DEFAULT_TIMEOUT_MS":                  strconv.FormatInt(bash.Milliseconds(), 10),
			"BASH_MAX_TIMEOUT_MS":                      strconv.FormatInt(bash.Milliseconds(), 10),
			"CLAUDE_CODE_DISABLE_AUTO_MEMORY":          "1",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
			"DISABLE_AUTOUPDATER":                      "1",
		},
	}
	return marshal(s)
}

func marshal(v any) []byte {
	b, _ := json.MarshalIndent(v, "", "  ") // maps, strings, slices: cannot fail
	return append(b, '\n')
}
