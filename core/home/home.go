// Package home resolves $CARAPACE_HOME and names every path the core keeps
// under it, so that the daemon, the CLI and the tests agree on one layout.
package home

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// Env is the environment variable that selects the home directory.
const Env = "CARAPACE_HOME"

// Dir is a Carapace home directory.
type Dir string

// Resolve returns the home: flag if set, else $CARAPACE_HOME, else
// ~/.carapace. The result is absolute.
func Resolve(flag string) (Dir, error) {
	p := flag
	if p == "" {
		p = os.Getenv(Env)
	}
	if p == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("resolve home: %w (set %s or pass --home)", err, Env)
		}
		p = filepath.Join(h, ".carapace")
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("resolve home %s: %w", p, err)
	}
	return Dir(abs), nil
}

// Path joins elements onto the home.
func (d Dir) Path(elem ...string) string {
	return filepath.Join(append([]string{string(d)}, elem...)...)
}

// Config is config.toml.
func (d Dir) Config() string { return d.Path("config.toml") }

// RunDir holds sockets and the pid file (0700).
func (d Dir) RunDir() string { return d.Path("run") }

// ControlSocket is the control API's Unix socket (0600).
func (d Dir) ControlSocket() string { return d.Path("run", "control.sock") }

// PidFile holds the running core's pid.
func (d Dir) PidFile() string { return d.Path("run", "carapace.pid") }

// SessionsDir holds one socket per live agent session.
func (d Dir) SessionsDir() string { return d.Path("run", "sessions") }

// SessionSocket is the socket of session id.
func (d Dir) SessionSocket(id string) string { return d.Path("run", "sessions", id+".sock") }

// LogsDir holds the audit log.
func (d Dir) LogsDir() string { return d.Path("logs") }

// AuditLog is the JSON Lines audit log.
func (d Dir) AuditLog() string { return d.Path("logs", "audit.jsonl") }

// PluginsDir holds user plugins, one folder each.
func (d Dir) PluginsDir() string { return d.Path("plugins") }

// Pins records the SHA-256 of every installed plugin's handler, written by
// `carapace plugin install` and checked before each start.
func (d Dir) Pins() string { return d.Path("pins.json") }

// PluginSocketDir holds the per-plugin sockets of out-of-process handlers.
func (d Dir) PluginSocketDir() string { return d.Path("run", "plugins") }

// CredentialsDir holds the file credential store (where the macOS Keychain
// is not used).
func (d Dir) CredentialsDir() string { return d.Path("credentials") }

// DataDir is the private data directory of a plugin.
func (d Dir) DataDir(plugin string) string { return d.Path("data", plugin) }

// ConversationsDir holds the core's record of which named conversations
// are tainted (core/provenance's Conversations). It is the core's alone:
// no agent container or plugin has it mounted.
func (d Dir) ConversationsDir() string { return d.Path("conversations") }

// TasksDB is the scheduler's database (core/tasks).
func (d Dir) TasksDB() string { return d.Path("tasks.sqlite") }

// Ensure creates the home and its private directories with safe modes.
func (d Dir) Ensure() error {
	for _, p := range []struct {
		path string
		mode os.FileMode
	}{
		{string(d), 0o700}, {d.RunDir(), 0o700}, {d.SessionsDir(), 0o700},
		{d.LogsDir(), 0o700}, {d.Path("data"), 0o700}, {d.PluginsDir(), 0o700},
		{d.ConversationsDir(), 0o700},
	} {
		if err := os.MkdirAll(p.path, p.mode); err != nil {
			return fmt.Errorf("create %s: %w", p.path, err)
		}
		if err := os.Chmod(p.path, p.mode); err != nil {
			return fmt.Errorf("chmod %s: %w", p.path, err)
		}
	}
	return nil
}

var groupRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ErrBadGroup is returned for a group name that could not safely become a path.
var ErrBadGroup = errors.New("group names are 1-64 characters of [a-zA-Z0-9_-]")

// CheckGroup validates a group name before it is used anywhere.
func CheckGroup(g string) error {
	if !groupRE.MatchString(g) {
		return fmt.Errorf("group %q: %w", g, ErrBadGroup)
	}
	return nil
}
