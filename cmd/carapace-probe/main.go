// Command carapace-probe runs inside the agent's container when the core
// proves its promises (`carapace doctor --prove`): the core mounts this
// static binary read-only into a container built as every session's and
// runs it, instead of the agent, with the plan as its one argument (JSON,
// core/prove/boxprobe.Plan). It prints one line per observation
// (boxprobe.LinePrefix, then JSON) and exits 0; 2 on a plan it cannot
// read. The core judges what it printed.
//
// It is built for linux/amd64 and linux/arm64 by `make build`
// (bin/linux-<arch>/carapace-probe, beside the static ipc), static and
// without net/http.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/carapace-dev/carapace/core/prove/boxprobe"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: carapace-probe PLAN (JSON; the core runs it inside the agent's container for carapace doctor --prove)")
		return 2
	}
	var p boxprobe.Plan
	if err := json.Unmarshal([]byte(args[0]), &p); err != nil {
		fmt.Fprintf(stderr, "carapace-probe: the plan: %v\n", err)
		return 2
	}
	boxprobe.Run(context.Background(), p, func(o boxprobe.Observation) { fmt.Fprintln(stdout, o.Line()) })
	return 0
}
