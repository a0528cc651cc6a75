// Command carapace-confine is the launcher of confined plugin handlers on
// Linux. The core starts it in place of a handler (core/confine.Wrap),
// with the handler's policy in its environment; it confines itself
// (no_new_privs, no capabilities, Landlock, a seccomp filter) and execs
// the handler, which keeps its pid, arguments, environment and inherited
// file descriptors. It is not meant to be run by hand: on any failure it
// prints one line, "carapace-confine: plugin NAME: STAGE: WHY", and
// exits 126 without running the handler.
//
// It is static, has no cgo and no HTTP stack: it only confines and
// execs. When it is missing the core re-executes its own binary instead.
package main

import "github.com/carapace-dev/carapace/core/confine"

func main() { confine.Launch() }
