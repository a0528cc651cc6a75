package api

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Session is a live agent session.
type Session struct {
	ID      string    `json:"id"`      // the core's id for the session
	Group   string    `json:"group"`   // the group whose tools and memory the agent gets
	Socket  string    `json:"socket"`  // the session's IPC socket on the host
	Runtime string    `json:"runtime"` // the container runtime, or "none"
	Started time.Time `json:"started"` // when the session opened
	// Skills is the session's read-only skill tree on the host (Claude
	// Code's .claude/skills layout), for the runtime to mount.
	Skills string `json:"skills,omitempty"`
	// ClaudeMD is the session's read-only CLAUDE.md on the host: the
	// agent's instructions and, when a memory plugin is healthy, the memory
	// brief.
	ClaudeMD string `json:"claude_md,omitempty"`
}

// SessionRequest asks the core for a session.
type SessionRequest struct {
	Group string `json:"group"`
	// Runtime is "" or "none" for an agent the client runs itself (no
	// isolation: plugin development); "container" for the engine of
	// config.toml's [runtime]; or an engine: "docker", "podman", "apple".
	Runtime string `json:"runtime,omitempty"`
	// Command replaces the image's agent command (container runtimes).
	Command []string `json:"command,omitempty"`
	// Prompt is given to the image's agent through a read-only file, never
	// through the environment (container runtimes). It is what the user
	// wrote: the URLs in it are given (docs/SECURITY.md, "Provenance and
	// taint"). With the runtime none, where the client runs the agent
	// itself, the prompt is only that record, and the same file.
	Prompt string `json:"prompt,omitempty"`
	// Conversation, when set, names a conversation of the group (one per
	// chat, say): the agent continues it, or starts it under that name
	// (container runtimes; see core/agent).
	Conversation string `json:"conversation,omitempty"`
}

// Runtimes are the values of SessionRequest.Runtime.
var Runtimes = []string{"none", "container", "docker", "podman", "apple"}

// Check refuses, with an error wrapping ErrInvalid, a request no core
// could serve: an unknown runtime, or a command or prompt without a
// container. The group's name is the caller's to check (home.CheckGroup).
func (r *SessionRequest) Check() error {
	switch {
	case r.Runtime != "" && !slices.Contains(Runtimes, r.Runtime):
		return fmt.Errorf("%w: runtime %q: use one of %s", ErrInvalid, r.Runtime, strings.Join(Runtimes, ", "))
	case (r.Runtime == "" || r.Runtime == "none") && len(r.Command) > 0:
		return fmt.Errorf("%w: a command needs a container runtime; with the runtime none the client runs the agent itself", ErrInvalid)
	case len(r.Command) > 0 && r.Prompt != "":
		return fmt.Errorf("%w: give a command or a prompt, not both", ErrInvalid)
	}
	return nil
}

// Agent is the agent of a session the core runs in a container, as the
// core hands it to the control server, which streams its Output to the
// client that opened the session.
type Agent struct {
	// Output carries the agent's output, then one last Output with Exit or
	// Error; it is closed after that, or when the session is closed first.
	// An Output with Done may come before the last: the agent has finished
	// and its container is going.
	Output <-chan Output
}

// Output is one piece of a container agent's stream: the lines after the
// Session on the stream of POST /v1/sessions.
type Output struct {
	Stream string `json:"stream,omitempty"` // "stdout" or "stderr"
	Data   string `json:"data,omitempty"`
	Exit   *int   `json:"exit,omitempty"`  // the agent's exit status: the last line
	Error  string `json:"error,omitempty"` // why the agent could not run or was stopped: the last line
	// Done is the agent's exit status as its image's entrypoint reported
	// it on stdout once the agent had exited by itself, before the engine
	// has torn its container down (tens of milliseconds sooner than Exit,
	// which still follows). The agent's output before it is complete. An
	// agent can forge it (it writes its own stdout): it can only end its
	// own answer early.
	Done *int `json:"done,omitempty"`
}
