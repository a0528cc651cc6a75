// Package confine is how a plugin handler is confined by the operating
// system. The core builds the handler's exec.Cmd as usual and hands it to
// Wrap with a Policy: the trees the handler may read and write. On Linux
// the handler then starts through a launcher (bin/carapace-confine, or the
// core's own binary re-executed) that sets no_new_privs, drops every
// capability, restricts itself with Landlock and a seccomp filter, and
// execs the handler, which keeps the pid, the environment and the
// inherited file descriptors. On macOS the handler runs under sandbox-exec
// with a Seatbelt profile (SeatbeltProfile).
//
// What a confined handler can do, on Linux:
//   - files: read (and execute) its Read trees and a fixed system set
//     (Rules shows it), read and write its Write trees, nothing else;
//   - sockets: none of its own (socket(2) fails with EACCES for every
//     family, which is what keeps it from connect(2)ing to a pathname
//     Unix socket such as the core's control socket); only the sockets it
//     inherits and AF_UNIX stream pairs (socketpair(2)), which it may pass
//     over the inherited ones (SCM_RIGHTS);
//   - other processes: no signals, ptrace, /proc entries, priorities or
//     limits beyond its own process (group);
//   - the kernel: no namespaces, mounts, io_uring, BPF, keyrings, modules
//     or capabilities.
//
// Probe says what the kernel gives; Support.Missing says what is lacking
// for a Policy to be enforced. A launcher that cannot enforce a Policy
// exits 126 with one line on stderr and never runs the handler unconfined.
package confine

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// Policy is what one handler may touch. Paths are absolute and clean;
// missing ones are skipped when the policy is applied.
type Policy struct {
	// Plugin is the plugin's name, for messages.
	Plugin string `json:"plugin"`
	// Exec is the handler executable (absolute). It is readable and
	// executable even when no Read tree holds it.
	Exec string `json:"exec"`
	// Read lists the trees the handler may read and execute: the plugin's
	// folder, read grants.
	Read []string `json:"read,omitempty"`
	// Write lists the trees the handler may read, write, create in and
	// remove from: its data folder (with tmp/ inside it), write grants.
	Write []string `json:"write,omitempty"`
}

// ErrPolicy marks a Policy that is not well formed (Validate).
var ErrPolicy = errors.New("confine: invalid policy")

// ErrUnsupported marks what this system cannot enforce (Support.Missing,
// Wrap on a system without confinement).
var ErrUnsupported = errors.New("confine: not supported")

// Validate checks that p is well formed: an executable and trees given as
// absolute, clean paths without control characters, no tree that is the
// whole file system, and a plugin name without control characters. The error wraps ErrPolicy.
func (p Policy) Validate() error {
	if strings.ContainsFunc(p.Plugin, isControl) {
		return fmt.Errorf("%w: plugin %q: the name has a control character", ErrPolicy, p.Plugin)
	}
	if p.Exec == "" {
		return fmt.Errorf("%w: plugin %s: no executable", ErrPolicy, quote(p.Plugin))
	}
	check := func(what, path string) error {
		switch {
		case !filepath.IsAbs(path):
			return fmt.Errorf("%w: plugin %s: %s %q is not an absolute path", ErrPolicy, quote(p.Plugin), what, path)
		case filepath.Clean(path) != path:
			return fmt.Errorf("%w: plugin %s: %s %q is not clean (want %q)", ErrPolicy, quote(p.Plugin), what, path, filepath.Clean(path))
		case strings.ContainsFunc(path, isControl):
			return fmt.Errorf("%w: plugin %s: %s %q has a control character", ErrPolicy, quote(p.Plugin), what, path)
		case what != "executable" && path == "/":
			return fmt.Errorf("%w: plugin %s: %s tree \"/\" is the whole file system", ErrPolicy, quote(p.Plugin), what)
		}
		return nil
	}
	if err := check("executable", p.Exec); err != nil {
		return err
	}
	for _, r := range p.Read {
		if err := check("read", r); err != nil {
			return err
		}
	}
	for _, w := range p.Write {
		if err := check("write", w); err != nil {
			return err
		}
	}
	return nil
}

// isControl reports the characters no path in a Policy may hold: they
// would break the one-line messages and the Seatbelt profile's literals.
func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// quote prints a plugin name safely on one line.
func quote(s string) string {
	if s == "" {
		return "?"
	}
	if strings.ContainsFunc(s, func(r rune) bool { return isControl(r) || r == ' ' || r == '"' }) {
		return fmt.Sprintf("%q", s)
	}
	return s
}
