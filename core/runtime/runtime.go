// Package runtime describes where an agent session runs: the container an
// engine starts for it, with the hardening every engine must apply, and the
// interface the core drives engines through. The engines live in their own
// packages: core/runtime/docker (Docker and Podman) and applecontainer
// (Apple's `container`); "none" runs the agent as a local process and has
// no engine.
//
// Every engine runs the agent with no network (loopback only), a read-only
// root with tmpfs at /tmp and $HOME, no capabilities, a non-root user, an
// init process, and CPU and memory limits; no-new-privileges and a pids
// limit where the engine has them (Apple's does not: its boundary is the
// VM). Only the mounts of a Spec reach the container.
package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	goruntime "runtime"
	"strings"
)

// Paths inside the agent container. Every one is created in the image, so
// that nothing has to be created on the read-only root.
const (
	SocketPath    = "/run/carapace/ipc.sock" // the session's IPC socket, a single-file mount
	WorkspacePath = "/workspace"             // the group's workspace, read-write
	HomePath      = "/home/agent"            // $HOME: a tmpfs, with the Claude Code state mounted inside
	ClaudeDir     = "/home/agent/.claude"    // the group's Claude Code state, read-write
	SkillsPath    = "/home/agent/.claude/skills"
	ClaudeMDPath  = "/home/agent/.claude/CLAUDE.md"
	SettingsPath  = "/home/agent/.claude/settings.json"
)

// Labels put on every container, so that containers left by a core that
// crashed can be found and removed.
const (
	LabelSession  = "carapace.session"  // the session id
	LabelInstance = "carapace.instance" // the core's home, hashed: several cores can share an engine
	LabelVersion  = "carapace.version"  // the core's version
)

// Image returns the agent image of a Carapace version,
// carapace-agent:<version>: what runtime.image means when config.toml
// does not set it, and the tag `carapace setup --build-image` and `make
// image-agent` build.
func Image(version string) string { return "carapace-agent:" + version }

// AgentUser is the uid:gid the agent runs as.
const AgentUser = "1000:1000"

// Mount is a host path made visible in the container.
type Mount struct {
	Source   string // absolute host path: a folder, a file or a socket
	Target   string // absolute container path
	ReadOnly bool
}

// Limits bound the container's resources.
type Limits struct {
	CPUs     float64 // 0: the engine's default; engines that take whole CPUs (Apple) round up
	MemoryMB int     // 0: the engine's default
	Pids     int     // 0: the engine's default; ignored by engines without a pids limit
}

// DefaultLimits are the limits of an agent container (Claude Code needs
// several GiB).
var DefaultLimits = Limits{CPUs: 2, MemoryMB: 4096, Pids: 256}

// Spec is one agent container.
type Spec struct {
	Name   string            // the container's name, e.g. carapace-<session>
	Image  string            // the image reference
	Labels map[string]string // LabelSession, LabelInstance, LabelVersion at least
	Mounts []Mount
	// Env is the process environment. Never put a secret here: engines
	// show it in their inspect output.
	Env    []string
	Cmd    []string // empty: the image's default command
	User   string   // uid:gid; empty means AgentUser
	Limits Limits
}

