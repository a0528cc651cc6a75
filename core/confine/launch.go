package confine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"syscall"
)

// Launch is the launcher's main (bin/carapace-confine, or a binary that
// links this package re-executed by Wrap). It reads the Policy the core
// put in the environment, removes the launcher's variables, confines the
// thread that will exec (no_new_privs, no capabilities, Landlock, the
// seccomp filter: exec leaves the handler only that thread) and execs the
// Policy's executable with the launcher's arguments after the first, the
// remaining environment and the inherited file descriptors. exec keeps the pid, the process group
// and the parent-death signal.
//
// It does not return. On any failure it writes one line to stderr,
// "carapace-confine: plugin NAME: STAGE: WHY", and exits 126: it never
// execs the handler unconfined.
func Launch() {
	// The bounding set is per thread, and exec runs on this one.
	runtime.LockOSThread()
	raw, ok := os.LookupEnv(envPolicy)
	if !ok {
		fail(os.Stderr, "", "policy", fmt.Errorf("%s is not set: the launcher runs only for the core", envPolicy))
	}
	p, err := decodePolicy(raw)
	if err != nil {
		fail(os.Stderr, nameOf(raw), "policy", err)
	}
	if len(os.Args) < 2 {
		fail(os.Stderr, p.Plugin, "arguments", errors.New("no handler arguments (argv[0] at least)"))
	}
	if err := enforce(p, Probe()); err != nil {
		fail(os.Stderr, p.Plugin, "confine", err)
	}
	err = syscall.Exec(p.Exec, os.Args[1:], withoutOurs(os.Environ()))
	fail(os.Stderr, p.Plugin, "exec "+p.Exec, err)
}

// nameOf is the plugin's name in a policy that did not decode, for the
// message, when it can be read at all.
func nameOf(raw string) string {
	var v struct {
		Plugin string `json:"plugin"`
	}
	_ = json.Unmarshal([]byte(raw), &v)
	return v.Plugin
}

// fail writes the launcher's one line to w and exits 126.
func fail(w io.Writer, plugin, stage string, err error) {
	why := strings.TrimPrefix(err.Error(), "confine: ")
	fmt.Fprintln(w, oneLine(fmt.Sprintf("carapace-confine: plugin %s: %s: %s", quote(plugin), stage, why)))
	os.Exit(126)
}
