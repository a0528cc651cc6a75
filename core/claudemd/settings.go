package claudemd

import (
	"encoding/json"
	"strconv"
	"time"
)

// Settings returns the session's Claude Code settings.json (mounted
// read-only at ~/.claude/settings.json). It allows `ipc` and the file tools
// without asking, and denies the tools that reach the network. It has no
// blanket Bash deny: in Claude Code a deny beats any allow, so denying
// "Bash" would also deny `ipc`. Other commands are neither allowed nor
// denied, which in a non-interactive session means refused.
//
// A high-risk tool call holds `ipc` until the user answers, up to
// confirmTimeout; Claude Code's Bash timeout (2 minutes by default) is
// raised past it, so that the wait is not cut short. The environment also
// turns off Claude Code's telemetry, error reporting and auto-updater:
// there is no network for them to wait on.
func Settings(confirmTimeout time.Duration) []byte {
	bash := confirmTimeout + time.Minute
	s := map[string]any{
		"permissions": map[string]any{
			"allow": []string{"Bash(ipc:*)", "Read", "Edit", "Write", "Glob", "Grep", "LS", "TodoWrite"},
			"deny":  []string{"WebFetch", "WebSearch"},
		},
		"env": map[string]string{
			"BASH_DEFAULT_TIMEOUT_MS":                  strconv.FormatInt(bash.Milliseconds(), 10),
			"BASH_MAX_TIMEOUT_MS":                      strconv.FormatInt(bash.Milliseconds(), 10),
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
			"DISABLE_AUTOUPDATER":                      "1",
		},
	}
	b, _ := json.MarshalIndent(s, "", "  ") // maps of strings: cannot fail
	return append(b, '\n')
}