var (
	nameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{1,62}$`) // Apple's rule, the strictest
	userRE = regexp.MustCompile(`^[0-9]{1,10}(:[0-9]{1,10})?$`)
)

// Check validates s before any engine sees it: names an engine accepts,
// absolute and clean paths, no mount source nested in another's (Apple's
// engine silently drops the outer share), no duplicate targets, and
// environment entries of the KEY=value form.
func (s *Spec) Check() error {
	if !nameRE.MatchString(s.Name) {
		return fmt.Errorf("container name %q: %w", s.Name, ErrInvalidSpec)
	}
	if s.Image == "" || strings.HasPrefix(s.Image, "-") || strings.ContainsAny(s.Image, " \t\n") {
		return fmt.Errorf("image %q: %w", s.Image, ErrInvalidSpec)
	}
	targets := map[string]bool{}
	for i, m := range s.Mounts {
		for _, p := range []string{m.Source, m.Target} {
			if !path.IsAbs(p) || path.Clean(p) != p || strings.ContainsAny(p, ",:\n") {
				return fmt.Errorf("mount %d: path %q must be absolute and clean, without ',' or ':': %w", i, p, ErrInvalidSpec)
			}
		}
		if targets[m.Target] {
			return fmt.Errorf("mount %d: target %s mounted twice: %w", i, m.Target, ErrInvalidSpec)
		}
		targets[m.Target] = true
		for j, o := range s.Mounts {
			if i != j && strings.HasPrefix(m.Source, o.Source+"/") {
				return fmt.Errorf("mount %d: source %s is inside mount %d's source %s: %w", i, m.Source, j, o.Source, ErrInvalidSpec)
			}
		}
	}
	if s.User != "" && !userRE.MatchString(s.User) {
		return fmt.Errorf("user %q: want uid or uid:gid: %w", s.User, ErrInvalidSpec)
	}
	for _, e := range s.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" || strings.HasPrefix(k, "-") {
			return fmt.Errorf("environment entry %q is not KEY=value: %w", e, ErrInvalidSpec)
		}
	}
	for k := range s.Labels {
		if k == "" || strings.HasPrefix(k, "-") || strings.ContainsAny(k, "=\n") {
			return fmt.Errorf("label %q: %w", k, ErrInvalidSpec)
		}
	}
	return nil
}

// Errors of engines.
var (
	// ErrInvalidSpec: the Spec cannot be run as given.
	ErrInvalidSpec = errors.New("invalid container spec")
	// ErrUnavailable: the engine is not installed, not running, or too old;
	// the error says which and what to do.
	ErrUnavailable = errors.New("container engine unavailable")
	// ErrNoImage: the engine does not have the image the Spec names (it
	// is never pulled).
	ErrNoImage = errors.New("the image is not in the engine's store")
)

// Info describes an engine that is ready.
type Info struct {
	Engine  string // "docker", "podman", "apple"
	Version string // the engine's version
	// Bin is the engine CLI that Check ran, and BinFrom how it was found:
	// "PATH", "configured", or the installer whose location it is when
	// PATH does not have it ("Homebrew, not on PATH"). Engines that do
	// not say leave them empty.
	Bin, BinFrom string
}

// IO is where a container's output goes.
type IO struct {
	Stdout, Stderr io.Writer
}

// Engine runs agent containers. Implementations shell out to the engine's
// CLI; every method honours ctx.
type Engine interface {
	// Name is the engine's name in config.toml: "docker", "podman", "apple".
	Name() string
	// Check reports whether the engine is installed, running and recent
	// enough, wrapping ErrUnavailable with what to do when it is not.
	Check(ctx context.Context) (Info, error)
	// Run starts the container and waits for its process to exit, copying
	// its output to io; it returns the exit status (-1 when there is none).
	// Cancelling ctx stops the container (and Run still waits for it to go,
	// which can take some seconds: allow ~15 s) and returns an error
	// wrapping context.Cause(ctx). An engine's own failure to start the
	// container (image missing, name taken) may look like the agent
	// exiting 1 where the engine's CLI does not tell them apart.
	Run(ctx context.Context, s Spec, io IO) (exit int, err error)
	// Stop stops and removes the container named name; a missing one is
	// not an error.
	Stop(ctx context.Context, name string) error
	// List returns the names of the containers, running or not, whose
	// label key has value.
	List(ctx context.Context, key, value string) ([]string, error)
}

// ImageIdentifier is an Engine that can tell the id of an image in its
// store, so that a rebuilt image under the same reference is noticed (the
// core's warm containers must not outlive their image).
type ImageIdentifier interface {
	// ImageID returns the id of the image ref names in the engine's store.
	ImageID(ctx context.Context, ref string) (string, error)
}

// Candidates returns the engines runtime.engine = name stands for, in the
// order they are tried: "auto" (or "") is Apple container on macOS, then
// Docker, then Podman; "none" is no engine; any other name is itself. The
// core's session runner, `carapace doctor` and `carapace setup` resolve
// the setting here, so that "auto" means one thing everywhere.
func Candidates(name string) []string {
	switch name {
	case "none":
		return nil
	case "auto", "":
		var out []string
		if goruntime.GOOS == "darwin" {
			out = append(out, "apple")
		}
		return append(out, "docker", "podman")
	}
	return []string{name}
}
